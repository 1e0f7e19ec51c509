//===- ProvenMask.h - what h20-analyze-masks proved about a mask -*- C++ -*-===//
//
// The choice (h20-analyze-masks) and its application (h20-raise-attn) are
// separate passes; this is the attribute that carries the choice between them.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TRANSFORMS_PROVENMASK_H
#define H20_TRANSFORMS_PROVENMASK_H

#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/IR/Operation.h"

#include <optional>

namespace h20 {

/// The meaning of a boolean mask tensor [..., S_q, S_kv] (true = visible),
/// proven for every value of the dynamic dimensions.
struct ProvenMask {
  bool causal = false; ///< false: every key is visible
  attn::CausalAlignment alignment = attn::CausalAlignment::bottom_right;
  std::optional<int64_t> window; ///< sliding window in tokens, if any

  /// Attribute name on the mask's defining op.
  static constexpr llvm::StringLiteral kAttrName = "attn.proven_mask";

  /// Stores this as a dictionary attribute on `op`.
  void attachTo(mlir::Operation *op) const;
  /// Reads the attribute from the op defining `mask`, if present.
  static std::optional<ProvenMask> of(mlir::Value mask);
};

/// True for a scalar (or splat) float onnx.Constant that is -inf or the
/// lowest finite value of its dtype (what PyTorch/transformers use for
/// "masked": torch.finfo(dtype).min, -65504 in float16).
bool isMinusInfinity(mlir::Value v);

/// The boolean "visible" tensor a mask operand stands for: a bool mask
/// itself, or c in the additive form Where(c, 0, -inf); null otherwise.
/// Mask analysis proves these values; raising reads what it proved — both
/// through this one definition of the forms.
mlir::Value visibleCondition(mlir::Value mask);

} // namespace h20

#endif // H20_TRANSFORMS_PROVENMASK_H
