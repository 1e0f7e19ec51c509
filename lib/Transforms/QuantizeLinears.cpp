//===- QuantizeLinears.cpp - float linears as block-scaled FP8 GEMMs ------===//
//
// See Passes.td (h20-quantize-linears). The weights are quantised when
// loaded, as DeepSeek-V3 stores its FP8 linears (128 x 128 blocks, one
// float32 scale each: max |w| / 448, DeepSeek-V3 technical report section
// 3.3, inference/kernel.py weight_dequant); the activations per 1 x 128 block
// on the fly (kernels/fp8_quant.cuh), both by the existing block-scaled
// FP8 path (ai.h20 BlockScaledMatMul).
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace h20 {
#define GEN_PASS_DEF_QUANTIZELINEARS
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;
namespace at = h20::attn;

namespace {

/// The linears whose result a function returns with its last dim
/// (the LM head: the logits keep the compute type's accuracy), looking
/// back from each returned value through casts, reshapes and a softcap's
/// elementwise ops with constants (tanh(x / c) * c), as long as the
/// last dim stays N. A present-KV output ([.., heads, S, D]) is not one.
llvm::DenseSet<Operation *> lmHeads(func::FuncOp f) {
  llvm::DenseSet<Operation *> heads;
  auto constant = [](Value v) {
    return isa_and_nonnull<ox::ConstantOp, ox::WeightOp>(v.getDefiningOp());
  };
  f.walk([&](func::ReturnOp ret) {
    for (Value out : ret.getOperands()) {
      auto ot = dyn_cast<RankedTensorType>(out.getType());
      Value v = out;
      for (int step = 0; step < 16 && v; ++step) {
        Operation *d = v.getDefiningOp();
        if (!d)
          break;
        if (auto mm = dyn_cast<ox::MatMulOp>(d)) {
          auto yt = dyn_cast<RankedTensorType>(mm->getResult(0).getType());
          if (ot && yt && ot.getRank() >= 1 && yt.getRank() >= 1 &&
              ot.getShape().back() == yt.getShape().back())
            heads.insert(mm);
          break;
        }
        if (isa<ox::CastOp, ox::IdentityOp, ox::ReshapeOp, ox::SqueezeOp, ox::UnsqueezeOp,
                ox::FlattenOp, ox::TanhOp>(d)) {
          v = d->getOperand(0);
        } else if (isa<ox::MulOp, ox::DivOp>(d) && d->getNumOperands() == 2 &&
                   constant(d->getOperand(1))) {
          v = d->getOperand(0);
        } else if (isa<ox::MulOp>(d) && d->getNumOperands() == 2 && constant(d->getOperand(0))) {
          v = d->getOperand(1);
        } else {
          break;
        }
      }
    }
  });
  return heads;
}

/// Why `mm` stays a float GEMM, or "" when it is quantised: a float
/// weight [K, N] (an initializer, not a tensor-parallel shard) with K and
/// N multiples of 16 (cuBLASLt's FP8 GEMM), read by a float X [..., K]; not
/// the LM head (`heads`), not split by query rows.
std::string whyNot(ox::MatMulOp mm, const llvm::DenseSet<Operation *> &heads) {
  auto w = mm->getOperand(1).getDefiningOp<ox::WeightOp>();
  if (!w)
    return "the right operand is not a weight";
  auto wt = cast<RankedTensorType>(w.getResult().getType());
  auto xt = dyn_cast<RankedTensorType>(mm->getOperand(0).getType());
  auto yt = dyn_cast<RankedTensorType>(mm->getResult(0).getType());
  if (wt.getRank() != 2 || !xt || !yt || xt.getRank() < 2 ||
      yt.getElementType() != xt.getElementType())
    return "not X [..., K] x W [K, N] of one float type";
  Type e = wt.getElementType();
  if (!(e.isF32() || e.isBF16() || e.isF16()) || xt.getElementType() != e)
    return "not a float32 / bfloat16 / float16 linear";
  if (w->hasAttr("h20.shard"))
    return "a tensor-parallel shard";
  if (w->hasAttr("h20.derive"))
    return "already derived";
  if (mm->hasAttr(at::kSplitRowsAttr) || mm->hasAttr(at::kSplitGatherAttr))
    return "split by query rows";
  if (wt.getDimSize(0) % 16 != 0 || wt.getDimSize(1) % 16 != 0)
    return "K and N are not multiples of 16";
  if (!w.getFileAttr() || !w.getOffsetAttr())
    return "the weight is not stored as raw bytes";
  if (heads.contains(mm))
    return "the LM head";
  return "";
}

/// An onnx.Weight of `w`'s bytes derived as `kind` (see onnx.Weight).
Value derived(OpBuilder &b, ox::WeightOp w, StringRef kind, RankedTensorType type) {
  auto wt = cast<RankedTensorType>(w.getResult().getType());
  Type source = wt.getElementType();
  if (auto st = w->getAttrOfType<TypeAttr>("h20.stored_type"))
    source = st.getValue();
  // W.fp8 and W.fp8.scale (h20-run's dummy weights give ".scale" tensors
  // block-scale values).
  std::string name = w.getName().str() + (kind == "fp8_block128" ? ".fp8" : ".fp8.scale");
  auto op = ox::WeightOp::create(b, w.getLoc(), type, b.getStringAttr(name),
                                 w.getFileAttr(), w.getOffsetAttr(), w.getLengthAttr());
  op->setAttr("h20.derive",
              b.getDictionaryAttr(
                  {b.getNamedAttr("kind", b.getStringAttr(kind)),
                   b.getNamedAttr("source_type", TypeAttr::get(source)),
                   b.getNamedAttr("source_shape", b.getDenseI64ArrayAttr(wt.getShape()))}));
  return op.getResult();
}

struct QuantizeLinearsPass : h20::impl::QuantizeLinearsBase<QuantizeLinearsPass> {
  using QuantizeLinearsBase::QuantizeLinearsBase;
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    SmallVector<ox::MatMulOp> all;
    f.walk([&](ox::MatMulOp mm) { all.push_back(mm); });
    const llvm::DenseSet<Operation *> heads = lmHeads(f);
    // One derived pair per stored weight, however many linears read it.
    llvm::DenseMap<Operation *, std::pair<Value, Value>> derivedOf;
    int64_t done = 0, kept = 0;
    std::string first; // the first linear kept float, and why
    for (ox::MatMulOp mm : all) {
      std::string why = whyNot(mm, heads);
      if (!why.empty()) {
        // Activation x activation products (attention's) are no linears.
        if (mm->getOperand(1).getDefiningOp<ox::WeightOp>() && kept++ == 0) {
          first = why;
          if (auto n = dyn_cast<NameLoc>(mm.getLoc()))
            first += ", node '" + n.getName().str() + "'";
        }
        continue;
      }
      auto w = mm->getOperand(1).getDefiningOp<ox::WeightOp>();
      auto wt = cast<RankedTensorType>(w.getResult().getType());
      const int64_t k = wt.getDimSize(0), n = wt.getDimSize(1);
      OpBuilder b(mm);
      auto [it, fresh] = derivedOf.try_emplace(w.getOperation());
      if (fresh) {
        OpBuilder at(w); // beside the weight: it dominates every reader
        at.setInsertionPointAfter(w);
        it->second = {
            derived(at, w, "fp8_block128",
                    RankedTensorType::get({n, k}, b.getType<Float8E4M3FNType>())),
            derived(at, w, "fp8_block128_scale",
                    RankedTensorType::get({(n + 127) / 128, (k + 127) / 128}, b.getF32Type()))};
      }
      auto [q, s] = it->second;
      auto y = ox::H20BlockScaledMatMulOp::create(b, mm.getLoc(), mm->getResultTypes(),
                                                  ValueRange{mm->getOperand(0), q, s});
      y->setAttr("block_n", b.getIntegerAttr(b.getIntegerType(64, true), 128));
      y->setAttr("block_k", b.getIntegerAttr(b.getIntegerType(64, true), 128));
      mm->replaceAllUsesWith(y->getResults());
      mm->erase();
      ++done;
    }
    // The stored weights only derived ones read now (after the loop:
    // derivedOf is keyed by them).
    for (auto &[w, pair] : derivedOf)
      if (w->use_empty())
        w->erase();
    // What h20-opt reports: how many, and why the first kept one was.
    Builder b(&getContext());
    SmallVector<NamedAttribute> summary{b.getNamedAttr("fp8", b.getI64IntegerAttr(done)),
                                        b.getNamedAttr("kept", b.getI64IntegerAttr(kept))};
    if (!first.empty())
      summary.push_back(b.getNamedAttr("first_kept", b.getStringAttr(first)));
    f->setAttr("h20.quantized_linears", b.getDictionaryAttr(summary));
  }
};

} // namespace
