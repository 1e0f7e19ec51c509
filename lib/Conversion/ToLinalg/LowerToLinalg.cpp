//===- LowerToLinalg.cpp - the h20-lower-to-linalg pass ------------------===//
#include "AttnToLinalg.h"
#include "Fp8ToLinalg.h"
#include "LoweringUtils.h"
#include "MoeToLinalg.h"
#include "OnnxToLinalg.h"

#include "h20/Conversion/Passes.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace h20 {
#define GEN_PASS_DEF_LOWERTOLINALG
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

/// onnx.Weight ops become trailing function arguments, described (in
/// argument order) by the function's `h20.weights` attribute.
void weightsToArguments(func::FuncOp func) {
  SmallVector<h20::onnx::WeightOp> weights;
  func.walk([&](h20::onnx::WeightOp w) { weights.push_back(w); });
  Builder b(func.getContext());
  SmallVector<Attribute> descriptions;
  Block &entry = func.getBody().front();
  SmallVector<Type> inputs(func.getArgumentTypes());
  for (h20::onnx::WeightOp w : weights) {
    Type t = w.getResult().getType();
    BlockArgument arg = entry.addArgument(t, w.getLoc());
    inputs.push_back(t);
    w.getResult().replaceAllUsesWith(arg);
    auto wt = cast<RankedTensorType>(t);
    SmallVector<NamedAttribute> d{b.getNamedAttr("name", w.getNameAttr()),
                                  b.getNamedAttr("shape", b.getDenseI64ArrayAttr(wt.getShape())),
                                  b.getNamedAttr("type", TypeAttr::get(wt.getElementType()))};
    if (auto f = w.getFileAttr())
      d.push_back(b.getNamedAttr("file", f));
    if (auto o = w.getOffsetAttr())
      d.push_back(b.getNamedAttr("offset", o));
    if (auto l = w.getLengthAttr())
      d.push_back(b.getNamedAttr("length", l));
    // h20-compute-type: the file holds another type than the device uses.
    if (auto st = w->getAttrOfType<TypeAttr>("h20.stored_type"))
      d.push_back(b.getNamedAttr("stored_type", st));
    // h20-tensor-parallel: the argument is one rank's slice of the weight.
    if (auto shard = w->getAttrOfType<DictionaryAttr>("h20.shard"))
      d.push_back(b.getNamedAttr("shard", shard));
    // h20-quantize-linears: the argument is derived from the stored tensor.
    if (auto derive = w->getAttrOfType<DictionaryAttr>("h20.derive"))
      d.push_back(b.getNamedAttr("derive", derive));
    // h20-place-tables: the argument lives in pinned host memory.
    if (auto placement = w->getAttrOfType<StringAttr>("h20.placement"))
      d.push_back(b.getNamedAttr("placement", placement));
    descriptions.push_back(b.getDictionaryAttr(d));
    w.erase();
  }
  func.setType(FunctionType::get(func.getContext(), inputs, func.getResultTypes()));
  func->setAttr("h20.weights", b.getArrayAttr(descriptions));
}

/// KV caches by value: the cache is a tensor [L, 2, H, N, D] (the layout is
/// a physical detail the CPU target does not need); writes and views are
/// insert/extract slices of it.
FailureOr<SmallVector<Value>> lowerKV(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto asTensor = [](h20::kv::CacheType t) {
    return RankedTensorType::get(t.getShape(), t.getElementType());
  };
  auto idx = [&](int64_t v) -> OpFoldResult { return b.getIndexAttr(v); };
  if (auto alloc = dyn_cast<h20::kv::AllocOp>(op)) {
    // Marked, so a target that keeps the cache across calls (the GPU's
    // chunked prefill) can find it.
    auto empty = tensor::EmptyOp::create(b, loc, asTensor(alloc.getCache().getType()),
                                         alloc.getDynamicSizes());
    empty->setAttr("h20.kv_cache", b.getUnitAttr());
    return SmallVector<Value>{empty.getResult()};
  }
  if (auto write = dyn_cast<h20::kv::WriteOp>(op)) {
    Value cache = op->getOperand(0), value = write.getValue();
    SmallVector<OpFoldResult> offsets{idx(write.getLayer()), idx(write.getKind()), idx(0),
                                      write.getOffset(), idx(0)};
    SmallVector<OpFoldResult> sizes{idx(1), idx(1)};
    for (int64_t k = 1; k < 4; ++k)
      sizes.push_back(tensor::getMixedSize(b, loc, value, k));
    SmallVector<OpFoldResult> strides(5, idx(1));
    return SmallVector<Value>{
        tensor::InsertSliceOp::create(b, loc, value, cache, offsets, sizes, strides)};
  }
  auto view = cast<h20::kv::ViewOp>(op);
  Value cache = op->getOperand(0);
  auto rt = cast<RankedTensorType>(view.getResult().getType());
  SmallVector<OpFoldResult> offsets{idx(view.getLayer()), idx(view.getKind()), idx(0),
                                    view.getOffset() ? OpFoldResult(view.getOffset()) : idx(0),
                                    idx(0)};
  // A static result length wins over the (then constant-valued) operand.
  OpFoldResult length = rt.isDynamicDim(2) ? OpFoldResult(view.getLength())
                                           : OpFoldResult(idx(rt.getDimSize(2)));
  SmallVector<OpFoldResult> sizes{idx(1), idx(1), idx(rt.getDimSize(1)), length,
                                  idx(rt.getDimSize(3))};
  SmallVector<OpFoldResult> strides(5, idx(1));
  auto slice = tensor::ExtractSliceOp::create(b, loc, rt, cache, offsets, sizes, strides);
  // Which layer's K/V this is, for the attention that reads it (its
  // library call records the layer; the GPU program's layer list).
  slice->setAttr(h20::lowering::kKvLayerAttr, b.getI64IntegerAttr(view.getLayer()));
  return SmallVector<Value>{slice.getResult()};
}

/// attn.all_reduce as an `h20_all_reduce` library-call generic: ins the
/// rank's partial tensor, outs an empty tensor of the same type. The body
/// (never run: the GPU target's host program turns the generic into an
/// all-reduce step) reads both operands so no canonicalisation takes the
/// generic for an identity copy and drops it.
Value lowerAllReduceToLibraryCall(OpBuilder &b, h20::attn::AllReduceOp op) {
  Location loc = op.getLoc();
  auto t = cast<RankedTensorType>(op.getType());
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.isDynamicDim(i))
      dyn.push_back(tensor::DimOp::create(b, loc, op.getInput(), i));
  Value init = tensor::EmptyOp::create(b, loc, t, dyn);
  AffineMap id = b.getMultiDimIdentityMap(t.getRank());
  SmallVector<utils::IteratorType> its(t.getRank(), utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{t}, ValueRange{op.getInput()}, ValueRange{init}, {id, id}, its,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[0], a[1])});
      });
  g.setLibraryCallAttr(b.getStringAttr(h20::lowering::kAllReduceLibraryCall));
  return g.getResult(0);
}

struct LowerToLinalgPass : h20::impl::LowerToLinalgBase<LowerToLinalgPass> {
  using LowerToLinalgBase::LowerToLinalgBase;
  void runOnOperation() override {
    if (fp8Gemm != "fp8" && fp8Gemm != "dequantize") {
      getOperation().emitError("h20-lower-to-linalg: fp8-gemm must be fp8 or dequantize, got '")
          << fp8Gemm << "'";
      return signalPassFailure();
    }
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      weightsToArguments(func);
      SmallVector<Operation *> ops;
      func.walk([&](Operation *op) {
        if (isa<h20::onnx::OnnxDialect, h20::attn::AttnDialect, h20::kv::KVDialect>(
                op->getDialect()))
          ops.push_back(op);
      });
      OpBuilder b(func.getContext());
      for (Operation *op : ops) {
        if (isa<h20::onnx::NoValueOp>(op))
          continue;
        b.setInsertionPoint(op);
        // Single-result lowerings, as the list of replacement values.
        auto one = [](FailureOr<Value> v) -> FailureOr<SmallVector<Value>> {
          if (failed(v))
            return failure();
          return SmallVector<Value>{*v};
        };
        FailureOr<SmallVector<Value>> lowered =
            llvm::TypeSwitch<Operation *, FailureOr<SmallVector<Value>>>(op)
                .Case([&](h20::attn::RmsNormOp o) { return one(h20::lowering::lowerRmsNorm(b, o)); })
                .Case([&](h20::attn::RmsScaleOp o) { return one(h20::lowering::lowerRmsScale(b, o)); })
                .Case([&](h20::attn::RopeOp o) { return one(h20::lowering::lowerRope(b, o)); })
                .Case([&](h20::attn::RopeTableOp o) { return h20::lowering::lowerRopeTable(b, o); })
                .Case([&](h20::attn::RopeApplyOp o) { return one(h20::lowering::lowerRopeApply(b, o)); })
                .Case([&](h20::attn::AttentionOp o) {
                  return one(libraryCalls ? h20::lowering::lowerAttentionToLibraryCall(b, o)
                                          : h20::lowering::lowerAttention(b, o));
                })
                .Case([&](h20::attn::AllReduceOp o) -> FailureOr<SmallVector<Value>> {
                  if (!libraryCalls)
                    return h20::lowering::unsupported(
                        o, "is a tensor-parallel collective: only the GPU target runs it "
                           "(compile for the CPU without --gpus / --parallel tensor)");
                  return one(lowerAllReduceToLibraryCall(b, o));
                })
                .Case([&](h20::attn::AttentionScoresOp o) {
                  return one(h20::lowering::lowerAttentionScores(b, o));
                })
                .Case([&](h20::attn::SparseAttentionOp o) {
                  return one(libraryCalls ? h20::lowering::lowerSparseAttentionToLibraryCall(b, o)
                                          : h20::lowering::lowerSparseAttention(b, o));
                })
                .Case([&](h20::attn::IndexerTopKOp o) {
                  return one(libraryCalls ? h20::lowering::lowerIndexerToLibraryCall(b, o)
                                          : h20::lowering::lowerIndexerTopK(b, o));
                })
                .Case([&](h20::attn::IndexerCandidatesOp o) {
                  return one(libraryCalls ? h20::lowering::lowerIndexerToLibraryCall(b, o)
                                          : h20::lowering::lowerIndexerCandidates(b, o));
                })
                .Case<h20::onnx::H20RoutedExpertsOp, h20::onnx::H20RoutedExpertsMxfp4Op>(
                    [&](Operation *o) -> FailureOr<SmallVector<Value>> {
                  if (!libraryCalls)
                    return h20::lowering::unsupported(
                        o, "has no CPU lowering (h20-opt imports its function body for the "
                           "CPU target)");
                  return one(h20::lowering::lowerRoutedExpertsToLibraryCall(b, o));
                })
                .Case([&](h20::onnx::H20BlockScaledMatMulOp o) -> FailureOr<SmallVector<Value>> {
                  if (!libraryCalls)
                    return h20::lowering::unsupported(
                        o, "has no CPU lowering (h20-opt imports its function body for the "
                           "CPU target)");
                  return one(h20::lowering::lowerBlockScaledMatMulToLibraryCalls(
                      b, o, fp8Gemm == "dequantize"));
                })
                .Case<h20::kv::AllocOp, h20::kv::WriteOp, h20::kv::ViewOp>(
                    [&](Operation *o) { return lowerKV(b, o); })
                .Default([&](Operation *o) { return h20::lowering::lowerOnnxOp(b, o, libraryCalls); });
        if (failed(lowered))
          return signalPassFailure();
        // A contraction over at most 8 elements (DeepSeek-V4.1's mHC mixes
        // of 4 streams, [S, 4, 4] x [S, 4, C]) is memory-bound: as a
        // generated kernel it reads each operand once, where a cuBLASLt call
        // per 4 x C x 4 matrix (batch S) took ~50 ms at 128K tokens.
        auto tinyContraction = [](Operation *mm) {
          auto a = dyn_cast<RankedTensorType>(mm->getOperand(0).getType());
          return a && a.getRank() >= 1 && !a.isDynamicDim(a.getRank() - 1) &&
                 a.getDimSize(a.getRank() - 1) <= 8;
        };
        linalg::GenericOp gemm;
        if (libraryCalls && isa<h20::onnx::MatMulOp>(op) && !tinyContraction(op))
          if ((gemm = (*lowered)[0].getDefiningOp<linalg::GenericOp>()))
            gemm.setLibraryCallAttr(b.getStringAttr(h20::lowering::kGemmLibraryCall));
        // A GEMM split by query rows (h20-tensor-parallel) keeps its split:
        // the GPU target computes only the rank's rows of the call.
        if (op->hasAttr(h20::attn::kSplitRowsAttr) && isa<h20::onnx::MatMulOp>(op)) {
          if (!gemm) {
            op->emitError("internal: a GEMM split by query rows that is not one library call");
            return signalPassFailure();
          }
          h20::attn::copyRowSplit(op, gemm);
        }
        for (auto [from, to] : llvm::zip(op->getResults(), *lowered))
          from.replaceAllUsesWith(to);
      }
      for (Operation *op : llvm::reverse(ops)) {
        if (!op->use_empty()) {
          op->emitError("still used after lowering");
          return signalPassFailure();
        }
        op->erase();
      }
    }
  }
};

} // namespace
