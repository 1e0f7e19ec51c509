//===- GpuTarget.h - compile planned IR into a GPU artifact ------*- C++ -*-===//
#ifndef H20_TARGET_GPUTARGET_H
#define H20_TARGET_GPUTARGET_H

#include "h20/Pipelines/Pipelines.h"
#include "h20/Runtime/Format/Artifact.h"
#include "h20/Target/TargetCommon.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace h20 {

struct GpuTargetOptions {
  /// Target description name (h20, h100, h200, h800): all sm_90.
  std::string target = "h200";
  /// Compute the LM head for the last position only (h20-logits-last).
  bool logitsLast = false;
  /// Longest accepted prompt (tokens); the KV cache and RoPE tables were
  /// planned for it rounded up to a multiple of `chunk`.
  int64_t maxPositions = 0;
  /// Tokens per prefill chunk (decoders with token-id input).
  int64_t chunk = 0;
  /// The user chose `chunk` (h20-opt --chunk): a graph that cannot run
  /// chunks of it is an error, not a whole-prompt chunk.
  bool chunkGiven = false;
  /// Storage type of activations, weights and KV cache: f32, bf16 or f16
  /// (h20-compute-type); accumulation is float32 either way.
  std::string computeType = "bf16";
  /// The attention kernel family: "auto" (wgmma where it has a variant) or
  /// "mma" (h20-choose-attention-kernels' `kernel` option).
  std::string attentionKernel = "auto";
  /// FP8 linears: "fp8" (block-scaled FP8 GEMMs) or "dequantize"
  /// (h20-lower-to-linalg's `fp8-gemm` option).
  std::string fp8Gemm = "fp8";
  /// MXFP4 routed experts' GEMMs: "bf16" or "fp8"
  /// (h20-choose-attention-kernels' `expert-gemm` option).
  std::string expertGemm = "bf16";
  /// Gather-only tables of at least this many device bytes live in pinned
  /// host memory (h20-place-tables' `min-bytes`; < 0: none, 0: all).
  int64_t hostTableMinBytes = kHostTableMinBytes;
  // The multi-GPU plan is the module's `h20.parallel` attribute
  // (h20-choose-parallel-plan), written to the manifest's "parallel"
  // object; with plan "tensor" the module must already be split
  // (h20-tensor-parallel with ranks = gpus).
  /// Stop after this stage of the GPU pipeline and leave the module as it
  /// made it (h20-opt --emit=...; the stages are gpuStages() in
  /// h20/Pipelines/Pipelines.h). Empty: the whole artifact.
  std::string stopAfter;
  /// Told after each stage: "GPU pipeline" (chunking, linalg, bufferization,
  /// generated kernels to PTX), "host program" (the step program, arena
  /// plan), "kernels" (NVRTC and ptxas for every module).
  StageReport onStage;
};

/// Compiles `module` (planned level: fused KV cache, RoPE tables, tiles;
/// one function) for an sm_90 GPU: the interface passes (h20-logits-last,
/// h20-input-value-ranges) and the manifest's interface, then the GPU
/// pipeline (buildGpuPipeline: a decoder taking token ids [1, S] becomes one
/// chunk of `chunk` tokens, graphs with static inputs run whole; linalg with
/// library calls, bufferization, memory-bound ops as MLIR-generated kernels
/// through NVVM to PTX), then the host function is evaluated into the
/// runtime's step program (GEMMs as cuBLASLt calls, attention and the V4.1
/// ops as NVRTC-compiled kernels; include/h20/Runtime/Format/GpuProgram.h),
/// written with writeGpuProgram and parsed back. PTX is assembled with
/// ptxas for sm_90 when ptxas is present (cubin kept beside the PTX; its
/// register and spill report goes to `log`). Errors are emitted on the
/// module's context; `artifact` is only meaningful on success.
mlir::LogicalResult compileForGpu(mlir::ModuleOp module, const GpuTargetOptions &options,
                                  runtime::Artifact &artifact, std::string &log);

} // namespace h20

#endif // H20_TARGET_GPUTARGET_H
