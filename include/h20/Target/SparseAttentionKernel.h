//===- SparseAttentionKernel.h - the GPU sparse-attention kernel's variants -*- C++ -*-===//
//
// Instantiations of lib/Target/GPU/kernels/sparse_attention.cuh (DeepSeek-V4.1's
// attn.sparse_attention on tensor cores), their shared memory, and their
// compilation to PTX by NVRTC. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_SPARSEATTENTIONKERNEL_H
#define H20_TARGET_SPARSEATTENTIONKERNEL_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20 {

/// Threads per CTA (H20_SA_THREADS) and query heads per CTA (H20_SA_ROWS):
/// the grid is (S, ceil(H / kSparseAttentionHeadsPerCta)).
inline constexpr int kSparseAttentionThreads = 256;
inline constexpr int64_t kSparseAttentionHeadsPerCta = 64;
/// Largest head dim (the latent's width) the kernel takes.
inline constexpr int64_t kSparseAttentionMaxHeadDim = 512;
/// Shared memory one CTA may use on sm_90 (227 KiB).
inline constexpr int64_t kSparseAttentionSmemLimit = 227 * 1024;

/// One instantiation: element type of query, latent, compressed rows and
/// output (1 f16, 2 bf16), the sink's (0 f32, 1 f16, 2 bf16), the head dim
/// padded to a multiple of 64 (64..512), and whether compressed entries
/// are attended (false: the window only).
struct SparseAttentionKernel {
  int dtype = 2, sinkType = 2;
  int paddedDim = 512;
  bool compressed = true;
  /// e.g. "h20_sparse_attn_bf16_sbf16_d512_c".
  std::string name() const;
  bool operator==(const SparseAttentionKernel &o) const {
    return dtype == o.dtype && sinkType == o.sinkType && paddedDim == o.paddedDim &&
           compressed == o.compressed;
  }
};

/// The head dim `d` rounded up to a multiple of 64 (the kernel's DP).
int64_t sparseAttentionPaddedDim(int64_t d);

/// Dynamic shared memory of one CTA in bytes: the query block and two key
/// tiles (64 rows of `paddedDim` 16-bit elements each), P (64 x 64), the
/// softmax exchange, and the compacted slot list of `slots` = window + K
/// 32-bit entries.
int64_t sparseAttentionSmemBytes(int64_t paddedDim, int64_t slots);

/// The CUDA source NVRTC compiles for `kernels` (the header included once
/// per distinct instantiation).
std::string sparseAttentionProgramSource(const std::vector<SparseAttentionKernel> &kernels);

/// Compiles `kernels` to PTX for `arch` ("sm_90"); false with the NVRTC log
/// (or why the variant is unsupported or NVRTC unavailable) in `log`.
bool compileSparseAttentionPtx(const std::vector<SparseAttentionKernel> &kernels,
                               const std::string &arch, std::string &ptx, std::string &log);

} // namespace h20

#endif // H20_TARGET_SPARSEATTENTIONKERNEL_H
