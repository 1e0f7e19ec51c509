// RUN: not h20-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(func.func(h20-input-value-ranges))' 2>/dev/null | FileCheck %s
// RUN: not h20-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(func.func(h20-input-value-ranges))' 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

// A Gather's indices that are an input (through a Cast and an Unsqueeze,
// which keep values): [-4, 4) recorded on the argument.
// CHECK-LABEL: func.func @gather_input
// CHECK-SAME: h20.value_ranges = [{hi = {constant = 4 : i64, terms = []}, lo = {constant = -4 : i64, terms = []}, why = "indices of node 'embed' (op 'Gather')"}]
func.func @gather_input(%w: tensor<4x3xf32>, %i: tensor<?xi32>) -> tensor<1x?x3xf32> {
  %c = onnx.Cast(%i) {to = 7 : si64} : (tensor<?xi32>) -> tensor<?xi64> loc(fused["embed_cast"])
  %a = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %u = onnx.Unsqueeze(%c, %a) : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %y = onnx.Gather(%w, %u) {axis = 0 : si64} : (tensor<4x3xf32>, tensor<1x?xi64>) -> tensor<1x?x3xf32> loc("embed"(fused<"Gather">["m.onnx":0:0]))
  return %y : tensor<1x?x3xf32>
}

// -----

// The bound is a dynamic dim of another input: a sum over input dims.
// CHECK-LABEL: func.func @dynamic_bound
// CHECK-SAME: %{{.*}}: tensor<?xi64> {h20.value_ranges = [{hi = {constant = 0 : i64, terms = [{coeff = 1 : i64, dim = 0 : i64, input = 0 : i64}]}, lo = {constant = 0 : i64, terms = [{coeff = -1 : i64, dim = 0 : i64, input = 0 : i64}]}
func.func @dynamic_bound(%d: tensor<?x3xf32>, %i: tensor<?xi64>) -> tensor<?x3xf32> {
  %y = onnx.Gather(%d, %i) {axis = 0 : si64} : (tensor<?x3xf32>, tensor<?xi64>) -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}

// -----

// Computed indices (an Add) are left to the kernels: nothing recorded.
// CHECK-LABEL: func.func @computed
// CHECK-NOT: h20.value_ranges
func.func @computed(%w: tensor<4x3xf32>, %i: tensor<2xi64>) -> tensor<2x3xf32> {
  %one = onnx.Constant() {value = dense<1> : tensor<2xi64>} : () -> tensor<2xi64>
  %j = onnx.Add(%i, %one) : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %y = onnx.Gather(%w, %j) {axis = 0 : si64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// A constant index outside the axis: an error naming the node.
func.func @constant_out_of_range(%w: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %i = onnx.Constant() {value = dense<[1, -5]> : tensor<2xi64>} : () -> tensor<2xi64>
  // ERR: m.onnx:0:0: error: node 'g' (op 'Gather'): indices element 1 is -5, outside [-4, 4) (dim 0 has size 4)
  %y = onnx.Gather(%w, %i) {axis = 0 : si64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32> loc("g"(fused<"Gather">["m.onnx":0:0]))
  return %y : tensor<2x3xf32>
}

// -----

// Two-level RoPE tables cover rows x block positions: [0, 2 * 64).
// CHECK-LABEL: func.func @rope_apply
// CHECK-SAME: h20.value_ranges = [{hi = {constant = 128 : i64, terms = []}, lo = {constant = 0 : i64, terms = []}
func.func @rope_apply(%x: tensor<1x2x4x8xf32>, %p: tensor<1x4xi64>, %c: tensor<2x2x4xf32>, %f: tensor<2x64x4xf32>) -> tensor<1x2x4x8xf32> {
  %y = attn.rope_apply %x, %p, %c, %f {rotary_dim = 8 : i64, interleaved = false, block = 64 : i64} : (tensor<1x2x4x8xf32>, tensor<1x4xi64>, tensor<2x2x4xf32>, tensor<2x64x4xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}
