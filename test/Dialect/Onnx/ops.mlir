// RUN: h20-opt %s | h20-opt | FileCheck %s
// Round trip of every onnx op: print, re-parse, print again.

// CHECK-LABEL: func.func @add
func.func @add(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Add(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Add(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @sub
func.func @sub(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Sub(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Sub(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @mul
func.func @mul(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Mul(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Mul(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @div
func.func @div(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Div(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Div(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @pow
func.func @pow(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Pow(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Pow(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.MatMul(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @and
func.func @and(%a: tensor<2x4xi1>, %b: tensor<2x4xi1>) -> tensor<2x4xi1> {
  // CHECK: onnx.And
  %0 = onnx.And(%a, %b) : (tensor<2x4xi1>, tensor<2x4xi1>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @or
func.func @or(%a: tensor<2x4xi1>, %b: tensor<2x4xi1>) -> tensor<2x4xi1> {
  // CHECK: onnx.Or
  %0 = onnx.Or(%a, %b) : (tensor<2x4xi1>, tensor<2x4xi1>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @equal
func.func @equal(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xi1> {
  // CHECK: onnx.Equal
  %0 = onnx.Equal(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @less
func.func @less(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xi1> {
  // CHECK: onnx.Less
  %0 = onnx.Less(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @lessorequal
func.func @lessorequal(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xi1> {
  // CHECK: onnx.LessOrEqual
  %0 = onnx.LessOrEqual(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @greater
func.func @greater(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xi1> {
  // CHECK: onnx.Greater
  %0 = onnx.Greater(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @greaterorequal
func.func @greaterorequal(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xi1> {
  // CHECK: onnx.GreaterOrEqual
  %0 = onnx.GreaterOrEqual(%a, %b) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @max
func.func @max(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Max(%{{.*}}, %{{.*}}, %{{.*}})
  %0 = onnx.Max(%a, %b, %a) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @min
func.func @min(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Min(%{{.*}}, %{{.*}}, %{{.*}})
  %0 = onnx.Min(%a, %b, %a) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @sum
func.func @sum(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Sum(%{{.*}}, %{{.*}}, %{{.*}})
  %0 = onnx.Sum(%a, %b, %a) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @neg
func.func @neg(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Neg(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Neg(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @abs
func.func @abs(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Abs(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Abs(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @sqrt
func.func @sqrt(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Sqrt(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Sqrt(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @reciprocal
func.func @reciprocal(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Reciprocal(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Reciprocal(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @exp
func.func @exp(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Exp(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Exp(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @log
func.func @log(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Log(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Log(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @sin
func.func @sin(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Sin(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Sin(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @cos
func.func @cos(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Cos(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Cos(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @tanh
func.func @tanh(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Tanh(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Tanh(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @erf
func.func @erf(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Erf(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Erf(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @sigmoid
func.func @sigmoid(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Sigmoid(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Sigmoid(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @softplus
func.func @softplus(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Softplus(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Softplus(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @relu
func.func @relu(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Relu(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Relu(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @identity
func.func @identity(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Identity(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %0 = onnx.Identity(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @not
func.func @not(%a: tensor<2x4xi1>) -> tensor<2x4xi1> {
  // CHECK: onnx.Not
  %0 = onnx.Not(%a) : (tensor<2x4xi1>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @isnan
func.func @isnan(%a: tensor<2x4xf32>) -> tensor<2x4xi1> {
  // CHECK: onnx.IsNaN
  %0 = onnx.IsNaN(%a) : (tensor<2x4xf32>) -> tensor<2x4xi1>
  return %0 : tensor<2x4xi1>
}

// CHECK-LABEL: func.func @where
func.func @where(%c: tensor<2x4xi1>, %a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Where
  %0 = onnx.Where(%c, %a, %b) : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @cast
func.func @cast(%a: tensor<2x4xf32>) -> tensor<2x4xi64> {
  // CHECK: onnx.Cast(%{{.*}}) {to = 7 : si64}
  %0 = onnx.Cast(%a) {to = 7 : si64} : (tensor<2x4xf32>) -> tensor<2x4xi64>
  return %0 : tensor<2x4xi64>
}

// CHECK-LABEL: func.func @gemm
func.func @gemm(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>, %c: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: onnx.Gemm(%{{.*}}, %{{.*}}, %{{.*}}) {alpha = 5.000000e-01 : f32, transB = 1 : si64}
  %0 = onnx.Gemm(%a, %b, %c) {alpha = 0.5 : f32, transB = 1 : si64} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @softmax
func.func @softmax(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Softmax(%{{.*}}) {axis = -1 : si64}
  %0 = onnx.Softmax(%a) {axis = -1 : si64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @reducemean
func.func @reducemean(%a: tensor<2x4xf32>, %axes: tensor<1xi64>) -> tensor<2x1xf32> {
  // CHECK: onnx.ReduceMean(%{{.*}}, %{{.*}}) {keepdims = 1 : si64}
  %0 = onnx.ReduceMean(%a, %axes) {keepdims = 1 : si64} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// CHECK-LABEL: func.func @reducesum
func.func @reducesum(%a: tensor<2x4xf32>, %axes: tensor<1xi64>) -> tensor<2x1xf32> {
  // CHECK: onnx.ReduceSum(%{{.*}}, %{{.*}}) {keepdims = 1 : si64}
  %0 = onnx.ReduceSum(%a, %axes) {keepdims = 1 : si64} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// CHECK-LABEL: func.func @reducemax
func.func @reducemax(%a: tensor<2x4xf32>, %axes: tensor<1xi64>) -> tensor<2x1xf32> {
  // CHECK: onnx.ReduceMax(%{{.*}}, %{{.*}}) {keepdims = 1 : si64}
  %0 = onnx.ReduceMax(%a, %axes) {keepdims = 1 : si64} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// CHECK-LABEL: func.func @rmsnormalization
func.func @rmsnormalization(%a: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.RMSNormalization(%{{.*}}, %{{.*}}) {axis = -1 : si64, epsilon = 9.99999974E-6 : f32, stash_type = 1 : si64}
  %0 = onnx.RMSNormalization(%a, %w) {axis = -1 : si64, epsilon = 1.0e-5 : f32, stash_type = 1 : si64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @layernormalization
func.func @layernormalization(%a: tensor<2x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.LayerNormalization(%{{.*}}, %{{.*}}, %{{.*}}) {axis = -1 : si64}
  %0 = onnx.LayerNormalization(%a, %w, %b) {axis = -1 : si64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>, %v: tensor<1x2x16x32xf32>) -> tensor<1x8x16x32xf32> {
  // CHECK: onnx.Attention(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {is_causal = 0 : si64, scale = 1.250000e-01 : f32}
  %m = onnx.NoValue
  %0 = onnx.Attention(%q, %k, %v, %m) {is_causal = 0 : si64, scale = 0.125 : f32} : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, none) -> tensor<1x8x16x32xf32>
  return %0 : tensor<1x8x16x32xf32>
}

// CHECK-LABEL: func.func @rotaryembedding
func.func @rotaryembedding(%x: tensor<1x8x16x32xf32>, %c: tensor<64x16xf32>, %s: tensor<64x16xf32>, %p: tensor<1x16xi64>) -> tensor<1x8x16x32xf32> {
  // CHECK: onnx.RotaryEmbedding(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {interleaved = 0 : si64}
  %0 = onnx.RotaryEmbedding(%x, %c, %s, %p) {interleaved = 0 : si64} : (tensor<1x8x16x32xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<1x16xi64>) -> tensor<1x8x16x32xf32>
  return %0 : tensor<1x8x16x32xf32>
}

// CHECK-LABEL: func.func @shape
func.func @shape(%a: tensor<2x4xf32>) -> tensor<1xi64> {
  // CHECK: onnx.Shape(%{{.*}}) {end = 2 : si64, start = 1 : si64}
  %0 = onnx.Shape(%a) {start = 1 : si64, end = 2 : si64} : (tensor<2x4xf32>) -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// CHECK-LABEL: func.func @reshape
func.func @reshape(%a: tensor<2x4xf32>, %s: tensor<1xi64>) -> tensor<8xf32> {
  // CHECK: onnx.Reshape
  %0 = onnx.Reshape(%a, %s) : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// CHECK-LABEL: func.func @transpose
func.func @transpose(%a: tensor<2x4xf32>) -> tensor<4x2xf32> {
  // CHECK: onnx.Transpose(%{{.*}}) {perm = array<i64: 1, 0>}
  %0 = onnx.Transpose(%a) {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2x4xf32>) -> tensor<4x4xf32> {
  // CHECK: onnx.Concat(%{{.*}}, %{{.*}}) {axis = 0 : si64}
  %0 = onnx.Concat(%a, %a) {axis = 0 : si64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// CHECK-LABEL: func.func @split
func.func @split(%a: tensor<2x4xf32>) -> tensor<2x2xf32> {
  // CHECK: onnx.Split(%{{.*}}) {axis = 1 : si64, num_outputs = 2 : si64}
  %0:2 = onnx.Split(%a) {axis = 1 : si64, num_outputs = 2 : si64} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return %0#1 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @slice
func.func @slice(%a: tensor<2x4xf32>, %s: tensor<1xi64>, %e: tensor<1xi64>, %x: tensor<1xi64>) -> tensor<2x2xf32> {
  // CHECK: onnx.Slice(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
  %0 = onnx.Slice(%a, %s, %e, %x) : (tensor<2x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @squeeze
func.func @squeeze(%a: tensor<1x4xf32>, %x: tensor<1xi64>) -> tensor<4xf32> {
  // CHECK: onnx.Squeeze
  %0 = onnx.Squeeze(%a, %x) : (tensor<1x4xf32>, tensor<1xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @unsqueeze
func.func @unsqueeze(%a: tensor<4xf32>, %x: tensor<1xi64>) -> tensor<1x4xf32> {
  // CHECK: onnx.Unsqueeze
  %0 = onnx.Unsqueeze(%a, %x) : (tensor<4xf32>, tensor<1xi64>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// CHECK-LABEL: func.func @expand
func.func @expand(%a: tensor<1x4xf32>, %s: tensor<2xi64>) -> tensor<2x4xf32> {
  // CHECK: onnx.Expand
  %0 = onnx.Expand(%a, %s) : (tensor<1x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @tile
func.func @tile(%a: tensor<1x4xf32>, %s: tensor<2xi64>) -> tensor<2x4xf32> {
  // CHECK: onnx.Tile
  %0 = onnx.Tile(%a, %s) : (tensor<1x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @gather
func.func @gather(%a: tensor<512x4xf32>, %i: tensor<1x?xi64>) -> tensor<1x?x4xf32> {
  // CHECK: onnx.Gather(%{{.*}}, %{{.*}}) {axis = 0 : si64}
  %0 = onnx.Gather(%a, %i) {axis = 0 : si64} : (tensor<512x4xf32>, tensor<1x?xi64>) -> tensor<1x?x4xf32>
  return %0 : tensor<1x?x4xf32>
}

// CHECK-LABEL: func.func @gathernd
func.func @gathernd(%a: tensor<2x4xf32>, %i: tensor<3x1xi64>) -> tensor<3x4xf32> {
  // CHECK: onnx.GatherND(%{{.*}}, %{{.*}}) {batch_dims = 0 : si64}
  %0 = onnx.GatherND(%a, %i) {batch_dims = 0 : si64} : (tensor<2x4xf32>, tensor<3x1xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @range
func.func @range(%s: tensor<i64>, %l: tensor<i64>, %d: tensor<i64>) -> tensor<?xi64> {
  // CHECK: onnx.Range
  %0 = onnx.Range(%s, %l, %d) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// CHECK-LABEL: func.func @cumsum
func.func @cumsum(%a: tensor<2x4xf32>, %x: tensor<i64>) -> tensor<2x4xf32> {
  // CHECK: onnx.CumSum(%{{.*}}, %{{.*}}) {exclusive = 0 : si64, reverse = 0 : si64}
  %0 = onnx.CumSum(%a, %x) {exclusive = 0 : si64, reverse = 0 : si64} : (tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @trilu
func.func @trilu(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Trilu(%{{.*}}) {upper = 0 : si64}
  %0 = onnx.Trilu(%a) {upper = 0 : si64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @constantofshape
func.func @constantofshape(%s: tensor<2xi64>) -> tensor<2x4xf32> {
  // CHECK: onnx.ConstantOfShape(%{{.*}}) {value = dense<0.000000e+00> : tensor<1xf32>}
  %0 = onnx.ConstantOfShape(%s) {value = dense<0.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @constant
func.func @constant() -> tensor<2xi64> {
  // CHECK: onnx.Constant() {value = dense<[1, 2]> : tensor<2xi64>}
  %0 = onnx.Constant() {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @weight
func.func @weight() -> tensor<2x4xf32> {
  // CHECK: onnx.Weight {file = "model.onnx.data", length = 32 : i64, name = "embed.weight", offset = 4096 : i64} : tensor<2x4xf32>
  %0 = onnx.Weight {name = "embed.weight", file = "model.onnx.data", offset = 4096 : i64, length = 32 : i64} : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @novalue
func.func @novalue(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x16x32xf32>, %v: tensor<1x2x16x32xf32>) -> tensor<1x8x16x32xf32> {
  // CHECK: %[[N:.*]] = onnx.NoValue
  // CHECK: onnx.Attention({{.*}}, %[[N]])
  %n = onnx.NoValue
  %0 = onnx.Attention(%q, %k, %v, %n) : (tensor<1x8x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, none) -> tensor<1x8x16x32xf32>
  return %0 : tensor<1x8x16x32xf32>
}

// CHECK-LABEL: func.func @ms_simplifiedlayernormalization
func.func @ms_simplifiedlayernormalization(%x: tensor<1x16x128xf32>, %w: tensor<128xf32>) -> tensor<1x16x128xf32> {
  // CHECK: onnx.ms.SimplifiedLayerNormalization
  %0 = onnx.ms.SimplifiedLayerNormalization(%x, %w) {epsilon = 1.0e-6 : f32} : (tensor<1x16x128xf32>, tensor<128xf32>) -> tensor<1x16x128xf32>
  return %0 : tensor<1x16x128xf32>
}

// CHECK-LABEL: func.func @ms_skipsimplifiedlayernormalization
func.func @ms_skipsimplifiedlayernormalization(%x: tensor<1x16x128xf32>, %s: tensor<1x16x128xf32>, %w: tensor<128xf32>) -> tensor<1x16x128xf32> {
  // CHECK: onnx.ms.SkipSimplifiedLayerNormalization
  %0:2 = onnx.ms.SkipSimplifiedLayerNormalization(%x, %s, %w) {epsilon = 1.0e-6 : f32} : (tensor<1x16x128xf32>, tensor<1x16x128xf32>, tensor<128xf32>) -> (tensor<1x16x128xf32>, tensor<1x16x128xf32>)
  return %0#0 : tensor<1x16x128xf32>
}

// CHECK-LABEL: func.func @ms_rotaryembedding
func.func @ms_rotaryembedding(%x: tensor<1x16x128xf32>, %p: tensor<1x16xi64>, %c: tensor<64x16xf32>, %s: tensor<64x16xf32>) -> tensor<1x16x128xf32> {
  // CHECK: onnx.ms.RotaryEmbedding
  %0 = onnx.ms.RotaryEmbedding(%x, %p, %c, %s) {num_heads = 4 : si64} : (tensor<1x16x128xf32>, tensor<1x16xi64>, tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<1x16x128xf32>
  return %0 : tensor<1x16x128xf32>
}

// CHECK-LABEL: func.func @ms_groupqueryattention
func.func @ms_groupqueryattention(%q: tensor<1x16x128xf32>, %k: tensor<1x16x32xf32>, %v: tensor<1x16x32xf32>, %sl: tensor<1xi32>, %tl: tensor<i32>) -> tensor<1x16x128xf32> {
  // CHECK: onnx.ms.GroupQueryAttention
  %n = onnx.NoValue
  %0 = onnx.ms.GroupQueryAttention(%q, %k, %v, %n, %n, %sl, %tl) {kv_num_heads = 2 : si64, num_heads = 8 : si64} : (tensor<1x16x128xf32>, tensor<1x16x32xf32>, tensor<1x16x32xf32>, none, none, tensor<1xi32>, tensor<i32>) -> tensor<1x16x128xf32>
  return %0 : tensor<1x16x128xf32>
}

// CHECK-LABEL: func.func @ms_multiheadattention
func.func @ms_multiheadattention(%q: tensor<1x16x128xf32>, %k: tensor<1x16x128xf32>, %v: tensor<1x16x128xf32>) -> tensor<1x16x128xf32> {
  // CHECK: onnx.ms.MultiHeadAttention
  %0 = onnx.ms.MultiHeadAttention(%q, %k, %v) {num_heads = 4 : si64} : (tensor<1x16x128xf32>, tensor<1x16x128xf32>, tensor<1x16x128xf32>) -> tensor<1x16x128xf32>
  return %0 : tensor<1x16x128xf32>
}

// CHECK-LABEL: func.func @rounding_sign_clip
func.func @rounding_sign_clip(%x: tensor<2x4xf32>, %lo: tensor<f32>) -> tensor<2x4xf32> {
  // CHECK: onnx.Round
  // CHECK: onnx.Floor
  // CHECK: onnx.Ceil
  // CHECK: onnx.Sign
  // CHECK: onnx.Clip(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x4xf32>, tensor<f32>, none) -> tensor<2x4xf32>
  %n = onnx.NoValue
  %0 = onnx.Round(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = onnx.Floor(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = onnx.Ceil(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = onnx.Sign(%2) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = onnx.Clip(%3, %lo, %n) : (tensor<2x4xf32>, tensor<f32>, none) -> tensor<2x4xf32>
  return %4 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @mod_bitwise
func.func @mod_bitwise(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  // CHECK: onnx.Mod(%{{.*}}, %{{.*}}) {fmod = 1 : si64}
  // CHECK: onnx.BitwiseAnd
  // CHECK: onnx.BitwiseOr
  // CHECK: onnx.BitwiseXor
  // CHECK: onnx.BitwiseNot
  %0 = onnx.Mod(%a, %b) {fmod = 1 : si64} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %1 = onnx.BitwiseAnd(%0, %b) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %2 = onnx.BitwiseOr(%1, %b) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %3 = onnx.BitwiseXor(%2, %b) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %4 = onnx.BitwiseNot(%3) : (tensor<4xi64>) -> tensor<4xi64>
  return %4 : tensor<4xi64>
}

// CHECK-LABEL: func.func @topk_gather_scatter_elements
func.func @topk_gather_scatter_elements(%x: tensor<3x8xf32>, %k: tensor<1xi64>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> (tensor<3x?xf32>, tensor<3x?xi64>, tensor<3x2xf32>, tensor<3x8xf32>) {
  // CHECK: onnx.TopK(%{{.*}}, %{{.*}}) {axis = -1 : si64, largest = 0 : si64, sorted = 1 : si64} : (tensor<3x8xf32>, tensor<1xi64>) -> (tensor<3x?xf32>, tensor<3x?xi64>)
  // CHECK: onnx.GatherElements(%{{.*}}, %{{.*}}) {axis = 1 : si64}
  // CHECK: onnx.ScatterElements(%{{.*}}, %{{.*}}, %{{.*}}) {axis = -1 : si64, reduction = "mul"}
  %0:2 = onnx.TopK(%x, %k) {axis = -1 : si64, largest = 0 : si64, sorted = 1 : si64} : (tensor<3x8xf32>, tensor<1xi64>) -> (tensor<3x?xf32>, tensor<3x?xi64>)
  %1 = onnx.GatherElements(%x, %i) {axis = 1 : si64} : (tensor<3x8xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  %2 = onnx.ScatterElements(%x, %i, %u) {axis = -1 : si64, reduction = "mul"} : (tensor<3x8xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x8xf32>
  return %0#0, %0#1, %1, %2 : tensor<3x?xf32>, tensor<3x?xi64>, tensor<3x2xf32>, tensor<3x8xf32>
}
