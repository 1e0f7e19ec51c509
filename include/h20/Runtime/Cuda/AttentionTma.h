//===- AttentionTma.h - TMA tensor maps for the attention kernel --*- C++ -*-===//
//
// The wgmma attention kernel (attention.cuh, kind 1) loads Q, K and V tiles
// with the tensor copy engine (TMA, cp.async.bulk.tensor) when its parameter
// carries tensor maps for them. Tensor maps are made on the host by the
// driver (cuTensorMapEncodeTiled). A compiled program's attention step
// names them as tensor_map fields of its struct argument (GpuProgram.h);
// attention-check, which launches the kernel on its own, fills them into
// H20AttnParams with this.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_ATTENTIONTMA_H
#define H20_RUNTIME_ATTENTIONTMA_H

#include "h20/Runtime/Cuda/AttentionParams.h"
#include "h20/Runtime/Cuda/CudaDriver.h"

#include <string>

namespace h20::runtime {

/// Fills p.tm_q, p.tm_k and p.tm_v and sets p.tma = 1 when all three views
/// can be described as tensor maps; otherwise sets p.tma = 0 (the kernel
/// then uses cp.async) and, if `why` is given, says which rule failed.
///
/// Each map is 4-D over 16-bit elements (`elemBytes` must be 2), dims
/// (dim, seq, head, batch) = (D, sq, heads, batch) for Q and (D or Dv, skv,
/// kv_heads, batch) for K and V, strides taken from p.*_stride (elements,
/// converted to bytes), boxes of 64 x 64 (64 elements of the dim, 64 rows),
/// CU_TENSOR_MAP_SWIZZLE_128B, zero fill out of bounds (rows past sq / skv
/// read as zeros, which is what the kernel's cp.async path writes too).
///
/// Rules (CUDA driver API, cuTensorMapEncodeTiled): the driver has the
/// function; `headDim` and `headDimV` are multiples of 64; dim stride 1;
/// base address 16-byte aligned; the seq, head and batch strides of dims
/// larger than 1 are positive multiples of 16 bytes below 2^40 (a dim of
/// size 1 gets a placeholder stride); every size in [1, 2^31 - 512] (the
/// kernel's coordinates are int32; encodeTensorMap, TensorMap.h). The
/// environment variable H20_ATTENTION_TMA=0 turns tensor maps off (for
/// comparisons).
///
/// p's pointers, strides and sizes must already be set. Host-only, cheap (no
/// GPU work); thread-safe.
void encodeAttentionTensorMaps(const CudaApi &api, H20AttnParams &p, int elemBytes,
                               int64_t headDim, int64_t headDimV, std::string *why = nullptr);

/// True when the environment says H20_ATTENTION_TMA=0: no tensor maps are
/// made (here and for a launch's tensor_map fields), so kernels that can
/// load without them use cp.async (for comparisons).
bool tensorMapsDisabled();

} // namespace h20::runtime

#endif // H20_RUNTIME_ATTENTIONTMA_H
