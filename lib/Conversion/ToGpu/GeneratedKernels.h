//===- GeneratedKernels.h - which linalg ops become generated kernels -*- C++ -*-===//
//
// Shared by h20-choose-launch-shapes (which records a launch shape on these
// ops) and h20-linalg-to-gpu-loops (which lowers them), so that the two
// passes agree on the set.
//
//===----------------------------------------------------------------------===//
#ifndef H20_LIB_CONVERSION_TOGPU_GENERATEDKERNELS_H
#define H20_LIB_CONVERSION_TOGPU_GENERATEDKERNELS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace h20 {

/// Whether h20-linalg-to-gpu-loops turns `op` into loops for a kernel (or,
/// for host shape arithmetic, into host code): buffer semantics, not a
/// library call (the target implements those with a routine), not already
/// inside a parallel loop.
inline bool becomesGeneratedKernel(mlir::linalg::LinalgOp op) {
  if (op->getParentOfType<mlir::scf::ParallelOp>() || !op.hasPureBufferSemantics())
    return false;
  auto g = mlir::dyn_cast<mlir::linalg::GenericOp>(op.getOperation());
  return !(g && g.getLibraryCallAttr());
}

} // namespace h20

#endif // H20_LIB_CONVERSION_TOGPU_GENERATEDKERNELS_H
