// RUN: h20-opt %s --split-input-file --h20-raise-attn --verify-diagnostics | FileCheck %s
// The ai.h20 nodes of a DeepSeek-V4.1 export become attn ops with the same
// operands (no S x S or S x T intermediate); scale becomes f64.

// CHECK-LABEL: func.func @window_attention
// CHECK: %[[O:.*]] = attn.sparse_attention %arg0, %arg1, %arg2 {scale = 0.15811388194561005 : f64, window = 16 : i64} : (tensor<?x4x40xf32>, tensor<?x40xf32>, tensor<4xf32>) -> tensor<?x4x40xf32>
// CHECK: return %[[O]]
func.func @window_attention(%q: tensor<?x4x40xf32>, %kv: tensor<?x40xf32>, %s: tensor<4xf32>) -> tensor<?x4x40xf32> {
  %o = onnx.h20.SinkAttention(%q, %kv, %s) {scale = 0.158113882 : f32, window = 16 : si64} : (tensor<?x4x40xf32>, tensor<?x40xf32>, tensor<4xf32>) -> tensor<?x4x40xf32>
  return %o : tensor<?x4x40xf32>
}

// -----

// CHECK-LABEL: func.func @sparse_attention
// CHECK: %[[I:.*]] = attn.indexer_topk %arg4, %arg6, %arg5 {ratio = 4 : i64, scale = 0.20412415266036987 : f64, topk = 8 : i64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>) -> tensor<?x?xi64>
// CHECK: attn.sparse_attention %arg0, %arg1, %arg2 compressed(%arg3 : tensor<?x40xf32>, %[[I]] : tensor<?x?xi64>) {scale = 0.15811388194561005 : f64, window = 16 : i64}
// CHECK-NOT: onnx.h20
func.func @sparse_attention(%q: tensor<?x4x40xf32>, %kv: tensor<?x40xf32>, %s: tensor<4xf32>, %c: tensor<?x40xf32>,
                            %iq: tensor<?x4x24xf32>, %w: tensor<?x4xf32>, %ik: tensor<?x24xf32>) -> tensor<?x4x40xf32> {
  %i = onnx.h20.IndexerTopK(%iq, %ik, %w) {ratio = 4 : si64, scale = 0.204124153 : f32, topk = 8 : si64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>) -> tensor<?x?xi64>
  %o = onnx.h20.SparseSinkAttention(%q, %kv, %s, %c, %i) {scale = 0.158113882 : f32, window = 16 : si64} : (tensor<?x4x40xf32>, tensor<?x40xf32>, tensor<4xf32>, tensor<?x40xf32>, tensor<?x?xi64>) -> tensor<?x4x40xf32>
  return %o : tensor<?x4x40xf32>
}

// -----

// The candidate source yields its top-k and its candidate blocks (two attn
// ops over the same scores); a later index source scores inside the blocks.
// CHECK-LABEL: func.func @two_level
// CHECK: %[[T:.*]] = attn.indexer_topk %arg0, %arg1, %arg2 {ratio = 1 : i64, scale = 2.500000e-01 : f64, topk = 8 : i64}
// CHECK: %[[B:.*]] = attn.indexer_candidates %arg0, %arg1, %arg2 {block_size = 4 : i64, blocks = 6 : i64, ratio = 1 : i64, scale = 2.500000e-01 : f64}
// CHECK: %[[U:.*]] = attn.indexer_topk %arg3, %arg1, %arg2 candidates(%[[B]] : tensor<?x?xi64>) {block_size = 4 : i64, ratio = 1 : i64, scale = 2.500000e-01 : f64, topk = 8 : i64}
// CHECK: return %[[T]], %[[U]]
func.func @two_level(%q: tensor<?x4x24xf32>, %k: tensor<?x24xf32>, %w: tensor<?x4xf32>, %q2: tensor<?x4x24xf32>) -> (tensor<?x?xi64>, tensor<?x?xi64>) {
  %t:2 = onnx.h20.IndexerTopKCandidates(%q, %k, %w) {block_size = 4 : si64, blocks = 6 : si64, ratio = 1 : si64, scale = 0.25 : f32, topk = 8 : si64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>) -> (tensor<?x?xi64>, tensor<?x?xi64>)
  %u = onnx.h20.IndexerTopKInCandidates(%q2, %k, %w, %t#1) {block_size = 4 : si64, ratio = 1 : si64, scale = 0.25 : f32, topk = 8 : si64} : (tensor<?x4x24xf32>, tensor<?x24xf32>, tensor<?x4xf32>, tensor<?x?xi64>) -> tensor<?x?xi64>
  return %t#0, %u : tensor<?x?xi64>, tensor<?x?xi64>
}

// -----

// Unranked operands cannot be raised: the node stays, with a warning.
func.func @unranked(%q: tensor<*xf32>, %kv: tensor<?x40xf32>, %s: tensor<4xf32>) -> tensor<?x4x40xf32> {
  // expected-warning @+1 {{not raised: an operand's rank is unknown}}
  %o = onnx.h20.SinkAttention(%q, %kv, %s) {scale = 0.158113882 : f32, window = 16 : si64} : (tensor<*xf32>, tensor<?x40xf32>, tensor<4xf32>) -> tensor<?x4x40xf32>
  return %o : tensor<?x4x40xf32>
}
