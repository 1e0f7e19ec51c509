//===- OnnxDialect.cpp - onnx dialect registration and verifiers ---------===//
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace h20::onnx;

#include "h20/Dialect/Onnx/IR/OnnxDialect.cpp.inc"
#define GET_OP_CLASSES
#include "h20/Dialect/Onnx/IR/OnnxOps.cpp.inc"

void OnnxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "h20/Dialect/Onnx/IR/OnnxOps.cpp.inc"
      >();
}

namespace h20::onnx {

Location nodeLocation(Location file, StringRef name, StringRef opType) {
  MLIRContext *ctx = file->getContext();
  Location typed = FusedLoc::get({file}, StringAttr::get(ctx, opType), ctx);
  return NameLoc::get(StringAttr::get(ctx, name), typed);
}

std::string describeNode(Location loc) {
  // Passes may wrap an op's location (fusions, call sites): look inside for
  // the first NameLoc whose child carries the op type.
  SmallVector<Location> work{loc};
  while (!work.empty()) {
    Location l = work.pop_back_val();
    if (auto n = dyn_cast<NameLoc>(l)) {
      if (auto f = dyn_cast<FusedLoc>(n.getChildLoc()))
        if (auto type = dyn_cast_or_null<StringAttr>(f.getMetadata()))
          return (n.getName().empty() ? std::string("unnamed node")
                                      : "node '" + n.getName().str() + "'") +
                 " (op '" + type.str() + "')";
      work.push_back(n.getChildLoc());
    } else if (auto f = dyn_cast<FusedLoc>(l)) {
      for (Location inner : llvm::reverse(f.getLocations()))
        work.push_back(inner);
    } else if (auto c = dyn_cast<CallSiteLoc>(l)) {
      work.push_back(c.getCallee());
    }
  }
  return "";
}

LogicalResult verifyArity(Operation *op, int minIn, int maxIn, int minOut,
                          int maxOut) {
  auto describe = [](int lo, int hi) {
    if (hi < 0)
      return "at least " + std::to_string(lo);
    if (lo == hi)
      return std::to_string(lo);
    return std::to_string(lo) + " to " + std::to_string(hi);
  };
  // An ONNX attribute the op does not declare would be silently ignored by
  // every later stage: refuse it. (Attributes with a dialect prefix, like
  // attn.proven_mask, are h20's own annotations.)
  for (NamedAttribute a : op->getDiscardableAttrs())
    if (!a.getName().getValue().contains('.'))
      return op->emitOpError("attribute '")
             << a.getName().getValue() << "' is not supported (h20 does not know what it "
             << "changes, so it cannot compile this node faithfully)";
  int nIn = static_cast<int>(op->getNumOperands());
  int nOut = static_cast<int>(op->getNumResults());
  if (nIn < minIn || (maxIn >= 0 && nIn > maxIn))
    return op->emitOpError("expects ")
           << describe(minIn, maxIn) << " input(s), got " << nIn;
  if (nOut < minOut || (maxOut >= 0 && nOut > maxOut))
    return op->emitOpError("expects ")
           << describe(minOut, maxOut) << " output(s), got " << nOut;
  // ONNX lists an op's required inputs first; an empty input name
  // (onnx.NoValue) may stand only for an optional one. Every lowering reads
  // a required input as a tensor. (GroupQueryAttention's key, value and
  // past K/V come before required inputs and are optional: packed QKV.)
  if (!isa<MsGroupQueryAttentionOp>(op))
    for (int i = 0; i < std::min(minIn, nIn); ++i)
      if (isa<NoneType>(op->getOperand(i).getType())) {
        std::string node = describeNode(op->getLoc());
        return op->emitOpError("input ")
               << i << " is required but omitted (empty name)"
               << (node.empty() ? "" : " in " + node);
      }
  return success();
}

/// Rank of operand `i` of `op`, or -1 if unranked / none.
static int64_t rankOf(Operation *op, unsigned i) {
  if (auto t = dyn_cast<RankedTensorType>(op->getOperand(i).getType()))
    return t.getRank();
  return -1;
}

/// Checks an ONNX axis attribute against a rank: valid range is [-r, r).
static LogicalResult checkAxis(Operation *op, StringRef name, int64_t axis,
                               int64_t rank) {
  if (rank >= 0 && (axis < -rank || axis >= rank))
    return op->emitOpError() << name << " " << axis
                             << " is out of range for rank " << rank;
  return success();
}

LogicalResult verifyNode(ConstantOp op) {
  if (op.getValue().getType() != op->getResult(0).getType())
    return op.emitOpError("value type ")
           << op.getValue().getType() << " differs from result type "
           << op->getResult(0).getType();
  return success();
}

LogicalResult verifyNode(CastOp op) {
  // TensorProto.DataType codes 1..23 (onnx/onnx.proto3); 0 is UNDEFINED.
  int64_t to = op.getTo();
  if (to < 1 || to > 23)
    return op.emitOpError("'to' = ")
           << to << " is not an ONNX TensorProto.DataType code (1..23)";
  return success();
}

LogicalResult verifyNode(TransposeOp op) {
  auto perm = op.getPerm();
  if (!perm)
    return success();
  int64_t rank = rankOf(op, 0);
  if (rank >= 0 && static_cast<int64_t>(perm->size()) != rank)
    return op.emitOpError("perm has ")
           << perm->size() << " entries for an input of rank " << rank;
  llvm::SmallBitVector seen(perm->size());
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen.test(p))
      return op.emitOpError("perm is not a permutation of 0..")
             << perm->size() - 1;
    seen.set(p);
  }
  return success();
}

LogicalResult verifyNode(ConcatOp op) {
  return checkAxis(op, "axis", op.getAxis(), rankOf(op, 0));
}

LogicalResult verifyNode(SoftmaxOp op) {
  return checkAxis(op, "axis", op.getAxis().value_or(-1), rankOf(op, 0));
}

LogicalResult verifyNode(RMSNormalizationOp op) {
  if (auto eps = op.getEpsilon(); eps && !(eps->convertToFloat() > 0.0f))
    return op.emitOpError("epsilon must be > 0, got ")
           << eps->convertToFloat();
  return checkAxis(op, "axis", op.getAxis().value_or(-1), rankOf(op, 0));
}

LogicalResult verifyNode(AttentionOp op) {
  int64_t rank = rankOf(op, 0);
  if (rank >= 0 && rank != 3 && rank != 4)
    return op.emitOpError("Q must be 3-D or 4-D, got rank ") << rank;
  if (rank == 3 && (!op.getQNumHeads() || !op.getKvNumHeads()))
    return op.emitOpError(
        "3-D inputs need the q_num_heads and kv_num_heads attributes");
  if (auto mode = op.getQkMatmulOutputMode(); mode && (*mode < 0 || *mode > 3))
    return op.emitOpError("qk_matmul_output_mode must be 0..3, got ") << *mode;
  return success();
}

LogicalResult verifyNode(RotaryEmbeddingOp op) {
  int64_t rank = rankOf(op, 0);
  if (rank >= 0 && rank != 3 && rank != 4)
    return op.emitOpError("X must be 3-D or 4-D, got rank ") << rank;
  if (rank == 3 && !op.getNumHeads())
    return op.emitOpError("3-D input needs the num_heads attribute");
  if (auto rd = op.getRotaryEmbeddingDim(); rd && (*rd < 0 || *rd % 2 != 0))
    return op.emitOpError("rotary_embedding_dim must be even and >= 0, got ")
           << *rd;
  return success();
}

/// Element type of operand or result `v`, or null when it is `none`.
static Type elementTypeOf(Value v) {
  if (auto t = dyn_cast<ShapedType>(v.getType()))
    return t.getElementType();
  return {};
}

/// Operand `i` must be a tensor of (signless or signed) integers wider than
/// one bit, as ONNX's index and bitwise inputs are.
static LogicalResult checkIntegerOperand(Operation *op, unsigned i, StringRef what) {
  Type elt = elementTypeOf(op->getOperand(i));
  if (elt && (!isa<IntegerType>(elt) || elt.isInteger(1)))
    return op->emitOpError() << what << " must be an integer tensor, got " << elt;
  return success();
}

/// Operand `i`, when ranked and statically shaped, holds exactly one element.
static LogicalResult checkSingleElement(Operation *op, unsigned i, StringRef what) {
  auto t = dyn_cast<RankedTensorType>(op->getOperand(i).getType());
  if (t && (t.getRank() > 1 || (t.hasStaticShape() && t.getNumElements() != 1)))
    return op->emitOpError() << what << " must hold one element (a scalar or shape [1]), got "
                             << t;
  return success();
}

/// The bitwise ops' operands are integers (ONNX BitwiseAnd/Or/Xor/Not-18).
static LogicalResult verifyBitwise(Operation *op) {
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (failed(checkIntegerOperand(op, i, "input " + std::to_string(i))))
      return failure();
  return success();
}

LogicalResult verifyNode(BitwiseAndOp op) { return verifyBitwise(op); }
LogicalResult verifyNode(BitwiseOrOp op) { return verifyBitwise(op); }
LogicalResult verifyNode(BitwiseXorOp op) { return verifyBitwise(op); }
LogicalResult verifyNode(BitwiseNotOp op) { return verifyBitwise(op); }

LogicalResult verifyNode(ClipOp op) {
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    if (!isa<NoneType>(op->getOperand(i).getType()) &&
        failed(checkSingleElement(op, i, i == 1 ? "min" : "max")))
      return failure();
  return success();
}

LogicalResult verifyNode(ModOp op) {
  int64_t fmod = op.getFmod().value_or(0);
  if (fmod != 0 && fmod != 1)
    return op.emitOpError("fmod must be 0 or 1, got ") << fmod;
  Type elt = elementTypeOf(op->getOperand(0));
  if (elt && isa<FloatType>(elt) && fmod != 1)
    return op.emitOpError("floating-point inputs need fmod = 1 (ONNX Mod)");
  return success();
}

LogicalResult verifyNode(GeluOp op) {
  if (auto a = op.getApproximate(); a && *a != "none" && *a != "tanh")
    return op.emitOpError("approximate must be \"none\" or \"tanh\", got \"") << *a << "\"";
  Type elt = elementTypeOf(op->getOperand(0));
  if (elt && !isa<FloatType>(elt))
    return op.emitOpError("needs a floating-point input, got ") << elt;
  return success();
}

LogicalResult verifyNode(GatherElementsOp op) {
  int64_t rank = rankOf(op, 0), indRank = rankOf(op, 1);
  if (rank == 0)
    return op.emitOpError("data must have rank >= 1");
  if (rank >= 0 && indRank >= 0 && rank != indRank)
    return op.emitOpError("indices have rank ")
           << indRank << " but data has rank " << rank << " (they must be equal)";
  if (failed(checkIntegerOperand(op, 1, "indices")))
    return failure();
  return checkAxis(op, "axis", op.getAxis().value_or(0), rank);
}

LogicalResult verifyNode(ScatterElementsOp op) {
  StringRef reduction = op.getReduction().value_or("none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return op.emitOpError("reduction must be none, add, mul, max or min, got '")
           << reduction << "'";
  int64_t rank = rankOf(op, 0);
  if (rank == 0)
    return op.emitOpError("data must have rank >= 1");
  for (unsigned i : {1u, 2u})
    if (int64_t r = rankOf(op, i); rank >= 0 && r >= 0 && r != rank)
      return op.emitOpError(i == 1 ? "indices" : "updates")
             << " have rank " << r << " but data has rank " << rank << " (they must be equal)";
  auto ind = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
  auto upd = dyn_cast<RankedTensorType>(op->getOperand(2).getType());
  if (ind && upd && failed(mlir::verifyCompatibleShape(ind.getShape(), upd.getShape())))
    return op.emitOpError("updates ") << upd << " must have the shape of indices " << ind;
  if (failed(checkIntegerOperand(op, 1, "indices")))
    return failure();
  return checkAxis(op, "axis", op.getAxis().value_or(0), rank);
}

LogicalResult verifyNode(TopKOp op) {
  int64_t rank = rankOf(op, 0);
  if (rank == 0)
    return op.emitOpError("X must have rank >= 1");
  int64_t axis = op.getAxis().value_or(-1);
  if (failed(checkAxis(op, "axis", axis, rank)))
    return failure();
  for (auto [name, v] : {std::pair<StringRef, std::optional<int64_t>>{"largest", op.getLargest()},
                         {"sorted", op.getSorted()}})
    if (v && *v != 0 && *v != 1)
      return op.emitOpError() << name << " must be 0 or 1, got " << *v;
  Type kElt = elementTypeOf(op->getOperand(1));
  if (kElt && !kElt.isInteger(64))
    return op.emitOpError("K must be an int64 tensor, got element type ") << kElt;
  if (failed(checkSingleElement(op, 1, "K")))
    return failure();
  Type indElt = elementTypeOf(op->getResult(1));
  if (indElt && !indElt.isInteger(64))
    return op.emitOpError("Indices (output 1) must be int64, got element type ") << indElt;
  // A constant K must fit the axis.
  auto kConst = op->getOperand(1).getDefiningOp<ConstantOp>();
  auto k = kConst ? dyn_cast<DenseIntElementsAttr>(kConst.getValue()) : nullptr;
  if (k && k.getNumElements() == 1) {
    int64_t kv = (*k.getValues<APInt>().begin()).getSExtValue();
    if (kv < 0)
      return op.emitOpError("K must be >= 0, got ") << kv;
    auto x = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    int64_t ax = axis < 0 ? axis + rank : axis;
    if (x && !x.isDynamicDim(ax) && kv > x.getDimSize(ax))
      return op.emitOpError("K = ") << kv << " exceeds the size " << x.getDimSize(ax)
                                    << " of axis " << ax;
  }
  return success();
}

} // namespace h20::onnx

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("initializer name must not be empty");
  std::optional<int64_t> off, len;
  if (auto o = getOffset())
    off = static_cast<int64_t>(*o);
  if (auto l = getLength())
    len = static_cast<int64_t>(*l);
  if ((off && *off < 0) || (len && *len < 0))
    return emitOpError("offset and length must be >= 0");
  auto type = cast<RankedTensorType>(getResult().getType());
  // After h20-compute-type the bytes are stored as `h20.stored_type` and
  // converted when loaded.
  unsigned bits = type.getElementTypeBitWidth();
  if (auto stored = (*this)->getAttrOfType<TypeAttr>("h20.stored_type"))
    bits = stored.getValue().getIntOrFloatBitWidth();
  // h20-tensor-parallel: the bytes hold the whole initializer, the result
  // is one rank's slice of it.
  int64_t elements = type.getNumElements();
  if (auto shard = (*this)->getAttrOfType<DictionaryAttr>("h20.shard")) {
    auto axis = shard.getAs<IntegerAttr>("axis");
    auto full = shard.getAs<DenseI64ArrayAttr>("full_shape");
    auto starts = shard.getAs<DenseI64ArrayAttr>("starts");
    if (!axis || !full || !starts || static_cast<int64_t>(full.size()) != type.getRank())
      return emitOpError("h20.shard of '") << getName()
             << "' needs axis, full_shape (of the result's rank) and starts";
    int64_t a = axis.getInt();
    if (a < 0 || a >= type.getRank())
      return emitOpError("h20.shard axis ") << a << " out of range";
    elements = 1;
    for (int64_t i = 0; i < type.getRank(); ++i) {
      if (i != a && full[i] != type.getDimSize(i))
        return emitOpError("h20.shard full_shape differs from the result outside axis ") << a;
      elements *= full[i];
    }
    for (int64_t s : starts.asArrayRef())
      if (s < 0 || s + type.getDimSize(a) > full[a])
        return emitOpError("h20.shard start ") << s << " + " << type.getDimSize(a)
               << " exceeds dim " << full[a];
  }
  // h20-quantize-linears: the result is derived from the stored tensor
  // (h20.derive: its kind, source_type and source_shape) when loaded.
  if (auto derive = (*this)->getAttrOfType<DictionaryAttr>("h20.derive")) {
    auto kind = derive.getAs<StringAttr>("kind");
    auto from = derive.getAs<TypeAttr>("source_type");
    auto shape = derive.getAs<DenseI64ArrayAttr>("source_shape");
    if (!kind || !from || !shape || shape.size() != 2 || shape[0] < 1 || shape[1] < 1 ||
        !isa<FloatType>(from.getValue()) || (*this)->hasAttr("h20.shard"))
      return emitOpError("h20.derive of '")
             << getName() << "' needs kind, a float source_type and a 2-D source_shape, "
             << "and no h20.shard";
    // Stored W [K, N]; derived W^T [N, K] in FP8, or its scales per 128 x 128.
    const int64_t k = shape[0], n = shape[1];
    SmallVector<int64_t> want;
    if (kind.getValue() == "fp8_block128" && isa<Float8E4M3FNType>(type.getElementType()))
      want = {n, k};
    else if (kind.getValue() == "fp8_block128_scale" && type.getElementType().isF32())
      want = {(n + 127) / 128, (k + 127) / 128};
    if (want.empty() || type.getShape() != ArrayRef<int64_t>(want))
      return emitOpError("h20.derive '")
             << kind.getValue() << "' of '" << getName() << "' [" << k << ", " << n
             << "] cannot give " << type;
    elements = k * n;
    bits = from.getValue().getIntOrFloatBitWidth();
  }
  if (len && bits % 8 == 0) {
    int64_t expected = elements * (bits / 8);
    if (*len != expected)
      return emitOpError("initializer '")
             << getName() << "' declares " << *len << " bytes but " << type
             << " needs " << expected;
  }
  return success();
}
