//===- GpuRun.cpp - h20-run for GPU artifacts -----------------------------===//
//
// One GPU, N GPUs (context parallel over NCCL, or tensor parallel), or N
// virtual ranks on one GPU: the run plan is checked before the GPU is
// touched, then the executors are loaded, the prefills run (warm-up and
// measured), and the report is written. See RunCommon.h.
//
//===----------------------------------------------------------------------===//
#include "RunCommon.h"

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Cpu/CpuExecutor.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Cuda/GpuExecutor.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Parallel/RankEnvironment.h"
#include "h20/Runtime/Parallel/RankLauncher.h"
#include "h20/Runtime/RunPlan.h"
#include "h20/Runtime/Format/TensorIO.h"
#include "h20/Runtime/Parallel/TensorParallel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace h20::runtime;

namespace h20run {
namespace {

/// What a step is, for the step profile: the kernel's name, or the GEMM's
/// shape (m x n x k, each the expression's constant part, "+n" when it
/// grows with the chunk's tokens), or the op.
std::string stepLabel(const GpuStep &step) {
  if (auto *l = std::get_if<LaunchStep>(&step))
    return l->kernel;
  if (auto *a = std::get_if<AttentionStep>(&step))
    return a->kernel;
  if (auto *g = std::get_if<GemmStep>(&step)) {
    auto dim = [](const LinearExpr &e) {
      std::string t = std::to_string(e.c);
      if (e.n)
        t = (e.c ? t + "+" : std::string()) + "n";
      return t;
    };
    return std::string(g->groups ? "grouped gemm " : "gemm ") + g->dtypeA + " " + dim(g->m) +
           "x" + dim(g->n) + "x" + dim(g->k);
  }
  return stepOpName(step);
}

/// The step profile of a run made with GpuRunOptions::profileSteps: every
/// step's time (JSON), and the 20 costliest labels (stepLabel, summed over
/// their steps and chunks) printed to `out`.
nlohmann::json stepProfile(const GpuProgram &program, const GpuRunStats &st, FILE *out) {
  nlohmann::json steps = nlohmann::json::array();
  std::map<std::string, std::pair<double, int64_t>> byLabel;
  double total = 0;
  for (size_t i = 0; i < st.stepMs.size() && i < program.steps.size(); ++i) {
    std::string label = stepLabel(program.steps[i]);
    steps.push_back({{"step", i},
                     {"op", stepOpName(program.steps[i])},
                     {"name", label},
                     {"ms", st.stepMs[i]},
                     {"calls", st.stepCalls[i]}});
    byLabel[label].first += st.stepMs[i];
    byLabel[label].second += st.stepCalls[i];
    total += st.stepMs[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(byLabel.begin(),
                                                                       byLabel.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
  std::fprintf(out, "step profile: %.1f ms of GPU time in %zu steps (%lld chunks)\n", total,
               st.stepMs.size(), static_cast<long long>(st.chunks));
  std::fprintf(out, "  %10s %6s %8s  %s\n", "ms", "%", "calls", "kernel / GEMM");
  for (size_t r = 0; r < rows.size() && r < 20; ++r)
    std::fprintf(out, "  %10.2f %5.1f%% %8lld  %s\n", rows[r].second.first,
                 total > 0 ? 100.0 * rows[r].second.first / total : 0.0,
                 static_cast<long long>(rows[r].second.second), rows[r].first.c_str());
  return {{"total_ms", total}, {"steps", steps}};
}

int exitCode(GpuStatus s) {
  switch (s) {
  case GpuStatus::Ok: return 0;
  case GpuStatus::Internal:
  case GpuStatus::PeerFailed: return kExitInternal;
  case GpuStatus::BadInput:
  case GpuStatus::NoDevice: return kExitBadInput;
  case GpuStatus::Resources: return kExitResources;
  }
  return kExitInternal;
}
/// fail() for a GpuStatus: exit code and whether it is h20's bug.
int fail(GpuStatus s, const std::string &message) {
  return h20run::fail(exitCode(s), message, s != GpuStatus::PeerFailed);
}

/// The GPUs of the prefill and this process's place among them
/// (RankEnvironment.h: --gpus, WORLD_SIZE, RANK, LOCAL_RANK,
/// H20_NCCL_ID_FILE, H20_NCCL_TIMEOUT_S), into the load options.
bool gpuRanks(const Options &opt, int tensorParallel, GpuLoadOptions &lo, RankMode &mode,
              std::string &error) {
  RankEnvironment env;
  if (!readRankEnvironment([](const char *name) { return std::getenv(name); }, env, error))
    return false;
  RankRequest rq;
  rq.gpus = opt.gpus;
  rq.virtualRanks = opt.virtualRanks;
  rq.tensorParallel = tensorParallel;
  rq.tensorInputs = !opt.inputs.empty() || !opt.inputsFrom.empty();
  RankAssignment ra;
  if (!assignRanks(rq, env, ra, error))
    return false;
  mode = ra.mode;
  lo.ncclRanks = ra.ncclRanks;
  lo.ncclRank = ra.ncclRank;
  lo.device = ra.device;
  if (!opt.virtualRanks) {
    lo.ncclTimeoutS = ra.ncclTimeoutS;
    lo.tensorParallelRank = ra.tensorParallelRank;
    lo.ncclIdFile = ra.ncclIdFile;
  }
  return true;
}

/// The report's "gemm_tuning": each GEMM shape's candidates and times.
nlohmann::json gemmTuningReport(const std::vector<GemmTuning> &tunings) {
  nlohmann::json tuning = nlohmann::json::array();
  for (const GemmTuning &t : tunings) {
    nlohmann::json row = {{"shape", t.shape},
                          {"candidates", t.candidates},
                          {"chosen", t.chosen},
                          {"first_ms", t.firstMs},
                          {"chosen_ms", t.chosenMs}};
    if (!t.note.empty())
      row["note"] = t.note;
    tuning.push_back(row);
  }
  return tuning;
}

/// The report's "context_parallel" of a run over `cpN` > 1 ranks (virtual
/// or NCCL): the assignment, the K/V ring per layer (summed into
/// `ringBytes` / `ringMs`), the ranks' collectives.
nlohmann::json contextParallelReport(const GpuRunStats &st, const GpuProgram &program, int cpN,
                                     int64_t &ringBytes, double &ringMs) {
  nlohmann::json ring = nlohmann::json::array();
  for (size_t l = 0; l < st.cpRing.size(); ++l) {
    const CpLayerTraffic &t = st.cpRing[l];
    double ms = l < st.cpRingMs.size() ? st.cpRingMs[l] : 0.0;
    ring.push_back({{"layer", t.layer},
                    {"steps", t.steps},
                    {"sends", t.sends},
                    {"copies", t.copies},
                    {"bytes", t.bytes},
                    {"ms", ms}});
    ringBytes += t.bytes;
    ringMs += ms;
  }
  nlohmann::json perRank = nlohmann::json::array();
  for (const auto &log : st.cpRankLog) {
    int64_t bytes = 0;
    for (const CpCollective &c : log)
      bytes += c.sendBytes;
    perRank.push_back({{"collectives", log.size()}, {"send_bytes", bytes}});
  }
  // A virtual run: rank 0's collectives; an NCCL run: this rank's.
  int shown = st.ncclRanks > 1 ? st.cpRank : 0;
  nlohmann::json rank0 = collectivesToJson(
      shown >= 0 && shown < static_cast<int>(st.cpRankLog.size()) ? st.cpRankLog[shown]
                                                                   : std::vector<CpCollective>{});
  nlohmann::json cp = {{"mode", st.ncclRanks > 1 ? "nccl" : "virtual"},
                       {"ranks", cpN},
                       {"cp_chunks", 2 * cpN},
                       {"cp_chunk_tokens", st.cpChunkTokens},
                       {"compiled_chunk", program.chunking->chunk},
                       {"pieces", st.cpPieces},
                       {"tail_pieces", st.cpTailPieces},
                       {"rank_chunks", st.cpRankChunks},
                       {"ring", ring},
                       {"ring_bytes", ringBytes},
                       {"ring_ms", ringMs},
                       {"ranks_log", perRank},
                       {st.ncclRanks > 1 ? "rank_collectives" : "rank0_collectives",
                        rank0},
                       {"extra_gpu_memory_bytes", st.cpExtraBytes},
                       {"ttft_ms", st.ttftMs}};
  // NCCL: each rank knows only its own collectives; the launcher compares them.
  if (st.virtualRanks > 1)
    cp["collectives_match"] = st.cpCollectivesMatch;
  if (!st.cpCollectivesNote.empty())
    cp["collectives_note"] = st.cpCollectivesNote;
  return cp;
}

// One rank's prefills: warm-up runs load every kernel and let cuBLASLt
// pick its algorithms (a chunked program warms up on its first chunk
// only); then the measured runs, whose outputs and per-stage figures are
// the last run's, ttft_ms the median of all.
struct RankRun {
  std::vector<HostTensor> outputs;
  GpuRunStats st;
  std::vector<double> warmupMs, runMs;
  std::vector<GemmTuning> gemmTuning; ///< from the run that tuned (the first)
  GpuStatus status = GpuStatus::Ok;
  std::string error;
};

/// Runs `opt.warmup` warm-up prefills (over one chunk when chunked) and
/// `opt.repeat` measured ones of `inputs` on `ex` into `rr`; stops at the
/// first failure (rr.status).
void runPrefills(GpuExecutor &ex, const GpuProgram &program, const Options &opt,
                 const std::vector<HostTensor> &inputs, GpuRunOptions runOpts, RankRun &rr) {
  for (int64_t w = 0; w < opt.warmup; ++w) {
    std::vector<HostTensor> warmInputs = inputs;
    GpuRunOptions wo;
    wo.n = runOpts.n;
    wo.cudaGraph = runOpts.cudaGraph;
    wo.virtualTensorParallel = runOpts.virtualTensorParallel;
    if (program.chunking) {
      HostTensor &t = warmInputs[program.chunking->input];
      int dim = program.chunking->dim;
      int64_t outer = 1, inner = dtypeSize(t.dtype);
      for (int d = 0; d < static_cast<int>(t.shape.size()); ++d)
        if (d < dim)
          outer *= t.shape[d];
        else if (d > dim)
          inner *= t.shape[d];
      if (outer == 1 && dim < static_cast<int>(t.shape.size()) &&
          t.shape[dim] > program.chunking->chunk) {
        t.shape[dim] = program.chunking->chunk;
        t.data.resize(static_cast<size_t>(t.shape[dim] * inner));
      }
    }
    rr.status = ex.run(warmInputs, wo, rr.outputs, rr.st, rr.error);
    if (rr.status != GpuStatus::Ok)
      return;
    rr.warmupMs.push_back(rr.st.ttftMs);
    if (!rr.st.gemmTuning.empty())
      rr.gemmTuning = rr.st.gemmTuning;
  }
  for (int64_t r = 0; r < opt.repeat; ++r) {
    rr.status = ex.run(inputs, runOpts, rr.outputs, rr.st, rr.error);
    if (rr.status != GpuStatus::Ok)
      return;
    rr.runMs.push_back(rr.st.ttftMs);
    if (!rr.st.gemmTuning.empty())
      rr.gemmTuning = rr.st.gemmTuning;
  }
}

/// What virtual tensor-parallel ranks must agree on.
struct TpCheck {
  bool outputsMatch = true, logsMatch = true;
  std::string outputsNote, logsNote;
};

/// Virtual tensor parallelism: every rank got the same sums, so the same
/// outputs, bit for bit; and issued the same all-reduces.
TpCheck compareVirtualRanks(const std::vector<RankRun> &runs) {
  TpCheck c;
  const std::vector<HostTensor> &outputs = runs[0].outputs;
  std::vector<std::vector<TpCollective>> logs;
  for (size_t r = 0; r < runs.size(); ++r) {
    logs.push_back(runs[r].st.tpLog);
    for (size_t o = 0; o < outputs.size() && c.outputsMatch; ++o)
      if (o >= runs[r].outputs.size() || runs[r].outputs[o].data != outputs[o].data) {
        c.outputsMatch = false;
        c.outputsNote = "virtual rank " + std::to_string(r) + "'s output '" + outputs[o].name +
                        "' differs from rank 0's";
      }
  }
  c.logsMatch = tpCollectivesMatch(logs, c.logsNote);
  return c;
}

/// The report's "tensor_parallel" of a T-rank run: all-reduce counts,
/// bytes and time, and (virtual ranks) whether the ranks' logs and outputs
/// matched.
nlohmann::json tensorParallelReport(const GpuRunStats &st, int T, bool virtualTp, int ncclRank,
                                    const nlohmann::json &perRank, const TpCheck &check) {
  nlohmann::json tp{{"mode", virtualTp ? "virtual" : "nccl"},
                    {"ranks", T},
                    {"all_reduces", st.allReduces},
                    {"all_reduce_bytes", st.allReduceBytes},
                    {"all_reduce_ms", st.allReduceMs}};
  if (virtualTp) {
    tp["logs_match"] = check.logsMatch;
    tp["outputs_match"] = check.outputsMatch;
    if (!check.logsNote.empty())
      tp["logs_note"] = check.logsNote;
    if (!check.outputsNote.empty())
      tp["outputs_note"] = check.outputsNote;
    tp["ranks_log"] = perRank;
  } else {
    // Each process knows only its own log; the launcher compares them.
    tp["rank"] = ncclRank;
    tp["logs_match"] = nullptr;
    tp["logs_note"] = "each rank's all-reduces are compared by h20-run's launcher (--gpus N "
                      "without WORLD_SIZE) once every rank has finished";
    tp["ranks_log"] = perRank; // this rank's
  }
  tp["rank0_all_reduces"] = tpCollectivesToJson(st.tpLog);
  return tp;
}

/// The report's common part of a GPU run: the device, the prompt's next
/// token and TTFT, per-stage times, memory, NCCL and CUDA-graph use.
nlohmann::json gpuRunReport(const Options &opt, const Manifest &m, const GpuDeviceInfo &dev,
                            const GpuLoadStats &ls, const GpuLoadOptions &lo,
                            const GpuRunStats &st, const RankRun &run, int64_t S, int64_t next,
                            double totalMs) {
  const double tokensPerS = st.ttftMs > 0 ? S / (st.ttftMs / 1000.0) : 0.0;
  const std::vector<double> &warmupMs = run.warmupMs, &runMs = run.runMs;
  char driver[32], cc[16];
  std::snprintf(driver, sizeof driver, "%d.%d", dev.driverVersion / 1000,
                (dev.driverVersion % 1000) / 10);
  std::snprintf(cc, sizeof cc, "%d.%d", dev.ccMajor, dev.ccMinor);
  nlohmann::json report{{"device", "gpu"},
                        {"gpu", dev.name},
                        {"driver", driver},
                        {"compute_capability", cc},
                        {"code", ls.code},
                        {"tokens", S},
                        {"next_token_id", next},
                        {"ttft_ms", st.ttftMs},
                        {"tokens_per_s", tokensPerS},
                        {"stages_ms",
                         {{"load_weights", ls.loadWeightsMs},
                          {"upload_ids", st.uploadInputsMs},
                          {"prefill", st.prefillMs},
                          {"download", st.downloadMs},
                          {"total", totalMs}}},
                        {"warmup_runs", opt.warmup},
                        {"warmup_ttft_ms", warmupMs},
                        {"ttft_runs_ms", runMs},
                        {"chunks", st.chunks},
                        {"chunk_ms", st.chunkMs},
                        {"peak_gpu_memory_bytes", st.peakGpuMemoryBytes},
                        {"device_memory_used_bytes", st.deviceMemoryUsedBytes},
                        {"weight_bytes", ls.weightBytes},
                        {"logits", m.logits}};
  report["gpus"] = opt.virtualRanks ? 1 : std::max(lo.ncclRanks, 1); // physical GPUs
  if (ls.nccl.empty() || ls.nccl.rfind("unavailable", 0) == 0)
    report["nccl"] = ls.nccl.empty() ? "not used" : ls.nccl;
  else
    report["nccl"] = {{"version", ls.nccl},
                      {"ranks", ls.ncclRanks},
                      {"rank", ls.ncclRank},
                      {"init_ms", ls.ncclInitMs}};
  report["cuda_graph"] = {{"used", st.cudaGraph},
                          {"captures", st.graphCaptures},
                          {"launches", st.graphLaunches},
                          {"node_updates", st.graphNodeUpdates},
                          {"nodes", st.graphNodes}};
  if (!st.cudaGraphNote.empty())
    report["cuda_graph"]["note"] = st.cudaGraphNote;
  return report;
}

/// The one-line summaries of a parallel run (context parallel: virtual or
/// NCCL; tensor parallel) on stdout.
void printParallelSummary(const GpuRunStats &st, const GpuLoadStats &ls, int T, bool virtualTp,
                          const TpCheck &tpCheck, int64_t ringBytes, double ringMs) {
  if (st.virtualRanks > 1)
    std::printf("context parallel (virtual): %d ranks x 2 chunks of %lld tokens; ring %.2f GiB "
                "in %.1f ms over %zu layers; collectives %s\n",
                st.virtualRanks, static_cast<long long>(st.cpChunkTokens),
                static_cast<double>(ringBytes) / (1ull << 30), ringMs, st.cpRing.size(),
                st.cpCollectivesMatch ? "match" : ("DIFFER: " + st.cpCollectivesNote).c_str());
  if (st.ncclRanks > 1)
    std::printf("context parallel (NCCL %s): rank %d of %d holds the last position; %d x 2 "
                "chunks of %lld tokens; ring %.2f GiB over %zu layers (this rank's share %.1f "
                "ms)\n",
                ls.nccl.c_str(), st.cpRank, st.ncclRanks, st.ncclRanks,
                static_cast<long long>(st.cpChunkTokens),
                static_cast<double>(ringBytes) / (1ull << 30), st.cpRing.size(), ringMs);
  if (T > 1)
    std::printf("tensor parallel (%s): %d ranks; %lld all-reduces of %.2f MiB in %.1f ms (rank "
                "0)%s%s\n",
                virtualTp ? "virtual" : ("NCCL " + ls.nccl).c_str(), T,
                static_cast<long long>(st.allReduces),
                static_cast<double>(st.allReduceBytes) / (1 << 20), st.allReduceMs,
                virtualTp ? (tpCheck.logsMatch ? "; all-reduce logs match" : "; all-reduce logs DIFFER")
                          : "",
                virtualTp ? (tpCheck.outputsMatch ? "; outputs bitwise equal across ranks"
                                            : "; outputs DIFFER across ranks")
                          : "");
}

} // namespace

int runOnGpu(const Options &opt, const Artifact &artifact, const Manifest &m,
             const std::vector<HostTensor> &inputs, int64_t S, bool generic,
             std::chrono::steady_clock::time_point tStart) {
  std::string error;
  GpuProgram program;
  if (!parseGpuProgram(artifact.manifest, m, artifact.payload.size(), program, error))
    return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  GpuLoadOptions lo;
  lo.weightsDir = opt.weightsDir;
  lo.dummyWeights = opt.dummyWeights;
  lo.tuneGemms = opt.tuneGemms;
  // T > 1: tensor parallelism (each rank its weight slices, all-reduces);
  // main() made sure --gpus is T.
  const int T = m.tensorParallel();
  RankMode mode = RankMode::Single;
  if (!gpuRanks(opt, T, lo, mode, error))
    return fail(kExitBadInput, error);
  const bool virtualTp = T > 1 && opt.virtualRanks;
  const int cpRanks = T > 1               ? 0
                      : opt.virtualRanks  ? static_cast<int>(opt.gpus)
                      : mode != RankMode::Single ? lo.ncclRanks
                                                 : 0;
  if (cpRanks > 1 && opt.virtualRanks && (opt.gpus & (opt.gpus - 1)) != 0)
    return fail(kExitBadInput,
                "--virtual-ranks needs a power of two for --gpus (the prompt is cut into 2N "
                "equal chunks), got " + std::to_string(opt.gpus));
  // The run's whole plan (inputs, length, mode, the context-parallel
  // chunks, segments and ring) before the GPU is touched; every executor
  // plans the same again in run().
  {
    RunRequest rq;
    rq.n = generic ? 0 : S;
    rq.virtualRanks = cpRanks > 1 && opt.virtualRanks ? cpRanks : 0;
    rq.contextParallel = cpRanks > 1 && !opt.virtualRanks;
    rq.tpRanks = T;
    rq.tpRank = lo.tensorParallelRank;
    rq.virtualTpRanks = virtualTp ? T : 0;
    rq.ncclRanks = virtualTp ? 0 : lo.ncclRanks;
    rq.ncclRank = lo.ncclRank;
    RunPlan plan;
    if (!planRun(m, program, inputs, rq, plan, error))
      return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  }
  // A rank of an N-GPU job that fails after joining NCCL leaves with
  // _exit: the executor's destructor would call ncclCommDestroy, which
  // waits for peers that have given up (or died).
  struct WorkerExit {
    bool worker = false, ok = false;
    ~WorkerExit() {
      if (worker && !ok) {
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(gLastFailure);
      }
    }
  };
  if (mode == RankMode::Launch) {
    // One clear message here rather than one per rank (after the checks
    // of the artifact and prompt above, which need no GPU).
    int visible = GpuExecutor::deviceCount(error);
    if (visible < 0)
      return fail(kExitBadInput, "no CUDA-capable GPU/driver: " + error);
    if (visible < lo.ncclRanks)
      return fail(kExitBadInput, "--gpus " + std::to_string(lo.ncclRanks) + ": this machine has " +
                                     std::to_string(visible) + " GPU(s) visible");
    return launchRanks(lo.ncclRanks, "/proc/self/exe", opt.argv);
  }
  WorkerExit workerExit{mode == RankMode::Worker, false};
  // One executor, or one per virtual tensor-parallel rank (all on this GPU).
  const int executors = virtualTp ? T : 1;
  std::vector<std::unique_ptr<GpuExecutor>> gpus;
  GpuStatus s = GpuStatus::Ok;
  for (int r = 0; r < executors; ++r) {
    gpus.push_back(std::make_unique<GpuExecutor>());
    GpuLoadOptions lr = lo;
    if (virtualTp)
      lr.tensorParallelRank = r;
    s = gpus[r]->load(artifact, m, program, lr, error);
    if (s != GpuStatus::Ok)
      return fail(s, (virtualTp ? "virtual rank " + std::to_string(r) + ": " : std::string()) +
                         error);
  }
  GpuExecutor &gpu = *gpus[0];
  const GpuDeviceInfo &dev = gpu.device();
  const GpuLoadStats &ls = gpu.loadStats();
  if (ls.nccl.rfind("unavailable", 0) == 0)
    std::fprintf(stderr, "h20-run: note: NCCL %s; the 1-GPU prefill runs without it\n",
                 ls.nccl.c_str());

  std::unique_ptr<HostAllReduceGroup> group;
  if (virtualTp)
    group = std::make_unique<HostAllReduceGroup>(T);
  GpuRunOptions ro;
  ro.n = generic ? 0 : S;
  ro.cudaGraph = !opt.noCudaGraph && cpRanks < 2;
  ro.profileSteps = opt.profileSteps;
  ro.virtualRanks = cpRanks > 1 && opt.virtualRanks ? cpRanks : 0;
  ro.contextParallel = mode == RankMode::Worker && T == 1;
  ro.virtualTensorParallel = group.get();
  if (program.chunking && isatty(STDERR_FILENO) && cpRanks < 2)
    ro.progress = [](int64_t chunk, int64_t chunks, int64_t done, int64_t tokens, double ms) {
      std::fprintf(stderr, "\rprefill: chunk %lld/%lld, %lld/%lld tokens (%.1f ms)\x1b[K",
                   static_cast<long long>(chunk + 1), static_cast<long long>(chunks),
                   static_cast<long long>(done), static_cast<long long>(tokens), ms);
      if (chunk + 1 == chunks)
        std::fputc('\n', stderr);
      std::fflush(stderr);
    };
  std::vector<RankRun> runs(executors);
  if (executors == 1) {
    runPrefills(gpu, program, opt, inputs, ro, runs[0]);
  } else {
    // Virtual tensor parallelism: one thread per rank, in lockstep at the
    // all-reduces; a failing rank ends the group (the others stop there).
    std::vector<std::thread> threads;
    for (int r = 0; r < executors; ++r)
      threads.emplace_back([&, r] {
        GpuRunOptions rankOpts = ro;
        if (r != 0)
          rankOpts.progress = nullptr;
        runPrefills(*gpus[r], program, opt, inputs, rankOpts, runs[r]);
        if (runs[r].status != GpuStatus::Ok)
          group->abort("virtual rank " + std::to_string(r) + " failed: " + runs[r].error);
      });
    for (std::thread &t : threads)
      t.join();
  }
  // The first failure that is not a consequence of another rank's.
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < executors; ++r)
      if (runs[r].status != GpuStatus::Ok &&
          (pass == 1 || runs[r].status != GpuStatus::PeerFailed))
        return fail(runs[r].status, (executors > 1 ? "virtual rank " + std::to_string(r) + ": "
                                                   : std::string()) +
                                        runs[r].error);
  std::vector<HostTensor> &outputs = runs[0].outputs;
  GpuRunStats &st = runs[0].st;
  const std::vector<double> &runMs = runs[0].runMs;
  std::vector<double> sortedMs = runMs;
  std::sort(sortedMs.begin(), sortedMs.end());
  size_t mid = sortedMs.size() / 2;
  st.ttftMs = sortedMs.size() % 2 ? sortedMs[mid] : (sortedMs[mid - 1] + sortedMs[mid]) / 2;
  TpCheck tpCheck;
  if (virtualTp)
    tpCheck = compareVirtualRanks(runs);

  if (mode == RankMode::Worker) {
    // The rank's log for the launcher (collectives compared across ranks).
    int me = lo.ncclRank;
    nlohmann::json log{{"rank", me},
                       {"gpu", dev.ordinal},
                       {"ttft_ms", st.ttftMs},
                       {"ttft_runs_ms", runMs},
                       {"collectives", collectivesToJson(me < static_cast<int>(st.cpRankLog.size())
                                                             ? st.cpRankLog[me]
                                                             : std::vector<CpCollective>{})},
                       {"tp_collectives", tpCollectivesToJson(st.tpLog)}};
    if (!writeRankLog(me, log.dump(1) + "\n", error))
      return fail(kExitBadInput, error);
    // Context parallelism: the rank holding the last position has the
    // logits; tensor parallelism: every rank has them, rank 0 writes.
    const int outputRank = T > 1 ? 0 : st.cpOutputRank;
    if (outputRank != me) {
      workerExit.ok = true;
      return 0; // the logits, outputs and report are the output rank's
    }
  }
  if (!writeOutputs(opt, outputs, error))
    return fail(kExitBadInput, error);
  if (generic) {
    std::printf("ran %zu input(s) -> %zu output(s) in %.1f ms on %s (GPU %d)\n", inputs.size(),
                outputs.size(), st.ttftMs, dev.name.c_str(), dev.ordinal);
    workerExit.ok = true;
    return 0;
  }

  // Next token: argmax over the last position's logits (output 0).
  const HostTensor &lt = outputs[0];
  if (lt.shape.empty() || lt.shape.back() <= 0)
    return fail(kExitBadInput, "output 0 is not logits [..., vocab]");
  int64_t vocab = lt.shape.back(), rows = 1;
  for (int64_t d : lt.shape)
    rows *= d;
  std::vector<float> wide = logitsAsFloat32(lt.dtype, lt.data.data(), static_cast<size_t>(rows));
  if (wide.empty() && rows > 0)
    return fail(kExitBadInput, "output 0 is " + lt.dtype + ", not float32/float16/bfloat16 logits");
  rows /= vocab;
  if (rows < 1)
    return fail(kExitBadInput, "output 0 (logits) is empty");
  const float *logits = wide.data();
  const float *last = logits + (rows - 1) * vocab;
  int64_t next = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (last[v] > last[next])
      next = v;
  if (!opt.dumpLogits.empty() &&
      !writeFileAtomically(opt.dumpLogits, encodeNpyF32(lt.shape, logits), error))
    return fail(kExitBadInput, error);

  double totalMs = msSince(tStart);
  double tokensPerS = st.ttftMs > 0 ? S / (st.ttftMs / 1000.0) : 0.0;
  nlohmann::json report = gpuRunReport(opt, m, dev, ls, lo, st, runs[0], S, next, totalMs);
  if (opt.tuneGemms)
    report["gemm_tuning"] = gemmTuningReport(runs[0].gemmTuning);
  int64_t ringBytes = 0;
  double ringMs = 0;
  const int cpN = st.virtualRanks > 1 ? st.virtualRanks : st.ncclRanks;
  if (cpN > 1)
    report["context_parallel"] = contextParallelReport(st, program, cpN, ringBytes, ringMs);
  if (m.parallel) // the multi-GPU plan h20-opt recorded
    report["parallel"] = nlohmann::json::parse(m.parallel->json, nullptr, false);
  if (T > 1) {
    nlohmann::json perRank = nlohmann::json::array();
    for (int r = 0; r < executors; ++r)
      perRank.push_back({{"weight_bytes", gpus[r]->loadStats().weightBytes},
                         {"load_weights_ms", gpus[r]->loadStats().loadWeightsMs},
                         {"all_reduce_ms", runs[r].st.allReduceMs},
                         {"ttft_ms", runs[r].runMs.empty() ? 0.0 : runs[r].runMs.back()}});
    report["tensor_parallel"] =
        tensorParallelReport(st, T, virtualTp, lo.ncclRank, perRank, tpCheck);
  }
  if (!st.stepMs.empty())
    report["step_profile"] = stepProfile(program, st, stderr);
  if (!opt.report.empty() && !writeFileAtomically(opt.report, report.dump(2) + "\n", error))
    return fail(kExitBadInput, error);
  std::printf("next token id: %lld\n", static_cast<long long>(next));
  printParallelSummary(st, ls, T, virtualTp, tpCheck, ringBytes, ringMs);
  std::printf("prefill: %lld tokens in %.1f ms (%.0f tokens/s) on %s (GPU %d, %s); weights "
              "%.2f GiB loaded in %.1f ms; total %.1f ms\n",
              static_cast<long long>(S), st.ttftMs, tokensPerS, dev.name.c_str(), dev.ordinal,
              ls.code.c_str(), static_cast<double>(ls.weightBytes) / (1ull << 30),
              ls.loadWeightsMs, totalMs);
  workerExit.ok = true;
  if (virtualTp && (!tpCheck.outputsMatch || !tpCheck.logsMatch))
    return fail(kExitInternal, "virtual tensor parallelism: " +
                                   (!tpCheck.outputsMatch ? tpCheck.outputsNote : tpCheck.logsNote));
  return 0;
}

} // namespace h20run
