// RUN: not h20-opt %s --split-input-file --h20-check-row-splits 2>/dev/null | FileCheck %s
// RUN: not h20-opt %s --split-input-file --h20-check-row-splits 2>&1 >/dev/null | FileCheck %s --check-prefix=DIAG
// A query-row split (h20-tensor-parallel) is kept where each rank gets
// whole rows: static rows, or a chunk's tokens with a chunk size (the
// function's h20.chunked) that divides by the ranks. Otherwise it is
// withdrawn from every op of the function, with the all-reduces that
// gathered the rows, and the module's h20.tensor_parallel says why.

// Chunks of 8 tokens over 4 ranks: 2 rows each. Kept.
// CHECK-LABEL: func.func @chunk_divides
// CHECK: attn.indexer_topk {{.*}}h20.split_rows = 4
// CHECK: attn.sparse_attention {{.*}}h20.split_rows = 4
// CHECK: attn.all_reduce
module attributes {h20.tensor_parallel = {attention_rows = 1 : i64, ranks = 4 : i64}} {
func.func @chunk_divides(%q: tensor<?x4x16xbf16>, %lat: tensor<?x16xbf16>, %cmp: tensor<?x16xbf16>, %iq: tensor<?x2x8xf32>, %ik: tensor<?x8xf32>, %iw: tensor<?x2xf32>, %sink: tensor<4xf32>) -> tensor<?x4x16xbf16> attributes {h20.chunked = {chunk = 8 : i64}} {
  %idx = attn.indexer_topk %iq, %ik, %iw {h20.split_rows = 4 : i64, ratio = 1 : i64, scale = 1.0 : f64, topk = 4 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %o = attn.sparse_attention %q, %lat, %sink compressed(%cmp : tensor<?x16xbf16>, %idx : tensor<?x?xi64>) {h20.split_gather, h20.split_rows = 4 : i64, scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xbf16>, tensor<?x16xbf16>, tensor<4xf32>) -> tensor<?x4x16xbf16>
  %s = attn.all_reduce %o : (tensor<?x4x16xbf16>) -> tensor<?x4x16xbf16>
  return %s : tensor<?x4x16xbf16>
}
}

// -----

// Chunks of 20 tokens over 8 ranks: withdrawn (every rank runs every row,
// no all-reduce).
// DIAG: warning: h20-check-row-splits: the attention (and any shared expert split with it) runs every query row on every rank: chunks of 20 tokens do not divide over 8 ranks
// CHECK: module attributes {h20.tensor_parallel = {attention_rows = 0 : i64, attention_rows_withdrawn = "chunks of 20 tokens do not divide over 8 ranks (give --chunk a multiple of 8)", expert_blocks = 2 : i64, ranks = 8 : i64}}
// CHECK-LABEL: func.func @chunk_does_not_divide
// CHECK-NOT: h20.split_rows
// CHECK-NOT: attn.all_reduce
// CHECK: return %{{.*}} : tensor<?x4x16xf32>
module attributes {h20.tensor_parallel = {attention_rows = 1 : i64, expert_blocks = 2 : i64, ranks = 8 : i64}} {
func.func @chunk_does_not_divide(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %cmp: tensor<?x16xf32>, %iq: tensor<?x2x8xf32>, %ik: tensor<?x8xf32>, %iw: tensor<?x2xf32>, %sink: tensor<4xf32>) -> tensor<?x4x16xf32> attributes {h20.chunked = {chunk = 20 : i64}} {
  %idx = attn.indexer_topk %iq, %ik, %iw {h20.split_rows = 8 : i64, ratio = 1 : i64, scale = 1.0 : f64, topk = 4 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %o = attn.sparse_attention %q, %lat, %sink compressed(%cmp : tensor<?x16xf32>, %idx : tensor<?x?xi64>) {h20.split_gather, h20.split_rows = 8 : i64, scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %s = attn.all_reduce %o : (tensor<?x4x16xf32>) -> tensor<?x4x16xf32>
  return %s : tensor<?x4x16xf32>
}
}

// -----

// A whole-prompt program (dynamic rows, no chunk size): withdrawn.
// DIAG: warning: h20-check-row-splits: {{.*}}: its query rows are not bounded (a whole-prompt program: give --chunk)
// CHECK-LABEL: func.func @whole_prompt
// CHECK-NOT: h20.split_rows
// CHECK-NOT: attn.all_reduce
module {
func.func @whole_prompt(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %sink: tensor<4xf32>) -> tensor<?x4x16xf32> {
  %o = attn.sparse_attention %q, %lat, %sink {h20.split_gather, h20.split_rows = 2 : i64, scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %s = attn.all_reduce %o : (tensor<?x4x16xf32>) -> tensor<?x4x16xf32>
  return %s : tensor<?x4x16xf32>
}
}

// -----

// Static rows that divide (bf16): kept.
// CHECK-LABEL: func.func @static_rows
// CHECK: attn.sparse_attention {{.*}}h20.split_rows = 2
// CHECK: attn.all_reduce
module {
func.func @static_rows(%q: tensor<6x4x16xbf16>, %lat: tensor<6x16xbf16>, %sink: tensor<4xf32>) -> tensor<6x4x16xbf16> {
  %o = attn.sparse_attention %q, %lat, %sink {h20.split_gather, h20.split_rows = 2 : i64, scale = 0.25 : f64, window = 4 : i64} : (tensor<6x4x16xbf16>, tensor<6x16xbf16>, tensor<4xf32>) -> tensor<6x4x16xbf16>
  %s = attn.all_reduce %o : (tensor<6x4x16xbf16>) -> tensor<6x4x16xbf16>
  return %s : tensor<6x4x16xbf16>
}
}

// -----

// The mark on an op that cannot be split by rows is an error.
// DIAG: error: h20-check-row-splits: h20.split_rows = 2 on an op that cannot be split by query rows
module {
func.func @bad(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %s = attn.all_reduce %x {h20.split_rows = 2 : i64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}
}

// -----

// f32: the reference decomposition computes every row; withdrawn.
// DIAG: warning: h20-check-row-splits: {{.*}}: the sparse attention kernel does not run this op (f32: it runs f16/bf16 only)
// CHECK-LABEL: func.func @f32_attention
// CHECK-NOT: h20.split_rows
// CHECK-NOT: attn.all_reduce
module {
func.func @f32_attention(%q: tensor<6x4x16xf32>, %lat: tensor<6x16xf32>, %sink: tensor<4xf32>) -> tensor<6x4x16xf32> {
  %o = attn.sparse_attention %q, %lat, %sink {h20.split_gather, h20.split_rows = 2 : i64, scale = 0.25 : f64, window = 4 : i64} : (tensor<6x4x16xf32>, tensor<6x16xf32>, tensor<4xf32>) -> tensor<6x4x16xf32>
  %s = attn.all_reduce %o : (tensor<6x4x16xf32>) -> tensor<6x4x16xf32>
  return %s : tensor<6x4x16xf32>
}
}

// -----

// Withdrawn with a GEMM of the output projection: the all-reduce after the
// gathered GEMM goes, and both ops lose their marks.
// DIAG: warning: h20-check-row-splits: {{.*}}: chunks of 20 tokens do not divide over 8 ranks
// CHECK-LABEL: func.func @gemm_gather
// CHECK-NOT: h20.split
// CHECK-NOT: attn.all_reduce
// CHECK: return
module {
func.func @gemm_gather(%q: tensor<?x4x16xbf16>, %lat: tensor<?x16xbf16>, %sink: tensor<4xf32>, %w: tensor<64x32xbf16>) -> tensor<?x32xbf16> attributes {h20.chunked = {chunk = 20 : i64}} {
  %o = attn.sparse_attention %q, %lat, %sink {h20.split_rows = 8 : i64, scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xbf16>, tensor<?x16xbf16>, tensor<4xf32>) -> tensor<?x4x16xbf16>
  %flat = onnx.Constant() {value = dense<[-1, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %f = onnx.Reshape(%o, %flat) : (tensor<?x4x16xbf16>, tensor<2xi64>) -> tensor<?x64xbf16>
  %b = onnx.MatMul(%f, %w) {h20.split_gather, h20.split_rows = 8 : i64} : (tensor<?x64xbf16>, tensor<64x32xbf16>) -> tensor<?x32xbf16>
  %s = attn.all_reduce %b : (tensor<?x32xbf16>) -> tensor<?x32xbf16>
  return %s : tensor<?x32xbf16>
}
}

// -----

// A bf16 sparse attention the kernel does not take (window + picks over
// 4096 key slots): the decomposition would compute every row; withdrawn.
// And with nothing else split over the ranks, the program is refused.
// DIAG: warning: h20-check-row-splits: {{.*}}: the sparse attention kernel does not run this op (its types or shape
// DIAG: error: h20-check-row-splits: nothing is left to split over 4 tensor-parallel ranks: the attention's split by query rows was withdrawn (the sparse attention kernel does not run this op
module attributes {h20.tensor_parallel = {attention_blocks = 0 : i64, attention_rows = 1 : i64, expert_blocks = 0 : i64, mlp_blocks = 0 : i64, query_gemms = 0 : i64, ranks = 4 : i64}} {
func.func @kernel_does_not_take(%q: tensor<8x4x16xbf16>, %lat: tensor<8x16xbf16>, %sink: tensor<4xf32>) -> tensor<8x4x16xbf16> {
  %o = attn.sparse_attention %q, %lat, %sink {h20.split_gather, h20.split_rows = 4 : i64, scale = 0.25 : f64, window = 5000 : i64} : (tensor<8x4x16xbf16>, tensor<8x16xbf16>, tensor<4xf32>) -> tensor<8x4x16xbf16>
  %s = attn.all_reduce %o : (tensor<8x4x16xbf16>) -> tensor<8x4x16xbf16>
  return %s : tensor<8x4x16xbf16>
}
}
