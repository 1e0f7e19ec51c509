// RUN: h20-opt %s --split-input-file --h20-quantize-linears | FileCheck %s
// A float linear becomes a block-scaled FP8 linear whose weight and scales
// are derived from the stored weight when loaded (h20.derive); the LM head
// (returned), a K not a multiple of 16 and a tensor-parallel shard stay
// float, an activation product is no linear.

// CHECK-LABEL: func.func @linears
// CHECK-SAME: h20.quantized_linears = {first_kept = "K and N are not multiples of 16, node 'narrow'", fp8 = 1 : i64, kept = 3 : i64}
// CHECK: %[[Q:.*]] = onnx.Weight {file = "w.bin", h20.derive = {kind = "fp8_block128", source_shape = array<i64: 256, 384>, source_type = f32}, length = 393216 : i64, name = "up.fp8", offset = 0 : i64} : tensor<384x256xf8E4M3FN>
// CHECK: %[[S:.*]] = onnx.Weight {file = "w.bin", h20.derive = {kind = "fp8_block128_scale", source_shape = array<i64: 256, 384>, source_type = f32}, length = 393216 : i64, name = "up.fp8.scale", offset = 0 : i64} : tensor<3x2xf32>
// CHECK: %[[Y:.*]] = onnx.h20.BlockScaledMatMul(%arg0, %[[Q]], %[[S]]) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<1x?x256xf32>, tensor<384x256xf8E4M3FN>, tensor<3x2xf32>) -> tensor<1x?x384xf32>
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<1x?x384xf32>, tensor<384x40xf32>)
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<1x?x384xf32>, tensor<1x384x?xf32>)
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<1x?x256xf32>, tensor<256x32xf32>)
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<1x?x384xf32>, tensor<384x1024xf32>)
func.func @linears(%x: tensor<1x?x256xf32>) -> (tensor<1x?x40xf32>, tensor<1x?x?xf32>, tensor<1x?x32xf32>, tensor<1x?x1024xf32>) {
  %up = onnx.Weight {file = "w.bin", length = 393216 : i64, name = "up", offset = 0 : i64} : tensor<256x384xf32>
  %h = onnx.MatMul(%x, %up) : (tensor<1x?x256xf32>, tensor<256x384xf32>) -> tensor<1x?x384xf32> loc("up")
  %nw = onnx.Weight {file = "w.bin", length = 61440 : i64, name = "narrow", offset = 393216 : i64} : tensor<384x40xf32>
  %n = onnx.MatMul(%h, %nw) : (tensor<1x?x384xf32>, tensor<384x40xf32>) -> tensor<1x?x40xf32> loc("narrow")
  %t = onnx.Transpose(%h) {perm = array<i64: 0, 2, 1>} : (tensor<1x?x384xf32>) -> tensor<1x384x?xf32>
  %a = onnx.MatMul(%h, %t) : (tensor<1x?x384xf32>, tensor<1x384x?xf32>) -> tensor<1x?x?xf32>
  %sw = onnx.Weight {file = "w.bin", length = 65536 : i64, name = "shard", offset = 454656 : i64, h20.shard = {axis = 1 : i64, full_shape = array<i64: 256, 64>, starts = array<i64: 0, 32>}} : tensor<256x32xf32>
  %s = onnx.MatMul(%x, %sw) : (tensor<1x?x256xf32>, tensor<256x32xf32>) -> tensor<1x?x32xf32>
  %hw = onnx.Weight {file = "w.bin", length = 1572864 : i64, name = "lm_head", offset = 520192 : i64} : tensor<384x1024xf32>
  %l = onnx.MatMul(%h, %hw) : (tensor<1x?x384xf32>, tensor<384x1024xf32>) -> tensor<1x?x1024xf32>
  return %n, %a, %s, %l : tensor<1x?x40xf32>, tensor<1x?x?xf32>, tensor<1x?x32xf32>, tensor<1x?x1024xf32>
}

// -----

// One weight read by two linears is derived once. A head behind a Cast
// and a softcap (tanh(x / c) * c) stays float; a returned projection whose
// last dim changes on the way (a present-value output [B, H, S, D]) is no
// head.
// CHECK-LABEL: func.func @shared_and_heads
// CHECK-SAME: h20.quantized_linears = {first_kept = "the LM head", fp8 = 3 : i64, kept = 1 : i64}
// CHECK-COUNT-1: name = "w.fp8"
// CHECK-NOT: name = "w.fp8"
// CHECK: onnx.h20.BlockScaledMatMul
// CHECK: onnx.h20.BlockScaledMatMul
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<1x?x256xf32>, tensor<256x512xf32>)
// CHECK: name = "v.fp8"
// CHECK: onnx.h20.BlockScaledMatMul
func.func @shared_and_heads(%x: tensor<1x?x256xf32>, %x2: tensor<1x?x256xf32>) -> (tensor<1x?x256xf32>, tensor<1x?x512xf16>, tensor<1x2x?x64xf32>) {
  %w = onnx.Weight {file = "w.bin", length = 262144 : i64, name = "w", offset = 0 : i64} : tensor<256x256xf32>
  %a = onnx.MatMul(%x, %w) : (tensor<1x?x256xf32>, tensor<256x256xf32>) -> tensor<1x?x256xf32>
  %b = onnx.MatMul(%x2, %w) : (tensor<1x?x256xf32>, tensor<256x256xf32>) -> tensor<1x?x256xf32>
  %s = onnx.Add(%a, %b) : (tensor<1x?x256xf32>, tensor<1x?x256xf32>) -> tensor<1x?x256xf32>
  %hw = onnx.Weight {file = "w.bin", length = 524288 : i64, name = "head", offset = 262144 : i64} : tensor<256x512xf32>
  %l = onnx.MatMul(%s, %hw) : (tensor<1x?x256xf32>, tensor<256x512xf32>) -> tensor<1x?x512xf32>
  %c = onnx.Constant() {value = dense<30.0> : tensor<f32>} : () -> tensor<f32>
  %d = onnx.Div(%l, %c) : (tensor<1x?x512xf32>, tensor<f32>) -> tensor<1x?x512xf32>
  %t = onnx.Tanh(%d) : (tensor<1x?x512xf32>) -> tensor<1x?x512xf32>
  %m = onnx.Mul(%t, %c) : (tensor<1x?x512xf32>, tensor<f32>) -> tensor<1x?x512xf32>
  %o = onnx.Cast(%m) {to = 10 : si64} : (tensor<1x?x512xf32>) -> tensor<1x?x512xf16>
  %vw = onnx.Weight {file = "w.bin", length = 131072 : i64, name = "v", offset = 786432 : i64} : tensor<256x128xf32>
  %v = onnx.MatMul(%x, %vw) : (tensor<1x?x256xf32>, tensor<256x128xf32>) -> tensor<1x?x128xf32>
  %shape = onnx.Constant() {value = dense<[1, -1, 2, 64]> : tensor<4xi64>} : () -> tensor<4xi64>
  %r = onnx.Reshape(%v, %shape) : (tensor<1x?x128xf32>, tensor<4xi64>) -> tensor<1x?x2x64xf32>
  %p = onnx.Transpose(%r) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x?x2x64xf32>) -> tensor<1x2x?x64xf32>
  return %s, %o, %p : tensor<1x?x256xf32>, tensor<1x?x512xf16>, tensor<1x2x?x64xf32>
}
