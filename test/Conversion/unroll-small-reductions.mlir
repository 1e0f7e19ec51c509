// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-unroll-small-reductions))' | FileCheck %s

// DeepSeek-V4.1's mHC mix: out[t, i, c] += w[t, j, i] / (s[t, 0, i] + eps)
// * x[t, j, c] over the 4 streams j. It becomes all-parallel: w and x are
// passed once per j (the dim replaced by 0 .. 3), s once; the body runs 4
// times in order, each adding to the previous sum (same bf16 rounding).
// CHECK-DAG: #[[$W0:.*]] = affine_map<(d0, d1, d2) -> (d0, 0, d1)>
// CHECK-DAG: #[[$W3:.*]] = affine_map<(d0, d1, d2) -> (d0, 3, d1)>
// CHECK-DAG: #[[$X0:.*]] = affine_map<(d0, d1, d2) -> (d0, 0, d2)>
// CHECK-DAG: #[[$X3:.*]] = affine_map<(d0, d1, d2) -> (d0, 3, d2)>
// CHECK-LABEL: func.func @mix
// CHECK: linalg.generic {indexing_maps = [#[[$W0]], {{.*}}, {{.*}}, #[[$W3]], {{.*}}, #[[$X0]], {{.*}}, {{.*}}, #[[$X3]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%arg1, %arg1, %arg1, %arg1, %arg2, %arg3, %arg3, %arg3, %arg3 :
// CHECK-NEXT: ^bb0(%[[W0A:.*]]: bf16, %{{.*}}: bf16, %{{.*}}: bf16, %[[W3A:.*]]: bf16, %[[S:.*]]: bf16, %[[X0A:.*]]: bf16, %{{.*}}: bf16, %{{.*}}: bf16, %[[X3A:.*]]: bf16, %[[OUT:.*]]: bf16):
// CHECK: %[[D0:.*]] = arith.divf %[[W0A]]
// CHECK: %[[P0:.*]] = arith.mulf %[[D0]], %[[X0A]]
// CHECK: %[[A0:.*]] = arith.addf %[[OUT]], %[[P0]] : bf16
// CHECK: arith.addf %[[A0]]
// CHECK: %[[D3:.*]] = arith.divf %[[W3A]]
// CHECK: %[[P3:.*]] = arith.mulf %[[D3]], %[[X3A]]
// CHECK: %[[A3:.*]] = arith.addf %{{.*}}, %[[P3]] : bf16
// CHECK-NEXT: linalg.yield %[[A3]] : bf16
#w = affine_map<(t, i, c, j) -> (t, j, i)>
#s = affine_map<(t, i, c, j) -> (t, 0, i)>
#x = affine_map<(t, i, c, j) -> (t, j, c)>
#o = affine_map<(t, i, c, j) -> (t, i, c)>
func.func @mix(%out: tensor<?x4x64xbf16>, %w: tensor<?x4x4xbf16>, %s: tensor<?x1x4xbf16>, %x: tensor<?x4x64xbf16>) -> tensor<?x4x64xbf16> {
  %eps = arith.constant 1.0e-6 : bf16
  %r = linalg.generic {indexing_maps = [#w, #s, #x, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%w, %s, %x : tensor<?x4x4xbf16>, tensor<?x1x4xbf16>, tensor<?x4x64xbf16>) outs(%out : tensor<?x4x64xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16, %acc: bf16):
    %e = arith.addf %b, %eps : bf16
    %d = arith.divf %a, %e : bf16
    %p = arith.mulf %d, %c : bf16
    %n = arith.addf %acc, %p : bf16
    linalg.yield %n : bf16
  } -> tensor<?x4x64xbf16>
  return %r : tensor<?x4x64xbf16>
}

// -----

// Left alone: a reduction of 16 (too long), of a dynamic extent, two
// reduction dims, and a library call.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: iterator_types = [{{.*}}"reduction"
#a = affine_map<(i, j) -> (i, j)>
#r = affine_map<(i, j) -> (i)>
#a3 = affine_map<(i, j, k) -> (i, j, k)>
#r3 = affine_map<(i, j, k) -> (i)>
func.func @kept(%x: tensor<8x16xf32>, %y: tensor<8x?xf32>, %z: tensor<8x2x2xf32>, %o: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = linalg.generic {indexing_maps = [#a, #r], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x16xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %1 = linalg.generic {indexing_maps = [#a, #r], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<8x?xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %2 = linalg.generic {indexing_maps = [#a3, #r3], iterator_types = ["parallel", "reduction", "reduction"]} ins(%z : tensor<8x2x2xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %3 = linalg.generic {indexing_maps = [#a3, #r3], iterator_types = ["parallel", "reduction", "parallel"], library_call = "h20_gemm"} ins(%z : tensor<8x2x2xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %0, %1, %2, %3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A reduction along an input's innermost dim (a row's sum over 4
// elements) unrolls too, and an init filled with a scalar for it alone
// becomes the body's starting value: the fill is gone, and the result can
// fuse into its consumer like any elementwise op.
// CHECK-LABEL: func.func @row
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>)
// CHECK-NOT: linalg.fill
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]} ins(%[[X]], %[[X]], %[[X]], %[[X]] : {{.*}}) outs(%[[E]] : tensor<8xf32>)
// CHECK-NEXT: ^bb0(%[[V0:.*]]: f32, %[[V1:.*]]: f32, %[[V2:.*]]: f32, %[[V3:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[S0:.*]] = arith.addf %[[ZERO:.*]], %[[V0]] : f32
// CHECK-NEXT: %[[S1:.*]] = arith.addf %[[S0]], %[[V1]] : f32
// CHECK-NEXT: %[[S2:.*]] = arith.addf %[[S1]], %[[V2]] : f32
// CHECK-NEXT: %[[S3:.*]] = arith.addf %[[S2]], %[[V3]] : f32
// CHECK-NEXT: linalg.yield %[[S3]]
#a2 = affine_map<(i, j) -> (i, j)>
#r2 = affine_map<(i, j) -> (i)>
func.func @row(%x: tensor<8x4xf32>) -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %o = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %0 = linalg.generic {indexing_maps = [#a2, #r2], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x4xf32>) outs(%o : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A reduction dim inside an index expression (a short convolution,
// x[i + j]) is left alone: with j = 0 the expression would become a plain
// loop index, from which linalg would take the loop's range.
// CHECK-LABEL: func.func @conv
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
#xc = affine_map<(i, c, j) -> (i + j, c)>
#wc = affine_map<(i, c, j) -> (j, c)>
#oc = affine_map<(i, c, j) -> (i, c)>
func.func @conv(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %o: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = linalg.generic {indexing_maps = [#xc, #wc, #oc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<?x8xf32>, tensor<4x8xf32>) outs(%o : tensor<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
