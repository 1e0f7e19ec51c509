//===- RowSplitRegion.cpp - how far a query-row split can reach -----------===//
//
// See RowSplitRegion.h. The region is found on the attn-level graph (before
// chunking), where the token dim is the one dynamic dim of the values it
// follows; each rule below says where that dim goes through an op.
//
//===----------------------------------------------------------------------===//
#include "RowSplitRegion.h"

#include "PerTokenOps.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

using namespace mlir;
namespace ox = h20::onnx;
namespace at = h20::attn;

namespace {

RankedTensorType tensorOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// The one dynamic dim of `t`, or nothing when it has none or several.
std::optional<int64_t> onlyDynamicDim(RankedTensorType t) {
  std::optional<int64_t> at;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.isDynamicDim(d)) {
      if (at)
        return std::nullopt;
      at = d;
    }
  return at;
}

/// Product of the static dims of `t` in [from, to).
int64_t staticProduct(RankedTensorType t, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t d = from; d < to; ++d)
    p *= t.isDynamicDim(d) ? 1 : t.getDimSize(d);
  return p;
}

bool isWeight(Value v) { return v.getDefiningOp<ox::WeightOp>() != nullptr; }

/// A MatMul of a region value (rows on its M dim, `axis` == rank - 2) by
/// an initializer, K static and over 8 (a cuBLASLt GEMM: the lowering runs
/// smaller contractions as generated kernels, which are not split); or a
/// block-scaled FP8 linear of X [M, K] (rows on M) by FP8 weights.
bool splittableGemm(Operation *op, int64_t axis) {
  if (isa<ox::H20BlockScaledMatMulOp>(op)) {
    auto x = tensorOf(op->getOperand(0));
    return x && x.getRank() == 2 && axis == 0 && op->getNumOperands() == 3 &&
           isWeight(op->getOperand(1)) && isWeight(op->getOperand(2));
  }
  auto mm = dyn_cast<ox::MatMulOp>(op);
  if (!mm || !isWeight(op->getOperand(1)))
    return false;
  auto x = tensorOf(op->getOperand(0)), w = tensorOf(op->getOperand(1));
  return x && w && x.getRank() >= 2 && axis == x.getRank() - 2 && w.getRank() >= 2 &&
         w.getRank() <= x.getRank() && !x.isDynamicDim(x.getRank() - 1) &&
         x.getDimSize(x.getRank() - 1) > 8;
}

/// Ops that only move elements (rows stay rows).
bool shapeOnly(Operation *op) {
  return isa<ox::TransposeOp, ox::ReshapeOp, ox::UnsqueezeOp, ox::SqueezeOp>(op);
}

/// The rows' axis after a ReduceMax / ReduceSum / ReduceMean of `in`
/// (rows on `a`) along constant axes other than the rows', or nothing.
template <typename ReduceOp>
std::optional<int64_t> reducedAxis(ReduceOp op, RankedTensorType in, int64_t a) {
  std::optional<SmallVector<int64_t>> axes;
  if (op->getNumOperands() > 1)
    axes = h20::constantInts(op->getOperand(1));
  else if (op.getAxes())
    axes = SmallVector<int64_t>(op.getAxes()->begin(), op.getAxes()->end());
  if (!axes || axes->empty()) // all axes (or none: noop_with_empty_axes)
    return std::nullopt;
  int64_t before = 0;
  for (int64_t d : *axes) {
    d = d < 0 ? d + in.getRank() : d;
    if (d == a)
      return std::nullopt;
    before += d < a;
  }
  return op.getKeepdims().value_or(1) ? a : a - before;
}

/// The rows' axis in `op`'s results when `op` is row-local for the region
/// values it reads (their axes in `axes`): result row i depends only on
/// row i of every operand that has rows (region values, or values from
/// outside whose rows are whole on every rank), nothing when not.
std::optional<int64_t> resultAxis(Operation *op, const llvm::DenseMap<Value, int64_t> &axes) {
  // The region operand the rule starts from (all must agree, checked below).
  Value in;
  int64_t a = -1;
  for (Value v : op->getOperands())
    if (auto it = axes.find(v); it != axes.end()) {
      in = v;
      a = it->second;
      break;
    }
  auto it = tensorOf(in);
  if (!it || op->getNumResults() == 0)
    return std::nullopt;
  auto out = tensorOf(op->getResult(0));
  if (!out)
    return std::nullopt;
  // Region operands other than `in` must carry rows on `expect`.
  auto othersAt = [&](unsigned first, int64_t expect) {
    for (unsigned k = first; k < op->getNumOperands(); ++k)
      if (auto f = axes.find(op->getOperand(k)); f != axes.end() && f->second != expect)
        return false;
    return true;
  };
  if (auto tr = dyn_cast<ox::TransposeOp>(op)) {
    SmallVector<int64_t> perm;
    if (tr.getPerm())
      perm.assign(tr.getPerm()->begin(), tr.getPerm()->end());
    else
      for (int64_t d = it.getRank() - 1; d >= 0; --d)
        perm.push_back(d);
    for (int64_t j = 0; j < static_cast<int64_t>(perm.size()); ++j)
      if (perm[j] == a)
        return j;
    return std::nullopt;
  }
  if (isa<ox::ReshapeOp, ox::UnsqueezeOp, ox::SqueezeOp>(op)) {
    // The rows are the only dynamic dim before and after; a reshape keeps
    // the elements before and after them.
    auto from = onlyDynamicDim(it), to = onlyDynamicDim(out);
    if (op->getOperand(0) != in || !from || *from != a || !to)
      return std::nullopt;
    if (isa<ox::ReshapeOp>(op) &&
        (staticProduct(it, 0, a) != staticProduct(out, 0, *to) ||
         staticProduct(it, a + 1, it.getRank()) != staticProduct(out, *to + 1, out.getRank())))
      return std::nullopt;
    return *to;
  }
  if (auto split = dyn_cast<ox::SplitOp>(op)) {
    int64_t axis = split.getAxis().value_or(0);
    axis = axis < 0 ? axis + it.getRank() : axis;
    return op->getOperand(0) == in && axis != a ? std::optional<int64_t>(a) : std::nullopt;
  }
  if (auto concat = dyn_cast<ox::ConcatOp>(op)) {
    int64_t axis = concat.getAxis();
    axis = axis < 0 ? axis + it.getRank() : axis;
    if (axis == a || !othersAt(0, a))
      return std::nullopt;
    for (Value v : op->getOperands())
      if (auto t = tensorOf(v); !t || !t.isDynamicDim(a))
        return std::nullopt;
    return a;
  }
  if (h20::isOnnxElementwise(op)) {
    // Broadcast from the right: an operand's dim at the rows' position is
    // the rows (dynamic), 1, or absent.
    const int64_t ra = a + (out.getRank() - it.getRank());
    for (Value v : op->getOperands()) {
      auto t = tensorOf(v);
      if (!t)
        return std::nullopt;
      const int64_t i = ra - (out.getRank() - t.getRank());
      if (auto f = axes.find(v); f != axes.end() && f->second != i)
        return std::nullopt;
      if (i >= 0 && !t.isDynamicDim(i) && t.getDimSize(i) != 1)
        return std::nullopt;
    }
    return ra;
  }
  if (auto r = dyn_cast<ox::ReduceMaxOp>(op))
    return op->getOperand(0) == in ? reducedAxis(r, it, a) : std::nullopt;
  if (auto r = dyn_cast<ox::ReduceSumOp>(op))
    return op->getOperand(0) == in ? reducedAxis(r, it, a) : std::nullopt;
  if (auto r = dyn_cast<ox::ReduceMeanOp>(op))
    return op->getOperand(0) == in ? reducedAxis(r, it, a) : std::nullopt;
  if (auto rope = dyn_cast<at::RopeOp>(op)) {
    // input [B, H, S, D]: rows on S; positions [.., S] whole on every rank,
    // or rows themselves on their last dim (row i rotated by position i).
    Value pos = rope.getPositions();
    auto p = axes.find(pos);
    const bool posOk = p == axes.end() || p->second == tensorOf(pos).getRank() - 1;
    return rope.getInput() == in && a == it.getRank() - 2 && posOk ? std::optional<int64_t>(a)
                                                                   : std::nullopt;
  }
  if (auto norm = dyn_cast<at::RmsNormOp>(op)) {
    // Normalises dims [axis, rank): row-local when the rows come before.
    int64_t from = norm.getAxis();
    from = from < 0 ? from + it.getRank() : from;
    return norm.getInput() == in && a < from && !axes.count(norm.getWeight())
               ? std::optional<int64_t>(a)
               : std::nullopt;
  }
  if (splittableGemm(op, a) && op->getOperand(0) == in)
    return a + (out.getRank() - it.getRank());
  return std::nullopt;
}

} // namespace

h20::RowSplitRegion h20::findRowSplitRegion(Operation *attention) {
  RowSplitRegion best;
  if (attention->getNumResults() != 1)
    return best;
  llvm::DenseMap<Value, int64_t> axes{{attention->getResult(0), 0}};
  // Uses of each region value not yet met; `live` counts values with some.
  llvm::DenseMap<Value, int64_t> pending;
  int64_t live = 0;
  auto add = [&](Value v, int64_t axis) {
    axes[v] = axis;
    const int64_t uses = std::distance(v.use_begin(), v.use_end());
    pending[v] = uses;
    live += uses > 0;
  };
  add(attention->getResult(0), 0);
  SmallVector<Operation *> gemms;
  for (Operation *op = attention->getNextNode(); op && live > 0; op = op->getNextNode()) {
    if (llvm::none_of(op->getOperands(), [&](Value v) { return axes.count(v); }))
      continue;
    std::optional<int64_t> axis = resultAxis(op, axes);
    // After the first GEMM the split may only move on to a later GEMM
    // through shape-only ops; anything else ends it there.
    const bool gemm = axis && isa<ox::MatMulOp, ox::H20BlockScaledMatMulOp>(op);
    if (!axis || (best.end && !gemm && !shapeOnly(op)))
      break;
    for (Value v : op->getOperands())
      if (auto p = pending.find(v); p != pending.end() && --p->second == 0)
        --live;
    for (Value r : op->getResults())
      add(r, *axis);
    if (gemm) {
      gemms.push_back(op);
      // The end: this GEMM's result is the only value of the region still
      // to be read (a dead GEMM is no end: the live value is another).
      if (live == 1 && pending.lookup(op->getResult(0)) > 0) {
        best.gemms = gemms;
        best.end = op;
      }
    }
  }
  return best;
}

namespace {

/// Whether operand `idx` of `op` is one whose rows resultAxis follows (a
/// data operand), not a shape, axes or sizes operand whose every element
/// each row reads.
bool rowsOperand(Operation *op, unsigned idx) {
  if (isa<ox::TransposeOp, ox::ReshapeOp, ox::UnsqueezeOp, ox::SqueezeOp, ox::SplitOp,
          ox::ReduceMaxOp, ox::ReduceSumOp, ox::ReduceMeanOp, at::RmsNormOp, ox::MatMulOp,
          ox::H20BlockScaledMatMulOp>(op))
    return idx == 0;
  if (isa<at::RopeOp>(op))
    return idx <= 1; // input and positions
  return isa<ox::ConcatOp>(op) || h20::isOnnxElementwise(op);
}

/// Whether `use` reads only the rank's rows of its value once the ops of
/// `side` compute only those rows: a data operand of an op of `side`, a
/// query of the shape alone, or (`viaSplitOps`) a per-query operand of an
/// op split by query rows, rows on axis 0 (a sparse attention's query; an
/// indexer's query and head weights).
bool readsRankRowsOnly(OpOperand &use, const llvm::DenseSet<Operation *> &side, bool viaSplitOps) {
  Operation *u = use.getOwner();
  if ((side.contains(u) && rowsOperand(u, use.getOperandNumber())) ||
      isa<ox::ShapeOp, tensor::DimOp>(u))
    return true;
  if (!viaSplitOps || !u->hasAttr(at::kSplitRowsAttr))
    return false;
  auto rowsOnZero = [&] {
    auto t = tensorOf(use.get());
    return t && onlyDynamicDim(t) == std::optional<int64_t>(0);
  };
  if (auto a = dyn_cast<at::SparseAttentionOp>(u))
    return &use == &a.getQueryMutable() && rowsOnZero();
  if (auto k = dyn_cast<at::IndexerTopKOp>(u))
    return (&use == &k.getQueryMutable() || &use == &k.getWeightsMutable()) && rowsOnZero();
  if (auto c = dyn_cast<at::IndexerCandidatesOp>(u))
    return (&use == &c.getQueryMutable() || &use == &c.getWeightsMutable()) && rowsOnZero();
  return false;
}

/// The rows' axis of `op`'s results when `op` is row-local with every
/// data operand's rows on its one dynamic dim (the token dim of the
/// attn-level graph) and every result's rows on its one dynamic dim too;
/// nothing otherwise, and nothing when a shape or axes operand has a
/// dynamic size (made from the rows: every row reads all of it). `axes`
/// receives the operands' axes.
std::optional<int64_t> rowLocalOnTokenDims(Operation *op, llvm::DenseMap<Value, int64_t> &axes) {
  for (OpOperand &o : op->getOpOperands()) {
    Value v = o.get();
    auto t = tensorOf(v);
    if (!t || isWeight(v) || t.hasStaticShape())
      continue;
    if (!rowsOperand(op, o.getOperandNumber()))
      return std::nullopt;
    std::optional<int64_t> d = onlyDynamicDim(t);
    if (!d)
      return std::nullopt;
    axes[v] = *d;
  }
  if (axes.empty() || op->getNumResults() == 0)
    return std::nullopt;
  std::optional<int64_t> axis = resultAxis(op, axes);
  if (!axis)
    return std::nullopt;
  for (Value r : op->getResults()) {
    auto t = tensorOf(r);
    if (!t || onlyDynamicDim(t) != axis)
      return std::nullopt;
  }
  return axis;
}

} // namespace

namespace {

/// Grows `side` backwards over the ops of `body` before `from` (all of
/// them when null), readers before producers: an op joins when every use of
/// its results reads only the rank's rows (readsRankRowsOnly) and it is
/// row-local on the token dims. Returns the splittable GEMMs that joined,
/// in program order.
SmallVector<Operation *> growRankRowsSide(Block &body, Operation *from,
                                          llvm::DenseSet<Operation *> &side, bool viaSplitOps) {
  SmallVector<Operation *> gemms;
  auto ops = from ? llvm::make_range(Block::reverse_iterator(from->getIterator()), body.rend())
                  : llvm::make_range(body.rbegin(), body.rend());
  for (Operation &op : ops) {
    if (op.getNumResults() == 0 || op.hasAttr(at::kSplitRowsAttr) || op.use_empty())
      continue;
    const bool onlyRankRows = llvm::all_of(op.getResults(), [&](Value r) {
      return llvm::all_of(r.getUses(),
                          [&](OpOperand &u) { return readsRankRowsOnly(u, side, viaSplitOps); });
    });
    if (!onlyRankRows)
      continue;
    llvm::DenseMap<Value, int64_t> axes;
    std::optional<int64_t> axis = rowLocalOnTokenDims(&op, axes);
    if (!axis)
      continue;
    side.insert(&op);
    if (isa<ox::MatMulOp, ox::H20BlockScaledMatMulOp>(op) && axes.count(op.getOperand(0)) &&
        splittableGemm(&op, axes.lookup(op.getOperand(0))))
      gemms.push_back(&op);
  }
  std::reverse(gemms.begin(), gemms.end());
  return gemms;
}

} // namespace

SmallVector<Operation *> h20::findQuerySideGemms(Block &body) {
  llvm::DenseSet<Operation *> side;
  return growRankRowsSide(body, nullptr, side, /*viaSplitOps=*/true);
}

SmallVector<Operation *> h20::findRowSplitTail(Operation *end) {
  Block *body = end->getBlock();
  if (!body || end->getNumResults() != 1 || end->hasAttr(at::kSplitRowsAttr))
    return {};
  llvm::DenseMap<Value, int64_t> axes;
  std::optional<int64_t> axis = rowLocalOnTokenDims(end, axes);
  if (!axis || !axes.count(end->getOperand(0)) ||
      !splittableGemm(end, axes.lookup(end->getOperand(0))))
    return {};
  llvm::DenseSet<Operation *> side{end};
  SmallVector<Operation *> gemms = growRankRowsSide(*body, end, side, /*viaSplitOps=*/false);
  gemms.push_back(end);
  return gemms;
}
