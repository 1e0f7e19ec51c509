//===- RunCommon.h - what h20-run's files share ---------------*- C++ -*-===//
//
// The command line (Options), exit codes and error reporting of h20-run, and
// the entry points of its parts: Options.cpp (the command line), GpuRun.cpp
// (GPU artifacts: one GPU, context and tensor parallel), h20-run.cpp (main,
// CPU artifacts).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TOOLS_H20RUN_RUNCOMMON_H
#define H20_TOOLS_H20RUN_RUNCOMMON_H

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace h20run {

constexpr int kExitInternal = 1, kExitBadInput = 2, kExitResources = 3;

/// "rank R: " in a process of a multi-GPU job (WORLD_SIZE > 1), so the
/// messages of N ranks can be told apart.
extern std::string gRankPrefix;
extern int gLastFailure; ///< the exit code fail() last returned

struct Options {
  std::string artifact, ids, device, dumpLogits, report, inputsFrom, outputsTo, weightsDir;
  char **argv = nullptr; ///< the command line, for the ranks h20-run starts
  int64_t warmup = 1; ///< GPU: warm-up prefills before the measured one
  int64_t repeat = 1; ///< GPU: measured prefills (the report gives their median)
  int64_t gpus = 0;   ///< --gpus; 0: not given
  bool noCudaGraph = false;
  bool profileSteps = false;
  bool dummyWeights = false; ///< --dummy-weights
  bool tuneGemms = false;    ///< --tune-gemms
  bool virtualRanks = false; ///< --virtual-ranks
  /// 0: --quiet (errors only), 1: default (progress on a terminal, the
  /// summary), 2: --verbose (progress always).
  int verbosity = 1;
  std::vector<std::pair<std::string, std::string>> inputs, outputs; ///< NAME=PATH
};

/// Whether progress lines go to stderr: --verbose, or by default when
/// stderr is a terminal.
bool showProgress(const Options &opt);

/// The usage text (--help).
extern const char *kUsage;

/// Parses the command line into `o`; false with `error` on a bad one.
bool parseArgs(int argc, char **argv, Options &o, std::string &error);

/// Prints "h20-run: error: MESSAGE" (with the rank prefix) and returns
/// `code`; `bug` marks internal errors as h20's to report.
int fail(int code, const std::string &message, bool bug = true);

/// Milliseconds since `t0`.
double msSince(std::chrono::steady_clock::time_point t0);

/// Runs a GPU artifact: parses its "gpu" program, loads it (weights streamed
/// to the GPU), runs the prefill, writes what was asked and the report.
/// Returns the process exit code.
int runOnGpu(const Options &opt, const h20::runtime::Artifact &artifact,
             const h20::runtime::Manifest &m, const std::vector<h20::runtime::HostTensor> &inputs,
             int64_t S, bool generic, std::chrono::steady_clock::time_point tStart);

} // namespace h20run

#endif // H20_TOOLS_H20RUN_RUNCOMMON_H
