//===- AttnDialect.h - the attn dialect -------------------------*- C++ -*-===//
#ifndef H20_DIALECT_ATTN_IR_ATTNDIALECT_H
#define H20_DIALECT_ATTN_IR_ATTNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h.inc"
#include "h20/Dialect/Attn/IR/AttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/Attn/IR/AttnAttrs.h.inc"

#define GET_OP_CLASSES
#include "h20/Dialect/Attn/IR/AttnOps.h.inc"

namespace h20::attn {
/// Query-row split of a DeepSeek-V4.1 attention op (attn.sparse_attention,
/// attn.indexer_topk, attn.indexer_candidates) over N tensor-parallel ranks
/// (i64 N; chosen by h20-tensor-parallel, withdrawn by
/// h20-check-row-splits where a chunk's rows do not divide): rank r
/// computes query rows [r R / N, (r + 1) R / N) of the op's R rows. Its
/// other result rows are unspecified (read only by row-local ops and ops
/// split the same way), or zero where it carries kSplitGatherAttr (an
/// attn.all_reduce after it gathers every row on every rank). The CPU
/// target runs one rank and never sees it.
inline constexpr llvm::StringLiteral kSplitRowsAttr = "h20.split_rows";
/// On the op of a query-row split whose result the attn.all_reduce after
/// it gathers (unit): its other ranks' rows are zero, not unspecified. The
/// attention itself, or the last GEMM of its output projection that the
/// split reaches (onnx.MatMul with kSplitRowsAttr: rank r computes rows
/// [r M / N, (r + 1) M / N) of its M; RowSplitRegion.h).
inline constexpr llvm::StringLiteral kSplitGatherAttr = "h20.split_gather";

/// Puts `from`'s query-row split marks (kSplitRowsAttr, kSplitGatherAttr)
/// on `to`, a library call that lowers it: the GPU target reads them there.
inline void copyRowSplit(mlir::Operation *from, mlir::Operation *to) {
  for (llvm::StringRef name : {kSplitRowsAttr, kSplitGatherAttr})
    if (mlir::Attribute a = from->getAttr(name))
      to->setAttr(name, a);
}
} // namespace h20::attn

#endif // H20_DIALECT_ATTN_IR_ATTNDIALECT_H
