//===- OnnxVerifiers.h - op-specific rules of onnx ops ----------*- C++ -*-===//
//
// Every onnx node op's verifier checks its arity, then calls verifyNode(op).
// Ops without rules of their own take the template (always success); an op
// with rules declares a non-template overload here, which C++ prefers.
//
//===----------------------------------------------------------------------===//
#ifndef H20_DIALECT_ONNX_IR_ONNXVERIFIERS_H
#define H20_DIALECT_ONNX_IR_ONNXVERIFIERS_H

namespace h20::onnx {
template <typename OpT>
llvm::LogicalResult verifyNode(OpT) {
  return llvm::success();
}
llvm::LogicalResult verifyNode(ConstantOp op);
llvm::LogicalResult verifyNode(CastOp op);
llvm::LogicalResult verifyNode(TransposeOp op);
llvm::LogicalResult verifyNode(ConcatOp op);
llvm::LogicalResult verifyNode(SoftmaxOp op);
llvm::LogicalResult verifyNode(RMSNormalizationOp op);
llvm::LogicalResult verifyNode(AttentionOp op);
llvm::LogicalResult verifyNode(RotaryEmbeddingOp op);
llvm::LogicalResult verifyNode(ClipOp op);
llvm::LogicalResult verifyNode(ModOp op);
llvm::LogicalResult verifyNode(GeluOp op);
llvm::LogicalResult verifyNode(BitwiseAndOp op);
llvm::LogicalResult verifyNode(BitwiseOrOp op);
llvm::LogicalResult verifyNode(BitwiseXorOp op);
llvm::LogicalResult verifyNode(BitwiseNotOp op);
llvm::LogicalResult verifyNode(GatherElementsOp op);
llvm::LogicalResult verifyNode(ScatterElementsOp op);
llvm::LogicalResult verifyNode(TopKOp op);
} // namespace h20::onnx

#endif // H20_DIALECT_ONNX_IR_ONNXVERIFIERS_H
