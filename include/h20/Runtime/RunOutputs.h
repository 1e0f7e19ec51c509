//===- RunOutputs.h - the files a run names, what a run writes ---*- C++ -*-===//
//
// The files a run reads and writes (h20-run's flags), checked against the
// model before any work. A run of any graph (named inputs, h20-run --input /
// --inputs-from) writes its outputs by name or in graph order, and a small
// report. The token-id prefill's report is the runners' (CpuRun.h,
// Cuda/GpuReport.h).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_RUNOUTPUTS_H
#define H20_RUNTIME_RUNOUTPUTS_H

#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace h20::runtime {

/// The files of one run, as h20-run's flags name them; empty: not given.
struct RunFiles {
  std::string artifact;   ///< the compiled model (read)
  std::string ids;        ///< --ids: token ids (read)
  std::string inputsFrom; ///< --inputs-from DIR: DIR/input_J.pb (read)
  std::string dumpLogits; ///< --dump-logits: float32 .npy (written)
  std::string report;     ///< --report: JSON (written)
  std::string outputsTo;  ///< --outputs-to DIR: DIR/output_J.pb (written)
  std::vector<std::pair<std::string, std::string>> inputs, outputs; ///< NAME=PATH
};

/// Checks `files` against the model before any work, so that a bad path
/// cannot leave some outputs written and others not: every --output names
/// one of the model's outputs; every file written is writable and neither an
/// input nor another output (checkOutputFiles, FileUtil.h); --dump-logits
/// comes with --ids. False with `error` naming the flag or the path.
bool checkRunFiles(const Manifest &m, const RunFiles &files, std::string &error);

/// Writes what `files` asks of a run's `outputs` (manifest order, named),
/// each file atomically: output J as DIR/output_J.pb with --outputs-to (the
/// ONNX backend-test layout), each --output NAME=PATH whose NAME is an
/// output's (.npy or .pb by the path's extension, TensorIO.h); and, for a
/// token-id run (`files.ids` given), sets `next` to the next token read off
/// output 0 (the logits, Prompt.h nextToken) and writes them as float32 to
/// --dump-logits. False with `error` naming the output and the file at the
/// first failure.
bool writeRunOutputs(const RunFiles &files, const std::vector<HostTensor> &outputs,
                     int64_t &next, std::string &error);

/// Writes `report` to `files.report` (2-space JSON, atomically) when it is
/// given. False with `error`.
bool writeRunReport(const RunFiles &files, const nlohmann::json &report, std::string &error);

/// A graph run's report: {"device": cpu|gpu, "gpu": NAME (GPU runs only),
/// "run_ms", "inputs": count, "outputs": [{name, dtype, shape}]}.
nlohmann::json graphRunReport(const std::string &device, const std::string &gpu, double runMs,
                              size_t inputs, const std::vector<HostTensor> &outputs);

} // namespace h20::runtime

#endif // H20_RUNTIME_RUNOUTPUTS_H
