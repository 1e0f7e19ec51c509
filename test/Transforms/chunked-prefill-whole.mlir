// RUN: h20-opt %s --split-input-file --h20-chunked-prefill=whole-prompt-fallback=true --verify-diagnostics | FileCheck %s
// whole-prompt-fallback: a graph holding attn.sparse_attention (h20's
// DeepSeek-V4.1 exports, causal by construction) that cannot run a chunk at
// a time becomes one whole-prompt chunk: p0 and n arguments, no position
// shift, the reason recorded; any other such graph is still refused.

// CHECK-LABEL: func.func @v41_like
// CHECK-SAME: %{{.*}}: index {onnx.name = "h20.chunk_start"}, %{{.*}}: index {onnx.name = "h20.chunk_tokens"}
// CHECK-SAME: h20.chunked = {dim = 1 : i64, input = 0 : i64, output = "rows", whole = "'onnx.Gather'{{.*}}a Gather that is not the token embedding
// CHECK-NOT: onnx.Add
// CHECK: attn.sparse_attention
func.func @v41_like(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %c1 = arith.constant 1 : index
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %wp = onnx.Weight {name = "table"} : tensor<64x8xf32>
  %x = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %len = tensor.dim %ids, %c1 : tensor<1x?xi64>
  %pos = tensor.empty(%len) : tensor<1x?xi64>
  %p = onnx.Gather(%wp, %pos) {axis = 0 : si64} : (tensor<64x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%p, %shape) : (tensor<1x?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %shape2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %kv = onnx.Reshape(%x, %shape2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %kv, %sink {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %shape3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %shape3) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// Without a sparse attention op nothing vouches for causality: refused.
func.func @position_embedding(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %c1 = arith.constant 1 : index
  %w = onnx.Weight {name = "wpe"} : tensor<64x8xf32>
  %len = tensor.dim %ids, %c1 : tensor<1x?xi64>
  %pos = tensor.empty(%len) : tensor<1x?xi64>
  // expected-error @+1 {{chunked prefill: a Gather that is not the token embedding}}
  %g = onnx.Gather(%w, %pos) {axis = 0 : si64} : (tensor<64x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  return %g : tensor<1x?x8xf32>
}
