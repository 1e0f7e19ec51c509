// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-compute-type{type=bf16}))' | FileCheck %s

// Activations, constants and weights become bf16; float32 inputs are cast
// on entry and outputs cast back before returning.
// CHECK-LABEL: func.func @activations
// CHECK: %[[IN:.*]] = onnx.Cast(%arg0) {h20.entry_cast, to = 16 : si64} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: %[[W:.*]] = onnx.Weight {{.*}}h20.stored_type = f32{{.*}} : tensor<8x8xbf16>
// CHECK: %[[M:.*]] = onnx.MatMul(%[[IN]], %[[W]]) : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[C:.*]] = onnx.Constant() {value = dense<5.000000e-01> : tensor<8xbf16>}
// CHECK: %[[S:.*]] = onnx.Mul(%[[M]], %[[C]]) : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[OUT:.*]] = onnx.Cast(%[[S]]) {to = 1 : si64} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK: return %[[OUT]]
func.func @activations(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = onnx.Weight {file = "w.bin", length = 256 : i64, name = "w", offset = 0 : i64} : tensor<8x8xf32>
  %m = onnx.MatMul(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = onnx.Constant() {value = dense<0.5> : tensor<8xf32>} : () -> tensor<8xf32>
  %s = onnx.Mul(%m, %c) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// RoPE angles computed in the graph (positions -> Cast -> x inverse
// frequencies -> Cos / Sin, as DeepSeek-V4.1's export does) stay float32:
// bf16 holds positions exactly only up to 256. cos / sin are rounded to
// bf16 where RotaryEmbedding reads them; the inverse frequencies stay
// exact (their other reader gets its own bf16 copy), and the float32
// activation that scales the angles is read through a Cast back.
// CHECK-LABEL: func.func @rope_angles
// CHECK: %[[POS:.*]] = onnx.Cast(%{{.*}}) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
// CHECK: %[[U:.*]] = onnx.Unsqueeze(%[[POS]], %{{.*}}) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
// CHECK: %[[F:.*]] = onnx.Constant() {value = dense<[1.000000e+00, 1.000000e-01, 0.00999999977, 1.000000e-03]> : tensor<4xf32>}
// CHECK: %[[A:.*]] = onnx.Mul(%[[U]], %[[F]]) : (tensor<?x1xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// CHECK: %[[T32:.*]] = onnx.Cast(%{{.*}}) {to = 1 : si64} : (tensor<?x4xbf16>) -> tensor<?x4xf32>
// CHECK: %[[AT:.*]] = onnx.Mul(%[[A]], %[[T32]]) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[COS:.*]] = onnx.Cos(%[[AT]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[SIN:.*]] = onnx.Sin(%[[AT]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[COS16:.*]] = onnx.Cast(%[[COS]]) {to = 16 : si64} : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK: %[[SIN16:.*]] = onnx.Cast(%[[SIN]]) {to = 16 : si64} : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK: onnx.RotaryEmbedding(%{{.*}}, %[[COS16]], %[[SIN16]]) {interleaved = 1 : si64} : (tensor<1x2x?x8xbf16>, tensor<?x4xbf16>, tensor<?x4xbf16>) -> tensor<1x2x?x8xbf16>
// CHECK: %[[F16:.*]] = onnx.Cast(%[[F]]) {to = 16 : si64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK: onnx.Add(%{{.*}}, %[[F16]]) : (tensor<?x4xbf16>, tensor<4xbf16>) -> tensor<?x4xbf16>
func.func @rope_angles(%x: tensor<1x2x?x8xf32>, %t: tensor<?x4xf32>, %n: tensor<i64>) -> (tensor<1x2x?x8xf32>, tensor<?x4xf32>) {
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %r = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %p = onnx.Cast(%r) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
  %ax = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %u = onnx.Unsqueeze(%p, %ax) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
  %f = onnx.Constant() {value = dense<[1.0, 0.1, 0.01, 0.001]> : tensor<4xf32>} : () -> tensor<4xf32>
  %a = onnx.Mul(%u, %f) : (tensor<?x1xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %at = onnx.Mul(%a, %t) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %c = onnx.Cos(%at) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %s = onnx.Sin(%at) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = onnx.RotaryEmbedding(%x, %c, %s) {interleaved = 1 : si64} : (tensor<1x2x?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x2x?x8xf32>
  %o = onnx.Add(%t, %f) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return %y, %o : tensor<1x2x?x8xf32>, tensor<?x4xf32>
}
