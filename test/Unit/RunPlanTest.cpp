//===- RunPlanTest.cpp - the per-run plan and its refusals, without a GPU -===//
//
// planRun (RunPlan.h) decides what GpuExecutor::run will do and refuses
// what it cannot: every message here is one h20-run prints before it
// loads any weight.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/RunPlan.h"
#include "h20/Runtime/Cuda/GpuPrefill.h"
#include "h20/Runtime/RunOutputs.h"

#include "ProgramFixtures.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

using namespace h20::runtime;
using json = nlohmann::json;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// Token ids [1, S] (int64 or int32) counting up from 1.
HostTensor ids(int64_t S, const std::string &dtype = "int64", int64_t batch = 1) {
  HostTensor t;
  t.name = "ids";
  t.dtype = dtype;
  t.shape = {batch, S};
  int64_t es = dtype == "int64" ? 8 : 4;
  t.data.assign(static_cast<size_t>(batch * S * es), 0);
  for (int64_t i = 0; i < batch * S; ++i) {
    int64_t v = i + 1;
    std::memcpy(t.data.data() + i * es, &v, static_cast<size_t>(es)); // little-endian
  }
  return t;
}

/// The base fixture (chunks of 16, a "last" and a "rows" output).
struct Base {
  Manifest m;
  GpuProgram p;
  explicit Base(json program = h20::test::base_fixture::baseProgram()) {
    json man = h20::test::base_fixture::baseManifest();
    man["gpu"] = program;
    std::string text = man.dump(), error;
    EXPECT_TRUE(parseManifest(text, m, error)) << error;
    EXPECT_TRUE(parseGpuProgram(text, m, 4096, p, error)) << error;
  }
  std::string refuse(const std::vector<HostTensor> &in, const RunRequest &r = {}) {
    RunPlan plan;
    std::string error;
    return planRun(m, p, in, r, plan, error) ? "(planned)" : error;
  }
};

/// The 2-layer decoder fixture: context parallelism can split it.
struct Decoder {
  Manifest m;
  GpuProgram p;
  Decoder() {
    json man = h20::test::decoder_fixture::manifest();
    man["gpu"] = h20::test::decoder_fixture::program();
    std::string text = man.dump(), error;
    EXPECT_TRUE(parseManifest(text, m, error)) << error;
    EXPECT_TRUE(parseGpuProgram(text, m, 4096, p, error)) << error;
  }
};

} // namespace

TEST(RunPlan, PlansASingleGpuRun) {
  Base b;
  RunPlan plan;
  std::string error;
  ASSERT_TRUE(planRun(b.m, b.p, {ids(40)}, {}, plan, error)) << error;
  EXPECT_EQ(plan.mode, RunMode::Single);
  EXPECT_STREQ(runModeName(plan.mode), "single");
  EXPECT_EQ(plan.tokens, 40);
  ASSERT_EQ(plan.chunks.size(), 3u); // 16 + 16 + 8
  EXPECT_EQ(plan.chunks[2].p0, 32);
  EXPECT_EQ(plan.chunks[2].n, 8);
  EXPECT_EQ(plan.inputBuffer, (std::vector<int>{0}));
  EXPECT_EQ(plan.outputBuffer, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan.chunkBytes, 16 * 8);
  EXPECT_FALSE(plan.lastOnly);
  ASSERT_EQ(plan.outputs.size(), 2u);
  EXPECT_EQ(plan.outputs[0].shape, (std::vector<int64_t>{1, 1, 8}));
  EXPECT_EQ(plan.outputs[0].bytes, 32);
  EXPECT_EQ(plan.outputs[1].shape, (std::vector<int64_t>{1, 40, 4}));
  EXPECT_EQ(plan.outputs[1].rowsOuter, 1);
  EXPECT_EQ(plan.outputs[1].rowBytes, 16);
  EXPECT_FALSE(plan.contextParallel());
  EXPECT_FALSE(plan.tensorParallel());
}

TEST(RunPlan, RefusesBadInputs) {
  Base b;
  EXPECT_EQ(b.refuse({}), "the model takes 1 inputs, got 0");
  EXPECT_EQ(b.refuse({ids(8, "int32")}),
            "input 'ids' is int32[1, 8] (32 bytes); the model takes int64[1, ?]");
  EXPECT_EQ(b.refuse({ids(8, "int64", 2)}),
            "input 'ids' is int64[2, 8] (128 bytes); the model takes int64[1, ?]");
  // A dynamic batch is cut only at batch 1.
  json dyn = h20::test::base_fixture::baseManifest();
  dyn["inputs"][0]["shape"] = {-1, -1};
  dyn["gpu"] = h20::test::base_fixture::baseProgram();
  Manifest m;
  GpuProgram p;
  std::string text = dyn.dump(), error;
  ASSERT_TRUE(parseManifest(text, m, error)) << error;
  ASSERT_TRUE(parseGpuProgram(text, m, 4096, p, error)) << error;
  RunPlan plan;
  EXPECT_FALSE(planRun(m, p, {ids(8, "int64", 2)}, {}, plan, error));
  EXPECT_EQ(error, "the chunked input 'ids' [2, 8] must have batch 1");
  HostTensor cut = ids(8);
  cut.data.pop_back();
  EXPECT_EQ(b.refuse({cut}), "input 'ids' is int64[1, 8] (63 bytes); the model takes int64[1, ?]");
  EXPECT_EQ(b.refuse({ids(0)}),
            "the prompt is empty: the chunked input 'ids' [1, 0] has no tokens");
  HostTensor huge = ids(1);
  huge.shape = {1, int64_t(1) << 61};
  huge.data.clear(); // n * 8 would wrap to 0 bytes
  EXPECT_EQ(b.refuse({huge}),
            "input 'ids' [1, 2305843009213693952] has a negative dim or too many elements");
  // Past the 64-row KV cache: the last chunk's write does not fit.
  EXPECT_TRUE(contains(b.refuse({ids(80)}), "for a prompt of 80 tokens")) << b.refuse({ids(80)});
}

TEST(RunPlan, RefusesModesThatDoNotFit) {
  Base b;
  RunRequest both;
  both.virtualRanks = 2;
  both.contextParallel = true;
  EXPECT_EQ(b.refuse({ids(32)}, both),
            "a run is either virtual (virtualRanks) or over NCCL (contextParallel)");
  RunRequest noComm;
  noComm.contextParallel = true;
  EXPECT_TRUE(contains(b.refuse({ids(32)}, noComm), "needs a communicator of 2 or more ranks"));
  RunRequest rows;
  rows.contextParallel = true;
  rows.ncclRanks = 2;
  EXPECT_TRUE(contains(b.refuse({ids(32)}, rows),
                       "returns the logits of every position; an N-GPU prefill needs an "
                       "artifact compiled with --logits=last"))
      << b.refuse({ids(32)}, rows);
  RunRequest tp;
  tp.tpRanks = 2;
  EXPECT_EQ(b.refuse({ids(32)}, tp),
            "this artifact was compiled for tensor parallelism over 2 GPUs; run it with 2 NCCL "
            "ranks (--gpus 2) or 2 virtual ranks (--virtual-ranks)");
  tp.ncclRanks = 2;
  tp.ncclRank = 1; // the communicator's rank must be the weights' rank
  EXPECT_TRUE(contains(b.refuse({ids(32)}, tp), "compiled for tensor parallelism over 2 GPUs"));
  RunRequest tpGroup;
  tpGroup.tpRanks = 2;
  tpGroup.virtualTpRanks = 4;
  EXPECT_EQ(b.refuse({ids(32)}, tpGroup),
            "a group of 4 virtual ranks for an artifact of 2 tensor-parallel ranks");
  RunRequest badRank;
  badRank.contextParallel = true;
  badRank.ncclRanks = 2;
  badRank.ncclRank = 5;
  EXPECT_EQ(b.refuse({ids(32)}, badRank), "NCCL rank 5 is not in [0, 2)");
  RunRequest badTpRank;
  badTpRank.tpRanks = 2;
  badTpRank.tpRank = 2;
  badTpRank.virtualTpRanks = 2;
  EXPECT_EQ(b.refuse({ids(32)}, badTpRank), "tensor-parallel rank 2 is not in [0, 2)");
  RunRequest tpCp;
  tpCp.tpRanks = 2;
  tpCp.virtualRanks = 2;
  EXPECT_TRUE(contains(b.refuse({ids(32)}, tpCp), "is not supported"));
}

TEST(RunPlan, ChoosesTensorParallelModes) {
  Base b;
  RunPlan plan;
  std::string error;
  RunRequest virt;
  virt.tpRanks = 2;
  virt.tpRank = 1;
  virt.virtualTpRanks = 2;
  ASSERT_TRUE(planRun(b.m, b.p, {ids(16)}, virt, plan, error)) << error;
  EXPECT_EQ(plan.mode, RunMode::VirtualTensorParallel);
  EXPECT_EQ(plan.tpRanks, 2);
  EXPECT_TRUE(plan.tensorParallel());
  EXPECT_FALSE(plan.overNccl());
  RunRequest nccl;
  nccl.tpRanks = 2;
  nccl.tpRank = 1;
  nccl.ncclRanks = 2;
  nccl.ncclRank = 1;
  ASSERT_TRUE(planRun(b.m, b.p, {ids(16)}, nccl, plan, error)) << error;
  EXPECT_EQ(plan.mode, RunMode::NcclTensorParallel);
  EXPECT_TRUE(plan.overNccl());
}

TEST(RunPlan, PlansASoloRank) {
  Base b;
  RunPlan plan;
  std::string error;
  RunRequest solo;
  solo.tpRanks = 4;
  solo.tpRank = 3;
  solo.soloTp = true;
  ASSERT_TRUE(planRun(b.m, b.p, {ids(16)}, solo, plan, error)) << error;
  EXPECT_EQ(plan.mode, RunMode::SoloTensorParallel);
  EXPECT_STREQ(runModeName(plan.mode), "solo-tp");
  EXPECT_EQ(plan.tpRanks, 4);
  EXPECT_TRUE(plan.tensorParallel());
  EXPECT_FALSE(plan.overNccl());
  // Only of a tensor-parallel artifact, and alone.
  RunRequest one;
  one.soloTp = true;
  EXPECT_FALSE(planRun(b.m, b.p, {ids(16)}, one, plan, error));
  EXPECT_TRUE(contains(error, "is not one")) << error;
  RunRequest peers = solo;
  peers.virtualTpRanks = 4;
  EXPECT_FALSE(planRun(b.m, b.p, {ids(16)}, peers, plan, error));
  EXPECT_TRUE(contains(error, "alone")) << error;
}

TEST(RunPlan, PlansContextParallelRuns) {
  Decoder d;
  RunPlan plan;
  std::string error;
  RunRequest virt;
  virt.virtualRanks = 2;
  // 2N = 4 chunks of 4 tokens = one compiled chunk each.
  ASSERT_TRUE(planRun(d.m, d.p, {ids(16)}, virt, plan, error)) << error;
  EXPECT_EQ(plan.mode, RunMode::VirtualContextParallel);
  EXPECT_EQ(plan.cpRanks, 2);
  EXPECT_EQ(plan.cpRank, -1);
  EXPECT_TRUE(plan.lastOnly);
  EXPECT_EQ(plan.cp.schedule.ranks, 2);
  EXPECT_EQ(plan.cp.segments.size(), 3u); // two layers and the tail
  RunRequest nccl;
  nccl.contextParallel = true;
  nccl.ncclRanks = 2;
  nccl.ncclRank = 1;
  ASSERT_TRUE(planRun(d.m, d.p, {ids(32)}, nccl, plan, error)) << error;
  EXPECT_EQ(plan.mode, RunMode::NcclContextParallel);
  EXPECT_EQ(plan.cpRank, 1);
  EXPECT_TRUE(plan.overNccl());
  // 12 tokens: CP chunks of 3, not whole compiled chunks of 4.
  EXPECT_FALSE(planRun(d.m, d.p, {ids(12)}, virt, plan, error));
  EXPECT_TRUE(contains(error, "context parallelism")) << error;
}

/// planGpuJob with the rank variables of `env` (NAME=VALUE) only.
bool planJob(const Manifest &m, const GpuProgram &p, int64_t S, const GpuJobRequest &rq,
             const std::map<std::string, std::string> &env, GpuJob &job, std::string &error) {
  GpuJobRequest r = rq;
  r.tokens = S;
  r.artifact = "m.h20";
  auto getenv = [&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  return planGpuJob(m, p, {ids(S)}, r, getenv, job, error);
}

TEST(GpuJob, ChoosesTheModeFromFlagsAndEnvironment) {
  Decoder d;
  GpuJob job;
  std::string error;
  ASSERT_TRUE(planJob(d.m, d.p, 16, {}, {}, job, error)) << error;
  EXPECT_EQ(job.mode, RankMode::Single);
  EXPECT_EQ(job.contextRanks, 0);
  EXPECT_TRUE(job.run.cudaGraph);
  EXPECT_EQ(job.plan.mode, RunMode::Single);
  GpuJobRequest virt;
  virt.gpus = 2;
  virt.virtualRanks = true;
  ASSERT_TRUE(planJob(d.m, d.p, 16, virt, {}, job, error)) << error;
  EXPECT_EQ(job.contextRanks, 2);
  EXPECT_EQ(job.run.virtualRanks, 2);
  EXPECT_FALSE(job.run.cudaGraph); // no CUDA graphs with context parallelism
  EXPECT_EQ(job.plan.mode, RunMode::VirtualContextParallel);
  GpuJobRequest two;
  two.gpus = 2;
  ASSERT_TRUE(planJob(d.m, d.p, 16, two, {}, job, error)) << error;
  EXPECT_EQ(job.mode, RankMode::Launch); // h20-run starts the ranks
  ASSERT_TRUE(planJob(d.m, d.p, 16, two,
                      {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"H20_NCCL_ID_FILE", "/tmp/id"}}, job,
                      error))
      << error;
  EXPECT_EQ(job.mode, RankMode::Worker);
  EXPECT_TRUE(job.run.contextParallel);
  EXPECT_EQ(job.load.ncclRank, 1);
  EXPECT_EQ(job.plan.mode, RunMode::NcclContextParallel);
}

TEST(GpuJob, RefusesWhatCannotRun) {
  Decoder d;
  GpuJob job;
  std::string error;
  GpuJobRequest three;
  three.gpus = 3;
  three.virtualRanks = true;
  EXPECT_FALSE(planJob(d.m, d.p, 24, three, {}, job, error));
  EXPECT_TRUE(contains(error, "power of two")) << error;
  GpuJobRequest virt;
  virt.gpus = 2;
  virt.virtualRanks = true;
  // 12 tokens: CP chunks of 3; planRun's refusal names the artifact.
  EXPECT_FALSE(planJob(d.m, d.p, 12, virt, {}, job, error));
  EXPECT_TRUE(contains(error, "'m.h20': ") && contains(error, "context parallelism")) << error;
  EXPECT_FALSE(planJob(d.m, d.p, 16, virt, {{"WORLD_SIZE", "2"}, {"RANK", "0"}}, job, error));
}

TEST(GpuJob, PlansASoloRankOfATensorParallelArtifact) {
  Decoder d;
  d.m.parallel = ParallelPlan{};
  d.m.parallel->plan = "tensor";
  d.m.parallel->gpus = 4;
  d.m.parallel->tensorParallel = 4;
  GpuJob job;
  std::string error;
  GpuJobRequest solo;
  solo.gpus = 4;
  solo.soloRank = 2;
  ASSERT_TRUE(planJob(d.m, d.p, 16, solo, {}, job, error)) << error;
  EXPECT_EQ(job.mode, RankMode::Single); // one process: no launcher, no NCCL
  EXPECT_EQ(job.load.ncclRanks, 0);
  EXPECT_EQ(job.load.tensorParallelRank, 2);
  EXPECT_EQ(job.virtualTpRanks, 0);
  EXPECT_TRUE(job.run.soloTensorParallel);
  EXPECT_EQ(job.plan.mode, RunMode::SoloTensorParallel);
  solo.soloRank = 4;
  EXPECT_FALSE(planJob(d.m, d.p, 16, solo, {}, job, error));
  EXPECT_TRUE(contains(error, "0 to 3")) << error;
  Decoder single;
  GpuJobRequest notTp;
  notTp.soloRank = 0;
  EXPECT_FALSE(planJob(single.m, single.p, 16, notTp, {}, job, error));
  EXPECT_TRUE(contains(error, "is not one")) << error;
  // One process alone: not a rank of a launched job.
  solo.soloRank = 1;
  EXPECT_FALSE(planJob(d.m, d.p, 16, solo, {{"WORLD_SIZE", "4"}, {"RANK", "1"}}, job, error));
  EXPECT_TRUE(contains(error, "WORLD_SIZE=4")) << error;
}

TEST(RunFiles, RefusesOutputsThatCannotBeWritten) {
  Base b;
  std::string error;
  RunFiles f;
  f.artifact = "m.h20";
  f.ids = "ids.npy";
  EXPECT_TRUE(checkRunFiles(b.m, f, error)) << error;
  f.outputs = {{"nope", "out.npy"}};
  EXPECT_FALSE(checkRunFiles(b.m, f, error));
  EXPECT_TRUE(contains(error, "--output 'nope'")) << error;
  f.outputs.clear();
  f.report = "ids.npy"; // would overwrite the prompt
  EXPECT_FALSE(checkRunFiles(b.m, f, error));
  f.report.clear();
  f.ids.clear();
  f.inputs = {{"ids", "ids.npy"}};
  f.dumpLogits = "l.npy";
  EXPECT_FALSE(checkRunFiles(b.m, f, error));
  EXPECT_TRUE(contains(error, "--dump-logits needs a token-id prefill")) << error;
}

TEST(RunPlan, PadsTheChunkedInput) {
  json g = h20::test::base_fixture::baseProgram();
  g["chunking"]["pad_value"] = 7;
  Base b(g);
  RunPlan plan;
  std::string error;
  ASSERT_TRUE(planRun(b.m, b.p, {ids(20)}, {}, plan, error)) << error;
  std::vector<uint8_t> padded = paddedChunkedInput(b.p, plan, ids(20));
  ASSERT_EQ(padded.size(), 2u * 16 * 8); // two whole chunks
  auto at = [&](int i) {
    int64_t v = 0;
    std::memcpy(&v, padded.data() + i * 8, 8);
    return v;
  };
  EXPECT_EQ(at(0), 1);
  EXPECT_EQ(at(19), 20);
  EXPECT_EQ(at(20), 7);
  EXPECT_EQ(at(31), 7);
}

namespace {

Manifest deviceModel(const std::string &target) {
  Manifest m;
  m.target = target;
  TensorSpec out;
  out.name = "logits";
  out.dtype = "float32";
  out.shape = {1, -1, 8};
  m.outputs.push_back(out);
  return m;
}

TEST(ChooseDevice, FollowsTheArtifactAndRefusesMismatches) {
  bool gpu = false;
  std::string error;
  DeviceRequest rq;
  ASSERT_TRUE(chooseDevice(deviceModel("cpu"), "m.h20", rq, gpu, error)) << error;
  EXPECT_FALSE(gpu);
  ASSERT_TRUE(chooseDevice(deviceModel("h200"), "m.h20", rq, gpu, error)) << error;
  EXPECT_TRUE(gpu);
  rq.device = "tpu";
  EXPECT_FALSE(chooseDevice(deviceModel("h200"), "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "--device must be cpu or gpu, got 'tpu'")) << error;
  rq.device = "cpu";
  EXPECT_FALSE(chooseDevice(deviceModel("h200"), "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "'m.h20' was compiled for target 'h200'; compile with --target=cpu"))
      << error;
  rq.device = "gpu";
  EXPECT_FALSE(chooseDevice(deviceModel("cpu"), "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "which runs on the CPU: use --device cpu")) << error;
  Manifest none = deviceModel("h200");
  none.outputs.clear();
  EXPECT_FALSE(chooseDevice(none, "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "'m.h20' declares no outputs")) << error;
}

TEST(ChooseDevice, RefusesGpuFlagsOnTheCpu) {
  bool gpu = false;
  std::string error;
  const Manifest cpu = deviceModel("cpu");
  DeviceRequest rq;
  rq.gpus = 2;
  EXPECT_FALSE(chooseDevice(cpu, "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "--gpus applies to GPU artifacts")) << error;
  rq = {};
  rq.dummyWeights = true;
  EXPECT_FALSE(chooseDevice(cpu, "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "--dummy-weights applies to GPU runs")) << error;
  rq = {};
  rq.tuneGemms = true;
  EXPECT_FALSE(chooseDevice(cpu, "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "--tune-gemms applies to GPU runs")) << error;
  rq = {};
  rq.worldSize = "4";
  EXPECT_FALSE(chooseDevice(cpu, "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "WORLD_SIZE=4: 'm.h20' runs on the CPU, in one process")) << error;
  // --gpus is named when given, whatever WORLD_SIZE says.
  rq.gpus = 2;
  EXPECT_FALSE(chooseDevice(cpu, "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "--gpus applies to GPU artifacts")) << error;
  // WORLD_SIZE=1 is one process: a CPU run.
  rq = {};
  rq.worldSize = "1";
  EXPECT_TRUE(chooseDevice(cpu, "m.h20", rq, gpu, error)) << error;
  // A graph run (--input) is one process; as a rank of a job it is refused.
  rq.graphRun = true;
  EXPECT_TRUE(chooseDevice(cpu, "m.h20", rq, gpu, error)) << error;
  rq.worldSize = "2";
  EXPECT_FALSE(chooseDevice(deviceModel("h200"), "m.h20", rq, gpu, error));
  EXPECT_TRUE(contains(error, "WORLD_SIZE=2) runs token ids: give --ids")) << error;
}

} // namespace
