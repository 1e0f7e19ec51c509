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
/// other result rows are zero for attn.sparse_attention (an attn.all_reduce
/// after it gathers every row on every rank) and unspecified for the
/// indexers (read only by ops split the same way, each its own rows). The
/// CPU target runs one rank and never sees it.
inline constexpr llvm::StringLiteral kSplitRowsAttr = "h20.split_rows";
} // namespace h20::attn

#endif // H20_DIALECT_ATTN_IR_ATTNDIALECT_H
