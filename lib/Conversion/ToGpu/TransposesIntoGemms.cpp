//===- TransposesIntoGemms.cpp - strided GEMM operands instead of copies --===//
//
// GPU target, on linalg-on-tensors after h20-lower-to-linalg: a batched
// GEMM whose operand is a linalg.transpose of another tensor (a grouped
// projection's [C, G, K] input made [G, C, K]), or whose result is only
// transposed back ([G, C, N] to [C, G, N]), reads or writes the
// untransposed tensor through its indexing map instead. cuBLASLt takes
// any row (ld) and batch stride, so the copy disappears. DeepSeek-V4.1's
// wo_a: two transposes of C x 32768 and C x 8192 elements per layer.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_TRANSPOSESINTOGEMMS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

bool isGemm(linalg::GenericOp g) {
  auto call = g.getLibraryCallAttr();
  return call && call.getValue() == "h20_gemm" && g.hasPureTensorSemantics() &&
         g.getNumDpsInputs() == 2 && g.getNumDpsInits() == 1;
}

/// `map` reading T = transpose(X, perm) (T's dim d is X's dim perm[d]),
/// rewritten to read X: X's dim perm[d] is read at map's result d.
AffineMap readThrough(AffineMap map, ArrayRef<int64_t> perm) {
  SmallVector<AffineExpr> r(map.getNumResults());
  for (auto [d, p] : llvm::enumerate(perm))
    r[p] = map.getResult(d);
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), r, map.getContext());
}

/// `map` writing C when C is only read as T = transpose(C, perm): writes
/// T instead (T's dim d holds C's dim perm[d]).
AffineMap writeThrough(AffineMap map, ArrayRef<int64_t> perm) {
  SmallVector<AffineExpr> r;
  for (int64_t p : perm)
    r.push_back(map.getResult(p));
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), r, map.getContext());
}

/// Whether cuBLASLt can take an operand read through `map` as a matrix:
/// its innermost (contiguous) dim must be the matrix's row or column loop,
/// not a batch loop (the loops: batch..., m, n, k; A reads (m, k), B
/// (k, n), C (m, n)).
bool contiguousAlongMatrix(AffineMap map, unsigned rowLoop, unsigned colLoop) {
  auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
  return last && (last.getPosition() == rowLoop || last.getPosition() == colLoop);
}

void foldInto(linalg::GenericOp g) {
  const unsigned loops = g.getNumLoops();
  if (loops < 4) // only batched GEMMs: an unbatched one keeps its copies
    return;
  const unsigned m = loops - 3, n = loops - 2, k = loops - 1;
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  const unsigned rows[3] = {m, k, m}, cols[3] = {k, n, n};
  bool changed = false;
  // Inputs read through a transpose.
  for (unsigned i = 0; i < 2; ++i) {
    OpOperand &in = g->getOpOperand(i);
    auto t = in.get().getDefiningOp<linalg::TransposeOp>();
    if (!t || !t->hasOneUse() || !t.hasPureTensorSemantics())
      continue;
    AffineMap read = readThrough(maps[i], t.getPermutation());
    if (!contiguousAlongMatrix(read, rows[i], cols[i]))
      continue;
    maps[i] = read;
    in.set(t.getInput());
    t->erase();
    changed = true;
  }
  // A result only transposed: written in the transposed layout.
  Value c = g->getResult(0);
  auto t = c.hasOneUse() ? dyn_cast<linalg::TransposeOp>(*c.getUsers().begin()) : nullptr;
  if (t && t.hasPureTensorSemantics()) {
    AffineMap write = writeThrough(maps[2], t.getPermutation());
    OpOperand &init = g.getDpsInitsMutable()[0];
    auto fill = init.get().getDefiningOp<linalg::FillOp>();
    // T's destination moves before the GEMM (a tensor.empty whose sizes
    // are known there).
    auto empty = t.getInit().getDefiningOp<tensor::EmptyOp>();
    bool movable = empty && empty->hasOneUse() && empty->getBlock() == g->getBlock() &&
                   llvm::all_of(empty->getOperands(), [&](Value v) {
                     Operation *d = v.getDefiningOp();
                     return !d || (d->getBlock() == g->getBlock() && d->isBeforeInBlock(g));
                   });
    // Only a filled init (the GEMM's zero start) is re-created; another
    // init's contents would be lost.
    if (movable && fill && fill.hasPureTensorSemantics() &&
        contiguousAlongMatrix(write, rows[2], cols[2])) {
      empty->moveBefore(g);
      OpBuilder b(g);
      Value dest = empty.getResult();
      // The GEMM accumulates into its init: the same start value there.
      dest = linalg::FillOp::create(b, fill.getLoc(), fill.getInputs()[0], dest).getResult(0);
      maps[2] = write;
      init.set(dest);
      c.setType(t->getResult(0).getType());
      t->getResult(0).replaceAllUsesWith(c);
      t->erase();
      if (fill->use_empty())
        fill->erase();
      changed = true;
    }
  }
  if (changed)
    g.setIndexingMapsAttr(OpBuilder(g).getAffineMapArrayAttr(maps));
}

struct TransposesIntoGemmsPass : h20::impl::TransposesIntoGemmsBase<TransposesIntoGemmsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> gemms;
    getOperation().walk([&](linalg::GenericOp g) {
      if (isGemm(g))
        gemms.push_back(g);
    });
    for (linalg::GenericOp g : gemms)
      foldInto(g);
  }
};

} // namespace
