//===- HostProgram.h - the host side of a GPU function as a step list -*- C++ -*-===//
//
// After bufferization and kernel outlining, the host part of the GPU
// target's function is straight-line code: allocations, views, kernel
// launches, library calls. Instead of compiling it, the target evaluates it
// once at compile time into the runtime's step program (GpuProgram.h), with
// every integer a linear expression of the per-chunk symbols p0 (chunk
// start) and n (real tokens in the chunk). Anything that is not linear in
// them (a division by a symbol, a load of device memory on the host) is an
// error naming the op: the program could not be replayed per chunk.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_GPU_HOSTPROGRAM_H
#define H20_TARGET_GPU_HOSTPROGRAM_H

#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/Fp8Kernel.h"
#include "h20/Target/IndexerKernel.h"
#include "h20/Target/MoeKernel.h"
#include "h20/Target/SparseAttentionKernel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace h20::gpu {

/// The module each kind of kernel is in: the generated kernels are module
/// 0, then the attention, indexer, sparse-attention, routed-experts (MoE)
/// and FP8-quantisation modules in that order, each only when the function
/// calls it; -1 when absent. Known from the IR before the host program is built
/// (planKernelModules), so every step names its module when it is made.
struct KernelModules {
  int generated = 0;
  int attention = -1, indexer = -1, sparseAttention = -1, moe = -1, fp8 = -1;
};

/// The modules `func`'s library calls need (by their library-call names).
KernelModules planKernelModules(mlir::func::FuncOp func);

/// What each argument of the entry function is, in order.
struct ArgumentRoles {
  unsigned numInputs = 0;   ///< graph inputs (the token ids when chunked)
  int chunkStartArg = -1;   ///< index argument p0, or -1
  int chunkTokensArg = -1;  ///< index argument n, or -1
  unsigned numWeights = 0;  ///< weights follow the inputs (and p0, n)
  unsigned numState = 0;    ///< KV caches follow the weights
  unsigned numOutputs = 0;  ///< destinations follow the state
  /// Static value of every dynamic dim of input i (the chunk size for the
  /// ids' sequence dim); indexed [input][dim], -1 where static.
  std::vector<std::vector<int64_t>> inputDims;
  /// Weight dtypes on the device ("float32", "bfloat16", ...).
  std::vector<std::string> weightDtypes;
  /// Weights h20-place-tables put in pinned host memory (GpuBuffer::host).
  std::vector<bool> weightOnHost;
};

/// The step program and the bytes it references: the buffers and steps of
/// the runtime's GpuProgram (GpuTarget adds modules, chunking and outputs).
struct HostProgram {
  std::vector<runtime::GpuBuffer> buffers;
  std::vector<runtime::GpuStep> steps;
  /// The derived symbols the steps name (runtime::GpuProgram::derived).
  std::vector<runtime::DerivedSymbol> derived;
  int64_t arenaBytes = 0;
  std::string constBlob;  ///< "consts.bin": memref.global initial values
  /// Attention variants the steps launch (KernelModules::attention).
  std::vector<AttentionVariant> attentionVariants;
  /// Indexer kernels the steps launch (KernelModules::indexer).
  std::vector<IndexerKernel> indexerKernels;
  /// Sparse-attention kernels (KernelModules::sparseAttention).
  std::vector<SparseAttentionKernel> sparseAttentionKernels;
  /// Whether a step launches a routed-experts kernel (KernelModules::moe:
  /// every kernel of kernels/moe.cuh).
  bool usesMoe = false;
  /// Whether one launches the wgmma MXFP4 GEMM (the module then needs
  /// sm_90a: compileMoePtx).
  bool moeWgmma = false;
  /// The program's layers (GpuProgram.h "layers"): declared when every
  /// attention step reads K/V as a view of one layer of the KV cache.
  std::vector<runtime::GpuLayer> layers;
};

/// Evaluates `func` (host code after kernel outlining: memref.alloc /
/// views / gpu.launch_func of module 0 / library-call generics / arith) into
/// `program`. Temporaries are packed into one arena by lifetime (first to
/// last step using them). Steps name the modules of `modules`. Fails with
/// an error on the offending op.
mlir::LogicalResult buildHostProgram(mlir::func::FuncOp func, const ArgumentRoles &roles,
                                     const KernelModules &modules, HostProgram &program);

} // namespace h20::gpu

#endif // H20_TARGET_GPU_HOSTPROGRAM_H
