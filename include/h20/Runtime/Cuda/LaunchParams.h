//===- LaunchParams.h - the parameter bytes of a kernel launch --*- C++ -*-===//
//
// A launch step's arguments (GpuProgram.h) become the kernelParams array of
// cuLaunchKernel / a CUDA graph's kernel node: one host buffer per parameter.
// Plain host code (no GPU work), so it is tested without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_LAUNCHPARAMS_H
#define H20_RUNTIME_LAUNCHPARAMS_H

#include "h20/Runtime/Cuda/CudaDriver.h"
#include "h20/Runtime/Format/GpuProgram.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace h20::runtime {

/// The bytes of a launch's kernel parameters, each at its own offset of one
/// 64-byte aligned buffer; unused bytes are zero, so two launches with equal
/// parameters compare equal byte for byte.
class KernelParams {
public:
  void clear();
  /// Appends a parameter of `bytes` bytes aligned to `align` (a power of two
  /// <= 64) and returns its bytes, zeroed; valid until the next append.
  unsigned char *append(size_t bytes, size_t align);
  /// The kernelParams array: one pointer per parameter, into this object
  /// (valid until it changes).
  void **pointers();
  size_t count() const { return offsets.size(); }
  bool operator==(const KernelParams &o) const;

private:
  struct alignas(64) Block {
    unsigned char b[64];
  };
  std::vector<Block> storage;
  std::vector<size_t> offsets, sizes;
  size_t used = 0;
  std::vector<void *> ptrs;
};

/// Packs the arguments of launch `step`, resolved for this chunk as `r`,
/// into `out` (cleared first): i64 / i32 / f32 / f64 / f16 / bf16 as one
/// parameter each (in an 8-byte slot); a memref as 3 + 2*rank 8-byte
/// parameters (MLIR's expanded descriptor); a struct as one parameter of
/// its bytes, with pointers at address(buffer) + offset * element size and
/// tensor maps made by encodeTensorMap. `address` gives a buffer's device
/// address. When a tensor map of a struct cannot be made (or
/// tensorMapsDisabled()), all of that struct's maps are zero and its
/// tensor_maps_valid field is 0; `why` (when given) then says why, else it
/// is left as it is. Never fails otherwise: resolveStep checked the rest.
void packLaunchParams(const GpuProgram &program, const LaunchStep &step, const ResolvedLaunch &r,
                      const std::function<uint64_t(int)> &address, const CudaApi &api,
                      KernelParams &out, std::string *why = nullptr);

} // namespace h20::runtime

#endif // H20_RUNTIME_LAUNCHPARAMS_H
