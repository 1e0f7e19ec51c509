//===- PredictPrefill.cpp - the cost model's prefill time per target -----===//
//
// A model, not a measurement: sums the per-op estimates of TileCostModel.h
// (the same model h20-select-tiles chooses tiles with) over a module at the
// attn level, for each target and GPU count, and prints them. Passes.td
// states what is counted and how N GPUs are modelled.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Analysis/TileCostModel.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/PrefillCostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>

namespace h20 {
#define GEN_PASS_DEF_PREDICTPREFILL
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
using namespace h20;

namespace {

struct PredictPrefillPass : h20::impl::PredictPrefillBase<PredictPrefillPass> {
  using PredictPrefillBase::PredictPrefillBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<std::string> names(targets.begin(), targets.end());
    if (names.empty())
      names = {"h20", "h200"};
    std::vector<int64_t> counts(gpus.begin(), gpus.end());
    if (counts.empty())
      counts = {1, 8};
    bool context = plans.empty(), tensor = false;
    for (const std::string &p : plans) {
      if (p == "context")
        context = true;
      else if (p == "tensor")
        tensor = true;
      else {
        module.emitError("h20-predict-prefill: unknown plan '") << p << "' (context, tensor)";
        return signalPassFailure();
      }
    }
    if (seqLen < 1 || elementBytes < 1) {
      module.emitError("h20-predict-prefill: seq-len and element-bytes must be positive");
      return signalPassFailure();
    }
    for (int64_t n : counts)
      if (n < 1) {
        module.emitError("h20-predict-prefill: GPU counts must be positive, got ") << n;
        return signalPassFailure();
      }
    std::vector<const TargetDescription *> descs;
    for (const std::string &n : names) {
      const TargetDescription *t = findTarget(n);
      if (!t) {
        module.emitError("h20-predict-prefill: unknown target '")
            << n << "' (known: h20, h100, h200, h800, a100, l20, cpu)";
        return signalPassFailure();
      }
      descs.push_back(t);
    }

    PrefillWork work = collectPrefillWork(module, seqLen, elementBytes);
    llvm::json::Array predictions;
    llvm::raw_ostream &os = llvm::outs();
    char line[512];
    std::snprintf(line, sizeof line,
                  "h20-predict-prefill: cost model, not a measurement: seq_len=%lld "
                  "element_bytes=%lld flops=%.4g attention_flops=%.4g gemm_flops=%.4g "
                  "attention_ops=%zu gemm_ops=%zu row_ops=%zu memory_ops=%lld\n",
                  static_cast<long long>(seqLen), static_cast<long long>(elementBytes),
                  work.attentionFlops + work.gemmFlops, work.attentionFlops, work.gemmFlops,
                  work.attention.size(), work.gemms.size(), work.rows.size(),
                  static_cast<long long>(work.memoryOps));
    os << line;
    // DeepSeek-V4.1's kernels, priced at their measured rates (kV41Rates).
    if (double v41 = work.sparseAttentionFlops + work.indexerFlops + work.expertFlops +
                     work.fp4ExpertFlops + work.fp8GemmFlops;
        v41 > 0) {
      std::snprintf(line, sizeof line,
                    "h20-predict-prefill: DeepSeek-V4.1 kernels (at today's measured rates): "
                    "sparse_attention_flops=%.4g indexer_flops=%.4g expert_flops=%.4g "
                    "fp4_expert_flops=%.4g fp8_gemm_flops=%.4g\n",
                    work.sparseAttentionFlops, work.indexerFlops, work.expertFlops,
                    work.fp4ExpertFlops, work.fp8GemmFlops);
      os << line;
    }
    auto print = [&](const TargetDescription &t, const PrefillPrediction &p) {
      // 0 for a module without work (not NaN: the JSON must stay valid).
      double tflopsPerGpu = p.totalMs > 0 ? p.flops / (p.totalMs * 1e-3) / p.gpus / 1e12 : 0.0;
      const char *commName = p.plan == "tensor" ? "all_reduce_ms" : "ring_comm_ms";
      std::snprintf(line, sizeof line,
                    "target=%s gpus=%lld %spredicted_ms=%.3f attention_ms=%.3f gemm_ms=%.3f "
                    "rows_ms=%.3f memory_ms=%.3f %s=%.3f exposed_comm_ms=%.3f "
                    "tflops_per_gpu=%.1f peak_fraction=%.3f\n",
                    t.name.str().c_str(), static_cast<long long>(p.gpus),
                    p.plan == "tensor" ? "plan=tensor " : "", p.totalMs, p.attentionMs,
                    p.gemmMs, p.rowsMs, p.memoryMs, commName, p.commMs, p.exposedCommMs,
                    tflopsPerGpu, tflopsPerGpu * 1e12 / t.bf16Flops);
      os << line;
      predictions.push_back(llvm::json::Object{
          {"target", t.name.str()},
          {"gpus", p.gpus},
          {"plan", p.plan},
          {"predicted_ms", p.totalMs},
          {"attention_ms", p.attentionMs},
          {"gemm_ms", p.gemmMs},
          {"rows_ms", p.rowsMs},
          {"memory_ms", p.memoryMs},
          {p.plan == "tensor" ? "all_reduce_ms" : "ring_comm_ms", p.commMs},
          {"exposed_comm_ms", p.exposedCommMs},
          {"tflops_per_gpu", tflopsPerGpu},
          {"bf16_peak_tflops", t.bf16Flops / 1e12},
          {"nvlink_gbytes_per_s", t.nvlinkBytesPerS / 1e9},
          {"hbm_tbytes_per_s", t.hbmBytesPerS / 1e12}});
    };
    for (const TargetDescription *t : descs) {
      for (int64_t n : counts) {
        if (n > 1 && t->nvlinkBytesPerS <= 0) {
          os << "target=" << t->name << " gpus=" << n << " predicted_ms=n/a (no NVLink)\n";
          continue;
        }
        if (n == 1 || context)
          print(*t, predictContextParallel(work, *t, n));
        if (n > 1 && tensor) {
          PrefillPrediction p;
          std::string why;
          if (predictTensorParallelOf(module, *t, n, seqLen, elementBytes, p, why, chunk))
            print(*t, p);
          else
            os << "target=" << t->name << " gpus=" << n << " plan=tensor predicted_ms=n/a ("
               << why << ")\n";
        }
      }
    }
    os.flush();
    if (output.empty())
      return;
    // The rates behind the V4.1 kernel and memory-bound estimates, per
    // target: what a benchmark divides its measured work by to print the
    // model's time per kernel kind beside the measured one.
    llvm::json::Object rates;
    for (const TargetDescription *t : descs) {
      const V41KernelRates k = v41KernelRates(*t);
      rates[t->name.str()] = llvm::json::Object{
          {"sparse_attention_tflops", k.sparseAttention / 1e12},
          {"indexer_tflops", k.indexer / 1e12},
          {"fp4_experts_tflops", k.fp4Experts / 1e12},
          {"experts_tflops", k.experts / 1e12},
          {"fp8_gemm_tflops", k.fp8Gemm / 1e12},
          {"memory_gbytes_per_s", k.memoryBytesPerS / 1e9}};
    }
    llvm::json::Object doc{
        {"what", "predicted prefill time from h20's cost model (TileCostModel.h, "
                 "h20-predict-prefill): a model, not a measurement"},
        {"seq_len", int64_t(seqLen)},
        {"element_bytes", int64_t(elementBytes)},
        {"flops", llvm::json::Object{{"total", work.attentionFlops + work.gemmFlops},
                                     {"attention", work.attentionFlops},
                                     {"gemm", work.gemmFlops}}},
        {"ops", llvm::json::Object{{"attention", int64_t(work.attention.size())},
                                   {"gemm", int64_t(work.gemms.size())},
                                   {"rows", int64_t(work.rows.size())},
                                   {"memory", work.memoryOps}}},
        {"multi_gpu_model",
         "context parallelism: 1/N of the one-GPU time per GPU, plus ring K/V transfers "
         "(at half the bidirectional NVLink figure) beyond each layer's attention; tensor "
         "parallelism: one rank's split program, plus its all-reduces (2 (N-1)/N of the "
         "bytes at half the NVLink figure, and an assumed 20 us per call, one per op per "
         "chunk), not overlapped"},
        {"predictions", std::move(predictions)},
        {"kernel_rates", std::move(rates)}};
    std::error_code ec;
    llvm::raw_fd_ostream f(output, ec);
    if (ec) {
      module.emitError("h20-predict-prefill: cannot write '") << output << "': " << ec.message();
      return signalPassFailure();
    }
    f << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))) << "\n";
  }
};

} // namespace
