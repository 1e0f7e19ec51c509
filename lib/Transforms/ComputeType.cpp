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
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace h20 {
#define GEN_PASS_DEF_COMPUTETYPE
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

/// Ops through which position arithmetic flows unchanged in kind: shape
/// ops, the elementwise arithmetic of angles (position x inverse
/// frequency, YaRN's ramps), and Cos / Sin, where it ends.
bool carriesPositions(Operation *op) {
  static const llvm::StringSet<> kOps = {
      "onnx.Unsqueeze", "onnx.Squeeze", "onnx.Reshape",  "onnx.Expand",  "onnx.Concat",
      "onnx.Transpose", "onnx.Slice",   "onnx.Gather",   "onnx.Identity", "onnx.Flatten",
      "onnx.Tile",      "onnx.Split",   "onnx.Mul",      "onnx.Div",     "onnx.Add",
      "onnx.Sub",       "onnx.Neg",     "onnx.Reciprocal", "onnx.Pow",   "onnx.MatMul",
      "onnx.Cast",      "onnx.Cos",     "onnx.Sin"};
  return kOps.contains(op->getName().getStringRef());
}

/// An onnx.Cast of `v` to `type` (ONNX TensorProto.DataType `code`) at the
/// builder's insertion point.
ox::CastOp createCast(OpBuilder &b, Location loc, Value v, Type type, int64_t code) {
  auto c = ox::CastOp::create(b, loc, TypeRange{type}, ValueRange{v});
  c->setAttr("to", b.getIntegerAttr(b.getIntegerType(64, true), code));
  return c;
}

bool isFloatTensorOf(Type t, Type element) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getElementType() == element;
}

/// The ops that keep float32 under a 16-bit compute type: float values
/// made from integers (Cast from an integer type wider than i1, a float
/// Range: token positions) and whatever carriesPositions() derives from
/// them and from constants and weights alone (inverse frequencies, also
/// when expanded, reshaped or computed from constants; transformers' rotary
/// embedding multiplies them with the positions in a MatMul), up to and
/// including the Cos / Sin of the angles, plus the constant-only values
/// they read. An op that also reads an activation (or a Cos / Sin) is not
/// kept, so the set never grows into the activations. bf16 holds integers
/// exactly only up to 256 and rounds an angle of 1000 rad by up to 2 rad,
/// so RoPE angles computed in the graph (torch.onnx exports that do not
/// use h20's rope tables, e.g. DeepSeek-V4.1's) must not be rounded; cos /
/// sin themselves, in [-1, 1], are then rounded like any activation.
llvm::DenseSet<Operation *> positionArithmetic(func::FuncOp func, Type f32) {
  auto isTrig = [](Operation *op) {
    StringRef n = op->getName().getStringRef();
    return n == "onnx.Cos" || n == "onnx.Sin";
  };
  auto floatResult = [&](Operation *op) {
    return llvm::any_of(op->getResults(), [&](Value r) { return isFloatTensorOf(r.getType(), f32); });
  };
  auto isFloat = [](Value v) { return isa<FloatType>(getElementTypeOrSelf(v.getType())); };

  // Values made from constants and weights alone (program order: operands
  // are defined before their users).
  llvm::DenseSet<Operation *> constant;
  for (Operation &op : func.getBody().front()) {
    if (isa<ox::ConstantOp, ox::WeightOp>(op)) {
      constant.insert(&op);
      continue;
    }
    if (carriesPositions(&op) && !isTrig(&op) && floatResult(&op) &&
        llvm::all_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return !isFloat(v) || (def && constant.contains(def));
        }))
      constant.insert(&op);
  }

  llvm::DenseSet<Operation *> kept;
  SmallVector<Operation *> work;
  for (Operation &op : func.getBody().front()) {
    StringRef name = op.getName().getStringRef();
    bool seed = false;
    if (name == "onnx.Cast" && op.getNumOperands() == 1 && op.getNumResults() == 1) {
      auto in = dyn_cast<IntegerType>(getElementTypeOrSelf(op.getOperand(0).getType()));
      seed = in && in.getWidth() > 1 && isFloatTensorOf(op.getResult(0).getType(), f32);
    } else if (name == "onnx.Range" && op.getNumResults() == 1) {
      seed = isFloatTensorOf(op.getResult(0).getType(), f32);
    }
    if (seed && kept.insert(&op).second)
      work.push_back(&op);
  }
  // A float operand that is kept (not a Cos / Sin) or constant-only; an op
  // joins once all of its float operands are (it is checked again from
  // each producer that joins later).
  auto positionOperand = [&](Value v) {
    if (!isFloat(v))
      return true;
    Operation *def = v.getDefiningOp();
    return def && ((kept.contains(def) && !isTrig(def)) || constant.contains(def));
  };
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (isTrig(op))
      continue; // the angles end here
    for (Operation *user : op->getUsers()) {
      if (user->getParentOp() != func || !carriesPositions(user) || !floatResult(user) ||
          !llvm::all_of(user->getOperands(), positionOperand))
        continue;
      // A Cast keeps its own target: only casts to float32 carry on.
      if (user->getName().getStringRef() == "onnx.Cast" &&
          !isFloatTensorOf(user->getResult(0).getType(), f32))
        continue;
      if (kept.insert(user).second)
        work.push_back(user);
    }
  }
  // The constant-only values they read (inverse frequencies) stay exact,
  // and so does what those are made from.
  SmallVector<Operation *> readers(kept.begin(), kept.end());
  while (!readers.empty()) {
    Operation *op = readers.pop_back_val();
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && constant.contains(def) && isFloat(v) && kept.insert(def).second)
        readers.push_back(def);
  }
  return kept;
}

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
      auto cast = createCast(b, arg.getLoc(), arg, nt, onnxCode);
      cast->setAttr("h20.entry_cast", b.getUnitAttr());
      arg.replaceAllUsesExcept(cast->getResult(0), cast);
    }

    llvm::DenseSet<Operation *> kept = positionArithmetic(func, f32);
    // A block-scaled FP8 linear's scales stay float32 (the FP8 GEMM reads
    // them so; bf16 would round a scale that is not a power of two), and so
    // does the weight or constant they are.
    auto isBlockScale = [](Operation *user, unsigned operand) {
      return isa<ox::H20BlockScaledMatMulOp>(user) && operand == 2;
    };
    func.walk([&](ox::H20BlockScaledMatMulOp op) {
      Operation *def = op->getOperand(2).getDefiningOp();
      if (isa_and_nonnull<ox::WeightOp, ox::ConstantOp>(def) &&
          llvm::all_of(def->getUses(), [&](OpOperand &u) {
            return isBlockScale(u.getOwner(), u.getOperandNumber());
          }))
        kept.insert(def);
    });
    // A MatMul that only attn.rms_scale reads (as its value) keeps its
    // float32 sums: its operands take the compute type, the rms_scale
    // rounds the scaled row once (h20-norm-scale-after-matmul's narrow mHC
    // GEMMs; cuBLASLt sums 16-bit products in float32 either way).
    llvm::DenseSet<Operation *> keepSums;
    func.walk([&](ox::MatMulOp mm) {
      if (!mm->use_empty() && llvm::all_of(mm->getUses(), [](OpOperand &u) {
            auto s = dyn_cast<h20::attn::RmsScaleOp>(u.getOwner());
            return s && u.get() == s.getValue() && u.get() != s.getInput();
          }))
        keepSums.insert(mm);
    });
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      if (isa<h20::attn::RopeTableOp>(op) || op->getParentOp() != func || kept.contains(op) ||
          keepSums.contains(op))
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

    // Where float32 and converted values meet: a kept op reads its
    // converted operands through a Cast to float32; an ONNX op without a
    // float result (comparisons, Shape, a Cast to an integer) that reads a
    // kept value does too, so positions past 256 reach it exact; so do
    // attn.rope_apply's tables (its contract: float32 cos / sin, converted
    // above when they came from graph inputs or constants); a Cast reads
    // anything as it is; any other op reads kept values through a Cast to
    // the compute type (the rounding it had before). One Cast per value and
    // type, right after the value. The return is handled below.
    DenseMap<std::pair<Value, Type>, Value> casts;
    auto castTo = [&](Value v, Type element, int64_t code) {
      Value &c = casts[{v, element}];
      if (c)
        return c;
      auto rt = cast<RankedTensorType>(v.getType());
      b.setInsertionPointAfterValue(v);
      return c = createCast(b, v.getLoc(), v,
                            RankedTensorType::get(rt.getShape(), element, rt.getEncoding()), code)
                     .getResult(0);
    };
    auto fromKept = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && kept.contains(def) && isFloatTensorOf(v.getType(), f32);
    };
    SmallVector<Operation *> ops;
    for (Operation &op : entry)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (isa<func::ReturnOp, ox::CastOp>(op) && !kept.contains(op))
        continue;
      const bool noFloatResult = llvm::none_of(op->getResults(), [](Value r) {
        return isa<FloatType>(getElementTypeOrSelf(r.getType()));
      });
      const bool readsF32 =
          kept.contains(op) || (op->getName().getDialectNamespace() == "onnx" && noFloatResult &&
                                llvm::any_of(op->getOperands(), fromKept));
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        // Operands whose contract is float32: rope_apply's tables, block scales.
        const bool f32Operand = (isa<h20::attn::RopeApplyOp>(op) && use.getOperandNumber() >= 2) ||
                                isBlockScale(op, use.getOperandNumber());
        if ((readsF32 || f32Operand) && isFloatTensorOf(v.getType(), to))
          use.set(castTo(v, f32, 1));
        else if (!readsF32 && !f32Operand && fromKept(v))
          use.set(castTo(v, to, onnxCode));
      }
    }

    // float32 outputs: cast back before returning.
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    b.setInsertionPoint(ret);
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Type want = func.getResultTypes()[i];
      if (v.getType() == want)
        continue;
      ret->setOperand(i, createCast(b, ret.getLoc(), v, want, 1).getResult(0));
    }
  }
};

} // namespace
