//===- sparse_attention_wgmma.cuh - V4.1 sparse sink attention on wgmma -*- CUDA -*-===//
//
// The sm_90a kernel of attn.sparse_attention (the same semantics and
// parameters as sparse_attention.cuh, whose header comment defines them;
// reference: lib/Conversion/ToLinalg/SparseAttnToLinalg.cpp). One CTA
// computes one query row for 64 heads (the wgmma M), as the mma.sync kernel
// does, but on warpgroup MMAs with both GEMM operands in shared memory and
// three warpgroups (384 threads), after the split FlashMLA's Hopper sparse
// prefill uses (DeepSeek-AI, csrc/sm90/prefill/sparse, 2025):
//   * Warpgroup 0, the producer (setmaxnreg 40; 56 below DP 512): loads the query block, then
//     gathers the CTA's key slots (the compacted list of sparse_attention.cuh:
//     window rows, then picked compressed rows) 64 rows at a time into two
//     buffers, by cp.async with 16-byte copies where the view allows (element
//     copies otherwise). Eight threads move one 128-byte row segment; a
//     thread computes its rows' addresses once and issues all its copies of
//     a half-buffer (half 0: key columns [0, DP / 2), half 1: the rest)
//     before it waits again. Each half has its own `full` and `empty`
//     mbarrier: a thread's arrival on `full` fires when its copies land
//     (cp.async.mbarrier.arrive.noinc), so the producer never blocks on its
//     own copies, and a half is refilled as soon as its last reader frees it.
//   * Warpgroups 1 and 2, the consumers (setmaxnreg 232; 224 below DP 512), take the blocks in
//     pairs: consumer c computes S = Q K^T of block 2j + c (buffer c;
//     m64n64k16, K = DP, Q and K K-major in shared memory), so no score is
//     computed twice. Each owns half c of O's DP columns (DP / 4 float32
//     registers a thread) and multiplies both blocks' P into it: its own P
//     from registers (the S accumulators are the A operand) and the other
//     consumer's P from shared memory, with V the same key rows read
//     MN-major (K = V: one latent row is both). So half c of buffer c is
//     free after consumer c's own P V, and the other half of each buffer
//     after the other consumer's P V with that block: the producer refills
//     them in that order (FlashMLA's order) while the pair's last P V run.
//     (Issuing consumer 0's next S GEMM behind its last P V, as FlashMLA
//     does, keeps S accumulators in flight across the loop's back edge:
//     ptxas then serialises every wgmma of the kernel, warning C7518.)
//   * The softmax maxima stay consistent across the pair: consumer 0 takes
//     its block's row maxima and publishes them; consumer 1 folds them into
//     its own and publishes the pair's maxima; consumer 0 then rescales its
//     O, its row sums and the P it hands over by exp2(its max - the pair's).
//     Named barriers (1-4) order the exchanges; each consumer's row sums
//     cover its own blocks and are added at the end (barrier 5). The sink
//     is the initial running maximum with weight 1 (counted by consumer 0).
//   * Epilogue: O / l rounded to the element type, staged in the query's
//     tile (barrier 6), stored with 16-byte stores where the view allows.
// Measured on an H200 at V4.1-Flash shapes (bench/results/
// issue31-h200-sparse-halves): 322-330 TFLOP/s at 8K-128K, 0.51x the
// mma.sync kernel's time and 0.55x this kernel's before the half-buffer
// refills (179 TFLOP/s).
//
// Shared memory (SawLayout; sparseAttentionSmemBytes(dp, slots, kind 1)
// mirrors it), from the dynamic base rounded up to 1024 bytes: Q [64][DP],
// K [2][64][DP], P [2][64][64] (the 128-byte swizzled tile layout of
// wgmma.cuh), the mbarriers, the exchanged maxima and sums [2][64] floats
// each, 16 warp counts and the slot list (window + K ints).
//
// Compiled by NVRTC for sm_90a only (lib/Target/GPU/SparseAttentionKernel.cpp
// defines H20_SA_DT, H20_SA_SINK, H20_SA_DP in {128, 256, 512},
// H20_SA_COMPRESSED and H20_SAW_NAME, then includes this file).
//
//===----------------------------------------------------------------------===//

#ifndef H20_SAW_CUH_COMMON
#define H20_SAW_CUH_COMMON

#include "h20_sparse_attention.cuh"
#include "h20_wgmma.cuh"

#define H20_SAW_THREADS 384

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace h20saw {

using namespace ::h20wg;

/// Byte offsets from the 1024-aligned base of dynamic shared memory.
template <int DP> struct SawLayout {
  static constexpr int kTile = 64 * DP * 2; ///< [64][DP] 16-bit elements
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kTile;          ///< two key buffers
  static constexpr int kP = kK + 2 * kTile;      ///< two [64][64] P tiles
  static constexpr int kBar = kP + 2 * 64 * 64 * 2; ///< fullQ, full[2][2], empty[2][2]
  static constexpr int kMax = kBar + 128;        ///< float [2][64]
  static constexpr int kSum = kMax + 2 * 64 * 4; ///< float [2][64]
  static constexpr int kCounts = kSum + 2 * 64 * 4; ///< int [16]
  static constexpr int kList = kCounts + 16 * 4;    ///< int [window + K]
};

/// Two floats as one 32-bit pair of element type DT (1 f16, 2 bf16), `lo`
/// in the low half.
template <int DT> __device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  if (DT == 1)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// Waits until every cp.async this thread issued has landed (committed to
/// a group or not: this kernel never commits).
__device__ __forceinline__ void cpAsyncWaitAll() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/// The producer's arrival for one loaded buffer: asynchronous when all its
/// copies were cp.async; after element copies (st.shared; a thread may have
/// issued cp.async for other rows of the block too) it waits for all its
/// copies, fences them for the tensor cores' async proxy and arrives.
__device__ __forceinline__ void arriveLoaded(u32 bar, bool scalar) {
  if (scalar) {
    cpAsyncWaitAll(); // (cp.async.wait_group 0 would skip uncommitted copies)
    fenceProxyAsync();
    mbarArrive(bar);
  } else {
    cpAsyncMbarArrive(bar);
  }
}

/// The 8 16-bit elements of chunk c (elements 8c..8c+7, those < D) of the
/// row at `row` (element stride ds) as four 32-bit words.
__device__ __forceinline__ void loadChunk(u32 (&w)[4], const u16 *row, i64 ds, int c, i64 D) {
  w[0] = w[1] = w[2] = w[3] = 0u;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    if (c * 8 + k < D)
      w[k / 2] |= u32(row[i64(c * 8 + k) * ds]) << (16 * (k % 2));
}

/// Mask, scale and row maxima of one S block: columns >= `valid` become
/// -inf, the others s * scaleLog2 (base-2 logits); mx[hr] the row maxima of
/// rows g (hr 0) and g + 8 (hr 1) over the four lanes of the row.
__device__ __forceinline__ void maskedMax(float (&sc)[32], int valid, int t4, float scaleLog2,
                                          float (&mx)[2]) {
  mx[0] = mx[1] = -__int_as_float(0x7f800000);
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * n + 2 * t4 + (e & 1);
      const float v = col < valid ? sc[4 * n + e] * scaleLog2 : -__int_as_float(0x7f800000);
      sc[4 * n + e] = v;
      mx[e >> 1] = fmaxf(mx[e >> 1], v);
    }
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
    mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
  }
}

/// exp2(s - ref[hr]) in place; returns this lane's sums per row.
__device__ __forceinline__ void exponentiate(float (&sc)[32], const float (&ref)[2],
                                             float (&sum)[2]) {
  sum[0] = sum[1] = 0.0f;
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = exp2f(sc[4 * n + e] - ref[e >> 1]);
      sc[4 * n + e] = p;
      sum[e >> 1] += p;
    }
}

/// O[rows][this consumer's columns] *= f[hr].
template <int NO> __device__ __forceinline__ void scaleO(float (&o)[NO], const float (&f)[2]) {
#pragma unroll
  for (int n = 0; n < NO / 4; ++n) {
    o[4 * n + 0] *= f[0];
    o[4 * n + 1] *= f[0];
    o[4 * n + 2] *= f[1];
    o[4 * n + 3] *= f[1];
  }
}

/// P (times f[hr]) as the register A operand: keys 16k..16k+15 are k-step k.
template <int DT>
__device__ __forceinline__ void packP(const float (&sc)[32], u32 (&pa)[4][4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    pa[k][0] = pack2<DT>(sc[8 * k + 0], sc[8 * k + 1]);
    pa[k][1] = pack2<DT>(sc[8 * k + 2], sc[8 * k + 3]);
    pa[k][2] = pack2<DT>(sc[8 * k + 4], sc[8 * k + 5]);
    pa[k][3] = pack2<DT>(sc[8 * k + 6], sc[8 * k + 7]);
  }
}

/// Stores P * f[hr] as the [64][64] swizzled tile at `sP` (rows 16 * warp +
/// g (+ 8), columns 8n + 2 t4 (+ 1)).
template <int DT>
__device__ __forceinline__ void storeP(u32 sP, const float (&sc)[32], const float (&f)[2],
                                       int row, int t4) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      stShared32(sP + swz128(row + 8 * hr, n, 64) + 4 * t4,
                 pack2<DT>(sc[4 * n + 2 * hr] * f[hr], sc[4 * n + 2 * hr + 1] * f[hr]));
}

/// Issues O += P V for this consumer's DP / 2 columns (NO registers) of the
/// 64-row key buffer at `kv` (read MN-major from `vCols` bytes in), P from
/// registers (`pa`, this consumer's block) and commits the group.
template <int DT, int NO>
__device__ __forceinline__ void pvFromRegisters(float (&o)[NO], const u32 (&pa)[4][4], u32 kv,
                                                u32 vCols) {
  wgmmaFence();
#pragma unroll
  for (int k = 0; k < 4; ++k)
    Wgmma<DT, NO * 2>::rs(o, pa[k], smemDesc(kv + vCols + k * 2048, 64 * 128, 1024), 1);
  wgmmaCommit();
}
/// The same with P from the [64][64] tile at `p` (the other consumer's).
template <int DT, int NO>
__device__ __forceinline__ void pvFromShared(float (&o)[NO], u32 p, u32 kv, u32 vCols) {
  wgmmaFence();
#pragma unroll
  for (int k = 0; k < 4; ++k)
    Wgmma<DT, NO * 2>::ssT(o, smemDesc(p + k * 32, 16, 1024),
                           smemDesc(kv + vCols + k * 2048, 64 * 128, 1024), 1);
  wgmmaCommit();
}

} // namespace h20saw

#endif // __CUDA_ARCH_FEAT_SM90_ALL
#endif // H20_SAW_CUH_COMMON

#if defined(H20_SAW_NAME)

/// Parameters, grid and semantics as sparse_attention.cuh's kernel; 384
/// threads; dynamic shared memory sparseAttentionSmemBytes(DP, window + K,
/// 1). Grid x runs the rows last to first (later rows see more picks: the
/// longest CTAs start first).
extern "C" __global__ void __launch_bounds__(H20_SAW_THREADS, 1)
H20_SAW_NAME(H20_MR3(const u16, q), H20_MR2(const u16, lat), H20_MR1(const void, sink),
             H20_MR2(const u16, cmp), H20_MR2(const i64, idx), H20_MR3(u16, out),
             float scaleLog2, i64 window, i64 start) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace h20saw;
  constexpr int DP = H20_SA_DP, DT = H20_SA_DT;
  constexpr int CH = DP / 8; // 16-byte chunks per row
  constexpr int NO = DP / 4; // O registers per consumer thread (DP / 2 columns)
  constexpr int TH = DP / 128; // 64-column tiles per half of a key row
  // Registers per thread after setmaxnreg (128 x producer + 256 x consumer
  // <= 64K): the DP 512 consumers hold 128 O accumulators and need 232;
  // below that they need far fewer, and the producer gets 56 (at 40 its
  // window-only DP 128 build spills).
  constexpr int kProducerRegs = DP == 512 ? 40 : 56, kConsumerRegs = DP == 512 ? 232 : 224;
  static_assert(DP == 128 || DP == 256 || DP == 512, "wgmma sparse attention: DP 128, 256, 512");
  typedef SawLayout<DP> L;
  extern __shared__ __align__(1024) unsigned char h20SawSmem[];
  const u32 raw = h20SmemAddr(h20SawSmem);
  const u32 base = (raw + 1023u) & ~1023u;
  unsigned char *gbase = h20SawSmem + (base - raw);
  const u32 sQ = base + L::kQ, sK = base + L::kK, sP = base + L::kP;
  // full and empty: one mbarrier per (buffer, half), at + 8 * (2 * buffer + half).
  const u32 fullQ = base + L::kBar, full = fullQ + 8, empty = full + 32;
  float *sMax = reinterpret_cast<float *>(gbase + L::kMax);
  float *sSum = reinterpret_cast<float *>(gbase + L::kSum);
  int *warpCounts = reinterpret_cast<int *>(gbase + L::kCounts);
  int *list = reinterpret_cast<int *>(gbase + L::kList);

  const int tid = threadIdx.x;
  const i64 i = i64(gridDim.x) - 1 - blockIdx.x;
  const i64 pos = lat_d0 - q_d0 + i;
  const i64 lo = lat_d0 - q_d0 - start > 0 ? lat_d0 - q_d0 - start : 0;
  const i64 H = q_d1, D = q_d2;
  const i64 h0 = static_cast<i64>(blockIdx.y) * 64;

  // The query block's copies go out first, so that they land while all
  // threads build the slot list (16-byte copies only; element copies wait
  // for the producer below).
  auto aligned16 = [](const void *p) { return (reinterpret_cast<u64>(p) & 15u) == 0; };
  const bool dVec = D % 8 == 0;
  const bool qVec = dVec && q_s2 == 1 && q_s1 % 8 == 0 && q_s0 % 8 == 0 && aligned16(q + q_off);
  // Threads 0..127 copy the [64][DP] query tile: 16-byte cp.async when
  // `vec`, else element by element and st.shared.
  auto copyQuery = [&](bool vec) {
#pragma unroll 1
    for (int e = tid; e < 64 * CH; e += 128) {
      const int r = e / CH, c = e % CH;
      const i64 h = h0 + r;
      const bool ok = h < H && c * 8 < D;
      const u32 dst = sQ + swz128(r, c, 64);
      if (vec) {
        h20CpAsync16(dst, ok ? q + q_off + i * q_s0 + h * q_s1 + c * 8 : q + q_off, ok ? 16 : 0);
      } else {
        u32 w[4] = {0u, 0u, 0u, 0u};
        if (ok)
          loadChunk(w, q + q_off + i * q_s0 + h * q_s1, q_s2, c, D);
        stShared128(dst, w[0], w[1], w[2], w[3]);
      }
    }
  };
  if (qVec && tid < 128)
    copyQuery(true);
  if (tid == 0) {
    mbarInit(fullQ, 128);
    for (int b = 0; b < 4; ++b) {
      mbarInit(full + 8 * b, 128); // one arrival per producer thread
      mbarInit(empty + 8 * b, 4);  // one per warp of the half's last reader
    }
    fenceBarrierInit();
  }
#if H20_SA_COMPRESSED
  const i64 T = cmp_d0, K = idx_d1;
  const int n = saSlotList<true, H20_SAW_THREADS>(list, warpCounts, i, pos, lo, window, K, T, idx,
                                                  idx_off, idx_s0, idx_s1, tid);
#else
  const int n = saSlotList<false, H20_SAW_THREADS>(list, warpCounts, i, pos, lo, window, 0, 0,
                                                   idx, 0, 0, 0, tid);
#endif
  __syncthreads(); // the list and the barriers are ready
  const int nb = (n + 63) / 64; // key blocks
  const int warpgroup = tid / 128;

  if (warpgroup == 0) {
    // ---- producer -------------------------------------------------------
    setMaxRegsDec<kProducerRegs>();
    const bool latVec = dVec && lat_s1 == 1 && lat_s0 % 8 == 0 && aligned16(lat + lat_off);
#if H20_SA_COMPRESSED
    const bool cmpVec = dVec && cmp_s1 == 1 && cmp_s0 % 8 == 0 && aligned16(cmp + cmp_off);
#endif
    if (!qVec)
      copyQuery(false);
    arriveLoaded(fullQ, !qVec);
    // Thread tid copies 16-byte chunk tid % 8 of every 64-column tile of
    // rows tid / 8 + 16 k (k < 4) of a block: eight consecutive threads move
    // one 128-byte tile row, the row's source address is computed once for
    // all its tiles, and every copy of a half is issued before any waits.
    const int grp = tid / 8, c8 = tid % 8;
    auto copyHalf = [&](int b, int half) {
      const u32 dst = sK + (b & 1) * L::kTile;
      bool slow = false;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int r = grp + 16 * k, p = b * 64 + r;
        const int code = p < n ? list[p] : 0;
        // A zero-filling copy still names a 16-byte aligned address: the
        // base of the view being read (aligned: `vec`).
        const u16 *view = lat + lat_off;
        const u16 *row = view + i64(code) * lat_s0;
        i64 ds = lat_s1;
        bool vec = latVec;
#if H20_SA_COMPRESSED
        if (code < 0) {
          view = cmp + cmp_off;
          row = view + i64(-2 - code) * cmp_s0;
          ds = cmp_s1;
          vec = cmpVec;
        }
#endif
        const u32 at = dst + r * 128 + (((c8 ^ r) & 7) << 4); // + t * 8192: tile t
        if (vec) {
#pragma unroll
          for (int t = half * TH; t < (half + 1) * TH; ++t) {
            const int c = t * 8 + c8;
            const bool ok = p < n && c * 8 < D;
            h20CpAsync16(at + t * (64 * 128), ok ? row + c * 8 : view, ok ? 16 : 0);
          }
        } else {
          // Element by element (strided or unaligned views), a chunk at a
          // time, tiles not unrolled: this rare path must not take
          // registers from the copies above.
#pragma unroll 1
          for (int t = half * TH; t < (half + 1) * TH; ++t) {
            const int c = t * 8 + c8;
            u32 wv[4] = {0u, 0u, 0u, 0u};
            if (p < n)
              loadChunk(wv, row, ds, c, D); // 8 independent loads
            stShared128(at + t * (64 * 128), wv[0], wv[1], wv[2], wv[3]);
          }
          slow = true;
        }
      }
      arriveLoaded(full + 8 * (2 * (b & 1) + half), slow);
    };
    // Pair j holds blocks 2j (buffer 0) and 2j + 1 (buffer 1). Each half
    // is refilled as soon as its last reader released it, in the order the
    // consumers free them (step s: buffer s % 2, half (s ^ s / 2) % 2):
    // buffer 0's half 0 (after consumer 0's own P V), buffer 1's half 1
    // (consumer 1's own), buffer 0's half 1 (consumer 1's P V with consumer
    // 0's P), buffer 1's half 0 (consumer 0's with consumer 1's P).
#pragma unroll 1
    for (int s = 0; s < 4 * ((nb + 1) / 2); ++s) {
      const int j = s / 4, buf = s & 1, half = (s ^ (s >> 1)) & 1;
      if (2 * j + buf >= nb)
        continue; // the last pair has one block
      if (j > 0)
        mbarWait(empty + 8 * (2 * buf + half), u32(j - 1) & 1u); // pair j - 1's release
      copyHalf(2 * j + buf, half);
    }
    cpAsyncWaitAll();
    return;
  }

  // ---- consumers ----------------------------------------------------------
  setMaxRegsInc<kConsumerRegs>();
  const int w = warpgroup - 1; // 0 or 1: this consumer's blocks and O columns
  const int ct = tid % 128, warp = ct / 32, lane = ct % 32, g = lane / 4, t4 = lane % 4;
  const int row = 16 * warp + g; // rows row, row + 8 of the 64 heads
  const float log2e = 1.4426950408889634f;
  const float negInf = -__int_as_float(0x7f800000);
  float rM[2], rL[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const i64 h = h0 + row + 8 * hr;
    float s = 0.0f;
    if (h < H)
      s = H20Elem<H20_SA_SINK>::load(static_cast<const unsigned char *>(sink) +
                                    (sink_off + h * sink_s0) * H20Elem<H20_SA_SINK>::bytes);
    rM[hr] = s * log2e;
    rL[hr] = w == 0 && t4 == 0 ? 1.0f : 0.0f; // exp2(sink - m) = 1, once per row
  }
  float o[NO];
#pragma unroll
  for (int e = 0; e < NO; ++e)
    o[e] = 0.0f;
  float sc[32];
  u32 pa[4][4];
  // This consumer's O columns [w * DP / 2, (w + 1) * DP / 2) of a key
  // buffer read MN-major: its first 64-column block, then 16 keys a k-step.
  const u32 vCols = u32(w) * (DP / 128) * (64 * 128);
  const u32 myK = sK + w * L::kTile, otherK = sK + (1 - w) * L::kTile;
  const u32 myP = sP + w * 8192, otherP = sP + (1 - w) * 8192;

  // Half `half` of the S GEMM of this consumer's block (buffer w, fill
  // `par`): the k-steps of that half's key columns, one commit group.
  // Consumer w issues its own half first, the half the producer loads first.
  auto issueS = [&](int half, u32 par, bool first) {
    mbarWait(full + 8 * (2 * w + half), par);
    wgmmaFence();
#pragma unroll
    for (int q = 0; q < 4 * TH; ++q) {
      const int kk = half * 4 * TH + q; // k-step: 16 key columns
      Wgmma<DT, 64>::ss(sc, smemDesc(sQ + (kk >> 2) * (64 * 128) + (kk & 3) * 32, 16, 1024),
                        smemDesc(myK + (kk >> 2) * (64 * 128) + (kk & 3) * 32, 16, 1024),
                        first && q == 0 ? 0 : 1);
    }
    wgmmaCommit();
  };

  mbarWait(fullQ, 0);
#pragma unroll 1
  for (int j = 0; j < (nb + 1) / 2; ++j) {
    const int b = 2 * j + w;
    const bool mine = b < nb, has1 = 2 * j + 1 < nb;
    float mx[2] = {negInf, negInf};
    if (mine) {
      if (w == 0) {
        issueS(0, u32(j) & 1u, true);
        issueS(1, u32(j) & 1u, false);
      } else {
        issueS(1, u32(j) & 1u, true);
        issueS(0, u32(j) & 1u, false);
      }
      wgmmaWait<0>();
      fenceRegs(sc);
      maskedMax(sc, n - b * 64, t4, scaleLog2, mx);
    }
    if (w == 0) {
      // Consumer 0: its block's maxima first, published for consumer 1.
      float ref[2], alpha[2], sum[2], mNew[2];
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        mNew[hr] = fmaxf(rM[hr], mx[hr]);
        ref[hr] = mNew[hr] == negInf ? 0.0f : mNew[hr];
        alpha[hr] = exp2f(rM[hr] - ref[hr]);
      }
      if (t4 == 0) {
        sMax[row] = mNew[0];
        sMax[row + 8] = mNew[1];
      }
      namedBarrierArrive(1, 256);
      exponentiate(sc, ref, sum);
      scaleO(o, alpha);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        rL[hr] = rL[hr] * alpha[hr] + sum[hr];
      packP<DT>(sc, pa);
      pvFromRegisters<DT>(o, pa, myK, vCols);
      // The pair's maxima (consumer 1's), and the factor to them.
      namedBarrier(2, 256);
      float f[2];
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float fin = sMax[64 + row + 8 * hr];
        f[hr] = exp2f(ref[hr] - (fin == negInf ? 0.0f : fin));
        rM[hr] = fin;
        rL[hr] *= f[hr];
      }
      wgmmaWait<0>();
      holdRegs(pa);
      fenceRegs(o);
      if (lane == 0)
        mbarArrive(empty + 8 * 0); // buffer 0, half 0: its last reader
      scaleO(o, f);
      storeP<DT>(myP, sc, f, row, t4);
      fenceProxyAsync();
      namedBarrierArrive(3, 256);
      if (has1) {
        namedBarrier(4, 256); // consumer 1's P
        pvFromShared<DT>(o, otherP, otherK, vCols);
        wgmmaWait<0>();
        fenceRegs(o);
        if (lane == 0)
          mbarArrive(empty + 8 * 2); // buffer 1, half 0
      }
    } else {
      // Consumer 1: the pair's maxima, its P, then consumer 0's P.
      namedBarrier(1, 256);
      float ref[2], alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float fin = fmaxf(sMax[row + 8 * hr], mx[hr]);
        ref[hr] = fin == negInf ? 0.0f : fin;
        alpha[hr] = exp2f(rM[hr] - ref[hr]);
        rM[hr] = fin;
        if (t4 == 0)
          sMax[64 + row + 8 * hr] = fin;
      }
      namedBarrierArrive(2, 256);
      if (mine)
        exponentiate(sc, ref, sum);
      scaleO(o, alpha);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        rL[hr] = rL[hr] * alpha[hr] + sum[hr];
      if (mine) {
        packP<DT>(sc, pa);
        pvFromRegisters<DT>(o, pa, myK, vCols);
        const float one[2] = {1.0f, 1.0f};
        storeP<DT>(myP, sc, one, row, t4);
        fenceProxyAsync();
        namedBarrierArrive(4, 256);
      }
      namedBarrier(3, 256); // consumer 0's P
      pvFromShared<DT>(o, otherP, otherK, vCols);
      if (mine) {
        wgmmaWait<1>(); // its own P V
        holdRegs(pa);
        if (lane == 0)
          mbarArrive(empty + 8 * 3); // buffer 1, half 1
      }
      wgmmaWait<0>();
      fenceRegs(o);
      if (lane == 0)
        mbarArrive(empty + 8 * 1); // buffer 0, half 1
    }
  }

  // ---- epilogue: the row sums of both consumers, O / l staged in Q --------
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    rL[hr] += __shfl_xor_sync(0xffffffffu, rL[hr], 1);
    rL[hr] += __shfl_xor_sync(0xffffffffu, rL[hr], 2);
    if (t4 == 0)
      sSum[w * 64 + row + 8 * hr] = rL[hr];
  }
  namedBarrier(5, 256); // also: every S GEMM is done, Q's tile is free
  float inv[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const float l = rL[hr] + sSum[(1 - w) * 64 + row + 8 * hr];
    inv[hr] = l > 0.0f ? 1.0f / l : 0.0f;
  }
#pragma unroll
  for (int n8 = 0; n8 < NO / 4; ++n8)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      stShared32(sQ + swz128(row + 8 * hr, w * (DP / 16) + n8, 64) + 4 * t4,
                 pack2<DT>(o[4 * n8 + 2 * hr] * inv[hr], o[4 * n8 + 2 * hr + 1] * inv[hr]));
  namedBarrier(6, 256);
  const bool outVec = D % 8 == 0 && out_s2 == 1 && out_s1 % 8 == 0 && out_s0 % 8 == 0 &&
                      (reinterpret_cast<u64>(out + out_off) & 15u) == 0;
#pragma unroll 1
  for (int e = tid - 128; e < 64 * CH; e += 256) {
    const int r = e / CH, c = e % CH;
    const i64 h = h0 + r;
    if (h >= H || c * 8 >= D)
      continue;
    const uint4 v = ldShared128(sQ + swz128(r, c, 64));
    u16 *dst = out + out_off + i * out_s0 + h * out_s1;
    if (outVec) {
      *reinterpret_cast<uint4 *>(dst + c * 8) = v;
    } else {
      const u32 wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (c * 8 + k < D)
          dst[i64(c * 8 + k) * out_s2] = u16(wv[k / 2] >> (16 * (k % 2)));
    }
  }
#endif // __CUDA_ARCH_FEAT_SM90_ALL
}

#endif // H20_SAW_NAME
