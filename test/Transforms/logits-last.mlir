// RUN: h20-opt %s --split-input-file --h20-logits-last --verify-diagnostics | FileCheck %s

// The LM head reads only the last position: Slice(h, [-1], [max], [1]).
// CHECK-LABEL: func.func @head
// CHECK-SAME: -> tensor<1x1x16xf32>
// CHECK: %[[L:.*]] = onnx.Slice(%arg0, {{.*}}) : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x8xf32>
// CHECK: %[[Y:.*]] = onnx.MatMul(%[[L]], %arg1) : (tensor<1x1x8xf32>, tensor<8x16xf32>) -> tensor<1x1x16xf32>
// CHECK: return %[[Y]]
func.func @head(%h: tensor<1x?x8xf32>, %w: tensor<8x16xf32>) -> tensor<1x?x16xf32> {
  %y = onnx.MatMul(%h, %w) : (tensor<1x?x8xf32>, tensor<8x16xf32>) -> tensor<1x?x16xf32>
  return %y : tensor<1x?x16xf32>
}

// -----

func.func @not_a_head(%h: tensor<1x?x8xf32>) -> tensor<1x?x8xf32> {
  // expected-error @+1 {{--logits=last: the output is not an LM head MatMul([B, S, K], [K, V])}}
  return %h : tensor<1x?x8xf32>
}
