// RUN: h20-opt %s --split-input-file --h20-select-tiles="target=h20" | FileCheck %s --check-prefix=H20
// RUN: h20-opt %s --split-input-file --h20-select-tiles="target=h200" | FileCheck %s --check-prefix=H200
// RUN: echo '{"overrides": [{"target": "h200", "kind": "attention", "head_dim": 128, "block_m": 128, "block_n": 128, "stages": 2, "warpgroups": 2, "persistent": true}]}' > %t.json
// RUN: h20-opt %s --split-input-file --h20-select-tiles="target=h200 tuning-file=%t.json" | FileCheck %s --check-prefix=TUNED
// RUN: echo '{"overrides": [{"target": "h200", "kind": "attention", "block_m": 192, "block_n": 256, "stages": 4}]}' > %t.big.json
// RUN: not h20-opt %s --split-input-file --h20-select-tiles="target=h200 tuning-file=%t.big.json" 2>&1 | FileCheck %s --check-prefix=TOOBIG
// RUN: not h20-opt %s --h20-select-tiles="target=v100" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// seed-dense attention (32 heads x 128, causal, bf16) at S = 4096.
// Both GPUs take two consumer warpgroups (block_m 128: softmax of one
// overlaps the other's wgmma) and a persistent grid (1024 tiles whose
// causal lengths differ up to 32x; longest-first keeps the SMs level).
// They differ in the key block: an H20 SM does 148/78 = 1.9 TFLOP/s of
// bf16 against 989/132 = 7.5 on an H200, so the fixed per-step cost
// (barriers, wgmma issue) is ~4x smaller relative to a step there and the
// finer 64-key steps (less work wasted on diagonal blocks) win; on the H200
// fewer, 96-key steps win. The estimates: 1263 us (H20, 109 TFLOP/s, 73% of
// peak) vs 218 us (H200, 629 TFLOP/s).
// H20: attn.attention {{.*}}h20.tiles = #h20.tiles<kind = "attention", target = "h20", block_m = 128, block_n = 64, block_k = 0, stages = 3, warpgroups = 2, persistent = true, smem_bytes = 164864, est_us = 1263.{{[0-9]+}} : f64>
// H200: attn.attention {{.*}}h20.tiles = #h20.tiles<kind = "attention", target = "h200", block_m = 128, block_n = 96, block_k = 0, stages = 3, warpgroups = 2, persistent = true, smem_bytes = 214016, est_us = 2.18{{[0-9]+}}e+02 : f64>
// TUNED: h20.tiles = #h20.tiles<kind = "attention", target = "h200", block_m = 128, block_n = 128, block_k = 0, stages = 2, warpgroups = 2, persistent = true, smem_bytes = 197632
// TOOBIG: error: tuning override needs 623616 bytes of shared memory; h200 has 232448
// UNKNOWN: error: h20-select-tiles: unknown target 'v100' (known: h20, h100, h200, h800, a100, l20, cpu)
func.func @seed_dense(%q: tensor<1x32x4096x128xbf16>, %k: tensor<1x32x4096x128xbf16>, %v: tensor<1x32x4096x128xbf16>) -> tensor<1x32x4096x128xbf16> {
  %y = attn.attention %q, %k, %v {scale = 0.088388347648318447 : f64, causal = true, kv_group = 1 : i64} : (tensor<1x32x4096x128xbf16>, tensor<1x32x4096x128xbf16>, tensor<1x32x4096x128xbf16>) -> tensor<1x32x4096x128xbf16>
  return %y : tensor<1x32x4096x128xbf16>
}

// -----

// GEMMs (a 2-D weight) and memory-bound row kernels get tiles too; dynamic
// sequence dims are planned at seq-len (32768).
// H20-LABEL: func.func @linear
// H20: attn.rms_norm{{.*}}h20.tiles = #h20.tiles<kind = "rows", target = "h20"
// H20: onnx.MatMul{{.*}}h20.tiles = #h20.tiles<kind = "gemm", target = "h20"
func.func @linear(%x: tensor<1x?x4096xbf16>, %w: tensor<4096x11008xbf16>, %g: tensor<4096xbf16>) -> tensor<1x?x11008xbf16> {
  %n = attn.rms_norm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<1x?x4096xbf16>, tensor<4096xbf16>) -> tensor<1x?x4096xbf16>
  %y = onnx.MatMul(%n, %w) : (tensor<1x?x4096xbf16>, tensor<4096x11008xbf16>) -> tensor<1x?x11008xbf16>
  return %y : tensor<1x?x11008xbf16>
}
