//===- moe_fp4_gemm.cuh - grouped GEMM over MXFP4 expert weights, for NVRTC -*- CUDA -*-===//
//
// Steps 5 and 7 of moe.cuh's routed-experts pipeline when the experts are
// stored as MXFP4 (onnx.h20.RoutedExpertsMxfp4; DeepSeek-V4's released
// routed experts): for every expert e and its permuted rows r in
// [offsets[e], offsets[e + 1]),
//   C[r, n] = sum_k A[r, k] * W_e[n, k],  W_e[n, k] = e2m1(q) * 2^(s - 127)
// with q the k-th 4-bit code of row n of Wq[e] (two per byte, element 2j
// in the low nibble, sign in bit 3; OCP Microscaling Formats v1.0, table
// 5) and s = Ws[e, n, k / 32], the ue8m0 scale byte (255 is NaN). The
// weights are dequantised in the load path (the packed bytes of one k tile
// become a bf16 tile in shared memory) and never stored wider in device
// memory. A is f32, f16 or bf16 (the element type DT), C float32.
//
// The offsets are read on the device (no host round trip): CTA
// (x, y) takes column tile x and the y-th row tile of the concatenation of
// the experts' row tiles (expert e has ceil(count_e / BM) of them; the
// grid's y extent, ceil(R / BM) + E, bounds their total, and CTAs past it
// exit).
//
// bf16 (the prefill path): BM x BN = 128 x 128 tiles, BK = 64, eight warps
// of 64 x 32 each running mma.sync m16n8k16 (float32 accumulators). A tiles
// and the packed weight bytes arrive by cp.async (three stages); per k
// tile every thread turns 16 bytes (32 codes of one scale block) into bf16
// with integer bit placement and one or two exact bf16x2 multiplies by
// powers of two (e2m1 values have two significant bits), into a swizzled
// [BN][BK] tile that ldmatrix reads as the B fragments.
// bf16 on Hopper (sm_90a, h20_moe_fp4_gemm_bf16_wg; the kernel chooser
// records expert_gemm = "mxfp4_wgmma"): the same tiles, loads and
// dequantisation, the MMA on two warpgroups of wgmma m64n128k16 reading A
// and the dequantised W from shared memory (fp4GemmBf16Wg).
// f32 and f16 (tests, f16 graphs): a CUDA-core kernel of 64 x 64 tiles,
// BK = 32, each thread 4 x 4 outputs, W decoded to float32 in shared memory:
// the same products, float32 FMAs.
//
// Requirements: K a multiple of 32, A rows and Wq rows contiguous (unit
// inner strides), A's row stride a multiple of 8 elements and Wq's of 16
// bytes, both origins 16-byte aligned; R < 2^31. (The compiler checks the
// weights' layout and K; A is the pipeline's own contiguous scratch.)
// Launch geometry (MoeKernel.h): 256 threads, grid (ceil(N / BN),
// ceil(R / BM) + E); dynamic shared memory H20_FP4_SMEM_BYTES (77824) for
// bf16, H20_FP4W_SMEM_BYTES (111632) for the wgmma kernel, none for f32 /
// f16.
//
//===----------------------------------------------------------------------===//

#ifndef H20_MOE_FP4_GEMM_CUH
#define H20_MOE_FP4_GEMM_CUH

#include "h20_tensor_core.cuh"
#include "h20_wgmma.cuh"

#define H20_FP4_THREADS 256
/// Tile of the bf16 tensor-core kernel.
#define H20_FP4_BM 128
#define H20_FP4_BN 128
#define H20_FP4_BK 64
#define H20_FP4_STAGES 3
/// Tile of the f32 / f16 CUDA-core kernel.
#define H20_FP4_SBM 64
#define H20_FP4_SBN 64
#define H20_FP4_SBK 32

/// The views a kernel reads (element pointers, strides in elements).
template <typename T> struct Fp4Mat {
  T *p;
  i64 rows, cols, rowStride;
  __device__ __forceinline__ T *row(i64 r) const { return p + r * rowStride; }
};
struct Fp4Weights {
  const unsigned char *q, *s; ///< packed codes [E, N, K / 2], scales [E, N, K / 32]
  i64 qExpert, qRow, sExpert, sRow, sCol;
};

/// e2m1 value of code c (0..15) as float.
/// Codes 2..7 are normal, 2^(e - 1) (1 + m / 2) with e = bits 2..1 and m =
/// bit 0; codes 0 and 1 are 0 and 0.5. No table (no local memory).
__device__ __forceinline__ float fp4Value(int c) {
  const int m = c & 7;
  const float v = m < 2 ? 0.5f * static_cast<float>(m)
                        : __int_as_float(((m >> 1) + 126) << 23 | (m & 1) << 22);
  return (c & 8) ? -v : v;
}
/// 2^(s - 127) as float for a ue8m0 byte (255: NaN; 0: 2^-127, subnormal).
__device__ __forceinline__ float fp4ScaleF32(unsigned s) {
  if (s == 255u)
    return __int_as_float(0x7fc00000);
  return s ? __int_as_float(static_cast<int>(s << 23)) : __int_as_float(0x00400000);
}
/// The row tile of CTA row `tile`: its expert and rows [row0, rowEnd);
/// false when `tile` is past the last expert's tiles. Warp 0 scans the
/// offsets 32 experts at a time; the result is shared through `sh`.
template <int BM>
__device__ __forceinline__ bool fp4FindTile(const int *off, i64 offStride, int E, int tile,
                                            int (&sh)[3], int &expert, int &row0, int &rowEnd) {
  const int lane = threadIdx.x & 31;
  if (threadIdx.x < 32) {
    int before = 0, found = -1, local = 0;
    for (int base = 0; base < E && found < 0; base += 32) {
      const int e = base + lane;
      int tiles = 0;
      if (e < E) {
        const int cnt = off[(e + 1) * offStride] - off[e * offStride];
        tiles = cnt > 0 ? (cnt + BM - 1) / BM : 0;
      }
      int incl = tiles;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o)
          incl += y;
      }
      const bool mine = tile >= before + incl - tiles && tile < before + incl;
      const unsigned hit = __ballot_sync(0xffffffffu, mine);
      if (hit) {
        const int w = __ffs(hit) - 1;
        found = base + w;
        local = __shfl_sync(0xffffffffu, tile - (before + incl - tiles), w);
      }
      before += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) {
      sh[0] = found;
      if (found >= 0) {
        sh[1] = off[found * offStride] + local * BM;
        sh[2] = off[(found + 1) * offStride];
      }
    }
  }
  __syncthreads();
  expert = sh[0];
  if (expert < 0)
    return false;
  row0 = sh[1];
  rowEnd = min(sh[2], row0 + BM);
  return true;
}

/// bf16 x2 product (round to nearest even; exact for the scaled codes).
__device__ __forceinline__ u32 fp4MulBf16x2(u32 a, u32 b) {
  u32 d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/// The two codes of byte b as a bf16x2 of e2m1(code) * 2^-126 (low half:
/// the low nibble): magnitude bits m placed at bf16 bits 8..6 give exponent
/// field m >> 1 and mantissa m & 1, i.e. exactly the e2m1 value times
/// 2^-126 (subnormal for codes 0 and 1); the sign bit goes to bit 15.
__device__ __forceinline__ u32 fp4PairBits(u32 b) {
  return ((b & 0x7u) << 6) | ((b & 0x8u) << 12) | ((b & 0x70u) << 18) | ((b & 0x80u) << 24);
}

/// Dequantises one 16-byte piece of packed codes (32 values of one scale
/// block) to 16 bf16x2 words: fp4PairBits times 2^(s - 1) (= 2^(s - 127)
/// after the 2^-126; bf16 exponent field s + 126), one exact multiply while
/// that is finite (s <= 128); else times 2^126 (the e2m1 values) then
/// 2^(s - 127) (exponent field s). s = 255 (E8M0's NaN) gives NaN.
__device__ __forceinline__ void fp4Dequant16(uint4 q, unsigned s, u32 (&out)[16]) {
  const u32 words[4] = {q.x, q.y, q.z, q.w};
  const bool one = s <= 128u;
  const u32 h = s == 255u ? 0x7fc0u : (one ? (s + 126u) << 7 : s << 7);
  const u32 scale = h | (h << 16), pre = 0x7e807e80u; // 2^126 in both halves
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    u32 v = fp4PairBits((words[i >> 2] >> (8 * (i & 3))) & 0xffu);
    if (!one)
      v = fp4MulBf16x2(v, pre);
    out[i] = fp4MulBf16x2(v, scale);
  }
}

// ---- bf16: tensor cores ---------------------------------------------------------------

/// Dynamic shared memory of the bf16 kernel: H20_FP4_STAGES x (A tile + packed
/// W tile) and the dequantised W tile.
#define H20_FP4_STAGE_BYTES (H20_FP4_BM * H20_FP4_BK * 2 + H20_FP4_BN * H20_FP4_BK / 2)
#define H20_FP4_SMEM_BYTES (H20_FP4_STAGES * H20_FP4_STAGE_BYTES + H20_FP4_BN * H20_FP4_BK * 2)

__device__ __forceinline__ void fp4GemmBf16(Fp4Mat<const u16> a, Fp4Weights w, const int *off,
                                            i64 offStride, int E, Fp4Mat<float> c) {
  constexpr int BM = H20_FP4_BM, BN = H20_FP4_BN, BK = H20_FP4_BK, ST = H20_FP4_STAGES;
  extern __shared__ __align__(128) unsigned char fp4Smem[];
  // Stage s: A tile [BM][BK] bf16 (swizzled), then the packed W tile [BN][BK / 2]
  // bytes; after the stages the dequantised W tile [BN][BK] bf16 (swizzled).
  auto stageA = [&](int st) { return fp4Smem + st * H20_FP4_STAGE_BYTES; };
  auto stageW = [&](int st) { return fp4Smem + st * H20_FP4_STAGE_BYTES + BM * BK * 2; };
  unsigned char *sB = fp4Smem + ST * H20_FP4_STAGE_BYTES;
  __shared__ int sh[3];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int e, row0, rowEnd;
  if (!fp4FindTile<BM>(off, offStride, E, blockIdx.y, sh, e, row0, rowEnd))
    return;
  const i64 n0 = static_cast<i64>(blockIdx.x) * BN, N = c.cols, K = a.cols;
  const unsigned char *wq = w.q + e * w.qExpert, *ws = w.s + e * w.sExpert;
  const int nk = static_cast<int>((K + BK - 1) / BK);

  auto loadTiles = [&](int kt) {
    if (kt < nk) {
      const int st = kt % ST;
      const i64 k0 = static_cast<i64>(kt) * BK;
#pragma unroll
      for (int i = 0; i < BM * BK / 8 / H20_FP4_THREADS; ++i) {
        const int chunk = tid + i * H20_FP4_THREADS, r = chunk / (BK / 8), cc = chunk % (BK / 8);
        const i64 gr = row0 + r, gk = k0 + cc * 8;
        const bool ok = gr < rowEnd && gk < K;
        h20CpAsync16(h20SmemAddr(stageA(st)) + h20Swizzle(r, cc * 8, BK), ok ? a.row(gr) + gk : a.p,
                     ok ? 16 : 0);
      }
      const int r = tid >> 1, cc = tid & 1;
      const i64 gn = n0 + r, gk = k0 + cc * 32;
      const bool ok = gn < N && gk < K;
      h20CpAsync16(h20SmemAddr(stageW(st) + r * (BK / 2) + cc * 16),
                   ok ? wq + gn * w.qRow + gk / 2 : w.q, ok ? 16 : 0);
    }
    h20CpAsyncCommit(); // an empty group past the end keeps the wait counts uniform
  };
  // This thread dequantises row tid / 2, scale block tid % 2 of every W tile.
  const int dr = tid >> 1, dh = tid & 1;
  auto loadScale = [&](int kt) -> unsigned {
    const i64 gn = n0 + dr, gb = static_cast<i64>(kt) * (BK / 32) + dh;
    return kt < nk && gn < N && gb * 32 < K ? ws[gn * w.sRow + gb * w.sCol] : 0u;
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        acc[i][j][q] = 0.0f;

  const int wm = warp >> 2, wn = warp & 3;
#pragma unroll
  for (int st = 0; st < ST - 1; ++st)
    loadTiles(st);
  unsigned scale = loadScale(0);
  const u32 bBase = h20SmemAddr(sB);
  for (int kt = 0; kt < nk; ++kt) {
    h20CpAsyncWait<ST - 2>();
    __syncthreads(); // tile kt landed; every warp is done with sB and stage (kt - 1) % ST
    {
      const uint4 q = *reinterpret_cast<const uint4 *>(stageW(kt % ST) + dr * (BK / 2) + dh * 16);
      u32 v[16];
      fp4Dequant16(q, scale, v);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        *reinterpret_cast<uint4 *>(sB + h20Swizzle(dr, dh * 32 + j * 8, BK)) =
            make_uint4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
    }
    loadTiles(kt + ST - 1);
    scale = loadScale(kt + 1);
    __syncthreads(); // sB holds tile kt
    const u32 aBase = h20SmemAddr(stageA(kt % ST));
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      u32 af[4][4], bf[2][4];
#pragma unroll
      for (int mf = 0; mf < 4; ++mf)
        h20LdmatrixX4(af[mf], aBase + h20Swizzle(wm * 64 + mf * 16 + (lane & 15),
                                                 ks * 16 + (lane >> 4) * 8, BK));
      // Matrix lane / 8 of pair p: n block (lane >> 4), k half ((lane >> 3) & 1).
#pragma unroll
      for (int p = 0; p < 2; ++p)
        h20LdmatrixX4(bf[p], bBase + h20Swizzle(wn * 32 + p * 16 + (lane >> 4) * 8 + (lane & 7),
                                                ks * 16 + ((lane >> 3) & 1) * 8, BK));
#pragma unroll
      for (int nf = 0; nf < 4; ++nf)
#pragma unroll
        for (int mf = 0; mf < 4; ++mf)
          H20Elem<2>::mma(acc[mf][nf], af[mf], bf[nf >> 1][(nf & 1) * 2],
                          bf[nf >> 1][(nf & 1) * 2 + 1]);
    }
  }

  const bool pairs = (c.rowStride & 1) == 0 && (reinterpret_cast<u64>(c.p) & 7) == 0;
#pragma unroll
  for (int mf = 0; mf < 4; ++mf)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const i64 r = row0 + wm * 64 + mf * 16 + (lane >> 2) + half * 8;
      if (r >= rowEnd)
        continue;
      float *dst = c.row(r);
#pragma unroll
      for (int nf = 0; nf < 4; ++nf) {
        const i64 col = n0 + wn * 32 + nf * 8 + 2 * (lane & 3);
        const float v0 = acc[mf][nf][2 * half], v1 = acc[mf][nf][2 * half + 1];
        if (pairs && col + 1 < N) {
          *reinterpret_cast<float2 *>(dst + col) = make_float2(v0, v1);
        } else {
          if (col < N)
            dst[col] = v0;
          if (col + 1 < N)
            dst[col + 1] = v1;
        }
      }
    }
}

// ---- bf16: wgmma (sm_90a) -------------------------------------------------------------

/// Stores a warpgroup's 64 x N float32 wgmma accumulators d (register
/// layout d[4j + 2h + x] = D[16 warp + g + 8h][8j + 2 quad + x]) as rows
/// row0 + wr + 8h (wr: this thread's row of the warpgroup's 64, g included)
/// and columns n0 + ... of C, skipping rows >= rowEnd and columns >= C's.
template <int N>
__device__ __forceinline__ void fp4StoreWgmmaRows(const float (&d)[N / 2], Fp4Mat<float> c,
                                                  i64 row0, int wr, i64 rowEnd, i64 n0, int lane) {
  const bool pairs = (c.rowStride & 1) == 0 && (reinterpret_cast<u64>(c.p) & 7) == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const i64 r = row0 + wr + 8 * h;
    if (r >= rowEnd)
      continue;
    float *dst = c.row(r);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const i64 col = n0 + 8 * j + 2 * (lane & 3);
      const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
      if (pairs && col + 1 < c.cols) {
        *reinterpret_cast<float2 *>(dst + col) = make_float2(v0, v1);
      } else {
        if (col < c.cols)
          dst[col] = v0;
        if (col + 1 < c.cols)
          dst[col + 1] = v1;
      }
    }
  }
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Stages of the wgmma kernel: A tile + packed W tile per stage (loads run
/// two k tiles ahead), and as many dequantised W tiles (a tile is rewritten
/// three iterations after its wgmma was issued, when every warpgroup has
/// waited for it and passed a barrier since: one barrier per k tile).
#define H20_FP4W_STAGES 3
/// Its dynamic shared memory: the stages, the dequantised W tiles, the
/// tile lookup's three ints (16 bytes) and the slack that aligns the base
/// to 1024 bytes (the 128-byte swizzle's atom). 111632 bytes: two CTAs an
/// SM on sm_90 (227 KiB a CTA, 228 KiB an SM with 1 KiB reserved a CTA).
#define H20_FP4W_SMEM_BYTES                                                                        \
  (H20_FP4W_STAGES * H20_FP4_STAGE_BYTES + H20_FP4W_STAGES * H20_FP4_BN * H20_FP4_BK * 2 + 16 +    \
   1024)

/// The bf16 kernel on Hopper's warpgroup MMA: the same tiles, loads and
/// dequantisation as fp4GemmBf16, and C's 128 x 128 tile as two warpgroups
/// of 64 x 128 (wgmma m64n128k16, A and the dequantised W both K-major in
/// shared memory with the 128-byte swizzle that h20Swizzle already lays
/// out, float32 accumulators in registers). Per k tile: every thread waits
/// for its own copies of tile kt, dequantises its 16 bytes of W into
/// dequantised tile kt % 3, fences them for the async proxy, one CTA
/// barrier; then waits for its warpgroup's wgmma of tile kt - 1 (which ran
/// under this tile's waits and dequantisation), reuses that stage for tile
/// kt + 2 (a warpgroup copies only its own 64 A rows, a thread only its
/// own W bytes, so no other barrier is needed) and issues tile kt's four
/// wgmma. Measured (moe-check, H100, V4.1-Flash shapes at 528 rows an
/// expert, bench/results/issue31-h100-moe-wgmma): 331 / 322 TFLOP/s
/// against mma.sync's 258 / 246. 128 x 256 tiles (one CTA an SM, to halve
/// the A rows each column tile re-reads from L2) ran slower: 314 / 296.
__device__ __forceinline__ void fp4GemmBf16Wg(Fp4Mat<const u16> a, Fp4Weights w, const int *off,
                                              i64 offStride, int E, Fp4Mat<float> c) {
  constexpr int BM = H20_FP4_BM, BN = H20_FP4_BN, BK = H20_FP4_BK, ST = H20_FP4W_STAGES;
  constexpr u32 kWTile = BN * BK * 2;
  extern __shared__ __align__(1024) unsigned char fp4WgSmem[];
  unsigned char *base = h20wg::alignSmem1024(fp4WgSmem);
  auto stageA = [&](int st) { return base + st * H20_FP4_STAGE_BYTES; };
  auto stageW = [&](int st) { return base + st * H20_FP4_STAGE_BYTES + BM * BK * 2; };
  unsigned char *sB = base + ST * H20_FP4_STAGE_BYTES; // [ST][BN][BK] bf16, swizzled
  int(&sh)[3] = *reinterpret_cast<int(*)[3]>(sB + ST * kWTile);
  const int tid = threadIdx.x, wg = tid >> 7, t = tid & 127, lane = tid & 31;
  int e, row0, rowEnd;
  if (!fp4FindTile<BM>(off, offStride, E, blockIdx.y, sh, e, row0, rowEnd))
    return;
  const i64 n0 = static_cast<i64>(blockIdx.x) * BN, N = c.cols, K = a.cols;
  const unsigned char *wq = w.q + e * w.qExpert, *ws = w.s + e * w.sExpert;
  const int nk = static_cast<int>((K + BK - 1) / BK);

  // Warpgroup wg copies A rows [64 wg, 64 wg + 64) (thread t: rows t / 8 +
  // 16 i, chunk t % 8); thread tid copies and later dequantises W row
  // tid / 2, scale block tid % 2.
  const int dr = tid >> 1, dh = tid & 1;
  auto loadTiles = [&](int kt) {
    if (kt < nk) {
      const int st = kt % ST;
      const i64 k0 = static_cast<i64>(kt) * BK;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = wg * 64 + (t >> 3) + 16 * i, cc = t & 7;
        const i64 gr = row0 + r, gk = k0 + cc * 8;
        const bool ok = gr < rowEnd && gk < K;
        h20CpAsync16(h20SmemAddr(stageA(st)) + h20Swizzle(r, cc * 8, BK), ok ? a.row(gr) + gk : a.p,
                     ok ? 16 : 0);
      }
      const i64 gn = n0 + dr, gk = k0 + dh * 32;
      const bool ok = gn < N && gk < K;
      h20CpAsync16(h20SmemAddr(stageW(st) + dr * (BK / 2) + dh * 16),
                   ok ? wq + gn * w.qRow + gk / 2 : w.q, ok ? 16 : 0);
    }
    h20CpAsyncCommit(); // an empty group past the end keeps the wait counts uniform
  };
  auto loadScale = [&](int kt) -> unsigned {
    const i64 gn = n0 + dr, gb = static_cast<i64>(kt) * (BK / 32) + dh;
    return kt < nk && gn < N && gb * 32 < K ? ws[gn * w.sRow + gb * w.sCol] : 0u;
  };

  // Not zeroed: the first k step's wgmma ignores the accumulators (scale-d
  // 0). Zeroing them by ordinary moves makes ptxas serialise every wgmma of
  // the loop (C7515).
  float acc[64];
  loadTiles(0);
  loadTiles(1);
  unsigned scale = loadScale(0);
  const u32 aBase = h20SmemAddr(base) + wg * 64 * 128, bBase = h20SmemAddr(sB);
  for (int kt = 0; kt < nk; ++kt) {
    const int st = kt % ST;
    h20CpAsyncWait<1>(); // this thread's copies of tile kt landed
    {
      const uint4 q = *reinterpret_cast<const uint4 *>(stageW(st) + dr * (BK / 2) + dh * 16);
      u32 v[16];
      fp4Dequant16(q, scale, v);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        *reinterpret_cast<uint4 *>(sB + st * kWTile + h20Swizzle(dr, dh * 32 + j * 8, BK)) =
            make_uint4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
    }
    h20wg::fenceProxyAsync(); // A (cp.async) and W (st.shared) of tile kt, for wgmma
    __syncthreads();          // both tiles whole; every warpgroup waited for tile kt - 2
    h20wg::wgmmaWait<0>();    // tile kt - 1 done: its stage is free for tile kt + 2
    loadTiles(kt + 2);
    scale = loadScale(kt + 1);
    h20wg::wgmmaFence();
#pragma unroll
    for (int s = 0; s < BK / 16; ++s)
      h20wg::Wgmma<2, 128>::ss(
          acc, h20wg::smemDesc(aBase + st * H20_FP4_STAGE_BYTES + s * 32, 16, 1024),
          h20wg::smemDesc(bBase + st * kWTile + s * 32, 16, 1024), kt > 0 || s > 0);
    h20wg::wgmmaCommit();
  }
  h20wg::wgmmaWait<0>();
  h20wg::fenceRegs(acc);

  fp4StoreWgmmaRows<128>(acc, c, row0, wg * 64 + (t >> 5) * 16 + (lane >> 2), rowEnd, n0, lane);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

// ---- FP8 on wgmma (sm_90a) --------------------------------------------------------------

/// The FP8 kernel's k tile: 128 e4m3 (one 128-byte swizzled row, one scale
/// block of A and four of W).
#define H20_FP4Q_BK 128
/// A stage: the A tile [128][128] e4m3 and the packed W tile [128][64] bytes.
#define H20_FP4Q_STAGE_BYTES (H20_FP4_BM * H20_FP4Q_BK + H20_FP4_BN * H20_FP4Q_BK / 2)
/// Its dynamic shared memory: three stages, three e4m3 W tiles, three
/// [128] float scale slots each for A and W, the tile lookup (16 bytes) and
/// 1024 bytes of alignment slack: 126992 bytes, one CTA an SM.
#define H20_FP4Q_SMEM_BYTES                                                                        \
  (3 * H20_FP4Q_STAGE_BYTES + 3 * H20_FP4_BN * H20_FP4Q_BK + 2 * 3 * 128 * 4 + 16 + 1024)

/// The e4m3 codes of the eight e2m1 magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6)
/// times 2^d, d <= 0, as a prmt table (byte m = magnitude m): exact while
/// 0.5 * 2^d is at least e4m3's smallest subnormal 2^-9 (d >= -8), rounded
/// to nearest even (to 0 below) past that.
__device__ __forceinline__ uint2 fp4E4m3Table(int d) {
  const float p = d < -60 ? 0.0f : __int_as_float((127 + d) << 23);
  auto pair = [&](float lo, float hi) { return static_cast<u32>(h20Fp8Pair(lo * p, hi * p)); };
  return make_uint2(pair(0.0f, 0.5f) | pair(1.0f, 1.5f) << 16,
                    pair(2.0f, 3.0f) | pair(4.0f, 6.0f) << 16);
}

/// Four packed e2m1 codes (the low 16 bits of x, code i in bits 4i..4i+3)
/// as four e4m3 bytes through table t (fp4E4m3Table), signs copied.
__device__ __forceinline__ u32 fp4ToE4m3x4(u32 x, uint2 t) {
  u32 mag;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(mag) : "r"(t.x), "r"(t.y), "r"(x & 0x7777u));
  return mag | ((x & 0x8u) << 4) | ((x & 0x80u) << 8) | ((x & 0x800u) << 12) |
         ((x & 0x8000u) << 16);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// The expert GEMM in FP8 on Hopper's warpgroup MMA: A is e4m3 with one
/// float scale per row and 128 inputs (As [K / 128, R], fp8_quant.cuh's
/// layout: A[r, k] ~ Aq[r, k] * As[k / 128, r]); each 128-input block of a
/// weight row becomes e4m3 in the load path with one power-of-two scale:
/// its four ue8m0 scales s0..s3 have a maximum m, and the codes of
/// sub-block i become e4m3(e2m1 * 2^(si - m)) (exact unless si < m - 8:
/// a sub-block 256x smaller than its neighbours keeps ~3 bits), the block
/// scale 2^(m - 127). Per k tile of 128: four wgmma m64n128k32 e4m3 into a
/// temporary, then acc += tmp * As[kb, r] * Ws[n, kb] (DeepGEMM's
/// promotion, float32), waiting for each tile's wgmma before its promotion
/// (the other warpgroup's wgmma run meanwhile). Same tiles,
/// grid, tile lookup and 3-stage load ring as fp4GemmBf16Wg; needs K a
/// multiple of 128. One CTA an SM (~216 registers a thread). Measured
/// (H100, bench/results/issue31-h100-moe-wgmma): 296 / 269 TFLOP/s at the
/// Flash shapes, below the bf16 wgmma kernel's 331 / 322 (one CTA an SM
/// and a promotion that waits for each tile's wgmma), FP8 error 2.5e-2
/// rel. L2 from the unquantised product.
__device__ __forceinline__ void fp4GemmFp8Wg(Fp4Mat<const unsigned char> a, const float *as,
                                             i64 asRow, i64 asCol, Fp4Weights w, const int *off,
                                             i64 offStride, int E, Fp4Mat<float> c) {
  constexpr int BM = H20_FP4_BM, BN = H20_FP4_BN, BK = H20_FP4Q_BK;
  constexpr u32 kStage = H20_FP4Q_STAGE_BYTES, kWTile = BN * BK;
  extern __shared__ __align__(1024) unsigned char fp4QSmem[];
  unsigned char *base = h20wg::alignSmem1024(fp4QSmem);
  auto stageA = [&](int st) { return base + st * kStage; };
  auto stageW = [&](int st) { return base + st * kStage + BM * BK; };
  unsigned char *sB = base + 3 * kStage;                         // [3][BN][BK] e4m3, swizzled
  float *aS = reinterpret_cast<float *>(sB + 3 * kWTile);       // [3][BM]
  float *wS = aS + 3 * BM;                                       // [3][BN]
  int(&sh)[3] = *reinterpret_cast<int(*)[3]>(wS + 3 * BN);
  const int tid = threadIdx.x, wg = tid >> 7, t = tid & 127, lane = tid & 31;
  int e, row0, rowEnd;
  if (!fp4FindTile<BM>(off, offStride, E, blockIdx.y, sh, e, row0, rowEnd))
    return;
  const i64 n0 = static_cast<i64>(blockIdx.x) * BN, N = c.cols, K = a.cols;
  const unsigned char *wq = w.q + e * w.qExpert, *ws = w.s + e * w.sExpert;
  const int nk = static_cast<int>(K / BK);

  // Warpgroup wg copies A rows [64 wg, 64 wg + 64); thread tid copies and
  // dequantises W row tid / 2, 64 inputs (two scale blocks of 32) half tid % 2.
  const int dr = tid >> 1, dh = tid & 1;
  const i64 gn = n0 + dr;
  auto loadTiles = [&](int kt) {
    if (kt < nk) {
      const int st = kt % 3;
      const i64 k0 = static_cast<i64>(kt) * BK;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = wg * 64 + (t >> 3) + 16 * i, cc = t & 7;
        const i64 gr = row0 + r;
        const bool ok = gr < rowEnd;
        h20CpAsync16(h20SmemAddr(stageA(st)) + h20Swizzle(r, cc * 8, 64),
                     ok ? a.row(gr) + k0 + cc * 16 : a.p, ok ? 16 : 0);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
        h20CpAsync16(h20SmemAddr(stageW(st) + dr * (BK / 2) + dh * 32 + i * 16),
                     gn < N ? wq + gn * w.qRow + k0 / 2 + dh * 32 + i * 16 : w.q, gn < N ? 16 : 0);
    }
    h20CpAsyncCommit(); // an empty group past the end keeps the wait counts uniform
  };
  // Tile kt's four W scale bytes of row dr and A scale of row t (tid < 128).
  auto loadScales = [&](int kt, u32 &wsb, float &asv) {
    wsb = 0;
    asv = 0.0f;
    if (kt >= nk)
      return;
    if (gn < N)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        wsb |= static_cast<u32>(ws[gn * w.sRow + (kt * 4 + i) * w.sCol]) << (8 * i);
    if (tid < BM && row0 + tid < rowEnd)
      asv = as[kt * asRow + (row0 + tid) * asCol];
  };

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    acc[i] = 0.0f;
  // The temporary is written by wgmma only (scale-d 0 on a tile's first k
  // step): ordinary writes would make ptxas serialise the wgmma (C7515).
  float tmp[64];
  loadTiles(0);
  loadTiles(1);
  u32 wsb;
  float asv;
  loadScales(0, wsb, asv);
  const u32 aBase = h20SmemAddr(base) + wg * 64 * 128, bBase = h20SmemAddr(sB);
  const int wr = wg * 64 + (t >> 5) * 16 + (lane >> 2); // accumulator rows wr, wr + 8

  // Dequantises W tile kt into slot kt % 3 and publishes the tile's scales.
  auto dequant = [&](int kt) {
    const int st = kt % 3;
    u32 m = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      m = max(m, (wsb >> (8 * i)) & 255u);
    const bool nan = ((wsb & 0xffu) == 255u) || ((wsb >> 8 & 0xffu) == 255u) ||
                     ((wsb >> 16 & 0xffu) == 255u) || ((wsb >> 24) == 255u);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int blk = 2 * dh + i;
      const uint2 tab =
          fp4E4m3Table(static_cast<int>((wsb >> (8 * blk)) & 255u) - static_cast<int>(m));
      const uint4 q = *reinterpret_cast<const uint4 *>(stageW(st) + dr * (BK / 2) + blk * 16);
      const u32 words[4] = {q.x, q.y, q.z, q.w};
      u32 o[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        o[2 * j] = fp4ToE4m3x4(words[j], tab);
        o[2 * j + 1] = fp4ToE4m3x4(words[j] >> 16, tab);
      }
      // Inputs 32 blk .. 32 blk + 31: 16-byte chunks 2 blk and 2 blk + 1.
#pragma unroll
      for (int j = 0; j < 2; ++j)
        *reinterpret_cast<uint4 *>(sB + st * kWTile + h20Swizzle(dr, (2 * blk + j) * 8, 64)) =
            make_uint4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
    }
    if (dh == 0)
      wS[st * BN + dr] = nan ? __int_as_float(0x7fc00000) : fp4ScaleF32(m);
    if (tid < BM)
      aS[st * BM + tid] = asv;
  };
  // acc += tmp * As * Ws of tile kt (its wgmma retired).
  auto promote = [&](int st) {
    const float a0 = aS[st * BM + wr], a1 = aS[st * BM + wr + 8];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float2 wv = *reinterpret_cast<const float2 *>(wS + st * BN + 8 * j + 2 * (lane & 3));
      acc[4 * j] = fmaf(tmp[4 * j], a0 * wv.x, acc[4 * j]);
      acc[4 * j + 1] = fmaf(tmp[4 * j + 1], a0 * wv.y, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(tmp[4 * j + 2], a1 * wv.x, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(tmp[4 * j + 3], a1 * wv.y, acc[4 * j + 3]);
    }
  };
  // Per k tile: its tiles landed (own copies) and are dequantised, one
  // barrier (every warpgroup promoted tile kt - 1, so its wgmma retired,
  // and slot kt % 3's last reader, tile kt - 3, is long done); its wgmma
  // issued; the loads of tile kt + 2 go to tile kt - 1's stage while it
  // runs; then it retires and is promoted. (Reading the temporary of one
  // tile while the next tile's wgmma runs makes ptxas serialise the
  // wgmma, C7514: the overlap comes from the other warpgroup, whose wgmma
  // run while this one promotes.)
  for (int kt = 0; kt < nk; ++kt) {
    const int st = kt % 3;
    h20CpAsyncWait<1>();
    dequant(kt);
    h20wg::fenceProxyAsync();
    __syncthreads();
    h20wg::wgmmaFence();
#pragma unroll
    for (int s = 0; s < BK / 32; ++s)
      h20wg::WgmmaE4m3N128::ss(tmp, h20wg::smemDesc(aBase + st * kStage + s * 32, 16, 1024),
                               h20wg::smemDesc(bBase + st * kWTile + s * 32, 16, 1024), s > 0);
    h20wg::wgmmaCommit();
    loadTiles(kt + 2);
    loadScales(kt + 1, wsb, asv);
    h20wg::wgmmaWait<0>();
    h20wg::fenceRegs(tmp);
    promote(st);
  }

  fp4StoreWgmmaRows<128>(acc, c, row0, wr, rowEnd, n0, lane);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

// ---- f32 / f16: CUDA cores ------------------------------------------------------------

template <int DT>
__device__ __forceinline__ void fp4GemmSimt(Fp4Mat<const void> a, Fp4Weights w, const int *off,
                                            i64 offStride, int E, Fp4Mat<float> c) {
  constexpr int BM = H20_FP4_SBM, BN = H20_FP4_SBN, BK = H20_FP4_SBK;
  __shared__ float sA[BK][BM + 1];
  __shared__ float sB[BK][BN + 1];
  __shared__ int sh[3];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  int e, row0, rowEnd;
  if (!fp4FindTile<BM>(off, offStride, E, blockIdx.y, sh, e, row0, rowEnd))
    return;
  const i64 n0 = static_cast<i64>(blockIdx.x) * BN, N = c.cols, K = a.cols;
  const unsigned char *wq = w.q + e * w.qExpert, *ws = w.s + e * w.sExpert;
  const unsigned char *ab = static_cast<const unsigned char *>(a.p);
  float acc[4][4] = {};
  for (i64 k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += H20_FP4_THREADS) {
      const int r = i / BK, k = i % BK;
      const i64 gr = row0 + r;
      sA[k][r] = gr < rowEnd ? H20Elem<DT>::load(ab + (gr * a.rowStride + k0 + k) *
                                                          H20Elem<DT>::bytes)
                             : 0.0f;
    }
    for (int i = tid; i < BN * BK / 2; i += H20_FP4_THREADS) {
      const int r = i / (BK / 2), b = i % (BK / 2);
      const i64 gn = n0 + r;
      float lo = 0.0f, hi = 0.0f;
      if (gn < N) {
        const unsigned q = wq[gn * w.qRow + k0 / 2 + b];
        const float s = fp4ScaleF32(ws[gn * w.sRow + (k0 / 32) * w.sCol]);
        lo = fp4Value(q & 15) * s;
        hi = fp4Value(q >> 4) * s;
      }
      sB[2 * b][r] = lo;
      sB[2 * b + 1][r] = hi;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < BK; ++k) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        av[i] = sA[k][ty * 4 + i];
        bv[i] = sB[k][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const i64 r = row0 + ty * 4 + i;
    if (r >= rowEnd)
      continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const i64 col = n0 + tx * 4 + j;
      if (col < N)
        c.row(r)[col] = acc[i][j];
    }
  }
}

// ---- entry points -------------------------------------------------------------------

/// A [R, K] (DT), Wq [E, N, K / 2] i8, Ws [E, N, K / 32] i8, offsets
/// [E + 1] i32, C [R, N] f32. Grid (ceil(N / BN), ceil(R / BM) + E).
#define H20_FP4_ARGS(AT)                                                                           \
  H20_MR2(AT, a), H20_MR3(const unsigned char, wq), H20_MR3(const unsigned char, ws),              \
      H20_MR1(const int, off), H20_MR2(float, c)
#define H20_FP4_WEIGHTS                                                                            \
  Fp4Weights { wq + wq_off, ws + ws_off, wq_s0, wq_s1, ws_s0, ws_s1, ws_s2 }

// Two CTAs per SM (at most 128 registers a thread): one CTA's barriers
// then overlap the other's MMAs.
extern "C" __global__ void __launch_bounds__(H20_FP4_THREADS, 2)
    h20_moe_fp4_gemm_bf16(H20_FP4_ARGS(const u16)) {
  fp4GemmBf16(Fp4Mat<const u16>{a + a_off, a_d0, a_d1, a_s0}, H20_FP4_WEIGHTS, off + off_off,
              off_s0, static_cast<int>(off_d0 - 1), Fp4Mat<float>{c + c_off, c_d0, c_d1, c_s0});
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Two CTAs per SM: one CTA's barrier and dequantisation overlap the other's wgmma.
extern "C" __global__ void __launch_bounds__(H20_FP4_THREADS, 2)
    h20_moe_fp4_gemm_bf16_wg(H20_FP4_ARGS(const u16)) {
  fp4GemmBf16Wg(Fp4Mat<const u16>{a + a_off, a_d0, a_d1, a_s0}, H20_FP4_WEIGHTS, off + off_off,
                off_s0, static_cast<int>(off_d0 - 1), Fp4Mat<float>{c + c_off, c_d0, c_d1, c_s0});
}
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// Aq [R, K] e4m3, As [K / 128, R] f32, Wq, Ws, offsets, C as above.
extern "C" __global__ void __launch_bounds__(H20_FP4_THREADS, 1)
    h20_moe_fp4_gemm_fp8_wg(H20_MR2(const unsigned char, a), H20_MR2(const float, as),
                            H20_MR3(const unsigned char, wq), H20_MR3(const unsigned char, ws),
                            H20_MR1(const int, off), H20_MR2(float, c)) {
  fp4GemmFp8Wg(Fp4Mat<const unsigned char>{a + a_off, a_d0, a_d1, a_s0}, as + as_off, as_s0, as_s1,
               H20_FP4_WEIGHTS, off + off_off, off_s0, static_cast<int>(off_d0 - 1),
               Fp4Mat<float>{c + c_off, c_d0, c_d1, c_s0});
}
#endif
#define H20_FP4_SIMT(NAME, DT, AT)                                                                 \
  extern "C" __global__ void __launch_bounds__(H20_FP4_THREADS) NAME(H20_FP4_ARGS(const AT)) {     \
    fp4GemmSimt<DT>(Fp4Mat<const void>{a + a_off, a_d0, a_d1, a_s0}, H20_FP4_WEIGHTS,              \
                    off + off_off, off_s0, static_cast<int>(off_d0 - 1),                           \
                    Fp4Mat<float>{c + c_off, c_d0, c_d1, c_s0});                                   \
  }
H20_FP4_SIMT(h20_moe_fp4_gemm_f32, 0, float)
H20_FP4_SIMT(h20_moe_fp4_gemm_f16, 1, u16)

#undef H20_FP4_SIMT
#undef H20_FP4_WEIGHTS
#undef H20_FP4_ARGS

#endif // H20_MOE_FP4_GEMM_CUH
