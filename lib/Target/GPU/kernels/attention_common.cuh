//===- attention_common.cuh - what h20's attention kernels share ----*- CUDA -*-===//
//
// The kernel parameters (mirroring include/h20/Runtime/Cuda/AttentionParams.h),
// element types, cp.async / ldmatrix / mma.sync wrappers, the visible key
// range of a query block (causal, window, skv), softcap, and strided tile
// loads: used by the mma.sync, FMA and wgmma bodies (attention_mma.cuh,
// attention_fma.cuh, attention_wgmma.cuh). Embedded as
// "h20_attention_common.cuh"; NVRTC only, no host headers.
//
//===----------------------------------------------------------------------===//
#ifndef H20_ATTENTION_COMMON_CUH
#define H20_ATTENTION_COMMON_CUH

/// Kernel parameters, passed by value. Mirrors the runtime's
/// include/h20/Runtime/Cuda/AttentionParams.h field for field (same order, same
/// types); all strides are in elements and ordered (batch, head, seq, dim).
struct __align__(64) H20TensorMap {
  unsigned long long opaque[16]; ///< a CUtensorMap made on the host
};
struct __align__(64) H20AttnParams {
  const void *q, *k, *v;
  void *o;
  long long q_stride[4], k_stride[4], v_stride[4], o_stride[4];
  long long batch, heads, kv_heads, sq, skv;
  long long window_left; ///< -1: no window; else key j visible iff j > i' - window_left
  float scale, softcap;  ///< softcap 0: none
  int causal;            ///< 1: bottom-right aligned causal mask
  int tma;               ///< 1: tm_q, tm_k, tm_v are tensor maps (wgmma kernel only)
  long long pad_[4];
  H20TensorMap tm_q, tm_k, tm_v; ///< 4-D (dim, seq, head, batch), 64 x 64 boxes, 128B swizzle
};

namespace h20attn {

#include "h20_tensor_core.cuh" // u16, u32, i64, u64 and the copy / ldmatrix helpers

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

// cp.async, ldmatrix and shared addresses: tensor_core.cuh (h20CpAsync16,
// h20LdmatrixX4, h20SmemAddr, ...), shared with the other tensor-core kernels.

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
  const u32 base = h20SmemAddr(dst);
  for (int e = threadIdx.x; e < ROWS * kPieces; e += NT) {
    int r = e / kPieces, c = (e % kPieces) * kPerPiece;
    i64 row = row0 + r;
    bool ok = row < valid;
    const T *g = src + (ok ? row : 0) * ss + c;
    h20CpAsync16(base + u32((r * SST + c) * sizeof(T)), g, ok ? 16 : 0);
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

} // namespace h20attn

#endif // H20_ATTENTION_COMMON_CUH
