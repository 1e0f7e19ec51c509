//===- GemmPlan.h - a row-major strided GEMM as a cuBLASLt call -*- C++ -*-===//
//
// A gemm step (GpuProgram.h) is written in row-major indexing with arbitrary
// row/column strides; cuBLASLt multiplies column-major matrices with an
// optional transpose of each input. planGemm maps one onto the other:
// a matrix with col_stride 1 is stored as its transpose in column-major
// form, and when C is row-major the library computes C^T = B^T * A^T (so the
// library's A is the program's B). Pure arithmetic: no CUDA header, testable
// without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_GEMMPLAN_H
#define H20_RUNTIME_GEMMPLAN_H

#include <cstdint>
#include <string>

namespace h20::runtime {

/// Strides of one operand, in elements; X[t, r, c] sits at
/// t*batchStride + r*rowStride + c*colStride.
struct GemmStrides {
  int64_t batchStride = 0, rowStride = 0, colStride = 0;
};

/// C[t] (m x n) = alpha * A[t] (m x k) * B[t] (k x n) + beta * C[t].
struct GemmProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  GemmStrides a, b, c;
};

/// A column-major matrix as cuBLASLt's layout describes it: element (r, c)
/// of batch t at t*batchStride + r + c*ld, ld >= max(1, rows).
struct GemmLayout {
  int64_t rows = 0, cols = 0, ld = 0, batchStride = 0;
};

/// The library call: D = C = alpha * op(A) * op(B) + beta * C, column-major,
/// op(A) m x k, op(B) k x n.
struct GemmPlan {
  bool swapped = false;       ///< true: library A/B are the program's B/A (C^T = B^T A^T)
  bool transA = false, transB = false; ///< op = transpose for the library's A / B
  int64_t batch = 1, m = 0, n = 0, k = 0;
  GemmLayout a, b, c;
};

/// Plans `p` (batch, m, n, k >= 1). False with `error` naming the operand
/// ("a", "b" or "c") when neither of its row/column strides is 1, when its
/// rows overlap (leading dimension smaller than the stored row length), when
/// a stride is negative, or when C's batch_stride is 0 with batch > 1.
bool planGemm(const GemmProblem &p, GemmPlan &plan, std::string &error);

/// Most algorithms CublasLtGemm::tune times per GEMM shape.
constexpr int kGemmTuneCandidates = 8;

/// One GEMM shape's measured algorithm choice (CublasLtGemm::tune, lib/Runtime;
/// GpuLoadOptions::tuneGemms).
struct GemmTuning {
  std::string shape;   ///< "bfloat16 8448x11008x4096" (A's dtype, m x n x k, "batch B" when > 1)
  int candidates = 0;  ///< algorithms cuBLASLt's heuristic offered that ran
  int chosen = 0;      ///< the fastest one's rank in the heuristic's order (0: its first choice)
  double firstMs = 0;  ///< median time of the heuristic's first choice (ms, CUDA events)
  double chosenMs = 0; ///< median time of the chosen one (ms)
  std::string note;    ///< why the heuristic's first choice was kept without timing; else empty
};

} // namespace h20::runtime

#endif // H20_RUNTIME_GEMMPLAN_H
