//===- ArenaPlanner.cpp - temporaries packed into one arena by lifetime ---===//
#include "h20/Target/ArenaPlanner.h"

#include <algorithm>
#include <utility>

namespace h20::gpu {

int64_t packArena(const std::vector<ArenaRequest> &requests, std::vector<int64_t> &offsets) {
  offsets.assign(requests.size(), 0);
  std::vector<int> order;
  for (size_t i = 0; i < requests.size(); ++i)
    if (requests[i].first >= 0)
      order.push_back(static_cast<int>(i));
  // Largest first: big buffers claim the low offsets, small ones fill gaps.
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    if (requests[x].bytes != requests[y].bytes)
      return requests[x].bytes > requests[y].bytes;
    return x < y;
  });
  std::vector<int> placed;
  int64_t arena = 0;
  for (int i : order) {
    const ArenaRequest &b = requests[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed) {
      const ArenaRequest &o = requests[j];
      if (o.first <= b.last && b.first <= o.last)
        busy.push_back({offsets[j], offsets[j] + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [lo, hi] : busy) {
      if (at + b.bytes <= lo)
        break;
      at = std::max(at, hi);
    }
    offsets[i] = at;
    arena = std::max(arena, at + b.bytes);
    placed.push_back(i);
  }
  return arena;
}

} // namespace h20::gpu
