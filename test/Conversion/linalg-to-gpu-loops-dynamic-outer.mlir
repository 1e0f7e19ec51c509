// RUN: h20-opt %s --pass-pipeline='builtin.module(func.func(h20-linalg-to-gpu-loops{block-size=256}))' | FileCheck %s
// A chunk's head transpose [S, 64, 512] -> [64, S, 512] (S, the chunk's
// tokens, known only at run time): the loop over S is put outermost before
// the nest becomes one thread index, so the thread index is split by the
// constants 64 (vectors of 8 in a row of 512) and 64 (heads) alone, and
// the S loop takes the rest. A division by
// S (a 64-bit run-time division, ~100 instructions a thread) made such
// transposes run at a tenth of the memory bandwidth. The innermost dim
// stays innermost: consecutive threads read consecutive elements.

// CHECK-LABEL: func.func @transpose
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: %[[V:.*]] = arith.remsi %[[I:[0-9]+]], %c64{{(_[0-9]+)?}}
// CHECK: %[[Q:.*]] = arith.divsi %[[I]], %c64{{(_[0-9]+)?}}
// CHECK: %[[H:.*]] = arith.remsi %[[Q]], %c64{{(_[0-9]+)?}}
// CHECK: %[[S:.*]] = arith.divsi %[[Q]], %c64{{(_[0-9]+)?}}
// CHECK-NOT: arith.remsi
// CHECK-NOT: arith.divsi
// CHECK: %[[D:.*]] = arith.muli %[[V]], %c8
// CHECK: %[[X:.*]] = vector.load %arg0[%[[S]], %[[H]], %[[D]]]
// CHECK: vector.store %[[X]], %arg1[%[[H]], %[[S]], %[[D]]]
#in = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @transpose(%x: memref<?x64x512xbf16>, %y: memref<64x?x512xbf16>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<?x64x512xbf16>) outs(%y : memref<64x?x512xbf16>) {
  ^bb0(%a: bf16, %b: bf16):
    linalg.yield %a : bf16
  }
  return
}
