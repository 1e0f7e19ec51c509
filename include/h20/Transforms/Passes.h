//===- Passes.h - h20 transformation passes ---------------------*- C++ -*-===//
#ifndef H20_TRANSFORMS_PASSES_H
#define H20_TRANSFORMS_PASSES_H

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace h20 {

#define GEN_PASS_DECL
#include "h20/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "h20/Transforms/Passes.h.inc"

} // namespace h20

#endif // H20_TRANSFORMS_PASSES_H
