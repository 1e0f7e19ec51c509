//===- WeightDerive.h - weights computed from the stored ones when loaded -*- C++ -*-===//
//
// h20-quantize-linears makes a float linear's weight W [K, N] into the two
// operands of a block-scaled FP8 GEMM, computed from W's bytes when the
// runtime loads them (manifest weight "derive"). Pure host code: no CUDA,
// unit-tested (WeightDeriveTest).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_FORMAT_WEIGHTDERIVE_H
#define H20_RUNTIME_FORMAT_WEIGHTDERIVE_H

#include "h20/Runtime/Format/Manifest.h"

#include <cstdint>
#include <string>

namespace h20::runtime {

/// The e4m3fn byte (OCP 8-bit floating point, "E4M3FN": bias 7, no
/// infinities, 0x7F / 0xFF NaN, largest finite 448) nearest to `v`, ties
/// to the even code; |v| beyond 448 saturates to +-448 (the block scales
/// keep quantised weights within it), NaN gives 0x7F.
uint8_t encodeE4m3(float v);

/// The value of e4m3fn byte `code` (NaN for 0x7F and 0xFF).
float decodeE4m3(uint8_t code);

/// The device dtype of derivation `kind`: "float8_e4m3fn" for
/// "fp8_block128", "float32" for "fp8_block128_scale", "" for an unknown
/// kind.
std::string derivedDtype(const std::string &kind);

/// Whether `spec` (WeightSpec::derive set) is a derivation deriveWeight
/// makes: a known kind, a float32 / bfloat16 / float16 source, a 2-D
/// source shape of positive dims, and the device shape that kind gives
/// ([N, K] for "fp8_block128", [ceil(N / 128), ceil(K / 128)] for
/// "fp8_block128_scale", source [K, N]). False with `error` naming what
/// differs.
bool checkDerivedWeight(const WeightSpec &spec, std::string &error);

/// Computes a derived weight (checkDerivedWeight(spec) must hold) from its
/// stored tensor `source`: K x N elements of spec.dtype, row-major. Per
/// 128 x 128 block of W^T (rows n, columns k; the last blocks may be
/// partial) the scale is max |w| / 448 in float32 (1 for an all-zero
/// block; at least FLT_MIN) and the quantised weight encodeE4m3(w /
/// scale), DeepSeek-V3's
/// block-scaled FP8 weights (technical report section 3.3; its
/// inference/kernel.py dequantises q * scale). "fp8_block128" writes N x K
/// bytes of W^T, "fp8_block128_scale" ceil(N / 128) x ceil(K / 128)
/// float32 to `dst`. Blocks of 128 rows of W^T run on the host's threads
/// (tensors of at least 2^20 elements).
void deriveWeight(const WeightSpec &spec, const void *source, void *dst);

} // namespace h20::runtime

#endif // H20_RUNTIME_FORMAT_WEIGHTDERIVE_H
