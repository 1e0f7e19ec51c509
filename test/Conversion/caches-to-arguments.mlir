// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-caches-to-arguments))' | FileCheck %s

// Two KV caches (the tensor.empty ops h20-lower-to-linalg marks) become
// writable arguments marked h20.kv_cache after the input, in walk order;
// other empties stay.
// CHECK-LABEL: func.func @main(%arg0: tensor<4x8xf32>, %arg1: tensor<64x8xbf16> {bufferization.writable = true, h20.kv_cache}, %arg2: tensor<64x8xbf16> {bufferization.writable = true, h20.kv_cache}) -> (tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<4x8xf32>)
// CHECK-NOT: h20.kv_cache
// CHECK: %[[T:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: return %arg1, %arg2, %[[T]]
func.func @main(%x: tensor<4x8xf32>) -> (tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<4x8xf32>) {
  %k = tensor.empty() {h20.kv_cache} : tensor<64x8xbf16>
  %v = tensor.empty() {h20.kv_cache} : tensor<64x8xbf16>
  %t = tensor.empty() : tensor<4x8xf32>
  return %k, %v, %t : tensor<64x8xbf16>, tensor<64x8xbf16>, tensor<4x8xf32>
}

// -----

// No cache: the signature is unchanged.
// CHECK-LABEL: func.func @plain(%arg0: tensor<4xf32>) -> tensor<4xf32>
func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
