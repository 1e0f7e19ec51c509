//===- UnrollSmallReductions.cpp - short reductions as elementwise ops ----===//
//
// GPU target, after h20-widen-elementwise: a linalg.generic with one
// reduction loop of a small static extent R (DeepSeek-V4.1's mHC mixes
// sum over its 4 residual streams: out[t, i, c] += w[t, j, i] * x[t, j, c]
// for j < 4) becomes an all-parallel generic whose body applies the
// reduction's combine R times in order j = 0 .. R-1, the inputs read at j
// passed once per j. The sums and their rounding are the same as the
// reduction loop's (same order, same types); what changes is the kernel:
// h20-linalg-to-gpu-loops vectorizes elementwise generics (one
// vector<8 x bf16> per thread along the contiguous innermost dim) but runs
// reductions one scalar element per thread; and an all-parallel generic
// fuses into its consumer (h20-fuse-elementwise runs again after this
// pass), so a short row sum and the division by it (mHC's Sinkhorn
// normalisations over [4, 4] per token) become one kernel instead of a
// fill, a reduction, a cast and an elementwise op. On the full V4.1-Flash rank
// at 128K those two mixes took 1.76 of 11.1 s on an H100 at about a fifth
// of HBM bandwidth (bench/results/issue32-h100-qside).
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace h20 {
#define GEN_PASS_DEF_UNROLLSMALLREDUCTIONS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

/// The longest reduction unrolled: beyond it the body grows and the
/// reduction kernels' own paths (row reductions over a block) take over.
constexpr int64_t kMaxUnroll = 8;

/// The reduction dim of `g` when it has exactly one, of a static extent in
/// [2, kMaxUnroll], read by inputs only as a plain index, the body without linalg.index (which
/// would see the dim) and `g` not a library call; nothing otherwise.
std::optional<unsigned> smallReductionDim(linalg::GenericOp g) {
  if (g.getLibraryCallAttr() || !g.hasPureTensorSemantics())
    return std::nullopt;
  std::optional<unsigned> red;
  for (auto [d, it] : llvm::enumerate(g.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction) {
      if (red)
        return std::nullopt;
      red = d;
    }
  if (!red)
    return std::nullopt;
  int64_t extent = g.getStaticLoopRanges()[*red];
  if (ShapedType::isDynamic(extent) || extent < 2 || extent > kMaxUnroll)
    return std::nullopt;
  if (!g.getRegion().front().getOps<linalg::IndexOp>().empty())
    return std::nullopt;
  for (OpOperand &init : g.getDpsInitsMutable())
    if (g.getMatchingIndexingMap(&init).isFunctionOfDim(*red))
      return std::nullopt;
  // The dim must appear as itself (x[t, j, c]), never inside an
  // expression (x[i + j]): with j replaced by 0 such a result becomes a
  // plain dim, and linalg would take that loop's range from x instead.
  AffineExpr plain = getAffineDimExpr(*red, g.getContext());
  for (OpOperand *in : g.getDpsInputOperands()) {
    AffineMap map = g.getMatchingIndexingMap(in);
    for (AffineExpr e : map.getResults())
      if (e.isFunctionOfDim(*red) && e != plain)
        return std::nullopt;
  }
  return red;
}

/// `map` over the loops without `red`, that dim replaced by `j`.
AffineMap withoutDim(AffineMap map, unsigned red, int64_t j) {
  MLIRContext *ctx = map.getContext();
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < map.getNumDims(); ++d)
    dims.push_back(d < red    ? getAffineDimExpr(d, ctx)
                   : d == red ? getAffineConstantExpr(j, ctx)
                              : getAffineDimExpr(d - 1, ctx));
  return map.replaceDimsAndSymbols(dims, {}, map.getNumDims() - 1, map.getNumSymbols());
}

/// Rewrites `g` (smallReductionDim) into the all-parallel generic.
void unroll(linalg::GenericOp g, unsigned red) {
  const int64_t extent = g.getStaticLoopRanges()[red];
  OpBuilder b(g);
  // Inputs: once per j where the map reads the reduction dim, else once.
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  SmallVector<SmallVector<unsigned>> argOf; // old input -> new input index per j
  for (OpOperand *in : g.getDpsInputOperands()) {
    AffineMap map = g.getMatchingIndexingMap(in);
    SmallVector<unsigned> at;
    for (int64_t j = 0; j < (map.isFunctionOfDim(red) ? extent : 1); ++j) {
      at.push_back(ins.size());
      ins.push_back(in->get());
      maps.push_back(withoutDim(map, red, j));
    }
    argOf.push_back(at);
  }
  // An init filled with a scalar only for this generic starts the
  // accumulation from that scalar in the body: the fill is one kernel
  // launch less, and the result then fuses like any elementwise op.
  SmallVector<Value> outs, start;
  SmallVector<Operation *> folded; // fills now unused
  for (OpOperand &init : g.getDpsInitsMutable()) {
    auto fill = init.get().getDefiningOp<linalg::FillOp>();
    AffineMap outMap = withoutDim(g.getMatchingIndexingMap(&init), red, 0);
    // Each output element must be one iteration's (every loop left in its
    // map); else the loop nest accumulated across iterations.
    Value scalar = fill && fill->hasOneUse() && fill.hasPureTensorSemantics() &&
                           outMap.isPermutation()
                       ? fill.getInputs()[0]
                       : Value();
    if (scalar && scalar.getType() != getElementTypeOrSelf(init.get().getType()))
      scalar = Value();
    outs.push_back(scalar ? fill.getOutputs()[0] : init.get());
    start.push_back(scalar);
    if (scalar)
      folded.push_back(fill);
    maps.push_back(outMap);
  }
  SmallVector<utils::IteratorType> iters(g.getNumLoops() - 1, utils::IteratorType::parallel);
  auto p = linalg::GenericOp::create(b, g.getLoc(), g.getResultTypes(), ins, outs, maps, iters);
  p->setDiscardableAttrs(g->getDiscardableAttrDictionary());
  Block &old = g.getRegion().front();
  Block *body = b.createBlock(&p.getRegion());
  for (Value v : ins)
    body->addArgument(getElementTypeOrSelf(v.getType()), g.getLoc());
  for (Value v : outs)
    body->addArgument(getElementTypeOrSelf(v.getType()), g.getLoc());
  b.setInsertionPointToStart(body);
  const unsigned numIns = g.getNumDpsInputs();
  SmallVector<Value> acc(body->getArguments().begin() + ins.size(), body->getArguments().end());
  for (auto [a, v] : llvm::zip(acc, start))
    if (v)
      a = v;
  // The reduction loop's iterations in order: each reads the previous
  // accumulators as its outputs.
  for (int64_t j = 0; j < extent; ++j) {
    IRMapping m;
    for (unsigned i = 0; i < numIns; ++i)
      m.map(old.getArgument(i),
            body->getArgument(argOf[i][argOf[i].size() == 1 ? 0 : j]));
    for (auto [k, a] : llvm::enumerate(acc))
      m.map(old.getArgument(numIns + k), a);
    for (Operation &op : old.without_terminator())
      b.clone(op, m);
    for (auto [k, y] : llvm::enumerate(old.getTerminator()->getOperands()))
      acc[k] = m.lookupOrDefault(y);
  }
  linalg::YieldOp::create(b, g.getLoc(), acc);
  g.replaceAllUsesWith(p.getResults());
  g.erase();
  for (Operation *fill : folded)
    fill->erase();
}

/// Collects the generics first, then rewrites them (the walk must not see
/// the ops it creates).
struct UnrollSmallReductionsPass
    : h20::impl::UnrollSmallReductionsBase<UnrollSmallReductionsPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, unsigned>> todo;
    getOperation().walk([&](linalg::GenericOp g) {
      if (std::optional<unsigned> red = smallReductionDim(g))
        todo.emplace_back(g, *red);
    });
    for (auto [g, red] : todo)
      unroll(g, red);
  }
};

} // namespace
