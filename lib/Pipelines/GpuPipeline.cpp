//===- GpuPipeline.cpp - planned IR to kernels and host code, one pipeline ===//
//
// Every IR edit the GPU target makes is a registered pass, in this one
// pipeline, in stage order; `h20-opt --emit=<stage>` stops after a stage,
// so lit tests check each one without a GPU toolkit (up to "gpu"). The
// target (GpuTarget.cpp) only reads the result and serialises it.
//
//===----------------------------------------------------------------------===//
#include "h20/Pipelines/Pipelines.h"

#include "h20/Conversion/Passes.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace h20 {
namespace {

/// One prefill chunk (decoders), the compute type, the entry point.
void addChunkedStage(OpPassManager &pm, const GpuPipelineOptions &o) {
  if (o.chunk > 0) {
    ChunkedPrefillOptions c;
    // A chunk the user chose is kept or refused, never replaced by the
    // whole prompt.
    c.wholePromptFallback = !o.chunkGiven;
    c.chunk = o.chunk;
    c.maxPositions = o.maxPositions;
    // A chunk that splits a compressor's groups carries the partial one;
    // the step program names p0 / k and the like as derived symbols.
    c.carryPartialGroups = true;
    pm.addPass(createChunkedPrefill(c));
  }
  if (o.computeType != "f32") {
    ComputeTypeOptions t;
    t.type = o.computeType;
    pm.addNestedPass<func::FuncOp>(createComputeType(t));
  }
  // Large gather-only tables (Engram's) in pinned host memory: decided
  // on the compute type's bytes.
  PlaceTablesOptions place;
  place.minBytes = o.hostTableMinBytes;
  pm.addNestedPass<func::FuncOp>(createPlaceTables(place));
  // Query-row splits (h20-tensor-parallel) stay where the chunk's rows
  // divide over the ranks and the kernel that splits them runs (the
  // storage type is known now).
  pm.addPass(createCheckRowSplits());
  // Then the routed and shared experts' shares are summed in one all-reduce.
  pm.addNestedPass<func::FuncOp>(createMergeAllReduces());
  RenameEntryOptions entry;
  entry.entryName = o.entryName;
  pm.addPass(createRenameEntry(entry));
}

/// Linalg on tensors with library calls, the attention kernel chosen first.
void addLinalgStage(OpPassManager &pm, const GpuPipelineOptions &o) {
  ChooseAttentionKernelsOptions choose;
  choose.kernel = o.attentionKernel;
  choose.target = o.target;
  choose.expertGemm = o.expertGemm;
  pm.addNestedPass<func::FuncOp>(createChooseAttentionKernels(choose));
  LowerToLinalgOptions lower;
  lower.libraryCalls = true;
  lower.fp8Gemm = o.fp8Gemm;
  pm.addPass(createLowerToLinalg(lower));
  pm.addPass(createCanonicalizerPass());
  // A batched GEMM reads and writes head-transposed operands with
  // strides (cuBLASLt's ld and batch stride) instead of copies.
  pm.addNestedPass<func::FuncOp>(createTransposesIntoGemms());
  // A concat of a tensor's own slices (RoPE on part of the channels)
  // updates that tensor instead of copying it.
  pm.addNestedPass<func::FuncOp>(createConcatInPlace());
  // Elementwise producers (head transposes included) fuse into their single
  // consumer: one kernel and one pass over memory instead of several.
  pm.addNestedPass<func::FuncOp>(createFuseElementwise());
  // 16-bit bodies compute in f32 and round once per kernel.
  pm.addNestedPass<func::FuncOp>(createWidenElementwise());
  // Short reductions (V4.1's mHC mixes over 4 streams) as elementwise
  // ops, which the kernel lowering vectorizes.
  pm.addNestedPass<func::FuncOp>(createUnrollSmallReductions());
  // Those are elementwise now: a short row sum fuses into its consumer.
  pm.addNestedPass<func::FuncOp>(createFuseElementwise());
  // And their bodies compute in f32 too (the unrolled sums and the mixes'
  // divisions: one rounding per kernel, as for every other elementwise op).
  pm.addNestedPass<func::FuncOp>(createWidenElementwise());
  // cuBLASLt writes C with beta = 0: a GEMM's zero fill is dead.
  pm.addNestedPass<func::FuncOp>(createDropGemmInitFill());
}

/// Buffers: KV caches and outputs become arguments, then one-shot
/// bufferization; each generated kernel's launch shape is chosen.
void addBuffersStage(OpPassManager &pm, const GpuPipelineOptions &o) {
  pm.addNestedPass<func::FuncOp>(createCachesToArguments());
  pm.addNestedPass<func::FuncOp>(createOutputsToDestinations());
  // A result computed into a fresh tensor and then inserted into a KV
  // cache (K after RoPE, V) is computed in the cache slot instead: no
  // temporary, no copy.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // A value computed in its cache slot leaves a copy of that slot onto an
  // identical subview: CSE merges the two views, and the canonicalizer
  // drops the self-copy.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCopiesToLinalg());
  ChooseLaunchShapesOptions launch;
  launch.target = o.target;
  pm.addNestedPass<func::FuncOp>(createChooseLaunchShapes(launch));
}

/// Memory-bound ops as GPU loops, outlined into one gpu.module.
void addGpuStage(OpPassManager &pm, const GpuPipelineOptions &o) {
  pm.addNestedPass<func::FuncOp>(createLinalgToGpuLoops());
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  pm.addNestedPass<func::FuncOp>(createSinkLaunchConstants());
  // One gpu.module for every kernel, equal kernels once (not upstream
  // gpu-kernel-outlining's module per kernel: the verifier looks each
  // launch's kernel up by a linear scan of the module, quadratic for a
  // 40-layer model's ~10^4 launches).
  OutlineKernelsOptions outline;
  outline.moduleName = o.kernelModule;
  pm.addPass(createOutlineKernels(outline));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createCanonicalizerPass());
}

/// The kernels through NVVM to PTX (gpu.binary); the host function stays.
void addHostStage(OpPassManager &pm, const GpuPipelineOptions &o) {
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  // bf16/f16 math (exp, tanh, ...) has no libdevice function: compute it
  // in f32.
  kernels.addPass(math::createMathExtendToSupportedTypes());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuNVVMAttachTargetOptions attach;
  attach.chip = o.chip;
  attach.features = "+ptx80";
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = o.toolkitPath;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

} // namespace

llvm::ArrayRef<llvm::StringRef> gpuStages() {
  static const llvm::StringRef kStages[] = {"chunked", "linalg", "buffers", "gpu", "host"};
  return kStages;
}

llvm::LogicalResult buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &o) {
  llvm::StringRef last = o.stopAfter.empty() ? gpuStages().back() : llvm::StringRef(o.stopAfter);
  if (!llvm::is_contained(gpuStages(), last))
    return llvm::failure();
  addChunkedStage(pm, o);
  if (last == "chunked")
    return llvm::success();
  addLinalgStage(pm, o);
  if (last == "linalg")
    return llvm::success();
  addBuffersStage(pm, o);
  if (last == "buffers")
    return llvm::success();
  addGpuStage(pm, o);
  if (last == "gpu")
    return llvm::success();
  addHostStage(pm, o);
  return llvm::success();
}

} // namespace h20
