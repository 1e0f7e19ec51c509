//===- AttnOps.td - attn dialect ops -----------------------*- tablegen -*-===//
#ifndef H20_ATTN_OPS
#define H20_ATTN_OPS

include "h20/Dialect/Attn/IR/AttnDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

def Attn_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;

def Attn_RmsNormOp : Attn_Op<"rms_norm", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Root-mean-square layer normalisation";
  let description = [{
    Normalises `input` over its trailing dimensions, starting at `axis`, and
    scales by `weight`:

      y = x / sqrt(mean(x^2 over dims [axis, rank)) + epsilon) * weight

    The mean and the reciprocal square root are computed in `compute_type`
    (f32 when absent; the "fp32 stash" of torch/transformers), then cast
    back to the input element type before the multiply by `weight`.

    Shapes: input [d0, ..., d_(r-1)] (rank r >= 1), weight broadcastable to
    the normalised trailing dims [d_axis, ..., d_(r-1)]; result = input.
    Dtypes: f16, bf16, f32, f64.
    Source: Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019),
    eq. 4; ONNX RMSNormalization-23 (onnx/defs/nn/defs.cc).

    Example:
    ```mlir
    %y = attn.rms_norm %x, %w {epsilon = 1.0e-06 : f64, axis = -1 : i64}
        : (tensor<1x?x128xf32>, tensor<128xf32>) -> tensor<1x?x128xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$input, Attn_FloatTensor:$weight,
                   F64Attr:$epsilon,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   OptionalAttr<TypeAttr>:$compute_type);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` `(` type($input) `,` type($weight) `)`
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_RmsScaleOp : Attn_Op<"rms_scale", [Pure]> {
  let summary = "Scale rows by the reciprocal RMS of other rows";
  let description = [{
    Divides each row of `value` by the root mean square of the same row of
    `input` (over its last dimension):

      y[..., n] = value[..., n] / sqrt(mean(input[..., :]^2) + epsilon)

    The sum of squares, the mean and the reciprocal square root are
    computed in `compute_type` (f32 when absent), then the product is
    rounded once, to the result's element type. Made by
    h20-norm-scale-after-matmul from `rms_norm(input, ones) . W`, which
    equals `rms_scale(input . W, input)`: the row's scale commutes with a
    linear map of the row, so the normalised input is never stored. There
    `value` is the GEMM's float32 sums when `input` is 16-bit (a narrow
    [rows, N] result: the GEMM's own rounding to bf16 would be a second
    one).

    Shapes: input [d0, ..., d_(r-2), K], value [d0, ..., d_(r-2), N] (rank
    r >= 1, the same leading dims); result: value's shape, any float
    element type (value's, or narrower). Dtypes: f16, bf16, f32, f64.
    Source: Zhang & Sennrich, "Root Mean Square Layer
    Normalization" (2019), eq. 4; DeepSeek-V4's reference (hc_pre) scales
    its mHC mixes this way.

    Example:
    ```mlir
    %y = attn.rms_scale %mixes, %streams {epsilon = 1.0e-20 : f64}
        : (tensor<?x24xf32>, tensor<?x20480xbf16>) -> tensor<?x24xbf16>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$value, Attn_FloatTensor:$input,
                   F64Attr:$epsilon, OptionalAttr<TypeAttr>:$compute_type);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $value `,` $input attr-dict `:` `(` type($value) `,` type($input) `)`
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_RopeOp : Attn_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding (RoPE)";
  let description = [{
    Rotates pairs of channels of `input` by position-dependent angles.

    For channel pair j in [0, rotary_dim/2) and position p = positions[b, s]:
      inv_freq[j] = scaled(theta^(-2j / rotary_dim))
      angle = p * inv_freq[j]
      (x0, x1) -> (x0 cos(angle) - x1 sin(angle), x1 cos(angle) + x0 sin(angle))
    where the pair is (2j, 2j+1) when `interleaved`, else (j, j + rotary_dim/2)
    (half rotation, the Llama / GPT-NeoX convention). Channels at index >=
    `rotary_dim` pass through unchanged (partial rotary). Angles are computed
    in f64 and products in f32 (never fp16/bf16: positions beyond 2048 would
    collapse).

    `scaling` selects how inv_freq is adjusted (Hugging Face transformers,
    src/transformers/modeling_rope_utils.py):
      none        — unchanged;
      linear      — inv_freq / factor (position interpolation, Chen et al. 2023);
      dynamic_ntk — theta * ((factor * S / original_max_positions) - (factor - 1))^(d/(d-2));
      yarn        — ramp between beta_fast/beta_slow correction dims over
                    original_max_positions; cos/sin scaled by attention_factor
                    (Peng et al., "YaRN", 2023, eq. 15-20);
      llama3      — wavelength bands split by low/high_freq_factor (Llama 3.1).

    `inv_freq`, when present, lists the rotary_dim/2 inverse frequencies
    themselves (scaling must be none; theta is then informational only):
    what a graph computes from a constant that fits no closed form, e.g. a
    16-bit torch export whose inv_freq buffer was rounded to bfloat16 by
    `model.to(torch.bfloat16)` (PyTorch then rotates by those values).

    Shapes: input [B, H, S, D], positions [B, S] or [1, S] (broadcast over the
    batch; i64, absolute token positions).
    Dtypes: input f16/bf16/f32/f64; result = input.
    Source: Su et al., "RoFormer" (2021), eq. 34; ONNX RotaryEmbedding-23.
  }];
  let arguments = (ins Attn_FloatTensor:$input, RankedTensorOf<[I64, I32]>:$positions,
                   F64Attr:$theta,
                   I64Attr:$rotary_dim,
                   BoolAttr:$interleaved,
                   DefaultValuedAttr<Attn_RopeScalingAttr,
                       "::h20::attn::RopeScaling::none">:$scaling,
                   OptionalAttr<F64Attr>:$factor,
                   OptionalAttr<I64Attr>:$original_max_positions,
                   OptionalAttr<F64Attr>:$beta_fast,
                   OptionalAttr<F64Attr>:$beta_slow,
                   OptionalAttr<F64Attr>:$mscale,
                   OptionalAttr<F64Attr>:$mscale_all_dim,
                   OptionalAttr<F64Attr>:$attention_factor,
                   OptionalAttr<F64Attr>:$low_freq_factor,
                   OptionalAttr<F64Attr>:$high_freq_factor,
                   OptionalAttr<DenseF64ArrayAttr>:$inv_freq);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions attr-dict `:` `(` type($input) `,` type($positions) `)`
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_AttentionOp : Attn_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention with causal/window/GQA/sink";
  let description = [{
    Computes, for every batch b, query head h and query row i:

      s[j]  = scale * <q[b,h,i,:], k[b,h/g,j,:]>       (g = kv_group)
      s[j]  = softcap * tanh(s[j] / softcap)            (if softcap is set)
      s[j]  = -inf where key j is not visible to row i
      p[j]  = exp(s[j] - m) / (sum_j exp(s[j] - m) + exp(sink[h] - m))
      out[b,h,i,:] = sum_j p[j] * v[b,h/g,j,:]

    with m the row maximum (including the sink). Key j is visible to query
    row i when every stated constraint holds:
      causal, bottom_right: j <= i + (S_kv - S_q)   (queries are the last S_q
                            positions of the keys; equals top_left when
                            S_q == S_kv)
      causal, top_left:     j <= i
      window w:             j > i' - w, i' being the causal position of row i
                            (the window counts the current token)
      mask (if present):    mask[b,h,i,j] is true (bool), or added to s[j]
                            (float, additive); broadcast per ONNX rules.
    A row with no visible key yields 0, not NaN. `sink` adds one learned
    logit per query head to the softmax denominator only (attention sinks).
    The mask operand exists only when the importer could not prove what a
    mask means; proven masks are attributes.

    Shapes: q [B, Hq, S_q, D], k [B, Hkv, S_kv, D], v [B, Hkv, S_kv, Dv],
    mask broadcastable to [B, Hq, S_q, S_kv], sink [Hq]; result [B, Hq, S_q, Dv].
    Hq = kv_group * Hkv (MHA: 1, GQA: >1, MQA: Hkv = 1).
    Dtypes: f16/bf16/f32/f64 inputs, f32 accumulation.
    Source: Vaswani et al. (2017) eq. 1; Ainslie et al., "GQA" (2023);
    ONNX Attention-23 (onnx/defs/nn/defs.cc); Xiao et al., "Efficient
    Streaming Language Models with Attention Sinks" (2023).
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_FloatTensor:$value,
                   Optional<RankedTensorOf<[I1, F16, BF16, F32, F64]>>:$mask,
                   Optional<Attn_FloatTensor>:$sink,
                   F64Attr:$scale,
                   BoolAttr:$causal,
                   DefaultValuedAttr<Attn_CausalAlignmentAttr,
                       "::h20::attn::CausalAlignment::bottom_right">:$alignment,
                   OptionalAttr<I64Attr>:$window,
                   OptionalAttr<F64Attr>:$softcap,
                   I64Attr:$kv_group);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`sink` `(` $sink^ `:` type($sink) `)`)? attr-dict `:`
    `(` type($query) `,` type($key) `,` type($value) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_AttentionScoresOp : Attn_Op<"attention_scores", [Pure]> {
  let summary = "The S_q x S_kv score matrix of an attention, at one stage";
  let description = [{
    Materialises one intermediate of the attention that an attn.attention
    with the same operands and attributes computes (see there for the
    visibility rules), for graphs that ask for it as an output (ONNX
    Attention's qk_matmul_output). For batch b, query head h, row i, key j:

      scaled        s = scale * <q[b,h,i,:], k[b,h/g,j,:]>
      softcapped    c = softcap * tanh(s / softcap)   (= s without softcap)
      masked        m = c + mask[b,h,i,j] (additive mask), or -inf where key
                    j is not visible to row i (causal, window, bool mask)
      probabilities p = exp(m - max_j m) / sum_j exp(m - max_j m); rows
                    without a visible key are 0

    The whole [B, Hq, S_q, S_kv] matrix is built: this op exists only
    because a graph returns it, never on the attn.attention fast path.
    Arithmetic in f32 (f64 for f64 inputs); the result is rounded to its
    element type.

    Shapes: q [B, Hq, S_q, D], k [B, Hkv, S_kv, D], mask broadcastable to
    [B, Hq, S_q, S_kv]; result [B, Hq, S_q, S_kv].
    Source: ONNX Attention-23/24 (onnx/defs/nn/defs.cc), output
    qk_matmul_output with qk_matmul_output_mode = stage: softcap is applied
    before the mask, as in ONNX's reference (onnx/reference/ops/op_attention.py).
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Optional<RankedTensorOf<[I1, F16, BF16, F32, F64]>>:$mask,
                   Attn_ScoreStageAttr:$stage,
                   F64Attr:$scale,
                   BoolAttr:$causal,
                   DefaultValuedAttr<Attn_CausalAlignmentAttr,
                       "::h20::attn::CausalAlignment::bottom_right">:$alignment,
                   OptionalAttr<I64Attr>:$window,
                   OptionalAttr<F64Attr>:$softcap,
                   I64Attr:$kv_group);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key (`mask` `(` $mask^ `:` type($mask) `)`)? attr-dict `:`
    `(` type($query) `,` type($key) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_RopeTableOp : Attn_Op<"rope_table", [Pure]> {
  let summary = "Compile-time cos/sin tables of a RoPE (two-level)";
  let description = [{
    The cos/sin of every position in [0, max_positions) for each frequency
    pair j < rotary_dim / 2, stored as two levels so the size stays small at
    1M positions: with p = hi * block + lo,
      coarse[0][hi][j] = m cos(hi * block * f_j), coarse[1][hi][j] = m sin(...)
      fine[0][lo][j]   = cos(lo * f_j),            fine[1][lo][j]   = sin(...)
    where f_j are the scaled inverse frequencies and m the magnitude factor
    (YaRN attention_factor, else 1), all computed in f64 and rounded once to
    f32 (RopeMath.h). `representation = "two_level"` records the choice.
    Dynamic NTK depends on the prompt length: its tables take `seq_len`
    (index) and are built once per prefill, never per token.
    Results: coarse [2, ceil(max_positions / block), rotary_dim / 2] and
    fine [2, block, rotary_dim / 2], f32.
  }];
  let arguments = (ins Optional<Index>:$seq_len,
                   F64Attr:$theta,
                   I64Attr:$rotary_dim,
                   DefaultValuedAttr<Attn_RopeScalingAttr,
                       "::h20::attn::RopeScaling::none">:$scaling,
                   OptionalAttr<F64Attr>:$factor,
                   OptionalAttr<I64Attr>:$original_max_positions,
                   OptionalAttr<F64Attr>:$beta_fast,
                   OptionalAttr<F64Attr>:$beta_slow,
                   OptionalAttr<F64Attr>:$mscale,
                   OptionalAttr<F64Attr>:$mscale_all_dim,
                   OptionalAttr<F64Attr>:$attention_factor,
                   OptionalAttr<F64Attr>:$low_freq_factor,
                   OptionalAttr<F64Attr>:$high_freq_factor,
                   I64Attr:$max_positions,
                   I64Attr:$block,
                   StrAttr:$representation,
                   OptionalAttr<DenseF64ArrayAttr>:$inv_freq);
  let results = (outs RankedTensorOf<[F32]>:$coarse, RankedTensorOf<[F32]>:$fine);
  let assemblyFormat = [{
    ($seq_len^)? attr-dict `:` type($coarse) `,` type($fine)
  }];
  let hasVerifier = 1;
}

def Attn_RopeApplyOp : Attn_Op<"rope_apply", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotate by RoPE angles gathered from two-level tables";
  let description = [{
    Same result as attn.rope (same pairing, same pass-through of channels
    >= rotary_dim), with cos/sin gathered by position from an
    attn.rope_table: for position p = hi * block + lo and pair j,
      cos = cc * fc - cs * fs,  sin = cs * fc + cc * fs
    with (cc, cs) = coarse[:, hi, j] and (fc, fs) = fine[:, lo, j], in f32.
    No sin/cos is evaluated at run time.
    Shapes: input [B, H, S, D], positions [B, S] or [1, S] (broadcast over the
    batch; i64/i32, < max_positions),
    coarse/fine as attn.rope_table produces; result = input.
  }];
  let arguments = (ins Attn_FloatTensor:$input, RankedTensorOf<[I64, I32]>:$positions,
                   RankedTensorOf<[F32]>:$coarse, RankedTensorOf<[F32]>:$fine,
                   I64Attr:$rotary_dim, BoolAttr:$interleaved, I64Attr:$block);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `,` $coarse `,` $fine attr-dict `:`
    `(` type($input) `,` type($positions) `,` type($coarse) `,` type($fine) `)`
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_AllReduceOp : Attn_Op<"all_reduce", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Sum a tensor over the tensor-parallel ranks";
  let description = [{
    Every tensor-parallel rank holds a partial `input` (its heads' share of
    an attention output projection, its columns' share of an MLP down
    projection); the result, on every rank, is the elementwise sum of the
    `input`s of all ranks. Inserted by h20-tensor-parallel after a
    row-parallel MatMul (Shoeybi et al., "Megatron-LM", 2019, section 3,
    the "g" operator), after a routed-experts op split by expert, and after
    the last op of a query-row split (h20.split_gather: each rank holds its
    rows and zeros, so the sum gathers the rows); the GPU target runs it as
    one ncclAllReduce (sum).
    With one rank it is the identity. The CPU target has no lowering (it
    runs one rank; a sharded graph there would be wrong).

    Shapes: any rank; result = input. Dtypes: f16, bf16, f32, f64.

    Example:
    ```mlir
    %y = attn.all_reduce %x : (tensor<1x?x4096xbf16>) -> tensor<1x?x4096xbf16>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$input);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` `(` type($input) `)` `->` type($result)
  }];
}

def Attn_SparseAttentionOp : Attn_Op<"sparse_attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "Shared-latent attention over a sliding window plus selected compressed entries";
  let description = [{
    DeepSeek-V4.1's attention (one prompt, positions 0..S-1): one shared
    latent serves as key and value for every query head; query i of head h
    attends to
      - the window: latent rows j with j <= i and i - j < window;
      - the selected compressed entries: compressed[idx[i, k]] for every k
        with 0 <= idx[i, k] < T (other values, e.g. T for "no pick", select
        nothing; valid indices of one row must be distinct);
    and the per-head sink only grows the softmax denominator:

      s_j = scale * <q[i,h,:], key_j>,   m = max(max_j s_j, sink[h])
      out[i,h,:] = sum_j exp(s_j - m) key_j / (sum_j exp(s_j - m) + exp(sink[h] - m))

    At most window + K keys per query: nothing of size S x S or S x T is
    built. Without `compressed`/`indices` only the window is attended.

    With `start` (index; a chunked prefill's first position, or a context-
    parallel rank's), query row r is the prompt's position i = start + r
    and the latent holds positions 0..L-1 with L >= start + S (one chunk's
    queries over the cache of every earlier token); without it, start = 0
    and L = S. With `latent_start` too (index, may be negative), latent row
    r holds position latent_start + r (a window ring: the W - 1 rows before
    the chunk, then the chunk's own), L >= start + S - latent_start, and
    rows of negative positions are never read; the window rows of every
    query must be in the latent (latent_start <= max(start - W + 1, 0)).
    Shapes: q [S, H, D], latent [L, D], sink [H], compressed [T, D],
    indices [S, K] (i64); result [S, H, D]. f32 accumulation.
    Source: transformers models/deepseek_v41 (DeepseekV41Attention,
    eager_attention_forward); DeepSeek-AI, "DeepSeek-V4.1-Flash" (2026).
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$latent,
                   Attn_FloatTensor:$sink,
                   Optional<Attn_FloatTensor>:$compressed,
                   Optional<RankedTensorOf<[I64]>>:$indices,
                   Optional<Index>:$start, Optional<Index>:$latent_start,
                   F64Attr:$scale, I64Attr:$window);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $latent `,` $sink (`compressed` `(` $compressed^ `:` type($compressed) `,`
    $indices `:` type($indices) `)`)? (`start` `(` $start^ `)`)?
    (`latent_start` `(` $latent_start^ `)`)? attr-dict `:`
    `(` type($query) `,` type($latent) `,` type($sink) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_IndexerTopKOp : Attn_Op<"indexer_topk", [Pure, AttrSizedOperandSegments]> {
  let summary = "Lightning-indexer scores and the top-k compressed entries per query";
  let description = [{
    For query i (position i of one prompt; start + i with a start, below)
    and compressed entry t:

      score[i,t] = sum_h weights[i,h] * max(<q[i,h,:], k[t,:]>, 0) * scale

    Entry t is visible to query i iff t < (i + 1) / ratio (integer
    division: the entry's group of `ratio` tokens is complete). With
    `candidates` (the block indices an earlier indexer_candidates chose for
    this query), entries outside those blocks of `block_size` are not
    visible either. The result holds, per query, the K = min(topk, T)
    visible entries with the largest scores, largest first, ties to the
    lower index; slots without a visible entry hold T. With `start`
    (index), query row r is position i = start + r (one chunk's queries
    against the entries of every earlier token); without it, i = r.
    Shapes: q [S, Hi, Di], k [T, Di], weights [S, Hi], candidates [S, KB]
    (i64); result [S, K] i64. f32 arithmetic. The S x T score matrix is a
    meaning, not a buffer: lowerings keep O(rows x T) live.
    Source: transformers models/deepseek_v41 (DeepseekV41Indexer,
    select_candidate_blocks).
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$keys,
                   Attn_FloatTensor:$weights,
                   Optional<RankedTensorOf<[I64]>>:$candidates,
                   Optional<Index>:$start,
                   I64Attr:$ratio, I64Attr:$topk, F64Attr:$scale,
                   OptionalAttr<I64Attr>:$block_size);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $query `,` $keys `,` $weights (`candidates` `(` $candidates^ `:` type($candidates) `)`)?
    (`start` `(` $start^ `)`)? attr-dict `:`
    `(` type($query) `,` type($keys) `,` type($weights) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_IndexerCandidatesOp : Attn_Op<"indexer_candidates", [Pure]> {
  let summary = "Level one of the two-level indexer top-k: candidate blocks per query";
  let description = [{
    With the scores and visibility of attn.indexer_topk (no candidates),
    groups the T entries into NB = ceil(T / block_size) blocks, scores each
    block by its best visible entry (-inf if none), pins the block holding
    the newest visible entry (floor((vis_i - 1) / block_size), none when no
    entry is visible yet) to +inf, and returns the KB = min(blocks, NB) best
    block indices per query, best first, ties to the lower index; slots
    whose block has no visible entry hold NB. `start` as for
    attn.indexer_topk.
    Shapes: q [S, Hi, Di], k [T, Di], weights [S, Hi]; result [S, KB] i64.
    Source: transformers models/deepseek_v41 (select_candidate_blocks).
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$keys,
                   Attn_FloatTensor:$weights, Optional<Index>:$start,
                   I64Attr:$ratio, I64Attr:$blocks, I64Attr:$block_size, F64Attr:$scale);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $query `,` $keys `,` $weights (`start` `(` $start^ `)`)? attr-dict `:`
    `(` type($query) `,` type($keys) `,` type($weights) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // H20_ATTN_OPS
