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
//
// Two bodies:
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
// the same i' = skv - sq + i), as include/h20/Runtime/AttentionParams.h
// states. A row with no visible key is written as zeros. Q/K/V/O are
// arbitrary strided views (strides in elements; 16-byte cp.async copies
// where the dim stride is 1 and rows are 16-byte aligned, element copies
// otherwise); every offset is computed in 64 bits.
//
//===----------------------------------------------------------------------===//

#ifndef H20_ATTENTION_CUH_COMMON
#define H20_ATTENTION_CUH_COMMON

/// Kernel parameters, passed by value. Mirrors the runtime's
/// include/h20/Runtime/AttentionParams.h field for field (same order, same
/// types); all strides are in elements and ordered (batch, head, seq, dim).
struct H20AttnParams {
  const void *q, *k, *v;
  void *o;
  long long q_stride[4], k_stride[4], v_stride[4], o_stride[4];
  long long batch, heads, kv_heads, sq, skv;
  long long window_left; ///< -1: no window; else key j visible iff j > i' - window_left
  float scale, softcap;  ///< softcap 0: none
  int causal;            ///< 1: bottom-right aligned causal mask
  int pad_;
};

namespace h20attn {

typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ i64 imin(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 imax(i64 a, i64 b) { return a > b ? a : b; }
__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000u); }

/// 2^x with the MUFU unit (relative error ~2^-22; 2^-inf = +0).
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// 1/x with the MUFU unit (relative error ~2^-23; no slow-path call, which
/// would cost a stack frame).
__device__ __forceinline__ float fastRcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- element conversions (bit-level; no cuda_fp16.h / cuda_bf16.h) --------

template <int DT> struct Elem; // storage type and conversions per H20_DTYPE
template <> struct Elem<0> {
  typedef float T;
  static __device__ __forceinline__ float toF(float x) { return x; }
  static __device__ __forceinline__ float fromF(float x) { return x; }
};
template <> struct Elem<1> {
  typedef u16 T;
  static __device__ __forceinline__ float toF(u16 x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
  }
  static __device__ __forceinline__ u16 fromF(float f) {
    u16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
  }
  /// {lo, hi} rounded to nearest even, lo in bits 0..15.
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};
template <> struct Elem<2> {
  typedef u16 T;
  static __device__ __forceinline__ float toF(u16 x) { return __uint_as_float(u32(x) << 16); }
  static __device__ __forceinline__ u16 fromF(float f) {
    u16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
  }
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};

// ---- shared memory, cp.async, ldmatrix, mma ---------------------------------

extern __shared__ __align__(128) unsigned char h20SmemRaw[];

__device__ __forceinline__ u32 smemAddr(const void *p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

/// 16-byte asynchronous copy global -> shared; copies `srcBytes` (0 or 16)
/// and zero-fills the rest.
__device__ __forceinline__ void cpAsync16(u32 dst, const void *src, int srcBytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(srcBytes)
               : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Four 8x8 b16 matrices; lane l supplies the row address of matrix l / 8.
__device__ __forceinline__ void ldmatrixX4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrixX4Trans(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// c += a * b for one m16n8k16 tile (PTX ISA "Matrix Fragments for
/// mma.m16n8k16"): a = 4 regs of 16-bit pairs (row-major 16x16), b = 2 regs
/// (column-major 16x8), c = 4 fp32 (rows lane/4 and lane/4 + 8, columns
/// 2*(lane%4) and 2*(lane%4) + 1).
template <int DT> struct Mma;
template <> struct Mma<1> {
  static __device__ __forceinline__ void run(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct Mma<2> {
  static __device__ __forceinline__ void run(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// ---- problem geometry shared by both bodies ---------------------------------

/// The visible key range of one CTA and how to decide visibility of (i, j).
struct KeyRange {
  i64 offset;     ///< skv - sq: position of query row i is offset + i
  i64 begin, end; ///< keys [begin, end) may be visible to some row of the CTA
  i64 window;     ///< window_left, or -1 without a window
  bool causal;

  /// Keys visible to rows [m0, m0 + rows) of `p`.
  __device__ __forceinline__ KeyRange(const H20AttnParams &p, i64 m0, i64 rows) {
    offset = p.skv - p.sq;
    causal = p.causal != 0;
    window = p.window_left >= 0 ? p.window_left : -1;
    begin = window >= 0 ? imax(0, offset + m0 - window + 1) : 0;
    end = p.skv;
    if (causal)
      end = imin(end, offset + imin(m0 + rows, p.sq)); // last row's position + 1
  }
  /// Number of BLOCK_N tiles (the first starts at `begin`).
  __device__ __forceinline__ i64 tiles(int blockN) const {
    return end > begin ? (end - begin + blockN - 1) / blockN : 0;
  }
  /// Whether some (row, key) pair of the tile at key n0 is masked out; rows
  /// [m0, m0 + rows) of a CTA, `skv` keys in all.
  __device__ __forceinline__ bool tileNeedsMask(i64 n0, int blockN, i64 m0, i64 lastRow,
                                               i64 skv) const {
    if (n0 + blockN > skv)
      return true;
    if (causal && n0 + blockN - 1 > offset + m0)
      return true;
    return window >= 0 && n0 <= offset + lastRow - window;
  }
  /// The keys of the tile starting at key n0 that query row i sees, as tile
  /// columns [*lo, *hi) (clamped to [0, blockN]; empty when *lo >= *hi).
  /// 64-bit positions are reduced to tile-relative 32-bit bounds once per
  /// row, so the per-element test is two 32-bit compares.
  __device__ __forceinline__ void visibleColumns(i64 i, i64 n0, int blockN, i64 skv, int *lo,
                                                 int *hi) const {
    const i64 pos = offset + i;
    i64 h = skv - n0; // columns >= h are past the last key
    if (causal)
      h = imin(h, pos - n0 + 1);
    const i64 l = window >= 0 ? pos - window + 1 - n0 : 0;
    *lo = int(imax(0, imin(l, blockN)));
    *hi = int(imax(0, imin(h, blockN)));
  }
};

/// Softcap in base 2: log2(e) * c * tanh(scale * s / c) for a raw dot
/// product s and a softcap c > 0, computed as outer * tanh(inner * s) with
/// inner = scale / c and outer = log2(e) * c (no division per element).
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float softcapLogit2(float s, float inner, float outer) {
  return outer * tanhf(s * inner);
}

/// Whether rows of a strided (seq, dim) matrix at `base` can be moved in
/// 16-byte pieces: unit dim stride, 16-byte aligned base and row pitch.
__device__ __forceinline__ bool vectorizable(const void *base, i64 seqStride, i64 dimStride,
                                             int elemBytes) {
  return dimStride == 1 && (reinterpret_cast<u64>(base) & 15) == 0 &&
         ((seqStride * elemBytes) & 15) == 0;
}

/// Copies rows [row0, row0 + ROWS) x columns [0, COLS) of the strided matrix
/// `src` (seq stride `ss`, dim stride `ds`, elements of type T) into shared
/// memory `dst` (row pitch SST elements); rows >= `valid` become zeros.
/// Synchronous; consecutive threads take consecutive columns (coalesced when
/// ds == 1).
template <typename T, int ROWS, int COLS, int SST, int NT>
__device__ __forceinline__ void loadTileScalar(T *dst, const T *src, i64 ss, i64 ds, i64 row0,
                                               i64 valid) {
  for (int e = threadIdx.x; e < ROWS * COLS; e += NT) {
    int r = e / COLS, c = e % COLS;
    i64 row = row0 + r;
    T v = T(0);
    if (row < valid)
      v = src[row * ss + i64(c) * ds];
    dst[r * SST + c] = v;
  }
}

/// As loadTileScalar for a vectorizable matrix (unit dim stride), by
/// cp.async in 16-byte pieces; zero-fills rows >= `valid`. The copies are
/// asynchronous: commit and wait before reading `dst`.
template <typename T, int ROWS, int COLS, int SST, int NT>
__device__ __forceinline__ void loadTileAsync(T *dst, const T *src, i64 ss, i64 row0, i64 valid) {
  constexpr int kPerPiece = 16 / sizeof(T);
  constexpr int kPieces = COLS / kPerPiece; // per row
  const u32 base = smemAddr(dst);
  for (int e = threadIdx.x; e < ROWS * kPieces; e += NT) {
    int r = e / kPieces, c = (e % kPieces) * kPerPiece;
    i64 row = row0 + r;
    bool ok = row < valid;
    const T *g = src + (ok ? row : 0) * ss + c;
    cpAsync16(base + u32((r * SST + c) * sizeof(T)), g, ok ? 16 : 0);
  }
}

/// Loads one tile by cp.async when `vec`, else synchronously element by element.
template <typename T, int ROWS, int COLS, int SST, int NT>
__device__ __forceinline__ void loadTile(bool vec, T *dst, const T *src, i64 ss, i64 ds, i64 row0,
                                         i64 valid) {
  if (vec)
    loadTileAsync<T, ROWS, COLS, SST, NT>(dst, src, ss, row0, valid);
  else
    loadTileScalar<T, ROWS, COLS, SST, NT>(dst, src, ss, ds, row0, valid);
}

/// Element pointer of (b, h, 0, 0) of a strided 4-D view.
template <typename T>
__device__ __forceinline__ const T *headBase(const void *p, const long long (&st)[4], i64 b,
                                             i64 h) {
  return static_cast<const T *>(p) + b * st[0] + h * st[1];
}

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

// ---- f16 / bf16: tensor cores -------------------------------------------------

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
  cpAsyncCommit();

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
  const u32 sQAddr = smemAddr(sQ);

  for (i64 j = 0; j < nTiles; ++j) {
    const int buf = int(j & 1);
    const i64 n0 = keys.begin + j * BN;
    if (j + 1 < nTiles) {
      const int nb = buf ^ 1;
      loadTile<T, BN, D, L::KS, NT>(vecK, sK + nb * BN * L::KS, gK, p.k_stride[2], p.k_stride[3],
                                    n0 + BN, p.skv);
      loadTile<T, BN, DV, L::VS, NT>(vecV, sV + nb * BN * L::VS, gV, p.v_stride[2],
                                     p.v_stride[3], n0 + BN, p.skv);
      cpAsyncCommit();
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    __syncthreads();

    if (kQInRegs && j == 0) {
#pragma unroll
      for (int mt = 0; mt < (kQInRegs ? MT : 1); ++mt)
#pragma unroll
        for (int kk = 0; kk < (kQInRegs ? KT : 1); ++kk)
          ldmatrixX4(qFrag[mt][kk],
                     sQAddr + 2u * ((wRow + mt * 16 + aRow) * L::QS + kk * 16 + aCol));
    }

    // S = Q K^T (raw dot products, fp32).
    const u32 sKAddr = smemAddr(sK + buf * BN * L::KS);
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
          ldmatrixX4(a[mt], sQAddr + 2u * ((wRow + mt * 16 + aRow) * L::QS + kk * 16 + aCol));
        }
      }
#pragma unroll
      for (int np = 0; np < NS / 2; ++np) {
        u32 bk[4];
        ldmatrixX4(bk, sKAddr + 2u * ((np * 16 + kRow) * L::KS + kk * 16 + kCol));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<DT>::run(s[mt][2 * np], a[mt], bk[0], bk[1]);
          Mma<DT>::run(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Scores -> base-2 logits; keys a row does not see -> -inf (uniform
    // branches: the softcap is rare, masks touch only boundary tiles).
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
    if (keys.tileNeedsMask(n0, BN, m0, lastRow, p.skv)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          int lo, hi;
          keys.visibleColumns(m0 + wRow + mt * 16 + g + 8 * r, n0, BN, p.skv, &lo, &hi);
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
    const u32 sVAddr = smemAddr(sV + buf * BN * L::VS);
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
        ldmatrixX4Trans(bv, sVAddr + 2u * ((ks * 16 + vRow) * L::VS + dp * 16 + vCol));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<DT>::run(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
          Mma<DT>::run(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
        }
      }
    }
    __syncthreads(); // this buffer is refilled by the next iteration's prefetch
  }
  cpAsyncWait<0>();
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

  T *gO = const_cast<T *>(headBase<T>(p.o, p.o_stride, b, h));
  const i64 os = p.o_stride[2], od = p.o_stride[3];
  if (vectorizable(gO, os, od, 2)) {
    constexpr int kPieces = DV / 8; // 16-byte pieces per row
    for (int e = lane; e < MT * 16 * kPieces; e += 32) {
      const int r = wRow + e / kPieces, c = (e % kPieces) * 8;
      if (m0 + r < p.sq)
        *reinterpret_cast<uint4 *>(gO + (m0 + r) * os + c) =
            *reinterpret_cast<const uint4 *>(sQ + r * L::QS + c);
    }
  } else {
    for (int e = lane; e < MT * 16 * DV; e += 32) {
      const int r = wRow + e / DV, c = e % DV;
      if (m0 + r < p.sq)
        gO[(m0 + r) * os + i64(c) * od] = sQ[r * L::QS + c];
    }
  }
}

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

/// Dispatches on the dtype: tensor cores for f16/bf16, FMA for f32.
template <int DT, int D, int DV, int BM, int BN, int NT>
__device__ __forceinline__ void attention(const H20AttnParams &p) {
  if constexpr (DT == 0)
    attentionFma<D, DV, BM, BN, NT>(p);
  else
    attentionTc<DT, D, DV, BM, BN, NT>(p);
}

} // namespace h20attn

#endif // H20_ATTENTION_CUH_COMMON

// ---- one instantiation per inclusion ------------------------------------------

#if !defined(H20_DTYPE) || !defined(H20_HEAD_DIM) || !defined(H20_HEAD_DIM_V) ||               \
    !defined(H20_BLOCK_M) || !defined(H20_BLOCK_N) || !defined(H20_THREADS)
#error "attention.cuh needs H20_DTYPE, H20_HEAD_DIM, H20_HEAD_DIM_V, H20_BLOCK_M, H20_BLOCK_N, H20_THREADS"
#endif
#ifndef H20_KERNEL_NAME
#define H20_KERNEL_NAME h20_attention
#endif

/// Flash-attention forward for one (query block, head, batch) per CTA; see
/// the file comment for the launch geometry, shared memory and semantics.
extern "C" __global__ void __launch_bounds__(H20_THREADS, 1)
    H20_KERNEL_NAME(const H20AttnParams p) {
  h20attn::attention<H20_DTYPE, H20_HEAD_DIM, H20_HEAD_DIM_V, H20_BLOCK_M, H20_BLOCK_N,
                     H20_THREADS>(p);
}

#undef H20_KERNEL_NAME
#undef H20_DTYPE
#undef H20_HEAD_DIM
#undef H20_HEAD_DIM_V
#undef H20_BLOCK_M
#undef H20_BLOCK_N
#undef H20_THREADS
