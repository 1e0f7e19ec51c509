// RUN: h20-opt %s --split-input-file --h20-infer-shapes | FileCheck %s
// Shape rules of issue 27: Range with any constant delta and float Range,
// Slice with steps other than 1 (INT64 sentinels, negative steps, the
// step < 0 clamps), GatherND with batch_dims, LayerNormalization's three
// outputs.

// Range 10 -> 0 by -3: ceil(-10 / -3) = 4 elements; int32 -2 -> -11 by -4:
// 3; float 0 -> 3 by 0.5: 6; float 1 -> -1 by -0.25: 8; an empty one: 0.
// CHECK-LABEL: func.func @range_constant
// CHECK: onnx.Range({{.*}}) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
// CHECK: onnx.Range({{.*}}) : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3xi32>
// CHECK: onnx.Range({{.*}}) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<6xf32>
// CHECK: onnx.Range({{.*}}) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
// CHECK: onnx.Range({{.*}}) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<0xi64>
func.func @range_constant() -> (tensor<*xi64>, tensor<*xi32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi64>) {
  %s = onnx.Constant() {value = dense<10> : tensor<i64>} : () -> tensor<i64>
  %l = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %d = onnx.Constant() {value = dense<-3> : tensor<i64>} : () -> tensor<i64>
  %r = onnx.Range(%s, %l, %d) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<*xi64>
  %r1 = onnx.Identity(%r) : (tensor<*xi64>) -> tensor<*xi64>
  %s32 = onnx.Constant() {value = dense<-2> : tensor<i32>} : () -> tensor<i32>
  %l32 = onnx.Constant() {value = dense<-11> : tensor<i32>} : () -> tensor<i32>
  %d32 = onnx.Constant() {value = dense<-4> : tensor<i32>} : () -> tensor<i32>
  %q = onnx.Range(%s32, %l32, %d32) : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<*xi32>
  %q1 = onnx.Identity(%q) : (tensor<*xi32>) -> tensor<*xi32>
  %fs = onnx.Constant() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %fl = onnx.Constant() {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %fd = onnx.Constant() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %f = onnx.Range(%fs, %fl, %fd) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  %f1 = onnx.Identity(%f) : (tensor<*xf32>) -> tensor<*xf32>
  %gs = onnx.Constant() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %gl = onnx.Constant() {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
  %gd = onnx.Constant() {value = dense<-0.25> : tensor<f32>} : () -> tensor<f32>
  %g = onnx.Range(%gs, %gl, %gd) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  %g1 = onnx.Identity(%g) : (tensor<*xf32>) -> tensor<*xf32>
  %e = onnx.Range(%l, %s, %d) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<*xi64>
  %e1 = onnx.Identity(%e) : (tensor<*xi64>) -> tensor<*xi64>
  return %r1, %q1, %f1, %g1, %e1 : tensor<*xi64>, tensor<*xi32>, tensor<*xf32>, tensor<*xf32>, tensor<*xi64>
}

// -----

// Counting S -> 0 by -1 gives S elements: the result adds to a tensor of
// S elements (the broadcast proves the dims equal). Run-time float bounds
// give a rank-1 result of unknown length.
// CHECK-LABEL: func.func @range_symbolic
// CHECK: onnx.Range({{.*}}) : (tensor<1xi64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
// CHECK: onnx.Add({{.*}}) : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
// CHECK: onnx.Range({{.*}}) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
func.func @range_symbolic(%x: tensor<?xi64> {onnx.dim_params = ["S"]}, %a: tensor<f32>, %b: tensor<f32>) -> (tensor<*xi64>, tensor<*xf32>) {
  %n = onnx.Shape(%x) : (tensor<?xi64>) -> tensor<1xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %r = onnx.Range(%n, %zero, %m1) : (tensor<1xi64>, tensor<i64>, tensor<i64>) -> tensor<*xi64>
  %sum = onnx.Add(%r, %x) : (tensor<*xi64>, tensor<?xi64>) -> tensor<*xi64>
  %y = onnx.Identity(%sum) : (tensor<*xi64>) -> tensor<*xi64>
  %f = onnx.Range(%a, %b, %a) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  %f1 = onnx.Identity(%f) : (tensor<*xf32>) -> tensor<*xf32>
  return %y, %f1 : tensor<*xi64>, tensor<*xf32>
}

// -----

// x[:, -1:INT64_MIN:-2] of [6, 7]: 4 columns; x[INT64_MAX:-INT64_MAX:-1]
// along rows: all 6; x[INT64_MIN:INT64_MAX:3] along rows: 2; x[100:-100:-1]
// along columns (start clamped to 6, end to -1): 7; x[4:-1:-1] along rows
// (end -1 is the last row): empty.
// CHECK-LABEL: func.func @slice_steps
// CHECK: onnx.Slice({{.*}}) -> tensor<6x4xf32>
// CHECK: onnx.Slice({{.*}}) -> tensor<6x7xf32>
// CHECK: onnx.Slice({{.*}}) -> tensor<2x7xf32>
// CHECK: onnx.Slice({{.*}}) -> tensor<6x7xf32>
// CHECK: onnx.Slice({{.*}}) -> tensor<0x7xf32>
func.func @slice_steps(%x: tensor<6x7xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %min = onnx.Constant() {value = dense<-9223372036854775808> : tensor<1xi64>} : () -> tensor<1xi64>
  %max = onnx.Constant() {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %nmax = onnx.Constant() {value = dense<-9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %m2 = onnx.Constant() {value = dense<-2> : tensor<1xi64>} : () -> tensor<1xi64>
  %p0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %p1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %p3 = onnx.Constant() {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %p4 = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %p100 = onnx.Constant() {value = dense<100> : tensor<1xi64>} : () -> tensor<1xi64>
  %m100 = onnx.Constant() {value = dense<-100> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = onnx.Slice(%x, %m1, %min, %p1, %m2) : (tensor<6x7xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %b = onnx.Slice(%x, %max, %nmax, %p0, %m1) : (tensor<6x7xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %c = onnx.Slice(%x, %min, %max, %p0, %p3) : (tensor<6x7xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %d = onnx.Slice(%x, %p100, %m100, %p1, %m1) : (tensor<6x7xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %e = onnx.Slice(%x, %p4, %m1, %p0, %m1) : (tensor<6x7xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %a1 = onnx.Identity(%a) : (tensor<*xf32>) -> tensor<*xf32>
  %b1 = onnx.Identity(%b) : (tensor<*xf32>) -> tensor<*xf32>
  %c1 = onnx.Identity(%c) : (tensor<*xf32>) -> tensor<*xf32>
  %d1 = onnx.Identity(%d) : (tensor<*xf32>) -> tensor<*xf32>
  %e1 = onnx.Identity(%e) : (tensor<*xf32>) -> tensor<*xf32>
  return %a1, %b1, %c1, %d1, %e1 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// A reversal over a dynamic dim N keeps N (it adds to x itself); a step of
// -2 over it gets a length of its own (still rank 2).
// CHECK-LABEL: func.func @slice_reverse_symbolic
// CHECK: onnx.Slice({{.*}}) -> tensor<2x?xf32>
// CHECK: onnx.Add({{.*}}) : (tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x?xf32>
// CHECK: onnx.Slice({{.*}}) -> tensor<2x?xf32>
func.func @slice_reverse_symbolic(%x: tensor<2x?xf32> {onnx.dim_params = ["", "N"]}) -> (tensor<*xf32>, tensor<*xf32>) {
  %min = onnx.Constant() {value = dense<-9223372036854775808> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = onnx.Constant() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %m2 = onnx.Constant() {value = dense<-2> : tensor<1xi64>} : () -> tensor<1xi64>
  %p1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = onnx.Slice(%x, %m1, %min, %p1, %m1) : (tensor<2x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %sum = onnx.Add(%r, %x) : (tensor<*xf32>, tensor<2x?xf32>) -> tensor<*xf32>
  %y = onnx.Identity(%sum) : (tensor<*xf32>) -> tensor<*xf32>
  %h = onnx.Slice(%x, %m1, %min, %p1, %m2) : (tensor<2x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %h1 = onnx.Identity(%h) : (tensor<*xf32>) -> tensor<*xf32>
  return %y, %h1 : tensor<*xf32>, tensor<*xf32>
}

// -----

// GatherND: indices.shape[:-1] + data.shape[batch_dims + m:].
// CHECK-LABEL: func.func @gathernd
// CHECK: onnx.GatherND({{.*}}) {batch_dims = 1 : si64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
// CHECK: onnx.GatherND({{.*}}) {batch_dims = 2 : si64} : (tensor<2x3x4x5xf32>, tensor<2x3x2xi64>) -> tensor<2x3xf32>
// CHECK: onnx.GatherND({{.*}}) : (tensor<2x3x4x5xf32>, tensor<7x2xi64>) -> tensor<7x4x5xf32>
func.func @gathernd(%d: tensor<2x3x4xf32>, %i: tensor<2x5x1xi64>, %e: tensor<2x3x4x5xf32>, %j: tensor<2x3x2xi64>, %k: tensor<7x2xi64>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %a = onnx.GatherND(%d, %i) {batch_dims = 1 : si64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<*xf32>
  %b = onnx.GatherND(%e, %j) {batch_dims = 2 : si64} : (tensor<2x3x4x5xf32>, tensor<2x3x2xi64>) -> tensor<*xf32>
  %c = onnx.GatherND(%e, %k) : (tensor<2x3x4x5xf32>, tensor<7x2xi64>) -> tensor<*xf32>
  %a1 = onnx.Identity(%a) : (tensor<*xf32>) -> tensor<*xf32>
  %b1 = onnx.Identity(%b) : (tensor<*xf32>) -> tensor<*xf32>
  %c1 = onnx.Identity(%c) : (tensor<*xf32>) -> tensor<*xf32>
  return %a1, %b1, %c1 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

// LayerNormalization: Y like X; Mean and InvStdDev with the normalized dims
// (axis -2 of rank 3: dims 1 and 2) set to 1.
// CHECK-LABEL: func.func @layernorm
// CHECK: onnx.LayerNormalization({{.*}}) -> (tensor<?x3x8xf32>, tensor<?x1x1xf32>, tensor<?x1x1xf32>)
func.func @layernorm(%x: tensor<?x3x8xf32>, %s: tensor<3x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %y, %m, %i = onnx.LayerNormalization(%x, %s) {axis = -2 : si64} : (tensor<?x3x8xf32>, tensor<3x8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  %y1 = onnx.Identity(%y) : (tensor<*xf32>) -> tensor<*xf32>
  %m1 = onnx.Identity(%m) : (tensor<*xf32>) -> tensor<*xf32>
  %i1 = onnx.Identity(%i) : (tensor<*xf32>) -> tensor<*xf32>
  return %y1, %m1, %i1 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
