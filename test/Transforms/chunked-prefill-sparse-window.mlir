// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-chunked-prefill="whole-prompt-fallback=true chunk=16 max-positions=40" | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-chunked-prefill="whole-prompt-fallback=true chunk=2 max-positions=40" 2>/dev/null | FileCheck %s --check-prefix=SMALL
// RUN: h20-opt %s --split-input-file --h20-chunked-prefill="whole-prompt-fallback=true chunk=3 max-positions=40" 2>/dev/null | FileCheck %s --check-prefix=EDGE
// RUN: h20-opt %s --split-input-file --h20-chunked-prefill="whole-prompt-fallback=true chunk=16 max-positions=16" 2>/dev/null | FileCheck %s --check-prefix=ONE
// DeepSeek-V4.1's window-only sparse attention runs a chunk at a time: its
// latent goes into a window ring (slot 0's key half) of W - 1 = 3 rows
// before the chunk and the chunk's 16: before the chunk's write at row 3,
// rows [16, 19) (the previous chunk's last 3) move to rows [0, 3); the
// attention reads rows 0 .. 3 + S with start p0 and latent_start p0 - 3.

// CHECK-LABEL: func.func @window_only
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x?xi64>, %[[P0:.*]]: index {onnx.name = "h20.chunk_start"}
// CHECK-SAME: h20.chunked = {capacity = 48 : i64, chunk = 16 : i64, dim = 1 : i64, input = 0 : i64, output = "rows"}
// CHECK: %[[CACHE:.*]] = kv.alloc() : !kv.cache<1x1x1x19x8xf32
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[LAST:.*]] = kv.view %[[CACHE]][layer = 0, kind = 0] from %[[C16]] length %[[C3]] {{.*}} -> tensor<1x1x3x8xf32>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[SHIFTED:.*]] = kv.write %[[LAST]] into %[[CACHE]][layer = 0, kind = 0] at %[[C0]]
// CHECK: %[[ROWS:.*]] = tensor.expand_shape %[[LAT:.*]] {{\[\[}}0, 1, 2], [3]] output_shape [1, 1, %{{.*}}, 8] : tensor<?x8xf32> into tensor<1x1x?x8xf32>
// CHECK: %[[AT:.*]] = arith.constant 3 : index
// CHECK: %[[W:.*]] = kv.write %[[ROWS]] into %[[SHIFTED]][layer = 0, kind = 0] at %[[AT]]
// CHECK: %[[S:.*]] = tensor.dim %[[Q:.*]], %c0
// CHECK: %[[R3:.*]] = arith.constant 3 : index
// CHECK: %[[LEN:.*]] = arith.addi %[[R3]], %[[S]] : index
// CHECK: %[[V:.*]] = kv.view %[[W]][layer = 0, kind = 0] length %[[LEN]]
// CHECK: %[[R3B:.*]] = arith.constant 3 : index
// CHECK: %[[FIRST:.*]] = arith.subi %[[P0]], %[[R3B]] : index
// CHECK: %[[L:.*]] = tensor.collapse_shape %[[V]] {{\[\[}}0, 1, 2], [3]] : tensor<1x1x?x8xf32> into tensor<?x8xf32>
// CHECK: attn.sparse_attention %[[Q]], %[[L]], %{{.*}} start(%[[P0]]) latent_start(%[[FIRST]]) {scale = 5.000000e-01 : f64, window = 4 : i64}
// With chunks of 2 (< the 3 rows before a chunk) the latent goes into a
// cache of every position (capacity 40) at p0, read from row 0 with start
// p0 and no latent_start.
// SMALL-LABEL: func.func @window_only
// SMALL: kv.alloc() : !kv.cache<1x1x1x40x8xf32
// SMALL-NOT: from
// SMALL: kv.write %{{.*}} into %{{.*}}[layer = 0, kind = 0] at %arg1
// SMALL: attn.sparse_attention {{.*}} start(%arg1) {scale
// Chunks of exactly W - 1 = 3 rows: a ring of 3 + 3, the move from rows
// [3, 6) to [0, 3) (adjacent, not overlapping).
// EDGE-LABEL: func.func @window_only
// EDGE: kv.alloc() : !kv.cache<1x1x1x6x8xf32
// EDGE: %[[A:.*]] = arith.constant 3 : index
// EDGE: %[[B:.*]] = arith.constant 3 : index
// EDGE: kv.view %{{.*}}[layer = 0, kind = 0] from %[[B]] length %[[A]] {{.*}} -> tensor<1x1x3x8xf32>
// EDGE: latent_start(
// A single chunk (max-positions 16 = the chunk): no ring, whose 3 + 16
// rows would be more than the 16 of every position.
// ONE-LABEL: func.func @window_only
// ONE: kv.alloc() : !kv.cache<1x1x1x16x8xf32
// ONE-NOT: latent_start
// ONE: return
func.func @window_only(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %shape) : (tensor<1x?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %shape2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %kv = onnx.Reshape(%x, %shape2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %kv, %sink {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %shape3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %shape3) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// Compressed entries whose picks come from no indexer: their ratio (the
// tokens per entry, which places the chunk's entries in their cache) is
// not known, so the whole prompt runs as one chunk, and the warning says
// why.
// CHECK-LABEL: func.func @with_compressed
// CHECK-SAME: whole = "'attn.sparse_attention': a sparse attention whose indices do not come from an indexer (the compressed entries' ratio is not known)"
// CHECK-NOT: kv.alloc
// expected-warning @+1 {{runs the whole prompt as one chunk of 40 tokens}}
func.func @with_compressed(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %shape) : (tensor<1x?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %shape2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %kv = onnx.Reshape(%x, %shape2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %c = onnx.Weight {name = "compressed"} : tensor<4x8xf32>
  %i = onnx.Weight {name = "picks"} : tensor<1x2xi64>
  %ids2 = onnx.Constant() {value = dense<[-1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %e = onnx.Expand(%i, %ids2) : (tensor<1x2xi64>, tensor<2xi64>) -> tensor<1x2xi64>
  %a = attn.sparse_attention %q, %kv, %sink compressed(%c : tensor<4x8xf32>, %e : tensor<1x2xi64>) {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %shape3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %shape3) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// A latent that is not a row per token (a fixed [16, 8] table) is no
// window of the prompt: a blocker, not a cache.
// CHECK-LABEL: func.func @fixed_latent
// CHECK-SAME: whole = "'attn.sparse_attention': a sparse attention whose query and latent are not both rows of the prompt"
// expected-warning @+1 {{runs the whole prompt as one chunk of 40 tokens}}
func.func @fixed_latent(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %shape) : (tensor<1x?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %kv = onnx.Weight {name = "table"} : tensor<16x8xf32>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %kv, %sink {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<16x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %shape3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %shape3) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// A window of 1 (each query sees only its own row): a ring of 0 + 16 rows,
// nothing to move before the chunk's write at row 0, latent_start p0.
// CHECK-LABEL: func.func @window_one
// CHECK: kv.alloc() : !kv.cache<1x1x1x16x8xf32
// CHECK-NOT: from
// CHECK: %[[Z:.*]] = arith.constant 0 : index
// CHECK: kv.write %{{.*}} into %{{.*}}[layer = 0, kind = 0] at %[[Z]]
// CHECK: attn.sparse_attention {{.*}} start(%arg1) latent_start(%{{.*}}) {scale = 5.000000e-01 : f64, window = 1 : i64}
func.func @window_one(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %shape = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %shape) : (tensor<1x?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %shape2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %kv = onnx.Reshape(%x, %shape2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %kv, %sink {scale = 0.5 : f64, window = 1 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %shape3 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %shape3) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}
