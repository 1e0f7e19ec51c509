//===- Manifest.cpp - an artifact's manifest.json, parsed ----------------===//
//
// The manifest comes from a file h20-run is given: every number is checked
// for its JSON type and range here, so the runtime's size arithmetic (element
// counts, byte sizes, indices into the inputs) cannot overflow or index out
// of bounds whatever the file says.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/WeightDerive.h"

#include "h20/Runtime/Format/TensorIO.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <cstring>
#include <map>
#include <stdexcept>

namespace h20::runtime {
namespace {
using json = nlohmann::json;

/// A manifest field with the wrong type or an out-of-range value.
struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An integer in [lo, hi]; floats, strings, ... are refused (nlohmann's
/// get<int>() would convert a float, undefined behaviour when out of range).
int64_t integer(const json &j, const std::string &what, int64_t lo = INT64_MIN,
                int64_t hi = INT64_MAX) {
  if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))
    throw Invalid(what + " is out of range");
  if (!j.is_number_integer())
    throw Invalid(what + " must be an integer");
  int64_t v = j.get<int64_t>();
  if (v < lo || v > hi)
    throw Invalid(what + " is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  return v;
}

std::string stringOf(const json &j, const std::string &what) {
  if (!j.is_string())
    throw Invalid(what + " must be a string");
  return j.get<std::string>();
}

const json &arrayOf(const json &j, const std::string &what) {
  if (!j.is_array())
    throw Invalid(what + " must be an array");
  return j;
}

/// Dims: -1 (dynamic) where `dynamicOk`, else >= 0; at most 2^50 elements
/// over the static ones.
std::vector<int64_t> shapeOf(const json &j, const std::string &what, bool dynamicOk) {
  std::vector<int64_t> shape;
  for (const json &d : arrayOf(j, what))
    shape.push_back(integer(d, what + " dim", dynamicOk ? -1 : 0, INT64_MAX));
  if (shape.size() > 64)
    throw Invalid(what + " has rank " + std::to_string(shape.size()) + " (at most 64)");
  std::vector<int64_t> fixed;
  for (int64_t d : shape)
    fixed.push_back(d < 0 ? 1 : d);
  int64_t n;
  if (!elementCount(fixed, n))
    throw Invalid(what + " has more than 2^50 elements");
  return shape;
}

std::string dtypeOf(const json &j, const std::string &what) {
  std::string t = stringOf(j, what);
  if (dtypeSize(t) == 0)
    throw Invalid(what + " '" + t + "' is not a dtype this runtime supports");
  return t;
}

/// {"constant": c, "terms": [{"input", "dim", "coeff"}]}: c + sum(coeff *
/// input dim), |c| <= 2^50, |coeff| <= 2^20 (so every product fits).
DimSum dimSum(const json &d, const std::string &what) {
  if (!d.is_object())
    throw Invalid(what + " must be an object");
  DimSum sum;
  sum.constant = integer(d.at("constant"), what + " constant", -(int64_t(1) << 50),
                         int64_t(1) << 50);
  for (const json &term : arrayOf(d.at("terms"), what + " terms"))
    sum.terms.push_back(
        {static_cast<int>(integer(term.at("input"), what + " input", 0, INT_MAX)),
         static_cast<int>(integer(term.at("dim"), what + " dim", 0, INT_MAX)),
         integer(term.at("coeff"), what + " coeff", -(int64_t(1) << 20), int64_t(1) << 20)});
  return sum;
}

TensorSpec tensorSpec(const json &j, const std::string &what) {
  if (!j.is_object())
    throw Invalid(what + " must be an object");
  TensorSpec t;
  t.name = j.value("name", "");
  t.dtype = dtypeOf(j.at("dtype"), what + " dtype");
  t.shape = shapeOf(j.at("shape"), what + " shape", /*dynamicOk=*/true);
  if (j.contains("dims_from"))
    for (const json &d : arrayOf(j.at("dims_from"), what + " dims_from")) {
      if (d.is_null())
        t.dimsFrom.push_back(std::nullopt);
      else
        t.dimsFrom.push_back(std::make_pair(
            static_cast<int>(integer(d.at("input"), what + " dims_from input", 0, INT_MAX)),
            static_cast<int>(integer(d.at("dim"), what + " dims_from dim", 0, INT_MAX))));
    }
  if (j.contains("dims_sum"))
    for (const json &d : arrayOf(j.at("dims_sum"), what + " dims_sum")) {
      if (d.is_null()) {
        t.dimSums.push_back(std::nullopt);
        continue;
      }
      t.dimSums.push_back(dimSum(d, what + " dims_sum"));
    }
  if (j.contains("value_ranges"))
    for (const json &r : arrayOf(j.at("value_ranges"), what + " value_ranges")) {
      if (!r.is_object())
        throw Invalid(what + " value_ranges entry must be an object");
      t.valueRanges.push_back({dimSum(r.at("lo"), what + " value_ranges lo"),
                               dimSum(r.at("hi"), what + " value_ranges hi"),
                               r.contains("why") ? stringOf(r.at("why"), what + " value_ranges why")
                                                 : std::string()});
    }
  if (j.contains("dim_params")) {
    for (const json &d : arrayOf(j.at("dim_params"), what + " dim_params"))
      t.dimParams.push_back(stringOf(d, what + " dim_param"));
    if (t.dimParams.size() != t.shape.size())
      throw Invalid(what + " has " + std::to_string(t.dimParams.size()) + " dim_params for " +
                    std::to_string(t.shape.size()) + " dims");
  }
  return t;
}

/// The top-level "cpu_chunked" object (CpuChunking).
CpuChunking cpuChunking(const json &j) {
  const std::string what = "cpu_chunked";
  if (!j.is_object())
    throw Invalid(what + " must be an object");
  CpuChunking c;
  c.chunk = integer(j.at("chunk"), what + " chunk", 1, int64_t(1) << 20);
  c.capacity = integer(j.at("capacity"), what + " capacity", c.chunk, int64_t(1) << 40);
  c.output = stringOf(j.at("output"), what + " output");
  if (c.output != "rows" && c.output != "last")
    throw Invalid(what + " output must be \"rows\" or \"last\", got \"" + c.output + "\"");
  for (const json &k : arrayOf(j.at("caches"), what + " caches")) {
    std::string name = what + " cache " + std::to_string(c.caches.size());
    c.caches.push_back({dtypeOf(k.at("dtype"), name + " dtype"),
                        shapeOf(k.at("shape"), name + " shape", /*dynamicOk=*/false)});
  }
  return c;
}

/// The top-level "parallel" object.
ParallelPlan parallelPlan(const json &j) {
  const std::string what = "parallel";
  if (!j.is_object())
    throw Invalid(what + " must be an object");
  ParallelPlan p;
  if (!j.contains("gpus"))
    throw Invalid(what + " has no \"gpus\"");
  p.gpus = static_cast<int>(integer(j.at("gpus"), what + " gpus", 1, 1024));
  if (!j.contains("plan"))
    throw Invalid(what + " has no \"plan\"");
  p.plan = stringOf(j.at("plan"), what + " plan");
  if (p.plan != "context" && p.plan != "tensor")
    throw Invalid(what + " plan '" + p.plan + "' is neither \"context\" nor \"tensor\"");
  if (!j.contains("tensor_parallel"))
    throw Invalid(what + " has no \"tensor_parallel\"");
  p.tensorParallel =
      static_cast<int>(integer(j.at("tensor_parallel"), what + " tensor_parallel", 1, 1024));
  if (p.plan == "tensor" && p.tensorParallel != p.gpus)
    throw Invalid(what + ": plan \"tensor\" needs tensor_parallel == gpus, got " +
                  std::to_string(p.tensorParallel) + " and " + std::to_string(p.gpus));
  if (p.plan == "context" && p.tensorParallel != 1)
    throw Invalid(what + ": plan \"context\" needs tensor_parallel 1, got " +
                  std::to_string(p.tensorParallel));
  if (j.contains("chosen_by") && !j.at("chosen_by").is_null()) {
    p.chosenBy = stringOf(j.at("chosen_by"), what + " chosen_by");
    if (p.chosenBy != "cost model" && p.chosenBy != "user")
      throw Invalid(what + " chosen_by '" + p.chosenBy +
                    "' is neither \"cost model\" nor \"user\"");
  }
  if (j.contains("predicted_ms") && !j.at("predicted_ms").is_null()) {
    const json &pm = j.at("predicted_ms");
    if (!pm.is_object())
      throw Invalid(what + " predicted_ms must be an object");
    for (const char *key : {"context", "tensor"}) {
      if (!pm.contains(key) || pm.at(key).is_null())
        continue;
      const json &v = pm.at(key);
      if (!v.is_number())
        throw Invalid(what + " predicted_ms " + key + " must be a number or null");
      (std::string(key) == "context" ? p.predictedContextMs : p.predictedTensorMs) =
          v.get<double>();
    }
  }
  if (j.contains("tokens") && !j.at("tokens").is_null())
    p.tokens = integer(j.at("tokens"), what + " tokens", 0);
  p.json = j.dump();
  return p;
}

/// A weight's "shard" against its device shape and the T ranks.
WeightShard weightShard(const json &j, const std::string &what, const std::vector<int64_t> &shape,
                        int ranks) {
  if (!j.is_object())
    throw Invalid(what + " must be an object");
  WeightShard s;
  if (!j.contains("axis") || !j.contains("full_shape") || !j.contains("starts"))
    throw Invalid(what + " needs \"axis\", \"full_shape\" and \"starts\"");
  s.fullShape = shapeOf(j.at("full_shape"), what + " full_shape", /*dynamicOk=*/false);
  if (s.fullShape.size() != shape.size())
    throw Invalid(what + " full_shape has rank " + std::to_string(s.fullShape.size()) +
                  ", the weight's shape " + std::to_string(shape.size()));
  if (shape.empty())
    throw Invalid(what + ": a scalar cannot be sharded");
  s.axis = static_cast<int>(
      integer(j.at("axis"), what + " axis", 0, static_cast<int64_t>(shape.size()) - 1));
  for (size_t i = 0; i < shape.size(); ++i)
    if (static_cast<int>(i) != s.axis && shape[i] != s.fullShape[i])
      throw Invalid(what + " full_shape dim " + std::to_string(i) + " is " +
                    std::to_string(s.fullShape[i]) + " but the weight's shape has " +
                    std::to_string(shape[i]) + " (only axis " + std::to_string(s.axis) +
                    " may differ)");
  const int64_t size = shape[s.axis], full = s.fullShape[s.axis];
  if (size > full)
    throw Invalid(what + ": the shard's " + std::to_string(size) + " elements along axis " +
                  std::to_string(s.axis) + " exceed full_shape's " + std::to_string(full));
  for (const json &v : arrayOf(j.at("starts"), what + " starts")) {
    std::string sw = what + " starts[" + std::to_string(s.starts.size()) + "]";
    int64_t start = integer(v, sw, 0);
    if (start > full - size)
      throw Invalid(sw + " is " + std::to_string(start) + ": the slice [" +
                    std::to_string(start) + ", " + std::to_string(start + size) + ") along axis " +
                    std::to_string(s.axis) + " ends past full_shape's " + std::to_string(full));
    s.starts.push_back(start);
  }
  if (static_cast<int>(s.starts.size()) != ranks)
    throw Invalid(what + " starts has " + std::to_string(s.starts.size()) +
                  " entries; the artifact has " + std::to_string(ranks) +
                  " tensor-parallel rank(s) (parallel.tensor_parallel)");
  return s;
}
} // namespace

bool parseManifest(const std::string &text, Manifest &m, std::string &error) {
  m = Manifest();
  try {
    json j = json::parse(text);
    if (!j.is_object() || j.value("format", "") != "h20-artifact") {
      error = "manifest is not an h20 artifact manifest";
      return false;
    }
    m.target = stringOf(j.at("target"), "target");
    m.logits = j.value("logits", "all");
    m.modelDir = j.value("model_dir", ".");
    // CPU artifacts call one entry symbol; GPU artifacts run their "gpu"
    // program (GpuProgram.h) and need none.
    if (m.target == "cpu" || j.contains("entry"))
      m.entrySymbol = stringOf(j.at("entry").at("symbol"), "entry symbol");
    m.cpu = j.value("cpu", "");
    if (j.contains("vocab_size"))
      m.vocabSize = integer(j.at("vocab_size"), "vocab_size", 0);
    if (j.contains("max_positions"))
      m.maxPositions = integer(j.at("max_positions"), "max_positions", 0);
    if (j.contains("parallel") && !j.at("parallel").is_null())
      m.parallel = parallelPlan(j.at("parallel"));
    if (j.contains("cpu_chunked") && !j.at("cpu_chunked").is_null())
      m.cpuChunking = cpuChunking(j.at("cpu_chunked"));
    for (const json &t : arrayOf(j.at("inputs"), "inputs"))
      m.inputs.push_back(tensorSpec(t, "input " + std::to_string(m.inputs.size())));
    for (const json &t : arrayOf(j.at("outputs"), "outputs"))
      m.outputs.push_back(tensorSpec(t, "output " + std::to_string(m.outputs.size())));
    // Every dims_from names an existing input dim.
    for (const TensorSpec &o : m.outputs)
      for (const auto &from : o.dimsFrom)
        if (from && (from->first >= static_cast<int>(m.inputs.size()) ||
                     from->second >= static_cast<int>(m.inputs[from->first].shape.size())))
          throw Invalid("output '" + o.name + "' dims_from names input " +
                        std::to_string(from->first) + " dim " + std::to_string(from->second) +
                        ", which does not exist");
    for (const json &w : arrayOf(j.at("weights"), "weights")) {
      std::string what = "weight " + std::to_string(m.weights.size());
      WeightSpec s;
      s.name = stringOf(w.at("name"), what + " name");
      s.file = w.value("file", "");
      s.dtype = dtypeOf(w.at("dtype"), what + " dtype");
      s.shape = shapeOf(w.at("shape"), what + " shape", /*dynamicOk=*/false);
      if (w.contains("offset"))
        s.offset = integer(w.at("offset"), what + " offset", 0);
      if (w.contains("length"))
        s.length = integer(w.at("length"), what + " length", 0);
      if (w.contains("file_size"))
        s.fileSize = integer(w.at("file_size"), what + " file_size", 0);
      if (w.contains("shard") && !w.at("shard").is_null())
        s.shard = weightShard(w.at("shard"), what + " ('" + s.name + "') shard", s.shape,
                              m.tensorParallel());
      if (w.contains("placement")) {
        s.placement = stringOf(w.at("placement"), what + " placement");
        if (s.placement != "host" && s.placement != "device")
          throw Invalid(what + " ('" + s.name + "') placement: \"" + s.placement +
                        "\" is neither \"host\" nor \"device\"");
      }
      if (w.contains("derive")) {
        s.derive = stringOf(w.at("derive"), what + " derive");
        s.sourceShape = shapeOf(w.at("source_shape"), what + " source_shape", false);
        std::string err;
        if (s.shard || !checkDerivedWeight(s, err))
          throw Invalid(what + " ('" + s.name + "'): " + (s.shard ? "a derived weight cannot "
                                                                    "be sharded" : err));
      }
      m.weights.push_back(std::move(s));
    }
    for (const json &b : arrayOf(j.at("blobs"), "blobs")) {
      std::string what = "blob " + std::to_string(m.blobs.size());
      m.blobs.push_back({stringOf(b.at("name"), what + " name"), stringOf(b.at("kind"), what + " kind"),
                         static_cast<uint64_t>(integer(b.at("offset"), what + " offset", 0)),
                         static_cast<uint64_t>(integer(b.at("size"), what + " size", 0))});
    }
  } catch (const std::exception &e) {
    error = std::string("manifest is invalid: ") + e.what();
    return false;
  }
  return true;
}

bool checkDimParams(const std::vector<TensorSpec> &inputs,
                    const std::vector<std::vector<int64_t>> &inputShapes, std::string &error) {
  struct Seen {
    size_t input, dim;
    int64_t size;
  };
  std::map<std::string, Seen> seen;
  for (size_t i = 0; i < inputs.size() && i < inputShapes.size(); ++i) {
    const TensorSpec &t = inputs[i];
    for (size_t k = 0; k < t.dimParams.size() && k < inputShapes[i].size(); ++k) {
      const std::string &name = t.dimParams[k];
      if (name.empty() || (k < t.shape.size() && t.shape[k] >= 0))
        continue;
      int64_t size = inputShapes[i][k];
      auto [it, inserted] = seen.try_emplace(name, Seen{i, k, size});
      if (inserted || it->second.size == size)
        continue;
      const Seen &s = it->second;
      error = "input '" + t.name + "' dim " + std::to_string(k) + " is " + std::to_string(size) +
              " but input '" + inputs[s.input].name + "' dim " + std::to_string(s.dim) + " is " +
              std::to_string(s.size) + "; the model names both '" + name +
              "', so they must be equal";
      return false;
    }
  }
  return true;
}

/// sum's value for inputs of these shapes; false when a term names no
/// input dim or the sum overflows.
static bool evaluateDimSum(const DimSum &sum, const std::vector<std::vector<int64_t>> &inputShapes,
                           int64_t &v) {
  v = sum.constant;
  for (const DimSum::Term &t : sum.terms) {
    if (t.input < 0 || t.input >= static_cast<int>(inputShapes.size()) || t.dim < 0 ||
        t.dim >= static_cast<int>(inputShapes[t.input].size()) ||
        __builtin_add_overflow(v, t.coeff * inputShapes[t.input][t.dim], &v))
      return false;
  }
  return true;
}

bool checkValueRanges(const std::vector<TensorSpec> &specs, const std::vector<HostTensor> &inputs,
                      std::string &error) {
  std::vector<std::vector<int64_t>> shapes;
  for (const HostTensor &t : inputs)
    shapes.push_back(t.shape);
  for (size_t i = 0; i < specs.size() && i < inputs.size(); ++i) {
    const TensorSpec &s = specs[i];
    const std::vector<uint8_t> &data = inputs[i].data;
    size_t width = inputs[i].dtype == "int64" ? 8 : inputs[i].dtype == "int32" ? 4 : 0;
    if (s.valueRanges.empty() || !width)
      continue;
    size_t n = data.size() / width;
    for (const ValueRange &r : s.valueRanges) {
      int64_t lo, hi;
      if (!evaluateDimSum(r.lo, shapes, lo) || !evaluateDimSum(r.hi, shapes, hi)) {
        error = "input '" + s.name + "': the range its values must lie in (" + r.why +
                ") cannot be evaluated on these input shapes";
        return false;
      }
      for (size_t k = 0; k < n; ++k) {
        int64_t v;
        if (width == 8) {
          std::memcpy(&v, data.data() + 8 * k, 8);
        } else {
          int32_t v32;
          std::memcpy(&v32, data.data() + 4 * k, 4);
          v = v32;
        }
        if (v >= lo && v < hi)
          continue;
        error = "input '" + s.name + "' element " + std::to_string(k) + " is " +
                std::to_string(v) + ", outside [" + std::to_string(lo) + ", " +
                std::to_string(hi) + ")" + (r.why.empty() ? "" : ", the range of the " + r.why) +
                "; ONNX makes an out-of-range index an error";
        return false;
      }
    }
  }
  return true;
}

bool resolveOutputShape(const TensorSpec &o, const std::vector<std::vector<int64_t>> &inputShapes,
                        std::vector<int64_t> &shape, std::string &error) {
  shape = o.shape;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] >= 0)
      continue;
    if ((k >= o.dimsFrom.size() || !o.dimsFrom[k]) && k < o.dimSums.size() && o.dimSums[k]) {
      // constant + sum(coeff * dim): |coeff| <= 2^20 and dims <= 2^50
      // (elementCount bounds every input), so each product fits; the sum
      // is checked as it grows.
      const DimSum &sum = *o.dimSums[k];
      int64_t v = sum.constant;
      bool ok = true;
      for (const DimSum::Term &t : sum.terms) {
        ok = t.input >= 0 && t.input < static_cast<int>(inputShapes.size()) && t.dim >= 0 &&
             t.dim < static_cast<int>(inputShapes[t.input].size()) &&
             !__builtin_add_overflow(v, t.coeff * inputShapes[t.input][t.dim], &v);
        if (!ok)
          break;
      }
      if (!ok || v < 0) {
        error = "output '" + o.name + "' dim " + std::to_string(k) +
                " cannot be sized from the inputs (its size would be " +
                (ok ? std::to_string(v) : std::string("out of range")) + ")";
        return false;
      }
      shape[k] = v;
      continue;
    }
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
  int64_t n;
  if (!elementCount(shape, n)) {
    error = "output '" + o.name + "' would have more than 2^50 elements";
    return false;
  }
  return true;
}

} // namespace h20::runtime
