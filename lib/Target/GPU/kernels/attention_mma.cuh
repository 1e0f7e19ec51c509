//===- attention_mma.cuh - the FA2-style mma.sync body (f16/bf16) ----*- CUDA -*-===//
//
// AttentionVariant kind 0 with H20_DTYPE 1 or 2: the tensor-core body of
// attention.cuh's file comment (FlashAttention-2 forward through
// mma.sync.m16n8k16). Embedded as "h20_attention_mma.cuh".
//
//===----------------------------------------------------------------------===//
#ifndef H20_ATTENTION_MMA_CUH
#define H20_ATTENTION_MMA_CUH

#include "h20_attention_common.cuh"

namespace h20attn {

// ---- shared-memory layouts (mirrored by AttentionVariant::smemBytes) --------

/// f16/bf16 body: Q (later O staging) [BM][QS], then 2 K buffers [BN][KS],
/// then 2 V buffers [BN][VS]; 16-bit elements, rows padded by 8 elements.
template <int D, int DV, int BM, int BN> struct TcLayout {
  static constexpr int QS = (D > DV ? D : DV) + 8;
  static constexpr int KS = D + 8;
  static constexpr int VS = DV + 8;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + BM * QS;
  static constexpr int kV = kK + 2 * BN * KS;
  static constexpr int kElems = kV + 2 * BN * VS;
  static constexpr long long kBytes = 2LL * kElems;
};

// ---- f16 / bf16: tensor cores -------------------------------------------------

/// Turns the raw scores s[MT][NS][4] (the mma C fragments of rows
/// m0 + wRow + 16 mt + g (+ 8), columns n0 + 8 n + 2 t4 (+ 1)) into base-2
/// logits, s * scaleLog2 or capOut * tanh(s * capIn) with a softcap, and
/// sets the keys a row does not see (KeyRange) to -inf. Branches are
/// uniform: the softcap is rare, masks touch only boundary tiles.
template <int MT, int NS>
__device__ __forceinline__ void tcLogits(float (&s)[MT][NS][4], const KeyRange &keys,
                                         float softcap, float scaleLog2, float capIn, float capOut,
                                         i64 n0, int bn, i64 m0, i64 lastRow, i64 skv, int wRow,
                                         int g, int t4) {
  if (softcap > 0.f) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[mt][n][e] = softcapLogit2(s[mt][n][e], capIn, capOut);
  } else {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[mt][n][e] *= scaleLog2;
  }
  if (!keys.tileNeedsMask(n0, bn, m0, lastRow, skv))
    return;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int lo, hi;
      keys.visibleColumns(m0 + wRow + mt * 16 + g + 8 * r, n0, bn, skv, &lo, &hi);
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int col = n * 8 + 2 * t4 + c;
          if (col < lo || col >= hi)
            s[mt][n][2 * r + c] = negInf();
        }
    }
}

/// Stores ROWS rows [wRow, wRow + ROWS) of the staged O tile `sO` (row
/// stride QS elements) as rows m0 + wRow.. of the head's O at `gO`
/// (strides os, od in elements), rows < sq only; one warp, 16-byte stores
/// where the view allows.
template <typename T, int DV, int QS, int ROWS>
__device__ __forceinline__ void storeWarpRows(const T *gOc, i64 os, i64 od, const T *sO, int wRow,
                                              i64 m0, i64 sq, int lane) {
  T *gO = const_cast<T *>(gOc);
  if (vectorizable(gO, os, od, 2)) {
    constexpr int kPieces = DV / 8; // 16-byte pieces per row
    for (int e = lane; e < ROWS * kPieces; e += 32) {
      const int r = wRow + e / kPieces, c = (e % kPieces) * 8;
      if (m0 + r < sq)
        *reinterpret_cast<uint4 *>(gO + (m0 + r) * os + c) =
            *reinterpret_cast<const uint4 *>(sO + r * QS + c);
    }
  } else {
    for (int e = lane; e < ROWS * DV; e += 32) {
      const int r = wRow + e / DV, c = e % DV;
      if (m0 + r < sq)
        gO[(m0 + r) * os + i64(c) * od] = sO[r * QS + c];
    }
  }
}

/// Tensor-core body for DT = 1 (f16) or 2 (bf16). See the file comment.
template <int DT, int D, int DV, int BM, int BN, int NT>
__device__ __forceinline__ void attentionTc(const H20AttnParams &p) {
  typedef typename Elem<DT>::T T;
  typedef TcLayout<D, DV, BM, BN> L;
  constexpr int kWarps = NT / 32;
  constexpr int MT = BM / (16 * kWarps);
  static_assert(NT % 32 == 0, "H20_THREADS must be a multiple of 32");
  static_assert(MT >= 1 && MT <= 2 && MT * 16 * kWarps == BM,
                "H20_BLOCK_M must be 16 or 32 rows per warp");
  static_assert(D % 16 == 0 && DV % 16 == 0 && BN % 16 == 0, "dims and BLOCK_N: multiples of 16");
  constexpr int KT = D / 16;  // k-steps of S = Q K^T
  constexpr int NS = BN / 8;  // n8 tiles of S
  constexpr int NO = DV / 8;  // n8 tiles of O
  // Q fragments stay in registers (MT * D / 4 of them) when they and the
  // accumulators fit; otherwise they are re-read from shared memory per tile.
  constexpr bool kQInRegs = MT * D <= 128 && MT * (DV + BN) <= 192;

  T *sQ = reinterpret_cast<T *>(h20SmemRaw) + L::kQ;
  T *sK = reinterpret_cast<T *>(h20SmemRaw) + L::kK;
  T *sV = reinterpret_cast<T *>(h20SmemRaw) + L::kV;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Heaviest row blocks (causal: the last ones) first.
  const i64 mBlock = i64(gridDim.x) - 1 - blockIdx.x;
  const i64 h = blockIdx.y, b = blockIdx.z;
  const i64 group = p.kv_heads > 0 ? p.heads / p.kv_heads : 1;
  const i64 kh = h / (group > 0 ? group : 1);
  const i64 m0 = mBlock * BM;
  const i64 lastRow = imin(m0 + BM, p.sq) - 1;
  const KeyRange keys(p, m0, BM);
  const i64 nTiles = keys.tiles(BN);

  const T *gQ = headBase<T>(p.q, p.q_stride, b, h);
  const T *gK = headBase<T>(p.k, p.k_stride, b, kh);
  const T *gV = headBase<T>(p.v, p.v_stride, b, kh);
  const bool vecQ = vectorizable(gQ, p.q_stride[2], p.q_stride[3], 2);
  const bool vecK = vectorizable(gK, p.k_stride[2], p.k_stride[3], 2);
  const bool vecV = vectorizable(gV, p.v_stride[2], p.v_stride[3], 2);

  // Prologue: Q tile and the first K/V tile.
  loadTile<T, BM, D, L::QS, NT>(vecQ, sQ, gQ, p.q_stride[2], p.q_stride[3], m0, p.sq);
  if (nTiles > 0) {
    loadTile<T, BN, D, L::KS, NT>(vecK, sK, gK, p.k_stride[2], p.k_stride[3], keys.begin, p.skv);
    loadTile<T, BN, DV, L::VS, NT>(vecV, sV, gV, p.v_stride[2], p.v_stride[3], keys.begin, p.skv);
  }
  h20CpAsyncCommit();

  const int g = lane / 4, t4 = lane % 4; // fragment row group and column pair
  const int wRow = warp * MT * 16;       // first CTA row of this warp
  // Per-lane ldmatrix row/column offsets (see PTX ISA, ldmatrix).
  const int aRow = (lane & 7) + ((lane >> 3) & 1) * 8, aCol = (lane >> 4) * 8; // Q, A operand
  const int kRow = (lane & 7) + (lane >> 4) * 8, kCol = ((lane >> 3) & 1) * 8; // K, B operand
  const int vRow = (lane & 7) + ((lane >> 3) & 1) * 8, vCol = (lane >> 4) * 8; // V, B^T

  float o[MT][NO][4];
  float rowMax[MT][2], rowSum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < NO; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[mt][n][e] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rowMax[mt][r] = negInf();
      rowSum[mt][r] = 0.f;
    }
  }
  u32 qFrag[kQInRegs ? MT : 1][kQInRegs ? KT : 1][4];

  // Logit scaling (base 2): s * scaleLog2, or capOut * tanh(s * capIn).
  const float softcap = p.softcap, scaleLog2 = p.scale * kLog2e;
  const float capIn = softcap > 0.f ? p.scale / softcap : 0.f, capOut = softcap * kLog2e;
  const u32 sQAddr = h20SmemAddr(sQ);

  for (i64 j = 0; j < nTiles; ++j) {
    const int buf = int(j & 1);
    const i64 n0 = keys.begin + j * BN;
    if (j + 1 < nTiles) {
      const int nb = buf ^ 1;
      loadTile<T, BN, D, L::KS, NT>(vecK, sK + nb * BN * L::KS, gK, p.k_stride[2], p.k_stride[3],
                                    n0 + BN, p.skv);
      loadTile<T, BN, DV, L::VS, NT>(vecV, sV + nb * BN * L::VS, gV, p.v_stride[2],
                                     p.v_stride[3], n0 + BN, p.skv);
      h20CpAsyncCommit();
      h20CpAsyncWait<1>();
    } else {
      h20CpAsyncWait<0>();
    }
    __syncthreads();

    if (kQInRegs && j == 0) {
#pragma unroll
      for (int mt = 0; mt < (kQInRegs ? MT : 1); ++mt)
#pragma unroll
        for (int kk = 0; kk < (kQInRegs ? KT : 1); ++kk)
          h20LdmatrixX4(qFrag[mt][kk],
                     sQAddr + 2u * ((wRow + mt * 16 + aRow) * L::QS + kk * 16 + aCol));
    }

    // S = Q K^T (raw dot products, fp32).
    const u32 sKAddr = h20SmemAddr(sK + buf * BN * L::KS);
    float s[MT][NS][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[mt][n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      u32 a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            a[mt][e] = qFrag[kQInRegs ? mt : 0][kQInRegs ? kk : 0][e];
        } else {
          h20LdmatrixX4(a[mt], sQAddr + 2u * ((wRow + mt * 16 + aRow) * L::QS + kk * 16 + aCol));
        }
      }
#pragma unroll
      for (int np = 0; np < NS / 2; ++np) {
        u32 bk[4];
        h20LdmatrixX4(bk, sKAddr + 2u * ((np * 16 + kRow) * L::KS + kk * 16 + kCol));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<DT>::run(s[mt][2 * np], a[mt], bk[0], bk[1]);
          Mma<DT>::run(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Scores -> base-2 logits; keys a row does not see -> -inf.
    tcLogits<MT, NS>(s, keys, softcap, scaleLog2, capIn, capOut, n0, BN, m0, lastRow, p.skv,
                     wRow, g, t4);

    // Online softmax (FlashAttention-2 Alg. 1, lines 8-10), base 2.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = rowMax[mt][r];
#pragma unroll
        for (int n = 0; n < NS; ++n)
          mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // No visible key yet: keep every exponent finite (exp2(-inf) = 0).
        const float ref = mx == negInf() ? 0.f : mx;
        const float alpha = fastExp2(rowMax[mt][r] - ref);
        rowMax[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float e = fastExp2(s[mt][n][2 * r + c] - ref);
            s[mt][n][2 * r + c] = e;
            sum += e;
          }
        rowSum[mt][r] = rowSum[mt][r] * alpha + sum; // this lane's share of the row
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          o[mt][n][2 * r] *= alpha;
          o[mt][n][2 * r + 1] *= alpha;
        }
      }
    }

    // O += P V: the S accumulators of n8 tiles 2k, 2k+1 are the A fragment of
    // k-step k (PTX fragment layouts of C and A coincide row/column-wise).
    const u32 sVAddr = h20SmemAddr(sV + buf * BN * L::VS);
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      u32 pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = Elem<DT>::pack(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        pa[mt][1] = Elem<DT>::pack(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        pa[mt][2] = Elem<DT>::pack(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        pa[mt][3] = Elem<DT>::pack(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < NO / 2; ++dp) {
        u32 bv[4];
        h20LdmatrixX4Trans(bv, sVAddr + 2u * ((ks * 16 + vRow) * L::VS + dp * 16 + vCol));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<DT>::run(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
          Mma<DT>::run(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
        }
      }
    }
    __syncthreads(); // this buffer is refilled by the next iteration's prefetch
  }
  h20CpAsyncWait<0>();
  __syncthreads();

  // Epilogue: O / l (0 for rows without a visible key), staged through this
  // warp's own Q rows (no other warp reads them), then stored row by row.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = rowSum[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.f ? fastRcp(l) : 0.f;
      const int row = wRow + mt * 16 + g + 8 * r;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        u32 v = Elem<DT>::pack(o[mt][n][2 * r] * inv, o[mt][n][2 * r + 1] * inv);
        *reinterpret_cast<u32 *>(sQ + row * L::QS + n * 8 + 2 * t4) = v;
      }
    }
  __syncwarp();

  storeWarpRows<T, DV, L::QS, MT * 16>(headBase<T>(p.o, p.o_stride, b, h), p.o_stride[2],
                                       p.o_stride[3], sQ, wRow, m0, p.sq, lane);
}

} // namespace h20attn

#endif // H20_ATTENTION_MMA_CUH
