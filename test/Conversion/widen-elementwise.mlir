// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-widen-elementwise))' | FileCheck %s

// SiLU(g) * u in bf16 (the fused MLP activation): computed in f32 from the
// two extended inputs and the extended constant, rounded once at the yield.
// CHECK-LABEL: func.func @silu_mul
// CHECK: ^bb0(%[[G:.*]]: bf16, %[[U:.*]]: bf16, %{{.*}}: bf16):
// CHECK-DAG: %[[UW:.*]] = arith.extf %[[U]] : bf16 to f32
// CHECK-DAG: %[[GW:.*]] = arith.extf %[[G]] : bf16 to f32
// CHECK: arith.negf %[[GW]] : f32
// CHECK: math.exp %{{.*}} : f32
// CHECK: arith.addf %{{.*}} : f32
// CHECK: arith.divf %{{.*}} : f32
// CHECK: arith.mulf %[[GW]], %{{.*}} : f32
// CHECK: %[[P:.*]] = arith.mulf %{{.*}}, %[[UW]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[P]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R]] : bf16
// CHECK-NOT: arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @silu_mul(%g: tensor<4x8xbf16>, %u: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %one = arith.constant 1.0 : bf16
  %e = tensor.empty() : tensor<4x8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<4x8xbf16>, tensor<4x8xbf16>) outs(%e : tensor<4x8xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %n = arith.negf %a : bf16
    %x = math.exp %n : bf16
    %d = arith.addf %x, %one : bf16
    %s = arith.divf %one, %d : bf16
    %m = arith.mulf %a, %s : bf16
    %p = arith.mulf %m, %b : bf16
    linalg.yield %p : bf16
  } -> tensor<4x8xbf16>
  return %r : tensor<4x8xbf16>
}

// -----

// The graph's own roundings stay: an explicit truncf (a Cast to bf16) is
// kept, and an extf of a value held in f32 reads it unrounded. A cmpf on
// f16 compares in f32; integer math is untouched.
// CHECK-LABEL: func.func @casts_and_compares
// CHECK: %[[XW:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: %[[S:.*]] = arith.addf %[[XW]], %[[XW]] : f32
// CHECK: arith.cmpf ogt, %[[S]], %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.addi
#id1 = affine_map<(d0) -> (d0)>
func.func @casts_and_compares(%x: tensor<8xf16>, %f: tensor<8xf32>, %i: tensor<8xi32>)
    -> (tensor<8xi1>, tensor<8xbf16>, tensor<8xi32>) {
  %e1 = tensor.empty() : tensor<8xi1>
  %e2 = tensor.empty() : tensor<8xbf16>
  %e3 = tensor.empty() : tensor<8xi32>
  %r:3 = linalg.generic {indexing_maps = [#id1, #id1, #id1, #id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%x, %f, %i : tensor<8xf16>, tensor<8xf32>, tensor<8xi32>) outs(%e1, %e2, %e3 : tensor<8xi1>, tensor<8xbf16>, tensor<8xi32>) {
  ^bb0(%a: f16, %b: f32, %c: i32, %o1: i1, %o2: bf16, %o3: i32):
    %s = arith.addf %a, %a : f16
    %w = arith.extf %s : f16 to f32
    %gt = arith.cmpf ogt, %w, %b : f32
    %t = arith.truncf %b : f32 to bf16
    %k = arith.addi %c, %c : i32
    linalg.yield %gt, %t, %k : i1, bf16, i32
  } -> (tensor<8xi1>, tensor<8xbf16>, tensor<8xi32>)
  return %r#0, %r#1, %r#2 : tensor<8xi1>, tensor<8xbf16>, tensor<8xi32>
}

// -----

// A reduction keeps its 16-bit body (the row-reduction kernels match it).
// CHECK-LABEL: func.func @row_sum
// CHECK: arith.addf %{{.*}}, %{{.*}} : bf16
// CHECK-NOT: arith.extf
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%x: tensor<4x8xbf16>, %init: tensor<4xbf16>) -> tensor<4xbf16> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xbf16>) outs(%init : tensor<4xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %s = arith.addf %a, %o : bf16
    linalg.yield %s : bf16
  } -> tensor<4xbf16>
  return %r : tensor<4xbf16>
}
