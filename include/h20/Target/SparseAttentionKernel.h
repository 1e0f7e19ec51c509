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

/// Threads per CTA of the mma.sync kernel (H20_SA_THREADS) and query heads
/// per CTA of both kernels (H20_SA_ROWS): the grid is (S, ceil(H /
/// kSparseAttentionHeadsPerCta)).
inline constexpr int kSparseAttentionThreads = 256;
/// Threads per CTA of the wgmma kernel (H20_SAW_THREADS: a producer and two
/// consumer warpgroups).
inline constexpr int kSparseAttentionWgmmaThreads = 384;
inline constexpr int64_t kSparseAttentionHeadsPerCta = 64;
/// Largest head dim (the latent's width) the kernel takes.
inline constexpr int64_t kSparseAttentionMaxHeadDim = 512;
/// Shared memory one CTA may use on sm_90 (227 KiB).
inline constexpr int64_t kSparseAttentionSmemLimit = 227 * 1024;

/// One instantiation: element type of query, latent, compressed rows and
/// output (1 f16, 2 bf16), the sink's (0 f32, 1 f16, 2 bf16), the head dim
/// padded to a multiple of 64 (64..512), whether compressed entries are
/// attended (false: the window only), and the kernel family: kind 0
/// mma.sync (sparse_attention.cuh, sm_90), kind 1 wgmma
/// (sparse_attention_wgmma.cuh, sm_90a, paddedDim 128, 256 or 512).
struct SparseAttentionKernel {
  int dtype = 2, sinkType = 2;
  int paddedDim = 512;
  bool compressed = true;
  int kind = 0;
  /// e.g. "h20_sparse_attn_bf16_sbf16_d512_c" (kind 1: "..._c_wg").
  std::string name() const;
  /// Threads per CTA: kSparseAttentionThreads or kSparseAttentionWgmmaThreads.
  int threads() const;
  /// "sm_90" (kind 0) or "sm_90a" (kind 1: wgmma and setmaxnreg).
  std::string requiredArch() const;
  bool operator==(const SparseAttentionKernel &o) const {
    return dtype == o.dtype && sinkType == o.sinkType && paddedDim == o.paddedDim &&
           compressed == o.compressed && kind == o.kind;
  }
};

/// Whether the wgmma kernel (kind 1) takes head dims padded to `paddedDim`
/// (its O columns per consumer, paddedDim / 2, must be a wgmma N).
bool sparseAttentionWgmmaTakes(int64_t paddedDim);

/// The architecture to compile `kernels` for together: "sm_90a" when one of
/// them is a wgmma kernel, else "sm_90".
std::string sparseAttentionArch(const std::vector<SparseAttentionKernel> &kernels);

/// The head dim `d` rounded up to a multiple of 64 (the kernel's DP).
int64_t sparseAttentionPaddedDim(int64_t d);

/// Dynamic shared memory of one CTA in bytes: the query block and two key
/// tiles (64 rows of `paddedDim` 16-bit elements each), P (64 x 64; kind 1:
/// two of them), the softmax exchange, and the compacted slot list of
/// `slots` = window + K 32-bit entries; kind 1 adds its mbarriers and 1024
/// bytes to align the base (sparse_attention_wgmma.cuh's SawLayout).
int64_t sparseAttentionSmemBytes(int64_t paddedDim, int64_t slots, int kind = 0);

/// The CUDA source NVRTC compiles for `kernels` (the header included once
/// per distinct instantiation).
std::string sparseAttentionProgramSource(const std::vector<SparseAttentionKernel> &kernels);

/// Compiles `kernels` to PTX for `arch` ("sm_90", or sparseAttentionArch's
/// "sm_90a" when a wgmma kernel is among them); false with the NVRTC log
/// (or why the variant is unsupported or NVRTC unavailable) in `log`.
bool compileSparseAttentionPtx(const std::vector<SparseAttentionKernel> &kernels,
                               const std::string &arch, std::string &ptx, std::string &log);

} // namespace h20

#endif // H20_TARGET_SPARSEATTENTIONKERNEL_H
