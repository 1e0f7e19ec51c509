//===- Fp8Kernel.h - the GPU's FP8 activation-quantising kernel -*- C++ -*-===//
//
// Names, launch geometry and NVRTC compilation of
// lib/Target/GPU/kernels/fp8_quant.cuh: the per-token-group (1 x 128)
// quantisation of a block-scaled FP8 linear's activations (the formula is
// in the kernel's header). One module holds the three input-type variants.
// Plain C++ (no MLIR). Element types: 0 float32, 1 float16, 2 bfloat16.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_FP8KERNEL_H
#define H20_TARGET_FP8KERNEL_H

#include <cstdint>
#include <string>

namespace h20 {

/// Threads per CTA (H20_FP8_THREADS): 8 warps, one 1 x 128 block each.
inline constexpr int kFp8QuantThreads = 256;
/// 1 x 128 blocks per CTA: the launch's grid is the block count with this
/// grid_div.
inline constexpr int64_t kFp8QuantBlocksPerCta = 8;

/// The quantising kernel for input element type `dt` (0, 1, 2); empty for
/// another.
std::string fp8QuantizeKernel(int dt);

/// Compiles fp8_quant.cuh for `arch` ("sm_90"; the e4m3x2 conversion needs
/// sm_89 or later) into `ptx`; false with NVRTC's `log`.
bool compileFp8Ptx(const std::string &arch, std::string &ptx, std::string &log);

} // namespace h20

#endif // H20_TARGET_FP8KERNEL_H
