//===- h20-run.cpp - run a compiled h20 artifact's prefill ---------------===//
//
// h20-run model.h20 --ids ids.npy [--device cpu] [--dump-logits out.npy]
//                   [--report report.json]
// Loads the artifact, checks the flags, files and prompt against it
// (RunPlan.h's chooseDevice, RunOutputs.h, Prompt.h), and hands the run to
// the CPU runner (CpuRun.h, below) or the GPU one (GpuRun.cpp), which load
// the weights it references by byte range, run the prefill, and print the
// next token id and the time it took.
// Exit codes: 0 success, 1 internal error, 2 bad input, 3 out of resources.
// Plain C++: no MLIR in the runtime.
//
//===----------------------------------------------------------------------===//
#include "RunCommon.h"

#include "h20/Runtime/Cpu/CpuRun.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Prompt.h"
#include "h20/Runtime/RunOutputs.h"
#include "h20/Runtime/RunPlan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

using namespace h20::runtime;

namespace h20run {

std::string gRankPrefix;
int gLastFailure = 1;

int fail(int code, const std::string &message, bool bug) {
  gLastFailure = code;
  // The library's messages may already name the rank ("rank R: ...",
  // "rank R, layer ...").
  std::string own = gRankPrefix.substr(0, gRankPrefix.size() > 2 ? gRankPrefix.size() - 2 : 0);
  bool named = !own.empty() && message.rfind(own, 0) == 0 &&
               (message.size() == own.size() || !std::isdigit(static_cast<unsigned char>(message[own.size()])));
  std::fprintf(stderr, "h20-run: error: %s%s%s\n", named ? "" : gRankPrefix.c_str(),
               message.c_str(),
               code == kExitInternal && bug ? " (internal error; please report)" : "");
  return code;
}

bool showProgress(const Options &opt) {
  return opt.verbosity == 2 || (opt.verbosity == 1 && isatty(STDERR_FILENO));
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool writeOutputs(const Options &opt, const std::vector<HostTensor> &outputs, int64_t &next,
                  std::string &error) {
  // Requested outputs are written in both modes: a token-id prefill may
  // return more than its logits (e.g. debug outputs).
  if (!writeRunOutputs(outputs, opt.outputsTo, opt.outputs, error))
    return false;
  if (opt.ids.empty())
    return true;
  std::vector<float> logits;
  return nextToken(outputs[0], next, logits, error) &&
         (opt.dumpLogits.empty() ||
          writeFileAtomically(opt.dumpLogits, encodeNpyF32(outputs[0].shape, logits.data()),
                              error));
}

bool writeReport(const Options &opt, const nlohmann::json &report, std::string &error) {
  return opt.report.empty() || writeFileAtomically(opt.report, report.dump(2) + "\n", error);
}

int finishGraphRun(const Options &opt, size_t inputs, const std::vector<HostTensor> &outputs,
                   const std::string &device, const std::string &gpu, double ms,
                   const std::string &where) {
  std::string error;
  if (!writeReport(opt, graphRunReport(device, gpu, ms, inputs, outputs), error))
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
  if (!writeOutputs(opt, r.outputs, next, error))
    return fail(kExitBadInput, error);
  if (opt.ids.empty())
    return finishGraphRun(opt, inputs.size(), r.outputs, "cpu", "", r.prefillMs, "the CPU");
  nlohmann::json report = cpuRunReport(m, r, S, next, msSince(tStart));
  if (!writeReport(opt, report, error))
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
  const bool multiProcess = worldEnv && std::atoi(worldEnv) > 1;
  if (multiProcess && rankEnv)
    gRankPrefix = "rank " + std::string(rankEnv) + ": ";
  Options opt;
  std::string error;
  if (!parseArgs(argc, argv, opt, error))
    return fail(kExitBadInput, error + "\nusage: h20-run MODEL.h20 --ids IDS [OPTIONS] (h20-run "
                                       "--help lists them)");
  if (multiProcess && (!opt.inputs.empty() || !opt.inputsFrom.empty()))
    return fail(kExitBadInput, "an N-GPU prefill (WORLD_SIZE=" + std::string(worldEnv) +
                                   ") runs token ids: give --ids, not --input / --inputs-from");

  Artifact artifact;
  if (!readArtifact(opt.artifact, artifact, error))
    return fail(kExitBadInput, error);
  Manifest m;
  if (!parseManifest(artifact.manifest, m, error))
    return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  if (!checkRunFiles(m, opt, error))
    return fail(kExitBadInput, error);
  DeviceRequest dr;
  dr.device = opt.device;
  dr.gpus = opt.gpus;
  dr.worldSize = worldEnv ? worldEnv : "";
  dr.dummyWeights = opt.dummyWeights;
  dr.tuneGemms = opt.tuneGemms;
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
