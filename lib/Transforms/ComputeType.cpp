//===- ComputeType.cpp - run a float32 graph in bf16 / f16 ----------------===//
//
// Storage type conversion of the whole function; see Passes.td. ONNX codes
// for Cast's `to`: FLOAT = 1, FLOAT16 = 10, BFLOAT16 = 16
// (onnx/onnx.proto, TensorProto.DataType).
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace h20 {
#define GEN_PASS_DEF_COMPUTETYPE
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

struct ComputeTypePass : h20::impl::ComputeTypeBase<ComputeTypePass> {
  using ComputeTypeBase::ComputeTypeBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    Type to;
    int64_t onnxCode;
    if (type == "bf16") {
      to = BFloat16Type::get(ctx);
      onnxCode = 16;
    } else if (type == "f16") {
      to = Float16Type::get(ctx);
      onnxCode = 10;
    } else {
      func.emitError("h20-compute-type: type must be bf16 or f16, got '") << type << "'";
      return signalPassFailure();
    }
    Type f32 = Float32Type::get(ctx);
    auto convert = [&](Type t) -> Type {
      if (auto r = dyn_cast<RankedTensorType>(t); r && r.getElementType() == f32)
        return RankedTensorType::get(r.getShape(), to, r.getEncoding());
      if (auto c = dyn_cast<h20::kv::CacheType>(t); c && c.getElementType() == f32)
        return h20::kv::CacheType::get(ctx, c.getShape(), to, c.getLayout());
      return t;
    };

    // float32 inputs: cast on entry.
    OpBuilder b(ctx);
    Block &entry = func.getBody().front();
    b.setInsertionPointToStart(&entry);
    for (BlockArgument arg : func.getArguments()) {
      Type nt = convert(arg.getType());
      if (nt == arg.getType() || !isa<RankedTensorType>(nt))
        continue;
      auto cast = ox::CastOp::create(b, arg.getLoc(), TypeRange{nt}, ValueRange{arg});
      cast->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), onnxCode));
      cast->setAttr("h20.entry_cast", b.getUnitAttr());
      arg.replaceAllUsesExcept(cast->getResult(0), cast);
    }

    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      if (isa<h20::attn::RopeTableOp>(op) || op->getParentOp() != func)
        return WalkResult::advance();
      if (auto c = dyn_cast<ox::CastOp>(op)) {
        if (c->hasAttr("h20.entry_cast"))
          return WalkResult::advance(); // made above: already the compute type
        if (c->getAttrOfType<IntegerAttr>("to").getInt() == 1)
          c->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), onnxCode));
      }
      if (auto k = dyn_cast<ox::ConstantOp>(op)) {
        auto v = dyn_cast<DenseElementsAttr>(k.getValue());
        if (v && v.getElementType() == f32) {
          auto nt = cast<ShapedType>(convert(v.getType()));
          const llvm::fltSemantics &sem = cast<FloatType>(to).getFloatSemantics();
          SmallVector<APFloat> vals;
          for (APFloat x : v.getValues<APFloat>()) {
            bool lost;
            x.convert(sem, APFloat::rmNearestTiesToEven, &lost);
            vals.push_back(x);
          }
          k->setAttr("value", DenseElementsAttr::get(nt, vals));
        }
      }
      if (auto w = dyn_cast<ox::WeightOp>(op)) {
        auto t = cast<RankedTensorType>(w.getResult().getType());
        if (t.getElementType() == f32)
          w->setAttr("h20.stored_type", TypeAttr::get(f32));
      }
      for (OpResult r : op->getResults())
        r.setType(convert(r.getType()));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    // RoPE tables stay float32 (attn.rope_apply's contract); tables that
    // came from graph inputs or constants were converted above: cast back.
    func.walk([&](h20::attn::RopeApplyOp rope) {
      for (unsigned i : {2u, 3u}) {
        Value t = rope->getOperand(i);
        auto rt = cast<RankedTensorType>(t.getType());
        if (rt.getElementType() == f32)
          continue;
        b.setInsertionPoint(rope);
        auto back = ox::CastOp::create(b, rope.getLoc(),
                                       TypeRange{RankedTensorType::get(rt.getShape(), f32)},
                                       ValueRange{t});
        back->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), 1));
        rope->setOperand(i, back->getResult(0));
      }
    });

    // float32 outputs: cast back before returning.
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    b.setInsertionPoint(ret);
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Type want = func.getResultTypes()[i];
      if (v.getType() == want)
        continue;
      auto cast = ox::CastOp::create(b, ret.getLoc(), TypeRange{want}, ValueRange{v});
      cast->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), 1));
      ret->setOperand(i, cast->getResult(0));
    }
  }
};

} // namespace
