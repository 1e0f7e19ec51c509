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
// bf16 where RotaryEmbedding reads them; the inverse frequencies and the
// angle scale stay exact (the inverse frequencies' other reader gets its
// own bf16 copy).
// CHECK-LABEL: func.func @rope_angles
// CHECK: %[[POS:.*]] = onnx.Cast(%{{.*}}) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
// CHECK: %[[U:.*]] = onnx.Unsqueeze(%[[POS]], %{{.*}}) : (tensor<?xf32>, tensor<1xi64>) -> tensor<?x1xf32>
// CHECK: %[[F:.*]] = onnx.Constant() {value = dense<[1.000000e+00, 1.000000e-01, 0.00999999977, 1.000000e-03]> : tensor<4xf32>}
// CHECK: %[[F16:.*]] = onnx.Cast(%[[F]]) {to = 16 : si64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK: %[[A:.*]] = onnx.Mul(%[[U]], %[[F]]) : (tensor<?x1xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// CHECK: %[[K:.*]] = onnx.Constant() {value = dense<2.500000e-01> : tensor<4xf32>}
// CHECK: %[[AK:.*]] = onnx.Mul(%[[A]], %[[K]]) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// CHECK: %[[COS:.*]] = onnx.Cos(%[[AK]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[COS16:.*]] = onnx.Cast(%[[COS]]) {to = 16 : si64} : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK: %[[SIN:.*]] = onnx.Sin(%[[AK]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[SIN16:.*]] = onnx.Cast(%[[SIN]]) {to = 16 : si64} : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK: onnx.RotaryEmbedding(%{{.*}}, %[[COS16]], %[[SIN16]]) {interleaved = 1 : si64} : (tensor<1x2x?x8xbf16>, tensor<?x4xbf16>, tensor<?x4xbf16>) -> tensor<1x2x?x8xbf16>
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
  %k = onnx.Constant() {value = dense<0.25> : tensor<4xf32>} : () -> tensor<4xf32>
  %ak = onnx.Mul(%a, %k) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %c = onnx.Cos(%ak) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %s = onnx.Sin(%ak) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %y = onnx.RotaryEmbedding(%x, %c, %s) {interleaved = 1 : si64} : (tensor<1x2x?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<1x2x?x8xf32>
  %o = onnx.Add(%t, %f) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return %y, %o : tensor<1x2x?x8xf32>, tensor<?x4xf32>
}

// -----

// transformers' rotary embedding: inverse frequencies (a weight) times the
// positions in a MatMul, then a transpose: all float32 up to Cos.
// CHECK-LABEL: func.func @hf_matmul
// CHECK: %[[P:.*]] = onnx.Cast(%arg1) {to = 1 : si64} : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
// CHECK: %[[W:.*]] = onnx.Weight {file = "w.bin", length = 16 : i64, name = "inv_freq", offset = 0 : i64} : tensor<1x4x1xf32>
// CHECK: %[[M:.*]] = onnx.MatMul(%[[W]], %[[P]]) : (tensor<1x4x1xf32>, tensor<1x1x?xf32>) -> tensor<1x4x?xf32>
// CHECK: %[[T:.*]] = onnx.Transpose(%[[M]]) {{.*}} -> tensor<1x?x4xf32>
// CHECK: onnx.Cos(%[[T]]) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
func.func @hf_matmul(%x: tensor<1x?x4xf32>, %pos: tensor<1x1x?xi64>) -> tensor<1x?x4xf32> {
  %p = onnx.Cast(%pos) {to = 1 : si64} : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %w = onnx.Weight {file = "w.bin", length = 16 : i64, name = "inv_freq", offset = 0 : i64} : tensor<1x4x1xf32>
  %m = onnx.MatMul(%w, %p) : (tensor<1x4x1xf32>, tensor<1x1x?xf32>) -> tensor<1x4x?xf32>
  %t = onnx.Transpose(%m) {perm = array<i64: 0, 2, 1>} : (tensor<1x4x?xf32>) -> tensor<1x?x4xf32>
  %c = onnx.Cos(%t) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %y = onnx.Mul(%x, %c) : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  return %y : tensor<1x?x4xf32>
}

// -----

// A bool cast to float is no position: a 0/1 mask multiplied into hidden
// states is converted like any activation (no S x S mask kept float32).
// CHECK-LABEL: func.func @mask_times_activation
// CHECK: %[[M:.*]] = onnx.Cast(%arg1) {to = 16 : si64} : (tensor<4x8xi1>) -> tensor<4x8xbf16>
// CHECK: onnx.Mul(%{{.*}}, %[[M]]) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
func.func @mask_times_activation(%x: tensor<4x8xf32>, %mask: tensor<4x8xi1>) -> tensor<4x8xf32> {
  %m = onnx.Cast(%mask) {to = 1 : si64} : (tensor<4x8xi1>) -> tensor<4x8xf32>
  %y = onnx.Mul(%x, %m) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// transformers' exact pattern: the inverse frequencies expanded to the
// batch before the MatMul (a value made from a weight alone) stay exact.
// CHECK-LABEL: func.func @hf_expand
// CHECK: %[[P:.*]] = onnx.Cast(%arg1) {to = 1 : si64} : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
// CHECK: %[[W:.*]] = onnx.Weight {file = "w.bin", length = 16 : i64, name = "inv_freq", offset = 0 : i64} : tensor<4x1xf32>
// CHECK: %[[E:.*]] = onnx.Expand(%[[W]], %{{.*}}) : (tensor<4x1xf32>, tensor<3xi64>) -> tensor<1x4x1xf32>
// CHECK: %[[M:.*]] = onnx.MatMul(%[[E]], %[[P]]) : (tensor<1x4x1xf32>, tensor<1x1x?xf32>) -> tensor<1x4x?xf32>
// CHECK: onnx.Cos(%[[M]]) : (tensor<1x4x?xf32>) -> tensor<1x4x?xf32>
func.func @hf_expand(%x: tensor<1x4x?xf32>, %pos: tensor<1x1x?xi64>) -> tensor<1x4x?xf32> {
  %p = onnx.Cast(%pos) {to = 1 : si64} : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %w = onnx.Weight {file = "w.bin", length = 16 : i64, name = "inv_freq", offset = 0 : i64} : tensor<4x1xf32>
  %shape = onnx.Constant() {value = dense<[1, 4, 1]> : tensor<3xi64>} : () -> tensor<3xi64>
  %e = onnx.Expand(%w, %shape) : (tensor<4x1xf32>, tensor<3xi64>) -> tensor<1x4x1xf32>
  %m = onnx.MatMul(%e, %p) : (tensor<1x4x1xf32>, tensor<1x1x?xf32>) -> tensor<1x4x?xf32>
  %c = onnx.Cos(%m) : (tensor<1x4x?xf32>) -> tensor<1x4x?xf32>
  %y = onnx.Mul(%x, %c) : (tensor<1x4x?xf32>, tensor<1x4x?xf32>) -> tensor<1x4x?xf32>
  return %y : tensor<1x4x?xf32>
}

// -----

// Readers without a float result see kept values exact (a comparison
// reads its bf16 operand through a Cast up, a Cast to int64 reads the
// float32 value as it is); the set stops at Cos: an Add of a cosine and a
// position is bf16, read through one Cast per value.
// CHECK-LABEL: func.func @readers
// CHECK: %[[X:.*]] = onnx.Cast(%arg0) {h20.entry_cast, to = 16 : si64}
// CHECK: %[[X32:.*]] = onnx.Cast(%[[X]]) {to = 1 : si64} : (tensor<?xbf16>) -> tensor<?xf32>
// CHECK: %[[P:.*]] = onnx.Cast(%arg1) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
// CHECK: %[[P16:.*]] = onnx.Cast(%[[P]]) {to = 16 : si64} : (tensor<?xf32>) -> tensor<?xbf16>
// CHECK: %[[C:.*]] = onnx.Cos(%[[P]]) : (tensor<?xf32>) -> tensor<?xf32>
// CHECK: %[[C16:.*]] = onnx.Cast(%[[C]]) {to = 16 : si64} : (tensor<?xf32>) -> tensor<?xbf16>
// CHECK: onnx.Add(%[[C16]], %[[P16]]) : (tensor<?xbf16>, tensor<?xbf16>) -> tensor<?xbf16>
// CHECK: onnx.Less(%[[P]], %[[X32]]) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xi1>
// CHECK: onnx.Cast(%[[P]]) {to = 7 : si64} : (tensor<?xf32>) -> tensor<?xi64>
// CHECK: onnx.Mul(%[[X]], %[[P16]]) : (tensor<?xbf16>, tensor<?xbf16>) -> tensor<?xbf16>
func.func @readers(%x: tensor<?xf32>, %pos: tensor<?xi64>) -> (tensor<?xf32>, tensor<?xi1>, tensor<?xi64>, tensor<?xf32>) {
  %p = onnx.Cast(%pos) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
  %c = onnx.Cos(%p) : (tensor<?xf32>) -> tensor<?xf32>
  %a = onnx.Add(%c, %p) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %l = onnx.Less(%p, %x) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xi1>
  %i = onnx.Cast(%p) {to = 7 : si64} : (tensor<?xf32>) -> tensor<?xi64>
  %m = onnx.Mul(%x, %p) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %a, %l, %i, %m : tensor<?xf32>, tensor<?xi1>, tensor<?xi64>, tensor<?xf32>
}

// -----

// A MatMul that only attn.rms_scale reads (as its value: the mHC mixes of
// h20-norm-scale-after-matmul) keeps its float32 sums; its operands take
// bf16 and the rms_scale rounds once, to bf16. A MatMul with another reader
// takes bf16 as any other.
// CHECK-LABEL: func.func @rms_scale_sums
// CHECK: %[[X:.*]] = onnx.Cast(%arg0) {h20.entry_cast
// CHECK: %[[Y:.*]] = onnx.MatMul(%[[X]], %{{.*}}) : (tensor<?x64xbf16>, tensor<64x8xbf16>) -> tensor<?x8xf32>
// CHECK: attn.rms_scale %[[Y]], %[[X]] {{.*}} : (tensor<?x8xf32>, tensor<?x64xbf16>) -> tensor<?x8xbf16>
// CHECK: %[[Z:.*]] = onnx.MatMul(%[[X]], %{{.*}}) : (tensor<?x64xbf16>, tensor<64x8xbf16>) -> tensor<?x8xbf16>
// CHECK: attn.rms_scale %[[Z]], %[[X]] {{.*}} : (tensor<?x8xbf16>, tensor<?x64xbf16>) -> tensor<?x8xbf16>
func.func @rms_scale_sums(%x: tensor<?x64xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %w = onnx.Weight {file = "w.bin", length = 2048 : i64, name = "w", offset = 0 : i64} : tensor<64x8xf32>
  %y = onnx.MatMul(%x, %w) : (tensor<?x64xf32>, tensor<64x8xf32>) -> tensor<?x8xf32>
  %s = attn.rms_scale %y, %x {epsilon = 1.0e-6 : f64} : (tensor<?x8xf32>, tensor<?x64xf32>) -> tensor<?x8xf32>
  %z = onnx.MatMul(%x, %w) : (tensor<?x64xf32>, tensor<64x8xf32>) -> tensor<?x8xf32>
  %t = attn.rms_scale %z, %x {epsilon = 1.0e-6 : f64} : (tensor<?x8xf32>, tensor<?x64xf32>) -> tensor<?x8xf32>
  return %s, %t, %z : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
