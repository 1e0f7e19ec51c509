//===- indexer_mma.cuh - V4.1 lightning-indexer top-k on tensor cores, for NVRTC -*- CUDA -*-===//
//
// attn.indexer_topk without candidates (mode 0 of indexer.cuh), with
// candidate blocks (mode 1: the top-k within each row's candidate blocks)
// and attn.indexer_candidates (mode 2: the best blocks of `block` entries)
// for 16-bit query and keys: the scores on mma.sync tensor cores and the top-k kept
// on chip while the keys stream by, so neither an S x T score matrix nor a
// T-long scratch row per query is ever written (indexer.cuh's scratch rows
// cost 4 T bytes of traffic per query and pass). Semantics: the op's
// description in include/h20/Dialect/Attn/IR/AttnOps.td; reference:
// lib/Conversion/ToLinalg/SparseAttnToLinalg.cpp. Source of the scoring:
// transformers models/deepseek_v41 (DeepseekV41Indexer).
//
// Compiled by NVRTC only: lib/Target/GPU/IndexerKernel.cpp embeds this file
// and, per instantiation, defines H20_IDXM_DT (query and key type: 1 f16,
// 2 bf16), H20_IDXM_W (weights: 0 f32, 1 f16, 2 bf16), H20_IDXM_HP (heads
// padded to 16, 32 or 64), H20_IDXM_DP (head dim padded to a multiple of
// 64, at most 256), H20_IDXM_CAP (candidate buffer per query row, a
// multiple of 64 >= K + 64 and >= the power of two >= K), H20_IDXM_MODE
// (0 entries, 1 entries within candidate blocks, 2 candidate blocks of a
// block size dividing 32), H20_IDXM_GATHER (mode 1: 1 gathers the picked
// entries, 0 streams the key tiles they touch), H20_IDXM_MINB (the CTAs
// per SM it is compiled for: __launch_bounds__' minimum) and
// H20_IDXM_NAME, then includes it.
//
// Work split: a CTA of 4 warps owns R = 64 / HP consecutive query rows, the
// 64 (row, head) pairs forming the MMA's M (padding rows are zero); CTAs
// take the longest rows first. Per tile of 64 keys (cp.async, double
// buffered, 16-byte chunks XOR-swizzled): S = Q K^T with K = DP (Q's
// fragments stay in registers), then ReLU, times weight x scale, summed
// over each row's heads (shuffles, then shared memory) into 64 entry
// scores per row. Selection, exact and streaming: every query row keeps a
// buffer of candidate keys (score, then lower index, as one 64-bit key)
// and the key `tau` of its K-th best so far; an entry enters only if its
// key beats tau (all entries do until K are held). When a buffer could
// overflow on the next tile, it is cut to its K best by a radix select
// (unsorted), raising tau to the K-th key. At the end each buffer is cut
// to K, sorted and written,
// largest first; slots without a visible entry hold T. Mode 2 streams
// blocks instead of entries: a block's score is the maximum over its
// visible entries (a segmented shuffle over `block` lanes of a warp), the
// block of the newest visible entry is pinned to +inf, blocks without a
// visible entry never enter, and empty slots hold NB = ceil(T / block).
// Mode 1 reads each row's candidate blocks (cand [S, KB], indices into
// the NB = ceil(T / block) blocks; others are ignored, repeats count once)
// into a bit per block and row in shared memory. Then, with
// H20_IDXM_GATHER 0, it marks the key tiles holding a visible candidate
// entry of any of the CTA's rows and streams only those tiles (every tile
// a picked block touches); with H20_IDXM_GATHER 1 it streams gathered
// tiles: the visible entries of the blocks any of the CTA's rows picked,
// 64 to a tile, their key rows loaded by index (a row with 2048 blocks of
// 8 among 128K entries scores ~16K entries, not the ~7/8 of the key tiles
// they touch; where the picks cover much of the keys the marked tiles are
// cheaper: IndexerKernel.h, chooseIndexerMma). An entry enters the
// selection as in mode 0 when its block's bit is set for the row.
//
// Kernel parameters follow MLIR's expanded memref descriptor, as
// indexer.cuh's (the candidates and scratch views are not read).
//
//===----------------------------------------------------------------------===//

#ifndef H20_IDXM_CUH_COMMON
#define H20_IDXM_CUH_COMMON

#include "h20_tensor_core.cuh"

#define H20_IDXM_THREADS 128
#define H20_IDXM_TILE 64

/// A candidate as one 64-bit key ordered like the selection: a larger
/// score first, on equal scores the lower entry index (the float maps to an
/// unsigned key of the same order, -0 as +0; scores are finite here). 0 is
/// below every candidate: an empty slot.
__device__ __forceinline__ u64 idxmKey(float s, u32 t) {
  u32 u = __float_as_uint(s == 0.0f ? 0.0f : s);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<u64>(u) << 32) | static_cast<u64>(0xffffffffu - t);
}
__device__ __forceinline__ u32 idxmIndex(u64 key) { return 0xffffffffu - static_cast<u32>(key); }

/// Sorts buf[0, n) descending, n a power of two (bitonic; all threads of
/// the CTA).
__device__ void idxmSortDescending(u64 *buf, int n) {
  for (int k = 2; k <= n; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += H20_IDXM_THREADS) {
        const int p = i ^ j;
        if (p > i) {
          const u64 a = buf[i], b = buf[p];
          const bool descending = (i & k) == 0;
          if (descending ? a < b : a > b) {
            buf[i] = b;
            buf[p] = a;
          }
        }
      }
      __syncthreads();
    }
}

/// The selection's shared state for one cut (idxmCut): the K-th key's
/// prefix found so far and its mask, the smallest kept key, how many of
/// the keys under the prefix are still to keep, and the count after the
/// cut.
struct IdxmCutState {
  u64 prefix, mask, minKept;
  int remaining, kept;
};

/// Keeps the K largest of the n (> K >= 1) distinct nonzero keys of
/// buf[0, n), in any order, in buf[0, K); buf[K, n) is zeroed. Returns (in
/// st->minKept) the smallest key kept. An MSD radix select, 8 bits per
/// pass: a pass histograms the keys under the prefix found so far into
/// `hist` (256 words of shared memory) by their next byte, and one warp
/// finds the byte of the K-th key from the top; it stops when every key of
/// that byte's bucket is kept (at the latest when the bucket holds one
/// key: the keys are distinct). Then every thread keeps its keys at or
/// above the prefix (registers first: the compaction is in place). Work
/// O(n) per pass and at most 8 passes, against the O(n log^2 n) of a
/// bitonic sort; the buffer needs no power-of-two size. All threads of the
/// CTA; CAP bounds n.
template <int CAP>
__device__ void idxmCut(u64 *buf, int n, int K, u32 *hist, IdxmCutState *st, int tid) {
  constexpr int PER = (CAP + H20_IDXM_THREADS - 1) / H20_IDXM_THREADS;
  if (tid == 0) {
    st->prefix = 0;
    st->mask = 0;
    st->minKept = ~0ull;
    st->remaining = K;
    st->kept = 0;
  }
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += H20_IDXM_THREADS)
      hist[b] = 0;
    __syncthreads(); // the state of the last pass and the zeroed histogram
    const u64 prefix = st->prefix, mask = st->mask;
    for (int j = tid; j < n; j += H20_IDXM_THREADS) {
      const u64 key = buf[j];
      if ((key & mask) == prefix)
        atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid < 32) {
      // Lane L holds the bytes 255 - 8L down to 248 - 8L (largest first).
      const int lane = tid;
      const u32 need = static_cast<u32>(st->remaining);
      u32 local = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b)
        local += hist[255 - 8 * lane - b];
      u32 incl = local;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const u32 v = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off)
          incl += v;
      }
      __syncwarp(); // every lane has read `remaining` before one writes it
      u32 above = incl - local;
      if (above < need && need <= incl) {
        for (int b = 0; b < 8; ++b) {
          const int byte = 255 - 8 * lane - b;
          const u32 h = hist[byte];
          if (above + h >= need) {
            st->prefix = prefix | (static_cast<u64>(byte) << shift);
            st->mask = mask | (255ull << shift);
            st->remaining = static_cast<int>(need - above);
            // Every key of this bucket kept: the prefix alone decides.
            if (h == need - above)
              st->remaining = 0;
            break;
          }
          above += h;
        }
      }
    }
    __syncthreads();
    if (st->remaining == 0)
      break;
  }
  // Keys at or above the K-th key's bucket: (key & mask) >= prefix, as the
  // mask covers whole top bytes.
  const u64 prefix = st->prefix, mask = st->mask;
  u64 v[PER];
#pragma unroll
  for (int x = 0; x < PER; ++x) {
    const int j = x * H20_IDXM_THREADS + tid;
    v[x] = j < n ? buf[j] : 0;
  }
  __syncthreads(); // every key read before any is moved
  for (int j = K + tid; j < n; j += H20_IDXM_THREADS)
    buf[j] = 0;
  __syncthreads(); // (a kept key may land below K only: K keys are kept)
  u64 mine = ~0ull;
#pragma unroll
  for (int x = 0; x < PER; ++x)
    if (v[x] != 0 && (v[x] & mask) >= prefix) {
      buf[atomicAdd(&st->kept, 1)] = v[x];
      mine = v[x] < mine ? v[x] : mine;
    }
  if (mine != ~0ull)
    atomicMin(&st->minKept, mine);
  __syncthreads();
}

/// Cuts every row buffer that could overflow on the next tile (more than
/// CAP - 64 held) to its K best, unsorted, raising the row's tau to its
/// K-th key (K = 0: nothing enters any more). All threads of the CTA;
/// `flag`: one word of shared memory; `hist`: 256 words the scores'
/// reduction does not use meanwhile.
template <int CAP, int R>
__device__ __forceinline__ void idxmCutFullBuffers(u64 *buf, u64 *tau, int *cnt, int *flag,
                                                   u32 *hist, IdxmCutState *st, i64 K, int tid) {
  if (tid == 0)
    *flag = 0;
  __syncthreads();
  if (tid < R && cnt[tid] > CAP - H20_IDXM_TILE)
    atomicOr(flag, 1);
  __syncthreads();
  if (!*flag)
    return;
  for (int r = 0; r < R; ++r) {
    if (cnt[r] <= CAP - H20_IDXM_TILE)
      continue;
    if (K == 0) {
      for (int e = tid; e < CAP; e += H20_IDXM_THREADS)
        buf[r * CAP + e] = 0;
      __syncthreads();
      if (tid == 0) {
        cnt[r] = 0;
        tau[r] = ~0ull; // nothing enters
      }
      __syncthreads();
      continue;
    }
    idxmCut<CAP>(buf + r * CAP, cnt[r], static_cast<int>(K), hist, st, tid);
    if (tid == 0) {
      cnt[r] = static_cast<int>(K);
      tau[r] = st->minKept;
    }
    __syncthreads();
  }
}

/// Writes the K best of each row buffer (rows i0 + r < S), largest first,
/// to out[i, 0..K) (strides s0, s1); slots past a row's count hold `none`.
/// A row holding more than K is cut to K first; then its first P entries
/// (P the power of two >= K, at most CAP; those past the count are zero,
/// below every key) are sorted. All threads of the CTA.
template <int CAP, int R>
__device__ __forceinline__ void idxmWriteBest(i64 *out, i64 s0, i64 s1, u64 *buf, const int *cnt,
                                              u32 *hist, IdxmCutState *st, i64 i0, i64 S, i64 K,
                                              i64 none, int tid) {
  int P = 1;
  while (P < K)
    P <<= 1;
  for (int r = 0; r < R; ++r) {
    const i64 i = i0 + r;
    if (i >= S)
      break;
    u64 *row = buf + r * CAP;
    if (K > 0 && cnt[r] > K)
      idxmCut<CAP>(row, cnt[r], static_cast<int>(K), hist, st, tid);
    const int n = cnt[r] < K ? cnt[r] : static_cast<int>(K);
    if (K > 0)
      idxmSortDescending(row, P);
    for (i64 j = tid; j < K; j += H20_IDXM_THREADS)
      out[i * s0 + j * s1] = j < n ? static_cast<i64>(idxmIndex(row[j])) : none;
    __syncthreads();
  }
}

#endif // H20_IDXM_CUH_COMMON

#if defined(H20_IDXM_NAME)

/// q [S, Hi, Di], keys [T, Di], weights [S, Hi], out [S, K] i64 (K <=
/// CAP - 64); cand and scratch as in indexer.cuh, unread. Grid: at least
/// ceil(S / R) CTAs (extra ones return), 128 threads, dynamic shared memory
/// indexerMmaSmemBytes (IndexerKernel.h). ratio: tokens per entry; block:
/// entries per candidate block (mode 2: a power of two <= 32; mode 0:
/// unused); scale: the score scale; start: the prompt position of query
/// row 0 (a later prefill chunk; 0 for a whole prompt).
extern "C" __global__ void __launch_bounds__(H20_IDXM_THREADS, H20_IDXM_MINB)
H20_IDXM_NAME(H20_MR3(const u16, q), H20_MR2(const u16, k), H20_MR2(const void, w),
              H20_MR2(const i64, cand), H20_MR2(i64, out), H20_MR2(float, scratch), i64 ratio,
              i64 block, float scale, i64 start) {
  typedef H20Elem<H20_IDXM_DT> E;
  typedef H20Elem<H20_IDXM_W> WE;
  constexpr int HP = H20_IDXM_HP, DP = H20_IDXM_DP, CAP = H20_IDXM_CAP;
  constexpr int R = 64 / HP, CHUNKS = DP / 8, KSTEPS = DP / 16;
  static_assert(HP == 16 || HP == 32 || HP == 64, "HP: 16, 32 or 64");
  static_assert(DP % 64 == 0 && DP <= 256, "DP: a multiple of 64, at most 256");
  static_assert(CAP % 64 == 0 && CAP >= 128, "CAP: a multiple of 64, at least 128");
  extern __shared__ __align__(128) unsigned char smem[];
  // The query block is only read once, into registers: the candidate
  // buffers take its place afterwards (more CTAs fit an SM).
  constexpr int QWORDS = 64 * DP * 2 / 8, UNION = QWORDS > R * CAP ? QWORDS : R * CAP;
  unsigned char *ks = smem;                                      // 2 x [64][DP]
  unsigned char *qs = ks + 2 * H20_IDXM_TILE * DP * 2;           // [64][DP], then:
  u64 *buf = reinterpret_cast<u64 *>(qs);                        // [R][CAP]
  u64 *tau = buf + UNION;                                        // [R]
  IdxmCutState *st = reinterpret_cast<IdxmCutState *>(tau + R); // a cut's state
  float *ws = reinterpret_cast<float *>(st + 1);     // [64]: weight x scale per M row
  float *red = ws + 64;                              // [4][64]: per-warp head sums
  // A cut's histogram reuses red: the scores of a tile are summed before it.
  u32 *hist = reinterpret_cast<u32 *>(red);          // [256]
  int *cnt = reinterpret_cast<int *>(red + 4 * 64);  // [R]
  int *flag = cnt + R;                               // [1]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, quad = lane & 3;
  const i64 S = q_d0, Hi = q_d1, Di = q_d2, T = k_d0, K = out_d1;
#if H20_IDXM_MODE == 1 && H20_IDXM_GATHER
  // After the counts, 16-byte aligned (indexerMmaSmemBytes): the entries
  // of three gathered tiles, their counts and their segments (gatherPlan,
  // gatherExpand, below), then per row a bit per candidate block.
  const i64 NBall = (T + block - 1) / block, blockWords = (NBall + 31) / 32;
  const u64 used = static_cast<u64>(reinterpret_cast<unsigned char *>(flag + 1) - smem);
  int *tcol = reinterpret_cast<int *>(smem + (used + 15) / 16 * 16); // [3][64]
  int *tcnt = tcol + 3 * H20_IDXM_TILE;                                // [4]
  int *segOff = tcnt + 4;                 // [3][64]: a segment's first slot in its tile
  int *segT = segOff + 3 * H20_IDXM_TILE; // [3][64]: its first entry
  int *nseg = segT + 3 * H20_IDXM_TILE;   // [4]: segments per tile
  u32 *blockBits = reinterpret_cast<u32 *>(nseg + 4);                  // [R][blockWords]
#elif H20_IDXM_MODE == 1
  // After the counts, 16-byte aligned (indexerMmaSmemBytes): per row a bit
  // per candidate block, then a bit per key tile holding a visible
  // candidate entry of any of the CTA's rows.
  const i64 NBall = (T + block - 1) / block, blockWords = (NBall + 31) / 32;
  const i64 tileWords = ((T + H20_IDXM_TILE - 1) / H20_IDXM_TILE + 31) / 32;
  const u64 used = static_cast<u64>(reinterpret_cast<unsigned char *>(flag + 1) - smem);
  u32 *blockBits = reinterpret_cast<u32 *>(smem + (used + 15) / 16 * 16); // [R][blockWords]
  u32 *tileBits = blockBits + R * blockWords;                             // [tileWords]
#endif
  const i64 ctas = (S + R - 1) / R;
  if (static_cast<i64>(blockIdx.x) >= ctas)
    return;
  const i64 i0 = (ctas - 1 - blockIdx.x) * R; // the longest rows first
  const u32 qsAddr = h20SmemAddr(qs), ksAddr = h20SmemAddr(ks);
  auto aligned16 = [](const void *p) { return (reinterpret_cast<u64>(p) & 15u) == 0; };
  const bool dVec = Di % 8 == 0;
  const bool qVec = dVec && q_s2 == 1 && q_s1 % 8 == 0 && q_s0 % 8 == 0 && aligned16(q + q_off);
  const bool kVec = dVec && k_s1 == 1 && k_s0 % 8 == 0 && aligned16(k + k_off);

  // Visible entries of row i (position start + i): t < min((start + i + 1)
  // / ratio, T).
  auto visibleOf = [&](i64 i) {
    const i64 v = (start + i + 1) / ratio;
    return v < T ? v : T;
  };
  const i64 lastRow = i0 + R - 1 < S ? i0 + R - 1 : S - 1;
  const i64 visMax = visibleOf(lastRow);

  // ---- the query block, weights, empty buffers ---------------------------
  for (int e = tid; e < 64 * CHUNKS; e += H20_IDXM_THREADS) {
    const int m = e / CHUNKS, c = e % CHUNKS;
    const i64 i = i0 + m / HP, h = m % HP;
    const bool ok = i < S && h < Hi;
    if (qVec) {
      const bool in = ok && c * 8 < Di;
      h20CpAsync16(qsAddr + h20Swizzle(m, c * 8, DP), in ? q + q_off + i * q_s0 + h * q_s1 + c * 8 : q + q_off,
                    in ? 16 : 0);
    } else {
      for (int d = c * 8; d < c * 8 + 8; ++d)
        *reinterpret_cast<u16 *>(qs + h20Swizzle(m, d, DP)) =
            ok && d < Di ? q[q_off + i * q_s0 + h * q_s1 + d * q_s2] : u16(0);
    }
  }
  h20CpAsyncCommit();
  for (int m = tid; m < 64; m += H20_IDXM_THREADS) {
    const i64 i = i0 + m / HP, h = m % HP;
    ws[m] = i < S && h < Hi
                ? WE::load(static_cast<const unsigned char *>(w) + (w_off + i * w_s0 + h * w_s1) * WE::bytes) * scale
                : 0.0f;
  }
  if (tid < R) {
    tau[tid] = 0;
    cnt[tid] = 0;
  }

  auto loadTile = [&](i64 tile, int stage) {
    const u32 dst = ksAddr + stage * H20_IDXM_TILE * DP * 2;
    unsigned char *dstp = ks + stage * H20_IDXM_TILE * DP * 2;
    for (int e = tid; e < H20_IDXM_TILE * CHUNKS; e += H20_IDXM_THREADS) {
      const int r = e / CHUNKS, c = e % CHUNKS;
#if H20_IDXM_MODE == 1 && H20_IDXM_GATHER
      const i64 t = tcol[(tile % 3) * H20_IDXM_TILE + r]; // -1: none (then t < T fails below)
      const bool row = t >= 0;
#else
      const i64 t = tile * H20_IDXM_TILE + r;
      const bool row = true;
#endif
      if (kVec) {
        const bool in = row && t < T && c * 8 < Di;
        h20CpAsync16(dst + h20Swizzle(r, c * 8, DP), in ? k + k_off + t * k_s0 + c * 8 : k + k_off, in ? 16 : 0);
      } else {
        for (int d = c * 8; d < c * 8 + 8; ++d)
          *reinterpret_cast<u16 *>(dstp + h20Swizzle(r, d, DP)) =
              row && t < T && d < Di ? k[k_off + t * k_s0 + d * k_s1] : u16(0);
      }
    }
  };

  // The key tiles to stream, in order: cur (being scored) and nxt (being
  // loaded); kNoTile past the last.
  constexpr i64 kNoTile = -1;
  const i64 tiles = (visMax + H20_IDXM_TILE - 1) / H20_IDXM_TILE;
  i64 cur = tiles > 0 ? 0 : kNoTile, nxt = tiles > 1 ? 1 : kNoTile;
#if H20_IDXM_MODE == 1
  // The rows' candidate blocks as bits (out-of-range indices ignored,
  // repeats count once) and, streaming marked tiles, the tiles their
  // visible entries touch.
#if H20_IDXM_GATHER
  constexpr i64 tileWords = 0;
#endif
  for (i64 e = tid; e < R * blockWords + tileWords; e += H20_IDXM_THREADS)
    blockBits[e] = 0;
  __syncthreads();
  const i64 KB = cand_d1;
  for (i64 e = tid; e < R * KB; e += H20_IDXM_THREADS) {
    const int r = static_cast<int>(e / KB);
    const i64 i = i0 + r, b = i < S ? cand[cand_off + i * cand_s0 + (e % KB) * cand_s1] : -1;
    const i64 vis = i < S ? visibleOf(i) : 0;
    if (b < 0 || b >= NBall || b * block >= vis)
      continue;
    atomicOr(&blockBits[r * blockWords + b / 32], 1u << (b % 32));
#if !H20_IDXM_GATHER
    const i64 last = ((b + 1) * block < vis ? (b + 1) * block : vis) - 1;
    for (i64 x = b * block / H20_IDXM_TILE; x <= last / H20_IDXM_TILE; ++x)
      atomicOr(&tileBits[x / 32], 1u << (x % 32));
#endif
  }
  __syncthreads();
#if H20_IDXM_GATHER
  // Gathered tiles: the visible entries of the blocks any of the CTA's
  // rows picked, in increasing order, 64 to a tile (ordinal j in slot
  // j % 3 of tcol, -1 past the last; its count in tcnt). Thread 0 plans a
  // tile as segments of consecutive entries (a block, or what of it fits:
  // for blocks of 8 about 9 per tile), keeping the cursor: the block being
  // emitted (-1: none), its next entry, and the block to search from; 64
  // threads then expand the segments into the tile's entries.
  i64 gBlock = -1, gNext = 0, gFrom = 0;
  auto nextUnionBlock = [&](i64 from) -> i64 {
    i64 wi = from / 32;
    if (wi >= blockWords)
      return -1;
    auto unionWord = [&](i64 w) {
      u32 u = 0;
#pragma unroll
      for (int r = 0; r < R; ++r)
        u |= blockBits[r * blockWords + w];
      return u;
    };
    u32 word = unionWord(wi) & (~0u << (from % 32));
    while (word == 0 && ++wi < blockWords)
      word = unionWord(wi);
    return word ? wi * 32 + __ffs(static_cast<int>(word)) - 1 : -1;
  };
  // Thread 0. A block with a set bit starts below visMax (bits are set for
  // visible blocks only), so every segment takes at least one entry.
  auto gatherPlan = [&](int slot) {
    int n = 0, k = 0;
    while (n < H20_IDXM_TILE) {
      if (gBlock < 0) {
        gBlock = nextUnionBlock(gFrom);
        if (gBlock < 0)
          break;
        gNext = gBlock * block;
      }
      const i64 end = (gBlock + 1) * block < visMax ? (gBlock + 1) * block : visMax;
      const i64 take = end - gNext < H20_IDXM_TILE - n ? end - gNext : H20_IDXM_TILE - n;
      segOff[slot * H20_IDXM_TILE + k] = n;
      segT[slot * H20_IDXM_TILE + k] = static_cast<int>(gNext);
      ++k;
      n += static_cast<int>(take);
      gNext += take;
      if (gNext >= end) {
        gFrom = gBlock + 1;
        gBlock = -1;
      }
    }
    nseg[slot] = k;
    tcnt[slot] = n;
  };
  // Threads 0..63, after a barrier that follows the plan of `slot`.
  auto gatherExpand = [&](int slot) {
    if (tid < H20_IDXM_TILE) {
      int t = -1;
      if (tid < tcnt[slot]) {
        // The last segment starting at or before tid (segOff rises from 0).
        const int *off = segOff + slot * H20_IDXM_TILE;
        int lo = 0, hi = nseg[slot] - 1;
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (off[mid] <= tid)
            lo = mid;
          else
            hi = mid - 1;
        }
        t = segT[slot * H20_IDXM_TILE + lo] + tid - off[lo];
      }
      tcol[slot * H20_IDXM_TILE + tid] = t;
    }
  };
  if (tid == 0) {
    gatherPlan(0);
    if (tcnt[0] > 0) {
      gatherPlan(1);
    } else {
      tcnt[1] = 0;
      nseg[1] = 0;
    }
  }
  __syncthreads();
  gatherExpand(0);
  gatherExpand(1);
  __syncthreads();
  cur = tcnt[0] > 0 ? 0 : kNoTile;
  nxt = tcnt[1] > 0 ? 1 : kNoTile;
#else
  // The first marked tile >= from (every thread, the same answer).
  auto nextTile = [&](i64 from) -> i64 {
    i64 wi = from / 32;
    if (wi >= tileWords)
      return kNoTile;
    u32 word = tileBits[wi] & (~0u << (from % 32));
    while (word == 0 && ++wi < tileWords)
      word = tileBits[wi];
    return word ? wi * 32 + __ffs(static_cast<int>(word)) - 1 : kNoTile;
  };
  cur = nextTile(0);
  nxt = cur != kNoTile ? nextTile(cur + 1) : kNoTile;
#endif // H20_IDXM_GATHER
#endif
  if (cur != kNoTile)
    loadTile(cur, 0);
  h20CpAsyncCommit();
  h20CpAsyncWait<0>();
  __syncthreads();
  // Q's fragments for this warp's 16 M rows, all K steps.
  u32 qa[KSTEPS][4];
#pragma unroll
  for (int s = 0; s < KSTEPS; ++s)
    h20LdmatrixX4(qsAddr + h20Swizzle(warp * 16 + (lane & 15), s * 16 + (lane >> 4) * 8, DP),
                   qa[s][0], qa[s][1], qa[s][2], qa[s][3]);
  const float w0 = ws[warp * 16 + g], w1 = ws[warp * 16 + g + 8];
  __syncthreads(); // every warp holds its Q fragments: the buffers replace the query block
  for (int e = tid; e < R * CAP; e += H20_IDXM_THREADS)
    buf[e] = 0;
  __syncthreads(); // zeroed before any row's sort reads it (no tiles: no loop barrier)

  for (int stage = 0; cur != kNoTile; stage ^= 1) {
    const i64 tile = cur;
    if (nxt != kNoTile) {
      loadTile(nxt, stage ^ 1);
      h20CpAsyncCommit();
    }
#if H20_IDXM_MODE == 1 && H20_IDXM_GATHER
    // The tile after next, into the slot of the tile scored last time:
    // its segments planned here while the loads are in flight, its entries
    // expanded after the barrier below (that slot's entries were last read
    // by the previous iteration's scoring, which that barrier follows).
    if (tid == 0) {
      if (nxt != kNoTile) {
        gatherPlan(static_cast<int>((tile + 2) % 3));
      } else {
        tcnt[(tile + 2) % 3] = 0;
        nseg[(tile + 2) % 3] = 0;
      }
    }
#endif
    if (nxt != kNoTile)
      h20CpAsyncWait<1>();
    else
      h20CpAsyncWait<0>();
    __syncthreads();
#if H20_IDXM_MODE == 1 && H20_IDXM_GATHER
    // Read by the next iteration's loadTile, after the barrier that follows
    // the head sums below; this iteration reads the other two slots.
    gatherExpand(static_cast<int>((tile + 2) % 3));
#endif
    const u32 kt = ksAddr + stage * H20_IDXM_TILE * DP * 2;
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s)
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        u32 b0, b1, b2, b3;
        h20LdmatrixX4(kt + h20Swizzle(np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                        s * 16 + ((lane >> 3) & 1) * 8, DP),
                       b0, b1, b2, b3);
        E::mma(acc[np * 2], qa[s], b0, b1);
        E::mma(acc[np * 2 + 1], qa[s], b2, b3);
      }
    // ReLU x weight x scale, summed over the warp's 16 rows (heads).
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = fmaxf(acc[j][e], 0.0f) * w0 + fmaxf(acc[j][e + 2], 0.0f) * w1;
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        if (g == 0)
          red[warp * 64 + j * 8 + quad * 2 + e] = v;
      }
    __syncthreads();
    // Row r's scores: the sum over its HP / 16 warps; candidates enter.
    for (int e = tid; e < R * 64; e += H20_IDXM_THREADS) {
      const int r = e / 64, c = e % 64;
#if H20_IDXM_MODE == 1 && H20_IDXM_GATHER
      const i64 t = tcol[(tile % 3) * H20_IDXM_TILE + c]; // -1 past the gathered entries
#else
      const i64 t = tile * H20_IDXM_TILE + c;
#endif
      const i64 i = i0 + r;
      float s = 0.0f;
#pragma unroll
      for (int x = 0; x < HP / 16; ++x)
        s += red[(r * (HP / 16) + x) * 64 + c];
      const i64 vis = i < S ? visibleOf(i) : 0;
#if H20_IDXM_MODE == 2
      // Block b = t / block spans lanes [c - c % block, +block) of this
      // warp (block divides 32): its best visible entry, to the first lane.
      float best = t < vis ? s : -__int_as_float(0x7f800000);
      for (int off = static_cast<int>(block) >> 1; off > 0; off >>= 1)
        best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, off));
      const i64 b = t / block;
      if (c % block == 0 && t < vis) {
        const bool newest = b == (vis - 1) / block;
        const u64 key = idxmKey(newest ? __int_as_float(0x7f800000) : best, static_cast<u32>(b));
        if (key > tau[r])
          buf[r * CAP + atomicAdd(&cnt[r], 1)] = key;
      }
#else
#if H20_IDXM_MODE == 1
      // A visible entry of one of the row's own candidate blocks.
      const bool enters = t >= 0 && t < vis &&
                          ((blockBits[r * blockWords + t / block / 32] >> (t / block % 32)) & 1u);
#else
      const bool enters = t < vis;
#endif
      if (enters) {
        const u64 key = idxmKey(s, static_cast<u32>(t));
        if (key > tau[r])
          buf[r * CAP + atomicAdd(&cnt[r], 1)] = key;
      }
#endif
    }
    // A buffer that could overflow on the next tile is cut to its K best.
    idxmCutFullBuffers<CAP, R>(buf, tau, cnt, flag, hist, st, K, tid);
    cur = nxt;
#if H20_IDXM_MODE == 1 && H20_IDXM_GATHER
    nxt = cur != kNoTile && tcnt[(cur + 1) % 3] > 0 ? cur + 1 : kNoTile;
#elif H20_IDXM_MODE == 1
    nxt = cur != kNoTile ? nextTile(cur + 1) : kNoTile;
#else
    nxt = cur != kNoTile && cur + 1 < tiles ? cur + 1 : kNoTile;
#endif
  }

  // ---- the K best of every row, largest first -----------------------------
#if H20_IDXM_MODE == 2
  const i64 none = (T + block - 1) / block;
#else
  const i64 none = T;
#endif
  idxmWriteBest<CAP, R>(out + out_off, out_s0, out_s1, buf, cnt, hist, st, i0, S, K, none,
                        tid);
}

#endif // H20_IDXM_NAME
