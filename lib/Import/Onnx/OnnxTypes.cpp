//===- OnnxTypes.cpp - ONNX dtypes and tensors as MLIR types/attrs -------===//
#include "OnnxTypes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallVector.h"

#include <cstring>
#include <limits>

using namespace mlir;

namespace h20::onnx_import {

// TensorProto.DataType codes, onnx/onnx.proto (IR version 10).
enum DataType : int32_t {
  kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6,
  kInt64 = 7, kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11,
  kUint32 = 12, kUint64 = 13, kComplex64 = 14, kComplex128 = 15,
  kBfloat16 = 16, kF8E4M3FN = 17, kF8E4M3FNUZ = 18, kF8E5M2 = 19,
  kF8E5M2FNUZ = 20, kUint4 = 21, kInt4 = 22, kF4E2M1 = 23,
};

Type elementType(int32_t dt, MLIRContext *ctx) {
  Builder b(ctx);
  switch (dt) {
  case kFloat: return b.getF32Type();
  case kDouble: return b.getF64Type();
  case kFloat16: return b.getF16Type();
  case kBfloat16: return b.getBF16Type();
  case kF8E4M3FN: return b.getType<Float8E4M3FNType>();
  case kF8E4M3FNUZ: return b.getType<Float8E4M3FNUZType>();
  case kF8E5M2: return b.getType<Float8E5M2Type>();
  case kF8E5M2FNUZ: return b.getType<Float8E5M2FNUZType>();
  case kBool: return b.getI1Type();
  case kInt4: return b.getIntegerType(4);
  case kInt8: return b.getIntegerType(8);
  case kInt16: return b.getIntegerType(16);
  case kInt32: return b.getIntegerType(32);
  case kInt64: return b.getIntegerType(64);
  case kUint4: return b.getIntegerType(4, /*isSigned=*/false);
  case kUint8: return b.getIntegerType(8, false);
  case kUint16: return b.getIntegerType(16, false);
  case kUint32: return b.getIntegerType(32, false);
  case kUint64: return b.getIntegerType(64, false);
  default: return {};
  }
}

std::optional<int64_t> onnxDataType(Type t) {
  // Try every code elementType knows (1..23) and return the one that maps
  // back to t, so the two can never disagree.
  for (int32_t dt = 1; dt <= 23; ++dt)
    if (Type e = elementType(dt, t.getContext()); e && e == t)
      return dt;
  return std::nullopt;
}

std::optional<int64_t> byteWidth(int32_t dt) {
  switch (dt) {
  case kBool: case kInt8: case kUint8: case kF8E4M3FN: case kF8E4M3FNUZ:
  case kF8E5M2: case kF8E5M2FNUZ:
    return 1;
  case kInt16: case kUint16: case kFloat16: case kBfloat16:
    return 2;
  case kInt32: case kUint32: case kFloat:
    return 4;
  case kInt64: case kUint64: case kDouble: case kComplex64:
    return 8;
  case kComplex128:
    return 16;
  default:
    return std::nullopt;
  }
}

std::optional<int64_t> elementCount(llvm::ArrayRef<int64_t> dims) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 16;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMax / d))
      return std::nullopt;
    n *= d;
  }
  return n;
}

std::string dataTypeName(int32_t dt) {
  static const char *names[] = {
      "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
      "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64",
      "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
      "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1"};
  if (dt >= 0 && dt < static_cast<int32_t>(std::size(names)))
    return names[dt];
  return "unknown dtype " + std::to_string(dt);
}

RankedTensorType tensorType(const ::onnx::TensorProto &t, MLIRContext *ctx) {
  Type elt = elementType(t.data_type(), ctx);
  if (!elt)
    return {};
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  return RankedTensorType::get(shape, elt);
}

namespace {
/// Reads element i of little-endian raw bytes as an unsigned integer.
uint64_t readRaw(const std::string &raw, int64_t i, int64_t width) {
  uint64_t v = 0;
  std::memcpy(&v, raw.data() + i * width, width);
  return v;
}

/// Builds the attribute from per-element bit patterns.
DenseElementsAttr fromBits(RankedTensorType type, ArrayRef<uint64_t> bits) {
  Type elt = type.getElementType();
  if (elt.isInteger(1)) {
    SmallVector<bool> v(bits.begin(), bits.end());
    for (auto [i, x] : llvm::enumerate(bits))
      v[i] = x != 0;
    return DenseElementsAttr::get(type, v);
  }
  unsigned w = elt.getIntOrFloatBitWidth();
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> v;
    v.reserve(bits.size());
    for (uint64_t x : bits)
      v.emplace_back(ft.getFloatSemantics(), APInt(w, x));
    return DenseElementsAttr::get(type, v);
  }
  SmallVector<APInt> v;
  v.reserve(bits.size());
  for (uint64_t x : bits)
    v.emplace_back(w, x, /*isSigned=*/false, /*implicitTrunc=*/true);
  return DenseElementsAttr::get(type, v);
}
} // namespace

FailureOr<DenseElementsAttr> denseFromTensor(const ::onnx::TensorProto &t,
                                             RankedTensorType type,
                                             std::string &error) {
  int64_t n = 0;
  int32_t dt = t.data_type();
  auto width = byteWidth(dt);
  std::string what = "tensor '" + t.name() + "' (" + dataTypeName(dt) + ")";
  if (!width || dt == kComplex64 || dt == kComplex128) {
    error = what + ": dtype is not supported for constant data";
    return failure();
  }
  auto count = elementCount(type.getShape());
  if (!count) {
    error = what + ": the shape has too many elements";
    return failure();
  }
  n = *count;
  // Sizes are checked against the data before anything is allocated.
  SmallVector<uint64_t> bits;
  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    int64_t expected = n * *width;
    if (static_cast<int64_t>(raw.size()) != expected) {
      error = what + ": raw_data holds " + std::to_string(raw.size()) +
              " bytes but shape needs " + std::to_string(expected);
      return failure();
    }
    bits.reserve(n);
    for (int64_t i = 0; i < n; ++i)
      bits.push_back(readRaw(raw, i, *width));
    return fromBits(type, bits);
  }
  auto checkCount = [&](int64_t have, const char *field) -> LogicalResult {
    if (have == n) {
      bits.reserve(n);
      return success();
    }
    error = what + ": " + field + " holds " + std::to_string(have) +
            " values but shape needs " + std::to_string(n);
    return failure();
  };
  switch (dt) {
  case kFloat:
    if (failed(checkCount(t.float_data_size(), "float_data")))
      return failure();
    for (float f : t.float_data()) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      bits.push_back(u);
    }
    break;
  case kDouble:
    if (failed(checkCount(t.double_data_size(), "double_data")))
      return failure();
    for (double d : t.double_data()) {
      uint64_t u;
      std::memcpy(&u, &d, 8);
      bits.push_back(u);
    }
    break;
  case kInt64:
    if (failed(checkCount(t.int64_data_size(), "int64_data")))
      return failure();
    for (int64_t v : t.int64_data())
      bits.push_back(static_cast<uint64_t>(v));
    break;
  case kUint32:
  case kUint64:
    if (failed(checkCount(t.uint64_data_size(), "uint64_data")))
      return failure();
    bits.append(t.uint64_data().begin(), t.uint64_data().end());
    break;
  default: // int32_data carries every other <= 32-bit type, bit-cast.
    if (failed(checkCount(t.int32_data_size(), "int32_data")))
      return failure();
    for (int32_t v : t.int32_data())
      bits.push_back(static_cast<uint32_t>(v));
    break;
  }
  return fromBits(type, bits);
}

} // namespace h20::onnx_import
