//===- TensorIOFuzzer.cpp - libFuzzer target: ids and tensor readers -----===//
//
// The bytes of an h20-run input file through every reader: token ids
// (--ids: .npy or text), tensors (--input: .npy or TensorProto .pb) and the
// .npy parser itself. A tensor that is read must be self-consistent (its data
// is exactly its element count times its dtype size), and a .npy array of a
// runtime dtype must survive encodeNpy -> parseNpy unchanged.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace h20::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  std::string error;

  std::vector<int64_t> ids;
  if (parseTokenIds(bytes, "fuzz.ids", ids, error) && ids.empty())
    std::abort(); // success means at least one id

  HostTensor t;
  if (parseTensorBytes(bytes, "fuzz.pb", t, error)) {
    int64_t count;
    if (!elementCount(t.shape, count) || dtypeSize(t.dtype) == 0 ||
        static_cast<uint64_t>(count * dtypeSize(t.dtype)) != t.data.size()) {
      std::fprintf(stderr, "tensor of dtype %s with %zu bytes does not match its shape\n",
                   t.dtype.c_str(), t.data.size());
      std::abort();
    }
  }

  NpyArray a;
  if (parseNpy(bytes, a, error)) {
    static const char *kRuntimeDtypes[] = {"f4", "f8", "f2", "i8", "i4", "i1", "b1"};
    for (const char *d : kRuntimeDtypes) {
      if (a.dtype != d)
        continue;
      NpyArray b;
      std::string again = encodeNpy(a.dtype, a.shape, a.data.data(), a.data.size());
      if (!parseNpy(again, b, error) || b.dtype != a.dtype || b.shape != a.shape ||
          b.data != a.data) {
        std::fprintf(stderr, "encodeNpy/parseNpy round trip changed the array\n");
        std::abort();
      }
    }
  }
  return 0;
}
