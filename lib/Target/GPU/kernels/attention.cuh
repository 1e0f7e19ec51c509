//===- attention.cuh - flash-attention forward, instantiated by NVRTC -*- CUDA -*-===//
//
// A FlashAttention-2-style forward kernel (Dao, "FlashAttention-2: Faster
// Attention with Better Parallelism and Work Partitioning", 2023, Algorithm 1):
// one CTA owns BLOCK_M query rows of one (batch, head), streams the visible
// keys in tiles of BLOCK_N through shared memory, and keeps the running row
// maximum m, the running denominator l and the unnormalised output O in fp32
// registers (online softmax, Milakov & Gimelshein 2018). O is divided by l
// once, after the last tile.
//
// This file is compiled by NVRTC only (no host headers, no CUDA runtime
// headers): lib/Target/GPU/AttentionKernel.cpp embeds it and includes it once
// per variant after a block of macros:
//
//   H20_DTYPE        0 f32, 1 f16, 2 bf16 (inputs and output; accumulation fp32)
//   H20_HEAD_DIM     D, the Q/K head dimension: a multiple of 16 in [16, 256]
//   H20_HEAD_DIM_V   Dv, the V/O head dimension: a multiple of 16 in [16, 256]
//   H20_BLOCK_M      query rows per CTA
//   H20_BLOCK_N      keys per step
//   H20_THREADS      threads per CTA (a multiple of 32)
//   H20_KERNEL_NAME  name of the extern "C" entry (default h20_attention)
//   H20_KIND         0 (default): the bodies below; 1: the wgmma body (sm_90a,
//                    f16/bf16, D = Dv in {64, 128, 256}, 128 x BLOCK_N tiles,
//                    384 threads; see "wgmma body" further down)
//
// The bodies live in one file per kernel (after FlashAttention-3's
// hopper/): attention_common.cuh (parameters and shared helpers),
// attention_mma.cuh and attention_fma.cuh (kind 0), attention_wgmma.cuh
// (kind 1); this file includes them and instantiates one entry per
// inclusion.
//
// Two kind-0 bodies:
//   * f16/bf16: tensor cores through mma.sync.m16n8k16 (fp32 accumulate).
//     Each warp owns 16*MT consecutive query rows (MT = BLOCK_M / (16 *
//     warps), 1 or 2). S = Q K^T and O += P V are per-warp MMAs whose operands
//     come from shared memory by ldmatrix (V transposed by ldmatrix.trans);
//     P goes from the S accumulators to the A operand of P V in registers.
//     K/V tiles are double-buffered and fetched by cp.async (16-byte copies)
//     while the previous tile is computed. Shared-memory rows are padded by
//     8 elements (16 bytes), which makes ldmatrix conflict-free.
//   * f32: FMA. Each warp owns BLOCK_M / warps rows; lane t computes the
//     scores of keys t, t+32, ... and the output columns t, t+32, ...
//     (exact fp32 arithmetic: tensor-core tf32 would not meet fp32 accuracy).
//
// Launch: grid (ceil(sq / BLOCK_M), heads, batch) — so heads and batch are at
// most 65535 —, block (H20_THREADS), dynamic shared memory =
// AttentionVariant::smemBytes() (AttentionKernel.h), which mirrors the
// layouts below (TcLayout / FmaLayout) and must be kept in step. Row blocks
// run in reverse order (causal: the longest first). The entry is declared
// __launch_bounds__(H20_THREADS, 1): ptxas may use up to 255 registers.
//
// Measured on an H200 (test/tools/attention-check --sweep; bf16, causal,
// B=1, H=32, S=8192; the default variants of chooseAttentionVariant):
// 218 / 247 / 252 TFLOP/s at D = 64 / 128 / 256; f16 as bf16; f32 (FMA)
// 15.5 TFLOP/s at D = 128.
//
// Semantics (for every b < batch, h < heads, i < sq; g = heads / kv_heads,
// kh = h / g):
//   s_ij = scale * <q[b,h,i,:], k[b,kh,j,:]>;  with softcap c > 0,
//   s_ij = c * tanh(s_ij / c);  o[b,h,i,:] = sum_j softmax_j(s_ij) v[b,kh,j,:]
// over the visible keys j < skv. With causal = 1, query i sits at position
// i' = skv - sq + i (bottom-right alignment: chunked prefill has sq = chunk,
// skv = p0 + chunk) and sees keys j <= i'; a sliding window (window_left >= 0)
// further restricts it to j > i' - window_left. The window also applies
// without causal (then only the lower bound j > i' - window_left holds, with
// the same i' = skv - sq + i), as include/h20/Runtime/Cuda/AttentionParams.h
// states. A row with no visible key is written as zeros. Q/K/V/O are
// arbitrary strided views (strides in elements; 16-byte cp.async copies
// where the dim stride is 1 and rows are 16-byte aligned, element copies
// otherwise); every offset is computed in 64 bits.
//
//===----------------------------------------------------------------------===//

#ifndef H20_ATTENTION_CUH_BODIES
#define H20_ATTENTION_CUH_BODIES

#include "h20_attention_common.cuh"
#include "h20_attention_fma.cuh"
#include "h20_attention_mma.cuh"
#include "h20_attention_wgmma.cuh"

namespace h20attn {

/// Dispatches on the dtype: tensor cores for f16/bf16, FMA for f32.
template <int DT, int D, int DV, int BM, int BN, int NT>
__device__ __forceinline__ void attention(const H20AttnParams &p) {
  if constexpr (DT == 0)
    attentionFma<D, DV, BM, BN, NT>(p);
  else
    attentionTc<DT, D, DV, BM, BN, NT>(p);
}

} // namespace h20attn

#endif // H20_ATTENTION_CUH_BODIES

// ---- one instantiation per inclusion ------------------------------------------

#if !defined(H20_DTYPE) || !defined(H20_HEAD_DIM) || !defined(H20_HEAD_DIM_V) ||               \
    !defined(H20_BLOCK_M) || !defined(H20_BLOCK_N) || !defined(H20_THREADS)
#error "attention.cuh needs H20_DTYPE, H20_HEAD_DIM, H20_HEAD_DIM_V, H20_BLOCK_M, H20_BLOCK_N, H20_THREADS"
#endif
#ifndef H20_KERNEL_NAME
#define H20_KERNEL_NAME h20_attention
#endif
#ifndef H20_KIND
#define H20_KIND 0
#endif

#if H20_KIND == 1
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma attention kernel (H20_KIND 1) needs -arch=compute_90a"
#endif
#if H20_BLOCK_M != 128 || H20_THREADS != 384
#error "the wgmma attention kernel needs H20_BLOCK_M 128 and H20_THREADS 384"
#endif
#ifndef H20_STAGES
#define H20_STAGES 2
#endif
#ifndef H20_SCHEDULE
#define H20_SCHEDULE 0
#endif
/// Flash-attention forward (wgmma, producer + 2 consumer warpgroups) for one
/// (query block, head, batch) per CTA; see the wgmma section comment. The
/// parameter is __grid_constant__: the TMA copies read its tensor maps in
/// place.
extern "C" __global__ void __launch_bounds__(384, 1)
    H20_KERNEL_NAME(const __grid_constant__ H20AttnParams p) {
  h20attn::attentionWgmma<H20_DTYPE, H20_HEAD_DIM, H20_HEAD_DIM_V, H20_BLOCK_N, H20_STAGES,
                          H20_SCHEDULE>(p);
}
#else
/// Flash-attention forward for one (query block, head, batch) per CTA; see
/// the file comment for the launch geometry, shared memory and semantics.
extern "C" __global__ void __launch_bounds__(H20_THREADS, 1)
    H20_KERNEL_NAME(const H20AttnParams p) {
  h20attn::attention<H20_DTYPE, H20_HEAD_DIM, H20_HEAD_DIM_V, H20_BLOCK_M, H20_BLOCK_N,
                     H20_THREADS>(p);
}
#endif

#undef H20_KERNEL_NAME
#undef H20_KIND
#undef H20_DTYPE
#undef H20_HEAD_DIM
#undef H20_HEAD_DIM_V
#undef H20_BLOCK_M
#undef H20_BLOCK_N
#undef H20_THREADS
#undef H20_STAGES
#undef H20_SCHEDULE
