//===- RopeTableTest.cpp - two-level RoPE tables vs float64 truth --------===//
//
// The tables h20-lower-rope builds must give cos/sin within 4 fp32 ulp (of
// 1, the scale of a unit rotation: 4 * 2^-24) of the float64 truth at every
// position up to 1M, for head dims 64/128, theta 1e4/5e5 and every scaling.
// A control shows the check would catch a position rounded to bf16 before
// the product (angles collapse past position 2048 in stacks that do that).
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Attn/IR/RopeMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace h20::rope;

namespace {

constexpr int64_t kPositions[] = {0, 1, 2047, 2048, 32767, 131071, 524287, 1048575};
constexpr double kUlp = 1.0 / (1 << 24); // fp32 ulp in [0.5, 1)

Params withScaling(Scaling s, int64_t dim, double theta) {
  Params p;
  p.theta = theta;
  p.rotaryDim = dim;
  p.scaling = s;
  switch (s) {
  case Scaling::none:
    break;
  case Scaling::linear:
    p.factor = 4.0;
    break;
  case Scaling::dynamic_ntk:
    p.factor = 2.0;
    p.originalMaxPositions = 4096;
    break;
  case Scaling::yarn: // DeepSeek-V4.1-like: factor 16 over 65536 positions
    p.factor = 16.0;
    p.originalMaxPositions = 65536;
    p.betaFast = 32.0;
    p.betaSlow = 1.0;
    p.mscale = 1.0;
    p.mscaleAllDim = 0.8;
    break;
  case Scaling::llama3:
    p.factor = 8.0;
    p.originalMaxPositions = 8192;
    p.lowFreqFactor = 1.0;
    p.highFreqFactor = 4.0;
    break;
  }
  return p;
}

/// Max |table - truth| over the test positions and all pairs, in ulps of 1
/// (scaled by the magnitude factor). `roundPosition` models a broken stack.
double maxErrorUlps(const Params &p, const TwoLevelTable &t, bool bf16Position = false) {
  std::vector<double> f = inverseFrequencies(p, /*seqLen=*/1 << 20);
  double m = attentionFactor(p), worst = 0;
  for (int64_t pos : kPositions) {
    double x = static_cast<double>(pos);
    if (bf16Position) { // keep the top 8 significant bits (bf16 mantissa)
      float fp = static_cast<float>(x);
      uint32_t bits;
      std::memcpy(&bits, &fp, 4);
      bits &= 0xFFFF0000u;
      std::memcpy(&fp, &bits, 4);
      x = fp;
    }
    for (int64_t j = 0; j < t.half; ++j) {
      auto [c, s] = lookup(t, pos, j);
      double angle = x * f[j];
      worst = std::max({worst, std::fabs(c - m * std::cos(angle)) / (m * kUlp),
                        std::fabs(s - m * std::sin(angle)) / (m * kUlp)});
    }
  }
  return worst;
}

TEST(RopeTable, WithinFourUlpAtEveryPositionToOneMillion) {
  for (Scaling s : {Scaling::none, Scaling::linear, Scaling::dynamic_ntk, Scaling::yarn,
                    Scaling::llama3})
    for (int64_t dim : {64, 128})
      for (double theta : {1e4, 5e5}) {
        Params p = withScaling(s, dim, theta);
        TwoLevelTable t = buildTwoLevelTable(p, int64_t(1) << 20, /*seqLen=*/1 << 20);
        EXPECT_LE(maxErrorUlps(p, t), 4.0)
            << "scaling " << int(s) << " dim " << dim << " theta " << theta;
      }
}

TEST(RopeTable, StaysUnderSixtyFourMiBAtOneMillionPositions) {
  Params p = withScaling(Scaling::none, 128, 1e4);
  TwoLevelTable t = buildTwoLevelTable(p, int64_t(1) << 20);
  size_t bytes = 4 * (t.coarseCos.size() + t.coarseSin.size() + t.fineCos.size() +
                      t.fineSin.size());
  EXPECT_EQ(t.block, 1024);
  EXPECT_LE(bytes, size_t(64) << 20);
  EXPECT_EQ(bytes, size_t(1) << 20); // 2 levels x (cos, sin) x 1024 x 64 x 4 B
}

TEST(RopeTable, CheckCatchesPositionsRoundedToBf16) {
  Params p = withScaling(Scaling::none, 128, 1e4);
  TwoLevelTable t = buildTwoLevelTable(p, int64_t(1) << 20);
  EXPECT_GT(maxErrorUlps(p, t, /*bf16Position=*/true), 1000.0);
}

TEST(RopeMath, ScalingsMatchTheirDefinitions) {
  // linear: every frequency divided by the factor.
  Params lin = withScaling(Scaling::linear, 64, 1e4);
  Params none = withScaling(Scaling::none, 64, 1e4);
  auto fl = inverseFrequencies(lin), fn = inverseFrequencies(none);
  for (size_t j = 0; j < fl.size(); ++j)
    EXPECT_DOUBLE_EQ(fl[j], fn[j] / 4.0);
  // llama3: high frequencies (short wavelengths) unchanged, low ones / factor.
  Params l3 = withScaling(Scaling::llama3, 128, 5e5);
  auto f3 = inverseFrequencies(l3), f0 = inverseFrequencies(withScaling(Scaling::none, 128, 5e5));
  EXPECT_DOUBLE_EQ(f3.front(), f0.front());
  EXPECT_DOUBLE_EQ(f3.back(), f0.back() / 8.0);
  // yarn: extrapolated (unchanged) at high frequencies, interpolated at low
  // (past the correction dim ceil(64 ln(4096 / 2pi) / (2 ln 1e4)) = 23).
  Params y = withScaling(Scaling::yarn, 64, 1e4);
  y.originalMaxPositions = 4096;
  auto fy = inverseFrequencies(y), fb = inverseFrequencies(withScaling(Scaling::none, 64, 1e4));
  EXPECT_DOUBLE_EQ(fy.front(), fb.front());
  EXPECT_DOUBLE_EQ(fy.back(), fb.back() / 16.0);
  // yarn magnitude: (0.1 ln 16 + 1) / (0.1 * 0.8 ln 16 + 1).
  EXPECT_NEAR(attentionFactor(y), (0.1 * std::log(16.0) + 1) / (0.08 * std::log(16.0) + 1), 1e-15);
  // dynamic NTK: unchanged up to the original length, a larger base beyond.
  Params d = withScaling(Scaling::dynamic_ntk, 64, 1e4);
  EXPECT_EQ(inverseFrequencies(d, 4096), inverseFrequencies(withScaling(Scaling::none, 64, 1e4)));
  EXPECT_LT(inverseFrequencies(d, 8192).back(), inverseFrequencies(d, 4096).back());
}

} // namespace
