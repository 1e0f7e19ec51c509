//===- GraphImporter.cpp - ONNX GraphProto -> func.func of onnx ops ------===//
//
// One pass over the graph in topological order: graph inputs become function
// arguments, initializers become onnx.Weight (or onnx.Constant when tiny and
// inline), each node becomes the onnx op its (domain, op_type, opset) maps to.
// Calls of model-local functions are expanded into their bodies first
// (FunctionInliner.h).
//
//===----------------------------------------------------------------------===//
#include "h20/Import/Onnx/OnnxImporter.h"

#include "FunctionInliner.h"
#include "ModelLoader.h"
#include "OnnxTypes.h"
#include "OpTable.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <queue>
#include <map>

using namespace mlir;

namespace h20::onnx_import {
namespace {

class GraphImporter {
public:
  GraphImporter(MLIRContext &ctx, LoadedModel &model,
                const OnnxImportOptions &options)
      : ctx(ctx), model(model), options(options), b(&ctx),
        fileLoc(FileLineColLoc::get(&ctx, model.path, 0, 0)) {}

  OwningOpRef<ModuleOp> run();

private:
  using NodeProto = ::onnx::NodeProto;

  InFlightDiagnostic error() { return emitError(fileLoc); }
  Location nodeLoc(const NodeProto &n) {
    return h20::onnx::nodeLocation(fileLoc, n.name(), n.op_type());
  }
  /// "node 'NAME' (op 'TYPE', domain 'D', opset N)"
  std::string describe(const NodeProto &n) {
    return "node '" + n.name() + "' (op '" + n.op_type() + "', domain '" +
           n.domain() + "', opset " + std::to_string(opsetOf(n.domain())) + ")";
  }
  int64_t opsetOf(StringRef domain) {
    if (domain == "ai.onnx")
      domain = "";
    auto it = opsets.find(domain.str());
    return it == opsets.end() ? -1 : it->second;
  }

  LogicalResult readOpsets();
  Type importType(const ::onnx::TypeProto &t, StringRef valueName,
                  SmallVectorImpl<StringRef> *dimParams);
  LogicalResult importInitializers();
  LogicalResult checkSupported();
  LogicalResult orderNodes(SmallVectorImpl<const NodeProto *> &order);
  FailureOr<NamedAttribute> importAttribute(const ::onnx::AttributeProto &a,
                                            const NodeProto &n);
  LogicalResult importNode(const NodeProto &n);
  Type inferredType(const NodeProto &n, unsigned outputIndex, ArrayRef<Value> operands,
                    ArrayRef<NamedAttribute> attrs);
  Value noValue();

  MLIRContext &ctx;
  LoadedModel &model;
  const OnnxImportOptions &options;
  OpBuilder b;
  Location fileLoc;
  std::map<std::string, int64_t> opsets;
  llvm::StringMap<Value> values;            ///< ONNX value name -> SSA value
  llvm::StringMap<Type> declaredTypes;      ///< from value_info and outputs
  Value none;
};

LogicalResult GraphImporter::readOpsets() {
  for (const auto &o : model.proto.opset_import()) {
    std::string d = o.domain() == "ai.onnx" ? "" : o.domain();
    opsets[d] = o.version();
  }
  auto it = opsets.find("");
  if (it == opsets.end())
    return error() << "model imports no opset of the default ONNX domain";
  if (it->second < 17 || it->second > 25)
    return error() << "default-domain opset " << it->second
                   << " is not supported (h20 reads opsets 17 to 25)";
  return success();
}

Type GraphImporter::importType(const ::onnx::TypeProto &t, StringRef valueName,
                               SmallVectorImpl<StringRef> *dimParams) {
  if (!t.has_tensor_type()) {
    error() << "value '" << valueName
            << "' is not a tensor (sequences, maps and optionals are not "
               "supported)";
    return {};
  }
  const auto &tt = t.tensor_type();
  Type elt = elementType(tt.elem_type(), &ctx);
  if (!elt) {
    error() << "value '" << valueName << "' has unsupported dtype "
            << dataTypeName(tt.elem_type());
    return {};
  }
  if (!tt.has_shape())
    return UnrankedTensorType::get(elt);
  SmallVector<int64_t> shape;
  for (const auto &d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) {
        error() << "value '" << valueName << "' has negative dimension "
                << d.dim_value();
        return {};
      }
      shape.push_back(d.dim_value());
      SmallVector<int64_t> known;
      for (int64_t x : shape)
        if (x != ShapedType::kDynamic)
          known.push_back(x);
      if (!elementCount(known)) {
        error() << "value '" << valueName << "' has too many elements";
        return {};
      }
    } else {
      shape.push_back(ShapedType::kDynamic);
    }
    if (dimParams)
      dimParams->push_back(d.has_dim_param() ? StringRef(d.dim_param())
                                             : StringRef());
  }
  return RankedTensorType::get(shape, elt);
}

LogicalResult GraphImporter::importInitializers() {
  for (const auto &t : model.proto.graph().initializer()) {
    if (values.count(t.name()))
      return error() << "duplicate value name '" << t.name()
                     << "' (initializer)";
    for (int64_t d : t.dims())
      if (d < 0)
        return error() << "initializer '" << t.name()
                       << "' has negative dimension " << d;
    auto count = elementCount(llvm::ArrayRef<int64_t>(t.dims().data(), t.dims().size()));
    if (!count)
      return error() << "initializer '" << t.name() << "' has too many elements";
    RankedTensorType type = tensorType(t, &ctx);
    if (!type)
      return error() << "initializer '" << t.name() << "' has unsupported dtype "
                     << dataTypeName(t.data_type());
    auto loc = NameLoc::get(b.getStringAttr(t.name()), fileLoc);
    auto where = model.locations.find(t.name());
    bool inlineData = t.data_location() != ::onnx::TensorProto::EXTERNAL;
    // Tiny inline tensors fold; tensors in typed fields (float_data, ...)
    // have no byte range to reference, so they become constants too.
    bool typedFields = inlineData && !t.has_raw_data();
    if (inlineData && (*count <= options.inlineElementLimit || typedFields)) {
      std::string message;
      auto dense = denseFromTensor(t, type, message);
      if (failed(dense))
        return error() << message;
      values[t.name()] =
          h20::onnx::ConstantOp::create(b, loc, TypeRange{type}, ValueRange{}, *dense)
              ->getResult(0);
      continue;
    }
    auto w = h20::onnx::WeightOp::create(b, loc, type, b.getStringAttr(t.name()),
                                    StringAttr(), IntegerAttr(), IntegerAttr());
    if (where != model.locations.end()) {
      w.setFileAttr(b.getStringAttr(where->second.file));
      w.setOffsetAttr(b.getI64IntegerAttr(where->second.offset));
      w.setLengthAttr(b.getI64IntegerAttr(where->second.length));
    }
    values[t.name()] = w.getResult();
  }
  return success();
}

LogicalResult GraphImporter::checkSupported() {
  std::string unsupported;
  for (const auto &n : model.proto.graph().node()) {
    int64_t opset = opsetOf(n.domain());
    if (opset >= 0 && lookupOp(n.domain(), n.op_type(), opset))
      continue;
    unsupported += "\n  " + describe(n) + " is not supported";
  }
  if (unsupported.empty())
    return success();
  return error() << "the model uses ops h20 does not support:" << unsupported;
}

LogicalResult
GraphImporter::orderNodes(SmallVectorImpl<const NodeProto *> &order) {
  const auto &nodes = model.proto.graph().node();
  llvm::StringMap<int> producer;
  for (auto [i, n] : llvm::enumerate(nodes))
    for (const std::string &out : n.output()) {
      if (out.empty())
        continue;
      if (values.count(out))
        return error() << "duplicate value name '" << out << "': output of "
                       << describe(n)
                       << " is also a graph input or initializer";
      auto [it, inserted] = producer.try_emplace(out, static_cast<int>(i));
      if (!inserted)
        return error() << "duplicate value name '" << out
                       << "': produced by " << describe(nodes[it->second])
                       << " and by " << describe(n);
    }
  // Kahn's algorithm over node -> consumer edges.
  std::vector<int> pending(nodes.size(), 0);
  std::vector<SmallVector<int>> consumers(nodes.size());
  for (auto [i, n] : llvm::enumerate(nodes))
    for (const std::string &in : n.input()) {
      if (in.empty() || values.count(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return error() << describe(n) << " reads value '" << in
                       << "', which no node, input or initializer defines";
      ++pending[i];
      consumers[it->second].push_back(static_cast<int>(i));
    }
  // A min-heap keeps the file's order wherever it already is topological.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < nodes.size(); ++i)
    if (!pending[i])
      ready.push(i);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(&nodes[i]);
    for (int c : consumers[i])
      if (--pending[c] == 0)
        ready.push(c);
  }
  if (order.size() != static_cast<size_t>(nodes.size())) {
    for (int i = 0; i < nodes.size(); ++i)
      if (pending[i])
        return error() << "the graph has a cycle through " << describe(nodes[i]);
  }
  return success();
}

FailureOr<NamedAttribute>
GraphImporter::importAttribute(const ::onnx::AttributeProto &a,
                               const NodeProto &n) {
  using AP = ::onnx::AttributeProto;
  Attribute value;
  switch (a.type()) {
  case AP::INT:
    value = b.getIntegerAttr(b.getIntegerType(64, /*isSigned=*/true), a.i());
    break;
  case AP::FLOAT:
    value = b.getF32FloatAttr(a.f());
    break;
  case AP::STRING:
    value = b.getStringAttr(a.s());
    break;
  case AP::INTS:
    value = b.getDenseI64ArrayAttr(
        SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
    break;
  case AP::FLOATS:
    value = b.getDenseF32ArrayAttr(
        SmallVector<float>(a.floats().begin(), a.floats().end()));
    break;
  case AP::STRINGS: {
    SmallVector<Attribute> s;
    for (const auto &x : a.strings())
      s.push_back(b.getStringAttr(x));
    value = b.getArrayAttr(s);
    break;
  }
  case AP::TENSOR: {
    if (!elementCount(llvm::ArrayRef<int64_t>(a.t().dims().data(), a.t().dims().size()))) {
      error() << describe(n) << ": attribute '" << a.name()
              << "' has a negative dimension or too many elements";
      return failure();
    }
    RankedTensorType type = tensorType(a.t(), &ctx);
    std::string message;
    if (!type) {
      error() << describe(n) << ": attribute '" << a.name()
              << "' has unsupported dtype " << dataTypeName(a.t().data_type());
      return failure();
    }
    auto dense = denseFromTensor(a.t(), type, message);
    if (failed(dense)) {
      error() << describe(n) << ": attribute '" << a.name() << "': " << message;
      return failure();
    }
    value = *dense;
    break;
  }
  default:
    error() << describe(n) << ": attribute '" << a.name()
            << "' has a kind h20 does not support (graphs, sparse tensors, "
               "type protos)";
    return failure();
  }
  return NamedAttribute(b.getStringAttr(a.name()), value);
}

Value GraphImporter::noValue() {
  if (!none) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(b.getInsertionBlock());
    none = h20::onnx::NoValueOp::create(b, fileLoc, b.getNoneType()).getResult();
  }
  return none;
}

/// The element type of a node output that no value_info declares, from the
/// ONNX type constraints of the supported ops; the shape stays unknown.
Type GraphImporter::inferredType(const NodeProto &n, unsigned outputIndex,
                                 ArrayRef<Value> operands, ArrayRef<NamedAttribute> attrs) {
  StringRef op = n.op_type();
  auto attr = [&](StringRef name) -> Attribute {
    for (const NamedAttribute &a : attrs)
      if (a.getName() == name)
        return a.getValue();
    return {};
  };
  Type elt;
  if (llvm::is_contained({"Equal", "Less", "LessOrEqual", "Greater",
                          "GreaterOrEqual", "And", "Or", "Not", "IsNaN"},
                         op))
    elt = b.getI1Type();
  else if (op == "Shape" || (op == "TopK" && outputIndex == 1) ||
           (n.domain() == "ai.h20" && op.starts_with("Indexer")))
    elt = b.getI64Type(); // ai.h20 indexers return entry / block indices
  else if (op == "Cast" || op == "CastLike") {
    if (auto to = dyn_cast_or_null<IntegerAttr>(attr("to")))
      elt = elementType(static_cast<int32_t>(to.getInt()), &ctx);
  } else if (op == "Constant" || op == "ConstantOfShape") {
    if (auto v = dyn_cast_or_null<DenseElementsAttr>(attr("value")))
      elt = v.getElementType();
    else if (op == "ConstantOfShape")
      elt = b.getF32Type();
  } else if (op == "Where" && !operands.empty()) {
    // The values' type (inputs 1 and 2; either may be omitted, `none`).
    for (Value v : operands.drop_front())
      if (auto st = dyn_cast<ShapedType>(v.getType())) {
        elt = st.getElementType();
        break;
      }
  }
  if (!elt) {
    for (Value v : operands)
      if (auto st = dyn_cast<ShapedType>(v.getType())) {
        elt = st.getElementType();
        break;
      }
  }
  return elt ? UnrankedTensorType::get(elt) : Type();
}

LogicalResult GraphImporter::importNode(const NodeProto &n) {
  const OpEntry *entry = lookupOp(n.domain(), n.op_type(), opsetOf(n.domain()));
  SmallVector<Value> operands;
  for (const std::string &in : n.input())
    operands.push_back(in.empty() ? noValue() : values.lookup(in));
  // Trailing omitted optional inputs are dropped, as ONNX allows.
  while (!operands.empty() && n.input(operands.size() - 1).empty())
    operands.pop_back();

  SmallVector<NamedAttribute> attrs;
  llvm::StringSet<> attrNames;
  for (const auto &a : n.attribute()) {
    if (!attrNames.insert(a.name()).second)
      return error() << describe(n) << ": attribute '" << a.name() << "' is given twice";
    if (a.has_ref_attr_name())
      return error() << describe(n) << ": attribute '" << a.name()
                     << "' refers to a function attribute, which h20 does not "
                        "support outside functions";
    auto na = importAttribute(a, n);
    if (failed(na))
      return failure();
    attrs.push_back(*na);
  }
  // ONNX CastLike-15 (input, target_type): Cast to target_type's dtype,
  // which the importer knows, so it becomes onnx.Cast with `to` set and the
  // second input dropped (exact: CastLike is defined as that Cast).
  if (n.op_type() == "CastLike" && (n.domain().empty() || n.domain() == "ai.onnx")) {
    if (operands.size() != 2 || isa<NoneType>(operands[1].getType()))
      return error() << describe(n) << ": CastLike needs 2 inputs, it has " << operands.size();
    auto like = dyn_cast<ShapedType>(operands[1].getType());
    std::optional<int64_t> code = like ? onnxDataType(like.getElementType()) : std::nullopt;
    if (!code)
      return error() << describe(n) << ": the dtype of its target_type input is not supported";
    operands.pop_back();
    attrs.push_back(b.getNamedAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), *code)));
  }
  bool isConstant = n.op_type() == "Constant" &&
                    (n.domain().empty() || n.domain() == "ai.onnx");
  if (isConstant) {
    // value_float / value_int / value_ints / value_floats -> one `value`,
    // each only from the attribute kind ONNX defines for it.
    if (attrs.size() != 1)
      return error() << describe(n) << ": a Constant needs exactly one value attribute, it has "
                     << attrs.size();
    NamedAttribute &a = attrs.front();
    Attribute v = a.getValue();
    StringRef name = a.getName();
    auto wrongKind = [&] {
      return error() << describe(n) << ": Constant attribute '" << name
                     << "' has the wrong kind for its name";
    };
    if (name == "value_float") {
      auto f = dyn_cast<FloatAttr>(v);
      if (!f)
        return wrongKind();
      v = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()), f.getValue());
    } else if (name == "value_int") {
      auto i = dyn_cast<IntegerAttr>(v);
      if (!i)
        return wrongKind();
      v = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                 APInt(64, i.getInt()));
    } else if (name == "value_ints") {
      auto ints = dyn_cast<DenseI64ArrayAttr>(v);
      if (!ints)
        return wrongKind();
      auto arr = ints.asArrayRef();
      v = DenseElementsAttr::get(
          RankedTensorType::get({static_cast<int64_t>(arr.size())}, b.getI64Type()), arr);
    } else if (name == "value_floats") {
      auto floats = dyn_cast<DenseF32ArrayAttr>(v);
      if (!floats)
        return wrongKind();
      auto arr = floats.asArrayRef();
      v = DenseElementsAttr::get(
          RankedTensorType::get({static_cast<int64_t>(arr.size())}, b.getF32Type()), arr);
    } else if (name != "value") {
      return error() << describe(n) << ": Constant attribute '" << name
                     << "' is not supported";
    } else if (!isa<DenseElementsAttr>(v)) {
      return wrongKind();
    }
    a = NamedAttribute(b.getStringAttr("value"), v);
  }

  SmallVector<Type> resultTypes;
  for (const std::string &out : n.output()) {
    Type t = declaredTypes.lookup(out);
    if (isConstant)
      t = cast<DenseElementsAttr>(attrs.front().getValue()).getType();
    if (!t)
      t = inferredType(n, resultTypes.size(), operands, attrs);
    if (!t)
      return error() << describe(n) << ": cannot tell the type of output '"
                     << out << "'; add a value_info for it";
    resultTypes.push_back(t);
  }

  OperationState state(nodeLoc(n), entry->mlirName);
  state.addOperands(operands);
  state.addTypes(resultTypes);
  state.addAttributes(attrs);
  Operation *op = b.create(state);
  // An inherent attribute of another kind than the op declares (Softmax
  // `axis` given as a string) is dropped by the op's property setter and
  // the default would be used silently: refuse it, naming the node.
  for (auto [a, proto] : llvm::zip(attrs, n.attribute())) {
    std::optional<Attribute> kept = op->getInherentAttr(a.getName());
    if (!kept || *kept == a.getValue())
      continue;
    op->erase();
    return error() << describe(n) << ": attribute '" << a.getName().str() << "' is given as "
                   << ::onnx::AttributeProto_AttributeType_Name(proto.type())
                   << ", which is not the kind the op defines for it";
  }
  for (auto [name, result] : llvm::zip(n.output(), op->getResults()))
    if (!name.empty())
      values[name] = result;
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  std::string inlineError;
  if (!inlineLocalFunctions(model.proto, inlineError, options.expandFunctions)) {
    error() << inlineError;
    return nullptr;
  }
  const auto &graph = model.proto.graph();
  if (failed(readOpsets()))
    return nullptr;

  for (const auto &vi : graph.value_info())
    if (Type t = importType(vi.type(), vi.name(), nullptr))
      declaredTypes[vi.name()] = t;
    else
      return nullptr;

  // Graph inputs that are also initializers (IR < 4 style) are weights.
  llvm::StringSet<> initializerNames;
  for (const auto &t : graph.initializer())
    initializerNames.insert(t.name());

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<Attribute> argAttrs;
  for (const auto &in : graph.input()) {
    if (initializerNames.contains(in.name()))
      continue;
    SmallVector<StringRef> dimParams;
    Type t = importType(in.type(), in.name(), &dimParams);
    if (!t)
      return nullptr;
    argTypes.push_back(t);
    argNames.push_back(in.name());
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr("onnx.name", b.getStringAttr(in.name()))};
    if (llvm::any_of(dimParams, [](StringRef s) { return !s.empty(); })) {
      SmallVector<Attribute> names;
      for (StringRef s : dimParams)
        names.push_back(b.getStringAttr(s));
      attrs.push_back(b.getNamedAttr("onnx.dim_params", b.getArrayAttr(names)));
    }
    argAttrs.push_back(b.getDictionaryAttr(attrs));
  }
  SmallVector<Type> resultTypes;
  SmallVector<Attribute> resultAttrs;
  for (const auto &out : graph.output()) {
    Type t = importType(out.type(), out.name(), nullptr);
    if (!t)
      return nullptr;
    declaredTypes[out.name()] = t;
    resultTypes.push_back(t);
    resultAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("onnx.name", b.getStringAttr(out.name()))}));
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  module->getOperation()->setAttr("onnx.ir_version",
                                  b.getI64IntegerAttr(model.proto.ir_version()));
  SmallVector<NamedAttribute> opsetAttrs;
  for (const auto &[d, v] : opsets)
    opsetAttrs.push_back(
        b.getNamedAttr(d.empty() ? "ai.onnx" : d, b.getI64IntegerAttr(v)));
  module->getOperation()->setAttr("onnx.opsets",
                                  b.getDictionaryAttr(opsetAttrs));
  // Weight files are resolved against this directory (absolute, so later
  // stages do not depend on the working directory).
  SmallString<256> dir(model.directory);
  (void)llvm::sys::fs::make_absolute(dir);
  llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
  module->getOperation()->setAttr("onnx.model_dir", b.getStringAttr(dir));
  if (!model.proto.producer_name().empty())
    module->getOperation()->setAttr(
        "onnx.producer", b.getStringAttr(model.proto.producer_name() + " " +
                                         model.proto.producer_version()));

  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, fileLoc, "main",
                                   b.getFunctionType(argTypes, resultTypes));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  for (auto [name, arg] : llvm::zip(argNames, entry->getArguments())) {
    if (values.count(name)) {
      error() << "duplicate value name '" << name << "' (graph input)";
      return nullptr;
    }
    values[name] = arg;
  }

  if (failed(importInitializers()) || failed(checkSupported()))
    return nullptr;
  SmallVector<const NodeProto *> order;
  if (failed(orderNodes(order)))
    return nullptr;
  for (const NodeProto *n : order)
    if (failed(importNode(*n)))
      return nullptr;

  SmallVector<Value> results;
  for (const auto &out : graph.output()) {
    Value v = values.lookup(out.name());
    if (!v) {
      error() << "graph output '" << out.name() << "' is never computed";
      return nullptr;
    }
    if (v.getType() != declaredTypes.lookup(out.name())) {
      error() << "graph output '" << out.name() << "' is declared "
              << declaredTypes.lookup(out.name()) << " but computed as "
              << v.getType();
      return nullptr;
    }
    results.push_back(v);
  }
  func::ReturnOp::create(b, fileLoc, results);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace
} // namespace h20::onnx_import

OwningOpRef<ModuleOp> h20::importOnnxModel(StringRef path, MLIRContext &ctx,
                                           const OnnxImportOptions &options) {
  ctx.loadDialect<h20::onnx::OnnxDialect, func::FuncDialect>();
  onnx_import::LoadedModel model;
  std::string message;
  if (!onnx_import::loadModel(path, model, message)) {
    emitError(FileLineColLoc::get(&ctx, path, 0, 0)) << message;
    return nullptr;
  }
  return onnx_import::GraphImporter(ctx, model, options).run();
}

OwningOpRef<ModuleOp> h20::importOnnxModelFromBuffer(StringRef bytes, StringRef path,
                                                     MLIRContext &ctx,
                                                     const OnnxImportOptions &options) {
  ctx.loadDialect<h20::onnx::OnnxDialect, func::FuncDialect>();
  onnx_import::LoadedModel model;
  std::string message;
  if (!onnx_import::loadModelFromBytes(bytes, path, model, message)) {
    emitError(FileLineColLoc::get(&ctx, path, 0, 0)) << message;
    return nullptr;
  }
  return onnx_import::GraphImporter(ctx, model, options).run();
}
