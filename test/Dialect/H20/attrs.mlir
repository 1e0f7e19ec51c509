// RUN: h20-opt %s | h20-opt | FileCheck %s
// Round trip of #h20.tiles, the target-level tile choice.

// CHECK-LABEL: func.func @tiles
// CHECK: attn.attention {{.*}}h20.tiles = #h20.tiles<kind = "attention", target = "h200", block_m = 128, block_n = 128, block_k = 0, stages = 2, warpgroups = 2, persistent = true, smem_bytes = 197632, est_us = 2.190000e+02 : f64>
func.func @tiles(%q: tensor<1x32x4096x128xbf16>) -> tensor<1x32x4096x128xbf16> {
  %y = attn.attention %q, %q, %q {scale = 0.088388347648318447 : f64, causal = true, kv_group = 1 : i64,
      h20.tiles = #h20.tiles<kind = "attention", target = "h200", block_m = 128, block_n = 128, block_k = 0,
                             stages = 2, warpgroups = 2, persistent = true, smem_bytes = 197632, est_us = 219.0 : f64>}
      : (tensor<1x32x4096x128xbf16>, tensor<1x32x4096x128xbf16>, tensor<1x32x4096x128xbf16>) -> tensor<1x32x4096x128xbf16>
  return %y : tensor<1x32x4096x128xbf16>
}
