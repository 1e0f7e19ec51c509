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

/// DeepSeek-V4.1's window-only sparse attention (no compressed entries)
/// reads, for each query, the latents of the `window` positions up to its
/// own. A chunk's queries need the earlier chunks' latents: every distinct
/// latent is written into slot s (key half) of one KV cache at the chunk's
/// start p0, each attention reads the view of positions 0 .. p0 + S and
/// takes p0 as its start. The capacity is max-positions rounded up to whole
/// chunks (as the dense caches'). The value half of each slot is unused.
LogicalResult cacheWindowLatents(func::FuncOp func, Value p0, int64_t maxPositions,
                                 int64_t chunk) {
  SmallVector<h20::attn::SparseAttentionOp> ops;
  func.walk([&](h20::attn::SparseAttentionOp op) {
    if (!op.getCompressed())
      ops.push_back(op);
  });
  if (ops.empty())
    return success();
  if (maxPositions <= 0 || chunk <= 0)
    return ops[0].emitError("chunked prefill: the sparse attention's latent cache needs "
                            "max-positions and a chunk size");
  MLIRContext *ctx = func.getContext();
  auto lt0 = cast<RankedTensorType>(ops[0].getLatent().getType());
  int64_t dim = lt0.getDimSize(1);
  Type elt = lt0.getElementType();
  SmallVector<Value> latents;
  for (h20::attn::SparseAttentionOp op : ops) {
    auto lt = cast<RankedTensorType>(op.getLatent().getType());
    if (!lt.isDynamicDim(0))
      return op.emitError("chunked prefill: a sparse attention latent of static length ")
             << lt << " is not one row per token of the chunk";
    if (lt.getDimSize(1) != dim || lt.getElementType() != elt || ShapedType::isDynamic(dim))
      return op.emitError("chunked prefill: sparse attention latents ")
             << lt << " differ from the first layer's [S, " << dim << "] x " << elt
             << "; one latent cache holds them all";
    if (!llvm::is_contained(latents, op.getLatent()))
      latents.push_back(op.getLatent());
  }
  int64_t capacity = (maxPositions + chunk - 1) / chunk * chunk;
  auto cacheType = h20::kv::CacheType::get(
      ctx, {static_cast<int64_t>(latents.size()), 2, 1, capacity, dim}, elt,
      h20::kv::LayoutAttr::get(ctx, {0, 1, 2, 3, 4}, /*align=*/128, /*page=*/0));
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&func.getBody().front());
  Value cache = h20::kv::AllocOp::create(b, func.getLoc(), cacheType, ValueRange{});
  auto rowsType = RankedTensorType::get({1, 1, ShapedType::kDynamic, dim}, elt);
  auto latentType = RankedTensorType::get({ShapedType::kDynamic, dim}, elt);
  SmallVector<ReassociationIndices> rows{{0, 1, 2}, {3}};
  SmallVector<bool> written(latents.size(), false);
  for (h20::attn::SparseAttentionOp op : ops) {
    b.setInsertionPoint(op);
    Location loc = op.getLoc();
    int64_t slot = llvm::find(latents, op.getLatent()) - latents.begin();
    if (!written[slot]) {
      SmallVector<OpFoldResult> shape{b.getIndexAttr(1), b.getIndexAttr(1),
                                      tensor::getMixedSize(b, loc, op.getLatent(), 0),
                                      b.getIndexAttr(dim)};
      Value v = tensor::ExpandShapeOp::create(b, loc, rowsType, op.getLatent(), rows, shape);
      cache = h20::kv::WriteOp::create(b, loc, cacheType, cache, v, p0, slot, 0);
      written[slot] = true;
    }
    Value len = arith::AddIOp::create(b, loc, p0,
                                      tensor::DimOp::create(b, loc, op.getQuery(), 0));
    Value view = h20::kv::ViewOp::create(b, loc, rowsType, cache, len, slot, 0);
    op.getLatentMutable().assign(tensor::CollapseShapeOp::create(b, loc, latentType, view, rows));
    op.getStartMutable().assign(p0);
  }
  return success();
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
    h20::PerTokenOps perToken(func, func.getArgument(0));
    SmallVector<std::pair<Operation *, std::string>> blockers;
    for (Operation &op : func.getBody().front())
      if (!isa<func::ReturnOp>(op))
        if (std::optional<std::string> why = perToken.whyNot(&op))
          blockers.emplace_back(&op, *why);
    if (!blockers.empty()) {
      auto [op, why] = blockers.front();
      // Padding at the end is sound only for a causal graph; what this
      // check cannot prove for arbitrary ops, h20's DeepSeek-V4.1 exports
      // (attn.sparse_attention) are by construction.
      bool causalByConstruction = false;
      func.walk([&](h20::attn::SparseAttentionOp) { causalByConstruction = true; });
      if (!wholePromptFallback || !causalByConstruction)
        return op->emitError("chunked prefill: ")
               << why << "; this graph cannot run a chunk at a time (compile it for --target=cpu)"
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

    // Positions: p0 + in-chunk position, computed once per positions value.
    DenseMap<Value, Value> shifted;
    WalkResult walk = WalkResult::advance();
    if (!whole)
      walk = func.walk([&](h20::attn::RopeApplyOp rope) -> WalkResult {
      Value pos = rope.getPositions();
      if (isa<BlockArgument>(pos))
        return rope.emitError("positions are a graph input; chunked prefill computes them");
      auto it = shifted.find(pos);
      if (it == shifted.end()) {
        OpBuilder b(ctx);
        b.setInsertionPointAfterValue(pos);
        auto pt = cast<RankedTensorType>(pos.getType());
        Value start = arith::IndexCastOp::create(b, loc, pt.getElementType(), p0);
        SmallVector<Value> dyn;
        for (int64_t k = 0; k < pt.getRank(); ++k)
          if (pt.isDynamicDim(k))
            dyn.push_back(tensor::DimOp::create(b, loc, pos, k));
        Value splat = tensor::SplatOp::create(b, loc, pt, start, dyn);
        Value sum = ox::AddOp::create(b, loc, TypeRange{pt}, ValueRange{pos, splat})->getResult(0);
        it = shifted.try_emplace(pos, sum).first;
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
    if (!whole && failed(cacheWindowLatents(func, p0, maxPositions, chunk)))
      return failure();

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
    }
    func->setAttr("h20.chunked", b.getDictionaryAttr(info));
    return success();
  }
};

} // namespace
