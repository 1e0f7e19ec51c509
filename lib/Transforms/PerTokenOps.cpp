//===- PerTokenOps.cpp - which ops a chunked prefill may split ------------===//
//
// See PerTokenOps.h. The rule rests on one fact of a chunked graph: its only
// input is ids [1, S] with S dynamic, so every dynamic dim is a token axis.
//
//===----------------------------------------------------------------------===//
#include "PerTokenOps.h"
#include "LastPositionSlice.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

#include <limits>

using namespace mlir;
namespace ox = h20::onnx;

namespace {

RankedTensorType rankedOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// Whether axis `axis` (negative: from the end) of `v` has a static size.
bool isStaticAxis(Value v, int64_t axis) {
  auto t = rankedOf(v);
  if (!t)
    return false;
  int64_t r = t.getRank();
  if (axis < 0)
    axis += r;
  return axis >= 0 && axis < r && !t.isDynamicDim(axis);
}

/// The token axis of `t`: its only dynamic dim, or nothing (none, several).
std::optional<int64_t> tokenAxis(RankedTensorType t) {
  if (!t || llvm::count_if(t.getShape(), ShapedType::isDynamic) != 1)
    return std::nullopt;
  return llvm::find_if(t.getShape(), ShapedType::isDynamic) - t.getShape().begin();
}

int64_t dynamicDims(Value v) {
  auto t = rankedOf(v);
  if (!t)
    return std::numeric_limits<int64_t>::max();
  return llvm::count_if(t.getShape(), ShapedType::isDynamic);
}

/// The single value of a constant one-element integer tensor, or nothing.
std::optional<int64_t> constantInt(Value v) {
  auto vals = h20::constantInts(v);
  if (!vals || vals->size() != 1)
    return std::nullopt;
  return (*vals)[0];
}

/// k when `slice` is x[0 : (n / k) * k] along x's token axis, n being x's
/// length there as Shape reads it: the rows of x's whole groups of k
/// tokens (DeepSeek-V4.1's compressors drop a partial last group so).
std::optional<int64_t> wholeGroupsSlice(ox::SliceOp slice) {
  Value x = slice->getOperand(0);
  std::optional<int64_t> token = tokenAxis(rankedOf(x));
  if (!token || slice->getNumOperands() < 3)
    return std::nullopt;
  std::optional<int64_t> axis =
      rankedOf(x).getRank() == 1 ? std::optional<int64_t>(0) : std::nullopt;
  if (slice->getNumOperands() > 3 && !isa<ox::NoValueOp>(slice->getOperand(3).getDefiningOp()))
    axis = constantInt(slice->getOperand(3));
  if (axis && *axis < 0)
    *axis += rankedOf(x).getRank();
  if (!axis || *axis != *token || constantInt(slice->getOperand(1)) != 0)
    return std::nullopt;
  if (slice->getNumOperands() > 4 && !isa<ox::NoValueOp>(slice->getOperand(4).getDefiningOp()) &&
      constantInt(slice->getOperand(4)) != 1)
    return std::nullopt;
  // ends = Mul(Div(Shape(x)[token], k), k), the product in either order.
  auto mul = slice->getOperand(2).getDefiningOp<ox::MulOp>();
  if (!mul)
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto div = mul->getOperand(side).getDefiningOp<ox::DivOp>();
    std::optional<int64_t> k = constantInt(mul->getOperand(1 - side));
    if (!div || !k || *k <= 0 || constantInt(div->getOperand(1)) != *k)
      continue;
    auto shape = div->getOperand(0).getDefiningOp<ox::ShapeOp>();
    if (shape && shape->getOperand(0) == x && shape.getStart().value_or(0) == *token &&
        shape.getEnd() && *shape.getEnd() == *token + 1)
      return k;
  }
  return std::nullopt;
}

/// Whether `v`, a position expression, is <= the position at every
/// position (`upper`) or >= 0 (`!upper`), for all positions >= 0.
bool boundedByPosition(Value v, bool upper) {
  if (isa_and_nonnull<ox::RangeOp>(v.getDefiningOp()))
    return true; // pos itself: pos <= pos, pos >= 0
  if (std::optional<int64_t> c = constantInt(v))
    return upper ? *c <= 0 : *c >= 0;
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return false;
  Value a = op->getOperand(0), b = op->getOperand(1);
  std::optional<int64_t> cb = constantInt(b);
  if (isa<ox::SubOp>(op))
    return upper ? cb && *cb >= 0 && boundedByPosition(a, true) : false;
  if (isa<ox::AddOp>(op))
    return upper ? cb && *cb <= 0 && boundedByPosition(a, true)
                 : boundedByPosition(a, false) && boundedByPosition(b, false);
  if (isa<ox::MaxOp>(op))
    return upper ? boundedByPosition(a, true) && boundedByPosition(b, true)
                 : boundedByPosition(a, false) || boundedByPosition(b, false);
  if (isa<ox::MinOp>(op))
    return upper ? boundedByPosition(a, true) || boundedByPosition(b, true)
                 : boundedByPosition(a, false) && boundedByPosition(b, false);
  return false;
}

/// The operands whose values (not only sizes) reach `op`'s results: a
/// shape, bound or axes operand only sizes them.
SmallVector<Value> dataOperands(Operation *op) {
  if (isa<ox::ReshapeOp, ox::ExpandOp, ox::TileOp, ox::SqueezeOp, ox::UnsqueezeOp, ox::SplitOp,
          ox::SliceOp, ox::TopKOp, ox::CumSumOp, ox::ReduceMeanOp, ox::ReduceSumOp,
          ox::ReduceMaxOp>(op))
    return {op->getOperand(0)};
  if (isa<ox::ConstantOfShapeOp, ox::ShapeOp, h20::kv::AllocOp, tensor::EmptyOp, tensor::DimOp>(
          op))
    return {};
  // The cache and the written value; the offset or length only places them.
  if (auto w = dyn_cast<h20::kv::WriteOp>(op))
    return {w.getCache(), w.getValue()};
  if (auto v = dyn_cast<h20::kv::ViewOp>(op))
    return {v.getCache()};
  // RoPE positions are offset by the chunk's start: the rotated rows are
  // activations, not sizes.
  if (auto r = dyn_cast<h20::attn::RopeApplyOp>(op))
    return {r.getInput(), r.getCoarse(), r.getFine()};
  return llvm::to_vector(op->getOperands());
}

} // namespace

bool h20::isOnnxElementwise(Operation *op) {
  return isa<ox::AddOp, ox::SubOp, ox::MulOp, ox::DivOp, ox::PowOp, ox::AndOp, ox::OrOp,
             ox::EqualOp, ox::LessOp, ox::LessOrEqualOp, ox::GreaterOp, ox::GreaterOrEqualOp,
             ox::MaxOp, ox::MinOp, ox::SumOp, ox::NegOp, ox::NotOp, ox::AbsOp, ox::SqrtOp,
             ox::ReciprocalOp, ox::ExpOp, ox::LogOp, ox::SinOp, ox::CosOp, ox::TanhOp, ox::ErfOp,
             ox::GeluOp, ox::SigmoidOp, ox::SoftplusOp, ox::ReluOp, ox::IsNaNOp, ox::IdentityOp,
             ox::RoundOp, ox::FloorOp, ox::CeilOp, ox::SignOp, ox::ClipOp, ox::ModOp,
             ox::BitwiseAndOp, ox::BitwiseOrOp, ox::BitwiseXorOp, ox::BitwiseNotOp, ox::WhereOp,
             ox::CastOp>(op);
}

std::optional<SmallVector<int64_t>> h20::constantInts(Value v) {
  auto c = v ? v.getDefiningOp<ox::ConstantOp>() : nullptr;
  if (!c)
    return std::nullopt;
  auto attr = dyn_cast<DenseIntElementsAttr>(c.getValue());
  if (!attr)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &x : attr.getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

namespace h20 {

std::optional<int64_t> PerTokenOps::groupsSlice(Operation *op) {
  auto slice = dyn_cast_or_null<ox::SliceOp>(op);
  return slice ? wholeGroupsSlice(slice) : std::nullopt;
}

bool PerTokenOps::alignedToGroups(Value v, int64_t k) const {
  for (int depth = 0; depth < 16; ++depth) {
    Operation *op = v.getDefiningOp();
    if (!op)
      return false;
    if (std::optional<int64_t> g = groupsSlice(op))
      return *g % k == 0;
    if (!isa<ox::MatMulOp, ox::H20BlockScaledMatMulOp>(op) && !isOnnxElementwise(op))
      return false;
    SmallVector<Value> rows;
    for (Value o : dataOperands(op))
      if (dependsOnPrompt(o) && !fromSizes.contains(o))
        rows.push_back(o);
    if (rows.size() != 1 || tokensPerRow(rows[0]) != 1)
      return false;
    v = rows[0];
  }
  return false;
}

PerTokenOps::PerTokenOps(func::FuncOp func, Value ids, int64_t chunk, bool carryGroups)
    : func(func), ids(ids), chunk(chunk), carryGroups(carryGroups) {
  fromPrompt.insert(ids);
  func.walk([&](Operation *op) {
    if (llvm::none_of(op->getOperands(), [&](Value v) { return fromPrompt.contains(v); }))
      return;
    for (Value r : op->getResults())
      fromPrompt.insert(r);
    // Sizes made into data: Shape's and Range's results, and what is
    // computed from them alone (positions 0 .. S-1, a mask's index grids).
    // A value that also reads activations is an activation: the op mixing
    // the two is refused (whyNotSizes), and what it feeds is judged as
    // activations, so that every later op that mixes tokens is reported too.
    SmallVector<Value> data = dataOperands(op);
    bool sizes = isa<ox::ShapeOp, ox::RangeOp, tensor::DimOp, tensor::EmptyOp>(op) ||
                 (llvm::any_of(data, [&](Value v) { return fromSizes.contains(v); }) &&
                  llvm::none_of(data, [&](Value v) {
                    return fromPrompt.contains(v) && !fromSizes.contains(v);
                  }));
    if (sizes)
      for (Value r : op->getResults())
        fromSizes.insert(r);
    else
      for (Value r : op->getResults())
        rowTokens[r] = rowsOf(op);
  });
  rowTokens[ids] = 1;
}

/// Tokens per row of `op`'s results (see tokensPerRow): those of its
/// activation operands (an attention's and an indexer's: their queries'),
/// times k after a Reshape that puts k rows in one; -1 when the operands
/// disagree.
int64_t PerTokenOps::rowsOf(Operation *op) const {
  if (isa<h20::attn::SparseAttentionOp, h20::attn::IndexerTopKOp, h20::attn::IndexerCandidatesOp>(
          op))
    return rowTokens.lookup(op->getOperand(0));
  int64_t rows = 0;
  for (Value v : dataOperands(op)) {
    if (v == ids) {
      rows = rows == 0 || rows == 1 ? 1 : -1;
      continue;
    }
    if (!dependsOnPrompt(v) || fromSizes.contains(v))
      continue;
    int64_t r = rowTokens.lookup(v);
    rows = rows == 0 ? r : rows == r ? rows : -1;
  }
  if (rows > 0 && isa<ox::ReshapeOp>(op))
    if (std::optional<int64_t> k = groupedRows(op))
      rows *= *k;
  return rows;
}

bool PerTokenOps::isPositionExpr(Value v) const {
  if (auto it = positionExprs.find(v); it != positionExprs.end())
    return it->second;
  positionExprs[v] = false; // no cycles in SSA; guards re-entry
  bool yes = false;
  auto t = rankedOf(v);
  Operation *op = v.getDefiningOp();
  if (auto r = dyn_cast_or_null<ox::RangeOp>(op)) {
    // Range(0, n, 1) with n the length of the token ids (Shape of the ids
    // or of their reshape to [S], squeezed to a scalar).
    Value n = r->getOperand(1);
    if (auto sq = n.getDefiningOp<ox::SqueezeOp>())
      n = sq->getOperand(0);
    auto shape = n.getDefiningOp<ox::ShapeOp>();
    Value x = shape ? shape->getOperand(0) : Value();
    while (x && x != ids && isa_and_nonnull<ox::ReshapeOp, ox::SqueezeOp>(x.getDefiningOp()))
      x = x.getDefiningOp()->getOperand(0);
    std::optional<int64_t> token = shape ? tokenAxis(rankedOf(shape->getOperand(0))) : std::nullopt;
    // Its length is the token count only when every other dim is 1 (ids
    // [1, S] reshaped to [S]; not [S / 2, 2]).
    bool tokenLength = shape && llvm::all_of(rankedOf(shape->getOperand(0)).getShape(),
                                             [](int64_t d) { return d == 1 || d < 0; });
    yes = x == ids && token && tokenLength && shape.getStart().value_or(0) == *token &&
          shape.getEnd() && *shape.getEnd() == *token + 1 && constantInt(r->getOperand(0)) == 0 &&
          constantInt(r->getOperand(2)) == 1;
  } else if (op && isOnnxElementwise(op) && t && dynamicDims(v) == 1 && t.getRank() == 1) {
    yes = llvm::any_of(op->getOperands(), [&](Value o) { return dependsOnPrompt(o); }) &&
          llvm::all_of(op->getOperands(),
                       [&](Value o) { return !dependsOnPrompt(o) || isPositionExpr(o); });
  }
  positionExprs[v] = yes;
  return yes;
}

bool PerTokenOps::isLookbackGather(Operation *op) const {
  auto g = dyn_cast<ox::GatherOp>(op);
  if (!g || g.getAxis().value_or(0) != 0)
    return false;
  Value data = op->getOperand(0), idx = op->getOperand(1);
  auto dt = rankedOf(data), it = rankedOf(idx);
  // The history is a KV cache: of an element type one holds.
  return dt && it && h20::kv::isCacheElementType(dt.getElementType()) && dt.getRank() <= 2 &&
         dt.isDynamicDim(0) && dynamicDims(data) == 1 && tokensPerRow(data) == 1 &&
         dependsOnPrompt(data) && !fromSizes.contains(data) && it.getRank() == 1 &&
         isPositionExpr(idx) && boundedByPosition(idx, true) && boundedByPosition(idx, false);
}

SmallVector<unsigned> PerTokenOps::positionOperands(Operation *op) const {
  if (isLookbackGather(op))
    return {1};
  SmallVector<unsigned> out;
  if (!isOnnxElementwise(op) || llvm::none_of(op->getOperands(), [&](Value v) {
        return dependsOnPrompt(v) && !fromSizes.contains(v);
      }))
    return out;
  for (OpOperand &o : op->getOpOperands())
    if (fromSizes.contains(o.get()) && isPositionExpr(o.get()))
      out.push_back(o.getOperandNumber());
  return out;
}

/// In a chunk, S is the chunk's length and Range(0, S) restarts at 0: such
/// values may size things, and may be RoPE positions (chunked prefill adds
/// the chunk's start to those), but never combine with activations.
std::optional<std::string> PerTokenOps::whyNotSizes(Operation *op) const {
  if (isa<h20::attn::RopeApplyOp, h20::attn::RopeTableOp>(op) || op == lastPositionSlice(func))
    return std::nullopt;
  SmallVector<Value> data = dataOperands(op);
  bool sizes = llvm::any_of(data, [&](Value v) { return fromSizes.contains(v); });
  bool activations = llvm::any_of(data, [&](Value v) {
    return dependsOnPrompt(v) && !fromSizes.contains(v);
  });
  // Positions evaluated at the chunk's global positions (see the class):
  // an elementwise op's [S] positions must broadcast onto its result's
  // token axis (its last).
  auto onTokenAxis = [&]() {
    auto rt = rankedOf(op->getResult(0));
    std::optional<int64_t> axis = tokenAxis(rt);
    return axis && *axis == rt.getRank() - 1;
  };
  if (sizes && activations &&
      (isLookbackGather(op) || (isOnnxElementwise(op) && op->getNumResults() == 1 &&
                                onTokenAxis() && llvm::all_of(data, [&](Value v) {
                                  return !fromSizes.contains(v) ||
                                         (isPositionExpr(v) && rankedOf(v).getRank() == 1);
                                }))))
    return std::nullopt;
  if (sizes && activations)
    return std::string("it combines activations with values computed from the prompt's length "
                       "(positions from Range/Shape restart in every chunk; only RoPE "
                       "positions are offset by the chunk's start)");
  return std::nullopt;
}

std::optional<std::string> PerTokenOps::whyNotGroups(int64_t k, StringRef what) const {
  if (k >= 1 && chunk > 0 && chunk % k == 0)
    return std::nullopt;
  // Carried partial groups: the compressor reads its last k - 1 rows
  // before the chunk from a ring of at most a chunk's rows.
  if (carryGroups && k >= 1 && chunk >= k - 1)
    return std::nullopt;
  if (carryGroups && k >= 1)
    return (what + " of " + std::to_string(k) + " tokens needs chunks of at least " +
            std::to_string(k - 1) + " tokens (a partial group's rows are carried into the next "
            "chunk; the chunk is " + std::to_string(chunk) + ")")
        .str();
  return (what + " of " + std::to_string(k) + " tokens needs a chunk size that is a multiple of " +
          std::to_string(k) + (chunk > 0 ? " (the chunk is " + std::to_string(chunk) + ")" : ""))
      .str();
}

/// DeepSeek-V4.1's ops over compressed entries (one per group of `ratio`
/// tokens): chunked prefill carries the entries (and the window latents)
/// of earlier chunks in caches and gives the ops the chunk's start, so
/// they are per token when their query-side operands are rows of the
/// prompt, the entries are rows of groups (the token axis first), and the
/// chunk holds whole groups. A sparse attention's ratio is its indices'
/// indexer's.
std::optional<std::string> PerTokenOps::whyNotCompressed(Operation *op) const {
  // Rows of `tokens` tokens each (1: a row per token).
  auto rows = [&](Value v, int64_t tokens = 1) {
    auto t = rankedOf(v);
    return v && dependsOnPrompt(v) && t && t.getRank() >= 1 && t.isDynamicDim(0) &&
           dynamicDims(v) == 1 && tokensPerRow(v) == tokens;
  };
  // Picks per query [S, K]: K = min(topk, T) follows the entries a chunk
  // sees, but the valid picks (visible entries only) do not; the slots
  // past them hold the "none" sentinel, which readers ignore.
  auto picks = [&](Value v) {
    auto t = rankedOf(v);
    return v && dependsOnPrompt(v) && t && t.getRank() == 2 && t.isDynamicDim(0) &&
           tokensPerRow(v) == 1;
  };
  auto fixed = [&](Value v) { return !v || !dependsOnPrompt(v); };
  if (auto sa = dyn_cast<h20::attn::SparseAttentionOp>(op)) {
    if (sa.getStart() || !fixed(sa.getSink()) || !rows(sa.getQuery()) || !rows(sa.getLatent()))
      return std::string("a sparse attention whose query and latent are not both rows of the "
                         "prompt");
    if (!sa.getCompressed())
      return std::nullopt;
    Operation *picker = sa.getIndices().getDefiningOp();
    auto ratio = picker ? picker->getAttrOfType<IntegerAttr>("ratio") : IntegerAttr();
    if (!isa_and_nonnull<h20::attn::IndexerTopKOp>(picker) || !ratio)
      return std::string("a sparse attention whose indices do not come from an indexer (the "
                         "compressed entries' ratio is not known)");
    if (!rows(sa.getCompressed(), ratio.getInt()) || !picks(sa.getIndices()))
      return std::string("a sparse attention whose compressed entries are not rows of groups of ") +
             std::to_string(ratio.getInt()) +
             " tokens (its indexer's ratio) or whose indices are "
             "not rows of the prompt";
    return whyNotGroups(ratio.getInt(), "a sparse attention over compressed entries");
  }
  Value query = op->getOperand(0), keys = op->getOperand(1), weights = op->getOperand(2);
  Value candidates;
  int64_t ratio = op->getAttrOfType<IntegerAttr>("ratio").getInt();
  // Candidate blocks of block_size entries: NB = ceil(T / block_size) is
  // linear in the chunk index only when a chunk adds whole blocks.
  int64_t block = 1;
  if (auto bs = op->getAttrOfType<IntegerAttr>("block_size"))
    block = std::max<int64_t>(bs.getInt(), 1);
  if (auto k = dyn_cast<h20::attn::IndexerTopKOp>(op)) {
    if (k.getStart())
      return std::string("an indexer that already has a start");
    candidates = k.getCandidates();
  } else if (cast<h20::attn::IndexerCandidatesOp>(op).getStart()) {
    return std::string("an indexer that already has a start");
  }
  if (!rows(query) || !rows(keys, ratio) || !rows(weights) || (candidates && !picks(candidates)))
    return std::string("an indexer whose queries or weights are not rows of the prompt, or whose "
                       "keys are not rows of groups of ") +
           std::to_string(ratio) + " tokens (its ratio)";
  return whyNotGroups(ratio * block, block > 1 ? "an indexer over candidate blocks of entries"
                                               : "an indexer over compressed entries");
}

/// Ops that act along named axes: per token when every such axis is static.
std::optional<std::string> PerTokenOps::whyNotAxisOp(Operation *op) const {
  auto refuse = [&](StringRef what) {
    return std::optional<std::string>((what + " along the token axis mixes tokens").str());
  };
  Value x = op->getOperand(0);
  auto xt = rankedOf(x);
  if (!xt)
    return std::string("an unranked operand");
  int64_t r = xt.getRank();
  if (auto sm = dyn_cast<ox::SoftmaxOp>(op))
    return isStaticAxis(x, sm.getAxis().value_or(-1)) ? std::nullopt : refuse("a Softmax");
  if (auto c = dyn_cast<ox::ConcatOp>(op))
    return isStaticAxis(op->getResult(0), c.getAxis()) ? std::nullopt : refuse("a Concat");
  if (auto s = dyn_cast<ox::SplitOp>(op))
    return isStaticAxis(x, s.getAxis().value_or(0)) ? std::nullopt : refuse("a Split");
  if (isa<ox::CumSumOp>(op)) {
    auto axis = constantInts(op->getOperand(1));
    return axis && axis->size() == 1 && isStaticAxis(x, (*axis)[0]) ? std::nullopt
                                                                     : refuse("a CumSum");
  }
  if (auto k = dyn_cast<ox::TopKOp>(op))
    return isStaticAxis(x, k.getAxis().value_or(-1)) ? std::nullopt : refuse("a TopK");
  if (isa<ox::ReduceMeanOp, ox::ReduceSumOp, ox::ReduceMaxOp>(op)) {
    std::optional<SmallVector<int64_t>> axes;
    if (op->getNumOperands() > 1 && !isa<ox::NoValueOp>(op->getOperand(1).getDefiningOp()))
      axes = constantInts(op->getOperand(1));
    else if (auto a = op->getAttrOfType<DenseI64ArrayAttr>("axes"))
      axes = SmallVector<int64_t>(a.asArrayRef());
    else
      axes = SmallVector<int64_t>();
    if (!axes)
      return std::string("a reduction over axes that are not constant");
    // No axes: every axis (or none, with noop_with_empty_axes).
    if (axes->empty()) {
      auto noop = op->getAttrOfType<IntegerAttr>("noop_with_empty_axes");
      if (noop && noop.getInt() != 0)
        return std::nullopt;
      for (int64_t a = 0; a < r; ++a)
        axes->push_back(a);
    }
    for (int64_t a : *axes)
      if (!isStaticAxis(x, a))
        return refuse("a reduction");
    return std::nullopt;
  }
  if (auto g = dyn_cast<ox::GatherOp>(op)) {
    // Rows of a prompt-independent table picked per token (an embedding,
    // wherever its ids come from), or fixed entries of a static axis.
    if (!dependsOnPrompt(op->getOperand(0)))
      return std::nullopt;
    if (!dependsOnPrompt(op->getOperand(1)) && isStaticAxis(x, g.getAxis().value_or(0)))
      return std::nullopt;
    // Earlier tokens' rows: chunked prefill reads them from a history.
    if (isLookbackGather(op))
      return std::nullopt;
    return std::string("a Gather that is neither a table lookup per token nor a pick along a "
                       "static axis");
  }
  if (isa<ox::GatherElementsOp, ox::ScatterElementsOp>(op)) {
    // Elements picked (or placed) along a static axis, each token's row
    // from its own row of indices (and updates): per token when every
    // operand has its one token axis at the same position (a routed
    // experts' body, imported where the op has no lowering: the top-k
    // scores' gather and the scatter of each token's picks).
    auto axisAttr = op->getAttrOfType<IntegerAttr>("axis"); // default 0 in both
    int64_t axis = axisAttr ? axisAttr.getInt() : 0;
    std::optional<int64_t> token = tokenAxis(xt);
    bool rows = token && llvm::all_of(op->getOperands(), [&](Value v) {
                  return tokenAxis(rankedOf(v)) == token;
                });
    if (!isStaticAxis(x, axis))
      return refuse(isa<ox::GatherElementsOp>(op) ? "a GatherElements" : "a ScatterElements");
    if (!rows)
      return std::string("a ") +
             (isa<ox::GatherElementsOp>(op) ? "GatherElements" : "ScatterElements") +
             " whose operands are not rows of the same tokens";
    return std::nullopt;
  }
  if (isa<ox::SliceOp>(op)) {
    // The only slice along the tokens allowed is h20-logits-last's, which
    // the pass rewrites to the chunk's last real row.
    if (op == h20::lastPositionSlice(func))
      return std::nullopt;
    std::optional<SmallVector<int64_t>> axes;
    if (op->getNumOperands() > 3 && !isa<ox::NoValueOp>(op->getOperand(3).getDefiningOp()))
      axes = constantInts(op->getOperand(3));
    else
      axes = llvm::to_vector(llvm::seq<int64_t>(0, r));
    if (std::optional<int64_t> k = wholeGroupsSlice(cast<ox::SliceOp>(op)))
      return whyNotGroups(*k * std::max<int64_t>(tokensPerRow(x), 1), "a Slice to whole groups");
    auto starts = constantInts(op->getOperand(1)), ends = constantInts(op->getOperand(2));
    std::optional<SmallVector<int64_t>> steps;
    if (op->getNumOperands() > 4 && !isa<ox::NoValueOp>(op->getOperand(4).getDefiningOp()))
      steps = constantInts(op->getOperand(4));
    if (!axes || !starts || !ends || starts->size() != axes->size() ||
        ends->size() != axes->size() || (steps && steps->size() != axes->size()))
      return std::string("a Slice whose axes or bounds are not constant");
    for (size_t i = 0; i < axes->size(); ++i) {
      if (isStaticAxis(x, (*axes)[i]))
        continue;
      // A dynamic axis kept whole (0 .. INT_MAX, step 1) is no cut.
      bool whole = (*starts)[i] == 0 && (*ends)[i] >= std::numeric_limits<int32_t>::max() &&
                   (!steps || (*steps)[i] == 1);
      if (!whole)
        return refuse("a Slice");
    }
    return std::nullopt;
  }
  return std::string("'") + op->getName().getStringRef().str() + "' is not known to act per token";
}

/// Elements per token before and after `t`'s token axis (products of the
/// static dims on each side), or nothing when `t` has no single token axis.
static std::optional<std::pair<int64_t, int64_t>> tokenSplit(RankedTensorType t) {
  std::optional<int64_t> axis = tokenAxis(t);
  if (!axis)
    return std::nullopt;
  int64_t before = 1, after = 1;
  for (int64_t k = 0; k < t.getRank(); ++k)
    if (k != *axis)
      (k < *axis ? before : after) *= t.getDimSize(k);
  return std::make_pair(before, after);
}

/// k when a Reshape puts k input rows in one output row along the token
/// axis ([S, 40] -> [S/4, 4, 40]: k = 4).
std::optional<int64_t> PerTokenOps::groupedRows(Operation *op) const {
  auto in = tokenSplit(rankedOf(op->getOperand(0))), out = tokenSplit(rankedOf(op->getResult(0)));
  if (!in || !out || in->first != out->first || in->second <= 0 || out->second <= in->second ||
      out->second % in->second)
    return std::nullopt;
  return out->second / in->second;
}

/// A Reshape keeps tokens apart when each output row along the token axis
/// holds elements of one token only: with the static dims before the token
/// axis equal in number of elements, the elements per output row (the
/// static dims after the token axis) must divide the elements per token.
/// [S, 4096] -> [S, 32, 128] and [S, 8, 64] -> [8S, 64] do. [S, 40] ->
/// [S/4, 4, 40] (DeepSeek-V4.1's compressor groups) puts 4 tokens in a row
/// (a reduction over its static axis 1 mixes them): a group row, per token
/// only when every chunk holds whole groups of 4.
std::optional<std::string> PerTokenOps::whyNotReshape(Operation *op) const {
  auto in = rankedOf(op->getOperand(0)), out = rankedOf(op->getResult(0));
  if (!in || !out)
    return std::string("a Reshape of unranked values");
  auto inSplit = tokenSplit(in), outSplit = tokenSplit(out);
  if (!inSplit && !outSplit && in.hasStaticShape() && out.hasStaticShape())
    return std::nullopt;
  if (inSplit && outSplit && inSplit->first == outSplit->first && outSplit->second > 0 &&
      inSplit->second % outSplit->second == 0)
    return std::nullopt;
  // Rows of k whole tokens: groups, per token when chunks hold whole groups
  // (of k rows of tokensPerRow tokens each).
  if (std::optional<int64_t> k = groupedRows(op); k && tokensPerRow(op->getOperand(0)) > 0) {
    const int64_t tokens = *k * tokensPerRow(op->getOperand(0));
    // With carried partial groups the rows need not be a multiple of k per
    // chunk, but they must start on a group: a whole-groups Slice's rows.
    if (carryGroups && chunk % tokens != 0 && !alignedToGroups(op->getOperand(0), tokens))
      return std::string("a Reshape that groups rows of ") + std::to_string(tokens) +
             " tokens not taken from a Slice to whole groups (a chunk's rows do not start on "
             "a group)";
    return whyNotGroups(tokens, "a Reshape that groups rows");
  }
  return std::string("a Reshape that groups tokens together (its rows along the token axis "
                     "span several tokens)");
}

/// MatMul(A, B) is per token when one side does not depend on the prompt
/// and the contracted axes are static: each output row is one row of the
/// prompt side times a fixed matrix. A batched MatMul of two activations
/// is per token too when the token axis is the same batch axis of both and
/// the matrices are static ([S, m, k] x [S, k, n]: one small product per
/// token, as DeepSeek-V4.1's mHC stream mixes).
std::optional<std::string> PerTokenOps::whyNotMatMul(Operation *op) const {
  Value a = op->getOperand(0), bv = op->getOperand(1);
  bool fixedA = !dependsOnPrompt(a), fixedB = !dependsOnPrompt(bv);
  if (!fixedA && !fixedB) {
    auto at = rankedOf(a), bt = rankedOf(bv);
    // The token axis must be a batch axis: not one of the matrix dims.
    auto tokenBatchAxis = [](RankedTensorType t) -> std::optional<int64_t> {
      std::optional<int64_t> axis = tokenAxis(t);
      if (!axis || t.getRank() < 3 || *axis >= t.getRank() - 2)
        return std::nullopt;
      return axis;
    };
    auto axisA = tokenBatchAxis(at), axisB = tokenBatchAxis(bt);
    if (axisA && axisB && at.getRank() == bt.getRank() && *axisA == *axisB)
      return std::nullopt;
    return std::string("a MatMul of two activations mixes tokens");
  }
  auto at = rankedOf(a), bt = rankedOf(bv);
  if (!at || !bt)
    return std::string("a MatMul of unranked operands");
  if (!isStaticAxis(a, -1) || (bt.getRank() >= 2 && !isStaticAxis(bv, -2)) ||
      (bt.getRank() == 1 && !isStaticAxis(bv, 0)))
    return std::string("a MatMul contracting the token axis mixes tokens");
  return std::nullopt;
}

std::optional<std::string> PerTokenOps::whyNot(Operation *op) const {
  // The outputs are the chunk's token rows.
  if (isa<func::ReturnOp>(op)) {
    for (Value v : op->getOperands())
      if (dependsOnPrompt(v) && !fromSizes.contains(v) &&
          (tokensPerRow(v) > 1 || tokensPerRow(v) < 0))
        return std::string("an output that is not one row per token (rows of groups of tokens)");
    return std::nullopt;
  }
  // Nothing made from the prompt: the same in every chunk.
  if (llvm::none_of(op->getOperands(), [&](Value v) { return dependsOnPrompt(v); }))
    return std::nullopt;
  if (auto why = whyNotSizes(op))
    return why;
  if (llvm::any_of(op->getResults(), [&](Value r) { return rowTokens.lookup(r) < 0; }))
    return std::string("it combines rows of tokens with rows of groups of tokens");
  // A table read at positions made from the prompt's length (Range, or a
  // tensor sized by it) is a position embedding: those restart per chunk.
  if (isa<ox::GatherOp>(op) && !dependsOnPrompt(op->getOperand(0)) &&
      fromSizes.contains(op->getOperand(1)))
    return std::string("a Gather that is not the token embedding (position embeddings from "
                       "the prompt length are not chunked)");
  // Size computations (shapes, positions) are the chunk's own.
  if (llvm::all_of(dataOperands(op), [&](Value v) {
        return !dependsOnPrompt(v) || fromSizes.contains(v);
      }))
    return std::nullopt;
  if (isOnnxElementwise(op) || isa<ox::ExpandOp>(op)) {
    // Broadcasting [.., S, 1] against [.., 1, S] would pair tokens.
    for (Value r : op->getResults())
      if (dynamicDims(r) > 1)
        return std::string("an elementwise op whose result has two token axes pairs tokens");
    return std::nullopt;
  }
  if (isa<ox::ReshapeOp>(op))
    return whyNotReshape(op);
  if (isa<ox::TransposeOp, ox::SqueezeOp, ox::UnsqueezeOp, ox::ShapeOp, ox::RangeOp,
          ox::ConstantOfShapeOp, ox::ConstantOp, ox::WeightOp, ox::NoValueOp>(op))
    return std::nullopt;
  if (isa<h20::attn::SparseAttentionOp, h20::attn::IndexerTopKOp, h20::attn::IndexerCandidatesOp>(
          op))
    return whyNotCompressed(op);
  // Routed experts: each token's row is routed and computed by itself
  // (top-k of its own scores; no capacity limit drops or moves tokens).
  // A block-scaled linear: each token's row times the constant weight.
  if (isa<ox::H20RoutedExpertsOp, ox::H20RoutedExpertsMxfp4Op, ox::H20BlockScaledMatMulOp>(op) &&
      llvm::none_of(op->getOperands().drop_front(), [&](Value v) { return dependsOnPrompt(v); }))
    return std::nullopt;
  if (isa<h20::attn::RopeApplyOp, h20::attn::RopeTableOp, h20::attn::AttentionOp,
          h20::attn::AllReduceOp, h20::kv::AllocOp, h20::kv::WriteOp, h20::kv::ViewOp>(op) ||
      op->getDialect()->getNamespace() == "arith" || op->getDialect()->getNamespace() == "tensor")
    return std::nullopt;
  // attn.rms_scale: each row of the value scaled by its own row's RMS.
  if (isa<h20::attn::RmsScaleOp>(op))
    return std::nullopt;
  if (auto n = dyn_cast<h20::attn::RmsNormOp>(op)) {
    if (isStaticAxis(n.getInput(), static_cast<int64_t>(n.getAxis())) &&
        static_cast<int64_t>(n.getAxis()) == rankedOf(n.getInput()).getRank() - 1)
      return std::nullopt;
    return std::string("RMSNorm over more than the last axis");
  }
  // LayerNormalization over the last axis alone, of static size (the
  // hidden size), normalizes each token's row by itself.
  if (auto n = dyn_cast<ox::LayerNormalizationOp>(op)) {
    auto t = rankedOf(op->getOperand(0));
    int64_t axis = n.getAxis().value_or(-1);
    if (t && t.getRank() >= 2 && (axis == -1 || axis == t.getRank() - 1) &&
        isStaticAxis(op->getOperand(0), -1))
      return std::nullopt;
    return std::string("LayerNormalization over more than the last (hidden) axis");
  }
  if (isa<ox::MatMulOp>(op))
    return whyNotMatMul(op);
  return whyNotAxisOp(op);
}

} // namespace h20
