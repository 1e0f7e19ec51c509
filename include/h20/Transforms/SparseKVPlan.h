//===- SparseKVPlan.h - the KV-cache plan of DeepSeek-V4.1 attention ---*- C++ -*-===//
//
// DeepSeek-V4.1's attention (attn.sparse_attention, attn.indexer_topk,
// attn.indexer_candidates) does not keep one K/V row per token per layer.
// What a prefill leaves behind (and a chunked prefill carries from chunk to
// chunk) is, per transformers' models/deepseek_v41 DeepseekV41CSACache:
//   - per attention layer, a sliding-window ring of `window` latents
//     [window, head_dim] (the latent is both key and value);
//   - per KV-source layer, its compressed latents [floor(S / r), head_dim],
//     viewed by the layers that share them (one slot per distinct
//     `compressed` value in the IR);
//   - per index source, the indexer keys [floor(S / r), index_head_dim]
//     (one slot per distinct `keys` value of the indexer ops).
// The plan puts every slot in ONE allocation at `align`-byte offsets, rows
// padded to `align` bytes, for a capacity of S tokens. r comes from the
// indexer whose picks select a compressed value's entries.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TRANSFORMS_SPARSEKVPLAN_H
#define H20_TRANSFORMS_SPARSEKVPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h20 {

/// One slot of the allocation.
struct SparseKVSection {
  enum Kind { Window, Compressed, IndexerKeys } kind = Window;
  std::vector<int64_t> layers; ///< attention layers (0-based, IR order) that read it
  int64_t ratio = 1;           ///< tokens per row (1 for a window ring)
  int64_t rows = 0;            ///< rows at the plan's capacity
  int64_t dim = 0;             ///< elements per row
  int64_t rowBytes = 0;        ///< dim * elementBytes, padded to align
  int64_t offset = 0;          ///< byte offset in the allocation
  int64_t bytes = 0;           ///< rows * rowBytes
};

struct SparseKVPlan {
  int64_t capacity = 0;     ///< tokens
  int64_t elementBytes = 0; ///< bytes per cached element
  int64_t align = 0;
  int64_t totalBytes = 0;   ///< the one allocation
  int64_t windowBytes = 0;  ///< of which window rings (fixed, not per token)
  /// Bytes the growing slots (compressed, indexer keys) add per prompt
  /// token: sum of dim * elementBytes / ratio, unpadded.
  double bytesPerToken = 0;
  std::vector<SparseKVSection> sections;
};

/// Plans the cache of `func`'s sparse attention for `capacity` tokens and
/// `elementBytes` per element (0: the IR's element type). Marks the ops
/// with the slots they read: `kv.window_section` and `kv.compressed_section`
/// on attn.sparse_attention, `kv.keys_section` on the indexer ops, and
/// records the plan as the function's `kv.sparse_plan` dictionary. False
/// with `error` (naming the op) when a slot cannot be sized: a compressed
/// value whose picks do not come from an indexer op, one slot read with two
/// ratios, a dynamic head_dim, capacity < 1, or overflow. Indexer ops whose
/// picks no attention reads get no slot. Functions without attn.sparse_attention are
/// left alone (returns true, empty plan).
/// `culprit`, when given, receives the op the error is about (else the
/// function); `error` then names the op and its location.
bool planSparseKV(mlir::func::FuncOp func, int64_t capacity, int64_t elementBytes, int64_t align,
                  SparseKVPlan &plan, std::string &error, mlir::Operation **culprit = nullptr);

/// The plan as text: one line per slot and the totals (h20-opt
/// --print-kv-plan).
std::string formatSparseKVPlan(const SparseKVPlan &plan);

/// The plan recorded on `func` by planSparseKV, if any.
bool readSparseKVPlan(mlir::func::FuncOp func, SparseKVPlan &plan);

} // namespace h20

#endif // H20_TRANSFORMS_SPARSEKVPLAN_H
