//===- KVLayout.h - byte strides and offsets of a KV cache ------*- C++ -*-===//
//
// The only place byte strides of a KV cache are computed: from its type
// (logical shape [L, 2, H, N, D], element type) and #kv.layout (dim order,
// row alignment). All arithmetic is 64-bit with overflow checks: the
// seed-dense cache at 512K positions is 64 GiB and one layer's K alone has
// exactly 2^31 elements.
//
//===----------------------------------------------------------------------===//
#ifndef H20_DIALECT_KV_IR_KVLAYOUT_H
#define H20_DIALECT_KV_IR_KVLAYOUT_H

#include "h20/Dialect/KV/IR/KVDialect.h"

#include <array>
#include <cstdint>
#include <optional>

namespace h20::kv {

struct LayoutPlan {
  int64_t elementBytes = 0;
  int64_t rowBytes = 0;               ///< innermost row, padded to `align`
  std::array<int64_t, 5> strides{};   ///< bytes per step of logical dim k
  int64_t totalBytes = 0;             ///< the whole cache
  int64_t paddingBytes = 0;           ///< totalBytes - unpadded element bytes

  /// Byte offset of element [layer, kind, head, pos, dim].
  int64_t offset(int64_t layer, int64_t kind, int64_t head, int64_t pos, int64_t dim) const {
    return layer * strides[0] + kind * strides[1] + head * strides[2] + pos * strides[3] +
           dim * strides[4];
  }
};

/// The plan of `type` at `capacity` positions (the type's seq dim when
/// static). Fails (nullopt) on a dynamic capacity without `capacity`, on
/// sub-byte element types, or when a size overflows int64.
std::optional<LayoutPlan> planLayout(CacheType type, std::optional<int64_t> capacity = {});

} // namespace h20::kv

#endif // H20_DIALECT_KV_IR_KVLAYOUT_H
