// RUN: h20-opt %s --split-input-file --h20-raise-attn | FileCheck %s
//
// torch.onnx (dynamo) writes SDPA's default scale of a bfloat16 model as
// Mul(Q, c) and Mul(K^T, c) with c = bf16(sqrt(1/sqrt(128))) = 0.296875:
// c*c = 0.0881348 is 0.29% below 1/sqrt(128). Two equal constants that are
// exactly 128^-1/4 rounded to their type are that scale rounded, so the
// raised attention uses 1/sqrt(128), the scale PyTorch eager computes with;
// any other constants keep their product.

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

// -----
// Two different constants (0.296875 and the next bf16 up) are not the
// exporter's rounding of 128^-1/4 twice: the product is kept.
// CHECK-LABEL: func.func @bf16_mixed_pair
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 1 : i64, scale = 8.871460e-02 : f64}
func.func @bf16_mixed_pair(%q: tensor<1x2x?x128xbf16>, %k: tensor<1x2x?x128xbf16>, %v: tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x?x128xbf16>) -> tensor<1x2x128x?xbf16>
  %c1 = onnx.Constant() {value = dense<2.968750e-01> : tensor<bf16>} : () -> tensor<bf16>
  %q1 = onnx.Mul(%q, %c1) : (tensor<1x2x?x128xbf16>, tensor<bf16>) -> tensor<1x2x?x128xbf16>
  %c2 = onnx.Constant() {value = dense<2.988281250e-01> : tensor<bf16>} : () -> tensor<bf16>
  %k2 = onnx.Mul(%kt, %c2) : (tensor<1x2x128x?xbf16>, tensor<bf16>) -> tensor<1x2x128x?xbf16>
  %s = onnx.MatMul(%q1, %k2) : (tensor<1x2x?x128xbf16>, tensor<1x2x128x?xbf16>) -> tensor<1x2x?x?xbf16>
  %p = onnx.Softmax(%s) {axis = -1 : si64} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %y = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xbf16>, tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16>
  return %y : tensor<1x2x?x128xbf16>
}

// -----
// Div(S, bf16(sqrt(128)) = 11.3125): snapped.
// CHECK-LABEL: func.func @bf16_div_sqrt
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 1 : i64, scale = 0.088388347648318{{[0-9]*}} : f64}
func.func @bf16_div_sqrt(%q: tensor<1x2x?x128xbf16>, %k: tensor<1x2x?x128xbf16>, %v: tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x?x128xbf16>) -> tensor<1x2x128x?xbf16>
  %c1 = onnx.Constant() {value = dense<1.131250e+01> : tensor<bf16>} : () -> tensor<bf16>
  %s = onnx.MatMul(%q, %kt) : (tensor<1x2x?x128xbf16>, tensor<1x2x128x?xbf16>) -> tensor<1x2x?x?xbf16>
  %s1 = onnx.Div(%s, %c1) : (tensor<1x2x?x?xbf16>, tensor<bf16>) -> tensor<1x2x?x?xbf16>
  %p = onnx.Softmax(%s1) {axis = -1 : si64} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %y = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xbf16>, tensor<1x2x?x128xbf16>) -> tensor<1x2x?x128xbf16>
  return %y : tensor<1x2x?x128xbf16>
}

// -----
// float16: f16(128^-1/4) = 0.29736328125 twice: snapped.
// CHECK-LABEL: func.func @f16_pair
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 1 : i64, scale = 0.088388347648318{{[0-9]*}} : f64}
func.func @f16_pair(%q: tensor<1x2x?x128xf16>, %k: tensor<1x2x?x128xf16>, %v: tensor<1x2x?x128xf16>) -> tensor<1x2x?x128xf16> {
  %kt = onnx.Transpose(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x?x128xf16>) -> tensor<1x2x128x?xf16>
  %c1 = onnx.Constant() {value = dense<2.973632810e-01> : tensor<f16>} : () -> tensor<f16>
  %q1 = onnx.Mul(%q, %c1) : (tensor<1x2x?x128xf16>, tensor<f16>) -> tensor<1x2x?x128xf16>
  %c2 = onnx.Constant() {value = dense<2.973632810e-01> : tensor<f16>} : () -> tensor<f16>
  %k2 = onnx.Mul(%kt, %c2) : (tensor<1x2x128x?xf16>, tensor<f16>) -> tensor<1x2x128x?xf16>
  %s = onnx.MatMul(%q1, %k2) : (tensor<1x2x?x128xf16>, tensor<1x2x128x?xf16>) -> tensor<1x2x?x?xf16>
  %p = onnx.Softmax(%s) {axis = -1 : si64} : (tensor<1x2x?x?xf16>) -> tensor<1x2x?x?xf16>
  %y = onnx.MatMul(%p, %v) : (tensor<1x2x?x?xf16>, tensor<1x2x?x128xf16>) -> tensor<1x2x?x128xf16>
  return %y : tensor<1x2x?x128xf16>
}
