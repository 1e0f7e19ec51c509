//===- AttnToLinalg.h - reference decompositions of the attn ops -*- C++ -*-===//
#ifndef H20_LIB_CONVERSION_TOLINALG_ATTNTOLINALG_H
#define H20_LIB_CONVERSION_TOLINALG_ATTNTOLINALG_H

#include "h20/Conversion/SparseAttentionKernelShape.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"

namespace h20::lowering {

/// Each returns the value replacing the op's result (built at `b`'s
/// insertion point), or failure after emitting an error on the op.
mlir::FailureOr<mlir::Value> lowerRmsNorm(mlir::OpBuilder &b, attn::RmsNormOp op);
/// attn.rms_scale: the sum of squares of `input`'s rows in the compute
/// type (as lowerRmsNorm), then value * rsqrt(mean + eps) per element.
mlir::FailureOr<mlir::Value> lowerRmsScale(mlir::OpBuilder &b, attn::RmsScaleOp op);
mlir::FailureOr<mlir::Value> lowerRope(mlir::OpBuilder &b, attn::RopeOp op);
mlir::FailureOr<llvm::SmallVector<mlir::Value>> lowerRopeTable(mlir::OpBuilder &b,
                                                               attn::RopeTableOp op);
mlir::FailureOr<mlir::Value> lowerRopeApply(mlir::OpBuilder &b, attn::RopeApplyOp op);
mlir::FailureOr<mlir::Value> lowerAttention(mlir::OpBuilder &b, attn::AttentionOp op);
/// attn.attention_scores: the [B, Hq, S_q, S_kv] matrix at the op's stage
/// (the same score decomposition as lowerAttention), on every target.
mlir::FailureOr<mlir::Value> lowerAttentionScores(mlir::OpBuilder &b,
                                                  attn::AttentionScoresOp op);

/// DeepSeek-V4.1's attention and indexer (SparseAttnToLinalg.cpp): memory
/// linear in S, see the ops' descriptions.
mlir::FailureOr<mlir::Value> lowerSparseAttention(mlir::OpBuilder &b, attn::SparseAttentionOp op);
mlir::FailureOr<mlir::Value> lowerIndexerTopK(mlir::OpBuilder &b, attn::IndexerTopKOp op);
mlir::FailureOr<mlir::Value> lowerIndexerCandidates(mlir::OpBuilder &b, attn::IndexerCandidatesOp op);

/// The `library_call` names of the generics the GPU target implements with a
/// routine instead of running their body.
inline constexpr llvm::StringLiteral kGemmLibraryCall = "h20_gemm";
inline constexpr llvm::StringLiteral kAttentionLibraryCall = "h20_attention";
/// Sum over the tensor-parallel ranks (attn.all_reduce): one NCCL all-reduce.
inline constexpr llvm::StringLiteral kAllReduceLibraryCall = "h20_all_reduce";
/// The attribute (a dictionary: causal, alignment, window, softcap, scale,
/// kv_group, tiles, kernel, and kv_layer when K is a layer's view of the
/// KV cache) an `h20_attention` generic carries.
inline constexpr llvm::StringLiteral kAttentionAttrs = "h20.attention";
/// The layer (i64) on the tensor.extract_slice a kv.view lowers to.
inline constexpr llvm::StringLiteral kKvLayerAttr = "h20.kv_layer";

/// Unit attribute a target puts on an attn.attention its kernel cannot run
/// (unsupported head dim, alignment, ...): lowered by decomposition instead.
inline constexpr llvm::StringLiteral kDecomposeAttention = "h20.decompose";

/// attn.attention as one `h20_attention` library-call generic: ins q
/// [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv]; outs an empty
/// [B, Hq, Sq, Dv]. Every operand gets its own loop dims (the generic is a
/// carrier, not a computation); its body is a placeholder using every
/// operand so no canonicalisation drops one. With a mask or sink operand
/// (the kernel has neither) or the kDecomposeAttention attribute, returns
/// the reference decomposition (lowerAttention) instead.
mlir::FailureOr<mlir::Value> lowerAttentionToLibraryCall(mlir::OpBuilder &b,
                                                         attn::AttentionOp op);

/// `library_call` of the GPU target's indexer kernel (lib/Target/GPU/kernels/
/// indexer.cuh) and the attribute it carries: a dictionary of mode (0
/// indexer_topk, 1 indexer_topk with candidates, 2 indexer_candidates),
/// ratio, block (candidate block size; 1 for mode 0), scale.
inline constexpr llvm::StringLiteral kIndexerLibraryCall = "h20_indexer";
inline constexpr llvm::StringLiteral kIndexerAttrs = "h20.indexer";
/// CTAs of the indexer kernel's persistent grid, the rows of its scratch,
/// when h20-choose-attention-kernels recorded none (`h20.kernel = {ctas}`):
/// two per SM of an H200.
inline constexpr int64_t kIndexerCtas = 264;

/// attn.indexer_topk / attn.indexer_candidates as one `h20_indexer`
/// library-call generic (a carrier, like lowerAttentionToLibraryCall's):
/// ins q [S, Hi, Di], keys [T, Di], weights [S, Hi] (and candidates [S, KB]
/// for mode 1); outs the result [S, K] i64 and a float32 scratch
/// [kIndexerCtas, W] (W = T + ceil(T / block) in mode 2, max(T, KB * block)
/// in mode 1, else T) that
/// bufferization places in the arena: memory linear in S, never S x T.
mlir::FailureOr<mlir::Value> lowerIndexerToLibraryCall(mlir::OpBuilder &b, mlir::Operation *op);

/// `library_call` of the GPU target's sparse-attention kernel
/// (lib/Target/GPU/kernels/sparse_attention.cuh) and the attribute it
/// carries: a dictionary of scale (f64) and window (i64).
inline constexpr llvm::StringLiteral kSparseAttentionLibraryCall = "h20_sparse_attention";
inline constexpr llvm::StringLiteral kSparseAttentionAttrs = "h20.sparse_attention";
/// What that kernel takes: h20::sparseAttentionKernelApplies
/// (h20/Conversion/SparseAttentionKernelShape.h).
using h20::kSparseAttentionMaxDim;
using h20::kSparseAttentionMaxSlots;

/// attn.sparse_attention as one `h20_sparse_attention` library-call generic
/// (a carrier, like lowerAttentionToLibraryCall's): ins q [S, H, D], latent
/// [S, D], sink [H] (and compressed [T, D], indices [S, K] i64); outs an
/// empty result [S, H, D]. Only where the kernel applies: query, latent,
/// compressed and result of one 16-bit float type (f16 or bf16), an f32 /
/// f16 / bf16 sink, static H and D <= kSparseAttentionMaxDim, window + K <=
/// kSparseAttentionMaxSlots where K is static (a dynamic K = min(topk, T)
/// is checked by the GPU target once the prompt's chunk fixes it, and a K
/// that then does not fit is a compile error naming the sizes); otherwise
/// the linear-memory decomposition (lowerSparseAttention), which is what
/// float32 models run.
mlir::FailureOr<mlir::Value> lowerSparseAttentionToLibraryCall(mlir::OpBuilder &b,
                                                               attn::SparseAttentionOp op);

} // namespace h20::lowering

#endif // H20_LIB_CONVERSION_TOLINALG_ATTNTOLINALG_H
