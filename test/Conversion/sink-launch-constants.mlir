// RUN: h20-opt %s --pass-pipeline='builtin.module(func.func(h20-sink-launch-constants))' | FileCheck %s

// The constants the launch body uses are cloned into it (the outlined
// kernel gets immediates, not arguments); the host keeps its own uses.
// CHECK-LABEL: func.func @launch
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE]]
// CHECK-DAG: arith.constant 0xFF800000 : f32
// CHECK-DAG: arith.constant 2 : index
// CHECK: memref.store
func.func @launch(%m: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %ninf = arith.constant 0xFF800000 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %ninf, %m[%c2] : memref<4xf32>
    gpu.terminator
  }
  return
}
