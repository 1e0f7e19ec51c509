//===- AttentionKernel.h - NVRTC instantiation of the attention kernel -*- C++ -*-===//
//
// The GPU target's flash-attention forward kernel is CUDA C++
// (lib/Target/GPU/kernels/attention.cuh, embedded into the binary at build
// time) instantiated per variant — dtype, head dims, tile shape, threads —
// and compiled to PTX by NVRTC. NVRTC is loaded at run time (dlopen of
// libnvrtc.so.13), never linked, so h20-opt starts on machines without CUDA
// and only the GPU target reports its absence.
//
// This file is plain C++ (no LLVM/MLIR types), like the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_ATTENTIONKERNEL_H
#define H20_TARGET_ATTENTIONKERNEL_H

#include "h20/Target/NvrtcCompiler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace h20 {

/// Shared memory a CTA may use on sm_90 (H20/H100/H200): 227 KiB.
constexpr int64_t kSm90MaxSmemPerBlock = 227 * 1024;

/// One instantiation of the attention kernel. Launch geometry: grid
/// (ceil(sq / blockM), heads, batch), block (threads), dynamic shared memory
/// smemBytes() (above 48 KiB the caller raises the kernel's
/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first). The kernel takes
/// one H20AttnParams by value (include/h20/Runtime/Cuda/AttentionParams.h).
///
/// Two kernel families (`kind`):
///   0  the FlashAttention-2-style kernel (mma.sync + cp.async for f16/bf16,
///      FMA for f32); compiles for sm_90 (and any later target).
///   1  the wgmma kernel (FlashAttention-3-style: one producer warpgroup
///      loading Q/K/V by TMA — cp.async where H20AttnParams::tma is 0 —
///      into a ring of `stages` stages, two consumer warpgroups of 64 rows
///      each, S = Q K^T and O += P V by wgmma, setmaxnreg, `schedule`: 0
///      plain, 1 ping-pong between the consumers with S_j and P_{j-1}
///      V_{j-1} issued together, 2 the same without ping-pong); f16/bf16
///      only, D = Dv in {64, 128, 256}, blockM 128, threads 384; needs sm_90a
///      (requiredArch()). Supports every H20AttnParams view (views without
///      unit dim stride or 16-byte aligned rows take a slow element path).
struct AttentionVariant {
  int dtype = 2;       ///< element type of Q, K, V and O: 0 f32, 1 f16, 2 bf16
  int headDim = 128;   ///< D of Q and K: a multiple of 16 in [16, 256]
  int headDimV = 128;  ///< Dv of V and O: a multiple of 16 in [16, 256]
  int blockM = 128;    ///< query rows per CTA
  int blockN = 64;     ///< keys per step
  int threads = 256;   ///< threads per CTA
  int kind = 0;        ///< kernel family: 0 mma.sync (FA2-style), 1 wgmma (sm_90a)
  int stages = 2;      ///< kind 1: K/V shared-memory stages (2 or 3)
  int schedule = 0;    ///< kind 1: 0 plain, 1 ping-pong, 2 pipelined without ping-pong

  /// Entry point name, unique per variant, e.g.
  /// "h20_attention_bf16_d128_dv128_m128_n64_t256" (kind 0) or
  /// "h20_attention_wgmma_bf16_d128_dv128_m128_n128_t384_s2_k1" (kind 1:
  /// stages and schedule last).
  std::string kernelName() const;
  /// Dynamic shared memory of one CTA in bytes (mirrors the layouts
  /// TcLayout / FmaLayout / WgLayout in attention.cuh). Kind 0 f16/bf16: Q/O
  /// tile plus two K and two V buffers of 16-bit elements, rows padded by 8
  /// elements; f32: Q, K (odd pitch), V and P tiles of fp32. Kind 1: Q
  /// [128][D], two K [BN][D] and two V [BN][Dv] stages (16-bit, swizzled,
  /// unpadded) — `stages` of each —, 128 bytes of mbarriers and 1024 bytes
  /// to align the base.
  int64_t smemBytes() const;
  /// Whether the kernel supports this variant. Kind 0: dtype in {0, 1, 2}; D
  /// and Dv multiples of 16 in [16, 256]; threads a multiple of 32 in [32,
  /// 512]; f16/bf16: blockM = 16 or 32 rows per warp, blockN a multiple of 16
  /// in [16, 256]; f32: blockM a multiple of the warps with at most 16 rows
  /// per warp, blockN a multiple of 32 in [32, 256]; register accumulators (O
  /// and S) of at most 192 fp32 per thread. Kind 1: dtype f16/bf16, D = Dv in
  /// {64, 128, 256}, blockM 128, threads 384, blockN in {64, 128, 256}, S, O
  /// and P registers of at most 192 per thread, stages 2 or 3, schedule 0, 1
  /// or 2. Both: smemBytes() <= 227 KiB.
  /// On false, `why` (if given) says which rule failed.
  bool isSupported(std::string *why = nullptr) const;
  /// The least GPU architecture the variant compiles for: "sm_90" (kind 0)
  /// or "sm_90a" (kind 1: wgmma and setmaxnreg).
  std::string requiredArch() const;

  bool operator==(const AttentionVariant &o) const {
    return dtype == o.dtype && headDim == o.headDim && headDimV == o.headDimV &&
           blockM == o.blockM && blockN == o.blockN && threads == o.threads && kind == o.kind &&
           stages == o.stages && schedule == o.schedule;
  }
};

/// Picks a supported variant for element type `dtype` (0 f32, 1 f16,
/// 2 bf16) and head dims D = `headDim`, Dv = `headDimV`. Without hints:
/// f16/bf16 take the variants measured fastest on an H200 (max(D, Dv) <= 64:
/// blockM 128, blockN 64, 32 rows per warp; <= 128: 128 x 128, 16 rows per
/// warp; <= 256: 128 x 64, 16 rows per warp), f32 takes 64 x 64 with 8 rows
/// per warp. `blockMHint` and `blockNHint` are the #h20.tiles block_m /
/// block_n chosen by h20-select-tiles (0: none); they are rounded down to a
/// power of two and clamped to what this kernel supports (f16/bf16: blockM
/// and blockN in [16, 128]; f32: [32, 64]). Then rows per warp, blockN and
/// blockM are reduced until the accumulators fit the registers (at most 160
/// fp32 per thread for f16/bf16, 96 for f32) and the tiles fit 227 KiB of
/// shared memory. Returns nullopt with `error` set when D or Dv is
/// unsupported (not a multiple of 16 in [16, 256]) or dtype is unknown.
///
/// With `family` Auto the wgmma kernel comes first: when
/// chooseWgmmaAttentionVariant has a variant for (dtype, D, Dv), that
/// variant (kind 1) is returned and the tile hints are ignored; compile it
/// with attentionArch() ("sm_90a"). `family` Mma keeps the kind-0 choice
/// above (chooseMmaAttentionVariant) for every shape (h20-opt
/// --attention-kernel=mma, for comparisons). The GPU target calls this once
/// per attention, in h20-choose-attention-kernels, and records the choice.
enum class AttentionKernelFamily { Auto, Mma };
std::optional<AttentionVariant>
chooseAttentionVariant(int dtype, int64_t headDim, int64_t headDimV, int64_t blockMHint = 0,
                       int64_t blockNHint = 0, std::string *error = nullptr,
                       AttentionKernelFamily family = AttentionKernelFamily::Auto);

/// The kind-0 (mma.sync for f16/bf16, FMA for f32) choice described above.
std::optional<AttentionVariant> chooseMmaAttentionVariant(int dtype, int64_t headDim,
                                                          int64_t headDimV, int64_t blockMHint = 0,
                                                          int64_t blockNHint = 0,
                                                          std::string *error = nullptr);

/// The wgmma (kind 1) variant for f16/bf16 (`dtype` 1 or 2) and D = Dv in
/// {64, 128, 256}: blockM 128, threads 384, blockN 128 for D <= 128 and 64
/// for D = 256, 2 stages, schedule 1 (ping-pong). nullopt (with `error` set)
/// for any other dtype or dims.
std::optional<AttentionVariant> chooseWgmmaAttentionVariant(int dtype, int64_t headDim,
                                                            int64_t headDimV,
                                                            std::string *error = nullptr);

/// The architecture to compile `variants` for together: "sm_90a" when one of
/// them needs it (requiredArch), else "sm_90".
std::string attentionArch(const std::vector<AttentionVariant> &variants);

/// The NVRTC translation unit for `variants`: per variant (duplicates
/// dropped), one block of H20_* macros (H20_KIND among them) and
/// `#include "h20_attention.cuh"` (the embedded template, given to NVRTC as a
/// header with the per-body headers it includes: kernels/attention_*.cuh).
std::string attentionProgramSource(const std::vector<AttentionVariant> &variants);

/// Compiles every variant into one PTX module with NVRTC (-arch=compute_XX
/// from `arch`, e.g. "sm_90" or "sm_90a"; -default-device; -std=c++17).
/// Returns true with the module in `ptx`. Returns false with the reason in
/// `log` when a variant is unsupported (isSupported), `arch` is malformed,
/// a kind-1 variant is compiled for another arch than sm_90a,
/// NVRTC cannot be loaded ("the GPU target needs NVRTC (libnvrtc.so.13 from
/// the CUDA toolkit): ..."), or the compilation fails (NVRTC's program log).
/// `log` also receives NVRTC's warnings on success. Thread-safe.
bool compileAttentionPtx(const std::vector<AttentionVariant> &variants, const std::string &arch,
                         std::string &ptx, std::string &log);

} // namespace h20

#endif // H20_TARGET_ATTENTIONKERNEL_H
