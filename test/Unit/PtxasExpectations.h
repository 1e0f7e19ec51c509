//===- PtxasExpectations.h - shared checks on ptxas reports (unit tests) -*- C++ -*-===//
#ifndef H20_TEST_UNIT_PTXASEXPECTATIONS_H
#define H20_TEST_UNIT_PTXASEXPECTATIONS_H

#include "h20/Target/PtxAssembler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace h20::test {

/// Every kernel in `names` appears in the ptxas `report` (assemblePtx's
/// -v output) with no spill stores and no spill loads.
inline void expectListedWithoutSpills(const std::string &report,
                                      const std::vector<std::string> &names) {
  std::vector<PtxasFunctionStats> stats = parsePtxasReport(report);
  for (const std::string &name : names) {
    const PtxasFunctionStats *st = nullptr;
    for (const PtxasFunctionStats &f : stats)
      if (f.name == name)
        st = &f;
    if (!st) {
      ADD_FAILURE() << name << " missing from the ptxas report";
      continue;
    }
    EXPECT_EQ(st->spillStores, 0) << name;
    EXPECT_EQ(st->spillLoads, 0) << name;
  }
}

} // namespace h20::test

#endif // H20_TEST_UNIT_PTXASEXPECTATIONS_H
