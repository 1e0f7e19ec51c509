//===- WeightDeriveTest.cpp - weights quantised to block-scaled FP8 -------===//
//
// h20-quantize-linears' weights (WeightDerive.h): the e4m3fn encoding
// against a brute-force nearest-value search over all 256 codes, the block
// scales and the transposed layout against a direct computation, partial
// blocks, and the manifest's checks of a derived weight.
//
//===----------------------------------------------------------------------===//
#include "ProgramFixtures.h"

#include "h20/Runtime/Format/WeightDerive.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>

namespace {
using namespace h20::test::base_fixture;

/// The finite e4m3fn code nearest to `v` by value, ties to the even code
/// (mantissa bit 0 clear); beyond 448 the largest finite value.
uint8_t nearestE4m3(float v) {
  uint8_t best = 0;
  double bestErr = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float d = decodeE4m3(static_cast<uint8_t>(c));
    if (std::isnan(d) || std::signbit(d) != std::signbit(v))
      continue;
    const double err = std::fabs(static_cast<double>(d) - static_cast<double>(v));
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) {
      best = static_cast<uint8_t>(c);
      bestErr = err;
    }
  }
  return best;
}

TEST(WeightDerive, E4m3EncodesTheNearestValue) {
  // Every finite code round-trips.
  for (int c = 0; c < 256; ++c) {
    const float d = decodeE4m3(static_cast<uint8_t>(c));
    if (!std::isnan(d))
      EXPECT_EQ(encodeE4m3(d), c) << "code " << c << " = " << d;
  }
  EXPECT_EQ(decodeE4m3(0x7E), 448.0f);
  EXPECT_EQ(decodeE4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(encodeE4m3(1000.0f), 0x7E);  // saturates
  EXPECT_EQ(encodeE4m3(-1000.0f), 0xFE);
  EXPECT_EQ(encodeE4m3(NAN), 0x7F);
  EXPECT_EQ(encodeE4m3(INFINITY), 0x7E);
  EXPECT_EQ(encodeE4m3(-INFINITY), 0xFE);
  EXPECT_EQ(encodeE4m3(464.0f), 0x7E); // the midpoint to 480 (NaN) saturates
  EXPECT_EQ(encodeE4m3(-0.0f), 0x80);
  // Midpoints round to the even code: 1 + 1/16 lies between 1 (0x38) and
  // 1.125 (0x39); 1 + 3/16 between 1.125 and 1.25 (0x3A).
  EXPECT_EQ(encodeE4m3(1.0625f), 0x38);
  EXPECT_EQ(encodeE4m3(1.1875f), 0x3A);
  // Random values over the whole range, subnormals included.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-12, 9);
  for (int i = 0; i < 20000; ++i) {
    const float v = std::ldexp(mant(rng), exp(rng));
    ASSERT_EQ(encodeE4m3(v), nearestE4m3(v)) << v;
  }
}

/// A derived weight of source [K, N] (float32) and `kind`.
WeightSpec derived(const std::string &kind, int64_t k, int64_t n) {
  WeightSpec s;
  s.name = "w";
  s.dtype = "float32";
  s.derive = kind;
  s.sourceShape = {k, n};
  s.shape = kind == "fp8_block128" ? std::vector<int64_t>{n, k}
                                   : std::vector<int64_t>{(n + 127) / 128, (k + 127) / 128};
  return s;
}

TEST(WeightDerive, BlockScalesAndTransposedCodes) {
  // K = 200, N = 130: blocks of 128 x 128 with partial ones on both axes;
  // one block all zero (scale 1).
  const int64_t k = 200, n = 130;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j)
      w[static_cast<size_t>(i * n + j)] = (i >= 128 && j >= 128) ? 0.0f : g(rng) * (1 + j % 7);
  WeightSpec qs = derived("fp8_block128", k, n), ss = derived("fp8_block128_scale", k, n);
  std::string error;
  ASSERT_TRUE(checkDerivedWeight(qs, error)) << error;
  ASSERT_TRUE(checkDerivedWeight(ss, error)) << error;
  std::vector<uint8_t> q(static_cast<size_t>(n * k));
  std::vector<float> scale(4);
  deriveWeight(qs, w.data(), q.data());
  deriveWeight(ss, w.data(), scale.data());
  // Scales [ceil(N / 128), ceil(K / 128)] = [2, 2]: block (nb, kb).
  for (int64_t nb = 0; nb < 2; ++nb)
    for (int64_t kb = 0; kb < 2; ++kb) {
      float amax = 0;
      for (int64_t i = kb * 128; i < std::min<int64_t>(k, kb * 128 + 128); ++i)
        for (int64_t j = nb * 128; j < std::min<int64_t>(n, nb * 128 + 128); ++j)
          amax = std::max(amax, std::fabs(w[static_cast<size_t>(i * n + j)]));
      EXPECT_EQ(scale[static_cast<size_t>(nb * 2 + kb)], amax > 0 ? amax / 448.0f : 1.0f)
          << "block " << nb << ", " << kb;
    }
  // Codes of W^T [N, K]: each the nearest e4m3 of w / its block's scale,
  // so q * scale is within half an e4m3 step (2^-4 relative, 2^-10 x
  // scale near zero) of w.
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) {
      const float wv = w[static_cast<size_t>(i * n + j)];
      const float s = scale[static_cast<size_t>((j / 128) * 2 + i / 128)];
      const uint8_t c = q[static_cast<size_t>(j * k + i)];
      ASSERT_EQ(c, nearestE4m3(wv / s)) << "n " << j << ", k " << i;
      EXPECT_LE(std::fabs(decodeE4m3(c) * s - wv), std::fabs(wv) / 16 + s * std::ldexp(1.0f, -10));
    }
  // Each block's largest |w| becomes 448 (the block's full range); the
  // all-zero block, zeros.
  for (int64_t nb = 0; nb < 2; ++nb)
    for (int64_t kb = 0; kb < 2; ++kb) {
      float top = 0;
      for (int64_t j = nb * 128; j < std::min<int64_t>(n, nb * 128 + 128); ++j)
        for (int64_t i = kb * 128; i < std::min<int64_t>(k, kb * 128 + 128); ++i)
          top = std::max(top, std::fabs(decodeE4m3(q[static_cast<size_t>(j * k + i)])));
      EXPECT_EQ(top, nb == 1 && kb == 1 ? 0.0f : 448.0f) << "block " << nb << ", " << kb;
    }
}

TEST(WeightDerive, TinyBlocksAndThreads) {
  // A block whose max |w| / 448 underflows float32 gets a scale of at
  // least FLT_MIN: finite codes, no division by zero.
  {
    WeightSpec qs = derived("fp8_block128", 16, 16), ss = derived("fp8_block128_scale", 16, 16);
    std::vector<float> w(256, 1e-44f);
    std::vector<uint8_t> q(256);
    float scale = 0;
    deriveWeight(qs, w.data(), q.data());
    deriveWeight(ss, w.data(), &scale);
    EXPECT_GE(scale, FLT_MIN);
    for (uint8_t c : q)
      ASSERT_TRUE(std::isfinite(decodeE4m3(c))) << int(c);
  }
  // 1024 x 1536 (2^20 and more elements: the threaded path) against the
  // rule on every element of a few blocks.
  const int64_t k = 1024, n = 1536;
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(k * n));
  for (float &v : w)
    v = g(rng);
  WeightSpec qs = derived("fp8_block128", k, n), ss = derived("fp8_block128_scale", k, n);
  std::vector<uint8_t> q(static_cast<size_t>(k * n));
  std::vector<float> scale(static_cast<size_t>((n / 128) * (k / 128)));
  deriveWeight(qs, w.data(), q.data());
  deriveWeight(ss, w.data(), scale.data());
  const int64_t kb = k / 128;
  for (int64_t j : {0L, 127L, 128L, 777L, 1535L})
    for (int64_t i = 0; i < k; ++i) {
      const float s = scale[static_cast<size_t>((j / 128) * kb + i / 128)];
      ASSERT_EQ(q[static_cast<size_t>(j * k + i)], nearestE4m3(w[static_cast<size_t>(i * n + j)] / s))
          << "n " << j << ", k " << i;
    }
}

TEST(WeightDerive, Bf16SourceAndChecks) {
  // A bfloat16 source [16, 16] of ones: scale 1 / 448, codes of 448.
  WeightSpec s = derived("fp8_block128", 16, 16);
  s.dtype = "bfloat16";
  std::vector<uint16_t> ones(256, 0x3F80);
  std::vector<uint8_t> q(256);
  std::string error;
  ASSERT_TRUE(checkDerivedWeight(s, error)) << error;
  deriveWeight(s, ones.data(), q.data());
  for (uint8_t c : q)
    ASSERT_EQ(c, 0x7E);
  // What checkDerivedWeight refuses.
  WeightSpec bad = s;
  bad.derive = "int4";
  EXPECT_FALSE(checkDerivedWeight(bad, error));
  EXPECT_NE(error.find("unknown derive 'int4'"), std::string::npos) << error;
  bad = s;
  bad.shape = {16, 8};
  EXPECT_FALSE(checkDerivedWeight(bad, error));
  EXPECT_NE(error.find("gives [16, 16], not the weight's shape"), std::string::npos) << error;
  bad = s;
  bad.dtype = "int8";
  EXPECT_FALSE(checkDerivedWeight(bad, error));
  bad = s;
  bad.sourceShape = {16};
  EXPECT_FALSE(checkDerivedWeight(bad, error));
}

TEST(WeightDerive, ManifestParsesAndChecksDerivedWeights) {
  json m = baseManifest();
  m["weights"].push_back({{"name", "w0.fp8"}, {"file", "m.bin"}, {"dtype", "float32"},
                          {"shape", {8, 4}}, {"offset", 0}, {"length", 128},
                          {"derive", "fp8_block128"}, {"source_shape", {4, 8}}});
  m["weights"].push_back({{"name", "w0.fp8.scale"}, {"file", "m.bin"}, {"dtype", "float32"},
                          {"shape", {1, 1}}, {"offset", 0}, {"length", 128},
                          {"derive", "fp8_block128_scale"}, {"source_shape", {4, 8}}});
  Manifest man;
  std::string error;
  ASSERT_TRUE(parseManifest(m.dump(), man, error)) << error;
  ASSERT_EQ(man.weights.size(), 4u);
  EXPECT_EQ(man.weights[2].derive, "fp8_block128");
  EXPECT_EQ(man.weights[2].sourceShape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(man.weights[3].shape, (std::vector<int64_t>{1, 1}));
  m["weights"][2]["shape"] = {4, 8};
  EXPECT_FALSE(parseManifest(m.dump(), man, error));
  EXPECT_NE(error.find("weight 2 ('w0.fp8'): derive 'fp8_block128' of a [4, 8] source gives "
                       "[8, 4], not the weight's shape"),
            std::string::npos)
      << error;
}

} // namespace
