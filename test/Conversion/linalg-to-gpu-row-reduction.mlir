// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops))' | FileCheck %s
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{row-reductions=false}))' | FileCheck %s --check-prefix=OFF

// RMSNorm's sum of squares over a 4096-wide row: one block of 256 threads
// per row (the parallel dims delinearised from block_x), thread t folding
// elements i*256 + t for i < 16 (coalesced; a constant trip count, so
// LLVM unrolls it), gpu.all_reduce across the block, thread 0 storing. The
// zero fill before it folds into the kernel.
// CHECK-LABEL: func.func @rms_sum
// CHECK-NOT: linalg.fill
// CHECK: %[[S:.*]] = memref.dim %{{.*}}, %c1
// CHECK: %[[ROWS0:.*]] = arith.muli %{{.*}}, %c1
// CHECK: %[[ROWS:.*]] = arith.muli %[[ROWS0]], %[[S]]
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ROWS]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK: %[[J:.*]] = arith.remui %[[BX]], %[[S]]
// CHECK: %[[I:.*]] = arith.divui %[[BX]], %[[S]]
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK: %[[PART:.*]] = scf.for %[[IT:.*]] = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32)
// CHECK: %[[M:.*]] = arith.muli %[[IT]], %c256
// CHECK: %[[K:.*]] = arith.addi %[[M]], %[[TX]]
// CHECK: memref.load %{{.*}}[%[[I]], %[[J]], %[[K]]] : memref<1x?x4096xbf16>
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC]], %{{.*}} : f32
// CHECK: scf.yield %[[NEXT]]
// CHECK: %[[TOT:.*]] = gpu.all_reduce add %[[PART]] uniform
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %c0
// CHECK: scf.if %[[FIRST]]
// CHECK-NOT: memref.load
// CHECK: %[[R:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: memref.store %[[R]], %{{.*}}[%[[I]], %[[J]]] : memref<1x?xf32>
// CHECK: gpu.terminator
// CHECK-NOT: scf.parallel
// Without row-reductions: the fill's kernel, then one thread per row.
// OFF-LABEL: func.func @rms_sum
// OFF-NOT: gpu.launch
// OFF-COUNT-2: processor = block_x
// OFF-NOT: gpu.all_reduce
// OFF: return
func.func @rms_sum(%x: memref<1x?x4096xbf16>, %sum: memref<1x?xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%sum : memref<1x?xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<1x?x4096xbf16>) outs(%sum : memref<1x?xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %sq = arith.mulf %e, %e : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A softmax-style max over a 64-wide row (the fixtures' hidden size): 64
// threads, the neutral element -inf, the output's old value combined in by
// thread 0 (no fill to fold).
// CHECK-LABEL: func.func @row_max
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c1{{.*}} step %c1{{.*}} iter_args(%{{.*}} = %[[NINF]])
// CHECK: arith.addi %{{.*}}, %[[TX]]
// CHECK: arith.maximumf
// CHECK: gpu.all_reduce maximumf
// CHECK: scf.if
// CHECK: %[[OLD:.*]] = memref.load %{{.*}} : memref<?x8xf32>
// CHECK: arith.maximumf {{.*}}%[[OLD]]
// CHECK: memref.store
func.func @row_max(%x: memref<?x8x64xf32>, %m: memref<?x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<?x8x64xf32>) outs(%m : memref<?x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A short row (20) still gets a whole warp; threads past its end contribute
// the neutral element (a row the threads do not divide: t, t + T, ... < 20). A transposed output map and a broadcast operand.
// CHECK-LABEL: func.func @short_row
// CHECK: gpu.launch
// CHECK-SAME: threads(%[[TX:[^,]*]], {{.*}} in (%{{.*}} = %c32
// CHECK: scf.for %{{.*}} = %[[TX]] to %c20
// CHECK: gpu.all_reduce add
// CHECK: memref.store %{{.*}}, %{{.*}} : memref<4x3xi32>
func.func @short_row(%x: memref<3x4x20xi32>, %w: memref<20xi32>, %o: memref<4x3xi32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>,
                                   affine_map<(d0, d1, d2) -> (d1, d0)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<3x4x20xi32>, memref<20xi32>) outs(%o : memref<4x3xi32>) {
  ^bb0(%a: i32, %b: i32, %acc: i32):
    %p = arith.muli %a, %b : i32
    %r = arith.addi %acc, %p : i32
    linalg.yield %r : i32
  }
  return
}

// -----

// A row of dynamic length: the block size, the row length as the loop bound.
// A whole-tensor reduction of one dim is one block.
// CHECK-LABEL: func.func @dynamic_row
// CHECK: %[[K:.*]] = memref.dim %{{.*}}, %c0
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %c1{{.*}}, %{{.*}}) threads(%[[TX:[^,]*]], {{.*}} in (%{{.*}} = %c256
// CHECK: scf.for %{{.*}} = %[[TX]] to %[[K]] step %c256
// CHECK: gpu.all_reduce add
func.func @dynamic_row(%x: memref<?xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<?xf32>) outs(%s : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Not row reductions (one thread per output, sequential reduction): a 16-bit
// accumulator (no shuffle carries it), a non-commutative combiner; a fill of
// another buffer stays (its own kernel).
// CHECK-LABEL: func.func @not_rows
// CHECK-NOT: gpu.launch
// CHECK-NOT: gpu.all_reduce
// CHECK-COUNT-3: processor = block_x
// CHECK-NOT: processor = block_x
func.func @not_rows(%x: memref<?x64xbf16>, %h: memref<?xbf16>, %f: memref<?xf32>, %y: memref<?x64xf32>, %other: memref<?xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x64xbf16>) outs(%h : memref<?xbf16>) {
  ^bb0(%in: bf16, %acc: bf16):
    %r = arith.addf %in, %acc : bf16
    linalg.yield %r : bf16
  }
  linalg.fill ins(%zero : f32) outs(%other : memref<?xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<?x64xf32>) outs(%f : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.subf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}
