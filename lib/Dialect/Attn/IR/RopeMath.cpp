//===- RopeMath.cpp - RoPE inverse frequencies and tables in f64 ---------===//
#include "h20/Dialect/Attn/IR/RopeMath.h"

#include <algorithm>
#include <cmath>

namespace h20::rope {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// YaRN's magnitude: 0.1 * mscale * ln(scale) + 1 for scale > 1.
double yarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

/// The dim index at which `rotations` full turns fit in `maxPos` positions.
double correctionDim(double rotations, double dim, double base, double maxPos) {
  return dim * std::log(maxPos / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
}

} // namespace

std::vector<double> inverseFrequencies(const Params &p, int64_t seqLen) {
  if (!p.invFreq.empty())
    return p.invFreq;
  int64_t d = p.rotaryDim, n = d / 2;
  double base = p.theta;
  if (p.scaling == Scaling::dynamic_ntk && p.originalMaxPositions &&
      seqLen > *p.originalMaxPositions) {
    double orig = static_cast<double>(*p.originalMaxPositions);
    base = base * std::pow(p.factor * seqLen / orig - (p.factor - 1.0),
                           static_cast<double>(d) / (d - 2));
  }
  std::vector<double> f(n);
  for (int64_t j = 0; j < n; ++j)
    f[j] = 1.0 / std::pow(base, 2.0 * j / d);
  switch (p.scaling) {
  case Scaling::none:
  case Scaling::dynamic_ntk:
    return f;
  case Scaling::linear:
    for (double &x : f)
      x /= p.factor;
    return f;
  case Scaling::yarn: {
    double orig = static_cast<double>(p.originalMaxPositions.value_or(4096));
    double lo = std::floor(correctionDim(p.betaFast.value_or(32.0), d, base, orig));
    double hi = std::ceil(correctionDim(p.betaSlow.value_or(1.0), d, base, orig));
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(d - 1));
    if (lo == hi)
      hi += 0.001; // avoid a zero-width ramp (as transformers does)
    for (int64_t j = 0; j < n; ++j) {
      double ramp = std::clamp((j - lo) / (hi - lo), 0.0, 1.0);
      double extrapolation = 1.0 - ramp; // weight of the unscaled frequency
      f[j] = (f[j] / p.factor) * (1.0 - extrapolation) + f[j] * extrapolation;
    }
    return f;
  }
  case Scaling::llama3: {
    double orig = static_cast<double>(p.originalMaxPositions.value_or(8192));
    double lowF = p.lowFreqFactor.value_or(1.0), highF = p.highFreqFactor.value_or(4.0);
    double lowWavelen = orig / lowF, highWavelen = orig / highF;
    for (double &x : f) {
      double wavelen = 2.0 * kPi / x;
      if (wavelen > lowWavelen) {
        x /= p.factor;
      } else if (!(wavelen < highWavelen)) {
        double smooth = (orig / wavelen - lowF) / (highF - lowF);
        x = (1.0 - smooth) * x / p.factor + smooth * x;
      }
    }
    return f;
  }
  }
  return f;
}

double attentionFactor(const Params &p) {
  if (p.scaling != Scaling::yarn)
    return 1.0;
  if (p.attentionFactor)
    return *p.attentionFactor;
  if (p.mscale && p.mscaleAllDim && *p.mscale != 0.0 && *p.mscaleAllDim != 0.0)
    return yarnMscale(p.factor, *p.mscale) / yarnMscale(p.factor, *p.mscaleAllDim);
  return yarnMscale(p.factor, 1.0);
}

int64_t tableBlock(int64_t maxPositions) {
  int64_t block = 16;
  while (block * block < maxPositions)
    block *= 2;
  return block;
}

TwoLevelTable buildTwoLevelTable(const Params &p, int64_t maxPositions, int64_t seqLen) {
  TwoLevelTable t;
  std::vector<double> f = inverseFrequencies(p, seqLen);
  double m = attentionFactor(p);
  t.half = static_cast<int64_t>(f.size());
  t.block = tableBlock(maxPositions);
  t.coarseRows = (maxPositions + t.block - 1) / t.block;
  auto fill = [&](int64_t rows, int64_t stride, double scale, std::vector<float> &c,
                  std::vector<float> &s) {
    c.resize(rows * t.half);
    s.resize(rows * t.half);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < t.half; ++j) {
        // Position and frequency meet in f64: never rounded to a narrow type.
        double angle = static_cast<double>(r * stride) * f[j];
        c[r * t.half + j] = static_cast<float>(scale * std::cos(angle));
        s[r * t.half + j] = static_cast<float>(scale * std::sin(angle));
      }
  };
  fill(t.coarseRows, t.block, m, t.coarseCos, t.coarseSin);
  fill(t.block, 1, 1.0, t.fineCos, t.fineSin);
  return t;
}

std::pair<float, float> lookup(const TwoLevelTable &t, int64_t pos, int64_t j) {
  int64_t hi = pos / t.block, lo = pos % t.block;
  float ca = t.coarseCos[hi * t.half + j], sa = t.coarseSin[hi * t.half + j];
  float cb = t.fineCos[lo * t.half + j], sb = t.fineSin[lo * t.half + j];
  // In f32, products then sum, as the generated code computes it.
  float c = ca * cb - sa * sb;
  float s = sa * cb + ca * sb;
  return {c, s};
}

} // namespace h20::rope
