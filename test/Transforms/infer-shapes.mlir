// RUN: h20-opt %s --split-input-file --h20-infer-shapes | FileCheck %s

// Unranked results get the shape the symbolic evaluator derives; a dynamic
// dim that is provably constant becomes static.
// CHECK-LABEL: func.func @refine
// CHECK: onnx.MatMul(%arg0, %arg1) : (tensor<1x?x8xf32>, tensor<8x4xf32>) -> tensor<1x?x4xf32>
// CHECK: onnx.Reshape({{.*}}) : (tensor<1x?x4xf32>, tensor<3xi64>) -> tensor<1x?x2xf32>
func.func @refine(%x: tensor<1x?x8xf32> {onnx.dim_params = ["", "S", ""]}, %w: tensor<8x4xf32>) -> tensor<*xf32> {
  %m = onnx.MatMul(%x, %w) : (tensor<1x?x8xf32>, tensor<8x4xf32>) -> tensor<*xf32>
  %s = onnx.Constant() {value = dense<[1, -1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %r = onnx.Reshape(%m, %s) : (tensor<*xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %n = onnx.Neg(%r) : (tensor<?x?x?xf32>) -> tensor<*xf32>
  return %n : tensor<*xf32>
}

// -----

// A declared static shape that contradicts the evaluation is kept as is
// (the model's own declaration wins; the op verifier or later passes judge).
// CHECK-LABEL: func.func @keep_declared
// CHECK: onnx.Neg(%arg0) : (tensor<4xf32>) -> tensor<5xf32>
func.func @keep_declared(%x: tensor<4xf32>) -> tensor<4xf32> {
  %n = onnx.Neg(%x) : (tensor<4xf32>) -> tensor<5xf32>
  %a = onnx.Abs(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
