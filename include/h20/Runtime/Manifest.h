//===- Manifest.h - an artifact's manifest.json, parsed ---------*- C++ -*-===//
#ifndef H20_RUNTIME_MANIFEST_H
#define H20_RUNTIME_MANIFEST_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h20::runtime {

/// An output dim that is a linear combination of input dims (e.g. a present
/// KV cache of S_past + S tokens): constant + sum(coeff * input[input].dim).
struct DimSum {
  struct Term {
    int input = 0, dim = 0;
    int64_t coeff = 1;
  };
  int64_t constant = 0;
  std::vector<Term> terms;
};

struct TensorSpec {
  std::string name;
  std::string dtype;           ///< "float32", "int64", ...
  std::vector<int64_t> shape;  ///< -1 for a dynamic dim
  /// Outputs: for each dynamic dim, the (input, dim) it equals.
  std::vector<std::optional<std::pair<int, int>>> dimsFrom;
  /// Outputs: dynamic dims that equal no single input dim, as DimSums
  /// (manifest "dims_sum", parallel to the shape; null elsewhere).
  std::vector<std::optional<DimSum>> dimSums;
  /// Inputs: the ONNX dim_param of each dim ("" for none), when the model
  /// names any. The compiler takes dims with one name to be equal.
  std::vector<std::string> dimParams;
};

struct WeightSpec {
  std::string name, file, dtype;
  std::vector<int64_t> shape;
  std::optional<int64_t> offset, length;
  std::optional<int64_t> fileSize; ///< size of `file` at compile time
};

struct BlobSpec {
  std::string name, kind;
  uint64_t offset = 0, size = 0;
};

struct Manifest {
  std::string target;   ///< "cpu", "h200", ...
  std::string logits;   ///< "all" or "last"
  std::string modelDir; ///< where weight files are resolved
  std::string entrySymbol; ///< CPU entry point; empty for GPU artifacts
  std::string cpu; ///< CPU level the code was compiled for ("x86-64-v3", ...)
  std::optional<int64_t> vocabSize, maxPositions;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<WeightSpec> weights;
  std::vector<BlobSpec> blobs;
};

/// Parses manifest JSON; false with `error` naming the missing/invalid field.
bool parseManifest(const std::string &json, Manifest &m, std::string &error);

/// The shape of output `o` for inputs of the given shapes: each dynamic dim
/// is the input dim its "dims_from" names, or the sum its "dims_sum" gives.
/// False with `error` naming the output and dim when one cannot be sized
/// (an index out of range, a negative or overflowing sum).
bool resolveOutputShape(const TensorSpec &o, const std::vector<std::vector<int64_t>> &inputShapes,
                        std::vector<int64_t> &shape, std::string &error);

/// Checks what the compiled code assumes of dynamic input dims: every dim
/// that carries a given ONNX dim_param has one value across all inputs.
/// `inputShapes[i]` is the shape of input i. False with `error` naming both
/// inputs, the dims, their sizes and the dim_param.
bool checkDimParams(const std::vector<TensorSpec> &inputs,
                    const std::vector<std::vector<int64_t>> &inputShapes, std::string &error);

/// Bytes per element of a manifest dtype, 0 if unknown.
int64_t dtypeSize(const std::string &dtype);

} // namespace h20::runtime

#endif // H20_RUNTIME_MANIFEST_H
