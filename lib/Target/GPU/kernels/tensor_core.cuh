//===- tensor_core.cuh - mma.sync / ldmatrix / cp.async helpers, for NVRTC -*- CUDA -*-===//
//
// What h20's tensor-core kernels share (kernels/attention_*.cuh,
// kernels/sparse_attention.cuh, kernels/indexer_mma.cuh, kernels/moe.cuh): 16-bit tiles in shared memory with XOR-swizzled
// 16-byte chunks, cp.async copies into them, ldmatrix loads of mma.sync
// m16n8k16 fragments, the element types (0 f32, 1 f16, 2 bf16) as loads,
// rounding and the MMA, and the memref parameter macros of every kernel
// entry point. PTX ISA: "Warp-level matrix instructions"
// (mma, ldmatrix) and "cp.async". Embedded with the kernels that include
// it as "h20_tensor_core.cuh"; no host headers.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TENSOR_CORE_CUH
#define H20_TENSOR_CORE_CUH

typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

/// One memref kernel parameter group in MLIR's expanded descriptor (what
/// the GPU program's "launch" step passes, strides in elements): base,
/// aligned, offset, sizes[rank], strides[rank]; H20_MR<rank>(type, name).
#define H20_MR1(T, n) T *n##_base, T *n, i64 n##_off, i64 n##_d0, i64 n##_s0
#define H20_MR2(T, n)                                                                              \
  T *n##_base, T *n, i64 n##_off, i64 n##_d0, i64 n##_d1, i64 n##_s0, i64 n##_s1
#define H20_MR3(T, n)                                                                              \
  T *n##_base, T *n, i64 n##_off, i64 n##_d0, i64 n##_d1, i64 n##_d2, i64 n##_s0, i64 n##_s1,      \
      i64 n##_s2

/// Byte offset of element (row, col) in a row-major tile of `rowElems`
/// 16-bit elements (rowElems a multiple of 64) whose 16-byte chunks are
/// XOR-swizzled by (row % 8): ldmatrix's eight row addresses then hit eight
/// different bank groups.
__device__ __forceinline__ u32 h20Swizzle(int row, int col, int rowElems) {
  const int chunk = (col >> 3) ^ (row & 7);
  return static_cast<u32>(row * rowElems * 2 + chunk * 16 + (col & 7) * 2);
}

__device__ __forceinline__ u32 h20SmemAddr(const void *p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, asynchronous; `bytes` 0 writes zeros (`src`
/// must still be a 16-byte aligned address).
/// The "memory" clobbers keep the compiler from moving shared-memory
/// accesses across the copy, its commit or its wait.
__device__ __forceinline__ void h20CpAsync16(u32 dst, const void *src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void h20CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits until at most N of this thread's cp.async groups are pending.
template <int N> __device__ __forceinline__ void h20CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Four 8x8 b16 matrices (lane l gives the row address of matrix l / 8).
__device__ __forceinline__ void h20LdmatrixX4(u32 addr, u32 &r0, u32 &r1, u32 &r2, u32 &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
/// The same, each matrix transposed (B fragments of a row-major K x N tile).
__device__ __forceinline__ void h20LdmatrixX4Trans(u32 addr, u32 &r0, u32 &r1, u32 &r2, u32 &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
/// Both, into a fragment array.
__device__ __forceinline__ void h20LdmatrixX4(u32 (&r)[4], u32 addr) {
  h20LdmatrixX4(addr, r[0], r[1], r[2], r[3]);
}
__device__ __forceinline__ void h20LdmatrixX4Trans(u32 (&r)[4], u32 addr) {
  h20LdmatrixX4Trans(addr, r[0], r[1], r[2], r[3]);
}

/// Element type DT: load to float, its size, and (16-bit types) rounding
/// from float and c += a * b on one m16n8k16 MMA with float32 accumulators.
template <int DT> struct H20Elem;
template <> struct H20Elem<0> {
  enum { bytes = 4 }; // an enum: no global in the PTX of every module
  static __device__ __forceinline__ float load(const void *p) {
    return *static_cast<const float *>(p);
  }
};
template <> struct H20Elem<1> {
  enum { bytes = 2 }; // an enum: no global in the PTX of every module
  static __device__ __forceinline__ float load(const void *p) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(*static_cast<const u16 *>(p)));
    return f;
  }
  static __device__ __forceinline__ u16 round(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
  }
  static __device__ __forceinline__ void mma(float *c, const u32 *a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct H20Elem<2> {
  enum { bytes = 2 }; // an enum: no global in the PTX of every module
  static __device__ __forceinline__ float load(const void *p) {
    return __uint_as_float(static_cast<u32>(*static_cast<const u16 *>(p)) << 16);
  }
  static __device__ __forceinline__ u16 round(float f) {
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
  }
  static __device__ __forceinline__ void mma(float *c, const u32 *a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/// e4m3 (FP8) codes, sm_89 and later (PTX ISA "cvt", .e4m3x2): two floats
/// rounded to nearest even and saturated to +-448, `lo` in bits 0-7.
__device__ __forceinline__ u16 h20Fp8Pair(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
/// The scale of one quantisation block whose largest magnitude is `amax`:
/// max(amax, 1e-4) / 448 (448 the largest e4m3 value; the floor is
/// DeepGEMM's per_token_cast_to_fp8). NaN amax is impossible (fmaxf drops
/// NaN elements before); an infinite one gives an infinite scale.
__device__ __forceinline__ float h20Fp8Scale(float amax) { return fmaxf(amax, 1e-4f) / 448.0f; }
/// Four floats divided by `scale` as e4m3 codes, `a` in bits 0-7. A true
/// division, not a multiply by 1 / scale: every FP8 quantiser of h20 (and
/// the CPU's runtime::encodeE4m3 of x / s) gives the same codes.
__device__ __forceinline__ u32 h20Fp8Codes4(float a, float b, float c, float d, float scale) {
  return static_cast<u32>(h20Fp8Pair(a / scale, b / scale)) |
         static_cast<u32>(h20Fp8Pair(c / scale, d / scale)) << 16;
}

#endif // H20_TENSOR_CORE_CUH
