// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{block-size=128}))' | FileCheck %s

// A reduction over a middle dim (mHC's sum over streams, [S, 4, C] -> [S, C]):
// its reduction loop goes innermost (before, the nest was parallel, for,
// parallel and the inner parallel loop never became GPU threads). Four
// elements (at most 8) do not fill a warp, so it is no row reduction (a block per
// output element would launch S x C blocks, over the grid limit at 512K
// tokens): one thread per output element of S x C (a grid-stride loop of
// 128-thread tiles) folds the 4 streams itself.
// CHECK-LABEL: func.func @middle_reduction
// CHECK-NOT: gpu.all_reduce
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %c4
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<8x4x64xf32>
// CHECK-NOT: gpu.all_reduce
#in = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @middle_reduction(%x: memref<8x4x64xf32>, %y: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<8x4x64xf32>) outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Shape arithmetic on a host-written [1] i64 array stays on the host,
// unrolled (no kernel); ops on device buffers (function arguments) stay
// kernels.
// CHECK-LABEL: func.func @host_shape_math
// CHECK: memref.store %{{.*}}, %[[A:.*]][%c0] : memref<1xi64>
// CHECK-NOT: scf.parallel
// CHECK: %[[V:.*]] = memref.load %[[A]][%{{.*}}] : memref<1xi64>
// CHECK: arith.muli %[[V]], %[[V]]
// CHECK: memref.store
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: return
#id = affine_map<(d0) -> (d0)>
func.func @host_shape_math(%n: i64, %dev: memref<1xi64>, %dev2: memref<1xi64>) -> i64 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<1xi64>
  memref.store %n, %a[%c0] : memref<1xi64>
  %b = memref.alloc() : memref<1xi64>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<1xi64>) outs(%b : memref<1xi64>) {
  ^bb0(%x: i64, %y: i64):
    %m = arith.muli %x, %x : i64
    linalg.yield %m : i64
  }
  // Device buffers: both stay kernels.
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%dev : memref<1xi64>) {
  ^bb0(%y: i64):
    %one = arith.constant 1 : i64
    linalg.yield %one : i64
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%dev : memref<1xi64>) outs(%dev2 : memref<1xi64>) {
  ^bb0(%x: i64, %y: i64):
    linalg.yield %x : i64
  }
  %r = memref.load %b[%c0] : memref<1xi64>
  return %r : i64
}

// -----

// An iota of positions (small, on a host allocation) that a device op then
// reads (a mask kernel comparing positions) must be written on the device:
// host memory is not visible to kernels. Both ops stay kernels.
// CHECK-LABEL: func.func @host_values_read_by_a_kernel
// CHECK-NOT: memref.store
// CHECK: scf.parallel
// CHECK: memref.store %{{.*}} : memref<5xi64>
// CHECK: scf.parallel
// CHECK: memref.store %{{.*}} : memref<5x5xi8>
// CHECK: return
#id1 = affine_map<(d0) -> (d0)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#both = affine_map<(d0, d1) -> (d0, d1)>
func.func @host_values_read_by_a_kernel(%mask: memref<5x5xi8>) {
  %pos = memref.alloc() : memref<5xi64>
  linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%pos : memref<5xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %v = arith.index_cast %i : index to i64
    linalg.yield %v : i64
  }
  linalg.generic {indexing_maps = [#row, #col, #both], iterator_types = ["parallel", "parallel"]}
      ins(%pos, %pos : memref<5xi64>, memref<5xi64>) outs(%mask : memref<5x5xi8>) {
  ^bb0(%a: i64, %b: i64, %o: i8):
    %le = arith.cmpi sle, %b, %a : i64
    %e = arith.extui %le : i1 to i8
    linalg.yield %e : i8
  }
  return
}

// -----

// An iota of positions that a kernel reads in its body (a RoPE table gather
// loads positions[s], not as an input) stays a kernel: on the host its
// buffer would never reach the device (GroupQueryAttention's do_rotary once
// failed with "operand of 'gpu.launch_func' has no buffer").
// CHECK-LABEL: func.func @iota_read_by_gather
// CHECK: scf.parallel
// CHECK: arith.index_cast %{{.*}} : index to i64
// CHECK: memref.store %{{.*}} : memref<5xi64>
// CHECK: scf.reduce
// CHECK: scf.parallel
// CHECK: memref.load %{{.*}} : memref<5xi64>
// CHECK: memref.load %{{.*}} : memref<16x8xf32>
#id1 = affine_map<(d0) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @iota_read_by_gather(%table: memref<16x8xf32>, %out: memref<5x8xf32>) {
  %pos = memref.alloc() : memref<5xi64>
  linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%pos : memref<5xi64>) {
  ^bb0(%y: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  }
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%out : memref<5x8xf32>) {
  ^bb0(%y: f32):
    %s = linalg.index 0 : index
    %j = linalg.index 1 : index
    %p = memref.load %pos[%s] : memref<5xi64>
    %pi = arith.index_cast %p : i64 to index
    %v = memref.load %table[%pi, %j] : memref<16x8xf32>
    linalg.yield %v : f32
  }
  return
}
