//===- TensorMap.h - TMA tensor maps of strided views -----------*- C++ -*-===//
//
// A kernel that loads tiles with the tensor copy engine (TMA,
// cp.async.bulk.tensor) takes a tensor map of each view it loads. Tensor maps
// hold device addresses, so they are made on the host by the driver
// (cuTensorMapEncodeTiled) for every launch: a "tensor_map" field of a
// launch's struct argument (GpuProgram.h) and the attention kernel's
// parameter in attention-check (AttentionTma.h).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_TENSORMAP_H
#define H20_RUNTIME_TENSORMAP_H

#include "h20/Runtime/Cuda/CudaDriver.h"

#include <cstdint>
#include <string>

namespace h20::runtime {

/// Makes into `out` (128 bytes, a CUtensorMap) the tiled tensor map of the
/// `rank`-D view at `base` (the address of its first element): `sizes` and
/// `strides` in elements of `elemBytes` (1, 2, 4 or 8) bytes, outermost dim
/// first, the innermost stride 1; boxes of `box` elements per dim (outermost
/// first, 1..256); `swizzle` 0, 32, 64 or 128 bytes; elements past a dim's
/// end read as zeros; L2 promotion of 256 bytes.
///
/// False with `why` (when given) where cuTensorMapEncodeTiled's rules do not
/// hold or the driver refuses: rank 1..5; base 16-byte aligned; every size in
/// [1, 2^31 - 512] (kernels address boxes with int32 coordinates, up to two
/// 256-row boxes past a dim's end); the strides of dims larger than 1
/// positive multiples of 16 bytes below 2^40 (a dim of size 1 is never
/// stepped over and gets a placeholder); the box's innermost extent a
/// multiple of 16 bytes, at most the swizzle span when swizzled. Host-only,
/// cheap (no GPU work); thread-safe. (CUDA driver API, "Tensor Map Object
/// Management", cuTensorMapEncodeTiled.)
bool encodeTensorMap(const CudaApi &api, void *out, const void *base, int64_t elemBytes, int rank,
                     const int64_t *sizes, const int64_t *strides, const int64_t *box,
                     int swizzle, std::string *why = nullptr);

} // namespace h20::runtime

#endif // H20_RUNTIME_TENSORMAP_H
