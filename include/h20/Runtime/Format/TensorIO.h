//===- TensorIO.h - host tensors from/to .npy and TensorProto .pb -*- C++ -*-===//
#ifndef H20_RUNTIME_TENSORIO_H
#define H20_RUNTIME_TENSORIO_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20::runtime {

/// A dense host tensor; `dtype` uses the manifest's names ("float32",
/// "float16", "bfloat16", "float64", "int64", "int32", "int8", "bool").
struct HostTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data; ///< C order, little-endian
};

/// Reads a .npy file or a serialized ONNX TensorProto (.pb); false with
/// `error` naming the file and what is wrong.
bool readTensorFile(const std::string &path, HostTensor &t, std::string &error);

/// readTensorFile for the bytes of a file already read; `path` only names it
/// in messages.
bool parseTensorBytes(const std::string &bytes, const std::string &path, HostTensor &t,
                      std::string &error);

/// The number of elements of `shape` into `count`; false when a dim is
/// negative (dynamic) or the product exceeds 2^50 (no int64 overflow in any
/// byte size computed from it).
bool elementCount(const std::vector<int64_t> &shape, int64_t &count);

/// Writes `t` as a TensorProto (.pb) or .npy (by extension), atomically.
bool writeTensorFile(const std::string &path, const HostTensor &t, std::string &error);

/// The ONNX backend-test layout's file of a graph's input or output `j` in
/// `dir`: "DIR/input_J.pb" or "DIR/output_J.pb" (`kind` "input"/"output").
std::string backendTestFile(const std::string &dir, const char *kind, size_t j);

} // namespace h20::runtime

#endif // H20_RUNTIME_TENSORIO_H
