//===- TileCostModelTest.cpp - tile choices respect every target ---------===//
#include "h20/Analysis/TileCostModel.h"

#include <gtest/gtest.h>

#include <random>

using namespace h20;

namespace {

// Property: over random attention shapes, every target's choice fits its
// shared memory (and, on GPUs, the register budget), and has a finite,
// positive estimate.
TEST(TileCostModel, ChoicesNeverExceedSharedMemory) {
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int> pick(0, 1 << 30);
  const int64_t dims[] = {64, 128, 256};
  for (int i = 0; i < 100; ++i) {
    AttentionShape s;
    s.batch = 1 + pick(rng) % 2;
    s.heads = 1 + pick(rng) % 64;
    s.seqQ = 1 + pick(rng) % 20000;
    s.seqKv = s.seqQ + pick(rng) % 4096;
    s.headDim = s.headDimV = dims[pick(rng) % 3];
    s.elementBytes = pick(rng) % 2 ? 2 : 4;
    s.causal = pick(rng) % 2;
    s.window = pick(rng) % 3 == 0 ? 1 + pick(rng) % 4096 : 0;
    for (const TargetDescription &t : knownTargets()) {
      TileChoice c = chooseAttentionTiles(s, t);
      if (c.blockM == 0)
        continue; // nothing fits (e.g. D=256 fp32 on a small-smem part)
      EXPECT_LE(c.smemBytes, t.smemPerBlock) << t.name.str() << " D=" << s.headDim;
      EXPECT_EQ(c.smemBytes, attentionSmemBytes(s, c, t));
      if (t.computeCapability && s.elementBytes == 2) {
        EXPECT_LE(attentionRegistersPerThread(s, c), 240);
      }
      EXPECT_GT(c.estUs, 0);
      EXPECT_TRUE(std::isfinite(c.estUs));
    }
  }
}

TEST(TileCostModel, BF16HeadDimsUpTo256FitEveryHopper) {
  for (int64_t d : {64, 128, 256}) {
    AttentionShape s;
    s.heads = 32;
    s.seqQ = s.seqKv = 4096;
    s.headDim = s.headDimV = d;
    for (const char *name : {"h20", "h100", "h200", "h800"})
      EXPECT_GT(chooseAttentionTiles(s, *findTarget(name)).blockM, 0) << name << " D=" << d;
  }
}

// f32 runs on the CUDA-core kernel on a GPU: every head dim up to 256 has a
// tile on every Hopper (Gemma-3's 256 at f32 once found none), and f32 is
// estimated slower than bf16 (no f32 tensor cores).
TEST(TileCostModel, F32HeadDimsUpTo256FitEveryHopper) {
  for (int64_t d : {64, 128, 256}) {
    AttentionShape s;
    s.heads = 8;
    s.seqQ = s.seqKv = 2048;
    s.headDim = s.headDimV = d;
    for (const char *name : {"h20", "h100", "h200", "h800"}) {
      s.elementBytes = 4;
      TileChoice f32 = chooseAttentionTiles(s, *findTarget(name));
      EXPECT_GT(f32.blockM, 0) << name << " D=" << d;
      EXPECT_LE(f32.blockM, 64) << name << " D=" << d;
      s.elementBytes = 2;
      EXPECT_GT(f32.estUs, chooseAttentionTiles(s, *findTarget(name)).estUs) << name;
    }
  }
}

TEST(TileCostModel, MoreWorkTakesLonger) {
  AttentionShape s;
  s.heads = 32;
  s.seqQ = s.seqKv = 4096;
  const TargetDescription &h200 = *findTarget("h200");
  double t4k = chooseAttentionTiles(s, h200).estUs;
  s.seqQ = s.seqKv = 8192;
  double t8k = chooseAttentionTiles(s, h200).estUs;
  EXPECT_GT(t8k, 3.5 * t4k); // causal attention is quadratic in S
  s.causal = false;
  EXPECT_GT(chooseAttentionTiles(s, h200).estUs, 1.7 * t8k);
  // The same shape takes longer on the H20 (148 vs 989 TFLOP/s of bf16).
  EXPECT_GT(chooseAttentionTiles(s, *findTarget("h20")).estUs,
            5 * chooseAttentionTiles(s, h200).estUs);
}

TEST(TileCostModel, DefaultPrefillChunkFillsWholeWaves) {
  // H200 / H100 / H800: 132 SMs -> 66 query tiles of 128 rows per head.
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h200")), 8448);
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h800")), 8448);
  // H20: 78 SMs -> units of 39 tiles (4992 tokens); two are nearest 8192.
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h20")), 9984);
  for (const TargetDescription &t : knownTargets()) {
    if (t.computeCapability == 0)
      continue;
    int64_t chunk = defaultPrefillChunk(t);
    EXPECT_EQ(chunk % 128, 0) << t.name.str();
    EXPECT_GT(chunk, 4096) << t.name.str();
    EXPECT_LT(chunk, 16384) << t.name.str();
    for (int64_t heads : {8, 32, 64}) // query tiles: whole waves of one CTA per SM
      EXPECT_EQ(heads * chunk / 128 % t.sms, 0) << t.name.str() << " H=" << heads;
  }
  // A goal below one unit still gives one unit.
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h200"), 128, 64), 8448);
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h200"), 64, 8192), 8448);
}

TEST(TileCostModel, MoeChunkGoalGivesEveryExpert512Rows) {
  // V4.1-Flash: 384 experts, top 6: 512 x 384 / 6 = 32768 tokens, in whole
  // waves 33792 on an H200 and 34944 (7 x 4992) on an H20.
  EXPECT_EQ(moePrefillChunkGoal(384, 6), 32768);
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h200"), 128, moePrefillChunkGoal(384, 6)), 33792);
  EXPECT_EQ(defaultPrefillChunk(*findTarget("h20"), 128, moePrefillChunkGoal(384, 6)), 34944);
  // Few experts: under the dense goal (8192), which then decides.
  EXPECT_EQ(moePrefillChunkGoal(8, 2), 2048);
  EXPECT_EQ(moePrefillChunkGoal(5, 3), 854); // 853.3 tokens, rounded up
  EXPECT_EQ(moePrefillChunkGoal(0, 6), 0);
  EXPECT_EQ(moePrefillChunkGoal(384, 0), 0);
}

} // namespace
