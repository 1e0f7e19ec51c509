//===- ConcatInPlace.cpp - a concat of a tensor's own slices, in place ----===//
//
// GPU target, linalg stage: a concat lowers to tensor.insert_slice ops that
// fill a fresh tensor. Where some of the inserted pieces are slices of one
// tensor X taken at the very place they are inserted (RoPE on part of the
// channels: x = [a | b] split, then concat(a, rope(b))), the result is X
// with the other pieces replaced: the chain becomes inserts into X itself,
// and the pieces of X are never copied. On DeepSeek-V4.1 (query and
// attention output, 448 of 512 channels each) that copy was the largest
// generated kernel of a Flash rank: 1.5 of 10.0 s at 128K on an H100
// (bench/results/issue32-h100-mhc). Bufferization then updates X's buffer
// in place where X is dead afterwards, else copies it once.
//
//===----------------------------------------------------------------------===//
#include "KnownDim.h"

#include "h20/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace h20 {
#define GEN_PASS_DEF_CONCATINPLACE
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;
using h20::knownDim;

namespace {

/// Whether `a` and `b` are the same constant or the same SSA value.
bool same(OpFoldResult a, OpFoldResult b) { return isEqualConstantIntOrValue(a, b); }

/// A chain of insert_slice ops (unit strides) into a tensor.empty that
/// tiles it along one axis, the last one `last`: the inserts in order,
/// or empty when `last` ends no such chain.
SmallVector<tensor::InsertSliceOp> tilingChain(tensor::InsertSliceOp last) {
  SmallVector<tensor::InsertSliceOp> chain{last};
  while (auto prev = chain.back().getDest().getDefiningOp<tensor::InsertSliceOp>()) {
    // One block: the new inserts go where `last` is (not into a loop
    // body that the chain's start is outside of).
    if (!prev->hasOneUse() || prev->getBlock() != last->getBlock())
      return {};
    chain.push_back(prev);
  }
  std::reverse(chain.begin(), chain.end());
  auto base = chain.front().getDest().getDefiningOp<tensor::EmptyOp>();
  if (!base || chain.size() < 2 || base->getBlock() != last->getBlock())
    return {};
  auto t = base.getType();
  std::optional<int64_t> axis;
  SmallVector<std::pair<int64_t, int64_t>> along; // (offset, size) on the axis
  for (tensor::InsertSliceOp ins : chain) {
    if (!llvm::all_of(ins.getMixedStrides(), [](OpFoldResult s) { return isOneInteger(s); }))
      return {};
    for (int64_t k = 0; k < t.getRank(); ++k) {
      OpFoldResult off = ins.getMixedOffsets()[k], sz = ins.getMixedSizes()[k];
      if (isZeroInteger(off) && same(sz, base.getMixedSizes()[k]))
        continue; // the whole dim
      if (axis && *axis != k)
        return {};
      axis = k;
    }
  }
  if (!axis || t.isDynamicDim(*axis))
    return {};
  for (tensor::InsertSliceOp ins : chain) {
    std::optional<int64_t> off = getConstantIntValue(ins.getMixedOffsets()[*axis]);
    std::optional<int64_t> sz = getConstantIntValue(ins.getMixedSizes()[*axis]);
    if (!off || !sz)
      return {};
    along.emplace_back(*off, *sz);
  }
  llvm::sort(along);
  int64_t end = 0;
  for (auto [off, sz] : along) {
    if (off != end)
      return {};
    end += sz;
  }
  return end == t.getDimSize(*axis) ? chain : SmallVector<tensor::InsertSliceOp>{};
}

/// The tensor X whose slice `ins` inserts at the place it was taken from,
/// X of the chain's type and sizes, or null.
Value ownSliceSource(tensor::InsertSliceOp ins, tensor::EmptyOp base) {
  auto ext = ins.getSource().getDefiningOp<tensor::ExtractSliceOp>();
  if (!ext || ext.getSource().getType() != base.getType())
    return {};
  auto eq = [](ArrayRef<OpFoldResult> a, ArrayRef<OpFoldResult> b) {
    return a.size() == b.size() && llvm::all_of(llvm::zip(a, b), [](auto p) {
             return same(std::get<0>(p), std::get<1>(p));
           });
  };
  if (!eq(ext.getMixedOffsets(), ins.getMixedOffsets()) ||
      !eq(ext.getMixedSizes(), ins.getMixedSizes()) ||
      !eq(ext.getMixedStrides(), ins.getMixedStrides()))
    return {};
  Value x = ext.getSource();
  for (int64_t k = 0; k < base.getType().getRank(); ++k) {
    std::optional<OpFoldResult> d = knownDim(x, k);
    if (!d || !same(*d, base.getMixedSizes()[k]))
      return {};
  }
  return x;
}

/// Rewrites the chain ending at `last` into inserts into X (every piece
/// that is not X's own slice), when some piece is X's own slice.
void insertIntoOwnSource(tensor::InsertSliceOp last) {
  SmallVector<tensor::InsertSliceOp> chain = tilingChain(last);
  if (chain.empty())
    return;
  auto base = chain.front().getDest().getDefiningOp<tensor::EmptyOp>();
  // X: the first piece's own source; the pieces from elsewhere are kept.
  SmallVector<Value> own = llvm::map_to_vector(
      chain, [&](tensor::InsertSliceOp ins) { return ownSliceSource(ins, base); });
  auto first = llvm::find_if(own, [](Value v) { return v != nullptr; });
  if (first == own.end())
    return;
  Value x = *first;
  OpBuilder b(last);
  Value acc = x;
  for (auto [ins, src] : llvm::zip(chain, own)) {
    if (src == x)
      continue;
    acc = tensor::InsertSliceOp::create(b, ins.getLoc(), ins.getSource(), acc,
                                        ins.getMixedOffsets(), ins.getMixedSizes(),
                                        ins.getMixedStrides());
  }
  last.getResult().replaceAllUsesWith(acc);
  // The old chain, its tensor.empty and the slices only it read are dead.
  llvm::SetVector<Operation *> dead; // each op once (a slice may be inserted twice)
  for (tensor::InsertSliceOp ins : llvm::reverse(chain)) {
    dead.insert(ins);
    if (Operation *src = ins.getSource().getDefiningOp<tensor::ExtractSliceOp>())
      dead.insert(src);
  }
  dead.insert(base);
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
}

/// Collects the ends of insert chains first, then rewrites each.
struct ConcatInPlacePass : h20::impl::ConcatInPlaceBase<ConcatInPlacePass> {
  void runOnOperation() override {
    SmallVector<tensor::InsertSliceOp> lasts;
    getOperation().walk([&](tensor::InsertSliceOp ins) {
      if (!llvm::any_of(ins->getUsers(), [&](Operation *u) {
            auto next = dyn_cast<tensor::InsertSliceOp>(u);
            return next && next.getDest() == ins.getResult();
          }))
        lasts.push_back(ins);
    });
    for (tensor::InsertSliceOp last : lasts)
      insertIntoOwnSource(last);
  }
};

} // namespace
