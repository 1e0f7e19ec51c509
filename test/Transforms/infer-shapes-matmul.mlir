// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-infer-shapes
// ONNX MatMul's inner dimensions must agree: a weight stored transposed
// ([N, K] instead of [K, N]) is an error naming the node, not a product
// that reads past the weight (it compiled, and h20-run crashed).

func.func @transposed_weight(%x: tensor<?x64xf32>) -> tensor<*xf32> {
  %w = onnx.Weight {name = "lm_head.weight"} : tensor<512x64xf32>
  // expected-error @+1 {{inputs 'tensor<?x64xf32>' and 'tensor<512x64xf32>' do not multiply: inner dimensions 64 and 512 differ}}
  %y = onnx.MatMul(%x, %w) : (tensor<?x64xf32>, tensor<512x64xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// A vector second operand is [K].
func.func @vector(%x: tensor<4x8xf32>) -> tensor<*xf32> {
  %v = onnx.Weight {name = "v"} : tensor<6xf32>
  // expected-error @+1 {{inner dimensions 8 and 6 differ}}
  %y = onnx.MatMul(%x, %v) : (tensor<4x8xf32>, tensor<6xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// Agreeing and unknown inner dimensions pass.
func.func @fine(%x: tensor<?x64xf32>, %y: tensor<?x?xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %w = onnx.Weight {name = "w"} : tensor<64x512xf32>
  %a = onnx.MatMul(%x, %w) : (tensor<?x64xf32>, tensor<64x512xf32>) -> tensor<*xf32>
  %b = onnx.MatMul(%y, %w) : (tensor<?x?xf32>, tensor<64x512xf32>) -> tensor<*xf32>
  return %a, %b : tensor<*xf32>, tensor<*xf32>
}
