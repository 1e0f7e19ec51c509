// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-launch-shapes{target=h20}))' | FileCheck %s
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-launch-shapes{target=h200 block-size=128 vector-width=4}))' | FileCheck %s --check-prefix=OVERRIDE
// RUN: not h20-opt %s --pass-pipeline='builtin.module(func.func(h20-choose-launch-shapes{target=cpu}))' 2>&1 | FileCheck %s --check-prefix=CPU

// Every op h20-linalg-to-gpu-loops turns into a kernel carries its launch
// shape: the elementwise generic and the named copy (vectorizable), the row
// reduction. The library-call generic (a cuBLASLt GEMM) and the op already
// inside a parallel loop do not.
// CHECK-LABEL: func.func @kernels
// CHECK: linalg.generic
// CHECK-SAME: h20.launch = {block = 256 : i64, row_reduction = true, vector = 8 : i64}
// CHECK: linalg.copy
// CHECK-SAME: h20.launch = {block = 256 : i64, row_reduction = true, vector = 8 : i64}
// CHECK: linalg.generic
// CHECK-SAME: h20.launch = {block = 256 : i64, row_reduction = true, vector = 8 : i64}
// CHECK: linalg.generic
// CHECK-SAME: library_call = "h20_gemm"
// CHECK-NOT: h20.launch
// CHECK: scf.parallel
// CHECK: linalg.fill
// CHECK-NOT: h20.launch
// CHECK: return
// OVERRIDE-LABEL: func.func @kernels
// OVERRIDE: h20.launch = {block = 128 : i64, row_reduction = true, vector = 4 : i64}
// CPU: error: h20-choose-launch-shapes: target 'cpu' is not an sm_90 GPU (known: h20, h100, h200, h800)
func.func @kernels(%x: memref<?x4096xbf16>, %y: memref<?x4096xbf16>, %z: memref<?x4096xbf16>,
                   %r: memref<?xf32>, %a: memref<?x64xbf16>, %w: memref<64x64xbf16>,
                   %o: memref<?x64xbf16>, %t: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x4096xbf16>) outs(%y : memref<?x4096xbf16>) {
  ^bb0(%a0: bf16, %o0: bf16):
    %n = arith.negf %a0 : bf16
    linalg.yield %n : bf16
  }
  linalg.copy ins(%y : memref<?x4096xbf16>) outs(%z : memref<?x4096xbf16>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%z : memref<?x4096xbf16>) outs(%r : memref<?xf32>) {
  ^bb0(%a0: bf16, %acc: f32):
    %e = arith.extf %a0 : bf16 to f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                   affine_map<(d0, d1, d2) -> (d2, d1)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"], library_call = "h20_gemm"}
      ins(%a, %w : memref<?x64xbf16>, memref<64x64xbf16>) outs(%o : memref<?x64xbf16>) {
  ^bb0(%p: bf16, %q: bf16, %acc: bf16):
    %m = arith.mulf %p, %q : bf16
    %s = arith.addf %acc, %m : bf16
    linalg.yield %s : bf16
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c1) step (%c1) {
    linalg.fill ins(%zero : f32) outs(%t : memref<4xf32>)
    scf.reduce
  }
  return
}
