// RUN: h20-opt %s --split-input-file --h20-lower-rope --cse | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-lower-rope="max-positions=4096" | FileCheck %s --check-prefix=SMALL

// Two ropes with the same frequencies share one two-level table; no
// attn.rope (hence no per-token sin/cos) is left.
// CHECK-LABEL: func.func @shared
// CHECK: %[[C:.*]], %[[F:.*]] = attn.rope_table {block = 1024 : i64, max_positions = 1048576 : i64, representation = "two_level", rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<2x1024x8xf32>, tensor<2x1024x8xf32>
// CHECK-NOT: attn.rope_table
// CHECK: attn.rope_apply %arg0, %arg2, %[[C]], %[[F]] {block = 1024 : i64, interleaved = false, rotary_dim = 16 : i64}
// CHECK: attn.rope_apply %arg1, %arg2, %[[C]], %[[F]]
// CHECK-NOT: attn.rope %
// SMALL-LABEL: func.func @shared
// SMALL: attn.rope_table {block = 64 : i64, max_positions = 4096 : i64{{.*}}} : tensor<2x64x8xf32>, tensor<2x64x8xf32>
func.func @shared(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32>, %p: tensor<1x?xi64>) -> (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>) {
  %a = attn.rope %q, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<1x8x?x16xf32>, tensor<1x?xi64>) -> tensor<1x8x?x16xf32>
  %b = attn.rope %k, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<1x2x?x16xf32>, tensor<1x?xi64>) -> tensor<1x2x?x16xf32>
  return %a, %b : tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>
}

// -----

// Scaling parameters, partial rotary (32 of 64 channels) and interleaving
// carry over; the table covers rotary_dim / 2 = 16 pairs.
// CHECK-LABEL: func.func @yarn_partial_interleaved
// CHECK: attn.rope_table {attention_factor = 1.000000e+00 : f64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, block = 1024 : i64, factor = 1.600000e+01 : f64, max_positions = 1048576 : i64, original_max_positions = 65536 : i64, representation = "two_level", rotary_dim = 32 : i64, scaling = #attn.rope_scaling<yarn>, theta = 1.000000e+04 : f64} : tensor<2x1024x16xf32>, tensor<2x1024x16xf32>
// CHECK: attn.rope_apply {{.*}} {block = 1024 : i64, interleaved = true, rotary_dim = 32 : i64} : (tensor<1x4x?x64xf32>
func.func @yarn_partial_interleaved(%x: tensor<1x4x?x64xf32>, %p: tensor<1x?xi64>) -> tensor<1x4x?x64xf32> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 32 : i64, interleaved = true,
      scaling = #attn.rope_scaling<yarn>, factor = 16.0 : f64, original_max_positions = 65536 : i64,
      beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, attention_factor = 1.0 : f64}
      : (tensor<1x4x?x64xf32>, tensor<1x?xi64>) -> tensor<1x4x?x64xf32>
  return %y : tensor<1x4x?x64xf32>
}

// -----

// Dynamic NTK depends on the prompt length: the table takes it.
// CHECK-LABEL: func.func @dynamic_ntk
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[S:.*]] = tensor.dim %arg1, %[[C1]] : tensor<1x?xi64>
// CHECK: attn.rope_table %[[S]] {{{.*}}scaling = #attn.rope_scaling<dynamic_ntk>
func.func @dynamic_ntk(%x: tensor<1x4x?x64xf32>, %p: tensor<1x?xi64>) -> tensor<1x4x?x64xf32> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 64 : i64, interleaved = false,
      scaling = #attn.rope_scaling<dynamic_ntk>, factor = 2.0 : f64, original_max_positions = 4096 : i64}
      : (tensor<1x4x?x64xf32>, tensor<1x?xi64>) -> tensor<1x4x?x64xf32>
  return %y : tensor<1x4x?x64xf32>
}
