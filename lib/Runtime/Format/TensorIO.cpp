//===- TensorIO.cpp - host tensors from/to .npy and TensorProto .pb ------===//
#include "h20/Runtime/Format/TensorIO.h"

#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/Npy.h"

#include <onnx/onnx_pb.h>

#include <cstring>

namespace h20::runtime {
namespace {

struct DtypeInfo {
  const char *name, *npy;
  int onnx;       ///< TensorProto.DataType code (onnx/onnx.proto)
  int64_t bytes;
};
// The one table of the dtypes h20's runtime moves.
const DtypeInfo kDtypes[] = {
    {"float32", "f4", 1, 4}, {"float64", "f8", 11, 8}, {"float16", "f2", 10, 2},
    {"bfloat16", "", 16, 2}, {"int64", "i8", 7, 8},    {"int32", "i4", 6, 4},
    {"int8", "i1", 3, 1},    {"bool", "b1", 9, 1},
    // OCP E4M3FN (ONNX FLOAT8E4M3FN): weights of block-scaled FP8 linears;
    // numpy has no such dtype, so no .npy code.
    {"float8_e4m3fn", "", 17, 1},
};

const DtypeInfo *byName(const std::string &n) {
  for (const DtypeInfo &d : kDtypes)
    if (n == d.name)
      return &d;
  return nullptr;
}


bool fromProto(const ::onnx::TensorProto &p, HostTensor &t, std::string &error) {
  const DtypeInfo *d = nullptr;
  for (const DtypeInfo &x : kDtypes)
    if (x.onnx == p.data_type())
      d = &x;
  if (!d) {
    error = "TensorProto dtype code " + std::to_string(p.data_type()) + " is not supported";
    return false;
  }
  t.dtype = d->name;
  t.name = p.name();
  t.shape.assign(p.dims().begin(), p.dims().end());
  int64_t n = 0, es = dtypeSize(t.dtype);
  if (!elementCount(t.shape, n)) {
    error = "TensorProto has a negative dimension or more than 2^50 elements";
    return false;
  }
  // The sizes are checked against the data the message holds before any
  // buffer is allocated: the dims alone may claim petabytes.
  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != n * es) {
      error = "TensorProto raw_data holds " + std::to_string(p.raw_data().size()) +
              " bytes but its shape needs " + std::to_string(n * es);
      return false;
    }
    t.data.assign(p.raw_data().begin(), p.raw_data().end());
    return true;
  }
  int64_t have = p.data_type() == 1    ? p.float_data_size()
                 : p.data_type() == 11 ? p.double_data_size()
                 : p.data_type() == 7  ? p.int64_data_size()
                                       : p.int32_data_size();
  if (have != n) {
    error = "TensorProto holds " + std::to_string(have) + " values but its shape needs " +
            std::to_string(n);
    return false;
  }
  t.data.resize(n * es);
  if (n == 0)
    return true;
  uint8_t *out = t.data.data();
  switch (p.data_type()) {
  case 1:
    std::memcpy(out, p.float_data().data(), n * 4);
    return true;
  case 11:
    std::memcpy(out, p.double_data().data(), n * 8);
    return true;
  case 7:
    std::memcpy(out, p.int64_data().data(), n * 8);
    return true;
  default: // int32_data carries int32, int8, bool, float16 and bfloat16 bits
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = p.int32_data(i);
      std::memcpy(out + i * es, &v, es); // little-endian: low bytes first
    }
    return true;
  }
}

} // namespace

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    r += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return r + "]";
}

int64_t dtypeSize(const std::string &dtype) {
  const DtypeInfo *d = byName(dtype);
  return d ? d->bytes : 0;
}

bool elementCount(const std::vector<int64_t> &shape, int64_t &count) {
  constexpr int64_t kMax = int64_t(1) << 50;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > kMax / d))
      return false;
    n *= d;
  }
  count = n;
  return true;
}

bool readTensorFile(const std::string &path, HostTensor &t, std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  return parseTensorBytes(bytes, path, t, error);
}

bool parseTensorBytes(const std::string &bytes, const std::string &path, HostTensor &t,
                      std::string &error) {
  if (bytes.size() >= 6 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0) {
    NpyArray a;
    if (!parseNpy(bytes, a, error)) {
      error = "'" + path + "': " + error;
      return false;
    }
    t.dtype.clear();
    for (const DtypeInfo &d : kDtypes)
      if (a.dtype == d.npy)
        t.dtype = d.name;
    if (t.dtype.empty()) {
      error = "'" + path + "' has unsupported .npy dtype '" + a.dtype + "'";
      return false;
    }
    t.shape = a.shape;
    t.data = std::move(a.data);
    return true;
  }
  ::onnx::TensorProto p;
  if (bytes.size() > (size_t(1) << 31) - 1 ||
      !p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    error = "'" + path + "' is neither a .npy file nor a serialized TensorProto";
    return false;
  }
  if (!fromProto(p, t, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  return true;
}

std::string backendTestFile(const std::string &dir, const char *kind, size_t j) {
  return dir + "/" + kind + "_" + std::to_string(j) + ".pb";
}

bool writeTensorFile(const std::string &path, const HostTensor &t, std::string &error) {
  const DtypeInfo *d = byName(t.dtype);
  if (!d) {
    error = "cannot write dtype '" + t.dtype + "'";
    return false;
  }
  std::string out;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    if (!*d->npy) {
      error = "'" + path + "': .npy has no " + t.dtype + "; write a .pb instead";
      return false;
    }
    out = encodeNpy(d->npy, t.shape, t.data.data(), t.data.size());
  } else {
    ::onnx::TensorProto p;
    p.set_name(t.name);
    p.set_data_type(d->onnx);
    for (int64_t s : t.shape)
      p.add_dims(s);
    p.set_raw_data(t.data.data(), t.data.size());
    out = p.SerializeAsString();
  }
  return writeFileAtomically(path, out, error);
}

} // namespace h20::runtime
