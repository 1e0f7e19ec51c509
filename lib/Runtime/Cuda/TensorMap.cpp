//===- TensorMap.cpp - TMA tensor maps of strided views -------------------===//
//
// See TensorMap.h. The driver's encoder wants the dims innermost first and
// the byte strides of every dim but the innermost; the program format (and
// MLIR's memrefs) list dims outermost first, so everything is reversed here.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/TensorMap.h"

#include <cstring>

namespace h20::runtime {
namespace {

bool fail(std::string *why, const std::string &msg) {
  if (why)
    *why = msg;
  return false;
}

} // namespace

bool encodeTensorMap(const CudaApi &api, void *out, const void *base, int64_t elemBytes, int rank,
                     const int64_t *sizes, const int64_t *strides, const int64_t *box, int swizzle,
                     std::string *why) {
  if (!api.cuTensorMapEncodeTiled)
    return fail(why, "the driver has no cuTensorMapEncodeTiled");
  if (rank < 1 || rank > 5)
    return fail(why, "rank " + std::to_string(rank) + " is not in [1, 5]");
  CUtensorMapDataType type;
  switch (elemBytes) {
  case 1:
    type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    break;
  case 2:
    type = CU_TENSOR_MAP_DATA_TYPE_UINT16;
    break;
  case 4:
    type = CU_TENSOR_MAP_DATA_TYPE_UINT32;
    break;
  case 8:
    type = CU_TENSOR_MAP_DATA_TYPE_UINT64;
    break;
  default:
    return fail(why, "elements of " + std::to_string(elemBytes) + " bytes");
  }
  CUtensorMapSwizzle sw;
  switch (swizzle) {
  case 0:
    sw = CU_TENSOR_MAP_SWIZZLE_NONE;
    break;
  case 32:
    sw = CU_TENSOR_MAP_SWIZZLE_32B;
    break;
  case 64:
    sw = CU_TENSOR_MAP_SWIZZLE_64B;
    break;
  case 128:
    sw = CU_TENSOR_MAP_SWIZZLE_128B;
    break;
  default:
    return fail(why, "swizzle " + std::to_string(swizzle) + " is not 0, 32, 64 or 128");
  }
  if (reinterpret_cast<uintptr_t>(base) % 16)
    return fail(why, "base address is not 16-byte aligned");
  if (strides[rank - 1] != 1)
    return fail(why, "innermost stride " + std::to_string(strides[rank - 1]) + " is not 1");
  const int64_t innerBoxBytes = box[rank - 1] * elemBytes;
  if (innerBoxBytes % 16 || (swizzle && innerBoxBytes > swizzle))
    return fail(why, "the box's innermost " + std::to_string(innerBoxBytes) +
                         " bytes are not a multiple of 16 within the swizzle span");
  cuuint64_t dims[5], byteStrides[4];
  cuuint32_t boxDims[5], elementStrides[5];
  for (int i = 0; i < rank; ++i) {
    const int d = rank - 1 - i; // the format's dim of the driver's dim i
    if (sizes[d] < 1 || sizes[d] > (int64_t(1) << 31) - 512)
      return fail(why, "size " + std::to_string(sizes[d]) + " of dim " + std::to_string(d) +
                           " is outside [1, 2^31 - 512]");
    if (box[d] < 1 || box[d] > 256)
      return fail(why, "box " + std::to_string(box[d]) + " is not in [1, 256]");
    dims[i] = static_cast<cuuint64_t>(sizes[d]);
    boxDims[i] = static_cast<cuuint32_t>(box[d]);
    elementStrides[i] = 1;
    if (i == 0)
      continue;
    int64_t bytes = 16;
    if (sizes[d] != 1 && __builtin_mul_overflow(strides[d], elemBytes, &bytes))
      bytes = -1;
    if (bytes <= 0 || bytes % 16 || bytes >= (int64_t(1) << 40))
      return fail(why, "stride " + std::to_string(strides[d]) + " of dim " + std::to_string(d) +
                           " is not a positive multiple of 16 bytes below 2^40");
    byteStrides[i - 1] = static_cast<cuuint64_t>(bytes);
  }
  CUtensorMap map;
  CUresult r = api.cuTensorMapEncodeTiled(
      &map, type, static_cast<cuuint32_t>(rank), const_cast<void *>(base), dims, byteStrides,
      boxDims, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fail(why, "cuTensorMapEncodeTiled: " + cudaErrorText(api, r));
  std::memcpy(out, &map, sizeof map);
  return true;
}

} // namespace h20::runtime
