// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-place-tables{min-bytes=4096}))' | FileCheck %s
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-place-tables{min-bytes=-1}))' | FileCheck %s --check-prefix=NONE
// RUN: h20-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(h20-place-tables{min-bytes=0}))' | FileCheck %s --check-prefix=ALL

// A table only ever read by row Gathers (two of them, as V4.1's Engram
// hashes read one table per n-gram order) and of at least min-bytes
// (1024 x 8 bf16 = 16384 bytes, counted in the compute type) goes to the
// host; the small one (16 x 8 x 2 = 256 bytes, read with other indices)
// only when everything may.
// CHECK-LABEL: func.func @lookups
// CHECK-SAME: h20.host_tables = {bytes = 16384 : i64, count = 1 : i64}
// CHECK: onnx.Weight {{.*}}h20.placement = "host"{{.*}} : tensor<1024x8xbf16>
// CHECK-NOT: h20.placement
// CHECK: onnx.Weight {{.*}}name = "small"{{.*}} : tensor<16x8xbf16>
// NONE-LABEL: func.func @lookups
// NONE-NOT: h20.placement
// NONE-NOT: h20.host_tables
// ALL-LABEL: func.func @lookups
// ALL-SAME: h20.host_tables = {bytes = 16640 : i64, count = 2 : i64}
// ALL: onnx.Weight {{.*}}h20.placement = "host"{{.*}} : tensor<1024x8xbf16>
// ALL: onnx.Weight {{.*}}h20.placement = "host"{{.*}} : tensor<16x8xbf16>
func.func @lookups(%ids: tensor<1x?xi64>, %h: tensor<1x?xi64>, %k: tensor<1x?xi64>) -> (tensor<1x?x8xbf16>, tensor<1x?x8xbf16>, tensor<1x?x8xbf16>) {
  %t = onnx.Weight {file = "w.bin", length = 16384 : i64, name = "engram", offset = 0 : i64} : tensor<1024x8xbf16>
  %s = onnx.Weight {file = "w.bin", length = 256 : i64, name = "small", offset = 16384 : i64} : tensor<16x8xbf16>
  %a = onnx.Gather(%t, %ids) {axis = 0 : si64} : (tensor<1024x8xbf16>, tensor<1x?xi64>) -> tensor<1x?x8xbf16>
  %b = onnx.Gather(%t, %h) {axis = -2 : si64} : (tensor<1024x8xbf16>, tensor<1x?xi64>) -> tensor<1x?x8xbf16>
  %c = onnx.Gather(%s, %k) : (tensor<16x8xbf16>, tensor<1x?xi64>) -> tensor<1x?x8xbf16>
  return %a, %b, %c : tensor<1x?x8xbf16>, tensor<1x?x8xbf16>, tensor<1x?x8xbf16>
}

// -----

// A tied embedding the LM head also multiplies stays on the GPU, and so
// does a table gathered along another axis: the GEMM and a column
// gather read all of it.
// CHECK-LABEL: func.func @other_readers
// CHECK-NOT: h20.placement
// CHECK-NOT: h20.host_tables
// ALL-LABEL: func.func @other_readers
// ALL-NOT: h20.placement
func.func @other_readers(%ids: tensor<1x?xi64>, %x: tensor<1x?x1024xbf16>, %cols: tensor<4xi64>) -> (tensor<1x?x8xbf16>, tensor<1x?x8xbf16>, tensor<1024x4xbf16>) {
  %t = onnx.Weight {file = "w.bin", length = 16384 : i64, name = "tied", offset = 0 : i64} : tensor<1024x8xbf16>
  %u = onnx.Weight {file = "w.bin", length = 16384 : i64, name = "columns", offset = 16384 : i64} : tensor<1024x8xbf16>
  %a = onnx.Gather(%t, %ids) {axis = 0 : si64} : (tensor<1024x8xbf16>, tensor<1x?xi64>) -> tensor<1x?x8xbf16>
  %m = onnx.MatMul(%x, %t) : (tensor<1x?x1024xbf16>, tensor<1024x8xbf16>) -> tensor<1x?x8xbf16>
  %c = onnx.Gather(%u, %cols) {axis = 1 : si64} : (tensor<1024x8xbf16>, tensor<4xi64>) -> tensor<1024x4xbf16>
  return %a, %m, %c : tensor<1x?x8xbf16>, tensor<1x?x8xbf16>, tensor<1024x4xbf16>
}

// -----

// An FP8 table's scales (too small on their own) read with the same
// indices as its rows go with them; a small table read with other
// indices stays.
// CHECK-LABEL: func.func @scales_follow_rows
// CHECK-SAME: h20.host_tables = {bytes = 18432 : i64, count = 2 : i64}
// CHECK: onnx.Weight {{.*}}h20.placement = "host"{{.*}}name = "rows"{{.*}} : tensor<1024x16xf8E4M3FN>
// CHECK: onnx.Weight {{.*}}h20.placement = "host"{{.*}}name = "rows.scale"{{.*}} : tensor<1024x1xbf16>
// CHECK-NOT: h20.placement
// CHECK: onnx.Weight {{.*}}name = "other"
// ALL-LABEL: func.func @scales_follow_rows
// ALL-SAME: count = 3
func.func @scales_follow_rows(%ids: tensor<?x4xi64>, %pos: tensor<?xi64>) -> (tensor<?x4x16xf8E4M3FN>, tensor<?x4x1xbf16>, tensor<?x1xbf16>) {
  %r = onnx.Weight {file = "w.bin", length = 16384 : i64, name = "rows", offset = 0 : i64} : tensor<1024x16xf8E4M3FN>
  %s = onnx.Weight {file = "w.bin", length = 2048 : i64, name = "rows.scale", offset = 16384 : i64} : tensor<1024x1xbf16>
  %o = onnx.Weight {file = "w.bin", length = 2048 : i64, name = "other", offset = 18432 : i64} : tensor<1024x1xbf16>
  %a = onnx.Gather(%r, %ids) {axis = 0 : si64} : (tensor<1024x16xf8E4M3FN>, tensor<?x4xi64>) -> tensor<?x4x16xf8E4M3FN>
  %b = onnx.Gather(%s, %ids) {axis = 0 : si64} : (tensor<1024x1xbf16>, tensor<?x4xi64>) -> tensor<?x4x1xbf16>
  %c = onnx.Gather(%o, %pos) {axis = 0 : si64} : (tensor<1024x1xbf16>, tensor<?xi64>) -> tensor<?x1xbf16>
  return %a, %b, %c : tensor<?x4x16xf8E4M3FN>, tensor<?x4x1xbf16>, tensor<?x1xbf16>
}
