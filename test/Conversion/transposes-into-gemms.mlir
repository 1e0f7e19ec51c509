// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-transposes-into-gemms))' | FileCheck %s

// A grouped projection (DeepSeek-V4.1's wo_a): [t, 2, 8] -> [2, t, 8],
// a batched GEMM by [2, 8, 4], and [2, t, 4] -> [t, 2, 4] back. The GEMM
// reads [t, 2, 8] and writes [t, 2, 4] through its maps; no transpose is
// left, and the zero fill moves to the new init.
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
// CHECK-DAG: #[[$C:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>
// CHECK-LABEL: func.func @grouped
// CHECK-SAME: (%[[X:.*]]: tensor<?x2x8xf32>, %[[W:.*]]: tensor<2x8x4xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x2x4xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x2x4xf32>)
// CHECK: %[[G:.*]] = linalg.generic {indexing_maps = [#[[$A]], #{{.*}}, #[[$C]]], {{.*}}library_call = "h20_gemm"} ins(%[[X]], %[[W]] : tensor<?x2x8xf32>, tensor<2x8x4xf32>) outs(%[[F]] : tensor<?x2x4xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: return %[[G]]
#a = affine_map<(g, m, n, k) -> (g, m, k)>
#b = affine_map<(g, m, n, k) -> (g, k, n)>
#c = affine_map<(g, m, n, k) -> (g, m, n)>
func.func @grouped(%x: tensor<?x2x8xf32>, %w: tensor<2x8x4xf32>) -> tensor<?x2x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x2x8xf32>
  %e0 = tensor.empty(%t) : tensor<2x?x8xf32>
  %xt = linalg.transpose ins(%x : tensor<?x2x8xf32>) outs(%e0 : tensor<2x?x8xf32>) permutation = [1, 0, 2]
  %e1 = tensor.empty(%t) : tensor<2x?x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "h20_gemm"} ins(%xt, %w : tensor<2x?x8xf32>, tensor<2x8x4xf32>) outs(%z : tensor<2x?x4xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x?x4xf32>
  %e2 = tensor.empty(%t) : tensor<?x2x4xf32>
  %yt = linalg.transpose ins(%y : tensor<2x?x4xf32>) outs(%e2 : tensor<?x2x4xf32>) permutation = [1, 0, 2]
  return %yt : tensor<?x2x4xf32>
}

// -----

// A transpose that would make the batch loop the contiguous one (cuBLASLt
// needs a unit stride along a matrix dim) stays a copy.
// CHECK-LABEL: func.func @batch_innermost
// CHECK: linalg.transpose
#a2 = affine_map<(g, m, n, k) -> (g, m, k)>
#b2 = affine_map<(g, m, n, k) -> (g, k, n)>
#c2 = affine_map<(g, m, n, k) -> (g, m, n)>
func.func @batch_innermost(%x: tensor<8x?x2xf32>, %w: tensor<2x8x4xf32>) -> tensor<2x?x4xf32> {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %t = tensor.dim %x, %c1 : tensor<8x?x2xf32>
  %e0 = tensor.empty(%t) : tensor<2x?x8xf32>
  %xt = linalg.transpose ins(%x : tensor<8x?x2xf32>) outs(%e0 : tensor<2x?x8xf32>) permutation = [2, 1, 0]
  %e1 = tensor.empty(%t) : tensor<2x?x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  %y = linalg.generic {indexing_maps = [#a2, #b2, #c2], iterator_types = ["parallel", "parallel", "parallel", "reduction"], library_call = "h20_gemm"} ins(%xt, %w : tensor<2x?x8xf32>, tensor<2x8x4xf32>) outs(%z : tensor<2x?x4xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x?x4xf32>
  return %y : tensor<2x?x4xf32>
}
