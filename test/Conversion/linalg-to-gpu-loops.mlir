// RUN: h20-opt %s --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{block-size=128}))' | FileCheck %s

// Row reduction: one block (of block-size threads) per row, see
// linalg-to-gpu-row-reduction.mlir.
// CHECK-LABEL: func.func @ops
// CHECK: gpu.launch
// CHECK-SAME: threads({{.*}} in (%{{.*}} = %c128
// CHECK: scf.for
// CHECK: arith.addf
// CHECK: gpu.all_reduce add
// CHECK: gpu.terminator
// Elementwise 2-D: both dims collapsed into one tiled by the block size.
// CHECK: arith.remsi
// CHECK: arith.divsi
// CHECK: math.exp
// CHECK: processor = thread_x
// CHECK: processor = block_x
// Full reduction: a one-iteration grid, both loops sequential.
// CHECK: scf.for
// CHECK: scf.for
// CHECK: processor = thread_x
// CHECK: processor = block_x
// The library call stays for the target.
// CHECK: linalg.generic {{.*}}library_call = "h20_gemm"
// CHECK-NOT: linalg.generic
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @ops(%a: memref<?x128xf32>, %sum: memref<?xf32>, %b: memref<?x128xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<?x128xf32>) outs(%sum : memref<?xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<?x128xf32>) outs(%b : memref<?x128xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%a : memref<?x128xf32>) outs(%s : memref<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"], library_call = "h20_gemm"}
      ins(%a : memref<?x128xf32>) outs(%b : memref<?x128xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}
