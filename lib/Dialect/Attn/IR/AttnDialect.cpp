//===- AttnDialect.cpp - attn dialect registration and verifiers ---------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace h20::attn;

#include "h20/Dialect/Attn/IR/AttnDialect.cpp.inc"
#include "h20/Dialect/Attn/IR/AttnEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/Attn/IR/AttnAttrs.cpp.inc"
#define GET_OP_CLASSES
#include "h20/Dialect/Attn/IR/AttnOps.cpp.inc"

void AttnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "h20/Dialect/Attn/IR/AttnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "h20/Dialect/Attn/IR/AttnOps.cpp.inc"
      >();
}

namespace {
/// True when two dimension sizes may be equal (either is dynamic).
bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}
} // namespace

LogicalResult RmsNormOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto w = cast<RankedTensorType>(getWeight().getType());
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError("epsilon must be > 0, got ") << getEpsilon().convertToDouble();
  int64_t rank = in.getRank();
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < -rank || axis >= rank)
    return emitOpError("axis ") << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  int64_t normRank = rank - axis;
  if (w.getRank() > normRank)
    return emitOpError("weight rank ")
           << w.getRank() << " exceeds the " << normRank
           << " normalised trailing dimension(s)";
  for (int64_t i = 0; i < w.getRank(); ++i) {
    int64_t wd = w.getDimSize(w.getRank() - 1 - i);
    int64_t xd = in.getDimSize(rank - 1 - i);
    if (wd != 1 && !compatible(wd, xd))
      return emitOpError("weight dimension ")
             << w.getRank() - 1 - i << " (" << dimStr(wd)
             << ") does not match input dimension " << rank - 1 - i << " ("
             << dimStr(xd) << ")";
  }
  if (auto ct = getComputeType(); ct && !isa<FloatType>(*ct))
    return emitOpError("compute_type must be a float type, got ") << *ct;
  return success();
}

LogicalResult RmsScaleOp::verify() {
  auto v = cast<RankedTensorType>(getValue().getType());
  auto in = cast<RankedTensorType>(getInput().getType());
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError("epsilon must be > 0, got ") << getEpsilon().convertToDouble();
  if (v.getRank() != in.getRank() || v.getRank() < 1)
    return emitOpError("value and input must have one rank >= 1, got ")
           << v.getRank() << " and " << in.getRank();
  for (int64_t i = 0; i + 1 < v.getRank(); ++i)
    if (!compatible(v.getDimSize(i), in.getDimSize(i)))
      return emitOpError("value dimension ")
             << i << " (" << dimStr(v.getDimSize(i)) << ") does not match input dimension " << i
             << " (" << dimStr(in.getDimSize(i)) << ")";
  auto out = cast<RankedTensorType>(getResult().getType());
  if (out.getRank() != v.getRank())
    return emitOpError("result rank ") << out.getRank() << " differs from value rank "
                                      << v.getRank();
  for (int64_t i = 0; i < v.getRank(); ++i)
    if (!compatible(out.getDimSize(i), v.getDimSize(i)))
      return emitOpError("result dimension ")
             << i << " (" << dimStr(out.getDimSize(i)) << ") does not match value dimension " << i
             << " (" << dimStr(v.getDimSize(i)) << ")";
  // The result is value's type, or narrower than value's float32 / f64
  // sums (a 16-bit GEMM's accumulator).
  if (out.getElementType() != v.getElementType() &&
      (v.getElementTypeBitWidth() < 32 ||
       out.getElementTypeBitWidth() >= v.getElementTypeBitWidth()))
    return emitOpError("result element type ")
           << out.getElementType() << " is neither value's " << v.getElementType()
           << " nor narrower than its f32 / f64";
  if (auto ct = getComputeType(); ct && !isa<FloatType>(*ct))
    return emitOpError("compute_type must be a float type, got ") << *ct;
  return success();
}

/// attn.rope's and attn.rope_apply's positions: [B, S] or [1, S] (a batch
/// of 1 broadcasts) for an input [B, H, S, D]; errors name both shapes.
static LogicalResult verifyPositions(Operation *op, RankedTensorType in, Value positions) {
  auto pos = cast<RankedTensorType>(positions.getType());
  if (pos.getRank() != 2)
    return op->emitOpError("positions must be [B, S], got rank ") << pos.getRank();
  if ((pos.getDimSize(0) != 1 && !compatible(pos.getDimSize(0), in.getDimSize(0))) ||
      !compatible(pos.getDimSize(1), in.getDimSize(2)))
    return op->emitOpError("positions shape [")
           << dimStr(pos.getDimSize(0)) << ", " << dimStr(pos.getDimSize(1))
           << "] does not match input batch/sequence [" << dimStr(in.getDimSize(0)) << ", "
           << dimStr(in.getDimSize(2)) << "] (a batch of 1 broadcasts)";
  return success();
}

LogicalResult RopeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  if (in.getRank() != 4)
    return emitOpError("input must be [B, H, S, D], got rank ") << in.getRank();
  if (failed(verifyPositions(*this, in, getPositions())))
    return failure();
  if (!(getTheta().convertToDouble() > 1.0))
    return emitOpError("theta must be > 1, got ") << getTheta().convertToDouble();
  int64_t rd = static_cast<int64_t>(getRotaryDim());
  int64_t d = in.getDimSize(3);
  if (rd <= 0 || rd % 2 != 0)
    return emitOpError("rotary_dim must be positive and even, got ") << rd;
  if (!ShapedType::isDynamic(d) && rd > d)
    return emitOpError("rotary_dim ") << rd << " exceeds head_dim " << d;

  if (auto fr = getInvFreq()) {
    if (static_cast<int64_t>(fr->size()) != rd / 2)
      return emitOpError("inv_freq has ") << fr->size() << " values, rotary_dim / 2 = " << rd / 2;
    if (getScaling() != RopeScaling::none)
      return emitOpError("inv_freq needs scaling 'none' (the values are the frequencies)");
    for (double v : *fr)
      if (!(v > 0.0) || !std::isfinite(v))
        return emitOpError("inv_freq values must be positive and finite, got ") << v;
  }
  auto require = [&](bool present, StringRef name) -> LogicalResult {
    if (!present)
      return emitOpError("scaling '")
             << stringifyRopeScaling(getScaling()) << "' requires attribute '"
             << name << "'";
    return success();
  };
  switch (getScaling()) {
  case RopeScaling::none:
    return success();
  case RopeScaling::linear:
  case RopeScaling::dynamic_ntk:
    return require(getFactor().has_value(), "factor");
  case RopeScaling::yarn:
    if (failed(require(getFactor().has_value(), "factor")) ||
        failed(require(getOriginalMaxPositions().has_value(),
                       "original_max_positions")))
      return failure();
    return success();
  case RopeScaling::llama3:
    if (failed(require(getFactor().has_value(), "factor")) ||
        failed(require(getOriginalMaxPositions().has_value(),
                       "original_max_positions")) ||
        failed(require(getLowFreqFactor().has_value(), "low_freq_factor")) ||
        failed(require(getHighFreqFactor().has_value(), "high_freq_factor")))
      return failure();
    return success();
  }
  return success();
}

/// The rules attn.attention and attn.attention_scores share: q and k are
/// [B, H, S, D] with equal D, Hq = kv_group x Hkv, a positive finite scale,
/// window >= 1, softcap > 0, mask rank <= 4.
template <typename OpT>
static LogicalResult verifyScoreOperands(OpT op) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  auto k = cast<RankedTensorType>(op.getKey().getType());
  auto r = cast<RankedTensorType>(op.getResult().getType());
  for (auto [name, t] : {std::pair<StringRef, RankedTensorType>{"query", q},
                         {"key", k}, {"result", r}})
    if (t.getRank() != 4)
      return op.emitOpError() << name << " must be [B, H, S, D], got rank "
                              << t.getRank();
  int64_t group = static_cast<int64_t>(op.getKvGroup());
  if (group < 1)
    return op.emitOpError("kv_group must be >= 1, got ") << group;
  if (!compatible(q.getDimSize(3), k.getDimSize(3)))
    return op.emitOpError("query head_dim ")
           << dimStr(q.getDimSize(3)) << " differs from key head_dim "
           << dimStr(k.getDimSize(3));
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      hq != group * hkv)
    return op.emitOpError("query heads (")
           << hq << ") must equal kv_group (" << group << ") x KV heads ("
           << hkv << ")";
  double scale = op.getScale().convertToDouble();
  if (!(scale > 0.0) || !std::isfinite(scale))
    return op.emitOpError("scale must be a positive finite number, got ")
           << scale;
  if (auto w = op.getWindow(); w && static_cast<int64_t>(*w) < 1)
    return op.emitOpError("window must be >= 1 (it counts the current token), got ")
           << static_cast<int64_t>(*w);
  if (auto c = op.getSoftcap(); c && !(c->convertToDouble() > 0.0))
    return op.emitOpError("softcap must be > 0, got ") << c->convertToDouble();
  if (Value mask = op.getMask()) {
    auto m = cast<RankedTensorType>(mask.getType());
    if (m.getRank() > 4)
      return op.emitOpError("mask rank must be <= 4, got ") << m.getRank();
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyScoreOperands(*this)))
    return failure();
  auto q = cast<RankedTensorType>(getQuery().getType());
  auto k = cast<RankedTensorType>(getKey().getType());
  auto v = cast<RankedTensorType>(getValue().getType());
  auto r = cast<RankedTensorType>(getResult().getType());
  if (v.getRank() != 4)
    return emitOpError() << "value must be [B, H, S, D], got rank " << v.getRank();
  if (!compatible(k.getDimSize(1), v.getDimSize(1)) ||
      !compatible(k.getDimSize(2), v.getDimSize(2)))
    return emitOpError("key and value must agree on KV heads and sequence");
  int64_t hq = q.getDimSize(1);
  if (!compatible(r.getDimSize(0), q.getDimSize(0)) ||
      !compatible(r.getDimSize(1), hq) ||
      !compatible(r.getDimSize(2), q.getDimSize(2)) ||
      !compatible(r.getDimSize(3), v.getDimSize(3)))
    return emitOpError("result must be [B, Hq, S_q, Dv] of the inputs");
  if (Value sink = getSink()) {
    auto s = cast<RankedTensorType>(sink.getType());
    if (s.getRank() != 1 || !compatible(s.getDimSize(0), hq))
      return emitOpError("sink must be [Hq] = [") << dimStr(hq) << "]";
  }
  return success();
}

LogicalResult AttentionScoresOp::verify() {
  if (failed(verifyScoreOperands(*this)))
    return failure();
  auto q = cast<RankedTensorType>(getQuery().getType());
  auto k = cast<RankedTensorType>(getKey().getType());
  auto r = cast<RankedTensorType>(getResult().getType());
  if (!compatible(r.getDimSize(0), q.getDimSize(0)) ||
      !compatible(r.getDimSize(1), q.getDimSize(1)) ||
      !compatible(r.getDimSize(2), q.getDimSize(2)) ||
      !compatible(r.getDimSize(3), k.getDimSize(2)))
    return emitOpError("result must be [B, Hq, S_q, S_kv] of the inputs");
  return success();
}

LogicalResult RopeTableOp::verify() {
  int64_t rd = static_cast<int64_t>(getRotaryDim());
  int64_t maxPos = static_cast<int64_t>(getMaxPositions());
  int64_t block = static_cast<int64_t>(getBlock());
  if (rd <= 0 || rd % 2)
    return emitOpError("rotary_dim must be positive and even, got ") << rd;
  if (maxPos <= 0 || block <= 0)
    return emitOpError("max_positions and block must be positive");
  if (getRepresentation() != "two_level")
    return emitOpError("unknown representation '") << getRepresentation() << "'";
  if (auto fr = getInvFreq(); fr && (static_cast<int64_t>(fr->size()) != rd / 2 ||
                                     getScaling() != RopeScaling::none))
    return emitOpError("inv_freq needs rotary_dim / 2 values and scaling 'none'");
  if ((getScaling() == RopeScaling::dynamic_ntk) != static_cast<bool>(getSeqLen()))
    return emitOpError("seq_len is required by, and only by, dynamic_ntk scaling");
  auto c = getCoarse().getType(), f = getFine().getType();
  int64_t rows = (maxPos + block - 1) / block;
  if (c.getShape() != ArrayRef<int64_t>{2, rows, rd / 2} ||
      f.getShape() != ArrayRef<int64_t>{2, block, rd / 2})
    return emitOpError("tables must be [2, ")
           << rows << ", " << rd / 2 << "] and [2, " << block << ", " << rd / 2 << "]";
  return success();
}

LogicalResult RopeApplyOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  if (in.getRank() != 4)
    return emitOpError("input must be [B, H, S, D], got rank ") << in.getRank();
  int64_t rd = static_cast<int64_t>(getRotaryDim());
  if (rd <= 0 || rd % 2 || (!in.isDynamicDim(3) && rd > in.getDimSize(3)))
    return emitOpError("rotary_dim ") << rd << " must be even and <= head_dim";
  auto c = getCoarse().getType(), f = getFine().getType();
  if (c.getRank() != 3 || f.getRank() != 3 || c.getDimSize(2) != rd / 2 ||
      f.getDimSize(2) != rd / 2 || f.getDimSize(1) != static_cast<int64_t>(getBlock()))
    return emitOpError("tables do not match rotary_dim ") << rd << " and block " << getBlock();
  return verifyPositions(*this, in, getPositions());
}

namespace {
/// Checks `t` has rank `rank`, naming the operand and the expected layout.
LogicalResult expectRank(Operation *op, Value v, int64_t rank, StringRef what) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() != rank)
    return op->emitOpError() << what << " must have rank " << rank << ", got " << t.getRank();
  return success();
}

/// Shared operand checks of the indexer ops: q [S, Hi, Di], k [T, Di], w [S, Hi].
LogicalResult verifyIndexerOperands(Operation *op, Value q, Value k, Value w, int64_t ratio) {
  if (failed(expectRank(op, q, 3, "query [S, Hi, Di]")) ||
      failed(expectRank(op, k, 2, "keys [T, Di]")) ||
      failed(expectRank(op, w, 2, "weights [S, Hi]")))
    return failure();
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(k.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  if (!compatible(qt.getDimSize(2), kt.getDimSize(1)))
    return op->emitOpError("query and keys disagree on the indexer head dim: ")
           << dimStr(qt.getDimSize(2)) << " vs " << dimStr(kt.getDimSize(1));
  if (!compatible(qt.getDimSize(0), wt.getDimSize(0)) ||
      !compatible(qt.getDimSize(1), wt.getDimSize(1)))
    return op->emitOpError("weights must be [S, Hi] of the query");
  if (ratio <= 0)
    return op->emitOpError("ratio must be positive, got ") << ratio;
  return success();
}
} // namespace

LogicalResult SparseAttentionOp::verify() {
  if (failed(expectRank(*this, getQuery(), 3, "query [S, H, D]")) ||
      failed(expectRank(*this, getLatent(), 2, "latent [L, D]")) ||
      failed(expectRank(*this, getSink(), 1, "sink [H]")) ||
      failed(expectRank(*this, getResult(), 3, "result [S, H, D]")))
    return failure();
  auto q = cast<RankedTensorType>(getQuery().getType());
  auto kv = cast<RankedTensorType>(getLatent().getType());
  auto sink = cast<RankedTensorType>(getSink().getType());
  // With a start, the latent holds every position up to the last query's
  // (L >= start + S); without, exactly the queries' positions (L = S).
  if (!compatible(q.getDimSize(2), kv.getDimSize(1)))
    return emitOpError("latent must be [L, D] of the query [S, H, D]");
  if (!getStart() && !compatible(q.getDimSize(0), kv.getDimSize(0)))
    return emitOpError("latent must be [S, D] of the query [S, H, D] (or give a start)");
  if (getLatentStart() && !getStart())
    return emitOpError("a latent_start (a window ring) needs the queries' start");
  // A ring's constants where known: it must hold every query's window
  // (first row at most max(start - W + 1, 0)) and reach the last query.
  APInt startValue, firstValue;
  if (getLatentStart() && matchPattern(getStart(), m_ConstantInt(&startValue)) &&
      matchPattern(getLatentStart(), m_ConstantInt(&firstValue))) {
    const int64_t start = startValue.getSExtValue(), first = firstValue.getSExtValue();
    const int64_t window = static_cast<int64_t>(getWindow());
    if (first > std::max<int64_t>(start - window + 1, 0))
      return emitOpError("latent_start ")
             << first << " leaves out window rows of the query at " << start << " (window "
             << window << ")";
    if (!q.isDynamicDim(0) && !kv.isDynamicDim(0) &&
        kv.getDimSize(0) < start + q.getDimSize(0) - first)
      return emitOpError("latent rows ")
             << kv.getDimSize(0) << " starting at position " << first
             << " do not reach the last query's position " << start + q.getDimSize(0) - 1;
  }
  // L >= start + S where known: a constant start, static L and S (a ring's
  // latent, with its own start, is checked by its producer).
  if (getStart() && !getLatentStart() && !q.isDynamicDim(0) && !kv.isDynamicDim(0)) {
    int64_t start = 0;
    APInt value;
    if (matchPattern(getStart(), m_ConstantInt(&value)))
      start = value.getSExtValue();
    if (kv.getDimSize(0) < start + q.getDimSize(0))
      return emitOpError("latent rows ")
             << kv.getDimSize(0) << " < start " << start << " + query rows " << q.getDimSize(0)
             << ": the latent must hold every position up to the last query's";
  }
  if (!compatible(sink.getDimSize(0), q.getDimSize(1)))
    return emitOpError("sink must be [H] = [") << dimStr(q.getDimSize(1)) << "]";
  if (getResult().getType() != getQuery().getType() &&
      !compatible(cast<RankedTensorType>(getResult().getType()).getDimSize(1), q.getDimSize(1)))
    return emitOpError("result must be [S, H, D] of the query");
  if (getWindow() <= 0)
    return emitOpError("window must be positive, got ") << getWindow();
  if (static_cast<bool>(getCompressed()) != static_cast<bool>(getIndices()))
    return emitOpError("compressed entries and their indices come together");
  if (Value c = getCompressed()) {
    if (failed(expectRank(*this, c, 2, "compressed [T, D]")) ||
        failed(expectRank(*this, getIndices(), 2, "indices [S, K]")))
      return failure();
    auto ct = cast<RankedTensorType>(c.getType());
    auto it = cast<RankedTensorType>(getIndices().getType());
    if (!compatible(ct.getDimSize(1), q.getDimSize(2)))
      return emitOpError("compressed entries must have the head dim ") << dimStr(q.getDimSize(2));
    if (!compatible(it.getDimSize(0), q.getDimSize(0)))
      return emitOpError("indices must have one row per query");
  }
  return success();
}

LogicalResult IndexerTopKOp::verify() {
  if (failed(verifyIndexerOperands(*this, getQuery(), getKeys(), getWeights(), getRatio())))
    return failure();
  if (getTopk() <= 0)
    return emitOpError("topk must be positive, got ") << getTopk();
  if (Value c = getCandidates()) {
    if (failed(expectRank(*this, c, 2, "candidates [S, KB]")))
      return failure();
    if (!getBlockSize() || *getBlockSize() <= 0)
      return emitOpError("candidates need a positive block_size");
  }
  return expectRank(*this, getResult(), 2, "result [S, K]");
}

LogicalResult IndexerCandidatesOp::verify() {
  if (failed(verifyIndexerOperands(*this, getQuery(), getKeys(), getWeights(), getRatio())))
    return failure();
  if (getBlocks() <= 0 || getBlockSize() <= 0)
    return emitOpError("blocks and block_size must be positive");
  return expectRank(*this, getResult(), 2, "result [S, KB]");
}
