// RUN: h20-opt %s --split-input-file --h20-tensor-parallel=ranks=4 | FileCheck %s
// DeepSeek-V4.1's attention by query rows: every attn.sparse_attention is
// marked h20.split_rows = T (rank r computes rows [r R / T, (r + 1) R / T))
// and, when its result is what gets gathered (h20.split_gather: the other
// rows are zero), followed by an attn.all_reduce; an indexer is split too when only split ops read its result (a
// sparse attention's indices, an indexer_topk's candidates). The latent,
// compressed entries and indexer keys (the KV side) stay whole.

// CHECK: module attributes {h20.tensor_parallel = {attention_blocks = 0 : i64, attention_rows = 1 : i64
// CHECK-LABEL: func.func @rows
// CHECK: %[[C:.*]] = attn.indexer_candidates {{.*}} {block_size = 2 : i64, blocks = 4 : i64, h20.split_rows = 4 : i64
// CHECK: %[[I:.*]] = attn.indexer_topk {{.*}} candidates(%[[C]] : tensor<?x?xi64>) {block_size = 2 : i64, h20.split_rows = 4 : i64
// CHECK: %[[O:.*]] = attn.sparse_attention %arg0, %arg1, %{{.*}} compressed(%arg2 : tensor<?x16xf32>, %[[I]] : tensor<?x?xi64>) {h20.split_gather, h20.split_rows = 4 : i64
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
// CHECK: attn.sparse_attention {{.*}} {h20.split_gather, h20.split_rows = 4 : i64
// CHECK: attn.all_reduce
module attributes {onnx.model_dir = "."} {
func.func @shared_indices(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %cmp: tensor<?x16xf32>, %iq: tensor<?x2x8xf32>, %ik: tensor<?x8xf32>, %iw: tensor<?x2xf32>) -> (tensor<?x4x16xf32>, tensor<?x?xi64>) {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %idx = attn.indexer_topk %iq, %ik, %iw {ratio = 1 : i64, scale = 1.0 : f64, topk = 4 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %o = attn.sparse_attention %q, %lat, %sink compressed(%cmp : tensor<?x16xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  return %o, %idx : tensor<?x4x16xf32>, tensor<?x?xi64>
}
}

// -----

// The split reaches through the output projection: row-local ops (head
// transpose, reshape) and then two weight GEMMs joined by shape-only ops;
// both GEMMs compute the rank's rows, the last one is gathered
// (h20.split_gather, the all-reduce after it), the attention is not
// (its other rows are unspecified, read only on the way). The add of the
// residual after the last GEMM ends the split.
// CHECK-LABEL: func.func @output_projection
// CHECK: %[[O:.*]] = attn.sparse_attention {{.*}} {h20.split_rows = 4 : i64, scale
// CHECK-NOT: attn.all_reduce %[[O]]
// CHECK: %[[A:.*]] = onnx.MatMul({{.*}}) {h20.split_rows = 4 : i64} : (tensor<2x?x32xf32>, tensor<2x32x16xf32>)
// CHECK-NOT: attn.all_reduce %[[A]]
// CHECK: %[[B:.*]] = onnx.MatMul({{.*}}) {h20.split_gather, h20.split_rows = 4 : i64} : (tensor<?x32xf32>, tensor<32x24xf32>)
// CHECK: %[[S:.*]] = attn.all_reduce %[[B]]
// CHECK: onnx.Add(%[[S]], %arg2)
module attributes {onnx.model_dir = "."} {
func.func @output_projection(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %res: tensor<?x24xf32>) -> tensor<?x24xf32> {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %o = attn.sparse_attention %q, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %shape = onnx.Constant() {value = dense<[-1, 2, 32]> : tensor<3xi64>} : () -> tensor<3xi64>
  %g = onnx.Reshape(%o, %shape) : (tensor<?x4x16xf32>, tensor<3xi64>) -> tensor<?x2x32xf32>
  %t = onnx.Transpose(%g) {perm = array<i64: 1, 0, 2>} : (tensor<?x2x32xf32>) -> tensor<2x?x32xf32>
  %wa = onnx.Weight {name = "wo_a"} : tensor<2x32x16xf32>
  %a = onnx.MatMul(%t, %wa) : (tensor<2x?x32xf32>, tensor<2x32x16xf32>) -> tensor<2x?x16xf32>
  %at = onnx.Transpose(%a) {perm = array<i64: 1, 0, 2>} : (tensor<2x?x16xf32>) -> tensor<?x2x16xf32>
  %flat = onnx.Constant() {value = dense<[-1, 32]> : tensor<2xi64>} : () -> tensor<2xi64>
  %af = onnx.Reshape(%at, %flat) : (tensor<?x2x16xf32>, tensor<2xi64>) -> tensor<?x32xf32>
  %wb = onnx.Weight {name = "wo_b"} : tensor<32x24xf32>
  %b = onnx.MatMul(%af, %wb) : (tensor<?x32xf32>, tensor<32x24xf32>) -> tensor<?x24xf32>
  %y = onnx.Add(%b, %res) : (tensor<?x24xf32>, tensor<?x24xf32>) -> tensor<?x24xf32>
  return %y : tensor<?x24xf32>
}
}

// -----

// A value on the way read elsewhere (here: the head transpose, returned)
// keeps the split at the attention: gathered there.
// CHECK-LABEL: func.func @read_elsewhere
// CHECK: %[[O:.*]] = attn.sparse_attention {{.*}} {h20.split_gather, h20.split_rows = 4 : i64
// CHECK: attn.all_reduce %[[O]]
// CHECK: onnx.MatMul
// CHECK-NOT: h20.split_rows
module attributes {onnx.model_dir = "."} {
func.func @read_elsewhere(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>) -> (tensor<?x32xf32>, tensor<4x?x16xf32>) {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %o = attn.sparse_attention %q, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %t = onnx.Transpose(%o) {perm = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %u = onnx.Transpose(%t) {perm = array<i64: 1, 0, 2>} : (tensor<4x?x16xf32>) -> tensor<?x4x16xf32>
  %flat = onnx.Constant() {value = dense<[-1, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %f = onnx.Reshape(%u, %flat) : (tensor<?x4x16xf32>, tensor<2xi64>) -> tensor<?x64xf32>
  %w = onnx.Weight {name = "wo"} : tensor<64x32xf32>
  %b = onnx.MatMul(%f, %w) : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
  return %b, %t : tensor<?x32xf32>, tensor<4x?x16xf32>
}
}

// -----

// Two split attentions added before one projection: both splits end at
// the same GEMM, which is gathered once (two all-reduces would multiply
// the sum by the ranks).
// CHECK-LABEL: func.func @two_attentions
// CHECK: attn.sparse_attention {{.*}} {h20.split_rows = 4 : i64
// CHECK: attn.sparse_attention {{.*}} {h20.split_rows = 4 : i64
// CHECK: %[[B:.*]] = onnx.MatMul({{.*}}) {h20.split_gather, h20.split_rows = 4 : i64}
// CHECK-NEXT: %[[S:.*]] = attn.all_reduce %[[B]]
// CHECK-NOT: attn.all_reduce
// CHECK: return %[[S]]
module attributes {onnx.model_dir = "."} {
func.func @two_attentions(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>, %q2: tensor<?x4x16xf32>) -> tensor<?x24xf32> {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %o1 = attn.sparse_attention %q, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %o2 = attn.sparse_attention %q2, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %s = onnx.Add(%o1, %o2) : (tensor<?x4x16xf32>, tensor<?x4x16xf32>) -> tensor<?x4x16xf32>
  %flat = onnx.Constant() {value = dense<[-1, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %f = onnx.Reshape(%s, %flat) : (tensor<?x4x16xf32>, tensor<2xi64>) -> tensor<?x64xf32>
  %w = onnx.Weight {name = "wo"} : tensor<64x24xf32>
  %b = onnx.MatMul(%f, %w) : (tensor<?x64xf32>, tensor<64x24xf32>) -> tensor<?x24xf32>
  return %b : tensor<?x24xf32>
}
}

// -----

// A GEMM whose result nobody reads is no end: the attention's other reader
// (Neg) needs whole rows, so the attention itself is gathered.
// CHECK-LABEL: func.func @dead_gemm
// CHECK: %[[O:.*]] = attn.sparse_attention {{.*}} {h20.split_gather, h20.split_rows = 4 : i64
// CHECK: %[[S:.*]] = attn.all_reduce %[[O]]
// CHECK: onnx.MatMul(%[[S]]
// CHECK-NOT: h20.split
// CHECK: onnx.Neg(%[[S]])
module attributes {onnx.model_dir = "."} {
func.func @dead_gemm(%q: tensor<?x4x16xf32>, %lat: tensor<?x16xf32>) -> tensor<?x4x16xf32> {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %o = attn.sparse_attention %q, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  %w = onnx.Weight {name = "wo"} : tensor<16x24xf32>
  %b = onnx.MatMul(%o, %w) : (tensor<?x4x16xf32>, tensor<16x24xf32>) -> tensor<?x4x24xf32>
  %r = onnx.Neg(%o) : (tensor<?x4x16xf32>) -> tensor<?x4x16xf32>
  return %r : tensor<?x4x16xf32>
}
}

// -----

// A block-scaled FP8 output projection (ai.h20 BlockScaledMatMul of X
// [M, K]) is split and gathered like a MatMul.
// CHECK-LABEL: func.func @fp8_projection
// CHECK: attn.sparse_attention {{.*}} {h20.split_rows = 4 : i64, scale
// CHECK: %[[B:.*]] = onnx.h20.BlockScaledMatMul({{.*}}) {block_k = 128 : si64, block_n = 128 : si64, h20.split_gather, h20.split_rows = 4 : i64}
// CHECK-NEXT: attn.all_reduce %[[B]]
module attributes {onnx.model_dir = "."} {
func.func @fp8_projection(%q: tensor<?x4x32xbf16>, %lat: tensor<?x32xbf16>) -> tensor<?x256xbf16> {
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %o = attn.sparse_attention %q, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x32xbf16>, tensor<?x32xbf16>, tensor<4xf32>) -> tensor<?x4x32xbf16>
  %flat = onnx.Constant() {value = dense<[-1, 128]> : tensor<2xi64>} : () -> tensor<2xi64>
  %f = onnx.Reshape(%o, %flat) : (tensor<?x4x32xbf16>, tensor<2xi64>) -> tensor<?x128xbf16>
  %w = onnx.Weight {name = "wo_b"} : tensor<256x128xf8E4M3FN>
  %s = onnx.Weight {name = "wo_b.scale"} : tensor<2x1xf32>
  %b = onnx.h20.BlockScaledMatMul(%f, %w, %s) {block_k = 128 : si64, block_n = 128 : si64} : (tensor<?x128xbf16>, tensor<256x128xf8E4M3FN>, tensor<2x1xf32>) -> tensor<?x256xbf16>
  return %b : tensor<?x256xbf16>
}
}

// -----

// The query side: the projections whose rows only split ops read (a sparse
// attention's query, an indexer's query and head weights) compute the
// rank's rows too, through row-local ops on the way (rms_norm over the
// head dim, RoPE by each row's position, a max-abs scaling reduced over
// the head dim, reshapes, transposes). Not the KV side: the latent's GEMM
// reads the same normalised input, but every rank needs all its rows; nor
// a projection whose result is also read elsewhere (%keep, returned).
// CHECK: module attributes {h20.tensor_parallel = {{{.*}}query_gemms = 4 : i64
// CHECK-LABEL: func.func @query_side
// CHECK: attn.rms_norm %arg0
// CHECK-NOT: h20.split_rows
// CHECK-SAME: -> tensor<?x32xf32>
// CHECK: onnx.MatMul({{.*}}) : (tensor<?x32xf32>, tensor<32x16xf32>) -> tensor<?x16xf32>
// CHECK: onnx.MatMul({{.*}}) {h20.split_rows = 4 : i64} : (tensor<?x32xf32>, tensor<32x24xf32>)
// CHECK: onnx.MatMul({{.*}}) {h20.split_rows = 4 : i64} : (tensor<?x24xf32>, tensor<24x64xf32>)
// CHECK: attn.rope
// CHECK: onnx.MatMul({{.*}}) {h20.split_rows = 4 : i64} : (tensor<?x24xf32>, tensor<24x16xf32>)
// CHECK: onnx.MatMul({{.*}}) {h20.split_rows = 4 : i64} : (tensor<?x32xf32>, tensor<32x2xf32>)
// CHECK: onnx.MatMul({{.*}}) : (tensor<?x32xf32>, tensor<32x8xf32>)
// CHECK: attn.indexer_topk {{.*}} {h20.split_rows = 4 : i64
// CHECK: attn.sparse_attention {{.*}} {h20.split_gather, h20.split_rows = 4 : i64
module attributes {onnx.model_dir = "."} {
func.func @query_side(%x: tensor<?x32xf32>, %pos: tensor<1x?xi64>, %ik: tensor<?x8xf32>) -> (tensor<?x4x16xf32>, tensor<?x8xf32>) {
  %nw = onnx.Weight {name = "attn_norm"} : tensor<32xf32>
  %xn = attn.rms_norm %x, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %wkv = onnx.Weight {name = "wkv"} : tensor<32x16xf32>
  %lat = onnx.MatMul(%xn, %wkv) : (tensor<?x32xf32>, tensor<32x16xf32>) -> tensor<?x16xf32>
  %wqa = onnx.Weight {name = "wq_a"} : tensor<32x24xf32>
  %qa = onnx.MatMul(%xn, %wqa) : (tensor<?x32xf32>, tensor<32x24xf32>) -> tensor<?x24xf32>
  %qnw = onnx.Weight {name = "q_norm"} : tensor<24xf32>
  %qn = attn.rms_norm %qa, %qnw {epsilon = 1.0e-6 : f64} : (tensor<?x24xf32>, tensor<24xf32>) -> tensor<?x24xf32>
  %wqb = onnx.Weight {name = "wq_b"} : tensor<24x64xf32>
  %qb = onnx.MatMul(%qn, %wqb) : (tensor<?x24xf32>, tensor<24x64xf32>) -> tensor<?x64xf32>
  %hs = onnx.Constant() {value = dense<[-1, 4, 16]> : tensor<3xi64>} : () -> tensor<3xi64>
  %qh = onnx.Reshape(%qb, %hs) : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x4x16xf32>
  %qt = onnx.Transpose(%qh) {perm = array<i64: 1, 0, 2>} : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %zero = onnx.Constant() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %qu = onnx.Unsqueeze(%qt, %zero) : (tensor<4x?x16xf32>, tensor<1xi64>) -> tensor<1x4x?x16xf32>
  %qr = attn.rope %qu, %pos {theta = 1.0e4 : f64, rotary_dim = 16 : i64, interleaved = true} : (tensor<1x4x?x16xf32>, tensor<1x?xi64>) -> tensor<1x4x?x16xf32>
  %qs = onnx.Squeeze(%qr, %zero) : (tensor<1x4x?x16xf32>, tensor<1xi64>) -> tensor<4x?x16xf32>
  %q = onnx.Transpose(%qs) {perm = array<i64: 1, 0, 2>} : (tensor<4x?x16xf32>) -> tensor<?x4x16xf32>
  %wiq = onnx.Weight {name = "indexer.wq_b"} : tensor<24x16xf32>
  %iqf = onnx.MatMul(%qn, %wiq) : (tensor<?x24xf32>, tensor<24x16xf32>) -> tensor<?x16xf32>
  %is = onnx.Constant() {value = dense<[-1, 2, 8]> : tensor<3xi64>} : () -> tensor<3xi64>
  %iq0 = onnx.Reshape(%iqf, %is) : (tensor<?x16xf32>, tensor<3xi64>) -> tensor<?x2x8xf32>
  %abs = onnx.Abs(%iq0) : (tensor<?x2x8xf32>) -> tensor<?x2x8xf32>
  %last = onnx.Constant() {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %amax = onnx.ReduceMax(%abs, %last) {keepdims = 1 : si64} : (tensor<?x2x8xf32>, tensor<1xi64>) -> tensor<?x2x1xf32>
  %iq = onnx.Div(%iq0, %amax) : (tensor<?x2x8xf32>, tensor<?x2x1xf32>) -> tensor<?x2x8xf32>
  %wiw = onnx.Weight {name = "indexer.weights_proj"} : tensor<32x2xf32>
  %iw = onnx.MatMul(%xn, %wiw) : (tensor<?x32xf32>, tensor<32x2xf32>) -> tensor<?x2xf32>
  %wk = onnx.Weight {name = "keep"} : tensor<32x8xf32>
  %keep = onnx.MatMul(%xn, %wk) : (tensor<?x32xf32>, tensor<32x8xf32>) -> tensor<?x8xf32>
  %ik2 = onnx.Add(%ik, %keep) : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %idx = attn.indexer_topk %iq, %ik2, %iw {ratio = 1 : i64, scale = 1.0 : f64, topk = 4 : i64} : (tensor<?x2x8xf32>, tensor<?x8xf32>, tensor<?x2xf32>) -> tensor<?x?xi64>
  %sink = onnx.Weight {name = "sink"} : tensor<4xf32>
  %o = attn.sparse_attention %q, %lat, %sink compressed(%lat : tensor<?x16xf32>, %idx : tensor<?x?xi64>) {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x4x16xf32>, tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x4x16xf32>
  return %o, %keep : tensor<?x4x16xf32>, tensor<?x8xf32>
}
}

// -----

// A value read as a shape (here: a Reshape's dynamic-length shape operand,
// made from a GEMM) is read whole by every row: neither that GEMM nor the
// one behind the reshaped query is split.
// CHECK: module attributes {h20.tensor_parallel = {{{.*}}query_gemms = 0 : i64
// CHECK-LABEL: func.func @shape_from_gemm
// CHECK-NOT: onnx.MatMul({{.*}}) {h20.split_rows
// CHECK: attn.sparse_attention {{.*}} {h20.split_gather, h20.split_rows = 4 : i64
module attributes {onnx.model_dir = "."} {
func.func @shape_from_gemm(%x: tensor<?x32xf32>, %lat: tensor<?x16xf32>) -> tensor<?x1x16xf32> {
  %w = onnx.Weight {name = "wq"} : tensor<32x16xf32>
  %q0 = onnx.MatMul(%x, %w) : (tensor<?x32xf32>, tensor<32x16xf32>) -> tensor<?x16xf32>
  %w2 = onnx.Weight {name = "ws"} : tensor<32x1xf32>
  %s0 = onnx.MatMul(%x, %w2) : (tensor<?x32xf32>, tensor<32x1xf32>) -> tensor<?x1xf32>
  %one = onnx.Constant() {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = onnx.Squeeze(%s0, %one) : (tensor<?x1xf32>, tensor<1xi64>) -> tensor<?xf32>
  %s2 = onnx.Cast(%s1) {to = 7 : si64} : (tensor<?xf32>) -> tensor<?xi64>
  %q = onnx.Reshape(%q0, %s2) : (tensor<?x16xf32>, tensor<?xi64>) -> tensor<?x1x16xf32>
  %sink = onnx.Weight {name = "sink"} : tensor<1xf32>
  %o = attn.sparse_attention %q, %lat, %sink {scale = 0.25 : f64, window = 4 : i64} : (tensor<?x1x16xf32>, tensor<?x16xf32>, tensor<1xf32>) -> tensor<?x1x16xf32>
  return %o : tensor<?x1x16xf32>
}
}
