// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg --verify-diagnostics | FileCheck %s

// Weights become trailing arguments, described in order by h20.weights.
// CHECK-LABEL: func.func @weights
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-SAME: h20.weights = [{file = "m.onnx", length = 48 : i64, name = "w", offset = 16 : i64, shape = array<i64: 4, 3>, type = f32}]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]]
func.func @weights(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = onnx.Weight {name = "w", file = "m.onnx", offset = 16 : i64, length = 48 : i64} : tensor<4x3xf32>
  %y = onnx.MatMul(%x, %w) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Broadcasting: a static 1 dim reads index 0.
// CHECK: #[[BCAST:.*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK: func.func @broadcast_add
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[BCAST]], #{{.*}}]
// CHECK: arith.addf
func.func @broadcast_add(%a: tensor<?x8xf32>, %b: tensor<1x8xf32>) -> tensor<?x8xf32> {
  %y = onnx.Add(%a, %b) : (tensor<?x8xf32>, tensor<1x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// attn.rms_norm: a sum of squares over the last dim, then the scaling.
// CHECK-LABEL: func.func @rms
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: math.rsqrt
func.func @rms(%x: tensor<1x?x16xf32>, %w: tensor<16xf32>) -> tensor<1x?x16xf32> {
  %y = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<1x?x16xf32>, tensor<16xf32>) -> tensor<1x?x16xf32>
  return %y : tensor<1x?x16xf32>
}

// -----

// attn.rope: inverse frequencies are an f64 constant; angles in f64.
// CHECK-LABEL: func.func @rope
// CHECK: arith.constant dense<[1.000000e+00, 1.000000e-01, 1.000000e-02, 1.000000e-03]> : tensor<4xf64>
// CHECK: math.cos {{.*}} : f64
// CHECK: math.sin {{.*}} : f64
func.func @rope(%x: tensor<1x2x?x8xf32>, %p: tensor<1x?xi64>) -> tensor<1x2x?x8xf32> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 8 : i64, interleaved = false} : (tensor<1x2x?x8xf32>, tensor<1x?xi64>) -> tensor<1x2x?x8xf32>
  return %y : tensor<1x2x?x8xf32>
}

// -----

// attn.attention: GQA reads KV head h floordiv group; causal and window
// become index comparisons; a fully masked row yields 0 (select on -inf max).
// CHECK: #[[KV:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d3, d4)>
// CHECK: func.func @attention
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[KV]], #{{.*}}]
// CHECK: arith.cmpi sle
// CHECK: arith.cmpi sgt
// CHECK: arith.cmpf oeq
func.func @attention(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32> {
  %y = attn.attention %q, %k, %v {scale = 0.25 : f64, causal = true, window = 4 : i64, kv_group = 4 : i64}
      : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  return %y : tensor<1x8x?x16xf32>
}

// -----

// attn.attention_scores at the probabilities stage: the masked scores, row
// maxima and denominators, then exp(s - m) / den with 0 for rows whose
// denominator is 0 (no visible key), rounded to f16.
// CHECK-LABEL: func.func @scores_probabilities
// CHECK: arith.cmpi sle
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.cmpf ogt
// CHECK: arith.divf
// CHECK: arith.truncf {{.*}} : f32 to f16
func.func @scores_probabilities(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x8x16xf16>) -> tensor<1x4x8x8xf16> {
  %s = attn.attention_scores %q, %k {stage = #attn.score_stage<probabilities>, scale = 0.25 : f64, causal = true, kv_group = 2 : i64}
      : (tensor<1x4x8x16xf16>, tensor<1x2x8x16xf16>) -> tensor<1x4x8x8xf16>
  return %s : tensor<1x4x8x8xf16>
}

// -----

// At the softcapped stage only scale and softcap apply: no mask, no -inf.
// CHECK-LABEL: func.func @scores_softcapped
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK-NOT: arith.cmpi
// CHECK: return
func.func @scores_softcapped(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %m: tensor<8x8xf32>) -> tensor<1x4x8x8xf32> {
  %s = attn.attention_scores %q, %k mask(%m : tensor<8x8xf32>) {stage = #attn.score_stage<softcapped>, scale = 0.25 : f64, causal = true, softcap = 2.0 : f64, kv_group = 1 : i64}
      : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x8xf32>
  return %s : tensor<1x4x8x8xf32>
}

// -----

// An op without a CPU lowering is an error naming it.
func.func @unsupported(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{onnx.Tile: has no lowering to linalg yet (no target supports it)}}
  %y = onnx.Tile(%x, %r) : (tensor<4xf32>, tensor<1xi64>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
