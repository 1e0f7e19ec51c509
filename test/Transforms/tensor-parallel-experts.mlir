// RUN: h20-opt %s --split-input-file --h20-tensor-parallel=ranks=2 | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-tensor-parallel=ranks=4 | FileCheck %s --check-prefix=FOUR
// RUN: not h20-opt %s --split-input-file --h20-tensor-parallel=ranks=3 2>&1 | FileCheck %s --check-prefix=THREE
// Expert parallelism: a routed-experts op's expert weights (and an MXFP4
// op's scales) are sliced along the expert axis, rank r holding experts
// [r E / T, (r + 1) E / T); the router and its bias stay whole (every rank
// picks among all E), and an all-reduce after the op sums the ranks'
// shares.

// CHECK-LABEL: func.func @float_experts
// CHECK: %[[R:.*]] = onnx.Weight {name = "router"} : tensor<64x8xf32>
// CHECK: %[[B:.*]] = onnx.Weight {name = "bias"} : tensor<8xf32>
// CHECK: %[[W1:.*]] = onnx.Weight {h20.shard = {axis = 0 : i64, full_shape = array<i64: 8, 64, 32>, starts = array<i64: 0, 4>}, name = "w1"} : tensor<4x64x32xf32>
// CHECK: %[[W3:.*]] = onnx.Weight {h20.shard = {axis = 0 : i64, full_shape = array<i64: 8, 64, 32>, starts = array<i64: 0, 4>}, name = "w3"} : tensor<4x64x32xf32>
// CHECK: %[[W2:.*]] = onnx.Weight {h20.shard = {axis = 0 : i64, full_shape = array<i64: 8, 32, 64>, starts = array<i64: 0, 4>}, name = "w2"} : tensor<4x32x64xf32>
// CHECK: %[[Y:.*]] = onnx.h20.RoutedExperts(%{{.*}}, %[[R]], %[[B]], %[[W1]], %[[W3]], %[[W2]])
// CHECK: %[[S:.*]] = attn.all_reduce %[[Y]]
// CHECK: return %[[S]]
// FOUR-LABEL: func.func @float_experts
// FOUR: name = "w1"} : tensor<2x64x32xf32>
// FOUR: starts = array<i64: 0, 2, 4, 6>
// THREE: error: h20-tensor-parallel: found no attention, MLP or routed-experts block to split over 3 ranks ({{.*}}; 1 routed-experts op(s) did not: 8 experts do not divide over 3 ranks
module attributes {onnx.model_dir = "."} {
func.func @float_experts(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = onnx.Weight {name = "router"} : tensor<64x8xf32>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x64x32xf32>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x64x32xf32>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x32x64xf32>
  %0 = onnx.h20.RoutedExperts(%x, %r, %b, %w1, %w3, %w2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x64x32xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}
}

// -----

// CHECK-LABEL: func.func @mxfp4_experts
// CHECK-COUNT-6: h20.shard = {axis = 0 : i64
// CHECK: onnx.h20.RoutedExpertsMxfp4({{.*}}) {{.*}} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<4x32x32xi8>, tensor<4x32x2xi8>, tensor<4x32x32xi8>, tensor<4x32x2xi8>, tensor<4x64x16xi8>, tensor<4x64x1xi8>) -> tensor<?x64xbf16>
// CHECK: attn.all_reduce
module attributes {onnx.model_dir = "."} {
func.func @mxfp4_experts(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %r = onnx.Weight {name = "router"} : tensor<64x8xbf16>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x32x32xi8>
  %s1 = onnx.Weight {name = "s1"} : tensor<8x32x2xi8>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x32x32xi8>
  %s3 = onnx.Weight {name = "s3"} : tensor<8x32x2xi8>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x64x16xi8>
  %s2 = onnx.Weight {name = "s2"} : tensor<8x64x1xi8>
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}
}
