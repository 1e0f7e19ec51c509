//===- ChooseAttentionKernels.cpp - one kernel choice per attention, in IR -===//
//
// Before, the GPU target decided an attention's route in several places:
// a walk that marked the ops to decompose, the host program (which chose
// the variant again, with the tile hint), and an environment variable
// (H20_ATTENTION_KERNEL). This pass decides once and records the decision;
// later code only reads it. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Conversion/Passes.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/IndexerKernel.h"
#include "h20/Target/MoeKernel.h"
#include "h20/Target/SparseAttentionKernel.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace h20 {
#define GEN_PASS_DEF_CHOOSEATTENTIONKERNELS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

/// Why the attention kernels cannot run `op` apart from its element type
/// and head dims (chooseAttentionVariant checks those), or "" when they
/// can: they take no mask or sink operand, no window without causal
/// masking, no top-left causal alignment with S_q != S_kv (the kernels are
/// bottom-right), only static batch and head counts of at most 65535 and
/// static head dims.
std::string whyNoKernel(h20::attn::AttentionOp op) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  auto k = cast<RankedTensorType>(op.getKey().getType());
  auto v = cast<RankedTensorType>(op.getValue().getType());
  if (op.getMask())
    return "a mask operand (the kernels take causal / window attributes only)";
  if (op.getSink())
    return "a sink operand";
  if (op.getWindow() && !op.getCausal())
    return "a window without causal masking";
  if (op.getCausal() && op.getAlignment() == h20::attn::CausalAlignment::top_left &&
      (q.isDynamicDim(2) || k.isDynamicDim(2) || q.getDimSize(2) != k.getDimSize(2)))
    return "top-left causal alignment with S_q != S_kv (the kernels are bottom-right)";
  for (int64_t d : {q.getDimSize(0), q.getDimSize(1)})
    if (ShapedType::isDynamic(d) || d > 65535)
      return "a dynamic or > 65535 batch or head count";
  if (q.isDynamicDim(3) || v.isDynamicDim(3))
    return "a dynamic head dim";
  return "";
}

int dtypeOf(Type e) { return e.isF32() ? 0 : e.isF16() ? 1 : e.isBF16() ? 2 : -1; }

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

NamedAttribute i64(Builder &b, StringRef name, int64_t v) {
  return b.getNamedAttr(name, b.getI64IntegerAttr(v));
}

/// The integer `key` of the h20.chunked attribute (h20-chunked-prefill's
/// chunk, capacity) of `op`'s function; -1 when there is none.
int64_t chunkedInt(Operation *op, StringRef key) {
  auto func = op->getParentOfType<func::FuncOp>();
  auto info = func ? func->getAttrOfType<DictionaryAttr>("h20.chunked") : DictionaryAttr();
  auto v = info ? info.getAs<IntegerAttr>(key) : IntegerAttr();
  return v ? v.getInt() : -1;
}

/// The most entries (compressed keys) an indexer over `keys` sees: their
/// static count, or in a chunked prefill (the function's h20.chunked
/// capacity of positions) capacity / ratio, the keys of the last chunk;
/// -1 when unknown (a whole-prompt program of dynamic length).
int64_t indexerEntriesBound(Operation *op, Value keys, int64_t ratio) {
  auto kt = cast<RankedTensorType>(keys.getType());
  if (!kt.isDynamicDim(0))
    return kt.getDimSize(0);
  const int64_t capacity = chunkedInt(op, "capacity");
  if (capacity <= 0 || ratio < 1)
    return -1;
  return capacity / ratio;
}

/// DeepSeek-V4.1's lightning indexer (attn.indexer_topk with or without
/// candidates: modes 0 and 1; attn.indexer_candidates: mode 2). Records
/// `h20.kernel = {ctas, kind, ...}`: `ctas` the FMA kernel's persistent
/// grid (two CTAs per SM of the target); kind "mma" with the tensor-core
/// kernel's padded_heads, padded_dim, cap (candidate buffer entries per
/// query row), ctas_per_sm (its __launch_bounds__ residency, from the
/// target's shared memory) and, in mode 1, entries (the keys its shared
/// memory was sized for) and gather (whether it gathers the picked
/// entries), when chooseIndexerMma takes the op; else kind
/// "fma" (indexer.cuh's kernel).
void chooseIndexer(Operation *op, const h20::TargetDescription &desc) {
  auto topk = dyn_cast<h20::attn::IndexerTopKOp>(op);
  auto cands = dyn_cast<h20::attn::IndexerCandidatesOp>(op);
  const int mode = cands ? 2 : topk.getCandidates() ? 1 : 0;
  const int64_t ratio = static_cast<int64_t>(topk ? topk.getRatio() : cands.getRatio());
  const int64_t block = cands                  ? static_cast<int64_t>(cands.getBlockSize())
                        : topk.getBlockSize() ? static_cast<int64_t>(*topk.getBlockSize())
                                              : 1;
  auto q = cast<RankedTensorType>(op->getOperand(0).getType());
  auto k = cast<RankedTensorType>(op->getOperand(1).getType());
  auto w = cast<RankedTensorType>(op->getOperand(2).getType());
  auto rt = cast<RankedTensorType>(op->getResult(0).getType());
  Builder b(op->getContext());
  SmallVector<NamedAttribute> fields{i64(b, "ctas", 2 * desc.sms)};
  const int64_t entries = mode == 1 ? indexerEntriesBound(op, op->getOperand(1), ratio) : -1;
  // Mode 1: the candidate blocks per row, static here or before a
  // tensor.cast (V4.1: indexer_candidates' [S, 2048]); 0 when unknown (no
  // gathering).
  int64_t candidateBlocks = 0;
  for (Value c = mode == 1 ? topk.getCandidates() : Value(); c && candidateBlocks == 0;) {
    if (auto ct = cast<RankedTensorType>(c.getType()); !ct.isDynamicDim(1))
      candidateBlocks = ct.getDimSize(1);
    auto castOp = c.getDefiningOp<tensor::CastOp>();
    c = castOp ? castOp.getSource() : Value();
  }
  h20::IndexerKernel mma;
  const bool useMma =
      !rt.isDynamicDim(1) && !q.isDynamicDim(1) && !q.isDynamicDim(2) &&
      h20::chooseIndexerMma(mode, dtypeOf(q.getElementType()), dtypeOf(k.getElementType()),
                            dtypeOf(w.getElementType()), q.getDimSize(1), q.getDimSize(2),
                            rt.getDimSize(1), mma, block, entries, desc.smemPerBlock,
                            desc.smemPerSM, candidateBlocks);
  fields.push_back(b.getNamedAttr("kind", b.getStringAttr(useMma ? "mma" : "fma")));
  if (useMma) {
    fields.append({i64(b, "padded_heads", mma.paddedHeads), i64(b, "padded_dim", mma.paddedDim),
                   i64(b, "cap", mma.cap), i64(b, "ctas_per_sm", mma.ctasPerSm)});
    if (mode == 1) {
      fields.push_back(i64(b, "entries", entries));
      fields.push_back(b.getNamedAttr("gather", b.getBoolAttr(mma.gather)));
    }
  }
  op->setAttr("h20.kernel", b.getDictionaryAttr(fields));
}

/// DeepSeek-V4.1's sparse attention, recorded as `h20.kernel = {kind,
/// padded_dim, heads_per_cta, threads}`: kind "wgmma"
/// (sparse_attention_wgmma.cuh, 384 threads) on Hopper targets (compute
/// capability 9.x) where it takes the padded head dim (128, 256, 512) and
/// its key slots fit the shared memory, else "mma" (sparse_attention.cuh,
/// mma.sync, 256 threads). Measured on an H200 at V4.1-Flash shapes
/// (bench/results/issue31-h200-sparse-halves): wgmma 33.8 ms vs mma 66.1 ms
/// at 128K, 0.50-0.51x at 8K-128K. `mmaOnly` (the pass's kernel=mma)
/// keeps "mma". An op whose
/// key slots (window + picks) fit neither kernel's shared memory is an
/// error here, at compile time, naming the op.
LogicalResult chooseSparseAttention(h20::attn::SparseAttentionOp op,
                                    const h20::TargetDescription &desc, bool mmaOnly) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  const int64_t window = static_cast<int64_t>(op.getWindow());
  // The picks per query (a dynamic count, e.g. behind a tensor.cast, is
  // checked by the host program once known).
  int64_t picks = 0;
  if (Value idx = op.getIndices())
    picks = cast<RankedTensorType>(idx.getType()).getDimSize(1);
  if (q.isDynamicDim(1) || q.isDynamicDim(2))
    return op.emitError("GPU target: sparse attention heads and head dim must be static");
  const int64_t dim = q.getDimSize(2);
  const int64_t paddedDim = h20::sparseAttentionPaddedDim(dim);
  const int64_t slots = window + (ShapedType::isDynamic(picks) ? 0 : picks);
  const int64_t smemLimit = std::min<int64_t>(desc.smemPerBlock, h20::kSparseAttentionSmemLimit);
  auto fits = [&](int kind) {
    return h20::sparseAttentionSmemBytes(paddedDim, slots, kind) <= smemLimit;
  };
  if (dim > h20::kSparseAttentionMaxHeadDim || !fits(0))
    return op.emitError("GPU target: sparse attention with head dim ")
           << dim << " and " << slots << " key slots does not fit the kernel's shared memory";
  const bool wgmma = !mmaOnly && desc.computeCapability / 10 == 9 &&
                     h20::sparseAttentionWgmmaTakes(paddedDim) && fits(1);
  h20::SparseAttentionKernel kernel;
  kernel.kind = wgmma ? 1 : 0;
  Builder b(op.getContext());
  op->setAttr("h20.kernel",
              b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr(wgmma ? "wgmma" : "mma")),
                                   i64(b, "padded_dim", paddedDim),
                                   i64(b, "heads_per_cta", h20::kSparseAttentionHeadsPerCta),
                                   i64(b, "threads", kernel.threads())}));
  return success();
}

/// DeepSeek-V4.1's routed experts (onnx.h20.RoutedExperts[Mxfp4]): the
/// token tile the host program runs them in (moeTileTokens for the
/// function's prefill chunk, h20.chunked's) and the expert GEMM, recorded
/// as `h20.kernel = {tile_tokens, expert_gemm}`: "mxfp4_wgmma"
/// (moe_fp4_gemm.cuh's warpgroup-MMA kernel, the weights dequantised in its
/// load path) for bf16 activations on Hopper targets (compute capability
/// 9.x) unless `mmaOnly` (the pass's kernel=mma), "mxfp4" (the same
/// dequantisation, mma.sync) for other MXFP4 cases, or "cublaslt" (grouped
/// GEMMs on float weights). With `fp8` (the pass's expert-gemm=fp8, an
/// explicit choice: the token rows are quantised), "mxfp4_fp8"
/// (moe_fp4_gemm.cuh's FP8 kernel) where the wgmma kernel would run and
/// both GEMMs' K (hidden and intermediate) are multiples of 128; an op that
/// cannot gets a remark saying why and keeps its bf16 choice. Ops of
/// dynamic weight shapes get nothing (the lowering rejects them).
void chooseRoutedExperts(Operation *op, const h20::TargetDescription &desc, bool mmaOnly,
                         bool fp8) {
  const bool mxfp4 = isa<h20::onnx::H20RoutedExpertsMxfp4Op>(op);
  auto x = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto router = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
  auto w1 = dyn_cast<RankedTensorType>(op->getOperand(3).getType());
  auto topK = op->getAttrOfType<IntegerAttr>("top_k");
  if (!x || !router || !w1 || !topK || x.getRank() != 2 || x.isDynamicDim(1) ||
      !router.hasStaticShape() || router.getRank() != 2 || !w1.hasStaticShape() ||
      w1.getRank() != 3)
    return;
  const int64_t dm = x.getDimSize(1), e = router.getDimSize(1);
  // Float W1 [E, Dm, I]; MXFP4 W1 [E, I, Dm / 2].
  const int64_t inter = mxfp4 ? w1.getDimSize(1) : w1.getDimSize(2);
  const int64_t es = x.getElementType().getIntOrFloatBitWidth() / 8;
  const bool wgmma = mxfp4 && !mmaOnly && desc.computeCapability / 10 == 9 &&
                     h20::moeFp4GemmWgmmaTakes(dtypeOf(x.getElementType()));
  const int64_t kb = h20::kMoeFp4GemmFp8BlockK;
  const bool fp8Fits = wgmma && dm % kb == 0 && inter % kb == 0;
  if (fp8 && mxfp4 && !fp8Fits)
    op->emitRemark("expert-gemm=fp8: these MXFP4 experts keep bf16 GEMMs (")
        << (wgmma ? "hidden " + std::to_string(dm) + " and intermediate " + std::to_string(inter) +
                        " must be multiples of 128"
                  : std::string("FP8 experts need the wgmma kernels: bf16 tokens, a Hopper "
                                "target, kernel=auto"))
        << ")";
  const char *gemm = fp8 && fp8Fits ? "mxfp4_fp8"
                     : wgmma        ? "mxfp4_wgmma"
                     : mxfp4        ? "mxfp4"
                                    : "cublaslt";
  Builder b(op->getContext());
  op->setAttr("h20.kernel",
              b.getDictionaryAttr(
                  {i64(b, "tile_tokens",
                       h20::moeTileTokens(e, topK.getInt(), dm, inter, es,
                                          std::max<int64_t>(chunkedInt(op, "chunk"), 0))),
                   b.getNamedAttr("expert_gemm", b.getStringAttr(gemm))}));
}

struct ChooseAttentionKernelsPass
    : h20::impl::ChooseAttentionKernelsBase<ChooseAttentionKernelsPass> {
  using ChooseAttentionKernelsBase::ChooseAttentionKernelsBase;

  void runOnOperation() override {
    if (expertGemm != "bf16" && expertGemm != "fp8") {
      getOperation().emitError("h20-choose-attention-kernels: expert-gemm must be bf16 or fp8, "
                               "got '")
          << expertGemm << "'";
      return signalPassFailure();
    }
    if (kernel != "auto" && kernel != "mma") {
      getOperation().emitError("h20-choose-attention-kernels: kernel must be auto or mma, got '")
          << kernel << "'";
      return signalPassFailure();
    }
    const h20::TargetDescription *desc = h20::findTarget(target);
    if (!desc || desc->computeCapability <= 0) {
      getOperation().emitError("h20-choose-attention-kernels: unknown GPU target '")
          << target << "'";
      return signalPassFailure();
    }
    // DeepSeek-V4.1's kernels.
    bool failed = false;
    getOperation().walk([&](Operation *op) {
      if (isa<h20::attn::IndexerTopKOp, h20::attn::IndexerCandidatesOp>(op))
        chooseIndexer(op, *desc);
      else if (auto sparse = dyn_cast<h20::attn::SparseAttentionOp>(op))
        failed |= mlir::failed(chooseSparseAttention(sparse, *desc, kernel == "mma"));
      else if (isa<h20::onnx::H20RoutedExpertsOp, h20::onnx::H20RoutedExpertsMxfp4Op>(op))
        chooseRoutedExperts(op, *desc, kernel == "mma", expertGemm == "fp8");
    });
    if (failed)
      return signalPassFailure();
    auto family =
        kernel == "mma" ? h20::AttentionKernelFamily::Mma : h20::AttentionKernelFamily::Auto;
    getOperation().walk([&](h20::attn::AttentionOp op) {
      Builder b(op.getContext());
      auto q = cast<RankedTensorType>(op.getQuery().getType());
      auto v = cast<RankedTensorType>(op.getValue().getType());
      int dtype = dtypeOf(q.getElementType());
      std::string why = dtype < 0 ? "element type " + typeName(q.getElementType()) +
                                        " (the kernels take f32, f16, bf16)"
                                  : whyNoKernel(op);
      std::optional<h20::AttentionVariant> variant;
      if (why.empty()) {
        int64_t hintM = 0, hintN = 0;
        if (auto t = op->getAttrOfType<h20::hw::TilesAttr>("h20.tiles")) {
          hintM = t.getBlockM();
          hintN = t.getBlockN();
        }
        std::string error;
        variant = h20::chooseAttentionVariant(dtype, q.getDimSize(3), v.getDimSize(3), hintM,
                                              hintN, &error, family);
        if (!variant)
          why = error.empty() ? "no kernel variant for these head dims" : error;
      }
      if (!variant) {
        // The reason stays in the IR: `--emit=linalg` and the compile log
        // say which attention left the fast path and why.
        op->setAttr("h20.decompose", b.getStringAttr(why));
        return;
      }
      const char *kind = variant->kind == 1 ? "wgmma" : variant->dtype == 0 ? "fma" : "mma";
      op->setAttr("h20.kernel",
                  b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr(kind)),
                                       b.getNamedAttr("block_m", b.getI64IntegerAttr(variant->blockM)),
                                       b.getNamedAttr("block_n", b.getI64IntegerAttr(variant->blockN)),
                                       b.getNamedAttr("threads", b.getI64IntegerAttr(variant->threads)),
                                       b.getNamedAttr("stages", b.getI64IntegerAttr(variant->stages)),
                                       b.getNamedAttr("schedule",
                                                      b.getI64IntegerAttr(variant->schedule))}));
    });
  }
};

} // namespace
