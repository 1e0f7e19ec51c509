// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-chunked-prefill="chunk=6 max-positions=12 carry-partial-groups=true" | FileCheck %s
// With carry-partial-groups a chunk of 6 tokens runs a compressor of
// groups of 4: its input rows go through a ring of 3 + 8 rows (the 3
// positions before the chunk, moved to the front, then the chunk's own at
// row 3, then room for the rest of a group), and its Slice to whole groups
// becomes the ring's rows [3 - (p0 - (p0 / 4) * 4), .. + 8): ceil(6 / 4) =
// 2 groups, a static count, those that end in this chunk and at most one
// that does not (rewritten by the next chunk before anyone reads it).
// Their entries are written at p0 / 4 (a cache of (12 - 6) / 4 + 2 = 3
// entries), and their RoPE positions start at (p0 / 4) * 4, clamped to
// the capacity's last position (the RoPE tables end there).

// CHECK-LABEL: func.func @compressor
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x?xi64>, %[[P0:.*]]: index {onnx.name = "h20.chunk_start"}
// CHECK-SAME: h20.chunked = {capacity = 12 : i64, chunk = 6 : i64
// CHECK-DAG: %[[CMP:.*]] = kv.alloc() : !kv.cache<1x1x1x3x8xf32
// (The window latents' ring of 3 + 6 rows, the compressor's of 3 + 8.)
// CHECK-DAG: kv.alloc() : !kv.cache<1x1x1x9x8xf32
// CHECK-DAG: %[[RING:.*]] = kv.alloc() : !kv.cache<1x1x1x11x8xf32
// The compressor's ring: the previous chunk's rows [6, 9) to [0, 3), this
// chunk's x at row 3.
// CHECK: %[[LAST:.*]] = kv.view %[[RING]][layer = 0, kind = 0] from %{{.*}} length %{{.*}} : {{.*}} -> tensor<1x1x3x8xf32>
// CHECK: %[[SHIFTED:.*]] = kv.write %[[LAST]] into %[[RING]][layer = 0, kind = 0] at %{{.*}}
// CHECK: %[[ROWS:.*]] = kv.write %{{.*}} into %[[SHIFTED]][layer = 0, kind = 0] at %{{.*}} :
// CHECK: %[[C11:.*]] = arith.constant 11 : index
// CHECK: %[[VIEW:.*]] = kv.view %[[ROWS]][layer = 0, kind = 0] length %[[C11]]
// CHECK: %[[ALL:.*]] = tensor.collapse_shape %[[VIEW]]
// Rows [3 - (p0 - (p0 / 4) * 4), .. + 8).
// CHECK: %[[FIRST:.*]] = arith.divui %[[P0]], %{{.*}} : index
// CHECK: %[[ALIGNED:.*]] = arith.muli %[[FIRST]], %{{.*}} : index
// CHECK: %[[BEGUN:.*]] = arith.subi %[[P0]], %[[ALIGNED]] : index
// CHECK: %[[START:.*]] = arith.subi %{{.*}}, %[[BEGUN]] : index
// CHECK: %[[XS:.*]] = tensor.extract_slice %[[ALL]][%[[START]], 0] [8, 8] [1, 1] : tensor<?x8xf32> to tensor<8x8xf32>
// CHECK: %[[XD:.*]] = tensor.cast %[[XS]] : tensor<8x8xf32> to tensor<?x8xf32>
// CHECK-NOT: onnx.Slice
// CHECK: onnx.MatMul(%[[XD]]
// The entries' positions: (p0 / 4) * 4 + 4 j.
// CHECK: %[[G0:.*]] = arith.divui %[[P0]], %[[C4:.*]] : index
// CHECK: %[[FIRSTPOS:.*]] = arith.muli %[[G0]], %[[C4]] : index
// CHECK: arith.index_cast %[[FIRSTPOS]] : index to i64
// CHECK: %[[TOP:.*]] = arith.constant dense<11> : tensor<i64>
// CHECK: onnx.Min(%{{.*}}, %[[TOP]])
// CHECK: attn.rope_apply
// The entries: written at p0 / 4.
// CHECK: %[[R0:.*]] = arith.divui %[[P0]], %{{.*}} : index
// CHECK: kv.write %{{.*}} into %[[CMP]][layer = 0, kind = 0] at %[[R0]]
func.func @compressor(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x3 = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = onnx.Reshape(%x3, %s2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  // The compressor: x[0 : (S / 4) * 4] times a weight, in groups of 4, summed.
  %zero = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %four = onnx.Constant() {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %n = onnx.Shape(%x) {end = 1 : si64, start = 0 : si64} : (tensor<?x8xf32>) -> tensor<1xi64>
  %g = onnx.Div(%n, %four) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %usable = onnx.Mul(%g, %four) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %xs = onnx.Slice(%x, %zero, %usable, %zero) : (tensor<?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x8xf32>
  %wkv = onnx.Weight {name = "wkv"} : tensor<8x8xf32>
  %kv = onnx.MatMul(%xs, %wkv) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %sg = onnx.Constant() {value = dense<[-1, 4, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %grouped = onnx.Reshape(%kv, %sg) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x4x8xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %latent = onnx.ReduceSum(%grouped, %one) {keepdims = 0 : si64} : (tensor<?x4x8xf32>, tensor<1xi64>) -> tensor<?x8xf32>
  // Entry j's position: 4 j (RoPE over the whole row, tables of 16 positions).
  %ne = onnx.Shape(%latent) {end = 1 : si64, start = 0 : si64} : (tensor<?x8xf32>) -> tensor<1xi64>
  %nes = onnx.Squeeze(%ne, %zero) : (tensor<1xi64>, tensor<1xi64>) -> tensor<i64>
  %c0 = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c1 = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %r = onnx.Range(%c0, %nes, %c1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos = onnx.Mul(%r, %four) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %coarse = onnx.Weight {name = "rope_coarse"} : tensor<2x2x4xf32>
  %fine = onnx.Weight {name = "rope_fine"} : tensor<2x8x4xf32>
  %s4d = onnx.Constant() {value = dense<[1, 1, -1, 8]> : tensor<4xi64>} : () -> tensor<4xi64>
  %l4 = onnx.Reshape(%latent, %s4d) : (tensor<?x8xf32>, tensor<4xi64>) -> tensor<1x1x?x8xf32>
  %pos2 = onnx.Unsqueeze(%pos, %zero) : (tensor<?xi64>, tensor<1xi64>) -> tensor<1x?xi64>
  %rot = attn.rope_apply %l4, %pos2, %coarse, %fine {block = 8 : i64, interleaved = true, rotary_dim = 8 : i64} : (tensor<1x1x?x8xf32>, tensor<1x?xi64>, tensor<2x2x4xf32>, tensor<2x8x4xf32>) -> tensor<1x1x?x8xf32>
  %entries = onnx.Reshape(%rot, %s2) : (tensor<1x1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %ww = onnx.Weight {name = "wproj"} : tensor<8x1xf32>
  %w = onnx.MatMul(%x, %ww) : (tensor<?x8xf32>, tensor<8x1xf32>) -> tensor<?x1xf32>
  %picks = attn.indexer_topk %q, %entries, %w {ratio = 4 : i64, scale = 0.5 : f64, topk = 2 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?x1xf32>) -> tensor<?x?xi64>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %x, %sink compressed(%entries : tensor<?x8xf32>, %picks : tensor<?x?xi64>) {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %s4) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// A grouping Reshape whose rows are not a whole-groups Slice's (the
// chunk's rows straight from the embedding) would group tokens across the
// chunk's start: refused.
func.func @unaligned_groups(%ids: tensor<1x?xi64>) -> tensor<?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x3 = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = onnx.Reshape(%x3, %s2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %sg = onnx.Constant() {value = dense<[-1, 4, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  // expected-error @+1 {{chunked prefill: a Reshape that groups rows of 4 tokens not taken from a Slice to whole groups}}
  %grouped = onnx.Reshape(%x, %sg) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x4x8xf32>
  %one = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %sum = onnx.ReduceSum(%grouped, %one) {keepdims = 0 : si64} : (tensor<?x4x8xf32>, tensor<1xi64>) -> tensor<?x8xf32>
  return %sum : tensor<?x8xf32>
}
