//===- attention_fma.cuh - the exact f32 body (FMA) ------------*- CUDA -*-===//
//
// AttentionVariant kind 0 with H20_DTYPE 0: fp32 in, fp32 arithmetic, fp32
// out (tensor-core tf32 would not meet fp32 accuracy); see attention.cuh's
// file comment. Embedded as "h20_attention_fma.cuh".
//
//===----------------------------------------------------------------------===//
#ifndef H20_ATTENTION_FMA_CUH
#define H20_ATTENTION_FMA_CUH

#include "h20_attention_common.cuh"

namespace h20attn {

/// f32 body: Q [BM][D], K [BN][D+1] (odd pitch: lanes read different rows),
/// V [BN][DV], P [BM][BN]; 32-bit elements.
template <int D, int DV, int BM, int BN> struct FmaLayout {
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + BM * D;
  static constexpr int kV = kK + BN * (D + 1);
  static constexpr int kP = kV + BN * DV;
  static constexpr int kElems = kP + BM * BN;
  static constexpr long long kBytes = 4LL * kElems;
};

// ---- f32: FMA -------------------------------------------------------------------

/// FMA body for DT = 0 (fp32 in, fp32 out, fp32 arithmetic). See the file comment.
template <int D, int DV, int BM, int BN, int NT>
__device__ __forceinline__ void attentionFma(const H20AttnParams &p) {
  typedef FmaLayout<D, DV, BM, BN> L;
  constexpr int kWarps = NT / 32;
  constexpr int R = BM / kWarps;      // rows per warp
  constexpr int NB = BN / 32;         // keys per lane per tile
  constexpr int NC = (DV + 31) / 32;  // output columns per lane
  static_assert(NT % 32 == 0 && R * kWarps == BM, "H20_BLOCK_M: a multiple of the warps");
  static_assert(BN % 32 == 0, "H20_BLOCK_N: a multiple of 32 for f32");

  float *sQ = reinterpret_cast<float *>(h20SmemRaw) + L::kQ;
  float *sK = reinterpret_cast<float *>(h20SmemRaw) + L::kK;
  float *sV = reinterpret_cast<float *>(h20SmemRaw) + L::kV;
  float *sP = reinterpret_cast<float *>(h20SmemRaw) + L::kP;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const i64 mBlock = i64(gridDim.x) - 1 - blockIdx.x;
  const i64 h = blockIdx.y, b = blockIdx.z;
  const i64 group = p.kv_heads > 0 ? p.heads / p.kv_heads : 1;
  const i64 kh = h / (group > 0 ? group : 1);
  const i64 m0 = mBlock * BM;
  const i64 lastRow = imin(m0 + BM, p.sq) - 1;
  const KeyRange keys(p, m0, BM);
  const i64 nTiles = keys.tiles(BN);

  const float *gQ = headBase<float>(p.q, p.q_stride, b, h);
  const float *gK = headBase<float>(p.k, p.k_stride, b, kh);
  const float *gV = headBase<float>(p.v, p.v_stride, b, kh);
  loadTileScalar<float, BM, D, D, NT>(sQ, gQ, p.q_stride[2], p.q_stride[3], m0, p.sq);

  const int wRow = warp * R;
  float o[R][NC], rowMax[R], rowSum[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int c = 0; c < NC; ++c)
      o[r][c] = 0.f;
    rowMax[r] = negInf();
    rowSum[r] = 0.f;
  }
  // Logit scaling (base 2): s * scaleLog2, or capOut * tanh(s * capIn).
  const float softcap = p.softcap, scaleLog2 = p.scale * kLog2e;
  const float capIn = softcap > 0.f ? p.scale / softcap : 0.f, capOut = softcap * kLog2e;

  for (i64 j = 0; j < nTiles; ++j) {
    const i64 n0 = keys.begin + j * BN;
    __syncthreads(); // previous tile fully consumed
    loadTileScalar<float, BN, D, D + 1, NT>(sK, gK, p.k_stride[2], p.k_stride[3], n0, p.skv);
    loadTileScalar<float, BN, DV, DV, NT>(sV, gV, p.v_stride[2], p.v_stride[3], n0, p.skv);
    __syncthreads();

    float s[R][NB];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NB; ++c)
        s[r][c] = 0.f;
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      float kr[NB];
#pragma unroll
      for (int c = 0; c < NB; ++c)
        kr[c] = sK[(lane + 32 * c) * (D + 1) + d];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float q = sQ[(wRow + r) * D + d];
#pragma unroll
        for (int c = 0; c < NB; ++c)
          s[r][c] = fmaf(q, kr[c], s[r][c]);
      }
    }

    const bool mask = keys.tileNeedsMask(n0, BN, m0, lastRow, p.skv);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int lo = 0, hi = BN;
      if (mask)
        keys.visibleColumns(m0 + wRow + r, n0, BN, p.skv, &lo, &hi);
      float mx = rowMax[r];
#pragma unroll
      for (int c = 0; c < NB; ++c) {
        const int col = lane + 32 * c;
        float x = softcap > 0.f ? softcapLogit2(s[r][c], capIn, capOut) : s[r][c] * scaleLog2;
        if (col < lo || col >= hi)
          x = negInf();
        s[r][c] = x;
        mx = fmaxf(mx, x);
      }
#pragma unroll
      for (int sh = 16; sh > 0; sh /= 2)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, sh));
      const float ref = mx == negInf() ? 0.f : mx;
      const float alpha = fastExp2(rowMax[r] - ref);
      rowMax[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < NB; ++c) {
        const float e = fastExp2(s[r][c] - ref);
        sP[(wRow + r) * BN + lane + 32 * c] = e;
        sum += e;
      }
      rowSum[r] = rowSum[r] * alpha + sum;
#pragma unroll
      for (int c = 0; c < NC; ++c)
        o[r][c] *= alpha;
    }
    __syncwarp();

#pragma unroll 2
    for (int n = 0; n < BN; ++n) {
      float vr[NC];
#pragma unroll
      for (int c = 0; c < NC; ++c)
        vr[c] = lane + 32 * c < DV ? sV[n * DV + lane + 32 * c] : 0.f;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float pr = sP[(wRow + r) * BN + n];
#pragma unroll
        for (int c = 0; c < NC; ++c)
          o[r][c] = fmaf(pr, vr[c], o[r][c]);
      }
    }
  }

  float *gO = const_cast<float *>(headBase<float>(p.o, p.o_stride, b, h));
  const i64 os = p.o_stride[2], od = p.o_stride[3];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float l = rowSum[r];
#pragma unroll
    for (int sh = 16; sh > 0; sh /= 2)
      l += __shfl_xor_sync(0xffffffffu, l, sh);
    const float inv = l > 0.f ? fastRcp(l) : 0.f;
    const i64 row = m0 + wRow + r;
    if (row < p.sq) {
#pragma unroll
      for (int c = 0; c < NC; ++c)
        if (lane + 32 * c < DV)
          gO[row * os + i64(lane + 32 * c) * od] = o[r][c] * inv;
    }
  }
}

} // namespace h20attn

#endif // H20_ATTENTION_FMA_CUH
