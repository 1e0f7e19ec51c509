// RUN: h20-opt %s -split-input-file -verify-diagnostics
// One negative case (at least) for every rule of the onnx verifiers.

func.func @arity_inputs(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.Add' op expects 2 input(s), got 1}}
  %0 = onnx.Add(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @arity_range(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.Slice' op expects 3 to 5 input(s), got 2}}
  %0 = onnx.Slice(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @arity_unbounded() -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.Concat' op expects at least 1 input(s), got 0}}
  %0 = onnx.Concat() {axis = 0 : si64} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @arity_outputs(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.Neg' op expects 1 output(s), got 2}}
  %0:2 = onnx.Neg(%a) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0 : tensor<4xf32>
}

// -----

func.func @constant_type() -> tensor<2xi64> {
  // expected-error @+1 {{value type 'tensor<3xi64>' differs from result type 'tensor<2xi64>'}}
  %0 = onnx.Constant() {value = dense<[1, 2, 3]> : tensor<3xi64>} : () -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @cast_to(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'to' = 99 is not an ONNX TensorProto.DataType code (1..23)}}
  %0 = onnx.Cast(%a) {to = 99 : si64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @transpose_rank(%a: tensor<2x4xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{perm has 3 entries for an input of rank 2}}
  %0 = onnx.Transpose(%a) {perm = array<i64: 1, 0, 2>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @transpose_perm(%a: tensor<2x4xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{perm is not a permutation of 0..1}}
  %0 = onnx.Transpose(%a) {perm = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @concat_axis(%a: tensor<2x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = onnx.Concat(%a, %a) {axis = 2 : si64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @softmax_axis(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = onnx.Softmax(%a) {axis = -3 : si64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @rmsnorm_eps(%a: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{epsilon must be > 0, got -1}}
  %0 = onnx.RMSNormalization(%a, %w) {epsilon = -1.0 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @rmsnorm_axis(%a: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{axis 5 is out of range for rank 2}}
  %0 = onnx.RMSNormalization(%a, %w) {axis = 5 : si64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @attention_rank(%q: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{Q must be 3-D or 4-D, got rank 2}}
  %0 = onnx.Attention(%q, %q, %q) : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

func.func @attention_3d_heads(%q: tensor<1x16x32xf32>) -> tensor<1x16x32xf32> {
  // expected-error @+1 {{3-D inputs need the q_num_heads and kv_num_heads attributes}}
  %0 = onnx.Attention(%q, %q, %q) : (tensor<1x16x32xf32>, tensor<1x16x32xf32>, tensor<1x16x32xf32>) -> tensor<1x16x32xf32>
  return %0 : tensor<1x16x32xf32>
}

// -----

func.func @attention_mode(%q: tensor<1x2x16x32xf32>) -> tensor<1x2x16x32xf32> {
  // expected-error @+1 {{qk_matmul_output_mode must be 0..3, got 4}}
  %0 = onnx.Attention(%q, %q, %q) {qk_matmul_output_mode = 4 : si64} : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> tensor<1x2x16x32xf32>
  return %0 : tensor<1x2x16x32xf32>
}

// -----

func.func @rope_rank(%x: tensor<16x32xf32>, %c: tensor<16x16xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{X must be 3-D or 4-D, got rank 2}}
  %0 = onnx.RotaryEmbedding(%x, %c, %c) : (tensor<16x32xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

func.func @rope_3d_heads(%x: tensor<1x16x32xf32>, %c: tensor<16x16xf32>) -> tensor<1x16x32xf32> {
  // expected-error @+1 {{3-D input needs the num_heads attribute}}
  %0 = onnx.RotaryEmbedding(%x, %c, %c) : (tensor<1x16x32xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x16x32xf32>
  return %0 : tensor<1x16x32xf32>
}

// -----

func.func @rope_dim(%x: tensor<1x2x16x32xf32>, %c: tensor<16x16xf32>) -> tensor<1x2x16x32xf32> {
  // expected-error @+1 {{rotary_embedding_dim must be even and >= 0, got 5}}
  %0 = onnx.RotaryEmbedding(%x, %c, %c) {rotary_embedding_dim = 5 : si64} : (tensor<1x2x16x32xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x2x16x32xf32>
  return %0 : tensor<1x2x16x32xf32>
}

// -----

func.func @weight_name() -> tensor<4xf32> {
  // expected-error @+1 {{initializer name must not be empty}}
  %0 = onnx.Weight {name = ""} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @weight_offset() -> tensor<4xf32> {
  // expected-error @+1 {{offset and length must be >= 0}}
  %0 = onnx.Weight {name = "w", file = "w.bin", offset = -8 : i64, length = 16 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @weight_length() -> tensor<4xf32> {
  // expected-error @+1 {{initializer 'w' declares 12 bytes but 'tensor<4xf32>' needs 16}}
  %0 = onnx.Weight {name = "w", file = "w.bin", offset = 0 : i64, length = 12 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unknown_attribute(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{attribute 'left_window_size' is not supported}}
  %0 = onnx.Neg(%a) {left_window_size = 2 : si64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @clip_bound_elements(%x: tensor<4xf32>, %lo: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{min must hold one element (a scalar or shape [1]), got 'tensor<2xf32>'}}
  %0 = onnx.Clip(%x, %lo) : (tensor<4xf32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @mod_fmod_value(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{fmod must be 0 or 1, got 2}}
  %0 = onnx.Mod(%a, %a) {fmod = 2 : si64} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @mod_float_needs_fmod(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{floating-point inputs need fmod = 1 (ONNX Mod)}}
  %0 = onnx.Mod(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @bitwise_float(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{input 0 must be an integer tensor, got 'f32'}}
  %0 = onnx.BitwiseNot(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gather_elements_rank(%d: tensor<4x3xf32>, %i: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{indices have rank 1 but data has rank 2 (they must be equal)}}
  %0 = onnx.GatherElements(%d, %i) : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gather_elements_axis(%d: tensor<4x3xf32>, %i: tensor<4x3xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = onnx.GatherElements(%d, %i) {axis = 2 : si64} : (tensor<4x3xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @gather_elements_float_indices(%d: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{indices must be an integer tensor, got 'f32'}}
  %0 = onnx.GatherElements(%d, %d) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @scatter_elements_reduction(%d: tensor<4xf32>, %i: tensor<2xi64>, %u: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{reduction must be none, add, mul, max or min, got 'mean'}}
  %0 = onnx.ScatterElements(%d, %i, %u) {reduction = "mean"} : (tensor<4xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @scatter_elements_updates_shape(%d: tensor<4xf32>, %i: tensor<2xi64>, %u: tensor<3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{updates 'tensor<3xf32>' must have the shape of indices 'tensor<2xi64>'}}
  %0 = onnx.ScatterElements(%d, %i, %u) : (tensor<4xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @topk_k_too_large(%x: tensor<2x4xf32>) -> (tensor<2x5xf32>, tensor<2x5xi64>) {
  %k = onnx.Constant() {value = dense<5> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{K = 5 exceeds the size 4 of axis 1}}
  %0:2 = onnx.TopK(%x, %k) : (tensor<2x4xf32>, tensor<1xi64>) -> (tensor<2x5xf32>, tensor<2x5xi64>)
  return %0#0, %0#1 : tensor<2x5xf32>, tensor<2x5xi64>
}

// -----

func.func @topk_k_negative(%x: tensor<2x4xf32>) -> (tensor<2x?xf32>, tensor<2x?xi64>) {
  %k = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  // expected-error @+1 {{K must be >= 0, got -1}}
  %0:2 = onnx.TopK(%x, %k) : (tensor<2x4xf32>, tensor<1xi64>) -> (tensor<2x?xf32>, tensor<2x?xi64>)
  return %0#0, %0#1 : tensor<2x?xf32>, tensor<2x?xi64>
}

// -----

func.func @topk_largest(%x: tensor<4xf32>, %k: tensor<1xi64>) -> (tensor<?xf32>, tensor<?xi64>) {
  // expected-error @+1 {{largest must be 0 or 1, got 2}}
  %0:2 = onnx.TopK(%x, %k) {largest = 2 : si64} : (tensor<4xf32>, tensor<1xi64>) -> (tensor<?xf32>, tensor<?xi64>)
  return %0#0, %0#1 : tensor<?xf32>, tensor<?xi64>
}

// -----

func.func @topk_k_dtype(%x: tensor<4xf32>, %k: tensor<1xi32>) -> (tensor<?xf32>, tensor<?xi64>) {
  // expected-error @+1 {{K must be an int64 tensor, got element type 'i32'}}
  %0:2 = onnx.TopK(%x, %k) : (tensor<4xf32>, tensor<1xi32>) -> (tensor<?xf32>, tensor<?xi64>)
  return %0#0, %0#1 : tensor<?xf32>, tensor<?xi64>
}

// -----

func.func @topk_indices_dtype(%x: tensor<4xf32>, %k: tensor<1xi64>) -> (tensor<?xf32>, tensor<?xi32>) {
  // expected-error @+1 {{Indices (output 1) must be int64, got element type 'i32'}}
  %0:2 = onnx.TopK(%x, %k) : (tensor<4xf32>, tensor<1xi64>) -> (tensor<?xf32>, tensor<?xi32>)
  return %0#0, %0#1 : tensor<?xf32>, tensor<?xi32>
}

// -----

func.func @topk_scalar_x(%x: tensor<f32>, %k: tensor<1xi64>) -> (tensor<f32>, tensor<i64>) {
  // expected-error @+1 {{X must have rank >= 1}}
  %0:2 = onnx.TopK(%x, %k) : (tensor<f32>, tensor<1xi64>) -> (tensor<f32>, tensor<i64>)
  return %0#0, %0#1 : tensor<f32>, tensor<i64>
}
