//===- LogitsLast.cpp - compute the LM head for the last position only ---===//
#include "LastPositionSlice.h"

#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <limits>

namespace h20 {
#define GEN_PASS_DEF_LOGITSLAST
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
namespace ox = h20::onnx;

namespace {

struct LogitsLastPass : h20::impl::LogitsLastBase<LogitsLastPass> {
  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      if (ret.getNumOperands() != 1) {
        ret.emitError("--logits=last needs exactly one graph output (the logits)");
        return signalPassFailure();
      }
      int64_t vocab = 0;
      Operation *head = h20::lmHead(ret.getOperand(0), &vocab);
      if (!head) {
        ret.emitError("--logits=last: the output is not an LM head MatMul([B, S, K], [K, V]) "
                      "or BlockScaledMatMul([B, S, K], [V, K] FP8, scales)");
        return signalPassFailure();
      }
      // Already the last position only (e.g. an export made with
      // `--logits last`): nothing to cut, and a second Slice would hide the
      // first from h20-chunked-prefill, which moves this one to the
      // chunk's last real token.
      if (h20::isLastPositionSlice(head->getOperand(0).getDefiningOp()))
        continue;
      auto ht = cast<RankedTensorType>(head->getOperand(0).getType());
      OpBuilder b(head);
      Location loc = head->getLoc();
      auto i64vec = [&](int64_t v) {
        auto t = RankedTensorType::get({1}, b.getI64Type());
        return ox::ConstantOp::create(b, loc, TypeRange{t}, ValueRange{},
                                      DenseElementsAttr::get(t, ArrayRef<int64_t>{v}))
            ->getResult(0);
      };
      auto lastType = RankedTensorType::get({ht.getDimSize(0), 1, ht.getDimSize(2)},
                                            ht.getElementType());
      Value last =
          ox::SliceOp::create(b, loc, TypeRange{lastType},
                              ValueRange{head->getOperand(0), i64vec(-1),
                                         i64vec(std::numeric_limits<int64_t>::max()), i64vec(1)})
              ->getResult(0);
      // The same head (its weights, scales and attributes) on that row.
      auto outType = RankedTensorType::get(
          {ht.getDimSize(0), 1, vocab},
          cast<RankedTensorType>(head->getResult(0).getType()).getElementType());
      Operation *lastHead = b.clone(*head);
      lastHead->setOperand(0, last);
      lastHead->getResult(0).setType(outType);
      Value old = ret.getOperand(0);
      ret->setOperand(0, lastHead->getResult(0));
      // The whole-sequence head and the Identity ops between it and the
      // return are dead now (erased so that nothing computes them).
      while (Operation *def = old.getDefiningOp()) {
        if (!def->use_empty() || !(def == head || isa<ox::IdentityOp>(def)))
          break;
        Value in = def->getOperand(0);
        def->erase();
        if (def == head)
          break;
        old = in;
      }
      func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                     TypeRange{outType}));
    }
  }
};

} // namespace
