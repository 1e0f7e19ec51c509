// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops))' | FileCheck %s

// Choose-then-apply: each op is lowered with the launch shape it carries
// (h20-choose-launch-shapes), not the pass's options (256 threads, vectors
// of 8, row reductions on). The first elementwise op asks for 64 threads
// and no vectors: scalar loads tiled by 64. The second carries nothing:
// the options (vectors of 8, tiles of 256).
// CHECK-LABEL: func.func @per_op
// CHECK: arith.constant 64 : index
// CHECK-NOT: vector.load
// CHECK: memref.load
// CHECK: math.exp
// CHECK: memref.store
// CHECK: processor = thread_x
// CHECK: processor = block_x
// CHECK: arith.constant 256 : index
// CHECK: vector.load {{.*}} vector<8xf32>
// CHECK: math.exp {{.*}} : vector<8xf32>
// CHECK: processor = thread_x
// CHECK: processor = block_x
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @per_op(%a: memref<?x128xf32>, %b: memref<?x128xf32>, %c: memref<?x128xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<?x128xf32>) outs(%b : memref<?x128xf32>)
      attrs = {h20.launch = {block = 64 : i64, row_reduction = true, vector = 1 : i64}} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<?x128xf32>) outs(%c : memref<?x128xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A row reduction told row_reduction = false runs as ordinary loops (one
// thread per row, the reduction sequential): no gpu.all_reduce. Its
// neighbour without the attribute takes the one-block-per-row form, with
// the block of 128 threads it asks for.
// CHECK-LABEL: func.func @rows
// CHECK: gpu.launch
// CHECK-SAME: threads({{.*}} in (%{{.*}} = %c128
// CHECK: gpu.all_reduce add
// CHECK-NOT: gpu.all_reduce
// CHECK: return
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @rows(%a: memref<?x4096xf32>, %s: memref<?xf32>, %t: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<?x4096xf32>) outs(%s : memref<?xf32>)
      attrs = {h20.launch = {block = 128 : i64, row_reduction = true, vector = 8 : i64}} {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<?x4096xf32>) outs(%t : memref<?xf32>)
      attrs = {h20.launch = {block = 256 : i64, row_reduction = false, vector = 8 : i64}} {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  }
  return
}
