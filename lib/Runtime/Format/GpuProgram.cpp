//===- GpuProgram.cpp - parse, validate and resolve a GPU program --------===//
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/WeightDerive.h"

#include "h20/Runtime/Cuda/AttentionParams.h"
#include "h20/Runtime/Cuda/GemmPlan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace h20::runtime {
namespace {
using json = nlohmann::json;

/// A validation failure; the message already names where.
struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void invalid(std::string where, const std::string &what) {
  while (!where.empty() && (where.back() == ' ' || where.back() == ':'))
    where.pop_back();
  throw Invalid(where + ": " + what);
}

/// Bytes above which a size is refused as absurd (1 PiB): keeps every sum
/// and product of sizes below int64 overflow.
constexpr int64_t kMaxBytes = int64_t(1) << 50;

std::string describe(const json &v) {
  std::string s = v.dump();
  if (s.size() > 40)
    s = s.substr(0, 37) + "...";
  return s + " (" + v.type_name() + ")";
}

const json *find(const json &obj, const char *key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json &field(const json &obj, const char *key, const std::string &where) {
  if (!obj.is_object())
    invalid(where, "expected an object, got " + describe(obj));
  const json *v = find(obj, key);
  if (!v)
    invalid(where, std::string("missing field '") + key + "'");
  return *v;
}

std::string sub(const std::string &where, const char *key) {
  return where + (where.empty() || where.back() == ' ' ? "" : ".") + key;
}

int64_t asInt(const json &v, const std::string &where) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    invalid(where, "integer " + v.dump() + " does not fit in int64");
  if (!v.is_number_integer())
    invalid(where, "expected an integer, got " + describe(v));
  return v.get<int64_t>();
}

int64_t intField(const json &obj, const char *key, const std::string &where) {
  return asInt(field(obj, key, where), sub(where, key));
}

int64_t intField(const json &obj, const char *key, const std::string &where, int64_t dflt) {
  const json *v = obj.is_object() ? find(obj, key) : nullptr;
  return v && !v->is_null() ? asInt(*v, sub(where, key)) : dflt;
}

double asNumber(const json &v, const std::string &where) {
  if (!v.is_number())
    invalid(where, "expected a number, got " + describe(v));
  double d = v.get<double>();
  if (!std::isfinite(d))
    invalid(where, "expected a finite number");
  return d;
}

double numberField(const json &obj, const char *key, const std::string &where, double dflt) {
  const json *v = obj.is_object() ? find(obj, key) : nullptr;
  return v && !v->is_null() ? asNumber(*v, sub(where, key)) : dflt;
}

std::string asString(const json &v, const std::string &where) {
  if (!v.is_string())
    invalid(where, "expected a string, got " + describe(v));
  return v.get<std::string>();
}

std::string stringField(const json &obj, const char *key, const std::string &where) {
  return asString(field(obj, key, where), sub(where, key));
}

bool boolField(const json &obj, const char *key, const std::string &where, bool dflt) {
  const json *v = obj.is_object() ? find(obj, key) : nullptr;
  if (!v || v->is_null())
    return dflt;
  if (!v->is_boolean())
    invalid(sub(where, key), "expected true or false, got " + describe(*v));
  return v->get<bool>();
}

const json &arrayField(const json &obj, const char *key, const std::string &where) {
  const json &v = field(obj, key, where);
  if (!v.is_array())
    invalid(sub(where, key), "expected an array, got " + describe(v));
  return v;
}

int64_t elementCount(const std::vector<int64_t> &shape, const std::string &where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      invalid(where, "has a dynamic or negative dimension");
    if (d != 0 && n > kMaxBytes / d)
      invalid(where, "is too large");
    n *= d;
  }
  return n;
}

bool isGemmDtype(const std::string &t) {
  return t == "float32" || t == "float16" || t == "bfloat16";
}


/// A field the attention kernel's H20AttnParams must have.
struct AttentionField {
  size_t at;
  StructField::Kind kind;
  const char *name;
};

/// The fields role "attention" requires: the four views, their strides
/// and the sizes the kernel indexes with.
const std::vector<AttentionField> &attentionFields() {
  using P = H20AttnParams;
  static const std::vector<AttentionField> fields = [] {
    std::vector<AttentionField> f = {{offsetof(P, q), StructField::Pointer, "q"},
                                     {offsetof(P, k), StructField::Pointer, "k"},
                                     {offsetof(P, v), StructField::Pointer, "v"},
                                     {offsetof(P, o), StructField::Pointer, "o"},
                                     {offsetof(P, batch), StructField::I64, "batch"},
                                     {offsetof(P, heads), StructField::I64, "heads"},
                                     {offsetof(P, kv_heads), StructField::I64, "kv_heads"},
                                     {offsetof(P, sq), StructField::I64, "sq"},
                                     {offsetof(P, skv), StructField::I64, "skv"}};
    for (size_t d = 0; d < 4; ++d)
      for (size_t stride : {offsetof(P, q_stride), offsetof(P, k_stride), offsetof(P, v_stride),
                            offsetof(P, o_stride)})
        f.push_back({stride + 8 * d, StructField::I64, "a stride"});
    return f;
  }();
  return fields;
}

/// The index of `a`'s struct field at byte `at` of kind `kind`, or -1.
int findFieldIndex(const LaunchArg &a, size_t at, StructField::Kind kind) {
  for (size_t i = 0; i < a.fields.size(); ++i)
    if (a.fields[i].at == static_cast<int64_t>(at) && a.fields[i].kind == kind)
      return static_cast<int>(i);
  return -1;
}

/// Parses one program; throws Invalid.
class Parser {
public:
  Parser(const Manifest &m, uint64_t payloadSize, GpuProgram &p)
      : m(m), payloadSize(payloadSize), p(p) {}

  void parse(const json &g) {
    if (!g.is_object())
      invalid("gpu", "expected an object, got " + describe(g));
    parseArch(stringField(g, "arch", "gpu"));
    if (const json *s = find(g, "symbols"); s && !s->is_null()) {
      if (!s->is_array())
        invalid("gpu.symbols", "expected an array, got " + describe(*s));
      for (size_t i = 0; i < s->size(); ++i) {
        std::string where = "gpu.symbols[" + std::to_string(i) + "]";
        std::string name = asString((*s)[i], where);
        if (name != "p0" && name != "n" && name != "q" && name != "rank")
          invalid(where, "unknown symbol '" + name + "' (the runtime provides p0, n, q and rank)");
        if (std::count(p.symbols.begin(), p.symbols.end(), name))
          invalid(where, "symbol '" + name + "' is declared twice");
        p.symbols.push_back(name);
      }
    }
    if (const json *d = find(g, "derived"); d && !d->is_null())
      parseDerived(*d);
    p.tf32 = boolField(g, "tf32", "gpu", false);
    p.arenaBytes = intField(g, "arena_bytes", "gpu", 0);
    if (p.arenaBytes < 0 || p.arenaBytes > kMaxBytes)
      invalid("gpu.arena_bytes", "must be in [0, 2^50], got " + std::to_string(p.arenaBytes));
    if (const json *c = find(g, "chunking"); c && !c->is_null())
      parseChunking(*c);
    parseOutputs(arrayField(g, "outputs", "gpu"));
    const json &mods = arrayField(g, "modules", "gpu");
    for (size_t i = 0; i < mods.size(); ++i)
      parseModule(mods[i], "gpu.modules[" + std::to_string(i) + "]");
    const json &bufs = arrayField(g, "buffers", "gpu");
    for (size_t i = 0; i < bufs.size(); ++i)
      parseBuffer(bufs[i], i);
    checkBufferCoverage();
    const json &steps = arrayField(g, "steps", "gpu");
    for (size_t i = 0; i < steps.size(); ++i)
      parseStep(steps[i], i);
    if (const json *l = find(g, "layers"); l && !l->is_null())
      parseLayers(*l);
  }

private:
  const Manifest &m;
  uint64_t payloadSize;
  GpuProgram &p;

  /// "layers": in step order, contiguous from step 0, each ending at an
  /// attention step (role "attention"), and every attention step some
  /// layer's end.
  void parseLayers(const json &layers) {
    if (!layers.is_array())
      invalid("gpu.layers", "expected an array, got " + describe(layers));
    const int64_t count = static_cast<int64_t>(p.steps.size());
    int64_t next = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      std::string where = "gpu.layers[" + std::to_string(i) + "]";
      GpuLayer l;
      l.layer = intField(layers[i], "layer", where);
      l.firstStep = intField(layers[i], "first_step", where);
      l.attentionStep = intField(layers[i], "attention_step", where);
      if (l.layer < 0)
        invalid(where + ".layer", "must be >= 0, got " + std::to_string(l.layer));
      if (l.firstStep != next)
        invalid(where + ".first_step", "must be " + std::to_string(next) +
                                           " (the step after the previous layer's attention), "
                                           "got " + std::to_string(l.firstStep));
      if (l.attentionStep < l.firstStep || l.attentionStep >= count)
        invalid(where + ".attention_step",
                "must be in [" + std::to_string(l.firstStep) + ", " + std::to_string(count) +
                    "), got " + std::to_string(l.attentionStep));
      for (int64_t s = l.firstStep; s <= l.attentionStep; ++s)
        if (isAttentionStep(p.steps[s]) != (s == l.attentionStep))
          invalid(where, "step " + std::to_string(s) +
                             (s == l.attentionStep ? " is not an attention step"
                                                   : " is an attention step inside the layer"));
      next = l.attentionStep + 1;
      p.layers.push_back(l);
    }
    for (int64_t s = next; s < count; ++s)
      if (isAttentionStep(p.steps[s]))
        invalid("gpu.layers", "attention step " + std::to_string(s) +
                                  " belongs to no declared layer");
  }

  void parseArch(const std::string &arch) {
    p.arch = arch;
    std::string digits;
    if (arch.rfind("sm_", 0) == 0) {
      digits = arch.substr(3);
      if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f'))
        digits.pop_back();
    }
    if (digits.size() < 2 || digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      invalid("gpu.arch", "expected \"sm_XY\" (e.g. \"sm_90\"), got \"" + arch + "\"");
    int v = std::stoi(digits);
    p.archMajor = v / 10;
    p.archMinor = v % 10;
  }

  const BlobSpec &blob(const std::string &name, const std::string &where) {
    for (const BlobSpec &b : m.blobs)
      if (b.name == name) {
        if (b.offset > payloadSize || b.size > payloadSize - b.offset)
          invalid(where, "blob '" + name + "' (offset " + std::to_string(b.offset) + ", " +
                             std::to_string(b.size) + " bytes) lies outside the artifact's " +
                             std::to_string(payloadSize) + "-byte payload");
        return b;
      }
    invalid(where, "no blob named '" + name + "' in the manifest's \"blobs\"");
  }

  LinearExpr linear(const json &v, const std::string &where) {
    if (v.is_number_integer())
      return LinearExpr::constant(asInt(v, where));
    if (!v.is_object())
      invalid(where,
              "expected an integer or {\"c\", \"p0\", \"n\", \"q\", \"rank\", \"d0\".. \"d7\"}, got " +
                  describe(v));
    LinearExpr e;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string &key = it.key();
      int64_t x = asInt(it.value(), where + "." + key);
      if (key == "c") {
        e.c = x;
      } else if (key == "p0" || key == "n" || key == "q" || key == "rank") {
        if (x != 0 && !std::count(p.symbols.begin(), p.symbols.end(), key))
          invalid(where, "uses symbol '" + key + "', which gpu.symbols does not declare");
        (key == "p0" ? e.p0 : key == "n" ? e.n : key == "q" ? e.q : e.r) = x;
      } else if (int k = derivedIndex(key); k >= 0) {
        if (x != 0 && k >= static_cast<int>(p.derived.size()))
          invalid(where, "uses derived symbol '" + key + "', which gpu.derived does not declare (" +
                             std::to_string(p.derived.size()) + " declared)");
        e.d[k] = x;
      } else {
        invalid(where, "unknown key '" + key +
                           "' (a linear expression has c, p0, n, q, rank, d0 .. d" +
                           std::to_string(kMaxDerived - 1) + ")");
      }
    }
    return e;
  }

  /// k for "d<k>" with 0 <= k < kMaxDerived, else -1.
  static int derivedIndex(const std::string &key) {
    if (key.size() != 2 || key[0] != 'd' || key[1] < '0' || key[1] >= '0' + kMaxDerived)
      return -1;
    return key[1] - '0';
  }

  /// gpu.derived: [{"of": linear over p0, n, q, "div": k >= 1}, ...].
  void parseDerived(const json &d) {
    if (!d.is_array())
      invalid("gpu.derived", "expected an array, got " + describe(d));
    if (d.size() > static_cast<size_t>(kMaxDerived))
      invalid("gpu.derived", "at most " + std::to_string(kMaxDerived) + " derived symbols, got " +
                                 std::to_string(d.size()));
    for (size_t i = 0; i < d.size(); ++i) {
      const std::string where = "gpu.derived[" + std::to_string(i) + "]";
      if (!d[i].is_object())
        invalid(where, "expected an object, got " + describe(d[i]));
      DerivedSymbol s;
      s.div = intField(d[i], "div", where);
      if (s.div < 1 || s.div > kMaxDerivedDivisor)
        invalid(sub(where, "div"), "must be in [1, 2^40], got " + std::to_string(s.div));
      // Declared one by one: `of` may not name this symbol or a later one,
      // and the check below refuses earlier ones too.
      s.of = linearField(d[i], "of", where);
      if (s.of.r != 0 || !s.of.noDerived())
        invalid(sub(where, "of"), "may name only p0, n and q (not rank or a derived symbol)");
      // Bounded so that no prompt the runtime accepts (< 2^40 tokens)
      // overflows them: chunkSchedule has no error to report.
      for (int64_t x : {s.of.c, s.of.p0, s.of.n, s.of.q})
        if (x < -kMaxDerivedCoefficient || x > kMaxDerivedCoefficient)
          invalid(sub(where, "of"), "coefficient " + std::to_string(x) + " outside +-2^20");
      p.derived.push_back(s);
    }
  }

  LinearExpr linearField(const json &obj, const char *key, const std::string &where) {
    return linear(field(obj, key, where), sub(where, key));
  }

  void parseChunking(const json &c) {
    const std::string where = "gpu.chunking";
    GpuChunking ch;
    ch.chunk = intField(c, "chunk", where);
    if (ch.chunk < 1 || ch.chunk > (int64_t(1) << 40))
      invalid(sub(where, "chunk"), "must be >= 1, got " + std::to_string(ch.chunk));
    int64_t input = intField(c, "input", where);
    if (input < 0 || input >= static_cast<int64_t>(m.inputs.size()))
      invalid(sub(where, "input"), std::to_string(input) + " is not an input index (the model has " +
                                       std::to_string(m.inputs.size()) + " inputs)");
    ch.input = static_cast<int>(input);
    const TensorSpec &in = m.inputs[ch.input];
    int64_t dim = intField(c, "dim", where);
    if (dim < 0 || dim >= static_cast<int64_t>(in.shape.size()))
      invalid(sub(where, "dim"), std::to_string(dim) + " is not a dim of input '" + in.name +
                                     "' " + shapeText(in.shape));
    ch.dim = static_cast<int>(dim);
    for (size_t d = ch.dim + 1; d < in.shape.size(); ++d)
      if (in.shape[d] < 0)
        invalid(where, "input '" + in.name + "' " + shapeText(in.shape) +
                           " has a dynamic dim after the chunked one");
    if (in.dtype != "int64" && in.dtype != "int32")
      invalid(where, "the chunked input '" + in.name + "' is " + in.dtype +
                         "; only int64/int32 (token ids) can be chunked");
    ch.padValue = intField(c, "pad_value", where, 0);
    if (in.dtype == "int32" && (ch.padValue < INT32_MIN || ch.padValue > INT32_MAX))
      invalid(sub(where, "pad_value"), "does not fit the int32 input");
    p.chunking = ch;
  }

  void parseOutputs(const json &outs) {
    if (outs.size() != m.outputs.size())
      invalid("gpu.outputs", "has " + std::to_string(outs.size()) + " entries for the model's " +
                                 std::to_string(m.outputs.size()) + " outputs");
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string where = "gpu.outputs[" + std::to_string(i) + "]";
      std::string mode = stringField(outs[i], "mode", where);
      GpuOutput o;
      const TensorSpec &spec = m.outputs[i];
      if (mode == "rows") {
        o.mode = OutputMode::Rows;
        if (!p.chunking)
          invalid(where, "mode \"rows\" needs gpu.chunking");
        int64_t dim = intField(outs[i], "dim", where);
        if (dim < 0 || dim >= static_cast<int64_t>(spec.shape.size()))
          invalid(sub(where, "dim"), std::to_string(dim) + " is not a dim of output '" +
                                         spec.name + "' " + shapeText(spec.shape));
        o.dim = static_cast<int>(dim);
        for (size_t d = 0; d < spec.shape.size(); ++d)
          if (spec.shape[d] < 0 && static_cast<int>(d) != o.dim)
            invalid(where, "output '" + spec.name + "' " + shapeText(spec.shape) +
                               " has a dynamic dim besides the row dim");
      } else if (mode == "last") {
        o.mode = OutputMode::Last;
      } else if (mode == "whole") {
        o.mode = OutputMode::Whole;
      } else {
        invalid(sub(where, "mode"), "unknown mode '" + mode + "' (rows, last, whole)");
      }
      p.outputs.push_back(o);
    }
  }

  void parseModule(const json &j, const std::string &where) {
    if (!j.is_object())
      invalid(where, "expected an object, got " + describe(j));
    GpuModule mod;
    if (const json *n = j.is_object() ? find(j, "name") : nullptr; n && !n->is_null())
      mod.name = asString(*n, sub(where, "name"));
    for (const char *key : {"ptx_blob", "cubin_blob"}) {
      const json *v = j.is_object() ? find(j, key) : nullptr;
      if (!v || v->is_null())
        continue;
      std::string name = asString(*v, sub(where, key));
      const BlobSpec &b = blob(name, sub(where, key));
      if (b.size == 0)
        invalid(sub(where, key), "blob '" + name + "' is empty");
      (std::strcmp(key, "ptx_blob") == 0 ? mod.ptxBlob : mod.cubinBlob) = name;
    }
    if (mod.ptxBlob.empty() && mod.cubinBlob.empty())
      invalid(where, "has neither ptx_blob nor cubin_blob");
    p.modules.push_back(std::move(mod));
  }

  void parseBuffer(const json &j, size_t i) {
    std::string where = "gpu.buffers[" + std::to_string(i) + "]";
    GpuBuffer b;
    std::string kind = stringField(j, "kind", where);
    if (const json *pl = find(j, "placement"); pl && !pl->is_null() && kind != "weight")
      invalid(sub(where, "placement"), "only a weight buffer has a placement, not a " + kind + " one");
    b.bytes = intField(j, "bytes", where);
    if (b.bytes < 0 || b.bytes > kMaxBytes)
      invalid(sub(where, "bytes"), "must be in [0, 2^50], got " + std::to_string(b.bytes));
    if (const json *d = find(j, "dtype"); d && !d->is_null()) {
      b.dtype = asString(*d, sub(where, "dtype"));
      if (dtypeSize(b.dtype) == 0)
        invalid(sub(where, "dtype"), "unknown dtype '" + b.dtype + "'");
    }
    auto index = [&](size_t count, const char *what) {
      int64_t x = intField(j, "index", where);
      if (x < 0 || x >= static_cast<int64_t>(count))
        invalid(sub(where, "index"), std::to_string(x) + " is not " + what + " index (the model has " +
                                         std::to_string(count) + ")");
      return x;
    };
    auto sameDtype = [&](const std::string &expected, const std::string &what) {
      if (!b.dtype.empty() && b.dtype != expected)
        invalid(sub(where, "dtype"), b.dtype + " differs from " + what + "'s " + expected);
      b.dtype = expected;
    };
    if (kind == "input") {
      b.kind = BufferKind::Input;
      b.index = index(m.inputs.size(), "an input");
      sameDtype(m.inputs[b.index].dtype, "input '" + m.inputs[b.index].name + "'");
    } else if (kind == "output") {
      b.kind = BufferKind::Output;
      b.index = index(m.outputs.size(), "an output");
      sameDtype(m.outputs[b.index].dtype, "output '" + m.outputs[b.index].name + "'");
    } else if (kind == "weight") {
      b.kind = BufferKind::Weight;
      b.index = index(m.weights.size(), "a weight");
      const WeightSpec &w = m.weights[b.index];
      if (b.dtype.empty())
        invalid(where, "a weight buffer needs \"dtype\"");
      // A derived weight (h20-quantize-linears) is made in its kind's
      // dtype; any other is the stored tensor, converted.
      if (!w.derive.empty() && b.dtype != derivedDtype(w.derive))
        invalid(sub(where, "dtype"), "weight '" + w.name + "' is derived (" + w.derive +
                                         ") as " + derivedDtype(w.derive) + ", not " + b.dtype);
      if (w.derive.empty() && !canConvert(w.dtype, b.dtype))
        invalid(sub(where, "dtype"), "weight '" + w.name + "' is " + w.dtype +
                                         " in the model; cannot convert it to " + b.dtype);
      if (const json *pl = find(j, "placement"); pl && !pl->is_null()) {
        std::string placement = asString(*pl, sub(where, "placement"));
        if (placement != "host" && placement != "device")
          invalid(sub(where, "placement"), "\"" + placement + "\" is neither \"host\" nor \"device\"");
        b.host = placement == "host";
      }
      if (b.host != (w.placement == "host"))
        invalid(sub(where, "placement"), std::string("weight '") + w.name + "' is placed on the " +
                                             (b.host ? "host" : "device") + " here but on the " +
                                             (b.host ? "device" : "host") + " in the manifest");
      int64_t n = elementCount(w.shape, "weight '" + w.name + "' " + shapeText(w.shape));
      if (n > kMaxBytes / 8 || n * dtypeSize(b.dtype) != b.bytes)
        invalid(sub(where, "bytes"), std::to_string(b.bytes) + " bytes, but weight '" + w.name +
                                         "' " + shapeText(w.shape) + " as " + b.dtype +
                                         " needs " + std::to_string(n * dtypeSize(b.dtype)));
    } else if (kind == "state") {
      b.kind = BufferKind::State;
    } else if (kind == "temp") {
      b.kind = BufferKind::Temp;
      b.offset = intField(j, "offset", where);
      if (b.offset < 0 || b.offset % 256 != 0)
        invalid(sub(where, "offset"), "must be a non-negative multiple of 256, got " +
                                          std::to_string(b.offset));
      if (b.offset > p.arenaBytes || b.bytes > p.arenaBytes - b.offset)
        invalid(where, "bytes [" + std::to_string(b.offset) + ", " +
                           std::to_string(b.offset + b.bytes) + ") exceed arena_bytes " +
                           std::to_string(p.arenaBytes));
    } else if (kind == "const") {
      b.kind = BufferKind::Const;
      b.blob = stringField(j, "blob", where);
      const BlobSpec &bl = blob(b.blob, sub(where, "blob"));
      b.blobOffset = intField(j, "blob_offset", where, 0);
      if (b.blobOffset < 0 || static_cast<uint64_t>(b.blobOffset) > bl.size ||
          static_cast<uint64_t>(b.bytes) > bl.size - static_cast<uint64_t>(b.blobOffset))
        invalid(where, "bytes [" + std::to_string(b.blobOffset) + ", " +
                           std::to_string(b.blobOffset + b.bytes) + ") lie outside blob '" +
                           b.blob + "' of " + std::to_string(bl.size) + " bytes");
    } else {
      invalid(sub(where, "kind"),
              "unknown kind '" + kind + "' (input, output, weight, state, temp, const)");
    }
    p.buffers.push_back(std::move(b));
  }

  /// Inputs: at most one buffer each (the chunked one exactly one); outputs:
  /// exactly one each, large enough when the shape says how large.
  void checkBufferCoverage() {
    std::vector<int> inputBuf(m.inputs.size(), -1), outputBuf(m.outputs.size(), -1);
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const GpuBuffer &b = p.buffers[i];
      std::vector<int> *seen = b.kind == BufferKind::Input    ? &inputBuf
                               : b.kind == BufferKind::Output ? &outputBuf
                                                              : nullptr;
      if (!seen)
        continue;
      int &slot = (*seen)[b.index];
      if (slot >= 0)
        invalid("gpu.buffers[" + std::to_string(i) + "]",
                std::string(b.kind == BufferKind::Input ? "input " : "output ") +
                    std::to_string(b.index) + " already has buffer " + std::to_string(slot));
      slot = static_cast<int>(i);
    }
    for (size_t o = 0; o < outputBuf.size(); ++o)
      if (outputBuf[o] < 0)
        invalid("gpu.buffers", "no buffer holds output " + std::to_string(o) + " ('" +
                                   m.outputs[o].name + "')");
    if (p.chunking) {
      const GpuChunking &ch = *p.chunking;
      int b = inputBuf[ch.input];
      if (b < 0)
        invalid("gpu.buffers", "no buffer holds the chunked input " + std::to_string(ch.input));
      const TensorSpec &in = m.inputs[ch.input];
      int64_t inner = elementCount(std::vector<int64_t>(in.shape.begin() + ch.dim + 1, in.shape.end()),
                                   "input '" + in.name + "'");
      if (inner > kMaxBytes / ch.chunk ||
          p.buffers[b].bytes < ch.chunk * inner * dtypeSize(in.dtype))
        invalid("gpu.buffers[" + std::to_string(b) + "]",
                "the chunked input's buffer has " + std::to_string(p.buffers[b].bytes) +
                    " bytes; a chunk of " + std::to_string(ch.chunk) + " tokens needs " +
                    std::to_string(ch.chunk * inner * dtypeSize(in.dtype)));
    }
    for (size_t o = 0; o < outputBuf.size(); ++o) {
      const TensorSpec &spec = m.outputs[o];
      const GpuBuffer &b = p.buffers[outputBuf[o]];
      std::vector<int64_t> shape = spec.shape;
      if (p.outputs[o].mode == OutputMode::Rows)
        shape[p.outputs[o].dim] = p.chunking->chunk;
      if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
        continue; // sized at run time
      int64_t need = elementCount(shape, "output '" + spec.name + "'");
      if (need > kMaxBytes / 8 || b.bytes < need * dtypeSize(spec.dtype))
        invalid("gpu.buffers[" + std::to_string(outputBuf[o]) + "]",
                "output '" + spec.name + "' " + shapeText(shape) + " needs " +
                    std::to_string(need * dtypeSize(spec.dtype)) + " bytes, the buffer has " +
                    std::to_string(b.bytes));
    }
  }

  int bufferRef(const json &obj, const char *key, const std::string &where) {
    int64_t b = intField(obj, key, where);
    if (b < 0 || b >= static_cast<int64_t>(p.buffers.size()))
      invalid(sub(where, key), std::to_string(b) + " is not a buffer index (the program has " +
                                   std::to_string(p.buffers.size()) + " buffers)");
    return static_cast<int>(b);
  }

  /// A step that reads buffer `b` as `dtype`: equal to the buffer's, if given.
  void checkDtype(int b, const std::string &dtype, const std::string &where) {
    const GpuBuffer &buf = p.buffers[b];
    if (!buf.dtype.empty() && buf.dtype != dtype)
      invalid(where, "reads buffer " + std::to_string(b) + " (" + buf.dtype + ") as " + dtype);
  }

  int moduleRef(const json &obj, const std::string &where) {
    int64_t mod = intField(obj, "module", where);
    if (mod < 0 || mod >= static_cast<int64_t>(p.modules.size()))
      invalid(sub(where, "module"), std::to_string(mod) + " is not a module index (the program has " +
                                        std::to_string(p.modules.size()) + ")");
    return static_cast<int>(mod);
  }

  std::string kernelName(const json &obj, const std::string &where) {
    std::string k = stringField(obj, "kernel", where);
    if (k.empty())
      invalid(sub(where, "kernel"), "is empty");
    return k;
  }

  int64_t smemField(const json &obj, const std::string &where) {
    int64_t smem = intField(obj, "smem", where, 0);
    if (smem < 0 || smem > (int64_t(1) << 30))
      invalid(sub(where, "smem"), "must be in [0, 2^30] bytes, got " + std::to_string(smem));
    return smem;
  }

  void parseStep(const json &j, size_t i) {
    std::string where = "step " + std::to_string(i);
    std::string op = stringField(j, "op", where);
    where += " (" + op + "): ";
    if (op == "launch")
      p.steps.push_back(parseLaunch(j, where));
    else if (op == "gemm")
      p.steps.push_back(parseGemm(j, where));
    else if (op == "attention")
      invalid(where, "the \"attention\" step of artifact format 1 is gone (dense attention is a "
                     "launch step now): recompile the model with this h20-opt");
    else if (op == "memset") {
      MemsetStep s;
      s.buffer = bufferRef(j, "buffer", where);
      s.offsetBytes = linearField(j, "offset_bytes", where);
      s.bytes = linearField(j, "bytes", where);
      int64_t v = intField(j, "value", where, 0);
      if (v < 0 || v > 255)
        invalid(sub(where, "value"), "must be a byte value 0..255, got " + std::to_string(v));
      s.value = static_cast<int>(v);
      p.steps.push_back(s);
    } else if (op == "copy") {
      CopyStep s;
      s.src = bufferRef(j, "src", where);
      s.srcOffsetBytes = linearField(j, "src_offset_bytes", where);
      s.dst = bufferRef(j, "dst", where);
      s.dstOffsetBytes = linearField(j, "dst_offset_bytes", where);
      s.bytes = linearField(j, "bytes", where);
      p.steps.push_back(s);
    } else if (op == "all_reduce") {
      p.steps.push_back(parseAllReduce(j, where));
    } else {
      invalid("step " + std::to_string(i) + ": op",
              "unknown op '" + op + "' (launch, gemm, memset, copy, all_reduce)");
    }
  }

  AllReduceStep parseAllReduce(const json &j, const std::string &where) {
    AllReduceStep s;
    std::string t = stringField(j, "dtype", where);
    s.dtype = t == "f32" ? "float32" : t == "f16" ? "float16" : t == "bf16" ? "bfloat16" : t;
    if (!isGemmDtype(s.dtype))
      invalid(sub(where, "dtype"), "unsupported dtype '" + t + "' (f32, f16, bf16)");
    s.src = bufferRef(j, "src", where);
    s.srcOffsetBytes = linearField(j, "src_offset_bytes", where);
    s.dst = bufferRef(j, "dst", where);
    s.dstOffsetBytes = linearField(j, "dst_offset_bytes", where);
    s.bytes = linearField(j, "bytes", where);
    checkDtype(s.src, s.dtype, sub(where, "src"));
    checkDtype(s.dst, s.dtype, sub(where, "dst"));
    // Constant sizes and offsets are checked now (symbolic ones per chunk).
    const int64_t es = dtypeSize(s.dtype);
    for (auto [key, e] : {std::pair<const char *, const LinearExpr *>{"bytes", &s.bytes},
                          {"src_offset_bytes", &s.srcOffsetBytes},
                          {"dst_offset_bytes", &s.dstOffsetBytes}})
      if (e->isConstant() && e->c % es != 0)
        invalid(sub(where, key), std::to_string(e->c) + " is not a multiple of the " +
                                     std::to_string(es) + "-byte " + s.dtype + " element");
    return s;
  }

  std::array<LinearExpr, 3> dims3(const json &obj, const char *key, const std::string &where) {
    const json &a = arrayField(obj, key, where);
    if (a.size() != 3)
      invalid(sub(where, key), "expected 3 entries, got " + std::to_string(a.size()));
    std::array<LinearExpr, 3> r;
    for (size_t d = 0; d < 3; ++d)
      r[d] = linear(a[d], sub(where, key) + "[" + std::to_string(d) + "]");
    return r;
  }

  LaunchStep parseLaunch(const json &j, const std::string &where) {
    LaunchStep s;
    s.module = moduleRef(j, where);
    s.kernel = kernelName(j, where);
    s.grid = dims3(j, "grid", where);
    s.block = dims3(j, "block", where);
    s.smem = smemField(j, where);
    if (const json *d = find(j, "grid_div"); d && !d->is_null()) {
      if (!d->is_array() || d->size() != 3)
        invalid(sub(where, "grid_div"), "expected 3 integers, got " + describe(*d));
      for (size_t i = 0; i < 3; ++i) {
        s.gridDiv[i] = asInt((*d)[i], sub(where, "grid_div") + "[" + std::to_string(i) + "]");
        if (s.gridDiv[i] < 1 || s.gridDiv[i] > INT32_MAX)
          invalid(sub(where, "grid_div") + "[" + std::to_string(i) + "]",
                  "must be in [1, 2^31-1], got " + std::to_string(s.gridDiv[i]));
      }
    }
    if (const json *r = find(j, "role"); r && !r->is_null()) {
      s.role = asString(*r, sub(where, "role"));
      if (s.role != "attention")
        invalid(sub(where, "role"), "unknown role '" + s.role + "' (attention)");
    }
    const json &args = arrayField(j, "args", where);
    for (size_t a = 0; a < args.size(); ++a)
      s.args.push_back(parseArg(args[a], where + "args[" + std::to_string(a) + "]"));
    if (s.isAttention())
      checkAttentionLayout(s, where);
    // As packLaunchParams lays them out; CUDA's limit for a launch's
    // parameters is 32764 bytes (sm_70 and later, CUDA 12.1).
    int64_t bytes = 0;
    for (const LaunchArg &a : s.args) {
      if (a.kind == LaunchArg::Struct)
        bytes = (bytes + a.structAlign - 1) / a.structAlign * a.structAlign + a.structBytes;
      else
        bytes += 8 * (a.kind == LaunchArg::MemRef ? 3 + 2 * int64_t(a.sizes.size()) : 1);
    }
    if (bytes > 32764)
      invalid(sub(where, "args"), std::to_string(bytes) +
                                      " bytes of kernel parameters, over CUDA's 32764");
    return s;
  }

  /// A float that fits f32, for an "f32" / "f16" / "bf16" value.
  float floatValue(const json &v, const std::string &where) {
    double d = asNumber(v, where);
    if (std::fabs(d) > 3.4028234663852886e38)
      invalid(where, "does not fit a float");
    return static_cast<float>(d);
  }

  LaunchArg parseArg(const json &arg, const std::string &aw) {
    if (!arg.is_object() || arg.size() != 1)
      invalid(aw, "expected one of {\"i64\": L}, {\"i32\": L}, {\"f32\": x}, {\"memref\": {...}}, "
                  "{\"struct\": {...}} (or f64, f16, bf16), got " + describe(arg));
    LaunchArg la;
    const std::string &kind = arg.begin().key();
    const json &v = arg.begin().value();
    std::string kw = sub(aw, kind.c_str());
    if (kind == "i64" || kind == "i32") {
      la.kind = kind == "i64" ? LaunchArg::I64 : LaunchArg::I32;
      la.value = linear(v, kw);
    } else if (kind == "f64") {
      la.kind = LaunchArg::F64;
      la.f64 = asNumber(v, kw);
    } else if (kind == "f32" || kind == "f16" || kind == "bf16") {
      la.f32 = floatValue(v, kw);
      la.kind = kind == "f32" ? LaunchArg::F32 : kind == "f16" ? LaunchArg::F16 : LaunchArg::BF16;
      if (kind == "f16")
        la.half = floatToHalf(la.f32);
      else if (kind == "bf16")
        la.half = floatToBfloat16(la.f32);
    } else if (kind == "memref") {
      la.kind = LaunchArg::MemRef;
      parseView(v, kw, la);
    } else if (kind == "struct") {
      la.kind = LaunchArg::Struct;
      parseStruct(v, kw, la);
    } else {
      invalid(aw, "unknown argument kind '" + kind +
                      "' (i64, i32, f32, f64, f16, bf16, memref, struct)");
    }
    return la;
  }

  /// A VIEW into `out`'s buffer, offset, sizes, strides and dtype (a
  /// LaunchArg or a StructField).
  template <class T> void parseView(const json &v, const std::string &mw, T &out) {
    out.buffer = bufferRef(v, "buffer", mw);
    out.offset = linearField(v, "offset", mw);
    const json &sizes = arrayField(v, "sizes", mw), &strides = arrayField(v, "strides", mw);
    if (sizes.size() != strides.size())
      invalid(mw, "has " + std::to_string(sizes.size()) + " sizes but " +
                      std::to_string(strides.size()) + " strides");
    if (sizes.size() > 16)
      invalid(mw, "rank " + std::to_string(sizes.size()) + " is over 16");
    for (size_t d = 0; d < sizes.size(); ++d) {
      out.sizes.push_back(linear(sizes[d], mw + ".sizes[" + std::to_string(d) + "]"));
      out.strides.push_back(linear(strides[d], mw + ".strides[" + std::to_string(d) + "]"));
    }
    if (const json *d = find(v, "dtype"); d && !d->is_null()) {
      out.dtype = asString(*d, sub(mw, "dtype"));
      if (dtypeSize(out.dtype) == 0)
        invalid(sub(mw, "dtype"), "unknown dtype '" + out.dtype + "'");
      checkDtype(out.buffer, out.dtype, mw);
    }
  }

  /// {"bytes": B, "align": A, "fields": [...]} (see "struct" in GpuProgram.h).
  void parseStruct(const json &v, const std::string &w, LaunchArg &la) {
    la.structBytes = intField(v, "bytes", w);
    if (la.structBytes < 1 || la.structBytes > 4096)
      invalid(sub(w, "bytes"), "must be in [1, 4096], got " + std::to_string(la.structBytes));
    la.structAlign = intField(v, "align", w, 8);
    if (la.structAlign < 1 || la.structAlign > 64 || (la.structAlign & (la.structAlign - 1)))
      invalid(sub(w, "align"), "must be a power of two <= 64, got " +
                                   std::to_string(la.structAlign));
    const json &fields = arrayField(v, "fields", w);
    for (size_t i = 0; i < fields.size(); ++i)
      la.fields.push_back(parseField(fields[i], w + ".fields[" + std::to_string(i) + "]"));
    std::vector<const StructField *> byAt;
    for (const StructField &f : la.fields)
      byAt.push_back(&f);
    std::sort(byAt.begin(), byAt.end(),
              [](const StructField *a, const StructField *b) { return a->at < b->at; });
    for (size_t i = 0; i < byAt.size(); ++i) {
      const StructField &f = *byAt[i];
      int64_t align = f.kind == StructField::TensorMap ? 64 : f.bytes();
      if (f.at % align || f.at > la.structBytes - f.bytes())
        invalid(w, "a field at byte " + std::to_string(f.at) + " (" + std::to_string(f.bytes()) +
                       " bytes) is not aligned to " + std::to_string(align) +
                       " or ends past the struct's " + std::to_string(la.structBytes) + " bytes");
      if (align > la.structAlign)
        invalid(sub(w, "align"), std::to_string(la.structAlign) + " is below a field's " +
                                     std::to_string(align));
      if (i + 1 < byAt.size() && f.at + f.bytes() > byAt[i + 1]->at)
        invalid(w, "the fields at bytes " + std::to_string(f.at) + " and " +
                       std::to_string(byAt[i + 1]->at) + " overlap");
    }
    // A kernel that takes tensor maps is told whether they were made.
    int64_t maps = 0, flags = 0;
    for (const StructField &f : la.fields) {
      maps += f.kind == StructField::TensorMap;
      flags += f.kind == StructField::TensorMapsValid;
    }
    if (flags != (maps > 0 ? 1 : 0))
      invalid(w, std::to_string(maps) + " tensor maps need " + (maps ? "one" : "no") +
                     " tensor_maps_valid field, got " + std::to_string(flags));
  }

  /// Role "attention": the one argument is the dense attention kernel's
  /// H20AttnParams (AttentionParams.h), with Q, K, V, O as pointer fields
  /// and their strides and sizes as i64 fields at its offsets (values are
  /// checked against each other per chunk by Resolver::attention).
  void checkAttentionLayout(const LaunchStep &s, const std::string &where) {
    if (s.args.size() != 1 || s.args[0].kind != LaunchArg::Struct ||
        s.args[0].structBytes != static_cast<int64_t>(sizeof(H20AttnParams)))
      invalid(where, "role attention: needs one struct argument of " +
                         std::to_string(sizeof(H20AttnParams)) + " bytes (H20AttnParams)");
    for (const AttentionField &f : attentionFields())
      if (findFieldIndex(s.args[0], f.at, f.kind) < 0)
        invalid(where, std::string("role attention: no ") +
                           (f.kind == StructField::Pointer ? "pointer" : "i64") +
                           " field at byte " + std::to_string(f.at) + " (" + f.name + ")");
  }

  StructField parseField(const json &f, const std::string &w) {
    if (!f.is_object())
      invalid(w, "expected an object, got " + describe(f));
    StructField sf;
    sf.at = intField(f, "at", w);
    if (sf.at < 0 || sf.at > 4096)
      invalid(sub(w, "at"), "must be in [0, 4096], got " + std::to_string(sf.at));
    int kinds = 0;
    for (auto it = f.begin(); it != f.end(); ++it) {
      const std::string &key = it.key();
      if (key == "at" || key == "written" || key == "kv")
        continue;
      ++kinds;
      std::string kw = sub(w, key.c_str());
      if (key == "i64" || key == "i32") {
        sf.kind = key == "i64" ? StructField::I64 : StructField::I32;
        sf.value = linear(it.value(), kw);
      } else if (key == "f32") {
        sf.kind = StructField::F32;
        sf.f32 = floatValue(it.value(), kw);
      } else if (key == "pointer") {
        sf.kind = StructField::Pointer;
        parseView(it.value(), kw, sf);
      } else if (key == "tensor_map") {
        sf.kind = StructField::TensorMap;
        parseTensorMap(it.value(), kw, sf);
      } else if (key == "tensor_maps_valid") {
        sf.kind = StructField::TensorMapsValid;
        if (!it.value().is_boolean() || !it.value().get<bool>())
          invalid(kw, "must be true");
      } else {
        invalid(w, "unknown field kind '" + key +
                       "' (i64, i32, f32, pointer, tensor_map, tensor_maps_valid)");
      }
    }
    if (kinds != 1)
      invalid(w, "needs exactly one of i64, i32, f32, pointer, tensor_map, tensor_maps_valid");
    for (const char *flag : {"written", "kv"})
      if (find(f, flag) && !sf.isView())
        invalid(sub(w, flag), "is for pointer and tensor_map fields only");
    sf.written = boolField(f, "written", w, true);
    sf.kv = boolField(f, "kv", w, false);
    if (sf.kv && sf.written)
      invalid(sub(w, "kv"), "a view of the KV cache is read: it needs \"written\": false");
    return sf;
  }

  void parseTensorMap(const json &v, const std::string &w, StructField &sf) {
    parseView(v, w, sf);
    size_t rank = sf.sizes.size();
    if (rank < 1 || rank > 5)
      invalid(w, "rank " + std::to_string(rank) + " is not in [1, 5]");
    const LinearExpr &inner = sf.strides.back();
    if (!inner.isConstant() || inner.c != 1)
      invalid(sub(w, "strides"), "the innermost stride must be 1");
    const json &box = arrayField(v, "box", w);
    if (box.size() != rank)
      invalid(sub(w, "box"), "has " + std::to_string(box.size()) + " entries for rank " +
                                 std::to_string(rank));
    for (size_t d = 0; d < rank; ++d) {
      sf.box.push_back(asInt(box[d], sub(w, "box") + "[" + std::to_string(d) + "]"));
      if (sf.box.back() < 1 || sf.box.back() > 256)
        invalid(sub(w, "box") + "[" + std::to_string(d) + "]",
                "must be in [1, 256], got " + std::to_string(sf.box.back()));
    }
    int64_t sw = intField(v, "swizzle", w, 0);
    if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
      invalid(sub(w, "swizzle"), "must be 0, 32, 64 or 128, got " + std::to_string(sw));
    sf.swizzle = static_cast<int>(sw);
  }

  GemmOperand operand(const json &j, const char *key, const std::string &dtype,
                      const std::string &where) {
    std::string w = sub(where, key);
    const json &o = field(j, key, where);
    GemmOperand g;
    g.buffer = bufferRef(o, "buffer", w);
    g.offset = linearField(o, "offset", w);
    g.batchStride = linearField(o, "batch_stride", w);
    g.rowStride = linearField(o, "row_stride", w);
    g.colStride = linearField(o, "col_stride", w);
    checkDtype(g.buffer, dtype, w);
    return g;
  }

  GemmStep parseGemm(const json &j, const std::string &where) {
    GemmStep s;
    s.dtypeA = stringField(j, "dtype_a", where);
    s.dtypeB = stringField(j, "dtype_b", where);
    s.dtypeC = stringField(j, "dtype_c", where);
    const bool fp8 = s.dtypeA == "float8_e4m3fn";
    for (auto [key, t] : {std::pair<const char *, const std::string *>{"dtype_a", &s.dtypeA},
                          {"dtype_b", &s.dtypeB},
                          {"dtype_c", &s.dtypeC}})
      if (!isGemmDtype(*t) && !(fp8 && t != &s.dtypeC && *t == "float8_e4m3fn"))
        invalid(sub(where, key), "unsupported dtype '" + *t +
                                     "' (float32, float16, bfloat16; float8_e4m3fn for A and B)");
    if (s.dtypeA != s.dtypeB)
      invalid(where, "dtype_a " + s.dtypeA + " and dtype_b " + s.dtypeB +
                         " differ; cuBLASLt multiplies equal input types");
    if (s.dtypeC != s.dtypeA && s.dtypeC != "float32" && !fp8)
      invalid(where, "dtype_c " + s.dtypeC + " with " + s.dtypeA +
                         " inputs is unsupported (the same dtype or float32)");
    s.batch = linearField(j, "batch", where);
    s.m = linearField(j, "m", where);
    s.n = linearField(j, "n", where);
    s.k = linearField(j, "k", where);
    s.alpha = numberField(j, "alpha", where, 1.0);
    s.beta = numberField(j, "beta", where, 0.0);
    s.a = operand(j, "a", s.dtypeA, where);
    s.b = operand(j, "b", s.dtypeB, where);
    s.c = operand(j, "c", s.dtypeC, where);
    if (j.contains("groups")) {
      std::string w = sub(where, "groups");
      const json &g = field(j, "groups", where);
      s.groups = intField(g, "count", w, 0);
      if (s.groups < 1 || s.groups > (int64_t(1) << 20))
        invalid(sub(w, "count"), "must be in [1, 2^20], got " + std::to_string(s.groups));
      const json &o = field(g, "offsets", w);
      std::string wo = sub(w, "offsets");
      s.groupBuffer = bufferRef(o, "buffer", wo);
      s.groupOffset = linearField(o, "offset", wo);
      checkDtype(s.groupBuffer, "int32", wo);
    }
    if (fp8 || j.contains("scale_a") || j.contains("scale_b"))
      parseFp8(j, where, s);
    return s;
  }

  /// The block scales of an FP8 gemm and its restrictions ("gemm" in
  /// GpuProgram.h): required with float8_e4m3fn inputs, refused without.
  void parseFp8(const json &j, const std::string &where, GemmStep &s) {
    if (s.dtypeA != "float8_e4m3fn")
      invalid(where, "scale_a / scale_b are only for float8_e4m3fn inputs");
    if (s.groups > 0)
      invalid(where, "a block-scaled FP8 gemm cannot be grouped");
    if (s.alpha != 1.0 || s.beta != 0.0)
      invalid(where, "a block-scaled FP8 gemm needs alpha 1 and beta 0");
    auto scale = [&](const char *key, const char *mode) {
      std::string w = sub(where, key);
      const json &o = field(j, key, where);
      GemmScale g;
      g.mode = stringField(o, "mode", w);
      if (g.mode != mode)
        invalid(sub(w, "mode"), "must be \"" + std::string(mode) + "\", got \"" + g.mode + "\"");
      g.buffer = bufferRef(o, "buffer", w);
      g.offset = linearField(o, "offset", w);
      checkDtype(g.buffer, "float32", w);
      return g;
    };
    s.scaleA = scale("scale_a", "vec128");
    s.scaleB = scale("scale_b", "blk128x128");
  }
};

// --- Resolution -------------------------------------------------------------

bool addOk(int64_t a, int64_t b, int64_t &r) { return !__builtin_add_overflow(a, b, &r); }
bool mulOk(int64_t a, int64_t b, int64_t &r) { return !__builtin_mul_overflow(a, b, &r); }

/// The name of a step's field, formatted only when an error is reported:
/// a[i]b[j] ("args[2].sizes[1]", "grid.x", "q.offset").
struct Field {
  const char *a;
  int64_t i = -1;
  const char *b = "";
  int64_t j = -1;
  std::string str() const {
    std::string r = a;
    if (i >= 0)
      r += "[" + std::to_string(i) + "]";
    r += b;
    if (j >= 0)
      r += "[" + std::to_string(j) + "]";
    return r;
  }
};

/// Substitutes the symbols into one step and checks its accesses; throws
/// Invalid. Builds no strings unless something is wrong.
class Resolver {
public:
  Resolver(const GpuProgram &p, const SymbolValues &s, size_t index)
      : p(p), s(s), index(index) {}

  [[noreturn]] void bad(const Field &f, const std::string &what) {
    invalid("step " + std::to_string(index) + " (" + stepOpName(p.steps[index]) + "): " + f.str(),
            what);
  }

  std::string at() const {
    return "p0=" + std::to_string(s.p0) + ", n=" + std::to_string(s.n);
  }

  int64_t eval(const LinearExpr &e, const Field &f) {
    int64_t v;
    if (!e.evaluate(s, v))
      bad(f, "overflows int64 at " + at());
    return v;
  }

  int64_t evalNonNeg(const LinearExpr &e, const Field &f) {
    int64_t v = eval(e, f);
    if (v < 0)
      bad(f, "is " + std::to_string(v) + " (negative) at " + at());
    return v;
  }

  /// Checks that elements offset + sum_d i_d * strides[d], 0 <= i_d <
  /// sizes[d], of `elemSize` bytes each lie inside buffer `b`.
  void checkExtent(int b, int64_t elemSize, int64_t offset, const int64_t *sizes,
                   const int64_t *strides, size_t rank, const Field &f) {
    for (size_t d = 0; d < rank; ++d)
      if (sizes[d] == 0)
        return; // nothing is accessed
    int64_t last = offset, t, end;
    bool ok = true;
    for (size_t d = 0; d < rank && ok; ++d)
      ok = mulOk(sizes[d] - 1, strides[d], t) && addOk(last, t, last);
    ok = ok && addOk(last, 1, end) && mulOk(end, elemSize, end);
    const GpuBuffer &buf = p.buffers[b];
    if (!ok || end > buf.bytes)
      bad(f, "accesses bytes up to " + (ok ? std::to_string(end) : std::string("beyond int64")) +
                 " of buffer " + std::to_string(b) + ", which has " + std::to_string(buf.bytes) +
                 " (" + at() + ")");
  }

  void checkBytes(int b, int64_t offset, int64_t bytes, const Field &f) {
    int64_t one = 1;
    checkExtent(b, 1, offset, &bytes, &one, 1, f);
  }

  ResolvedLaunch launch(const LaunchStep &st) {
    ResolvedLaunch r;
    static const char *axis[] = {"x", "y", "z"};
    int64_t threads = 1;
    for (int d = 0; d < 3; ++d) {
      int64_t g = evalNonNeg(st.grid[d], {"grid.", -1, axis[d]});
      r.grid[d] = g / st.gridDiv[d] + (g % st.gridDiv[d] != 0);
      r.block[d] = evalNonNeg(st.block[d], {"block.", -1, axis[d]});
      if (r.grid[d] == 0)
        r.empty = true;
      if (r.grid[d] > (d == 0 ? int64_t(INT32_MAX) : 65535))
        bad({"grid.", -1, axis[d]}, std::to_string(r.grid[d]) + " is over the limit");
      if (r.block[d] < 1 || r.block[d] > 1024)
        bad({"block.", -1, axis[d]}, std::to_string(r.block[d]) + " is not in [1, 1024]");
      threads *= r.block[d];
    }
    if (threads > 1024)
      bad({"block"}, std::to_string(threads) + " threads per block is over 1024");
    r.args.resize(st.args.size());
    for (size_t a = 0; a < st.args.size(); ++a) {
      const LaunchArg &la = st.args[a];
      int64_t ai = static_cast<int64_t>(a);
      ResolvedLaunchArg &ra = r.args[a];
      ra.kind = la.kind;
      if (la.kind == LaunchArg::I64 || la.kind == LaunchArg::I32) {
        ra.value = integer(la.value, la.kind == LaunchArg::I32, {"args", ai});
      } else if (la.kind == LaunchArg::MemRef) {
        ra.memref = view(la, {"args", ai});
      } else if (la.kind == LaunchArg::Struct) {
        ra.fields.resize(la.fields.size());
        for (size_t f = 0; f < la.fields.size(); ++f) {
          const StructField &sf = la.fields[f];
          Field where{"args", ai, ".fields", static_cast<int64_t>(f)};
          if (sf.kind == StructField::I64 || sf.kind == StructField::I32)
            ra.fields[f].value = integer(sf.value, sf.kind == StructField::I32, where);
          else if (sf.isView())
            ra.fields[f].view = view(sf, where);
        }
      } else {
        ra.f32 = la.f32;
        ra.f64 = la.f64;
        ra.half = la.half;
      }
    }
    if (st.isAttention() && !r.empty)
      attention(st, r);
    return r;
  }

  /// Role "attention": the sizes the kernel indexes with (H20AttnParams'
  /// batch, heads, kv_heads, sq, skv and strides) agree with its views, so
  /// the views' bounds checks cover what the kernel reads and writes; GQA
  /// head counts divide; causal attention has skv >= sq (its first queries
  /// would see no key otherwise); the grid's y and z are heads and batch.
  void attention(const LaunchStep &st, const ResolvedLaunch &r) {
    using P = H20AttnParams;
    const LaunchArg &a = st.args[0];
    const ResolvedLaunchArg &ra = r.args[0];
    auto value = [&](size_t at) {
      return ra.fields[findFieldIndex(a, at, StructField::I64)].value;
    };
    auto viewAt = [&](size_t at) -> const ResolvedMemRef & {
      return ra.fields[findFieldIndex(a, at, StructField::Pointer)].view;
    };
    const int64_t batch = value(offsetof(P, batch)), heads = value(offsetof(P, heads)),
                  kvHeads = value(offsetof(P, kv_heads)), sq = value(offsetof(P, sq)),
                  skv = value(offsetof(P, skv));
    if (heads < 1 || heads > 65535 || kvHeads < 1 || heads % kvHeads)
      bad({"args[0] (attention)"}, "heads " + std::to_string(heads) + " and kv_heads " +
                                       std::to_string(kvHeads) +
                                       ": need 1 <= heads <= 65535, a multiple of kv_heads");
    int causal = findFieldIndex(a, offsetof(P, causal), StructField::I32);
    if (causal >= 0 && ra.fields[causal].value && skv < sq)
      bad({"args[0] (attention)"}, "skv " + std::to_string(skv) + " < sq " +
                                       std::to_string(sq) +
                                       " with causal: the first queries would see no key");
    if (r.grid[1] != heads || r.grid[2] != batch)
      bad({"grid"}, "must be (., heads " + std::to_string(heads) + ", batch " +
                        std::to_string(batch) + ") for the attention kernel");
    const struct {
      size_t pointer, stride;
      int64_t heads, seq;
      const char *name;
    } views[4] = {{offsetof(P, q), offsetof(P, q_stride), heads, sq, "q"},
                  {offsetof(P, k), offsetof(P, k_stride), kvHeads, skv, "k"},
                  {offsetof(P, v), offsetof(P, v_stride), kvHeads, skv, "v"},
                  {offsetof(P, o), offsetof(P, o_stride), heads, sq, "o"}};
    for (const auto &v : views) {
      const ResolvedMemRef &m = viewAt(v.pointer);
      bool same = m.sizes.size() == 4 && m.sizes[0] == batch && m.sizes[1] == v.heads &&
                  m.sizes[2] == v.seq;
      for (int d = 0; same && d < 4; ++d)
        same = m.strides[d] == value(v.stride + 8 * d);
      if (!same)
        bad({"args[0] (attention)"},
            std::string("the view of ") + v.name +
                " is not [batch, heads, seq, dim] with the struct's sizes and strides");
    }
    if (viewAt(offsetof(P, q)).sizes[3] != viewAt(offsetof(P, k)).sizes[3] ||
        viewAt(offsetof(P, v)).sizes[3] != viewAt(offsetof(P, o)).sizes[3])
      bad({"args[0] (attention)"}, "Q and K, or V and O, differ in head dim");
  }

  /// An i64 / i32 value (an i32 checked to fit).
  int64_t integer(const LinearExpr &e, bool i32, const Field &f) {
    int64_t v = eval(e, f);
    if (i32 && (v < INT32_MIN || v > INT32_MAX))
      bad(f, std::to_string(v) + " does not fit i32");
    return v;
  }

  /// A memref argument's or a struct field's view, checked to lie inside its
  /// buffer. Errors name `f` (a memref: "args[i].offset", "args[i].sizes[d]").
  template <class T> ResolvedMemRef view(const T &v, const Field &f) {
    const bool memref = f.j < 0;
    auto part = [&](const char *name, int64_t d) {
      return memref ? Field{f.a, f.i, name, d} : f;
    };
    ResolvedMemRef mr;
    mr.buffer = v.buffer;
    mr.offset = evalNonNeg(v.offset, part(".offset", -1));
    size_t rank = v.sizes.size();
    mr.sizes.resize(rank);
    mr.strides.resize(rank);
    for (size_t d = 0; d < rank; ++d) {
      mr.sizes[d] = evalNonNeg(v.sizes[d], part(".sizes", static_cast<int64_t>(d)));
      mr.strides[d] = evalNonNeg(v.strides[d], part(".strides", static_cast<int64_t>(d)));
    }
    checkExtent(v.buffer, viewElementBytes(p, v.buffer, v.dtype), mr.offset, mr.sizes.data(),
                mr.strides.data(), rank, f);
    return mr;
  }

  ResolvedGemmOperand operand(const GemmOperand &o, const char *name, int64_t rows,
                              int64_t cols, int64_t batch, int64_t es) {
    ResolvedGemmOperand r;
    r.buffer = o.buffer;
    r.offset = evalNonNeg(o.offset, {name, -1, ".offset"});
    r.batchStride = evalNonNeg(o.batchStride, {name, -1, ".batch_stride"});
    r.rowStride = evalNonNeg(o.rowStride, {name, -1, ".row_stride"});
    r.colStride = evalNonNeg(o.colStride, {name, -1, ".col_stride"});
    const int64_t sizes[3] = {batch, rows, cols};
    const int64_t strides[3] = {r.batchStride, r.rowStride, r.colStride};
    checkExtent(o.buffer, es, r.offset, sizes, strides, 3, {name});
    return r;
  }

  ResolvedGemm gemm(const GemmStep &st) {
    ResolvedGemm r;
    r.batch = evalNonNeg(st.batch, {"batch"});
    r.m = evalNonNeg(st.m, {"m"});
    r.n = evalNonNeg(st.n, {"n"});
    r.k = evalNonNeg(st.k, {"k"});
    if (r.batch > INT32_MAX)
      bad({"batch"}, std::to_string(r.batch) + " is over 2^31-1");
    r.groups = st.groups;
    if (st.groups > 0) {
      if (r.batch != 1)
        bad({"batch"}, "must be 1 in a grouped GEMM, got " + std::to_string(r.batch));
      r.groupBuffer = st.groupBuffer;
      r.groupOffset = evalNonNeg(st.groupOffset, {"groups.offsets.offset"});
      const int64_t count = st.groups + 1, one = 1;
      checkExtent(st.groupBuffer, 4, r.groupOffset, &count, &one, 1, {"groups.offsets"});
    }
    if (!st.scaleA.mode.empty())
      fp8Scales(st, r);
    r.a = operand(st.a, "a", r.m, r.k, r.batch, dtypeSize(st.dtypeA));
    r.b = operand(st.b, "b", r.k, r.n, st.groups > 0 ? st.groups : r.batch,
                  dtypeSize(st.dtypeB));
    r.c = operand(st.c, "c", r.m, r.n, r.batch, dtypeSize(st.dtypeC));
    r.empty = r.batch == 0 || r.m == 0 || r.n == 0;
    if (!r.empty && r.k == 0 && st.beta != 1.0)
      bad({"k"}, "is 0 (C = beta * C is not supported unless beta is 1)");
    if (!r.empty && r.k == 0)
      r.empty = true; // C = C
    if (!r.empty) {
      GemmProblem prob;
      prob.batch = r.batch;
      prob.m = r.m;
      prob.n = r.n;
      prob.k = r.k;
      prob.a = {r.a.batchStride, r.a.rowStride, r.a.colStride};
      prob.b = {r.b.batchStride, r.b.rowStride, r.b.colStride};
      prob.c = {r.c.batchStride, r.c.rowStride, r.c.colStride};
      GemmPlan plan;
      std::string err;
      if (!planGemm(prob, plan, err))
        invalid("step " + std::to_string(index) + " (gemm)", err);
      if (r.scaleBufferA >= 0) {
        if (r.batch != 1)
          bad({"batch"}, "must be 1 in a block-scaled FP8 gemm");
        if (r.k % 16 != 0)
          bad({"k"}, "must be a multiple of 16 in an FP8 gemm, got " + std::to_string(r.k));
        if (r.n % 16 != 0)
          bad({"n"}, "must be a multiple of 16 in an FP8 gemm, got " + std::to_string(r.n));
        if ((r.a.colStride != 1 && r.k > 1) || (r.b.rowStride != 1 && r.k > 1) ||
            (r.c.colStride != 1 && r.n > 1))
          invalid("step " + std::to_string(index) + " (gemm)",
                  "a block-scaled FP8 gemm needs A row-major, B column-major (B = W^T of a "
                  "row-major W) and C row-major");
      }
    }
    return r;
  }

  /// The scale views of a block-scaled FP8 gemm, checked against their
  /// buffers (GpuProgram.h "gemm": ceil(k / 128) x m and ceil(n / 128) x kp
  /// float32 elements).
  void fp8Scales(const GemmStep &st, ResolvedGemm &r) {
    r.scaleBufferA = st.scaleA.buffer;
    r.scaleBufferB = st.scaleB.buffer;
    r.scaleOffsetA = evalNonNeg(st.scaleA.offset, {"scale_a", -1, ".offset"});
    r.scaleOffsetB = evalNonNeg(st.scaleB.offset, {"scale_b", -1, ".offset"});
    int64_t countA = 0, countB = 0;
    if (!mulOk(fp8KBlocks(r.k), r.m, countA) ||
        !mulOk(fp8PaddedKBlocks(r.k), fp8KBlocks(r.n), countB))
      bad({"k"}, "scale counts overflow");
    const int64_t one = 1;
    checkExtent(st.scaleA.buffer, 4, r.scaleOffsetA, &countA, &one, 1, {"scale_a"});
    checkExtent(st.scaleB.buffer, 4, r.scaleOffsetB, &countB, &one, 1, {"scale_b"});
  }

  ResolvedMemset memset(const MemsetStep &st) {
    ResolvedMemset r;
    r.buffer = st.buffer;
    r.offsetBytes = evalNonNeg(st.offsetBytes, {"offset_bytes"});
    r.bytes = evalNonNeg(st.bytes, {"bytes"});
    checkBytes(st.buffer, r.offsetBytes, r.bytes, {"bytes"});
    return r;
  }

  ResolvedCopy copy(const CopyStep &st) {
    ResolvedCopy r;
    r.src = st.src;
    r.dst = st.dst;
    r.srcOffsetBytes = evalNonNeg(st.srcOffsetBytes, {"src_offset_bytes"});
    r.dstOffsetBytes = evalNonNeg(st.dstOffsetBytes, {"dst_offset_bytes"});
    r.bytes = evalNonNeg(st.bytes, {"bytes"});
    checkBytes(st.src, r.srcOffsetBytes, r.bytes, {"src"});
    checkBytes(st.dst, r.dstOffsetBytes, r.bytes, {"dst"});
    if (auto at0 = sharedStarts(st.src, st.dst, r.srcOffsetBytes, r.dstOffsetBytes);
        at0 && r.bytes > 0 && overlaps(*at0, r.bytes))
      invalid("step " + std::to_string(index) + " (copy)",
              "source and destination ranges overlap (" + std::to_string(r.bytes) +
                  " bytes at " + at() + ")");
    return r;
  }

  /// Where a transfer's source and destination start in one address space
  /// (the buffer itself, or the arena for two temps); nullopt when the two
  /// buffers cannot overlap.
  std::optional<std::pair<int64_t, int64_t>> sharedStarts(int src, int dst, int64_t srcOffset,
                                                          int64_t dstOffset) const {
    const GpuBuffer &sb = p.buffers[src], &db = p.buffers[dst];
    if (src == dst)
      return std::pair(srcOffset, dstOffset);
    if (sb.kind == BufferKind::Temp && db.kind == BufferKind::Temp)
      return std::pair(srcOffset + sb.offset, dstOffset + db.offset);
    return std::nullopt;
  }
  static bool overlaps(std::pair<int64_t, int64_t> starts, int64_t bytes) {
    auto [s0, d0] = starts;
    return s0 < d0 + bytes && d0 < s0 + bytes;
  }

  ResolvedAllReduce allReduce(const AllReduceStep &st) {
    ResolvedAllReduce r;
    r.src = st.src;
    r.dst = st.dst;
    r.srcOffsetBytes = evalNonNeg(st.srcOffsetBytes, {"src_offset_bytes"});
    r.dstOffsetBytes = evalNonNeg(st.dstOffsetBytes, {"dst_offset_bytes"});
    r.bytes = evalNonNeg(st.bytes, {"bytes"});
    const int64_t es = dtypeSize(st.dtype);
    for (auto [name, v] : {std::pair<const char *, int64_t>{"bytes", r.bytes},
                           {"src_offset_bytes", r.srcOffsetBytes},
                           {"dst_offset_bytes", r.dstOffsetBytes}})
      if (v % es != 0)
        bad({name}, std::to_string(v) + " is not a multiple of the " + std::to_string(es) +
                        "-byte " + st.dtype + " element (" + at() + ")");
    checkBytes(st.src, r.srcOffsetBytes, r.bytes, {"src"});
    checkBytes(st.dst, r.dstOffsetBytes, r.bytes, {"dst"});
    if (auto at0 = sharedStarts(st.src, st.dst, r.srcOffsetBytes, r.dstOffsetBytes);
        at0 && r.bytes > 0 && at0->first != at0->second && overlaps(*at0, r.bytes))
      bad({"dst"}, "overlaps the source without being the same range (" +
                       std::to_string(r.bytes) + " bytes at " + at() + ")");
    return r;
  }

private:
  const GpuProgram &p;
  SymbolValues s;
  size_t index;
};

} // namespace

bool LinearExpr::evaluate(const SymbolValues &s, int64_t &out) const {
  int64_t a, b, dq, e, sum;
  if (!mulOk(p0, s.p0, a) || !mulOk(n, s.n, b) || !mulOk(q, s.q, dq) || !mulOk(r, s.rank, e) ||
      !addOk(c, a, sum) || !addOk(sum, b, sum) || !addOk(sum, dq, sum) || !addOk(sum, e, sum))
    return false;
  for (int k = 0; k < kMaxDerived; ++k) {
    int64_t t;
    if (d[k] != 0 && (!mulOk(d[k], s.d[k], t) || !addOk(sum, t, sum)))
      return false;
  }
  out = sum;
  return true;
}

bool deriveSymbols(const std::vector<DerivedSymbol> &derived, SymbolValues &s) {
  for (size_t k = 0; k < derived.size() && k < static_cast<size_t>(kMaxDerived); ++k) {
    int64_t v;
    if (!derived[k].of.evaluate(s, v) || derived[k].div < 1)
      return false;
    const int64_t div = derived[k].div;
    s.d[k] = v / div - (v % div != 0 && v < 0 ? 1 : 0);
  }
  return true;
}

const char *stepOpName(const GpuStep &step) {
  static const char *names[] = {"launch", "gemm", "memset", "copy", "all_reduce"};
  return names[step.index()];
}

bool isAttentionStep(const GpuStep &step) {
  auto *l = std::get_if<LaunchStep>(&step);
  return l && l->isAttention();
}

int64_t StructField::bytes() const {
  switch (kind) {
  case I32:
  case F32:
  case TensorMapsValid:
    return 4;
  case TensorMap:
    return 128;
  default:
    return 8;
  }
}

int64_t viewElementBytes(const GpuProgram &p, int buffer, const std::string &dtype) {
  const std::string &dt = !dtype.empty() ? dtype : p.buffers[buffer].dtype;
  int64_t es = dt.empty() ? 1 : dtypeSize(dt);
  return es > 0 ? es : 1;
}

StepSymbols stepSymbols(const GpuStep &step, const std::vector<DerivedSymbol> &derived) {
  StepSymbols r;
  auto base = [&](const LinearExpr &e) {
    r.p0 = r.p0 || e.p0 != 0 || e.q != 0;
    r.q = r.q || e.q != 0;
    r.n = r.n || e.n != 0;
    r.rank = r.rank || e.r != 0;
  };
  auto use = [&](const LinearExpr &e) {
    base(e);
    for (size_t k = 0; k < derived.size() && k < static_cast<size_t>(kMaxDerived); ++k)
      if (e.d[k] != 0)
        base(derived[k].of);
  };
  if (auto *l = std::get_if<LaunchStep>(&step)) {
    for (int d = 0; d < 3; ++d) {
      use(l->grid[d]);
      use(l->block[d]);
    }
    auto useView = [&](const auto &v) {
      use(v.value);
      use(v.offset);
      for (const LinearExpr &e : v.sizes)
        use(e);
      for (const LinearExpr &e : v.strides)
        use(e);
    };
    for (const LaunchArg &a : l->args) {
      useView(a);
      for (const StructField &f : a.fields)
        useView(f);
    }
  } else if (auto *g = std::get_if<GemmStep>(&step)) {
    for (const LinearExpr *e : {&g->batch, &g->m, &g->n, &g->k})
      use(*e);
    for (const GemmOperand *o : {&g->a, &g->b, &g->c})
      for (const LinearExpr *e : {&o->offset, &o->batchStride, &o->rowStride, &o->colStride})
        use(*e);
    use(g->groupOffset);
    use(g->scaleA.offset);
    use(g->scaleB.offset);
  } else if (auto *m = std::get_if<MemsetStep>(&step)) {
    use(m->offsetBytes);
    use(m->bytes);
  } else if (auto *c = std::get_if<CopyStep>(&step)) {
    for (const LinearExpr *e : {&c->srcOffsetBytes, &c->dstOffsetBytes, &c->bytes})
      use(*e);
  } else {
    const AllReduceStep &a = std::get<AllReduceStep>(step);
    for (const LinearExpr *e : {&a.srcOffsetBytes, &a.dstOffsetBytes, &a.bytes})
      use(*e);
  }
  return r;
}

bool parseGpuProgram(const std::string &manifestJson, const Manifest &m, uint64_t payloadSize,
                     GpuProgram &program, std::string &error) {
  program = GpuProgram();
  try {
    json j = json::parse(manifestJson);
    const json *g = j.is_object() ? find(j, "gpu") : nullptr;
    if (!g || g->is_null()) {
      error = "the manifest has no \"gpu\" program (target '" + m.target + "')";
      return false;
    }
    Parser(m, payloadSize, program).parse(*g);
  } catch (const Invalid &e) {
    error = std::string("gpu program: ") + e.what();
    return false;
  } catch (const std::exception &e) {
    error = std::string("gpu program: invalid JSON: ") + e.what();
    return false;
  }
  // The largest prompt the artifact accepts bounds every access: check it now.
  if (program.chunking) {
    const TensorSpec &in = m.inputs[program.chunking->input];
    int64_t maxLength = in.shape[program.chunking->dim];
    if (maxLength < 0 && m.maxPositions)
      maxLength = *m.maxPositions;
    if (maxLength > 0 && !checkGpuProgramForLength(program, maxLength, error))
      return false;
  }
  return true;
}

std::vector<SymbolValues> chunkSchedule(const GpuProgram &program, int64_t length) {
  if (!program.chunking || length <= 0)
    return {SymbolValues{0, std::max<int64_t>(length, 0), 0}};
  int64_t c = program.chunking->chunk;
  std::vector<SymbolValues> out;
  for (int64_t p0 = 0; p0 < length; p0 += c) {
    out.push_back({p0, std::min(c, length - p0), p0 / c});
    // No overflow: positions < 2^40 times coefficients of at most 2^20
    // (parseDerived), four terms.
    deriveSymbols(program.derived, out.back());
  }
  return out;
}

bool resolveStep(const GpuProgram &program, size_t index, const SymbolValues &s,
                 ResolvedStep &out, std::string &error) {
  if (index >= program.steps.size()) {
    error = "step " + std::to_string(index) + " does not exist";
    return false;
  }
  const GpuStep &step = program.steps[index];
  try {
    Resolver r(program, s, index);
    if (auto *l = std::get_if<LaunchStep>(&step))
      out = r.launch(*l);
    else if (auto *g = std::get_if<GemmStep>(&step))
      out = r.gemm(*g);
    else if (auto *m = std::get_if<MemsetStep>(&step))
      out = r.memset(*m);
    else if (auto *c = std::get_if<CopyStep>(&step))
      out = r.copy(*c);
    else
      out = r.allReduce(std::get<AllReduceStep>(step));
  } catch (const Invalid &e) {
    error = e.what();
    return false;
  }
  return true;
}

bool checkGpuProgramForLength(const GpuProgram &program, int64_t length, std::string &error) {
  std::vector<SymbolValues> chunks = chunkSchedule(program, length);
  size_t k = chunks.size();
  std::vector<size_t> probe = {0};
  if (k >= 3)
    probe.push_back(k - 2);
  if (k >= 2)
    probe.push_back(k - 1);
  // Derived symbols (floor(of / div)) repeat with the chunk index modulo
  // their divisors: also the chunks of one such period before the last,
  // where each residue's accesses reach furthest (at most 32 more; every
  // chunk's steps are resolved again, and checked, when they run).
  int64_t period = 1;
  for (const DerivedSymbol &d : program.derived)
    period = d.div > 32 ? 32 : std::min<int64_t>(32, std::lcm(period, std::max<int64_t>(d.div, 1)));
  for (int64_t j = 3; j <= period && j <= static_cast<int64_t>(k); ++j)
    probe.push_back(k - static_cast<size_t>(j));
  for (size_t c : probe)
    for (size_t i = 0; i < program.steps.size(); ++i) {
      ResolvedStep r;
      if (!resolveStep(program, i, chunks[c], r, error)) {
        error = "gpu program: for a prompt of " + std::to_string(length) + " tokens, chunk " +
                std::to_string(c) + ": " + error;
        return false;
      }
    }
  return true;
}

std::vector<std::string> hostTableNames(const GpuProgram &program, const BufferPlan &plan,
                                        const Manifest &manifest) {
  std::vector<std::string> names;
  for (size_t b = 0; b < program.buffers.size() && b < plan.onHost.size(); ++b) {
    const int64_t w = program.buffers[b].index;
    if (plan.onHost[b] && w >= 0 && static_cast<size_t>(w) < manifest.weights.size())
      names.push_back(manifest.weights[static_cast<size_t>(w)].name);
  }
  return names;
}

bool planBuffers(const GpuProgram &program, BufferPlan &plan, std::string &error,
                 const std::vector<int> &sameAs) {
  plan = BufferPlan();
  if (!sameAs.empty() && sameAs.size() != program.buffers.size()) {
    error = "gpu program: internal: a buffer sharing list of the wrong size";
    return false;
  }
  plan.offsets.assign(program.buffers.size(), 0);
  plan.onHost.assign(program.buffers.size(), false);
  uint64_t cursor = 0, hostCursor = 0;
  auto place = [&](uint64_t bytes, bool host = false) {
    uint64_t &c = host ? hostCursor : cursor;
    uint64_t at = (c + 255) / 256 * 256;
    c = at + bytes;
    return at;
  };
  for (BufferKind kind : {BufferKind::Weight, BufferKind::Const, BufferKind::State,
                          BufferKind::Input, BufferKind::Output})
    for (size_t i = 0; i < program.buffers.size(); ++i) {
      const GpuBuffer &b = program.buffers[i];
      if (b.kind != kind)
        continue;
      if (b.bytes < 0 || b.bytes > kMaxBytes || cursor > (uint64_t(1) << 62) ||
          hostCursor > (uint64_t(1) << 62)) {
        error = "gpu program: buffers too large to plan";
        return false;
      }
      if (kind == BufferKind::Weight && !sameAs.empty() && sameAs[i] >= 0) {
        const size_t j = static_cast<size_t>(sameAs[i]);
        if (j >= i || program.buffers[j].kind != BufferKind::Weight ||
            program.buffers[j].bytes != b.bytes || program.buffers[j].host != b.host) {
          error = "gpu program: internal: weight buffer " + std::to_string(i) +
                  " cannot share buffer " + std::to_string(j) + "'s memory";
          return false;
        }
        plan.offsets[i] = plan.offsets[j];
        plan.onHost[i] = plan.onHost[j];
        continue;
      }
      uint64_t bytes = static_cast<uint64_t>(b.bytes);
      if (kind == BufferKind::Weight && b.host) {
        plan.offsets[i] = place(bytes, true);
        plan.onHost[i] = true;
        plan.hostWeightBytes += bytes;
        continue;
      }
      plan.offsets[i] = place(bytes);
      (kind == BufferKind::Weight  ? plan.weightBytes
       : kind == BufferKind::Const ? plan.constBytes
       : kind == BufferKind::State ? plan.stateBytes
                                   : plan.ioBytes) += bytes;
    }
  if (program.arenaBytes < 0 || program.arenaBytes > kMaxBytes || cursor > (uint64_t(1) << 62)) {
    error = "gpu program: buffers too large to plan";
    return false;
  }
  plan.arenaOffset = place(static_cast<uint64_t>(program.arenaBytes));
  for (size_t i = 0; i < program.buffers.size(); ++i)
    if (program.buffers[i].kind == BufferKind::Temp)
      plan.offsets[i] = plan.arenaOffset + static_cast<uint64_t>(program.buffers[i].offset);
  plan.totalBytes = std::max<uint64_t>((cursor + 255) / 256 * 256, 256);
  plan.hostBytes = hostCursor ? (hostCursor + 255) / 256 * 256 : 0;
  return true;
}

// --- Element conversions ------------------------------------------------------

uint16_t floatToBfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep the sign, make it quiet
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) // infinity or NaN
    return static_cast<uint16_t>(sign | 0x7C00u |
                                 (ax > 0x7F800000u ? 0x0200u | ((ax >> 13) & 0x03FFu) : 0u));
  if (ax >= 0x477FF000u) // >= 65520 rounds to infinity
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
    if (ax <= 0x33000000u) // <= 2^-25: rounds to zero (ties to even)
      return static_cast<uint16_t>(sign);
    uint32_t e = ax >> 23;
    uint32_t mant = (ax & 0x007FFFFFu) | 0x00800000u;
    uint32_t shift = 126 - e; // units of 2^-24
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
      ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x03FFu);
  uint32_t rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // a carry into the exponent is the correct rounding
  return static_cast<uint16_t>(sign | h);
}

float bfloat16ToFloat(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, mant = h & 0x03FFu, x;
  if (e == 0x1F) {
    x = sign | 0x7F800000u | (mant << 13);
  } else if (e != 0) {
    x = sign | ((e + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    x = sign;
  } else { // subnormal: normalise
    int shift = 0;
    while (!(mant & 0x0400u)) {
      mant <<= 1;
      ++shift;
    }
    x = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mant & 0x03FFu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

bool canConvert(const std::string &from, const std::string &to) {
  if (dtypeSize(from) == 0 || dtypeSize(to) == 0)
    return false;
  if (from == to)
    return true;
  if (from == "float32")
    return to == "bfloat16" || to == "float16";
  return to == "float32" && (from == "bfloat16" || from == "float16");
}

void convertElements(const std::string &from, const void *src, const std::string &to, void *dst,
                     size_t count) {
  if (from == to) {
    std::memcpy(dst, src, count * static_cast<size_t>(dtypeSize(from)));
    return;
  }
  if (from == "float32") {
    const auto *s = static_cast<const float *>(src);
    auto *d = static_cast<uint16_t *>(dst);
    if (to == "bfloat16")
      for (size_t i = 0; i < count; ++i)
        d[i] = floatToBfloat16(s[i]);
    else
      for (size_t i = 0; i < count; ++i)
        d[i] = floatToHalf(s[i]);
    return;
  }
  const auto *s = static_cast<const uint16_t *>(src);
  auto *d = static_cast<float *>(dst);
  if (from == "bfloat16")
    for (size_t i = 0; i < count; ++i)
      d[i] = bfloat16ToFloat(s[i]);
  else
    for (size_t i = 0; i < count; ++i)
      d[i] = halfToFloat(s[i]);
}

} // namespace h20::runtime
