//===- RopeMath.h - RoPE inverse frequencies and tables in f64 --*- C++ -*-===//
//
// One implementation of RoPE frequency scaling, shared by attn.rope's
// reference decomposition and h20-lower-rope's tables. Formulas follow
// Hugging Face transformers, src/transformers/modeling_rope_utils.py
// (_compute_default/linear/dynamic_ntk/yarn/llama3_parameters), in f64.
//
//===----------------------------------------------------------------------===//
#ifndef H20_DIALECT_ATTN_IR_ROPEMATH_H
#define H20_DIALECT_ATTN_IR_ROPEMATH_H

#include <cstdint>
#include <optional>
#include <vector>

namespace h20::rope {

enum class Scaling { none, linear, dynamic_ntk, yarn, llama3 };

/// Everything that determines a RoPE's angles; attribute names of attn.rope.
struct Params {
  double theta = 10000.0;
  int64_t rotaryDim = 0;
  Scaling scaling = Scaling::none;
  double factor = 1.0;
  std::optional<int64_t> originalMaxPositions;
  std::optional<double> betaFast, betaSlow, mscale, mscaleAllDim, attentionFactor;
  std::optional<double> lowFreqFactor, highFreqFactor;
  /// Explicit inverse frequencies (attn.rope's inv_freq): when not empty,
  /// they are inv_freq itself (rotaryDim / 2 values, scaling none).
  std::vector<double> invFreq;
};

/// inv_freq[j], j < rotaryDim / 2, in f64. `seqLen` is the prompt length,
/// used by dynamic NTK only (the base grows once seqLen exceeds the original
/// maximum; HF `_compute_dynamic_ntk_parameters`).
std::vector<double> inverseFrequencies(const Params &p, int64_t seqLen = 0);

/// The magnitude factor multiplying cos and sin: YaRN's attention_factor
/// (explicit, or from mscale / mscale_all_dim, else 0.1 ln(factor) + 1), 1
/// for every other scaling.
double attentionFactor(const Params &p);

/// Two-level table: position p = hi * block + lo; coarse[hi][j] holds
/// (cos, sin)(hi * block * f_j) times attentionFactor, fine[lo][j] holds
/// (cos, sin)(lo * f_j). cos(a + b) = cos a cos b - sin a sin b (and the sin
/// analogue) recombines them; each entry is rounded once from f64 to f32.
struct TwoLevelTable {
  int64_t block = 0, coarseRows = 0, half = 0;
  std::vector<float> coarseCos, coarseSin, fineCos, fineSin; ///< row-major [rows][half]
};

/// Tables covering positions [0, maxPositions); block = the power of two
/// at or above sqrt(maxPositions) (at least 16), so both levels stay small:
/// 1M positions, 64 pairs -> 2 x 2 x 1024 x 64 x 4 B = 1 MiB.
TwoLevelTable buildTwoLevelTable(const Params &p, int64_t maxPositions, int64_t seqLen = 0);

/// (cos, sin) of position `pos`, pair `j`, recombined from the table in f32
/// arithmetic, as the generated code does.
std::pair<float, float> lookup(const TwoLevelTable &t, int64_t pos, int64_t j);

/// The block size buildTwoLevelTable chooses for `maxPositions`.
int64_t tableBlock(int64_t maxPositions);

} // namespace h20::rope

#endif // H20_DIALECT_ATTN_IR_ROPEMATH_H
