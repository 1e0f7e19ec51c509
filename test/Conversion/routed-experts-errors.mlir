// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg=library-calls=true --verify-diagnostics
// RUN: not h20-opt %s --split-input-file --h20-lower-to-linalg 2>&1 | FileCheck %s --check-prefix=CPU
// onnx.h20.RoutedExperts the GPU lowering refuses, each with the reason on
// the op; the CPU lowering has none (h20-opt imports the function body for
// the CPU target).

// CPU: error: onnx.h20.RoutedExperts{{.*}}has no CPU lowering (h20-opt imports its function body for the CPU target)
func.func @bad_topk(%x: tensor<4x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>,
                    %w1: tensor<8x64x32xbf16>, %w3: tensor<8x64x32xbf16>,
                    %w2: tensor<8x32x64xbf16>) -> tensor<4x64xbf16> {
  // expected-error @+1 {{top_k must be in [1, 8]}}
  %0 = onnx.h20.RoutedExperts(%x, %r, %b, %w1, %w3, %w2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 9 : si64} : (tensor<4x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x64x32xbf16>, tensor<8x64x32xbf16>, tensor<8x32x64xbf16>) -> tensor<4x64xbf16>
  return %0 : tensor<4x64xbf16>
}

// -----

func.func @bad_shapes(%x: tensor<4x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>,
                      %w1: tensor<8x64x32xbf16>, %w3: tensor<8x64x16xbf16>,
                      %w2: tensor<8x32x64xbf16>) -> tensor<4x64xbf16> {
  // expected-error @+1 {{operand shapes disagree}}
  %0 = onnx.h20.RoutedExperts(%x, %r, %b, %w1, %w3, %w2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<4x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x64x32xbf16>, tensor<8x64x16xbf16>, tensor<8x32x64xbf16>) -> tensor<4x64xbf16>
  return %0 : tensor<4x64xbf16>
}

// -----

func.func @mixed_types(%x: tensor<4x64xbf16>, %r: tensor<64x8xf32>, %b: tensor<8xf32>,
                       %w1: tensor<8x64x32xbf16>, %w3: tensor<8x64x32xbf16>,
                       %w2: tensor<8x32x64xbf16>) -> tensor<4x64xbf16> {
  // expected-error @+1 {{operand 1 has another element type than X}}
  %0 = onnx.h20.RoutedExperts(%x, %r, %b, %w1, %w3, %w2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<4x64xbf16>, tensor<64x8xf32>, tensor<8xf32>, tensor<8x64x32xbf16>, tensor<8x64x32xbf16>, tensor<8x32x64xbf16>) -> tensor<4x64xbf16>
  return %0 : tensor<4x64xbf16>
}
