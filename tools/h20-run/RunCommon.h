//===- RunCommon.h - what h20-run's files share ---------------*- C++ -*-===//
//
// The command line (Options), exit codes, error reporting and the writing
// of results shared by h20-run's parts: Options.cpp (the command line),
// GpuRun.cpp (GPU artifacts: one GPU, context and tensor parallel),
// h20-run.cpp (main, CPU artifacts, the shared writers).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TOOLS_H20RUN_RUNCOMMON_H
#define H20_TOOLS_H20RUN_RUNCOMMON_H

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/RunOutputs.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace h20run {

constexpr int kExitInternal = 1, kExitBadInput = 2, kExitResources = 3;

/// "rank R: " in a process of a multi-GPU job (WORLD_SIZE > 1), so the
/// messages of N ranks can be told apart.
extern std::string gRankPrefix;
extern int gLastFailure; ///< the exit code fail() last returned

/// The command line: the files (RunFiles) and how to run.
struct Options : h20::runtime::RunFiles {
  std::string device, weightsDir;
  char **argv = nullptr; ///< the command line, for the ranks h20-run starts
  int64_t warmup = 1; ///< GPU: warm-up prefills before the measured one
  int64_t repeat = 1; ///< GPU: measured prefills (the report gives their median)
  int64_t gpus = 0;   ///< --gpus; 0: not given
  bool noCudaGraph = false, profileSteps = false, dummyWeights = false, tuneGemms = false;
  bool virtualRanks = false;
  /// 0: --quiet (errors only), 1: default (progress on a terminal, the
  /// summary), 2: --verbose (progress always).
  int verbosity = 1;
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

/// Writes the outputs asked for (--output, --outputs-to) and, for a
/// token-id run (--ids), reads the next token off output 0 into `next` and
/// writes --dump-logits. False with `error`.
bool writeOutputs(const Options &opt, const std::vector<h20::runtime::HostTensor> &outputs,
                  int64_t &next, std::string &error);

/// Writes `report` to --report when given (atomically). False with `error`.
bool writeReport(const Options &opt, const nlohmann::json &report, std::string &error);

/// The end of a graph run (--input / --inputs-from): its report
/// (graphRunReport) and "ran I input(s) -> O output(s) in T ms on WHERE".
/// Returns the process exit code.
int finishGraphRun(const Options &opt, size_t inputs,
                   const std::vector<h20::runtime::HostTensor> &outputs, const std::string &device,
                   const std::string &gpu, double ms, const std::string &where);

/// Runs a GPU artifact: parses its "gpu" program, plans the job, loads it
/// (weights streamed to the GPU), runs the prefill, writes what was asked
/// and the report. `S`: the prompt's tokens, 0 for a graph run. Returns the
/// process exit code.
int runOnGpu(const Options &opt, const h20::runtime::Artifact &artifact,
             const h20::runtime::Manifest &m, const std::vector<h20::runtime::HostTensor> &inputs,
             int64_t S, std::chrono::steady_clock::time_point tStart);

} // namespace h20run

#endif // H20_TOOLS_H20RUN_RUNCOMMON_H
