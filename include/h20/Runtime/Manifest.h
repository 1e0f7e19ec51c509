//===- Manifest.h - an artifact's manifest.json, parsed ---------*- C++ -*-===//
#ifndef H20_RUNTIME_MANIFEST_H
#define H20_RUNTIME_MANIFEST_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h20::runtime {

struct TensorSpec {
  std::string name;
  std::string dtype;           ///< "float32", "int64", ...
  std::vector<int64_t> shape;  ///< -1 for a dynamic dim
  /// Outputs: for each dynamic dim, the (input, dim) it equals.
  std::vector<std::optional<std::pair<int, int>>> dimsFrom;
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
/// is the input dim its "dims_from" names. False with `error` naming the
/// output and dim when one cannot be sized.
bool resolveOutputShape(const TensorSpec &o, const std::vector<std::vector<int64_t>> &inputShapes,
                        std::vector<int64_t> &shape, std::string &error);

/// Bytes per element of a manifest dtype, 0 if unknown.
int64_t dtypeSize(const std::string &dtype);

} // namespace h20::runtime

#endif // H20_RUNTIME_MANIFEST_H
