//===- InitAll.cpp - register h20's dialects and passes ------------------===//
#include "h20/InitAll.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Conversion/Passes.h"
#include "h20/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"

void h20::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<h20::onnx::OnnxDialect, h20::attn::AttnDialect,
                  h20::kv::KVDialect, h20::hw::H20Dialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
}

void h20::registerAllPasses() {
  mlir::registerAllPasses();
  h20::registerH20TransformsPasses();
  h20::registerH20ConversionPasses();
}
