// RUN: h20-opt %s --split-input-file --h20-cancel-transposes | FileCheck %s

// DeepSeek-V4.1's query RoPE: [S, 4, 32] queries go to [1, 4, S, 32], the
// last 8 channels rotate, the pieces concatenate and go back. In the
// source layout only the rotated piece is transposed (to [1, 4, S, 8] for
// the RoPE and back): 2 x 8 channels instead of 2 x 32.
// CHECK-LABEL: func.func @partial_rope
// CHECK-SAME: (%[[X:.*]]: tensor<?x4x32xf32>, %[[POS:.*]]: tensor<1x?xi64>)
// CHECK: %[[U:.*]] = onnx.Unsqueeze(%[[X]], %{{.*}}) : (tensor<?x4x32xf32>, tensor<1xi64>) -> tensor<1x?x4x32xf32>
// CHECK: %[[S:.*]]:2 = onnx.Split(%[[U]], %{{.*}}) {axis = 3 : si64} : (tensor<1x?x4x32xf32>, tensor<2xi64>) -> (tensor<1x?x4x24xf32>, tensor<1x?x4x8xf32>)
// CHECK: %[[T:.*]] = onnx.Transpose(%[[S]]#1) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x?x4x8xf32>) -> tensor<1x4x?x8xf32>
// CHECK: %[[R:.*]] = attn.rope %[[T]], %[[POS]]
// CHECK: %[[B:.*]] = onnx.Transpose(%[[R]]) {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x?x8xf32>) -> tensor<1x?x4x8xf32>
// CHECK: %[[C:.*]] = onnx.Concat(%[[S]]#0, %[[B]]) {axis = 3 : si64} : (tensor<1x?x4x24xf32>, tensor<1x?x4x8xf32>) -> tensor<1x?x4x32xf32>
// CHECK: %[[Q:.*]] = onnx.Squeeze(%[[C]], %[[AX:.*]]) : (tensor<1x?x4x32xf32>, tensor<1xi64>) -> tensor<?x4x32xf32>
// CHECK: return %[[Q]]
// CHECK-NOT: onnx.Transpose
func.func @partial_rope(%x: tensor<?x4x32xf32>, %pos: tensor<1x?xi64>) -> tensor<?x4x32xf32> {
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %sizes = onnx.Constant() {value = dense<[24, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<?x4x32xf32>) -> tensor<4x?x32xf32>
  %u = onnx.Unsqueeze(%t, %zero) : (tensor<4x?x32xf32>, tensor<1xi64>) -> tensor<1x4x?x32xf32>
  %s:2 = onnx.Split(%u, %sizes) {axis = 3 : si64} : (tensor<1x4x?x32xf32>, tensor<2xi64>) -> (tensor<1x4x?x24xf32>, tensor<1x4x?x8xf32>)
  %r = attn.rope %s#1, %pos {theta = 1.0e4 : f64, rotary_dim = 8 : i64, interleaved = true} : (tensor<1x4x?x8xf32>, tensor<1x?xi64>) -> tensor<1x4x?x8xf32>
  %c = onnx.Concat(%s#0, %r) {axis = 3 : si64} : (tensor<1x4x?x24xf32>, tensor<1x4x?x8xf32>) -> tensor<1x4x?x32xf32>
  %q = onnx.Squeeze(%c, %zero) : (tensor<1x4x?x32xf32>, tensor<1xi64>) -> tensor<4x?x32xf32>
  %b = onnx.Transpose(%q) {perm = array<i64: 1, 0, 2>} : (tensor<4x?x32xf32>) -> tensor<?x4x32xf32>
  return %b : tensor<?x4x32xf32>
}

// -----

// The attention output's inverse RoPE: a chain of islands (Mul by a
// constant, RoPE, Mul) reads one transposed piece and gives one back.
// CHECK-LABEL: func.func @island_chain
// CHECK: onnx.Split
// CHECK-NEXT: %[[T:.*]] = onnx.Transpose(%{{.*}}#1) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: %[[M:.*]] = onnx.Mul(%[[T]], %[[SIGN:.*]]) :
// CHECK-NEXT: %[[R:.*]] = attn.rope %[[M]]
// CHECK-NEXT: %[[M2:.*]] = onnx.Mul(%[[R]], %[[SIGN]]) :
// CHECK-NEXT: %[[B:.*]] = onnx.Transpose(%[[M2]]) {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: onnx.Concat(%{{.*}}#0, %[[B]]) {axis = 3 : si64}
// CHECK-NOT: onnx.Transpose
func.func @island_chain(%x: tensor<?x4x32xf32>, %pos: tensor<1x?xi64>) -> tensor<?x4x32xf32> {
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %sizes = onnx.Constant() {value = dense<[24, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %sign = onnx.Constant() {value = dense<[1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0]> : tensor<8xf32>} : () -> tensor<8xf32>
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<?x4x32xf32>) -> tensor<4x?x32xf32>
  %u = onnx.Unsqueeze(%t, %zero) : (tensor<4x?x32xf32>, tensor<1xi64>) -> tensor<1x4x?x32xf32>
  %s:2 = onnx.Split(%u, %sizes) {axis = 3 : si64} : (tensor<1x4x?x32xf32>, tensor<2xi64>) -> (tensor<1x4x?x24xf32>, tensor<1x4x?x8xf32>)
  %m = onnx.Mul(%s#1, %sign) : (tensor<1x4x?x8xf32>, tensor<8xf32>) -> tensor<1x4x?x8xf32>
  %r = attn.rope %m, %pos {theta = 1.0e4 : f64, rotary_dim = 8 : i64, interleaved = true} : (tensor<1x4x?x8xf32>, tensor<1x?xi64>) -> tensor<1x4x?x8xf32>
  %m2 = onnx.Mul(%r, %sign) : (tensor<1x4x?x8xf32>, tensor<8xf32>) -> tensor<1x4x?x8xf32>
  %c = onnx.Concat(%s#0, %m2) {axis = 3 : si64} : (tensor<1x4x?x24xf32>, tensor<1x4x?x8xf32>) -> tensor<1x4x?x32xf32>
  %q = onnx.Squeeze(%c, %zero) : (tensor<1x4x?x32xf32>, tensor<1xi64>) -> tensor<4x?x32xf32>
  %b = onnx.Transpose(%q) {perm = array<i64: 1, 0, 2>} : (tensor<4x?x32xf32>) -> tensor<?x4x32xf32>
  return %b : tensor<?x4x32xf32>
}

// -----

// A round trip whose island reads the whole tensor does not pay (it would
// move as many elements as the pair does): unchanged.
// CHECK-LABEL: func.func @whole_island
// CHECK: %[[T:.*]] = onnx.Transpose(%arg0) {perm = array<i64: 1, 0, 2>}
// CHECK-NEXT: %[[N:.*]] = onnx.Neg(%[[T]])
// CHECK-NEXT: %[[B:.*]] = onnx.Transpose(%[[N]]) {perm = array<i64: 1, 0, 2>}
// CHECK-NEXT: return %[[B]]
func.func @whole_island(%x: tensor<?x4x32xf32>) -> tensor<?x4x32xf32> {
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<?x4x32xf32>) -> tensor<4x?x32xf32>
  %n = onnx.Neg(%t) : (tensor<4x?x32xf32>) -> tensor<4x?x32xf32>
  %b = onnx.Transpose(%n) {perm = array<i64: 1, 0, 2>} : (tensor<4x?x32xf32>) -> tensor<?x4x32xf32>
  return %b : tensor<?x4x32xf32>
}

// -----

// Transposes that compose to the identity through an inner one, with
// squeezed unit dims: the whole chain is copies, so nothing is left.
// CHECK-LABEL: func.func @compose
// CHECK-NOT: onnx.Transpose
// CHECK: %[[U:.*]] = onnx.Unsqueeze(%arg0, %{{.*}}) : (tensor<2x?x8xf32>, tensor<1xi64>) -> tensor<2x1x?x8xf32>
// CHECK: %[[Q:.*]] = onnx.Squeeze(%[[U]], %{{.*}}) : (tensor<2x1x?x8xf32>, tensor<1xi64>) -> tensor<2x?x8xf32>
// CHECK-NEXT: return %[[Q]]
func.func @compose(%x: tensor<2x?x8xf32>) -> tensor<2x?x8xf32> {
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %t = onnx.Transpose(%x) {perm = array<i64: 2, 0, 1>} : (tensor<2x?x8xf32>) -> tensor<8x2x?xf32>
  %u = onnx.Unsqueeze(%t, %one) : (tensor<8x2x?xf32>, tensor<1xi64>) -> tensor<8x1x2x?xf32>
  %t2 = onnx.Transpose(%u) {perm = array<i64: 1, 0, 2, 3>} : (tensor<8x1x2x?xf32>) -> tensor<1x8x2x?xf32>
  %q = onnx.Squeeze(%t2, %zero) : (tensor<1x8x2x?xf32>, tensor<1xi64>) -> tensor<8x2x?xf32>
  %b = onnx.Transpose(%q) {perm = array<i64: 1, 2, 0>} : (tensor<8x2x?xf32>) -> tensor<2x?x8xf32>
  return %b : tensor<2x?x8xf32>
}

// -----

// A region value that leaves it (here: returned) keeps everything as is.
// CHECK-LABEL: func.func @escapes
// CHECK-COUNT-2: onnx.Transpose
func.func @escapes(%x: tensor<?x4x32xf32>) -> (tensor<?x4x32xf32>, tensor<1x4x?x32xf32>) {
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<?x4x32xf32>) -> tensor<4x?x32xf32>
  %u = onnx.Unsqueeze(%t, %zero) : (tensor<4x?x32xf32>, tensor<1xi64>) -> tensor<1x4x?x32xf32>
  %q = onnx.Squeeze(%u, %zero) : (tensor<1x4x?x32xf32>, tensor<1xi64>) -> tensor<4x?x32xf32>
  %b = onnx.Transpose(%q) {perm = array<i64: 1, 0, 2>} : (tensor<4x?x32xf32>) -> tensor<?x4x32xf32>
  return %b, %u : tensor<?x4x32xf32>, tensor<1x4x?x32xf32>
}

// -----

// The end's declared type differs from the source-layout value's (a shape
// refined along the chain): the end could not be replaced, so nothing is.
// CHECK-LABEL: func.func @end_type
// CHECK-COUNT-2: onnx.Transpose
func.func @end_type(%x: tensor<?x4xf32>) -> tensor<1x?x4xf32> {
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0>} : (tensor<?x4xf32>) -> tensor<4x?xf32>
  %u = onnx.Unsqueeze(%t, %zero) : (tensor<4x?xf32>, tensor<1xi64>) -> tensor<1x4x6xf32>
  %b = onnx.Transpose(%u) {perm = array<i64: 0, 2, 1>} : (tensor<1x4x6xf32>) -> tensor<1x?x4xf32>
  return %b : tensor<1x?x4xf32>
}

// -----

// A transparent op with a result of unknown rank: left alone.
// CHECK-LABEL: func.func @unranked
// CHECK-COUNT-2: onnx.Transpose
func.func @unranked(%x: tensor<2x3x8xf32>) -> tensor<2x3x4xf32> {
  %t = onnx.Transpose(%x) {perm = array<i64: 1, 0, 2>} : (tensor<2x3x8xf32>) -> tensor<3x2x8xf32>
  %s:2 = onnx.Split(%t) {axis = 2 : si64, num_outputs = 2 : si64} : (tensor<3x2x8xf32>) -> (tensor<3x2x4xf32>, tensor<*xf32>)
  %b = onnx.Transpose(%s#0) {perm = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  return %b : tensor<2x3x4xf32>
}
