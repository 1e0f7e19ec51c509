// RUN: h20-opt %s --h20-lower-to-linalg=library-calls=true -verify-diagnostics
// The GPU indexer kernels see query row i as position i: an indexer op at
// a start (a later prefill chunk) is refused with the way out, never
// compiled with wrong visibility.

func.func @indexer_at_start(%q: tensor<16x4x24xf32>, %k: tensor<40x24xf32>, %w: tensor<16x4xf32>, %p0: index) -> tensor<16x8xi64> {
  // expected-error @+1 {{GPU target: the indexer kernels take no start position yet (queries of a later prefill chunk); compile this graph for --target=cpu}}
  %0 = attn.indexer_topk %q, %k, %w start(%p0) {ratio = 4 : i64, topk = 8 : i64, scale = 0.25 : f64} : (tensor<16x4x24xf32>, tensor<40x24xf32>, tensor<16x4xf32>) -> tensor<16x8xi64>
  return %0 : tensor<16x8xi64>
}
