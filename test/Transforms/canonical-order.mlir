// RUN: h20-opt %s --split-input-file --h20-canonical-order | FileCheck %s

// Ops are emitted in the post-order of a DFS from the return, operands in
// order: the same dataflow prints the same whatever the producer's order.
// CHECK-LABEL: func.func @reorder
// CHECK: %[[A:.*]] = onnx.Neg(%arg0)
// CHECK-NEXT: %[[B:.*]] = onnx.Abs(%arg1)
// CHECK-NEXT: %[[C:.*]] = onnx.Add(%[[A]], %[[B]])
// CHECK-NEXT: return %[[C]]
func.func @reorder(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %b = onnx.Abs(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %a = onnx.Neg(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Add(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// Unreached ops keep their relative order after the reached ones.
// CHECK-LABEL: func.func @unreached
// CHECK: onnx.Neg
// CHECK-NEXT: onnx.Exp
// CHECK-NEXT: onnx.Log
// CHECK-NEXT: return
func.func @unreached(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = onnx.Exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %l = onnx.Log(%e) : (tensor<4xf32>) -> tensor<4xf32>
  %n = onnx.Neg(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}
