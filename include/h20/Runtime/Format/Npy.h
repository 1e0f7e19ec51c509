//===- Npy.h - NumPy .npy arrays and token-id files -------------*- C++ -*-===//
//
// Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
// (versions 1.0-3.0; little-endian, C order only).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_NPY_H
#define H20_RUNTIME_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20::runtime {

/// A dense array as read from / written to a .npy file.
struct NpyArray {
  std::string dtype;          ///< numpy descr without byte order: "i8", "i4", "f4", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  ///< C-order, little-endian
};

/// Parses .npy bytes; false with `error` naming what is malformed
/// (magic, header, byte order, Fortran order, data size).
bool parseNpy(const std::string &bytes, NpyArray &out, std::string &error);

/// Serialises an array of numpy dtype `descr` ("f4", "i8", "b1", ...,
/// little-endian) and `shape` as .npy (version 1.0).
std::string encodeNpy(const std::string &descr, const std::vector<int64_t> &shape,
                      const void *data, size_t bytes);

/// encodeNpy for float32.
std::string encodeNpyF32(const std::vector<int64_t> &shape, const float *data);

/// Token ids from `path`: an int64/int32 .npy of shape [S] or [1, S], or a
/// text file of whitespace-separated integers. Anything else (other dtypes,
/// ranks, batch != 1, non-integers, empty) is an error naming the file.
bool readTokenIds(const std::string &path, std::vector<int64_t> &ids, std::string &error);

/// readTokenIds for the bytes of a file already read; `path` only names it
/// in messages.
bool parseTokenIds(const std::string &bytes, const std::string &path, std::vector<int64_t> &ids,
                   std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_NPY_H
