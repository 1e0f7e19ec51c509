// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg --verify-diagnostics | FileCheck %s
// The ops of ONNX's function bodies: Size as the product of the dims,
// Flatten as a tensor.reshape to [outer, inner], Pad (constant mode,
// compile-time pads) as tensor.pad yielding the constant value.

// CHECK-LABEL: func.func @size_flatten
// CHECK: %[[N:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK: tensor.from_elements %[[N]] : tensor<i64>
// CHECK: tensor.reshape %arg0(%{{.*}}) : (tensor<2x?x4xf32>, tensor<2xindex>) -> tensor<2x?xf32>
func.func @size_flatten(%x: tensor<2x?x4xf32>) -> (tensor<i64>, tensor<2x?xf32>) {
  %s = onnx.Size(%x) : (tensor<2x?x4xf32>) -> tensor<i64>
  %f = onnx.Flatten(%x) : (tensor<2x?x4xf32>) -> tensor<2x?xf32>
  return %s, %f : tensor<i64>, tensor<2x?xf32>
}

// -----

// CHECK-LABEL: func.func @pad
// CHECK: %[[V:.*]] = tensor.extract %arg1[] : tensor<f32>
// CHECK: tensor.pad %arg0 low[0, 0] high[0, 2]
// CHECK:   tensor.yield %[[V]] : f32
// CHECK: } : tensor<2x5xf32> to tensor<2x7xf32>
func.func @pad(%x: tensor<2x5xf32>, %v: tensor<f32>) -> tensor<2x7xf32> {
  %pads = onnx.Constant() {value = dense<[0, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %p = onnx.Pad(%x, %pads, %v, %axes) : (tensor<2x5xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x7xf32>
  return %p : tensor<2x7xf32>
}

// -----

func.func @pad_reflect(%x: tensor<2x5xf32>) -> tensor<2x7xf32> {
  %pads = onnx.Constant() {value = dense<[0, 1, 0, 1]> : tensor<4xi64>} : () -> tensor<4xi64>
  // expected-error @+1 {{mode 'reflect' is not supported}}
  %p = onnx.Pad(%x, %pads) {mode = "reflect"} : (tensor<2x5xf32>, tensor<4xi64>) -> tensor<2x7xf32>
  return %p : tensor<2x7xf32>
}

// -----

func.func @pad_negative(%x: tensor<2x5xf32>) -> tensor<2x3xf32> {
  %pads = onnx.Constant() {value = dense<[0, -1, 0, -1]> : tensor<4xi64>} : () -> tensor<4xi64>
  // expected-error @+1 {{negative pads (cropping) are not supported}}
  %p = onnx.Pad(%x, %pads) : (tensor<2x5xf32>, tensor<4xi64>) -> tensor<2x3xf32>
  return %p : tensor<2x3xf32>
}

// -----

func.func @pad_runtime(%x: tensor<2x5xf32>, %pads: tensor<4xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{its pads are computed at run time}}
  %p = onnx.Pad(%x, %pads) : (tensor<2x5xf32>, tensor<4xi64>) -> tensor<?x?xf32>
  return %p : tensor<?x?xf32>
}
