// RUN: h20-opt %s --split-input-file --h20-chunked-prefill --verify-diagnostics | FileCheck %s
// Chunked prefill decides per token from axes (PerTokenOps): the token
// axis is the dynamic one.

// A reduction over the hidden axis (a 16-bit export's RMSNorm that was not
// raised, Casts around it) acts within each token: chunked.
// CHECK-LABEL: func.func @reduce_hidden
// CHECK-SAME: h20.chunked
func.func @reduce_hidden(%ids: tensor<1x?xi64>) -> tensor<1x?x1xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xbf16>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xbf16>, tensor<1x?xi64>) -> tensor<1x?x8xbf16>
  %f = onnx.Cast(%x) {to = 1 : si64} : (tensor<1x?x8xbf16>) -> tensor<1x?x8xf32>
  %axes = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %m = onnx.ReduceMean(%f, %axes) {keepdims = 1 : si64} : (tensor<1x?x8xf32>, tensor<1xi64>) -> tensor<1x?x1xf32>
  return %m : tensor<1x?x1xf32>
}

// -----

// The same reduction over the token axis mixes tokens.
func.func @reduce_tokens(%ids: tensor<1x?xi64>) -> tensor<1x1x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %axes = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{chunked prefill: a reduction along the token axis mixes tokens}}
  %m = onnx.ReduceMean(%x, %axes) {keepdims = 1 : si64} : (tensor<1x?x8xf32>, tensor<1xi64>) -> tensor<1x1x8xf32>
  return %m : tensor<1x1x8xf32>
}

// -----

// A fused QKV split by Slices of the hidden axis (Phi-3) and a MatMul by a
// transposed weight are per token.
// CHECK-LABEL: func.func @slice_hidden_transposed_weight
// CHECK-SAME: h20.chunked
func.func @slice_hidden_transposed_weight(%ids: tensor<1x?xi64>) -> tensor<1x?x4xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %q = onnx.Slice(%x, %s, %e, %a) : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?x4xf32>
  %p = onnx.Weight {name = "proj"} : tensor<4x4xf32>
  %pt = onnx.Transpose(%p) {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = onnx.MatMul(%q, %pt) : (tensor<1x?x4xf32>, tensor<4x4xf32>) -> tensor<1x?x4xf32>
  return %y : tensor<1x?x4xf32>
}

// -----

// A Slice along the tokens cuts the prompt.
func.func @slice_tokens(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{chunked prefill: a Slice along the token axis mixes tokens}}
  %y = onnx.Slice(%x, %s, %e, %a) : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

// Position embeddings from Range(0, S) restart in every chunk: refused at
// the table lookup, not silently chunked.
func.func @position_embedding(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Shape(%ids) {start = 1 : si64, end = 2 : si64} : (tensor<1x?xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%shape) : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %table = onnx.Weight {name = "wpe"} : tensor<64x8xf32>
  // expected-error @+1 {{chunked prefill: a Gather that is not the token embedding}}
  %pe = onnx.Gather(%table, %pos) {axis = 0 : si64} : (tensor<64x8xf32>, tensor<?xi64>) -> tensor<?x8xf32>
  %y = onnx.Add(%x, %pe) : (tensor<1x?x8xf32>, tensor<?x8xf32>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

// Broadcasting [1, S, 1] against [1, 1, S] pairs tokens.
func.func @token_pairs(%ids: tensor<1x?xi64>) -> tensor<1x?x?xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x1xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x1xf32>, tensor<1x?xi64>) -> tensor<1x?x1xf32>
  %perm = onnx.Transpose(%x) {perm = array<i64: 0, 2, 1>} : (tensor<1x?x1xf32>) -> tensor<1x1x?xf32>
  // expected-error @+1 {{chunked prefill: an elementwise op whose result has two token axes pairs tokens}}
  %y = onnx.Mul(%x, %perm) : (tensor<1x?x1xf32>, tensor<1x1x?xf32>) -> tensor<1x?x?xf32>
  return %y : tensor<1x?x?xf32>
}

// -----

// Positions from Range scaled and added to activations (a RoPE or bias
// computed in the graph and not raised) are refused where they meet.
func.func @positions_meet_activations(%ids: tensor<1x?xi64>) -> tensor<1x?x1xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x1xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x1xf32>, tensor<1x?xi64>) -> tensor<1x?x1xf32>
  %shape = onnx.Shape(%ids) {start = 1 : si64, end = 2 : si64} : (tensor<1x?xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%shape) : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pf = onnx.Cast(%pos) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
  %axes = onnx.Constant() {value = dense<[0, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %p3 = onnx.Unsqueeze(%pf, %axes) : (tensor<?xf32>, tensor<2xi64>) -> tensor<1x?x1xf32>
  // expected-error @+1 {{chunked prefill: it combines activations with values computed from the prompt's length}}
  %y = onnx.Add(%x, %p3) : (tensor<1x?x1xf32>, tensor<1x?x1xf32>) -> tensor<1x?x1xf32>
  return %y : tensor<1x?x1xf32>
}

// -----

// DeepSeek-V4.1's mHC stream mix: a batched MatMul of two activations
// whose batch axis is the token axis ([S, 4, 4] x [S, 4, 8]) is one small
// product per token; its routed experts act per token: chunked.
// CHECK-LABEL: func.func @token_batched_matmul_and_experts
// CHECK-SAME: h20.chunked
func.func @token_batched_matmul_and_experts(%ids: tensor<1x?xi64>) -> tensor<1x?x32xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x32xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x32xf32>, tensor<1x?xi64>) -> tensor<1x?x32xf32>
  %s1 = onnx.Constant() {value = dense<[-1, 32]> : tensor<2xi64>} : () -> tensor<2xi64>
  %rows = onnx.Reshape(%x, %s1) : (tensor<1x?x32xf32>, tensor<2xi64>) -> tensor<?x32xf32>
  %r = onnx.Weight {name = "router"} : tensor<32x4xf32>
  %b = onnx.Weight {name = "bias"} : tensor<4xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<4x32x8xf32>
  %w3 = onnx.Weight {name = "w3"} : tensor<4x32x8xf32>
  %w2 = onnx.Weight {name = "w2"} : tensor<4x8x32xf32>
  %e = onnx.h20.RoutedExperts(%rows, %r, %b, %w1, %w3, %w2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x32xf32>, tensor<32x4xf32>, tensor<4xf32>, tensor<4x32x8xf32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<?x32xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 4, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %streams = onnx.Reshape(%e, %s2) : (tensor<?x32xf32>, tensor<3xi64>) -> tensor<?x4x8xf32>
  %s3 = onnx.Constant() {value = dense<[-1, 4, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %b0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %b16 = onnx.Constant() {value = dense<16> : tensor<1xi64>} : () -> tensor<1xi64>
  %b2 = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %mixw = onnx.Slice(%x, %b0, %b16, %b2) : (tensor<1x?x32xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?x16xf32>
  %mix = onnx.Reshape(%mixw, %s3) : (tensor<1x?x16xf32>, tensor<3xi64>) -> tensor<?x4x4xf32>
  %y = onnx.MatMul(%mix, %streams) : (tensor<?x4x4xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%y, %s4) : (tensor<?x4x8xf32>, tensor<3xi64>) -> tensor<1x?x32xf32>
  return %o : tensor<1x?x32xf32>
}

// -----

// DeepSeek-V4.1's compressor groups ratio = 4 tokens by a Reshape [S, 8]
// -> [S/4, 4, 8] and pools each group: a chunk must hold whole groups, so
// without a chunk size (a multiple of 4) the Reshape is refused.
// (chunked-prefill-sparse-compressed.mlir: with one, it is per token.)
func.func @group_reshape(%ids: tensor<1x?xi64>) -> tensor<?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s = onnx.Constant() {value = dense<[-1, 4, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  // expected-error @+1 {{chunked prefill: a Reshape that groups rows of 4 tokens needs a chunk size that is a multiple of 4; this graph cannot run a chunk at a time}}
  %g = onnx.Reshape(%x, %s) : (tensor<1x?x8xf32>, tensor<3xi64>) -> tensor<?x4x8xf32>
  %axes = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %p = onnx.ReduceSum(%g, %axes) {keepdims = 0 : si64} : (tensor<?x4x8xf32>, tensor<1xi64>) -> tensor<?x8xf32>
  return %p : tensor<?x8xf32>
}

// -----

// A batched MatMul of two activations whose token axes differ pairs
// tokens.
func.func @token_matmul(%ids: tensor<1x?xi64>) -> tensor<1x?x?xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %t = onnx.Transpose(%x) {perm = array<i64: 0, 2, 1>} : (tensor<1x?x8xf32>) -> tensor<1x8x?xf32>
  // expected-error @+1 {{chunked prefill: a MatMul of two activations mixes tokens}}
  %y = onnx.MatMul(%x, %t) : (tensor<1x?x8xf32>, tensor<1x8x?xf32>) -> tensor<1x?x?xf32>
  return %y : tensor<1x?x?xf32>
}

// -----

// A routed experts' body as the CPU target imports it: each token's top-k
// scores gathered and its picks scattered along the expert axis
// (GatherElements / ScatterElements on a static axis, every operand rows
// of the same tokens) act within each token: chunked.
// CHECK-LABEL: func.func @pick_experts_per_token
// CHECK-SAME: h20.chunked
func.func @pick_experts_per_token(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %i = onnx.TopK(%x, %k) {axis = -1 : si64} : (tensor<1x?x8xf32>, tensor<1xi64>) -> (tensor<1x?x2xf32>, tensor<1x?x2xi64>)
  %g = onnx.GatherElements(%x, %i) {axis = 2 : si64} : (tensor<1x?x8xf32>, tensor<1x?x2xi64>) -> tensor<1x?x2xf32>
  %s = onnx.ScatterElements(%x, %i, %g) {axis = -1 : si64} : (tensor<1x?x8xf32>, tensor<1x?x2xi64>, tensor<1x?x2xf32>) -> tensor<1x?x8xf32>
  return %s : tensor<1x?x8xf32>
}

// -----

// GatherElements along the token axis picks other tokens' elements.
func.func @gather_elements_tokens(%ids: tensor<1x?xi64>) -> tensor<1x?x2xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %k = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %v, %i = onnx.TopK(%x, %k) {axis = -1 : si64} : (tensor<1x?x8xf32>, tensor<1xi64>) -> (tensor<1x?x2xf32>, tensor<1x?x2xi64>)
  // expected-error @+1 {{chunked prefill: a GatherElements along the token axis mixes tokens}}
  %g = onnx.GatherElements(%x, %i) {axis = 1 : si64} : (tensor<1x?x8xf32>, tensor<1x?x2xi64>) -> tensor<1x?x2xf32>
  return %g : tensor<1x?x2xf32>
}

// -----

// Constant indices [1, 1, 2] pick from one row only: not rows of the tokens.
func.func @scatter_elements_fixed_rows(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %i = onnx.Constant() {value = dense<[[[0, 3]]]> : tensor<1x1x2xi64>} : () -> tensor<1x1x2xi64>
  %u = onnx.Constant() {value = dense<1.0> : tensor<1x1x2xf32>} : () -> tensor<1x1x2xf32>
  // expected-error @+1 {{chunked prefill: a ScatterElements whose operands are not rows of the same tokens}}
  %s = onnx.ScatterElements(%x, %i, %u) {axis = 2 : si64} : (tensor<1x?x8xf32>, tensor<1x1x2xi64>, tensor<1x1x2xf32>) -> tensor<1x?x8xf32>
  return %s : tensor<1x?x8xf32>
}
