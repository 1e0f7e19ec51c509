//===- PrefillCostModel.h - predicted prefill time of a module -*- C++ -*-===//
//
// A model, not a measurement: the per-op estimates of TileCostModel.h (the
// model h20-select-tiles chooses tiles with) summed over an attn-level
// module, on one GPU, on N GPUs with context parallelism (ring K/V
// transfers overlapped with attention), and on N GPUs with tensor
// parallelism (the module split by applyTensorParallel, plus its
// all-reduces, not overlapped). h20-predict-prefill prints these; h20-opt
// --gpus N --parallel auto picks the faster plan with them.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TRANSFORMS_PREFILLCOSTMODEL_H
#define H20_TRANSFORMS_PREFILLCOSTMODEL_H

#include "h20/Analysis/TargetDescription.h"
#include "h20/Analysis/TileCostModel.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace h20 {

/// The shapes of a module's kernels at `seqLen` tokens (target independent).
struct PrefillWork {
  std::vector<AttentionShape> attention;
  std::vector<double> attentionKvBytes; ///< per attention op: its K + V bytes
  std::vector<GemmShape> gemms;
  std::vector<RowsShape> rows;
  double memoryBytes = 0;    ///< unfused memory-bound kernels: bytes moved
  int64_t memoryOps = 0;
  double attentionFlops = 0, gemmFlops = 0;
  double allReduceBytes = 0; ///< attn.all_reduce results, summed
  int64_t allReduceOps = 0;
  /// DeepSeek-V4.1's kernels, priced at the rates today's kernels reach
  /// (kV41Rates below): sparse attention (4 H D per visible key slot per
  /// query), the lightning indexer (2 Hi Di per scored (query, entry)
  /// pair), the routed experts (3 GEMMs, 2 Dm I per picked row; this
  /// rank's share of the experts under expert parallelism: float weights
  /// or MXFP4) and block-scaled FP8 linears (2 m n k).
  double sparseAttentionFlops = 0, indexerFlops = 0, expertFlops = 0, fp4ExpertFlops = 0,
         fp8GemmFlops = 0;
};

/// The fraction of the reference Hopper's dense tensor-core peak
/// (kV41ReferenceBf16Flops, or kV41ReferenceFp8Flops for the FP8 GEMMs)
/// that h20's DeepSeek-V4.1 kernels reach today, from their measured rates
/// (BENCHMARKS.md: sparse attention 322-330 TFLOP/s (the wgmma kernel,
/// bench/results/issue31-h200-sparse-halves) and the indexer 147-189 on
/// an H200; the MXFP4 expert GEMM on wgmma 322-331 at 528 rows an expert
/// (moe-check, bench/results/issue31-h100-moe-wgmma) and cuBLASLt's
/// block-scaled FP8 GEMM 1158 in the 8-layer Flash model on an H100;
/// grouped cuBLASLt bf16 expert GEMMs about 0.6 of peak). A calibration of
/// this model to today's kernels, not a property of the hardware: update
/// them with the kernels.
struct V41Rates {
  double sparseAttention = 0.33, indexer = 0.17, fp4Experts = 0.33, experts = 0.6, fp8Gemm = 0.59;
};
constexpr V41Rates kV41Rates{};
/// The GPU kV41Rates were measured on: an H100 / H200 (132 SMs, 989 bf16
/// and 1979 FP8 dense TFLOP/s; DESIGN.md section 1).
constexpr int64_t kV41ReferenceSms = 132;
constexpr double kV41ReferenceBf16Flops = 989e12, kV41ReferenceFp8Flops = 1979e12;

/// Time (ms) of `flops` of a DeepSeek-V4.1 kernel that reaches `share` of
/// the reference Hopper's peak (bf16, or FP8 when `fp8`), on target `t`:
///   flops / t's peak + (flops / (share x ref peak) - flops / ref peak)
///                      x ref SMs / t's SMs
/// i.e. its tensor-core work at t's peak and the rest of its measured time
/// (gathers, softmax, dequantisation, top-k: SM work, not tensor work)
/// scaled by the SM count, not overlapped, clocks taken equal. On an H100
/// or H200 this is flops / (share x peak); on an H20 (148 TFLOP/s but 78
/// SMs) a kernel far below the tensor peak keeps most of its rate, where
/// "the same share of the H20's peak" would divide it by 6.7. A model,
/// not a measurement: no H20 has run these kernels. 0 when `t` has no
/// such peak.
double v41KernelMs(double flops, double share, bool fp8, const TargetDescription &t);

/// The rates this model assumes on target `t` for DeepSeek-V4.1's kernel
/// kinds (FLOP/s: flops / v41KernelMs(flops, share of kV41Rates, ...)) and
/// for memory-bound kernels (bytes/s: 80% of HBM bandwidth), so that a
/// benchmark can print the model's time per kernel kind beside the
/// measured one (bench/v41-flash-deep.sh, bench/v41-solo-rank.sh). 0 for a
/// kind the target has no peak for.
struct V41KernelRates {
  double sparseAttention = 0, indexer = 0, fp4Experts = 0, experts = 0, fp8Gemm = 0;
  double memoryBytesPerS = 0;
};
V41KernelRates v41KernelRates(const TargetDescription &t);

/// Collects the work of every op of `module` (attn level; dynamic dims are
/// `seqLen`; float elements are `elementBytes` wide).
PrefillWork collectPrefillWork(mlir::ModuleOp module, int64_t seqLen, int64_t elementBytes);

/// A predicted prefill on `gpus` GPUs of one target; times in ms.
struct PrefillPrediction {
  std::string plan; ///< "single", "context" or "tensor"
  int64_t gpus = 1;
  double totalMs = 0, attentionMs = 0, gemmMs = 0, rowsMs = 0, memoryMs = 0;
  double commMs = 0;        ///< ring K/V (context) or all-reduce (tensor) transfer time
  double exposedCommMs = 0; ///< the part not hidden behind compute
  double flops = 0;         ///< of the whole model (all GPUs)
};

/// One GPU (gpus == 1) or context parallelism over `gpus`: 1/N of the
/// one-GPU time per GPU plus the ring's K/V transfers (at half the
/// bidirectional NVLink figure) beyond each layer's attention / N.
/// Needs NVLink for gpus > 1 (the caller checks).
PrefillPrediction predictContextParallel(const PrefillWork &work, const TargetDescription &t,
                                         int64_t gpus);

/// A fixed cost per all-reduce call (us): the order of NCCL's small-message
/// all-reduce latency inside one NVLink node. An assumption of this model,
/// not a measurement.
constexpr double kAllReduceCallUs = 20.0;

/// Tensor parallelism over `gpus` (one NVLink node): `rankWork` is the work
/// of one rank's program (the module after applyTensorParallel); its
/// all-reduces move 2 (N-1) / N of their bytes per GPU at half the
/// bidirectional NVLink figure (ring all-reduce), plus kAllReduceCallUs per
/// call, one call per all-reduce op per chunk (`chunks` = ceil(S / chunk)
/// of a chunked prefill, 1 for one pass), not overlapped. Needs NVLink
/// (t.nvlinkBytesPerS > 0; the caller checks).
PrefillPrediction predictTensorParallel(const PrefillWork &rankWork, const PrefillWork &whole,
                                        const TargetDescription &t, int64_t gpus,
                                        int64_t chunks = 1);

/// predictTensorParallel for a copy of `module` split over `gpus` ranks,
/// run in chunks of `chunkTokens` (0: one pass of seqLen), with
/// DeepSeek-V4.1's attention split by query rows unless `attentionRows` is
/// false (applyTensorParallel); false with `why` when the module cannot be
/// split or the target has no NVLink.
bool predictTensorParallelOf(mlir::ModuleOp module, const TargetDescription &t, int64_t gpus,
                             int64_t seqLen, int64_t elementBytes, PrefillPrediction &out,
                             std::string &why, int64_t chunkTokens = 0, bool attentionRows = true);

} // namespace h20

#endif // H20_TRANSFORMS_PREFILLCOSTMODEL_H
