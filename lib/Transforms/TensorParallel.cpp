//===- TensorParallel.cpp - split heads and MLP columns over ranks --------===//
//
// See Passes.td (h20-tensor-parallel). Megatron-LM's layout (Shoeybi et al.,
// 2019, section 3): column-parallel Q/K/V and MLP-up projections,
// row-parallel output and down projections, one all-reduce after each
// row-parallel product. The pass plans one block at a time (every value it
// would retype, every weight it would slice) and applies the plan only when
// the whole block fits; a block that does not stays replicated.
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/TensorParallel.h"

#include "RowSplitRegion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace h20 {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;
namespace at = h20::attn;

namespace {

/// A tensor split along `axis`: every rank holds `size` entries of that axis,
/// rank r the ones from `starts[r]` on (in the unsplit tensor's indices).
struct Shard {
  int64_t axis = 0, size = 0;
  SmallVector<int64_t> starts;
  bool operator==(const Shard &o) const {
    return axis == o.axis && size == o.size && starts == o.starts;
  }
  Shard scaled(int64_t f, int64_t newAxis) const {
    Shard s{newAxis, size * f, {}};
    for (int64_t x : starts)
      s.starts.push_back(x * f);
    return s;
  }
};

RankedTensorType shardedType(RankedTensorType t, const Shard &s) {
  SmallVector<int64_t> shape(t.getShape());
  shape[s.axis] = s.size;
  return t.clone(shape);
}

/// Product of `dims`, nullopt when one is dynamic.
std::optional<int64_t> product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (ShapedType::isDynamic(d))
      return std::nullopt;
    p *= d;
  }
  return p;
}

/// The shard of `to` that holds the same elements as shard `s` of `from`,
/// where `to` is a reshape of `from` that keeps the sharded axis whole, or
/// merges it with the dims inside it ([.., H, D] <-> [.., H * D]): the
/// dims outside the sharded axis must be equal.
std::optional<Shard> mapThroughReshape(ArrayRef<int64_t> from, const Shard &s,
                                       ArrayRef<int64_t> to) {
  auto inner = product(from.drop_front(s.axis + 1));
  if (!inner || ShapedType::isDynamic(from[s.axis]))
    return std::nullopt;
  for (int64_t j = 0; j < static_cast<int64_t>(to.size()); ++j) {
    auto innerTo = product(to.drop_front(j + 1));
    if (!innerTo || ShapedType::isDynamic(to[j]) || *inner % *innerTo != 0)
      continue;
    int64_t f = *inner / *innerTo;
    if (to[j] != from[s.axis] * f || from.take_front(s.axis) != to.take_front(j))
      continue;
    return s.scaled(f, j);
  }
  return std::nullopt;
}

bool isWeight(Value v) { return v.getDefiningOp<ox::WeightOp>() != nullptr; }

/// A constant or weight every element of which broadcasts over all others
/// (a scalar, or all dims 1).
bool isScalarConstant(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !(v.getDefiningOp<ox::ConstantOp>() || isWeight(v)))
    return false;
  return llvm::all_of(t.getShape(), [](int64_t d) { return d == 1; });
}

bool isElementwiseUnary(Operation *op) {
  return isa<ox::SigmoidOp, ox::TanhOp, ox::ErfOp, ox::GeluOp, ox::ReluOp, ox::NegOp, ox::CastOp, ox::SqrtOp,
             ox::ExpOp, ox::SoftplusOp, ox::IdentityOp, ox::AbsOp, ox::ReciprocalOp>(op);
}
/// Broadcasting elementwise ops of several operands (Min / Max / Clip with
/// scalar bounds: a clamped SwiGLU, as DeepSeek-V4.1's swiglu_limit).
bool isElementwiseBinary(Operation *op) {
  return isa<ox::AddOp, ox::SubOp, ox::MulOp, ox::DivOp, ox::PowOp, ox::MinOp, ox::MaxOp,
             ox::ClipOp>(op);
}

/// Sums `op`'s one result over the ranks: an attn.all_reduce right after
/// it takes over every other use.
void sumOverRanks(OpBuilder &b, Operation *op) {
  b.setInsertionPointAfter(op);
  Value part = op->getResult(0);
  auto sum = at::AllReduceOp::create(b, op->getLoc(), part.getType(), part);
  part.replaceAllUsesExcept(sum.getResult(), sum);
}

/// What applying one block changes.
struct BlockPlan {
  int64_t ranks = 1;
  llvm::MapVector<Value, Shard> values;                 ///< retyped values
  SmallVector<std::pair<OpOperand *, Shard>> weights;   ///< weight uses to slice
  SmallVector<std::pair<ox::ReshapeOp, SmallVector<int64_t>>> reshapes; ///< new shapes
  DenseSet<Operation *> terminals; ///< consumers of split values that stay (attention, reducer)
  DenseSet<Value> whole; ///< inputs of the column-parallel MatMuls: must stay unsplit
  SmallVector<Operation *> reducers; ///< row-parallel MatMuls: all-reduce after
  std::optional<std::pair<at::AttentionOp, int64_t>> kvGroup;
  bool attention = false; ///< planning an attention block (Reshape/Transpose/RoPE allowed)
  int64_t elementwise = 0; ///< elementwise ops in an MLP tree

  bool record(Value v, const Shard &s) {
    auto it = values.find(v);
    if (it != values.end())
      return it->second == s;
    values.insert({v, s});
    return true;
  }

  /// A weight operand sliced along `axis` of the weight, aligned with the
  /// trailing dims of a value split as `s` of rank `valueRank`; a size-1
  /// (broadcast) dim needs no slice.
  bool sliceAligned(OpOperand &use, const Shard &s, int64_t valueRank) {
    auto t = cast<RankedTensorType>(use.get().getType());
    int64_t axis = s.axis - (valueRank - t.getRank());
    if (axis < 0 || t.getDimSize(axis) == 1)
      return true;
    if (!isWeight(use.get()))
      return false; // a non-scalar constant would need a per-rank value
    if (t.getDimSize(axis) != s.size * ranks)
      return false;
    weights.push_back({&use, Shard{axis, s.size, s.starts}});
    return true;
  }

  /// The new shape operand of `r`, whose result gets split as `s`.
  bool reshape(ox::ReshapeOp r, const Shard &s) {
    Value shape = r->getOperand(1);
    auto c = shape.getDefiningOp<ox::ConstantOp>();
    auto dense = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : DenseIntElementsAttr();
    if (!dense)
      return false;
    SmallVector<int64_t> dims;
    for (const APInt &x : dense.getValues<APInt>())
      dims.push_back(x.getSExtValue());
    auto out = cast<RankedTensorType>(r->getResult(0).getType());
    if (static_cast<int64_t>(dims.size()) != out.getRank())
      return false;
    int64_t &d = dims[s.axis];
    if (d == out.getDimSize(s.axis))
      d = s.size;
    else if (d != -1)
      return false; // 0 ("copy the input's dim") cannot follow the split
    reshapes.push_back({r, dims});
    return true;
  }

  /// Plans splitting `v` as `s` back to the MatMuls that produce it.
  bool backward(Value v, const Shard &s) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || s.axis >= type.getRank())
      return false;
    if (values.count(v))
      return record(v, s);
    if (!record(v, s))
      return false;
    Operation *d = v.getDefiningOp();
    if (!d)
      return false;
    int64_t rank = type.getRank();
    if (auto mm = dyn_cast<ox::MatMulOp>(d)) {
      auto w = dyn_cast<RankedTensorType>(mm->getOperand(1).getType());
      if (!isWeight(mm->getOperand(1)) || !w || w.getRank() != 2 || s.axis != rank - 1)
        return false;
      weights.push_back({&mm->getOpOperand(1), Shard{1, s.size, s.starts}});
      whole.insert(mm->getOperand(0));
      return true;
    }
    if (isElementwiseUnary(d)) {
      ++elementwise;
      return backward(d->getOperand(0), s);
    }
    if (isElementwiseBinary(d)) {
      ++elementwise;
      bool any = false;
      for (OpOperand &use : d->getOpOperands()) {
        Value x = use.get();
        if (isScalarConstant(x))
          continue;
        if (x.getType() == v.getType()) {
          if (!backward(x, s))
            return false;
          any = true;
        } else if (!sliceAligned(use, s, rank)) {
          return false;
        }
      }
      return any;
    }
    if (!attention)
      return false;
    if (auto r = dyn_cast<ox::ReshapeOp>(d)) {
      auto in = dyn_cast<RankedTensorType>(r->getOperand(0).getType());
      auto mapped = in ? mapThroughReshape(type.getShape(), s, in.getShape()) : std::nullopt;
      return mapped && reshape(r, s) && backward(r->getOperand(0), *mapped);
    }
    if (auto t = dyn_cast<ox::TransposeOp>(d)) {
      if (!t.getPerm())
        return false;
      ArrayRef<int64_t> perm = *t.getPerm();
      return backward(t->getOperand(0), Shard{perm[s.axis], s.size, s.starts});
    }
    if (auto rope = dyn_cast<at::RopeOp>(d))
      return s.axis != rank - 1 && backward(rope.getInput(), s);
    if (auto norm = dyn_cast<at::RmsNormOp>(d)) {
      // A per-head norm (over dims after the split one) stays per rank.
      int64_t axis = norm.getAxis() < 0 ? norm.getAxis() + rank : norm.getAxis();
      auto w = cast<RankedTensorType>(norm.getWeight().getType());
      return s.axis < axis && w.getRank() <= rank - axis && backward(norm.getInput(), s);
    }
    return false;
  }

  /// Plans splitting `v` (split as `s`) forward through head-merging
  /// Transpose / Reshape to the row-parallel MatMul that consumes it.
  bool forward(Value v, Shard s) {
    while (true) {
      if (!v.hasOneUse())
        return false;
      Operation *u = *v.getUsers().begin();
      auto type = cast<RankedTensorType>(v.getType());
      if (auto mm = dyn_cast<ox::MatMulOp>(u)) {
        auto w = dyn_cast<RankedTensorType>(mm->getOperand(1).getType());
        if (mm->getOperand(0) != v || !isWeight(mm->getOperand(1)) || !w || w.getRank() != 2 ||
            s.axis != type.getRank() - 1)
          return false;
        weights.push_back({&mm->getOpOperand(1), Shard{0, s.size, s.starts}});
        terminals.insert(u);
        reducers.push_back(u);
        return true;
      }
      Value next;
      Shard ns;
      if (auto t = dyn_cast<ox::TransposeOp>(u)) {
        if (!t.getPerm())
          return false;
        ArrayRef<int64_t> perm = *t.getPerm();
        auto pos = llvm::find(perm, s.axis);
        if (pos == perm.end())
          return false;
        ns = Shard{pos - perm.begin(), s.size, s.starts};
        next = u->getResult(0);
      } else if (auto r = dyn_cast<ox::ReshapeOp>(u)) {
        auto out = cast<RankedTensorType>(r->getResult(0).getType());
        auto mapped = mapThroughReshape(type.getShape(), s, out.getShape());
        if (!mapped || !reshape(r, *mapped))
          return false;
        ns = *mapped;
        next = u->getResult(0);
      } else {
        return false;
      }
      if (!record(next, ns))
        return false;
      v = next;
      s = ns;
    }
  }

  /// Every split value is used only by ops of the plan or its terminals,
  /// and none is the (unsplit) input of a column-parallel MatMul.
  bool closed() const {
    for (Value v : whole)
      if (values.count(v))
        return false;
    DenseSet<Operation *> inside(terminals.begin(), terminals.end());
    for (const auto &[v, s] : values)
      if (Operation *d = v.getDefiningOp())
        inside.insert(d);
    for (const auto &[v, s] : values)
      for (Operation *u : v.getUsers())
        if (!inside.contains(u))
          return false;
    return true;
  }
};

/// Plans and applies the blocks of one module (see applyTensorParallel).
struct Splitter {
  MLIRContext *ctx;
  int64_t ranks;

  Shard even(int64_t full) const {
    Shard s{1, full / ranks, {}};
    for (int64_t r = 0; r < ranks; ++r)
      s.starts.push_back(r * s.size);
    return s;
  }

  /// Plans one attention block around `a`; nullopt when it does not fit.
  std::optional<BlockPlan> planAttention(at::AttentionOp a) {
    auto q = cast<RankedTensorType>(a.getQuery().getType());
    auto k = cast<RankedTensorType>(a.getKey().getType());
    if (q.getRank() != 4 || k.getRank() != 4 || q.isDynamicDim(1) || k.isDynamicDim(1))
      return std::nullopt;
    int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1), t = ranks;
    if (hq % t != 0 || !(hkv % t == 0 || t % hkv == 0))
      return std::nullopt;
    if (auto m = a.getMask()) {
      auto mt = cast<RankedTensorType>(m.getType());
      if (mt.getRank() >= 3 && mt.getDimSize(mt.getRank() - 3) != 1)
        return std::nullopt; // a per-head mask
    }
    BlockPlan p;
    p.ranks = t;
    p.attention = true;
    Shard qs = even(hq);
    Shard kvs{1, std::max<int64_t>(hkv / t, 1), {}};
    for (int64_t r = 0; r < t; ++r)
      kvs.starts.push_back(hkv >= t ? r * (hkv / t) : r * hkv / t);
    p.terminals.insert(a);
    if (!p.backward(a.getQuery(), qs) || !p.backward(a.getKey(), kvs) ||
        !p.backward(a.getValue(), kvs))
      return std::nullopt;
    if (Value sink = a.getSink()) {
      OpOperand &use = a->getOpOperand(a->getNumOperands() - 1);
      if (use.get() != sink || !p.sliceAligned(use, Shard{0, qs.size, qs.starts}, 1))
        return std::nullopt;
    }
    if (!p.record(a.getResult(), qs) || !p.forward(a.getResult(), qs) || !p.closed())
      return std::nullopt;
    p.kvGroup = {a, qs.size / kvs.size};
    return p;
  }

  /// Plans expert parallelism for one routed-experts op (ai.h20
  /// RoutedExperts / RoutedExpertsMxfp4): rank r holds experts [r * E / T,
  /// (r + 1) * E / T) of every expert weight (and scale), sliced along the
  /// expert axis; routing (router, bias) stays whole, so every rank picks
  /// the same experts for its tokens and adds up only its own experts'
  /// contributions, and an all-reduce after the op sums the ranks' parts
  /// (the tokens, and the attention before, are replicated). nullopt when E
  /// is not a multiple of T or a weight is not an initializer.
  std::optional<BlockPlan> planExperts(Operation *op) {
    const unsigned first = 3; // X, Router, Bias, then the expert weights
    auto router = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    if (!router || router.getRank() != 2 || router.isDynamicDim(1))
      return std::nullopt;
    const int64_t e = router.getDimSize(1);
    if (e % ranks != 0)
      return std::nullopt;
    BlockPlan p;
    p.ranks = ranks;
    Shard s{0, e / ranks, {}};
    for (int64_t r = 0; r < ranks; ++r)
      s.starts.push_back(r * s.size);
    for (unsigned i = first; i < op->getNumOperands(); ++i) {
      auto w = dyn_cast<RankedTensorType>(op->getOperand(i).getType());
      if (!isWeight(op->getOperand(i)) || !w || w.getRank() != 3 || w.getDimSize(0) != e)
        return std::nullopt;
      p.weights.push_back({&op->getOpOperand(i), s});
    }
    p.reducers.push_back(op);
    return p;
  }

  /// Plans one MLP block ending in `down`; nullopt when it does not fit.
  std::optional<BlockPlan> planMlp(ox::MatMulOp down) {
    auto y = dyn_cast<RankedTensorType>(down->getOperand(0).getType());
    auto w = dyn_cast<RankedTensorType>(down->getOperand(1).getType());
    if (!y || !w || w.getRank() != 2 || !isWeight(down->getOperand(1)) || y.getRank() < 2 ||
        y.isDynamicDim(y.getRank() - 1) || y.getDimSize(y.getRank() - 1) % ranks != 0)
      return std::nullopt;
    BlockPlan p;
    p.ranks = ranks;
    Shard s = even(y.getDimSize(y.getRank() - 1));
    s.axis = y.getRank() - 1;
    p.terminals.insert(down);
    if (!p.backward(down->getOperand(0), s) || p.elementwise == 0)
      return std::nullopt;
    p.weights.push_back({&down->getOpOperand(1), Shard{0, s.size, s.starts}});
    p.reducers.push_back(down);
    if (!p.closed())
      return std::nullopt;
    return p;
  }

  void apply(BlockPlan &p) {
    OpBuilder b(ctx);
    for (auto &[use, s] : p.weights) {
      auto w = use->get().getDefiningOp<ox::WeightOp>();
      auto full = cast<RankedTensorType>(w.getType());
      b.setInsertionPoint(w);
      auto slice = cast<ox::WeightOp>(b.clone(*w));
      slice.getResult().setType(shardedType(full, s));
      slice->setAttr("h20.shard",
                     b.getDictionaryAttr({b.getNamedAttr("axis", b.getI64IntegerAttr(s.axis)),
                                          b.getNamedAttr("full_shape",
                                                         b.getDenseI64ArrayAttr(full.getShape())),
                                          b.getNamedAttr("starts",
                                                         b.getDenseI64ArrayAttr(s.starts))}));
      use->set(slice.getResult());
      if (w->use_empty())
        w->erase();
    }
    for (auto &[r, dims] : p.reshapes) {
      b.setInsertionPoint(r);
      auto t = RankedTensorType::get({static_cast<int64_t>(dims.size())}, b.getI64Type());
      Value c = ox::ConstantOp::create(b, r.getLoc(), TypeRange{t}, ValueRange{},
                                       DenseIntElementsAttr::get(t, ArrayRef<int64_t>(dims)))
                    ->getResult(0);
      Operation *old = r->getOperand(1).getDefiningOp();
      r->setOperand(1, c);
      if (old && old->use_empty())
        old->erase();
    }
    for (auto &[v, s] : p.values)
      v.setType(shardedType(cast<RankedTensorType>(v.getType()), s));
    if (p.kvGroup)
      p.kvGroup->first.setKvGroup(p.kvGroup->second);
    for (Operation *mm : p.reducers)
      sumOverRanks(b, mm);
  }

};

/// DeepSeek-V4.1's attention split by query rows over `ranks` (the
/// attention is not split by heads: one latent serves every head, and the
/// indexer's top-k needs every head's score): every attn.sparse_attention
/// gets attn::kSplitRowsAttr, and so do the output projection's GEMMs its
/// split reaches (h20::findRowSplitRegion); the last op of the split gets
/// attn::kSplitGatherAttr and an attn.all_reduce after it (its other
/// ranks' rows are zero, so the sum gathers the whole result). An indexer
/// is split too when only split ops read its result (a sparse attention's
/// indices, or an indexer_topk's candidates). Every rank still computes
/// the whole chunk's KV side (latents, compressed entries, indexer keys:
/// each row's cache entries, needed by every later query); the query-side
/// projections compute the rank's rows only (added to `queryGemms`).
/// Returns the number of sparse attention ops split.
int64_t splitAttentionRows(func::FuncOp f, int64_t ranks, int64_t &queryGemms) {
  OpBuilder b(f.getContext());
  auto mark = [&](Operation *op) { op->setAttr(at::kSplitRowsAttr, b.getI64IntegerAttr(ranks)); };
  auto split = [](Operation *op) { return op->hasAttr(at::kSplitRowsAttr); };
  SmallVector<at::SparseAttentionOp> attns;
  f.walk([&](at::SparseAttentionOp a) { attns.push_back(a); });
  for (at::SparseAttentionOp a : attns) {
    // The split reaches through the output projection where it can
    // (h20::findRowSplitRegion): the gather then moves its smaller result.
    h20::RowSplitRegion region = h20::findRowSplitRegion(a);
    mark(a);
    for (Operation *g : region.gemms)
      mark(g);
    Operation *gather = region.end ? region.end : a.getOperation();
    // Two split attentions whose paths meet (their outputs added before
    // one projection) end at the same GEMM: gathered once.
    if (gather->hasAttr(at::kSplitGatherAttr))
      continue;
    gather->setAttr(at::kSplitGatherAttr, b.getUnitAttr());
    sumOverRanks(b, gather);
  }
  // Readers before producers: a candidates op is split when the top-k ops
  // that read it are.
  auto onlySplitReaders = [&](Operation *op) {
    return !op->use_empty() && llvm::all_of(op->getUses(), [&](OpOperand &use) {
      Operation *u = use.getOwner();
      if (!split(u))
        return false;
      if (auto a = dyn_cast<at::SparseAttentionOp>(u))
        return a.getIndices() == use.get();
      if (auto k = dyn_cast<at::IndexerTopKOp>(u))
        return k.getCandidates() == use.get();
      return false;
    });
  };
  f.walk([&](at::IndexerTopKOp k) {
    if (onlySplitReaders(k))
      mark(k);
  });
  f.walk([&](at::IndexerCandidatesOp c) {
    if (onlySplitReaders(c))
      mark(c);
  });
  // The query side: projections whose rows only the split ops read
  // (h20::findQuerySideGemms) compute the rank's rows too.
  if (!attns.empty())
    for (Operation *g : h20::findQuerySideGemms(f.getBody().front())) {
      mark(g);
      ++queryGemms;
    }
  return static_cast<int64_t>(attns.size());
}

/// DeepSeek-V4.1's shared experts split by rows: where a routed-experts
/// op's sum over the ranks (the attn.all_reduce its expert split put after
/// it) is added to a product of weight GEMMs of the replicated tokens
/// (the shared expert, w2(silu(w1 x) * w3 x)), those GEMMs compute only the
/// rank's rows of each chunk (h20::findRowSplitTail: the rows the ranks of
/// a query-row split take), the last one is gathered (`h20.split_gather`:
/// its other rows zero, an attn.all_reduce after it). h20-merge-all-reduces
/// later sums the two shares in one all-reduce. Every rank then computes
/// 1/T of the shared expert instead of all of it (V4.1-Flash at 128K:
/// 371 of a rank's 598 TFLOP of linears were the replicated shared
/// experts). h20-check-row-splits withdraws it with the attention's rows.
/// Returns the number of GEMMs split.
int64_t splitSharedExpertRows(func::FuncOp f, int64_t ranks) {
  OpBuilder b(f.getContext());
  SmallVector<Operation *> ends;
  f.walk([&](at::AllReduceOp sum) {
    Operation *moe = sum.getInput().getDefiningOp();
    if (!moe || !isa<ox::H20RoutedExpertsOp, ox::H20RoutedExpertsMxfp4Op>(moe) || !sum->hasOneUse())
      return;
    auto add = dyn_cast<ox::AddOp>(*sum->user_begin());
    if (!add)
      return;
    Value other = add->getOperand(0) == sum.getResult() ? add->getOperand(1) : add->getOperand(0);
    Operation *end = other.getDefiningOp();
    if (end && other.hasOneUse() && other.getType() == sum.getType() &&
        isa<ox::MatMulOp, ox::H20BlockScaledMatMulOp>(end))
      ends.push_back(end);
  });
  int64_t split = 0;
  for (Operation *end : ends) {
    SmallVector<Operation *> gemms = h20::findRowSplitTail(end);
    if (gemms.empty())
      continue;
    for (Operation *g : gemms)
      g->setAttr(at::kSplitRowsAttr, b.getI64IntegerAttr(ranks));
    end->setAttr(at::kSplitGatherAttr, b.getUnitAttr());
    sumOverRanks(b, end);
    split += static_cast<int64_t>(gemms.size());
  }
  return split;
}

} // namespace

LogicalResult h20::applyTensorParallel(ModuleOp module, int64_t ranks,
                                       TensorParallelSummary *summary, bool attentionRows) {
  if (ranks < 1)
    return module.emitError("h20-tensor-parallel: ranks must be >= 1, got ") << ranks;
  if (ranks == 1)
    return success();
  Splitter split{module.getContext(), ranks};
  int64_t attention = 0, mlp = 0, skipped = 0, experts = 0, expertsSkipped = 0, rows = 0,
          queryGemms = 0, sharedGemms = 0;
  std::string expertsWhy; // the first routed-experts op that did not split
  for (func::FuncOp f : module.getOps<func::FuncOp>()) {
    SmallVector<at::AttentionOp> attns;
    f.walk([&](at::AttentionOp a) { attns.push_back(a); });
    for (at::AttentionOp a : attns) {
      if (auto p = split.planAttention(a)) {
        split.apply(*p);
        ++attention;
      } else {
        ++skipped;
      }
    }
    SmallVector<Operation *> moe;
    f.walk([&](Operation *op) {
      if (isa<ox::H20RoutedExpertsOp, ox::H20RoutedExpertsMxfp4Op>(op))
        moe.push_back(op);
    });
    for (Operation *op : moe) {
      if (auto p = split.planExperts(op)) {
        split.apply(*p);
        ++experts;
        continue;
      }
      if (expertsSkipped++ == 0) {
        auto router = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
        expertsWhy = router && router.getRank() == 2 && !router.isDynamicDim(1)
                         ? std::to_string(router.getDimSize(1)) + " experts"
                         : "experts";
      }
    }
    if (attentionRows)
      rows += splitAttentionRows(f, ranks, queryGemms);
    SmallVector<ox::MatMulOp> matmuls;
    f.walk([&](ox::MatMulOp m) { matmuls.push_back(m); });
    for (ox::MatMulOp m : matmuls) {
      // A product already split (an output projection) is not a down projection.
      if (m->hasAttr(at::kSplitRowsAttr) ||
          llvm::any_of(m->getUsers(), [](Operation *u) { return isa<at::AllReduceOp>(u); }))
        continue;
      if (auto p = split.planMlp(m)) {
        split.apply(*p);
        ++mlp;
      }
    }
    // After the MLP split: a shared expert whose columns split (weights
    // sharded too) keeps that split; one that cannot (V4.1's block-scaled
    // FP8, 2304 / T columns not a multiple of 128) is split by rows.
    if (attentionRows)
      sharedGemms += splitSharedExpertRows(f, ranks);
  }
  if (summary)
    *summary = {attention, mlp, skipped, experts, rows, queryGemms, sharedGemms};
  if (attention + mlp + experts + rows == 0) {
    InFlightDiagnostic d = module.emitError("h20-tensor-parallel: found no attention, MLP or "
                                            "routed-experts block to split over ")
                           << ranks << " ranks (" << skipped
                           << " attention op(s) did not fit: heads not divisible by the ranks, "
                              "Q/K/V not made by a MatMul with a weight, or a per-head mask";
    if (expertsSkipped)
      d << "; " << expertsSkipped << " routed-experts op(s) did not: " << expertsWhy
        << " do not divide over " << ranks << " ranks, or an expert weight is not an initializer";
    return d << ")";
  }
  Builder b(module.getContext());
  module->setAttr(
      "h20.tensor_parallel",
      b.getDictionaryAttr({b.getNamedAttr("ranks", b.getI64IntegerAttr(ranks)),
                           b.getNamedAttr("attention_blocks", b.getI64IntegerAttr(attention)),
                           b.getNamedAttr("mlp_blocks", b.getI64IntegerAttr(mlp)),
                           b.getNamedAttr("expert_blocks", b.getI64IntegerAttr(experts)),
                           b.getNamedAttr("attention_rows", b.getI64IntegerAttr(rows)),
                           b.getNamedAttr("query_gemms", b.getI64IntegerAttr(queryGemms)),
                           b.getNamedAttr("shared_expert_gemms", b.getI64IntegerAttr(sharedGemms)),
                           b.getNamedAttr("replicated_attention", b.getI64IntegerAttr(skipped))}));
  return success();
}

namespace {
struct TensorParallelPass : h20::impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;
  void runOnOperation() override {
    // The recorded plan's choice (h20-choose-parallel-plan), else the option.
    bool rows = attentionRows;
    if (auto plan = getOperation()->getAttrOfType<DictionaryAttr>("h20.parallel"))
      if (auto r = plan.getAs<BoolAttr>("attention_rows"))
        rows = r.getValue();
    if (failed(h20::applyTensorParallel(getOperation(), ranks, nullptr, rows)))
      signalPassFailure();
  }
};
} // namespace
