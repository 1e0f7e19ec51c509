//===- RunOutputs.cpp - what a graph run writes --------------------------===//
#include "h20/Runtime/RunOutputs.h"

namespace h20::runtime {

bool writeRunOutputs(const std::vector<HostTensor> &outputs, const std::string &outputsTo,
                     const std::vector<std::pair<std::string, std::string>> &named,
                     std::string &error) {
  for (size_t j = 0; j < outputs.size(); ++j) {
    const HostTensor &t = outputs[j];
    std::vector<std::string> paths;
    if (!outputsTo.empty())
      paths.push_back(outputsTo + "/output_" + std::to_string(j) + ".pb");
    for (const auto &[name, path] : named)
      if (name == t.name)
        paths.push_back(path);
    for (const std::string &path : paths)
      if (!writeTensorFile(path, t, error)) {
        error = "output '" + t.name + "': " + error;
        return false;
      }
  }
  return true;
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
