//===- CpuTarget.h - compile attn-level IR to a host artifact ---*- C++ -*-===//
#ifndef H20_TARGET_CPUTARGET_H
#define H20_TARGET_CPUTARGET_H

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Target/TargetCommon.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace h20 {

struct CpuTargetOptions {
  /// Compute the LM head for the last position only (h20-logits-last).
  bool logitsLast = false;
  /// Longest accepted prompt; recorded in the manifest, enforced by h20-run.
  std::optional<int64_t> maxPositions;
  /// Tokens per prefill chunk (h20-opt --target=cpu --chunk); 0: the whole
  /// prompt in one call. With C > 0 `module` must be at the planned level
  /// (KV caches and RoPE tables for maxPositions rounded up to whole chunks,
  /// which must be set): h20-chunked-prefill makes the entry one chunk, the
  /// caches of every row read across chunks become arguments the runtime
  /// keeps (manifest "cpu_chunked", runtime::CpuChunking), and a graph that
  /// cannot run in chunks of C is refused, naming the op.
  int64_t chunk = 0;
  /// LLVM optimisation level, 0..3 (h20-opt --cpu-opt-level). 3 makes the
  /// fastest code; 0 compiles faster (DeepSeek-V4.1 tiny: 25 s instead of
  /// 41 s on 2 cores, the code ~3x slower, the logits bitwise the same: no
  /// fast-math at any level).
  int optLevel = 3;
  /// Stop once the module is LLVM IR (in memory): no machine code, no link,
  /// `artifact` left unfilled. For the pipeline fuzz target (test/Fuzz),
  /// which checks everything h20 itself lowers, thousands of times a minute.
  bool stopAtLLVMIR = false;
  /// When set: the LLVM IR module h20 hands to LLVM (after translation from
  /// the LLVM dialect, before LLVM's -O<optLevel> pipeline) is printed into
  /// it and compilation stops there, `artifact` left unfilled (h20-opt
  /// --emit=llvm; `opt-22 -O3 -time-passes` on it shows where LLVM's time
  /// goes).
  std::string *llvmIR = nullptr;
  /// Told after each stage: "CPU pipeline" (MLIR down to the LLVM dialect),
  /// "LLVM -O<level>", "machine code", "link".
  StageReport onStage;
};

/// Compiles `module` (attn level: the output of --emit=attn) for the host
/// CPU: h20-lower-to-linalg, one-shot bufferization, LLVM dialect, LLVM -O<optLevel>,
/// a native object, linked by the system C compiler into a shared object
/// that exports `void h20_entry(void **memref_descriptors)`. Fills
/// `artifact` with the manifest (inputs, outputs, weights by initializer
/// name and byte range, entry ABI) and that shared object. The module is
/// consumed (lowered in place). Errors are emitted on the module's context.
mlir::LogicalResult compileForCpu(mlir::ModuleOp module, const CpuTargetOptions &options,
                                  runtime::Artifact &artifact);

} // namespace h20

#endif // H20_TARGET_CPUTARGET_H
