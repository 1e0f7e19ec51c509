//===- SymExpr.h - integer/boolean expressions over indices -----*- C++ -*-===//
//
// A tensor of integers or booleans whose elements are a closed-form function
// of their indices — `arange`, a causal mask, a shape vector — is described by
// one SymExpr over index variables i0..i(r-1) and symbols (dynamic dimensions
// such as the sequence length). Linear parts normalise to sum(c*x) + c0, so
// equal expressions compare equal; boolean expressions convert exactly to
// Presburger sets (mlir/Analysis/Presburger), which decides questions like
// "is this mask equal to j <= i for every sequence length?".
//
//===----------------------------------------------------------------------===//
#ifndef H20_ANALYSIS_SYMEXPR_H
#define H20_ANALYSIS_SYMEXPR_H

#include "mlir/Analysis/Presburger/PresburgerRelation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace h20 {

enum class SymKind {
  Const,  ///< integer constant `value` (booleans: 0 / 1)
  Index,  ///< index variable i_value of the enclosing tensor
  Symbol, ///< symbol s_value (a dynamic dimension)
  Add,    ///< a + b
  Mul,    ///< a * b
  Select, ///< c ? a : b
  Eq,     ///< a == b (boolean)
  Le,     ///< a <= b (boolean)
  Lt,     ///< a < b (boolean)
  And,    ///< a && b
  Or,     ///< a || b
  Not,    ///< !a
};

struct SymNode;
/// An immutable expression; build with the functions below (they simplify).
using SymExpr = std::shared_ptr<const SymNode>;

struct SymNode {
  SymKind kind;
  int64_t value = 0;
  SymExpr a, b, c;
};

/// A linear form sum(coeff * atom) + constant over index variables and
/// symbols; atoms are keyed (isSymbol, id).
struct Linear {
  std::map<std::pair<bool, int64_t>, int64_t> coeffs;
  int64_t constant = 0;
  bool isConstant() const { return coeffs.empty(); }
  bool operator==(const Linear &o) const {
    return coeffs == o.coeffs && constant == o.constant;
  }
};

SymExpr symConst(int64_t v);
SymExpr symBool(bool v);
SymExpr symIndex(int64_t k);
SymExpr symSymbol(int64_t id);
SymExpr symAdd(SymExpr a, SymExpr b);
SymExpr symSub(SymExpr a, SymExpr b);
SymExpr symMul(SymExpr a, SymExpr b);
SymExpr symSelect(SymExpr c, SymExpr a, SymExpr b);
SymExpr symEq(SymExpr a, SymExpr b);
SymExpr symLe(SymExpr a, SymExpr b);
SymExpr symLt(SymExpr a, SymExpr b);
SymExpr symAnd(SymExpr a, SymExpr b);
SymExpr symOr(SymExpr a, SymExpr b);
SymExpr symNot(SymExpr a);

/// The constant value of `e`, if it folds to one.
std::optional<int64_t> constantOf(const SymExpr &e);

/// The linear form of `e`, or nullopt when it contains a select, a product of
/// two non-constants, or a boolean operator.
std::optional<Linear> linearOf(const SymExpr &e);

/// True when `a` and `b` have the same linear form (hence are equal for all
/// indices and symbols). Conservative: false when either is not linear.
bool provablyEqual(const SymExpr &a, const SymExpr &b);

/// Replaces every index variable i_k by `map(k)`.
SymExpr substituteIndices(const SymExpr &e,
                          llvm::function_ref<SymExpr(int64_t)> map);

/// Evaluates `e` at concrete indices and symbol values.
int64_t evaluate(const SymExpr &e, llvm::ArrayRef<int64_t> indices,
                 llvm::ArrayRef<int64_t> symbols);

/// Readable form, e.g. "(i2 <= i3)"; symbols print as `names[id]`.
std::string toString(const SymExpr &e, llvm::ArrayRef<std::string> names = {});

/// Converts a boolean expression into the exact set of (indices, symbols)
/// where it holds: variables 0..numIndices-1 are i_k, the next numSymbols are
/// the symbols. Fails on non-linear arithmetic.
std::optional<mlir::presburger::PresburgerSet>
toPresburgerSet(const SymExpr &e, unsigned numIndices, unsigned numSymbols);

/// The domain 0 <= i_k < dims[k] with every symbol >= 1, in the same space.
/// `dims` must be linear in the symbols.
std::optional<mlir::presburger::PresburgerSet>
domainSet(llvm::ArrayRef<SymExpr> dims, unsigned numIndices,
          unsigned numSymbols);

} // namespace h20

#endif // H20_ANALYSIS_SYMEXPR_H
