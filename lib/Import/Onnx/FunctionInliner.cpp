//===- FunctionInliner.cpp - expand calls of model-local functions -------===//
//
// ONNX IR spec, "Functions" (onnx/docs/IR.md): a ModelProto may carry
// FunctionProtos, each identified by (domain, name); a node whose (domain,
// op_type) is such a pair calls it. The call means its body with
//   * the function's formal inputs and outputs bound, by position, to the
//     node's actual inputs and outputs (an omitted optional input, an empty
//     name or one past the node's inputs, stays omitted inside the body);
//   * every body attribute that refers to a function attribute
//     (AttributeProto.ref_attr_name) replaced by the node's attribute of
//     that name, else by the function's default (FunctionProto.
//     attribute_proto, IR 9), else left out;
//   * body nodes that call local functions expanded the same way.
// The body's other value names are local to one call: each call site gets
// its own copies, named "<call>/<value>" (made unique against every name of
// the graph), and body nodes are named "<call>/<node>" (or "<call>/<op>"),
// so errors in them say where they came from. <call> is the call node's
// name, or the function's for an unnamed node, with "_N" added where two
// calls would share it.
//
// Body nodes are bound at the model's opsets (the importer has one opset
// per domain), so a function that imports a domain at another version than
// the model is refused; a domain only the function imports is added.
// Recursion, unknown or mistyped attributes and bodies that read values
// they do not define are refused, and so are calls nested over 64 deep and
// expansions of over 2^21 nodes (counted from the bodies before anything is
// copied: a hostile model could otherwise grow exponentially).
//
// The protobuf bindings h20 builds against (ONNX 1.12) predate
// attribute_proto (field 11); it is then read from the FunctionProto's
// unknown fields.
//
//===----------------------------------------------------------------------===//
#include "FunctionInliner.h"
#include "OpTable.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

namespace h20::onnx_import {
namespace {

using ::onnx::AttributeProto;
using ::onnx::FunctionProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = size_t(1) << 21;
constexpr uint32_t kFunctionAttributeProtoField = 11;

std::string normalizedDomain(const std::string &d) { return d == "ai.onnx" ? "" : d; }

/// A local function and its attributes: declared names (with or without a
/// default) and defaults.
struct LocalFunction {
  const FunctionProto *proto = nullptr;
  llvm::StringSet<> attributeNames;
  std::map<std::string, AttributeProto> defaults;
};

template <typename F, typename = void>
struct HasAttributeProto : std::false_type {};
template <typename F>
struct HasAttributeProto<F, std::void_t<decltype(std::declval<const F &>().attribute_proto())>>
    : std::true_type {};

/// Field 11 entries of unknown fields kept as bytes (protobuf-lite
/// bindings); false on corrupt bytes.
[[maybe_unused]] bool defaultsFromUnknown(const std::string &unknown, std::vector<AttributeProto> &out) {
  namespace pb = google::protobuf;
  using Wire = pb::internal::WireFormatLite;
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(unknown.data()),
                              static_cast<int>(unknown.size()));
  while (uint32_t tag = in.ReadTag()) {
    if (Wire::GetTagFieldNumber(tag) != kFunctionAttributeProtoField ||
        Wire::GetTagWireType(tag) != Wire::WIRETYPE_LENGTH_DELIMITED) {
      if (!Wire::SkipField(&in, tag))
        return false;
      continue;
    }
    std::string bytes;
    uint32_t length;
    if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length)))
      return false;
    if (!out.emplace_back().ParseFromString(bytes))
      return false;
  }
  return in.ConsumedEntireMessage();
}

/// The same from an UnknownFieldSet (full protobuf bindings, Debian's).
[[maybe_unused]] bool defaultsFromUnknown(const google::protobuf::UnknownFieldSet &unknown,
                         std::vector<AttributeProto> &out) {
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    if (f.number() != static_cast<int>(kFunctionAttributeProtoField))
      continue;
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
        !out.emplace_back().ParseFromString(f.length_delimited()))
      return false;
  }
  return true;
}

/// FunctionProto.attribute_proto: the generated field where the bindings
/// have it, else read from the unknown fields (false on corrupt bytes).
template <typename F>
bool readDefaults(const F &fn, std::vector<AttributeProto> &out) {
  if constexpr (HasAttributeProto<F>::value) {
    out.assign(fn.attribute_proto().begin(), fn.attribute_proto().end());
    return true;
  } else {
    return defaultsFromUnknown(fn.unknown_fields(), out);
  }
}

class Inliner {
public:
  Inliner(ModelProto &model, const std::vector<std::string> &expandAnyway)
      : model(model), expandAnyway(expandAnyway) {}
  bool run(std::string &error);

private:
  /// Appends the expansion of `call` (a call of `fn`) to `out`.
  bool expand(const NodeProto &call, const LocalFunction &fn,
              std::vector<NodeProto> &out, std::string &error);
  /// The body node `n` of `fn` as called by `call`: names bound through
  /// `names`, attribute references resolved.
  bool instantiate(const NodeProto &n, const NodeProto &call, const LocalFunction &fn,
                   const std::string &prefix, const llvm::StringMap<std::string> &names,
                   NodeProto &result, std::string &error);
  /// Appends `n` to `out`, expanding it first when it calls a local function.
  bool emit(const NodeProto &n, std::vector<NodeProto> &out, std::string &error);
  const LocalFunction *lookup(const NodeProto &n) const;
  /// Nodes a call of `fn` expands to (saturating above kMaxNodes), from
  /// the bodies alone, so a model that would blow up is refused before
  /// anything is copied. Recursive calls count 0 here (expand() names
  /// them); `deepest` is the function at which nesting passed kMaxDepth.
  size_t expandedSize(const LocalFunction &fn, int depth, const LocalFunction *&deepest);
  /// `base`, or `base`_N, whichever is not in `used` yet; added to it.
  std::string freshName(llvm::StringSet<> &used, const std::string &base);
  bool collectFunctions(std::string &error);
  bool mergeOpsets(std::string &error);

  ModelProto &model;
  const std::vector<std::string> &expandAnyway;
  std::map<std::pair<std::string, std::string>, LocalFunction> functions;
  llvm::StringSet<> usedNames;
  llvm::StringSet<> usedPrefixes;
  llvm::StringMap<int> nextSuffix; ///< per base name, for freshName()
  std::vector<const LocalFunction *> stack; ///< the calls being expanded
  std::map<const LocalFunction *, size_t> sizes; ///< expandedSize(), once known
  llvm::SmallPtrSet<const LocalFunction *, 8> sizing;
  size_t emitted = 0;
};

std::string qualifiedName(const FunctionProto &f) {
  return (f.domain().empty() ? "" : f.domain() + ".") + f.name();
}

/// "node 'NAME' (op 'D.T')", how messages name a call.
std::string describeCall(const NodeProto &n) {
  return "node '" + n.name() + "' (op '" + (n.domain().empty() ? "" : n.domain() + ".") +
         n.op_type() + "')";
}

const LocalFunction *Inliner::lookup(const NodeProto &n) const {
  auto it = functions.find({normalizedDomain(n.domain()), n.op_type()});
  if (it == functions.end())
    return nullptr;
  // A call h20 imports as an op of its own (the ai.h20 domain: attention
  // and indexer forms whose bodies would build S x S intermediates) stays a
  // call; its body only documents the meaning (and lets other runtimes run it).
  std::string domain = normalizedDomain(n.domain());
  if (llvm::is_contained(expandAnyway, n.op_type()))
    return &it->second;
  for (const auto &o : model.opset_import())
    if (normalizedDomain(o.domain()) == domain && lookupOp(domain, n.op_type(), o.version()))
      return nullptr;
  return &it->second;
}

std::string Inliner::freshName(llvm::StringSet<> &used, const std::string &base) {
  // Suffixes continue where the last name from `base` stopped, so many
  // calls of one function cost no more than one each.
  int &next = nextSuffix[base];
  std::string name = next ? base + "_" + std::to_string(next) : base;
  while (used.contains(name))
    name = base + "_" + std::to_string(++next);
  ++next;
  used.insert(name);
  return name;
}

bool Inliner::collectFunctions(std::string &error) {
  for (const FunctionProto &f : model.functions()) {
    LocalFunction fn;
    fn.proto = &f;
    for (const std::string &a : f.attribute())
      fn.attributeNames.insert(a);
    std::vector<AttributeProto> defaults;
    if (!readDefaults(f, defaults)) {
      error = "function '" + qualifiedName(f) + "': attribute_proto is corrupt";
      return false;
    }
    for (AttributeProto &a : defaults) {
      fn.attributeNames.insert(a.name());
      fn.defaults[a.name()] = std::move(a);
    }
    auto key = std::make_pair(normalizedDomain(f.domain()), f.name());
    if (!functions.emplace(key, std::move(fn)).second) {
      error = "function '" + qualifiedName(f) +
              "' is defined twice (function overloads are not supported)";
      return false;
    }
  }
  return true;
}

bool Inliner::mergeOpsets(std::string &error) {
  std::map<std::string, int64_t> modelOpsets;
  for (const auto &o : model.opset_import())
    modelOpsets[normalizedDomain(o.domain())] = o.version();
  for (const auto &[key, fn] : functions)
    for (const auto &o : fn.proto->opset_import()) {
      std::string d = normalizedDomain(o.domain());
      auto it = modelOpsets.find(d);
      if (it == modelOpsets.end()) {
        modelOpsets[d] = o.version();
        auto *added = model.add_opset_import();
        added->set_domain(d);
        added->set_version(o.version());
      } else if (it->second != o.version()) {
        error = "function '" + qualifiedName(*fn.proto) + "' imports opset " +
                std::to_string(o.version()) + " of domain '" + d + "' but the model imports " +
                std::to_string(it->second) +
                " (h20 binds function bodies at the model's opsets; export both at one version)";
        return false;
      }
    }
  return true;
}

bool Inliner::instantiate(const NodeProto &n, const NodeProto &call, const LocalFunction &fn,
                          const std::string &prefix, const llvm::StringMap<std::string> &names,
                          NodeProto &result, std::string &error) {
  std::string fname = qualifiedName(*fn.proto);
  std::string where = "function '" + fname + "' called by " + describeCall(call) + ": body " +
                      "node '" + n.name() + "' (op '" + n.op_type() + "')";
  result = n;
  result.set_name(prefix + "/" + (n.name().empty() ? n.op_type() : n.name()));
  result.clear_input();
  for (const std::string &in : n.input()) {
    if (in.empty()) {
      result.add_input("");
      continue;
    }
    auto it = names.find(in);
    if (it == names.end()) {
      error = where + " reads '" + in +
              "', which is neither a function input nor computed in the function";
      return false;
    }
    result.add_input(it->second);
  }
  result.clear_output();
  for (const std::string &o : n.output())
    result.add_output(o.empty() ? "" : names.lookup(o));
  result.clear_attribute();
  for (const AttributeProto &a : n.attribute()) {
    if (!a.has_ref_attr_name() || a.ref_attr_name().empty()) {
      *result.add_attribute() = a;
      continue;
    }
    const std::string &ref = a.ref_attr_name();
    if (!fn.attributeNames.contains(ref)) {
      error = where + ": attribute '" + a.name() + "' refers to '" + ref +
              "', which is not an attribute of the function";
      return false;
    }
    const AttributeProto *value = nullptr;
    for (const AttributeProto &c : call.attribute())
      if (c.name() == ref)
        value = &c;
    if (!value) {
      auto d = fn.defaults.find(ref);
      if (d == fn.defaults.end())
        continue; // neither given nor defaulted: the attribute is absent
      value = &d->second;
    }
    if (a.type() != AttributeProto::UNDEFINED && value->type() != AttributeProto::UNDEFINED &&
        a.type() != value->type()) {
      error = where + ": attribute '" + a.name() + "' has type " +
              AttributeProto::AttributeType_Name(a.type()) + " but the function attribute '" +
              ref + "' it refers to is " + AttributeProto::AttributeType_Name(value->type());
      return false;
    }
    AttributeProto *bound = result.add_attribute();
    *bound = *value;
    bound->set_name(a.name());
    bound->clear_ref_attr_name();
  }
  return true;
}

bool Inliner::expand(const NodeProto &call, const LocalFunction &fn,
                     std::vector<NodeProto> &out, std::string &error) {
  const FunctionProto &f = *fn.proto;
  std::string fname = qualifiedName(f);
  std::string here = describeCall(call) + " calls function '" + fname + "'";
  if (llvm::is_contained(stack, &fn)) {
    error = here + ", which is already being expanded (recursive functions cannot be inlined)";
    return false;
  }
  if (static_cast<int>(stack.size()) >= kMaxDepth) {
    error = here + " at a nesting depth over " + std::to_string(kMaxDepth);
    return false;
  }
  if (call.input_size() > f.input_size() || call.output_size() > f.output_size()) {
    error = here + " with " + std::to_string(call.input_size()) + " input(s) and " +
            std::to_string(call.output_size()) + " output(s), but it has " +
            std::to_string(f.input_size()) + " and " + std::to_string(f.output_size());
    return false;
  }
  for (const AttributeProto &a : call.attribute())
    if (!fn.attributeNames.contains(a.name())) {
      error = here + " with attribute '" + a.name() + "', which the function does not declare";
      return false;
    }

  // One prefix per call site, so the copies' node names tell them apart.
  std::string prefix = freshName(usedPrefixes, call.name().empty() ? fname : call.name());
  // Formal names -> names at this call site.
  llvm::StringMap<std::string> names;
  for (int i = 0; i < f.input_size(); ++i) {
    if (f.input(i).empty())
      continue;
    if (!names.try_emplace(f.input(i), i < call.input_size() ? call.input(i) : "").second) {
      error = "function '" + fname + "' names input '" + f.input(i) + "' twice";
      return false;
    }
  }
  for (int i = 0; i < f.output_size(); ++i) {
    const std::string &formal = f.output(i);
    if (formal.empty())
      continue;
    bool bound = i < call.output_size() && !call.output(i).empty();
    if (!names.try_emplace(formal, bound ? call.output(i) : freshName(usedNames, prefix + "/" + formal))
             .second) {
      error = "function '" + fname + "': output '" + formal +
              "' is also an input or another output (use Identity)";
      return false;
    }
  }
  // Values the body computes, other than outputs, are local to this call.
  llvm::StringSet<> produced;
  for (const NodeProto &n : f.node())
    for (const std::string &o : n.output()) {
      if (o.empty())
        continue;
      produced.insert(o);
      auto it = names.find(o);
      if (it != names.end()) {
        bool isInput = llvm::is_contained(f.input(), o);
        if (isInput) {
          error = "function '" + fname + "': body node '" + n.name() + "' writes input '" + o + "'";
          return false;
        }
        continue;
      }
      names[o] = freshName(usedNames, prefix + "/" + o);
    }
  for (int i = 0; i < f.output_size() && i < call.output_size(); ++i)
    if (!call.output(i).empty() && !produced.contains(f.output(i))) {
      error = here + ", whose body never computes its output '" + f.output(i) + "'";
      return false;
    }

  stack.push_back(&fn);
  for (const NodeProto &n : f.node()) {
    NodeProto node;
    if (!instantiate(n, call, fn, prefix, names, node, error) || !emit(node, out, error)) {
      stack.pop_back();
      return false;
    }
  }
  stack.pop_back();
  return true;
}

bool Inliner::emit(const NodeProto &n, std::vector<NodeProto> &out, std::string &error) {
  if (const LocalFunction *fn = lookup(n))
    return expand(n, *fn, out, error);
  if (++emitted > kMaxNodes) {
    error = "inlining the model's local functions makes more than " +
            std::to_string(kMaxNodes) + " nodes (last: node '" + n.name() + "')";
    return false;
  }
  out.push_back(n);
  return true;
}

size_t Inliner::expandedSize(const LocalFunction &fn, int depth,
                             const LocalFunction *&deepest) {
  if (auto it = sizes.find(&fn); it != sizes.end())
    return it->second;
  if (depth > kMaxDepth) {
    deepest = &fn;
    return 0;
  }
  if (!sizing.insert(&fn).second)
    return 0;
  size_t total = 0;
  for (const NodeProto &n : fn.proto->node()) {
    const LocalFunction *callee = lookup(n);
    total += callee ? expandedSize(*callee, depth + 1, deepest) : 1;
    total = std::min(total, kMaxNodes + 1);
  }
  sizing.erase(&fn);
  sizes[&fn] = total;
  return total;
}

/// Why an ai.h20 RoutedExpertsMxfp4 call's packed weights and scales
/// (inputs 3..8: W1, S1, W3, S3, W2, S2, where initializers) do not fit
/// each other, or "". Each scale holds one ue8m0 byte per 32 weights of
/// its packed tensor's rows: S [E, out, in / 32] beside W [E, out, in / 2]
/// (models/deepseek_v41/h20_ops.py). The function body would broadcast a
/// wrong-shaped scale instead of failing, so the expansion checks first
/// (the GPU lowering checks the same shapes: MoeToLinalg.cpp).
std::string mxfp4ScaleMismatch(const NodeProto &n, const GraphProto &graph) {
  if (n.op_type() != "RoutedExpertsMxfp4" || n.input_size() != 9)
    return "";
  auto dimsOf = [&](const std::string &name) -> const TensorProto * {
    for (const TensorProto &t : graph.initializer())
      if (t.name() == name)
        return &t;
    return nullptr;
  };
  auto shape = [](const TensorProto &t) {
    std::string s = "[";
    for (int i = 0; i < t.dims_size(); ++i)
      s += (i ? ", " : "") + std::to_string(t.dims(i));
    return s + "]";
  };
  for (int w = 3; w <= 7; w += 2) {
    const TensorProto *wt = dimsOf(n.input(w)), *st = dimsOf(n.input(w + 1));
    if (!wt || !st)
      continue; // not initializers: nothing known before the run
    if (wt->dims_size() != 3 || st->dims_size() != 3 || st->dims(0) != wt->dims(0) ||
        st->dims(1) != wt->dims(1) || st->dims(2) * 16 != wt->dims(2))
      return "scale '" + n.input(w + 1) + "' " + shape(*st) + " does not fit packed weight '" +
             n.input(w) + "' " + shape(*wt) +
             " (expected [E, out, in / 32] beside [E, out, in / 2]: one ue8m0 byte per 32 "
             "weights)";
  }
  return "";
}

bool Inliner::run(std::string &error) {
  if (model.functions_size() == 0)
    return true;
  if (!collectFunctions(error))
    return false;
  auto &graph = *model.mutable_graph();
  if (llvm::none_of(graph.node(), [&](const NodeProto &n) { return lookup(n) != nullptr; }))
    return true;
  for (const NodeProto &n : graph.node())
    if (lookup(n))
      if (std::string why = mxfp4ScaleMismatch(n, graph); !why.empty()) {
        error = describeCall(n) + ": " + why;
        return false;
      }
  if (!mergeOpsets(error))
    return false;
  size_t total = 0;
  const LocalFunction *deepest = nullptr;
  for (const NodeProto &n : graph.node()) {
    const LocalFunction *fn = lookup(n);
    total = std::min(total + (fn ? expandedSize(*fn, 1, deepest) : 1), kMaxNodes + 1);
    if (deepest) {
      error = "local functions call each other more than " + std::to_string(kMaxDepth) +
              " deep (at function '" + qualifiedName(*deepest->proto) + "')";
      return false;
    }
  }
  if (total > kMaxNodes) {
    error = "inlining the model's local functions would make more than " +
            std::to_string(kMaxNodes) + " nodes";
    return false;
  }
  for (const auto &v : graph.input())
    usedNames.insert(v.name());
  for (const auto &v : graph.output())
    usedNames.insert(v.name());
  for (const auto &v : graph.value_info())
    usedNames.insert(v.name());
  for (const auto &t : graph.initializer())
    usedNames.insert(t.name());
  for (const NodeProto &n : graph.node()) {
    for (const std::string &s : n.input())
      usedNames.insert(s);
    for (const std::string &s : n.output())
      usedNames.insert(s);
  }
  std::vector<NodeProto> out;
  for (const NodeProto &n : graph.node())
    if (!emit(n, out, error))
      return false;
  graph.clear_node();
  for (NodeProto &n : out)
    *graph.add_node() = std::move(n);
  return true;
}

} // namespace

bool inlineLocalFunctions(ModelProto &model, std::string &error,
                          const std::vector<std::string> &expandAnyway) {
  return Inliner(model, expandAnyway).run(error);
}

} // namespace h20::onnx_import
