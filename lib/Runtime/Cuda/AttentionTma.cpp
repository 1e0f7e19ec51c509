//===- AttentionTma.cpp - TMA tensor maps for the attention kernel --------===//
//
// See AttentionTma.h. The box is 64 elements (128 bytes, one swizzle row)
// by 64 rows, independent of the kernel's BLOCK_N: the kernel issues
// BLOCK_N / 64 x D / 64 copies per tile, each landing in one 8 KiB
// 128B-swizzled block of its shared-memory layout (WgLayout). The compiler
// describes the same maps in the attention step's struct argument
// (LibraryCallSteps.cpp); this is attention-check's copy of that layout.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/AttentionTma.h"
#include "h20/Runtime/Cuda/TensorMap.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace h20::runtime {
namespace {

constexpr int64_t kBox = 64; // elements of the dim and rows per copy

/// One map over the strided 4-D view (batch, head, seq, dim) at `base`.
bool encodeView(const CudaApi &api, H20TensorMap &out, const void *base,
                const long long (&stride)[4], int64_t batch, int64_t heads, int64_t seq,
                int64_t dim, const char *name, std::string *why) {
  // The kernel issues D / 64 copies of 64 elements per row.
  if (dim % kBox) {
    if (why)
      *why = std::string(name) + ": head dim " + std::to_string(dim) + " is not a multiple of 64";
    return false;
  }
  const int64_t sizes[4] = {batch, heads, seq, dim};
  const int64_t strides[4] = {stride[0], stride[1], stride[2], stride[3]};
  const int64_t box[4] = {1, 1, kBox, kBox};
  static_assert(sizeof(CUtensorMap) == sizeof(H20TensorMap), "H20TensorMap is a CUtensorMap");
  std::string reason;
  if (encodeTensorMap(api, &out, base, 2, 4, sizes, strides, box, 128, &reason))
    return true;
  if (why)
    *why = std::string(name) + ": " + reason;
  return false;
}

} // namespace

bool tensorMapsDisabled() {
  const char *env = std::getenv("H20_ATTENTION_TMA");
  return env && std::string(env) == "0";
}

void encodeAttentionTensorMaps(const CudaApi &api, H20AttnParams &p, int elemBytes,
                               int64_t headDim, int64_t headDimV, std::string *why) {
  p.tma = 0;
  std::memset(&p.tm_q, 0, sizeof p.tm_q);
  std::memset(&p.tm_k, 0, sizeof p.tm_k);
  std::memset(&p.tm_v, 0, sizeof p.tm_v);
  if (tensorMapsDisabled()) {
    if (why)
      *why = "H20_ATTENTION_TMA=0";
    return;
  }
  if (elemBytes != 2) {
    if (why)
      *why = "tensor maps are made for 16-bit elements only";
    return;
  }
  if (encodeView(api, p.tm_q, p.q, p.q_stride, p.batch, p.heads, p.sq, headDim, "q", why) &&
      encodeView(api, p.tm_k, p.k, p.k_stride, p.batch, p.kv_heads, p.skv, headDim, "k", why) &&
      encodeView(api, p.tm_v, p.v, p.v_stride, p.batch, p.kv_heads, p.skv, headDimV, "v", why))
    p.tma = 1;
  else
    std::memset(&p.tm_q, 0, 3 * sizeof p.tm_q);
}

} // namespace h20::runtime
