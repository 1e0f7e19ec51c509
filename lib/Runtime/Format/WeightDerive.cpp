//===- WeightDerive.cpp - weights computed from the stored ones -----------===//
//
// See WeightDerive.h.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/WeightDerive.h"

#include "h20/Runtime/Format/GpuProgram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <thread>
#include <vector>

namespace h20::runtime {

namespace {
constexpr int64_t kBlock = 128;
constexpr float kE4m3Max = 448.0f;
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
} // namespace

uint8_t encodeE4m3(float v) {
  if (std::isnan(v))
    return 0x7F;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(v));
  if (a >= 448.0)
    return sign | 0x7E; // saturates (infinities too): 0x7F is NaN
  // Subnormals (and zero): multiples of 2^-9 below 2^-6; 8 x 2^-9 rounds
  // up into the smallest normal, whose code is 8 as well.
  if (a < std::ldexp(1.0, -6))
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  int e;
  const double f = std::frexp(a, &e); // a = f 2^e, f in [0.5, 1)
  int exponent = e - 1;               // a in [2^exponent, 2^(exponent + 1))
  int mantissa = static_cast<int>(std::nearbyint((2.0 * f - 1.0) * 8.0));
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  const int biased = exponent + 7;
  if (biased > 15 || (biased == 15 && mantissa == 7))
    return sign | 0x7E; // 448: no infinities, 0x7F is NaN
  return sign | static_cast<uint8_t>(biased << 3 | mantissa);
}

float decodeE4m3(uint8_t code) {
  const int biased = (code >> 3) & 0xF, mantissa = code & 7;
  if (biased == 15 && mantissa == 7)
    return std::nanf("");
  const double m = biased == 0 ? std::ldexp(mantissa, -9)
                               : std::ldexp(1.0 + mantissa / 8.0, biased - 7);
  return static_cast<float>(code & 0x80 ? -m : m);
}

std::string derivedDtype(const std::string &kind) {
  return kind == "fp8_block128"         ? "float8_e4m3fn"
         : kind == "fp8_block128_scale" ? "float32"
                                        : "";
}

bool checkDerivedWeight(const WeightSpec &spec, std::string &error) {
  if (spec.dtype != "float32" && spec.dtype != "bfloat16" && spec.dtype != "float16") {
    error = "derive '" + spec.derive + "' needs a float32, bfloat16 or float16 source, got " +
            spec.dtype;
    return false;
  }
  if (spec.sourceShape.size() != 2 || spec.sourceShape[0] < 1 || spec.sourceShape[1] < 1) {
    error = "derive '" + spec.derive + "' needs a 2-D source_shape [K, N] of positive dims";
    return false;
  }
  const int64_t k = spec.sourceShape[0], n = spec.sourceShape[1];
  std::vector<int64_t> want;
  if (spec.derive == "fp8_block128")
    want = {n, k};
  else if (spec.derive == "fp8_block128_scale")
    want = {ceilDiv(n, kBlock), ceilDiv(k, kBlock)};
  else {
    error = "unknown derive '" + spec.derive + "' (fp8_block128, fp8_block128_scale)";
    return false;
  }
  if (spec.shape != want) {
    error = "derive '" + spec.derive + "' of a [" + std::to_string(k) + ", " + std::to_string(n) +
            "] source gives [" + std::to_string(want[0]) + ", " + std::to_string(want[1]) +
            "], not the weight's shape";
    return false;
  }
  return true;
}

void deriveWeight(const WeightSpec &spec, const void *source, void *dst) {
  const int64_t k = spec.sourceShape[0], n = spec.sourceShape[1];
  const int64_t nb = ceilDiv(n, kBlock), kb = ceilDiv(k, kBlock);
  const bool scales = spec.derive == "fp8_block128_scale";
  const size_t srcEs = static_cast<size_t>(dtypeSize(spec.dtype));
  // One 128 x 128 block of W^T at a time (rows j of W^T, columns i):
  // its 128 rows of W converted to float32, the scale, then the codes
  // (cache-sized tiles: the transposed writes stay within the block).
  // Row-blocks of W^T are independent: one thread each, in turns.
  auto blockRow = [&](int64_t bn) {
    const int64_t j0 = bn * kBlock, j1 = std::min(n, j0 + kBlock);
    std::vector<float> tile(static_cast<size_t>(kBlock * (j1 - j0)));
    for (int64_t bk = 0; bk < kb; ++bk) {
      const int64_t i0 = bk * kBlock, i1 = std::min(k, i0 + kBlock);
      float amax = 0.0f;
      for (int64_t i = i0; i < i1; ++i) {
        float *row = tile.data() + (i - i0) * (j1 - j0);
        convertElements(spec.dtype, static_cast<const char *>(source) +
                                        static_cast<size_t>(i * n + j0) * srcEs,
                        "float32", row, static_cast<size_t>(j1 - j0));
        for (int64_t j = 0; j < j1 - j0; ++j)
          amax = std::max(amax, std::fabs(row[j]));
      }
      // A block of zeros (or of values below float32's normal range,
      // whose max / 448 would underflow) gets a scale that divides
      // without overflow.
      const float s = amax > 0.0f ? std::max(amax / kE4m3Max, FLT_MIN) : 1.0f;
      if (scales) {
        static_cast<float *>(dst)[bn * kb + bk] = s;
        continue;
      }
      auto *q = static_cast<uint8_t *>(dst);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i)
          q[j * k + i] = encodeE4m3(tile[static_cast<size_t>((i - i0) * (j1 - j0) + (j - j0))] / s);
    }
  };
  const int64_t workers =
      std::min<int64_t>(nb, std::max(1u, std::thread::hardware_concurrency()));
  if (workers <= 1 || k * n < (int64_t(1) << 20)) {
    for (int64_t bn = 0; bn < nb; ++bn)
      blockRow(bn);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < workers; ++t)
    pool.emplace_back([&, t] {
      for (int64_t bn = t; bn < nb; bn += workers)
        blockRow(bn);
    });
  for (std::thread &th : pool)
    th.join();
}

} // namespace h20::runtime
