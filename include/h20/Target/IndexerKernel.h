//===- IndexerKernel.h - the GPU lightning-indexer kernel's variants -*- C++ -*-===//
//
// Instantiations of lib/Target/GPU/kernels/indexer.cuh (DeepSeek-V4.1's
// attn.indexer_topk / attn.indexer_candidates on the GPU), their launch
// geometry, and their compilation to PTX by NVRTC. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_INDEXERKERNEL_H
#define H20_TARGET_INDEXERKERNEL_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20 {

/// Threads per CTA of the indexer kernel (H20_IDX_THREADS).
inline constexpr int kIndexerThreads = 256;
/// Largest K (top-k entries or candidate blocks) it selects (H20_IDX_MAX_K).
inline constexpr int64_t kIndexerMaxK = 2048;

/// Threads per CTA of the tensor-core indexer (H20_IDXM_THREADS).
inline constexpr int kIndexerMmaThreads = 128;
/// Shared memory of one CTA of it, at most (sm_90: 227 KiB), of one SM
/// (228 KiB) and what the driver reserves per CTA (1 KiB): the CUDA C
/// Programming Guide's compute capability 9.0 limits.
inline constexpr int64_t kIndexerMmaMaxSmem = 227 * 1024;
inline constexpr int64_t kIndexerMmaSmemPerSm = 228 * 1024;
inline constexpr int64_t kIndexerMmaSmemReservedPerCta = 1024;
/// CTAs per SM the tensor-core indexer is compiled for, at most: 4 CTAs of
/// 128 threads leave 128 registers a thread (65536 per SM).
inline constexpr int kIndexerMmaMaxCtasPerSm = 4;

/// (An FP8 variant would need wgmma: mma.sync with e4m3 operands is not
/// native on sm_90, where ptxas converts them to f16 first; CUTLASS issue
/// 1986.)
///
/// One instantiation: element types (0 f32, 1 f16, 2 bf16) of query, keys
/// and weights, and the mode (0 top-k, 1 top-k within candidate blocks,
/// 2 candidate blocks). With `mma`, the tensor-core streaming top-k of
/// kernels/indexer_mma.cuh (16-bit query = keys) for heads padded to
/// `paddedHeads` (16/32/64), head dim padded to `paddedDim` (64..256) and
/// a candidate buffer of `cap` entries per query row, compiled for
/// `ctasPerSm` resident CTAs per SM (__launch_bounds__' minimum blocks);
/// in mode 1 `gather`: gathered tiles of the picked entries rather than
/// every key tile a picked block touches (H20_IDXM_GATHER).
struct IndexerKernel {
  int queryType = 0, keyType = 0, weightType = 0;
  int mode = 0;
  bool mma = false;
  int paddedHeads = 0, paddedDim = 0, cap = 0, ctasPerSm = 1;
  bool gather = false;
  /// e.g. "h20_indexer_m0_bf16_bf16_bf16", "h20_indexer_mma_m0_bf16_bf16_h32_d128_c1024_o4",
  /// "h20_indexer_mma_m1_bf16_bf16_h32_d128_c1024_o3_g" (gathered).
  std::string name() const;
  /// Query rows per CTA of the mma kernel (64 / paddedHeads).
  int rowsPerCta() const { return paddedHeads > 0 ? 64 / paddedHeads : 1; }
  bool operator==(const IndexerKernel &o) const {
    return queryType == o.queryType && keyType == o.keyType && weightType == o.weightType &&
           mode == o.mode && mma == o.mma && paddedHeads == o.paddedHeads &&
           paddedDim == o.paddedDim && cap == o.cap && ctasPerSm == o.ctasPerSm &&
           gather == o.gather;
  }
};

/// The tensor-core variant for an indexer op, when it applies: mode 0;
/// mode 1 (top-k within candidate blocks of `block` >= 1 entries, over
/// `entries` = T >= 0 keys, which sizes its shared memory); or mode 2 with
/// `block` (entries per candidate block) a power of two <= 32; f16/bf16
/// query and keys of one type, heads <= 64, head dim <= 256, K (entries or
/// blocks) <= kIndexerMaxK and its shared memory within 227 KiB. False
/// otherwise (the op then runs on indexer.cuh's kernel). The candidate
/// buffer (`cap`, a multiple of 64 >= K + 64 and >= the power of two >= K,
/// at most ~2K) is the largest that keeps the most CTAs on an sm_90 SM
/// (`ctasPerSm`, at most kIndexerMmaMaxCtasPerSm) of a GPU with
/// `smemPerCta` bytes of shared memory per CTA at most and `smemPerSm` per
/// SM (sm_90's by default; TargetDescription's for a target): the kernel
/// is latency-bound, so residency first, fewer cuts second.
/// Mode 1 gathers the picked entries (`gather`) when `gather` is 1, or
/// when it is -1 and the entries the CTA's rows picked at most (rows per
/// CTA x `candidateBlocks` x `block`) are at most half of `entries`: the
/// gathered tiles cost more per entry (their list is built serially and
/// the key rows are loaded one by one), so they win only where the marked
/// tiles would stream much more. Measured on an H100 with 2048 blocks of
/// 8 (16K entries a row, 2 rows a CTA): 1.20x faster than the marked
/// tiles at 128K entries and 2.1x at 512K, 1.7x slower at 32K. One
/// variant serves a whole program: a chunked prefill's `entries` are the
/// last chunk's, so its early chunks (fewer entries) gather too.
bool chooseIndexerMma(int mode, int queryType, int keyType, int weightType, int64_t heads,
                      int64_t dim, int64_t k, IndexerKernel &kernel, int64_t block = 1,
                      int64_t entries = -1, int64_t smemPerCta = kIndexerMmaMaxSmem,
                      int64_t smemPerSm = kIndexerMmaSmemPerSm, int64_t candidateBlocks = 0,
                      int gather = -1);

/// Dynamic shared memory of one CTA of the mma kernel, in bytes: two key
/// tiles (64 rows of paddedDim 16-bit elements each), the larger of the
/// query block (the same size as a tile) and the candidate buffers (rows x
/// cap x 8; they replace the query block once its fragments are in
/// registers), the small per-row state and, in mode 1, a bit per
/// candidate block and row (ceil(entries / block) blocks) and either a bit
/// per key tile of 64 entries or, gathering, the entry indices of three
/// gathered key tiles and their counts (3 x 64 + 4 words), in 32-bit words.
int64_t indexerMmaSmemBytes(const IndexerKernel &kernel, int64_t entries = 0, int64_t block = 1);

/// Dynamic shared memory of one CTA, in bytes: q[i] and weights[i] as
/// float32 (heads * dim + heads, rounded up to 8 bytes), then mode 1's
/// `blocks` candidate-block indices (int64).
int64_t indexerSmemBytes(int mode, int64_t heads, int64_t dim, int64_t blocks);

/// The CUDA source NVRTC compiles for `kernels` (indexer.cuh included once
/// per instantiation).
std::string indexerProgramSource(const std::vector<IndexerKernel> &kernels);

/// Compiles `kernels` to PTX for `arch` ("sm_90"); false with the NVRTC log
/// (or why NVRTC is unavailable) in `log`.
bool compileIndexerPtx(const std::vector<IndexerKernel> &kernels, const std::string &arch,
                       std::string &ptx, std::string &log);

} // namespace h20

#endif // H20_TARGET_INDEXERKERNEL_H
