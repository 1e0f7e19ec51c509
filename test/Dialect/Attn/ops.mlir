// RUN: h20-opt %s | h20-opt | FileCheck %s
// Round trip of every attn op and attribute form.

// CHECK-LABEL: func.func @rms_norm
// CHECK: attn.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64} : (tensor<1x?x128xf32>, tensor<128xf32>) -> tensor<1x?x128xf32>
func.func @rms_norm(%x: tensor<1x?x128xf32>, %w: tensor<128xf32>) -> tensor<1x?x128xf32> {
  %0 = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<1x?x128xf32>, tensor<128xf32>) -> tensor<1x?x128xf32>
  return %0 : tensor<1x?x128xf32>
}

// CHECK-LABEL: func.func @rms_scale
// CHECK: attn.rms_scale %{{.*}}, %{{.*}} {compute_type = f32, epsilon = 9.9999999999999995E-21 : f64} : (tensor<?x24xbf16>, tensor<?x20480xbf16>) -> tensor<?x24xbf16>
func.func @rms_scale(%y: tensor<?x24xbf16>, %x: tensor<?x20480xbf16>) -> tensor<?x24xbf16> {
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-20 : f64, compute_type = f32} : (tensor<?x24xbf16>, tensor<?x20480xbf16>) -> tensor<?x24xbf16>
  return %0 : tensor<?x24xbf16>
}

// A GEMM's float32 sums scaled and rounded once to bf16.
// CHECK-LABEL: func.func @rms_scale_sums
// CHECK: attn.rms_scale {{.*}} : (tensor<?x24xf32>, tensor<?x20480xbf16>) -> tensor<?x24xbf16>
func.func @rms_scale_sums(%y: tensor<?x24xf32>, %x: tensor<?x20480xbf16>) -> tensor<?x24xbf16> {
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-20 : f64} : (tensor<?x24xf32>, tensor<?x20480xbf16>) -> tensor<?x24xbf16>
  return %0 : tensor<?x24xbf16>
}

// CHECK-LABEL: func.func @rms_norm_bf16_stash
// CHECK: attn.rms_norm {{.*}}compute_type = f32
func.func @rms_norm_bf16_stash(%x: tensor<1x?x128xbf16>, %w: tensor<128xbf16>) -> tensor<1x?x128xbf16> {
  %0 = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64, compute_type = f32} : (tensor<1x?x128xbf16>, tensor<128xbf16>) -> tensor<1x?x128xbf16>
  return %0 : tensor<1x?x128xbf16>
}

// CHECK-LABEL: func.func @rope_half
// CHECK: attn.rope %{{.*}}, %{{.*}} {interleaved = false, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64}
func.func @rope_half(%x: tensor<1x8x?x16xf32>, %p: tensor<1x?xi64>) -> tensor<1x8x?x16xf32> {
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<1x8x?x16xf32>, tensor<1x?xi64>) -> tensor<1x8x?x16xf32>
  return %0 : tensor<1x8x?x16xf32>
}

// CHECK-LABEL: func.func @rope_yarn_partial_interleaved
// CHECK: attn.rope {{.*}}interleaved = true{{.*}}rotary_dim = 64 : i64, scaling = #attn.rope_scaling<yarn>
func.func @rope_yarn_partial_interleaved(%x: tensor<1x4x?x512xbf16>, %p: tensor<1x?xi64>) -> tensor<1x4x?x512xbf16> {
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 64 : i64, interleaved = true,
      scaling = #attn.rope_scaling<yarn>, factor = 16.0 : f64, original_max_positions = 65536 : i64,
      beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, mscale = 1.0 : f64, mscale_all_dim = 1.0 : f64}
      : (tensor<1x4x?x512xbf16>, tensor<1x?xi64>) -> tensor<1x4x?x512xbf16>
  return %0 : tensor<1x4x?x512xbf16>
}

// CHECK-LABEL: func.func @rope_linear_llama3
// CHECK: scaling = #attn.rope_scaling<linear>
// CHECK: scaling = #attn.rope_scaling<llama3>
// CHECK: scaling = #attn.rope_scaling<dynamic_ntk>
func.func @rope_linear_llama3(%x: tensor<1x32x?x128xf32>, %p: tensor<1x?xi64>) -> tensor<1x32x?x128xf32> {
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 128 : i64, interleaved = false,
      scaling = #attn.rope_scaling<linear>, factor = 4.0 : f64} : (tensor<1x32x?x128xf32>, tensor<1x?xi64>) -> tensor<1x32x?x128xf32>
  %1 = attn.rope %0, %p {theta = 5.0e5 : f64, rotary_dim = 128 : i64, interleaved = false,
      scaling = #attn.rope_scaling<llama3>, factor = 8.0 : f64, original_max_positions = 8192 : i64,
      low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64} : (tensor<1x32x?x128xf32>, tensor<1x?xi64>) -> tensor<1x32x?x128xf32>
  %2 = attn.rope %1, %p {theta = 1.0e4 : f64, rotary_dim = 128 : i64, interleaved = false,
      scaling = #attn.rope_scaling<dynamic_ntk>, factor = 2.0 : f64} : (tensor<1x32x?x128xf32>, tensor<1x?xi64>) -> tensor<1x32x?x128xf32>
  return %2 : tensor<1x32x?x128xf32>
}

// CHECK-LABEL: func.func @attention_gqa_causal
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, kv_group = 4 : i64, scale = 2.500000e-01 : f64}
func.func @attention_gqa_causal(%q: tensor<1x8x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32> {
  %0 = attn.attention %q, %k, %v {scale = 0.25 : f64, causal = true, kv_group = 4 : i64}
      : (tensor<1x8x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x8x?x16xf32>
  return %0 : tensor<1x8x?x16xf32>
}

// CHECK-LABEL: func.func @attention_window_sink_mask
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<1x1x?x?xi1>) sink(%{{.*}} : tensor<4xf32>) {alignment = #attn.causal_alignment<top_left>, causal = true, kv_group = 1 : i64, scale = 1.250000e-01 : f64, softcap = 5.000000e+01 : f64, window = 128 : i64}
func.func @attention_window_sink_mask(%q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>,
                                      %m: tensor<1x1x?x?xi1>, %s: tensor<4xf32>) -> tensor<1x4x?x64xbf16> {
  %0 = attn.attention %q, %k, %v mask(%m : tensor<1x1x?x?xi1>) sink(%s : tensor<4xf32>)
      {scale = 0.125 : f64, causal = true, alignment = #attn.causal_alignment<top_left>, window = 128 : i64,
       softcap = 50.0 : f64, kv_group = 1 : i64}
      : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %0 : tensor<1x4x?x64xbf16>
}

// CHECK-LABEL: func.func @attention_scores
// CHECK: attn.attention_scores %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<?x?xf32>) {causal = false, kv_group = 2 : i64, scale = 2.500000e-01 : f64, stage = #attn.score_stage<probabilities>} : (tensor<1x4x?x16xf16>, tensor<1x2x?x16xf16>) -> tensor<1x4x?x?xf16>
func.func @attention_scores(%q: tensor<1x4x?x16xf16>, %k: tensor<1x2x?x16xf16>, %m: tensor<?x?xf32>) -> tensor<1x4x?x?xf16> {
  %0 = attn.attention_scores %q, %k mask(%m : tensor<?x?xf32>)
      {stage = #attn.score_stage<probabilities>, scale = 0.25 : f64, causal = false, kv_group = 2 : i64}
      : (tensor<1x4x?x16xf16>, tensor<1x2x?x16xf16>) -> tensor<1x4x?x?xf16>
  return %0 : tensor<1x4x?x?xf16>
}

// CHECK-LABEL: func.func @attention_mqa_diff_v_dim
// CHECK: attn.attention {{.*}}kv_group = 8 : i64{{.*}} -> tensor<1x8x?x32xf32>
func.func @attention_mqa_diff_v_dim(%q: tensor<1x8x?x16xf32>, %k: tensor<1x1x?x16xf32>, %v: tensor<1x1x?x32xf32>) -> tensor<1x8x?x32xf32> {
  %0 = attn.attention %q, %k, %v {scale = 0.25 : f64, causal = false, kv_group = 8 : i64}
      : (tensor<1x8x?x16xf32>, tensor<1x1x?x16xf32>, tensor<1x1x?x32xf32>) -> tensor<1x8x?x32xf32>
  return %0 : tensor<1x8x?x32xf32>
}

// CHECK-LABEL: func.func @rope_tables
// CHECK: %[[C:.*]], %[[F:.*]] = attn.rope_table {block = 16 : i64, max_positions = 256 : i64, representation = "two_level", rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
// CHECK: attn.rope_apply %arg0, %arg1, %[[C]], %[[F]] {block = 16 : i64, interleaved = true, rotary_dim = 8 : i64} : (tensor<1x2x?x8xf32>, tensor<1x?xi64>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<1x2x?x8xf32>
// CHECK: attn.rope_table %{{.*}} {{{.*}}scaling = #attn.rope_scaling<dynamic_ntk>
func.func @rope_tables(%x: tensor<1x2x?x8xf32>, %p: tensor<1x?xi64>, %n: index) -> tensor<1x2x?x8xf32> {
  %c, %f = attn.rope_table {theta = 1.0e4 : f64, rotary_dim = 8 : i64, max_positions = 256 : i64, block = 16 : i64, representation = "two_level"} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
  %y = attn.rope_apply %x, %p, %c, %f {rotary_dim = 8 : i64, interleaved = true, block = 16 : i64} : (tensor<1x2x?x8xf32>, tensor<1x?xi64>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<1x2x?x8xf32>
  %c2, %f2 = attn.rope_table %n {theta = 1.0e4 : f64, rotary_dim = 8 : i64, scaling = #attn.rope_scaling<dynamic_ntk>, factor = 2.0 : f64, original_max_positions = 64 : i64, max_positions = 256 : i64, block = 16 : i64, representation = "two_level"} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
  return %y : tensor<1x2x?x8xf32>
}

// CHECK-LABEL: func.func @sparse_attention
// CHECK: attn.sparse_attention %{{.*}}, %{{.*}}, %{{.*}} compressed(%{{.*}} : tensor<?x512xf32>, %{{.*}} : tensor<?x?xi64>) {scale = 0.044194173824159223 : f64, window = 128 : i64} : (tensor<?x64x512xf32>, tensor<?x512xf32>, tensor<64xf32>) -> tensor<?x64x512xf32>
// CHECK: attn.sparse_attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, window = 16 : i64}
func.func @sparse_attention(%q: tensor<?x64x512xf32>, %kv: tensor<?x512xf32>, %sink: tensor<64xf32>,
                            %c: tensor<?x512xf32>, %idx: tensor<?x?xi64>) -> (tensor<?x64x512xf32>, tensor<?x64x512xf32>) {
  %0 = attn.sparse_attention %q, %kv, %sink compressed(%c : tensor<?x512xf32>, %idx : tensor<?x?xi64>) {scale = 0.04419417382415922 : f64, window = 128 : i64} : (tensor<?x64x512xf32>, tensor<?x512xf32>, tensor<64xf32>) -> tensor<?x64x512xf32>
  %1 = attn.sparse_attention %q, %kv, %sink {scale = 0.125 : f64, window = 16 : i64} : (tensor<?x64x512xf32>, tensor<?x512xf32>, tensor<64xf32>) -> tensor<?x64x512xf32>
  return %0, %1 : tensor<?x64x512xf32>, tensor<?x64x512xf32>
}

// A later prefill chunk: the queries at positions %p0.. over the latent
// and the compressed entries of every earlier token.
// CHECK-LABEL: func.func @sparse_ops_at_start
// CHECK: attn.indexer_candidates %{{.*}}, %{{.*}}, %{{.*}} start(%{{.*}}) {block_size = 8 : i64
// CHECK: attn.indexer_topk %{{.*}}, %{{.*}}, %{{.*}} candidates(%{{.*}} : tensor<?x?xi64>) start(%{{.*}}) {block_size = 8 : i64
// CHECK: attn.sparse_attention %{{.*}}, %{{.*}}, %{{.*}} compressed(%{{.*}} : tensor<?x512xf32>, %{{.*}} : tensor<?x?xi64>) start(%{{.*}}) {scale = 1.250000e-01 : f64, window = 128 : i64}
func.func @sparse_ops_at_start(%q: tensor<?x64x512xf32>, %kv: tensor<?x512xf32>, %sink: tensor<64xf32>,
                               %c: tensor<?x512xf32>, %iq: tensor<?x32x128xf32>, %k: tensor<?x128xf32>,
                               %w: tensor<?x32xf32>, %p0: index) -> tensor<?x64x512xf32> {
  %b = attn.indexer_candidates %iq, %k, %w start(%p0) {ratio = 4 : i64, blocks = 64 : i64, block_size = 8 : i64, scale = 0.125 : f64} : (tensor<?x32x128xf32>, tensor<?x128xf32>, tensor<?x32xf32>) -> tensor<?x?xi64>
  %t = attn.indexer_topk %iq, %k, %w candidates(%b : tensor<?x?xi64>) start(%p0) {ratio = 4 : i64, topk = 512 : i64, block_size = 8 : i64, scale = 0.125 : f64} : (tensor<?x32x128xf32>, tensor<?x128xf32>, tensor<?x32xf32>) -> tensor<?x?xi64>
  %0 = attn.sparse_attention %q, %kv, %sink compressed(%c : tensor<?x512xf32>, %t : tensor<?x?xi64>) start(%p0) {scale = 0.125 : f64, window = 128 : i64} : (tensor<?x64x512xf32>, tensor<?x512xf32>, tensor<64xf32>) -> tensor<?x64x512xf32>
  return %0 : tensor<?x64x512xf32>
}

// A window ring: latent row r is position %first + r.
// CHECK-LABEL: func.func @sparse_attention_ring
// CHECK: attn.sparse_attention %{{.*}}, %{{.*}}, %{{.*}} start(%{{.*}}) latent_start(%{{.*}}) {scale = 1.250000e-01 : f64, window = 128 : i64}
func.func @sparse_attention_ring(%q: tensor<?x64x512xf32>, %kv: tensor<?x512xf32>, %sink: tensor<64xf32>,
                                 %p0: index, %first: index) -> tensor<?x64x512xf32> {
  %0 = attn.sparse_attention %q, %kv, %sink start(%p0) latent_start(%first) {scale = 0.125 : f64, window = 128 : i64} : (tensor<?x64x512xf32>, tensor<?x512xf32>, tensor<64xf32>) -> tensor<?x64x512xf32>
  return %0 : tensor<?x64x512xf32>
}

// CHECK-LABEL: func.func @indexer
// CHECK: attn.indexer_candidates %{{.*}}, %{{.*}}, %{{.*}} {block_size = 8 : i64, blocks = 2048 : i64, ratio = 1 : i64, scale = 0.08837890625 : f64}
// CHECK: attn.indexer_topk %{{.*}}, %{{.*}}, %{{.*}} candidates(%{{.*}} : tensor<?x?xi64>) {block_size = 8 : i64, ratio = 1 : i64, scale = 0.08837890625 : f64, topk = 512 : i64}
func.func @indexer(%q: tensor<?x32x128xf32>, %k: tensor<?x128xf32>, %w: tensor<?x32xf32>) -> tensor<?x?xi64> {
  %c = attn.indexer_candidates %q, %k, %w {ratio = 1 : i64, blocks = 2048 : i64, block_size = 8 : i64, scale = 0.08837890625 : f64} : (tensor<?x32x128xf32>, tensor<?x128xf32>, tensor<?x32xf32>) -> tensor<?x?xi64>
  %t = attn.indexer_topk %q, %k, %w candidates(%c : tensor<?x?xi64>) {ratio = 1 : i64, topk = 512 : i64, block_size = 8 : i64, scale = 0.08837890625 : f64} : (tensor<?x32x128xf32>, tensor<?x128xf32>, tensor<?x32xf32>) -> tensor<?x?xi64>
  return %t : tensor<?x?xi64>
}
