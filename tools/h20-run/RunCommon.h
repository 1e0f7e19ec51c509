//===- RunCommon.h - what h20-run's files share ---------------*- C++ -*-===//
//
// What h20-run's parts share: Options.cpp (the command line), GpuRun.cpp
// (GPU artifacts: one GPU, context and tensor parallel), h20-run.cpp (main,
// CPU artifacts, errors and exit codes).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TOOLS_H20RUN_RUNCOMMON_H
#define H20_TOOLS_H20RUN_RUNCOMMON_H

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/RunOutputs.h"
#include "h20/Runtime/RunPlan.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>
#include <unistd.h>

namespace h20run {

constexpr int kExitInternal = 1, kExitBadInput = 2, kExitResources = 3;

/// "rank R: " in a process of a multi-GPU job (WORLD_SIZE > 1), so the
/// messages of N ranks can be told apart.
extern std::string gRankPrefix;
extern int gLastFailure; ///< the exit code fail() last returned

/// The command line: the files (RunFiles) and how to run (RunFlags).
struct Options : h20::runtime::RunFiles, h20::runtime::RunFlags {
  char **argv = nullptr; ///< the command line, for the ranks h20-run starts
  /// 0: --quiet (errors only), 1: default (progress on a terminal, the
  /// summary), 2: --verbose (progress always).
  int verbosity = 1;
  /// Whether progress lines go to stderr: --verbose, or by default when
  /// stderr is a terminal.
  bool showProgress() const { return verbosity == 2 || (verbosity == 1 && isatty(STDERR_FILENO)); }
};

/// Parses the command line into `o`; false with `error` on a bad one.
bool parseArgs(int argc, char **argv, Options &o, std::string &error);

/// Prints "h20-run: error: MESSAGE" (with the rank prefix) and returns
/// `code`; `bug` marks internal errors as h20's to report.
int fail(int code, const std::string &message, bool bug = true);

/// Milliseconds since `t0`.
double msSince(std::chrono::steady_clock::time_point t0);

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
