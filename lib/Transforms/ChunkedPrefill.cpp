//===- ChunkedPrefill.cpp - one chunk of a chunked prefill ----------------===//
//
// A long prompt does not fit as one batch of activations ([S, hidden] per
// tensor, [S, ffn] for the MLP); processing it C tokens at a time bounds
// activation memory by C while the KV cache grows to S. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "LastPositionSlice.h"
#include "PerTokenOps.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_CHUNKEDPREFILL
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

/// "'op' (node 'name')": an op as the user's ONNX file names it.
std::string describe(Operation *op) {
  std::string what = "'" + op->getName().getStringRef().str() + "'";
  if (auto nl = dyn_cast<NameLoc>(op->getLoc()); nl && !nl.getName().empty())
    what += " (node '" + nl.getName().str() + "')";
  return what;
}

/// Every op that keeps a graph from running a chunk at a time, grouped by
/// op kind and reason ("; all 23 ops that block chunking:\n  12 x
/// 'onnx.Slice' (node 'S_3') and others like it: a Slice ..."), so that one
/// compile names all the work a chunked form needs, not only the first op.
/// Empty for one op.
std::string blockerSummary(ArrayRef<std::pair<Operation *, std::string>> blockers) {
  if (blockers.size() < 2)
    return "";
  struct Group {
    Operation *first;
    const std::string *why;
    int count;
  };
  SmallVector<Group> groups;
  for (const auto &blocker : blockers) {
    Operation *op = blocker.first;
    const std::string &why = blocker.second;
    auto it = llvm::find_if(groups, [&](const Group &g) {
      return g.first->getName() == op->getName() && *g.why == why;
    });
    if (it == groups.end())
      groups.push_back({op, &why, 1});
    else
      ++it->count;
  }
  std::string out = "; all " + std::to_string(blockers.size()) + " ops that block chunking:";
  for (const Group &g : groups)
    out += "\n  " + std::to_string(g.count) + " x " + describe(g.first) +
           (g.count > 1 ? " and others like it" : "") + ": " + *g.why;
  return out;
}

/// One row operand that a chunk's op must see for earlier positions too,
/// how many tokens one row stands for, and how many rows before the chunk
/// it reads: `before` >= 0 for a sparse attention's window latents (the
/// W - 1 positions before the chunk's first), -1 for every earlier row.
struct RowRead {
  OpOperand *use;
  int64_t ratio;
  int64_t before = -1;
};

/// The rows DeepSeek-V4.1's ops read across chunks: a sparse attention's
/// window latents (a row per token; only the W - 1 rows before the chunk,
/// which cacheRows may keep in a ring) and compressed
/// entries, an indexer's keys (a row per group of `ratio` tokens; a sparse
/// attention's ratio is its indices' indexer's), a lookback Gather's data
/// (a row per token: Engram's earlier token ids), in program order.
SmallVector<RowRead> rowReads(func::FuncOp func, const h20::PerTokenOps &perToken) {
  SmallVector<RowRead> reads;
  auto ratioOf = [](Operation *op) { return op->getAttrOfType<IntegerAttr>("ratio").getInt(); };
  for (Operation &op : func.getBody().front()) {
    if (auto sa = dyn_cast<h20::attn::SparseAttentionOp>(op)) {
      reads.push_back({&sa.getLatentMutable(), 1, static_cast<int64_t>(sa.getWindow()) - 1});
      if (sa.getCompressed())
        reads.push_back({&sa.getCompressedMutable()[0], ratioOf(sa.getIndices().getDefiningOp())});
    } else if (isa<h20::attn::IndexerTopKOp, h20::attn::IndexerCandidatesOp>(op)) {
      reads.push_back({&op.getOpOperand(1), ratioOf(&op)});
    } else if (perToken.isLookbackGather(&op)) {
      reads.push_back({&op.getOpOperand(0), 1});
    }
  }
  return reads;
}

/// The positions a chunked prefill's caches hold: max-positions rounded
/// up to whole chunks (the last chunk is padded to C tokens).
int64_t capacityOf(int64_t maxPositions, int64_t chunk) {
  return (maxPositions + chunk - 1) / chunk * chunk;
}

/// The cache of `slots` values of `rows` rows of `dim` elements each (one
/// kind, no value half: rows are read as they were written), rows padded to
/// 128 bytes as the attention caches'; a narrow row (a token id) only to
/// its own power-of-two size.
h20::kv::CacheType rowCacheType(MLIRContext *ctx, int64_t slots, int64_t rows, int64_t dim,
                                Type elt) {
  const int64_t rowBytes = dim * std::max<int64_t>(elt.getIntOrFloatBitWidth() / 8, 1);
  const int64_t align =
      std::min<int64_t>(128, static_cast<int64_t>(llvm::PowerOf2Ceil(rowBytes)));
  return h20::kv::CacheType::get(ctx, {slots, 1, 1, rows, dim}, elt,
                                 h20::kv::LayoutAttr::get(ctx, {0, 1, 2, 3, 4}, align,
                                                          /*page=*/0));
}

/// How rows [n, D] (or [n]) become a cache's [1, 1, n, D] and back.
SmallVector<ReassociationIndices> rowsOf4d(RankedTensorType t) {
  return t.getRank() == 1 ? SmallVector<ReassociationIndices>{{0, 1, 2, 3}}
                          : SmallVector<ReassociationIndices>{{0, 1, 2}, {3}};
}

/// A window ring's move before a chunk's write (cacheRows): rows
/// [chunk, chunk + ring) of `slot` to rows [0, ring). Returns the cache.
/// (Bufferization moves them through a temporary of `ring` rows: the view
/// aliases the cache it is written into.)
Value shiftRing(OpBuilder &b, Location loc, Value cache, h20::kv::CacheType type, int64_t slot,
                int64_t ring, int64_t chunk) {
  auto rowsType = RankedTensorType::get({1, 1, ring, type.getShape().back()},
                                        type.getElementType());
  Value last = h20::kv::ViewOp::create(b, loc, rowsType, cache,
                                       arith::ConstantIndexOp::create(b, loc, ring),
                                       arith::ConstantIndexOp::create(b, loc, chunk), slot, 0);
  return h20::kv::WriteOp::create(b, loc, type, cache, last,
                                  arith::ConstantIndexOp::create(b, loc, 0), slot, 0);
}

/// DeepSeek-V4.1's sparse attention and indexers read, for each query, rows
/// of every earlier position: window latents, compressed entries (one per
/// group of `ratio` tokens) and indexer keys; so does a lookback Gather
/// (Engram's token ids of the positions before). A chunk computes only its own
/// rows, so each distinct row value gets a slot in a KV cache of rows (one
/// kind, no value half) per row kind (width, element type, ratio, ring):
///  - growing slots (ring -1): the chunk's rows are written at row
///    p0 / ratio, each reader reads rows 0 .. (p0 + S) / ratio and takes p0
///    as its start. Chunks hold whole groups (PerTokenOps checks the chunk
///    size), so the chunk's first group is group p0 / ratio. Capacity:
///    max-positions rounded up to whole chunks, divided by the ratio.
///  - window rings (ring R = W - 1 >= 0 rows before the chunk, where
///    R <= C and R + C is less than the capacity: more than one chunk can
///    run): R + C rows. Rows [0, R) hold positions p0 - R .. p0 - 1, the chunk's
///    rows are written at row R, the reader views rows 0 .. R + S and
///    takes p0 - R as its latent_start (rows of negative positions are
///    never read). Before the write, rows [C, C + R) (the last R positions
///    of the previous chunk, which had C rows: every chunk but the last
///    does, GpuProgram's chunkSchedule) move to [0, R); with R <= C the two
///    ranges do not overlap. So a window layer holds R + C rows instead of
///    max-positions.
LogicalResult cacheRows(func::FuncOp func, Value p0, int64_t maxPositions, int64_t chunk,
                        ArrayRef<RowRead> reads, bool carryGroups) {
  if (reads.empty())
    return success();
  Operation *first = reads[0].use->getOwner();
  if (maxPositions <= 0 || chunk <= 0)
    return first->emitError("chunked prefill: the caches of rows read across chunks need "
                            "max-positions and a chunk size");
  MLIRContext *ctx = func.getContext();
  struct Kind {
    int64_t dim, ratio, ring;
    Type elt;
    SmallVector<Value> values;
    Value cache;
    h20::kv::CacheType type;
  };
  const int64_t capacity = capacityOf(maxPositions, chunk);
  // A read's ring rows, or -1 for a cache of every position: a ring when
  // the move cannot overlap (R <= C) and it is smaller than that cache.
  auto ringOf = [&](const RowRead &r) {
    return r.before >= 0 && r.before <= chunk && r.before + chunk < capacity ? r.before : -1;
  };
  SmallVector<Kind> kinds;
  auto kindOf = [&](int64_t dim, Type elt, int64_t ratio, int64_t ring) -> Kind & {
    for (Kind &k : kinds)
      if (k.dim == dim && k.elt == elt && k.ratio == ratio && k.ring == ring)
        return k;
    kinds.push_back({dim, ratio, ring, elt, {}, Value(), {}});
    return kinds.back();
  };
  // [n] rows are [n, 1].
  auto widthOf = [](RankedTensorType t) { return t.getRank() == 1 ? 1 : t.getDimSize(1); };
  for (const RowRead &r : reads) {
    Value v = r.use->get();
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() < 1 || t.getRank() > 2 || !t.isDynamicDim(0) ||
        (t.getRank() == 2 && t.isDynamicDim(1)))
      return r.use->getOwner()->emitError("chunked prefill: rows ")
             << t << " are not one row per token or group of the chunk, [n, D] or [n]";
    if (!h20::kv::isCacheElementType(t.getElementType()))
      return r.use->getOwner()->emitError("chunked prefill: rows of ")
             << t.getElementType() << " cannot be kept in a KV cache";
    // (Carried partial groups: a chunk's first entry is group p0 / ratio,
    // the one a previous chunk began, and it writes ceil(C / ratio)
    // entries, those from (p0 + n) / ratio on not yet whole; readers see
    // (p0 + n) / ratio.)
    if (r.ratio < 1 || (!carryGroups && chunk % r.ratio))
      return r.use->getOwner()->emitError("chunked prefill: the chunk size ")
             << chunk << " is not a multiple of the ratio " << r.ratio;
    Kind &k = kindOf(widthOf(t), t.getElementType(), r.ratio, ringOf(r));
    if (!llvm::is_contained(k.values, v))
      k.values.push_back(v);
  }
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&func.getBody().front());
  for (Kind &k : kinds) {
    // The last chunk writes ceil(C / ratio) entries from entry
    // (capacity - C) / ratio: capacity / ratio when the ratio divides C,
    // past it when a chunk carries partial groups (carryGroupRows).
    const int64_t rows = k.ring >= 0 ? k.ring + chunk
                                     : (capacity - chunk) / k.ratio +
                                           (chunk + k.ratio - 1) / k.ratio;
    k.type = rowCacheType(ctx, static_cast<int64_t>(k.values.size()), rows, k.dim, k.elt);
    k.cache = h20::kv::AllocOp::create(b, func.getLoc(), k.type, ValueRange{});
  }
  // (value, kind): a value read as two kinds is written into both.
  DenseSet<std::pair<Value, Kind *>> written;
  auto perRow = [&](Location loc, Value tokens, int64_t ratio) -> Value {
    if (ratio == 1)
      return tokens;
    return arith::DivUIOp::create(b, loc, tokens, arith::ConstantIndexOp::create(b, loc, ratio));
  };
  // A ring reader's latent_start, set once every read is rewired (a new
  // operand moves the op's operands, which `reads` points at).
  SmallVector<std::pair<h20::attn::SparseAttentionOp, Value>> latentStarts;
  // Per reader, its writes before its views: a view taken before a later
  // in-place write to the same cache would make bufferization copy it.
  for (size_t i = 0; i < reads.size();) {
    Operation *op = reads[i].use->getOwner();
    size_t end = i;
    while (end < reads.size() && reads[end].use->getOwner() == op)
      ++end;
    b.setInsertionPoint(op);
    Location loc = op->getLoc();
    for (int pass = 0; pass < 2; ++pass)
      for (size_t j = i; j < end; ++j) {
        const RowRead &r = reads[j];
        Value v = r.use->get();
        auto t = cast<RankedTensorType>(v.getType());
        Kind &k = kindOf(widthOf(t), t.getElementType(), r.ratio, ringOf(r));
        int64_t slot = llvm::find(k.values, v) - k.values.begin();
        auto rowsType = RankedTensorType::get({1, 1, ShapedType::kDynamic, k.dim}, k.elt);
        if (pass == 0) {
          if (!written.insert({v, &k}).second)
            continue;
          if (k.ring > 0)
            k.cache = shiftRing(b, loc, k.cache, k.type, slot, k.ring, chunk);
          SmallVector<OpFoldResult> shape{b.getIndexAttr(1), b.getIndexAttr(1),
                                          tensor::getMixedSize(b, loc, v, 0),
                                          b.getIndexAttr(k.dim)};
          Value rows = tensor::ExpandShapeOp::create(b, loc, rowsType, v, rowsOf4d(t), shape);
          Value at = k.ring >= 0 ? Value(arith::ConstantIndexOp::create(b, loc, k.ring))
                                 : perRow(loc, p0, r.ratio);
          k.cache = h20::kv::WriteOp::create(b, loc, k.type, k.cache, rows, at, slot, 0);
          continue;
        }
        // The query is operand 0 of every reader: S of this chunk.
        Value S = tensor::DimOp::create(b, loc, op->getOperand(0), 0);
        Value len = k.ring >= 0
                        ? Value(arith::AddIOp::create(
                              b, loc, arith::ConstantIndexOp::create(b, loc, k.ring), S))
                        : perRow(loc, arith::AddIOp::create(b, loc, p0, S), r.ratio);
        Value view = h20::kv::ViewOp::create(b, loc, rowsType, k.cache, len, Value(), slot, 0);
        if (k.ring >= 0)
          latentStarts.push_back(
              {cast<h20::attn::SparseAttentionOp>(op),
               arith::SubIOp::create(b, loc, p0, arith::ConstantIndexOp::create(b, loc, k.ring))});
        if (t.getRank() == 2) {
          r.use->set(tensor::CollapseShapeOp::create(
              b, loc, RankedTensorType::get({ShapedType::kDynamic, k.dim}, k.elt), view,
              rowsOf4d(t)));
          continue;
        }
        // [n] rows: a rank-reducing slice, which stays a view of the cache
        // (a collapse of all four dims of the strided view would be copied).
        auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
        r.use->set(tensor::ExtractSliceOp::create(
            b, loc, RankedTensorType::get({ShapedType::kDynamic}, k.elt), view,
            ArrayRef<OpFoldResult>{zero, zero, zero, zero},
            ArrayRef<OpFoldResult>{one, one, len, one},
            ArrayRef<OpFoldResult>{one, one, one, one}));
      }
    i = end;
  }
  // An indexer's picks per query, K = min(topk, T) (KB = min(blocks, NB)),
  // would change with the entries a chunk sees: they are given the static
  // K of the last chunk's T (the cache's rows), whose slots past the valid
  // picks hold the "none" sentinel, as a row with fewer visible entries
  // has them; the valid picks are the same. Readers keep the dynamic type
  // through a cast.
  auto staticPicks = [&](Operation *op, int64_t k) {
    Value r = op->getResult(0);
    auto rt = cast<RankedTensorType>(r.getType());
    if (!rt.isDynamicDim(1))
      return;
    r.setType(RankedTensorType::get({rt.getDimSize(0), k}, rt.getElementType()));
    b.setInsertionPointAfter(op);
    auto back = tensor::CastOp::create(b, op->getLoc(), rt, r);
    r.replaceAllUsesExcept(back, back);
  };
  for (auto &[sa, start] : latentStarts)
    sa.getLatentStartMutable().assign(start);
  // Every reader's query row i is position p0 + i.
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    if (auto sa = dyn_cast<h20::attn::SparseAttentionOp>(op)) {
      sa.getStartMutable().assign(p0);
    } else if (auto k = dyn_cast<h20::attn::IndexerTopKOp>(op)) {
      k.getStartMutable().assign(p0);
      const int64_t rows = capacity / static_cast<int64_t>(k.getRatio());
      staticPicks(k, std::min<int64_t>(static_cast<int64_t>(k.getTopk()), rows));
    } else if (auto c = dyn_cast<h20::attn::IndexerCandidatesOp>(op)) {
      c.getStartMutable().assign(p0);
      const int64_t rows = capacity / static_cast<int64_t>(c.getRatio());
      const int64_t bs = static_cast<int64_t>(c.getBlockSize());
      staticPicks(c, std::min<int64_t>(static_cast<int64_t>(c.getBlocks()), (rows + bs - 1) / bs));
    }
  }
  return success();
}

/// The compressors' Slices to whole groups of k tokens whose k does not
/// divide the chunk (carry-partial-groups), found on the original graph.
SmallVector<std::pair<ox::SliceOp, int64_t>> partialGroupSlices(func::FuncOp func,
                                                                int64_t chunk) {
  SmallVector<std::pair<ox::SliceOp, int64_t>> out;
  for (Operation &op : func.getBody().front())
    if (std::optional<int64_t> k = h20::PerTokenOps::groupsSlice(&op); k && chunk % *k != 0)
      out.push_back({cast<ox::SliceOp>(op), *k});
  return out;
}

/// Carries each compressor's partial last group into the next chunk (see
/// Passes.td, carry-partial-groups): its input rows x [n, D] go through a
/// ring of k - 1 + G k rows, G = ceil(C / k) (the k - 1 positions before
/// the chunk, moved to the front before the chunk's rows are written at
/// row k - 1, as a window ring), and its Slice to whole groups becomes
/// rows [k - 1 - p0 mod k, .. + G k) of the ring: the groups that end in
/// this chunk, the first of them begun by the previous one, then as many
/// that do not end in it as make G (at most one; their rows past the
/// chunk's are stale). G is static, so every size after the Slice is: a
/// GPU step program's sizes stay linear in p0 / k, which a count of
/// (p0 + n) / k - p0 / k groups is not. The groups that do not end in the
/// chunk are written at entries p0 / k + G - 1 .. that no reader of this
/// chunk sees (they see (p0 + n) / k entries) and the next chunk rewrites
/// first. At p0 = 0 the Slice starts at row k - 1: the chunk's own.
LogicalResult carryGroupRows(func::FuncOp func, Value p0, int64_t chunk,
                             ArrayRef<std::pair<ox::SliceOp, int64_t>> slices) {
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  for (auto [slice, k] : slices) {
    Value x = slice->getOperand(0);
    auto t = cast<RankedTensorType>(x.getType());
    if (t.getRank() != 2 || !t.isDynamicDim(0) || t.isDynamicDim(1))
      return slice->emitError("chunked prefill: a compressor's rows ")
             << t << " are not [n, D]: its partial groups cannot be carried across chunks";
    if (!h20::kv::isCacheElementType(t.getElementType()))
      return slice->emitError("chunked prefill: rows of ")
             << t.getElementType() << " cannot be kept in a KV cache";
    const int64_t ring = k - 1, dim = t.getDimSize(1);
    if (ring > chunk)
      return slice->emitError("chunked prefill: a compressor's groups of ")
             << k << " tokens need chunks of at least " << ring << " tokens (the chunk is "
             << chunk << ")";
    const int64_t groupRows = (chunk + k - 1) / k * k;
    Type elt = t.getElementType();
    auto cacheType = rowCacheType(ctx, 1, ring + groupRows, dim, elt);
    b.setInsertionPointToStart(&func.getBody().front());
    Value cache = h20::kv::AllocOp::create(b, func.getLoc(), cacheType, ValueRange{});
    b.setInsertionPoint(slice);
    Location loc = slice.getLoc();
    auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v).getResult(); };
    if (ring > 0)
      cache = shiftRing(b, loc, cache, cacheType, 0, ring, chunk);
    Value n = tensor::DimOp::create(b, loc, x, 0);
    auto rowsType = RankedTensorType::get({1, 1, ShapedType::kDynamic, dim}, elt);
    SmallVector<ReassociationIndices> rows4d = rowsOf4d(t);
    Value rows = tensor::ExpandShapeOp::create(
        b, loc, rowsType, x, rows4d,
        SmallVector<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1), n, b.getIndexAttr(dim)});
    cache = h20::kv::WriteOp::create(b, loc, cacheType, cache, rows, idx(ring), 0, 0);
    Value view = h20::kv::ViewOp::create(b, loc, rowsType, cache, idx(ring + groupRows), Value(),
                                         0, 0);
    Value all = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({ShapedType::kDynamic, dim}, elt), view, rows4d);
    Value first = arith::DivUIOp::create(b, loc, p0, idx(k));
    Value begun = arith::SubIOp::create(b, loc, p0, arith::MulIOp::create(b, loc, first, idx(k)));
    Value start = arith::SubIOp::create(b, loc, idx(ring), begun);
    Value cut = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({groupRows, dim}, elt), all,
        ArrayRef<OpFoldResult>{start, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(groupRows), b.getIndexAttr(dim)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    Value same = tensor::CastOp::create(b, loc, slice->getResult(0).getType(), cut);
    slice->getResult(0).replaceAllUsesWith(same);
    slice->erase();
  }
  return success();
}

/// The ops (and operand numbers) that read position expressions beside
/// activations, collected before any rewrite (PerTokenOps knows only the
/// original values).
using PositionUsers = SmallVector<std::pair<Operation *, SmallVector<unsigned>>>;
PositionUsers positionUsers(func::FuncOp func, const h20::PerTokenOps &perToken) {
  PositionUsers users;
  for (Operation &op : func.getBody().front())
    if (SmallVector<unsigned> which = perToken.positionOperands(&op); !which.empty())
      users.emplace_back(&op, which);
  return users;
}

/// Token positions that meet activations (PerTokenOps::positionOperands:
/// Engram's Where(pos >= k, ...) and its lookback Gather's indices
/// max(pos - k, 0)) are evaluated at the chunk's global positions: each
/// such position expression is cloned, right after the op it copies, with
/// its Range(0, S) replaced by Range(0, S) + p0, and the op reads the
/// clone. The original stays for its other uses (sizes, RoPE, which this
/// pass offsets by itself).
void globalizePositions(func::FuncOp func, Value p0, const h20::PerTokenOps &perToken,
                        const PositionUsers &users) {
  DenseMap<Value, Value> global;
  OpBuilder b(func.getContext());
  std::function<Value(Value)> at = [&](Value v) -> Value {
    if (!perToken.dependsOnPrompt(v))
      return v;
    if (auto it = global.find(v); it != global.end())
      return it->second;
    Operation *op = v.getDefiningOp();
    b.setInsertionPointAfter(op);
    Value g;
    if (isa<ox::RangeOp>(op)) {
      auto t = cast<RankedTensorType>(v.getType());
      Value start = arith::IndexCastOp::create(b, op->getLoc(), t.getElementType(), p0);
      Value dim = tensor::DimOp::create(b, op->getLoc(), v, 0);
      Value splat = tensor::SplatOp::create(b, op->getLoc(), t, start, ValueRange{dim});
      g = ox::AddOp::create(b, op->getLoc(), TypeRange{t}, ValueRange{v, splat})->getResult(0);
    } else {
      SmallVector<Value> operands;
      for (Value o : op->getOperands())
        operands.push_back(at(o));
      b.setInsertionPointAfter(op);
      Operation *copy = b.clone(*op);
      copy->setOperands(operands);
      g = copy->getResult(cast<OpResult>(v).getResultNumber());
    }
    global[v] = g;
    return g;
  };
  for (auto &[op, which] : users)
    for (unsigned i : which)
      op->setOperand(i, at(op->getOperand(i)));
}

struct ChunkedPrefillPass : h20::impl::ChunkedPrefillBase<ChunkedPrefillPass> {
  using ChunkedPrefillBase::ChunkedPrefillBase;
  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(rewrite(func)))
        return signalPassFailure();
  }

  LogicalResult rewrite(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    auto ids = func.getNumArguments() == 1
                   ? dyn_cast<RankedTensorType>(func.getArgument(0).getType())
                   : RankedTensorType();
    if (!ids || ids.getRank() != 2 || !ids.isDynamicDim(1) || ids.getDimSize(0) != 1 ||
        !ids.getElementType().isInteger())
      return func.emitError("chunked prefill needs one input, token ids [1, S] with S dynamic");
    // Whole-prompt mode (wholePromptFallback): a graph that cannot run a
    // chunk at a time runs as one chunk holding the whole prompt, padded at
    // the end; p0 is then always 0.
    std::optional<std::string> whole;
    std::string wholeDetail;
    h20::PerTokenOps perToken(func, func.getArgument(0), chunk, carryPartialGroups);
    SmallVector<std::pair<Operation *, std::string>> blockers;
    for (Operation &op : func.getBody().front())
      if (std::optional<std::string> why = perToken.whyNot(&op))
        blockers.emplace_back(&op, *why);
    if (!blockers.empty()) {
      auto [op, why] = blockers.front();
      // Padding at the end is sound only for a causal graph; what this
      // check cannot prove for arbitrary ops, h20's DeepSeek-V4.1 exports
      // (attn.sparse_attention) are by construction.
      bool causalByConstruction = false;
      func.walk([&](h20::attn::SparseAttentionOp) { causalByConstruction = true; });
      if (!wholePromptFallback && causalByConstruction && chunk > 0)
        return op->emitError("chunked prefill: ")
               << why << "; this graph cannot run chunks of " << static_cast<int64_t>(chunk)
               << " tokens (no whole-prompt fallback: a chunk the user chose): choose a chunk "
                  "size it accepts, or leave it to the target (h20-opt without --chunk: the "
                  "target's chunk, or the whole prompt as one chunk where chunks cannot run)"
               << blockerSummary(blockers);
      if (!wholePromptFallback || !causalByConstruction)
        return op->emitError("chunked prefill: ")
               << why << "; this graph cannot run a chunk at a time (compile it for --target=cpu "
                  "without --chunk: the whole prompt in one call)"
               << blockerSummary(blockers);
      whole = describe(op) + ": " + why;
      wholeDetail = blockerSummary(blockers);
    }
    if (!whole)
      for (Operation &op : func.getBody().front())
        if (isa<h20::attn::RopeOp>(op))
          return op.emitError("chunked prefill needs RoPE as table gathers (run h20-lower-rope)");

    Block &entry = func.getBody().front();
    Location loc = func.getLoc();
    BlockArgument p0 = entry.addArgument(IndexType::get(ctx), loc);
    BlockArgument n = entry.addArgument(IndexType::get(ctx), loc);
    func.setType(FunctionType::get(ctx, entry.getArgumentTypes(), func.getResultTypes()));
    func.setArgAttr(1, "onnx.name", StringAttr::get(ctx, "h20.chunk_start"));
    func.setArgAttr(2, "onnx.name", StringAttr::get(ctx, "h20.chunk_tokens"));

    // Positions: p0 + in-chunk position, computed once per positions value
    // (and group size). Rows of groups of k tokens whose partial groups are
    // carried start at group p0 / k, position (p0 / k) * k.
    DenseMap<std::pair<Value, int64_t>, Value> shifted;
    WalkResult walk = WalkResult::advance();
    if (!whole)
      walk = func.walk([&](h20::attn::RopeApplyOp rope) -> WalkResult {
      Value pos = rope.getPositions();
      if (isa<BlockArgument>(pos))
        return rope.emitError("positions are a graph input; chunked prefill computes them");
      int64_t group = perToken.tokensPerRow(rope->getOperand(0));
      if (!carryPartialGroups || group <= 1 || chunk % group == 0)
        group = 1;
      auto it = shifted.find({pos, group});
      if (it == shifted.end()) {
        OpBuilder b(ctx);
        b.setInsertionPointAfterValue(pos);
        auto pt = cast<RankedTensorType>(pos.getType());
        Value first = p0;
        if (group > 1) {
          Value g = arith::ConstantIndexOp::create(b, loc, group);
          first = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, p0, g), g);
        }
        Value start = arith::IndexCastOp::create(b, loc, pt.getElementType(), first);
        SmallVector<Value> dyn;
        for (int64_t k = 0; k < pt.getRank(); ++k)
          if (pt.isDynamicDim(k))
            dyn.push_back(tensor::DimOp::create(b, loc, pos, k));
        Value splat = tensor::SplatOp::create(b, loc, pt, start, dyn);
        Value sum = ox::AddOp::create(b, loc, TypeRange{pt}, ValueRange{pos, splat})->getResult(0);
        if (group > 1 && maxPositions > 0) {
          // The groups past the chunk's last whole one (carryGroupRows)
          // may sit past the capacity, where the RoPE tables end: their
          // rows are never read, clamp their positions into the tables.
          const int64_t capacity = capacityOf(maxPositions, chunk);
          Value top = arith::ConstantOp::create(
              b, loc, DenseElementsAttr::get(RankedTensorType::get({}, pt.getElementType()),
                                             b.getIntegerAttr(pt.getElementType(), capacity - 1)));
          sum = ox::MinOp::create(b, loc, TypeRange{pt}, ValueRange{sum, top})->getResult(0);
        }
        it = shifted.try_emplace({pos, group}, sum).first;
      }
      rope->setOperand(1, it->second);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    if (!whole)
      walk = func.walk([&](Operation *op) -> WalkResult {
      OpBuilder b(op);
      if (auto w = dyn_cast<h20::kv::WriteOp>(op)) {
        if (!isConstantIntValue(w.getOffset(), 0))
          return w.emitError("chunked prefill expects KV writes at position 0 of the prompt");
        w.getOffsetMutable().assign(p0);
      } else if (auto v = dyn_cast<h20::kv::ViewOp>(op)) {
        v.getLengthMutable().assign(arith::AddIOp::create(b, op->getLoc(), v.getLength(), p0));
      } else if (auto a = dyn_cast<h20::attn::AttentionOp>(op)) {
        if (!a.getCausal())
          return a.emitError("chunked prefill needs causal attention (a chunk must not see "
                             "later tokens)");
        // Unchunked, S_q == S_kv and both alignments agree; chunked, the
        // queries are the last S_q of the S_kv positions.
        a.setAlignment(h20::attn::CausalAlignment::bottom_right);
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (!whole) {
      // Both read the analysis of the original graph: collect, then rewrite.
      SmallVector<RowRead> reads = rowReads(func, perToken);
      PositionUsers users = positionUsers(func, perToken);
      auto partial = carryPartialGroups ? partialGroupSlices(func, chunk)
                                        : SmallVector<std::pair<ox::SliceOp, int64_t>>();
      globalizePositions(func, p0, perToken, users);
      if (failed(carryGroupRows(func, p0, chunk, partial)) ||
          failed(cacheRows(func, p0, maxPositions, chunk, reads, carryPartialGroups)))
        return failure();
    }

    StringRef outputMode = "rows";
    if (ox::SliceOp slice = h20::lastPositionSlice(func)) {
      OpBuilder b(slice);
      Value h = slice->getOperand(0);
      auto ht = cast<RankedTensorType>(h.getType());
      auto idx = [&](int64_t v) -> OpFoldResult { return b.getIndexAttr(v); };
      Value last = arith::SubIOp::create(b, slice.getLoc(), n,
                                         arith::ConstantIndexOp::create(b, slice.getLoc(), 1));
      auto rt = cast<RankedTensorType>(slice->getResult(0).getType());
      SmallVector<OpFoldResult> offsets{idx(0), last, idx(0)}, sizes, strides(3, idx(1));
      for (int64_t k = 0; k < 3; ++k)
        sizes.push_back(k == 1 ? idx(1) : tensor::getMixedSize(b, slice.getLoc(), h, k));
      (void)ht;
      Value row =
          tensor::ExtractSliceOp::create(b, slice.getLoc(), rt, h, offsets, sizes, strides);
      slice->getResult(0).replaceAllUsesWith(row);
      slice->erase();
      outputMode = "last";
    } else {
      for (Type t : func.getResultTypes()) {
        auto rt = dyn_cast<RankedTensorType>(t);
        if (!rt || rt.getRank() < 2 || !rt.isDynamicDim(1))
          return func.emitError("chunked prefill: every output must be [B, S, ...] (or use "
                                "--logits=last)");
      }
    }
    Builder b(ctx);
    SmallVector<NamedAttribute> info{b.getNamedAttr("input", b.getI64IntegerAttr(0)),
                                     b.getNamedAttr("dim", b.getI64IntegerAttr(1)),
                                     b.getNamedAttr("output", b.getStringAttr(outputMode))};
    if (whole)
      info.push_back(b.getNamedAttr("whole", b.getStringAttr(*whole)));
    // The chunk size is the target's choice, recorded here so that every
    // later stage reads it from the IR: a whole-prompt graph's one chunk
    // holds the longest prompt the artifact accepts.
    if (chunk > 0) {
      int64_t c = chunk;
      if (whole) {
        if (maxPositions <= 0)
          return func.emitError("chunked prefill: a whole-prompt chunk needs max-positions");
        c = maxPositions;
        func.emitWarning("GPU target: this graph runs the whole prompt as one chunk of ")
            << c << " tokens (--max-positions), as it cannot run a chunk at a time: " << *whole
            << wholeDetail;
      }
      info.push_back(b.getNamedAttr("chunk", b.getI64IntegerAttr(c)));
      // The last chunk's end: what buffers sized by the chunk's position
      // (kernel scratch over every earlier row) are sized for.
      if (!whole && maxPositions > 0)
        info.push_back(
            b.getNamedAttr("capacity", b.getI64IntegerAttr(capacityOf(maxPositions, c))));
    }
    func->setAttr("h20.chunked", b.getDictionaryAttr(info));
    return success();
  }
};

} // namespace
