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

// -----

// An LM head that already reads only the last position (DeepSeek-V4.1's
// `export.py --logits last`) is left alone: one Slice, which
// h20-chunked-prefill then moves to the chunk's last real token (a second
// Slice on top of it would leave this one at the padded chunk's end).
// CHECK-LABEL: func.func @already_last
// CHECK-COUNT-1: onnx.Slice
// CHECK-NOT: onnx.Slice
// CHECK: return
func.func @already_last(%h: tensor<1x?x8xf32>, %w: tensor<8x16xf32>) -> tensor<1x1x16xf32> {
  %s = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %l = onnx.Slice(%h, %s, %e, %a) : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x8xf32>
  %y = onnx.MatMul(%l, %w) : (tensor<1x1x8xf32>, tensor<8x16xf32>) -> tensor<1x1x16xf32>
  return %y : tensor<1x1x16xf32>
}
