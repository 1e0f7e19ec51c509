//===- CublasLtGemm.h - one GEMM call on cuBLASLt ---------------*- C++ -*-===//
//
// Runs gemm steps (GpuProgram.h) through cuBLASLt, loaded at run time
// (CudaDriver.h). Matmul descriptors, layouts and the chosen algorithm are
// cached by shape, strides, types and pointer alignment, so a step repeated
// every chunk asks the heuristic once. Private to lib/Runtime; needs the CUDA
// headers.
//
//===----------------------------------------------------------------------===//
#ifndef H20_LIB_RUNTIME_CUBLASLTGEMM_H
#define H20_LIB_RUNTIME_CUBLASLTGEMM_H

#include "h20/Runtime/CudaDriver.h"
#include "h20/Runtime/GemmPlan.h"

#include <map>
#include <string>
#include <vector>

namespace h20::runtime {

/// One GEMM: C[t] = alpha * A[t] * B[t] + beta * C[t] (row-major indexing,
/// strides in elements, see GemmPlan.h); pointers are device addresses of
/// element 0 of each operand.
struct GemmCall {
  std::string dtypeA, dtypeB, dtypeC; ///< "float32", "float16", "bfloat16"
  GemmProblem problem;                ///< batch, m, n, k >= 1
  CUdeviceptr a = 0, b = 0, c = 0;
  float alpha = 1.0f, beta = 0.0f;
  bool tf32 = false; ///< float32 inputs may be rounded to TF32
};

/// A cuBLASLt handle and the descriptor cache; use from one thread, with the
/// context current.
class CublasLtGemm {
public:
  explicit CublasLtGemm(const CublasLtApi &lt) : lt(lt) {}
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm &) = delete;
  CublasLtGemm &operator=(const CublasLtGemm &) = delete;

  /// Creates the cuBLASLt handle; false with `error`.
  bool init(std::string &error);

  /// Enqueues `call` on `stream` with `workspace` (device, workspaceBytes
  /// bytes). False with `error` naming the cuBLASLt status and the shape;
  /// `outOfMemory` is set when the failure was an allocation.
  bool run(const GemmCall &call, CUstream stream, CUdeviceptr workspace, size_t workspaceBytes,
           std::string &error, bool &outOfMemory);

  /// Distinct shapes planned so far (cache entries alive).
  size_t cachedPlans() const { return cache.size(); }

private:
  struct Entry {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const CublasLtApi &lt;
  cublasLtHandle_t handle = nullptr;
  std::map<std::vector<int64_t>, Entry> cache;

  void destroy(Entry &e);
  void clearCache();
};

/// "CUBLAS_STATUS_NOT_SUPPORTED" for a cuBLAS status code.
const char *cublasStatusName(cublasStatus_t s);

} // namespace h20::runtime

#endif // H20_LIB_RUNTIME_CUBLASLTGEMM_H
