// RUN: h20-opt %s --split-input-file --h20-tensor-parallel=ranks=4 | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-tensor-parallel="ranks=4 attention-rows=false" | FileCheck %s --check-prefix=OFF
// RUN: h20-opt %s --split-input-file --h20-tensor-parallel=ranks=4 --h20-merge-all-reduces | FileCheck %s --check-prefix=MERGED
// DeepSeek-V4.1's shared expert beside routed experts split by expert: the
// routed share is summed over the ranks by an all-reduce, and the shared
// expert's GEMMs (w1, w3, w2: a product of the replicated tokens) compute
// only the rank's rows of each chunk (h20.split_rows), the last one
// gathered (h20.split_gather: its other rows zero, an all-reduce after it).
// The elementwise ops between them stay whole (their other rows are read
// by no split GEMM). h20-merge-all-reduces then sums both shares in one
// all-reduce.

// CHECK: module attributes {h20.tensor_parallel = {{{.*}}mlp_blocks = 0 : i64{{.*}}shared_expert_gemms = 3 : i64}
// CHECK-LABEL: func.func @shared
// CHECK: %[[Y:.*]] = onnx.h20.RoutedExpertsMxfp4
// CHECK: %[[RS:.*]] = attn.all_reduce %[[Y]]
// CHECK: %[[G:.*]] = onnx.h20.BlockScaledMatMul(%arg0, {{.*}}h20.split_rows = 4 : i64
// CHECK: %[[U:.*]] = onnx.h20.BlockScaledMatMul(%arg0, {{.*}}h20.split_rows = 4 : i64
// CHECK: onnx.Min(%[[G]],
// CHECK-NOT: h20.split_rows
// CHECK: %[[D:.*]] = onnx.h20.BlockScaledMatMul({{.*}}h20.split_gather, h20.split_rows = 4 : i64
// CHECK: %[[DS:.*]] = attn.all_reduce %[[D]]
// CHECK: %[[O:.*]] = onnx.Add(%[[RS]], %[[DS]])
// CHECK: return %[[O]]
// OFF-LABEL: func.func @shared
// OFF-NOT: h20.split_rows
// OFF: attn.all_reduce
// OFF-NOT: attn.all_reduce
// OFF: return
// MERGED-LABEL: func.func @shared
// MERGED: %[[Y:.*]] = onnx.h20.RoutedExpertsMxfp4
// MERGED: %[[D:.*]] = onnx.h20.BlockScaledMatMul({{.*}}h20.split_gather, h20.split_rows = 4 : i64
// MERGED: %[[P:.*]] = onnx.Add(%[[Y]], %[[D]])
// MERGED: %[[S:.*]] = attn.all_reduce %[[P]]
// MERGED-NOT: attn.all_reduce
// MERGED: return %[[S]]
module attributes {onnx.model_dir = "."} {
func.func @shared(%x: tensor<?x256xbf16>) -> tensor<?x256xbf16> {
  %r = onnx.Weight {name = "router"} : tensor<256x8xbf16>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x32x128xi8>
  %s1 = onnx.Weight {name = "s1"} : tensor<8x32x8xi8>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x32x128xi8>
  %s3 = onnx.Weight {name = "s3"} : tensor<8x32x8xi8>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x256x16xi8>
  %s2 = onnx.Weight {name = "s2"} : tensor<8x256x1xi8>
  %routed = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x256xbf16>, tensor<256x8xbf16>, tensor<8xf32>, tensor<8x32x128xi8>, tensor<8x32x8xi8>, tensor<8x32x128xi8>, tensor<8x32x8xi8>, tensor<8x256x16xi8>, tensor<8x256x1xi8>) -> tensor<?x256xbf16>
  %sw1 = onnx.Weight {name = "shared.w1"} : tensor<256x256xf8E4M3FN>
  %ss1 = onnx.Weight {name = "shared.s1"} : tensor<2x2xf32>
  %sw3 = onnx.Weight {name = "shared.w3"} : tensor<256x256xf8E4M3FN>
  %ss3 = onnx.Weight {name = "shared.s3"} : tensor<2x2xf32>
  %sw2 = onnx.Weight {name = "shared.w2"} : tensor<256x256xf8E4M3FN>
  %ss2 = onnx.Weight {name = "shared.s2"} : tensor<2x2xf32>
  %lim = onnx.Constant() {value = dense<10.0> : tensor<bf16>} : () -> tensor<bf16>
  %gate = onnx.h20.BlockScaledMatMul(%x, %sw1, %ss1) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xbf16>
  %up = onnx.h20.BlockScaledMatMul(%x, %sw3, %ss3) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xbf16>
  %gl = onnx.Min(%gate, %lim) : (tensor<?x256xbf16>, tensor<bf16>) -> tensor<?x256xbf16>
  %sig = onnx.Sigmoid(%gl) : (tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %silu = onnx.Mul(%gl, %sig) : (tensor<?x256xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %act = onnx.Mul(%silu, %up) : (tensor<?x256xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %down = onnx.h20.BlockScaledMatMul(%act, %sw2, %ss2) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x256xbf16>, tensor<256x256xf8E4M3FN>, tensor<2x2xf32>) -> tensor<?x256xbf16>
  %y = onnx.Add(%routed, %down) : (tensor<?x256xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
}

// -----

// A shared expert of plain MatMuls (a SwiGLU clamped by Min and Clip, as
// V4.1's bf16 exports) keeps the MLP split by columns (Megatron: w1 / w3
// columns and w2 rows sharded, an all-reduce after w2), which also shards
// its weights; the two all-reduces then merge.
// CHECK-LABEL: func.func @columns
// CHECK: name = "shared.w1"} : tensor<64x8xbf16>
// CHECK-NOT: h20.split_rows
// CHECK: return
// MERGED-LABEL: func.func @columns
// MERGED: %[[Y:.*]] = onnx.h20.RoutedExpertsMxfp4
// MERGED: %[[D:.*]] = onnx.MatMul({{.*}}) : (tensor<?x8xbf16>, tensor<8x64xbf16>) -> tensor<?x64xbf16>
// MERGED: %[[P:.*]] = onnx.Add(%[[Y]], %[[D]])
// MERGED: %[[S:.*]] = attn.all_reduce %[[P]]
// MERGED-NOT: attn.all_reduce
// MERGED: return %[[S]]
module attributes {onnx.model_dir = "."} {
func.func @columns(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %r = onnx.Weight {name = "router"} : tensor<64x8xbf16>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x32x32xi8>
  %s1 = onnx.Weight {name = "s1"} : tensor<8x32x2xi8>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x32x32xi8>
  %s3 = onnx.Weight {name = "s3"} : tensor<8x32x2xi8>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x64x16xi8>
  %s2 = onnx.Weight {name = "s2"} : tensor<8x64x1xi8>
  %routed = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  %sw1 = onnx.Weight {name = "shared.w1"} : tensor<64x32xbf16>
  %sw3 = onnx.Weight {name = "shared.w3"} : tensor<64x32xbf16>
  %sw2 = onnx.Weight {name = "shared.w2"} : tensor<32x64xbf16>
  %gate = onnx.MatMul(%x, %sw1) : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  %up = onnx.MatMul(%x, %sw3) : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  %lim = onnx.Constant() {value = dense<10.0> : tensor<bf16>} : () -> tensor<bf16>
  %nlim = onnx.Constant() {value = dense<-10.0> : tensor<bf16>} : () -> tensor<bf16>
  %gl = onnx.Min(%gate, %lim) : (tensor<?x32xbf16>, tensor<bf16>) -> tensor<?x32xbf16>
  %uc = onnx.Clip(%up, %nlim, %lim) : (tensor<?x32xbf16>, tensor<bf16>, tensor<bf16>) -> tensor<?x32xbf16>
  %sig = onnx.Sigmoid(%gl) : (tensor<?x32xbf16>) -> tensor<?x32xbf16>
  %silu = onnx.Mul(%gl, %sig) : (tensor<?x32xbf16>, tensor<?x32xbf16>) -> tensor<?x32xbf16>
  %act = onnx.Mul(%silu, %uc) : (tensor<?x32xbf16>, tensor<?x32xbf16>) -> tensor<?x32xbf16>
  %down = onnx.MatMul(%act, %sw2) : (tensor<?x32xbf16>, tensor<32x64xbf16>) -> tensor<?x64xbf16>
  %y = onnx.Add(%routed, %down) : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
}

// -----

// A value of the shared expert read elsewhere (here: the activation,
// returned) leaves the GEMMs that make it whole; the down projection
// alone is split and gathered.
// CHECK-LABEL: func.func @read_elsewhere
// CHECK: onnx.MatMul(%arg0, %{{.*}}) :
// CHECK: onnx.MatMul(%arg0, %{{.*}}) :
// CHECK: onnx.MatMul(%{{.*}}, %{{.*}}) {h20.split_gather, h20.split_rows = 4 : i64}
module attributes {onnx.model_dir = "."} {
func.func @read_elsewhere(%x: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x32xbf16>) {
  %r = onnx.Weight {name = "router"} : tensor<64x8xbf16>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x32x32xi8>
  %s1 = onnx.Weight {name = "s1"} : tensor<8x32x2xi8>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x32x32xi8>
  %s3 = onnx.Weight {name = "s3"} : tensor<8x32x2xi8>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x64x16xi8>
  %s2 = onnx.Weight {name = "s2"} : tensor<8x64x1xi8>
  %routed = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  %sw1 = onnx.Weight {name = "shared.w1"} : tensor<64x32xbf16>
  %sw3 = onnx.Weight {name = "shared.w3"} : tensor<64x32xbf16>
  %sw2 = onnx.Weight {name = "shared.w2"} : tensor<32x64xbf16>
  %gate = onnx.MatMul(%x, %sw1) : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  %up = onnx.MatMul(%x, %sw3) : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  %act = onnx.Mul(%gate, %up) : (tensor<?x32xbf16>, tensor<?x32xbf16>) -> tensor<?x32xbf16>
  %down = onnx.MatMul(%act, %sw2) : (tensor<?x32xbf16>, tensor<32x64xbf16>) -> tensor<?x64xbf16>
  %y = onnx.Add(%routed, %down) : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  return %y, %act : tensor<?x64xbf16>, tensor<?x32xbf16>
}
}

// -----

// A product that does not end the sum alone (here: read twice) is no
// shared expert: nothing but the routed experts is split.
// CHECK-LABEL: func.func @not_alone
// CHECK-NOT: h20.split_rows
// CHECK: return
module attributes {onnx.model_dir = "."} {
func.func @not_alone(%x: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %r = onnx.Weight {name = "router"} : tensor<64x8xbf16>
  %b = onnx.Weight {name = "bias"} : tensor<8xf32>
  %w1 = onnx.Weight {name = "w1"} : tensor<8x32x32xi8>
  %s1 = onnx.Weight {name = "s1"} : tensor<8x32x2xi8>
  %w3 = onnx.Weight {name = "w3"} : tensor<8x32x32xi8>
  %s3 = onnx.Weight {name = "s3"} : tensor<8x32x2xi8>
  %w2 = onnx.Weight {name = "w2"} : tensor<8x64x16xi8>
  %s2 = onnx.Weight {name = "s2"} : tensor<8x64x1xi8>
  %routed = onnx.h20.RoutedExpertsMxfp4(%x, %r, %b, %w1, %s1, %w3, %s3, %w2, %s2) {limit = 10.0 : f32, scaling = 1.5 : f32, temp = 1.0 : f32, top_k = 2 : si64} : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8xf32>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x32x32xi8>, tensor<8x32x2xi8>, tensor<8x64x16xi8>, tensor<8x64x1xi8>) -> tensor<?x64xbf16>
  %sw2 = onnx.Weight {name = "shared.w2"} : tensor<64x64xbf16>
  %down = onnx.MatMul(%x, %sw2) : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16>
  %y = onnx.Add(%routed, %down) : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  return %y, %down : tensor<?x64xbf16>, tensor<?x64xbf16>
}
}
