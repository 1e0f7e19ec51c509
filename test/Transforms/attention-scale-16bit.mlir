// RUN: h20-opt %s --split-input-file --h20-raise-attn | FileCheck %s
//
// torch.onnx (dynamo) writes SDPA's default scale of a bfloat16 model as
// Mul(Q, c) and Mul(K^T, c) with c = bf16(sqrt(1/sqrt(128))) = 0.296875:
// c*c = 0.0881348 is 0.29% below 1/sqrt(128), inside the rounding of the two
// bf16 constants (2 * 2^-8), so the raised attention uses 1/sqrt(128), the
// scale PyTorch eager computes with.

// CHECK-LABEL: func.func @bf16_sqrt_scale
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 1 : i64, scale = 0.088388347648318{{[0-9]*}} : f64}
func.func @bf16_sqrt_scale(%q: tensor<1x2x?x128xbf16>, %k: tensor<1x2x?x128xbf16>, %v: tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16> {
  %c = onnx.Constant() {value = dense<2.968750e-01> : tensor<bf16>} : () -> tensor<bf16>
  %qs = onnx.Mul(%q, %c) : (tensor<1x2x?x128xbf16>, tensor<bf16>) -> tensor<1x2x?x128xbf16>
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x?x128xbf16>) -> tensor<1x2x128x?xbf16>
  %ks = onnx.Mul(%kt, %c) : (tensor<1x2x128x?xbf16>, tensor<bf16>) -> tensor<1x2x128x?xbf16>
  %s = onnx.MatMul(%qs, %ks) : (tensor<1x2x?x128xbf16>, tensor<1x2x128x?xbf16>) -> tensor<1x2x?x?xbf16>
  %p = onnx.Softmax(%s) {axis = -1 : si64} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %y = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xbf16>, tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16>
  return %y : tensor<1x2x?x128xbf16>
}

// -----

// The next bf16 value up (0.298828125: the product is 1.03% above) is not
// a rounding of 1/sqrt(128)'s square root: the product is kept.
// CHECK-LABEL: func.func @bf16_other_scale
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 1 : i64, scale = 0.089298{{[0-9]*}} : f64}
func.func @bf16_other_scale(%q: tensor<1x2x?x128xbf16>, %k: tensor<1x2x?x128xbf16>, %v: tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16> {
  %c = onnx.Constant() {value = dense<2.988281250e-01> : tensor<bf16>} : () -> tensor<bf16>
  %qs = onnx.Mul(%q, %c) : (tensor<1x2x?x128xbf16>, tensor<bf16>) -> tensor<1x2x?x128xbf16>
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x?x128xbf16>) -> tensor<1x2x128x?xbf16>
  %ks = onnx.Mul(%kt, %c) : (tensor<1x2x128x?xbf16>, tensor<bf16>) -> tensor<1x2x128x?xbf16>
  %s = onnx.MatMul(%qs, %ks) : (tensor<1x2x?x128xbf16>, tensor<1x2x128x?xbf16>) -> tensor<1x2x?x?xbf16>
  %p = onnx.Softmax(%s) {axis = -1 : si64} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %y = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xbf16>, tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16>
  return %y : tensor<1x2x?x128xbf16>
}

// -----

// The same constant in float32 is not a rounding of it either (float32's
// 2^-24 is far tighter): a deliberate 0.296875^2 stays.
// CHECK-LABEL: func.func @f32_same_value
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 1 : i64, scale = 0.08813476{{[0-9]*}} : f64}
func.func @f32_same_value(%q: tensor<1x2x?x128xf32>, %k: tensor<1x2x?x128xf32>, %v: tensor<1x2x?x128xf32>) -> tensor<1x2x?x128xf32> {
  %c = onnx.Constant() {value = dense<2.968750e-01> : tensor<f32>} : () -> tensor<f32>
  %qs = onnx.Mul(%q, %c) : (tensor<1x2x?x128xf32>, tensor<f32>) -> tensor<1x2x?x128xf32>
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x?x128xf32>) -> tensor<1x2x128x?xf32>
  %ks = onnx.Mul(%kt, %c) : (tensor<1x2x128x?xf32>, tensor<f32>) -> tensor<1x2x128x?xf32>
  %s = onnx.MatMul(%qs, %ks) : (tensor<1x2x?x128xf32>, tensor<1x2x128x?xf32>) -> tensor<1x2x?x?xf32>
  %p = onnx.Softmax(%s) {axis = -1 : si64} : (tensor<1x2x?x?xf32>) -> tensor<1x2x?x?xf32>
  %y = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xf32>, tensor<1x2x?x128xf32>) -> tensor<1x2x?x128xf32>
  return %y : tensor<1x2x?x128xf32>
}
