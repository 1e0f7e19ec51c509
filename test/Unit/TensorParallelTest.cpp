//===- TensorParallelTest.cpp - tensor parallelism, without a GPU --------===//
//
// The pure parts of tensor parallelism (TensorParallel.h, Manifest.h): the
// manifest's "parallel" object and weight shards, the slice of a stored
// weight each rank loads and the reads that stream it, the host sum of a
// virtual all-reduce and the rendezvous of the rank threads, the per-rank
// all-reduce logs (also through the launcher's rank-log files), the GPU
// count check, and NCCL's dtype mapping.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Parallel/NcclComm.h"
#include "h20/Runtime/Parallel/RankLauncher.h"
#include "h20/Runtime/Parallel/TensorParallel.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>
#include <unistd.h>

using namespace h20::runtime;
using json = nlohmann::json;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// A tensor-parallel manifest (T = 2): w0 [4, 6] float32 sharded on axis 1
/// ([4, 3] per rank, starts 0 and 3), w1 [6] replicated (no shard).
json tpManifest() {
  return json{
      {"format", "h20-artifact"},
      {"target", "h200"},
      {"parallel",
       {{"gpus", 2},
        {"plan", "tensor"},
        {"tensor_parallel", 2},
        {"chosen_by", "cost model"},
        {"predicted_ms", {{"context", 12.5}, {"tensor", nullptr}}},
        {"tokens", 8192},
        {"future_key", "ignored"}}},
      {"inputs", {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}}},
      {"outputs", {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {1, 1, 8}}}}},
      {"weights",
       {{{"name", "w0"}, {"file", "m.bin"}, {"dtype", "float32"}, {"shape", {4, 3}},
         {"offset", 0}, {"length", 96},
         {"shard", {{"axis", 1}, {"full_shape", {4, 6}}, {"starts", {0, 3}}}}},
        {{"name", "w1"}, {"file", "m.bin"}, {"dtype", "float32"}, {"shape", {6}},
         {"offset", 96}, {"length", 24}}}},
      {"blobs", json::array()},
  };
}

std::string parseError(const json &j) {
  Manifest m;
  std::string error;
  return parseManifest(j.dump(), m, error) ? "(accepted)" : error;
}

WeightSpec sharded(std::vector<int64_t> shape, int axis, std::vector<int64_t> full,
                   std::vector<int64_t> starts) {
  WeightSpec w;
  w.name = "w";
  w.dtype = "float32";
  w.shape = std::move(shape);
  w.shard = WeightShard{axis, std::move(full), std::move(starts)};
  return w;
}

/// The slice of rank `rank`, element by element from the definition:
/// elements of `full` whose index along `axis` lies in [start, start + size).
std::vector<int> referenceSlice(const std::vector<int64_t> &full, int axis, int64_t start,
                                int64_t size) {
  int64_t count = std::accumulate(full.begin(), full.end(), int64_t(1), std::multiplies<>());
  std::vector<int> out;
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, idx = 0;
    for (int d = static_cast<int>(full.size()) - 1; d >= 0; --d) {
      if (d == axis)
        idx = rest % full[d];
      rest /= full[d];
    }
    if (idx >= start && idx < start + size)
      out.push_back(static_cast<int>(e));
  }
  return out;
}

std::vector<int> iota(int64_t n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<int> extract(const WeightSpec &w, int rank) {
  ShardSlice s;
  std::string error;
  EXPECT_TRUE(shardSlice(w, rank, s, error)) << error;
  std::vector<int> full = iota(s.fullElements), out(static_cast<size_t>(s.deviceElements()));
  extractShard(s, full.data(), sizeof(int), out.data());
  return out;
}

} // namespace

// --- The "parallel" object ------------------------------------------------------

TEST(TensorParallelManifest, ParsesThePlan) {
  Manifest m;
  std::string error;
  ASSERT_TRUE(parseManifest(tpManifest().dump(), m, error)) << error;
  ASSERT_TRUE(m.parallel.has_value());
  EXPECT_EQ(m.parallel->gpus, 2);
  EXPECT_EQ(m.parallel->plan, "tensor");
  EXPECT_EQ(m.tensorParallel(), 2);
  EXPECT_EQ(m.parallel->chosenBy, "cost model");
  ASSERT_TRUE(m.parallel->predictedContextMs.has_value());
  EXPECT_DOUBLE_EQ(*m.parallel->predictedContextMs, 12.5);
  EXPECT_FALSE(m.parallel->predictedTensorMs.has_value()); // null
  EXPECT_EQ(m.parallel->tokens, 8192);
  EXPECT_TRUE(contains(m.parallel->json, "future_key")); // kept for the report
  ASSERT_TRUE(m.weights[0].shard.has_value());
  EXPECT_EQ(m.weights[0].shard->axis, 1);
  EXPECT_EQ(m.weights[0].shard->fullShape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(m.weights[0].shard->starts, (std::vector<int64_t>{0, 3}));
  EXPECT_FALSE(m.weights[1].shard.has_value());

  // Absent: one GPU. A context plan: T = 1 on N GPUs.
  json j = tpManifest();
  j.erase("parallel");
  j["weights"][0].erase("shard");
  j["weights"][0]["shape"] = {4, 6};
  ASSERT_TRUE(parseManifest(j.dump(), m, error)) << error;
  EXPECT_FALSE(m.parallel.has_value());
  EXPECT_EQ(m.tensorParallel(), 1);
  j["parallel"] = {{"gpus", 8}, {"plan", "context"}, {"tensor_parallel", 1}, {"chosen_by", "user"}};
  ASSERT_TRUE(parseManifest(j.dump(), m, error)) << error;
  EXPECT_EQ(m.parallel->gpus, 8);
  EXPECT_EQ(m.tensorParallel(), 1);
  EXPECT_FALSE(m.parallel->tokens.has_value());
}

TEST(TensorParallelManifest, RejectsBadPlans) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *message;
  };
  const Case cases[] = {
      {"unknown plan", [](json &p) { p["plan"] = "pipeline"; },
       "parallel plan 'pipeline' is neither \"context\" nor \"tensor\""},
      {"tensor with T != N", [](json &p) { p["tensor_parallel"] = 4; },
       "plan \"tensor\" needs tensor_parallel == gpus, got 4 and 2"},
      {"context with T > 1", [](json &p) { p["plan"] = "context"; },
       "plan \"context\" needs tensor_parallel 1, got 2"},
      {"no gpus", [](json &p) { p.erase("gpus"); }, "parallel has no \"gpus\""},
      {"zero gpus", [](json &p) { p["gpus"] = 0; }, "parallel gpus is 0, outside [1, 1024]"},
      {"gpus not an integer", [](json &p) { p["gpus"] = 2.5; }, "parallel gpus must be an integer"},
      {"no tensor_parallel", [](json &p) { p.erase("tensor_parallel"); },
       "parallel has no \"tensor_parallel\""},
      {"chosen_by", [](json &p) { p["chosen_by"] = "oracle"; },
       "chosen_by 'oracle' is neither \"cost model\" nor \"user\""},
      {"predicted_ms a string", [](json &p) { p["predicted_ms"]["tensor"] = "fast"; },
       "parallel predicted_ms tensor must be a number or null"},
      {"predicted_ms not an object", [](json &p) { p["predicted_ms"] = 3; },
       "parallel predicted_ms must be an object"},
      {"negative tokens", [](json &p) { p["tokens"] = -1; }, "parallel tokens is -1"},
      {"not an object", [](json &p) { p = json::array(); }, "parallel must be an object"},
  };
  for (const Case &c : cases) {
    json j = tpManifest();
    c.mutate(j["parallel"]);
    std::string e = parseError(j);
    EXPECT_TRUE(contains(e, c.message)) << c.name << ": " << e;
  }
}

TEST(TensorParallelManifest, RejectsBadShards) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *message;
  };
  const Case cases[] = {
      {"axis out of range", [](json &w) { w["shard"]["axis"] = 2; },
       "weight 0 ('w0') shard axis is 2, outside [0, 1]"},
      {"full_shape rank", [](json &w) { w["shard"]["full_shape"] = {4, 6, 1}; },
       "weight 0 ('w0') shard full_shape has rank 3, the weight's shape 2"},
      {"other dim differs", [](json &w) { w["shard"]["full_shape"] = {5, 6}; },
       "shard full_shape dim 0 is 5 but the weight's shape has 4 (only axis 1 may differ)"},
      {"shard larger than full", [](json &w) { w["shape"] = {4, 7}; },
       "the shard's 7 elements along axis 1 exceed full_shape's 6"},
      {"start past the end", [](json &w) { w["shard"]["starts"] = {0, 4}; },
       "weight 0 ('w0') shard starts[1] is 4: the slice [4, 7) along axis 1 ends past "
       "full_shape's 6"},
      {"negative start", [](json &w) { w["shard"]["starts"] = {-1, 3}; },
       "shard starts[0] is -1, outside"},
      {"starts per rank", [](json &w) { w["shard"]["starts"] = {0, 3, 3}; },
       "shard starts has 3 entries; the artifact has 2 tensor-parallel rank(s)"},
      {"missing starts", [](json &w) { w["shard"].erase("starts"); },
       "shard needs \"axis\", \"full_shape\" and \"starts\""},
      {"not an object", [](json &w) { w["shard"] = 1; }, "shard must be an object"},
      {"scalar", [](json &w) {
         w["shape"] = json::array();
         w["shard"]["full_shape"] = json::array();
       }, "a scalar cannot be sharded"},
  };
  for (const Case &c : cases) {
    json j = tpManifest();
    c.mutate(j["weights"][0]);
    std::string e = parseError(j);
    EXPECT_TRUE(contains(e, c.message)) << c.name << ": " << e;
  }
  // Without "parallel" there is one rank: one start.
  json j = tpManifest();
  j.erase("parallel");
  EXPECT_TRUE(contains(parseError(j), "shard starts has 2 entries; the artifact has 1"))
      << parseError(j);
  j["weights"][0]["shard"]["starts"] = {3};
  EXPECT_EQ(parseError(j), "(accepted)");
}

// --- Slices ----------------------------------------------------------------------

TEST(TensorParallelSlice, Columns) {
  // [4, 6] on axis 1, start 2, size 3: rows of 3 at 2, 8, 14, 20.
  WeightSpec w = sharded({4, 3}, 1, {4, 6}, {2, 3});
  ShardSlice s;
  std::string error;
  ASSERT_TRUE(shardSlice(w, 0, s, error)) << error;
  EXPECT_EQ(s.outer, 4);
  EXPECT_EQ(s.runElements, 3);
  EXPECT_EQ(s.strideElements, 6);
  EXPECT_EQ(s.firstElement, 2);
  EXPECT_EQ(s.fullElements, 24);
  EXPECT_EQ(s.deviceElements(), 12);
  EXPECT_EQ(s.runStart(3), 20);
  EXPECT_EQ(extract(w, 0), (std::vector<int>{2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22}));
  EXPECT_EQ(extract(w, 1), referenceSlice({4, 6}, 1, 3, 3));
}

TEST(TensorParallelSlice, RowsAreOneRun) {
  // Axis 0: one contiguous run.
  WeightSpec w = sharded({2, 6}, 0, {4, 6}, {0, 2});
  ShardSlice s;
  std::string error;
  ASSERT_TRUE(shardSlice(w, 1, s, error)) << error;
  EXPECT_EQ(s.outer, 1);
  EXPECT_EQ(s.runElements, 12);
  EXPECT_EQ(s.firstElement, 12);
  EXPECT_EQ(extract(w, 1), (std::vector<int>{12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(extract(w, 0), referenceSlice({4, 6}, 0, 0, 2));
}

TEST(TensorParallelSlice, ThreeDimensionsAndReplication) {
  // [2, 8, 3] on axis 1, 4 per rank; ranks 2 and 3 replicate ranks 0 and 1.
  WeightSpec w = sharded({2, 4, 3}, 1, {2, 8, 3}, {0, 4, 0, 4});
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(extract(w, r), referenceSlice({2, 8, 3}, 1, r % 2 ? 4 : 0, 4)) << "rank " << r;
  EXPECT_EQ(extract(w, 2), extract(w, 0));
  // The innermost axis of a 3-D tensor.
  WeightSpec v = sharded({2, 3, 2}, 2, {2, 3, 5}, {3});
  EXPECT_EQ(extract(v, 0), referenceSlice({2, 3, 5}, 2, 3, 2));
  // No shard: everything, one run.
  WeightSpec u;
  u.name = "u";
  u.shape = {3, 5};
  EXPECT_EQ(extract(u, 0), iota(15));
  ShardSlice s;
  std::string error;
  EXPECT_FALSE(shardSlice(w, 4, s, error));
  EXPECT_TRUE(contains(error, "weight 'w' is sharded over 4 tensor-parallel ranks; rank 4"))
      << error;
}

TEST(TensorParallelSlice, ReadsCoverTheSliceWithinTheStagingSize) {
  // Every read plan, replayed on the host, gives the slice; no read spans
  // or delivers more than the limit.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> full(static_cast<size_t>(rank));
    for (int64_t &d : full)
      d = 1 + static_cast<int64_t>(rng() % 7);
    int axis = static_cast<int>(rng() % rank);
    std::vector<int64_t> shape = full;
    shape[axis] = 1 + static_cast<int64_t>(rng() % full[axis]);
    int64_t start = static_cast<int64_t>(rng() % (full[axis] - shape[axis] + 1));
    WeightSpec w = sharded(shape, axis, full, {start});
    ShardSlice s;
    std::string error;
    ASSERT_TRUE(shardSlice(w, 0, s, error)) << error;
    const int64_t maxElements = 1 + static_cast<int64_t>(rng() % 40);
    std::vector<int> fullData = iota(s.fullElements), got(s.deviceElements(), -1);
    int64_t delivered = 0;
    for (const ShardRead &r : planShardReads(s, maxElements)) {
      ASSERT_LE(r.spanElements(), std::max(maxElements, s.runElements)) << "trial " << trial;
      ASSERT_LE(r.rows * r.runElements, maxElements) << "trial " << trial;
      ASSERT_LE(r.fileElement + r.spanElements(), s.fullElements);
      for (int64_t row = 0; row < r.rows; ++row)
        for (int64_t e = 0; e < r.runElements; ++e)
          got[r.deviceElement + row * r.runElements + e] =
              fullData[r.fileElement + row * r.strideElements + e];
      delivered += r.rows * r.runElements;
    }
    EXPECT_EQ(delivered, s.deviceElements());
    EXPECT_EQ(got, referenceSlice(full, axis, start, shape[axis])) << "trial " << trial;
  }
  // Small runs are gathered several per read: [64, 8] on axis 1, 2 columns.
  ShardSlice s;
  std::string error;
  ASSERT_TRUE(shardSlice(sharded({64, 2}, 1, {64, 8}, {6}), 0, s, error));
  std::vector<ShardRead> reads = planShardReads(s, 128);
  ASSERT_EQ(reads.size(), 4u); // 16 rows of stride 8 per read
  EXPECT_EQ(reads[1].rows, 16);
  EXPECT_EQ(reads[1].fileElement, 16 * 8 + 6);
  EXPECT_EQ(reads[1].deviceElement, 32);
}

// --- All-reduce ----------------------------------------------------------------------

TEST(TensorParallelAllReduce, SumsInFloat32AndRoundsOnce) {
  float a[3] = {1.0f, -2.5f, 1e-3f}, b[3] = {0.5f, 2.5f, 2e-3f}, c[3] = {0.25f, 1.0f, 0.0f}, out[3];
  ASSERT_TRUE(reduceSumHost({a, b, c}, "float32", 3, out));
  EXPECT_FLOAT_EQ(out[0], 1.75f);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
  EXPECT_FLOAT_EQ(out[2], (1e-3f + 2e-3f) + 0.0f);
  // bfloat16: 256 + 1 + 1 = 258 exactly in float32 (a bfloat16); summed in
  // bfloat16 pairwise it would be 256 (256 + 1 rounds to 256 twice).
  uint16_t x[1] = {floatToBfloat16(256.0f)}, y[1] = {floatToBfloat16(1.0f)}, z[1] = {y[0]}, o[1];
  ASSERT_TRUE(reduceSumHost({x, y, z}, "bfloat16", 1, o));
  EXPECT_EQ(bfloat16ToFloat(o[0]), 258.0f);
  uint16_t h1[2] = {floatToHalf(1.5f), floatToHalf(-1.0f)}, h2[2] = {floatToHalf(0.25f), floatToHalf(4.0f)};
  ASSERT_TRUE(reduceSumHost({h1, h2}, "float16", 2, h1)); // in place
  EXPECT_EQ(halfToFloat(h1[0]), 1.75f);
  EXPECT_EQ(halfToFloat(h1[1]), 3.0f);
  EXPECT_FALSE(reduceSumHost({a}, "int32", 1, out));
}

TEST(TensorParallelAllReduce, RankThreadsMeet) {
  const int T = 3, rounds = 20;
  HostAllReduceGroup group(T);
  std::vector<std::vector<float>> results(T);
  std::vector<std::string> errors(T);
  std::vector<std::thread> threads;
  for (int r = 0; r < T; ++r)
    threads.emplace_back([&, r] {
      for (int k = 0; k < rounds; ++k) {
        std::vector<float> v = {float(r + 1), float(k), float(10 * r)};
        if (!group.allReduce(r, {k, 0, 12, "float32"}, v.data(), v.data(), errors[r]))
          return;
        results[r].insert(results[r].end(), v.begin(), v.end());
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < T; ++r) {
    EXPECT_EQ(errors[r], "");
    ASSERT_EQ(results[r].size(), size_t(3 * rounds));
    for (int k = 0; k < rounds; ++k) {
      EXPECT_EQ(results[r][3 * k + 0], 6.0f);
      EXPECT_EQ(results[r][3 * k + 1], 3.0f * k);
      EXPECT_EQ(results[r][3 * k + 2], 30.0f);
    }
  }
  EXPECT_FALSE(group.aborted());
}

TEST(TensorParallelAllReduce, MismatchAndAbortEndTheGroup) {
  {
    // Rank 1 reduces other bytes: every rank fails, naming the difference.
    HostAllReduceGroup group(2);
    std::string e0, e1;
    float a[2] = {1, 2}, b[2] = {3, 4};
    std::thread t([&] { group.allReduce(1, {5, 0, 4, "float32"}, b, b, e1); });
    EXPECT_FALSE(group.allReduce(0, {5, 0, 8, "float32"}, a, a, e0));
    t.join();
    EXPECT_TRUE(contains(e0 + e1, "rank 1 vs rank 0: bytes 4 vs 8")) << e0 << " / " << e1;
    EXPECT_TRUE(group.aborted());
  }
  {
    // Rank 1 fails before its all-reduce: rank 0 does not wait for ever.
    HostAllReduceGroup group(2);
    std::string e0;
    float a[1] = {1};
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      group.abort("rank 1 failed: out of memory");
    });
    EXPECT_FALSE(group.allReduce(0, {0, 0, 4, "float32"}, a, a, e0));
    t.join();
    EXPECT_EQ(e0, "rank 1 failed: out of memory");
    std::string later;
    EXPECT_FALSE(group.allReduce(1, {0, 0, 4, "float32"}, a, a, later));
    EXPECT_EQ(later, e0);
  }
  HostAllReduceGroup group(1);
  std::string error;
  uint8_t bytes[3] = {0, 0, 0};
  EXPECT_FALSE(group.allReduce(0, {0, 0, 3, "float16"}, bytes, bytes, error));
  EXPECT_TRUE(contains(error, "3 bytes of float16 cannot be summed")) << error;
  EXPECT_FALSE(group.allReduce(1, {0, 0, 2, "float16"}, bytes, bytes, error));
}

// --- Logs ------------------------------------------------------------------------

TEST(TensorParallelLogs, MatchAndDiffer) {
  std::vector<TpCollective> log = {{3, 0, 4096, "bfloat16"}, {9, 0, 4096, "bfloat16"},
                                   {3, 1, 2048, "bfloat16"}};
  std::string why;
  EXPECT_TRUE(tpCollectivesMatch({log, log, log}, why)) << why;
  EXPECT_TRUE(tpCollectivesMatch({}, why));
  auto other = log;
  other[2].bytes = 4096;
  EXPECT_FALSE(tpCollectivesMatch({log, log, other}, why));
  EXPECT_EQ(why, "all-reduce 2: rank 2 vs rank 0: bytes 4096 vs 2048");
  other = log;
  other[1].dtype = "float32";
  EXPECT_FALSE(tpCollectivesMatch({log, other}, why));
  EXPECT_EQ(why, "all-reduce 1: rank 1 vs rank 0: dtype float32 vs bfloat16");
  other = log;
  other.pop_back();
  EXPECT_FALSE(tpCollectivesMatch({log, other}, why));
  EXPECT_EQ(why, "rank 1 issued 2 all-reduces, rank 0 3");
  // Through JSON (the rank logs) and back.
  EXPECT_EQ(tpCollectivesFromJson(tpCollectivesToJson(log)), log);
  json bad = tpCollectivesToJson(log);
  bad[0].erase("chunk");
  EXPECT_EQ(tpCollectivesFromJson(bad)[0].chunk, -1);
  EXPECT_TRUE(tpCollectivesFromJson(json::object()).empty());
}

TEST(TensorParallelLogs, LauncherComparesRankLogs) {
  const char *base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/h20-tp-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  ASSERT_NE(mkdtemp(buf.data()), nullptr);
  std::string dir = buf.data(), error, summary;
  std::vector<TpCollective> log = {{3, 0, 64, "float32"}, {7, 0, 64, "float32"}};
  auto write = [&](int rank, const std::vector<TpCollective> &l) {
    json j{{"rank", rank}, {"ttft_ms", 1.5}, {"collectives", json::array()},
           {"tp_collectives", tpCollectivesToJson(l)}};
    ASSERT_TRUE(writeFileAtomically(dir + "/rank-" + std::to_string(rank) + ".json", j.dump(),
                                    error))
        << error;
  };
  write(0, log);
  write(1, log);
  EXPECT_TRUE(checkRankLogs(dir, 2, summary, error)) << error;
  EXPECT_TRUE(contains(summary, "tensor parallel (NCCL): 2 ranks, all-reduces match (2 per rank)"))
      << summary;
  auto other = log;
  other[1].step = 8;
  write(1, other);
  EXPECT_FALSE(checkRankLogs(dir, 2, summary, error));
  EXPECT_EQ(error, "the ranks' all-reduces differ: all-reduce 1: rank 1 vs rank 0: step 8 vs 7");
  EXPECT_FALSE(checkRankLogs(dir, 3, summary, error));
  EXPECT_TRUE(contains(error, "rank 2 left no log")) << error;
  std::system(("rm -rf '" + dir + "'").c_str());
}

// --- Runs ------------------------------------------------------------------------

TEST(TensorParallelRun, NeedsItsGpuCount) {
  Manifest m;
  std::string error;
  ASSERT_TRUE(parseManifest(tpManifest().dump(), m, error)) << error;
  EXPECT_TRUE(checkTensorParallelGpus(m, 2, error));
  EXPECT_FALSE(checkTensorParallelGpus(m, 0, error));
  EXPECT_EQ(error, "this artifact was compiled for tensor parallelism over 2 GPUs (h20-opt --gpus "
                   "2 --parallel tensor); run it with --gpus 2 [--virtual-ranks]");
  EXPECT_FALSE(checkTensorParallelGpus(m, 4, error));
  EXPECT_TRUE(contains(error, "run it with --gpus 2 [--virtual-ranks] (got --gpus 4)")) << error;
  Manifest one;
  EXPECT_TRUE(checkTensorParallelGpus(one, 0, error));
  EXPECT_TRUE(checkTensorParallelGpus(one, 8, error)); // context parallelism decides
}

TEST(TensorParallelRun, NcclDataTypes) {
  EXPECT_EQ(ncclDataType("float32"), 7);
  EXPECT_EQ(ncclDataType("float16"), 6);
  EXPECT_EQ(ncclDataType("bfloat16"), 9);
  EXPECT_EQ(ncclDataType("int64"), -1);
}
