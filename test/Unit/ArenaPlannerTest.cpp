//===- ArenaPlannerTest.cpp - temporaries packed by lifetime -------------===//
//
// packArena's contract (ArenaPlanner.h): no two requests whose lifetimes
// overlap share a byte, unused requests take no space, and first fit in
// decreasing size reuses freed space. Checked on hand cases and on random
// lifetimes against a brute-force overlap check.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/ArenaPlanner.h"

#include <gtest/gtest.h>

#include <random>

using h20::gpu::ArenaRequest;
using h20::gpu::packArena;

namespace {

/// True when no two used requests overlap both in steps and in bytes.
bool disjoint(const std::vector<ArenaRequest> &r, const std::vector<int64_t> &off, int64_t arena) {
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].first < 0)
      continue;
    if (off[i] < 0 || off[i] + r[i].bytes > arena)
      return false;
    for (size_t j = i + 1; j < r.size(); ++j) {
      if (r[j].first < 0)
        continue;
      bool live = r[i].first <= r[j].last && r[j].first <= r[i].last;
      bool bytes = off[i] < off[j] + r[j].bytes && off[j] < off[i] + r[i].bytes;
      if (live && bytes)
        return false;
    }
  }
  return true;
}

} // namespace

TEST(ArenaPlanner, ReusesBytesOfTemporariesThatAreDead) {
  // A (steps 0-1) and C (steps 2-3) never live together: C takes A's bytes;
  // B (1-2) overlaps both.
  std::vector<ArenaRequest> r = {{512, 0, 1}, {256, 1, 2}, {512, 2, 3}};
  std::vector<int64_t> off;
  EXPECT_EQ(packArena(r, off), 768);
  EXPECT_EQ(off[0], 0);
  EXPECT_EQ(off[2], 0);
  EXPECT_EQ(off[1], 512);
}

TEST(ArenaPlanner, LargestFirstAndUnusedTakeNoSpace) {
  std::vector<ArenaRequest> r = {{256, 0, 0}, {1024, 0, 0}, {4096, -1, -1}};
  std::vector<int64_t> off;
  EXPECT_EQ(packArena(r, off), 1280);
  EXPECT_EQ(off[1], 0);   // the larger one first
  EXPECT_EQ(off[0], 1024);
  EXPECT_EQ(off[2], 0);   // never used
  EXPECT_EQ(packArena({}, off), 0);
  EXPECT_TRUE(off.empty());
}

TEST(ArenaPlanner, FillsAGapBetweenLiveTemporaries) {
  // X [0,256) and Z [512,768) live at step 5 around a freed hole at 256.
  std::vector<ArenaRequest> r = {{256, 0, 5}, {256, 0, 1}, {256, 0, 5}, {256, 4, 5}};
  std::vector<int64_t> off;
  EXPECT_EQ(packArena(r, off), 768);
  EXPECT_EQ(off[3], off[1]); // takes the dead one's place
  EXPECT_TRUE(disjoint(r, off, 768));
}

TEST(ArenaPlanner, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ArenaRequest> r(1 + rng() % 40);
    int64_t total = 0;
    for (ArenaRequest &x : r) {
      x.bytes = 256 * int64_t(1 + rng() % 16);
      x.first = int(rng() % 30) - 2; // some unused
      x.last = x.first < 0 ? -1 : x.first + int(rng() % 10);
      if (x.first < 0)
        x.first = -1;
      else
        total += x.bytes;
    }
    std::vector<int64_t> off;
    int64_t arena = packArena(r, off);
    ASSERT_TRUE(disjoint(r, off, arena)) << "trial " << trial;
    EXPECT_LE(arena, total);
    for (size_t i = 0; i < r.size(); ++i)
      EXPECT_EQ(off[i] % 256, 0);
  }
}
