//===- InputValueRanges.cpp - the ranges index inputs must lie in --------===//
//
// ONNX makes an out-of-range index an error (Gather, GatherElements,
// ScatterElements: indices in [-s, s) for an axis of size s; a RoPE position
// must have a row in the cos/sin cache). The compiled kernels cannot report
// an error, so the check moves to where the index comes from:
//  - a constant index is checked here, at compile time (error naming the
//    ONNX node, op, index and size);
//  - an index that is a model input, up to value-preserving ops (Cast to an
//    integer, Reshape, Squeeze, Unsqueeze, Flatten, Identity, Expand,
//    Transpose), is recorded on that function argument as `h20.value_ranges`
//    (choose), which the targets copy into the manifest and h20-run checks
//    against the input's values before anything runs (apply): exit 2 naming
//    the input, the element, its value and the node that needs the range.
// An index computed from other values keeps the kernels' clamp (never a read
// outside the tensor); the pass says nothing about it.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace h20 {
#define GEN_PASS_DEF_INPUTVALUERANGES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

/// "node 'NAME' (op 'Gather')": the ONNX node an op was imported from (the
/// op's name when the location does not say).
std::string describeNode(Operation *op) {
  std::string d = ox::describeNode(op->getLoc());
  return d.empty() ? "op '" + op->getName().getStringRef().str() + "'" : d;
}

/// Follows `v` back through ops that move or convert integer values without
/// changing them; the first value that is not such an op's result.
Value valueSource(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    bool preserving = llvm::TypeSwitch<Operation *, bool>(def)
                          .Case<ox::ReshapeOp, ox::SqueezeOp, ox::UnsqueezeOp, ox::IdentityOp,
                                ox::ExpandOp, ox::TransposeOp>([](Operation *) { return true; })
                          .Case([](ox::CastOp c) {
                            // Only a cast between integer types wide enough
                            // to keep every value (int32 <-> int64 of an
                            // index) preserves it.
                            auto in = dyn_cast<ShapedType>(c->getOperand(0).getType());
                            auto out = dyn_cast<ShapedType>(c->getResult(0).getType());
                            return in && out && in.getElementType().isInteger() &&
                                   out.getElementType().isInteger() &&
                                   in.getElementType().getIntOrFloatBitWidth() >= 32 &&
                                   out.getElementType().getIntOrFloatBitWidth() >= 32;
                          })
                          .Default([](Operation *) { return false; });
    if (!preserving || def->getNumOperands() == 0)
      return v;
    v = def->getOperand(0);
  }
  return v;
}

/// One requirement: every element of the index lies in [lo, hi), where hi
/// is the size `size` (constant or symbolic) and lo is 0 or -size.
struct Requirement {
  Operation *op;       ///< the node that reads the index
  Value index;         ///< the index operand
  Value sized;         ///< the tensor whose dim bounds it
  int64_t dim;         ///< ... that dim
  bool negativeOk;     ///< [-s, s) (ONNX gathers) or [0, s) (RoPE rows)
  int64_t scale = 1;   ///< hi = scale * dim (two-level RoPE tables: block rows each)
  std::string what;    ///< "indices", "position_ids", ...
};

/// The index operands of `op` and the range each must lie in.
SmallVector<Requirement> requirementsOf(Operation *op) {
  SmallVector<Requirement> reqs;
  auto axisOf = [&](std::optional<int64_t> axis, Value data) -> std::optional<int64_t> {
    auto t = dyn_cast<RankedTensorType>(data.getType());
    if (!t)
      return std::nullopt;
    int64_t a = axis.value_or(0), r = t.getRank();
    if (a < 0)
      a += r;
    if (a < 0 || a >= r)
      return std::nullopt;
    return a;
  };
  auto gatherLike = [&](Value data, Value indices, std::optional<int64_t> axis) {
    if (auto a = axisOf(axis, data))
      reqs.push_back({op, indices, data, *a, true, 1, "indices"});
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](ox::GatherOp g) {
        if (g->getNumOperands() == 2)
          gatherLike(g->getOperand(0), g->getOperand(1), g.getAxis());
      })
      .Case([&](ox::GatherElementsOp g) {
        if (g->getNumOperands() == 2)
          gatherLike(g->getOperand(0), g->getOperand(1), g.getAxis());
      })
      .Case([&](ox::ScatterElementsOp s) {
        if (s->getNumOperands() == 3)
          gatherLike(s->getOperand(0), s->getOperand(1), s.getAxis());
      })
      .Case([&](ox::RotaryEmbeddingOp r) {
        // ONNX RotaryEmbedding-23: (X, cos_cache, sin_cache, position_ids);
        // with position_ids the cache is [max_position_id + 1, D / 2].
        if (r->getNumOperands() == 4 && !isa<NoneType>(r->getOperand(3).getType()))
          reqs.push_back({op, r->getOperand(3), r->getOperand(1), 0, false, 1, "position_ids"});
      })
      .Case([&](ox::MsRotaryEmbeddingOp r) {
        // com.microsoft RotaryEmbedding: (input, position_ids, cos_cache,
        // sin_cache); position_ids of shape [1] are a start offset (the
        // rows read are offset + s), a check on the offset alone is still
        // necessary.
        if (r->getNumOperands() == 4)
          reqs.push_back({op, r->getOperand(1), r->getOperand(2), 0, false, 1, "position_ids"});
      })
      .Case([&](h20::attn::RopeApplyOp r) {
        // Two-level tables: coarse [2, ceil(P / block), D/2] covers
        // positions [0, rows * block).
        reqs.push_back({op, r.getPositions(), r.getCoarse(), 1, false,
                        static_cast<int64_t>(r.getBlock()), "positions"});
      });
  return reqs;
}

/// The function argument an index comes from, with the argument number.
std::optional<unsigned> argumentOf(func::FuncOp func, Value index) {
  auto arg = dyn_cast<BlockArgument>(valueSource(index));
  if (!arg || arg.getOwner() != &func.getBody().front())
    return std::nullopt;
  return arg.getArgNumber();
}

/// `e` as {constant, terms [{input, dim, coeff}]} over the function's input
/// dims (the manifest's DimSum), or null when a symbol is no input dim.
DictionaryAttr dimSumAttr(Builder &b, func::FuncOp func, h20::SymbolicEvaluator &eval,
                          const h20::SymExpr &e) {
  auto lin = h20::linearOf(e);
  if (!lin)
    return {};
  SmallVector<Attribute> terms;
  for (auto [atom, coeff] : lin->coeffs) {
    if (!atom.first)
      return {};
    h20::SymExpr sym = h20::symSymbol(atom.second);
    std::optional<std::pair<int64_t, int64_t>> at;
    for (auto [a, arg] : llvm::enumerate(func.getArguments())) {
      auto dims = eval.shapeOf(arg);
      for (size_t j = 0; dims && j < dims->size() && !at; ++j)
        if (h20::provablyEqual((*dims)[j], sym))
          at = std::make_pair(int64_t(a), int64_t(j));
      if (at)
        break;
    }
    if (!at)
      return {};
    terms.push_back(b.getDictionaryAttr({b.getNamedAttr("input", b.getI64IntegerAttr(at->first)),
                                         b.getNamedAttr("dim", b.getI64IntegerAttr(at->second)),
                                         b.getNamedAttr("coeff", b.getI64IntegerAttr(coeff))}));
  }
  return b.getDictionaryAttr({b.getNamedAttr("constant", b.getI64IntegerAttr(lin->constant)),
                              b.getNamedAttr("terms", b.getArrayAttr(terms))});
}

/// A constant index: every element checked against a static size now.
LogicalResult checkConstant(const Requirement &r, DenseElementsAttr values, int64_t size) {
  int64_t lo = r.negativeOk ? -size : 0, hi = size, k = 0;
  for (APInt x : values.getValues<APInt>()) {
    int64_t v = x.getSExtValue();
    if (v < lo || v >= hi)
      return r.op->emitError() << describeNode(r.op) << ": " << r.what << " element " << k
                               << " is " << v << ", outside [" << lo << ", " << hi
                               << ") (dim " << r.dim << " has size " << size / r.scale
                               << (r.scale > 1 ? " blocks of " + std::to_string(r.scale) : "")
                               << "); ONNX makes an out-of-range index an error";
    ++k;
  }
  return success();
}

struct InputValueRangesPass : h20::impl::InputValueRangesBase<InputValueRangesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    h20::SymbolicEvaluator eval(func);
    Builder b(func.getContext());
    // Per argument: the requirements already recorded, plus new ones.
    SmallVector<SmallVector<Attribute>> ranges(func.getNumArguments());
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto old = func.getArgAttrOfType<ArrayAttr>(i, "h20.value_ranges"))
        ranges[i].append(old.begin(), old.end());
    WalkResult walk = func.walk([&](Operation *op) {
      for (const Requirement &r : requirementsOf(op)) {
        auto shape = eval.shapeOf(r.sized);
        if (!shape || r.dim >= static_cast<int64_t>(shape->size()))
          continue;
        h20::SymExpr size = h20::symMul(h20::symConst(r.scale), (*shape)[r.dim]);
        Value source = valueSource(r.index);
        if (auto c = source.getDefiningOp<ox::ConstantOp>()) {
          auto values = dyn_cast<DenseElementsAttr>(c.getValue());
          auto n = h20::constantOf(size);
          if (values && n && values.getElementType().isInteger() &&
              failed(checkConstant(r, values, *n)))
            return WalkResult::interrupt();
          continue;
        }
        auto arg = argumentOf(func, r.index);
        if (!arg)
          continue;
        DictionaryAttr hi = dimSumAttr(b, func, eval, size);
        DictionaryAttr lo = r.negativeOk ? dimSumAttr(b, func, eval, h20::symSub(h20::symConst(0), size))
                                         : dimSumAttr(b, func, eval, h20::symConst(0));
        if (!hi || !lo)
          continue;
        std::string why = r.what + " of " + describeNode(r.op);
        Attribute entry = b.getDictionaryAttr({b.getNamedAttr("lo", lo), b.getNamedAttr("hi", hi),
                                               b.getNamedAttr("why", b.getStringAttr(why))});
        if (!llvm::is_contained(ranges[*arg], entry))
          ranges[*arg].push_back(entry);
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (!ranges[i].empty())
        func.setArgAttr(i, "h20.value_ranges", b.getArrayAttr(ranges[i]));
  }
};

} // namespace
