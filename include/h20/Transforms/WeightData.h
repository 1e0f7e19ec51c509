//===- WeightData.h - read the values behind onnx.Constant/Weight -*- C++ -*-===//
//
// Passes that must look at a few weight values (RoPE tables, to recover theta)
// read just those elements: from the dense attribute of an onnx.Constant, or
// from the bytes an onnx.Weight references (file relative to the module's
// `onnx.model_dir`, little-endian raw data). Nothing else is read.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TRANSFORMS_WEIGHTDATA_H
#define H20_TRANSFORMS_WEIGHTDATA_H

#include "mlir/IR/Value.h"

#include <optional>
#include <vector>

namespace h20 {

/// Elements [first, first + count) in row-major order of a float constant or
/// weight (f32, f16, bf16, f64), as doubles; nullopt when `v` is neither,
/// the range is out of bounds, or the file cannot be read.
std::optional<std::vector<double>> readFloatElements(mlir::Value v,
                                                     int64_t first,
                                                     int64_t count);

} // namespace h20

#endif // H20_TRANSFORMS_WEIGHTDATA_H
