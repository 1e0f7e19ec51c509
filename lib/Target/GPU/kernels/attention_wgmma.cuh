//===- attention_wgmma.cuh - the FA3-style wgmma/TMA body (sm_90a) ----*- CUDA -*-===//
//
// AttentionVariant kind 1: producer and two consumer warpgroups, TMA or
// cp.async loads, ping-pong schedule; the section comment below says how.
// Embedded as "h20_attention_wgmma.cuh"; empty unless compiled for sm_90a.
//
//===----------------------------------------------------------------------===//
#ifndef H20_ATTENTION_WGMMA_CUH
#define H20_ATTENTION_WGMMA_CUH

#include "h20_attention_common.cuh"
#include "h20_wgmma.cuh"

namespace h20attn {

// ==== wgmma body (AttentionVariant::kind 1; sm_90a only) =====================
//
// A FlashAttention-3-style forward kernel (Shah et al., "FlashAttention-3:
// Fast and Accurate Attention with Asynchrony and Low-precision", 2024) for
// f16/bf16 and D = Dv in {64, 128, 256}: 384 threads in 3 warpgroups.
//   * Warpgroup 0, the producer (setmaxnreg 40 registers), streams the K and
//     V tiles of the CTA's visible key range into a ring of ST (2 or 3,
//     H20_STAGES) shared-memory stages. With p.tma = 1 (the runtime made
//     tensor maps of Q, K and V: include/h20/Runtime/Cuda/AttentionTma.h) one
//     thread issues every load as TMA copies (cp.async.bulk.tensor.4d) of
//     64 x 64 boxes, each filling one 8 KiB block of the swizzled layout
//     below (the tensor map's 128B swizzle is the same permutation) and
//     completing on the stage's mbarrier (arrive.expect_tx, count 1); rows
//     past sq / skv arrive as zeros. Q of both consumers comes the same way
//     (fullQ). With p.tma = 0 (views a tensor map cannot describe: dim
//     stride != 1, strides not multiples of 16 bytes, ...) the 128 producer
//     threads use cp.async (16-byte copies, zero-filled past skv; element
//     copies when rows are not 16-byte aligned), each thread arriving on
//     fullK[s] / fullV[s] after cp.async.wait_group and fence.proxy.async
//     (the tensor cores read through the async proxy what cp.async and
//     st.shared wrote through the generic one); the consumers load Q.
//     The producer refills a stage once its emptyK[s] / emptyV[s] barrier
//     (one arrival per consumer warp) says both consumers are done with it;
//     K and V are released separately (K after S_j, V after P_j V_j).
//     Measured on an H200 (bench/results/attn-variants-h200, bf16, D = 128,
//     causal, B = 1, H = 32): TMA 556 TFLOP/s at S = 128K, cp.async 367.
//   * Warpgroups 1 and 2, the consumers (setmaxnreg 232), each own 64 query
//     rows (BLOCK_M = 128). Per tile: S = Q K^T by wgmma m64nBNk16 with Q and
//     K from shared memory (K-major, 128-byte swizzle); the online softmax in
//     registers (base 2, the log2(e)-prescaled scale folded into one FMA per
//     element); P rounded to f16/bf16 in registers, which is the register A
//     operand of O += P V (wgmma m64nDVk16, V from shared memory, MN-major:
//     V is [keys][Dv] with Dv contiguous, so the descriptor is the transposed
//     one). Causal: the CTA's key range stops at its last row's position, so
//     fully masked tiles are never loaded; only tiles crossing the diagonal,
//     the window's edge or skv are masked.
//   * Schedules (H20_SCHEDULE): 0 runs each tile as S_j, softmax, P_j V_j,
//     waiting for each GEMM; 2 pipelines within a warpgroup (FA3 section
//     3.2): S_j and P_{j-1} V_{j-1} are issued together, the softmax of S_j
//     runs while P V is still on the tensor cores, then O is rescaled and
//     P_j packed; 1 (the default) is 2 plus ping-pong between the two
//     consumers (FA3 section 3.1): named barriers 3 and 4 make the
//     warpgroups issue their GEMM bursts in turn, so one's softmax overlaps
//     the other's GEMMs. Measured (same record, TMA): 0: 535 / 560 / 556,
//     1: 622 / 615 / 614, 2: 612 / 615 / 617 TFLOP/s at 8K / 32K / 128K;
//     3 stages were no faster (609 / 606 / 605 with schedule 1).
//   * Epilogue: O / l rounded to the element type, staged in the warpgroup's
//     own Q tile (same swizzle: conflict-free), then 16-byte stores per row
//     (element stores for a non-vectorizable O view).
//
// Shared memory (WgLayout; AttentionVariant::smemBytes mirrors it), from the
// dynamic base rounded up to 1024 bytes (the 128-byte swizzle repeats every
// 8 rows of 128 bytes, and wgmma computes it from address bits 4-9):
//   Q [2 warpgroups][64 rows][D], then K [ST stages][BN][D], then V
//   [ST stages][BN][Dv], then 128 bytes of mbarriers (fullQ, fullK[ST],
//   fullV[ST], emptyK[ST], emptyV[ST]).
// Every tile is stored as column blocks of 64 elements (128 bytes per row):
// element (r, c) of a tile with R rows lives at byte
//   (c / 64) * R * 128 + r * 128 + (((c % 64) / 8) ^ (r % 8)) * 16 + (c % 8) * 2,
// which is the canonical "128B swizzle" layout of the PTX ISA (matrix
// descriptor layout type 1) both for K-major operands (Q, K: rows are M/N,
// columns are the reduction dim) and for MN-major ones (V: rows are the
// reduction dim, columns are N).
//
// Fragment layouts (PTX ISA, "Register Fragments" of wgmma .m64nNk16): warp
// w of a warpgroup owns rows 16w..16w+15 of the 64; lane l = 4g + t holds,
// of the fp32 accumulator D (N/2 registers), d[4n + 2h + c] = D[16w + g +
// 8h][8n + 2t + c]; the register A operand (4 x 32 bits, two 16-bit values
// each) holds a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] =
// A[g][2t+8..], a[3] = A[g+8][2t+8..] of the warp's 16 x 16 slice. So the
// S accumulators of keys 16k..16k+15 (n8 blocks 2k, 2k+1) are exactly the
// A operand of k-step k of P V, as with mma.sync.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace wg {

using namespace ::h20wg;

/// Copies rows [row0, row0 + ROWS) x columns [0, COLS) of a strided (seq,
/// dim) matrix `src` of 16-bit elements into the swizzled tile at shared
/// address `dst` (ROWS rows per 64-column block); rows >= `valid` become
/// zeros. NT threads take 16-byte chunks in turn (consecutive threads,
/// consecutive chunks of a row: coalesced). `vec`: cp.async (asynchronous:
/// commit and wait before use); otherwise element loads and st.shared.
/// (A loop over a compile-time count, fully unrolled, made ptxas spill in
/// the 40-register producer: it hoists every chunk's address.)
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void loadSwizzled(bool vec, u32 dst, const u16 *src, i64 ss, i64 ds,
                                             i64 row0, i64 valid, int t) {
  constexpr int kChunks = COLS / 8; // per row
  static_assert((ROWS * kChunks) % NT == 0, "tile chunks must divide among the threads");
  if (vec) {
#pragma unroll
    for (int e = t; e < ROWS * kChunks; e += NT) {
      const int r = e / kChunks, c = e % kChunks;
      const i64 row = row0 + r;
      const bool ok = row < valid;
      h20CpAsync16(dst + swz128(r, c, ROWS), src + (ok ? row : 0) * ss + c * 8, ok ? 16 : 0);
    }
  } else {
#pragma unroll 1
    for (int e = t; e < ROWS * kChunks; e += NT) {
      const int r = e / kChunks, c = e % kChunks;
      const i64 row = row0 + r;
      u32 w[4] = {0u, 0u, 0u, 0u};
      if (row < valid) {
        const u16 *g = src + row * ss + i64(c) * 8 * ds;
#pragma unroll
        for (int k = 0; k < 8; ++k)
          w[k / 2] |= u32(g[i64(k) * ds]) << (16 * (k % 2));
      }
      stShared128(dst + swz128(r, c, ROWS), w[0], w[1], w[2], w[3]);
    }
  }
}

/// The inverse of loadSwizzled: stores the swizzled tile at shared address
/// `src` (ROWS rows per 64-column block) as rows [row0, row0 + ROWS) x
/// columns [0, COLS) of a strided (seq, dim) matrix `dst` of 16-bit
/// elements, rows < `valid` only. NT threads take 16-byte chunks in turn;
/// 16-byte stores where the view allows (vectorizable), else element stores.
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void storeSwizzled(u16 *dst, i64 ss, i64 ds, u32 src, i64 row0,
                                              i64 valid, int t) {
  constexpr int kChunks = COLS / 8; // 16-byte pieces per row
  if (vectorizable(dst, ss, ds, 2)) {
#pragma unroll 4
    for (int e = t; e < ROWS * kChunks; e += NT) {
      const int r = e / kChunks, cc = e % kChunks;
      if (row0 + r < valid)
        *reinterpret_cast<uint4 *>(dst + (row0 + r) * ss + cc * 8) =
            ldShared128(src + swz128(r, cc, ROWS));
    }
  } else {
    for (int e = t; e < ROWS * kChunks; e += NT) {
      const int r = e / kChunks, cc = e % kChunks;
      if (row0 + r < valid) {
        const uint4 v = ldShared128(src + swz128(r, cc, ROWS));
        const u32 w[4] = {v.x, v.y, v.z, v.w};
        u16 *row = dst + (row0 + r) * ss + i64(cc) * 8 * ds;
#pragma unroll
        for (int k = 0; k < 8; ++k)
          row[i64(k) * ds] = u16(w[k / 2] >> (16 * (k % 2)));
      }
    }
  }
}

/// Byte offsets from the 1024-aligned base (see the section comment).
template <int D, int DV, int BN, int ST> struct WgLayout {
  static constexpr int kQWarpgroup = 64 * D * 2; ///< one consumer's Q (and O staging) tile
  static constexpr int kKStage = BN * D * 2;
  static constexpr int kVStage = BN * DV * 2;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + 2 * kQWarpgroup;
  static constexpr int kV = kK + ST * kKStage;
  /// fullQ, then fullK[ST], fullV[ST], emptyK[ST], emptyV[ST] (8 bytes each)
  static constexpr int kBar = kV + ST * kVStage;
  static constexpr int kBytes = kBar + 128 + 1024; ///< + slack for the base alignment
  static_assert(8 * (1 + 4 * ST) <= 128, "mbarriers overflow their 128 bytes");
};

/// Per-thread accumulator state of one consumer warpgroup and the steps of
/// its main loop, shared by the schedules (see the section comment).
template <int DT, int D, int DV, int BN> struct WgConsumer {
  float o[DV / 2];                                   ///< O accumulators
  float rowMax[2] = {negInf(), negInf()};            ///< rows g, g + 8 (base 2)
  float rowSum[2] = {0.f, 0.f};                      ///< this lane's share of the row sums
  u32 sQ;                                            ///< this warpgroup's Q tile
  int warp, g, t4;
  float softcap, scaleLog2, capIn, capOut, mul;
  bool inPlace;

  __device__ __forceinline__ WgConsumer(const H20AttnParams &p, u32 q, int tid) : sQ(q) {
    const int lane = tid % 32;
    warp = tid / 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int i = 0; i < DV / 2; ++i)
      o[i] = 0.f;
    // Logits in base 2: s * mul, with mul = scale * log2(e) folded into the
    // exponent's FMA; with a softcap (or a non-positive scale) the logits
    // are transformed in place first and mul = 1.
    softcap = p.softcap, scaleLog2 = p.scale * kLog2e;
    capIn = softcap > 0.f ? p.scale / softcap : 0.f, capOut = softcap * kLog2e;
    inPlace = softcap > 0.f || !(scaleLog2 > 0.f);
    mul = inPlace ? 1.f : scaleLog2;
  }

  /// Issues S = Q K^T (raw dot products) for the K tile at `kTile`.
  __device__ __forceinline__ void issueS(float (&sc)[BN / 2], u32 kTile) const {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const u64 da = smemDesc(sQ + (kk >> 2) * (64 * 128) + (kk & 3) * 32, 16, 1024);
      const u64 db = smemDesc(kTile + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024);
      Wgmma<DT, BN>::ss(sc, da, db, kk > 0 ? 1 : 0);
    }
  }
  /// Issues O += P V for the V tile at `vTile`; V tile rows 16k.. start
  /// 16 * 128 bytes further per k-step.
  __device__ __forceinline__ void issuePV(const u32 (&pa)[BN / 16][4], u32 vTile) {
#pragma unroll
    for (int k = 0; k < BN / 16; ++k)
      Wgmma<DT, DV>::rs(o, pa[k], smemDesc(vTile + k * 2048, BN * 128, 1024), 1);
  }

  /// The online softmax of the tile at key n0 (base 2) for rows g (hr = 0)
  /// and g + 8 (hr = 1): logits scaled (or softcapped) and masked in place,
  /// then replaced by their exponentials against the new row maxima; the row
  /// sums are rescaled and extended. O is not touched: it must be rescaled by
  /// `alpha` (rescaleO) once no P V GEMM that writes it is in flight.
  __device__ __forceinline__ void softmax(float (&sc)[BN / 2], const KeyRange &keys, i64 n0,
                                          i64 mw, i64 lastRowW, i64 skv, float (&alpha)[2]) {
    if (inPlace) {
      if (softcap > 0.f) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i)
          sc[i] = softcapLogit2(sc[i], capIn, capOut);
      } else {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i)
          sc[i] *= scaleLog2;
      }
    }
    if (keys.tileNeedsMask(n0, BN, mw, lastRowW, skv)) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        int lo, hi;
        keys.visibleColumns(mw + 16 * warp + g + 8 * hr, n0, BN, skv, &lo, &hi);
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int col = 8 * n + 2 * t4 + c;
            if (col < lo || col >= hi)
              sc[4 * n + 2 * hr + c] = negInf();
          }
      }
    }
    // The four lanes of a row group share a row.
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = negInf();
#pragma unroll
      for (int n = 0; n < BN / 8; ++n)
        mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * hr], sc[4 * n + 2 * hr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mNew = fmaxf(rowMax[hr], mx * mul);
      // No visible key yet: keep every exponent finite (exp2(-inf) = 0).
      const float ref = mNew == negInf() ? 0.f : mNew;
      alpha[hr] = fastExp2(rowMax[hr] - ref);
      rowMax[hr] = mNew;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float e = fastExp2(fmaf(sc[4 * n + 2 * hr + c], mul, -ref));
          sc[4 * n + 2 * hr + c] = e;
          sum += e;
        }
      rowSum[hr] = rowSum[hr] * alpha[hr] + sum;
    }
  }
  __device__ __forceinline__ void rescaleO(const float (&alpha)[2]) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
#pragma unroll
      for (int n = 0; n < DV / 8; ++n) {
        o[4 * n + 2 * hr] *= alpha[hr];
        o[4 * n + 2 * hr + 1] *= alpha[hr];
      }
  }
  /// P (16-bit) as the register A operand: keys 16k..16k+15 are k-step k.
  static __device__ __forceinline__ void packP(const float (&sc)[BN / 2], u32 (&pa)[BN / 16][4]) {
#pragma unroll
    for (int k = 0; k < BN / 16; ++k) {
      pa[k][0] = Elem<DT>::pack(sc[8 * k + 0], sc[8 * k + 1]);
      pa[k][1] = Elem<DT>::pack(sc[8 * k + 2], sc[8 * k + 3]);
      pa[k][2] = Elem<DT>::pack(sc[8 * k + 4], sc[8 * k + 5]);
      pa[k][3] = Elem<DT>::pack(sc[8 * k + 6], sc[8 * k + 7]);
    }
  }
};

} // namespace wg

/// The wgmma forward kernel body (kind 1): 384 threads, BLOCK_M = 128, ST
/// shared-memory stages, schedule SCHED (0 plain, 1 ping-pong, 2 pipelined
/// without ping-pong; see the section comment).
template <int DT, int D, int DV, int BN, int ST, int SCHED>
__device__ __forceinline__ void attentionWgmma(const H20AttnParams &p) {
  using namespace wg;
  typedef WgLayout<D, DV, BN, ST> L;
  static_assert(D == DV && (D == 64 || D == 128 || D == 256),
                "wgmma kernel: D = Dv in {64, 128, 256} (O is staged in the Q tile)");
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma kernel: BLOCK_N in {64, 128, 256}");
  static_assert(ST == 2 || ST == 3, "wgmma kernel: 2 or 3 stages");
  static_assert(SCHED >= 0 && SCHED <= 2, "wgmma kernel: schedule 0, 1 or 2");
  constexpr int BM = 128;

  const u32 base = (h20SmemAddr(h20SmemRaw) + 1023u) & ~1023u;
  const u32 sK = base + L::kK, sV = base + L::kV;
  const u32 fullQ = base + L::kBar, fullK = fullQ + 8, fullV = fullK + 8 * ST;
  const u32 emptyK = fullV + 8 * ST, emptyV = emptyK + 8 * ST; // + 8 * stage
  const int warpgroup = threadIdx.x / 128;
  const bool tma = p.tma != 0;
  if (threadIdx.x == 0) {
    mbarInit(fullQ, 1);
    for (int s = 0; s < ST; ++s) {
      mbarInit(fullK + 8 * s, tma ? 1 : 128); // TMA: the issuing thread's expect_tx
      mbarInit(fullV + 8 * s, tma ? 1 : 128);
      mbarInit(emptyK + 8 * s, 8); // one arrival per consumer warp
      mbarInit(emptyV + 8 * s, 8);
    }
    fenceBarrierInit();
  }
  __syncthreads(); // the barriers are initialised before anyone uses them

  // Heaviest row blocks (causal: the last ones) first.
  const i64 mBlock = i64(gridDim.x) - 1 - blockIdx.x;
  const i64 h = blockIdx.y, b = blockIdx.z;
  const i64 group = p.kv_heads > 0 ? p.heads / p.kv_heads : 1;
  const i64 kh = h / (group > 0 ? group : 1);
  const i64 m0 = mBlock * BM;
  const KeyRange keys(p, m0, BM);
  const i64 nTiles = keys.tiles(BN);

  if (warpgroup == 0) {
    // ---- producer ----
    setMaxRegsDec<40>();
    // Before refilling stage j % ST: both consumers released the tile ST
    // back of it (its previous use).
    auto waitFree = [&](u32 empty, i64 j) {
      if (j >= ST)
        mbarWait(empty + 8 * u32(j % ST), u32(j / ST - 1) & 1);
    };
    if (tma) {
      if (threadIdx.x != 0)
        return;
      // One thread issues every copy: 64 x 64 boxes (AttentionTma.h), each
      // one 8 KiB swizzled block of the layout, rows past the end zeros.
      const void *mq = &p.tm_q, *mk = &p.tm_k, *mv = &p.tm_v;
      const int ih = int(h), ikh = int(kh), ib = int(b);
      mbarArriveExpectTx(fullQ, BM * D * 2);
      tmaLoadTile<64, D>(base + L::kQ, mq, fullQ, int(m0), ih, ib);
      tmaLoadTile<64, D>(base + L::kQ + L::kQWarpgroup, mq, fullQ, int(m0) + 64, ih, ib);
      for (i64 j = 0; j < nTiles; ++j) {
        const int s = int(j % ST);
        const int n0 = int(keys.begin + j * BN);
        waitFree(emptyK, j);
        mbarArriveExpectTx(fullK + 8 * s, BN * D * 2);
        tmaLoadTile<BN, D>(sK + s * L::kKStage, mk, fullK + 8 * s, n0, ikh, ib);
        waitFree(emptyV, j);
        mbarArriveExpectTx(fullV + 8 * s, BN * DV * 2);
        tmaLoadTile<BN, DV>(sV + s * L::kVStage, mv, fullV + 8 * s, n0, ikh, ib);
      }
      return;
    }
    const int t = threadIdx.x;
    const u16 *gK = headBase<u16>(p.k, p.k_stride, b, kh);
    const u16 *gV = headBase<u16>(p.v, p.v_stride, b, kh);
    const bool vecK = vectorizable(gK, p.k_stride[2], p.k_stride[3], 2);
    const bool vecV = vectorizable(gV, p.v_stride[2], p.v_stride[3], 2);
    for (i64 j = 0; j < nTiles; ++j) {
      const int s = int(j % ST);
      const i64 n0 = keys.begin + j * BN;
      waitFree(emptyK, j);
      loadSwizzled<BN, D, 128>(vecK, sK + s * L::kKStage, gK, p.k_stride[2], p.k_stride[3], n0,
                               p.skv, t);
      h20CpAsyncCommit();
      waitFree(emptyV, j);
      loadSwizzled<BN, DV, 128>(vecV, sV + s * L::kVStage, gV, p.v_stride[2], p.v_stride[3], n0,
                                p.skv, t);
      h20CpAsyncCommit();
      h20CpAsyncWait<1>(); // this thread's K copies have landed
      fenceProxyAsync();
      mbarArrive(fullK + 8 * s);
      h20CpAsyncWait<0>();
      fenceProxyAsync();
      mbarArrive(fullV + 8 * s);
    }
    return;
  }

  // ---- consumers ----
  setMaxRegsInc<232>();
  const int cw = warpgroup - 1;             // 0 or 1: rows 64 * cw .. of the CTA
  const int tid = threadIdx.x - 128 * warpgroup;
  const int lane = tid % 32;
  const i64 mw = m0 + 64 * cw; // this warpgroup's first query row
  const i64 lastRowW = imin(mw + 64, p.sq) - 1;
  const u32 sQ = base + L::kQ + cw * L::kQWarpgroup;

  if (tma) {
    mbarWait(fullQ, 0);
  } else {
    const u16 *gQ = headBase<u16>(p.q, p.q_stride, b, h);
    loadSwizzled<64, D, 128>(vectorizable(gQ, p.q_stride[2], p.q_stride[3], 2), sQ, gQ,
                             p.q_stride[2], p.q_stride[3], mw, p.sq, tid);
    h20CpAsyncCommit();
    h20CpAsyncWait<0>();
    fenceProxyAsync();
    namedBarrier(1 + cw, 128); // the whole warpgroup's Q rows are in place
  }

  WgConsumer<DT, D, DV, BN> c(p, sQ, tid);
  // A stage is released by one lane per warp once the warp's wgmma reads of
  // it have completed.
  auto release = [&](u32 bar) {
    __syncwarp();
    if (lane == 0)
      mbarArrive(bar);
  };
  auto kTile = [&](i64 j) { return sK + u32(j % ST) * L::kKStage; };
  auto vTile = [&](i64 j) { return sV + u32(j % ST) * L::kVStage; };
  auto parity = [&](i64 j) { return u32((j / ST) & 1); };
  auto tileStart = [&](i64 j) { return keys.begin + j * BN; };

  if constexpr (SCHED == 0) {
    for (i64 j = 0; j < nTiles; ++j) {
      float sc[BN / 2];
      mbarWait(fullK + 8 * (j % ST), parity(j));
      wgmmaFence();
      c.issueS(sc, kTile(j));
      wgmmaCommit();
      wgmmaWait<0>();
      fenceRegs(sc);
      release(emptyK + 8 * (j % ST));
      float alpha[2];
      c.softmax(sc, keys, tileStart(j), mw, lastRowW, p.skv, alpha);
      c.rescaleO(alpha);
      u32 pa[BN / 16][4];
      c.packP(sc, pa);
      mbarWait(fullV + 8 * (j % ST), parity(j));
      wgmmaFence();
      c.issuePV(pa, vTile(j));
      wgmmaCommit();
      wgmmaWait<0>();
      fenceRegs(c.o);
      release(emptyV + 8 * (j % ST));
    }
  } else if (nTiles > 0) {
    // Bursts: {S_0}, {S_j, P_{j-1} V_{j-1}} for j = 1 .. n-1, {P_{n-1} V_{n-1}}.
    // SCHED 1: the two warpgroups take turns to issue their bursts (named
    // barriers 3 and 4, 256 threads): warpgroup 0 first; each turn ends when
    // the other may go, so one warpgroup's softmax runs while the other's
    // GEMMs occupy the tensor cores. Each barrier sees as many arrivals as
    // waits (warpgroup 1 skips passing the turn after its last burst).
    constexpr bool kPingPong = SCHED == 1;
    auto turnBegin = [&] {
      if (kPingPong)
        namedBarrier(3 + cw, 256);
    };
    auto turnEnd = [&](bool last) {
      if (kPingPong && !(last && cw == 1))
        namedBarrierArrive(3 + (1 - cw), 256);
    };
    if (kPingPong && cw == 1)
      namedBarrierArrive(3, 256);

    float sc[BN / 2], alpha[2];
    u32 pa[BN / 16][4];
    mbarWait(fullK, 0);
    turnBegin();
    wgmmaFence();
    c.issueS(sc, kTile(0));
    wgmmaCommit();
    turnEnd(false);
    wgmmaWait<0>();
    fenceRegs(sc);
    release(emptyK);
    c.softmax(sc, keys, tileStart(0), mw, lastRowW, p.skv, alpha);
    c.packP(sc, pa); // O is still zero: nothing to rescale
    for (i64 j = 1; j < nTiles; ++j) {
      mbarWait(fullK + 8 * (j % ST), parity(j));
      mbarWait(fullV + 8 * ((j - 1) % ST), parity(j - 1));
      turnBegin();
      wgmmaFence();
      c.issueS(sc, kTile(j));
      wgmmaCommit();
      c.issuePV(pa, vTile(j - 1));
      wgmmaCommit();
      turnEnd(false);
      wgmmaWait<1>(); // S_j (committed first) has landed; P V may still run
      fenceRegs(sc);
      release(emptyK + 8 * (j % ST));
      c.softmax(sc, keys, tileStart(j), mw, lastRowW, p.skv, alpha);
      wgmmaWait<0>();
      fenceRegs(c.o);
      holdRegs(pa);
      release(emptyV + 8 * ((j - 1) % ST));
      c.rescaleO(alpha);
      c.packP(sc, pa);
    }
    mbarWait(fullV + 8 * ((nTiles - 1) % ST), parity(nTiles - 1));
    turnBegin();
    wgmmaFence();
    c.issuePV(pa, vTile(nTiles - 1));
    wgmmaCommit();
    turnEnd(true);
    wgmmaWait<0>();
    fenceRegs(c.o);
    holdRegs(pa);
    release(emptyV + 8 * ((nTiles - 1) % ST));
  }

  // Epilogue: O / l (0 for rows without a visible key) into this
  // warpgroup's Q tile (its last wgmma read has completed), then to global.
  fenceProxyAsync(); // async-proxy reads of sQ before the generic writes
  const int warp = c.warp, g = c.g, t4 = c.t4;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float l = c.rowSum[hr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? fastRcp(l) : 0.f;
    const int row = 16 * warp + g + 8 * hr;
#pragma unroll
    for (int n = 0; n < DV / 8; ++n)
      stShared32(sQ + swz128(row, n, 64) + 4 * t4,
                 Elem<DT>::pack(c.o[4 * n + 2 * hr] * inv, c.o[4 * n + 2 * hr + 1] * inv));
  }
  namedBarrier(1 + cw, 128);

  storeSwizzled<64, DV, 128>(const_cast<u16 *>(headBase<u16>(p.o, p.o_stride, b, h)),
                             p.o_stride[2], p.o_stride[3], sQ, mw, p.sq, tid);
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace h20attn

#endif // H20_ATTENTION_WGMMA_CUH
