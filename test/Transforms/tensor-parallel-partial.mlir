// RUN: h20-opt %s --h20-tensor-parallel=ranks=2 | FileCheck %s --check-prefix=KEEP

// A block that does not fit stays whole, and the rest is still split: here
// V is also read by a second consumer (the split would change its value),
// so the attention block keeps all heads; the MLP is split.
// KEEP-LABEL: func.func @shared_v
// KEEP-NOT: name = "wq2"} : tensor<32x16xf32>
// KEEP: attn.attention {{.*}} : (tensor<1x4x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>) -> tensor<1x4x?x8xf32>
// KEEP: onnx.Weight {h20.shard = {axis = 0 : i64, full_shape = array<i64: 64, 32>, starts = array<i64: 0, 32>}, name = "wd2"}
// KEEP-COUNT-1: attn.all_reduce
// A split value must not feed a MatMul as its input (the weight keeps all
// its rows): the MLP whose gate output also goes through a second MatMul
// stays whole, even though every use is inside the block.
// KEEP-LABEL: func.func @input_of_matmul
// KEEP-NOT: h20.shard
// KEEP-NOT: attn.all_reduce
// KEEP: return
module attributes {onnx.model_dir = "."} {
func.func @shared_v(%h: tensor<1x?x32xf32>, %pos: tensor<1x?xi64>) -> (tensor<1x?x32xf32>, tensor<1x2x?x8xf32>) {
  %wq = onnx.Weight {name = "wq2"} : tensor<32x32xf32>
  %q0 = onnx.MatMul(%h, %wq) : (tensor<1x?x32xf32>, tensor<32x32xf32>) -> tensor<1x?x32xf32>
  %sq = onnx.Constant() {value = dense<[1, -1, 4, 8]> : tensor<4xi64>} : () -> tensor<4xi64>
  %q1 = onnx.Reshape(%q0, %sq) {allowzero = 1 : si64} : (tensor<1x?x32xf32>, tensor<4xi64>) -> tensor<1x?x4x8xf32>
  %q = onnx.Transpose(%q1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x?x4x8xf32>) -> tensor<1x4x?x8xf32>
  %wk = onnx.Weight {name = "wk2"} : tensor<32x16xf32>
  %k0 = onnx.MatMul(%h, %wk) : (tensor<1x?x32xf32>, tensor<32x16xf32>) -> tensor<1x?x16xf32>
  %skv = onnx.Constant() {value = dense<[1, -1, 2, 8]> : tensor<4xi64>} : () -> tensor<4xi64>
  %k1 = onnx.Reshape(%k0, %skv) {allowzero = 1 : si64} : (tensor<1x?x16xf32>, tensor<4xi64>) -> tensor<1x?x2x8xf32>
  %k = onnx.Transpose(%k1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x?x2x8xf32>) -> tensor<1x2x?x8xf32>
  %a = attn.attention %q, %k, %k {causal = true, kv_group = 2 : i64, scale = 0.35355339059327373 : f64} : (tensor<1x4x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>) -> tensor<1x4x?x8xf32>
  %a1 = onnx.Transpose(%a) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x?x8xf32>) -> tensor<1x?x4x8xf32>
  %so = onnx.Constant() {value = dense<[1, -1, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
  %a2 = onnx.Reshape(%a1, %so) {allowzero = 1 : si64} : (tensor<1x?x4x8xf32>, tensor<3xi64>) -> tensor<1x?x32xf32>
  %wo = onnx.Weight {name = "wo2"} : tensor<32x32xf32>
  %o = onnx.MatMul(%a2, %wo) : (tensor<1x?x32xf32>, tensor<32x32xf32>) -> tensor<1x?x32xf32>
  %wg = onnx.Weight {name = "wg2"} : tensor<32x64xf32>
  %gate = onnx.MatMul(%o, %wg) : (tensor<1x?x32xf32>, tensor<32x64xf32>) -> tensor<1x?x64xf32>
  %act = onnx.Relu(%gate) : (tensor<1x?x64xf32>) -> tensor<1x?x64xf32>
  %wd = onnx.Weight {name = "wd2"} : tensor<64x32xf32>
  %d = onnx.MatMul(%act, %wd) : (tensor<1x?x64xf32>, tensor<64x32xf32>) -> tensor<1x?x32xf32>
  return %d, %k : tensor<1x?x32xf32>, tensor<1x2x?x8xf32>
}
func.func @input_of_matmul(%h: tensor<1x?x32xf32>) -> tensor<1x?x32xf32> {
  %w1 = onnx.Weight {name = "w1"} : tensor<32x64xf32>
  %t = onnx.MatMul(%h, %w1) : (tensor<1x?x32xf32>, tensor<32x64xf32>) -> tensor<1x?x64xf32>
  %w2 = onnx.Weight {name = "w2"} : tensor<64x64xf32>
  %v = onnx.MatMul(%t, %w2) : (tensor<1x?x64xf32>, tensor<64x64xf32>) -> tensor<1x?x64xf32>
  %m = onnx.Mul(%v, %t) : (tensor<1x?x64xf32>, tensor<1x?x64xf32>) -> tensor<1x?x64xf32>
  %wd = onnx.Weight {name = "wd"} : tensor<64x32xf32>
  %d = onnx.MatMul(%m, %wd) : (tensor<1x?x64xf32>, tensor<64x32xf32>) -> tensor<1x?x32xf32>
  return %d : tensor<1x?x32xf32>
}
}
