// RUN: h20-opt %s --split-input-file --h20-lower-rope=max-positions=64 --h20-lower-to-linalg | FileCheck %s

// Non-interleaved RoPE over the whole head (rotary_dim = D = 8): cos and
// sin per (batch, position, pair) in one generic of two results [1, S, 4]
// (the two-level table gathers live here, once for all heads), then the
// rotation over [B, H, S, 2, 4] with affine reads only: the channel
// t * 4 + j, its partner (1 - t) * 4 + j, the tables at (b, s, j) and the
// sign (-1, +1) at t. No tensor.extract of the input.
// CHECK-DAG: #[[$CH:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3 * 4 + d4)>
// CHECK-DAG: #[[$PARTNER:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, (-d3 + 1) * 4 + d4)>
// CHECK-DAG: #[[$TAB:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>
// CHECK-DAG: #[[$SIGN:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d3)>
// CHECK-LABEL: func.func @half_split
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x?x8xbf16>, %[[P:.*]]: tensor<1x?xi64>)
// CHECK: %[[T:.*]]:2 = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[P]] : tensor<1x?xi64>)
// CHECK: tensor.extract
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK: %[[S:.*]] = arith.constant dense<[-1.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$CH]], #[[$PARTNER]], #[[$TAB]], #[[$TAB]], #[[$SIGN]], #[[$CH]]]
// CHECK-SAME: ins(%[[X]], %[[X]], %[[T]]#0, %[[T]]#1, %[[S]] :
// CHECK-NEXT: ^bb0(%[[XC:[^:]*]]: bf16, %[[XO:[^:]*]]: bf16, %[[COS:[^:]*]]: f32, %[[SIN:[^:]*]]: f32, %[[SG:[^:]*]]: f32, %{{[^:]*}}: bf16):
// CHECK-NEXT: %[[C:.*]] = arith.extf %[[XC]] : bf16 to f32
// CHECK-NEXT: %[[O:.*]] = arith.extf %[[XO]] : bf16 to f32
// CHECK-NEXT: %[[XCOS:.*]] = arith.mulf %[[C]], %[[COS]] : f32
// CHECK-NEXT: %[[SO:.*]] = arith.mulf %[[SG]], %[[O]] : f32
// CHECK-NEXT: %[[OSIN:.*]] = arith.mulf %[[SO]], %[[SIN]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[XCOS]], %[[OSIN]] : f32
// CHECK-NEXT: %[[R16:.*]] = arith.truncf %[[R]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R16]] : bf16
func.func @half_split(%x: tensor<1x2x?x8xbf16>, %p: tensor<1x?xi64>) -> tensor<1x2x?x8xbf16> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 8 : i64, interleaved = false} : (tensor<1x2x?x8xbf16>, tensor<1x?xi64>) -> tensor<1x2x?x8xbf16>
  return %y : tensor<1x2x?x8xbf16>
}

// -----

// Positions [1, S] against a dynamic batch broadcast: the tables are
// computed once ([1, S, 4]) and read at batch 0 for every b.
// CHECK-DAG: #[[$TAB0:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (0, d2, d4)>
// CHECK-LABEL: func.func @broadcast_positions
// CHECK: linalg.generic {{.*}}ins(%{{.*}} : tensor<1x?xi64>) outs(%{{.*}}, %{{.*}} : tensor<1x?x4xf32>, tensor<1x?x4xf32>)
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[$TAB0]], #[[$TAB0]], #{{.*}}, #{{.*}}]
func.func @broadcast_positions(%x: tensor<?x2x?x8xbf16>, %p: tensor<1x?xi64>) -> tensor<?x2x?x8xbf16> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 8 : i64, interleaved = false} : (tensor<?x2x?x8xbf16>, tensor<1x?xi64>) -> tensor<?x2x?x8xbf16>
  return %y : tensor<?x2x?x8xbf16>
}

// -----

// Interleaved pairs (2i, 2i + 1) keep the gather form: one generic over
// [B, H, S, D] reading each element's partner with tensor.extract.
// CHECK-LABEL: func.func @interleaved
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK: tensor.extract %arg0
// CHECK-NOT: linalg.generic
func.func @interleaved(%x: tensor<1x2x?x8xbf16>, %p: tensor<1x?xi64>) -> tensor<1x2x?x8xbf16> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 8 : i64, interleaved = true} : (tensor<1x2x?x8xbf16>, tensor<1x?xi64>) -> tensor<1x2x?x8xbf16>
  return %y : tensor<1x2x?x8xbf16>
}

// -----

// Partial rotary (4 of 8 channels; the rest are copied) keeps it too.
// CHECK-LABEL: func.func @partial
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK: tensor.extract %arg0
// CHECK-NOT: linalg.generic
func.func @partial(%x: tensor<1x2x?x8xbf16>, %p: tensor<1x?xi64>) -> tensor<1x2x?x8xbf16> {
  %y = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 4 : i64, interleaved = false} : (tensor<1x2x?x8xbf16>, tensor<1x?xi64>) -> tensor<1x2x?x8xbf16>
  return %y : tensor<1x2x?x8xbf16>
}
