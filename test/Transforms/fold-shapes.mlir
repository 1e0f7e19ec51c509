// RUN: h20-opt %s --split-input-file --h20-fold-shapes | FileCheck %s

// Shape of static dims, sliced and concatenated, folds to a constant.
// CHECK-LABEL: func.func @static_shape
// CHECK: %[[C:.*]] = onnx.Constant() {value = dense<[8, 16, 4]> : tensor<3xi64>}
// CHECK: onnx.Reshape(%arg0, %[[C]])
// CHECK-NOT: onnx.Shape
func.func @static_shape(%x: tensor<2x4x16xf32>) -> tensor<8x16x4xf32> {
  %s = onnx.Shape(%x) {start = 2 : si64} : (tensor<2x4x16xf32>) -> tensor<1xi64>
  %h = onnx.Constant() {value = dense<8> : tensor<1xi64>} : () -> tensor<1xi64>
  %f = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %c = onnx.Concat(%h, %s, %f) {axis = 0 : si64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r = onnx.Reshape(%x, %c) : (tensor<2x4x16xf32>, tensor<3xi64>) -> tensor<8x16x4xf32>
  return %r : tensor<8x16x4xf32>
}

// -----

// A shape vector that involves a dynamic dim stays computed.
// CHECK-LABEL: func.func @dynamic_shape
// CHECK: onnx.Shape
// CHECK: onnx.Concat
func.func @dynamic_shape(%x: tensor<1x?x16xf32> {onnx.dim_params = ["", "S", ""]}) -> tensor<2xi64> {
  %s = onnx.Shape(%x) {start = 1 : si64, end = 2 : si64} : (tensor<1x?x16xf32>) -> tensor<1xi64>
  %f = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %c = onnx.Concat(%s, %f) {axis = 0 : si64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  return %c : tensor<2xi64>
}
