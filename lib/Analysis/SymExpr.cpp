//===- SymExpr.cpp - integer/boolean expressions over indices ------------===//
#include "h20/Analysis/SymExpr.h"

#include "mlir/Analysis/Presburger/IntegerRelation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir::presburger;

namespace h20 {
namespace {

SymExpr make(SymKind kind, int64_t value = 0, SymExpr a = nullptr,
             SymExpr b = nullptr, SymExpr c = nullptr) {
  return std::make_shared<SymNode>(SymNode{kind, value, a, b, c});
}

bool isBoolKind(SymKind k) {
  return k == SymKind::Eq || k == SymKind::Le || k == SymKind::Lt ||
         k == SymKind::And || k == SymKind::Or || k == SymKind::Not;
}

/// Rebuilds a canonical expression from a linear form: atoms in key order,
/// constant last, so equal forms give structurally equal trees.
SymExpr fromLinear(const Linear &l) {
  SymExpr acc;
  for (const auto &[key, coeff] : l.coeffs) {
    if (coeff == 0)
      continue;
    SymExpr atom = key.first ? make(SymKind::Symbol, key.second)
                             : make(SymKind::Index, key.second);
    SymExpr term = coeff == 1 ? atom
                              : make(SymKind::Mul, 0, make(SymKind::Const, coeff), atom);
    acc = acc ? make(SymKind::Add, 0, acc, term) : term;
  }
  if (!acc)
    return make(SymKind::Const, l.constant);
  if (l.constant != 0)
    acc = make(SymKind::Add, 0, acc, make(SymKind::Const, l.constant));
  return acc;
}

// Linear forms hold what a model's constants say, and a model can say
// INT64_MIN: a coefficient or constant that would overflow int64 makes the
// form unknown (nullopt) instead of wrapping (UB, and a wrong proof).

std::optional<Linear> scaled(Linear l, int64_t f) {
  for (auto &[k, c] : l.coeffs)
    if (__builtin_mul_overflow(c, f, &c))
      return std::nullopt;
  if (__builtin_mul_overflow(l.constant, f, &l.constant))
    return std::nullopt;
  return l;
}

std::optional<Linear> added(Linear a, const Linear &b) {
  for (const auto &[k, c] : b.coeffs) {
    if (__builtin_add_overflow(a.coeffs[k], c, &a.coeffs[k]))
      return std::nullopt;
    if (a.coeffs[k] == 0)
      a.coeffs.erase(k);
  }
  if (__builtin_add_overflow(a.constant, b.constant, &a.constant))
    return std::nullopt;
  return a;
}

/// a - b, or nullopt on overflow.
std::optional<Linear> subtracted(const Linear &a, const Linear &b) {
  auto nb = scaled(b, -1);
  return nb ? added(a, *nb) : std::nullopt;
}

} // namespace

SymExpr symConst(int64_t v) { return make(SymKind::Const, v); }
SymExpr symBool(bool v) { return make(SymKind::Const, v ? 1 : 0); }
SymExpr symIndex(int64_t k) { return make(SymKind::Index, k); }
SymExpr symSymbol(int64_t id) { return make(SymKind::Symbol, id); }

std::optional<int64_t> constantOf(const SymExpr &e) {
  if (e->kind == SymKind::Const)
    return e->value;
  return std::nullopt;
}

std::optional<Linear> linearOf(const SymExpr &e) {
  Linear l;
  switch (e->kind) {
  case SymKind::Const:
    l.constant = e->value;
    return l;
  case SymKind::Index:
  case SymKind::Symbol:
    l.coeffs[{e->kind == SymKind::Symbol, e->value}] = 1;
    return l;
  case SymKind::Add: {
    auto a = linearOf(e->a), b = linearOf(e->b);
    if (!a || !b)
      return std::nullopt;
    return added(*a, *b);
  }
  case SymKind::Mul: {
    auto a = linearOf(e->a), b = linearOf(e->b);
    if (!a || !b)
      return std::nullopt;
    if (a->isConstant())
      return scaled(*b, a->constant);
    if (b->isConstant())
      return scaled(*a, b->constant);
    return std::nullopt;
  }
  default:
    return std::nullopt;
  }
}

bool provablyEqual(const SymExpr &a, const SymExpr &b) {
  auto la = linearOf(a), lb = linearOf(b);
  return la && lb && *la == *lb;
}

SymExpr symAdd(SymExpr a, SymExpr b) {
  auto la = linearOf(a), lb = linearOf(b);
  if (la && lb)
    if (auto sum = added(*la, *lb))
      return fromLinear(*sum);
  return make(SymKind::Add, 0, a, b);
}

SymExpr symSub(SymExpr a, SymExpr b) { return symAdd(a, symMul(symConst(-1), b)); }

SymExpr symMul(SymExpr a, SymExpr b) {
  auto la = linearOf(a), lb = linearOf(b);
  if (la && lb && (la->isConstant() || lb->isConstant()))
    if (auto product = la->isConstant() ? scaled(*lb, la->constant) : scaled(*la, lb->constant))
      return fromLinear(*product);
  // Distribute a constant over a select so selects stay liftable.
  if (la && la->isConstant() && b->kind == SymKind::Select)
    return symSelect(b->c, symMul(a, b->a), symMul(a, b->b));
  if (lb && lb->isConstant() && a->kind == SymKind::Select)
    return symSelect(a->c, symMul(a->a, b), symMul(a->b, b));
  return make(SymKind::Mul, 0, a, b);
}

SymExpr symSelect(SymExpr c, SymExpr a, SymExpr b) {
  if (auto v = constantOf(c))
    return *v ? a : b;
  if (provablyEqual(a, b))
    return a;
  // Booleans: c ? a : b == (c && a) || (!c && b).
  if (isBoolKind(a->kind) || isBoolKind(b->kind))
    return symOr(symAnd(c, a), symAnd(symNot(c), b));
  return make(SymKind::Select, 0, a, b, c);
}

static SymExpr compare(SymKind kind, SymExpr a, SymExpr b) {
  auto la = linearOf(a), lb = linearOf(b);
  if (la && lb) {
    auto d = subtracted(*la, *lb);
    if (d && d->isConstant()) {
      int64_t v = d->constant;
      return symBool(kind == SymKind::Eq ? v == 0
                     : kind == SymKind::Le ? v <= 0
                                           : v < 0);
    }
  }
  return make(kind, 0, a, b);
}

SymExpr symEq(SymExpr a, SymExpr b) { return compare(SymKind::Eq, a, b); }
SymExpr symLe(SymExpr a, SymExpr b) { return compare(SymKind::Le, a, b); }
SymExpr symLt(SymExpr a, SymExpr b) { return compare(SymKind::Lt, a, b); }

SymExpr symAnd(SymExpr a, SymExpr b) {
  if (auto v = constantOf(a))
    return *v ? b : symBool(false);
  if (auto v = constantOf(b))
    return *v ? a : symBool(false);
  return make(SymKind::And, 0, a, b);
}

SymExpr symOr(SymExpr a, SymExpr b) {
  if (auto v = constantOf(a))
    return *v ? symBool(true) : b;
  if (auto v = constantOf(b))
    return *v ? symBool(true) : a;
  return make(SymKind::Or, 0, a, b);
}

SymExpr symNot(SymExpr a) {
  if (auto v = constantOf(a))
    return symBool(!*v);
  if (a->kind == SymKind::Not)
    return a->a;
  return make(SymKind::Not, 0, a);
}

SymExpr substituteIndices(const SymExpr &e,
                          llvm::function_ref<SymExpr(int64_t)> map) {
  auto rec = [&](const SymExpr &x) { return substituteIndices(x, map); };
  switch (e->kind) {
  case SymKind::Const:
  case SymKind::Symbol:
    return e;
  case SymKind::Index:
    return map(e->value);
  case SymKind::Add: return symAdd(rec(e->a), rec(e->b));
  case SymKind::Mul: return symMul(rec(e->a), rec(e->b));
  case SymKind::Select: return symSelect(rec(e->c), rec(e->a), rec(e->b));
  case SymKind::Eq: return symEq(rec(e->a), rec(e->b));
  case SymKind::Le: return symLe(rec(e->a), rec(e->b));
  case SymKind::Lt: return symLt(rec(e->a), rec(e->b));
  case SymKind::And: return symAnd(rec(e->a), rec(e->b));
  case SymKind::Or: return symOr(rec(e->a), rec(e->b));
  case SymKind::Not: return symNot(rec(e->a));
  }
  return e;
}

int64_t evaluate(const SymExpr &e, llvm::ArrayRef<int64_t> idx,
                 llvm::ArrayRef<int64_t> syms) {
  auto rec = [&](const SymExpr &x) { return evaluate(x, idx, syms); };
  switch (e->kind) {
  case SymKind::Const: return e->value;
  case SymKind::Index: return idx[e->value];
  case SymKind::Symbol: return syms[e->value];
  case SymKind::Add: return rec(e->a) + rec(e->b);
  case SymKind::Mul: return rec(e->a) * rec(e->b);
  case SymKind::Select: return rec(e->c) ? rec(e->a) : rec(e->b);
  case SymKind::Eq: return rec(e->a) == rec(e->b);
  case SymKind::Le: return rec(e->a) <= rec(e->b);
  case SymKind::Lt: return rec(e->a) < rec(e->b);
  case SymKind::And: return rec(e->a) && rec(e->b);
  case SymKind::Or: return rec(e->a) || rec(e->b);
  case SymKind::Not: return !rec(e->a);
  }
  return 0;
}

std::string toString(const SymExpr &e, llvm::ArrayRef<std::string> names) {
  auto rec = [&](const SymExpr &x) { return toString(x, names); };
  auto bin = [&](const char *op) {
    return "(" + rec(e->a) + " " + op + " " + rec(e->b) + ")";
  };
  switch (e->kind) {
  case SymKind::Const: return std::to_string(e->value);
  case SymKind::Index: return "i" + std::to_string(e->value);
  case SymKind::Symbol:
    return e->value < static_cast<int64_t>(names.size()) ? names[e->value]
                                                         : "s" + std::to_string(e->value);
  case SymKind::Add: return bin("+");
  case SymKind::Mul: return bin("*");
  case SymKind::Select:
    return "(" + rec(e->c) + " ? " + rec(e->a) + " : " + rec(e->b) + ")";
  case SymKind::Eq: return bin("==");
  case SymKind::Le: return bin("<=");
  case SymKind::Lt: return bin("<");
  case SymKind::And: return bin("&&");
  case SymKind::Or: return bin("||");
  case SymKind::Not: return "!" + rec(e->a);
  }
  return "?";
}

namespace {

/// Converts boolean expressions to Presburger sets over a fixed space.
class SetBuilder {
public:
  SetBuilder(unsigned numIndices, unsigned numSymbols)
      : numIndices(numIndices), numSymbols(numSymbols),
        space(PresburgerSpace::getSetSpace(numIndices + numSymbols)) {}

  std::optional<PresburgerSet> build(const SymExpr &e) {
    switch (e->kind) {
    case SymKind::Const:
      return e->value ? PresburgerSet::getUniverse(space)
                      : PresburgerSet::getEmpty(space);
    case SymKind::Not: {
      auto a = build(e->a);
      if (!a)
        return std::nullopt;
      return a->complement();
    }
    case SymKind::And:
    case SymKind::Or: {
      auto a = build(e->a), b = build(e->b);
      if (!a || !b)
        return std::nullopt;
      return e->kind == SymKind::And ? a->intersect(*b) : a->unionSet(*b);
    }
    case SymKind::Eq:
    case SymKind::Le:
    case SymKind::Lt:
      return comparison(e->kind, e->a, e->b);
    default:
      // An integer used as a boolean (a cast): true when non-zero.
      return build(symNot(symEq(e, symConst(0))));
    }
  }

  /// The set {x : lower-bounds} of one linear row `sum >= 0` / `== 0`.
  std::optional<PresburgerSet> linearSet(const Linear &l, bool equality) {
    llvm::SmallVector<int64_t> row(numIndices + numSymbols + 1, 0);
    for (const auto &[key, coeff] : l.coeffs) {
      int64_t col = key.first ? numIndices + key.second : key.second;
      if (col < 0 || col >= static_cast<int64_t>(numIndices + numSymbols))
        return std::nullopt;
      row[col] = coeff;
    }
    row.back() = l.constant;
    IntegerPolyhedron poly(space);
    if (equality)
      poly.addEquality(row);
    else
      poly.addInequality(row);
    return PresburgerSet(poly);
  }

private:
  /// Guarded linear pieces of an integer expression: selects are lifted into
  /// conditions, so `c ? x : y` yields (c, x) and (!c, y).
  bool pieces(const SymExpr &e,
              llvm::SmallVectorImpl<std::pair<SymExpr, Linear>> &out) {
    if (auto l = linearOf(e)) {
      out.push_back({symBool(true), *l});
      return true;
    }
    if (e->kind == SymKind::Select) {
      llvm::SmallVector<std::pair<SymExpr, Linear>> a, b;
      if (!pieces(e->a, a) || !pieces(e->b, b))
        return false;
      for (auto &[c, l] : a)
        out.push_back({symAnd(e->c, c), l});
      for (auto &[c, l] : b)
        out.push_back({symAnd(symNot(e->c), c), l});
      return true;
    }
    if (e->kind == SymKind::Add || e->kind == SymKind::Mul) {
      llvm::SmallVector<std::pair<SymExpr, Linear>> a, b;
      if (!pieces(e->a, a) || !pieces(e->b, b))
        return false;
      for (auto &[ca, la] : a)
        for (auto &[cb, lb] : b) {
          std::optional<Linear> l;
          if (e->kind == SymKind::Add)
            l = added(la, lb);
          else if (la.isConstant())
            l = scaled(lb, la.constant);
          else if (lb.isConstant())
            l = scaled(la, lb.constant);
          if (!l)
            return false;
          out.push_back({symAnd(ca, cb), *l});
        }
      return true;
    }
    if (isBoolKind(e->kind)) { // a boolean used as an integer: 1 / 0
      out.push_back({e, Linear{{}, 1}});
      out.push_back({symNot(e), Linear{{}, 0}});
      return true;
    }
    return false;
  }

  std::optional<PresburgerSet> comparison(SymKind kind, const SymExpr &a,
                                          const SymExpr &b) {
    llvm::SmallVector<std::pair<SymExpr, Linear>> pa, pb;
    if (!pieces(a, pa) || !pieces(b, pb))
      return std::nullopt;
    PresburgerSet result = PresburgerSet::getEmpty(space);
    for (auto &[ca, la] : pa)
      for (auto &[cb, lb] : pb) {
        auto guard = build(symAnd(ca, cb));
        if (!guard)
          return std::nullopt;
        // a <= b  <=>  b - a >= 0;  a < b  <=>  b - a - 1 >= 0.
        auto diff = subtracted(lb, la);
        if (!diff || (kind == SymKind::Lt &&
                      __builtin_sub_overflow(diff->constant, 1, &diff->constant)))
          return std::nullopt;
        auto rel = linearSet(*diff, kind == SymKind::Eq);
        if (!rel)
          return std::nullopt;
        result = result.unionSet(guard->intersect(*rel));
      }
    return result;
  }

  unsigned numIndices, numSymbols;
  PresburgerSpace space;
};

} // namespace

std::optional<PresburgerSet> toPresburgerSet(const SymExpr &e,
                                             unsigned numIndices,
                                             unsigned numSymbols) {
  return SetBuilder(numIndices, numSymbols).build(e);
}

std::optional<PresburgerSet> domainSet(llvm::ArrayRef<SymExpr> dims,
                                       unsigned numIndices,
                                       unsigned numSymbols) {
  SetBuilder builder(numIndices, numSymbols);
  PresburgerSet result = PresburgerSet::getUniverse(
      PresburgerSpace::getSetSpace(numIndices + numSymbols));
  for (unsigned s = 0; s < numSymbols; ++s) { // s >= 1
    Linear l;
    l.coeffs[{true, s}] = 1;
    l.constant = -1;
    result = result.intersect(*builder.linearSet(l, false));
  }
  for (auto [k, dim] : llvm::enumerate(dims)) {
    auto d = linearOf(dim);
    if (!d)
      return std::nullopt;
    Linear lower; // i_k >= 0
    lower.coeffs[{false, static_cast<int64_t>(k)}] = 1;
    Linear upper = *d; // dim - 1 - i_k >= 0
    if (__builtin_sub_overflow(upper.coeffs[{false, static_cast<int64_t>(k)}], 1,
                               &upper.coeffs[{false, static_cast<int64_t>(k)}]) ||
        __builtin_sub_overflow(upper.constant, 1, &upper.constant))
      return std::nullopt;
    auto lo = builder.linearSet(lower, false), hi = builder.linearSet(upper, false);
    if (!lo || !hi)
      return std::nullopt;
    result = result.intersect(*lo).intersect(*hi);
  }
  return result;
}

} // namespace h20
