//===- Pipelines.h - h20's named compilation pipelines ----------*- C++ -*-===//
#ifndef H20_PIPELINES_PIPELINES_H
#define H20_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace h20 {

/// Fills `pm` with the passes that take imported onnx-dialect IR to `level`:
///   onnx    — nothing (the importer's output);
///   attn    — shape/constant folding, gathers before casts of weights,
///             mask analysis, raising to attn ops;
///   planned — attn, then h20-norm-scale-after-matmul (not for
///             `computeType` "f16"), h20-lower-rope, h20-fuse-kv-caches and
///             h20-select-tiles for `target` (h20, h100, h200, h800, a100,
///             l20, cpu), with `maxSeq` as the cache capacity and the RoPE
///             table length (0: prompt-sized cache, 1M-position tables);
///             `kvElementBytes` sizes the sparse-attention KV plan's
///             elements (0: the IR's element type); with
///             `tensorParallel` T > 1, h20-tensor-parallel splits the heads
///             and MLP columns over T ranks first (before the KV cache is
///             planned, so it holds one rank's KV heads);
///             `quantizeLinears` as buildPlanPipeline's.
/// Fails for an unknown level.
llvm::LogicalResult buildEmitPipeline(mlir::PassManager &pm, llvm::StringRef level,
                                      llvm::StringRef target = "h200",
                                      int64_t maxSeq = 0, int64_t kvElementBytes = 0,
                                      int64_t tensorParallel = 1,
                                      llvm::StringRef computeType = "",
                                      bool quantizeLinears = false);

/// The "planned" passes that follow the attn level (what buildEmitPipeline's
/// "planned" adds after "attn"), for a module already at the attn level.
/// `computeType` is the storage type the GPU target will apply ("f16"
/// leaves unit-gain RMS norms before narrow GEMMs as they are: a mean of
/// squares stored in f16 overflows above an RMS of 256). `quantizeLinears`
/// (h20-opt --quantize-linears=fp8, GPU targets) ends it with
/// h20-quantize-linears.
void buildPlanPipeline(mlir::PassManager &pm, llvm::StringRef target, int64_t maxSeq,
                       int64_t kvElementBytes, int64_t tensorParallel,
                       llvm::StringRef computeType = "", bool quantizeLinears = false);

/// Gather-only tables this large (device bytes) live in pinned host memory
/// by default (h20-place-tables' `min-bytes`, h20-opt --host-tables=auto).
inline constexpr int64_t kHostTableMinBytes = int64_t(4) << 30;

/// What the GPU pipeline is built for (GpuTarget fills it from its options).
struct GpuPipelineOptions {
  /// Tokens per prefill chunk: > 0 runs h20-chunked-prefill (a decoder
  /// taking token ids [1, S]) and records the chunk; 0 for a graph that
  /// runs whole.
  int64_t chunk = 0;
  /// The user chose `chunk`: no whole-prompt fallback (h20-chunked-prefill
  /// fails, saying why, where chunks of it cannot run).
  bool chunkGiven = false;
  /// Longest accepted prompt: the chunk of a whole-prompt graph.
  int64_t maxPositions = 0;
  /// h20-compute-type's storage type: f32 (the pass does not run), bf16, f16.
  std::string computeType = "bf16";
  /// h20-choose-attention-kernels' family: "auto" or "mma".
  std::string attentionKernel = "auto";
  /// h20-lower-to-linalg's FP8 linears: "fp8" or "dequantize".
  std::string fp8Gemm = "fp8";
  /// h20-choose-attention-kernels' MXFP4 expert GEMMs: "bf16" or "fp8".
  std::string expertGemm = "bf16";
  /// h20-place-tables' `min-bytes`: gather-only tables this large live in
  /// pinned host memory (< 0: none).
  int64_t hostTableMinBytes = kHostTableMinBytes;
  /// The last stage to run (one of gpuStages()); empty: every stage.
  std::string stopAfter;
  /// CUDA toolkit directory for libdevice ("" : none found).
  std::string toolkitPath;
  std::string chip = "sm_90";
  /// The GPU the generated kernels' launch shapes are chosen for
  /// (h20-choose-launch-shapes): h20, h100, h200, h800.
  std::string target = "h200";
  std::string entryName = "h20_main";     ///< h20-rename-entry
  std::string kernelModule = "h20_kernels"; ///< h20-outline-kernels
};

/// The GPU pipeline's stages in order, as `h20-opt --emit` names them:
///   chunked — h20-chunked-prefill (chunk recorded), h20-compute-type,
///             h20-place-tables, h20-rename-entry;
///   linalg  — h20-choose-attention-kernels, h20-lower-to-linalg with
///             library calls, h20-concat-in-place, h20-fuse-elementwise,
///             h20-widen-elementwise, h20-unroll-small-reductions,
///             h20-drop-gemm-init-fill;
///   buffers — h20-caches-to-arguments, h20-outputs-to-destinations,
///             empty-tensor elimination, one-shot bufferization,
///             h20-copies-to-linalg, h20-choose-launch-shapes;
///   gpu     — h20-linalg-to-gpu-loops, parallel loops to gpu.launch,
///             h20-sink-launch-constants, h20-outline-kernels;
///   host    — NVVM lowering and PTX (gpu.binary; needs the CUDA toolkit's
///             libdevice for math functions).
llvm::ArrayRef<llvm::StringRef> gpuStages();

/// Fills `pm` with the GPU pipeline up to `o.stopAfter`, for a module at
/// the planned level whose one function is the graph. Fails for an unknown
/// stage.
llvm::LogicalResult buildGpuPipeline(mlir::OpPassManager &pm, const GpuPipelineOptions &o);

} // namespace h20

#endif // H20_PIPELINES_PIPELINES_H
