// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels))' | FileCheck %s
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels{kernel=mma}))' | FileCheck %s --check-prefix=MMA

// bf16, head dim 128: the wgmma kernel (128 x 128 tiles, producer + two
// consumer warpgroups, 2 stages, ping-pong), recorded on the op.
// CHECK-LABEL: func.func @bf16_d128
// CHECK: attn.attention {{.*}}h20.kernel = {block_m = 128 : i64, block_n = 128 : i64, kind = "wgmma", schedule = 1 : i64, stages = 2 : i64, threads = 384 : i64}
// kernel=mma: the mma.sync kernel instead.
// MMA-LABEL: func.func @bf16_d128
// MMA: attn.attention {{.*}}h20.kernel = {block_m = 128 : i64, block_n = 128 : i64, kind = "mma", schedule = 0 : i64, stages = 2 : i64, threads = 256 : i64}
func.func @bf16_d128(%q: tensor<1x8x?x128xbf16>, %k: tensor<1x2x?x128xbf16>, %v: tensor<1x2x?x128xbf16>) -> tensor<1x8x?x128xbf16> {
  %0 = attn.attention %q, %k, %v {causal = true, kv_group = 4 : i64, scale = 0.088388347648318433 : f64} : (tensor<1x8x?x128xbf16>, tensor<1x2x?x128xbf16>, tensor<1x2x?x128xbf16>) -> tensor<1x8x?x128xbf16>
  return %0 : tensor<1x8x?x128xbf16>
}

// -----

// Head dim 16 has no wgmma variant: mma.sync in both modes.
// CHECK-LABEL: func.func @bf16_d16
// CHECK: h20.kernel = {{{.*}}kind = "mma"
// MMA-LABEL: func.func @bf16_d16
// MMA: h20.kernel = {{{.*}}kind = "mma"
func.func @bf16_d16(%q: tensor<1x2x?x16xbf16>, %k: tensor<1x2x?x16xbf16>, %v: tensor<1x2x?x16xbf16>) -> tensor<1x2x?x16xbf16> {
  %0 = attn.attention %q, %k, %v {causal = true, kv_group = 1 : i64, scale = 2.500000e-01 : f64} : (tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16>, tensor<1x2x?x16xbf16>) -> tensor<1x2x?x16xbf16>
  return %0 : tensor<1x2x?x16xbf16>
}

// -----

// f32: the exact FMA kernel.
// CHECK-LABEL: func.func @f32_d64
// CHECK: h20.kernel = {block_m = 64 : i64, block_n = 64 : i64, kind = "fma"
func.func @f32_d64(%q: tensor<1x2x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>) -> tensor<1x2x?x64xf32> {
  %0 = attn.attention %q, %k, %v {causal = true, kv_group = 1 : i64, scale = 1.250000e-01 : f64} : (tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>) -> tensor<1x2x?x64xf32>
  return %0 : tensor<1x2x?x64xf32>
}

// -----

// A window without causal masking, and a head dim the kernels lack (100):
// no kernel, decomposed into generic kernels.
// CHECK-LABEL: func.func @unsupported
// CHECK: attn.attention {{.*}}h20.decompose = "a window without causal masking"
// CHECK-NOT: h20.kernel
// CHECK: attn.attention {{.*}}h20.decompose = "attention: head dim 100 is not supported by the GPU kernel
func.func @unsupported(%q: tensor<1x2x8x64xbf16>, %q2: tensor<1x2x8x100xbf16>, %k2: tensor<1x2x8x100xbf16>) -> (tensor<1x2x8x64xbf16>, tensor<1x2x8x100xbf16>) {
  %0 = attn.attention %q, %q, %q {causal = false, kv_group = 1 : i64, scale = 1.250000e-01 : f64, window = 4 : i64} : (tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>) -> tensor<1x2x8x64xbf16>
  %1 = attn.attention %q2, %k2, %k2 {causal = true, kv_group = 1 : i64, scale = 1.000000e-01 : f64} : (tensor<1x2x8x100xbf16>, tensor<1x2x8x100xbf16>, tensor<1x2x8x100xbf16>) -> tensor<1x2x8x100xbf16>
  return %0, %1 : tensor<1x2x8x64xbf16>, tensor<1x2x8x100xbf16>
}

// -----

// DeepSeek-V4.1's lightning indexer: its persistent grid, two CTAs per SM
// of the target (the scratch rows the lowering allocates): 264 on an
// H200's 132 SMs, 156 on an H20's 78.
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels{target=h20}))' | FileCheck %s --check-prefix=H20
// RUN: not h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels{target=v100}))' 2>&1 | FileCheck %s --check-prefix=BADTARGET
// CHECK-LABEL: func.func @indexer
// CHECK: attn.indexer_topk {{.*}}h20.kernel = {ctas = 264 : i64}
// CHECK: attn.indexer_candidates {{.*}}h20.kernel = {ctas = 264 : i64}
// H20-LABEL: func.func @indexer
// H20: attn.indexer_topk {{.*}}h20.kernel = {ctas = 156 : i64}
// H20: attn.indexer_candidates {{.*}}h20.kernel = {ctas = 156 : i64}
// BADTARGET: h20-choose-attention-kernels: unknown GPU target 'v100'
func.func @indexer(%q: tensor<?x4x24xbf16>, %k: tensor<?x24xbf16>, %w: tensor<?x4xbf16>) -> (tensor<?x?xi64>, tensor<?x?xi64>) {
  %t = attn.indexer_topk %q, %k, %w {ratio = 1 : i64, scale = 2.500000e-01 : f64, topk = 8 : i64} : (tensor<?x4x24xbf16>, tensor<?x24xbf16>, tensor<?x4xbf16>) -> tensor<?x?xi64>
  %b = attn.indexer_candidates %q, %k, %w {block_size = 4 : i64, blocks = 6 : i64, ratio = 1 : i64, scale = 2.500000e-01 : f64} : (tensor<?x4x24xbf16>, tensor<?x24xbf16>, tensor<?x4xbf16>) -> tensor<?x?xi64>
  return %t, %b : tensor<?x?xi64>, tensor<?x?xi64>
}
