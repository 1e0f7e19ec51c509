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
      auto mm = ret.getOperand(0).getDefiningOp<ox::MatMulOp>();
      auto ht = mm ? dyn_cast<RankedTensorType>(mm->getOperand(0).getType()) : nullptr;
      auto wt = mm ? dyn_cast<RankedTensorType>(mm->getOperand(1).getType()) : nullptr;
      if (!ht || !wt || ht.getRank() != 3 || wt.getRank() != 2) {
        ret.emitError("--logits=last: the output is not an LM head MatMul([B, S, K], [K, V])");
        return signalPassFailure();
      }
      // Already the last position only (e.g. an export made with
      // `--logits last`): nothing to cut, and a second Slice would hide the
      // first from h20-chunked-prefill, which moves this one to the
      // chunk's last real token.
      if (h20::isLastPositionSlice(mm->getOperand(0).getDefiningOp()))
        continue;
      OpBuilder b(mm);
      Location loc = mm->getLoc();
      auto i64vec = [&](int64_t v) {
        auto t = RankedTensorType::get({1}, b.getI64Type());
        return ox::ConstantOp::create(b, loc, TypeRange{t}, ValueRange{},
                                      DenseElementsAttr::get(t, ArrayRef<int64_t>{v}))
            ->getResult(0);
      };
      auto lastType = RankedTensorType::get({ht.getDimSize(0), 1, ht.getDimSize(2)},
                                            ht.getElementType());
      Value last = ox::SliceOp::create(
                       b, loc, TypeRange{lastType},
                       ValueRange{mm->getOperand(0), i64vec(-1),
                                  i64vec(std::numeric_limits<int64_t>::max()), i64vec(1)})
                       ->getResult(0);
      auto outType = RankedTensorType::get({ht.getDimSize(0), 1, wt.getDimSize(1)},
                                           ht.getElementType());
      Value logits = ox::MatMulOp::create(b, loc, TypeRange{outType},
                                          ValueRange{last, mm->getOperand(1)})
                         ->getResult(0);
      ret->setOperand(0, logits);
      if (mm->use_empty())
        mm->erase();
      func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                     TypeRange{outType}));
    }
  }
};

} // namespace
