//===- LibraryCallSteps.cpp - steps for the host function's library calls ===//
//
// One emitter per linalg.generic library call the host function holds:
// h20_gemm (a cuBLASLt GEMM step), h20_all_reduce, h20_attention (the
// dense attention kernel the IR's h20.kernel names), h20_indexer,
// h20_sparse_attention and h20_routed_experts (launches of the
// NVRTC-compiled DeepSeek-V4.1 kernels, GEMMs and memsets), h20_fp8_quantize
// and h20_gemm_fp8 (a block-scaled FP8 linear: the quantising kernel, a
// block-scaled cuBLASLt GEMM). Each checks its
// operands' views and emits the steps; the evaluator's core
// (HostProgram.cpp) dispatches to them.
//
//===----------------------------------------------------------------------===//
#include "HostEvaluator.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include "h20/Runtime/Cuda/AttentionParams.h"

#include <cstddef>
#include <limits>

using namespace mlir;

namespace h20::gpu::detail {
namespace {

/// What the dense attention kernel's launch reads: Q [B, H, sq, D], K
/// [B, KH, skv, D], V [B, KH, skv, Dv] and O [B, H, sq, Dv] (strides in the
/// views), with sq and skv as the chunk's expressions.
struct AttentionLaunch {
  const View *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  Lin sq, skv;
  double scale = 1.0, softcap = 0.0;
  bool causal = false;
  int64_t windowLeft = -1;
};

/// The launch step of attention kernel `variant` (module `module`): one
/// struct argument laid out as H20AttnParams (AttentionParams.h), fields at
/// its offsets; grid (ceil(sq / block_m), H, B); role "attention". The wgmma
/// kernel also gets TMA tensor maps of Q, K and V (4-D, boxes of 64 rows x
/// 64 elements, 128-byte swizzle, as its shared-memory tiles are laid out)
/// and their validity flag: where the runtime cannot make them, the kernel
/// loads with cp.async.
runtime::LaunchStep attentionStep(const AttentionVariant &variant, const AttentionLaunch &a,
                                  int module) {
  using runtime::StructField;
  runtime::LaunchArg params;
  params.kind = runtime::LaunchArg::Struct;
  params.structBytes = sizeof(H20AttnParams);
  params.structAlign = alignof(H20AttnParams);
  auto add = [&](StructField f) { params.fields.push_back(std::move(f)); };
  auto integer = [&](size_t at, Lin v, StructField::Kind kind = StructField::I64) {
    StructField f;
    f.kind = kind;
    f.at = static_cast<int64_t>(at);
    f.value = v.expr();
    add(f);
  };
  auto f32 = [&](size_t at, double v) {
    StructField f;
    f.kind = StructField::F32;
    f.at = static_cast<int64_t>(at);
    f.f32 = static_cast<float>(v);
    add(f);
  };
  const Lin batch = a.q->sizes[0], heads = a.q->sizes[1], kvHeads = a.k->sizes[1];
  const Lin dim = a.q->sizes[3], dimV = a.v->sizes[3];
  // A view as the kernel reads it: [batch, heads, seq, dim] with the view's
  // strides.
  auto view = [&](StructField::Kind kind, size_t at, const View &x, Lin h, Lin seq, Lin d,
                  bool written, bool kv) {
    StructField f;
    f.kind = kind;
    f.at = static_cast<int64_t>(at);
    f.buffer = x.buffer;
    f.offset = x.offset.expr();
    for (Lin s : {batch, h, seq, d})
      f.sizes.push_back(s.expr());
    for (int i = 0; i < 4; ++i)
      f.strides.push_back(x.strides[i].expr());
    f.dtype = dtypeName(x.element);
    f.written = written;
    f.kv = kv;
    if (kind == StructField::TensorMap) {
      f.box = {1, 1, 64, 64};
      f.swizzle = 128;
    }
    add(f);
  };
  using P = H20AttnParams;
  const struct {
    size_t pointer, stride, map;
    const View *x;
    Lin heads, seq, dim;
  } operands[4] = {
      {offsetof(P, q), offsetof(P, q_stride), offsetof(P, tm_q), a.q, heads, a.sq, dim},
      {offsetof(P, k), offsetof(P, k_stride), offsetof(P, tm_k), a.k, kvHeads, a.skv, dim},
      {offsetof(P, v), offsetof(P, v_stride), offsetof(P, tm_v), a.v, kvHeads, a.skv, dimV},
      {offsetof(P, o), offsetof(P, o_stride), 0, a.o, heads, a.sq, dimV}};
  const bool tma = variant.kind == 1;
  for (int i = 0; i < 4; ++i) {
    const auto &op = operands[i];
    // K and V (i = 1, 2) are marked for context parallelism; O is written.
    const bool kv = i == 1 || i == 2;
    view(StructField::Pointer, op.pointer, *op.x, op.heads, op.seq, op.dim, i == 3, kv);
    for (int d = 0; d < 4; ++d)
      integer(op.stride + 8 * d, op.x->strides[d]);
    if (tma && i < 3)
      view(StructField::TensorMap, op.map, *op.x, op.heads, op.seq, op.dim, false, kv);
  }
  integer(offsetof(P, batch), batch);
  integer(offsetof(P, heads), heads);
  integer(offsetof(P, kv_heads), kvHeads);
  integer(offsetof(P, sq), a.sq);
  integer(offsetof(P, skv), a.skv);
  integer(offsetof(P, window_left), Lin{a.windowLeft});
  f32(offsetof(P, scale), a.scale);
  f32(offsetof(P, softcap), a.softcap);
  integer(offsetof(P, causal), Lin{a.causal ? 1 : 0}, StructField::I32);
  if (tma) {
    StructField f;
    f.kind = StructField::TensorMapsValid;
    f.at = offsetof(P, tma);
    add(f);
  }
  runtime::LaunchStep step = launchStep(module, variant.kernelName(), a.sq, variant.threads,
                                        variant.smemBytes(), {std::move(params)});
  step.grid[1] = heads.expr();
  step.grid[2] = batch.expr();
  step.gridDiv = {variant.blockM, 1, 1};
  step.role = "attention";
  return step;
}

} // namespace

/// The query-row split a call carries (attn::kSplitRowsAttr, copied from
/// the op it lowers: h20-tensor-parallel's choice, kept by
/// h20-check-row-splits): rank r of N computes rows [r B, (r + 1) B)
/// with B = R / N for R static rows, or B = C / N for the dynamic rows of
/// a chunk of a chunked prefill (C = `chunk`, the chunk size: the last
/// chunk's n < C tokens leave the rows from n on as padding, which the
/// buffers sized for C hold and nothing reads). Returns B, or 0 when the
/// call is not split.
static FailureOr<int64_t> rankRowsOf(linalg::GenericOp op, const Lin &rows, int64_t chunk) {
  auto split = op->getAttrOfType<IntegerAttr>(attn::kSplitRowsAttr);
  if (!split || split.getInt() <= 1)
    return int64_t(0);
  const int64_t n = split.getInt();
  const int64_t all = rows.isConst() ? rows.c : rows == Lin{0, 0, 1} ? chunk : 0;
  if (all <= 0 || all % n != 0)
    return op->emitError("GPU target: internal: a query-row split over ")
           << n << " ranks of rows that are neither a static multiple of it nor a chunk's";
  return all / n;
}

/// Rows [first, first + count) of `v` (its first dimension; `first` or
/// the dimension's stride a constant).
static View rowSlice(const View &v, const Lin &first, int64_t count) {
  View r = v;
  r.offset =
      v.offset + (first.isConst() ? v.strides[0].scaled(first.c) : first.scaled(v.strides[0].c));
  r.sizes[0] = Lin{count};
  return r;
}

/// Rows [rank * rows, (rank + 1) * rows) of `v`: the program's `rank`
/// symbol in the offset.
static View rankRows(const View &v, int64_t rows) {
  return rowSlice(v, Lin{0, 0, 0, 0, rows}, rows);
}

/// The element count of `v` when it is contiguous (row-major, no gaps).
static std::optional<Lin> contiguousElements(const View &v) {
  Lin expect{1};
  for (size_t k = v.sizes.size(); k-- > 0;) {
    const bool one = v.sizes[k].isConst() && v.sizes[k].c == 1;
    if (!one && v.strides[k] != expect)
      return std::nullopt;
    if (v.sizes[k].isConst())
      expect = expect.scaled(v.sizes[k].c);
    else if (expect.isConst())
      expect = v.sizes[k].scaled(expect.c);
    else
      return std::nullopt;
  }
  return expect;
}

/// A memset of the whole of `v` (contiguous; nothing otherwise): zero rows
/// for the other ranks before a query-row split's gather.
static std::optional<runtime::MemsetStep> zeroFill(const View &v) {
  std::optional<Lin> n = contiguousElements(v);
  if (!n)
    return std::nullopt;
  const int64_t eb = elementBytes(v.element);
  runtime::MemsetStep clear;
  clear.buffer = v.buffer;
  clear.offsetBytes = v.offset.scaled(eb).expr();
  clear.bytes = n->scaled(eb).expr();
  return clear;
}

LogicalResult Evaluator::clearIfGathered(Operation *op, const View &out, StringRef what) {
  if (!op->hasAttr(attn::kSplitGatherAttr))
    return success();
  std::optional<runtime::MemsetStep> clear = zeroFill(out);
  if (!clear)
    return op->emitError("GPU target: internal: a gathered split ")
           << what << " output that is not contiguous";
  use(out.buffer);
  steps.push_back(*clear);
  return success();
}

LogicalResult Evaluator::evalGemm(linalg::GenericOp op) {
  auto maps = op.getIndexingMapsArray();
  auto a = view(op.getDpsInputs()[0], op), b = view(op.getDpsInputs()[1], op),
       c = view(op.getDpsInits()[0], op);
  if (failed(a) || failed(b) || failed(c))
    return failure();
  int64_t r = static_cast<int64_t>(c->sizes.size());
  if (r < 2 || maps[2].getNumResults() != r)
    return op->emitError("GPU target: GEMM output of rank < 2");
  // The operand dim that map `m` reads loop dim `d` at, as a plain dim.
  auto dimReading = [](AffineMap m, int64_t d) -> std::optional<unsigned> {
    for (unsigned k = 0; k < m.getNumResults(); ++k)
      if (auto e = dyn_cast<AffineDimExpr>(m.getResult(k)); e && e.getPosition() == d)
        return k;
    return std::nullopt;
  };
  // Stride of each operand along loop dim `d` (0 when broadcast).
  auto strideAlong = [&](const View &v, AffineMap m, int64_t d) {
    std::optional<unsigned> k = dimReading(m, d);
    return k ? v.strides[*k] : Lin{0};
  };
  const View *ops[3] = {&*a, &*b, &*c};
  // Extent of loop dim `d`, from the first operand that reads it (an
  // operand may be stored transposed: h20-transposes-into-gemms).
  auto extentOf = [&](int64_t d) -> std::optional<Lin> {
    for (int k : {2, 0, 1})
      if (std::optional<unsigned> j = dimReading(maps[k], d))
        return ops[k]->sizes[*j];
    return std::nullopt;
  };
  std::optional<Lin> mExt = extentOf(r - 2), nExt = extentOf(r - 1), kExt = extentOf(r);
  if (!mExt || !nExt || !kExt)
    return op->emitError("GPU target: internal: a GEMM loop no operand reads");
  Lin batch{1};
  Lin batchStride[3] = {Lin{0}, Lin{0}, Lin{0}};
  bool haveBatch = false;
  for (int64_t d = r - 3; d >= 0; --d) {
    std::optional<Lin> ext = extentOf(d);
    if (!ext)
      return op->emitError("GPU target: internal: a GEMM batch loop no operand reads");
    Lin extent = *ext;
    if (!extent.isConst())
      return op->emitError("GPU target: a GEMM batch that depends on the chunk position");
    if (extent.c == 1)
      continue;
    for (int k = 0; k < 3; ++k) {
      Lin s = strideAlong(*ops[k], maps[k], d);
      if (haveBatch) {
        // Collapsible only if this dim continues the inner batch dims.
        Lin expect = batchStride[k].scaled(batch.c);
        if (s != expect)
          return op->emitError("GPU target: GEMM batch dims that do not collapse into one "
                               "strided batch");
      } else {
        batchStride[k] = s;
      }
    }
    batch = batch.scaled(extent.c);
    haveBatch = true;
  }
  auto mat = [&](const View &v, AffineMap m, int64_t rowDim, int64_t colDim) {
    int k = &v == &*a ? 0 : &v == &*b ? 1 : 2;
    return gemmOperand(v, batchStride[k], strideAlong(v, m, rowDim), strideAlong(v, m, colDim));
  };
  // Split by query rows (rankRowsOf; a GEMM of a sparse attention's output
  // projection): this rank computes rows [r B, (r + 1) B) of M. The last
  // GEMM of the split (split_gather) zeroes C first: the all-reduce after
  // it gathers the rows.
  Lin m = *mExt;
  auto rankRowCount = rankRowsOf(op, m, chunkedInt("chunk"));
  if (failed(rankRowCount))
    return failure();
  if (*rankRowCount > 0) {
    const Lin rowA = strideAlong(*a, maps[0], r - 2), rowC = strideAlong(*c, maps[2], r - 2);
    if (!rowA.isConst() || !rowC.isConst())
      return op->emitError("GPU target: internal: split GEMM rows of non-constant stride");
    if (failed(clearIfGathered(op, *c, "GEMM")))
      return failure();
    const Lin first{0, 0, 0, 0, *rankRowCount};
    a->offset = a->offset + first.scaled(rowA.c);
    c->offset = c->offset + first.scaled(rowC.c);
    m = Lin{*rankRowCount};
  }
  // Loop dims: batch..., m (r-2), n (r-1), k (r).
  runtime::GemmStep g;
  g.dtypeA = dtypeName(a->element);
  g.dtypeB = dtypeName(b->element);
  g.dtypeC = dtypeName(c->element);
  g.batch = batch.expr();
  g.m = m.expr();
  g.n = nExt->expr();
  g.k = kExt->expr();
  g.a = mat(*a, maps[0], r - 2, r);
  g.b = mat(*b, maps[1], r, r - 1);
  g.c = mat(*c, maps[2], r - 2, r - 1);
  steps.push_back(std::move(g));
  return success();
}

/// An `h20_all_reduce` generic (attn.all_reduce) as one "all_reduce" step:
/// dst = the sum over the tensor-parallel ranks of src. Both views must be
/// contiguous (one NCCL buffer each).
LogicalResult Evaluator::evalAllReduce(linalg::GenericOp op) {
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  const View &src = (*operands)[0], &dst = (*operands)[1];
  std::optional<Lin> srcElements = contiguousElements(src), dstElements = contiguousElements(dst);
  if (!srcElements || !dstElements)
    return op->emitError("GPU target: an all-reduce of a strided (non-contiguous) view");
  const Lin srcBytes = srcElements->scaled(elementBytes(src.element)),
            dstBytes = dstElements->scaled(elementBytes(dst.element));
  if (srcBytes != dstBytes || src.element != dst.element)
    return op->emitError("GPU target: all-reduce source and destination differ in size or type");
  use(src.buffer);
  use(dst.buffer);
  int64_t eb = elementBytes(src.element);
  Type e = src.element;
  if (!e.isF32() && !e.isF16() && !e.isBF16())
    return op->emitError("GPU target: an all-reduce of ") << e << " (f32, f16 or bf16 only)";
  runtime::AllReduceStep step;
  step.dtype = dtypeName(e);
  step.src = src.buffer;
  step.srcOffsetBytes = src.offset.scaled(eb).expr();
  step.dst = dst.buffer;
  step.dstOffsetBytes = dst.offset.scaled(eb).expr();
  step.bytes = srcBytes.expr();
  steps.push_back(std::move(step));
  return success();
}

LogicalResult Evaluator::evalAttention(linalg::GenericOp op) {
  auto q = view(op.getDpsInputs()[0], op), k = view(op.getDpsInputs()[1], op),
       v = view(op.getDpsInputs()[2], op), o = view(op.getDpsInits()[0], op);
  if (failed(q) || failed(k) || failed(v) || failed(o))
    return failure();
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.attention");
  if (!attrs)
    return op->emitError("GPU target: attention call without its attributes");
  bool causal = attrs.getAs<BoolAttr>("causal").getValue();
  bool bottomRight = attrs.getAs<BoolAttr>("bottom_right").getValue();
  Lin sq = q->sizes[2], skv = k->sizes[2];
  if (causal && !bottomRight && sq != skv)
    return op->emitError("GPU target: top-left causal attention with S_q != S_kv is not "
                         "supported by the kernel");
  // Chunked prefill: in the last chunk the rows past the prompt's end are
  // padding, and a padded query row would attend to every key before it.
  // Causal attention whose query rows are the chunk's (bottom-right
  // aligned, S_q = C) runs on the n real rows against the keys up to the
  // last real one (S_kv - C + n). The padding's rows of O are left as they
  // are: no real row reads them (row-wise ops, causal attention, the last
  // real row's logits). Not in a whole-prompt chunk (h20.chunked "whole"):
  // such a graph has ops that mix rows, causal but possibly masking the
  // padding arithmetically, and an unwritten row could hold NaN.
  auto chunkedInfo = func->getAttrOfType<DictionaryAttr>("h20.chunked");
  bool wholePrompt = chunkedInfo && chunkedInfo.get("whole");
  if (causal && bottomRight && !wholePrompt && roles.chunkTokensArg >= 0 &&
      !roles.inputDims.empty() && roles.inputDims[0].size() > 1) {
    int64_t chunk = roles.inputDims[0][1];
    if (sq.isConst() && sq.c == chunk && skv.n == 0 && skv.c >= chunk) {
      sq = Lin{0, 0, 1};
      skv = skv - Lin{chunk, 0, 0} + Lin{0, 0, 1};
    }
  }
  if (!q->sizes[1].isConst() || !k->sizes[1].isConst() || !q->sizes[3].isConst() ||
      !v->sizes[3].isConst())
    return op->emitError("GPU target: attention heads and head dims must be static");
  int dtype = q->element.isF32() ? 0 : q->element.isF16() ? 1 : q->element.isBF16() ? 2 : -1;
  if (dtype < 0 || k->element != q->element || v->element != q->element)
    return op->emitError("GPU target: attention needs Q, K, V of one type f32/f16/bf16");
  // The kernel h20-choose-attention-kernels chose and recorded; nothing is
  // chosen here.
  auto chosen = attrs.getAs<DictionaryAttr>("kernel");
  if (!chosen)
    return op->emitError("GPU target: internal: an attention library call without a chosen "
                         "kernel (h20-choose-attention-kernels did not run)");
  auto field = [&](StringRef name) -> int64_t {
    auto a = chosen.getAs<IntegerAttr>(name);
    return a ? a.getInt() : -1;
  };
  auto kindAttr = chosen.getAs<StringAttr>("kind");
  AttentionVariant variant;
  variant.kind = kindAttr && kindAttr.getValue() == "wgmma" ? 1 : 0;
  variant.dtype = dtype;
  variant.headDim = static_cast<int>(q->sizes[3].c);
  variant.headDimV = static_cast<int>(v->sizes[3].c);
  variant.blockM = static_cast<int>(field("block_m"));
  variant.blockN = static_cast<int>(field("block_n"));
  variant.threads = static_cast<int>(field("threads"));
  variant.stages = static_cast<int>(field("stages"));
  variant.schedule = static_cast<int>(field("schedule"));
  std::string why;
  if (!variant.isSupported(&why))
    return op->emitError("GPU target: the recorded attention kernel ")
           << chosen << " is not one the kernels have: " << why;
  if (llvm::find(program.attentionVariants, variant) == program.attentionVariants.end())
    program.attentionVariants.push_back(variant);
  int64_t window = -1;
  if (auto w = attrs.getAs<IntegerAttr>("window"))
    window = w.getInt();
  double softcap = 0;
  if (auto s = attrs.getAs<FloatAttr>("softcap"))
    softcap = s.getValueAsDouble();
  AttentionLaunch launch;
  launch.q = &*q, launch.k = &*k, launch.v = &*v, launch.o = &*o;
  launch.sq = sq;
  launch.skv = skv;
  launch.scale = attrs.getAs<FloatAttr>("scale").getValueAsDouble();
  launch.softcap = softcap;
  launch.causal = causal;
  launch.windowLeft = window;
  for (const View *x : {launch.q, launch.k, launch.v, launch.o})
    use(x->buffer);
  steps.push_back(attentionStep(variant, launch, modules.attention));
  auto layer = attrs.getAs<IntegerAttr>("kv_layer");
  attentionLayers.push_back(
      {static_cast<int64_t>(steps.size()) - 1, layer ? layer.getInt() : -1});
  return success();
}

/// Removes the start carrier, views[at] (SparseAttnToLinalg.cpp,
/// startCarrier: an [start + 1] i8 input), and sets `start` from its
/// length. `what` names the call in the error of a malformed carrier.
static LogicalResult takeStartCarrier(linalg::GenericOp op, Views &views, unsigned at,
                                      StringRef what, Lin &start) {
  if (at >= views.size() || views[at].sizes.size() != 1)
    return op->emitError("GPU target: internal: the ") << what << "'s start carrier is not rank 1";
  start = views[at].sizes[0] - Lin{1};
  views.erase(views.begin() + at);
  return success();
}

LogicalResult Evaluator::evalIndexer(linalg::GenericOp op) {
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.indexer");
  if (!attrs)
    return op->emitError("GPU target: indexer call without its attributes");
  int mode = static_cast<int>(attrs.getAs<IntegerAttr>("mode").getInt());
  unsigned numIns = mode == 1 ? 4 : 3;
  // An extra last input carries the start (takeStartCarrier).
  const bool hasStart = op.getNumDpsInputs() == numIns + 1;
  if ((op.getNumDpsInputs() != numIns && !hasStart) || op.getNumDpsInits() != 2)
    return op->emitError("GPU target: internal: malformed indexer call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  Views v = *operands;
  Lin start{0};
  if (hasStart && failed(takeStartCarrier(op, v, numIns, "indexer", start)))
    return failure();
  // Split query rows (rankRowsOf): this rank scores its rows only; the
  // other rows of `out` are left as they are (only calls split the same
  // way read them, each its own rows).
  auto rankRowCount = rankRowsOf(op, v[0].sizes[0], chunkedInt("chunk"));
  if (failed(rankRowCount))
    return failure();
  if (*rankRowCount > 0) {
    if (!v[0].strides[0].isConst() || !v[2].strides[0].isConst() ||
        !v[numIns].strides[0].isConst() || (mode == 1 && !v[3].strides[0].isConst()))
      return op->emitError("GPU target: internal: split indexer rows of non-constant stride");
    start = start + Lin{0, 0, 0, 0, *rankRowCount};
    for (unsigned i : {0u, 2u, numIns})
      v[i] = rankRows(v[i], *rankRowCount);
    if (mode == 1)
      v[3] = rankRows(v[3], *rankRowCount);
  }
  const View &q = v[0], &k = v[1], &w = v[2];
  const View &out = v[numIns], &scratch = v[numIns + 1];
  const View &cand = mode == 1 ? v[3] : out; // any rank-2 int64 view when unused
  auto code = kernelElementCode;
  IndexerKernel kernel{code(q.element), code(k.element), code(w.element), mode};
  if (kernel.queryType < 0 || kernel.keyType < 0 || kernel.weightType < 0)
    return op->emitError("GPU target: the indexer kernel takes f32/f16/bf16 query, keys and "
                         "weights");
  if (q.sizes.size() != 3 || k.sizes.size() != 2 || w.sizes.size() != 2 ||
      cand.sizes.size() != 2 || out.sizes.size() != 2 || scratch.sizes.size() != 2)
    return op->emitError("GPU target: internal: indexer operands of unexpected ranks");
  if (!q.sizes[1].isConst() || !q.sizes[2].isConst() || !out.sizes[1].isConst() ||
      !cand.sizes[1].isConst() || !scratch.sizes[0].isConst())
    return op->emitError("GPU target: indexer heads, head dim, top-k and candidates must be "
                         "static");
  if (out.sizes[1].c > kIndexerMaxK)
    return op->emitError("GPU target: the indexer kernel selects at most ")
           << kIndexerMaxK << " entries per query, this op " << out.sizes[1].c;
  int64_t smem = indexerSmemBytes(mode, q.sizes[1].c, q.sizes[2].c, cand.sizes[1].c);
  // The kernel h20-choose-attention-kernels chose and recorded: the
  // tensor-core kernel with the streaming top-k ("mma") or indexer.cuh's.
  auto choice = op->getAttrOfType<DictionaryAttr>("h20.kernel");
  auto kind = choice ? choice.getAs<StringAttr>("kind") : StringAttr();
  if (!kind)
    return op->emitError("GPU target: internal: indexer call without its recorded kernel "
                         "(h20-choose-attention-kernels did not run)");
  const bool useMma = kind.getValue() == "mma";
  const int64_t block = attrs.getAs<IntegerAttr>("block").getInt();
  // Mode 1's bits are sized by the entries: the keys', or in a chunked
  // prefill (where a chunk sees more entries than the one before) the
  // last chunk's, at most what the chooser sized the kernel for.
  const int64_t entries =
      k.sizes[0].isConst() ? k.sizes[0].c : largestOverChunks(k.sizes[0]).value_or(-1);
  IndexerKernel mma = kernel;
  if (useMma) {
    auto field = [&](StringRef name) {
      auto a = choice.getAs<IntegerAttr>(name);
      return a ? static_cast<int>(a.getInt()) : -1;
    };
    mma.mma = true;
    mma.paddedHeads = field("padded_heads");
    mma.paddedDim = field("padded_dim");
    mma.cap = field("cap");
    mma.ctasPerSm = field("ctas_per_sm");
    if (auto gather = choice.getAs<BoolAttr>("gather"))
      mma.gather = mode == 1 && gather.getValue();
    // The preconditions chooseIndexerMma checked, for this call's views.
    if (mma.queryType != mma.keyType || (mma.queryType != 1 && mma.queryType != 2) ||
        mma.paddedHeads < q.sizes[1].c || mma.paddedDim < q.sizes[2].c ||
        mma.cap < out.sizes[1].c + 64 || mma.ctasPerSm < 1 ||
        (mode == 1 && (entries < 0 || entries > field("entries"))))
      return op->emitError("GPU target: internal: the indexer's recorded mma kernel does not fit "
                           "this call (")
             << entries << " entries)";
    kernel = mma;
    smem = indexerMmaSmemBytes(mma, std::max<int64_t>(entries, 0), block);
  }
  if (!useMma && smem > 160 * 1024)
    return op->emitError("GPU target: the indexer's query row (")
           << q.sizes[1].c << " heads x " << q.sizes[2].c << ") does not fit in shared memory";
  if (llvm::find(program.indexerKernels, kernel) == program.indexerKernels.end())
    program.indexerKernels.push_back(kernel);
  // The mma kernel: a CTA per rowsPerCta() query rows (S CTAs when S is
  // not known here; the extra ones return at once).
  Lin gridX{scratch.sizes[0].c};
  if (useMma)
    gridX = q.sizes[0].isConst()
                ? Lin{std::max<int64_t>(1, (q.sizes[0].c + mma.rowsPerCta() - 1) / mma.rowsPerCta())}
                : q.sizes[0];
  std::vector<runtime::LaunchArg> args;
  for (const View *x : {&q, &k, &w, &cand, &out, &scratch})
    args.push_back(memrefArg(*x));
  args.push_back(intArg(runtime::LaunchArg::I64, Lin{attrs.getAs<IntegerAttr>("ratio").getInt()}));
  args.push_back(intArg(runtime::LaunchArg::I64, Lin{attrs.getAs<IntegerAttr>("block").getInt()}));
  args.push_back(f32Arg(attrs.getAs<FloatAttr>("scale").getValueAsDouble()));
  args.push_back(intArg(runtime::LaunchArg::I64, start));
  steps.push_back(launchStep(modules.indexer, kernel.name(), gridX,
                             useMma ? kIndexerMmaThreads : kIndexerThreads, smem, std::move(args)));
  return success();
}

LogicalResult Evaluator::evalSparseAttention(linalg::GenericOp op) {
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.sparse_attention");
  if (!attrs)
    return op->emitError("GPU target: sparse attention call without its attributes");
  // A window ring's call has one more, last input carrying the queries'
  // start (takeStartCarrier).
  const bool hasStart = static_cast<bool>(attrs.get("ring"));
  const unsigned numIns = op.getNumDpsInputs() - (hasStart ? 1 : 0);
  if ((numIns != 3 && numIns != 5) || op.getNumDpsInits() != 1)
    return op->emitError("GPU target: internal: malformed sparse attention call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  Views v = *operands;
  const bool compressed = numIns == 5;
  // Query row 0's prompt position (a ring's carrier; set below otherwise).
  Lin start{0};
  if (hasStart && failed(takeStartCarrier(op, v, numIns, "sparse attention", start)))
    return failure();
  const View &q = v[0], &lat = v[1], &sink = v[2], &out = v.back();
  // Window-only: the kernel never reads compressed rows or indices; any
  // rank-2 views fill their parameters.
  const View &cmp = compressed ? v[3] : lat, &idx = compressed ? v[4] : lat;
  auto code = kernelElementCode;
  if (q.sizes.size() != 3 || lat.sizes.size() != 2 || sink.sizes.size() != 1 ||
      cmp.sizes.size() != 2 || idx.sizes.size() != 2 || out.sizes.size() != 3)
    return op->emitError("GPU target: internal: sparse attention operands of unexpected ranks");
  // Without a ring the latent's rows are positions 0..L-1 and the queries
  // its last S: start = L - S.
  if (!hasStart)
    start = lat.sizes[0] - v[0].sizes[0];
  // Split query rows (rankRowsOf): this rank attends its rows. Where the
  // call is gathered (split_gather) the others are zeroed first, so the
  // all-reduce after it (the sum over the ranks) gathers the whole output
  // on every rank; otherwise only the split's own path reads them.
  auto rankRowCount = rankRowsOf(op, v[0].sizes[0], chunkedInt("chunk"));
  if (failed(rankRowCount))
    return failure();
  if (*rankRowCount > 0) {
    View &o = v.back();
    if (!v[0].strides[0].isConst() || !o.strides[0].isConst() ||
        (compressed && !v[4].strides[0].isConst()))
      return op->emitError("GPU target: internal: split attention rows of non-constant stride");
    // Gathered here (no GEMM of the output projection took the split
    // over): the other rows are zeroed for the all-reduce's sum.
    if (failed(clearIfGathered(op, o, "attention")))
      return failure();
    // The kernel takes its queries as the last rows of the latent (query
    // row i is latent row L - S + i): the latent ends after this rank's
    // last row, L' = L - R + (r + 1) B (the rows after it are no real
    // query's window; in a last chunk L' may pass L by padding rows, still
    // inside the cache, which holds whole chunks).
    const int64_t b = *rankRowCount;
    v[1].sizes[0] = v[1].sizes[0] - v[0].sizes[0] + Lin{b, 0, 0, 0, b};
    start = start + Lin{0, 0, 0, 0, b};
    v[0] = rankRows(v[0], b);
    o = rankRows(o, b);
    if (compressed)
      v[4] = rankRows(v[4], b);
  }
  const int dt = code(q.element);
  if ((dt != 1 && dt != 2) || code(lat.element) != dt || code(out.element) != dt ||
      (compressed && code(cmp.element) != dt) || code(sink.element) < 0)
    return op->emitError("GPU target: the sparse attention kernel takes f16/bf16 query, latent, "
                         "compressed rows and output of one type");
  if (!q.sizes[1].isConst() || !q.sizes[2].isConst() || !idx.sizes[1].isConst())
    return op->emitError("GPU target: sparse attention heads, head dim and picks must be static");
  const int64_t window = attrs.getAs<IntegerAttr>("window").getInt();
  const int64_t heads = q.sizes[1].c, dim = q.sizes[2].c;
  const int64_t slots = window + (compressed ? idx.sizes[1].c : 0);
  // The variant h20-choose-attention-kernels recorded (it checked the fit).
  auto choice = op->getAttrOfType<DictionaryAttr>("h20.kernel");
  auto paddedDim = choice ? choice.getAs<IntegerAttr>("padded_dim") : IntegerAttr();
  auto headsPerCta = choice ? choice.getAs<IntegerAttr>("heads_per_cta") : IntegerAttr();
  auto kind = choice ? choice.getAs<StringAttr>("kind") : StringAttr();
  auto threads = choice ? choice.getAs<IntegerAttr>("threads") : IntegerAttr();
  if (!paddedDim || !headsPerCta || !kind || !threads ||
      (kind.getValue() != "mma" && kind.getValue() != "wgmma"))
    return op->emitError("GPU target: internal: sparse attention call without its recorded "
                         "kernel (h20-choose-attention-kernels did not run)");
  SparseAttentionKernel kernel{dt, code(sink.element), static_cast<int>(paddedDim.getInt()),
                               compressed, kind.getValue() == "wgmma" ? 1 : 0};
  const int64_t smem = sparseAttentionSmemBytes(kernel.paddedDim, slots, kernel.kind);
  if (dim > kernel.paddedDim || headsPerCta.getInt() != kSparseAttentionHeadsPerCta ||
      threads.getInt() != kernel.threads() ||
      (kernel.kind == 1 && !sparseAttentionWgmmaTakes(kernel.paddedDim)))
    return op->emitError("GPU target: internal: the recorded sparse attention kernel (")
           << kind.getValue() << ", head dim " << kernel.paddedDim
           << ") does not fit this call (head dim " << dim << ")";
  if (smem > kSparseAttentionSmemLimit)
    return op->emitError("GPU target: sparse attention with head dim ")
           << dim << " and " << slots << " key slots does not fit the kernel's shared memory"
           << (kernel.kind == 1 ? " (the wgmma kernel was chosen before the picks were known; "
                                  "--attention-kernel=mma takes more)"
                                : "");
  if (llvm::find(program.sparseAttentionKernels, kernel) == program.sparseAttentionKernels.end())
    program.sparseAttentionKernels.push_back(kernel);
  std::vector<runtime::LaunchArg> args;
  for (const View *x : {&q, &lat, &sink, &cmp, &idx, &out})
    args.push_back(memrefArg(*x));
  // The kernel's softmax runs in base 2: the scale times log2(e).
  const double scale = attrs.getAs<FloatAttr>("scale").getValueAsDouble();
  args.push_back(f32Arg(scale * 1.4426950408889634));
  args.push_back(intArg(runtime::LaunchArg::I64, Lin{window}));
  args.push_back(intArg(runtime::LaunchArg::I64, start));
  runtime::LaunchStep launch = launchStep(modules.sparseAttention, kernel.name(), q.sizes[0],
                                          kernel.threads(), smem, std::move(args));
  launch.grid[1] = runtime::LinearExpr::constant((heads + kSparseAttentionHeadsPerCta - 1) /
                                                 kSparseAttentionHeadsPerCta);
  steps.push_back(std::move(launch));
  return success();
}

LogicalResult Evaluator::evalRoutedExperts(linalg::GenericOp op) {
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.routed_experts");
  if (!attrs)
    return op->emitError("GPU target: routed experts call without its attributes");
  auto weights = attrs.getAs<StringAttr>("weights");
  const bool mxfp4 = weights && weights.getValue() == "mxfp4";
  const unsigned numIn = mxfp4 ? 9 : 6;
  if (op.getNumDpsInputs() != numIn || op.getNumDpsInits() != 1)
    return op->emitError("GPU target: internal: malformed routed experts call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  const Views &v = *operands;
  // Float experts: W1, W3 [E, Dm, I], W2 [E, I, Dm]. MXFP4 experts: W1, W3
  // [E, I, Dm / 2] and W2 [E, Dm, I / 2] packed bytes, each followed by its
  // scale bytes [E, out, in / 32] (s1, s3, s2).
  const View &x = v[0], &router = v[1], &bias = v[2], &y = v[numIn];
  const View &w1 = v[3], &w3 = v[mxfp4 ? 5 : 4], &w2 = v[mxfp4 ? 7 : 5];
  const View *s1 = mxfp4 ? &v[4] : nullptr, *s3 = mxfp4 ? &v[6] : nullptr,
             *s2 = mxfp4 ? &v[8] : nullptr;
  auto code = kernelElementCode;
  const int dt = code(x.element), bt = code(bias.element);
  if (dt < 0 || bt < 0 || code(y.element) != dt)
    return op->emitError("GPU target: routed experts take f32/f16/bf16 tokens and bias");
  if (x.sizes.size() != 2 || router.sizes.size() != 2 || bias.sizes.size() != 1 ||
      w1.sizes.size() != 3 || w3.sizes.size() != 3 || w2.sizes.size() != 3 || y.sizes.size() != 2)
    return op->emitError("GPU target: internal: routed experts operands of unexpected ranks");
  for (const View &w : v)
    for (const Lin &d : w.sizes)
      if (!d.isConst())
        return op->emitError("GPU target: routed experts need static shapes (the token count "
                             "of a whole-prompt program)");
  const int64_t n = x.sizes[0].c, dm = x.sizes[1].c, e = router.sizes[1].c,
                inter = mxfp4 ? w1.sizes[1].c : w1.sizes[2].c;
  // Expert parallelism (h20-tensor-parallel): the weights hold this rank's
  // el of the e experts, [rank * el, (rank + 1) * el); routing still picks
  // among all e. One GPU: el = e, first 0.
  const int64_t el = w1.sizes[0].c;
  if (el < 1 || el > e || e % el || w3.sizes[0].c != el || w2.sizes[0].c != el)
    return op->emitError("GPU target: routed experts: ")
           << el << " experts' weights for a router over " << e
           << " experts (expert parallelism needs an equal share of them per rank)";
  runtime::LaunchArg first;
  first.kind = runtime::LaunchArg::I32;
  first.value = Lin{0, 0, 0, 0, el == e ? 0 : el}.expr();
  // The MXFP4 kernel copies packed rows in 16-byte pieces (its scale bytes
  // are read one by one): weights are identity views of their own buffers.
  auto aligned = [](const View &w) {
    return w.strides[2] == Lin{1} && w.offset.isConst() && w.offset.c % 16 == 0 &&
           w.strides[1].isConst() && w.strides[1].c % 16 == 0 && w.strides[0].isConst();
  };
  if (mxfp4 && (!aligned(w1) || !aligned(w3) || !aligned(w2) || !s1->strides[0].isConst() ||
                !s2->strides[0].isConst() || !s3->strides[0].isConst()))
    return op->emitError("GPU target: internal: MXFP4 expert weights must be contiguous with "
                         "16-byte aligned rows");
  const int64_t k = attrs.getAs<IntegerAttr>("top_k").getInt();
  if (std::string why; !moeShapeSupported(e, k, &why))
    return op->emitError("GPU target: ") << why; // why names the routed experts
  program.usesMoe = true;
  if (n == 0)
    return success();
  const std::string dtype = dtypeName(x.element);
  Builder types(op.getContext());
  Type f32 = types.getF32Type(), i32 = types.getI32Type();

  // Tile of tokens (h20-choose-attention-kernels' choice) and its
  // scratch, allocated once and reused by every tile.
  auto choice = op->getAttrOfType<DictionaryAttr>("h20.kernel");
  auto tileAttr = choice ? choice.getAs<IntegerAttr>("tile_tokens") : IntegerAttr();
  auto gemmAttr = choice ? choice.getAs<StringAttr>("expert_gemm") : StringAttr();
  const bool fp8 = gemmAttr && gemmAttr.getValue() == "mxfp4_fp8";
  const bool wgmma = fp8 || (gemmAttr && gemmAttr.getValue() == "mxfp4_wgmma");
  const bool gemmOk =
      gemmAttr && (mxfp4 ? gemmAttr.getValue() == "mxfp4" || (wgmma && moeFp4GemmWgmmaTakes(dt))
                         : gemmAttr.getValue() == "cublaslt");
  if (fp8 && (dm % kMoeFp4GemmFp8BlockK || inter % kMoeFp4GemmFp8BlockK))
    return op->emitError("GPU target: internal: FP8 expert GEMMs recorded for K not a multiple "
                         "of 128");
  if (!tileAttr || tileAttr.getInt() < 1 || !gemmOk || tileAttr.getInt() * k > kMoeMaxRows)
    return op->emitError("GPU target: internal: routed experts call without a valid recorded "
                         "kernel (h20-choose-attention-kernels did not run)");
  program.moeWgmma |= wgmma;
  const int64_t tile = std::min(tileAttr.getInt(), n);
  auto temp = [&](int64_t elems, Type t) {
    return addBuffer(Buffer{"temp", -1, checkedMul(elems, elementBytes(t)), dtypeName(t)});
  };
  const int bLogits = temp(tile * e, f32), bIds = temp(tile * k, i32), bW = temp(tile * k, f32),
            bCounts = temp(el, i32), bOff = temp(el + 1, i32), bPos = temp(tile * k, i32),
            bRowTok = temp(tile * k, i32), bG = temp(tile * k * inter, f32),
            bU = temp(tile * k * inter, f32), bYp = temp(tile * k * dm, f32);
  // The GEMMs' A: Xp [R, Dm] and A [R, I] in the token type, or, for FP8
  // expert GEMMs, one e4m3 buffer [R, max(Dm, I)] and its scales [K / 128,
  // R] that the FP8 gather writes for W1 and W3 and the FP8 SwiGLU
  // rewrites for W2 (each GEMM has finished reading it by then: one
  // stream). The FP8 pair is smaller than Xp and A (1 + 4 / 128 bytes an
  // element against 2 + 2), so moeTileTokens' budget covers it.
  Type f8 = types.getType<Float8E4M3FNType>();
  const int64_t kMax = std::max(dm, inter);
  const int bXp = fp8 ? -1 : temp(tile * k * dm, x.element),
            bA = fp8 ? -1 : temp(tile * k * inter, x.element),
            bA8 = fp8 ? temp(tile * k * kMax, f8) : -1,
            bAs = fp8 ? temp(tile * k * (kMax / kMoeFp4GemmFp8BlockK), f32) : -1;

  // Row-major views of the scratch, and of the operands at a row offset.
  auto rows = [&](int buffer, ArrayRef<int64_t> shape, Type t) {
    SmallVector<Lin> sizes;
    for (int64_t d : shape)
      sizes.push_back(Lin{d});
    return identityView(buffer, t, sizes);
  };
  auto mat = [&](const View &w, unsigned rowDim, unsigned colDim, Lin batchStride) {
    return gemmOperand(w, batchStride, w.strides[rowDim], w.strides[colDim]);
  };
  auto gemm = [&](const View &a, const View &b, const View &c, int64_t m, int64_t nn,
                  int64_t kk, bool grouped) {
    runtime::GemmStep g;
    g.dtypeA = g.dtypeB = dtype;
    g.dtypeC = "float32";
    g.batch = runtime::LinearExpr::constant(1);
    g.m = runtime::LinearExpr::constant(m);
    g.n = runtime::LinearExpr::constant(nn);
    g.k = runtime::LinearExpr::constant(kk);
    g.a = mat(a, 0, 1, Lin{0});
    g.b = grouped ? mat(b, 1, 2, b.strides[0]) : mat(b, 0, 1, Lin{0});
    g.c = mat(c, 0, 1, Lin{0});
    if (grouped) {
      use(bOff);
      g.groups = el;
      g.groupBuffer = bOff;
    }
    steps.push_back(std::move(g));
  };
  auto launch = [&](const std::string &kernel, int64_t grid, ArrayRef<const View *> views,
                    std::vector<runtime::LaunchArg> scalars) {
    std::vector<runtime::LaunchArg> args;
    for (const View *w : views)
      args.push_back(memrefArg(*w));
    args.insert(args.end(), scalars.begin(), scalars.end());
    steps.push_back(launchStep(modules.moe, kernel, Lin{grid}, kMoeThreads, 0, std::move(args)));
  };
  // C [rr, nn] f32 = A [rr, kk] . W_e per expert row range (offsets): a
  // grouped cuBLASLt GEMM on float weights, the MXFP4 kernel (which reads
  // the offsets on the device and dequantises in its load path) otherwise.
  // FP8: A is the e4m3 buffer and its scales as [rr, kk] / [kk / 128, rr]
  // (`a` unused).
  auto expertGemm = [&](const View &a, const View &w, const View *scales, const View &c, int64_t rr,
                        int64_t nn, int64_t kk) {
    if (!scales)
      return gemm(a, w, c, rr, nn, kk, true);
    use(bOff);
    const View offsets = rows(bOff, {el + 1}, i32);
    SmallVector<const View *, 6> operands{&a};
    View aq, as;
    if (fp8) {
      aq = rows(bA8, {rr, kk}, f8);
      as = rows(bAs, {kk / kMoeFp4GemmFp8BlockK, rr}, f32);
      operands = {&aq, &as};
    }
    operands.append({&w, scales, &offsets, &c});
    std::vector<runtime::LaunchArg> args;
    for (const View *t : operands)
      args.push_back(memrefArg(*t));
    runtime::LaunchStep l = launchStep(
        modules.moe, fp8 ? moeFp4GemmFp8Kernel() : moeFp4GemmKernel(dt, wgmma),
        Lin{moeFp4GemmGridX(nn, dt)}, kMoeThreads,
        fp8 ? moeFp4GemmFp8SmemBytes() : moeFp4GemmSmemBytes(dt, wgmma), std::move(args));
    l.grid[1] = runtime::LinearExpr::constant(moeFp4GemmGridY(rr, el, dt));
    steps.push_back(std::move(l));
  };
  const double temperature = attrs.getAs<FloatAttr>("temp").getValueAsDouble();
  const double scaling = attrs.getAs<FloatAttr>("scaling").getValueAsDouble();
  // limit <= 0 clamps nothing (transformers' swiglu_limit rule): the kernel
  // clamps to the largest float, which no finite value exceeds.
  double limit = attrs.getAs<FloatAttr>("limit").getValueAsDouble();
  if (!(limit > 0))
    limit = std::numeric_limits<float>::max();
  for (int64_t t0 = 0; t0 < n; t0 += tile) {
    const int64_t tt = std::min(tile, n - t0), r = tt * k;
    const View xt = rowSlice(x, Lin{t0}, tt), yt = rowSlice(y, Lin{t0}, tt);
    const View logits = rows(bLogits, {tt, e}, f32), ids = rows(bIds, {tt, k}, i32),
               weights = rows(bW, {tt, k}, f32), counts = rows(bCounts, {el}, i32),
               offsets = rows(bOff, {el + 1}, i32), pos = rows(bPos, {tt, k}, i32),
               rowTok = rows(bRowTok, {r}, i32), g = rows(bG, {r, inter}, f32),
               u = rows(bU, {r, inter}, f32), yp = rows(bYp, {r, dm}, f32);
    const View xp = fp8 ? View() : rows(bXp, {r, dm}, x.element),
               a = fp8 ? View() : rows(bA, {r, inter}, x.element);
    gemm(xt, router, logits, tt, e, dm, false);
    use(bCounts);
    runtime::MemsetStep clear;
    clear.buffer = bCounts;
    clear.bytes = runtime::LinearExpr::constant(el * 4);
    steps.push_back(clear);
    launch(moeRouteKernel(bt), moeRouteGrid(tt), {&logits, &bias, &ids, &weights, &counts, &pos},
           {f32Arg(temperature), f32Arg(scaling), first});
    launch(moePositionsKernel(), moePositionsGrid(el), {&ids, &counts, &offsets, &pos, &rowTok},
           {first});
    // Under expert parallelism only this rank's picks (offsets[el] of the
    // r rows, about r / N) are placed: gather and SwiGLU read offsets[el]
    // on the device and stop there (the rest are unused rows of the
    // scratch, never read by the GEMMs, which stop at the offsets, nor by
    // the combine, which skips pos -1). Their grids still cover r rows.
    if (fp8) {
      const View xq = rows(bA8, {r, dm}, f8), xs = rows(bAs, {dm / kMoeFp4GemmFp8BlockK, r}, f32);
      launch(moeGatherFp8Kernel(dt), moeGatherGrid(r), {&xt, &rowTok, &xq, &xs, &offsets}, {});
    } else {
      launch(moeGatherKernel(dt), moeGatherGrid(r), {&xt, &rowTok, &xp, &offsets}, {});
    }
    expertGemm(xp, w1, s1, g, r, inter, dm);
    expertGemm(xp, w3, s3, u, r, inter, dm);
    if (fp8) {
      const View aq = rows(bA8, {r, inter}, f8),
                 as = rows(bAs, {inter / kMoeFp4GemmFp8BlockK, r}, f32);
      launch(moeSwigluFp8Kernel(), moeGatherGrid(r), {&g, &u, &aq, &as, &offsets},
             {f32Arg(limit)});
    } else {
      launch(moeSwigluKernel(dt), moeSwigluGrid(r * inter), {&g, &u, &a, &offsets},
             {f32Arg(limit)});
    }
    expertGemm(a, w2, s2, yp, r, dm, inter);
    launch(moeCombineKernel(dt), moeCombineGrid(tt), {&yp, &pos, &weights, &yt}, {});
  }
  return success();
}

/// Whether `v` is a 2-D view with unit column stride (row-major rows).
static bool rowMajor2d(const View &v) { return v.sizes.size() == 2 && v.strides[1] == Lin{1}; }

/// A block-scaled FP8 linear split by query rows (its calls' marks):
/// this rank's rows of X and Xq, and X's scales packed as [ceil(K / 128),
/// B] at the start of their buffer (cuBLASLt reads the scales of a GEMM of
/// M = B rows packed so); false when the calls are not split.
static FailureOr<bool> splitFp8Rows(linalg::GenericOp op, int64_t chunk, View &x, View &xq,
                                    View &xs) {
  auto rows = rankRowsOf(op, xq.sizes[0], chunk);
  if (failed(rows))
    return failure();
  if (*rows == 0)
    return false;
  if (!x.strides[0].isConst() || !xq.strides[0].isConst() || !xs.sizes[0].isConst())
    return op->emitError("GPU target: internal: split FP8 rows of non-constant stride");
  x = rankRows(x, *rows);
  xq = rankRows(xq, *rows);
  xs.sizes[1] = Lin{*rows};
  xs.strides[0] = Lin{*rows};
  return true;
}

LogicalResult Evaluator::evalFp8Quantize(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 2)
    return op->emitError("GPU target: internal: malformed FP8 quantisation call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  View &x = (*operands)[0], &xq = (*operands)[1], &xs = (*operands)[2];
  if (failed(splitFp8Rows(op, chunkedInt("chunk"), x, xq, xs)))
    return failure();
  auto code = kernelElementCode;
  const int dt = code(x.element);
  if (dt < 0 || x.sizes.size() != 2 || !rowMajor2d(xq) || !rowMajor2d(xs) ||
      !isa<Float8E4M3FNType>(xq.element) || !xs.element.isF32())
    return op->emitError("GPU target: internal: FP8 quantisation operands of unexpected types "
                         "or layouts");
  if (!x.sizes[1].isConst())
    return op->emitError("GPU target: FP8 quantisation needs a static K");
  addFp8QuantizeStep(dt, x, xq, xs, x.sizes[0], x.sizes[1].c);
  return success();
}

void Evaluator::addFp8QuantizeStep(int dt, const View &x, const View &xq, const View &xs,
                                   Lin rows, int64_t k) {
  std::vector<runtime::LaunchArg> args;
  for (const View *v : {&x, &xq, &xs})
    args.push_back(memrefArg(*v));
  // One warp per block of 128: rows x ceil(k / 128) warps, grid_div of them a CTA.
  runtime::LaunchStep l = launchStep(modules.fp8, fp8QuantizeKernel(dt),
                                     rows.scaled((k + 127) / 128), kFp8QuantThreads, 0,
                                     std::move(args));
  l.gridDiv[0] = kFp8QuantBlocksPerCta;
  steps.push_back(std::move(l));
}

LogicalResult Evaluator::evalFp8Gemm(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 4 || op.getNumDpsInits() != 1)
    return op->emitError("GPU target: internal: malformed FP8 GEMM call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  View &xq = (*operands)[0], &xs = (*operands)[1], &w = (*operands)[2], &scale = (*operands)[3],
       &y = (*operands)[4];
  // Split by query rows: the rank's rows of Xq (X's scales packed, as the
  // quantising call wrote them) and of Y, zeroed first where gathered.
  View unused = xq;
  auto split = splitFp8Rows(op, chunkedInt("chunk"), unused, xq, xs);
  if (failed(split))
    return failure();
  if (*split) {
    if (!y.strides[0].isConst())
      return op->emitError("GPU target: internal: split FP8 rows of non-constant stride");
    if (failed(clearIfGathered(op, y, "FP8 GEMM")))
      return failure();
    y = rankRows(y, xq.sizes[0].c);
  }
  if (!rowMajor2d(xq) || !rowMajor2d(xs) || !rowMajor2d(w) || !rowMajor2d(scale) || !rowMajor2d(y))
    return op->emitError("GPU target: the FP8 GEMM needs row-major X, its scales, W, W's "
                         "scales and Y");
  if (!w.sizes[0].isConst() || !w.sizes[1].isConst())
    return op->emitError("GPU target: the FP8 GEMM needs a static weight");
  const int64_t n = w.sizes[0].c, k = w.sizes[1].c, kp = runtime::fp8PaddedKBlocks(k);
  // The layouts GpuProgram.h's "gemm" states: X's scales [ceil(K / 128),
  // M] with M fastest (rows of M elements), W's [ceil(N / 128), kp] with
  // rows of kp elements (the lowering padded them).
  if (xs.strides[0] != xq.sizes[0] || scale.strides[0] != Lin{kp})
    return op->emitError("GPU target: FP8 GEMM scales that are not packed as cuBLASLt reads "
                         "them");
  runtime::GemmStep g;
  g.dtypeA = g.dtypeB = "float8_e4m3fn";
  g.dtypeC = dtypeName(y.element);
  g.batch = runtime::LinearExpr::constant(1);
  g.m = xq.sizes[0].expr();
  g.n = runtime::LinearExpr::constant(n);
  g.k = runtime::LinearExpr::constant(k);
  g.a = gemmOperand(xq, Lin{0}, xq.strides[0], Lin{1});
  // B [K, N] = W^T: column-major, each column a row of W.
  g.b = gemmOperand(w, Lin{0}, Lin{1}, w.strides[0]);
  g.c = gemmOperand(y, Lin{0}, y.strides[0], Lin{1});
  use(xs.buffer);
  use(scale.buffer);
  g.scaleA = {"vec128", xs.buffer, xs.offset.expr()};
  g.scaleB = {"blk128x128", scale.buffer, scale.offset.expr()};
  steps.push_back(std::move(g));
  return success();
}

} // namespace h20::gpu::detail
