//===- Passes.td - h20 conversion passes -------------------*- tablegen -*-===//
#ifndef H20_CONVERSION_PASSES
#define H20_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def LowerToLinalg : Pass<"h20-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower attn ops (reference decompositions) and onnx ops to linalg";
  let description = [{
    Rewrites every attn op into its reference decomposition on linalg /
    tensor / arith / math (this decomposition is the op's meaning: the CPU
    target runs it and tests compare against it), and every remaining onnx op
    into linalg / tensor / arith / math. onnx.Weight values become trailing
    arguments of the function, listed in order in its `h20.weights` attribute
    (initializer names). Fails, naming the op, on anything it cannot lower.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::tensor::TensorDialect",
    "mlir::scf::SCFDialect"
  ];
}

#endif // H20_CONVERSION_PASSES
