// RUN: h20-opt %s --split-input-file --h20-chunked-prefill --verify-diagnostics | FileCheck %s

// One layer's worth of a planned decoder: positions from the prompt length,
// K/V written at 0 and viewed over the prompt, causal attention.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x?xi64>, %[[P0:.*]]: index {onnx.name = "h20.chunk_start"}, %[[N:.*]]: index {onnx.name = "h20.chunk_tokens"})
// CHECK-SAME: h20.chunked = {dim = 1 : i64, input = 0 : i64, output = "rows"}
// Positions: p0 + in-chunk position.
// CHECK: %[[START:.*]] = arith.index_cast %[[P0]] : index to i64
// CHECK: %[[SPLAT:.*]] = tensor.splat %[[START]]
// CHECK: %[[POS:.*]] = onnx.Add(%{{.*}}, %[[SPLAT]])
// CHECK: attn.rope_apply %{{.*}}, %[[POS]]
// K/V at p0; the view covers p0 + chunk positions.
// CHECK: kv.write %{{.*}} into %{{.*}}[layer = 0, kind = 0] at %[[P0]]
// CHECK: %[[LEN:.*]] = arith.addi %{{.*}}, %[[P0]] : index
// CHECK: kv.view %{{.*}}[layer = 0, kind = 0] length %[[LEN]]
// CHECK: attn.attention
// CHECK-NOT: top_left
func.func @layer(%ids: tensor<1x?xi64>) -> tensor<1x?x2x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[1, -1, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %r = onnx.Reshape(%x, %shape) : (tensor<1x?x8xf32>, tensor<4xi64>) -> tensor<1x?x2x4xf32>
  %q = onnx.Transpose(%r) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x?x2x4xf32>) -> tensor<1x2x?x4xf32>
  %len = tensor.dim %ids, %c1 : tensor<1x?xi64>
  %pos0 = tensor.empty(%len) : tensor<1x?xi64>
  %coarse, %fine = attn.rope_table {block = 8 : i64, max_positions = 64 : i64, representation = "two_level", rotary_dim = 4 : i64, theta = 1.000000e+04 : f64} : tensor<2x8x2xf32>, tensor<2x8x2xf32>
  %qr = attn.rope_apply %q, %pos0, %coarse, %fine {block = 8 : i64, interleaved = false, rotary_dim = 4 : i64} : (tensor<1x2x?x4xf32>, tensor<1x?xi64>, tensor<2x8x2xf32>, tensor<2x8x2xf32>) -> tensor<1x2x?x4xf32>
  %cache = kv.alloc() : !kv.cache<1x2x2x64x4xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  %c2 = kv.write %qr into %cache[layer = 0, kind = 0] at %c0 : tensor<1x2x?x4xf32> -> !kv.cache<1x2x2x64x4xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  %k = kv.view %c2[layer = 0, kind = 0] length %len : !kv.cache<1x2x2x64x4xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> -> tensor<1x2x?x4xf32>
  %a = attn.attention %qr, %k, %k {alignment = #attn.causal_alignment<top_left>, causal = true, kv_group = 1 : i64, scale = 5.000000e-01 : f64} : (tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32>) -> tensor<1x2x?x4xf32>
  %o = onnx.Transpose(%a) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x?x4xf32>) -> tensor<1x?x2x4xf32>
  return %o : tensor<1x?x2x4xf32>
}

// -----

// A last-position LM head slices row n - 1 (the last real token).
// CHECK-LABEL: func.func @head
// CHECK-SAME: output = "last"
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[LAST:.*]] = arith.subi %arg2, %[[C1]] : index
// CHECK: tensor.extract_slice %{{.*}}[0, %[[LAST]], 0] [1, 1, 8] [1, 1, 1]
// CHECK-NOT: onnx.Slice
func.func @head(%ids: tensor<1x?xi64>) -> tensor<1x1x16xf32> {
  %e = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %h = onnx.Gather(%e, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %start = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %end = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %last = onnx.Slice(%h, %start, %end, %one) : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x8xf32>
  %w = onnx.Weight {name = "head"} : tensor<8x16xf32>
  %y = onnx.MatMul(%last, %w) : (tensor<1x1x8xf32>, tensor<8x16xf32>) -> tensor<1x1x16xf32>
  return %y : tensor<1x1x16xf32>
}

// -----

// expected-error @+1 {{chunked prefill needs one input, token ids [1, S] with S dynamic}}
func.func @static(%ids: tensor<1x8xi64>) -> tensor<1x8xi64> {
  return %ids : tensor<1x8xi64>
}


// -----

func.func @noncausal(%ids: tensor<1x?xi64>) -> tensor<1x?x2x4xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[1, -1, 2, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %r = onnx.Reshape(%x, %shape) : (tensor<1x?x8xf32>, tensor<4xi64>) -> tensor<1x?x2x4xf32>
  %q = onnx.Transpose(%r) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x?x2x4xf32>) -> tensor<1x2x?x4xf32>
  // expected-error @+1 {{chunked prefill needs causal attention}}
  %a = attn.attention %q, %q, %q {causal = false, kv_group = 1 : i64, scale = 5.000000e-01 : f64} : (tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32>) -> tensor<1x2x?x4xf32>
  %o = onnx.Transpose(%a) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x?x4xf32>) -> tensor<1x?x2x4xf32>
  return %o : tensor<1x?x2x4xf32>
}

// -----

// Mixing tokens outside attention is refused, not silently chunked.
func.func @gram(%ids: tensor<1x?xi64>) -> tensor<1x8x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %t = onnx.Transpose(%x) {perm = array<i64: 0, 2, 1>} : (tensor<1x?x8xf32>) -> tensor<1x8x?xf32>
  // expected-error @+1 {{chunked prefill: a MatMul of two activations mixes tokens}}
  %g = onnx.MatMul(%t, %x) : (tensor<1x8x?xf32>, tensor<1x?x8xf32>) -> tensor<1x8x8xf32>
  return %g : tensor<1x8x8xf32>
}

// -----

func.func @position_embedding(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %c1 = arith.constant 1 : index
  %w = onnx.Weight {name = "wpe"} : tensor<64x8xf32>
  %len = tensor.dim %ids, %c1 : tensor<1x?xi64>
  %pos = tensor.empty(%len) : tensor<1x?xi64>
  // expected-error @+1 {{chunked prefill: a Gather that is not the token embedding}}
  %p = onnx.Gather(%w, %pos) {axis = 0 : si64} : (tensor<64x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  return %p : tensor<1x?x8xf32>
}

// -----

func.func @first_token(%ids: tensor<1x?xi64>) -> tensor<1x1x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{chunked prefill: a Slice along the token axis mixes tokens}}
  %f = onnx.Slice(%x, %s, %e, %a) : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x8xf32>
  return %f : tensor<1x1x8xf32>
}
