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
