//===- h20-opt.cpp - h20's pass driver -----------------------------------===//
//
// An MlirOptMain driver with h20's dialects and passes registered.
//
//===----------------------------------------------------------------------===//
#include "h20/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  h20::registerAllDialects(registry);
  h20::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "h20 optimizer driver\n", registry));
}
