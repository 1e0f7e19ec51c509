//===- RaiseH20Domain.h - ai.h20 nodes -> attn ops ---------------*- C++ -*-===//
#ifndef H20_LIB_TRANSFORMS_RAISEH20DOMAIN_H
#define H20_LIB_TRANSFORMS_RAISEH20DOMAIN_H

#include "mlir/IR/Builders.h"

namespace h20 {

/// If `op` is an onnx.h20.* node (SinkAttention, SparseSinkAttention,
/// IndexerTopK, IndexerTopKCandidates, IndexerTopKInCandidates), replaces the
/// uses of its results with the equivalent attn ops (built before it); the
/// dead node is left for DCE. A node whose types are not ranked stays, with
/// a warning naming it. Other ops are left alone.
void raiseH20DomainOp(mlir::OpBuilder &b, mlir::Operation *op);

} // namespace h20

#endif // H20_LIB_TRANSFORMS_RAISEH20DOMAIN_H
