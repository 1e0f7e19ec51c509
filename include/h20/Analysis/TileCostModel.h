//===- TileCostModel.h - analytic tile choice per target --------*- C++ -*-===//
//
// Estimates the time of attention, GEMM and memory-bound kernels for a tile
// candidate on a target and picks the fastest that fits. Attention follows the
// FlashAttention-3 structure (Shah et al., 2024): a producer warpgroup loads
// K/V tiles by TMA into a `stages`-deep ring, `warpgroups` consumer
// warpgroups each own 64 query rows (block_m = 64 x warpgroups) and overlap
// softmax with wgmma when there are two or more. The time of a kernel is the
// makespan of its tiles on the target's SMs: CTAs in launch order onto the
// earliest free slot (wave quantisation), or, when persistent, longest tile
// first (causal-aware order). Per-step time is max(MMA, softmax, L2 load)
// when overlapped, their sum otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef H20_ANALYSIS_TILECOSTMODEL_H
#define H20_ANALYSIS_TILECOSTMODEL_H

#include "h20/Analysis/TargetDescription.h"

#include <string>
#include <vector>

namespace h20 {

struct AttentionShape {
  int64_t batch = 1, heads = 1, seqQ = 1, seqKv = 1, headDim = 128, headDimV = 128;
  int64_t elementBytes = 2;
  bool causal = true;
  int64_t window = 0; ///< sliding window in tokens, 0 = none
};

struct GemmShape {
  int64_t m = 1, n = 1, k = 1, elementBytes = 2;
};

/// Memory-bound kernel: `rows` independent rows, `bytesPerRow` moved each.
struct RowsShape {
  int64_t rows = 1, bytesPerRow = 1;
};

struct TileChoice {
  std::string kind; ///< "attention", "gemm", "rows"
  int64_t blockM = 0, blockN = 0, blockK = 0, stages = 1, warpgroups = 1;
  bool persistent = false;
  int64_t smemBytes = 0;
  double estUs = 0;
};

/// Shared memory (bytes) one attention CTA of `c` needs on `t`. Tensor-core
/// kernels (16-bit on a GPU; the CPU model): Q tile, `stages` K and V tiles,
/// O staging for the store, barriers. f32 on a GPU (CUDA-core FMA kernel):
/// Q, K (odd pitch), V and P tiles of 32-bit elements, as attention.cuh's
/// FmaLayout.
int64_t attentionSmemBytes(const AttentionShape &s, const TileChoice &c,
                           const TargetDescription &t);

/// Registers per consumer thread (O and S accumulators, P in bf16, fixed
/// overhead); a candidate is feasible when this is at most 240.
int64_t attentionRegistersPerThread(const AttentionShape &s, const TileChoice &c);

/// Every feasible attention candidate with its estimate.
std::vector<TileChoice> attentionCandidates(const AttentionShape &s,
                                            const TargetDescription &t);
/// Estimate (microseconds) of one candidate; it need not be feasible.
double estimateAttentionUs(const AttentionShape &s, const TargetDescription &t,
                           const TileChoice &c);
TileChoice chooseAttentionTiles(const AttentionShape &s, const TargetDescription &t);

TileChoice chooseGemmTiles(const GemmShape &s, const TargetDescription &t);
TileChoice chooseRowsTiles(const RowsShape &s, const TargetDescription &t);

/// Rows a prefill chunk should give each routed expert on average: the
/// grouped expert GEMMs tile every expert's rows by 128
/// (moeFp4GemmTileRows), so an expert's last tile is part empty; with more
/// rows that part is a smaller share. Measured on an H100 (moe-check,
/// MXFP4 at V4.1-Flash shapes): 196 TFLOP/s at 132 rows a expert, 233 at
/// 256 (BENCHMARKS.md, issue 30).
inline constexpr int64_t kMoeRowsPerExpertPerChunk = 512;

/// The chunk (tokens) that gives each of `experts` routed experts
/// kMoeRowsPerExpertPerChunk rows on average when every token picks
/// `topK` of them (rows per expert = chunk x topK / experts; the same on
/// every rank under expert parallelism); 0 for experts or topK < 1.
int64_t moePrefillChunkGoal(int64_t experts, int64_t topK);

/// Default tokens per prefill chunk on GPU target `t`: the multiple of
/// `blockM * u` tokens nearest `goal` (at least one), u = sms / gcd(sms, 2).
/// Then a chunk's attention has H * chunk / blockM query tiles, a whole
/// number of waves of one CTA per SM for every even head count H: on an
/// H200 (132 SMs, blockM 128) 8448 tokens = 66 tiles per head, 16 waves
/// at H = 32, where 8192 tokens made 15.5 (the half-empty last wave of
/// every chunk idled about 3% of the prefill's attention). H20 (78 SMs):
/// 9984. `blockM` is the attention kernel's query rows per CTA (the wgmma
/// kernel's 128); `goal` the size measured best when waves are ignored
/// (8192, bench/results/chunk-size-h200.json). Result in tokens, > 0.
int64_t defaultPrefillChunk(const TargetDescription &t, int64_t blockM = 128,
                            int64_t goal = 8192);

} // namespace h20

#endif // H20_ANALYSIS_TILECOSTMODEL_H
