//===- GpuRun.cpp - h20-run for GPU artifacts -----------------------------===//
//
// The job is planned before the GPU is touched (planGpuJob: ranks, parallel
// mode, run plan); then this process either starts the N ranks
// (RankLauncher) or runs its own share through GpuPrefill, and writes what
// was asked and the report (GpuReport). See RunCommon.h.
//
//===----------------------------------------------------------------------===//
#include "RunCommon.h"

#include "h20/Runtime/Cuda/GpuPrefill.h"
#include "h20/Runtime/Cuda/GpuReport.h"
#include "h20/Runtime/Parallel/RankLauncher.h"

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
             const std::vector<HostTensor> &inputs, int64_t S,
             std::chrono::steady_clock::time_point tStart) {
  std::string error;
  GpuProgram program;
  if (!parseGpuProgram(artifact.manifest, m, artifact.payload.size(), program, error))
    return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  GpuJobRequest rq{opt, opt.artifact, S};
  GpuJob job;
  if (!planGpuJob(m, program, inputs, rq, [](const char *name) { return std::getenv(name); },
                  job, error))
    return fail(kExitBadInput, error);
  const GpuLoadOptions &lo = job.load;
  if (job.mode == RankMode::Launch) {
    // One clear message here rather than one per rank.
    if (!checkGpusVisible(lo.ncclRanks, error))
      return fail(kExitBadInput, error);
    return launchRanks(lo.ncclRanks, "/proc/self/exe", opt.argv);
  }
  WorkerExit workerExit{job.mode == RankMode::Worker, false};
  GpuPrefill prefill;
  if (GpuStatus s = prefill.load(artifact, m, program, lo, job.virtualTpRanks, error);
      s != GpuStatus::Ok)
    return fail(s, error);
  if (opt.verbosity > 0)
    printLoadNotes(prefill, stderr);
  if (opt.showProgress())
    printLoadSummary(prefill, stderr);
  if (program.chunking && opt.showProgress() && job.contextRanks < 2)
    job.run.progress = printChunkProgress;
  if (GpuStatus s = prefill.run(inputs, job.run, opt.warmup, opt.repeat, error);
      s != GpuStatus::Ok)
    return fail(s, error);
  const std::vector<HostTensor> &outputs = prefill.ranks()[0].outputs;
  const GpuRunStats &st = prefill.ranks()[0].st;
  const GpuDeviceInfo &dev = prefill.executor().device();

  if (job.mode == RankMode::Worker) {
    if (!writeRankLog(lo.ncclRank, rankLog(prefill, lo.ncclRank).dump(1) + "\n", error))
      return fail(kExitBadInput, error);
    // Context parallelism: the rank holding the last position has the
    // logits; tensor parallelism: every rank has them, rank 0 writes.
    if ((job.tensorParallel > 1 ? 0 : st.cpOutputRank) != lo.ncclRank) {
      workerExit.ok = true;
      return 0;
    }
  }
  GpuReportContext rc = gpuReportContext(rq, job);
  if (!writeRunOutputs(opt, outputs, rc.nextToken, error))
    return fail(kExitBadInput, error);
  if (opt.ids.empty()) {
    int code = finishGraphRun(opt, inputs.size(), outputs, "gpu", dev.name, st.ttftMs,
                              dev.name + " (GPU " + std::to_string(dev.ordinal) + ")");
    workerExit.ok = code == 0;
    return code;
  }
  rc.totalMs = msSince(tStart);
  nlohmann::json report =
      gpuRunReport(m, program, prefill, rc, opt.verbosity > 0 ? stderr : nullptr);
  if (!writeRunReport(opt, report, error))
    return fail(kExitBadInput, error);
  if (opt.verbosity > 0)
    printGpuSummary(prefill, rc, job.tensorParallel, stdout);
  workerExit.ok = true;
  const TpCheck &tc = prefill.tpCheck();
  if (!tc.outputsMatch || !tc.logsMatch)
    return fail(kExitInternal, "virtual tensor parallelism: " +
                                   (!tc.outputsMatch ? tc.outputsNote : tc.logsNote));
  return 0;
}

} // namespace h20run
