//===- sparse_attention.cuh - DeepSeek-V4.1 sparse sink attention, for NVRTC -*- CUDA -*-===//
//
// GPU kernel of attn.sparse_attention (semantics: the op's description in
// include/h20/Dialect/Attn/IR/AttnOps.td; the reference it must equal:
// lib/Conversion/ToLinalg/SparseAttnToLinalg.cpp): one shared latent row
// serves as key and value for every query head; query row i attends to the
// latent rows of its causal sliding window and to the compressed rows its
// indices pick, and a per-head sink only grows the softmax denominator.
// Source of the computation: transformers models/deepseek_v41
// (DeepseekV41Attention); the one-query-token-per-CTA split with all heads
// as the GEMM's M follows FlashMLA's sparse prefill (DeepSeek-AI, 2025).
//
// Compiled by NVRTC only (no host headers): lib/Target/GPU/SparseAttentionKernel.cpp
// embeds this file and, per instantiation, defines H20_SA_DT (element type
// of query, latent, compressed and output: 1 f16, 2 bf16), H20_SA_SINK (the
// sink's: 0 f32, 1 f16, 2 bf16), H20_SA_DP (the head dim padded to a
// multiple of 64, at most 512), H20_SA_COMPRESSED (0: window only) and
// H20_SA_NAME, then includes it.
//
// Work split: CTA (i, hb) computes query row i for heads hb*64 .. hb*64+63
// (rows past H are zero and not stored), 8 warps. Its key slots (window
// rows i, i-1, .., i-W+1 that exist, then the compressed rows of indices[i]
// in [0, T)) are compacted into a list in shared memory, so invisible slots
// cost nothing; the list is consumed 64 rows at a time, gathered by
// cp.async into a double-buffered tile (rows of DP bf16/f16, 16-byte chunks
// XOR-swizzled by row) while the previous tile computes. Per tile, on
// mma.sync m16n8k16 tensor cores with float32 accumulation: warp w computes
// the scores of heads 16*(w%4).. for slots 32*(w/4).. (K = DP), the two
// warps sharing a head block exchange row maxima (online softmax in base 2,
// FlashAttention-2), write P (the element type) to shared memory, and each
// accumulates O for its heads over half of the DP output dims (128 float32
// registers per thread at DP = 512). The sink enters as the initial running
// maximum with weight 1. O is normalised, staged through the query's shared
// memory and stored with 16-byte stores where the view allows.
//
// Kernel parameters follow MLIR's expanded memref descriptor (what the GPU
// program's "launch" step passes): per memref (base, aligned, offset,
// sizes[rank], strides[rank]), strides in elements. Any strides work; the
// 16-byte paths are taken per tensor where its view is 16-byte aligned.
//
//===----------------------------------------------------------------------===//

#ifndef H20_SA_CUH_COMMON
#define H20_SA_CUH_COMMON

#include "h20_tensor_core.cuh"

#define H20_SA_THREADS 256
/// Query heads per CTA (the tensor-core M) and key slots per tile (N).
#define H20_SA_ROWS 64
#define H20_SA_TILE 64

/// Named barrier of the two warps (64 threads) that share a head block.
__device__ __forceinline__ void saPairBarrier(int id) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(id));
}

/// Exclusive prefix count of `flag` over the CTA's NT threads, in thread
/// order; `total` receives the CTA-wide count. `warpCounts`: NT / 32 words
/// of shared memory.
template <int NT>
__device__ __forceinline__ int saExclusiveCount(bool flag, int *warpCounts, int &total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 ballot = __ballot_sync(0xffffffffu, flag);
  if (lane == 0)
    warpCounts[warp] = __popc(ballot);
  __syncthreads();
  int before = 0, all = 0;
  for (int w = 0; w < NT / 32; ++w) {
    const int c = warpCounts[w];
    before += w < warp ? c : 0;
    all += c;
  }
  __syncthreads();
  total = all;
  return before + __popc(ballot & ((1u << lane) - 1u));
}

/// Loads query row i's heads [h0, h0 + 64) of q ([S, H, D] from element
/// `off` at strides s0, s1, s2, 16-bit) into the swizzled [64][DP] tile at `qs` (shared address
/// `qsAddr`); heads >= H and dims >= D become zeros. `vec`: 16-byte
/// cp.async (the caller commits and waits), else element copies.
template <int DP>
__device__ __forceinline__ void saLoadQuery(unsigned char *qs, u32 qsAddr, const u16 *q, i64 off,
                                            i64 s0, i64 s1, i64 s2, i64 i, i64 h0, i64 H,
                                            i64 D, bool vec, int tid) {
  constexpr int CHUNKS = DP / 8;
  if (vec) {
    for (int e = tid; e < H20_SA_ROWS * CHUNKS; e += H20_SA_THREADS) {
      const int r = e / CHUNKS, c = e % CHUNKS;
      const i64 h = h0 + r;
      const bool ok = h < H && c * 8 < D;
      const u16 *src = ok ? q + off + i * s0 + h * s1 + c * 8 : q + off;
      h20CpAsync16(qsAddr + h20Swizzle(r, c * 8, DP), src, ok ? 16 : 0);
    }
  } else {
    for (int e = tid; e < H20_SA_ROWS * DP; e += H20_SA_THREADS) {
      const int r = e / DP, d = e % DP;
      const i64 h = h0 + r;
      u16 v = 0;
      if (h < H && d < D)
        v = q[off + i * s0 + h * s1 + d * s2];
      *reinterpret_cast<u16 *>(qs + h20Swizzle(r, d, DP)) = v;
    }
  }
}

/// The key slots query row i (latent row pos) attends, compacted in
/// slot order into `list`: window slot j < window is latent row pos - j
/// (kept as pos - j when >= lo, the first visible row),
/// slot window + k is compressed row c = idx[i, k] (element off + i * s0 +
/// k * s1; kept as -2 - c when
/// 0 <= c < T; CMP only). Returns their count. NT: the CTA's threads, all
/// of which call this; `warpCounts`: NT / 32 words.
template <bool CMP, int NT = H20_SA_THREADS>
__device__ __forceinline__ int saSlotList(int *list, int *warpCounts, i64 i, i64 pos, i64 lo,
                                          i64 window, i64 K, i64 T, const i64 *idx, i64 off,
                                          i64 s0, i64 s1, int tid) {
  const i64 slots = window + K;
  int n = 0;
  for (i64 base = 0; base < slots; base += NT) {
    const i64 j = base + tid;
    int code = 0;
    bool valid = false;
    if (j < window) {
      valid = pos - j >= lo;
      code = static_cast<int>(pos - j);
    } else if (CMP && j < slots) {
      const i64 c = idx[off + i * s0 + (j - window) * s1];
      valid = c >= 0 && c < T;
      code = static_cast<int>(-2 - c);
    }
    int total = 0;
    const int pos = saExclusiveCount<NT>(valid, warpCounts, total);
    if (valid)
      list[n + pos] = code;
    n += total;
  }
  return n;
}

/// Divides this thread's O accumulators (rows rq + g, rq + g + 8; its
/// half's DP / 2 dims) by the row's softmax denominator, the sum of both
/// halves' lRow (exchanged through `redSum`, [2][64]), and stores them as
/// element type E into the swizzled [64][DP] tile at `qs`. Ends before the
/// caller's barrier; a zero denominator (no key, no sink) gives zeros.
template <int DP, typename E>
__device__ __forceinline__ void saNormaliseO(float (&o)[DP / 16][4], float (&lRow)[2],
                                             float *redSum, unsigned char *qs, int rq, int half,
                                             int g, int quad) {
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    lRow[x] += __shfl_xor_sync(0xffffffffu, lRow[x], 1);
    lRow[x] += __shfl_xor_sync(0xffffffffu, lRow[x], 2);
  }
  if (quad == 0) {
    redSum[half * H20_SA_ROWS + rq + g] = lRow[0];
    redSum[half * H20_SA_ROWS + rq + g + 8] = lRow[1];
  }
  __syncthreads();
  float inv[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const float l = lRow[x] + redSum[(half ^ 1) * H20_SA_ROWS + rq + g + 8 * x];
    inv[x] = l > 0.0f ? 1.0f / l : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < DP / 16; ++j) {
    const int col = half * (DP / 2) + j * 8 + quad * 2;
    const u32 lo = static_cast<u32>(E::round(o[j][0] * inv[0])) |
                   (static_cast<u32>(E::round(o[j][1] * inv[0])) << 16);
    const u32 hi = static_cast<u32>(E::round(o[j][2] * inv[1])) |
                   (static_cast<u32>(E::round(o[j][3] * inv[1])) << 16);
    *reinterpret_cast<u32 *>(qs + h20Swizzle(rq + g, col, DP)) = lo;
    *reinterpret_cast<u32 *>(qs + h20Swizzle(rq + g + 8, col, DP)) = hi;
  }
}

/// Stores the [64][DP] tile at `qs` as query row i's heads [h0, h0 + 64)
/// of out ([S, H, D] from element `off` at strides s0, s1, s2), heads < H
/// and dims < D only.
/// `vec`: 16-byte stores.
template <int DP>
__device__ __forceinline__ void saStoreOut(u16 *out, i64 off, i64 s0, i64 s1, i64 s2,
                                           const unsigned char *qs, i64 i, i64 h0, i64 H, i64 D,
                                           bool vec, int tid) {
  constexpr int CHUNKS = DP / 8;
  if (vec) {
    for (int e = tid; e < H20_SA_ROWS * CHUNKS; e += H20_SA_THREADS) {
      const int r = e / CHUNKS, c = e % CHUNKS;
      const i64 h = h0 + r;
      if (h < H && c * 8 < D)
        *reinterpret_cast<uint4 *>(out + off + i * s0 + h * s1 + c * 8) =
            *reinterpret_cast<const uint4 *>(qs + h20Swizzle(r, c * 8, DP));
    }
  } else {
    for (int e = tid; e < H20_SA_ROWS * DP; e += H20_SA_THREADS) {
      const int r = e / DP, d = e % DP;
      const i64 h = h0 + r;
      if (h < H && d < D)
        out[off + i * s0 + h * s1 + d * s2] =
            *reinterpret_cast<const u16 *>(qs + h20Swizzle(r, d, DP));
    }
  }
}

#endif // H20_SA_CUH_COMMON

#if defined(H20_SA_NAME)

/// q [S, H, D], latent [L, D] (L >= S, the queries' own rows the last S),
/// sink [H], compressed [T, D] and indices
/// [S, K] i64 (H20_SA_COMPRESSED; otherwise any views, unread), out
/// [S, H, D]. Grid (S, ceil(H / 64)), 256 threads; dynamic shared memory
/// sparseAttentionSmemBytes(DP, window + K) (SparseAttentionKernel.h).
/// scaleLog2: the score scale times log2(e); window: W >= 0; start: query
/// row 0's prompt position, so latent row r is position r + start - (L - S)
/// (start = L - S: row r is position r; a window ring's first W - 1 rows
/// precede the chunk), and rows of negative positions are never read.
extern "C" __global__ void __launch_bounds__(H20_SA_THREADS, 1)
H20_SA_NAME(H20_MR3(const u16, q), H20_MR2(const u16, lat), H20_MR1(const void, sink),
            H20_MR2(const u16, cmp), H20_MR2(const i64, idx), H20_MR3(u16, out),
            float scaleLog2, i64 window, i64 start) {
  typedef H20Elem<H20_SA_DT> E;
  constexpr int DP = H20_SA_DP;
  constexpr int CHUNKS = DP / 8;                 // 16-byte chunks per row
  constexpr int HALF_TILES = DP / 2 / 8;         // n8 output tiles per warp
  static_assert(DP % 64 == 0 && DP <= 512, "DP: a multiple of 64, at most 512");
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char *qs = smem;                                  // [64][DP], later O
  unsigned char *kvs = smem + H20_SA_ROWS * DP * 2;          // 2 x [64][DP]
  unsigned char *ps = kvs + 2 * H20_SA_TILE * DP * 2;        // [64][64]
  float *redMax = reinterpret_cast<float *>(ps + H20_SA_ROWS * H20_SA_TILE * 2); // [2][64]
  float *redSum = redMax + 2 * H20_SA_ROWS;                                      // [2][64]
  int *warpCounts = reinterpret_cast<int *>(redSum + 2 * H20_SA_ROWS);           // [8]
  int *listCount = warpCounts + 8;                                               // [1] (+pad)
  int *list = warpCounts + 16;                                                   // [W + K]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const i64 i = blockIdx.x;
  // The queries are the last S of the latent's L rows (a chunk of a
  // chunked prefill reads the cache of every earlier token, or a window
  // ring; L = S for a whole prompt): query row i is latent row L - S + i.
  // Rows before `lo` hold positions < 0 (a ring before its first W - 1
  // tokens): never read, whatever their bytes.
  const i64 pos = lat_d0 - q_d0 + i;
  const i64 lo = lat_d0 - q_d0 - start > 0 ? lat_d0 - q_d0 - start : 0;
  const i64 H = q_d1, D = q_d2;
  const i64 h0 = static_cast<i64>(blockIdx.y) * H20_SA_ROWS;
  const u32 qsAddr = h20SmemAddr(qs), kvAddr = h20SmemAddr(kvs), psAddr = h20SmemAddr(ps);

  // ---- 16-byte paths: where the view's rows are 16-byte aligned ----------
  auto aligned16 = [](const void *p) { return (reinterpret_cast<u64>(p) & 15u) == 0; };
  const bool dVec = D % 8 == 0;
  const bool qVec = dVec && q_s2 == 1 && q_s1 % 8 == 0 && q_s0 % 8 == 0 && aligned16(q + q_off);
  const bool latVec = dVec && lat_s1 == 1 && lat_s0 % 8 == 0 && aligned16(lat + lat_off);
  const bool outVec =
      dVec && out_s2 == 1 && out_s1 % 8 == 0 && out_s0 % 8 == 0 && aligned16(out + out_off);
#if H20_SA_COMPRESSED
  const i64 T = cmp_d0, K = idx_d1;
  const bool cmpVec = dVec && cmp_s1 == 1 && cmp_s0 % 8 == 0 && aligned16(cmp + cmp_off);
#else
  const i64 K = 0;
  const bool cmpVec = false;
#endif

  // ---- the query rows (asynchronous; waited for with the first tile) -----
  saLoadQuery<DP>(qs, qsAddr, q, q_off, q_s0, q_s1, q_s2, i, h0, H, D, qVec, tid);

  // ---- the compacted key-slot list: latent row r as r, compressed row c
  // as -2 - c -----------------------------------------------------------------
#if H20_SA_COMPRESSED
  const int n =
      saSlotList<true>(list, warpCounts, i, pos, lo, window, K, T, idx, idx_off, idx_s0, idx_s1,
                       tid);
#else
  const int n = saSlotList<false>(list, warpCounts, i, pos, lo, window, 0, 0, idx, 0, 0, 0, tid);
#endif
  __syncthreads();

  // ---- gather of tile t's key rows into stage buffer `stage` -------------
  auto loadTile = [&](int t, int stage) {
    const u32 dst = kvAddr + stage * H20_SA_TILE * DP * 2;
    unsigned char *dstp = kvs + stage * H20_SA_TILE * DP * 2;
    for (int e = tid; e < H20_SA_TILE * CHUNKS; e += H20_SA_THREADS) {
      const int r = e / CHUNKS, c = e % CHUNKS;
      const int p = t * H20_SA_TILE + r;
      const bool valid = p < n;
      const int code = valid ? list[p] : 0;
      const bool fromLat = code >= 0;
      const bool vec = fromLat ? latVec : cmpVec;
      if (vec) {
        const bool ok = valid && c * 8 < D;
        // A zero-filling copy still names a 16-byte aligned address: the
        // base of the view being read (aligned: `vec`).
        const u16 *src = lat + lat_off;
#if H20_SA_COMPRESSED
        if (!fromLat)
          src = cmp + cmp_off;
#endif
        if (ok) {
          if (fromLat)
            src = lat + lat_off + static_cast<i64>(code) * lat_s0 + c * 8;
#if H20_SA_COMPRESSED
          else
            src = cmp + cmp_off + static_cast<i64>(-2 - code) * cmp_s0 + c * 8;
#endif
        }
        h20CpAsync16(dst + h20Swizzle(r, c * 8, DP), src, ok ? 16 : 0);
      } else {
        for (int d = c * 8; d < c * 8 + 8; ++d) {
          u16 v = 0;
          if (valid && d < D) {
            if (fromLat)
              v = lat[lat_off + static_cast<i64>(code) * lat_s0 + d * lat_s1];
#if H20_SA_COMPRESSED
            else
              v = cmp[cmp_off + static_cast<i64>(-2 - code) * cmp_s0 + d * cmp_s1];
#endif
          }
          *reinterpret_cast<u16 *>(dstp + h20Swizzle(r, d, DP)) = v;
        }
      }
    }
  };

  // ---- per-thread softmax state for rows g and g + 8 of the warp's block --
  const int rq = (warp & 3) * 16, half = warp >> 2, g = lane >> 2, quad = lane & 3;
  const int pairBarrier = 1 + (warp & 3);
  const float negInf = -__int_as_float(0x7f800000);
  const float log2e = 1.4426950408889634f;
  float mRow[2], lRow[2];
  for (int x = 0; x < 2; ++x) {
    const i64 h = h0 + rq + g + 8 * x;
    float s = 0.0f;
    if (h < H)
      s = H20Elem<H20_SA_SINK>::load(static_cast<const unsigned char *>(sink) +
                                    (sink_off + h * sink_s0) * H20Elem<H20_SA_SINK>::bytes);
    mRow[x] = s * log2e;
    // exp2(sink - m) = 1, counted once per row (lane quad 0 of half 0).
    lRow[x] = half == 0 && quad == 0 ? 1.0f : 0.0f;
  }
  float o[HALF_TILES][4];
#pragma unroll
  for (int j = 0; j < HALF_TILES; ++j)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  const int tiles = (n + H20_SA_TILE - 1) / H20_SA_TILE;
  if (tiles > 0)
    loadTile(0, 0);
  h20CpAsyncCommit();
  for (int t = 0; t < tiles; ++t) {
    const int stage = t & 1;
    if (t + 1 < tiles) {
      loadTile(t + 1, stage ^ 1);
      h20CpAsyncCommit();
      h20CpAsyncWait<1>();
    } else {
      h20CpAsyncWait<0>();
    }
    __syncthreads();
    const u32 kv = kvAddr + stage * H20_SA_TILE * DP * 2;

    // S = Q K^T for heads rq.., slots cb.. (4 n8 tiles), K = DP.
    const int cb = half * 32;
    float s[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll 4
    for (int ks = 0; ks < DP / 16; ++ks) {
      u32 a[4];
      h20LdmatrixX4(qsAddr + h20Swizzle(rq + (lane & 15), ks * 16 + (lane >> 4) * 8, DP), a[0], a[1],
                   a[2], a[3]);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        u32 b0, b1, b2, b3;
        h20LdmatrixX4(kv + h20Swizzle(cb + np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                    ks * 16 + ((lane >> 3) & 1) * 8, DP),
                     b0, b1, b2, b3);
        E::mma(s[np * 2], a, b0, b1);
        E::mma(s[np * 2 + 1], a, b2, b3);
      }
    }

    // Online softmax (base 2); slots past n are masked.
    float mx[2] = {negInf, negInf};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = t * H20_SA_TILE + cb + j * 8 + quad * 2 + (e & 1);
        const float v = col < n ? s[j][e] * scaleLog2 : negInf;
        s[j][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 1));
      mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 2));
    }
    if (quad == 0) {
      redMax[half * H20_SA_ROWS + rq + g] = mx[0];
      redMax[half * H20_SA_ROWS + rq + g + 8] = mx[1];
    }
    saPairBarrier(pairBarrier);
    float alpha[2], mUse[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const float other = redMax[(half ^ 1) * H20_SA_ROWS + rq + g + 8 * x];
      const float mNew = fmaxf(mRow[x], fmaxf(mx[x], other));
      mUse[x] = mNew == negInf ? 0.0f : mNew;
      alpha[x] = exp2f(mRow[x] - mUse[x]);
      mRow[x] = mNew;
      lRow[x] *= alpha[x];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p0 = exp2f(s[j][0] - mUse[0]), p1 = exp2f(s[j][1] - mUse[0]);
      const float p2 = exp2f(s[j][2] - mUse[1]), p3 = exp2f(s[j][3] - mUse[1]);
      lRow[0] += p0 + p1;
      lRow[1] += p2 + p3;
      const int col = cb + j * 8 + quad * 2;
      const u32 lo = static_cast<u32>(E::round(p0)) | (static_cast<u32>(E::round(p1)) << 16);
      const u32 hi = static_cast<u32>(E::round(p2)) | (static_cast<u32>(E::round(p3)) << 16);
      *reinterpret_cast<u32 *>(ps + h20Swizzle(rq + g, col, H20_SA_TILE)) = lo;
      *reinterpret_cast<u32 *>(ps + h20Swizzle(rq + g + 8, col, H20_SA_TILE)) = hi;
    }
#pragma unroll
    for (int j = 0; j < HALF_TILES; ++j) {
      o[j][0] *= alpha[0];
      o[j][1] *= alpha[0];
      o[j][2] *= alpha[1];
      o[j][3] *= alpha[1];
    }
    saPairBarrier(pairBarrier);

    // O += P V for heads rq.., dims half * DP / 2 .. (K = 64 slots).
#pragma unroll
    for (int ks = 0; ks < H20_SA_TILE / 16; ++ks) {
      u32 a[4];
      h20LdmatrixX4(psAddr + h20Swizzle(rq + (lane & 15), ks * 16 + (lane >> 4) * 8, H20_SA_TILE),
                   a[0], a[1], a[2], a[3]);
#pragma unroll
      for (int dp = 0; dp < HALF_TILES / 2; ++dp) {
        const int d0 = half * (DP / 2) + dp * 16;
        u32 b0, b1, b2, b3;
        h20LdmatrixX4Trans(kv + h20Swizzle(ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                         d0 + (lane >> 4) * 8, DP),
                          b0, b1, b2, b3);
        E::mma(o[dp * 2], a, b0, b1);
        E::mma(o[dp * 2 + 1], a, b2, b3);
      }
    }
    __syncthreads();
  }

  // The query's cp.async group is still pending when there was no tile.
  h20CpAsyncWait<0>();
  __syncthreads();

  // ---- normalise: the row's denominator is the sum over both halves ------
  saNormaliseO<DP, E>(o, lRow, redSum, qs, rq, half, g, quad);
  __syncthreads();
  saStoreOut<DP>(out, out_off, out_s0, out_s1, out_s2, qs, i, h0, H, D, outVec, tid);
}

#endif // H20_SA_NAME
