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
// CHECK: attn.indexer_topk {{.*}}h20.kernel = {ctas = 264 : i64, kind = "fma"}
// CHECK: attn.indexer_candidates {{.*}}h20.kernel = {ctas = 264 : i64, kind = "fma"}
// H20-LABEL: func.func @indexer
// H20: attn.indexer_topk {{.*}}h20.kernel = {ctas = 156 : i64, kind = "fma"}
// H20: attn.indexer_candidates {{.*}}h20.kernel = {ctas = 156 : i64, kind = "fma"}
// BADTARGET: h20-choose-attention-kernels: unknown GPU target 'v100'
func.func @indexer(%q: tensor<?x4x24xbf16>, %k: tensor<?x24xbf16>, %w: tensor<?x4xbf16>) -> (tensor<?x?xi64>, tensor<?x?xi64>) {
  %t = attn.indexer_topk %q, %k, %w {ratio = 1 : i64, scale = 2.500000e-01 : f64, topk = 8 : i64} : (tensor<?x4x24xbf16>, tensor<?x24xbf16>, tensor<?x4xbf16>) -> tensor<?x?xi64>
  %b = attn.indexer_candidates %q, %k, %w {block_size = 4 : i64, blocks = 6 : i64, ratio = 1 : i64, scale = 2.500000e-01 : f64} : (tensor<?x4x24xbf16>, tensor<?x24xbf16>, tensor<?x4xbf16>) -> tensor<?x?xi64>
  return %t, %b : tensor<?x?xi64>, tensor<?x?xi64>
}

// -----

// The tensor-core indexer (16-bit query and keys, static K): its variant
// recorded beside the FMA grid. Top-k 512 of 32 heads x 128: a candidate
// buffer of 1024 entries a row at 4 CTAs per SM (c1024_o4); 16 candidate
// blocks: 128 entries; top-k within the candidate blocks (mode 1) sized
// for the last chunk's entries, capacity / ratio = 131072: with 16 blocks
// of 16 a row it gathers the picked entries (2 rows x 256 entries, under
// half of 131072), with 4096 blocks of 16 it streams the key tiles they
// touch. The H20 has the H200's shared memory per SM, so only the FMA
// grid differs.
// CHECK-LABEL: func.func @v41_indexers
// CHECK: attn.indexer_topk {{.*}}h20.kernel = {cap = 1024 : i64, ctas = 264 : i64, ctas_per_sm = 4 : i64, kind = "mma", padded_dim = 128 : i64, padded_heads = 32 : i64}
// CHECK: attn.indexer_candidates {{.*}}h20.kernel = {cap = 128 : i64, ctas = 264 : i64, ctas_per_sm = 4 : i64, kind = "mma", padded_dim = 128 : i64, padded_heads = 32 : i64}
// CHECK: attn.indexer_topk {{.*}}candidates{{.*}}h20.kernel = {cap = 1024 : i64, ctas = 264 : i64, ctas_per_sm = 4 : i64, entries = 131072 : i64, gather = true, kind = "mma", padded_dim = 128 : i64, padded_heads = 32 : i64}
// CHECK: attn.indexer_topk {{.*}}candidates{{.*}}h20.kernel = {{{.*}}entries = 131072 : i64, gather = false, kind = "mma"
// H20-LABEL: func.func @v41_indexers
// H20: attn.indexer_topk {{.*}}h20.kernel = {cap = 1024 : i64, ctas = 156 : i64, ctas_per_sm = 4 : i64, kind = "mma"
// H20: attn.indexer_candidates {{.*}}h20.kernel = {cap = 128 : i64, ctas = 156 : i64, ctas_per_sm = 4 : i64, kind = "mma"
func.func @v41_indexers(%q: tensor<?x32x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<?x32xbf16>, %c: tensor<?x16xi64>, %c2: tensor<?x4096xi64>, %s: index) -> (tensor<?x512xi64>, tensor<?x16xi64>, tensor<?x512xi64>, tensor<?x512xi64>) attributes {h20.chunked = {capacity = 131072 : i64, chunk = 8192 : i64, dim = 1 : i64, input = 0 : i64, output = "last"}} {
  %t = attn.indexer_topk %q, %k, %w start(%s) {ratio = 4 : i64, scale = 0.088 : f64, topk = 512 : i64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x512xi64>
  %b = attn.indexer_candidates %q, %k, %w start(%s) {block_size = 16 : i64, blocks = 16 : i64, ratio = 1 : i64, scale = 0.088 : f64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x16xi64>
  %w1 = attn.indexer_topk %q, %k, %w candidates(%c : tensor<?x16xi64>) start(%s) {block_size = 16 : i64, ratio = 1 : i64, scale = 0.088 : f64, topk = 512 : i64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x512xi64>
  %w2 = attn.indexer_topk %q, %k, %w candidates(%c2 : tensor<?x4096xi64>) start(%s) {block_size = 16 : i64, ratio = 1 : i64, scale = 0.088 : f64, topk = 512 : i64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x512xi64>
  return %t, %b, %w1, %w2 : tensor<?x512xi64>, tensor<?x16xi64>, tensor<?x512xi64>, tensor<?x512xi64>
}

// -----

// V4.1's spelling: the candidate blocks' [S, 2048] behind a tensor.cast
// to [?, ?]: the count is read before the cast (2 rows x 2048 blocks of 8
// under half of 131072 entries: gathered).
// CHECK-LABEL: func.func @candidates_through_cast
// CHECK: attn.indexer_topk {{.*}}candidates{{.*}}h20.kernel = {{{.*}}entries = 131072 : i64, gather = true, kind = "mma"
func.func @candidates_through_cast(%q: tensor<?x32x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<?x32xbf16>, %s: index) -> tensor<?x512xi64> attributes {h20.chunked = {capacity = 131072 : i64, chunk = 8192 : i64, dim = 1 : i64, input = 0 : i64, output = "last"}} {
  %b = attn.indexer_candidates %q, %k, %w start(%s) {block_size = 8 : i64, blocks = 2048 : i64, ratio = 1 : i64, scale = 0.088 : f64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x2048xi64>
  %c = tensor.cast %b : tensor<?x2048xi64> to tensor<?x?xi64>
  %t = attn.indexer_topk %q, %k, %w candidates(%c : tensor<?x?xi64>) start(%s) {block_size = 8 : i64, ratio = 1 : i64, scale = 0.088 : f64, topk = 512 : i64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x512xi64>
  return %t : tensor<?x512xi64>
}

// -----

// Top-k within candidate blocks in a whole-prompt program of dynamic
// length: the entries are unknown, so its shared memory cannot be sized:
// the FMA kernel. f32: the FMA kernel too.
// CHECK-LABEL: func.func @indexer_fma
// CHECK: attn.indexer_topk {{.*}}candidates{{.*}}h20.kernel = {ctas = 264 : i64, kind = "fma"}
// CHECK: attn.indexer_topk {{.*}}h20.kernel = {ctas = 264 : i64, kind = "fma"}
func.func @indexer_fma(%q: tensor<?x32x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<?x32xbf16>, %c: tensor<?x16xi64>, %qf: tensor<?x32x128xf32>, %kf: tensor<?x128xf32>, %wf: tensor<?x32xf32>) -> (tensor<?x512xi64>, tensor<?x512xi64>) {
  %w1 = attn.indexer_topk %q, %k, %w candidates(%c : tensor<?x16xi64>) {block_size = 16 : i64, ratio = 1 : i64, scale = 0.088 : f64, topk = 512 : i64} : (tensor<?x32x128xbf16>, tensor<?x128xbf16>, tensor<?x32xbf16>) -> tensor<?x512xi64>
  %t = attn.indexer_topk %qf, %kf, %wf {ratio = 4 : i64, scale = 0.088 : f64, topk = 512 : i64} : (tensor<?x32x128xf32>, tensor<?x128xf32>, tensor<?x32xf32>) -> tensor<?x512xi64>
  return %w1, %t : tensor<?x512xi64>, tensor<?x512xi64>
}

// -----

// Sparse attention, all 64 heads in one CTA, the latent's width padded to
// a multiple of 64: the wgmma kernel where it takes that width (512; its
// O columns per consumer warpgroup, 256, are a wgmma N), the mma.sync
// kernel for 192; kernel=mma keeps mma.sync for both.
// CHECK-LABEL: func.func @sparse
// CHECK: attn.sparse_attention {{.*}}h20.kernel = {heads_per_cta = 64 : i64, kind = "wgmma", padded_dim = 512 : i64, threads = 384 : i64}
// CHECK: attn.sparse_attention {{.*}}h20.kernel = {heads_per_cta = 64 : i64, kind = "mma", padded_dim = 192 : i64, threads = 256 : i64}
// MMA-LABEL: func.func @sparse
// MMA: attn.sparse_attention {{.*}}h20.kernel = {heads_per_cta = 64 : i64, kind = "mma", padded_dim = 512 : i64, threads = 256 : i64}
// MMA: attn.sparse_attention {{.*}}h20.kernel = {heads_per_cta = 64 : i64, kind = "mma", padded_dim = 192 : i64, threads = 256 : i64}
// 128 + 5000 key slots at 512 wide: over the wgmma kernel's shared memory
// (its Q, two key tiles and two P tiles leave room for 4320), within the
// mma.sync kernel's (6640): mma.sync.
// CHECK: attn.sparse_attention {{.*}}h20.kernel = {heads_per_cta = 64 : i64, kind = "mma", padded_dim = 512 : i64, threads = 256 : i64}
func.func @sparse(%q: tensor<?x64x512xbf16>, %l: tensor<?x512xbf16>, %s: tensor<64xf32>, %c: tensor<?x512xbf16>, %i: tensor<?x512xi64>, %q2: tensor<?x64x136xbf16>, %l2: tensor<?x136xbf16>, %i5000: tensor<?x5000xi64>) -> (tensor<?x64x512xbf16>, tensor<?x64x136xbf16>) {
  %0 = attn.sparse_attention %q, %l, %s compressed(%c : tensor<?x512xbf16>, %i : tensor<?x512xi64>) {scale = 0.044 : f64, window = 128 : i64} : (tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>) -> tensor<?x64x512xbf16>
  %1 = attn.sparse_attention %q2, %l2, %s {scale = 0.085 : f64, window = 128 : i64} : (tensor<?x64x136xbf16>, tensor<?x136xbf16>, tensor<64xf32>) -> tensor<?x64x136xbf16>
  %2 = attn.sparse_attention %q, %l, %s compressed(%c : tensor<?x512xbf16>, %i5000 : tensor<?x5000xi64>) {scale = 0.044 : f64, window = 128 : i64} : (tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<64xf32>) -> tensor<?x64x512xbf16>
  return %0, %1 : tensor<?x64x512xbf16>, tensor<?x64x136xbf16>
}

// -----

// Routed experts: the token tile whose scratch fits 8 GiB (8 experts, 2
// picks, 64 wide, 32 intermediate: 1472 bytes a token, 5835520 tokens)
// and the expert GEMM: on a Hopper target the MXFP4 kernel on wgmma for
// bf16 tokens, on mma.sync for f32 ones (and for every type with
// kernel=mma), or cuBLASLt's grouped GEMMs on float weights.
// CHECK-LABEL: func.func @experts
// CHECK: onnx.h20.RoutedExpertsMxfp4{{.*}}h20.kernel = {expert_gemm = "mxfp4_wgmma", tile_tokens = 5835520 : i64}
// CHECK: onnx.h20.RoutedExperts({{.*}}h20.kernel = {expert_gemm = "cublaslt", tile_tokens = 5835520 : i64}
// CHECK: onnx.h20.RoutedExpertsMxfp4{{.*}}h20.kernel = {expert_gemm = "mxfp4", tile_tokens =
// MMA-LABEL: func.func @experts
// MMA: onnx.h20.RoutedExpertsMxfp4{{.*}}h20.kernel = {expert_gemm = "mxfp4", tile_tokens = 5835520 : i64}
// MMA: onnx.h20.RoutedExperts({{.*}}h20.kernel = {expert_gemm = "cublaslt", tile_tokens = 5835520 : i64}
func.func @experts(%x: tensor<?x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>, %w1: tensor<8x32x32xi8>, %s1: tensor<8x32x2xi8>, %w3: tensor<8x32x32xi8>, %s3: tensor<8x32x2xi8>, %w2: tensor<8x64x16xi8>, %s2: tensor<8x64x1xi8>, %f1: tensor<8x64x32xbf16>, %f3: tensor<8x64x32xbf16>, %f2: tensor<8x32x64xbf16>, %xf: tensor<?x64xf32>, %rf: tensor<64x8xf32>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x64xf32>) {
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  %1 = onnx.h20.RoutedExperts(%x, %r, %b, %f1, %f3, %f2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x64x32xbf16>, tensor<8x64x32xbf16>, tensor<8x32x64xbf16>) -> tensor<?x64xbf16>
  %2 = onnx.h20.RoutedExpertsMxfp4(%xf, %rf, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xf32>
  return %0, %1, %2 : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x64xf32>
}

// -----

// V4.1-Flash's MXFP4 experts (384, top 6, 5120 wide, 2304 intermediate:
// 324192 scratch bytes a token). Alone, 8 GiB holds 26368 tokens; in a
// chunked prefill of 33792-token chunks (h20.chunked) the scratch grows
// to 10.2 GiB (at most 16) so that a chunk is one tile: every expert's
// rows in one GEMM.
// CHECK-LABEL: func.func @flash_experts_whole
// CHECK: h20.kernel = {expert_gemm = "mxfp4_wgmma", tile_tokens = 26368 : i64}
// CHECK-LABEL: func.func @flash_experts_chunked
// CHECK: h20.kernel = {expert_gemm = "mxfp4_wgmma", tile_tokens = 33792 : i64}
func.func @flash_experts_whole(%x: tensor<?x5120xbf16>, %r: tensor<5120x384xbf16>, %b: tensor<384xf32>, %w1: tensor<384x2304x2560xi8>, %s1: tensor<384x2304x160xi8>, %w2: tensor<384x5120x1152xi8>, %s2: tensor<384x5120x72xi8>) -> tensor<?x5120xbf16> {
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w1, %s1, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 6 : si64} : (tensor<?x5120xbf16>, tensor<5120x384xbf16>, tensor<384xf32>, tensor<384x2304x2560xi8>, tensor<384x2304x160xi8>, tensor<384x2304x2560xi8>, tensor<384x2304x160xi8>, tensor<384x5120x1152xi8>, tensor<384x5120x72xi8>) -> tensor<?x5120xbf16>
  return %0 : tensor<?x5120xbf16>
}
func.func @flash_experts_chunked(%x: tensor<?x5120xbf16>, %r: tensor<5120x384xbf16>, %b: tensor<384xf32>, %w1: tensor<384x2304x2560xi8>, %s1: tensor<384x2304x160xi8>, %w2: tensor<384x5120x1152xi8>, %s2: tensor<384x5120x72xi8>) -> tensor<?x5120xbf16> attributes {h20.chunked = {capacity = 135168 : i64, chunk = 33792 : i64, dim = 1 : i64, input = 0 : i64, output = "last"}} {
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w1, %s1, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 6 : si64} : (tensor<?x5120xbf16>, tensor<5120x384xbf16>, tensor<384xf32>, tensor<384x2304x2560xi8>, tensor<384x2304x160xi8>, tensor<384x2304x2560xi8>, tensor<384x2304x160xi8>, tensor<384x5120x1152xi8>, tensor<384x5120x72xi8>) -> tensor<?x5120xbf16>
  return %0 : tensor<?x5120xbf16>
}

// -----

// expert-gemm=fp8 (an explicit choice: the token rows are quantised):
// Flash's experts (hidden 5120, intermediate 2304: multiples of 128) run
// the FP8 kernel; the tiny ones (64, 32) keep the bf16 wgmma kernel and
// say why.
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels{expert-gemm=fp8}))' 2>/dev/null | FileCheck %s --check-prefix=FP8
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels{expert-gemm=fp8}))' 2>&1 >/dev/null | FileCheck %s --check-prefix=FP8REMARK
// RUN: not h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-choose-attention-kernels{expert-gemm=fp4}))' 2>&1 | FileCheck %s --check-prefix=BADGEMM
// FP8-LABEL: func.func @fp8_experts
// FP8: h20.kernel = {expert_gemm = "mxfp4_fp8", tile_tokens = 26368 : i64}
// FP8REMARK: remark: expert-gemm=fp8: these MXFP4 experts keep bf16 GEMMs (hidden 64 and intermediate 32 must be multiples of 128)
// FP8: h20.kernel = {expert_gemm = "mxfp4_wgmma", tile_tokens = 5835520 : i64}
// BADGEMM: expert-gemm must be bf16 or fp8, got 'fp4'
func.func @fp8_experts(%x: tensor<?x5120xbf16>, %r: tensor<5120x384xbf16>, %b: tensor<384xf32>, %w1: tensor<384x2304x2560xi8>, %s1: tensor<384x2304x160xi8>, %w2: tensor<384x5120x1152xi8>, %s2: tensor<384x5120x72xi8>, %xt: tensor<?x64xbf16>, %rt: tensor<64x8xbf16>, %bt: tensor<8xf32>, %t1: tensor<8x32x32xi8>, %ts1: tensor<8x32x2xi8>, %t2: tensor<8x64x16xi8>, %ts2: tensor<8x64x1xi8>) -> (tensor<?x5120xbf16>, tensor<?x64xbf16>) {
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w1, %s1, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 6 : si64} : (tensor<?x5120xbf16>, tensor<5120x384xbf16>, tensor<384xf32>, tensor<384x2304x2560xi8>, tensor<384x2304x160xi8>, tensor<384x2304x2560xi8>, tensor<384x2304x160xi8>, tensor<384x5120x1152xi8>, tensor<384x5120x72xi8>) -> tensor<?x5120xbf16>
  %1 = onnx.h20.RoutedExpertsMxfp4(%xt, %rt, %bt, %t1, %ts1, %t1, %ts1, %t2, %ts2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  return %0, %1 : tensor<?x5120xbf16>, tensor<?x64xbf16>
}
