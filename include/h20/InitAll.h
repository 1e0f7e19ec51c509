//===- InitAll.h - register h20's dialects and passes -----------*- C++ -*-===//
#ifndef H20_INITALL_H
#define H20_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace h20 {
/// Adds the onnx, attn and kv dialects and the upstream dialects h20 lowers
/// through (func, arith, math, tensor, linalg, scf, ...) to `registry`.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers h20's passes and the upstream passes its pipelines use with the
/// global pass registry (for h20-opt's command line).
void registerAllPasses();
} // namespace h20

#endif // H20_INITALL_H
