//===- RunOutputs.h - what a graph run writes -------------------*- C++ -*-===//
//
// A run of any graph (named inputs, h20-run --input / --inputs-from) writes
// its outputs by name or in graph order, and a small report. The token-id
// prefill's report is the runners' (CpuRun.h, Cuda/GpuReport.h).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_RUNOUTPUTS_H
#define H20_RUNTIME_RUNOUTPUTS_H

#include "h20/Runtime/Format/TensorIO.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace h20::runtime {

/// Writes `outputs` (manifest order, named): output J as DIR/output_J.pb
/// when `outputsTo` is not empty (the ONNX backend-test layout), and each
/// (NAME, PATH) of `named` whose NAME is an output's (.npy or .pb by the
/// path's extension, TensorIO.h), each file atomically. False with `error`
/// naming the output and the file at the first failure.
bool writeRunOutputs(const std::vector<HostTensor> &outputs, const std::string &outputsTo,
                     const std::vector<std::pair<std::string, std::string>> &named,
                     std::string &error);

/// A graph run's report: {"device": cpu|gpu, "gpu": NAME (GPU runs only),
/// "run_ms", "inputs": count, "outputs": [{name, dtype, shape}]}.
nlohmann::json graphRunReport(const std::string &device, const std::string &gpu, double runMs,
                              size_t inputs, const std::vector<HostTensor> &outputs);

} // namespace h20::runtime

#endif // H20_RUNTIME_RUNOUTPUTS_H
