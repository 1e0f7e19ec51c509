// RUN: h20-opt %s --split-input-file --h20-lower-to-linalg --verify-diagnostics | FileCheck %s
// What issue 27's lowerings produce: LayerNormalization as two row
// reductions (shifted sum, then squared deviations from the mean) and the
// normalized output; CumSum as a masked reduction over the axis, innermost;
// Trilu, GatherND and a negative-step Slice as parallel generics;
// Softplus in its stable form.

// Pass 1 sums x - x0 (x0: each row's first element, map (d0, 0)); pass 2
// sums ((x - x0) - sum1 / n)^2; Y and the statistics derive mean and
// InvStdDev from the two sums; Mean is x0 + sum1 / n.
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$FIRST:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @layernorm
// CHECK: %[[SUM1:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$FIRST]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg0
// CHECK:   arith.subf
// CHECK:   arith.addf
// CHECK: %[[SUM2:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$FIRST]], #[[$ROW]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%arg0, %arg0, %[[SUM1]]
// CHECK:   arith.subf
// CHECK:   arith.divf
// CHECK:   arith.subf
// CHECK:   arith.mulf
// CHECK:   arith.addf
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%arg0, %arg0, %[[SUM1]], %[[SUM2]], %arg1, %arg2
// CHECK:   math.sqrt
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM1]], %arg0
// CHECK: tensor.reshape %[[MEAN]]
// CHECK: %[[INV:.*]] = linalg.generic {{.*}} ins(%[[SUM2]]
// CHECK: tensor.reshape %[[INV]]
func.func @layernorm(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>) {
  %y, %m, %i = onnx.LayerNormalization(%x, %s, %b) {axis = -1 : si64, epsilon = 1.0e-3 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y, %m, %i : tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>
}

// -----

// Normalized over dims 1 and 2 (axis = -2): both reduce; statistics [2].
// CHECK-LABEL: func.func @layernorm_two_axes
// CHECK: iterator_types = ["parallel", "reduction", "reduction"]
// CHECK: iterator_types = ["parallel", "reduction", "reduction"]
// CHECK: iterator_types = ["parallel", "parallel", "parallel"]
func.func @layernorm_two_axes(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %y = onnx.LayerNormalization(%x, %s) {axis = -2 : si64} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// stash_type other than float / double is refused.
func.func @layernorm_stash(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{stash_type must be 1 (float) or 11 (double), got 10}}
  %y = onnx.LayerNormalization(%x, %s) {stash_type = 10 : si64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// exclusive + reverse along axis -1: out[i, k] sums x[i, j] for j > k, the
// summed position j the innermost (reduction) loop.
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @cumsum
// CHECK: linalg.generic {indexing_maps = [#[[$X]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:   %[[J:.*]] = linalg.index 2
// CHECK:   %[[K:.*]] = linalg.index 1
// CHECK:   arith.cmpi sgt, %[[J]], %[[K]]
// CHECK:   arith.select
// CHECK:   arith.addf
func.func @cumsum(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %a = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %0 = onnx.CumSum(%x, %a) {exclusive = 1 : si64, reverse = 1 : si64} : (tensor<3x5xf32>, tensor<1xi64>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// Inclusive, forward, over axis 0 of int64: j <= i, integer adds.
// CHECK-LABEL: func.func @cumsum_int
// CHECK: arith.cmpi sle
// CHECK: arith.addi
func.func @cumsum_int(%x: tensor<4x2xi64>) -> tensor<4x2xi64> {
  %a = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %0 = onnx.CumSum(%x, %a) : (tensor<4x2xi64>, tensor<i64>) -> tensor<4x2xi64>
  return %0 : tensor<4x2xi64>
}

// -----

// CumSum's axis must be known when compiling.
func.func @cumsum_runtime_axis(%x: tensor<4x2xf32>, %a: tensor<i64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{axis must be a constant 0-d or 1-element tensor in [-r, r)}}
  %0 = onnx.CumSum(%x, %a) : (tensor<4x2xf32>, tensor<i64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// Lower triangle with a run-time k: keep where j - i <= k (k read at 0 as
// an operand of the generic).
// CHECK-DAG: #[[$K:.*]] = affine_map<(d0, d1, d2) -> ()>
// CHECK-LABEL: func.func @trilu
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<2x3x5xf32>, tensor<i64>)
// CHECK:   %[[J:.*]] = linalg.index 2
// CHECK:   %[[I:.*]] = linalg.index 1
// CHECK:   %[[D:.*]] = arith.subi
// CHECK:   arith.cmpi sle, %[[D]], %in_0 : i64
// CHECK:   arith.select
func.func @trilu(%x: tensor<2x3x5xf32>, %k: tensor<i64>) -> tensor<2x3x5xf32> {
  %0 = onnx.Trilu(%x, %k) {upper = 0 : si64} : (tensor<2x3x5xf32>, tensor<i64>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// batch_dims = 1: data[b, indices[b, n, 0], k] (negative indices wrap,
// out-of-range ones are clamped).
// CHECK-LABEL: func.func @gathernd
// CHECK: linalg.generic {{.*}} outs(
// CHECK:   %[[B:.*]] = linalg.index 0
// CHECK:   %[[N:.*]] = linalg.index 1
// CHECK:   %[[K:.*]] = linalg.index 2
// CHECK:   tensor.extract %arg1[%[[B]], %[[N]], %{{.*}}] : tensor<2x5x1xi64>
// CHECK:   arith.cmpi slt
// CHECK:   arith.minsi
// CHECK:   arith.maxsi
// CHECK:   tensor.extract %arg0[%[[B]], %{{.*}}, %[[K]]] : tensor<2x3x4xf32>
func.func @gathernd(%d: tensor<2x3x4xf32>, %i: tensor<2x5x1xi64>) -> tensor<2x5x4xf32> {
  %0 = onnx.GatherND(%d, %i) {batch_dims = 1 : si64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
  return %0 : tensor<2x5x4xf32>
}

// -----

// Step -2 from -1 to INT64_MIN: start clamped to [0, d - 1], end to
// [-1, d - 1], length ceildiv(end - start, -2); a gather generic reads
// x[i, start - 2 j].
// CHECK-LABEL: func.func @slice_negative_step
// CHECK: arith.maxsi %{{.*}}, %c-1_i64
// CHECK: arith.ceildivsi %{{.*}}, %c-2_i64
// CHECK: %[[OUT:.*]] = tensor.empty(%{{.*}}) : tensor<4x?xf32>
// CHECK: linalg.generic {{.*}} outs(%[[OUT]]
// CHECK:   %[[I:.*]] = linalg.index 0
// CHECK:   %[[J:.*]] = linalg.index 1
// CHECK:   %[[S:.*]] = arith.muli %[[J]], %c-2
// CHECK:   %[[AT:.*]] = arith.addi %{{.*}}, %[[S]]
// CHECK:   tensor.extract %arg0[%[[I]], %[[AT]]]
// CHECK-NOT: tensor.extract_slice
func.func @slice_negative_step(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %s = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant() {value = dense<-9223372036854775808> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %st = onnx.Constant() {value = dense<-2> : tensor<1xi64>} : () -> tensor<1xi64>
  %0 = onnx.Slice(%x, %s, %e, %a, %st) : (tensor<4x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// -----

// Positive steps stay one strided extract_slice.
// CHECK-LABEL: func.func @slice_positive_step
// CHECK: tensor.extract_slice %arg0[%{{.*}}, 0] [%{{.*}}, 4] [3, 1]
// CHECK-NOT: linalg.generic
func.func @slice_positive_step(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %s = onnx.Constant() {value = dense<-9223372036854775808> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %st = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %0 = onnx.Slice(%x, %s, %e, %a, %st) : (tensor<?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Softplus: x > 20 ? x + log1p(exp(-x)) : log1p(exp(x)) (never exp of a
// large x on the path taken).
// CHECK-LABEL: func.func @softplus
// CHECK: %[[LARGE:.*]] = arith.cmpf ogt, %in, %{{.*}} : f32
// CHECK: %[[NEG:.*]] = arith.negf %in
// CHECK: %[[E:.*]] = math.exp %[[NEG]]
// CHECK: %[[L:.*]] = math.log1p %[[E]]
// CHECK: %[[ABOVE:.*]] = arith.addf %in, %[[L]]
// CHECK: %[[EX:.*]] = math.exp %in
// CHECK: %[[BELOW:.*]] = math.log1p %[[EX]]
// CHECK: arith.select %[[LARGE]], %[[ABOVE]], %[[BELOW]]
func.func @softplus(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Softplus(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Float Range: (limit - start) in f32, divided in f64, ceil, at least 0.
// CHECK-LABEL: func.func @range_float
// CHECK: %[[D:.*]] = arith.subf
// CHECK: %[[D64:.*]] = arith.extf %[[D]] : f32 to f64
// CHECK: arith.divf %[[D64]]
// CHECK: math.ceil
// CHECK: arith.fptosi
// CHECK: arith.maxsi
func.func @range_float(%s: tensor<f32>, %l: tensor<f32>, %d: tensor<f32>) -> tensor<?xf32> {
  %0 = onnx.Range(%s, %l, %d) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
