//===- TargetCommon.cpp - what every target's artifact describes ---------===//
#include "h20/Target/TargetCommon.h"

#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Runtime/Format/Artifact.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace h20 {
namespace {

llvm::json::Array shapeOf(RankedTensorType t) {
  llvm::json::Array a;
  for (int64_t d : t.getShape())
    a.push_back(ShapedType::isDynamic(d) ? int64_t(-1) : d);
  return a;
}

} // namespace

int64_t elementBytes(Type t) {
  if (t.isIndex())
    return 8;
  unsigned bits = t.getIntOrFloatBitWidth();
  return bits < 8 ? 1 : bits / 8;
}

std::string dtypeName(Type t) {
  if (t.isF32()) return "float32";
  if (t.isF16()) return "float16";
  if (t.isBF16()) return "bfloat16";
  if (t.isF64()) return "float64";
  if (t.isInteger(64)) return "int64";
  if (t.isInteger(32)) return "int32";
  if (t.isInteger(1)) return "bool";
  if (t.isInteger(8)) return "int8";
  if (t.isIndex()) return "int64"; // 64-bit on every h20 target
  if (isa<Float8E4M3FNType>(t)) return "float8_e4m3fn";
  return "unsupported";
}

/// The vocabulary size: rows of the embedding table a Gather reads with the
/// token ids (argument 0).
std::optional<int64_t> vocabSize(func::FuncOp func) {
  if (func.getNumArguments() == 0)
    return std::nullopt;
  for (Operation *user : func.getArgument(0).getUsers())
    if (auto g = dyn_cast<onnx::GatherOp>(user))
      if (g->getOperand(1) == func.getArgument(0) && g.getAxis().value_or(0) == 0)
        if (auto t = dyn_cast<RankedTensorType>(g->getOperand(0).getType()))
          if (!t.isDynamicDim(0))
            return t.getDimSize(0);
  return std::nullopt;
}

/// " ('name')" for result `i` when the model names it.
static std::string outputName(func::FuncOp func, unsigned i) {
  if (auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name"))
    return " ('" + name.str() + "')";
  return "";
}

/// `e` as constant + sum(coeff * input dim), each symbol of its linear form
/// replaced by an input dim that is exactly that symbol; nullopt if `e` is
/// not linear in the symbols or a symbol is no input dim.
static std::optional<llvm::json::Object> inputDimSum(func::FuncOp func, SymbolicEvaluator &eval,
                                                     const SymExpr &e) {
  auto lin = linearOf(e);
  if (!lin)
    return std::nullopt;
  llvm::json::Array terms;
  for (auto [atom, coeff] : lin->coeffs) {
    if (!atom.first)
      return std::nullopt; // an index variable: not a size
    SymExpr sym = symSymbol(atom.second);
    std::optional<std::pair<int64_t, int64_t>> at;
    for (auto [a, arg] : llvm::enumerate(func.getArguments())) {
      auto ad = eval.shapeOf(arg);
      for (size_t j = 0; ad && j < ad->size() && !at; ++j)
        if (provablyEqual((*ad)[j], sym))
          at = std::make_pair(int64_t(a), int64_t(j));
      if (at)
        break;
    }
    if (!at)
      return std::nullopt;
    terms.push_back(llvm::json::Object{{"input", at->first}, {"dim", at->second}, {"coeff", coeff}});
  }
  return llvm::json::Object{{"constant", lin->constant}, {"terms", std::move(terms)}};
}

/// Inputs and outputs with, for each dynamic output dim, the input dim it
/// equals or the sum of input dims it is (proven by SymbolicEvaluator), so
/// h20-run can size the outputs.
FailureOr<std::pair<llvm::json::Array, llvm::json::Array>> describeInterface(func::FuncOp func) {
  SymbolicEvaluator eval(func);
  llvm::json::Array inputs, outputs;
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t)
      return func.emitError("input ") << i << " has no static rank";
    llvm::json::Object o{{"dtype", dtypeName(t.getElementType())}, {"shape", shapeOf(t)}};
    if (auto name = func.getArgAttrOfType<StringAttr>(i, "onnx.name"))
      o["name"] = name.str();
    if (auto params = func.getArgAttrOfType<ArrayAttr>(i, "onnx.dim_params")) {
      llvm::json::Array p;
      for (Attribute a : params)
        p.push_back(cast<StringAttr>(a).str());
      o["dim_params"] = std::move(p);
    }
    // h20-input-value-ranges: the values the input must hold (h20-run
    // checks them before running).
    if (auto ranges = func.getArgAttrOfType<ArrayAttr>(i, "h20.value_ranges")) {
      llvm::json::Array out;
      auto sum = [](DictionaryAttr d) {
        llvm::json::Array terms;
        for (Attribute t : d.getAs<ArrayAttr>("terms")) {
          auto td = cast<DictionaryAttr>(t);
          terms.push_back(llvm::json::Object{{"input", td.getAs<IntegerAttr>("input").getInt()},
                                             {"dim", td.getAs<IntegerAttr>("dim").getInt()},
                                             {"coeff", td.getAs<IntegerAttr>("coeff").getInt()}});
        }
        return llvm::json::Object{{"constant", d.getAs<IntegerAttr>("constant").getInt()},
                                  {"terms", std::move(terms)}};
      };
      for (Attribute r : ranges) {
        auto d = cast<DictionaryAttr>(r);
        out.push_back(llvm::json::Object{{"lo", sum(d.getAs<DictionaryAttr>("lo"))},
                                         {"hi", sum(d.getAs<DictionaryAttr>("hi"))},
                                         {"why", d.getAs<StringAttr>("why").str()}});
      }
      o["value_ranges"] = std::move(out);
    }
    inputs.push_back(std::move(o));
  }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return func.emitError("output ") << i << " has no static rank";
    llvm::json::Array from, sums;
    bool anySum = false;
    auto dims = eval.shapeOf(v);
    for (int64_t k = 0; k < t.getRank(); ++k) {
      if (!t.isDynamicDim(k)) {
        from.push_back(nullptr);
        sums.push_back(nullptr);
        continue;
      }
      bool found = false;
      for (auto [a, arg] : llvm::enumerate(func.getArguments())) {
        auto ad = eval.shapeOf(arg);
        for (size_t j = 0; ad && dims && j < ad->size() && !found; ++j)
          if (provablyEqual((*ad)[j], (*dims)[k])) {
            from.push_back(llvm::json::Object{{"input", int64_t(a)}, {"dim", int64_t(j)}});
            found = true;
          }
        if (found)
          break;
      }
      sums.push_back(nullptr);
      if (found)
        continue;
      // Else a linear combination of input dims (e.g. S_past + S).
      auto sum = dims ? inputDimSum(func, eval, (*dims)[k]) : std::nullopt;
      if (!sum)
        return func.emitError("output ")
               << i << outputName(func, i) << " dim " << k
               << " is neither an input dim nor a sum of input dims";
      from.push_back(nullptr);
      sums.back() = std::move(*sum);
      anySum = true;
    }
    llvm::json::Object o{{"dtype", dtypeName(t.getElementType())},
                         {"shape", shapeOf(t)},
                         {"dims_from", std::move(from)}};
    if (anySum)
      o["dims_sum"] = std::move(sums);
    if (auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name"))
      o["name"] = name.str();
    outputs.push_back(std::move(o));
  }
  return std::make_pair(std::move(inputs), std::move(outputs));
}


/// memref argument the caller allocates, written with
/// bufferization.materialize_in_destination; the function returns nothing.
/// (Results of dynamic shape could not otherwise be caller-allocated.)
FailureOr<llvm::json::Object> beginManifest(ModuleOp module, func::FuncOp func, StringRef target,
                                           bool logitsLast, int64_t maxPositions) {
  llvm::json::Object manifest{{"format", "h20-artifact"},
                              {"format_version", int64_t(runtime::kArtifactFormatVersion)},
                              {"target", target.str()},
                              {"logits", logitsLast ? "last" : "all"}};
  if (auto dir = module->getAttrOfType<StringAttr>("onnx.model_dir"))
    manifest["model_dir"] = dir.str();
  if (auto v = vocabSize(func))
    manifest["vocab_size"] = *v;
  if (maxPositions > 0)
    manifest["max_positions"] = maxPositions;
  auto iface = describeInterface(func);
  if (failed(iface))
    return failure();
  manifest["inputs"] = std::move(iface->first);
  manifest["outputs"] = std::move(iface->second);
  return manifest;
}

std::string manifestText(llvm::json::Object manifest) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return text;
}

llvm::json::Array describeWeights(ModuleOp module, StringRef entry) {
  llvm::json::Array weights;
  module.walk([&](Operation *op) {
    auto list = op->getAttrOfType<ArrayAttr>("h20.weights");
    if (!list || !op->hasAttr("sym_name") ||
        cast<StringAttr>(op->getAttr("sym_name")).getValue() != entry)
      return;
    for (Attribute a : list) {
      auto d = cast<DictionaryAttr>(a);
      llvm::json::Array shape;
      for (int64_t x : d.getAs<DenseI64ArrayAttr>("shape").asArrayRef())
        shape.push_back(x);
      // dtype: as stored in the file; device_dtype: as the code uses it
      // (they differ after h20-compute-type; the runtime converts).
      Type device = d.getAs<TypeAttr>("type").getValue();
      auto stored = d.getAs<TypeAttr>("stored_type");
      auto derive = d.getAs<DictionaryAttr>("derive");
      if (derive) // the file holds the source tensor (h20-quantize-linears)
        stored = derive.getAs<TypeAttr>("source_type");
      llvm::json::Object w{{"name", d.getAs<StringAttr>("name").str()},
                           {"dtype", dtypeName(stored ? stored.getValue() : device)},
                           {"device_dtype", dtypeName(device)},
                           {"shape", std::move(shape)}};
      // "derive": the device tensor is computed from the stored one, of
      // "source_shape" (GpuProgram.h's weights: WeightSpec::derive).
      if (derive) {
        llvm::json::Array src;
        for (int64_t x : derive.getAs<DenseI64ArrayAttr>("source_shape").asArrayRef())
          src.push_back(x);
        w["derive"] = derive.getAs<StringAttr>("kind").str();
        w["source_shape"] = std::move(src);
      }
      if (auto f = d.getAs<StringAttr>("file")) {
        w["file"] = f.str();
        // Recorded so h20-run notices a replaced or truncated weight file.
        if (auto dir = module->getAttrOfType<StringAttr>("onnx.model_dir")) {
          llvm::SmallString<256> path(dir.getValue());
          llvm::sys::path::append(path, f.getValue());
          uint64_t size;
          if (!llvm::sys::fs::file_size(path, size))
            w["file_size"] = int64_t(size);
        }
      }
      // h20-tensor-parallel: "shape" is one rank's slice (along "axis", from
      // starts[rank]) of the stored tensor of "full_shape".
      if (auto shard = d.getAs<DictionaryAttr>("shard")) {
        llvm::json::Array full, starts;
        for (int64_t x : shard.getAs<DenseI64ArrayAttr>("full_shape").asArrayRef())
          full.push_back(x);
        for (int64_t x : shard.getAs<DenseI64ArrayAttr>("starts").asArrayRef())
          starts.push_back(x);
        w["shard"] = llvm::json::Object{{"axis", shard.getAs<IntegerAttr>("axis").getInt()},
                                        {"full_shape", std::move(full)},
                                        {"starts", std::move(starts)}};
      }
      // h20-place-tables: "host" (pinned host memory the GPU reads).
      if (auto placement = d.getAs<StringAttr>("placement"))
        w["placement"] = placement.str();
      if (auto o = d.getAs<IntegerAttr>("offset"))
        w["offset"] = o.getInt();
      if (auto l = d.getAs<IntegerAttr>("length"))
        w["length"] = l.getInt();
      weights.push_back(std::move(w));
    }
  });
  return weights;
}

LogicalResult applyDeveloperOptions(PassManager &pm) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(pm);
  return success();
}

} // namespace h20
