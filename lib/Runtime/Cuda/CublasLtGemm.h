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

#include "h20/Runtime/Cuda/CudaDriver.h"
#include "h20/Runtime/Cuda/GemmPlan.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace h20::runtime {

/// One GEMM: C[t] = alpha * A[t] * B[t] + beta * C[t] (row-major indexing,
/// strides in elements, see GemmPlan.h); pointers are device addresses of
/// element 0 of each operand.
struct GemmCall {
  std::string dtypeA, dtypeB, dtypeC; ///< "float32", "float16", "bfloat16"
                                      ///< (A, B: also "float8_e4m3fn")
  GemmProblem problem;                ///< batch, m, n, k >= 1
  CUdeviceptr a = 0, b = 0, c = 0;
  /// Block-scaled FP8 (dtypeA "float8_e4m3fn"): device addresses of A's
  /// VEC128 and B's BLK128x128 float32 scales (GpuProgram.h "gemm").
  CUdeviceptr scaleA = 0, scaleB = 0;
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

  /// Plans `call`'s shape by measurement instead of the heuristic alone:
  /// asks cuBLASLt for up to kTuneCandidates algorithms, times each on
  /// private scratch operands (random values of magnitude [1, 2)) and a private
  /// workspace on a private stream (one warm-up, median of kTuneRuns
  /// launches, CUDA events), and caches the fastest for run(); a candidate
  /// replaces the heuristic's first choice only when at least 1% faster
  /// (timing noise). Only the call's shape, strides, types and pointer
  /// alignments matter, never its data. The caller makes sure nothing else
  /// runs on the GPU meanwhile (the times would include it) and that no
  /// stream of this thread is being captured. Already planned shapes are
  /// left alone (returns true, nothing appended). When scratch memory is
  /// short the heuristic's choice is kept and the record says so. False
  /// with `error` only when a CUDA or cuBLASLt call fails outright.
  bool tune(const GemmCall &call, const CudaApi &cu, size_t workspaceBytes, std::string &error);

  /// What tune() measured, one record per shape, in tuning order.
  const std::vector<GemmTuning> &tunings() const { return tuned; }

  static constexpr int kTuneCandidates = kGemmTuneCandidates;
  static constexpr int kTuneRuns = 5;

  /// Distinct shapes planned so far (cache entries alive).
  size_t cachedPlans() const { return cache.size(); }

private:
  struct Entry {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool swapped = false;          ///< GemmPlan::swapped
    std::array<uint64_t, 3> bytes{}; ///< bytes library A, B and C span
  };
  const CublasLtApi &lt;
  cublasLtHandle_t handle = nullptr;
  std::map<std::vector<int64_t>, Entry> cache;
  std::vector<GemmTuning> tuned;

  /// The cached entry for `call` (planned with the heuristic's first choice
  /// when new); `candidates`, when not null, receives up to
  /// kTuneCandidates heuristic results of a new entry. Null with `error`.
  Entry *plan(const GemmCall &call, size_t workspaceBytes, std::string &error, bool &outOfMemory,
              std::vector<cublasLtMatmulHeuristicResult_t> *candidates = nullptr,
              bool *isNew = nullptr);
  void destroy(Entry &e);
  void clearCache();
};

/// "CUBLAS_STATUS_NOT_SUPPORTED" for a cuBLAS status code.
const char *cublasStatusName(cublasStatus_t s);

} // namespace h20::runtime

#endif // H20_LIB_RUNTIME_CUBLASLTGEMM_H
