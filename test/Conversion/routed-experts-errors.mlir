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

// -----

// onnx.h20.RoutedExpertsMxfp4: packed bytes and scales must agree with the
// router's Dm and E (here W2's scales are for I = 64, not 32).
func.func @mxfp4_bad_scales(%x: tensor<4x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>,
                            %w1: tensor<8x32x32xi8>, %s1: tensor<8x32x2xi8>,
                            %w3: tensor<8x32x32xi8>, %s3: tensor<8x32x2xi8>,
                            %w2: tensor<8x64x16xi8>, %s2: tensor<8x64x2xi8>) -> tensor<4x64xbf16> {
  // expected-error @+1 {{operand shapes disagree: X [N, 64], Router [64, 8], expected Bias [8], W1/W3 [8, I, 32] with scales [8, I, 2], W2 [8, 64, I/2] with scales [8, 64, I/32]}}
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<4x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x2xi8>) -> tensor<4x64xbf16>
  return %0 : tensor<4x64xbf16>
}

// -----

func.func @mxfp4_not_bytes(%x: tensor<4x64xbf16>, %r: tensor<64x8xbf16>, %b: tensor<8xf32>,
                           %w1: tensor<8x32x32xui8>, %s1: tensor<8x32x2xi8>,
                           %w3: tensor<8x32x32xi8>, %s3: tensor<8x32x2xi8>,
                           %w2: tensor<8x64x16xi8>, %s2: tensor<8x64x1xi8>) -> tensor<4x64xbf16> {
  // expected-error @+1 {{operand 3 must be i8 (packed e2m1 pairs or ue8m0 scale bytes)}}
  %0 = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<4x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xui8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<4x64xbf16>
  return %0 : tensor<4x64xbf16>
}
