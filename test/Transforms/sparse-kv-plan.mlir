// RUN: h20-opt %s --split-input-file --h20-fuse-kv-caches="max-seq=64 element-bytes=2" --verify-diagnostics | FileCheck %s
// RUN: h20-opt %s --split-input-file --h20-fuse-kv-caches 2>&1 | FileCheck %s --check-prefix=NOSEQ

// DeepSeek-V4.1-style sparse attention, three layers: a window-only layer,
// then a KV-source layer (ratio 4, its own indexer) and a layer sharing
// its compressed latents and picks. One allocation at 128-byte offsets
// (rows of 8 x 2 bytes padded to 128): three window rings of 16 rows, one
// compressed slot of 64 / 4 rows read by layers 1 and 2, one indexer-key
// slot. Growing slots per token: 8 x 2 / 4 + 4 x 2 / 4 = 6 bytes.
// CHECK-LABEL: func.func @shared_compressed
// CHECK-SAME: kv.sparse_plan = {align = 128 : i64, bytes_per_token = 6.000000e+00 : f64, capacity = 64 : i64, element_bytes = 2 : i64, sections = [
// CHECK-SAME: {bytes = 2048 : i64, dim = 8 : i64, kind = "window", layers = array<i64: 0>, offset = 0 : i64, ratio = 1 : i64, row_bytes = 128 : i64, rows = 16 : i64}
// CHECK-SAME: {bytes = 2048 : i64, dim = 8 : i64, kind = "window", layers = array<i64: 1>, offset = 2048 : i64
// CHECK-SAME: {bytes = 2048 : i64, dim = 8 : i64, kind = "window", layers = array<i64: 2>, offset = 4096 : i64
// CHECK-SAME: {bytes = 2048 : i64, dim = 8 : i64, kind = "compressed", layers = array<i64: 1, 2>, offset = 6144 : i64, ratio = 4 : i64, row_bytes = 128 : i64, rows = 16 : i64}
// CHECK-SAME: {bytes = 2048 : i64, dim = 4 : i64, kind = "indexer_keys", layers = array<i64: 1>, offset = 8192 : i64, ratio = 4 : i64, row_bytes = 128 : i64, rows = 16 : i64}]
// CHECK-SAME: total_bytes = 10240 : i64, window_bytes = 6144 : i64}
// CHECK: attn.sparse_attention {{.*}}kv.window_section = 0 : i64
// CHECK: attn.indexer_topk {{.*}}kv.keys_section = 4 : i64
// CHECK: attn.sparse_attention {{.*}}kv.compressed_section = 3 : i64, kv.window_section = 1 : i64
// CHECK: attn.sparse_attention {{.*}}kv.compressed_section = 3 : i64, kv.window_section = 2 : i64
// NOSEQ: remark: h20-fuse-kv-caches: sparse attention is planned for a capacity: give max-seq
func.func @shared_compressed(%q: tensor<?x2x8xf32>, %lat0: tensor<?x8xf32>, %lat1: tensor<?x8xf32>,
                             %lat2: tensor<?x8xf32>, %sink: tensor<2xf32>, %comp: tensor<?x8xf32>,
                             %iq: tensor<?x2x4xf32>, %ik: tensor<?x4xf32>, %iw: tensor<?x2xf32>)
    -> (tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>) {
  %a0 = attn.sparse_attention %q, %lat0, %sink {scale = 0.25 : f64, window = 16 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<2xf32>) -> tensor<?x2x8xf32>
  %idx = attn.indexer_topk %iq, %ik, %iw {ratio = 4 : i64, scale = 0.5 : f64, topk = 8 : i64} : (tensor<?x2x4xf32>, tensor<?x4xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %a1 = attn.sparse_attention %q, %lat1, %sink compressed(%comp : tensor<?x8xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 16 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<2xf32>) -> tensor<?x2x8xf32>
  %a2 = attn.sparse_attention %q, %lat2, %sink compressed(%comp : tensor<?x8xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 16 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<2xf32>) -> tensor<?x2x8xf32>
  return %a0, %a1, %a2 : tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>
}

// -----

// Picks that do not come from an indexer: the compressed slot's rows per
// token are unknown, so the plan is refused, naming the op.
func.func @unknown_ratio(%q: tensor<?x2x8xf32>, %lat: tensor<?x8xf32>, %sink: tensor<2xf32>,
                         %comp: tensor<?x8xf32>, %idx: tensor<?x?xi64>) -> tensor<?x2x8xf32> {
  // expected-error @+1 {{h20-fuse-kv-caches: attn.sparse_attention (attention layer 0): its compressed entries are picked by something other than attn.indexer_topk, so their compress ratio (rows per token) is unknown}}
  %a = attn.sparse_attention %q, %lat, %sink compressed(%comp : tensor<?x8xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 16 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<2xf32>) -> tensor<?x2x8xf32>
  return %a : tensor<?x2x8xf32>
}

// -----

// Two indexers reading one keys value with different ratios: the slot
// cannot be sized for both, so the plan is refused.
func.func @keys_two_ratios(%q: tensor<?x2x8xf32>, %lat: tensor<?x8xf32>, %sink: tensor<2xf32>,
                           %comp: tensor<?x8xf32>, %comp2: tensor<?x8xf32>, %iq: tensor<?x2x4xf32>, %ik: tensor<?x4xf32>,
                           %iw: tensor<?x2xf32>) -> (tensor<?x2x8xf32>, tensor<?x2x8xf32>) {
  %i0 = attn.indexer_topk %iq, %ik, %iw {ratio = 2 : i64, scale = 0.5 : f64, topk = 8 : i64} : (tensor<?x2x4xf32>, tensor<?x4xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %a0 = attn.sparse_attention %q, %lat, %sink compressed(%comp : tensor<?x8xf32>, %i0 : tensor<?x?xi64>) {scale = 0.25 : f64, window = 16 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<2xf32>) -> tensor<?x2x8xf32>
  // expected-error @+1 {{h20-fuse-kv-caches: attn.indexer_topk (attention layer 1): reads an indexer-key slot of ratio 2 with ratio 4}}
  %i1 = attn.indexer_topk %iq, %ik, %iw {ratio = 4 : i64, scale = 0.5 : f64, topk = 8 : i64} : (tensor<?x2x4xf32>, tensor<?x4xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %a1 = attn.sparse_attention %q, %lat, %sink compressed(%comp2 : tensor<?x8xf32>, %i1 : tensor<?x?xi64>) {scale = 0.25 : f64, window = 16 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<2xf32>) -> tensor<?x2x8xf32>
  return %a0, %a1 : tensor<?x2x8xf32>, tensor<?x2x8xf32>
}
