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

#include "AttentionShapeOf.h"

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

/// Fraction of HBM bandwidth an unfused memory-bound kernel reaches (the
/// figure chooseRowsTiles uses).
constexpr double kMemoryEfficiency = 0.8;

/// Ops that only compute shapes, name weights or reinterpret a buffer:
/// no kernel of their own.
const llvm::StringSet<> &freeOps() {
  static const llvm::StringSet<> s = {
      "onnx.Weight",       "onnx.Constant",         "onnx.NoValue",    "onnx.Shape",
      "onnx.Reshape",      "onnx.Squeeze",          "onnx.Unsqueeze",  "onnx.Flatten",
      "onnx.Identity",     "arith.constant",        "tensor.cast",     "tensor.expand_shape",
      "tensor.collapse_shape", "tensor.reshape",    "tensor.empty",    "tensor.dim",
      "func.return",       "func.call"};
  return s;
}

/// Per-op totals at `seq-len` tokens on one GPU of one target.
struct Totals {
  double attentionUs = 0, gemmUs = 0, rowsUs = 0, memoryUs = 0;
  std::vector<std::pair<double, double>> attention; ///< (estimate us, K+V bytes) per op
  double totalUs() const { return attentionUs + gemmUs + rowsUs + memoryUs; }
};

struct PredictPrefillPass : h20::impl::PredictPrefillBase<PredictPrefillPass> {
  using PredictPrefillBase::PredictPrefillBase;

  int64_t dim(int64_t d) { return ShapedType::isDynamic(d) ? int64_t(seqLen) : d; }

  double elements(ShapedType t) {
    double n = 1;
    for (int64_t d : t.getShape())
      n *= double(dim(d));
    return n;
  }

  double bytes(Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t)
      return 0;
    Type e = t.getElementType();
    double eb = e.isIndex()          ? 8.0
                : isa<FloatType>(e)  ? double(elementBytes)
                : e.isInteger()      ? std::max(1.0, e.getIntOrFloatBitWidth() / 8.0)
                                     : 4.0;
    return elements(t) * eb;
  }

  /// Visible (query, key) pairs of causal / windowed attention.
  double visiblePairs(const AttentionShape &s) {
    if (!s.causal && s.window <= 0)
      return double(s.seqQ) * double(s.seqKv);
    int64_t offset = s.causal ? s.seqKv - s.seqQ : 0;
    double pairs = 0;
    for (int64_t i = 0; i < s.seqQ; ++i) {
      int64_t hi = s.causal ? std::min(s.seqKv, i + offset + 1) : s.seqKv;
      int64_t lo = s.window > 0 ? std::max<int64_t>(0, i + offset - s.window + 1) : 0;
      pairs += double(std::max<int64_t>(0, hi - lo));
    }
    return pairs;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<std::string> names(targets.begin(), targets.end());
    if (names.empty())
      names = {"h20", "h200"};
    std::vector<int64_t> counts(gpus.begin(), gpus.end());
    if (counts.empty())
      counts = {1, 8};
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

    // Shapes first (target independent), then each target's estimates.
    std::vector<AttentionShape> attns;
    std::vector<GemmShape> gemms;
    std::vector<RowsShape> rows;
    double memoryBytes = 0, attentionFlops = 0, gemmFlops = 0;
    int64_t memoryOps = 0;
    std::vector<double> kvBytes;
    module.walk([&](Operation *op) {
      if (isa<ModuleOp, func::FuncOp>(op) || op->getNumResults() == 0 ||
          freeOps().contains(op->getName().getStringRef()))
        return;
      if (auto a = dyn_cast<attn::AttentionOp>(op)) {
        auto k = cast<RankedTensorType>(a.getKey().getType());
        AttentionShape s = attentionShapeOf(a, [&](int64_t d) { return dim(d); }, elementBytes);
        attns.push_back(s);
        attentionFlops += 2.0 * s.batch * s.heads * (s.headDim + s.headDimV) * visiblePairs(s);
        kvBytes.push_back(double(s.batch) * dim(k.getDimSize(1)) * s.seqKv *
                          (s.headDim + s.headDimV) * elementBytes);
        return;
      }
      if (isa<onnx::MatMulOp>(op)) {
        auto x = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
        auto w = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
        if (x && w && x.getRank() >= 2 && w.getRank() >= 2) {
          // [..., M, K] x [K, N] (a weight), or a batched product of two
          // activations [..., M, K] x [..., K, N] as one GEMM of all rows.
          GemmShape s;
          s.m = 1;
          for (int64_t d : x.getShape().drop_back())
            s.m *= dim(d);
          s.k = dim(w.getShape()[w.getRank() - 2]);
          s.n = dim(w.getShape().back());
          s.elementBytes = elementBytes;
          gemms.push_back(s);
          gemmFlops += 2.0 * double(s.m) * double(s.k) * double(s.n);
          return;
        }
      }
      if (isa<attn::RmsNormOp, attn::RopeOp, attn::RopeApplyOp>(op)) {
        auto x = cast<RankedTensorType>(op->getOperand(0).getType());
        RowsShape s;
        s.rows = 1;
        for (int64_t d : x.getShape().drop_back())
          s.rows *= dim(d);
        s.bytesPerRow = 2 * dim(x.getShape().back()) * elementBytes;
        rows.push_back(s);
        return;
      }
      // Any other kernel: unfused and memory-bound.
      double out = 0;
      for (Type t : op->getResultTypes())
        out += bytes(t);
      if (out == 0)
        return;
      double moved = out;
      for (Value v : op->getOperands())
        moved += std::min(bytes(v.getType()), out);
      memoryBytes += moved;
      ++memoryOps;
    });

    llvm::json::Array predictions;
    llvm::raw_ostream &os = llvm::outs();
    char line[512];
    std::snprintf(line, sizeof line,
                  "h20-predict-prefill: cost model, not a measurement: seq_len=%lld "
                  "element_bytes=%lld flops=%.4g attention_flops=%.4g gemm_flops=%.4g "
                  "attention_ops=%zu gemm_ops=%zu row_ops=%zu memory_ops=%lld\n",
                  static_cast<long long>(seqLen), static_cast<long long>(elementBytes),
                  attentionFlops + gemmFlops, attentionFlops, gemmFlops, attns.size(),
                  gemms.size(), rows.size(), static_cast<long long>(memoryOps));
    os << line;
    for (const TargetDescription *t : descs) {
      Totals one;
      for (size_t i = 0; i < attns.size(); ++i) {
        double us = chooseAttentionTiles(attns[i], *t).estUs;
        one.attentionUs += us;
        one.attention.push_back({us, kvBytes[i]});
      }
      for (const GemmShape &g : gemms)
        one.gemmUs += chooseGemmTiles(g, *t).estUs;
      for (const RowsShape &r : rows)
        one.rowsUs += chooseRowsTiles(r, *t).estUs;
      one.memoryUs = memoryBytes / (kMemoryEfficiency * t->hbmBytesPerS) * 1e6;
      for (int64_t n : counts) {
        if (n > 1 && t->nvlinkBytesPerS <= 0) {
          os << "target=" << t->name << " gpus=" << n << " predicted_ms=n/a (no NVLink)\n";
          continue;
        }
        // Ring attention: per layer, (N-1)/N of the K/V arrives at half the
        // bidirectional NVLink figure while that layer's attention runs.
        double commUs = 0, exposedUs = 0;
        if (n > 1)
          for (const auto &[us, kv] : one.attention) {
            double c = double(n - 1) / n * kv / (t->nvlinkBytesPerS / 2) * 1e6;
            commUs += c;
            exposedUs += std::max(0.0, c - us / n);
          }
        double totalUs = one.totalUs() / n + exposedUs;
        double tflopsPerGpu = (attentionFlops + gemmFlops) / (totalUs * 1e-6) / n / 1e12;
        std::snprintf(line, sizeof line,
                      "target=%s gpus=%lld predicted_ms=%.3f attention_ms=%.3f gemm_ms=%.3f "
                      "rows_ms=%.3f memory_ms=%.3f ring_comm_ms=%.3f exposed_comm_ms=%.3f "
                      "tflops_per_gpu=%.1f peak_fraction=%.3f\n",
                      t->name.str().c_str(), static_cast<long long>(n), totalUs / 1e3,
                      one.attentionUs / n / 1e3, one.gemmUs / n / 1e3, one.rowsUs / n / 1e3,
                      one.memoryUs / n / 1e3, commUs / 1e3, exposedUs / 1e3, tflopsPerGpu,
                      tflopsPerGpu * 1e12 / t->bf16Flops);
        os << line;
        predictions.push_back(llvm::json::Object{
            {"target", t->name.str()},
            {"gpus", n},
            {"predicted_ms", totalUs / 1e3},
            {"attention_ms", one.attentionUs / n / 1e3},
            {"gemm_ms", one.gemmUs / n / 1e3},
            {"rows_ms", one.rowsUs / n / 1e3},
            {"memory_ms", one.memoryUs / n / 1e3},
            {"ring_comm_ms", commUs / 1e3},
            {"exposed_comm_ms", exposedUs / 1e3},
            {"tflops_per_gpu", tflopsPerGpu},
            {"bf16_peak_tflops", t->bf16Flops / 1e12},
            {"nvlink_gbytes_per_s", t->nvlinkBytesPerS / 1e9},
            {"hbm_tbytes_per_s", t->hbmBytesPerS / 1e12}});
      }
    }
    os.flush();
    if (output.empty())
      return;
    llvm::json::Object doc{
        {"what", "predicted prefill time from h20's cost model (TileCostModel.h, "
                 "h20-predict-prefill): a model, not a measurement"},
        {"seq_len", int64_t(seqLen)},
        {"element_bytes", int64_t(elementBytes)},
        {"flops", llvm::json::Object{{"total", attentionFlops + gemmFlops},
                                     {"attention", attentionFlops},
                                     {"gemm", gemmFlops}}},
        {"ops", llvm::json::Object{{"attention", int64_t(attns.size())},
                                   {"gemm", int64_t(gemms.size())},
                                   {"rows", int64_t(rows.size())},
                                   {"memory", memoryOps}}},
        {"multi_gpu_model",
         "context parallelism: 1/N of the one-GPU time per GPU, plus ring K/V transfers "
         "(at half the bidirectional NVLink figure) beyond each layer's attention"},
        {"predictions", std::move(predictions)}};
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
