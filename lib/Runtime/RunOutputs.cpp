//===- RunOutputs.cpp - the files a run names, what a run writes ---------===//
#include "h20/Runtime/RunOutputs.h"

#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Prompt.h"

#include <algorithm>

namespace h20::runtime {

bool checkRunFiles(const Manifest &m, const RunFiles &f, std::string &error) {
  for (const auto &o : f.outputs)
    if (std::none_of(m.outputs.begin(), m.outputs.end(),
                     [&](const TensorSpec &t) { return t.name == o.first; })) {
      error = "--output '" + o.first + "': the model has no output of that name";
      return false;
    }
  std::vector<std::string> outs, ins{f.artifact};
  for (const std::string *p : {&f.dumpLogits, &f.report})
    if (!p->empty())
      outs.push_back(*p);
  for (const auto &o : f.outputs)
    outs.push_back(o.second);
  for (size_t j = 0; !f.outputsTo.empty() && j < m.outputs.size(); ++j)
    outs.push_back(backendTestFile(f.outputsTo, "output", j));
  if (!f.ids.empty())
    ins.push_back(f.ids);
  for (const auto &i : f.inputs)
    ins.push_back(i.second);
  for (size_t j = 0; !f.inputsFrom.empty() && j < m.inputs.size(); ++j)
    ins.push_back(backendTestFile(f.inputsFrom, "input", j));
  if (!checkOutputFiles(outs, ins, error))
    return false;
  if (f.ids.empty() && !f.dumpLogits.empty()) {
    error = "--dump-logits needs a token-id prefill (--ids); write a graph's outputs with "
            "--output NAME=PATH or --outputs-to DIR";
    return false;
  }
  return true;
}

bool writeRunOutputs(const RunFiles &files, const std::vector<HostTensor> &outputs,
                     int64_t &next, std::string &error) {
  // Requested outputs are written in both modes: a token-id prefill may
  // return more than its logits (e.g. debug outputs).
  for (size_t j = 0; j < outputs.size(); ++j) {
    const HostTensor &t = outputs[j];
    std::vector<std::string> paths;
    if (!files.outputsTo.empty())
      paths.push_back(backendTestFile(files.outputsTo, "output", j));
    for (const auto &[name, path] : files.outputs)
      if (name == t.name)
        paths.push_back(path);
    for (const std::string &path : paths)
      if (!writeTensorFile(path, t, error)) {
        error = "output '" + t.name + "': " + error;
        return false;
      }
  }
  if (files.ids.empty())
    return true;
  std::vector<float> logits;
  return nextToken(outputs[0], next, logits, error) &&
         (files.dumpLogits.empty() ||
          writeFileAtomically(files.dumpLogits, encodeNpyF32(outputs[0].shape, logits.data()),
                              error));
}

bool writeRunReport(const RunFiles &files, const nlohmann::json &report, std::string &error) {
  return files.report.empty() || writeFileAtomically(files.report, report.dump(2) + "\n", error);
}

nlohmann::json graphRunReport(const std::string &device, const std::string &gpu, double runMs,
                              size_t inputs, const std::vector<HostTensor> &outputs) {
  nlohmann::json outs = nlohmann::json::array();
  for (const HostTensor &t : outputs)
    outs.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
  nlohmann::json report{{"device", device}, {"run_ms", runMs}, {"inputs", inputs},
                        {"outputs", outs}};
  if (!gpu.empty())
    report["gpu"] = gpu;
  return report;
}

} // namespace h20::runtime
