// RUN: h20-opt %s --split-input-file --h20-norm-scale-after-matmul | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-norm-scale-after-matmul=min-ratio=2 | FileCheck %s --check-prefix=RATIO2
// RUN: not h20-opt %s --split-input-file --h20-norm-scale-after-matmul=min-ratio=0 2>&1 | FileCheck %s --check-prefix=BAD
// A unit-gain RMS norm over the last dim whose only readers are narrow
// projections (N * 8 <= K) becomes a scale of the projections' results.

// CHECK-LABEL: func.func @mhc_mixes
// CHECK-NOT: attn.rms_norm
// CHECK: %[[Y:.*]] = onnx.MatMul(%arg0, %{{.*}}) : (tensor<?x256xf32>, tensor<256x24xf32>) -> tensor<?x24xf32>
// CHECK: %[[S:.*]] = attn.rms_scale %[[Y]], %arg0 {epsilon = 9.9999999999999995E-7 : f64} : (tensor<?x24xf32>, tensor<?x256xf32>) -> tensor<?x24xf32>
// CHECK: %[[Y2:.*]] = onnx.MatMul(%arg0, %{{.*}}) : (tensor<?x256xf32>, tensor<256x16xf32>) -> tensor<?x16xf32>
// CHECK: %[[S2:.*]] = attn.rms_scale %[[Y2]], %arg0
// CHECK-NOT: onnx.Constant
// CHECK: return %[[S]], %[[S2]]
func.func @mhc_mixes(%x: tensor<?x256xf32>) -> (tensor<?x24xf32>, tensor<?x16xf32>) {
  %g = onnx.Constant() {value = dense<1.0> : tensor<256xf32>} : () -> tensor<256xf32>
  %n = attn.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
  %w = onnx.Weight {file = "none.bin", length = 24576 : i64, name = "w", offset = 0 : i64} : tensor<256x24xf32>
  %w2 = onnx.Weight {file = "none.bin", length = 16384 : i64, name = "w2", offset = 0 : i64} : tensor<256x16xf32>
  %y = onnx.MatMul(%n, %w) : (tensor<?x256xf32>, tensor<256x24xf32>) -> tensor<?x24xf32>
  %y2 = onnx.MatMul(%n, %w2) : (tensor<?x256xf32>, tensor<256x16xf32>) -> tensor<?x16xf32>
  return %y, %y2 : tensor<?x24xf32>, tensor<?x16xf32>
}

// -----

// Left as they are: a gain other than ones; a wide projection (N * 8 > K; with
// min-ratio=2 it is narrow enough); a norm that something else reads too;
// a norm over two trailing dims; the norm on the right of the MatMul.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: attn.rms_norm
// RATIO2-LABEL: func.func @kept
// RATIO2-COUNT-4: attn.rms_norm
// RATIO2-NOT: attn.rms_norm
func.func @kept(%x: tensor<?x256xf32>, %x3: tensor<?x4x64xf32>, %sq: tensor<256x256xf32>) -> (tensor<?x24xf32>, tensor<?x64xf32>, tensor<?x24xf32>, tensor<?x256xf32>, tensor<?x4x24xf32>, tensor<256x256xf32>) {
  %one = onnx.Constant() {value = dense<1.0> : tensor<256xf32>} : () -> tensor<256xf32>
  %g = onnx.Constant() {value = dense<2.0> : tensor<256xf32>} : () -> tensor<256xf32>
  %w = onnx.Weight {file = "none.bin", length = 24576 : i64, name = "w", offset = 0 : i64} : tensor<256x24xf32>
  %wide = onnx.Weight {file = "none.bin", length = 65536 : i64, name = "wide", offset = 0 : i64} : tensor<256x64xf32>
  %a = attn.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
  %ya = onnx.MatMul(%a, %w) : (tensor<?x256xf32>, tensor<256x24xf32>) -> tensor<?x24xf32>
  %b = attn.rms_norm %x, %one {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
  %yb = onnx.MatMul(%b, %wide) : (tensor<?x256xf32>, tensor<256x64xf32>) -> tensor<?x64xf32>
  %c = attn.rms_norm %x, %one {axis = 1 : i64, epsilon = 1.0e-04 : f64} : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
  %yc = onnx.MatMul(%c, %w) : (tensor<?x256xf32>, tensor<256x24xf32>) -> tensor<?x24xf32>
  %one2 = onnx.Constant() {value = dense<1.0> : tensor<4x64xf32>} : () -> tensor<4x64xf32>
  %d = attn.rms_norm %x3, %one2 {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<?x4x64xf32>, tensor<4x64xf32>) -> tensor<?x4x64xf32>
  %w64 = onnx.Weight {file = "none.bin", length = 6144 : i64, name = "w64", offset = 0 : i64} : tensor<64x24xf32>
  %yd = onnx.MatMul(%d, %w64) : (tensor<?x4x64xf32>, tensor<64x24xf32>) -> tensor<?x4x24xf32>
  %e = attn.rms_norm %sq, %one {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<256x256xf32>, tensor<256xf32>) -> tensor<256x256xf32>
  %ye = onnx.MatMul(%sq, %e) : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  return %ya, %yb, %yc, %c, %yd, %ye : tensor<?x24xf32>, tensor<?x64xf32>, tensor<?x24xf32>, tensor<?x256xf32>, tensor<?x4x24xf32>, tensor<256x256xf32>
}

// -----

// f16 values stay normalised first (x . W before the scale can overflow
// f16's range); bf16 ones are rewritten, keeping the norm's compute type
// (and its axis may be negative). The bf16 GEMM keeps its float32 sums,
// rounded once by the rms_scale.
// CHECK-LABEL: func.func @storage_types
// RATIO2-LABEL: func.func @storage_types
// CHECK: attn.rms_norm %arg0
// CHECK-NOT: attn.rms_norm
// CHECK: %[[SUMS:.*]] = onnx.MatMul(%arg1, %{{.*}}) : (tensor<?x256xbf16>, tensor<256x24xbf16>) -> tensor<?x24xf32>
// CHECK: attn.rms_scale %[[SUMS]], %arg1 {{.*}}compute_type = f32{{.*}} : (tensor<?x24xf32>, tensor<?x256xbf16>) -> tensor<?x24xbf16>
func.func @storage_types(%h: tensor<?x256xf16>, %b: tensor<?x256xbf16>) -> (tensor<?x24xf16>, tensor<?x24xbf16>) {
  %gh = onnx.Constant() {value = dense<1.0> : tensor<256xf16>} : () -> tensor<256xf16>
  %gb = onnx.Constant() {value = dense<1.0> : tensor<256xbf16>} : () -> tensor<256xbf16>
  %wh = onnx.Weight {file = "none.bin", length = 12288 : i64, name = "wh", offset = 0 : i64} : tensor<256x24xf16>
  %wb = onnx.Weight {file = "none.bin", length = 12288 : i64, name = "wb", offset = 0 : i64} : tensor<256x24xbf16>
  %nh = attn.rms_norm %h, %gh {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<?x256xf16>, tensor<256xf16>) -> tensor<?x256xf16>
  %nb = attn.rms_norm %b, %gb {axis = -1 : i64, epsilon = 1.0e-06 : f64, compute_type = f32} : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
  %yh = onnx.MatMul(%nh, %wh) : (tensor<?x256xf16>, tensor<256x24xf16>) -> tensor<?x24xf16>
  %yb = onnx.MatMul(%nb, %wb) : (tensor<?x256xbf16>, tensor<256x24xbf16>) -> tensor<?x24xbf16>
  return %yh, %yb : tensor<?x24xf16>, tensor<?x24xbf16>
}

// BAD: error: h20-norm-scale-after-matmul: min-ratio must be >= 1, got 0
