// RUN: h20-opt %s --h20-quantize-linears | FileCheck %s
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
