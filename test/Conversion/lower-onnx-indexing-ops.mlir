// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg | FileCheck %s
// What the ops added for DeepSeek-V4.1 lower to: elementwise generics
// (Round, Mod, Bitwise, Clip), a gathering generic (GatherElements),
// scf.for nests over tensors (ScatterElements, TopK) and slices (Split).

// CHECK-LABEL: func.func @round_floor_ceil_sign
// CHECK: math.roundeven
// CHECK: math.floor
// CHECK: math.ceil
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf olt
func.func @round_floor_ceil_sign(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Round(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = onnx.Floor(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = onnx.Ceil(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = onnx.Sign(%2) : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// Integer Mod (fmod = 0): the truncated remainder by a divisor that is
// never 0 or -1, moved into the divisor's sign.
// CHECK-LABEL: func.func @mod_int
// CHECK: arith.select
// CHECK: arith.remsi
// CHECK: arith.addi
// CHECK: arith.select
// CHECK-LABEL: func.func @mod_float
// CHECK: arith.remf
func.func @mod_int(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  %0 = onnx.Mod(%a, %b) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}
func.func @mod_float(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Mod(%a, %b) {fmod = 1 : si64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @bitwise
// CHECK: arith.andi
// CHECK: arith.ori
// CHECK: arith.xori
// CHECK: %[[ONES:.*]] = arith.constant -1 : i32
// CHECK: arith.xori %{{.*}}, %[[ONES]]
func.func @bitwise(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = onnx.BitwiseAnd(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = onnx.BitwiseOr(%0, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %2 = onnx.BitwiseXor(%1, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %3 = onnx.BitwiseNot(%2) : (tensor<4xi32>) -> tensor<4xi32>
  return %3 : tensor<4xi32>
}

// -----

// Clip's bounds are operands of the generic, read at index 0 (shape [1])
// or as scalars; an omitted bound is left out.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG: #[[FIRST:.*]] = affine_map<(d0, d1) -> (0)>
// CHECK: func.func @clip
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[SCALAR]], #[[FIRST]], #[[ID]]]
// CHECK: arith.maximumf
// CHECK: arith.minimumf
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[FIRST]], #[[ID]]]
// CHECK-NOT: arith.maximumf
// CHECK: arith.minimumf
func.func @clip(%x: tensor<2x3xf32>, %lo: tensor<f32>, %hi: tensor<1xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %n = onnx.NoValue
  %0 = onnx.Clip(%x, %lo, %hi) : (tensor<2x3xf32>, tensor<f32>, tensor<1xf32>) -> tensor<2x3xf32>
  %1 = onnx.Clip(%x, %n, %hi) : (tensor<2x3xf32>, none, tensor<1xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// GatherElements: one generic over the indices, reading data at the index
// (negative ones + the dim, clamped) on the axis.
// CHECK-LABEL: func.func @gather_elements
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x2xi64>) outs(%{{.*}} : tensor<?x2xf32>)
// CHECK: arith.index_cast
// CHECK: arith.cmpi slt
// CHECK: arith.minsi
// CHECK: arith.maxsi
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<?x5xf32>
func.func @gather_elements(%d: tensor<?x5xf32>, %i: tensor<?x2xi64>) -> tensor<?x2xf32> {
  %0 = onnx.GatherElements(%d, %i) {axis = 1 : si64} : (tensor<?x5xf32>, tensor<?x2xi64>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}

// -----

// ScatterElements: a loop nest over the indices carrying the output.
// CHECK-LABEL: func.func @scatter_elements
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<3x5xf32>)
// CHECK: scf.for {{.*}} -> (tensor<3x5xf32>)
// CHECK: tensor.extract %{{.*}} : tensor<3x2xi64>
// CHECK: tensor.extract %{{.*}} : tensor<3x5xf32>
// CHECK: arith.addf
// CHECK: tensor.insert
func.func @scatter_elements(%d: tensor<3x5xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x5xf32> {
  %0 = onnx.ScatterElements(%d, %i, %u) {axis = 1 : si64, reduction = "add"} : (tensor<3x5xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// TopK with a K read at run time: rows -> picks (K, clamped to the axis)
// -> a scan of the row; values and int64 indices inserted per pick.
// CHECK-LABEL: func.func @topk
// CHECK: %[[KRAW:.*]] = tensor.extract %{{.*}}[%{{.*}}] : tensor<1xi64>
// CHECK: %[[K0:.*]] = arith.index_cast %[[KRAW]]
// CHECK: %[[K1:.*]] = arith.minsi %[[K0]]
// CHECK: %[[K:.*]] = arith.maxsi %[[K1]]
// CHECK: tensor.empty(%[[K]]) : tensor<3x?xf32>
// CHECK: tensor.empty(%[[K]]) : tensor<3x?xi64>
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[K]]
// CHECK: scf.for
// CHECK: arith.cmpf ogt
// CHECK: scf.yield
// CHECK: arith.index_cast %{{.*}} : index to i64
// CHECK: tensor.insert
// CHECK: tensor.insert
func.func @topk(%x: tensor<3x8xf32>, %k: tensor<1xi64>) -> (tensor<3x?xf32>, tensor<3x?xi64>) {
  %0:2 = onnx.TopK(%x, %k) : (tensor<3x8xf32>, tensor<1xi64>) -> (tensor<3x?xf32>, tensor<3x?xi64>)
  return %0#0, %0#1 : tensor<3x?xf32>, tensor<3x?xi64>
}

// -----

// Split: one extract_slice per output, at the running offset; equal shares
// are ceil(d / n), the last output what remains.
// CHECK-LABEL: func.func @split_equal
// CHECK: %[[CHUNK:.*]] = arith.ceildivui %c7, %c3 : index
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [3, 4] [1, 1] : tensor<7x4xf32> to tensor<3x4xf32>
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [3, 4] [1, 1] : tensor<7x4xf32> to tensor<3x4xf32>
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [1, 4] [1, 1] : tensor<7x4xf32> to tensor<1x4xf32>
func.func @split_equal(%x: tensor<7x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>) {
  %0:3 = onnx.Split(%x) {axis = 0 : si64, num_outputs = 3 : si64} : (tensor<7x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>)
  return %0#0, %0#1, %0#2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>
}
