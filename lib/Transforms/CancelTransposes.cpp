//===- CancelTransposes.cpp - run layout round trips in the source layout -===//
//
// Exporters transpose a tensor to apply one op in another layout and then
// transpose back. DeepSeek-V4.1 rotates the last 64 of 512 channels of its
// [S, 64, 512] queries and attention outputs as [1, 64, S, 512]: two full
// copies of the tensor (Transpose, then Transpose back) to rotate 1/8 of it.
// The ops between such a pair are either layout-transparent (Unsqueeze,
// Squeeze, Split, Concat, Transpose: the same op exists in the source
// layout with remapped axes) or anything else (an "island", computed as
// before on its operands transposed into the layout it saw). This pass
// rewrites the transparent ops in the source layout and transposes only
// the islands' operands and results, when that moves fewer elements than
// the pair did; the pair itself disappears. For V4.1 the islands are the
// 64-channel RoPE pieces: 1/8 of the bytes.
//
// The same idea as ONNX Runtime's transpose optimizer (push transposes
// through layout-agnostic ops until they cancel), restricted to regions
// that end in the inverse transpose, so the pass never adds a transpose
// that does not pay for itself.
//
//===----------------------------------------------------------------------===//
#include "PerTokenOps.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <set>

namespace h20 {
#define GEN_PASS_DEF_CANCELTRANSPOSES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

using Perm = SmallVector<int64_t>;

/// The most ops one region may hold: a round trip is a handful of ops; a
/// walk that reaches this far has left it (e.g. a residual stream).
constexpr size_t kMaxRegionOps = 256;

bool isIdentity(ArrayRef<int64_t> p) {
  for (auto [i, v] : llvm::enumerate(p))
    if (static_cast<int64_t>(i) != v)
      return false;
  return true;
}

Perm inverse(ArrayRef<int64_t> p) {
  Perm inv(p.size());
  for (auto [i, v] : llvm::enumerate(p))
    inv[v] = static_cast<int64_t>(i);
  return inv;
}

/// The type T with Transpose(T, perm) == `t`: T's dim perm[i] is t's dim i.
RankedTensorType sourceType(RankedTensorType t, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape(t.getRank());
  for (auto [i, v] : llvm::enumerate(perm))
    shape[v] = t.getDimSize(static_cast<int64_t>(i));
  return RankedTensorType::get(shape, t.getElementType());
}

/// A Transpose's permutation (default: reversed dims), or nothing.
std::optional<Perm> permOf(ox::TransposeOp t) {
  auto type = dyn_cast<RankedTensorType>(t->getOperand(0).getType());
  if (!type)
    return std::nullopt;
  if (auto p = t.getPerm())
    return Perm(p->begin(), p->end());
  Perm p;
  for (int64_t i = type.getRank() - 1; i >= 0; --i)
    p.push_back(i);
  return p;
}

/// Constant axes of an (Un)squeeze, normalised to [0, rank), sorted.
std::optional<Perm> axesOf(Operation *op, int64_t rank) {
  if (op->getNumOperands() != 2)
    return std::nullopt;
  auto axes = h20::constantInts(op->getOperand(1));
  if (!axes)
    return std::nullopt;
  Perm a;
  for (int64_t x : *axes) {
    int64_t n = x < 0 ? x + rank : x;
    if (n < 0 || n >= rank)
      return std::nullopt;
    a.push_back(n);
  }
  llvm::sort(a);
  if (std::adjacent_find(a.begin(), a.end()) != a.end())
    return std::nullopt; // an axis twice (ONNX forbids it)
  return a;
}

/// What a transparent op becomes in the source layout.
struct SourceOp {
  Perm resultPerm;   ///< layout of every result: result == Transpose(new, perm)
  int64_t axis = -1; ///< Split / Concat: the new axis
  Perm squeezeAxes;  ///< Squeeze: the new axes
};

/// `op` (reading a region value of layout `in` as its data operand) in the
/// source layout, or nothing when it is not layout-transparent there.
std::optional<SourceOp> transparent(Operation *op, ArrayRef<int64_t> in) {
  const int64_t r = static_cast<int64_t>(in.size());
  if (auto t = dyn_cast<ox::TransposeOp>(op)) {
    auto q = permOf(t);
    if (!q || static_cast<int64_t>(q->size()) != r)
      return std::nullopt;
    SourceOp s;
    for (int64_t i = 0; i < r; ++i)
      s.resultPerm.push_back(in[(*q)[i]]);
    return s;
  }
  if (isa<ox::UnsqueezeOp>(op)) {
    auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!out)
      return std::nullopt;
    auto axes = axesOf(op, out.getRank());
    if (!axes)
      return std::nullopt;
    // Same axes in the source layout; source dim in[i] sits at the
    // in[i]-th position that is not a new axis.
    Perm kept;
    for (int64_t o = 0; o < out.getRank(); ++o)
      if (!llvm::is_contained(*axes, o))
        kept.push_back(o);
    SourceOp s;
    s.resultPerm.resize(out.getRank());
    for (int64_t o = 0, i = 0; o < out.getRank(); ++o)
      s.resultPerm[o] = llvm::is_contained(*axes, o) ? o : kept[in[i++]];
    return s;
  }
  if (isa<ox::SqueezeOp>(op)) {
    auto axes = axesOf(op, r);
    if (!axes)
      return std::nullopt;
    SourceOp s;
    for (int64_t a : *axes)
      s.squeezeAxes.push_back(in[a]);
    llvm::sort(s.squeezeAxes);
    for (int64_t i = 0; i < r; ++i) {
      if (llvm::is_contained(*axes, i))
        continue;
      int64_t below = llvm::count_if(s.squeezeAxes, [&](int64_t a) { return a < in[i]; });
      s.resultPerm.push_back(in[i] - below);
    }
    return s;
  }
  if (auto sp = dyn_cast<ox::SplitOp>(op)) {
    int64_t a = sp.getAxis() ? *sp.getAxis() : 0;
    a = a < 0 ? a + r : a;
    if (a < 0 || a >= r)
      return std::nullopt;
    return SourceOp{Perm(in), in[a], {}};
  }
  if (auto c = dyn_cast<ox::ConcatOp>(op)) {
    int64_t a = c.getAxis();
    a = a < 0 ? a + r : a;
    if (a < 0 || a >= r)
      return std::nullopt;
    return SourceOp{Perm(in), in[a], {}};
  }
  return std::nullopt;
}

/// Elements of `t` up to its dynamic dims, which must number `dynamic`
/// (every tensor of a region shares the source's dynamic dims: the
/// transparent ops keep them and never split or concatenate along them).
std::optional<int64_t> staticElems(Type type, int64_t dynamic) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || static_cast<int64_t>(t.getNumDynamicDims()) != dynamic)
    return std::nullopt;
  int64_t n = 1;
  for (int64_t d : t.getShape())
    if (!ShapedType::isDynamic(d))
      n *= d;
  return n;
}

/// A Transpose and the ops between it and its inverse(s).
struct Region {
  ox::TransposeOp start;
  SmallVector<Operation *> ops;                   ///< transparent ops and islands, block order
  llvm::DenseMap<Operation *, SourceOp> rewrites; ///< the transparent ones
  SmallVector<Operation *> ends;                  ///< transposes that cancel to the source layout
};

/// Layouts of the region's values during analysis and rewriting.
using Layouts = llvm::DenseMap<Value, Perm>;

/// Whether `v` is the result of an island of `region` (kept as it is).
bool isIslandResult(Region &region, Value v) {
  Operation *def = v.getDefiningOp();
  return def && def != region.start.getOperation() && !region.rewrites.count(def) &&
         llvm::is_contained(region.ops, def);
}

/// Collects the region that starts at `start`, or nothing when some use
/// leaves it (another block, a terminator, an op with several results
/// that is not a Split, ...) or when it does not pay: the elements the
/// islands' operands and results would move must be fewer than those the
/// start, the ends and the inner transposes move today.
std::optional<Region> collect(ox::TransposeOp start) {
  auto p = permOf(start);
  auto srcType = dyn_cast<RankedTensorType>(start->getOperand(0).getType());
  auto startType = dyn_cast<RankedTensorType>(start->getResult(0).getType());
  if (!p || !srcType || !startType || sourceType(startType, *p) != srcType)
    return std::nullopt;
  Block *block = start->getBlock();
  Region region;
  region.start = start;
  const int64_t dynamic = srcType.getNumDynamicDims();
  int64_t before = 0, after = 0;
  auto count = [&](Value v, int64_t &sum) {
    auto n = staticElems(v.getType(), dynamic);
    if (n)
      sum += *n;
    return n.has_value();
  };
  if (!count(start->getResult(0), before))
    return std::nullopt;
  Layouts layout;
  layout[start->getResult(0)] = *p;
  llvm::DenseSet<Value> materialised; // island results needed in the source layout
  llvm::DenseSet<Value> originals;    // rewritten values islands read as they were
  // Visits one op: nothing when the region fails, else whether the walk
  // goes on past it (false: an end).
  auto visit = [&](Operation *op) -> std::optional<bool> {
    // The region operands, and the layout the op sees.
    SmallVector<Value> inRegion;
    for (Value v : op->getOperands())
      if (layout.count(v))
        inRegion.push_back(v);
    if (inRegion.empty())
      return std::nullopt; // cannot happen: reached through a region value
    const Perm in = layout[inRegion.front()];
    // Island results read by a transparent op or an end go back to the
    // source layout once.
    auto needSource = [&](Value v) -> bool {
      if (isIslandResult(region, v) && materialised.insert(v).second)
        return count(v, after);
      return true;
    };
    if (auto t = dyn_cast<ox::TransposeOp>(op)) {
      auto s = transparent(op, in);
      if (!s)
        return std::nullopt;
      if (!count(op->getResult(0), before) || !needSource(op->getOperand(0)))
        return std::nullopt;
      if (isIdentity(s->resultPerm)) {
        // The source-layout value replaces the end: same type required (a
        // shape refined or relaxed along the chain would not match).
        auto vt = cast<RankedTensorType>(op->getOperand(0).getType());
        if (sourceType(vt, in) != op->getResult(0).getType())
          return std::nullopt;
        region.ends.push_back(op);
        return false;
      }
      region.ops.push_back(op);
      region.rewrites[op] = *s;
      layout[op->getResult(0)] = s->resultPerm;
      return true;
    }
    std::optional<SourceOp> s;
    bool dataOnly = (isa<ox::UnsqueezeOp, ox::SqueezeOp, ox::SplitOp>(op) && inRegion.size() == 1 &&
                     op->getOperand(0) == inRegion.front());
    if (dataOnly || isa<ox::ConcatOp>(op)) {
      bool samePerm = llvm::all_of(inRegion, [&](Value v) { return layout[v] == in; });
      if (samePerm)
        s = transparent(op, in);
    }
    // Results of unknown rank cannot be given a source-layout type.
    if (s && !llvm::all_of(op->getResultTypes(), [](Type t) { return isa<RankedTensorType>(t); }))
      return std::nullopt;
    if (s) {
      for (Value v : op->getOperands()) {
        if (!layout.count(v)) {
          // A Concat input from outside: transposed into the source layout.
          if (isa<ox::ConcatOp>(op) && !count(v, after))
            return std::nullopt;
        } else if (!needSource(v)) {
          return std::nullopt;
        }
      }
      region.ops.push_back(op);
      region.rewrites[op] = *s;
      for (Value r : op->getResults())
        layout[r] = s->resultPerm;
      return true;
    }
    // An island: computed as before, on its region operands transposed
    // back into the layouts they have today.
    if (op->getNumResults() != 1)
      return std::nullopt;
    auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!rt || rt.getRank() != static_cast<int64_t>(in.size()))
      return std::nullopt;
    for (Value v : inRegion) {
      if (!isIslandResult(region, v) && originals.insert(v).second && !count(v, after))
        return std::nullopt;
    }
    region.ops.push_back(op);
    layout[op->getResult(0)] = in;
    return true;
  };
  // The ops reachable from the start through uses, visited in block order
  // (an op's region operands come from earlier ops, so they have their
  // layouts by then); the walk stops at the ends.
  auto earlier = [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); };
  std::set<Operation *, decltype(earlier)> pending(earlier);
  auto enqueueUsers = [&](Operation *op) {
    for (Operation *user : op->getUsers()) {
      if (user->getBlock() != block || user->hasTrait<OpTrait::IsTerminator>() ||
          user->getNumRegions() != 0)
        return false;
      pending.insert(user);
    }
    return true;
  };
  if (!enqueueUsers(start))
    return std::nullopt;
  for (size_t visited = 0; !pending.empty(); ++visited) {
    Operation *op = *pending.begin();
    pending.erase(pending.begin());
    auto goOn = visit(op);
    if (!goOn || visited >= kMaxRegionOps || (*goOn && !enqueueUsers(op)))
      return std::nullopt;
  }
  if (region.ends.empty() || after >= before)
    return std::nullopt;
  return region;
}

/// Rewrites `region`: transparent ops in the source layout, islands on
/// transposes of their operands, ends replaced by source-layout values.
void rewrite(Region &region) {
  Operation *start = region.start;
  OpBuilder b(start);
  // v == Transpose(src[v], layout[v]) for every region value v; orig[v]:
  // v itself after the rewrite (a transpose of src[v] unless v is an
  // island's result, which stays).
  llvm::DenseMap<Value, Value> src, orig;
  Layouts layout;
  src[start->getResult(0)] = start->getOperand(0);
  layout[start->getResult(0)] = *permOf(region.start);
  auto transpose = [&](Location loc, Value x, ArrayRef<int64_t> perm, Type type) {
    return ox::TransposeOp::create(b, loc, TypeRange{type}, ValueRange{x},
                                   b.getDenseI64ArrayAttr(perm))
        ->getResult(0);
  };
  // The source form of an island's result, made once right after it.
  auto sourceOf = [&](Value v) -> Value {
    auto it = src.find(v);
    if (it != src.end())
      return it->second;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfterValue(v);
    const Perm &l = layout[v];
    Value s =
        transpose(v.getLoc(), v, inverse(l), sourceType(cast<RankedTensorType>(v.getType()), l));
    return src[v] = s;
  };
  // The original layout of a rewritten value, made once right after its
  // source form.
  auto originalOf = [&](Value v) -> Value {
    if (isIslandResult(region, v))
      return v;
    auto it = orig.find(v);
    if (it != orig.end())
      return it->second;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfterValue(src[v]);
    return orig[v] = transpose(v.getLoc(), src[v], layout[v], v.getType());
  };
  for (Operation *op : region.ops) {
    b.setInsertionPoint(op);
    auto rw = region.rewrites.find(op);
    if (rw == region.rewrites.end()) {
      // An island reads its region operands in their original layouts; its
      // result takes the layout of the first of them.
      std::optional<Perm> in;
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (!layout.count(v))
          continue;
        if (!in)
          in = layout[v];
        use.set(originalOf(v));
      }
      layout[op->getResult(0)] = *in;
      continue;
    }
    const SourceOp &s = rw->second;
    if (isa<ox::TransposeOp>(op)) {
      // An inner transpose composes into the layout; no op.
      src[op->getResult(0)] = sourceOf(op->getOperand(0));
      layout[op->getResult(0)] = s.resultPerm;
      continue;
    }
    IRMapping map;
    for (Value v : op->getOperands()) {
      if (layout.count(v))
        map.map(v, sourceOf(v));
      else if (isa<ox::ConcatOp>(op)) // an input from outside the region
        map.map(v, transpose(op->getLoc(), v, inverse(s.resultPerm),
                             sourceType(cast<RankedTensorType>(v.getType()), s.resultPerm)));
    }
    if (isa<ox::SqueezeOp>(op)) {
      auto t = RankedTensorType::get({static_cast<int64_t>(s.squeezeAxes.size())}, b.getI64Type());
      auto axes = DenseIntElementsAttr::get(t, ArrayRef<int64_t>(s.squeezeAxes));
      map.map(
          op->getOperand(1),
          ox::ConstantOp::create(b, op->getLoc(), TypeRange{t}, ValueRange{}, axes)->getResult(0));
    }
    Operation *n = b.clone(*op, map);
    for (auto [old, res] : llvm::zip(op->getResults(), n->getResults())) {
      res.setType(sourceType(cast<RankedTensorType>(old.getType()), s.resultPerm));
      src[old] = res;
      layout[old] = s.resultPerm;
    }
    auto si64 = b.getIntegerType(64, /*isSigned=*/true);
    if (auto sp = dyn_cast<ox::SplitOp>(n))
      sp.setAxisAttr(b.getIntegerAttr(si64, s.axis));
    if (auto c = dyn_cast<ox::ConcatOp>(n))
      c.setAxisAttr(b.getIntegerAttr(si64, s.axis));
  }
  for (Operation *end : region.ends)
    end->getResult(0).replaceAllUsesWith(sourceOf(end->getOperand(0)));
  // The replaced ops, latest first.
  SmallVector<Operation *> dead(region.ends);
  for (Operation *op : region.ops)
    if (region.rewrites.count(op))
      dead.push_back(op);
  dead.push_back(start);
  llvm::sort(dead, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
}

struct CancelTransposesPass : h20::impl::CancelTransposesBase<CancelTransposesPass> {
  void runOnOperation() override {
    SmallVector<ox::TransposeOp> starts;
    getOperation().walk([&](ox::TransposeOp t) { starts.push_back(t); });
    llvm::DenseSet<Operation *> erased;
    for (ox::TransposeOp t : starts) {
      if (erased.contains(t))
        continue;
      auto region = collect(t);
      if (!region)
        continue;
      for (Operation *end : region->ends)
        erased.insert(end);
      for (Operation *op : region->ops)
        if (region->rewrites.count(op))
          erased.insert(op);
      erased.insert(t);
      rewrite(*region);
    }
  }
};

} // namespace
