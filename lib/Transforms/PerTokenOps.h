//===- PerTokenOps.h - which ops a chunked prefill may split -*- C++ -*-===//
#ifndef H20_LIB_TRANSFORMS_PERTOKENOPS_H
#define H20_LIB_TRANSFORMS_PERTOKENOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>

namespace h20 {

/// Decides, op by op, whether running a decoder graph C tokens at a time
/// gives the same rows as running the whole prompt (chunked prefill).
///
/// The graph takes token ids [1, S] with S dynamic, so S (and values made
/// from it) is the only dynamic size: every dynamic dim of a value is a
/// token axis, and a static dim never carries tokens. An op acts per token
/// when it reads along static axes only (a reduction, Softmax, Concat,
/// Split, Slice, Gather, CumSum or TopK over the hidden or head axes), is
/// elementwise on values with at most one token axis, contracts a static
/// axis against an operand that does not depend on the prompt (MatMul by a
/// weight, however the weight is transposed or cast), multiplies two
/// activations batched over the token axis with static matrices (an [S, m,
/// k] x [S, k, n] mix), reshapes without putting two tokens in one row,
/// is a routed-experts call (routing per token), or is one of the ops
/// chunked prefill rewrites (attention through the KV cache, DeepSeek-
/// V4.1's window-only sparse attention through its latent cache, RoPE
/// tables).
/// What cannot be shown per token is refused, with the reason.
class PerTokenOps {
public:
  /// `ids` is the graph's token-id argument.
  PerTokenOps(mlir::func::FuncOp func, mlir::Value ids);

  /// Why `op` cannot be chunked, or nothing when it acts per token.
  std::optional<std::string> whyNot(mlir::Operation *op) const;

  /// Whether `v` is computed from the token ids (data or shape).
  bool dependsOnPrompt(mlir::Value v) const { return fromPrompt.contains(v); }

private:
  std::optional<std::string> whyNotAxisOp(mlir::Operation *op) const;
  std::optional<std::string> whyNotMatMul(mlir::Operation *op) const;
  std::optional<std::string> whyNotReshape(mlir::Operation *op) const;
  std::optional<std::string> whyNotSizes(mlir::Operation *op) const;

  mlir::func::FuncOp func;
  mlir::Value ids;
  llvm::DenseSet<mlir::Value> fromPrompt;
  /// Values whose data are sizes of prompt values (Shape, Range, ...).
  llvm::DenseSet<mlir::Value> fromSizes;
};

} // namespace h20

#endif // H20_LIB_TRANSFORMS_PERTOKENOPS_H
