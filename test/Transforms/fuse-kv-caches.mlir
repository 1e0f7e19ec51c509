// RUN: h20-opt %s --split-input-file --h20-fuse-kv-caches --verify-diagnostics | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-fuse-kv-caches="max-seq=4096 align=256 page=64" --verify-diagnostics | FileCheck %s --check-prefix=STATIC

// Two layers: one kv.alloc, each layer writes K then V at position 0 and
// its attention reads views of the cache.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[S:.*]] = tensor.dim %arg1, %{{.*}} : tensor<1x2x?x16xf32>
// CHECK: %[[C:.*]] = kv.alloc(%[[S]]) : !kv.cache<2x2x2x?x16xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
// CHECK: %[[W0:.*]] = kv.write %arg1 into %[[C]][layer = 0, kind = 0] at %[[Z:.*]] :
// CHECK: %[[W1:.*]] = kv.write %arg2 into %[[W0]][layer = 0, kind = 1] at %[[Z]] :
// CHECK: %[[K0:.*]] = kv.view %[[W1]][layer = 0, kind = 0] length
// CHECK: %[[V0:.*]] = kv.view %[[W1]][layer = 0, kind = 1] length
// CHECK: attn.attention %arg0, %[[K0]], %[[V0]]
// CHECK: kv.write %arg3 into %{{.*}}[layer = 1, kind = 0]
// CHECK: kv.write %arg4 into %{{.*}}[layer = 1, kind = 1]
// CHECK-NOT: kv.alloc
// STATIC-LABEL: func.func @two_layers
// STATIC: kv.alloc() : !kv.cache<2x2x2x4096x16xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256, page = 64>>
func.func @two_layers(%q: tensor<1x8x?x16xf32> {onnx.dim_params = ["", "", "S", ""]},
                      %k0: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]},
                      %v0: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]},
                      %k1: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]},
                      %v1: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]}) -> (tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>) {
  %a = attn.attention %q, %k0, %v0 {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  %b = attn.attention %q, %k1, %v1 {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  return %a, %b : tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>
}

// -----

// Layers reading the same K and V share one slot: one layer in the cache,
// written once, viewed twice.
// CHECK-LABEL: func.func @shared
// CHECK: kv.alloc(%{{.*}}) : !kv.cache<1x2x2x?x16xf32
// CHECK-COUNT-2: kv.write
// CHECK-NOT: kv.write
// CHECK-COUNT-4: kv.view %{{.*}}[layer = 0
func.func @shared(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]},
                  %v: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]}) -> (tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>) {
  %a = attn.attention %q, %k, %v {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  %b = attn.attention %a, %k, %v {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  return %a, %b : tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>
}

// -----

// Layers with different KV head counts are not fused into one cache.
func.func @mismatch(%q: tensor<1x8x4x16xf32>, %k0: tensor<1x2x4x16xf32>, %k1: tensor<1x4x4x16xf32>) -> (tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>) {
  %a = attn.attention %q, %k0, %k0 {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) -> tensor<1x8x4x16xf32>
  // expected-warning @+1 {{h20-fuse-kv-caches: K/V 'tensor<1x4x4x16xf32>' differ from the first layer's [1, 2, S, 16] x 'f32'; no cache was fused}}
  %b = attn.attention %q, %k1, %k1 {scale = 0.25 : f64, causal = true, kv_group = 2 : i64} : (tensor<1x8x4x16xf32>, tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>) -> tensor<1x8x4x16xf32>
  return %a, %b : tensor<1x8x4x16xf32>, tensor<1x8x4x16xf32>
}

// -----

// Layers that declare one `kv.slot` share it even when their K/V values are
// different SSA values: the first writes, both view the same slot.
// CHECK-LABEL: func.func @declared_slot
// CHECK: kv.alloc(%{{.*}}) : !kv.cache<1x2x2x?x16xf32
// CHECK-COUNT-2: kv.write %arg1
// CHECK-NOT: kv.write
// CHECK-COUNT-4: kv.view %{{.*}}[layer = 0
func.func @declared_slot(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]},
                         %k2: tensor<1x2x?x16xf32> {onnx.dim_params = ["", "", "S", ""]}) -> (tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>) {
  %a = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, kv_group = 4 : i64, kv.slot = 0 : i64} : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  %b = attn.attention %a, %k2, %k2 {scale = 0.25 : f64, causal = true, kv_group = 4 : i64, kv.slot = 0 : i64} : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  return %a, %b : tensor<1x8x?x16xf32>, tensor<1x8x?x16xf32>
}
