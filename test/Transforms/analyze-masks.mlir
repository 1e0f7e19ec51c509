// RUN: h20-opt %s --split-input-file --h20-analyze-masks --verify-diagnostics | FileCheck %s

// The causal mask's defining op is annotated; nothing else changes.
// CHECK-LABEL: func.func @causal
// CHECK: onnx.LessOrEqual{{.*}} {attn.proven_mask = {alignment = "bottom_right", causal = true}}
func.func @causal(%q: tensor<1x2x?x8xf32> {onnx.dim_params = ["", "", "S", ""]}) -> tensor<1x2x?x8xf32> {
  %len = onnx.Shape(%q) {start = 2 : si64, end = 3 : si64} : (tensor<1x2x?x8xf32>) -> tensor<1xi64>
  %n = onnx.Squeeze(%len) : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %r = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %a0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %a1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %row = onnx.Unsqueeze(%r, %a1) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
  %col = onnx.Unsqueeze(%r, %a0) : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %m = onnx.LessOrEqual(%col, %row) : (tensor<1x?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %y = onnx.Attention(%q, %q, %q, %m) : (tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<?x?xi1>) -> tensor<1x2x?x8xf32>
  return %y : tensor<1x2x?x8xf32>
}

// -----

// A mask read from a graph input is data, not a formula: it is not proven.
func.func @data_mask(%q: tensor<1x2x?x8xf32>, %m: tensor<1x1x?x?xi1>) -> tensor<1x2x?x8xf32> {
  // expected-warning @+1 {{attention mask not proven causal or sliding-window (its subgraph is not a closed-form function of the indices); it stays a mask operand}}
  %y = onnx.Attention(%q, %q, %q, %m) : (tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x1x?x?xi1>) -> tensor<1x2x?x8xf32>
  return %y : tensor<1x2x?x8xf32>
}
