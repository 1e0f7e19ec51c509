//===- RowSplitRegion.h - how far a query-row split can reach -*- C++ -*-===//
//
// h20-tensor-parallel splits DeepSeek-V4.1's sparse attention by query
// rows. Its output feeds row-local ops (head transposes, the output RoPE,
// reshapes) and then the output projection; splitting that projection by
// the same rows and gathering after it moves fewer bytes than gathering
// the attention output itself (Flash: C x 8 x 1024 after wo_a instead of
// C x 64 x 512) and gives each rank 1/N of the projection's GEMM.
//
//===----------------------------------------------------------------------===//
#ifndef H20_LIB_TRANSFORMS_ROWSPLITREGION_H
#define H20_LIB_TRANSFORMS_ROWSPLITREGION_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace h20 {

/// Where a query-row split that starts at `attention` (an
/// attn.sparse_attention, rows on axis 0 of its result) can end.
struct RowSplitRegion {
  /// The weight GEMMs (onnx.MatMul of a region value by an initializer,
  /// rows on the M dim, K > 8: a cuBLASLt call; or ai.h20
  /// BlockScaledMatMul of X [M, K]) that compute only the rank's rows, in
  /// program order; empty when the split cannot reach one.
  llvm::SmallVector<mlir::Operation *> gemms;
  /// The last of them, whose result is gathered (every op between the
  /// attention and it row-local, every value made on the way used only on
  /// the way), or null: then the attention's own result is gathered.
  mlir::Operation *end = nullptr;
};

/// Walks forward from `attention` through row-local ops (output row i
/// depends on row i of the region's values only: transposes, reshapes,
/// unsqueeze / squeeze, split / concat along other axes, broadcasting ONNX
/// elementwise ops, ReduceMax / Sum / Mean and attn.rms_norm over other
/// axes, attn.rope along the rows, weight MatMuls along M) and
/// returns the last weight GEMM the split can end at: one where the
/// region's only live value is that GEMM's result; after the first such
/// GEMM only shape-only ops (transpose, reshape, unsqueeze, squeeze) may
/// lead to a later one (DeepSeek-V4.1's wo_a then wo_b). Stops at the
/// first op that is not row-local or not splittable.
RowSplitRegion findRowSplitRegion(mlir::Operation *attention);

/// The weight GEMMs (as for RowSplitRegion::gemms) on the query side of
/// the ops of `body` already split by query rows (attn::kSplitRowsAttr):
/// GEMMs whose result reaches only those ops' per-query operands (a sparse
/// attention's query, an indexer's query and head weights) through
/// row-local ops (the rules of findRowSplitRegion, data operands only),
/// every value on the way read by nothing else but shape queries (ops in
/// nested regions are not followed: their GEMMs stay whole). Such a GEMM may compute only the
/// rank's rows: no other row of its result is ever read. DeepSeek-V4.1-Flash: wq_a, wq_b, the
/// indexer's wq_b and weights_proj; not the KV side (latent, compressor and indexer key
/// projections), whose input rows every rank needs. In program order.
llvm::SmallVector<mlir::Operation *> findQuerySideGemms(mlir::Block &body);

/// The weight GEMMs that may compute only the rank's rows when the result
/// of `end` (a weight GEMM, rows on its M dim) is needed on this rank only
/// at the rank's rows, its other rows zero (its caller gathers it with an
/// all-reduce): `end` and the GEMMs before it whose result reaches only
/// `end` through row-local ops (the rules of findQuerySideGemms, without
/// split ops), in program order; empty when `end` is not such a GEMM.
/// DeepSeek-V4.1: a shared expert's w1, w3 and w2, whose output joins the
/// routed experts' sum over the ranks.
llvm::SmallVector<mlir::Operation *> findRowSplitTail(mlir::Operation *end);

} // namespace h20

#endif // H20_LIB_TRANSFORMS_ROWSPLITREGION_H
