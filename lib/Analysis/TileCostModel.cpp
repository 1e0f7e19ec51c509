//===- TileCostModel.cpp - analytic tile choice per target ---------------===//
#include "h20/Analysis/TileCostModel.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>

namespace h20 {
namespace {

constexpr int64_t kMaxRegistersPerThread = 240;
constexpr double kExpPerSmPerS = 64 * 1.7e9; // MUFU: 64 exp/clk/SM at ~1.7 GHz
constexpr double kL2OverHbm = 2.5;           // L2 bandwidth relative to HBM
constexpr double kStepOverheadS = 0.1e-6;    // barriers + wgmma issue per KV step

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Makespan (seconds) of tasks on `slots` identical workers: in the given
/// order onto the earliest free worker.
double listSchedule(const std::vector<double> &tasks, int64_t slots) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free;
  for (int64_t i = 0; i < slots; ++i)
    free.push(0.0);
  double end = 0;
  for (double t : tasks) {
    double start = free.top();
    free.pop();
    free.push(start + t);
    end = std::max(end, start + t);
  }
  return end;
}

/// CTAs of `smem` bytes and `threads` threads resident per SM.
int64_t ctasPerSm(const TargetDescription &t, int64_t smem, int64_t threads) {
  int64_t bySmem = smem > 0 ? t.smemPerSM / smem : 1;
  int64_t byThreads = 2048 / std::max<int64_t>(threads, 1);
  return std::max<int64_t>(1, std::min({bySmem, byThreads, int64_t(32)}));
}

/// Fraction of tensor-core peak a consumer arrangement reaches (measured
/// FA3/CUTLASS behaviour: one warpgroup cannot hide softmax; two ping-pong).
double mmaEfficiency(const TargetDescription &t, const TileChoice &c) {
  double e = c.warpgroups >= 2 ? 0.80 : 0.55;
  if (c.warpgroups >= 3)
    e = 0.76; // register pressure limits the third
  if (c.stages == 1)
    e *= 0.6;
  else if (c.stages == 2)
    e *= 0.95;
  if (t.computeCapability < 90)
    e *= 0.7; // no wgmma / TMA: mma.sync and cp.async
  return e;
}

/// f32 attention on a GPU runs on CUDA cores (attention.cuh's FMA body):
/// there is no f32 tensor-core MMA, so its tiles follow FmaLayout.
bool usesFmaKernel(const AttentionShape &s, const TargetDescription &t) {
  return t.computeCapability > 0 && s.elementBytes == 4;
}

/// Threads of one FMA-kernel CTA: 8 query rows per warp (the f32 default of
/// chooseAttentionVariant, lib/Target/GPU/AttentionKernel.cpp).
int64_t fmaThreads(const TileChoice &c) { return std::max<int64_t>(c.blockM / 8, 1) * 32; }

} // namespace

int64_t attentionSmemBytes(const AttentionShape &s, const TileChoice &c,
                           const TargetDescription &t) {
  if (usesFmaKernel(s, t)) // FmaLayout: Q [BM][D], K [BN][D+1], V [BN][DV], P [BM][BN]
    return 4 * (c.blockM * s.headDim + c.blockN * (s.headDim + 1) + c.blockN * s.headDimV +
                c.blockM * c.blockN);
  int64_t es = s.elementBytes;
  return c.blockM * s.headDim * es + c.stages * c.blockN * (s.headDim + s.headDimV) * es +
         c.blockM * s.headDimV * es + 1024;
}

int64_t attentionRegistersPerThread(const AttentionShape &s, const TileChoice &c) {
  // Per consumer warpgroup (128 threads, 64 rows): O is 64 x Dv fp32, S is
  // 64 x block_n fp32, P is 64 x block_n bf16.
  return s.headDimV / 2 + c.blockN / 2 + c.blockN / 4 + 40;
}

double estimateAttentionUs(const AttentionShape &s, const TargetDescription &t,
                           const TileChoice &c) {
  const bool fma = usesFmaKernel(s, t);
  // The FMA kernel: fp32 CUDA-core peak, about half reached (shared-memory
  // operand reads bound it; no second warpgroup to overlap the softmax).
  double mmaRate = fma ? 0.5 * t.fp32Flops / t.sms : t.bf16Flops / t.sms * mmaEfficiency(t, c);
  double l2PerSm = kL2OverHbm * t.hbmBytesPerS / t.sms;
  double hbmPerSm = t.hbmBytesPerS / t.sms;
  int64_t es = s.elementBytes;
  // One KV step of one CTA.
  double flops = 2.0 * c.blockM * c.blockN * (s.headDim + s.headDimV);
  double tMma = flops / mmaRate;
  double tExp = double(c.blockM) * c.blockN / kExpPerSmPerS;
  double tLoad = double(c.blockN) * (s.headDim + s.headDimV) * es / l2PerSm;
  bool overlapSoftmax = !fma && c.warpgroups >= 2, overlapLoads = !fma && c.stages >= 2;
  double compute = overlapSoftmax ? std::max(tMma, tExp) : tMma + tExp;
  double step = (overlapLoads ? std::max(compute, tLoad) : compute + tLoad) + kStepOverheadS;
  double tileOverhead = double(c.blockM) * (s.headDim + s.headDimV) * es / hbmPerSm +
                        (c.persistent ? 0.2e-6 : 0.8e-6);

  int64_t rowBlocks = ceilDiv(s.seqQ, c.blockM);
  int64_t offset = s.seqKv - s.seqQ; // bottom-right causal alignment
  std::vector<double> perRowBlock(rowBlocks);
  for (int64_t r = 0; r < rowBlocks; ++r) {
    int64_t hi = s.seqKv, lo = 0;
    if (s.causal)
      hi = std::min(s.seqKv, std::min(s.seqQ, (r + 1) * c.blockM) + offset);
    if (s.window > 0)
      lo = std::max<int64_t>(0, r * c.blockM + offset - s.window + 1);
    int64_t steps = std::max<int64_t>(0, ceilDiv(hi, c.blockN) - lo / c.blockN);
    perRowBlock[r] = steps * step + tileOverhead;
  }
  int64_t units = s.batch * s.heads;
  std::vector<double> tasks;
  tasks.reserve(units * rowBlocks);
  if (c.persistent) {
    // Causal-aware order: the longest (last) row blocks first, all heads.
    for (int64_t r = rowBlocks - 1; r >= 0; --r)
      for (int64_t u = 0; u < units; ++u)
        tasks.push_back(perRowBlock[r]);
  } else {
    for (int64_t u = 0; u < units; ++u) // launch order: head-major
      for (int64_t r = 0; r < rowBlocks; ++r)
        tasks.push_back(perRowBlock[r]);
  }
  int64_t threads = fma ? fmaThreads(c) : (c.warpgroups + 1) * 128;
  int64_t slots = t.sms * ctasPerSm(t, attentionSmemBytes(s, c, t), threads);
  // Resident CTAs on one SM share it: scale per-CTA time by their count.
  double share = double(slots) / t.sms;
  for (double &x : tasks)
    x *= share;
  return listSchedule(tasks, slots) * 1e6;
}

std::vector<TileChoice> attentionCandidates(const AttentionShape &s,
                                            const TargetDescription &t) {
  std::vector<TileChoice> out;
  if (usesFmaKernel(s, t)) {
    // The FMA kernel's range: blockM 32..64, blockN 32..64, single-buffered.
    for (int64_t bm : {32, 64})
      for (int64_t bn : {32, 64}) {
        TileChoice c;
        c.kind = "attention";
        c.blockM = bm;
        c.blockN = bn;
        c.smemBytes = attentionSmemBytes(s, c, t);
        if (c.smemBytes > t.smemPerBlock)
          continue;
        c.estUs = estimateAttentionUs(s, t, c);
        out.push_back(c);
      }
    return out;
  }
  bool cpu = t.computeCapability == 0;
  std::vector<int64_t> wgs = cpu ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2, 3};
  std::vector<int64_t> bns = cpu ? std::vector<int64_t>{32, 64, 128}
                                 : std::vector<int64_t>{64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256};
  std::vector<int64_t> stagesSet = cpu ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2, 3, 4};
  for (int64_t w : wgs)
    for (int64_t bn : bns)
      for (int64_t st : stagesSet)
        for (bool persistent : {false, true}) {
          TileChoice c;
          c.kind = "attention";
          c.warpgroups = w;
          c.blockM = cpu ? 32 : 64 * w;
          c.blockN = bn;
          c.stages = st;
          c.persistent = persistent;
          c.smemBytes = attentionSmemBytes(s, c, t);
          if (c.smemBytes > t.smemPerBlock)
            continue;
          if (!cpu && attentionRegistersPerThread(s, c) > kMaxRegistersPerThread)
            continue;
          c.estUs = estimateAttentionUs(s, t, c);
          out.push_back(c);
        }
  return out;
}

TileChoice chooseAttentionTiles(const AttentionShape &s, const TargetDescription &t) {
  std::vector<TileChoice> cands = attentionCandidates(s, t);
  TileChoice best;
  best.kind = "attention";
  best.estUs = INFINITY;
  for (const TileChoice &c : cands)
    if (c.estUs < best.estUs * (1 - 1e-9) ||
        (c.estUs <= best.estUs * (1 + 1e-9) && c.smemBytes < best.smemBytes))
      best = c;
  return best;
}

TileChoice chooseGemmTiles(const GemmShape &s, const TargetDescription &t) {
  bool cpu = t.computeCapability == 0;
  TileChoice best;
  best.kind = "gemm";
  best.estUs = INFINITY;
  double l2PerSm = kL2OverHbm * t.hbmBytesPerS / t.sms;
  double floor = double(s.m * s.k + s.k * s.n + s.m * s.n) * s.elementBytes / t.hbmBytesPerS;
  for (int64_t bm : {64, 128, 256})
    for (int64_t bn : {64, 128, 256})
      for (int64_t st : cpu ? std::vector<int64_t>{1} : std::vector<int64_t>{2, 3, 4, 5})
        for (int64_t w : cpu ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2})
          for (bool persistent : {false, true}) {
            TileChoice c{"gemm", bm, bn, 64, st, w, persistent, 0, 0};
            c.smemBytes = st * (bm + bn) * c.blockK * s.elementBytes + 1024;
            if (c.smemBytes > t.smemPerBlock || (w == 2 && bm < 128))
              continue;
            double eff = (w == 2 ? 0.85 : 0.7) * (st >= 3 ? 1.0 : 0.9) *
                         (t.computeCapability >= 90 || cpu ? 1.0 : 0.75);
            double tCompute = 2.0 * bm * bn * s.k / (t.bf16Flops / t.sms * eff);
            double tLoad = double(bm + bn) * s.k * s.elementBytes / l2PerSm;
            double tile = std::max(tCompute, tLoad) + (persistent ? 0.2e-6 : 0.8e-6);
            int64_t tiles = ceilDiv(s.m, bm) * ceilDiv(s.n, bn);
            int64_t slots = t.sms * ctasPerSm(t, c.smemBytes, (w + 1) * 128);
            double share = double(slots) / t.sms;
            double makespan = double(ceilDiv(tiles, slots)) * tile * share;
            c.estUs = std::max(makespan, floor) * 1e6;
            if (c.estUs < best.estUs * (1 - 1e-9) ||
                (c.estUs <= best.estUs * (1 + 1e-9) && c.smemBytes < best.smemBytes))
              best = c;
          }
  return best;
}

TileChoice chooseRowsTiles(const RowsShape &s, const TargetDescription &t) {
  TileChoice c;
  c.kind = "rows";
  // Enough CTAs for 4 waves of rows, at most 64 rows each.
  int64_t perCta = 1;
  while (perCta < 64 && s.rows / (perCta * 2) >= 4 * t.sms)
    perCta *= 2;
  c.blockM = perCta;
  c.blockN = s.bytesPerRow;
  c.smemBytes = 0;
  c.estUs = double(s.rows) * s.bytesPerRow / (0.8 * t.hbmBytesPerS) * 1e6;
  return c;
}

int64_t moePrefillChunkGoal(int64_t experts, int64_t topK) {
  if (experts < 1 || topK < 1)
    return 0;
  return (kMoeRowsPerExpertPerChunk * experts + topK - 1) / topK;
}

int64_t defaultPrefillChunk(const TargetDescription &t, int64_t blockM, int64_t goal) {
  int64_t sms = std::max<int64_t>(t.sms, 1);
  int64_t unit = std::max<int64_t>(blockM, 1) * (sms % 2 == 0 ? sms / 2 : sms);
  int64_t k = std::max<int64_t>(1, (goal + unit / 2) / unit);
  return k * unit;
}

} // namespace h20
