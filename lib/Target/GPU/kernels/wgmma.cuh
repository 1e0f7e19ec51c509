//===- wgmma.cuh - wgmma, mbarrier, TMA and named-barrier helpers (sm_90a) -*- CUDA -*-===//
//
// What h20's Hopper kernels share (kernels/attention_wgmma.cuh,
// kernels/sparse_attention_wgmma.cuh): the warpgroup MMA wrappers
// (wgmma.mma_async m64nNk16 with A and B from shared memory or A from
// registers), shared-memory matrix descriptors of the 128-byte swizzle and
// its tile layout, mbarriers, named barriers, proxy fences, TMA tile copies
// and setmaxnreg. PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply",
// "mbarrier", "cp.async.bulk.tensor". Embedded as "h20_wgmma.cuh"; empty
// unless compiled for sm_90a. No host headers, and its own integer types
// (wgU32, wgU64): it is included both where tensor_core.cuh's u32 / u64 are
// global (sparse_attention_wgmma.cuh) and where they live in a namespace
// (attention_common.cuh includes them inside h20attn).
//
// Tile layout (the PTX ISA's canonical "128B swizzle", matrix descriptor
// layout type 1): a tile of R rows is stored as column blocks of 64 16-bit
// elements (128 bytes per row); element (r, c) lives at byte
//   (c / 64) * R * 128 + r * 128 + (((c % 64) / 8) ^ (r % 8)) * 16 + (c % 8) * 2
// from a 1024-byte aligned base. The same bytes serve as a K-major operand
// (rows are M/N, columns the reduction dim) and as an MN-major one (rows
// are the reduction dim, columns N).
//
//===----------------------------------------------------------------------===//
#ifndef H20_WGMMA_CUH
#define H20_WGMMA_CUH

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace h20wg {

/// Its own 32- and 64-bit unsigned types (see the header comment).
typedef unsigned int wgU32;
typedef unsigned long long wgU64;
/// fp32 accumulator operands of the wgmma wrappers ("+f" constraints).
#define H20_WG_ACC8(d, i)                                                                          \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),      \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define H20_WG_ACC32_AT(d, i)                                                                      \
  H20_WG_ACC8(d, i), H20_WG_ACC8(d, i + 8), H20_WG_ACC8(d, i + 16), H20_WG_ACC8(d, i + 24)
#define H20_WG_ACC32(d) H20_WG_ACC32_AT(d, 0)
#define H20_WG_ACC64(d) H20_WG_ACC32_AT(d, 0), H20_WG_ACC32_AT(d, 32)
#define H20_WG_ACC128(d)                                                                           \
  H20_WG_ACC32_AT(d, 0), H20_WG_ACC32_AT(d, 32), H20_WG_ACC32_AT(d, 64), H20_WG_ACC32_AT(d, 96)

/// D[64 x N] = (scaleD ? D : 0) + A[64 x 16] * B[16 x N] for one warpgroup,
/// fp32 accumulators d (N / 2 per thread; fragment layouts: attention_wgmma.cuh's
/// section comment).
/// ss: A and B from shared memory, both K-major (descriptors a, b).
/// ssT: A from shared memory K-major, B MN-major (imm-trans-b = 1).
/// rs: A from registers (4 x 32 bits, layout in the section comment), B from
/// shared memory MN-major (imm-trans-b = 1; descriptor b).
/// Asynchronous: wgmmaFence() before, wgmmaCommit() + wgmmaWait<0>() after.
template <int DT, int N> struct Wgmma;
/// Operand numbering of the wrappers per N (N / 2 accumulators first):
/// REGS the accumulator list; SS the two descriptors and the scale-d
/// predicate operand of ss; RS the A registers, B descriptor and predicate
/// operand of rs.
#define H20_WG_REGS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define H20_WG_SS_64 "%32, %33", "%34"
#define H20_WG_RS_64 "{%32, %33, %34, %35}, %36", "%37"
#define H20_WG_REGS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define H20_WG_SS_128 "%64, %65", "%66"
#define H20_WG_RS_128 "{%64, %65, %66, %67}, %68", "%69"
#define H20_WG_REGS_256 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define H20_WG_SS_256 "%128, %129", "%130"
#define H20_WG_RS_256 "{%128, %129, %130, %131}, %132", "%133"
#define H20_WG_OPERANDS(ab, p) ab
#define H20_WG_PRED(ab, p) p
#define H20_WG_APPLY(m, args) m args
/// The shared-memory-operand form of one Wgmma<DT, N> member: TNSPB the
/// imm-trans-b immediate (0 B K-major, 1 MN-major).
#define H20_WGMMA_SS(NAME, N, TY, ACC, TNSPB)                                                      \
  static __device__ __forceinline__ void NAME(float (&d)[N / 2], wgU64 a, wgU64 b, int scaleD) {  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " H20_WG_APPLY(H20_WG_PRED, (H20_WG_SS_##N))    \
                 ", 0;\n"                                                                          \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " H20_WG_REGS_##N   \
                 ", " H20_WG_APPLY(H20_WG_OPERANDS, (H20_WG_SS_##N)) ", p, 1, 1, 0, " #TNSPB      \
                 ";\n}\n"                                                                          \
                 : ACC(d)                                                                          \
                 : "l"(a), "l"(b), "r"(scaleD));                                                   \
  }
/// One Wgmma<DT, N> specialisation: TY the PTX element type of A and B,
/// ACC the accumulator constraint list for N / 2 registers.
#define H20_WGMMA(DT, N, TY, ACC)                                                                  \
  template <> struct Wgmma<DT, N> {                                                                \
    H20_WGMMA_SS(ss, N, TY, ACC, 0)                                                                \
    H20_WGMMA_SS(ssT, N, TY, ACC, 1)                                                               \
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const wgU32 (&a)[4], wgU64 b,        \
                                              int scaleD) {                                        \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " H20_WG_APPLY(H20_WG_PRED, (H20_WG_RS_##N))  \
                   ", 0;\n"                                                                        \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " H20_WG_REGS_##N \
                   ", " H20_WG_APPLY(H20_WG_OPERANDS, (H20_WG_RS_##N)) ", p, 1, 1, 1;\n}\n"          \
                   : ACC(d)                                                                        \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scaleD));             \
    }                                                                                              \
  };
H20_WGMMA(1, 64, "f16", H20_WG_ACC32)
H20_WGMMA(1, 128, "f16", H20_WG_ACC64)
H20_WGMMA(1, 256, "f16", H20_WG_ACC128)
H20_WGMMA(2, 64, "bf16", H20_WG_ACC32)
H20_WGMMA(2, 128, "bf16", H20_WG_ACC64)
H20_WGMMA(2, 256, "bf16", H20_WG_ACC128)

/// D[64 x 128] = (scaleD ? D : 0) + A[64 x 32] * B[32 x 128] in e4m3 with
/// float32 accumulators, A and B both K-major in shared memory (FP8 wgmma
/// has no transposed forms; descriptors as smemDesc, a k32 step is 32
/// bytes of a 128-byte row). Asynchronous, as Wgmma.
struct WgmmaE4m3N128 {
  static __device__ __forceinline__ void ss(float (&d)[64], wgU64 a, wgU64 b, int scaleD) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " H20_WG_REGS_128
                 ", %64, %65, p, 1, 1;\n}\n"
                 : H20_WG_ACC64(d)
                 : "l"(a), "l"(b), "r"(scaleD));
  }
};

/// Pins accumulator registers between asynchronous wgmma and their next
/// ordinary use (the compiler must not move or copy them across the wait).
template <int N> __device__ __forceinline__ void fenceRegs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}
/// Keeps register A operands (P, K k-steps of 4 x 32 bits) live and unchanged
/// until here: an asynchronous wgmma reads them until its wait, which the
/// compiler cannot see.
template <int K> __device__ __forceinline__ void holdRegs(wgU32 (&pa)[K][4]) {
#pragma unroll
  for (int k = 0; k < K; ++k)
    asm volatile("" : "+r"(pa[k][0]), "+r"(pa[k][1]), "+r"(pa[k][2]), "+r"(pa[k][3])::"memory");
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/// Shared-memory matrix descriptor of wgmma (PTX ISA "Matrix Descriptor
/// Format"): start address >> 4 in bits 0-13, leading-dimension byte offset
/// >> 4 in 16-29, stride-dimension byte offset >> 4 in 32-45, base offset 0
/// (every swizzle atom is 1024-byte aligned; start addresses inside an atom
/// only move by multiples of 16 bytes within its first 128-byte row), layout
/// type 1 (128-byte swizzle) in bits 62-63.
///   K-major (Q, K): sbo = 1024 (8 rows of 128 bytes to the next 8 rows of
///   M/N); lbo is unused (a k16 step stays inside one 128-byte row), set to 16.
///   MN-major (V): lbo = bytes from one 64-column block to the next (N
///   direction), sbo = 1024 (8 rows of K to the next 8).
__device__ __forceinline__ wgU64 smemDesc(wgU32 addr, wgU32 lbo, wgU32 sbo) {
  return wgU64((addr >> 4) & 0x3fffu) | (wgU64((lbo >> 4) & 0x3fffu) << 16) |
         (wgU64((sbo >> 4) & 0x3fffu) << 32) | (1ull << 62);
}

/// `smem` advanced to the next 1024-byte boundary of the shared window:
/// the 128-byte swizzle repeats every 1024 bytes and smemDesc's tiles must
/// start on one. The kernel's dynamic shared memory keeps 1024 bytes of
/// slack for it.
__device__ __forceinline__ unsigned char *alignSmem1024(unsigned char *smem) {
  const wgU32 raw = static_cast<wgU32>(__cvta_generic_to_shared(smem));
  return smem + (((raw + 1023u) & ~1023u) - raw);
}

/// Byte offset of 16-byte chunk c (elements 8c..8c+7) of row r in a tile of
/// `rows` rows stored as 64-column blocks with the 128-byte swizzle.
__device__ __forceinline__ wgU32 swz128(int r, int c, int rows) {
  return wgU32((c >> 3) * rows * 128 + r * 128 + (((c ^ r) & 7) << 4));
}

__device__ __forceinline__ void stShared32(wgU32 addr, wgU32 v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void stShared128(wgU32 addr, wgU32 a, wgU32 b, wgU32 c, wgU32 d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}
__device__ __forceinline__ uint4 ldShared128(wgU32 addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

__device__ __forceinline__ void mbarInit(wgU32 bar, wgU32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/// One arrival (release semantics at CTA scope).
__device__ __forceinline__ void mbarArrive(wgU32 bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
/// Waits until the phase of parity `parity` of the barrier has completed
/// (acquire semantics at CTA scope).
__device__ __forceinline__ void mbarWait(wgU32 bar, wgU32 parity) {
  wgU32 done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
/// An arrival on `bar` once every cp.async this thread issued so far has
/// landed, without blocking the thread. `.noinc`: the arrival counts
/// against the barrier's expected count (mbarInit's), like mbarArrive.
__device__ __forceinline__ void cpAsyncMbarArrive(wgU32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/// Makes this thread's generic-proxy shared-memory writes (st.shared,
/// completed cp.async) visible to later async-proxy reads (wgmma), and
/// orders earlier async-proxy reads before later generic writes.
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// Named barrier `id` (1..15; 0 is __syncthreads) over `count` threads.
__device__ __forceinline__ void namedBarrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/// Arrives at named barrier `id` without waiting (the other side of a
/// namedBarrier of `count` threads).
__device__ __forceinline__ void namedBarrierArrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/// One arrival that also announces `bytes` of asynchronous (TMA) writes the
/// current phase waits for.
__device__ __forceinline__ void mbarArriveExpectTx(wgU32 bar, wgU32 bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
                   bar),
               "r"(bytes)
               : "memory");
}
/// Makes mbarrier.init visible to the async proxy (the tensor copy engine
/// completes transactions on the barriers).
__device__ __forceinline__ void fenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// Tensor copy (TMA) of the box at coordinates (c0, c1, c2, c3) of the
/// tensor map at generic address `map` into shared memory `dst`, completing
/// its bytes on mbarrier `bar` (PTX ISA cp.async.bulk.tensor, tile mode).
__device__ __forceinline__ void tmaLoad4d(wgU32 dst, const void *map, wgU32 bar, int c0, int c1,
                                          int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
               "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}
/// TMA copies of rows [row0, row0 + ROWS) x columns [0, COLS) of (head,
/// batch) of the tensor map at `map` into the swizzled tile at `dst`
/// (ROWS rows per 64-column block, the layout of the section comment): one
/// 64 x 64 box (AttentionTma.h) per 8 KiB block, all completing on `bar`
/// (the caller announces ROWS * COLS * 2 bytes with mbarArriveExpectTx).
template <int ROWS, int COLS>
__device__ __forceinline__ void tmaLoadTile(wgU32 dst, const void *map, wgU32 bar, int row0, int head,
                                            int batch) {
#pragma unroll
  for (int cb = 0; cb < COLS / 64; ++cb)
#pragma unroll
    for (int rb = 0; rb < ROWS / 64; ++rb)
      tmaLoad4d(dst + cb * ROWS * 128 + rb * 64 * 128, map, bar, 64 * cb, row0 + 64 * rb, head,
                batch);
}
template <int R> __device__ __forceinline__ void setMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void setMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

} // namespace h20wg

#endif // __CUDA_ARCH_FEAT_SM90_ALL

#endif // H20_WGMMA_CUH
