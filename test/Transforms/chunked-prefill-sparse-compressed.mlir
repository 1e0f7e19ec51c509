// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-chunked-prefill="whole-prompt-fallback=true chunk=4 max-positions=10" | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-chunked-prefill="whole-prompt-fallback=true chunk=6 max-positions=10" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not h20-opt %s --split-input-file --h20-chunked-prefill="chunk=6 max-positions=10" 2>&1 | FileCheck %s --check-prefix=GIVEN
// DeepSeek-V4.1's compressed layers run a chunk at a time when every chunk
// holds whole groups of `ratio` tokens (chunk 4, ratio 2): the compressor's
// Slice to whole groups and its grouping Reshape are then per token, and
// the compressed entries and indexer keys (one row per group) go into a
// cache per row kind (width, type, ratio) at row p0 / ratio, capacity
// max-positions rounded up to whole chunks (12) / ratio = 6 rows; every
// reader takes rows 0 .. (p0 + S) / ratio and start p0. The window
// latents go into a ring of the W - 1 = 3 rows before the chunk and its 4
// (7 rows; chunked-prefill-sparse-window.mlir). The indexer's picks get
// the static K = topk. With chunk 6 and ratio 4 (@ratio4) the groups would straddle
// chunks: the whole prompt runs as one chunk, and the warning says why.

// CHECK-LABEL: func.func @compressed
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x?xi64>, %[[P0:.*]]: index {onnx.name = "h20.chunk_start"}
// CHECK-SAME: h20.chunked = {capacity = 12 : i64, chunk = 4 : i64
// CHECK-DAG: %[[WIN:.*]] = kv.alloc() : !kv.cache<1x1x1x7x8xf32
// CHECK-DAG: %[[CMP:.*]] = kv.alloc() : !kv.cache<1x1x1x6x8xf32
// The indexer: its keys written at p0 / 2, read up to (p0 + S) / 2.
// CHECK: %[[R0:.*]] = arith.divui %[[P0]], %[[C2:.*]] : index
// CHECK: %[[KW:.*]] = kv.write %{{.*}} into %[[CMP]][layer = 0, kind = 0] at %[[R0]]
// CHECK: %[[END:.*]] = arith.addi %[[P0]], %{{.*}} : index
// CHECK: %[[N:.*]] = arith.divui %[[END]], %{{.*}} : index
// CHECK: %[[KV:.*]] = kv.view %[[KW]][layer = 0, kind = 0] length %[[N]]
// CHECK: %[[K:.*]] = tensor.collapse_shape %[[KV]]
// CHECK: %[[PICKS:.*]] = attn.indexer_topk %{{.*}}, %[[K]], %{{.*}} start(%[[P0]]) {{.*}} -> tensor<?x2xi64>
// CHECK: %[[DYN:.*]] = tensor.cast %[[PICKS]] : tensor<?x2xi64> to tensor<?x?xi64>
// The attention: its latent written into the ring at row 3 after the
// previous chunk's last 3 rows moved to the front, the compressed entries
// (the keys' value: already in the cache) read again.
// CHECK: %[[LAST:.*]] = kv.view %[[WIN]][layer = 0, kind = 0] from %{{.*}} length
// CHECK: %[[SHIFTED:.*]] = kv.write %[[LAST]] into %[[WIN]][layer = 0, kind = 0]
// CHECK: kv.write %{{.*}} into %[[SHIFTED]][layer = 0, kind = 0] at
// CHECK: kv.view
// CHECK: %[[CV:.*]] = kv.view %[[KW]][layer = 0, kind = 0] length
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[CV]]
// CHECK: attn.sparse_attention %{{.*}}, %{{.*}}, %{{.*}} compressed(%[[C]] : tensor<?x8xf32>, %[[DYN]] : tensor<?x?xi64>) start(%[[P0]]) latent_start(
func.func @compressed(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x3 = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = onnx.Reshape(%x3, %s2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  // The compressor: x[0 : (S / 2) * 2] in groups of 2, summed.
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %two = onnx.Constant() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %n = onnx.Shape(%x) {end = 1 : si64, start = 0 : si64} : (tensor<?x8xf32>) -> tensor<1xi64>
  %g = onnx.Div(%n, %two) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %usable = onnx.Mul(%g, %two) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %xs = onnx.Slice(%x, %zero, %usable, %zero) : (tensor<?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x8xf32>
  %sg = onnx.Constant() {value = dense<[-1, 2, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %grouped = onnx.Reshape(%xs, %sg) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x2x8xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %entries = onnx.ReduceSum(%grouped, %one) {keepdims = 0 : si64} : (tensor<?x2x8xf32>, tensor<1xi64>) -> tensor<?x8xf32>
  %ww = onnx.Weight {name = "wproj"} : tensor<8x1xf32>
  %w = onnx.MatMul(%x, %ww) : (tensor<?x8xf32>, tensor<8x1xf32>) -> tensor<?x1xf32>
  %picks = attn.indexer_topk %q, %entries, %w {ratio = 2 : i64, scale = 0.5 : f64, topk = 2 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?x1xf32>) -> tensor<?x?xi64>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %x, %sink compressed(%entries : tensor<?x8xf32>, %picks : tensor<?x?xi64>) {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %s4) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// A chunk the user chose (no whole-prompt fallback) that the groups do not
// divide is refused, saying why and what to do.
// GIVEN: error: chunked prefill: a Slice to whole groups of 4 tokens needs a chunk size that is a multiple of 4 (the chunk is 6); this graph cannot run chunks of 6 tokens (no whole-prompt fallback: a chunk the user chose): choose a chunk size it accepts, or leave it to the target
// ODD: h20.chunked = {chunk = 10 : i64, {{.*}}whole = "'onnx.Slice': a Slice to whole groups of 4 tokens needs a chunk size that is a multiple of 4 (the chunk is 6)"
// CHECK-LABEL: func.func @ratio4
// CHECK-SAME: h20.chunked = {capacity = 12 : i64, chunk = 4 : i64
func.func @ratio4(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x3 = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = onnx.Reshape(%x3, %s2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %four = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %n = onnx.Shape(%x) {end = 1 : si64, start = 0 : si64} : (tensor<?x8xf32>) -> tensor<1xi64>
  %g = onnx.Div(%n, %four) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %usable = onnx.Mul(%four, %g) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %xs = onnx.Slice(%x, %zero, %usable, %zero) : (tensor<?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x8xf32>
  %sg = onnx.Constant() {value = dense<[-1, 4, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %grouped = onnx.Reshape(%xs, %sg) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x4x8xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %entries = onnx.ReduceSum(%grouped, %one) {keepdims = 0 : si64} : (tensor<?x4x8xf32>, tensor<1xi64>) -> tensor<?x8xf32>
  %ww = onnx.Weight {name = "wproj"} : tensor<8x1xf32>
  %w = onnx.MatMul(%x, %ww) : (tensor<?x8xf32>, tensor<8x1xf32>) -> tensor<?x1xf32>
  %picks = attn.indexer_topk %q, %entries, %w {ratio = 4 : i64, scale = 0.5 : f64, topk = 2 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?x1xf32>) -> tensor<?x?xi64>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %x, %sink compressed(%entries : tensor<?x8xf32>, %picks : tensor<?x?xi64>) {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %s4) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}
