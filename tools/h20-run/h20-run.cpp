//===- h20-run.cpp - run a compiled h20 artifact's prefill ---------------===//
//
// main: the artifact, flags, files and prompt checked against each other
// (RunPlan.h chooseDevice, RunOutputs.h, Prompt.h), then the CPU runner
// (below) or the GPU one (GpuRun.cpp). h20-run --help lists the flags.
//
//===----------------------------------------------------------------------===//
#include "RunCommon.h"

#include "h20/Runtime/Cpu/CpuRun.h"
#include "h20/Runtime/Prompt.h"
#include "h20/Runtime/RunOutputs.h"
#include "h20/Runtime/RunPlan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace h20::runtime;

namespace h20run {

std::string gRankPrefix;
int gLastFailure = 1;

int fail(int code, const std::string &message, bool bug) {
  gLastFailure = code;
  // The library's messages may already name the rank ("rank R: ...",
  // "rank R, layer ...").
  // (message[size()] is '\0', not a digit.)
  const std::string own = gRankPrefix.substr(0, gRankPrefix.find(':'));
  const bool named = !own.empty() && message.rfind(own, 0) == 0 &&
                     !std::isdigit(static_cast<unsigned char>(message[own.size()]));
  std::fprintf(stderr, "h20-run: error: %s%s%s\n", named ? "" : gRankPrefix.c_str(),
               message.c_str(),
               code == kExitInternal && bug ? " (internal error; please report)" : "");
  return code;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int finishGraphRun(const Options &opt, size_t inputs, const std::vector<HostTensor> &outputs,
                   const std::string &device, const std::string &gpu, double ms,
                   const std::string &where) {
  std::string error;
  if (!writeRunReport(opt, graphRunReport(device, gpu, ms, inputs, outputs), error))
    return fail(kExitBadInput, error);
  if (opt.verbosity > 0)
    std::printf("ran %zu input(s) -> %zu output(s) in %.1f ms on %s\n", inputs, outputs.size(),
                ms, where.c_str());
  return 0;
}

} // namespace h20run

using namespace h20run;

/// Runs a CPU artifact (CpuRun.h), writes what was asked and the report.
/// Returns the process exit code.
static int runOnCpu(const Options &opt, const Artifact &artifact, const Manifest &m,
                    const std::vector<HostTensor> &inputs, int64_t S,
                    std::chrono::steady_clock::time_point tStart) {
  std::string error;
  CpuRunResult r;
  switch (runCpuPrefill(opt.artifact, artifact, m, inputs, opt.weightsDir, r, error)) {
  case CpuStatus::Ok: break;
  case CpuStatus::BadInput: return fail(kExitBadInput, error);
  case CpuStatus::Resources: return fail(kExitResources, error);
  case CpuStatus::Internal: return fail(kExitInternal, error);
  }
  int64_t next = 0;
  if (!writeRunOutputs(opt, r.outputs, next, error))
    return fail(kExitBadInput, error);
  if (opt.ids.empty())
    return finishGraphRun(opt, inputs.size(), r.outputs, "cpu", "", r.prefillMs, "the CPU");
  nlohmann::json report = cpuRunReport(m, r, S, next, msSince(tStart));
  if (!writeRunReport(opt, report, error))
    return fail(kExitBadInput, error);
  if (opt.verbosity > 0)
    printCpuSummary(report, stdout);
  return 0;
}

int main(int argc, char **argv) {
  auto tStart = std::chrono::steady_clock::now();
  // One process of a multi-process job (WORLD_SIZE > 1, as torchrun or
  // h20-run's own launcher sets it); gpuRanks validates the variables.
  const char *worldEnv = std::getenv("WORLD_SIZE"), *rankEnv = std::getenv("RANK");
  if (worldEnv && std::atoi(worldEnv) > 1 && rankEnv)
    gRankPrefix = "rank " + std::string(rankEnv) + ": ";
  Options opt;
  std::string error;
  if (!parseArgs(argc, argv, opt, error))
    return fail(kExitBadInput, error + "\nusage: h20-run MODEL.h20 --ids IDS [OPTIONS] (h20-run "
                                       "--help lists them)");

  Artifact artifact;
  if (!readArtifact(opt.artifact, artifact, error))
    return fail(kExitBadInput, error);
  Manifest m;
  if (!parseManifest(artifact.manifest, m, error))
    return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  if (!checkRunFiles(m, opt, error))
    return fail(kExitBadInput, error);
  DeviceRequest dr{opt, worldEnv ? worldEnv : "", !opt.inputs.empty() || !opt.inputsFrom.empty()};
  bool onGpu = false;
  if (!chooseDevice(m, opt.artifact, dr, onGpu, error))
    return fail(kExitBadInput, error);

  // Inputs: token ids (the LLM path, S tokens) or named tensors (any graph).
  std::vector<HostTensor> inputs;
  int64_t S = 0;
  if (!readRunInputs(m, opt.ids, opt.inputs, opt.inputsFrom, inputs, S, error))
    return fail(kExitBadInput, error);
  return onGpu ? runOnGpu(opt, artifact, m, inputs, S, tStart)
               : runOnCpu(opt, artifact, m, inputs, S, tStart);
}
