// RUN: h20-opt %s --split-input-file --verify-diagnostics --h20-chunked-prefill="whole-prompt-fallback=true chunk=4 max-positions=40" | FileCheck %s
// What PerTokenOps must not take for rows of one token (found in review):
// positions counted over groups of ids, positions broadcast onto a hidden
// axis, indexer keys that are not rows of `ratio` tokens, and candidate
// blocks that a chunk would split. The first two have no sparse attention
// (no whole-prompt fallback): errors; the last two fall back, saying why.


// Range(0, rows of ids in groups of 2): S / 2 positions, not S.
func.func @grouped_range(%ids: tensor<1x?xi64>) -> tensor<1x?x1xf32> {
  %s = onnx.Constant() {value = dense<[-1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %g = onnx.Reshape(%ids, %s) : (tensor<1x?xi64>, tensor<2xi64>) -> tensor<?x2xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %thr = onnx.Constant() {value = dense<12> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = onnx.Shape(%g) {end = 1 : si64, start = 0 : si64} : (tensor<?x2xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%n1, %axis0) : (tensor<1xi64>, tensor<1xi64>) -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %tab = onnx.Weight {name = "tab"} : tensor<16xf32>
  %e = onnx.Gather(%tab, %g) {axis = 0 : si64} : (tensor<16xf32>, tensor<?x2xi64>) -> tensor<?x2xf32>
  %ax1 = onnx.Constant() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %x = onnx.ReduceSum(%e, %ax1) {keepdims = 0 : si64} : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  %has = onnx.GreaterOrEqual(%pos, %thr) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi1>
  %fz = onnx.Constant() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  // expected-error @+1 {{chunked prefill: it combines activations with values computed from the prompt's length}}
  %y = onnx.Where(%has, %x, %fz) : (tensor<?xi1>, tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y2 = onnx.Reshape(%y, %s2) : (tensor<?xf32>, tensor<2xi64>) -> tensor<?x1xf32>
  %e2 = onnx.Constant() {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %y3 = onnx.Expand(%y2, %e2) : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x2xf32>
  %s3 = onnx.Constant() {value = dense<[1, -1, 1]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%y3, %s3) : (tensor<?x2xf32>, tensor<3xi64>) -> tensor<1x?x1xf32>
  return %o : tensor<1x?x1xf32>
}

// -----

// [S] positions against [S, 4] broadcast onto the hidden axis.
func.func @broadcast_axis(%ids: tensor<1x?xi64>) -> tensor<1x?x4xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x4xf32>
  %x3 = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x4xf32>, tensor<1x?xi64>) -> tensor<1x?x4xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = onnx.Reshape(%x3, %s2) : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %flat = onnx.Constant() {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i = onnx.Reshape(%ids, %flat) : (tensor<1x?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %zero = onnx.Constant() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = onnx.Constant() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %axis0 = onnx.Constant() {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = onnx.Shape(%i) {end = 1 : si64, start = 0 : si64} : (tensor<?xi64>) -> tensor<1xi64>
  %n = onnx.Squeeze(%n1, %axis0) : (tensor<1xi64>, tensor<1xi64>) -> tensor<i64>
  %pos = onnx.Range(%zero, %n, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pf = onnx.Cast(%pos) {to = 1 : si64} : (tensor<?xi64>) -> tensor<?xf32>
  // expected-error @+1 {{chunked prefill: it combines activations with values computed from the prompt's length}}
  %y = onnx.Add(%x, %pf) : (tensor<?x4xf32>, tensor<?xf32>) -> tensor<?x4xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%y, %s4) : (tensor<?x4xf32>, tensor<3xi64>) -> tensor<1x?x4xf32>
  return %o : tensor<1x?x4xf32>
}

// -----

// Keys of ratio 2 that are token rows: their rows would land at p0 / 2.
// CHECK-LABEL: func.func @token_rows_as_groups
// CHECK-SAME: whole = "'attn.indexer_topk': an indexer whose queries or weights are not rows of the prompt, or whose keys are not rows of groups of 2 tokens (its ratio)"
// expected-warning @+1 {{runs the whole prompt as one chunk of 40 tokens}}
func.func @token_rows_as_groups(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
  %we = onnx.Weight {name = "embed"} : tensor<16x8xf32>
  %x3 = onnx.Gather(%we, %ids) {axis = 0 : si64} : (tensor<16x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %s2 = onnx.Constant() {value = dense<[-1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = onnx.Reshape(%x3, %s2) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %s3 = onnx.Constant() {value = dense<[-1, 1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = onnx.Reshape(%x, %s3) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %ww = onnx.Weight {name = "wproj"} : tensor<8x1xf32>
  %w = onnx.MatMul(%x, %ww) : (tensor<?x8xf32>, tensor<8x1xf32>) -> tensor<?x1xf32>
  %picks = attn.indexer_topk %q, %x, %w {ratio = 2 : i64, scale = 0.5 : f64, topk = 2 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?x1xf32>) -> tensor<?x?xi64>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %x, %sink compressed(%x : tensor<?x8xf32>, %picks : tensor<?x?xi64>) {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %s4) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}

// -----

// Candidate blocks of 4 entries of 2 tokens: a 4-token chunk would split
// a block (NB = ceil(T / 4) is not linear in the chunk index).
// CHECK-LABEL: func.func @split_blocks
// CHECK-SAME: whole = "'attn.indexer_candidates': an indexer over candidate blocks of entries of 8 tokens needs a chunk size that is a multiple of 8 (the chunk is 4)"
// expected-warning @+1 {{runs the whole prompt as one chunk of 40 tokens}}
func.func @split_blocks(%ids: tensor<1x?xi64>) -> tensor<1x?x8xf32> {
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
  %cand = attn.indexer_candidates %q, %entries, %w {ratio = 2 : i64, blocks = 2 : i64, block_size = 4 : i64, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?x1xf32>) -> tensor<?x?xi64>
  %picks = attn.indexer_topk %q, %entries, %w candidates(%cand : tensor<?x?xi64>) {ratio = 2 : i64, scale = 0.5 : f64, topk = 2 : i64, block_size = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<?x1xf32>) -> tensor<?x?xi64>
  %sink = onnx.Constant() {value = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %a = attn.sparse_attention %q, %x, %sink compressed(%entries : tensor<?x8xf32>, %picks : tensor<?x?xi64>) {scale = 0.5 : f64, window = 4 : i64} : (tensor<?x1x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x1x8xf32>
  %s4 = onnx.Constant() {value = dense<[1, -1, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %o = onnx.Reshape(%a, %s4) : (tensor<?x1x8xf32>, tensor<3xi64>) -> tensor<1x?x8xf32>
  return %o : tensor<1x?x8xf32>
}
