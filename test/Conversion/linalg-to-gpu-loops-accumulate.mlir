// RUN: h20-opt %s --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{block-size=256}))' | FileCheck %s
// DeepSeek-V4.1's mHC stream mix, out[t, i, c] += sum_j m[t, i, j] x[t, j, c]
// ([S, 4, 4] x [S, 4, C], a generated kernel: a contraction over 4): each
// thread's reduction loop carries its output element in a register (one
// load before the loop, one store after) instead of loading and storing
// it back every iteration.

// CHECK-LABEL: func.func @mix
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: %[[INIT:.*]] = memref.load %arg2[{{.*}}] : memref<?x4x5120xbf16>
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} = %c0{{.*}} to %c4{{.*}} step %c1{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (bf16)
// CHECK-NOT: memref.store
// CHECK-NOT: memref.load %arg2
// CHECK: %[[P:.*]] = arith.mulf
// CHECK: %[[N:.*]] = arith.addf %[[ACC]], %[[P]]
// CHECK: scf.yield %[[N]]
// CHECK: memref.store %[[SUM]], %arg2[{{.*}}] : memref<?x4x5120xbf16>
#m = affine_map<(t, i, c, j) -> (t, i, j)>
#x = affine_map<(t, i, c, j) -> (t, j, c)>
#o = affine_map<(t, i, c, j) -> (t, i, c)>
func.func @mix(%m: memref<?x4x4xbf16>, %x: memref<?x4x5120xbf16>, %out: memref<?x4x5120xbf16>) {
  linalg.generic {indexing_maps = [#m, #x, #o],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%m, %x : memref<?x4x4xbf16>, memref<?x4x5120xbf16>) outs(%out : memref<?x4x5120xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %acc: bf16):
    %p = arith.mulf %a, %b : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// Another view of the output's allocation read in the loop (a running sum
// that reads the previous row of its own buffer): the loop stays as it is,
// loading and storing the element every iteration.
// CHECK-LABEL: func.func @aliased
// CHECK-NOT: iter_args
// CHECK: scf.for
// CHECK: memref.load %subview
// CHECK: memref.store
func.func @aliased(%x: memref<?x4xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %out, %c0 : memref<?xf32>
  %m = arith.subi %n, %c1 : index
  %prev = memref.subview %out[0] [%m] [1] : memref<?xf32> to memref<?xf32, strided<[1]>>
  %tail = memref.subview %out[1] [%m] [1] : memref<?xf32> to memref<?xf32, strided<[1], offset: 1>>
  %xs = memref.subview %x[1, 0] [%m, 4] [1, 1] : memref<?x4xf32> to memref<?x4xf32, strided<[4, 1], offset: 4>>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%xs, %prev : memref<?x4xf32, strided<[4, 1], offset: 4>>, memref<?xf32, strided<[1]>>)
      outs(%tail : memref<?xf32, strided<[1], offset: 1>>) {
  ^bb0(%a: f32, %p: f32, %acc: f32):
    %s = arith.addf %a, %p : f32
    %t = arith.addf %acc, %s : f32
    linalg.yield %t : f32
  }
  return
}
