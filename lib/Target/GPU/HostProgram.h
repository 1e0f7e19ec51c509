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

#include "h20/Target/AttentionKernel.h"
#include "h20/Target/IndexerKernel.h"
#include "h20/Target/MoeKernel.h"
#include "h20/Target/SparseAttentionKernel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace h20::gpu {

/// The "module" of an indexer launch step until compileForGpu numbers the
/// indexer module.
inline constexpr int64_t kIndexerModulePlaceholder = -1;
/// The same for the sparse-attention module.
inline constexpr int64_t kSparseAttentionModulePlaceholder = -2;
/// The same for the routed-experts (MoE) kernels' module.
inline constexpr int64_t kMoeModulePlaceholder = -3;

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
};

/// The step program and the bytes it references.
struct HostProgram {
  llvm::json::Array buffers;
  llvm::json::Array steps;
  int64_t arenaBytes = 0;
  std::string constBlob;  ///< "consts.bin": memref.global initial values
  /// Attention variants the steps launch (compile them into module 1).
  std::vector<AttentionVariant> attentionVariants;
  /// Indexer kernels the steps launch; their "launch" steps name module
  /// kIndexerModulePlaceholder until the target knows the module's index.
  std::vector<IndexerKernel> indexerKernels;
  /// Sparse-attention kernels (module kSparseAttentionModulePlaceholder).
  std::vector<SparseAttentionKernel> sparseAttentionKernels;
  /// Whether a step launches a routed-experts kernel (module
  /// kMoeModulePlaceholder: every kernel of kernels/moe.cuh).
  bool usesMoe = false;
};

/// Evaluates `func` (host code after kernel outlining: memref.alloc /
/// views / gpu.launch_func of module 0 / library-call generics / arith) into
/// `program`. Temporaries are packed into one arena by lifetime (first to
/// last step using them). Fails with an error on the offending op.
mlir::LogicalResult buildHostProgram(mlir::func::FuncOp func, const ArgumentRoles &roles,
                                     HostProgram &program);

} // namespace h20::gpu

#endif // H20_TARGET_GPU_HOSTPROGRAM_H
