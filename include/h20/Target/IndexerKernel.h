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

/// One instantiation: element types (0 f32, 1 f16, 2 bf16) of query, keys
/// and weights, and the mode (0 top-k, 1 top-k within candidate blocks,
/// 2 candidate blocks).
struct IndexerKernel {
  int queryType = 0, keyType = 0, weightType = 0;
  int mode = 0;
  /// e.g. "h20_indexer_m0_bf16_bf16_bf16".
  std::string name() const;
  bool operator==(const IndexerKernel &o) const {
    return queryType == o.queryType && keyType == o.keyType && weightType == o.weightType &&
           mode == o.mode;
  }
};

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
