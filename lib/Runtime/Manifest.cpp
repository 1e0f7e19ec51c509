//===- Manifest.cpp - an artifact's manifest.json, parsed ----------------===//
#include "h20/Runtime/Manifest.h"

#include <nlohmann/json.hpp>

namespace h20::runtime {
namespace {
using json = nlohmann::json;

TensorSpec tensorSpec(const json &j) {
  TensorSpec t;
  t.name = j.value("name", "");
  t.dtype = j.at("dtype").get<std::string>();
  t.shape = j.at("shape").get<std::vector<int64_t>>();
  if (j.contains("dims_from"))
    for (const json &d : j.at("dims_from")) {
      if (d.is_null())
        t.dimsFrom.push_back(std::nullopt);
      else
        t.dimsFrom.push_back(std::make_pair(d.at("input").get<int>(), d.at("dim").get<int>()));
    }
  return t;
}
} // namespace

bool parseManifest(const std::string &text, Manifest &m, std::string &error) {
  try {
    json j = json::parse(text);
    if (j.value("format", "") != "h20-artifact") {
      error = "manifest is not an h20 artifact manifest";
      return false;
    }
    m.target = j.at("target").get<std::string>();
    m.logits = j.value("logits", "all");
    m.modelDir = j.value("model_dir", ".");
    // CPU artifacts call one entry symbol; GPU artifacts run their "gpu"
    // program (GpuProgram.h) and need none.
    if (m.target == "cpu" || j.contains("entry"))
      m.entrySymbol = j.at("entry").at("symbol").get<std::string>();
    m.cpu = j.value("cpu", "");
    if (j.contains("vocab_size"))
      m.vocabSize = j.at("vocab_size").get<int64_t>();
    if (j.contains("max_positions"))
      m.maxPositions = j.at("max_positions").get<int64_t>();
    for (const json &t : j.at("inputs"))
      m.inputs.push_back(tensorSpec(t));
    for (const json &t : j.at("outputs"))
      m.outputs.push_back(tensorSpec(t));
    for (const json &w : j.at("weights")) {
      WeightSpec s;
      s.name = w.at("name").get<std::string>();
      s.file = w.value("file", "");
      s.dtype = w.at("dtype").get<std::string>();
      s.shape = w.at("shape").get<std::vector<int64_t>>();
      if (w.contains("offset"))
        s.offset = w.at("offset").get<int64_t>();
      if (w.contains("length"))
        s.length = w.at("length").get<int64_t>();
      if (w.contains("file_size"))
        s.fileSize = w.at("file_size").get<int64_t>();
      m.weights.push_back(std::move(s));
    }
    for (const json &b : j.at("blobs"))
      m.blobs.push_back({b.at("name").get<std::string>(), b.at("kind").get<std::string>(),
                         b.at("offset").get<uint64_t>(), b.at("size").get<uint64_t>()});
  } catch (const std::exception &e) {
    error = std::string("manifest is invalid: ") + e.what();
    return false;
  }
  return true;
}

bool resolveOutputShape(const TensorSpec &o, const std::vector<std::vector<int64_t>> &inputShapes,
                        std::vector<int64_t> &shape, std::string &error) {
  shape = o.shape;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] >= 0)
      continue;
    if (k >= o.dimsFrom.size() || !o.dimsFrom[k] || o.dimsFrom[k]->first < 0 ||
        o.dimsFrom[k]->first >= static_cast<int>(inputShapes.size()) ||
        o.dimsFrom[k]->second < 0 ||
        o.dimsFrom[k]->second >= static_cast<int>(inputShapes[o.dimsFrom[k]->first].size())) {
      error = "output '" + o.name + "' dim " + std::to_string(k) +
              " cannot be sized from the inputs";
      return false;
    }
    shape[k] = inputShapes[o.dimsFrom[k]->first][o.dimsFrom[k]->second];
  }
  return true;
}

} // namespace h20::runtime
