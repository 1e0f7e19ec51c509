// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-gather-before-cast))' | FileCheck %s

// A table stored in FP8 (Gather takes no float8 in ONNX, so an export
// casts, then gathers): its rows are gathered in FP8, then cast; the
// table-wide Cast is gone.
// CHECK-LABEL: func.func @fp8_table
// CHECK: %[[W:.*]] = onnx.Weight {{.*}} : tensor<64x32xf8E4M3FN>
// CHECK: %[[R:.*]] = onnx.Gather(%[[W]], %arg0) {axis = 0 : si64} : (tensor<64x32xf8E4M3FN>, tensor<?x4xi64>) -> tensor<?x4x32xf8E4M3FN>
// CHECK: %[[F:.*]] = onnx.Cast(%[[R]]) {to = 1 : si64} : (tensor<?x4x32xf8E4M3FN>) -> tensor<?x4x32xf32>
// CHECK-NOT: onnx.Cast
// CHECK: return %[[F]]
func.func @fp8_table(%ids: tensor<?x4xi64>) -> tensor<?x4x32xf32> {
  %w = onnx.Weight {file = "w.bin", length = 2048 : i64, name = "engram", offset = 0 : i64} : tensor<64x32xf8E4M3FN>
  %c = onnx.Cast(%w) {to = 1 : si64} : (tensor<64x32xf8E4M3FN>) -> tensor<64x32xf32>
  %g = onnx.Gather(%c, %ids) {axis = 0 : si64} : (tensor<64x32xf32>, tensor<?x4xi64>) -> tensor<?x4x32xf32>
  return %g : tensor<?x4x32xf32>
}

// -----

// A Cast another op also reads stays for it (that op needs the whole
// table); the Gather still reads the stored rows. An activation's Cast is
// left alone: gathering first is no cheaper there in general.
// CHECK-LABEL: func.func @other_readers
// CHECK: %[[W:.*]] = onnx.Weight
// CHECK: %[[C:.*]] = onnx.Cast(%[[W]]) {to = 1 : si64} : (tensor<64x32xbf16>) -> tensor<64x32xf32>
// CHECK: %[[R:.*]] = onnx.Gather(%[[W]], %arg0) {axis = 0 : si64} : (tensor<64x32xbf16>, tensor<?xi64>) -> tensor<?x32xbf16>
// CHECK: onnx.Cast(%[[R]]) {to = 1 : si64} : (tensor<?x32xbf16>) -> tensor<?x32xf32>
// CHECK: onnx.MatMul(%arg1, %[[C]])
// CHECK: %[[A:.*]] = onnx.Cast(%arg2)
// CHECK: onnx.Gather(%[[A]], %arg0)
func.func @other_readers(%ids: tensor<?xi64>, %x: tensor<2x64xf32>, %act: tensor<64x32xbf16>) -> (tensor<?x32xf32>, tensor<2x32xf32>, tensor<?x32xf32>) {
  %w = onnx.Weight {file = "w.bin", length = 4096 : i64, name = "table", offset = 0 : i64} : tensor<64x32xbf16>
  %c = onnx.Cast(%w) {to = 1 : si64} : (tensor<64x32xbf16>) -> tensor<64x32xf32>
  %g = onnx.Gather(%c, %ids) {axis = 0 : si64} : (tensor<64x32xf32>, tensor<?xi64>) -> tensor<?x32xf32>
  %m = onnx.MatMul(%x, %c) : (tensor<2x64xf32>, tensor<64x32xf32>) -> tensor<2x32xf32>
  %a = onnx.Cast(%act) {to = 1 : si64} : (tensor<64x32xbf16>) -> tensor<64x32xf32>
  %h = onnx.Gather(%a, %ids) {axis = 0 : si64} : (tensor<64x32xf32>, tensor<?xi64>) -> tensor<?x32xf32>
  return %g, %m, %h : tensor<?x32xf32>, tensor<2x32xf32>, tensor<?x32xf32>
}
