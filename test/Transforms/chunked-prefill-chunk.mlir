// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-chunked-prefill="whole-prompt-fallback=true chunk=16 max-positions=64" | FileCheck %s
// RUN: not h20-opt %s --split-input-file --h20-chunked-prefill="whole-prompt-fallback=true chunk=16" 2>&1 | FileCheck %s --check-prefix=NOMAX
// RUN: h20-opt %s --split-input-file --h20-chunked-prefill="whole-prompt-fallback=true chunk=16 max-positions=64" 2>&1 >/dev/null | FileCheck %s --check-prefix=ALL
// The chunk size the target chose is recorded in h20.chunked (`chunk`),
// so later stages read it from the IR; a whole-prompt graph's one chunk is
// max-positions tokens, with a warning, and needs max-positions.

// A chunkable graph records the chosen chunk.
// CHECK-LABEL: func.func @embed
// CHECK-SAME: h20.chunked = {capacity = 64 : i64, chunk = 16 : i64, dim = 1 : i64, input = 0 : i64, output = "rows"}
func.func @embed(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  return %x : tensor<1x?x8xf32>
}

// -----

// A whole-prompt graph: one chunk of max-positions tokens, and a warning
// that names every op keeping it from running a chunk at a time (the
// sparse attention reads the position-embedded query, so it is one too).
// ALL: runs the whole prompt as one chunk of 64 tokens (--max-positions), as it cannot run a chunk at a time: 'onnx.Gather': a Gather that is not the token embedding {{.*}}; all 2 ops that block chunking:
// ALL-NEXT: 1 x 'onnx.Gather': a Gather that is not the token embedding
// ALL-NEXT: 1 x 'attn.sparse_attention': it combines activations with values computed from the prompt's length
// CHECK-LABEL: func.func @v41_like
// CHECK-SAME: h20.chunked = {chunk = 64 : i64, dim = 1 : i64
// NOMAX: error: chunked prefill: a whole-prompt chunk needs max-positions
// expected-warning @+1 {{runs the whole prompt as one chunk of 64 tokens}}
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
