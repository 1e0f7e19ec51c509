// RUN: h20-opt %s --split-input-file --h20-tensor-parallel=ranks=4 | FileCheck %s
// DeepSeek-V4.1's attention by query rows: every attn.sparse_attention is
// marked h20.split_rows = T (rank r computes rows [r R / T, (r + 1) R / T),
// the others are zero) and followed by an attn.all_reduce that gathers the
// rows; an indexer is split too when only split ops read its result (a
// sparse attention's indices, an indexer_topk's candidates). The latent,
// compressed entries and indexer keys (the KV side) stay whole.

// CHECK: module attributes {h20.tensor_parallel = {attention_blocks = 0 : i64, attention_rows = 1 : i64
// CHECK-LABEL: func.func @rows
// CHECK: %[[C:.*]] = attn.indexer_candidates {{.*}} {block_size = 2 : i64, blocks = 4 : i64, h20.split_rows = 4 : i64
// CHECK: %[[I:.*]] = attn.indexer_topk {{.*}} candidates(%[[C]] : tensor<?x?xi64>) {block_size = 2 : i64, h20.split_rows = 4 : i64
// CHECK: %[[O:.*]] = attn.sparse_attention %arg0, %arg1, %{{.*}} compressed(%arg2 : tensor<?x16xf32>, %[[I]] : tensor<?x?xi64>) {h20.split_rows = 4 : i64
// CHECK: %[[S:.*]] = attn.all_reduce %[[O]]
// CHECK: return %[[S]]
module attributes {onnx.model_dir = "."} {
func.func @rows(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %cmp: tensor<?x16xf32>, %iq: tensor<?x2x8xf32>, %ik: tensor<?x8xf32>, %iw: tensor<?x2xf32>) -> tensor<?x4x16xf32> {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %c = attn.indexer_candidates %iq, %ik, %iw {block_size = 2 : i64, blocks = 4 : i64, ratio = 1 : i64, scale = 1.0 : f64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %idx = attn.indexer_topk %iq, %ik, %iw candidates(%c : tensor<?x?xi64>) {block_size = 2 : i64, ratio = 1 : i64, scale = 1.0 : f64, topk = 4 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %o = attn.sparse_attention %q, %lat, %sink compressed(%cmp : tensor<?x16xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  return %o : tensor<?x4x16xf32>
}
}

// -----

// An indexer whose result is also read elsewhere (here: returned) runs
// every row on every rank; the sparse attention that reads it is still
// split (it reads its own rows of the whole result).
// CHECK-LABEL: func.func @shared_indices
// CHECK: %[[I:.*]] = attn.indexer_topk
// CHECK-NOT: h20.split_rows
// CHECK-SAME: -> tensor<?x?xi64>
// CHECK: attn.sparse_attention {{.*}} {h20.split_rows = 4 : i64
// CHECK: attn.all_reduce
module attributes {onnx.model_dir = "."} {
func.func @shared_indices(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %cmp: tensor<?x16xf32>, %iq: tensor<?x2x8xf32>, %ik: tensor<?x8xf32>, %iw: tensor<?x2xf32>) -> (tensor<?x4x16xf32>, tensor<?x?xi64>) {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %idx = attn.indexer_topk %iq, %ik, %iw {ratio = 1 : i64, scale = 1.0 : f64, topk = 4 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %o = attn.sparse_attention %q, %lat, %sink compressed(%cmp : tensor<?x16xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  return %o, %idx : tensor<?x4x16xf32>, tensor<?x?xi64>
}
}
