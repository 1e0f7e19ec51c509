// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-chunked-prefill="chunk=16 max-positions=40" | FileCheck %s
// DeepSeek-V4.1's Engram hashes each token with the k tokens before it:
// Gather(ids', max(pos - k, 0)) padded by Where(pos >= k, ..., pad), with
// pos = Range(0, S). Run a chunk at a time, the positions are the chunk's
// global ones (a clone of the position expression from Range(0, S) + p0;
// the Range itself is left for its other uses), and the earlier tokens'
// values come from a token-history cache (i64 rows of one element, padded
// to 8 bytes, capacity 48): the chunk's values written at p0, the Gather
// reading positions 0 .. p0 + S through a rank-reducing slice (a view).

// CHECK-LABEL: func.func @engram
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x?xi64>, %[[P0:.*]]: index {onnx.name = "h20.chunk_start"}
// CHECK: %[[HIST:.*]] = kv.alloc() : !kv.cache<1x1x1x48x1xi64, #kv.layout<order = [0, 1, 2, 3, 4], align = 8>>
// CHECK: %[[POS:.*]] = onnx.Range
// CHECK: %[[START:.*]] = arith.index_cast %[[P0]] : index to i64
// CHECK: %[[SPLAT:.*]] = tensor.splat %[[START]]
// CHECK: %[[GPOS:.*]] = onnx.Add(%[[POS]], %[[SPLAT]])
// CHECK: %[[COMP:.*]] = onnx.Gather(%{{.*}}, %{{.*}}) {axis = 0 : si64} : (tensor<16xi64>, tensor<?xi64>) -> tensor<?xi64>
// CHECK: %[[GBACK:.*]] = onnx.Sub(%[[GPOS]], %{{.*}})
// CHECK: %[[GIDX:.*]] = onnx.Max(%[[GBACK]], %{{.*}})
// CHECK: %[[ROWS:.*]] = tensor.expand_shape %[[COMP]] {{\[\[}}0, 1, 2, 3]] output_shape [1, 1, %{{.*}}, 1] : tensor<?xi64> into tensor<1x1x?x1xi64>
// CHECK: %[[W:.*]] = kv.write %[[ROWS]] into %[[HIST]][layer = 0, kind = 0] at %[[P0]]
// CHECK: %[[LEN:.*]] = arith.addi %[[P0]], %{{.*}} : index
// CHECK: %[[V:.*]] = kv.view %[[W]][layer = 0, kind = 0] length %[[LEN]]
// CHECK: %[[SEEN:.*]] = tensor.extract_slice %[[V]][0, 0, 0, 0] [1, 1, %[[LEN]], 1] [1, 1, 1, 1] : tensor<1x1x?x1xi64> to tensor<?xi64>
// CHECK: %[[PREV:.*]] = onnx.Gather(%[[SEEN]], %[[GIDX]]) {axis = 0 : si64}
// CHECK: %[[HAS:.*]] = onnx.GreaterOrEqual(%[[GPOS]], %{{.*}})
// CHECK: onnx.Where(%[[HAS]], %[[PREV]], %{{.*}})
func.func @engram(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %flat = onnx.Constant() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i = onnx.Reshape(%ids, %flat) : (tensor<1x?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = onnx.Shape(%i) {end = 1 : si64, start = 0 : si64} : (tensor<?xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%n1, %axis0) : (tensor<1xi64>, tensor<1xi64>) -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %map = onnx.Weight {name = "token_map"} : tensor<16xi64>
  %comp = onnx.Gather(%map, %i) {axis = 0 : si64} : (tensor<16xi64>, tensor<?xi64>) -> tensor<?xi64>
  %back = onnx.Sub(%pos, %one) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  %idx = onnx.Max(%back, %zero) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  %prev = onnx.Gather(%comp, %idx) {axis = 0 : si64} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %has = onnx.GreaterOrEqual(%pos, %one) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi1>
  %pad = onnx.Constant() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
  %tok = onnx.Where(%has, %prev, %pad) : (tensor<?xi1>, tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  %emb = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%emb, %tok) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<?xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// The token after (pos + 1, a later chunk's for the last row) is no
// history: refused.
func.func @lookahead(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %flat = onnx.Constant() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i = onnx.Reshape(%ids, %flat) : (tensor<1x?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = onnx.Shape(%i) {end = 1 : si64, start = 0 : si64} : (tensor<?xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%n1, %axis0) : (tensor<1xi64>, tensor<1xi64>) -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %next = onnx.Add(%pos, %one) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  // expected-error @+1 {{chunked prefill: it combines activations with values computed from the prompt's length}}
  %later = onnx.Gather(%i, %next) {axis = 0 : si64} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %emb = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%emb, %later) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<?xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// pos - 1 unclamped is -1 for the first token: in ONNX the prompt's last
// token, no history either: refused.
func.func @unclamped(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %flat = onnx.Constant() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i = onnx.Reshape(%ids, %flat) : (tensor<1x?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = onnx.Shape(%i) {end = 1 : si64, start = 0 : si64} : (tensor<?xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%n1, %axis0) : (tensor<1xi64>, tensor<1xi64>) -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %back = onnx.Sub(%pos, %one) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  // expected-error @+1 {{chunked prefill: it combines activations with values computed from the prompt's length}}
  %prev = onnx.Gather(%i, %back) {axis = 0 : si64} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %emb = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%emb, %prev) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<?xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}
