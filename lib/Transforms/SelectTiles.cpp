//===- SelectTiles.cpp - per-target tile choice as attributes ------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Analysis/TileCostModel.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "AttentionShapeOf.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace h20 {
#define GEN_PASS_DEF_SELECTTILES
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
using namespace h20;

namespace {

struct Override {
  std::string target, kind;
  int64_t headDim = 0;
  TileChoice tiles;
};

FailureOr<std::vector<Override>> readOverrides(StringRef path, Operation *anchor) {
  std::vector<Override> out;
  if (path.empty())
    return out;
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return anchor->emitError("cannot read tuning file '") << path << "'";
  auto json = llvm::json::parse((*buf)->getBuffer());
  if (!json) {
    std::string msg = llvm::toString(json.takeError());
    return anchor->emitError("tuning file '") << path << "' is not JSON: " << msg;
  }
  auto *list = json->getAsObject() ? json->getAsObject()->getArray("overrides") : nullptr;
  if (!list)
    return anchor->emitError("tuning file '") << path << "' has no \"overrides\" array";
  for (const llvm::json::Value &v : *list) {
    const llvm::json::Object *o = v.getAsObject();
    auto str = [&](StringRef k) { return o ? o->getString(k) : std::nullopt; };
    auto num = [&](StringRef k) { return o ? o->getInteger(k) : std::nullopt; };
    if (!o || !str("target") || !str("kind") || !num("block_m") || !num("block_n"))
      return anchor->emitError("tuning file '")
             << path << "': each override needs target, kind, block_m, block_n";
    Override ov;
    ov.target = str("target")->str();
    ov.kind = str("kind")->str();
    ov.headDim = num("head_dim").value_or(0);
    ov.tiles.kind = ov.kind;
    ov.tiles.blockM = *num("block_m");
    ov.tiles.blockN = *num("block_n");
    ov.tiles.blockK = num("block_k").value_or(ov.kind == "gemm" ? 64 : 0);
    ov.tiles.stages = num("stages").value_or(2);
    ov.tiles.warpgroups = num("warpgroups").value_or(ov.tiles.blockM / 64);
    ov.tiles.persistent = o->getBoolean("persistent").value_or(false);
    out.push_back(ov);
  }
  return out;
}

struct SelectTilesPass : h20::impl::SelectTilesBase<SelectTilesPass> {
  using SelectTilesBase::SelectTilesBase;

  int64_t dimOr(int64_t d) { return ShapedType::isDynamic(d) ? int64_t(seqLen) : d; }

  Attribute toAttr(MLIRContext *ctx, const TileChoice &c) {
    Builder b(ctx);
    return hw::TilesAttr::get(ctx, b.getStringAttr(c.kind), b.getStringAttr(target), c.blockM,
                              c.blockN, c.blockK, c.stages, c.warpgroups,
                              b.getBoolAttr(c.persistent), c.smemBytes,
                              b.getF64FloatAttr(std::round(c.estUs * 1000) / 1000));
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    const TargetDescription *t = findTarget(target);
    if (!t) {
      func.emitError("h20-select-tiles: unknown target '")
          << target << "' (known: h20, h100, h200, h800, a100, l20, cpu)";
      return signalPassFailure();
    }
    auto overrides = readOverrides(tuningFile, func);
    if (failed(overrides))
      return signalPassFailure();
    MLIRContext *ctx = func.getContext();
    bool failedAny = false;
    func.walk([&](Operation *op) {
      if (auto a = dyn_cast<attn::AttentionOp>(op)) {
        auto q = cast<RankedTensorType>(a.getQuery().getType());
        AttentionShape s = attentionShapeOf(
            a, [&](int64_t d) { return dimOr(d); }, q.getElementTypeBitWidth() / 8);
        TileChoice c = chooseAttentionTiles(s, *t);
        for (const Override &ov : *overrides)
          if (ov.target == target.getValue() && ov.kind == "attention" &&
              (ov.headDim == 0 || ov.headDim == s.headDim)) {
            c = ov.tiles;
            c.smemBytes = attentionSmemBytes(s, c, *t);
            c.estUs = estimateAttentionUs(s, *t, c);
            if (c.smemBytes > t->smemPerBlock) {
              op->emitError("tuning override needs ")
                  << c.smemBytes << " bytes of shared memory; " << target << " has "
                  << t->smemPerBlock;
              failedAny = true;
            }
          }
        if (c.blockM == 0) {
          op->emitError("no attention tile fits ") << target << " for head_dim " << s.headDim;
          failedAny = true;
          return;
        }
        op->setAttr("h20.tiles", toAttr(ctx, c));
      } else if (isa<onnx::MatMulOp>(op)) {
        auto a = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
        auto w = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
        if (!a || !w || w.getRank() != 2 || w.isDynamicDim(0) || w.isDynamicDim(1))
          return;
        GemmShape s;
        s.m = 1;
        for (int64_t d : a.getShape().drop_back())
          s.m *= dimOr(d);
        s.k = w.getDimSize(0);
        s.n = w.getDimSize(1);
        s.elementBytes = a.getElementTypeBitWidth() / 8;
        op->setAttr("h20.tiles", toAttr(ctx, chooseGemmTiles(s, *t)));
      } else if (isa<attn::RmsNormOp, attn::RopeApplyOp>(op)) {
        auto x = cast<RankedTensorType>(op->getOperand(0).getType());
        RowsShape s;
        s.rows = 1;
        for (int64_t d : x.getShape().drop_back())
          s.rows *= dimOr(d);
        s.bytesPerRow = 2 * dimOr(x.getShape().back()) * (x.getElementTypeBitWidth() / 8);
        op->setAttr("h20.tiles", toAttr(ctx, chooseRowsTiles(s, *t)));
      }
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
