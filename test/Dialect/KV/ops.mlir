// RUN: h20-opt %s | h20-opt | FileCheck %s
// Round trip of the kv cache type, layout attribute and every kv op.

// CHECK-LABEL: func.func @alloc_write_view
// CHECK: %[[C:.*]] = kv.alloc(%{{.*}}) : !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
// CHECK: %[[W:.*]] = kv.write %{{.*}} into %[[C]][layer = 1, kind = 0] at %{{.*}} : tensor<1x4x?x32xf32> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
// CHECK: kv.view %[[W]][layer = 1, kind = 0] length %{{.*}} : !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>> -> tensor<1x4x?x32xf32>
func.func @alloc_write_view(%k: tensor<1x4x?x32xf32>, %cap: index, %pos: index, %len: index) -> tensor<1x4x?x32xf32> {
  %c = kv.alloc(%cap) : !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  %w = kv.write %k into %c[layer = 1, kind = 0] at %pos : tensor<1x4x?x32xf32> -> !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>>
  %v = kv.view %w[layer = 1, kind = 0] length %len : !kv.cache<2x2x4x?x32xf32, #kv.layout<order = [0, 1, 2, 3, 4], align = 256>> -> tensor<1x4x?x32xf32>
  return %v : tensor<1x4x?x32xf32>
}

// A cache of rows (kind dimension 1: no value half), as h20-chunked-prefill
// makes for DeepSeek-V4.1's latents and indexer keys.
// CHECK-LABEL: func.func @rows_cache
// CHECK: kv.write %{{.*}} into %{{.*}}[layer = 0, kind = 0] at %{{.*}} : tensor<1x1x?x64xbf16> -> !kv.cache<3x1x1x512x64xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
func.func @rows_cache(%r: tensor<1x1x?x64xbf16>, %pos: index) -> !kv.cache<3x1x1x512x64xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> {
  %c = kv.alloc() : !kv.cache<3x1x1x512x64xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  %w = kv.write %r into %c[layer = 0, kind = 0] at %pos : tensor<1x1x?x64xbf16> -> !kv.cache<3x1x1x512x64xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
  return %w : !kv.cache<3x1x1x512x64xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>
}

// CHECK-LABEL: func.func @static_bf16_seq_major
// CHECK: kv.alloc() : !kv.cache<8x2x32x1024x128xbf16, #kv.layout<order = [3, 0, 1, 2, 4], align = 128>>
func.func @static_bf16_seq_major() -> !kv.cache<8x2x32x1024x128xbf16, #kv.layout<order = [3, 0, 1, 2, 4], align = 128>> {
  %c = kv.alloc() : !kv.cache<8x2x32x1024x128xbf16, #kv.layout<order = [3, 0, 1, 2, 4], align = 128>>
  return %c : !kv.cache<8x2x32x1024x128xbf16, #kv.layout<order = [3, 0, 1, 2, 4], align = 128>>
}

// A view of tokens [offset, offset + length) (a window ring's last rows).
// CHECK-LABEL: func.func @view_from
// CHECK: kv.view %{{.*}}[layer = 0, kind = 0] from %{{.*}} length %{{.*}} : !kv.cache<1x1x1x35x40xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> -> tensor<1x1x15x40xbf16>
func.func @view_from(%c: !kv.cache<1x1x1x35x40xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>>) -> tensor<1x1x15x40xbf16> {
  %at = arith.constant 20 : index
  %n = arith.constant 15 : index
  %v = kv.view %c[layer = 0, kind = 0] from %at length %n : !kv.cache<1x1x1x35x40xbf16, #kv.layout<order = [0, 1, 2, 3, 4], align = 128>> -> tensor<1x1x15x40xbf16>
  return %v : tensor<1x1x15x40xbf16>
}
