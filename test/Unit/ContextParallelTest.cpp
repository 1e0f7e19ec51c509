//===- ContextParallelTest.cpp - context-parallel plans, without a GPU ---===//
//
// The pure parts of virtual context parallelism (ContextParallel.h): the
// zigzag chunk assignment, the split of a program into layer segments, the
// state rows a step writes, the ring's copy plan (replayed on the host to
// check that every copy reads rows its source already holds and that every
// rank ends with every row), and the per-rank logs of collectives.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"

#include "ProgramFixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

using namespace h20::runtime;
using json = nlohmann::json;
using namespace h20::test::decoder_fixture;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// Byte offset in the cache of (layer, k/v, head, position).
int64_t cacheByte(int64_t l, int64_t kv, int64_t h, int64_t pos) {
  return (layerOffset(l) + kv * kH * kS * kD + h * kS * kD + pos * kD) * 2;
}

} // namespace

// --- Chunk assignment -----------------------------------------------------------

TEST(ContextParallel, ZigzagAssignment) {
  CpSchedule s;
  std::string error;
  ASSERT_TRUE(planCpSchedule(2, 8, 1, s, error)) << error;
  EXPECT_EQ(s.chunkTokens, 2);
  ASSERT_EQ(s.chunks.size(), 4u);
  EXPECT_EQ(s.rankChunks[0], (std::vector<int>{0, 3}));
  EXPECT_EQ(s.rankChunks[1], (std::vector<int>{1, 2}));
  EXPECT_EQ(s.chunks[3].rank, 0);
  EXPECT_EQ(s.chunks[3].begin, 6);
  EXPECT_EQ(s.chunks[3].end, 8);
  ASSERT_EQ(s.pieces.size(), 8u);
  EXPECT_EQ(s.lastPiece, 7);
  EXPECT_EQ(s.pieceRank[s.lastPiece], 0); // the LM head runs on rank 0

  // Fixture shape: S = 1024, C = 64, N = 4: L = 128 = 2 compiled chunks.
  ASSERT_TRUE(planCpSchedule(4, 1024, 64, s, error)) << error;
  EXPECT_EQ(s.chunkTokens, 128);
  EXPECT_EQ(s.rankChunks[1], (std::vector<int>{1, 6}));
  EXPECT_EQ(s.rankPieces[1], (std::vector<int64_t>{2, 3, 12, 13}));
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    EXPECT_EQ(s.pieces[i].p0, static_cast<int64_t>(i) * 64); // the 1-GPU chunks
    EXPECT_EQ(s.pieces[i].n, 64);
  }
  // seed-dense at 32K: C = 2048, N = 8: one compiled chunk per CP chunk.
  ASSERT_TRUE(planCpSchedule(8, 32768, 2048, s, error)) << error;
  EXPECT_EQ(s.chunkTokens, 2048);
  EXPECT_EQ(s.rankPieces[7], (std::vector<int64_t>{7, 8}));
}

TEST(ContextParallel, ZigzagBalancesCausalWork) {
  for (int N : {2, 4, 8, 16}) {
    CpSchedule s;
    std::string error;
    ASSERT_TRUE(planCpSchedule(N, 2 * N * 128, 128, s, error)) << error;
    // Causal attention work of a chunk ~ sum over its queries of the keys
    // they see; every rank gets the same.
    std::set<int64_t> work;
    std::vector<int> owned(2 * N, 0);
    for (int r = 0; r < N; ++r) {
      int64_t w = 0;
      for (int c : s.rankChunks[r]) {
        ++owned[c];
        EXPECT_EQ(s.chunks[c].rank, r);
        for (int64_t q = s.chunks[c].begin; q < s.chunks[c].end; ++q)
          w += q + 1;
      }
      work.insert(w);
    }
    EXPECT_EQ(work.size(), 1u) << "N = " << N;
    for (int c = 0; c < 2 * N; ++c)
      EXPECT_EQ(owned[c], 1) << "chunk " << c;
  }
}

TEST(ContextParallel, AssignmentRejectsBadShapes) {
  CpSchedule s;
  std::string error;
  for (int N : {0, 1, 3, 6, 2048}) {
    EXPECT_FALSE(planCpSchedule(N, 4096, 64, s, error)) << N;
    EXPECT_TRUE(contains(error, "is not a power of two")) << error;
  }
  EXPECT_FALSE(planCpSchedule(4, 1004, 1, s, error));
  EXPECT_TRUE(contains(error, "do not split into 2N = 8 equal")) << error;
  EXPECT_FALSE(planCpSchedule(4, 0, 1, s, error));
  // N = 8: L = 1024 / 16 = 64 = C; N = 16: L = 32, not a multiple of 64.
  EXPECT_TRUE(planCpSchedule(8, 1024, 64, s, error)) << error;
  EXPECT_FALSE(planCpSchedule(16, 1024, 64, s, error));
  EXPECT_TRUE(contains(error, "32 tokens")) << error;
  EXPECT_TRUE(contains(error, "S must be a multiple of 2048")) << error;
  EXPECT_FALSE(planCpSchedule(2, 4096, 0, s, error));
}

// --- Layer segments -------------------------------------------------------------

TEST(ContextParallel, SplitsAtAttentionSteps) {
  GpuProgram p;
  ASSERT_EQ(parse(program(), p), "");
  std::vector<CpSegment> segs;
  std::string error;
  ASSERT_TRUE(splitLayerSegments(p, segs, error)) << error;
  // Steps: 0 embed; layer 0: 1 qkv, 2 kwrite, 3 vwrite, 4 attention, 5 post;
  // layer 1: 6..10 (attention 9); 11 lm head.
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[0].begin, 0u);
  EXPECT_EQ(segs[0].end, 5u);
  EXPECT_EQ(segs[0].attention, 4);
  EXPECT_EQ(segs[0].stateWriters, (std::vector<size_t>{2, 3}));
  EXPECT_EQ(segs[1].begin, 5u);
  EXPECT_EQ(segs[1].end, 10u);
  EXPECT_EQ(segs[1].attention, 9);
  EXPECT_EQ(segs[1].stateWriters, (std::vector<size_t>{7, 8}));
  EXPECT_EQ(segs[2].begin, 10u);
  EXPECT_EQ(segs[2].end, 12u);
  EXPECT_EQ(segs[2].attention, -1);
  EXPECT_TRUE(segs[2].stateWriters.empty());
  // Every step in exactly one segment, in order.
  size_t at = 0;
  for (const CpSegment &s : segs) {
    EXPECT_EQ(s.begin, at);
    at = s.end;
  }
  EXPECT_EQ(at, p.steps.size());
}

TEST(ContextParallel, SplitRejectsProgramsItCannotRun) {
  std::vector<CpSegment> segs;
  std::string error;
  GpuProgram p;
  {
    json g = program();
    g["chunking"] = nullptr;
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "chunked program")) << error;
  }
  {
    json g = program();
    json steps = json::array();
    for (const json &s : g["steps"])
      if (s.value("role", "") != "attention")
        steps.push_back(s);
    g["steps"] = steps;
    g.erase("layers");
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "declares no layers")) << error;
  }
  {
    json g = program(); // attention steps, but no declared layers
    g.erase("layers");
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "declares no layers")) << error;
  }
  {
    json g = program(); // K and V from a temp, not the cache
    json &fields = g["steps"][4]["args"][0]["struct"]["fields"];
    const json strides = {0, kC * kD, kD, 1};
    for (int f : {5, 10}) { // the K and V pointers (H20AttnParams k, v) and their strides
      fields[f]["pointer"] = {{"buffer", 5}, {"offset", 0}, {"sizes", {1, kH, kC, kD}},
                              {"strides", strides}};
      for (int d = 0; d < 4; ++d)
        fields[f + 1 + d]["i64"] = strides[d];
    }
    fields[24]["i64"] = kC; // skv
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "step 4 (launch): its K/V are not in a state buffer")) << error;
  }
  {
    json g = program(); // V from the cache but K from a temp
    json &fields = g["steps"][4]["args"][0]["struct"]["fields"];
    const json strides = {0, kC * kD, kD, 1};
    fields[5]["pointer"] = {{"buffer", 5}, {"offset", 0}, {"sizes", {1, kH, kC, kD}},
                            {"strides", strides}};
    for (int d = 0; d < 4; ++d)
      fields[6 + d]["i64"] = strides[d];
    fields[10]["pointer"]["sizes"][2] = kC; // V's rows: skv = C
    fields[24]["i64"] = kC;
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "step 4 (launch): its K/V are not in a state buffer")) << error;
  }
  {
    json g = program(); // an output written in layer 0
    g["steps"][5]["args"][1] = memref(1, 0, {8}, {1});
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "step 5 (launch): writes an output buffer before")) << error;
  }
  {
    json g = program(); // the tail touches the cache
    g["steps"].push_back({{"op", "memset"}, {"buffer", 3}, {"offset_bytes", 0}, {"bytes", 16},
                          {"value", 0}});
    ASSERT_EQ(parse(g, p), "");
    EXPECT_FALSE(splitLayerSegments(p, segs, error));
    EXPECT_TRUE(contains(error, "step 12 (memset): references the KV cache after")) << error;
  }
}

// --- State rows a step writes -----------------------------------------------------

TEST(ContextParallel, StateWriteRunsOfKvWrites) {
  GpuProgram p;
  ASSERT_EQ(parse(program(), p), "");
  std::vector<StateRun> runs;
  std::string error;
  // K write of layer 1 (step 7) at p0 = 8: one run per head, C * D
  // elements of 2 bytes.
  ASSERT_TRUE(stateWriteRuns(p, 7, {8, kC}, runs, error)) << error;
  ASSERT_EQ(runs.size(), 2u);
  for (int64_t h = 0; h < kH; ++h) {
    EXPECT_EQ(runs[h].buffer, 3);
    EXPECT_EQ(runs[h].offsetBytes, cacheByte(1, 0, h, 8));
    EXPECT_EQ(runs[h].bytes, kC * kD * 2);
  }
  // Steps that do not touch the cache write no state rows.
  runs.clear();
  ASSERT_TRUE(stateWriteRuns(p, 1, {8, kC}, runs, error)) << error;
  EXPECT_TRUE(runs.empty());
  // A view whose inner dim is strided breaks into elements; a memset and a
  // copy into the cache are one run each.
  json g = program();
  g["steps"][2]["args"][1] = memref(3, {{"p0", 1}}, {3, 2}, {2 * kS, kS});
  g["steps"].push_back({{"op", "memset"}, {"buffer", 3}, {"offset_bytes", {{"p0", 2}}},
                        {"bytes", 6}, {"value", 0}});
  g["steps"].push_back({{"op", "copy"}, {"src", 4}, {"src_offset_bytes", 0}, {"dst", 3},
                        {"dst_offset_bytes", 100}, {"bytes", 8}});
  ASSERT_EQ(parse(g, p), "");
  runs.clear();
  ASSERT_TRUE(stateWriteRuns(p, 2, {5, kC}, runs, error)) << error;
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0].offsetBytes, 5 * 2);
  EXPECT_EQ(runs[1].offsetBytes, (5 + kS) * 2);
  EXPECT_EQ(runs[2].offsetBytes, (5 + 2 * kS) * 2);
  EXPECT_EQ(runs[5].offsetBytes, (5 + 5 * kS) * 2);
  EXPECT_EQ(runs[5].bytes, 2);
  runs.clear();
  ASSERT_TRUE(stateWriteRuns(p, 12, {5, kC}, runs, error)) << error;
  ASSERT_TRUE(stateWriteRuns(p, 13, {5, kC}, runs, error)) << error;
  EXPECT_EQ(runs, (std::vector<StateRun>{{3, 10, 6}, {3, 100, 8}}));
  // The attention reads K and V from the cache ("written": false views of
  // its struct): no rows. A struct view of the cache that the kernel may
  // write counts, row by row.
  ASSERT_EQ(parse(program(), p), "");
  runs.clear();
  ASSERT_TRUE(stateWriteRuns(p, 4, {8, kC}, runs, error)) << error;
  EXPECT_TRUE(runs.empty());
  g = program();
  json &k = g["steps"][4]["args"][0]["struct"]["fields"][5]; // K, as if written
  k.erase("kv");
  k["written"] = true;
  ASSERT_EQ(parse(g, p), "");
  ASSERT_TRUE(stateWriteRuns(p, 4, {8, kC}, runs, error)) << error;
  // K [1, kH, skv = C + p0, kD] of layer 0: one contiguous run per head.
  ASSERT_EQ(runs.size(), static_cast<size_t>(kH));
  EXPECT_EQ(runs[0], (StateRun{3, 0, (kC + 8) * kD * 2}));
  EXPECT_EQ(runs[1], (StateRun{3, kS * kD * 2, (kC + 8) * kD * 2}));
}

TEST(ContextParallel, MergesRuns) {
  std::vector<StateRun> runs = {{3, 100, 10}, {3, 0, 50}, {3, 50, 10}, {4, 0, 5},
                                {3, 105, 20}, {3, 200, 0}, {3, 300, 1}};
  mergeStateRuns(runs);
  EXPECT_EQ(runs, (std::vector<StateRun>{{3, 0, 60}, {3, 100, 25}, {3, 300, 1}, {4, 0, 5}}));
}

// --- The ring ---------------------------------------------------------------------

TEST(ContextParallel, CopyPlanPerLayer) {
  GpuProgram p;
  ASSERT_EQ(parse(program(), p), "");
  for (int N : {2, 4, 8}) {
    SCOPED_TRACE("N = " + std::to_string(N));
    CpPlan plan;
    std::string error;
    ASSERT_TRUE(planContextParallel(p, N, kS, plan, error)) << error;
    ASSERT_EQ(plan.segments.size(), 3u);
    ASSERT_EQ(plan.ring.blocks.size(), 2u); // one ring per layer, none for the tail
    int64_t L = kS / (2 * N);
    for (int64_t l = 0; l < kLayers; ++l)
      for (int r = 0; r < N; ++r) {
        // Rank r's block in layer l: K and V rows of its two chunks, per
        // head one run per chunk (its compiled chunks merge).
        std::vector<StateRun> want;
        for (int c : {r, 2 * N - 1 - r})
          for (int64_t kv = 0; kv < 2; ++kv)
            for (int64_t h = 0; h < kH; ++h)
              want.push_back({3, cacheByte(l, kv, h, c * L), L * kD * 2});
        mergeStateRuns(want);
        EXPECT_EQ(plan.ring.blocks[l][r], want) << "layer " << l << " rank " << r;
      }
    // Traffic: N - 1 steps of N sends; every rank receives every other
    // rank's block once per layer.
    int64_t block = 2 * L * 2 * kH * kD * 2;
    ASSERT_EQ(plan.ring.layers.size(), 2u);
    for (const CpLayerTraffic &t : plan.ring.layers) {
      EXPECT_EQ(t.steps, N - 1);
      EXPECT_EQ(t.sends, N * (N - 1));
      EXPECT_EQ(t.bytes, N * (N - 1) * block);
    }
  }
}

TEST(ContextParallel, RingOrderDeliversEveryRowFromAHolder) {
  GpuProgram p;
  ASSERT_EQ(parse(program(), p), "");
  for (int N : {2, 4, 8}) {
    SCOPED_TRACE("N = " + std::to_string(N));
    CpPlan plan;
    std::string error;
    ASSERT_TRUE(planContextParallel(p, N, kS, plan, error)) << error;
    // Replay the copies on the host: which blocks each rank holds. A copy
    // must read a block its source already holds (got at an earlier step),
    // from its ring predecessor, and must be the block that started k ranks
    // back.
    for (size_t l = 0; l < plan.ring.blocks.size(); ++l) {
      std::vector<std::set<int>> holds(N);
      for (int r = 0; r < N; ++r)
        holds[r].insert(r);
      int step = 0;
      std::vector<std::set<int>> atStepStart = holds;
      for (const CpCopy &c : plan.ring.copies) {
        if (c.layer != static_cast<int>(l))
          continue;
        if (c.step != step) {
          EXPECT_EQ(c.step, step + 1);
          step = c.step;
          atStepStart = holds;
        }
        EXPECT_EQ(c.from, (c.to - 1 + N) % N);
        EXPECT_EQ(c.origin, (c.to - c.step + N) % N);
        EXPECT_TRUE(atStepStart[c.from].count(c.origin)) << "step " << c.step << ": rank "
                                                          << c.from << " lacks block " << c.origin;
        holds[c.to].insert(c.origin);
        // The copied run is a run of the origin's block.
        const auto &blk = plan.ring.blocks[l][c.origin];
        EXPECT_NE(std::find(blk.begin(), blk.end(), c.run), blk.end());
      }
      EXPECT_EQ(step, N - 1);
      for (int r = 0; r < N; ++r)
        EXPECT_EQ(holds[r].size(), static_cast<size_t>(N)) << "rank " << r;
    }
  }
}

TEST(ContextParallel, RingRejectsOverlappingBlocks) {
  CpRingPlan plan;
  std::string error;
  std::vector<std::vector<std::vector<StateRun>>> written = {{{{3, 0, 64}}, {{3, 32, 64}}}};
  EXPECT_FALSE(planCpRing(2, written, plan, error));
  EXPECT_TRUE(contains(error, "ranks 0 and 1 both write bytes 32")) << error;
  written = {{{{3, 0, 64}}, {{3, 64, 64}}}};
  EXPECT_TRUE(planCpRing(2, written, plan, error)) << error;
}

// --- Collectives ------------------------------------------------------------------

TEST(ContextParallel, EveryRankIssuesTheSameCollectives) {
  GpuProgram p;
  ASSERT_EQ(parse(program(), p), "");
  for (int N : {2, 4, 8}) {
    SCOPED_TRACE("N = " + std::to_string(N));
    CpPlan plan;
    std::string error;
    ASSERT_TRUE(planContextParallel(p, N, kS, plan, error)) << error;
    const auto &log = plan.ring.rankLog;
    ASSERT_EQ(log.size(), static_cast<size_t>(N));
    for (int r = 0; r < N; ++r) {
      ASSERT_EQ(log[r].size(), static_cast<size_t>(kLayers * (N - 1)));
      // The same (layer, step) sequence on every rank, sends to r + 1,
      // receives from r - 1, equal byte counts.
      for (size_t i = 0; i < log[r].size(); ++i) {
        EXPECT_EQ(log[r][i].layer, log[0][i].layer);
        EXPECT_EQ(log[r][i].step, log[0][i].step);
        EXPECT_EQ(log[r][i].sendTo, (r + 1) % N);
        EXPECT_EQ(log[r][i].recvFrom, (r - 1 + N) % N);
        EXPECT_EQ(log[r][i].sendBytes, log[0][i].sendBytes);
      }
    }
    std::string why;
    EXPECT_TRUE(collectivesMatch(log, why)) << why;

    // Tampered logs are caught: one rank skips a collective, one is a step
    // ahead, one sends another block or another byte count.
    auto bad = log;
    bad[N - 1].pop_back();
    EXPECT_FALSE(collectivesMatch(bad, why));
    EXPECT_TRUE(contains(why, "rank " + std::to_string(N - 1) + " issues")) << why;
    bad = log;
    bad[1][0].step = 2;
    EXPECT_FALSE(collectivesMatch(bad, why));
    EXPECT_TRUE(contains(why, "collective 0: rank 1 is at layer 0 step 2")) << why;
    bad = log;
    bad[0][0].sendBytes += 2;
    EXPECT_FALSE(collectivesMatch(bad, why));
    EXPECT_TRUE(contains(why, "rank 0 sends")) << why;
    bad = log;
    bad[0][0].sendOrigin = (bad[0][0].sendOrigin + 1) % N;
    EXPECT_FALSE(collectivesMatch(bad, why));
    bad = log;
    bad[0][0].sendTo = N;
    EXPECT_FALSE(collectivesMatch(bad, why));
  }
}

TEST(ContextParallel, PlanRejectsPromptsThatDoNotSplit) {
  GpuProgram p;
  ASSERT_EQ(parse(program(), p), "");
  CpPlan plan;
  std::string error;
  EXPECT_FALSE(planContextParallel(p, 4, 60, plan, error)); // 60 % 8 != 0
  EXPECT_TRUE(contains(error, "S must be a multiple of 32")) << error;
  EXPECT_FALSE(planContextParallel(p, 16, 64, plan, error)); // L = 2 < C = 4
  EXPECT_TRUE(contains(error, "not a multiple of the artifact's 4-token compiled chunk")) << error;
  EXPECT_FALSE(planContextParallel(p, 3, 48, plan, error));
  EXPECT_TRUE(planContextParallel(p, 8, 64, plan, error)) << error;
}

// An all_reduce (with one tensor-parallel rank, a device copy) into the KV
// cache counts as a write of its destination rows, like a copy; its source
// buffer is referenced like any view (segments split the same way).
TEST(ContextParallel, AllReduceWritesItsDestination) {
  json g = program();
  // After layer 0's K write (step 2): sum the kv temp into the V rows.
  json step = {{"op", "all_reduce"}, {"dtype", "bf16"}, {"src", 5}, {"src_offset_bytes", 0},
               {"dst", 3}, {"dst_offset_bytes", {{"c", cacheByte(0, 1, 0, 0)}, {"p0", 2 * kD}}},
               {"bytes", kC * kD * 2}};
  g["steps"].insert(g["steps"].begin() + 3, step);
  // The compiler would declare the layers of the new step list.
  g["layers"][0]["attention_step"] = 5;
  g["layers"][1] = {{"layer", 1}, {"first_step", 6}, {"attention_step", 10}};
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  std::vector<CpSegment> segs;
  std::string error;
  ASSERT_TRUE(splitLayerSegments(p, segs, error)) << error;
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_NE(std::find(segs[0].stateWriters.begin(), segs[0].stateWriters.end(), 3u),
            segs[0].stateWriters.end());
  std::vector<StateRun> runs;
  ASSERT_TRUE(stateWriteRuns(p, 3, {8, kC}, runs, error)) << error;
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], (StateRun{3, cacheByte(0, 1, 0, 8), kC * kD * 2}));
}
