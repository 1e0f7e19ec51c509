//===- Passes.h - h20 conversion passes -------------------------*- C++ -*-===//
#ifndef H20_CONVERSION_PASSES_H
#define H20_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace h20 {

#define GEN_PASS_DECL
#include "h20/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "h20/Conversion/Passes.h.inc"

} // namespace h20

#endif // H20_CONVERSION_PASSES_H
