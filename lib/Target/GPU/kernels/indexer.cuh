//===- indexer.cuh - DeepSeek-V4.1 lightning-indexer top-k, for NVRTC -*- CUDA -*-===//
//
// GPU kernels of attn.indexer_topk and attn.indexer_candidates (their
// semantics: include/h20/Dialect/Attn/IR/AttnOps.td; the reference they must
// equal: lib/Conversion/ToLinalg/SparseAttnToLinalg.cpp). Source of the
// scoring: transformers models/deepseek_v41 (DeepseekV41Indexer,
// select_candidate_blocks).
//
// Compiled by NVRTC only (no host headers): lib/Target/GPU/IndexerKernel.cpp
// embeds this file and, per needed instantiation, defines H20_INDEXER_Q/K/W
// (element types of query, keys, weights: 0 f32, 1 f16, 2 bf16),
// H20_INDEXER_MODE (0 top-k, 1 top-k within candidate blocks, 2 candidate
// blocks) and H20_INDEXER_NAME, then includes it.
//
// Work split: a persistent grid of G CTAs (G = the scratch's rows), CTA g
// handling query rows g, g + G, ...; per row
//   1. scores of the row's visible entries into scratch row g (float32; one
//      thread per entry, q[i] and weights[i] staged in shared memory);
//      invisible entries hold -inf;
//   2. (mode 2) block scores: the best entry per block, the newest visible
//      entry's block pinned to +inf;
//   3. selection of the K best valid (> -inf) scores, largest first, ties to
//      the lower entry index: an MSB-first radix select (four 8-bit digit
//      histograms) finds the K-th largest score, the entries above it and
//      the lowest-index entries equal to it are gathered, and a bitonic sort
//      in shared memory orders them. O(rows x T) work and memory, never S x T.
// Slots without a valid entry hold `none` (T, or NB in mode 2).
//
// Kernel parameters follow MLIR's expanded memref descriptor (what the GPU
// program's "launch" step passes): per memref (base, aligned, offset,
// sizes[rank], strides[rank]), strides in elements.
//
//===----------------------------------------------------------------------===//

#ifndef H20_INDEXER_CUH_COMMON
#define H20_INDEXER_CUH_COMMON

#include "h20_tensor_core.cuh" // u16, u32, i64 and the memref parameter macros

#define H20_IDX_THREADS 256
/// Largest K (top-k or candidate blocks) the selection sorts in shared memory.
#define H20_IDX_MAX_K 2048

template <int DT> struct IdxElem;
template <> struct IdxElem<0> {
  typedef float T;
  static __device__ __forceinline__ float load(const T *p) { return *p; }
};
template <> struct IdxElem<1> {
  typedef u16 T;
  static __device__ __forceinline__ float load(const T *p) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(*p));
    return f;
  }
};
template <> struct IdxElem<2> {
  typedef u16 T;
  static __device__ __forceinline__ float load(const T *p) {
    return __uint_as_float(static_cast<u32>(*p) << 16);
  }
};

/// A float as an unsigned key with the same order (-0 as +0; NaN never
/// reaches here: only scores > -inf are keys).
__device__ __forceinline__ u32 orderKey(float f) {
  u32 u = __float_as_uint(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Exclusive prefix count of `flag` over the CTA's threads, in thread order;
/// `total` receives the CTA-wide count. Uses `warpCounts` [32] of shared memory.
__device__ __forceinline__ u32 blockExclusiveCount(bool flag, u32 *warpCounts, u32 &total) {
  const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 ballot = __ballot_sync(0xffffffffu, flag);
  if (lane == 0)
    warpCounts[warp] = __popc(ballot);
  __syncthreads();
  u32 before = 0, all = 0;
  for (u32 w = 0; w < H20_IDX_THREADS / 32; ++w) {
    const u32 c = warpCounts[w];
    before += w < warp ? c : 0;
    all += c;
  }
  __syncthreads();
  total = all;
  return before + __popc(ballot & ((1u << lane) - 1u));
}

struct IdxShared {
  u32 hist[256];
  u32 warpCounts[32];
  u32 selKey[H20_IDX_MAX_K];
  int selIdx[H20_IDX_MAX_K];
  u32 count, prefix, remaining, selected;
};

/// The K best valid entries of a[0, n) (valid: > -inf), largest first, ties
/// to the lower position, as positions into sel (count in sh.selected).
__device__ void selectTopK(const float *a, int n, int K, IdxShared &sh) {
  const int tid = threadIdx.x;
  // Valid entries.
  u32 mine = 0;
  for (int p = tid; p < n; p += H20_IDX_THREADS)
    mine += a[p] > -__int_as_float(0x7f800000) ? 1u : 0u;
  if (tid == 0) {
    sh.count = 0;
    sh.selected = 0;
  }
  __syncthreads();
  atomicAdd(&sh.count, mine);
  __syncthreads();
  const u32 valid = sh.count;
  bool all = valid <= static_cast<u32>(K);
  u32 tau = 0, takeEqual = 0;
  if (!all) {
    if (tid == 0) {
      sh.prefix = 0;
      sh.remaining = static_cast<u32>(K);
    }
    u32 mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = tid; b < 256; b += H20_IDX_THREADS)
        sh.hist[b] = 0;
      __syncthreads();
      const u32 prefix = sh.prefix;
      for (int p = tid; p < n; p += H20_IDX_THREADS) {
        const float v = a[p];
        if (!(v > -__int_as_float(0x7f800000)))
          continue;
        const u32 key = orderKey(v);
        if ((key & mask) == prefix)
          atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      if (tid == 0) {
        u32 cum = 0, rem = sh.remaining;
        for (int b = 255; b >= 0; --b) {
          if (cum + sh.hist[b] >= rem) {
            sh.prefix = prefix | (static_cast<u32>(b) << shift);
            sh.remaining = rem - cum;
            break;
          }
          cum += sh.hist[b];
        }
      }
      mask |= 255u << shift;
      __syncthreads();
    }
    tau = sh.prefix;
    takeEqual = sh.remaining;
  }
  // Gather: everything above tau, and the first takeEqual entries equal to
  // it in position order (tiles of the CTA's width, in order).
  u32 equalSoFar = 0;
  for (int base = 0; base < n; base += H20_IDX_THREADS) {
    const int p = base + tid;
    const float v = p < n ? a[p] : -__int_as_float(0x7f800000);
    const bool ok = v > -__int_as_float(0x7f800000);
    const u32 key = ok ? orderKey(v) : 0u;
    const bool above = ok && (all || key > tau);
    const bool equal = ok && !all && key == tau;
    u32 equalTotal = 0;
    const u32 rank = blockExclusiveCount(equal, sh.warpCounts, equalTotal);
    if (above || (equal && equalSoFar + rank < takeEqual)) {
      const u32 slot = atomicAdd(&sh.selected, 1u);
      sh.selKey[slot] = key;
      sh.selIdx[slot] = p;
    }
    equalSoFar += equalTotal;
  }
  __syncthreads();
  // Bitonic sort of the selection (padded to a power of two): key
  // descending, position ascending.
  const int m = static_cast<int>(sh.selected);
  int size = 1;
  while (size < m)
    size <<= 1;
  for (int p = m + tid; p < size; p += H20_IDX_THREADS) {
    sh.selKey[p] = 0;
    sh.selIdx[p] = 0x7fffffff;
  }
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int p = tid; p < size; p += H20_IDX_THREADS) {
        const int q = p ^ j;
        if (q <= p)
          continue;
        const u32 kp = sh.selKey[p], kq = sh.selKey[q];
        const int ip = sh.selIdx[p], iq = sh.selIdx[q];
        const bool pFirst = kp > kq || (kp == kq && ip < iq);
        const bool ascendingRun = (p & k) == 0; // this run wants "first" order
        if (pFirst != ascendingRun) {
          sh.selKey[p] = kq;
          sh.selKey[q] = kp;
          sh.selIdx[p] = iq;
          sh.selIdx[q] = ip;
        }
      }
      __syncthreads();
    }
  }
}

#endif // H20_INDEXER_CUH_COMMON

#if defined(H20_INDEXER_NAME)

/// q [S, Hi, Di], keys [T, Di], weights [S, Hi], cand [S, KB] (mode 1; any
/// i64 view otherwise), out [S, K] i64, scratch [G, W] f32 (G CTAs; W >= T,
/// T + NB in mode 2, KB * block in mode 1).
/// ratio: tokens per compressed entry; block: candidate block size (modes
/// 1, 2); scale: the score scale; start: the prompt position of query row
/// 0 (a later prefill chunk; 0 for a whole prompt). Dynamic shared memory (indexerSmemBytes in
/// IndexerKernel.h): q[i] and weights[i] as floats (Hi * Di + Hi, rounded up
/// to 8 bytes), then mode 1's KB block indices (i64); IdxShared is static.
extern "C" __global__ void __launch_bounds__(H20_IDX_THREADS, 1)
H20_INDEXER_NAME(H20_MR3(const typename IdxElem<H20_INDEXER_Q>::T, q),
                 H20_MR2(const typename IdxElem<H20_INDEXER_K>::T, k),
                 H20_MR2(const typename IdxElem<H20_INDEXER_W>::T, w),
                 H20_MR2(const i64, cand), H20_MR2(i64, out), H20_MR2(float, scratch),
                 i64 ratio, i64 block, float scale, i64 start) {
  typedef IdxElem<H20_INDEXER_Q> QE;
  typedef IdxElem<H20_INDEXER_K> KE;
  typedef IdxElem<H20_INDEXER_W> WE;
  __shared__ IdxShared sh;
  extern __shared__ __align__(16) unsigned char smemRaw[];
  const i64 S = q_d0, Hi = q_d1, Di = q_d2, T = k_d0, K = out_d1;
  float *qs = reinterpret_cast<float *>(smemRaw);
  float *ws = qs + Hi * Di;
  i64 *blocks = reinterpret_cast<i64 *>(smemRaw + ((Hi * Di + Hi) * 4 + 7) / 8 * 8);
  const int tid = threadIdx.x;
  const float negInf = -__int_as_float(0x7f800000);
  float *row = scratch + scratch_off + static_cast<i64>(blockIdx.x) * scratch_s0;
  for (i64 i = blockIdx.x; i < S; i += gridDim.x) {
    for (i64 e = tid; e < Hi * Di; e += H20_IDX_THREADS)
      qs[e] = QE::load(q + q_off + i * q_s0 + (e / Di) * q_s1 + (e % Di) * q_s2);
    for (i64 h = tid; h < Hi; h += H20_IDX_THREADS)
      ws[h] = WE::load(w + w_off + i * w_s0 + h * w_s1);
    // Entry t is visible to query row i (position start + i) iff
    // t < (start + i + 1) / ratio.
    i64 visible = (start + i + 1) / ratio;
    if (visible > T)
      visible = T;
    // Entries p of the row: t = p, or (mode 1) t in the candidate blocks,
    // sorted ascending so that position order is index order.
    i64 n = visible;
#if H20_INDEXER_MODE == 1
    const i64 KB = cand_d1, NBall = (T + block - 1) / block;
    if (tid == 0) {
      for (i64 c = 0; c < KB; ++c) {
        i64 b = cand[cand_off + i * cand_s0 + c * cand_s1];
        if (b < 0 || b >= NBall)
          b = NBall; // no block: its entries are all past T
        for (i64 e = 0; e < c && b != NBall; ++e)
          if (blocks[e] == b)
            b = NBall; // a repeat: its entries are already in the row
        i64 j = c;
        for (; j > 0 && blocks[j - 1] > b; --j)
          blocks[j] = blocks[j - 1];
        blocks[j] = b;
      }
    }
    n = KB * block;
#endif
    __syncthreads();
    for (i64 p = tid; p < n; p += H20_IDX_THREADS) {
      i64 t = p;
#if H20_INDEXER_MODE == 1
      t = blocks[p / block] * block + p % block;
#endif
      float s = negInf;
      if (t < visible) {
        const typename KE::T *kr = k + k_off + t * k_s0;
        s = 0.0f;
        for (i64 h = 0; h < Hi; ++h) {
          const float *qh = qs + h * Di;
          float dot = 0.0f;
          for (i64 d = 0; d < Di; ++d)
            dot += qh[d] * KE::load(kr + d * k_s1);
          s += (dot > 0.0f ? dot : 0.0f) * scale * ws[h];
        }
      }
      row[p] = s;
    }
    __syncthreads();
    const float *sel = row;
    i64 selN = n, none = T;
#if H20_INDEXER_MODE == 2
    // Block scores: the best visible entry; the newest visible entry's
    // block pinned to +inf.
    const i64 NB = (T + block - 1) / block;
    float *blockScores = row + T;
    for (i64 b = tid; b < NB; b += H20_IDX_THREADS) {
      float best = negInf;
      for (i64 t = b * block; t < (b + 1) * block && t < visible; ++t)
        best = row[t] > best ? row[t] : best;
      blockScores[b] = best;
    }
    __syncthreads();
    if (tid == 0 && visible > 0)
      blockScores[(visible - 1) / block] = __int_as_float(0x7f800000);
    __syncthreads();
    sel = blockScores;
    selN = NB;
    none = NB;
#endif
    selectTopK(sel, static_cast<int>(selN), static_cast<int>(K), sh);
    for (i64 j = tid; j < K; j += H20_IDX_THREADS) {
      i64 v = none;
      if (j < static_cast<i64>(sh.selected)) {
        v = sh.selIdx[j];
#if H20_INDEXER_MODE == 1
        v = blocks[v / block] * block + v % block;
#endif
      }
      out[out_off + i * out_s0 + j * out_s1] = v;
    }
    __syncthreads();
  }
}

#endif // H20_INDEXER_NAME
