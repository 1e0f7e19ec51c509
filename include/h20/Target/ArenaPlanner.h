//===- ArenaPlanner.h - temporaries packed into one arena by lifetime -*- C++ -*-===//
//
// The GPU step program's temporaries share one device arena: each lives
// from the first to the last step that uses it, and two whose lifetimes
// overlap may not share bytes. Plain C++ (no MLIR), unit-tested in
// test/Unit/ArenaPlannerTest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_ARENAPLANNER_H
#define H20_TARGET_ARENAPLANNER_H

#include <cstdint>
#include <vector>

namespace h20::gpu {

/// One temporary: `bytes` (a multiple of the arena's alignment, 256 in the
/// step program) used by steps first..last (inclusive; first < 0: never
/// used, gets offset 0 and no space).
struct ArenaRequest {
  int64_t bytes = 0;
  int first = -1, last = -1;
};

/// Assigns each request a byte offset (`offsets`, one per request) and
/// returns the arena size: first fit over the requests in decreasing size
/// (ties: in order), each placed at the lowest offset that does not overlap
/// a placed request whose lifetime overlaps its own. Offsets are sums of
/// request sizes, so they keep the requests' alignment.
int64_t packArena(const std::vector<ArenaRequest> &requests, std::vector<int64_t> &offsets);

} // namespace h20::gpu

#endif // H20_TARGET_ARENAPLANNER_H
