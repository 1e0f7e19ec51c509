// RUN: h20-opt %s --split-input-file --h20-chunked-prefill --verify-diagnostics | FileCheck %s

// LayerNormalization over the last axis alone, of static size (the hidden
// size), normalizes each token by itself: the graph is chunked.
// CHECK-LABEL: func.func @layernorm_hidden
// CHECK-SAME: h20.chunked = {dim = 1 : i64, input = 0 : i64, output = "rows"}
// CHECK: onnx.LayerNormalization
func.func @layernorm_hidden(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %g = onnx.Weight {name = "ln.weight"} : tensor<8xf32>
  %b = onnx.Weight {name = "ln.bias"} : tensor<8xf32>
  %y = onnx.LayerNormalization(%x, %g, %b) {axis = 2 : si64} : (tensor<1x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

// The default axis (-1) is the last one too.
// CHECK-LABEL: func.func @layernorm_default_axis
// CHECK-SAME: h20.chunked
func.func @layernorm_default_axis(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %g = onnx.Weight {name = "ln.weight"} : tensor<8xf32>
  %y = onnx.LayerNormalization(%x, %g) : (tensor<1x?x8xf32>, tensor<8xf32>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

// Normalizing over [S, hidden] mixes tokens.
func.func @layernorm_over_sequence(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %g = onnx.Weight {name = "ln.weight"} : tensor<8xf32>
  // expected-error @+1 {{chunked prefill: LayerNormalization over more than the last (hidden) axis}}
  %y = onnx.LayerNormalization(%x, %g) {axis = -2 : si64} : (tensor<1x?x8xf32>, tensor<8xf32>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

// A dynamic last axis may be the token axis ([1, S] here).
func.func @layernorm_dynamic_last(%ids: tensor<1x?xi64>) -> tensor<1x?xf32> {
  %f = onnx.Cast(%ids) {to = 1 : si64} : (tensor<1x?xi64>) -> tensor<1x?xf32>
  %g = onnx.Constant() {value = dense<1.0> : tensor<1xf32>} : () -> tensor<1xf32>
  // expected-error @+1 {{chunked prefill: LayerNormalization over more than the last (hidden) axis}}
  %y = onnx.LayerNormalization(%f, %g) {axis = -1 : si64} : (tensor<1x?xf32>, tensor<1xf32>) -> tensor<1x?xf32>
  return %y : tensor<1x?xf32>
}

// -----

// CumSum along the tokens (axis 1), Trilu and GatherND mix positions: refused.
func.func @cumsum(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %a = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  // expected-error @+1 {{chunked prefill: a CumSum along the token axis mixes tokens}}
  %y = onnx.CumSum(%x, %a) : (tensor<1x?x8xf32>, tensor<i64>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

func.func @trilu(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%w, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  // expected-error @+1 {{chunked prefill: 'onnx.Trilu' is not known to act per token}}
  %y = onnx.Trilu(%x) : (tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}

// -----

func.func @gathernd(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %w = onnx.Weight {name = "table"} : tensor<16x8xf32>
  %axes = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %i = onnx.Unsqueeze(%ids, %axes) : (tensor<1x?xi64>, tensor<1xi64>) -> tensor<1x?x1xi64>
  // expected-error @+1 {{chunked prefill: 'onnx.GatherND' is not known to act per token}}
  %y = onnx.GatherND(%w, %i) : (tensor<16x8xf32>, tensor<1x?x1xi64>) -> tensor<1x?x8xf32>
  return %y : tensor<1x?x8xf32>
}
