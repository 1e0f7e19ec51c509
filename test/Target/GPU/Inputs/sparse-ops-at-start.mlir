// The V4.1 ops at a start position (7), as a later prefill chunk runs
// them: 16 queries over 40 compressed entries and a 30-row latent (cut to
// its first 7 + 16 = 23 rows).
func.func @main(%q: tensor<16x4x24xbf16>, %k: tensor<40x24xbf16>, %w: tensor<16x4xbf16>,
                %sq: tensor<16x4x64xbf16>, %lat: tensor<30x64xbf16>, %sink: tensor<4xf32>,
                %cmp: tensor<40x64xbf16>) -> tensor<16x4x64xbf16> {
  %p0 = arith.constant 7 : index
  %t = attn.indexer_topk %q, %k, %w start(%p0) {ratio = 4 : i64, topk = 8 : i64, scale = 0.25 : f64} : (tensor<16x4x24xbf16>, tensor<40x24xbf16>, tensor<16x4xbf16>) -> tensor<16x8xi64>
  %o = attn.sparse_attention %sq, %lat, %sink compressed(%cmp : tensor<40x64xbf16>, %t : tensor<16x8xi64>) start(%p0) {scale = 0.125 : f64, window = 8 : i64} : (tensor<16x4x64xbf16>, tensor<30x64xbf16>, tensor<4xf32>) -> tensor<16x4x64xbf16>
  return %o : tensor<16x4x64xbf16>
}
