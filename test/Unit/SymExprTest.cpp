//===- SymExprTest.cpp - symbolic index expressions and their proofs -----===//
#include "h20/Analysis/SymExpr.h"

#include <gtest/gtest.h>

using namespace h20;

namespace {

constexpr unsigned kIdx = 2, kSyms = 1; // (i, j) over one symbol S

bool equivalentOnSquare(const SymExpr &a, const SymExpr &b) {
  SymExpr s = symSymbol(0);
  auto domain = domainSet({s, s}, kIdx, kSyms);
  auto diff = toPresburgerSet(symOr(symAnd(a, symNot(b)), symAnd(symNot(a), b)),
                              kIdx, kSyms);
  return domain && diff && diff->intersect(*domain).isIntegerEmpty();
}

TEST(SymExpr, LinearFormsNormalise) {
  SymExpr i = symIndex(0), s = symSymbol(0);
  // (i + S) - (S - 3) + 2*i == 3*i + 3
  SymExpr e = symAdd(symSub(symAdd(i, s), symSub(s, symConst(3))), symMul(symConst(2), i));
  EXPECT_TRUE(provablyEqual(e, symAdd(symMul(symConst(3), i), symConst(3))));
  EXPECT_FALSE(provablyEqual(e, symMul(symConst(3), i)));
}

TEST(SymExpr, ComparisonsOfConstantDifferenceFold) {
  SymExpr i = symIndex(0);
  EXPECT_EQ(constantOf(symLe(i, symAdd(i, symConst(1)))), 1);
  EXPECT_EQ(constantOf(symLt(i, i)), 0);
  EXPECT_EQ(constantOf(symEq(symAdd(i, symConst(2)), symAdd(symConst(2), i))), 1);
}

TEST(SymExpr, SelectWithEqualBranchesDisappears) {
  // Concat([i - 1 at i < 1], [i - 1]) is just i - 1.
  SymExpr i = symIndex(0);
  SymExpr e = symSelect(symLt(i, symConst(1)), symSub(i, symConst(1)),
                        symSub(i, symConst(1)));
  EXPECT_TRUE(provablyEqual(e, symSub(i, symConst(1))));
}

TEST(SymExpr, ProvesCausalEquivalenceForAllLengths) {
  SymExpr i = symIndex(0), j = symIndex(1);
  SymExpr causal = symLe(j, i);
  // not (j > i) is the same mask written differently
  EXPECT_TRUE(equivalentOnSquare(symNot(symLt(i, j)), causal));
  // j < i misses the diagonal: not equivalent
  EXPECT_FALSE(equivalentOnSquare(symLt(j, i), causal));
  // max(i, 0) >= j: selects are lifted into cases
  SymExpr maxI0 = symSelect(symLe(i, symConst(0)), symConst(0), i);
  EXPECT_TRUE(equivalentOnSquare(symLe(j, maxI0), causal));
}

TEST(SymExpr, WindowNeedsTheRightWidth) {
  SymExpr i = symIndex(0), j = symIndex(1);
  SymExpr w4 = symAnd(symLe(j, i), symLt(symSub(i, symConst(4)), j));
  SymExpr w5 = symAnd(symLe(j, i), symLt(symSub(i, symConst(5)), j));
  EXPECT_TRUE(equivalentOnSquare(w4, w4));
  EXPECT_FALSE(equivalentOnSquare(w4, w5));
}

TEST(SymExpr, EvaluateMatchesMeaning) {
  SymExpr i = symIndex(0), j = symIndex(1), s = symSymbol(0);
  SymExpr e = symSelect(symLe(j, i), symAdd(i, s), symConst(-1));
  EXPECT_EQ(evaluate(e, {3, 2}, {10}), 13);
  EXPECT_EQ(evaluate(e, {1, 2}, {10}), -1);
}

TEST(SymExpr, NonLinearProductsAreNotConvertedToSets) {
  SymExpr i = symIndex(0), j = symIndex(1);
  EXPECT_FALSE(toPresburgerSet(symLe(symMul(i, j), symConst(4)), kIdx, kSyms));
}

} // namespace
