// RUN: h20-opt %s --split-input-file --h20-raise-attn --verify-diagnostics | FileCheck %s

// RMSNormalization-23 (stash_type 1: fp32 statistics) -> attn.rms_norm.
// CHECK-LABEL: func.func @rms
// CHECK: attn.rms_norm %arg0, %arg1 {axis = 1 : i64, compute_type = f32, epsilon = 1.000000e-05 : f64} : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
func.func @rms(%x: tensor<4x16xbf16>, %w: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %y = onnx.RMSNormalization(%x, %w) {epsilon = 1.0e-5 : f32} : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

// Attention-23 without a mask and is_causal = 1: causal attribute; no
// repeat, MHA (kv_group 1); default scale 1/sqrt(16).
// CHECK-LABEL: func.func @attention_is_causal
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = true, kv_group = 1 : i64, scale = 2.500000e-01 : f64}
func.func @attention_is_causal(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %y = onnx.Attention(%q, %k, %v) {is_causal = 1 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Native GQA in Attention-23 (4 query heads over 2 KV heads) and a softcap.
// CHECK-LABEL: func.func @attention_gqa_softcap
// CHECK: attn.attention %arg0, %arg1, %arg2 {causal = false, kv_group = 2 : i64, scale = 1.250000e-01 : f64, softcap = 3.000000e+01 : f64}
func.func @attention_gqa_softcap(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %y = onnx.Attention(%q, %k, %v) {scale = 0.125 : f32, softcap = 30.0 : f32} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Attention with a past KV cache: keys and values are past ++ new (the
// present outputs), and is_causal is anchored bottom-right (queries are the
// last 8 of 16 positions) — the default alignment, hence not printed.
// CHECK-LABEL: func.func @attention_with_past
// CHECK: %[[K:.*]] = onnx.Concat(%arg1, %arg0) {axis = 2 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x16x16xf32>
// CHECK: %[[V:.*]] = onnx.Concat(%arg1, %arg0) {axis = 2 : si64}
// CHECK: %[[Y:.*]] = attn.attention %arg0, %[[K]], %[[V]] {causal = true, kv_group = 1 : i64, scale = 2.500000e-01 : f64}
// CHECK: return %[[Y]], %[[K]]
func.func @attention_with_past(%q: tensor<1x4x8x16xf32>, %pk: tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x16x16xf32>) {
  %n = onnx.NoValue
  %y:2 = onnx.Attention(%q, %q, %q, %n, %pk, %pk) {is_causal = 1 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, none, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x16x16xf32>)
  return %y#0, %y#1 : tensor<1x4x8x16xf32>, tensor<1x4x16x16xf32>
}

// -----

// A mask without attn.proven_mask stays an operand.
// CHECK-LABEL: func.func @unproven_mask
// CHECK: attn.attention %arg0, %arg0, %arg0 mask(%arg1 : tensor<8x8xi1>) {causal = false
func.func @unproven_mask(%q: tensor<1x4x8x16xf32>, %m: tensor<8x8xi1>) -> tensor<1x4x8x16xf32> {
  %y = onnx.Attention(%q, %q, %q, %m) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<8x8xi1>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Attention-25 local window: left_window_size 2 with is_causal keeps keys
// i-2..i, a window of 3 tokens counting the current one.
// CHECK-LABEL: func.func @left_window
// CHECK: attn.attention %arg0, %arg0, %arg0 {causal = true, kv_group = 1 : i64, scale = 2.500000e-01 : f64, window = 3 : i64}
func.func @left_window(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %y = onnx.Attention(%q, %q, %q) {is_causal = 1 : si64, left_window_size = 2 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// A window reaching right of the query (bidirectional, i-1 <= j <= i+2)
// has no attribute form: an explicit boolean mask from Range and
// comparisons, [1, 1, S_q, S_kv].
// CHECK-LABEL: func.func @bidirectional_window
// CHECK: %[[I:.*]] = onnx.Unsqueeze({{.*}}) : (tensor<8xi64>, tensor<1xi64>) -> tensor<8x1xi64>
// CHECK: %[[J:.*]] = onnx.Range
// CHECK: %[[HI:.*]] = onnx.Add(%[[I]], %{{.*}}) : (tensor<8x1xi64>, tensor<i64>) -> tensor<8x1xi64>
// CHECK: %[[R:.*]] = onnx.LessOrEqual(%[[J]], %[[HI]]) : (tensor<8xi64>, tensor<8x1xi64>) -> tensor<8x8xi1>
// CHECK: %[[LO:.*]] = onnx.Sub(%[[I]], %{{.*}}) : (tensor<8x1xi64>, tensor<i64>) -> tensor<8x1xi64>
// CHECK: %[[L:.*]] = onnx.GreaterOrEqual(%[[J]], %[[LO]])
// CHECK: %[[V:.*]] = onnx.And(%[[R]], %[[L]])
// CHECK: %[[M:.*]] = onnx.Unsqueeze(%[[V]], %{{.*}}) : (tensor<8x8xi1>, tensor<2xi64>) -> tensor<1x1x8x8xi1>
// CHECK: attn.attention %arg0, %arg0, %arg0 mask(%[[M]] : tensor<1x1x8x8xi1>) {causal = false
func.func @bidirectional_window(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %y = onnx.Attention(%q, %q, %q) {left_window_size = 1 : si64, right_window_size = 2 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %y : tensor<1x4x8x16xf32>
}

// -----

// Attention-24 nonpad_kv_seqlen without a causal anchor: keys j >= nonpad[b]
// are padding, a [B, 1, 1, S_kv] mask "j < nonpad[b]" (data, so an operand).
// CHECK-LABEL: func.func @nonpad
// CHECK: %[[J:.*]] = onnx.Range
// CHECK: %[[L:.*]] = onnx.Reshape(%arg1
// CHECK: %[[M:.*]] = onnx.Less(%[[J]], %[[L]]) : (tensor<8xi64>, tensor<2x1x1x1xi64>) -> tensor<2x1x1x8xi1>
// CHECK: attn.attention %arg0, %arg0, %arg0 mask(%[[M]] : tensor<2x1x1x8xi1>) {causal = false
func.func @nonpad(%q: tensor<2x4x8x16xf32>, %n: tensor<2xi64>) -> tensor<2x4x8x16xf32> {
  %none = onnx.NoValue
  %y = onnx.Attention(%q, %q, %q, %none, %none, %none, %n) : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, none, none, none, tensor<2xi64>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}

// -----

// With is_causal, each batch's queries sit at its own end of the valid keys,
// pos(i) = i + nonpad[b] - S_q: an explicit [B, 1, S_q, S_kv] mask, then
// restricted to the valid keys j < nonpad[b].
// CHECK-LABEL: func.func @nonpad_causal
// CHECK: %[[E:.*]] = onnx.Reshape(%arg1, %{{.*}}) : (tensor<2xi64>, tensor<3xi64>) -> tensor<2x1x1xi64>
// CHECK: %[[O:.*]] = onnx.Sub(%[[E]], %{{.*}}) : (tensor<2x1x1xi64>, tensor<i64>) -> tensor<2x1x1xi64>
// CHECK: %[[P:.*]] = onnx.Add(%{{.*}}, %[[O]]) : (tensor<8x1xi64>, tensor<2x1x1xi64>) -> tensor<2x8x1xi64>
// CHECK: %[[C:.*]] = onnx.LessOrEqual(%{{.*}}, %[[P]]) : (tensor<8xi64>, tensor<2x8x1xi64>) -> tensor<2x8x8xi1>
// CHECK: %[[V:.*]] = onnx.Unsqueeze(%[[C]], %{{.*}}) : (tensor<2x8x8xi1>, tensor<1xi64>) -> tensor<2x1x8x8xi1>
// CHECK: %[[N:.*]] = onnx.Less
// CHECK: %[[M:.*]] = onnx.And(%[[N]], %[[V]]) : (tensor<2x1x1x8xi1>, tensor<2x1x8x8xi1>) -> tensor<2x1x8x8xi1>
// CHECK: attn.attention %arg0, %arg0, %arg0 mask(%[[M]] : tensor<2x1x8x8xi1>) {causal = false
func.func @nonpad_causal(%q: tensor<2x4x8x16xf32>, %n: tensor<2xi64>) -> tensor<2x4x8x16xf32> {
  %none = onnx.NoValue
  %y = onnx.Attention(%q, %q, %q, %none, %none, %none, %n) {is_causal = 1 : si64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, none, none, none, tensor<2xi64>) -> tensor<2x4x8x16xf32>
  return %y : tensor<2x4x8x16xf32>
}

// -----

// A past of 8 with 2 new keys for 4 queries: ONNX places query i at 8 + i,
// not at the bottom-right anchor S_kv - S_q = 6: an explicit mask whose
// offset is the past's length.
// CHECK-LABEL: func.func @past_fewer_new_keys
// CHECK: %[[K:.*]] = onnx.Concat(%arg2, %arg1) {axis = 2 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x2x16xf32>) -> tensor<1x4x10x16xf32>
// CHECK: %[[PL:.*]] = onnx.Shape(%arg2) {end = 3 : si64, start = 2 : si64}
// CHECK: onnx.LessOrEqual({{.*}}) : (tensor<10xi64>, tensor<4x1xi64>) -> tensor<4x10xi1>
// CHECK: attn.attention %arg0, %[[K]], %{{.*}} mask(%{{.*}} : tensor<1x1x4x10xi1>) {causal = false
func.func @past_fewer_new_keys(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x2x16xf32>, %pk: tensor<1x4x8x16xf32>) -> tensor<1x4x4x16xf32> {
  %n = onnx.NoValue
  %y = onnx.Attention(%q, %k, %k, %n, %pk, %pk) {is_causal = 1 : si64} : (tensor<1x4x4x16xf32>, tensor<1x4x2x16xf32>, tensor<1x4x2x16xf32>, none, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x4x16xf32>
  return %y : tensor<1x4x4x16xf32>
}

// -----

// qk_matmul_output (mode 2: scores after softcap and mask) becomes an
// attn.attention_scores with the attention's operands and visibility; a
// mask of 6 keys for 8 is padded with -inf.
// CHECK-LABEL: func.func @qk_output
// CHECK: %[[PAD:.*]] = onnx.Constant() {value = dense<0xFF800000> : tensor<8x2xf32>}
// CHECK: %[[M:.*]] = onnx.Concat(%arg1, %[[PAD]]) {axis = 1 : si64} : (tensor<8x6xf32>, tensor<8x2xf32>) -> tensor<8x8xf32>
// CHECK: %[[Y:.*]] = attn.attention %arg0, %arg0, %arg0 mask(%[[M]] : tensor<8x8xf32>) {causal = true, kv_group = 1 : i64, scale = 2.500000e-01 : f64, softcap = 2.000000e+00 : f64}
// CHECK: %[[S:.*]] = attn.attention_scores %arg0, %arg0 mask(%[[M]] : tensor<8x8xf32>) {causal = true, kv_group = 1 : i64, scale = 2.500000e-01 : f64, softcap = 2.000000e+00 : f64, stage = #attn.score_stage<masked>}
// CHECK: return %[[Y]], %[[S]]
func.func @qk_output(%q: tensor<1x4x8x16xf32>, %m: tensor<8x6xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>) {
  %n = onnx.NoValue
  %y:4 = onnx.Attention(%q, %q, %q, %m) {is_causal = 1 : si64, qk_matmul_output_mode = 2 : si64, softcap = 2.0 : f32} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<8x6xf32>) -> (tensor<1x4x8x16xf32>, tensor<*xf32>, tensor<*xf32>, tensor<1x4x8x8xf32>)
  return %y#0, %y#3 : tensor<1x4x8x16xf32>, tensor<1x4x8x8xf32>
}

// -----

// present_key / present_value without a past are the new K and V.
// CHECK-LABEL: func.func @present_without_past
// CHECK: %[[Y:.*]] = attn.attention %arg0, %arg1, %arg1
// CHECK: return %[[Y]], %arg1
func.func @present_without_past(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) {
  %y:2 = onnx.Attention(%q, %k, %k) {is_causal = 1 : si64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>)
  return %y#0, %y#1 : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
}

// -----

// A mask whose key dim is not provably the keys' (another dynamic size) is
// not indexed blindly: the op is kept, with a warning saying why.
// CHECK-LABEL: func.func @mask_key_dim_unproven
// CHECK: onnx.Attention
func.func @mask_key_dim_unproven(%q: tensor<1x4x?x16xf32>, %k: tensor<1x4x?x16xf32>, %m: tensor<?x?xf32>) -> tensor<1x4x?x16xf32> {
  // expected-warning @+1 {{Attention not raised: attn_mask dim 0 is neither 1 nor the query length S_q (not provably equal)}}
  %y = onnx.Attention(%q, %k, %k, %m) : (tensor<1x4x?x16xf32>, tensor<1x4x?x16xf32>, tensor<1x4x?x16xf32>, tensor<?x?xf32>) -> tensor<1x4x?x16xf32>
  return %y : tensor<1x4x?x16xf32>
}
