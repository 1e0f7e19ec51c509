//===- OnnxTypes.h - ONNX dtypes and tensors as MLIR types/attrs -*- C++ -*-===//
#ifndef H20_LIB_IMPORT_ONNX_ONNXTYPES_H
#define H20_LIB_IMPORT_ONNX_ONNXTYPES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace h20::onnx_import {

/// MLIR element type for an ONNX TensorProto.DataType code (onnx.proto),
/// or null for STRING, complex and unknown codes. Signed integers and bool
/// are signless (i1 for BOOL); unsigned ones are `ui`.
mlir::Type elementType(int32_t dataType, mlir::MLIRContext *ctx);

/// The TensorProto.DataType code of an element type (the inverse of
/// elementType); nullopt for a type ONNX has no code for.
std::optional<int64_t> onnxDataType(mlir::Type t);

/// Bytes per element of an ONNX dtype in raw_data, or nullopt for dtypes
/// that are not byte-addressable (4-bit types, strings).
std::optional<int64_t> byteWidth(int32_t dataType);

/// The number of elements of a tensor of these dims, or nullopt when a dim is
/// negative or the count (times 16, the widest element) overflows int64.
std::optional<int64_t> elementCount(llvm::ArrayRef<int64_t> dims);

/// Human-readable name of an ONNX dtype code ("FLOAT", "INT64", ...).
std::string dataTypeName(int32_t dataType);

/// Ranked tensor type of a TensorProto's declared dims and dtype; null if the
/// dtype is unsupported.
mlir::RankedTensorType tensorType(const ::onnx::TensorProto &t,
                                  mlir::MLIRContext *ctx);

/// Converts the values of an inline TensorProto (raw_data or the typed
/// fields) into a dense attribute of `type`. Fails with a message naming the
/// tensor when the data length does not match the shape.
mlir::FailureOr<mlir::DenseElementsAttr>
denseFromTensor(const ::onnx::TensorProto &t, mlir::RankedTensorType type,
                std::string &error);

} // namespace h20::onnx_import

#endif // H20_LIB_IMPORT_ONNX_ONNXTYPES_H
