//===- h20-run.cpp - run a compiled h20 artifact's prefill ---------------===//
//
// h20-run model.h20 --ids ids.npy [--device cpu] [--dump-logits out.npy]
//                   [--report report.json]
// Loads the artifact, checks the flags, output paths and prompt against it
// (RunPlan.h's chooseDevice, FileUtil.h, Prompt.h), and hands the run to
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

} // namespace h20run

using namespace h20run;

/// Runs a CPU artifact (CpuRun.h), writes what was asked and the report.
/// Returns the process exit code.
static int runOnCpu(const Options &opt, const Artifact &artifact, const Manifest &m,
                    const std::vector<HostTensor> &inputs, int64_t S, bool generic,
                    std::chrono::steady_clock::time_point tStart) {
  std::string error;
  CpuRunResult r;
  switch (runCpuPrefill(opt.artifact, artifact, m, inputs, opt.weightsDir, r, error)) {
  case CpuStatus::Ok: break;
  case CpuStatus::BadInput: return fail(kExitBadInput, error);
  case CpuStatus::Resources: return fail(kExitResources, error);
  case CpuStatus::Internal: return fail(kExitInternal, error);
  }
  // Requested outputs (--output / --outputs-to) are written in both modes:
  // a token-id prefill may return more than its logits (e.g. debug outputs).
  if (!writeRunOutputs(r.outputs, opt.outputsTo, opt.outputs, error))
    return fail(kExitBadInput, error);
  if (generic) {
    if (!opt.report.empty() &&
        !writeFileAtomically(
            opt.report,
            graphRunReport("cpu", "", r.prefillMs, inputs.size(), r.outputs).dump(2) + "\n",
            error))
      return fail(kExitBadInput, error);
    if (opt.verbosity > 0)
      std::printf("ran %zu input(s) -> %zu output(s) in %.1f ms on the CPU\n", inputs.size(),
                  m.outputs.size(), r.prefillMs);
    return 0;
  }
  int64_t next = 0;
  std::vector<float> logits;
  if (!nextToken(r.outputs[0], next, logits, error))
    return fail(kExitBadInput, error);
  if (!opt.dumpLogits.empty() &&
      !writeFileAtomically(opt.dumpLogits, encodeNpyF32(r.outputs[0].shape, logits.data()), error))
    return fail(kExitBadInput, error);
  nlohmann::json report = cpuRunReport(m, r, S, next, msSince(tStart));
  if (!opt.report.empty() && !writeFileAtomically(opt.report, report.dump(2) + "\n", error))
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
  // Outputs: checked before any work, so a bad path cannot leave some
  // outputs written and others not; none may overwrite an input or another.
  {
    for (auto &o : opt.outputs)
      if (std::none_of(m.outputs.begin(), m.outputs.end(),
                       [&](const TensorSpec &t) { return t.name == o.first; }))
        return fail(kExitBadInput,
                    "--output '" + o.first + "': the model has no output of that name");
    std::vector<std::string> outs;
    for (const std::string *p : {&opt.dumpLogits, &opt.report})
      if (!p->empty())
        outs.push_back(*p);
    for (auto &o : opt.outputs)
      outs.push_back(o.second);
    for (size_t j = 0; !opt.outputsTo.empty() && j < m.outputs.size(); ++j)
      outs.push_back(opt.outputsTo + "/output_" + std::to_string(j) + ".pb");
    std::vector<std::string> ins{opt.artifact};
    if (!opt.ids.empty())
      ins.push_back(opt.ids);
    for (auto &i : opt.inputs)
      ins.push_back(i.second);
    for (size_t j = 0; !opt.inputsFrom.empty() && j < m.inputs.size(); ++j)
      ins.push_back(opt.inputsFrom + "/input_" + std::to_string(j) + ".pb");
    if (!checkOutputFiles(outs, ins, error))
      return fail(kExitBadInput, error);
    if (opt.ids.empty() && !opt.dumpLogits.empty())
      return fail(kExitBadInput, "--dump-logits needs a token-id prefill (--ids); write a "
                                 "graph's outputs with --output NAME=PATH or --outputs-to DIR");
  }
#if defined(__x86_64__)
  if (m.cpu == "x86-64-v3" &&
      !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return fail(kExitBadInput, "'" + opt.artifact +
                                   "' was compiled for x86-64-v3 (AVX2, FMA), which this CPU lacks");
#endif
  DeviceRequest dr;
  dr.device = opt.device;
  dr.gpus = opt.gpus;
  dr.worldSize = worldEnv ? worldEnv : "";
  dr.dummyWeights = opt.dummyWeights;
  dr.tuneGemms = opt.tuneGemms;
  bool onGpu = false;
  if (!chooseDevice(m, opt.artifact, dr, onGpu, error))
    return fail(kExitBadInput, error);

  // Inputs: token ids (the LLM path) or named tensors (any graph).
  bool generic = opt.ids.empty();
  std::vector<HostTensor> inputs(m.inputs.size());
  int64_t S = 0;
  if (!generic) {
    std::vector<int64_t> ids;
    HostTensor prompt;
    if (!takesTokenIds(m, error) || !readTokenIds(opt.ids, ids, error) ||
        !promptFromIds(m, ids, prompt, error))
      return fail(kExitBadInput, error);
    inputs = {prompt};
    S = static_cast<int64_t>(ids.size());
  } else if (!readNamedInputs(m, opt.inputs, opt.inputsFrom, inputs, error)) {
    return fail(kExitBadInput, error);
  }

  {
    // Dims the model names alike are one value in the compiled code.
    std::vector<std::vector<int64_t>> shapes;
    for (const HostTensor &t : inputs)
      shapes.push_back(t.shape);
    if (!checkDimParams(m.inputs, shapes, error))
      return fail(kExitBadInput, error);
    // Index inputs within the ranges the compiler recorded (ONNX: an
    // out-of-range index is an error; the kernels would only clamp).
    if (!checkValueRanges(m.inputs, inputs, error))
      return fail(kExitBadInput, error);
  }

  if (onGpu)
    return runOnGpu(opt, artifact, m, inputs, S, generic, tStart);

  return runOnCpu(opt, artifact, m, inputs, S, generic, tStart);
}
