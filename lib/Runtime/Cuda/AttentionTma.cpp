//===- AttentionTma.cpp - TMA tensor maps for the attention kernel --------===//
//
// See AttentionTma.h. The box is 64 elements (128 bytes, one swizzle row)
// by 64 rows, independent of the kernel's BLOCK_N: the kernel issues
// BLOCK_N / 64 x D / 64 copies per tile, each landing in one 8 KiB
// 128B-swizzled block of its shared-memory layout (WgLayout).
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/AttentionTma.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace h20::runtime {
namespace {

constexpr int64_t kBox = 64; // elements of the dim and rows per copy

bool fail(std::string *why, const std::string &msg) {
  if (why)
    *why = msg;
  return false;
}

/// One map over the strided 4-D view (batch, head, seq, dim) at `base`.
bool encodeView(const CudaApi &api, H20TensorMap &out, const void *base,
                const long long (&stride)[4], int64_t batch, int64_t heads, int64_t seq,
                int64_t dim, const char *name, std::string *why) {
  const std::string n(name);
  if (dim % kBox)
    return fail(why, n + ": head dim " + std::to_string(dim) + " is not a multiple of 64");
  if (stride[3] != 1)
    return fail(why, n + ": dim stride " + std::to_string(stride[3]) + " is not 1");
  if (reinterpret_cast<uintptr_t>(base) % 16)
    return fail(why, n + ": base address is not 16-byte aligned");
  const int64_t sizes[4] = {dim, seq, heads, batch};
  for (int64_t s : sizes)
    if (s < 1 || s > (int64_t(1) << 32))
      return fail(why, n + ": a size is outside [1, 2^32]");
  // The kernel passes box coordinates as int32 (row + up to 256 of a tile).
  if (seq > (int64_t(1) << 31) - 512 || heads > (int64_t(1) << 31) - 1 ||
      batch > (int64_t(1) << 31) - 1)
    return fail(why, n + ": sequence length " + std::to_string(seq) +
                         " (or heads, batch) past the kernel's int32 coordinates");
  // Byte strides of the seq, head and batch dims. A dim of size 1 is never
  // stepped over, so any valid stride describes it.
  const int64_t elem[3] = {stride[2], stride[1], stride[0]};
  cuuint64_t strides[3];
  for (int i = 0; i < 3; ++i) {
    int64_t bytes = elem[i] * 2;
    if (sizes[i + 1] == 1)
      bytes = 16;
    if (bytes <= 0 || bytes % 16 || bytes >= (int64_t(1) << 40))
      return fail(why, n + ": stride " + std::to_string(elem[i]) +
                           " elements is not a positive multiple of 16 bytes below 2^40");
    strides[i] = static_cast<cuuint64_t>(bytes);
  }
  cuuint64_t dims[4];
  for (int i = 0; i < 4; ++i)
    dims[i] = static_cast<cuuint64_t>(sizes[i]);
  const cuuint32_t box[4] = {cuuint32_t(kBox), cuuint32_t(kBox), 1, 1};
  const cuuint32_t elementStrides[4] = {1, 1, 1, 1};
  static_assert(sizeof(CUtensorMap) == sizeof(H20TensorMap), "H20TensorMap is a CUtensorMap");
  CUtensorMap map;
  CUresult r = api.cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void *>(base), dims, strides, box,
      elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fail(why, n + ": cuTensorMapEncodeTiled: " + cudaErrorText(api, r));
  std::memcpy(&out, &map, sizeof map);
  return true;
}

} // namespace

void encodeAttentionTensorMaps(const CudaApi &api, H20AttnParams &p, int elemBytes,
                               int64_t headDim, int64_t headDimV, std::string *why) {
  p.tma = 0;
  std::memset(&p.tm_q, 0, sizeof p.tm_q);
  std::memset(&p.tm_k, 0, sizeof p.tm_k);
  std::memset(&p.tm_v, 0, sizeof p.tm_v);
  if (const char *env = std::getenv("H20_ATTENTION_TMA"); env && std::string(env) == "0") {
    fail(why, "H20_ATTENTION_TMA=0");
    return;
  }
  if (!api.cuTensorMapEncodeTiled) {
    fail(why, "the driver has no cuTensorMapEncodeTiled");
    return;
  }
  if (elemBytes != 2) {
    fail(why, "tensor maps are made for 16-bit elements only");
    return;
  }
  if (encodeView(api, p.tm_q, p.q, p.q_stride, p.batch, p.heads, p.sq, headDim, "q", why) &&
      encodeView(api, p.tm_k, p.k, p.k_stride, p.batch, p.kv_heads, p.skv, headDim, "k", why) &&
      encodeView(api, p.tm_v, p.v, p.v_stride, p.batch, p.kv_heads, p.skv, headDimV, "v", why))
    p.tma = 1;
}

} // namespace h20::runtime
