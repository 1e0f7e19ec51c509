//===- GemmPlan.cpp - a row-major strided GEMM as a cuBLASLt call --------===//
#include "h20/Runtime/Cuda/GemmPlan.h"

#include <algorithm>

namespace h20::runtime {
namespace {

/// How a (rows x cols) operand with the given strides sits in memory as a
/// column-major matrix: itself (transposed == false) or its transpose.
struct Stored {
  bool transposed = false; ///< the stored column-major matrix is X^T
  GemmLayout layout;
};

bool storeOperand(const char *name, int64_t rows, int64_t cols, const GemmStrides &s,
                  Stored &out, std::string &error) {
  if (s.rowStride < 0 || s.colStride < 0 || s.batchStride < 0) {
    error = std::string("gemm operand ") + name + " has a negative stride";
    return false;
  }
  // Row-major: stored as X^T (cols x rows, ld = row_stride); column-major:
  // stored as X (rows x cols, ld = col_stride). A single row (column) has no
  // row (column) stride to speak of, so either form may fit; its leading
  // dimension is then the smallest the library accepts.
  bool rowOk = (s.colStride == 1 || cols == 1) && (rows == 1 || s.rowStride >= cols);
  bool colOk = (s.rowStride == 1 || rows == 1) && (cols == 1 || s.colStride >= rows);
  bool rowMajor;
  if (rowOk && (s.colStride == 1 || !colOk))
    rowMajor = true;
  else if (colOk)
    rowMajor = false;
  else if (s.colStride != 1 && s.rowStride != 1) {
    error = std::string("gemm operand ") + name + " has row_stride " +
            std::to_string(s.rowStride) + " and col_stride " + std::to_string(s.colStride) +
            ": one of them must be 1";
    return false;
  } else {
    bool rm = s.colStride == 1;
    error = std::string("gemm operand ") + name + " (" + std::to_string(rows) + " x " +
            std::to_string(cols) + ") has overlapping " + (rm ? "rows" : "columns") +
            ": " + (rm ? "row_stride " : "col_stride ") +
            std::to_string(rm ? s.rowStride : s.colStride) + " < " +
            std::to_string(rm ? cols : rows);
    return false;
  }
  GemmLayout &l = out.layout;
  l.batchStride = s.batchStride;
  out.transposed = rowMajor;
  if (rowMajor) {
    l.rows = cols;
    l.cols = rows;
    l.ld = rows > 1 ? s.rowStride : std::max<int64_t>(cols, 1);
  } else {
    l.rows = rows;
    l.cols = cols;
    l.ld = cols > 1 ? s.colStride : std::max<int64_t>(rows, 1);
  }
  return true;
}

} // namespace

bool planGemm(const GemmProblem &p, GemmPlan &plan, std::string &error) {
  if (p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1) {
    error = "gemm needs batch, m, n, k >= 1";
    return false;
  }
  Stored a, b, c;
  if (!storeOperand("a", p.m, p.k, p.a, a, error) || !storeOperand("b", p.k, p.n, p.b, b, error) ||
      !storeOperand("c", p.m, p.n, p.c, c, error))
    return false;
  if (p.batch > 1 && p.c.batchStride == 0) {
    error = "gemm operand c has batch_stride 0 with batch " + std::to_string(p.batch) +
            ": the batches would overwrite each other";
    return false;
  }
  plan = GemmPlan();
  plan.batch = p.batch;
  plan.k = p.k;
  plan.c = c.layout;
  // op(S) = X needs a transpose iff S is X^T; op(S) = X^T iff S is X.
  if (c.transposed) { // C^T (n x m) = B^T (n x k) * A^T (k x m)
    plan.swapped = true;
    plan.m = p.n;
    plan.n = p.m;
    plan.a = b.layout;
    plan.transA = !b.transposed;
    plan.b = a.layout;
    plan.transB = !a.transposed;
  } else { // C (m x n) = A (m x k) * B (k x n)
    plan.m = p.m;
    plan.n = p.n;
    plan.a = a.layout;
    plan.transA = a.transposed;
    plan.b = b.layout;
    plan.transB = b.transposed;
  }
  return true;
}

} // namespace h20::runtime
