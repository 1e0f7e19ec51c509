//===- PrefillCostModel.cpp - predicted prefill time of a module ----------===//
#include "h20/Transforms/PrefillCostModel.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/TensorParallel.h"

#include "AttentionShapeOf.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;

namespace h20 {
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

double v41Flops(const PrefillWork &w) {
  return w.sparseAttentionFlops + w.indexerFlops + w.expertFlops + w.fp4ExpertFlops +
         w.fp8GemmFlops;
}

/// Compute time on one GPU (ms) per kind, without communication.
struct Compute {
  double attentionMs = 0, gemmMs = 0, rowsMs = 0, memoryMs = 0;
  std::vector<double> attentionUs; ///< per attention op
  double total() const { return attentionMs + gemmMs + rowsMs + memoryMs; }
};

} // namespace

double v41KernelMs(double flops, double share, bool fp8, const TargetDescription &t) {
  const double refPeak = fp8 ? kV41ReferenceFp8Flops : kV41ReferenceBf16Flops;
  const double peak = fp8 ? t.fp8Flops : t.bf16Flops;
  if (flops <= 0 || share <= 0 || peak <= 0 || t.sms <= 0)
    return 0;
  const double tensor = flops / peak;
  const double rest = std::max(0.0, flops / (share * refPeak) - flops / refPeak) *
                      double(kV41ReferenceSms) / double(t.sms);
  return (tensor + rest) * 1e3;
}

V41KernelRates v41KernelRates(const TargetDescription &t) {
  // Any work size gives the same rate: the model is linear in flops.
  constexpr double kFlops = 1e15;
  auto rate = [&](double share, bool fp8) {
    const double ms = v41KernelMs(kFlops, share, fp8, t);
    return ms > 0 ? kFlops / (ms * 1e-3) : 0.0;
  };
  const V41Rates &r = kV41Rates;
  const bool fp8 = t.fp8Flops > 0;
  V41KernelRates k;
  k.sparseAttention = rate(r.sparseAttention, false);
  k.indexer = rate(r.indexer, false);
  k.fp4Experts = rate(r.fp4Experts, false);
  k.experts = rate(r.experts, false);
  k.fp8Gemm = rate(fp8 ? r.fp8Gemm : r.experts, fp8);
  k.memoryBytesPerS = kMemoryEfficiency * t.hbmBytesPerS;
  return k;
}

namespace {

Compute computeOn(const PrefillWork &w, const TargetDescription &t) {
  Compute c;
  for (const AttentionShape &s : w.attention) {
    double us = chooseAttentionTiles(s, t).estUs;
    c.attentionUs.push_back(us);
    c.attentionMs += us / 1e3;
  }
  for (const GemmShape &g : w.gemms)
    c.gemmMs += chooseGemmTiles(g, t).estUs / 1e3;
  for (const RowsShape &r : w.rows)
    c.rowsMs += chooseRowsTiles(r, t).estUs / 1e3;
  // DeepSeek-V4.1's kernels from their rates on the reference Hopper
  // (kV41Rates): the tensor-core work at the target's peak, the rest of the
  // measured time scaled by the SM count (v41KernelMs).
  const V41Rates &r = kV41Rates;
  const bool fp8 = t.fp8Flops > 0;
  c.attentionMs += v41KernelMs(w.sparseAttentionFlops, r.sparseAttention, false, t) +
                   v41KernelMs(w.indexerFlops, r.indexer, false, t);
  c.gemmMs += v41KernelMs(w.fp4ExpertFlops, r.fp4Experts, false, t) +
              v41KernelMs(w.expertFlops, r.experts, false, t) +
              v41KernelMs(w.fp8GemmFlops, fp8 ? r.fp8Gemm : r.experts, fp8, t);
  c.memoryMs = w.memoryBytes / (kMemoryEfficiency * t.hbmBytesPerS) * 1e3;
  return c;
}

} // namespace

/// Adds the work of a DeepSeek-V4.1 op (PrefillWork's V4.1 fields) and
/// returns true, or false for any other op. `dim` resolves dynamic dims to
/// the prompt length. Causal visibility: a query at position i sees
/// min(W, i + 1) window keys and (i + 1) / ratio indexer entries, about
/// S^2 / (2 ratio) pairs in all.
template <typename Dim> static bool addV41Work(Operation *op, Dim dim, PrefillWork &w) {
  auto shape = [&](Value v) {
    SmallVector<double> s;
    for (int64_t d : cast<RankedTensorType>(v.getType()).getShape())
      s.push_back(double(dim(d)));
    return s;
  };
  // Per-query picks (dim 1) of an indexer's result: static, or (dynamic,
  // min(topk, T) / min(blocks, NB)) from the indexer's attributes.
  auto picksOf = [&](Value v, double tokens) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!t.isDynamicDim(1))
      return double(t.getDimSize(1));
    Operation *d = v.getDefiningOp();
    const double ratio =
        d && d->getAttrOfType<IntegerAttr>("ratio")
            ? double(std::max<int64_t>(1, d->getAttrOfType<IntegerAttr>("ratio").getInt()))
            : 1.0;
    if (auto k = dyn_cast_or_null<attn::IndexerTopKOp>(d))
      return std::min(double(k.getTopk()), tokens / ratio);
    if (auto c = dyn_cast_or_null<attn::IndexerCandidatesOp>(d))
      return std::min(double(c.getBlocks()),
                      std::ceil(tokens / ratio / double(std::max<uint64_t>(c.getBlockSize(), 1))));
    return tokens;
  };
  // A query-row split (attn::kSplitRowsAttr) gives this rank 1/N of the
  // op's rows.
  auto rankShare = [&](Operation *o) {
    auto split = o->getAttrOfType<IntegerAttr>(attn::kSplitRowsAttr);
    return split && split.getInt() > 1 ? 1.0 / double(split.getInt()) : 1.0;
  };
  if (auto sa = dyn_cast<attn::SparseAttentionOp>(op)) {
    SmallVector<double> q = shape(sa.getQuery()); // [S, H, D]
    const double win = std::min(double(sa.getWindow()), q[0]);
    const double picks = sa.getIndices() ? picksOf(sa.getIndices(), q[0]) : 0.0;
    w.sparseAttentionFlops += 4.0 * q[0] * q[1] * q[2] * (win + picks) * rankShare(op);
    return true;
  }
  if (isa<attn::IndexerTopKOp, attn::IndexerCandidatesOp>(op)) {
    SmallVector<double> q = shape(op->getOperand(0)); // [S, Hi, Di]
    const double ratio =
        double(std::max<int64_t>(1, op->getAttrOfType<IntegerAttr>("ratio").getInt()));
    double pairs = q[0] * q[0] / (2.0 * ratio);
    if (auto topk = dyn_cast<attn::IndexerTopKOp>(op); topk && topk.getCandidates()) {
      // Within candidate blocks: KB blocks of block_size entries a query.
      const double entries = picksOf(topk.getCandidates(), q[0]) *
                             double(topk.getBlockSize() ? *topk.getBlockSize() : 1);
      pairs = q[0] * std::min(entries, q[0] / ratio);
    }
    w.indexerFlops += 2.0 * q[1] * q[2] * pairs * rankShare(op);
    return true;
  }
  // The ONNX-level ops' operands are not verified yet (the GPU lowering
  // checks them later): ranks other than their forms' are priced as any
  // other op.
  auto rankIs = [](Value v, int64_t r) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() == r;
  };
  const bool mxfp4 = isa<onnx::H20RoutedExpertsMxfp4Op>(op);
  if ((mxfp4 || isa<onnx::H20RoutedExpertsOp>(op)) && op->getNumOperands() >= 4 &&
      rankIs(op->getOperand(0), 2) && rankIs(op->getOperand(1), 2) &&
      rankIs(op->getOperand(3), 3)) {
    SmallVector<double> x = shape(op->getOperand(0)), router = shape(op->getOperand(1)),
                        w1 = shape(op->getOperand(3));
    const double k = double(op->getAttrOfType<IntegerAttr>("top_k").getInt());
    const double dm = x[1], inter = mxfp4 ? w1[1] : w1[2];
    // This rank's experts' expected share of the picks.
    const double share = w1[0] / std::max(router[1], 1.0);
    (mxfp4 ? w.fp4ExpertFlops : w.expertFlops) += x[0] * k * share * 3.0 * 2.0 * dm * inter;
    return true;
  }
  if (isa<onnx::H20BlockScaledMatMulOp>(op) && op->getNumOperands() >= 2 &&
      rankIs(op->getOperand(1), 2) && isa<RankedTensorType>(op->getOperand(0).getType())) {
    SmallVector<double> x = shape(op->getOperand(0)), wt = shape(op->getOperand(1)); // W [N, K]
    double m = 1;
    for (size_t i = 0; i + 1 < x.size(); ++i)
      m *= x[i];
    w.fp8GemmFlops += 2.0 * m * wt[0] * wt[1] * rankShare(op);
    return true;
  }
  return false;
}

PrefillWork collectPrefillWork(ModuleOp module, int64_t seqLen, int64_t elementBytes) {
  PrefillWork w;
  auto dim = [&](int64_t d) { return ShapedType::isDynamic(d) ? seqLen : d; };
  auto elements = [&](ShapedType t) {
    double n = 1;
    for (int64_t d : t.getShape())
      n *= double(dim(d));
    return n;
  };
  auto bytes = [&](Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t)
      return 0.0;
    Type e = t.getElementType();
    double eb = e.isIndex()         ? 8.0
                : isa<FloatType>(e) ? double(elementBytes)
                : e.isInteger()     ? std::max(1.0, e.getIntOrFloatBitWidth() / 8.0)
                                    : 4.0;
    return elements(t) * eb;
  };
  module.walk([&](Operation *op) {
    if (isa<ModuleOp, func::FuncOp>(op) || op->getNumResults() == 0 ||
        freeOps().contains(op->getName().getStringRef()))
      return;
    if (auto a = dyn_cast<attn::AttentionOp>(op)) {
      auto k = cast<RankedTensorType>(a.getKey().getType());
      AttentionShape s = attentionShapeOf(a, dim, elementBytes);
      w.attention.push_back(s);
      w.attentionFlops += 2.0 * s.batch * s.heads * (s.headDim + s.headDimV) * visiblePairs(s);
      w.attentionKvBytes.push_back(double(s.batch) * dim(k.getDimSize(1)) * s.seqKv *
                                   (s.headDim + s.headDimV) * elementBytes);
      return;
    }
    if (addV41Work(op, dim, w)) {
      // The weights the experts and FP8 linears read (at least once): 1
      // byte per FP8 / packed-FP4 / scale byte, the compute type's width
      // for float weights; what a short prompt's time is made of.
      if (isa<onnx::H20RoutedExpertsOp, onnx::H20RoutedExpertsMxfp4Op,
              onnx::H20BlockScaledMatMulOp>(op))
        for (Value v : op->getOperands().drop_front()) {
          auto t = dyn_cast<RankedTensorType>(v.getType());
          if (!t)
            continue;
          if (!t.getElementType().isIntOrFloat())
            continue;
          const unsigned bits = t.getElementType().getIntOrFloatBitWidth();
          w.memoryBytes += elements(t) * (bits <= 8 ? 1.0 : double(elementBytes));
        }
      return;
    }
    if (isa<attn::AllReduceOp>(op)) {
      w.allReduceBytes += bytes(op->getResult(0).getType());
      ++w.allReduceOps;
      return;
    }
    if (isa<onnx::MatMulOp>(op)) {
      auto x = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
      auto m = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
      if (x && m && x.getRank() >= 2 && m.getRank() >= 2) {
        // [..., M, K] x [K, N] (a weight), or a batched product of two
        // activations [..., M, K] x [..., K, N] as one GEMM of all rows.
        GemmShape s;
        s.m = 1;
        for (int64_t d : x.getShape().drop_back())
          s.m *= dim(d);
        // A GEMM split by query rows computes 1/N of them on a rank.
        if (auto split = op->getAttrOfType<IntegerAttr>(attn::kSplitRowsAttr);
            split && split.getInt() > 1)
          s.m = std::max<int64_t>(1, s.m / split.getInt());
        s.k = dim(m.getShape()[m.getRank() - 2]);
        s.n = dim(m.getShape().back());
        s.elementBytes = elementBytes;
        w.gemms.push_back(s);
        w.gemmFlops += 2.0 * double(s.m) * double(s.k) * double(s.n);
        return;
      }
    }
    // attn.rms_scale reads its input's rows once (the sum of squares) and
    // scales the value's: a row kernel of K + 2 N elements a row.
    // A row kernel over the rows of `x` (every dim but the last), moving
    // `elements` elements a row.
    auto rowKernel = [&](RankedTensorType x, int64_t elements) {
      RowsShape s;
      s.rows = 1;
      for (int64_t d : x.getShape().drop_back())
        s.rows *= dim(d);
      s.bytesPerRow = elements * elementBytes;
      w.rows.push_back(s);
    };
    if (auto sc = dyn_cast<attn::RmsScaleOp>(op)) {
      auto x = cast<RankedTensorType>(sc.getInput().getType());
      auto v = cast<RankedTensorType>(sc.getValue().getType());
      rowKernel(x, dim(x.getShape().back()) + 2 * dim(v.getShape().back()));
      return;
    }
    if (isa<attn::RmsNormOp, attn::RopeOp, attn::RopeApplyOp>(op)) {
      auto x = cast<RankedTensorType>(op->getOperand(0).getType());
      rowKernel(x, 2 * dim(x.getShape().back()));
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
    w.memoryBytes += moved;
    ++w.memoryOps;
  });
  return w;
}

PrefillPrediction predictContextParallel(const PrefillWork &work, const TargetDescription &t,
                                         int64_t gpus) {
  Compute one = computeOn(work, t);
  PrefillPrediction p;
  p.plan = gpus > 1 ? "context" : "single";
  p.gpus = gpus;
  p.flops = work.attentionFlops + work.gemmFlops + v41Flops(work);
  double n = double(gpus);
  // Ring attention: per layer, (N-1)/N of the K/V arrives at half the
  // bidirectional NVLink figure while that layer's attention runs.
  if (gpus > 1 && t.nvlinkBytesPerS > 0)
    for (size_t i = 0; i < work.attention.size(); ++i) {
      double c = (n - 1) / n * work.attentionKvBytes[i] / (t.nvlinkBytesPerS / 2) * 1e3;
      p.commMs += c;
      p.exposedCommMs += std::max(0.0, c - one.attentionUs[i] / 1e3 / n);
    }
  p.attentionMs = one.attentionMs / n;
  p.gemmMs = one.gemmMs / n;
  p.rowsMs = one.rowsMs / n;
  p.memoryMs = one.memoryMs / n;
  p.totalMs = one.total() / n + p.exposedCommMs;
  return p;
}

PrefillPrediction predictTensorParallel(const PrefillWork &rankWork, const PrefillWork &whole,
                                        const TargetDescription &t, int64_t gpus,
                                        int64_t chunks) {
  Compute rank = computeOn(rankWork, t);
  PrefillPrediction p;
  p.plan = "tensor";
  p.gpus = gpus;
  p.flops = whole.attentionFlops + whole.gemmFlops + v41Flops(whole);
  double n = double(gpus);
  if (t.nvlinkBytesPerS > 0)
    p.commMs = 2 * (n - 1) / n * rankWork.allReduceBytes / (t.nvlinkBytesPerS / 2) * 1e3;
  p.commMs += double(rankWork.allReduceOps) * double(std::max<int64_t>(chunks, 1)) *
              kAllReduceCallUs / 1e3;
  p.exposedCommMs = p.commMs;
  p.attentionMs = rank.attentionMs;
  p.gemmMs = rank.gemmMs;
  p.rowsMs = rank.rowsMs;
  p.memoryMs = rank.memoryMs;
  p.totalMs = rank.total() + p.exposedCommMs;
  return p;
}

bool predictTensorParallelOf(ModuleOp module, const TargetDescription &t, int64_t gpus,
                             int64_t seqLen, int64_t elementBytes, PrefillPrediction &out,
                             std::string &why, int64_t chunkTokens, bool attentionRows) {
  if (t.nvlinkBytesPerS <= 0) {
    why = "no NVLink on " + t.name.str() + " (the model prices all-reduces over NVLink only)";
    return false;
  }
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  // The split's diagnostics become `why`, not errors of the compile.
  std::string message;
  LogicalResult split = success();
  {
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        message = d.str();
      return success();
    });
    split = applyTensorParallel(*copy, gpus, nullptr, attentionRows);
  }
  // As the GPU pipeline will (h20-merge-all-reduces): one all-reduce for
  // the routed and the shared experts' shares.
  if (succeeded(split))
    mergeAllReduces(copy->getOperation());
  if (failed(split)) {
    why = message.empty() ? "the model cannot be split" : message;
    return false;
  }
  PrefillWork whole = collectPrefillWork(module, seqLen, elementBytes);
  PrefillWork rank = collectPrefillWork(*copy, seqLen, elementBytes);
  int64_t chunks = chunkTokens > 0 ? (seqLen + chunkTokens - 1) / chunkTokens : 1;
  out = predictTensorParallel(rank, whole, t, gpus, chunks);
  return true;
}

} // namespace h20
