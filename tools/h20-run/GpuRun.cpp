//===- GpuRun.cpp - h20-run for GPU artifacts -----------------------------===//
//
// The rank plan and the run plan are checked before the GPU is touched;
// then this process either starts the N ranks (RankLauncher) or runs its
// own share through GpuPrefill, and writes what was asked and the report
// (GpuReport). See RunCommon.h.
//
//===----------------------------------------------------------------------===//
#include "RunCommon.h"

#include "h20/Runtime/Cuda/GpuPrefill.h"
#include "h20/Runtime/Cuda/GpuReport.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Parallel/RankEnvironment.h"
#include "h20/Runtime/Parallel/RankLauncher.h"
#include "h20/Runtime/Prompt.h"
#include "h20/Runtime/RunOutputs.h"
#include "h20/Runtime/RunPlan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

using namespace h20::runtime;

namespace h20run {
namespace {

int fail(GpuStatus s, const std::string &message) {
  int code = s == GpuStatus::BadInput || s == GpuStatus::NoDevice ? kExitBadInput
             : s == GpuStatus::Resources                          ? kExitResources
                                                                  : kExitInternal;
  return h20run::fail(code, message, s != GpuStatus::PeerFailed);
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

/// "prefill: chunk i/n ..." on stderr after each chunk: rewritten in place
/// on a terminal, one line per chunk otherwise (--verbose into a log).
void printProgress(int64_t chunk, int64_t chunks, int64_t done, int64_t tokens, double ms) {
  static const bool terminal = isatty(STDERR_FILENO);
  std::fprintf(stderr, "%sprefill: chunk %lld/%lld, %lld/%lld tokens (%.1f ms)%s",
               terminal ? "\r" : "", static_cast<long long>(chunk + 1),
               static_cast<long long>(chunks), static_cast<long long>(done),
               static_cast<long long>(tokens), ms, terminal ? "\x1b[K" : "\n");
  if (terminal && chunk + 1 == chunks)
    std::fputc('\n', stderr);
  std::fflush(stderr);
}

// A rank of an N-GPU job that fails after joining NCCL leaves with _exit:
// the executor's destructor would call ncclCommDestroy, which waits for
// peers that have given up (or died).
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
  const int cpRanks = T > 1                      ? 0
                      : opt.virtualRanks         ? static_cast<int>(opt.gpus)
                      : mode != RankMode::Single ? lo.ncclRanks
                                                 : 0;
  if (cpRanks > 1 && opt.virtualRanks && (opt.gpus & (opt.gpus - 1)) != 0)
    return fail(kExitBadInput,
                "--virtual-ranks needs a power of two for --gpus (the prompt is cut into 2N "
                "equal chunks), got " + std::to_string(opt.gpus));
  // The run's whole plan before the GPU is touched; every executor plans
  // the same again in run().
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
  if (mode == RankMode::Launch) {
    // One clear message here rather than one per rank.
    int visible = GpuExecutor::deviceCount(error);
    if (visible < 0)
      return fail(kExitBadInput, "no CUDA-capable GPU/driver: " + error);
    if (visible < lo.ncclRanks)
      return fail(kExitBadInput, "--gpus " + std::to_string(lo.ncclRanks) + ": this machine has " +
                                     std::to_string(visible) + " GPU(s) visible");
    return launchRanks(lo.ncclRanks, "/proc/self/exe", opt.argv);
  }
  WorkerExit workerExit{mode == RankMode::Worker, false};
  GpuPrefill prefill;
  if (GpuStatus s = prefill.load(artifact, m, program, lo, virtualTp ? T : 0, error);
      s != GpuStatus::Ok)
    return fail(s, error);
  const GpuDeviceInfo &dev = prefill.executor().device();
  const GpuLoadStats &loaded = prefill.executor().loadStats();
  if (loaded.nccl.rfind("unavailable", 0) == 0 && opt.verbosity > 0)
    std::fprintf(stderr, "h20-run: note: NCCL %s; the 1-GPU prefill runs without it\n",
                 loaded.nccl.c_str());
  if (showProgress(opt)) {
    double gib = static_cast<double>(loaded.weightBytes) / (1ull << 30);
    std::fprintf(stderr, "h20-run: %s (GPU %d): weights %.2f GiB loaded in %.1f s (%.2f GiB/s), "
                 "%.2f GiB allocated, %s kernels\n",
                 dev.name.c_str(), dev.ordinal, gib, loaded.loadWeightsMs / 1000.0,
                 loaded.loadWeightsMs > 0 ? gib / (loaded.loadWeightsMs / 1000.0) : 0.0,
                 static_cast<double>(loaded.planBytes) / (1ull << 30), loaded.code.c_str());
  }
  GpuRunOptions ro;
  ro.n = generic ? 0 : S;
  ro.cudaGraph = !opt.noCudaGraph && cpRanks < 2;
  ro.profileSteps = opt.profileSteps;
  ro.virtualRanks = cpRanks > 1 && opt.virtualRanks ? cpRanks : 0;
  ro.contextParallel = mode == RankMode::Worker && T == 1;
  if (program.chunking && showProgress(opt) && cpRanks < 2)
    ro.progress = printProgress;
  if (GpuStatus s = prefill.run(inputs, ro, opt.warmup, opt.repeat, error); s != GpuStatus::Ok)
    return fail(s, error);
  const std::vector<HostTensor> &outputs = prefill.ranks()[0].outputs;
  const GpuRunStats &st = prefill.ranks()[0].st;

  if (mode == RankMode::Worker) {
    // The rank's log for the launcher (collectives compared across ranks).
    int me = lo.ncclRank;
    nlohmann::json log{{"rank", me},
                       {"gpu", dev.ordinal},
                       {"ttft_ms", st.ttftMs},
                       {"ttft_runs_ms", prefill.ranks()[0].runMs},
                       {"collectives", collectivesToJson(me < static_cast<int>(st.cpRankLog.size())
                                                             ? st.cpRankLog[me]
                                                             : std::vector<CpCollective>{})},
                       {"tp_collectives", tpCollectivesToJson(st.tpLog)}};
    if (!writeRankLog(me, log.dump(1) + "\n", error))
      return fail(kExitBadInput, error);
    // Context parallelism: the rank holding the last position has the
    // logits; tensor parallelism: every rank has them, rank 0 writes.
    if ((T > 1 ? 0 : st.cpOutputRank) != me) {
      workerExit.ok = true;
      return 0;
    }
  }
  if (!writeRunOutputs(outputs, opt.outputsTo, opt.outputs, error))
    return fail(kExitBadInput, error);
  if (generic) {
    if (!opt.report.empty() &&
        !writeFileAtomically(
            opt.report,
            graphRunReport("gpu", dev.name, st.ttftMs, inputs.size(), outputs).dump(2) + "\n",
            error))
      return fail(kExitBadInput, error);
    if (opt.verbosity > 0)
      std::printf("ran %zu input(s) -> %zu output(s) in %.1f ms on %s (GPU %d)\n",
                  inputs.size(), outputs.size(), st.ttftMs, dev.name.c_str(), dev.ordinal);
    workerExit.ok = true;
    return 0;
  }
  GpuReportContext rc;
  std::vector<float> logits;
  if (!nextToken(outputs[0], rc.nextToken, logits, error))
    return fail(kExitBadInput, error);
  if (!opt.dumpLogits.empty() &&
      !writeFileAtomically(opt.dumpLogits, encodeNpyF32(outputs[0].shape, logits.data()), error))
    return fail(kExitBadInput, error);
  rc.tokens = S;
  rc.totalMs = msSince(tStart);
  rc.warmup = opt.warmup;
  rc.physicalGpus = opt.virtualRanks ? 1 : std::max(lo.ncclRanks, 1);
  rc.ncclRank = lo.ncclRank;
  rc.virtualRanks = opt.virtualRanks;
  rc.gemmTuning = opt.tuneGemms;
  nlohmann::json report =
      gpuRunReport(m, program, prefill, rc, opt.verbosity > 0 ? stderr : nullptr);
  if (!opt.report.empty() && !writeFileAtomically(opt.report, report.dump(2) + "\n", error))
    return fail(kExitBadInput, error);
  if (opt.verbosity > 0)
    printGpuSummary(prefill, rc, T, stdout);
  workerExit.ok = true;
  const TpCheck &tc = prefill.tpCheck();
  if (!tc.outputsMatch || !tc.logsMatch)
    return fail(kExitInternal, "virtual tensor parallelism: " +
                                   (!tc.outputsMatch ? tc.outputsNote : tc.logsNote));
  return 0;
}

} // namespace h20run
