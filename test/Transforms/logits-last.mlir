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
  // expected-error @+1 {{--logits=last: the output is not an LM head MatMul([B, S, K], [K, V]) or BlockScaledMatMul([B, S, K], [V, K] FP8, scales)}}
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

// -----

// An FP8 LM head (h20.BlockScaledMatMul: W [V, K] e4m3 with 128 x 128
// block scales) is cut the same way; the head keeps its weight, scales and
// block attributes.
// CHECK-LABEL: func.func @fp8_head
// CHECK-SAME: -> tensor<1x1x16xbf16>
// CHECK: %[[L:.*]] = onnx.Slice(%arg0, {{.*}}) : (tensor<1x?x256xbf16>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x256xbf16>
// CHECK: %[[Y:.*]] = onnx.h20.BlockScaledMatMul(%[[L]], %arg1, %arg2) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<1x1x256xbf16>, tensor<16x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<1x1x16xbf16>
// CHECK: return %[[Y]]
func.func @fp8_head(%h: tensor<1x?x256xbf16>, %w: tensor<16x256xf8E4M3FN>, %s: tensor<1x2xf32>) -> tensor<1x?x16xbf16> {
  %y = onnx.h20.BlockScaledMatMul(%h, %w, %s) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<1x?x256xbf16>, tensor<16x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<1x?x16xbf16>
  return %y : tensor<1x?x16xbf16>
}

// -----

// A head behind Identity (an inlined function body ends in one, e.g.
// BlockScaledMatMul's on the CPU target): the Identity and the
// whole-sequence head go.
// CHECK-LABEL: func.func @behind_identity
// CHECK: onnx.Slice
// CHECK-NEXT: %[[Y:.*]] = onnx.MatMul({{.*}}) : (tensor<1x1x8xf32>, tensor<8x16xf32>) -> tensor<1x1x16xf32>
// CHECK-NOT: onnx.Identity
// CHECK-NOT: onnx.MatMul
// CHECK: return %[[Y]]
func.func @behind_identity(%h: tensor<1x?x8xf32>, %w: tensor<8x16xf32>) -> tensor<1x?x16xf32> {
  %y = onnx.MatMul(%h, %w) : (tensor<1x?x8xf32>, tensor<8x16xf32>) -> tensor<1x?x16xf32>
  %i = onnx.Identity(%y) : (tensor<1x?x16xf32>) -> tensor<1x?x16xf32>
  return %i : tensor<1x?x16xf32>
}
