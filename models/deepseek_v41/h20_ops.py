"""The `ai.h20` ONNX domain: DeepSeek-V4.1 operators ONNX cannot express
without building an S x S (or S x S/r) matrix or running every expert densely,
each shipped as a model-local FunctionProto whose body is the meaning in
standard opset-23 ops (so ONNX Runtime runs an export as it is, and h20 may
raise the call to its own kernels instead of inlining the body). Shapes use
S = tokens, T = compressed entries, H = heads, D = head dim; one prompt (no
batch axis); float32 unless stated. Sources: transformers
models/deepseek_v41/modular_deepseek_v41.py (eager_attention_forward,
DeepseekV41Indexer, select_candidate_blocks, DeepseekV41SparseMoeBlock).

SinkAttention(Q[S,H,D], KV[S,D], Sink[H]) -> O[S,H,D]
    attrs: scale (float), window (int). Shared K = V latent, causal sliding
    window (key j visible to query i iff j <= i and i - j < window); the
    per-head sink is one more logit in the softmax denominator only.
SparseSinkAttention(Q, KV, Sink, CompKV[T,D], TopkIdx[S,K] int64) -> O
    as SinkAttention, plus the compressed entries CompKV[TopkIdx[i, :]] for
    query i; an index equal to T selects nothing (the dummy slot).
IndexerTopK(Q[S,Hi,Di], K[T,Di], W[S,Hi]) -> TopkIdx[S,K], K = min(topk, T)
    attrs: ratio, topk, scale. score[i,t] = sum_h W[i,h] relu(Q[i,h].K[t]) *
    scale; entry t is visible to query i iff t < (i + 1) // ratio; the top
    K visible entries (ties: lower index), invisible picks -> T.
IndexerTopKCandidates(Q, K, W) -> (TopkIdx, Blocks[S,KB]) (candidate source)
    attrs: ratio, topk, scale, blocks, block_size. Blocks are the top
    KB = min(blocks, ceil(T / block_size)) blocks by their max score, the
    block holding the newest visible entry pinned in; unreachable -> nb.
IndexerTopKInCandidates(Q, K, W, Blocks) -> TopkIdx (later index sources)
    as IndexerTopK with scores outside the candidate blocks removed.
RoutedExperts(X[N,Dm], Router[Dm,E], Bias[E], W1[E,Dm,I], W3[E,Dm,I],
    W2[E,I,Dm]) -> Y[N,Dm]
    attrs: top_k, scaling (float), limit (float), temp (float).
    scores = sqrt(softplus(X Router / temp)); experts = top_k of scores +
    Bias (selection only); weights = scores[experts] normalised to sum 1 (+1e-20)
    times scaling; Y = sum over selected e of W2[e]^T (weight * silu(min(g,
    limit)) * clip(u, -limit, limit)), g = X W1[e], u = X W3[e]; limit <= 0
    clamps nothing (silu(g) * u), as transformers' swiglu_limit.
RoutedExpertsMxfp4(X, Router, Bias, W1[E,I,Dm/2] int8, S1[E,I,Dm/32] int8,
    W3 (as W1), S3, W2[E,Dm,I/2] int8, S2[E,Dm,I/32] int8) -> Y[N,Dm]
    RoutedExperts on MXFP4 experts as DeepSeek-V4's checkpoints store them
    (each expert's Linear weight [out, in]: e2m1 pairs, element 2j in the low
    nibble, and one ue8m0 scale per 32 inputs; OCP Microscaling Formats
    v1.0; the bytes as int8, read as unsigned): W[e, o, i] = e2m1(code) *
    2^(S[e, o, i // 32] - 127) (a scale byte of 255 is E8M0's NaN), then
    RoutedExperts(X, Router, Bias, W1^T, W3^T, W2^T) per expert.
BlockScaledMatMul(X[..., K], W[N, K] float8e4m3fn, Scale[ceil(N/bn),
    ceil(K/bk)] float32) -> Y[..., N] (X's float type)
    attrs: block_n, block_k. Y = X . (W * Scale[n // bn, k // bk])^T: a
    block-scaled FP8 linear as DeepSeek's checkpoints store it (weight and
    weight_scale_inv, 128 x 128 blocks; the last blocks may be partial).
"""
import numpy as np
from onnx import TensorProto, helper

import quant
from onnx_builder import H20_DOMAIN, OPSET, Graph

NEG_INF = np.float32(-np.inf)


def _function(name, inputs, outputs, attrs, body):
    return helper.make_function(H20_DOMAIN, name, inputs, outputs, body.nodes,
                                [helper.make_opsetid("", OPSET)], attrs)


def _positions(g, x):
    """int64 [S] = 0..S-1 for S = x.shape[0]."""
    s = g.op("Squeeze", [g.dim(x, 0), g.i64(0)])
    return g.op("Range", [g.const(np.int64(0)), s, g.const(np.int64(1))])


def _attention(g, q, keys, bias, sink):
    """softmax over [scores + bias, sink] without the sink column, times keys.
    q [S,H,D], keys [L,D], bias [S,L] -> [S,H,D]."""
    scale = g.scalar_from_attr("scale", "FLOAT")
    qt = g.op("Transpose", [q], perm=[1, 0, 2])  # [H,S,D]
    kt = g.op("Transpose", [keys], perm=[1, 0])  # [D,L]
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [qt, kt]), scale]), bias])  # [H,S,L]
    h = g.dim(q, 1)
    shape = g.op("Concat", [h, g.dim(q, 0), g.i64(1)], axis=0)
    sinks = g.op("Expand", [g.op("Reshape", [sink, g.i64(-1, 1, 1)]), shape])
    probs = g.op("Softmax", [g.op("Concat", [scores, sinks], axis=-1)], axis=-1)
    probs = g.op("Slice", [probs, g.i64(0), g.i64(-1), g.i64(-1)])
    return g.op("Transpose", [g.op("MatMul", [probs, keys])], perm=[1, 0, 2])


def _window_bias(g, q):
    """[S,S] 0 where key j is visible to query i (j <= i < j + window), else -inf."""
    pos = _positions(g, q)
    i = g.op("Unsqueeze", [pos, g.i64(1)])
    j = g.op("Unsqueeze", [pos, g.i64(0)])
    window = g.scalar_from_attr("window")
    visible = g.op("And", [g.op("LessOrEqual", [j, i]), g.op("Less", [g.op("Sub", [i, j]), window])])
    return g.op("Where", [visible, g.const(np.float32(0)), g.const(NEG_INF)])


def sink_attention():
    g = Graph(function=True)
    out = _attention(g, "Q", "KV", _window_bias(g, "Q"), "Sink")
    g.op("Identity", [out], outs=["O"])
    return _function("SinkAttention", ["Q", "KV", "Sink"], ["O"], ["scale", "window"], g)


def sparse_sink_attention():
    g = Graph(function=True)
    t = g.dim("CompKV", 0)
    s = g.dim("Q", 0)
    full = g.op("Expand", [g.const(NEG_INF), g.op("Concat", [s, g.op("Add", [t, g.i64(1)])], axis=0)])
    zeros = g.op("Expand", [g.const(np.float32(0)), g.op("Shape", ["TopkIdx"])])
    chosen = g.op("ScatterElements", [full, "TopkIdx", zeros], axis=1)
    chosen = g.op("Slice", [chosen, g.i64(0), t, g.i64(1)])  # drop the dummy slot
    bias = g.op("Concat", [_window_bias(g, "Q"), chosen], axis=1)
    keys = g.op("Concat", ["KV", "CompKV"], axis=0)
    out = _attention(g, "Q", keys, bias, "Sink")
    g.op("Identity", [out], outs=["O"])
    return _function("SparseSinkAttention", ["Q", "KV", "Sink", "CompKV", "TopkIdx"], ["O"],
                     ["scale", "window"], g)


def _index_scores(g):
    """[S,T] head-weighted ReLU scores, -inf where not yet visible; also T."""
    scale = g.scalar_from_attr("scale", "FLOAT")
    qt = g.op("Transpose", ["Q"], perm=[1, 0, 2])  # [Hi,S,Di]
    kt = g.op("Transpose", ["K"], perm=[1, 0])  # [Di,T]
    per_head = g.op("Mul", [g.op("Relu", [g.op("MatMul", [qt, kt])]), scale])  # [Hi,S,T]
    w = g.op("Unsqueeze", [g.op("Transpose", ["W"], perm=[1, 0]), g.i64(2)])  # [Hi,S,1]
    scores = g.op("ReduceSum", [g.op("Mul", [per_head, w]), g.i64(0)], keepdims=0)  # [S,T]
    pos = _positions(g, "Q")
    ratio = g.scalar_from_attr("ratio")
    lens = g.op("Div", [g.op("Add", [pos, g.const(np.int64(1))]), ratio])  # [S]
    t = g.dim("K", 0)
    entries = _positions(g, "K")
    visible = g.op("Less", [g.op("Unsqueeze", [entries, g.i64(0)]), g.op("Unsqueeze", [lens, g.i64(1)])])
    return g.op("Where", [visible, scores, g.const(NEG_INF)]), lens, t


def _topk_or_dummy(g, scores, limit, width, name):
    """Top min(limit, width) indices along axis 1; -inf picks -> width."""
    k = g.op("Min", [limit, width])
    values, idx = g.op("TopK", [scores, k], n_out=2, axis=1, largest=1, sorted=1, name=name)
    valid = g.op("Greater", [values, g.const(NEG_INF)])
    return g.op("Where", [valid, idx, width])


def _topk(g, scores, t):
    return _topk_or_dummy(g, scores, g.op("Reshape", [g.scalar_from_attr("topk"), g.i64(1)]), t, "topk")


def indexer_topk():
    g = Graph(function=True)
    scores, _, t = _index_scores(g)
    g.op("Identity", [_topk(g, scores, t)], outs=["TopkIdx"])
    return _function("IndexerTopK", ["Q", "K", "W"], ["TopkIdx"], ["ratio", "topk", "scale"], g)


def indexer_topk_candidates():
    g = Graph(function=True)
    scores, lens, t = _index_scores(g)
    bs = g.scalar_from_attr("block_size")
    bs1 = g.op("Reshape", [bs, g.i64(1)])
    nb = g.op("Div", [g.op("Sub", [g.op("Add", [t, bs1]), g.i64(1)]), bs1])  # ceil(T / bs)
    padded_width = g.op("Mul", [nb, bs1])
    pad = g.op("Expand", [g.const(NEG_INF), g.op("Concat", [g.dim("Q", 0), g.op("Sub", [padded_width, t])],
                                                     axis=0)])
    padded = g.op("Concat", [scores, pad], axis=1)
    blocks = g.op("ReduceMax", [g.op("Reshape", [padded, g.op("Concat", [g.i64(0), nb, bs1], axis=0)]),
                                g.i64(2)], keepdims=0)  # [S,nb]
    # Block of the newest visible entry: floor((lens - 1) / bs), -1 when none.
    last = g.op("Sub", [g.op("Div", [g.op("Add", [lens, g.op("Sub", [bs, g.const(np.int64(1))])]), bs]),
                        g.const(np.int64(1))])
    block_ids = g.op("Range", [g.const(np.int64(0)), g.op("Squeeze", [nb, g.i64(0)]), g.const(np.int64(1))])
    pinned = g.op("Equal", [g.op("Unsqueeze", [block_ids, g.i64(0)]), g.op("Unsqueeze", [last, g.i64(1)])])
    blocks = g.op("Where", [pinned, g.const(np.float32(np.inf)), blocks])
    limit = g.op("Reshape", [g.scalar_from_attr("blocks"), g.i64(1)])
    g.op("Identity", [_topk_or_dummy(g, blocks, limit, nb, "candidate_topk")], outs=["Blocks"])
    g.op("Identity", [_topk(g, scores, t)], outs=["TopkIdx"])
    return _function("IndexerTopKCandidates", ["Q", "K", "W"], ["TopkIdx", "Blocks"],
                     ["ratio", "topk", "scale", "blocks", "block_size"], g)


def indexer_topk_in_candidates():
    g = Graph(function=True)
    scores, _, t = _index_scores(g)
    bs1 = g.op("Reshape", [g.scalar_from_attr("block_size"), g.i64(1)])
    nb = g.op("Div", [g.op("Sub", [g.op("Add", [t, bs1]), g.i64(1)]), bs1])
    s = g.dim("Q", 0)
    zeros = g.op("Expand", [g.const(np.float32(0)), g.op("Concat", [s, g.op("Add", [nb, g.i64(1)])], axis=0)])
    ones = g.op("Expand", [g.const(np.float32(1)), g.op("Shape", ["Blocks"])])
    keep = g.op("Slice", [g.op("ScatterElements", [zeros, "Blocks", ones], axis=1), g.i64(0), nb, g.i64(1)])
    keep = g.op("Expand", [g.op("Unsqueeze", [keep, g.i64(2)]), g.op("Concat", [s, nb, bs1], axis=0)])
    keep = g.op("Slice", [g.op("Reshape", [keep, g.op("Concat", [s, g.i64(-1)], axis=0)]), g.i64(0), t, g.i64(1)])
    scores = g.op("Where", [g.op("Greater", [keep, g.const(np.float32(0))]), scores, g.const(NEG_INF)])
    g.op("Identity", [_topk(g, scores, t)], outs=["TopkIdx"])
    return _function("IndexerTopKInCandidates", ["Q", "K", "W", "Blocks"], ["TopkIdx"],
                     ["ratio", "topk", "scale", "block_size"], g)


def routed_experts():
    g = Graph(function=True)
    _routed_experts_body(g, "W1", "W3", "W2")
    return _function("RoutedExperts", ["X", "Router", "Bias", "W1", "W3", "W2"], ["Y"],
                     ["top_k", "scaling", "limit", "temp"], g)


def routed_experts_mxfp4():
    g = Graph(function=True)
    w1, w3, w2 = (_dequant_mxfp4(g, f"W{i}", f"S{i}") for i in (1, 3, 2))
    _routed_experts_body(g, w1, w3, w2)
    return _function("RoutedExpertsMxfp4", ["X", "Router", "Bias", "W1", "S1", "W3", "S3", "W2", "S2"],
                     ["Y"], ["top_k", "scaling", "limit", "temp"], g)


def _dequant_mxfp4(g, packed, scale):
    """float32 [E, in, out] from packed e2m1 bytes [E, out, in / 2] (element
    2j in the low nibble) and ue8m0 scales [E, out, in / 32], both int8:
    byte -> both values and code -> 2^(code - 127) by table Gathers (256
    entries; a negative int8 index counts from the end, so byte b reads
    entry b mod 256, its unsigned value)."""
    byte = np.arange(256, dtype=np.uint8)
    pair = quant.unpack_e2m1(byte[:, None])  # [256, 2]: each byte's two values
    idx = g.op("Cast", [packed], to=TensorProto.INT32)
    lo = g.op("Gather", [g.const(np.ascontiguousarray(pair[:, 0]), hint="e2m1_lo"), idx])
    hi = g.op("Gather", [g.const(np.ascontiguousarray(pair[:, 1]), hint="e2m1_hi"), idx])
    pairs = g.op("Concat", [g.op("Unsqueeze", [lo, g.i64(-1)]), g.op("Unsqueeze", [hi, g.i64(-1)])], axis=-1)
    blocks = g.op("Reshape", [pairs, g.i64(0, 0, -1, quant.FP4_BLOCK)])  # [E, out, in / 32, 32]
    pow2 = g.const(quant.e8m0_to_f32(byte), hint="e8m0")  # 255: E8M0's NaN
    s = g.op("Unsqueeze", [g.op("Gather", [pow2, g.op("Cast", [scale], to=TensorProto.INT32)]), g.i64(-1)])
    w = g.op("Reshape", [g.op("Mul", [blocks, s]), g.i64(0, 0, -1)])  # [E, out, in]
    return g.op("Transpose", [w], perm=[0, 2, 1])


def _routed_experts_body(g, w1, w3, w2):
    """RoutedExperts' computation on expert weights w1/w3 [E, Dm, I], w2 [E, I, Dm]."""
    logits = g.op("Div", [g.op("MatMul", ["X", "Router"]), g.scalar_from_attr("temp", "FLOAT")])
    scores = g.op("Sqrt", [g.op("Softplus", [logits])])  # [N,E]
    k = g.op("Reshape", [g.scalar_from_attr("top_k"), g.i64(1)])
    _, idx = g.op("TopK", [g.op("Add", [scores, "Bias"]), k], n_out=2, axis=1, largest=1, sorted=1)
    w = g.op("GatherElements", [scores, idx], axis=1)
    w = g.op("Div", [w, g.op("Add", [g.op("ReduceSum", [w, g.i64(1)], keepdims=1), g.const(np.float32(1e-20))])])
    w = g.op("Mul", [w, g.scalar_from_attr("scaling", "FLOAT")])
    dense = g.op("ScatterElements", [g.op("Mul", [scores, g.const(np.float32(0))]), idx, w], axis=1)  # [N,E]
    limit = g.scalar_from_attr("limit", "FLOAT")
    x = g.op("Unsqueeze", ["X", g.i64(0)])  # [1,N,Dm]
    # limit <= 0: no clamp (transformers' swiglu_limit rule).
    clamped = g.op("Greater", [limit, g.const(np.float32(0))])
    gate_raw, up_raw = g.op("MatMul", [x, w1]), g.op("MatMul", [x, w3])  # [E,N,I]
    gate = g.op("Where", [clamped, g.op("Min", [gate_raw, limit]), gate_raw])
    up = g.op("Where", [clamped, g.op("Clip", [up_raw, g.op("Neg", [limit]), limit]), up_raw])
    act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
    # Every expert runs densely here; only the selected ones (weight > 0)
    # may contribute: Where, not a multiply by 0, so that an unselected
    # expert's inf / NaN (e.g. an E8M0 NaN scale) cannot reach Y.
    # Both Wheres leave a selected expert's values as a plain multiply gives
    # them (the same rounding as before they were added).
    wt = g.op("Unsqueeze", [g.op("Transpose", [dense], perm=[1, 0]), g.i64(2)])  # [E,N,1]
    zero = g.const(np.float32(0))
    picked = g.op("Greater", [wt, zero])
    weighted = g.op("Where", [picked, g.op("Mul", [act, wt]), zero])  # [E,N,I]
    per = g.op("Where", [picked, g.op("MatMul", [weighted, w2]), zero])  # [E,N,Dm]
    y = g.op("ReduceSum", [per, g.i64(0)], keepdims=0)
    g.op("Identity", [y], outs=["Y"])


def block_scaled_matmul():
    g = Graph(function=True)
    rows = g.op("Div", [_range_of(g, "W", 0), g.scalar_from_attr("block_n")])  # n // bn
    cols = g.op("Div", [_range_of(g, "W", 1), g.scalar_from_attr("block_k")])  # k // bk
    scale = g.op("Gather", [g.op("Gather", ["Scale", rows], axis=0), cols], axis=1)  # [N, K]
    w = g.op("Mul", [g.op("CastLike", ["W", "Scale"]), scale])
    y = g.op("MatMul", ["X", g.op("CastLike", [g.op("Transpose", [w], perm=[1, 0]), "X"])])
    g.op("Identity", [y], outs=["Y"])
    return _function("BlockScaledMatMul", ["X", "W", "Scale"], ["Y"], ["block_n", "block_k"], g)


def _range_of(g, x, axis):
    """int64 [x.shape[axis]] = 0..x.shape[axis]-1."""
    n = g.op("Squeeze", [g.dim(x, axis), g.i64(0)])
    return g.op("Range", [g.const(np.int64(0)), n, g.const(np.int64(1))])


def all_functions():
    return [sink_attention(), sparse_sink_attention(), indexer_topk(), indexer_topk_candidates(),
            indexer_topk_in_candidates(), routed_experts(), routed_experts_mxfp4(),
            block_scaled_matmul()]
