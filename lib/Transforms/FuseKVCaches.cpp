//===- FuseKVCaches.cpp - all layers' K/V into one planned cache ---------===//
#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/SparseKVPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_FUSEKVCACHES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
using namespace h20;

namespace {

struct FuseKVCachesPass : h20::impl::FuseKVCachesBase<FuseKVCachesPass> {
  using FuseKVCachesBase::FuseKVCachesBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // DeepSeek-V4.1's sparse attention: plan its window rings, compressed
    // and indexer-key slots in one allocation (SparseKVPlan.h).
    bool sparse = false;
    func.walk([&](attn::SparseAttentionOp) { sparse = true; });
    if (sparse && maxSeq > 0) {
      SparseKVPlan plan;
      std::string error;
      Operation *culprit = nullptr;
      if (!planSparseKV(func, maxSeq, elementBytes, align, plan, error, &culprit)) {
        culprit->emitError("h20-fuse-kv-caches: ") << error;
        return signalPassFailure();
      }
    } else if (sparse) {
      func.emitRemark("h20-fuse-kv-caches: sparse attention is planned for a capacity: give "
                      "max-seq");
    }
    SmallVector<attn::AttentionOp> layers;
    func.walk([&](attn::AttentionOp op) { layers.push_back(op); });
    if (layers.empty())
      return;
    if (align <= 0 || (align & (align - 1)) || maxSeq < 0 || page < 0) {
      func.emitError("h20-fuse-kv-caches: align must be a power of two, max-seq and page >= 0");
      return signalPassFailure();
    }
    // Every layer's K and V: [1, H, S, D], one element type, one (H, D).
    auto kt0 = cast<RankedTensorType>(layers[0].getKey().getType());
    int64_t heads = kt0.getDimSize(1), dim = kt0.getDimSize(3);
    Type elt = kt0.getElementType();
    SymbolicEvaluator eval(func);
    auto seq0 = eval.shapeOf(layers[0].getKey());
    for (attn::AttentionOp op : layers) {
      for (Value kv : {op.getKey(), op.getValue()}) {
        auto t = cast<RankedTensorType>(kv.getType());
        if (t.getDimSize(0) != 1 || t.getDimSize(1) != heads || t.getDimSize(3) != dim ||
            t.getElementType() != elt || ShapedType::isDynamic(heads) ||
            ShapedType::isDynamic(dim)) {
          op.emitWarning("h20-fuse-kv-caches: K/V ")
              << t << " differ from the first layer's [1, " << heads << ", S, " << dim << "] x "
              << elt << "; no cache was fused";
          return;
        }
        // A prompt-sized cache needs every layer to write the same S tokens.
        auto s = eval.shapeOf(kv);
        if (maxSeq == 0 && (!s || !seq0 || !provablyEqual((*s)[2], (*seq0)[2]))) {
          op.emitWarning("h20-fuse-kv-caches: this layer's sequence length is not provably "
                         "the first layer's; give max-seq");
          return;
        }
      }
    }
    // Slots: layers reading the same K and V share one, and so do layers
    // that say so with the same `kv.slot` attribute (a model whose later
    // layers attend to an earlier layer's cache, like DeepSeek-V4.1's shared
    // compressed KV): the first writes, all view.
    SmallVector<int64_t> slotOf;
    SmallVector<std::pair<Value, Value>> slots;
    llvm::DenseMap<int64_t, int64_t> namedSlots;
    for (attn::AttentionOp op : layers) {
      std::pair<Value, Value> key(op.getKey(), op.getValue());
      if (auto named = op->getAttrOfType<IntegerAttr>("kv.slot")) {
        auto [it, inserted] = namedSlots.try_emplace(named.getInt(), int64_t(slots.size()));
        if (inserted)
          slots.push_back(key);
        slotOf.push_back(it->second);
        continue;
      }
      auto it = llvm::find(slots, key);
      slotOf.push_back(it - slots.begin());
      if (it == slots.end())
        slots.push_back(key);
    }
    MLIRContext *ctx = func.getContext();
    int64_t capacity = maxSeq > 0 ? int64_t(maxSeq) : ShapedType::kDynamic;
    auto layout = kv::LayoutAttr::get(ctx, {0, 1, 2, 3, 4}, align, page);
    auto cacheType = kv::CacheType::get(
        ctx, {static_cast<int64_t>(slots.size()), 2, heads, capacity, dim}, elt, layout);

    OpBuilder b(layers[0]);
    Location loc = layers[0].getLoc();
    SmallVector<Value> sizes;
    if (maxSeq == 0)
      sizes.push_back(tensor::DimOp::create(b, loc, layers[0].getKey(), 2));
    Value cache = kv::AllocOp::create(b, loc, cacheType, sizes);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    SmallVector<bool> written(slots.size(), false);
    for (auto [op, slot] : llvm::zip(layers, slotOf)) {
      b.setInsertionPoint(op);
      Location l = op.getLoc();
      if (!written[slot]) {
        cache = kv::WriteOp::create(b, l, cacheType, cache, op.getKey(), zero, slot, 0);
        cache = kv::WriteOp::create(b, l, cacheType, cache, op.getValue(), zero, slot, 1);
        written[slot] = true;
      }
      Value len = tensor::DimOp::create(b, l, op.getKey(), 2);
      auto kType = cast<RankedTensorType>(op.getKey().getType());
      auto vType = cast<RankedTensorType>(op.getValue().getType());
      Value kView = kv::ViewOp::create(b, l, kType, cache, len, Value(), slot, 0);
      Value vView = kv::ViewOp::create(b, l, vType, cache, len, Value(), slot, 1);
      op.getKeyMutable().assign(kView);
      op.getValueMutable().assign(vView);
    }
  }
};

} // namespace
