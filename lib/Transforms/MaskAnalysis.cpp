//===- MaskAnalysis.cpp - prove what attention masks compute -------------===//
//
// A mask subgraph (Range / CumSum / LessOrEqual / And / ...) is evaluated
// symbolically into one boolean expression over the element indices and the
// dynamic dims (SymbolicEvaluator), then compared with each candidate meaning
// by deciding emptiness of their symmetric difference over the index domain
// with Presburger arithmetic. Concrete evaluation only proposes the window
// width; the decision itself is exact for every sequence length.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/ProvenMask.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace h20 {
#define GEN_PASS_DEF_ANALYZEMASKS
#include "h20/Transforms/Passes.h.inc"
} // namespace h20

using namespace mlir;
using namespace h20;
namespace ox = h20::onnx;

namespace {

class MaskProver {
public:
  explicit MaskProver(SymbolicEvaluator &eval) : eval(eval) {}

  /// The proven meaning of boolean tensor `m`, or nullopt with `why` set.
  std::optional<ProvenMask> prove(Value m, std::string &why) {
    const SymTensor *t = eval.get(m);
    if (!t || !t->elem) {
      why = "its subgraph is not a closed-form function of the indices";
      return std::nullopt;
    }
    rank = t->dims.size();
    if (rank < 2 || rank > SymbolicEvaluator::kMaxRank) {
      why = "it has rank " + std::to_string(rank);
      return std::nullopt;
    }
    dims = t->dims;
    elem = t->elem;
    auto domain = domainSet(dims, SymbolicEvaluator::kMaxRank, eval.numSymbols());
    if (!domain) {
      why = "its dimensions are not linear in the model's dynamic dims";
      return std::nullopt;
    }
    this->domain = *domain;

    SymExpr qi = symIndex(rank - 2), kj = symIndex(rank - 1);
    SymExpr offset = symSub(dims[rank - 1], dims[rank - 2]);
    SymExpr bottomRight = symLe(kj, symAdd(qi, offset));

    ProvenMask result;
    if (equivalent(symBool(true)))
      return result;
    result.causal = true;
    if (equivalent(bottomRight))
      return result;
    if (auto w = proposeWindow()) {
      SymExpr windowed =
          symAnd(bottomRight, symLt(symSub(symAdd(qi, offset), symConst(*w)), kj));
      if (equivalent(windowed)) {
        result.window = w;
        return result;
      }
    }
    result.alignment = attn::CausalAlignment::top_left;
    if (equivalent(symLe(kj, qi)))
      return result;
    std::string text = toString(elem, eval.symbolNames());
    if (text.size() > 240)
      text = text.substr(0, 240) + "...";
    why = "it equals neither all-visible, causal, nor causal with a sliding "
          "window; element (i, j) is " + text;
    return std::nullopt;
  }

private:
  /// mask == candidate at every index of the domain, for all symbol values.
  bool equivalent(const SymExpr &candidate) {
    SymExpr differs = symOr(symAnd(elem, symNot(candidate)),
                            symAnd(symNot(elem), candidate));
    auto set = toPresburgerSet(differs, SymbolicEvaluator::kMaxRank,
                               eval.numSymbols());
    return set && set->intersect(domain).isIntegerEmpty();
  }

  /// Counts the visible keys of the last query row at a large concrete size;
  /// a count below the row's length suggests a window of that width.
  std::optional<int64_t> proposeWindow() {
    SmallVector<int64_t> symbols(eval.numSymbols(), 4096);
    SmallVector<int64_t> idx(SymbolicEvaluator::kMaxRank, 0);
    int64_t sq = evaluate(dims[rank - 2], idx, symbols);
    int64_t sk = evaluate(dims[rank - 1], idx, symbols);
    if (sq <= 0 || sk <= 0 || sk > (int64_t(1) << 20))
      return std::nullopt;
    idx[rank - 2] = sq - 1;
    int64_t visible = 0;
    for (int64_t j = 0; j < sk; ++j) {
      idx[rank - 1] = j;
      visible += evaluate(elem, idx, symbols) != 0;
    }
    if (visible <= 0 || visible >= sk)
      return std::nullopt;
    return visible;
  }

  SymbolicEvaluator &eval;
  int64_t rank = 0;
  SmallVector<SymExpr> dims;
  SymExpr elem;
  mlir::presburger::PresburgerSet domain =
      mlir::presburger::PresburgerSet::getEmpty(
          mlir::presburger::PresburgerSpace::getSetSpace(0));
};

struct AnalyzeMasksPass : h20::impl::AnalyzeMasksBase<AnalyzeMasksPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Mask value -> one op that uses it as a mask (for diagnostics).
    llvm::MapVector<Value, Operation *> masks;
    func.walk([&](Operation *op) {
      if (auto a = dyn_cast<ox::AttentionOp>(op)) {
        if (op->getNumOperands() > 3 && !isa<NoneType>(op->getOperand(3).getType()))
          if (Value c = visibleCondition(op->getOperand(3)))
            masks.insert({c, op});
      } else if (auto w = dyn_cast<ox::WhereOp>(op)) {
        if (isMinusInfinity(op->getOperand(2)))
          masks.insert({op->getOperand(0), op});
      }
    });
    if (masks.empty())
      return;
    SymbolicEvaluator eval(func);
    MaskProver prover(eval);
    for (auto [mask, user] : masks) {
      if (ProvenMask::of(mask))
        continue;
      std::string why;
      if (auto proven = prover.prove(mask, why)) {
        if (Operation *def = mask.getDefiningOp())
          proven->attachTo(def);
        continue;
      }
      std::string node = "node '";
      if (auto name = dyn_cast<NameLoc>(user->getLoc()))
        node += name.getName().str();
      node += "' (" + user->getName().getStringRef().str() + "): ";
      user->emitWarning(node + "attention mask not proven causal or "
                        "sliding-window (" + why + "); it stays a mask operand");
    }
  }
};

} // namespace
