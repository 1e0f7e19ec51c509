// RUN: h20-opt %s --h20-tensor-parallel=ranks=4 --h20-check-row-splits --h20-merge-all-reduces 2>&1 | FileCheck %s
// RUN: not h20-opt %s --h20-tensor-parallel=ranks=4 --h20-merge-all-reduces --h20-check-row-splits 2>&1 | FileCheck %s --check-prefix=ORDER
// A shared expert (block-scaled FP8: split by rows) whose chunk (6 tokens) does not divide
// over 4 ranks: h20-check-row-splits withdraws the split and the gather's
// all-reduce, so the whole shared expert is added once, after the routed
// experts' sum (nothing left to merge). Merging first would have summed
// the whole shared expert over the ranks: h20-check-row-splits refuses
// that order.
// CHECK: warning: h20-check-row-splits: {{.*}}chunks of 6 tokens do not divide over 4 ranks
// CHECK: module attributes {h20.tensor_parallel = {attention_blocks = 0 : i64, attention_rows = 0 : i64, attention_rows_withdrawn = {{.*}}, query_gemms = 0 : i64, ranks = 4 : i64, replicated_attention = 0 : i64, shared_expert_gemms = 0 : i64}
// CHECK-NOT: h20.split_rows
// CHECK: %[[Y:.*]] = onnx.h20.RoutedExpertsMxfp4
// CHECK: %[[S:.*]] = attn.all_reduce %[[Y]]
// CHECK-NOT: attn.all_reduce
// CHECK: onnx.Add(%[[S]], %{{.*}})
// ORDER: error: internal: h20-check-row-splits: a gathered op read by something other than its all-reduce
module attributes {onnx.model_dir = "."} {
func.func @f(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> attributes {h20.chunked = {chunk = 6 : i64}} {
  %r = onnx.Weight {name = "router"} : tensor<64x8xbf16>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x32x32xi8>
  %s1 = onnx.Weight {name = "s1"} : tensor<8x32x2xi8>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x32x32xi8>
  %s3 = onnx.Weight {name = "s3"} : tensor<8x32x2xi8>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x64x16xi8>
  %s2 = onnx.Weight {name = "s2"} : tensor<8x64x1xi8>
  %routed = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  %sw1 = onnx.Weight {name = "shared.w1"} : tensor<256x64xf8E4M3FN>
  %ss1 = onnx.Weight {name = "shared.s1"} : tensor<2x1xf32>
  %sw3 = onnx.Weight {name = "shared.w3"} : tensor<256x64xf8E4M3FN>
  %ss3 = onnx.Weight {name = "shared.s3"} : tensor<2x1xf32>
  %sw2 = onnx.Weight {name = "shared.w2"} : tensor<64x256xf8E4M3FN>
  %ss2 = onnx.Weight {name = "shared.s2"} : tensor<1x2xf32>
  %lim = onnx.Constant() {value = dense<10.0> : tensor<bf16>} : () -> tensor<bf16>
  %gate = onnx.h20.BlockScaledMatMul(%x, %sw1, %ss1) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x64xbf16>, tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<?x256xbf16>
  %up = onnx.h20.BlockScaledMatMul(%x, %sw3, %ss3) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x64xbf16>, tensor<256x64xf8E4M3FN>, tensor<2x1xf32>) -> tensor<?x256xbf16>
  %gl = onnx.Min(%gate, %lim) : (tensor<?x256xbf16>, tensor<bf16>) -> tensor<?x256xbf16>
  %act = onnx.Mul(%gl, %up) : (tensor<?x256xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %down = onnx.h20.BlockScaledMatMul(%act, %sw2, %ss2) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<?x64xbf16>
  %y = onnx.Add(%routed, %down) : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
}
