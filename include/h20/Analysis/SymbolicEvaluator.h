//===- SymbolicEvaluator.h - symbolic shapes and index tensors --*- C++ -*-===//
//
// Computes, for values of an onnx-dialect function, their shapes as SymExprs
// over the function's dynamic dimensions (so `?` dims that are equal are
// known to be equal), and — for integer and boolean tensors built from
// shapes, ranges and comparisons — their elements as a SymExpr over the
// element's indices. This is what lets h20 fold shape subgraphs and prove
// what a mask subgraph computes without ever materialising it.
//
//===----------------------------------------------------------------------===//
#ifndef H20_ANALYSIS_SYMBOLICEVALUATOR_H
#define H20_ANALYSIS_SYMBOLICEVALUATOR_H

#include "h20/Analysis/SymExpr.h"

#include <map>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

namespace h20 {

/// A tensor described symbolically: its dims (linear in the symbols) and,
/// when known, the closed form of element (i0, ..., i(r-1)).
struct SymTensor {
  llvm::SmallVector<SymExpr> dims;
  SymExpr elem; ///< null when only the shape is known
};

class SymbolicEvaluator {
public:
  /// Symbols are created for the dynamic dims of `func`'s arguments; dims
  /// with the same ONNX dim_param name share one symbol.
  explicit SymbolicEvaluator(mlir::func::FuncOp func);

  /// The symbolic description of `v`, or null if even its rank is unknown.
  const SymTensor *get(mlir::Value v);

  /// Dims of `v` (falls back to the static type, dynamic dims as fresh
  /// symbols that equal nothing else).
  std::optional<llvm::SmallVector<SymExpr>> shapeOf(mlir::Value v);

  /// Elements of a 1-D tensor of statically known length (a shape vector),
  /// each as a SymExpr over the symbols only.
  std::optional<llvm::SmallVector<SymExpr>> vectorOf(mlir::Value v);

  /// The axes named by operand `index` of `op` (Slice's and Pad's optional
  /// `axes` input), constant and normalised into [0, rank); 0 .. count-1
  /// when the operand is absent or `none`. nullopt when an axis is not a
  /// constant or lies outside [-rank, rank).
  std::optional<llvm::SmallVector<int64_t>> axesOperand(mlir::Operation *op, unsigned index,
                                                        int64_t rank, int64_t count);

  /// The scalar value of a rank-0 or single-element tensor.
  std::optional<SymExpr> scalarOf(mlir::Value v);

  /// True when `e` (over indices of a tensor shaped `dims`) is `value` at
  /// every index of that tensor, for every value of the symbols.
  bool isConstantOnDomain(const SymExpr &e, llvm::ArrayRef<SymExpr> dims,
                          int64_t value);

  unsigned numSymbols() const { return names.size(); }
  llvm::ArrayRef<std::string> symbolNames() const { return names; }

  /// Largest tensor rank the Presburger space accounts for.
  static constexpr unsigned kMaxRank = 8;

private:
  std::optional<SymTensor> compute(mlir::Value v);
  /// compute(v), stored in the cache; v's producers' operands must be
  /// cached already (get() makes sure), so this never recurses deeply.
  const SymTensor *cacheComputed(mlir::Value v);
  std::optional<SymTensor> computeOpResult(mlir::Operation *op, unsigned idx);
  SymExpr newSymbol(const std::string &name);
  SymTensor fromType(mlir::Value v);

  /// Entries are heap-allocated so pointers returned by get() stay valid
  /// while later lookups grow the map (null: nothing known).
  llvm::DenseMap<mlir::Value, std::unique_ptr<SymTensor>> cache;
  llvm::SmallVector<std::string> names;
  /// Reshape -1 dims without a closed form, by "input dims -> target".
  std::map<std::string, SymExpr> reshapeSymbols;
};

} // namespace h20

#endif // H20_ANALYSIS_SYMBOLICEVALUATOR_H
