// RUN: h20-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(h20-outputs-to-destinations))' | FileCheck %s

// Each tensor result becomes a trailing memref argument (identity layout,
// same shape and type) written with materialize_in_destination; the
// function returns nothing.
// CHECK-LABEL: func.func @main(%arg0: tensor<4x8xf32>, %arg1: memref<4x8xf32>, %arg2: memref<?x2xbf16>)
// CHECK-NOT: ->
// CHECK: bufferization.materialize_in_destination %arg0 in restrict writable %arg1 : (tensor<4x8xf32>, memref<4x8xf32>) -> ()
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %arg2 : (tensor<?x2xbf16>, memref<?x2xbf16>) -> ()
// CHECK-NEXT: return{{$}}
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<?x2xbf16>) {
  %c3 = arith.constant 3 : index
  %e = tensor.empty(%c3) : tensor<?x2xbf16>
  return %x, %e : tensor<4x8xf32>, tensor<?x2xbf16>
}

// -----

// No result: only the return is rebuilt.
// CHECK-LABEL: func.func @none(%arg0: tensor<4xf32>)
// CHECK-NEXT: return{{$}}
func.func @none(%x: tensor<4xf32>) {
  return
}

// -----

// A result that is not a ranked tensor is refused, not mis-lowered.
// expected-error @+1 {{result of type 'f32' is not a ranked tensor}}
func.func @scalar(%x: f32) -> f32 {
  return %x : f32
}
