// RUN: h20-opt %s -split-input-file -verify-diagnostics
// One negative case (at least) for every rule of every attn verifier.

func.func @rms_norm_eps(%x: tensor<4x128xf32>, %w: tensor<128xf32>) -> tensor<4x128xf32> {
  // expected-error @+1 {{epsilon must be > 0, got 0}}
  %0 = attn.rms_norm %x, %w {epsilon = 0.0 : f64} : (tensor<4x128xf32>, tensor<128xf32>) -> tensor<4x128xf32>
  return %0 : tensor<4x128xf32>
}

// -----

func.func @rms_scale_eps(%y: tensor<4x24xf32>, %x: tensor<4x128xf32>) -> tensor<4x24xf32> {
  // expected-error @+1 {{epsilon must be > 0, got -1}}
  %0 = attn.rms_scale %y, %x {epsilon = -1.0 : f64} : (tensor<4x24xf32>, tensor<4x128xf32>) -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

func.func @rms_scale_rank(%y: tensor<4x24xf32>, %x: tensor<2x4x128xf32>) -> tensor<4x24xf32> {
  // expected-error @+1 {{value and input must have one rank >= 1, got 2 and 3}}
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64} : (tensor<4x24xf32>, tensor<2x4x128xf32>) -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

func.func @rms_scale_rows(%y: tensor<4x24xf32>, %x: tensor<5x128xf32>) -> tensor<4x24xf32> {
  // expected-error @+1 {{value dimension 0 (4) does not match input dimension 0 (5)}}
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64} : (tensor<4x24xf32>, tensor<5x128xf32>) -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

func.func @rms_scale_result_shape(%y: tensor<4x24xf32>, %x: tensor<4x128xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{result dimension 1 (16) does not match value dimension 1 (24)}}
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64} : (tensor<4x24xf32>, tensor<4x128xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @rms_scale_result_wider(%y: tensor<4x24xbf16>, %x: tensor<4x128xbf16>) -> tensor<4x24xf32> {
  // expected-error @+1 {{result element type 'f32' is neither value's 'bf16' nor narrower than its f32 / f64}}
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64} : (tensor<4x24xbf16>, tensor<4x128xbf16>) -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

func.func @rms_scale_result_f16(%y: tensor<4x24xbf16>, %x: tensor<4x128xbf16>) -> tensor<4x24xf16> {
  // expected-error @+1 {{result element type 'f16' is neither value's 'bf16' nor narrower than its f32 / f64}}
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64} : (tensor<4x24xbf16>, tensor<4x128xbf16>) -> tensor<4x24xf16>
  return %0 : tensor<4x24xf16>
}

// -----

func.func @rms_scale_compute_type(%y: tensor<4x24xf32>, %x: tensor<4x128xf32>) -> tensor<4x24xf32> {
  // expected-error @+1 {{compute_type must be a float type, got 'i32'}}
  %0 = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64, compute_type = i32} : (tensor<4x24xf32>, tensor<4x128xf32>) -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

func.func @rms_norm_axis(%x: tensor<4x128xf32>, %w: tensor<128xf32>) -> tensor<4x128xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<4x128xf32>, tensor<128xf32>) -> tensor<4x128xf32>
  return %0 : tensor<4x128xf32>
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<4x128xf32>, %w: tensor<4x128xf32>) -> tensor<4x128xf32> {
  // expected-error @+1 {{weight rank 2 exceeds the 1 normalised trailing dimension(s)}}
  %0 = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<4x128xf32>, tensor<4x128xf32>) -> tensor<4x128xf32>
  return %0 : tensor<4x128xf32>
}

// -----

func.func @rms_norm_weight_dim(%x: tensor<4x128xf32>, %w: tensor<64xf32>) -> tensor<4x128xf32> {
  // expected-error @+1 {{weight dimension 0 (64) does not match input dimension 1 (128)}}
  %0 = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<4x128xf32>, tensor<64xf32>) -> tensor<4x128xf32>
  return %0 : tensor<4x128xf32>
}

// -----

func.func @rms_norm_compute_type(%x: tensor<4x128xf32>, %w: tensor<128xf32>) -> tensor<4x128xf32> {
  // expected-error @+1 {{compute_type must be a float type, got 'i32'}}
  %0 = attn.rms_norm %x, %w {epsilon = 1.0e-6 : f64, compute_type = i32} : (tensor<4x128xf32>, tensor<128xf32>) -> tensor<4x128xf32>
  return %0 : tensor<4x128xf32>
}

// -----

func.func @rope_rank(%x: tensor<8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<8x16x16xf32> {
  // expected-error @+1 {{input must be [B, H, S, D], got rank 3}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<8x16x16xf32>, tensor<1x16xi64>) -> tensor<8x16x16xf32>
  return %0 : tensor<8x16x16xf32>
}

// -----

func.func @rope_positions_rank(%x: tensor<1x8x16x16xf32>, %p: tensor<16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{positions must be [B, S], got rank 1}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<1x8x16x16xf32>, tensor<16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_positions_shape(%x: tensor<1x8x16x16xf32>, %p: tensor<1x15xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{positions shape [1, 15] does not match input batch/sequence [1, 16]}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<1x8x16x16xf32>, tensor<1x15xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_theta(%x: tensor<1x8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{theta must be > 1, got 1}}
  %0 = attn.rope %x, %p {theta = 1.0 : f64, rotary_dim = 16 : i64, interleaved = false} : (tensor<1x8x16x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_odd_dim(%x: tensor<1x8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{rotary_dim must be positive and even, got 7}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 7 : i64, interleaved = false} : (tensor<1x8x16x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_dim_too_big(%x: tensor<1x8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{rotary_dim 32 exceeds head_dim 16}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 32 : i64, interleaved = false} : (tensor<1x8x16x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_linear_needs_factor(%x: tensor<1x8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{scaling 'linear' requires attribute 'factor'}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false, scaling = #attn.rope_scaling<linear>} : (tensor<1x8x16x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_yarn_needs_original(%x: tensor<1x8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{scaling 'yarn' requires attribute 'original_max_positions'}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = true, scaling = #attn.rope_scaling<yarn>, factor = 16.0 : f64} : (tensor<1x8x16x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_llama3_needs_bands(%x: tensor<1x8x16x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{scaling 'llama3' requires attribute 'low_freq_factor'}}
  %0 = attn.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = false, scaling = #attn.rope_scaling<llama3>, factor = 8.0 : f64, original_max_positions = 8192 : i64} : (tensor<1x8x16x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_rank(%q: tensor<8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{query must be [B, H, S, D], got rank 3}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_group_zero(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{kv_group must be >= 1, got 0}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, kv_group = 0 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_kv_mismatch(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>, %v: tensor<1x2x12x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{key and value must agree on KV heads and sequence}}
  %0 = attn.attention %q, %k, %v {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x12x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{query head_dim 32 differs from key head_dim 16}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x16x32xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_group(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{query heads (8) must equal kv_group (2) x KV heads (2)}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, kv_group = 2 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_result(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x8x16xf32> {
  // expected-error @+1 {{result must be [B, Hq, S_q, Dv] of the inputs}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x8x16xf32>
  return %0 : tensor<1x8x8x16xf32>
}

// -----

func.func @attention_scale(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{scale must be a positive finite number, got -1}}
  %0 = attn.attention %q, %k, %k {scale = -1.0 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_window(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{window must be >= 1 (it counts the current token), got 0}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, window = 0 : i64, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_softcap(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{softcap must be > 0, got 0}}
  %0 = attn.attention %q, %k, %k {scale = 0.25 : f64, causal = true, softcap = 0.0 : f64, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_sink(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>, %s: tensor<2xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{sink must be [Hq] = [8]}}
  %0 = attn.attention %q, %k, %k sink(%s : tensor<2xf32>) {scale = 0.25 : f64, causal = true, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @attention_mask_rank(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>, %m: tensor<1x1x1x16x16xi1>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{mask rank must be <= 4, got 5}}
  %0 = attn.attention %q, %k, %k mask(%m : tensor<1x1x1x16x16xi1>) {scale = 0.25 : f64, causal = false, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @rope_table_dim() {
  // expected-error @+1 {{rotary_dim must be positive and even, got 7}}
  %c, %f = attn.rope_table {theta = 1.0e4 : f64, rotary_dim = 7 : i64, max_positions = 256 : i64, block = 16 : i64, representation = "two_level"} : tensor<2x16x3xf32>, tensor<2x16x3xf32>
  return
}

// -----

func.func @rope_table_positions() {
  // expected-error @+1 {{max_positions and block must be positive}}
  %c, %f = attn.rope_table {theta = 1.0e4 : f64, rotary_dim = 8 : i64, max_positions = 0 : i64, block = 16 : i64, representation = "two_level"} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @rope_table_representation() {
  // expected-error @+1 {{unknown representation 'full'}}
  %c, %f = attn.rope_table {theta = 1.0e4 : f64, rotary_dim = 8 : i64, max_positions = 256 : i64, block = 16 : i64, representation = "full"} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @rope_table_seq_len(%n: index) {
  // expected-error @+1 {{seq_len is required by, and only by, dynamic_ntk scaling}}
  %c, %f = attn.rope_table %n {theta = 1.0e4 : f64, rotary_dim = 8 : i64, max_positions = 256 : i64, block = 16 : i64, representation = "two_level"} : tensor<2x16x4xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @rope_table_shape() {
  // expected-error @+1 {{tables must be [2, 16, 4] and [2, 16, 4]}}
  %c, %f = attn.rope_table {theta = 1.0e4 : f64, rotary_dim = 8 : i64, max_positions = 256 : i64, block = 16 : i64, representation = "two_level"} : tensor<2x8x4xf32>, tensor<2x16x4xf32>
  return
}

// -----

func.func @rope_apply_rank(%x: tensor<2x16x8xf32>, %p: tensor<1x16xi64>, %c: tensor<2x16x4xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{input must be [B, H, S, D], got rank 3}}
  %y = attn.rope_apply %x, %p, %c, %c {rotary_dim = 8 : i64, interleaved = false, block = 16 : i64} : (tensor<2x16x8xf32>, tensor<1x16xi64>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x8xf32>
  return %y : tensor<2x16x8xf32>
}

// -----

func.func @rope_apply_dim(%x: tensor<1x2x16x8xf32>, %p: tensor<1x16xi64>, %c: tensor<2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{rotary_dim 16 must be even and <= head_dim}}
  %y = attn.rope_apply %x, %p, %c, %c {rotary_dim = 16 : i64, interleaved = false, block = 16 : i64} : (tensor<1x2x16x8xf32>, tensor<1x16xi64>, tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %y : tensor<1x2x16x8xf32>
}

// -----

func.func @rope_apply_tables(%x: tensor<1x2x16x8xf32>, %p: tensor<1x16xi64>, %c: tensor<2x16x4xf32>) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{tables do not match rotary_dim 8 and block 32}}
  %y = attn.rope_apply %x, %p, %c, %c {rotary_dim = 8 : i64, interleaved = false, block = 32 : i64} : (tensor<1x2x16x8xf32>, tensor<1x16xi64>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<1x2x16x8xf32>
  return %y : tensor<1x2x16x8xf32>
}

// -----

func.func @scores_shape(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x12x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{result must be [B, Hq, S_q, S_kv] of the inputs}}
  %0 = attn.attention_scores %q, %k {stage = #attn.score_stage<scaled>, scale = 0.25 : f64, causal = false, kv_group = 4 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x12x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @scores_group(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{query heads (8) must equal kv_group (2) x KV heads (2)}}
  %0 = attn.attention_scores %q, %k {stage = #attn.score_stage<masked>, scale = 0.25 : f64, causal = true, kv_group = 2 : i64} : (tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %0 : tensor<1x8x16x16xf32>
}

// -----

func.func @sparse_attention_ring_without_start(%q: tensor<8x4x64xf32>, %kv: tensor<8x64xf32>, %s: tensor<4xf32>, %first: index) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{a latent_start (a window ring) needs the queries' start}}
  %0 = attn.sparse_attention %q, %kv, %s latent_start(%first) {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<8x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_ring_misses_window(%q: tensor<8x4x64xf32>, %kv: tensor<16x64xf32>, %s: tensor<4xf32>) -> tensor<8x4x64xf32> {
  %p0 = arith.constant 40 : index
  %first = arith.constant 30 : index
  // expected-error @+1 {{latent_start 30 leaves out window rows of the query at 40 (window 16)}}
  %0 = attn.sparse_attention %q, %kv, %s start(%p0) latent_start(%first) {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<16x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_ring_too_short(%q: tensor<8x4x64xf32>, %kv: tensor<16x64xf32>, %s: tensor<4xf32>) -> tensor<8x4x64xf32> {
  %p0 = arith.constant 40 : index
  %first = arith.constant 25 : index
  // expected-error @+1 {{latent rows 16 starting at position 25 do not reach the last query's position 47}}
  %0 = attn.sparse_attention %q, %kv, %s start(%p0) latent_start(%first) {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<16x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_latent(%q: tensor<8x4x64xf32>, %kv: tensor<8x32xf32>, %s: tensor<4xf32>) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{latent must be [L, D] of the query [S, H, D]}}
  %0 = attn.sparse_attention %q, %kv, %s {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<8x32xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_latent_rows(%q: tensor<8x4x64xf32>, %kv: tensor<9x64xf32>, %s: tensor<4xf32>) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{latent must be [S, D] of the query [S, H, D] (or give a start)}}
  %0 = attn.sparse_attention %q, %kv, %s {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<9x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_start_rows(%q: tensor<8x4x64xf32>, %kv: tensor<7x64xf32>, %s: tensor<4xf32>, %p0: index) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{latent rows 7 < start 0 + query rows 8: the latent must hold every position up to the last query's}}
  %0 = attn.sparse_attention %q, %kv, %s start(%p0) {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<7x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_start_past_latent(%q: tensor<16x4x64xf32>, %kv: tensor<30x64xf32>, %s: tensor<4xf32>) -> tensor<16x4x64xf32> {
  %p0 = arith.constant 20 : index
  // expected-error @+1 {{latent rows 30 < start 20 + query rows 16: the latent must hold every position up to the last query's}}
  %0 = attn.sparse_attention %q, %kv, %s start(%p0) {scale = 0.125 : f64, window = 16 : i64} : (tensor<16x4x64xf32>, tensor<30x64xf32>, tensor<4xf32>) -> tensor<16x4x64xf32>
  return %0 : tensor<16x4x64xf32>
}

// -----

func.func @sparse_attention_sink(%q: tensor<8x4x64xf32>, %kv: tensor<8x64xf32>, %s: tensor<3xf32>) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{sink must be [H] = [4]}}
  %0 = attn.sparse_attention %q, %kv, %s {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<8x64xf32>, tensor<3xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_window(%q: tensor<8x4x64xf32>, %kv: tensor<8x64xf32>, %s: tensor<4xf32>) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{window must be positive, got 0}}
  %0 = attn.sparse_attention %q, %kv, %s {scale = 0.125 : f64, window = 0 : i64} : (tensor<8x4x64xf32>, tensor<8x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_compressed(%q: tensor<8x4x64xf32>, %kv: tensor<8x64xf32>, %s: tensor<4xf32>, %c: tensor<2x32xf32>, %i: tensor<8x2xi64>) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{compressed entries must have the head dim 64}}
  %0 = attn.sparse_attention %q, %kv, %s compressed(%c : tensor<2x32xf32>, %i : tensor<8x2xi64>) {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<8x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @sparse_attention_indices(%q: tensor<8x4x64xf32>, %kv: tensor<8x64xf32>, %s: tensor<4xf32>, %c: tensor<2x64xf32>, %i: tensor<7x2xi64>) -> tensor<8x4x64xf32> {
  // expected-error @+1 {{indices must have one row per query}}
  %0 = attn.sparse_attention %q, %kv, %s compressed(%c : tensor<2x64xf32>, %i : tensor<7x2xi64>) {scale = 0.125 : f64, window = 16 : i64} : (tensor<8x4x64xf32>, tensor<8x64xf32>, tensor<4xf32>) -> tensor<8x4x64xf32>
  return %0 : tensor<8x4x64xf32>
}

// -----

func.func @indexer_head_dim(%q: tensor<8x4x32xf32>, %k: tensor<4x16xf32>, %w: tensor<8x4xf32>) -> tensor<8x4xi64> {
  // expected-error @+1 {{query and keys disagree on the indexer head dim: 32 vs 16}}
  %0 = attn.indexer_topk %q, %k, %w {ratio = 2 : i64, topk = 4 : i64, scale = 0.1 : f64} : (tensor<8x4x32xf32>, tensor<4x16xf32>, tensor<8x4xf32>) -> tensor<8x4xi64>
  return %0 : tensor<8x4xi64>
}

// -----

func.func @indexer_weights(%q: tensor<8x4x32xf32>, %k: tensor<4x32xf32>, %w: tensor<8x2xf32>) -> tensor<8x4xi64> {
  // expected-error @+1 {{weights must be [S, Hi] of the query}}
  %0 = attn.indexer_topk %q, %k, %w {ratio = 2 : i64, topk = 4 : i64, scale = 0.1 : f64} : (tensor<8x4x32xf32>, tensor<4x32xf32>, tensor<8x2xf32>) -> tensor<8x4xi64>
  return %0 : tensor<8x4xi64>
}

// -----

func.func @indexer_ratio(%q: tensor<8x4x32xf32>, %k: tensor<4x32xf32>, %w: tensor<8x4xf32>) -> tensor<8x4xi64> {
  // expected-error @+1 {{ratio must be positive, got 0}}
  %0 = attn.indexer_topk %q, %k, %w {ratio = 0 : i64, topk = 4 : i64, scale = 0.1 : f64} : (tensor<8x4x32xf32>, tensor<4x32xf32>, tensor<8x4xf32>) -> tensor<8x4xi64>
  return %0 : tensor<8x4xi64>
}

// -----

func.func @indexer_candidates_block(%q: tensor<8x4x32xf32>, %k: tensor<4x32xf32>, %w: tensor<8x4xf32>, %c: tensor<8x2xi64>) -> tensor<8x4xi64> {
  // expected-error @+1 {{candidates need a positive block_size}}
  %0 = attn.indexer_topk %q, %k, %w candidates(%c : tensor<8x2xi64>) {ratio = 2 : i64, topk = 4 : i64, scale = 0.1 : f64} : (tensor<8x4x32xf32>, tensor<4x32xf32>, tensor<8x4xf32>) -> tensor<8x4xi64>
  return %0 : tensor<8x4xi64>
}

// -----

func.func @indexer_blocks(%q: tensor<8x4x32xf32>, %k: tensor<4x32xf32>, %w: tensor<8x4xf32>) -> tensor<8x2xi64> {
  // expected-error @+1 {{blocks and block_size must be positive}}
  %0 = attn.indexer_candidates %q, %k, %w {ratio = 2 : i64, blocks = 0 : i64, block_size = 4 : i64, scale = 0.1 : f64} : (tensor<8x4x32xf32>, tensor<4x32xf32>, tensor<8x4xf32>) -> tensor<8x2xi64>
  return %0 : tensor<8x2xi64>
}

// -----

// Positions of batch 2 against an input of batch 3 (a batch of 1 would
// broadcast).
func.func @rope_apply_positions(%x: tensor<3x2x16x8xf32>, %p: tensor<2x16xi64>, %c: tensor<2x1x4xf32>, %f: tensor<2x16x4xf32>) -> tensor<3x2x16x8xf32> {
  // expected-error @+1 {{positions shape [2, 16] does not match input batch/sequence [3, 16] (a batch of 1 broadcasts)}}
  %y = attn.rope_apply %x, %p, %c, %f {rotary_dim = 8 : i64, interleaved = false, block = 16 : i64} : (tensor<3x2x16x8xf32>, tensor<2x16xi64>, tensor<2x1x4xf32>, tensor<2x16x4xf32>) -> tensor<3x2x16x8xf32>
  return %y : tensor<3x2x16x8xf32>
}
