//===- moe.cuh - DeepSeek-V4.1 routed experts around grouped GEMMs, for NVRTC -*- CUDA -*-===//
//
// Device kernels of onnx.h20.RoutedExperts on the GPU, except its GEMMs
// (the runtime runs those with cuBLASLt, per expert). Formula:
// models/deepseek_v41/h20_ops.py, routed_experts() (the ONNX function
// body, which the CPU target imports), after transformers'
// models/deepseek_v41 MoE (sqrt-softplus router scores, a selection bias,
// top-k, normalised weights times `scaling`, SwiGLU experts with clamped
// gate and up projections). For token t with router logits l[t, e] (X .
// Router, float32, not yet divided by temp):
//   score[e]  = sqrt(softplus(l[t, e] / temp))
//   key[e]    = score[e] + bias[e]
//   experts   = the K largest keys, largest first; equal keys: the lower
//               expert index first (ONNX TopK); NaN keys rank as -inf
//   weight_j  = score[e_j] / (sum_j score[e_j] + 1e-20) * scaling
//   Y[t]      = sum_j weight_j * W2[e_j]^T . (silu(min(g, limit)) *
//               clamp(u, -limit, limit)),  g = X[t] . W1[e_j], u = X[t] . W3[e_j]
// The ONNX body scales the activation by the weight before W2; scaling the
// product after W2 (COMBINE) is the same sum.
//
// Pipeline for a tile of T tokens (E experts, K = top_k, Dm hidden, I
// intermediate; R = T * K permuted rows):
//   1. (runtime) logits [T, E] f32 = X . Router; counts [E] i32 = 0
//   2. h20_moe_route_b{f32,f16,bf16} (the bias' type): ids [T, K] i32,
//      weights [T, K] f32, counts[e] += picks of expert e (atomics)
//   3. h20_moe_positions: offsets [E + 1] (exclusive prefix of counts),
//      pos [T, K] (the permuted row of pick (t, j)), rowToken [R] (the token
//      of each permuted row). Expert e's rows are offsets[e] ..
//      offsets[e + 1] - 1, its picks in increasing (t, j) order: the
//      permutation is a stable counting sort, deterministic (no atomics).
//   4. h20_moe_gather_{f32,f16,bf16}: Xp [R, Dm] = X[rowToken[r], :] for
//      the placed rows r < offsets[E] (all R on one GPU; a rank of an
//      expert-parallel split places only its experts' picks, about R / N)
//   5. (runtime) G [R, I] f32 = Xp . W1[e], U [R, I] f32 = Xp . W3[e] per
//      expert row range
//   6. h20_moe_swiglu_{f32,f16,bf16}: A [R, I] = silu(min(G, limit)) *
//      clamp(U, -limit, limit), rounded to the element type, for the placed
//      rows r < offsets[E]
//   7. (runtime) Yp [R, Dm] f32 = A . W2[e] per expert row range
//   8. h20_moe_combine_{f32,f16,bf16}: Y[t, :] = sum_j weights[t, j] *
//      Yp[pos[t, j], :] (float32, j in order), rounded to the element type
// Under the FP8 expert GEMM (Hopper), steps 4 and 6 are
// h20_moe_gather_fp8_{f32,f16,bf16} and h20_moe_swiglu_fp8: they write Xq
// / Aq as e4m3 with a float32 scale per 1 x 128 block, which the GEMMs of 5
// and 7 read in place of Xp / A.
// The element type of X, Xp, A and Y: 0 f32, 1 f16, 2 bf16 (16-bit values
// as their bits, u16); logits, G, U, Yp and weights are float32.
//
// Limits (checked by the compiler, MoeKernel.h): 1 <= E <= 1024 (the route
// kernel keeps a token's scores in shared memory and each lane's taken
// experts in one 32-bit mask), 1 <= K <= min(E, 16), R = T * K < 2^31 (pos
// and rowToken are int32). Element offsets are int64 (R * Dm exceeds 2^31
// at long prompts).
//
// Compiled by NVRTC only (no host headers): lib/Target/GPU/MoeKernel.cpp
// embeds this file as "h20_moe.cuh" (with "h20_tensor_core.cuh" for the
// element types) and includes it once; every kernel and type variant is
// instantiated below. Launch geometry (MoeKernel.h): 256 threads per CTA;
// grids route ceil(T / 8), positions E, gather ceil(R / 8), swiglu
// moeSwigluGrid(R * I) (grid-stride), combine T.
//
// Kernel parameters follow MLIR's expanded memref descriptor (what the GPU
// program's "launch" step passes): per memref (base, aligned, offset,
// sizes[rank], strides[rank]), strides in elements. Any strides work; the
// vector paths are taken per kernel where every view it touches allows.
//
//===----------------------------------------------------------------------===//

#ifndef H20_MOE_CUH
#define H20_MOE_CUH

#include "h20_tensor_core.cuh"

#define H20_MOE_THREADS 256
/// Tokens (warps) per route CTA and rows (warps) per gather CTA.
#define H20_MOE_ROUTE_TOKENS 8
#define H20_MOE_GATHER_ROWS 8
#define H20_MOE_MAX_EXPERTS 1024
#define H20_MOE_MAX_TOPK 16
/// Groups of 4 picks each positions thread tests per step (a step covers
/// 4 x 256 x this picks; a multiple of 4).
#ifndef H20_MOE_POS_GROUPS
#define H20_MOE_POS_GROUPS 8
#endif

/// Strided views of one memref descriptor (element pointers).
template <typename T> struct MoeView1 {
  T *p;
  i64 off, d0, s0;
  __device__ __forceinline__ T *at(i64 i) const { return p + off + i * s0; }
};
template <typename T> struct MoeView2 {
  T *p;
  i64 off, d0, d1, s0, s1;
  __device__ __forceinline__ T *at(i64 i, i64 j) const { return p + off + i * s0 + j * s1; }
  __device__ __forceinline__ T *origin() const { return p + off; }
};
#define H20_MOE_V1(n) {n, n##_off, n##_d0, n##_s0}
#define H20_MOE_V2(n) {n, n##_off, n##_d0, n##_d1, n##_s0, n##_s1}

/// Element type DT's storage (f32: float; f16/bf16: the 16 bits), loads to
/// and rounding from float (tensor_core.cuh's H20Elem: round to nearest even).
template <int DT> struct MoeType { typedef u16 T; };
template <> struct MoeType<0> { typedef float T; };
template <int DT> using MoeElemT = typename MoeType<DT>::T;

template <int DT> __device__ __forceinline__ float moeLoad(const MoeElemT<DT> *p) {
  return H20Elem<DT>::load(p);
}
template <int DT> __device__ __forceinline__ MoeElemT<DT> moeRound(float f) {
  if constexpr (DT == 0)
    return f;
  else
    return H20Elem<DT>::round(f);
}

__device__ __forceinline__ bool moeAligned(const void *p, unsigned bytes) {
  return (reinterpret_cast<u64>(p) & (bytes - 1)) == 0;
}

__device__ __forceinline__ float moeNegInf() { return __int_as_float(0xff800000); }

// ---- 2. ROUTE -----------------------------------------------------------------------

/// One warp per token t = blockIdx.x * 8 + warp. The token's E scores go to
/// shared memory (lane l computes experts l, l + 32, ..; coalesced logits
/// reads), the bias is staged once per CTA. Each of the K rounds is an
/// argmax over the untaken keys: every lane scans its experts in increasing
/// order keeping the first of equal keys, then a butterfly over (key,
/// index) pairs — larger key, or equal key and lower index — leaves the
/// winner in every lane, and the owning lane marks it taken (bit i of its
/// mask for expert lane + 32 i). A lane that has nothing untaken offers
/// (-inf, INT_MAX), which a real -inf (or NaN) key still beats, so exactly
/// K distinct experts are picked whenever K <= E. Lane j keeps pick j; the
/// weights' denominator is summed in pick order, as the reference does.
/// Expert parallelism: this rank holds experts [first, first + El) (El =
/// counts.d0; first = 0, El = E on one GPU): counts[e - first] counts its
/// picks, and a pick of another rank's expert gets pos = -1 (the combine
/// skips it; positions fills the rest).
template <int BT>
__device__ __forceinline__ void moeRoute(MoeView2<const float> lg, MoeView1<const void> bias,
                                         MoeView2<int> ids, MoeView2<float> w,
                                         MoeView1<int> counts, MoeView2<int> pos, float temp,
                                         float scaling, int first) {
  __shared__ float scoreS[H20_MOE_ROUTE_TOKENS][H20_MOE_MAX_EXPERTS];
  __shared__ float biasS[H20_MOE_MAX_EXPERTS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int E = static_cast<int>(lg.d1), K = static_cast<int>(ids.d1);
  const unsigned char *biasBytes = static_cast<const unsigned char *>(bias.p);
  for (int e = tid; e < E; e += H20_MOE_THREADS)
    biasS[e] = H20Elem<BT>::load(biasBytes + (bias.off + e * bias.s0) * H20Elem<BT>::bytes);
  __syncthreads();
  const i64 t = static_cast<i64>(blockIdx.x) * H20_MOE_ROUTE_TOKENS + warp;
  if (t >= lg.d0)
    return;
  float *sc = scoreS[warp];
  for (int e = lane; e < E; e += 32) {
    // ONNX Div then Softplus (ln(1 + exp(x)), in its overflow-free form)
    // then Sqrt; IEEE division and square root (NVRTC's defaults).
    const float x = *lg.at(t, e) / temp;
    sc[e] = sqrtf(fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))));
  }
  __syncwarp();

  const int none = 0x7fffffff;
  u32 taken = 0;
  int myExpert = none;
  float myScore = 0.0f;
  for (int j = 0; j < K; ++j) {
    float best = moeNegInf();
    int bestE = none;
    for (int i = 0, e = lane; e < E; ++i, e += 32) {
      if ((taken >> i) & 1u)
        continue;
      float key = sc[e] + biasS[e];
      if (key != key)
        key = moeNegInf(); // NaN ranks as -inf
      if (bestE == none || key > best) {
        best = key;
        bestE = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, bestE, o);
      if (ok > best || (ok == best && oe < bestE)) {
        best = ok;
        bestE = oe;
      }
    }
    if (bestE < E) {
      if (lane == (bestE & 31))
        taken |= 1u << (bestE >> 5);
      if (lane == j) {
        myExpert = bestE;
        myScore = sc[bestE];
      }
    }
  }
  float sum = 0.0f;
  for (int j = 0; j < K; ++j)
    sum += __shfl_sync(0xffffffffu, myScore, j);
  if (lane < K && myExpert < E) {
    *ids.at(t, lane) = myExpert;
    *w.at(t, lane) = myScore / (sum + 1e-20f) * scaling;
    const int local = myExpert - first;
    if (local >= 0 && local < static_cast<int>(counts.d0))
      atomicAdd(counts.at(local), 1);
    else
      *pos.at(t, lane) = -1;
  }
}

// ---- 3. POSITIONS -------------------------------------------------------------------

/// CTA e: off_e = counts[0] + .. + counts[e - 1] (a block reduction), then
/// a scan of the picks a = t * K + j in increasing order, 8192 per step:
/// thread tid tests the 4 picks of group g = v * 256 + tid (a = base + 4 g
/// .. 4 g + 3, one 16-byte load where ids is contiguous and aligned) for
/// v < 8, so a step's order is (v, warp, lane, k). Per (v, warp): four
/// ballots give the warp's count and each lane's matches below it; warp 0
/// scans the 64 counts; a matching pick's rank = earlier matches + its
/// (v, warp) prefix + the matches of lower lanes + its own lower k. The
/// scan stops once counts[e] picks were placed. Every CTA reads all R ids
/// (L2-resident; E x R compares in all): no atomics, a fixed order. On an
/// H200 at E = 384, K = 6 this takes about 0.35 ms for T = 64K and 1.4 to
/// 1.6 ms for T = 256K (R = 1.5M), bound by those L2 reads (about 1.7 TB/s
/// in all): 4-byte loads, 16-byte loads and staggered start points timed
/// the same, so fewer bytes (several experts per CTA) would be the lever.
/// Expert parallelism: CTA e places the picks of expert first + e (this
/// rank's e-th), counts and offsets are over this rank's experts.
__device__ __forceinline__ void moePositions(MoeView2<const int> ids, MoeView1<const int> counts,
                                             MoeView1<int> offsets, MoeView2<int> pos,
                                             MoeView1<int> rowToken, int first) {
  constexpr int V = H20_MOE_POS_GROUPS, WARPS = H20_MOE_THREADS / 32;
  constexpr int STEP = 4 * V * H20_MOE_THREADS;
  __shared__ int red[WARPS];
  __shared__ int warpCounts[V * WARPS];
  __shared__ int prefix[V * WARPS + 1];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int e = blockIdx.x, E = static_cast<int>(counts.d0);
  const int K = static_cast<int>(ids.d1);
  const int R = static_cast<int>(ids.d0 * ids.d1);
  if (e >= E)
    return;

  int part = 0;
  for (int x = tid; x < e; x += H20_MOE_THREADS)
    part += *counts.at(x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    part += __shfl_xor_sync(0xffffffffu, part, o);
  if (lane == 0)
    red[warp] = part;
  __syncthreads();
  int off = 0;
#pragma unroll
  for (int w = 0; w < WARPS; ++w)
    off += red[w];
  const int cnt = *counts.at(e);
  if (tid == 0) {
    *offsets.at(e) = off;
    if (e == E - 1)
      *offsets.at(E) = off + cnt;
  }
  if (cnt <= 0)
    return;

  // Contiguous ids: pick a is element a (no division on the hot path);
  // 16-byte aligned as well: four picks per load.
  const bool flat = ids.s1 == 1 && ids.s0 == ids.d1;
  const bool vec = flat && moeAligned(ids.origin(), 16);
  const int *flatIds = ids.origin();
  const u32 below = (1u << lane) - 1u;
  int found = 0;
  for (int base = 0; base < R && found < cnt; base += STEP) {
    int mask[V], before[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int a0 = base + 4 * (v * H20_MOE_THREADS + tid);
      int id[4] = {-1, -1, -1, -1};
      if (vec && a0 + 3 < R) {
        const int4 q = *reinterpret_cast<const int4 *>(flatIds + a0);
        id[0] = q.x, id[1] = q.y, id[2] = q.z, id[3] = q.w;
      } else if (a0 < R) {
        const int t0 = flat ? 0 : a0 / K;
        int j = a0 - t0 * K, t = t0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          if (a0 + k < R)
            id[k] = flat ? flatIds[a0 + k] : *ids.at(t, j);
          if (++j == K)
            j = 0, ++t;
        }
      }
      int m = 0, total = 0, mine = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const bool hit = id[k] == first + e;
        const u32 b = __ballot_sync(0xffffffffu, hit);
        m |= hit ? 1 << k : 0;
        total += __popc(b);
        mine += __popc(b & below);
      }
      mask[v] = m;
      before[v] = mine;
      if (lane == 0)
        warpCounts[v * WARPS + warp] = total;
    }
    __syncthreads();
    if (warp == 0) {
      // Exclusive scan of the V * WARPS counts, PER consecutive ones per lane.
      constexpr int PER = V * WARPS / 32;
      int c[PER], sum = 0;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        c[k] = warpCounts[PER * lane + k];
        sum += c[k];
      }
      int incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o)
          incl += y;
      }
      int run = incl - sum;
#pragma unroll
      for (int k = 0; k < PER; ++k) {
        prefix[PER * lane + k] = run;
        run += c[k];
      }
      if (lane == 31)
        prefix[V * WARPS] = incl;
    }
    __syncthreads();
#pragma unroll
    for (int v = 0; v < V; ++v) {
      if (mask[v] == 0)
        continue;
      const int a0 = base + 4 * (v * H20_MOE_THREADS + tid);
      int r = off + found + prefix[v * WARPS + warp] + before[v];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (!((mask[v] >> k) & 1))
          continue;
        const int a = a0 + k, t = a / K;
        *pos.at(t, a - t * K) = r;
        *rowToken.at(r) = t;
        ++r;
      }
    }
    found += prefix[V * WARPS];
  }
}

// ---- 4. GATHER ----------------------------------------------------------------------

/// The rows the positions kernel placed: offsets' last entry (offsets[E],
/// the picks of this rank's experts), clamped to [0, rows]. Rows past it
/// are scratch no GEMM (they stop at the offsets) and no combine (it skips
/// pos -1) reads, so the gather and the SwiGLU stop there too.
__device__ __forceinline__ i64 moePlacedRows(MoeView1<const int> offsets, i64 rows) {
  const i64 placed = *offsets.at(offsets.d0 - 1);
  return placed < 0 ? 0 : (placed < rows ? placed : rows);
}

/// One warp per permuted row r = blockIdx.x * 8 + warp: Xp[r, :] =
/// X[rowToken[r], :], as 16-byte chunks when both views have contiguous,
/// 16-byte aligned rows, else element by element. The kernel moves bits,
/// so it depends only on the element size. A token outside [0, T) (never
/// produced by POSITIONS) gives a zero row rather than a wild read. Rows from
/// moePlacedRows on are left as they are.
template <int BYTES, typename T>
__device__ __forceinline__ void moeGather(MoeView2<const T> x, MoeView1<const int> rowToken,
                                          MoeView2<T> xp, MoeView1<const int> offsets) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 r = static_cast<i64>(blockIdx.x) * H20_MOE_GATHER_ROWS + warp;
  if (r >= moePlacedRows(offsets, xp.d0))
    return;
  const i64 D = xp.d1;
  const int tok = *rowToken.at(r);
  const bool valid = tok >= 0 && tok < x.d0;
  constexpr int PER = 16 / BYTES; // elements per chunk
  const bool vec = D % PER == 0 && x.s1 == 1 && xp.s1 == 1 && x.s0 % PER == 0 &&
                   xp.s0 % PER == 0 && moeAligned(x.origin(), 16) && moeAligned(xp.origin(), 16);
  if (vec) {
    const uint4 *src = reinterpret_cast<const uint4 *>(valid ? x.at(tok, 0) : x.origin());
    uint4 *dst = reinterpret_cast<uint4 *>(xp.at(r, 0));
    const i64 chunks = D / PER;
#pragma unroll 4
    for (i64 c = lane; c < chunks; c += 32)
      dst[c] = valid ? src[c] : make_uint4(0, 0, 0, 0);
  } else {
    for (i64 d = lane; d < D; d += 32)
      *xp.at(r, d) = valid ? *x.at(tok, d) : T(0);
  }
}

// ---- 6. SWIGLU ----------------------------------------------------------------------

/// silu(min(g, limit)) * clamp(u, -limit, limit), silu(x) = x / (1 +
/// exp(-x)). The comparisons are written so that NaN propagates as ONNX
/// Min / Clip do (fminf would drop it).
__device__ __forceinline__ float moeSwigluValue(float g, float u, float limit) {
  g = g > limit ? limit : g;
  u = u > limit ? limit : (u < -limit ? -limit : u);
  return g / (1.0f + expf(-g)) * u;
}

/// Grid-stride over the R x I elements, 4 per item (float4 loads, one 16-
/// or 8-byte store) where every view has unit column stride, row strides
/// and I multiples of 4 and aligned origins, else 1. An item's (row,
/// column) advances by the grid's stride without a division per item.
template <int DT>
__device__ __forceinline__ void moeSwiglu(MoeView2<const float> g, MoeView2<const float> u,
                                          MoeView2<MoeElemT<DT>> a, MoeView1<const int> offsets,
                                          float limit) {
  typedef MoeElemT<DT> T;
  const i64 R = moePlacedRows(offsets, a.d0), I = a.d1;
  const bool vec = I % 4 == 0 && g.s1 == 1 && u.s1 == 1 && a.s1 == 1 && g.s0 % 4 == 0 &&
                   u.s0 % 4 == 0 && a.s0 % 4 == 0 && moeAligned(g.origin(), 16) &&
                   moeAligned(u.origin(), 16) && moeAligned(a.origin(), 4 * sizeof(T));
  const int V = vec ? 4 : 1;
  const i64 Q = I / V; // items per row
  if (Q == 0 || R == 0)
    return;
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  const i64 first = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  const i64 dr = stride / Q, dc = stride - dr * Q;
  i64 r = first / Q, c = first - r * Q;
  for (; r < R; r += dr) {
    if (vec) {
      const float4 gv = *reinterpret_cast<const float4 *>(g.at(r, c * 4));
      const float4 uv = *reinterpret_cast<const float4 *>(u.at(r, c * 4));
      const float o0 = moeSwigluValue(gv.x, uv.x, limit), o1 = moeSwigluValue(gv.y, uv.y, limit);
      const float o2 = moeSwigluValue(gv.z, uv.z, limit), o3 = moeSwigluValue(gv.w, uv.w, limit);
      if constexpr (DT == 0) {
        *reinterpret_cast<float4 *>(a.at(r, c * 4)) = make_float4(o0, o1, o2, o3);
      } else {
        const u32 lo =
            static_cast<u32>(moeRound<DT>(o0)) | static_cast<u32>(moeRound<DT>(o1)) << 16;
        const u32 hi =
            static_cast<u32>(moeRound<DT>(o2)) | static_cast<u32>(moeRound<DT>(o3)) << 16;
        *reinterpret_cast<uint2 *>(a.at(r, c * 4)) = make_uint2(lo, hi);
      }
    } else {
      *a.at(r, c) = moeRound<DT>(moeSwigluValue(*g.at(r, c), *u.at(r, c), limit));
    }
    c += dc;
    if (c >= Q) {
      c -= Q;
      ++r;
    }
  }
}

// ---- 4 / 6 in FP8: GATHER and SWIGLU for the FP8 expert GEMM -------------------------

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// Under the FP8 expert GEMM (moe_fp4_gemm.cuh's h20_moe_fp4_gemm_fp8_wg,
/// Hopper only) the GEMMs read their A as e4m3 codes with one float32
/// scale per 1 x 128 block: Aq [R, K] bytes and As [K / 128, R] f32, the
/// layout and the formula of fp8_quant.cuh (amax floored at 1e-4, scale
/// amax / 448, codes x / scale rounded to nearest even). GATHER and SWIGLU
/// write that form directly, so no 16-bit A is stored and read back by a
/// separate quantising kernel, and, like their 16-bit forms, they stop at
/// the placed rows (a rank of an expert-parallel split quantises only its
/// own ~R / N rows). One warp per row r (8 per CTA, grid ceil(R / 8)); a
/// half-warp per 128-element block, 8 elements a lane. `load(col, v)`
/// gives the row's elements col .. col + 7 as floats (0 past K). A partial
/// last block (K % 128 != 0) counts its missing elements as 0.
template <class Load>
__device__ __forceinline__ void moeQuantizeRowFp8(Load load, i64 K, MoeView2<unsigned char> q,
                                                  MoeView2<float> s, i64 r) {
  const int lane = threadIdx.x & 31, half = lane >> 4, hl = lane & 15;
  const unsigned mask = 0xffffu << (16 * half);
  unsigned char *qrow = q.at(r, 0);
  const bool vecStore = q.s1 == 1 && moeAligned(qrow, 8);
  const i64 blocks = (K + 127) / 128;
  for (i64 b = half; b < blocks; b += 2) {
    const i64 col0 = b * 128 + hl * 8;
    float v[8];
    load(col0, v);
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      amax = fmaxf(amax, fabsf(v[e]));
#pragma unroll
    for (int o = 8; o > 0; o >>= 1)
      amax = fmaxf(amax, __shfl_xor_sync(mask, amax, o));
    const float scale = h20Fp8Scale(amax);
    const u32 lo = h20Fp8Codes4(v[0], v[1], v[2], v[3], scale),
              hi = h20Fp8Codes4(v[4], v[5], v[6], v[7], scale);
    if (vecStore && col0 + 8 <= K) {
      *reinterpret_cast<uint2 *>(qrow + col0) = make_uint2(lo, hi);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (col0 + e < K)
          qrow[(col0 + e) * q.s1] = static_cast<unsigned char>((e < 4 ? lo : hi) >> (8 * (e & 3)));
    }
    if (hl == 0)
      *s.at(b, r) = scale;
  }
}

/// GATHER into e4m3: Xq[r, :], Xs[:, r] = the FP8 blocks of X[rowToken[r],
/// :] for the placed rows (bit for bit what GATHER and then fp8_quant.cuh
/// give: the same element values and arithmetic). A token outside [0, T)
/// gives a zero row, as in GATHER.
template <int DT>
__device__ __forceinline__ void moeGatherFp8(MoeView2<const MoeElemT<DT>> x,
                                             MoeView1<const int> rowToken,
                                             MoeView2<unsigned char> xq, MoeView2<float> xs,
                                             MoeView1<const int> offsets) {
  typedef MoeElemT<DT> T;
  const i64 r = static_cast<i64>(blockIdx.x) * H20_MOE_GATHER_ROWS + (threadIdx.x >> 5);
  if (r >= moePlacedRows(offsets, xq.d0))
    return;
  const i64 D = xq.d1;
  const int tok = *rowToken.at(r);
  const bool valid = tok >= 0 && tok < x.d0;
  const T *src = valid ? x.at(tok, 0) : x.origin();
  const bool vec = D % 8 == 0 && x.s1 == 1 && moeAligned(src, 16);
  moeQuantizeRowFp8(
      [&](i64 col, float *v) {
        if (valid && vec && col + 8 <= D) {
          if constexpr (DT == 0) {
            const float4 a = *reinterpret_cast<const float4 *>(src + col);
            const float4 b = *reinterpret_cast<const float4 *>(src + col + 4);
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
            v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
          } else {
            const uint4 w = *reinterpret_cast<const uint4 *>(src + col);
            const u32 p[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const u16 l = static_cast<u16>(p[e] & 0xffffu), h = static_cast<u16>(p[e] >> 16);
              v[2 * e] = moeLoad<DT>(&l);
              v[2 * e + 1] = moeLoad<DT>(&h);
            }
          }
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e)
            v[e] = valid && col + e < D ? moeLoad<DT>(x.at(tok, col + e)) : 0.0f;
        }
      },
      D, xq, xs, r);
}

/// Eight floats returned by value (kept in registers, never addressed).
struct MoeFloat8 {
  float v[8];
};

/// SwiGLU of (G, U)[r, col + e], e < 8 (0 past I): the element path, out
/// of line so that its 64-bit addressing does not cost the vector path
/// registers (inlined, the kernel took 102).
__device__ __noinline__ MoeFloat8 moeSwigluElements8(MoeView2<const float> g,
                                                     MoeView2<const float> u, i64 r, i64 col,
                                                     i64 I, float limit) {
  MoeFloat8 o;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    o.v[e] = col + e < I ? moeSwigluValue(*g.at(r, col + e), *u.at(r, col + e), limit) : 0.0f;
  return o;
}

/// SWIGLU into e4m3: Aq[r, :], As[:, r] = the FP8 blocks of
/// silu(min(G, limit)) * clamp(U, -limit, limit) for the placed rows,
/// quantised from the float32 values (the 16-bit path rounds A to its
/// element type first; here that second rounding is not made).
__device__ __forceinline__ void moeSwigluFp8(MoeView2<const float> g, MoeView2<const float> u,
                                             MoeView2<unsigned char> aq, MoeView2<float> as,
                                             MoeView1<const int> offsets, float limit) {
  const i64 r = static_cast<i64>(blockIdx.x) * H20_MOE_GATHER_ROWS + (threadIdx.x >> 5);
  if (r >= moePlacedRows(offsets, aq.d0))
    return;
  const i64 I = aq.d1;
  const float *gr = g.at(r, 0), *ur = u.at(r, 0);
  const bool vec = I % 8 == 0 && g.s1 == 1 && u.s1 == 1 && moeAligned(gr, 16) &&
                   moeAligned(ur, 16);
  moeQuantizeRowFp8(
      [&](i64 col, float *v) {
        if (vec && col + 8 <= I) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float4 gv = *reinterpret_cast<const float4 *>(gr + col + 4 * h);
            const float4 uv = *reinterpret_cast<const float4 *>(ur + col + 4 * h);
            v[4 * h] = moeSwigluValue(gv.x, uv.x, limit);
            v[4 * h + 1] = moeSwigluValue(gv.y, uv.y, limit);
            v[4 * h + 2] = moeSwigluValue(gv.z, uv.z, limit);
            v[4 * h + 3] = moeSwigluValue(gv.w, uv.w, limit);
          }
        } else {
          const MoeFloat8 o = moeSwigluElements8(g, u, r, col, I, limit);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            v[e] = o.v[e];
        }
      },
      I, aq, as, r);
}
#endif // __CUDA_ARCH_FEAT_SM90_ALL

// ---- 8. COMBINE ---------------------------------------------------------------------

/// One CTA per token t: its K (row, weight) pairs in shared memory, then
/// each thread accumulates columns (4 at a time where Yp and Y allow, as
/// in SWIGLU) over j = 0..K-1 in order with fused multiply-adds. A row
/// outside [0, R) (never produced by POSITIONS) contributes nothing.
template <int DT>
__device__ __forceinline__ void moeCombine(MoeView2<const float> yp, MoeView2<const int> pos,
                                           MoeView2<const float> w, MoeView2<MoeElemT<DT>> y) {
  typedef MoeElemT<DT> T;
  __shared__ i64 rowS[H20_MOE_MAX_TOPK];
  __shared__ float wS[H20_MOE_MAX_TOPK];
  const int tid = threadIdx.x;
  const i64 t = blockIdx.x;
  if (t >= y.d0)
    return;
  const int K = static_cast<int>(pos.d1 < H20_MOE_MAX_TOPK ? pos.d1 : H20_MOE_MAX_TOPK);
  const i64 D = y.d1;
  if (tid < K) {
    const int p = *pos.at(t, tid);
    rowS[tid] = p >= 0 && p < yp.d0 ? static_cast<i64>(p) : -1;
    wS[tid] = *w.at(t, tid);
  }
  __syncthreads();
  const bool vec = D % 4 == 0 && yp.s1 == 1 && y.s1 == 1 && yp.s0 % 4 == 0 && y.s0 % 4 == 0 &&
                   moeAligned(yp.origin(), 16) && moeAligned(y.origin(), 4 * sizeof(T));
  if (vec) {
    for (i64 q = tid; q < D / 4; q += H20_MOE_THREADS) {
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
      for (int j = 0; j < K; ++j) {
        const i64 row = rowS[j];
        if (row < 0)
          continue;
        const float wj = wS[j];
        const float4 v = *reinterpret_cast<const float4 *>(yp.at(row, q * 4));
        acc.x = fmaf(wj, v.x, acc.x);
        acc.y = fmaf(wj, v.y, acc.y);
        acc.z = fmaf(wj, v.z, acc.z);
        acc.w = fmaf(wj, v.w, acc.w);
      }
      if constexpr (DT == 0) {
        *reinterpret_cast<float4 *>(y.at(t, q * 4)) = acc;
      } else {
        const u32 lo =
            static_cast<u32>(moeRound<DT>(acc.x)) | static_cast<u32>(moeRound<DT>(acc.y)) << 16;
        const u32 hi =
            static_cast<u32>(moeRound<DT>(acc.z)) | static_cast<u32>(moeRound<DT>(acc.w)) << 16;
        *reinterpret_cast<uint2 *>(y.at(t, q * 4)) = make_uint2(lo, hi);
      }
    }
  } else {
    for (i64 c = tid; c < D; c += H20_MOE_THREADS) {
      float acc = 0.0f;
      for (int j = 0; j < K; ++j) {
        const i64 row = rowS[j];
        if (row >= 0)
          acc = fmaf(wS[j], *yp.at(row, c), acc);
      }
      *y.at(t, c) = moeRound<DT>(acc);
    }
  }
}

// ---- entry points -------------------------------------------------------------------

/// logits [T, E] f32, bias [E] (BT), ids [T, K] i32, weights [T, K] f32,
/// counts [E] i32 (zeroed by the caller, accumulated). Grid ceil(T / 8).
#define H20_MOE_ROUTE(NAME, BT)                                                                    \
  extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)                                    \
      NAME(H20_MR2(const float, lg), H20_MR1(const void, bias), H20_MR2(int, ids),                 \
           H20_MR2(float, w), H20_MR1(int, counts), H20_MR2(int, pos), float temp,                 \
           float scaling, int first) {                                                             \
    moeRoute<BT>(H20_MOE_V2(lg), H20_MOE_V1(bias), H20_MOE_V2(ids), H20_MOE_V2(w),                 \
                 H20_MOE_V1(counts), H20_MOE_V2(pos), temp, scaling, first);                       \
  }
H20_MOE_ROUTE(h20_moe_route_bf32, 0)
H20_MOE_ROUTE(h20_moe_route_bf16, 1)
H20_MOE_ROUTE(h20_moe_route_bbf16, 2)

/// ids [T, K] i32, counts [E] i32, offsets [E + 1] i32, pos [T, K] i32,
/// rowToken [R] i32. Grid E.
extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)
    h20_moe_positions(H20_MR2(const int, ids), H20_MR1(const int, counts), H20_MR1(int, offsets),
                      H20_MR2(int, pos), H20_MR1(int, rowToken), int first) {
  moePositions(H20_MOE_V2(ids), H20_MOE_V1(counts), H20_MOE_V1(offsets), H20_MOE_V2(pos),
               H20_MOE_V1(rowToken), first);
}

/// X [T, Dm], rowToken [R] i32, Xp [R, Dm] (DT), offsets [E + 1] i32.
/// Grid ceil(R / 8).
#define H20_MOE_GATHER(NAME, DT)                                                                   \
  extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)                                    \
      NAME(H20_MR2(const MoeElemT<DT>, x), H20_MR1(const int, rowToken),                           \
           H20_MR2(MoeElemT<DT>, xp), H20_MR1(const int, offsets)) {                               \
    moeGather<sizeof(MoeElemT<DT>), MoeElemT<DT>>(H20_MOE_V2(x), H20_MOE_V1(rowToken),             \
                                                  H20_MOE_V2(xp), H20_MOE_V1(offsets));            \
  }
H20_MOE_GATHER(h20_moe_gather_f32, 0)
H20_MOE_GATHER(h20_moe_gather_f16, 1)
H20_MOE_GATHER(h20_moe_gather_bf16, 2)

/// G [R, I] f32, U [R, I] f32, A [R, I] (DT), offsets [E + 1] i32. Grid
/// moeSwigluGrid(R * I).
#define H20_MOE_SWIGLU(NAME, DT)                                                                   \
  extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)                                    \
      NAME(H20_MR2(const float, g), H20_MR2(const float, u), H20_MR2(MoeElemT<DT>, a),             \
           H20_MR1(const int, offsets), float limit) {                                             \
    moeSwiglu<DT>(H20_MOE_V2(g), H20_MOE_V2(u), H20_MOE_V2(a), H20_MOE_V1(offsets), limit);        \
  }
H20_MOE_SWIGLU(h20_moe_swiglu_f32, 0)
H20_MOE_SWIGLU(h20_moe_swiglu_f16, 1)
H20_MOE_SWIGLU(h20_moe_swiglu_bf16, 2)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// X [T, Dm] (DT), rowToken [R] i32, Xq [R, Dm] e4m3, Xs [ceil(Dm / 128),
/// R] f32, offsets [E + 1] i32. Grid ceil(R / 8).
#define H20_MOE_GATHER_FP8(NAME, DT)                                                               \
  extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)                                    \
      NAME(H20_MR2(const MoeElemT<DT>, x), H20_MR1(const int, rowToken),                           \
           H20_MR2(unsigned char, xq), H20_MR2(float, xs), H20_MR1(const int, offsets)) {          \
    moeGatherFp8<DT>(H20_MOE_V2(x), H20_MOE_V1(rowToken), H20_MOE_V2(xq), H20_MOE_V2(xs),          \
                     H20_MOE_V1(offsets));                                                         \
  }
H20_MOE_GATHER_FP8(h20_moe_gather_fp8_f32, 0)
H20_MOE_GATHER_FP8(h20_moe_gather_fp8_f16, 1)
H20_MOE_GATHER_FP8(h20_moe_gather_fp8_bf16, 2)
#undef H20_MOE_GATHER_FP8

/// G [R, I] f32, U [R, I] f32, Aq [R, I] e4m3, As [ceil(I / 128), R] f32,
/// offsets [E + 1] i32. Grid ceil(R / 8).
extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)
    h20_moe_swiglu_fp8(H20_MR2(const float, g), H20_MR2(const float, u),
                       H20_MR2(unsigned char, aq), H20_MR2(float, as), H20_MR1(const int, offsets),
                       float limit) {
  moeSwigluFp8(H20_MOE_V2(g), H20_MOE_V2(u), H20_MOE_V2(aq), H20_MOE_V2(as), H20_MOE_V1(offsets),
               limit);
}
#endif // __CUDA_ARCH_FEAT_SM90_ALL

/// Yp [R, Dm] f32, pos [T, K] i32, weights [T, K] f32, Y [T, Dm] (DT).
/// Grid T.
#define H20_MOE_COMBINE(NAME, DT)                                                                  \
  extern "C" __global__ void __launch_bounds__(H20_MOE_THREADS)                                    \
      NAME(H20_MR2(const float, yp), H20_MR2(const int, pos), H20_MR2(const float, w),             \
           H20_MR2(MoeElemT<DT>, y)) {                                                             \
    moeCombine<DT>(H20_MOE_V2(yp), H20_MOE_V2(pos), H20_MOE_V2(w), H20_MOE_V2(y));                 \
  }
H20_MOE_COMBINE(h20_moe_combine_f32, 0)
H20_MOE_COMBINE(h20_moe_combine_f16, 1)
H20_MOE_COMBINE(h20_moe_combine_bf16, 2)

#undef H20_MOE_ROUTE
#undef H20_MOE_GATHER
#undef H20_MOE_SWIGLU
#undef H20_MOE_COMBINE
#undef H20_MOE_V1
#undef H20_MOE_V2

#endif // H20_MOE_CUH
