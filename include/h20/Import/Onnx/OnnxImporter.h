//===- OnnxImporter.h - ONNX protobuf -> onnx dialect -----------*- C++ -*-===//
//
// Public entry point of h20's ONNX importer (lib/Import/Onnx).
//
//===----------------------------------------------------------------------===//
#ifndef H20_IMPORT_ONNX_ONNXIMPORTER_H
#define H20_IMPORT_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h20 {

/// Options of importOnnxModel.
struct OnnxImportOptions {
  /// Initializers with at most this many elements, stored inline in the model
  /// file, become `onnx.Constant` (so shape subgraphs can fold), as do those
  /// stored in typed fields (float_data, ...: no byte range to reference);
  /// all others become `onnx.Weight` references to their bytes.
  int64_t inlineElementLimit = 64;
  /// Model-local functions of the ai.h20 domain h20 has an op for but
  /// should import as their bodies anyway (op types, e.g. "RoutedExperts":
  /// the CPU target has no lowering of onnx.h20.RoutedExperts, so h20-opt
  /// expands it there; its body runs every expert densely).
  std::vector<std::string> expandFunctions;
};

/// Imports the ONNX model at `path` (binary protobuf `.onnx`, or the ONNX
/// textual syntax when the name ends in `.onnxtext`) into a new module with
/// one `func.func @main` whose arguments are the graph inputs and whose
/// results are the graph outputs; each node becomes one onnx-dialect op.
///
/// Accepts IR versions 3..13, default-domain opsets 17..25 and the
/// com.microsoft domain. Dynamic dimensions become `?`; their ONNX names
/// (dim_param) are kept in the argument attribute `onnx.dim_params`.
/// External data is checked (file exists, is long enough) but never read.
///
/// Errors: returns null after emitting diagnostics on `ctx` that name the
/// file, and the node (name, op type, domain, opset) or value at fault:
/// unreadable/empty/truncated/corrupt files, missing or short external data,
/// raw_data length mismatches, cycles, duplicate value names, undefined
/// inputs, and every unsupported node at once.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(llvm::StringRef path, mlir::MLIRContext &ctx,
                const OnnxImportOptions &options = {});

/// importOnnxModel for a model already in memory: `path` names it in
/// diagnostics, selects the syntax (`.onnxtext`) and is where external data
/// is looked up (its directory). Used by the fuzz tests (test/Fuzz).
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModelFromBuffer(llvm::StringRef bytes, llvm::StringRef path, mlir::MLIRContext &ctx,
                          const OnnxImportOptions &options = {});

} // namespace h20

#endif // H20_IMPORT_ONNX_ONNXIMPORTER_H
