//===- fp8_quant.cuh - per-token-group FP8 quantisation, for NVRTC -*- CUDA -*-===//
//
// The activation side of a block-scaled FP8 linear (onnx.h20.BlockScaledMatMul
// on the GPU; the weight side is stored FP8 already). For X [M, K] (f32,
// f16 or bf16) and each block of 128 consecutive elements of a row,
// (i, kb) with kb = k / 128:
//   amax     = max(max |X[i, 128 kb .. 128 kb + 127]|, 1e-4)
//   s        = amax / 448                      (448: the largest e4m3 value)
//   Xq[i, k] = e4m3(X[i, k] / s)               (round to nearest even,
//                                               saturating to +-448)
//   Xs[kb, i] = s                              (kb-major, i fastest: the
//                                               VEC128 layout cuBLASLt reads)
// so X[i, k] ~ Xq[i, k] * Xs[kb, i]. This is DeepGEMM's per_token_cast_to_fp8
// (deepseek-ai/DeepGEMM, the 1e-4 floor included) and DeepSeek-V3's act_quant
// with float32 scales; the last block of a row may be partial (K % 128 != 0:
// the missing elements count as 0 and are not written).
//
// One warp per block, 4 elements per lane; 8 warps per CTA, grid
// ceil(M * ceil(K / 128) / 8) (the step's grid_div). A NaN element does
// not reach amax (fmaxf drops NaN) and quantises to the e4m3 NaN, which the
// GEMM propagates as the float GEMM would. An infinite element makes its
// block's scale infinite: it quantises to NaN and the rest of its block
// to 0 (the float GEMM would give inf there).
//
// Kernel parameters follow MLIR's expanded memref descriptor (what the GPU
// program's "launch" step passes): per memref (base, aligned, offset,
// sizes[rank], strides[rank]), strides in elements. Compiled by NVRTC only
// (no host headers): lib/Target/GPU/Fp8Kernel.cpp embeds this file as
// "h20_fp8_quant.cuh" with "h20_tensor_core.cuh" for the element types.
//
//===----------------------------------------------------------------------===//

#ifndef H20_FP8_QUANT_CUH
#define H20_FP8_QUANT_CUH

#include "h20_tensor_core.cuh"

#define H20_FP8_THREADS 256
#define H20_FP8_BLOCK 128

template <int DT>
__device__ __forceinline__ void h20Fp8Quantize(const void *x, i64 xOff, i64 m, i64 k, i64 xs0,
                                               i64 xs1, unsigned char *q, i64 qOff, i64 qs0,
                                               i64 qs1, float *s, i64 sOff, i64 ss0, i64 ss1) {
  const i64 kb = (k + H20_FP8_BLOCK - 1) / H20_FP8_BLOCK;
  const i64 group = (static_cast<i64>(blockIdx.x) * H20_FP8_THREADS + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (group >= m * kb)
    return;
  const i64 row = group / kb, blk = group % kb;
  const i64 col0 = blk * H20_FP8_BLOCK + lane * 4;
  const char *xb = static_cast<const char *>(x);
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const i64 col = col0 + e;
    v[e] = col < k ? H20Elem<DT>::load(xb + (xOff + row * xs0 + col * xs1) * H20Elem<DT>::bytes)
                   : 0.0f;
    amax = fmaxf(amax, fabsf(v[e]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float scale = h20Fp8Scale(amax);
  const u32 codes = h20Fp8Codes4(v[0], v[1], v[2], v[3], scale);
  unsigned char *qrow = q + qOff + row * qs0;
  if (qs1 == 1 && col0 + 3 < k && ((reinterpret_cast<u64>(qrow + col0) & 3) == 0)) {
    *reinterpret_cast<u32 *>(qrow + col0) = codes;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (col0 + e < k)
        qrow[(col0 + e) * qs1] = static_cast<unsigned char>(codes >> (8 * e));
  }
  if (lane == 0)
    s[sOff + blk * ss0 + row * ss1] = scale;
}

/// X [M, K] (DT), Xq [M, K] (e4m3 bytes), Xs [ceil(K / 128), M] f32.
#define H20_FP8_QUANTIZE(NAME, DT, T)                                                              \
  extern "C" __global__ void __launch_bounds__(H20_FP8_THREADS)                                    \
      NAME(const T *x_base, const T *x, i64 x_off, i64 x_d0, i64 x_d1, i64 x_s0, i64 x_s1,         \
           unsigned char *q_base, unsigned char *q, i64 q_off, i64 q_d0, i64 q_d1, i64 q_s0,      \
           i64 q_s1, float *s_base, float *s, i64 s_off, i64 s_d0, i64 s_d1, i64 s_s0,             \
           i64 s_s1) {                                                                             \
    h20Fp8Quantize<DT>(x, x_off, x_d0, x_d1, x_s0, x_s1, q, q_off, q_s0, q_s1, s, s_off, s_s0,    \
                       s_s1);                                                                      \
  }
H20_FP8_QUANTIZE(h20_fp8_quantize_f32, 0, float)
H20_FP8_QUANTIZE(h20_fp8_quantize_f16, 1, u16)
H20_FP8_QUANTIZE(h20_fp8_quantize_bf16, 2, u16)

#endif // H20_FP8_QUANT_CUH
