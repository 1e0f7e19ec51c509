// RUN: h20-opt %s --h20-copies-to-linalg | FileCheck %s

// Every memref.copy, strided or not, becomes a linalg.copy with the same
// source and target; nothing else changes.
// CHECK-LABEL: func.func @copies
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%arg0 : memref<4x8xf32>) outs(%arg1 : memref<4x8xf32>)
// CHECK: %[[V:.*]] = memref.subview %arg0[0, 2] [4, 2] [1, 1]
// CHECK: linalg.copy ins(%[[V]] : memref<4x2xf32, strided<[8, 1], offset: 2>>) outs(%arg2 : memref<4x2xf32>)
// CHECK-NOT: memref.copy
func.func @copies(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x2xf32>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  %v = memref.subview %a[0, 2] [4, 2] [1, 1] : memref<4x8xf32> to memref<4x2xf32, strided<[8, 1], offset: 2>>
  memref.copy %v, %c : memref<4x2xf32, strided<[8, 1], offset: 2>> to memref<4x2xf32>
  return
}
