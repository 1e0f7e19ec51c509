//===- Passes.td - h20 transformation passes ---------------*- tablegen -*-===//
#ifndef H20_TRANSFORMS_PASSES
#define H20_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def InferShapes : Pass<"h20-infer-shapes", "mlir::func::FuncOp"> {
  let summary = "Refine onnx op result types from symbolic shapes";
  let description = [{
    Replaces unranked or less static result types of onnx ops by the shapes
    SymbolicEvaluator derives (static where a dim folds to a constant, `?`
    otherwise). Values returned by the function keep their declared type.
  }];
}

def FoldShapes : Pass<"h20-fold-shapes", "mlir::func::FuncOp"> {
  let summary = "Fold shape subgraphs that compute constants";
  let description = [{
    Replaces every integer tensor of at most 64 elements whose elements
    SymbolicEvaluator proves constant (Shape of static dims, Gather, Concat,
    Slice, Unsqueeze, arithmetic on them, ...) by an onnx.Constant. Shape
    vectors that involve dynamic dims stay computed.
  }];
}

def GatherBeforeCast : Pass<"h20-gather-before-cast", "mlir::func::FuncOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect"];
  let summary = "Gather a weight's rows before casting them, not after";
  let description = [{
    Rewrites `Gather(Cast(W), I)` into `Cast(Gather(W, I))` (same axis,
    same Cast attributes) where W is an onnx.Weight or onnx.Constant: a
    Cast is elementwise, so both give the same values, and the second
    converts only the rows the indices pick instead of the whole table on
    every call. This is how a standard ONNX graph gathers rows of a table
    stored in a type Gather does not take (Gather-13 has no float8 types):
    DeepSeek-V4.1's Engram tables as FP8 rows (models/deepseek_v41
    export.py --fp8-engram) cast to float, then gathered; after the
    rewrite the table stays FP8 and only gathered rows are widened (and
    h20-place-tables sees a table only Gathers read). The Cast of W is
    removed once no other op reads it.
  }];
}

def AnalyzeMasks : Pass<"h20-analyze-masks", "mlir::func::FuncOp"> {
  let summary = "Prove what attention mask subgraphs compute";
  let description = [{
    For every boolean tensor used as an attention mask (the mask operand of
    onnx.Attention, or the condition of a Where that selects between 0 / x and
    -inf before a Softmax), evaluates its subgraph symbolically over the
    element indices and the model's dynamic dimensions, and proves with
    Presburger arithmetic (exactly, for every sequence length) whether it
    equals one of:
      * all keys visible;
      * causal, bottom-right aligned: key j visible to query i iff
        j <= i + (S_kv - S_q);
      * causal with a sliding window of w tokens (counting the current one):
        additionally j > i + (S_kv - S_q) - w;
      * causal, top-left aligned (j <= i) when that differs.
    A proven mask gets the attribute
    `attn.proven_mask = {causal = B, alignment = "...", window = W}` on its
    defining op; an unproven one gets a warning and stays an operand.
  }];
  let dependentDialects = ["h20::attn::AttnDialect"];
}

def RaiseToAttn : Pass<"h20-raise-attn", "mlir::func::FuncOp"> {
  let summary = "Raise ONNX attention, RoPE and RMSNorm forms to attn ops";
  let description = [{
    Rewrites, identically from both export styles:
      * onnx.RMSNormalization, ms.SimplifiedLayerNormalization and the
        decomposed x * Reciprocal(Sqrt(ReduceMean(x^2) + eps)) * w form into
        attn.rms_norm;
      * onnx.RotaryEmbedding and the decomposed half-rotation form
        (x * cos + Concat(-x2, x1) * sin) into attn.rope, recovering theta
        from the inv_freq constant the cos/sin tables are computed from;
      * onnx.Attention and MatMul/scale/mask/Softmax/MatMul into
        attn.attention, folding GQA's Unsqueeze/Expand/Reshape repeat of K and
        V into kv_group and proven masks (attn.proven_mask) into attributes.
    Patterns that do not match exactly are left alone.
  }];
  let dependentDialects = ["h20::attn::AttnDialect", "mlir::tensor::TensorDialect"];
}

def CancelTransposes : Pass<"h20-cancel-transposes", "mlir::func::FuncOp"> {
  let summary = "Run the ops between a Transpose and its inverse in the source layout";
  let description = [{
    For each onnx.Transpose whose uses (in one block) lead through
    layout-transparent ops (Unsqueeze, Squeeze and Split with constant axes,
    Concat, other Transposes) and other single-result ops of the same rank
    ("islands") to Transposes that cancel it, rewrites the transparent ops
    with remapped axes in the source layout, gives each island its operands
    transposed into the layouts it read before (its result goes back to the
    source layout where a transparent op or an end reads it), and replaces
    the cancelling Transposes by source-layout values. Applied only when
    the islands' transposes move fewer elements than the Transposes they
    replace (counted over static dims; every tensor of the region shares
    the source's dynamic dims). Results are bit-identical: only copies move.
    DeepSeek-V4.1 rotates 64 of 512 channels of [S, 64, 512] queries and
    attention outputs through [1, 64, S, 512]; the round trip becomes two
    [S, 64, 64] transposes around each RoPE (1/8 of the bytes). ONNX
    Runtime's transpose optimizer pushes transposes through the same ops.
  }];
  let dependentDialects = ["h20::onnx::OnnxDialect"];
}

def LogitsLast : Pass<"h20-logits-last", "mlir::ModuleOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect"];
  let summary = "Compute the LM head for the last position only";
  let description = [{
    For a function returning logits [B, S, V] = MatMul(h [B, S, K], W [K, V])
    or h20.BlockScaledMatMul(h [B, S, K], W [V, K] FP8, scales) (an FP8 LM
    head), slices h to its last position first, so the result is [B, 1, V]
    and the LM head costs one row instead of S (all TTFT needs). Fails when
    the result is not produced by such a head.
  }];
}

def ChunkedPrefill : Pass<"h20-chunked-prefill", "mlir::ModuleOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect", "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect", "h20::kv::KVDialect"];
  let summary = "Make a planned decoder graph one chunk of a chunked prefill";
  let description = [{
    Rewrites `@main(ids: [1, S])` at the planned level (fused KV cache, RoPE
    tables) into the body of a chunked prefill: it takes one chunk of C
    token ids plus two index arguments, `chunk_start` (p0, the chunk's first
    position) and `chunk_tokens` (n <= C, the chunk's real tokens; the rest
    is padding), and
      * RoPE positions become p0 + the in-chunk positions;
      * keys and values are written into the cache at p0, and attention
        reads the cache's first p0 + C positions: with bottom-right causal
        alignment query i (position p0 + i) sees keys <= p0 + i, so padding
        (positions >= p0 + n) is never seen by a real token;
      * with a last-position LM head (h20-logits-last) the slice takes row
        n - 1, the last real token, instead of row C - 1;
      * DeepSeek-V4.1's rows read across chunks (attn.sparse_attention's
        window latents and compressed entries, the indexers' keys, and a
        lookback Gather's data, Engram's earlier token ids) go into caches
        made here, one per row kind (width, type, ratio; caches of rows,
        kind dimension 1), a slot per distinct value, capacity max-positions
        rounded up to whole
        chunks divided by the ratio: the chunk's rows are written at row
        p0 / ratio and the op reads rows 0 .. (p0 + C) / ratio with start
        p0; an indexer's picks get the static K of the last chunk. This needs
        chunks of whole groups: a chunk size that is not a multiple of a
        compressor's group (its Slice to whole groups, its grouping Reshape,
        nested groups multiplied), an indexer's ratio or its ratio times its
        candidate block size is a reason to run the whole prompt, as are
        rows of groups where rows of tokens are needed (outputs, latents,
        queries) and keys that are not rows of the indexer's ratio;
      * token positions that meet activations (Engram's Where(pos >= k),
        a lookback Gather's max(pos - k, 0)) are evaluated at the chunk's
        global positions.
    The function gets `h20.chunked = {input = 0, dim = 1, output = "rows" |
    "last", chunk = C, capacity = max-positions rounded up to whole
    chunks}`. Fails, naming the op, on what cannot be chunked: attention
    that is not causal, a KV write not at position 0, positions that are not
    computed in the graph, more than one input, and any op not known to act
    per token (a MatMul of two activations, a Gather other than the token
    embedding such as absolute position embeddings, a reduction over the
    sequence, ...): chunking those would silently change the result.

    With `carry-partial-groups` (the CPU and GPU targets set it), a chunk
    size that is not a multiple of a compressor's group k is accepted (k -
    1 <= C): the compressor's input rows go through a ring (a kv cache of
    k - 1 + G k rows, G = ceil(C / k): the k - 1 positions before the
    chunk, then its own, then room for the rest of a group), and its Slice
    to whole groups takes the G k rows [k - 1 - p0 mod k, ..) of it: the
    groups that end in the chunk (the group a previous chunk began is
    completed here), then at most one that does not. G is static, so the
    sizes after the Slice are too (a GPU step program can size them); the
    group that does not end in the chunk is written at an entry no reader
    of this chunk sees ((p0 + n) / k of them) and the next chunk rewrites
    it first, so the caches of entries hold (capacity - C) / k + G rows.
    Their RoPE positions start at (p0 / k) * k, clamped to the capacity's
    last position (the tables end there). A grouping Reshape must then
    read rows of such a Slice.

    With `whole-prompt-fallback`, such a graph holding attn.sparse_attention
    (h20's DeepSeek-V4.1 exports, causal by construction) is not refused: it becomes
    one chunk that holds the whole prompt (the target sizes the chunk to the
    longest prompt it accepts; the runtime pads the ids at the end, p0 is
    0). That is sound for a causal decoder, whose rows never depend on later
    positions, so the padding changes no real row (which this pass cannot
    prove op by op, hence the restriction); the reason is recorded as
    `h20.chunked.whole` (op, node, why). Positions and KV writes are then
    left as they are; the last-position slice still takes row n - 1.

    With `chunk` C > 0 (a GPU target's choice, or --chunk) the attribute also records
    `chunk = C`, the tokens per chunk every later stage uses; a whole-prompt
    graph records `max-positions` instead (its one chunk holds the longest
    accepted prompt) with a warning saying why, and fails without it.
  }];
  let options = [
    Option<"wholePromptFallback", "whole-prompt-fallback", "bool", /*default=*/"false",
           "Run a graph that cannot be chunked as one whole-prompt chunk instead of failing">,
    Option<"chunk", "chunk", "int64_t", /*default=*/"0",
           "Tokens per chunk to record in h20.chunked (0: none recorded)">,
    Option<"maxPositions", "max-positions", "int64_t", /*default=*/"0",
           "Longest accepted prompt: the chunk of a whole-prompt graph">,
    Option<"carryPartialGroups", "carry-partial-groups", "bool", /*default=*/"false",
           "Carry a compressor's partial last group of k tokens into the next chunk "
           "(a ring of k - 1 rows), so chunks need not be multiples of k">
  ];
}

def ComputeType : Pass<"h20-compute-type", "mlir::func::FuncOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect"];
  let summary = "Run a float32 graph in bfloat16 or float16";
  let description = [{
    Every float32 value of the function becomes `type` (bf16 or f16):
    weights (marked `h20.stored_type = f32`: the runtime converts them once,
    on upload, from the file's float32), activations, constants (rounded to
    nearest even), Cast targets and the KV cache. What stays float32: the
    function's interface (float32 inputs are cast on entry, outputs are cast
    back before returning), the RoPE tables, and position arithmetic
    computed in the graph: float values cast from integers (token
    positions) and the shape ops, arithmetic and constants that turn them
    into RoPE angles, up to their Cos / Sin (bf16 holds integers exactly
    only up to 256: an angle of 1000 rad would be off by up to 2 rad);
    Casts join these to the rest. A MatMul that only attn.rms_scale reads
    (as its value) keeps its float32 result: its sums, rounded once by the
    rms_scale (h20-norm-scale-after-matmul). The attn ops compute in
    float32 internally whatever their operand type (RMSNorm's mean of
    squares, RoPE's products, attention's softmax), and GEMMs accumulate in
    float32, so only storage is rounded.
  }];
  let options = [
    Option<"type", "type", "std::string", "\"bf16\"", "bf16 or f16">
  ];
}

def ChooseParallelPlan : Pass<"h20-choose-parallel-plan", "mlir::ModuleOp"> {
  let summary = "Choose the multi-GPU plan (context or tensor parallel) and record it";
  let description = [{
    On attn-level IR, before h20-tensor-parallel (choose-then-apply): for
    `gpus` N > 1 GPUs of `target`, prices context parallelism (the prompt
    cut into 2N chunks, K/V passed in a ring; priced only where the target
    has NVLink) and tensor parallelism (h20-tensor-parallel's split, one
    all-reduce per block) with the cost model (PrefillCostModel.h) at
    `tokens` tokens in `chunk`-token chunks, the LM head for the last
    position only with `logits-last`, and records the plan on the module:
    `h20.parallel = {gpus, plan = "context" | "tensor", chosen_by =
    "cost model" | "user", tokens, context_ms, tensor_ms, note?,
    tensor_breakdown_ms?}` (a prediction < 0: the plan is not possible or
    not priced; tensor_breakdown_ms, where tensor parallelism is priced,
    splits one rank's tensor_ms into attention, gemm, rows, memory_bound
    and all_reduce). `plan`
    (auto, context or tensor) is the user's request: auto takes the faster
    plan that runs. Context parallelism needs N a power of two (h20-run
    cuts the prompt into 2N equal chunks); tensor parallelism a model
    h20-tensor-parallel can split. An impossible request is an error
    naming why. N <= 1 records nothing. h20-opt runs it for --gpus N and
    applies the plan; the GPU target writes it into the manifest.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"h200\"", "GPU the plan is priced on">,
    Option<"gpus", "gpus", "int64_t", "1", "GPUs of the prefill">,
    Option<"tokens", "tokens", "int64_t", "32768", "Prompt length the plans are priced at">,
    Option<"chunk", "chunk", "int64_t", "0", "Prefill chunk in tokens (0: whole prompt)">,
    Option<"elementBytes", "element-bytes", "int64_t", "2",
           "Bytes per activation / weight element (2: bf16, 4: f32)">,
    Option<"logitsLast", "logits-last", "bool", "false",
           "Price the LM head for the last position only">,
    Option<"plan", "plan", "std::string", "\"auto\"", "auto, context or tensor">,
    Option<"attentionRows", "attention-rows", "bool", "true",
           "Tensor plan: split DeepSeek-V4.1's sparse attention and indexers by query rows "
           "(recorded as h20.parallel's attention_rows, which h20-tensor-parallel applies)">,
    Option<"normScales", "norm-scales", "bool", "true",
           "Price the model as h20-norm-scale-after-matmul leaves it (what the planned stage "
           "compiles unless the compute type is f16)">
  ];
}

def TensorParallel : Pass<"h20-tensor-parallel", "mlir::ModuleOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect", "h20::attn::AttnDialect"];
  let summary = "Split attention heads and MLP columns over tensor-parallel ranks";
  let description = [{
    Rewrites an attn-level decoder into the program of one of `ranks` (T)
    tensor-parallel ranks, Megatron-LM style (Shoeybi et al., 2019, section
    3): every rank runs the same program on its own weight shards.

      * Attention block: the MatMuls making Q, K and V (through bias Add,
        Reshape to heads, Transpose, per-head RMSNorm, RoPE) keep the
        rank's heads: the weight's columns of Hq / T query heads and of
        max(Hkv / T, 1) key/value heads. When Hkv < T the KV heads are
        replicated, never split: rank r keeps KV head floor(r * Hkv / T),
        the one its query heads read (needs T % Hkv == 0). The output
        projection keeps the matching rows and is followed by
        attn.all_reduce (sum over ranks). A sink is sliced like the query
        heads. Needs Hq % T == 0 and Hkv % T == 0 or T % Hkv == 0.
      * MLP block: a MatMul whose input is an elementwise tree (SwiGLU,
        GELU, clamps by Min / Max / Clip with scalar bounds, ...) whose
        leaves are MatMuls of unsplit activations by
        weights keeps 1/T of the tree's columns (F % T == 0); the down
        projection keeps the matching rows and is followed by
        attn.all_reduce.
      * A block is split only when every value it splits is used inside
        it: a split value read elsewhere, or feeding a MatMul as its
        (unsplit) input, leaves the block whole.
      * Expert parallelism: a routed-experts op (ai.h20 RoutedExperts /
        RoutedExpertsMxfp4) whose E experts divide by T gets its expert
        weights and scales sliced along the expert axis (rank r: experts
        [r E / T, (r + 1) E / T)); routing stays whole, so every rank picks
        the same experts and computes only its own ones' share (the GPU
        program reads the rank to know which); attn.all_reduce sums the
        shares. The tokens are replicated.
      * DeepSeek-V4.1's attention by query rows: every
        attn.sparse_attention gets `h20.split_rows = T` (rank r computes
        query rows [r R / T, (r + 1) R / T) of its R rows); an indexer
        (attn.indexer_topk, attn.indexer_candidates) is split the same way
        when only split ops read its result. The split reaches on through
        row-local ops (head transposes, the output RoPE, reshapes) to the
        weight GEMMs of the output projection while every value on the
        way is used only on the way (RowSplitRegion.h; DeepSeek-V4.1's
        wo_a and wo_b, bf16 or block-scaled FP8); those GEMMs compute the
        rank's rows. The last op of the split gets `h20.split_gather` (its other
        rows are zero) and an attn.all_reduce after it that gathers every
        row on every rank. On the query side, the weight GEMMs whose rows
        only the split ops' per-query operands read (through row-local
        ops: wq_a, wq_b, the indexer's query and head-weight projections)
        compute the rank's rows too (findQuerySideGemms; counted as
        `query_gemms`). The KV side (latents, compressed entries,
        indexer keys: cache rows every later query reads) stays whole.
        With them, a shared expert beside split routed experts (weight
        GEMMs of the replicated tokens through row-local ops, added to the
        routed experts' all-reduced share: DeepSeek-V4.1's w1, w3, w2) computes
        the rank's rows too, its last GEMM gathered like the attention's
        (`shared_expert_gemms`; h20::findRowSplitTail); h20-merge-all-reduces
        later sums both shares in one all-reduce.
        h20-check-row-splits withdraws the split where a chunk's rows do
        not divide by T. Off with `attention-rows=false`, or when the
        module's `h20.parallel` (h20-choose-parallel-plan) says
        `attention_rows = false`: every rank then runs every row.
      * Everything else (embedding, norms over the hidden size, residual
        adds, LM head, blocks whose shape does not match) stays replicated:
        correct, only not split.

    Weights are not copied: the sharded onnx.Weight keeps naming the whole
    initializer and gets `h20.shard = {axis, full_shape, starts}` (starts:
    the first index along `axis` for each rank); its type is the rank's
    slice, and the runtime reads only that slice. The module gets
    `h20.tensor_parallel = {ranks = T, attention_blocks, mlp_blocks,
    expert_blocks, attention_rows, query_gemms, shared_expert_gemms,
    replicated_attention}` (what was split, what stayed
    whole). Fails when T > 1 and no block could be split, saying how many
    attention ops did
    not fit. Runs at the attn level, before RoPE lowering and
    KV-cache fusion (so the cache holds the rank's KV heads only).
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "2", "Tensor-parallel ranks T (>= 1)">,
    Option<"attentionRows", "attention-rows", "bool", "true",
           "Split DeepSeek-V4.1's sparse attention and indexers by query rows (the module's "
           "h20.parallel attention_rows, when present, decides instead)">,
  ];
}

def CheckRowSplits : Pass<"h20-check-row-splits", "mlir::ModuleOp"> {
  let dependentDialects = ["h20::attn::AttnDialect"];
  let summary = "Keep a query-row split only where the rows divide over the ranks";
  let description = [{
    h20-tensor-parallel splits DeepSeek-V4.1's sparse attention and
    indexers by query rows (`h20.split_rows = T`) before the chunk size is
    known. After h20-chunked-prefill and h20-compute-type, every split op's
    query rows R must be static or a chunk's (at most C tokens, C from
    h20.chunked) and a multiple of T (rank r computes rows [r R / T,
    (r + 1) R / T)), and a sparse attention must be one the GPU kernel
    runs (f16/bf16: the f32 reference decomposition computes every row).
    Where one is not (a chunk of 20 tokens over 8 ranks, a whole-prompt
    program of dynamic length, an f32 model), the split is withdrawn from
    every op of the function, the attn.all_reduce after each sparse
    attention is removed, and every rank computes every row: correct, only
    not split. The module's `h20.tensor_parallel` then says
    `attention_rows = 0` and why (`attention_rows_withdrawn`), and the pass
    warns once naming the first op.
  }];
}

def MergeAllReduces : Pass<"h20-merge-all-reduces", "mlir::func::FuncOp"> {
  let dependentDialects = ["h20::attn::AttnDialect", "h20::onnx::OnnxDialect"];
  let summary = "Sum two all-reduced values with one all-reduce";
  let description = [{
    Rewrites `onnx.Add(attn.all_reduce(a), attn.all_reduce(b))`, where the
    Add is the only reader of each all-reduce and a, b and the sum have one
    type, into `attn.all_reduce(onnx.Add(a, b))`: the sum over the ranks is
    linear, so one collective moves the bytes of two. Each rank adds its
    two shares before the collective instead of after it (the roundings
    move; the operations are the same). DeepSeek-V4.1 under
    h20-tensor-parallel: the routed experts' sum and the gathered rows of
    the shared expert (split by rows) become one all-reduce per MoE layer.
    Runs after h20-check-row-splits, which may withdraw a row split (and
    the all-reduce after it) and needs the two apart.
  }];
}

def NormScaleAfterMatMul : Pass<"h20-norm-scale-after-matmul", "mlir::func::FuncOp"> {
  let dependentDialects = ["h20::attn::AttnDialect", "h20::onnx::OnnxDialect"];
  let summary = "Apply a unit-gain RMS norm to a narrow GEMM's result instead of its input";
  let description = [{
    Rewrites `onnx.MatMul(attn.rms_norm(x, g), W)` into
    `attn.rms_scale(onnx.MatMul(x, W), x)` (= (x W) / sqrt(mean(x^2) +
    eps), the statistics in the norm's compute type, f32 by default) when
    the norm runs over x's last dim K alone, its gain g is a constant or
    weight of ones (read from the model), and every reader of the norm is
    a MatMul by a 2-D weight [K, N] of x's element type with N <= K /
    `min-ratio`. A row's scale commutes with a linear map of the row (exact
    in real arithmetic), so the normalised [rows, K] copy is neither written
    nor read: x is read twice (sum of squares, GEMM) and only [rows, N] is
    scaled. The new MatMul's result is float32 (its sums, [rows, N]; 16-bit
    operands stay 16-bit, and h20-compute-type keeps those sums float32),
    so a 16-bit model rounds once, the scaled row, where the norm rounded
    the normalised x and the GEMM its sums. DeepSeek-V4.1's mHC (hc_pre of every attention and MoE block:
    RMS over the 4 x 5120 streams, then a [20480, 24] projection) saves two
    [C, 20480] passes per block: 55 GB per 8448-token chunk of the full
    V4.1-Flash. DeepSeek's reference computes the mixes in this order
    (inference/model.py, hc_pre). Other norms (a learned gain, a wide
    projection such as a Llama block's Q/K/V) are left as they are, and so
    are f16 values (x W can overflow f16 where the normalised product does
    not); h20-opt does not run it for --compute-type=f16.
  }];
  let options = [
    Option<"minRatio", "min-ratio", "int64_t", "8",
           "Rewrite only when N <= K / min-ratio (the narrow projections)">
  ];
}

def QuantizeLinears : Pass<"h20-quantize-linears", "mlir::func::FuncOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect"];
  let summary = "Run float linears as block-scaled FP8 GEMMs (weights quantised on load)";
  let description = [{
    Rewrites `onnx.MatMul(X [..., K], W [K, N])`, W a float32 / bf16 /
    f16 initializer of X's type with K and N multiples of 16, into
    `onnx.h20.BlockScaledMatMul(X, Wq [N, K] float8e4m3fn, Ws [ceil(N /
    128), ceil(K / 128)] float32)` with block_n = block_k = 128: the
    FP8 linear DeepSeek-V3 stores, which the GPU target runs as a
    quantising kernel (X per 1 x 128 block, on the fly) and a cuBLASLt
    block-scaled FP8 GEMM. Wq and Ws are onnx.Weight ops of W's bytes with
    `h20.derive` (kind fp8_block128 / fp8_block128_scale, source_type,
    source_shape): the runtime computes them when it loads the weights,
    per 128 x 128 block of W^T, scale = max |w| / 448 (1 for a zero
    block, at least FLT_MIN), Wq = w / scale rounded to nearest even e4m3 (DeepSeek-V3
    technical report section 3.3; inference/kernel.py). So the weights
    are quantised from the model's own values, no calibration, and the
    activations per block at run time. A weight several linears read is
    derived once.
    Left in the compute type, counted in the function's
    `h20.quantized_linears = {fp8, kept, first_kept}` (why the first one
    was kept, and its ONNX node; h20-opt prints it): the LM head (a
    MatMul a function result comes from through casts, reshapes and a
    softcap's elementwise ops with constants, its last dim kept: the
    logits keep the compute type's accuracy), tensor-parallel shards and
    query-row splits (h20-tensor-parallel's; not derived per rank yet),
    K or N not multiples of 16 (the FP8 GEMM's alignment), weights not
    stored as raw bytes. Activation products (attention's) are no linears.
    Run by h20-opt --quantize-linears=fp8 on GPU targets only (the CPU
    target has no lowering for the derived weights).
  }];
}

def PlaceTables : Pass<"h20-place-tables", "mlir::func::FuncOp"> {
  let dependentDialects = ["h20::onnx::OnnxDialect"];
  let summary = "Keep large lookup tables in pinned host memory the GPU reads";
  let description = [{
    Marks an `onnx.Weight` with `h20.placement = "host"` when every use of
    it is the data operand of an `onnx.Gather` along axis 0 (row lookups)
    and its device bytes (element count x the element size of its result
    type, after h20-compute-type) are at least `min-bytes`. The GPU
    runtime then keeps it in page-locked host memory mapped into the
    GPU's address space (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP)
    instead of device memory, and the generated gather reads its rows
    over PCIe: a chunk of C tokens reads C x (rows per token) rows, never
    the table. This is for DeepSeek-V4.1's Engram n-gram tables: the
    released V4.1-Flash has two, [384M, 256] each (98 GB in FP8, 183 GiB
    in bf16), on layers 1 and 14, and a token reads 24 rows of each; the
    Engram paper keeps them in host memory for the same reason
    (DeepSeek, "Conditional Memory via Scalable Lookup", arXiv
    2601.07372: lookups are deterministic given the tokens, so the rows
    can be fetched from host memory).
    A smaller gather-only table read with the same indices as a placed one
    goes with it (an FP8 table's scales beside its rows: one lookup, one
    place). A table any other op reads (a tied embedding the LM head
    multiplies, a Gather along another axis) stays in device memory. Records the
    function's `h20.host_tables = {count, bytes}` when it places any (for
    --emit and lit tests; h20-opt --print-memory reports the host memory
    from the program's buffers). `min-bytes` < 0 places none; 0 places
    every gather-only table (tests).
  }];
  let options = [
    Option<"minBytes", "min-bytes", "int64_t", /*default=*/"int64_t(4) << 30",
           "Smallest table (device bytes) kept in host memory; < 0: none">
  ];
}

def LowerRope : Pass<"h20-lower-rope", "mlir::func::FuncOp"> {
  let summary = "Replace attn.rope by table gathers (no sin/cos per token)";
  let description = [{
    Rewrites every attn.rope into attn.rope_table (cos/sin computed at
    compile time in f64, rounded once to f32, stored as a two-level table:
    1 MiB at 1M positions and 64 frequency pairs) and attn.rope_apply, which
    gathers by position and recombines with cos(a+b) = cos a cos b - sin a
    sin b. Every scaling of attn.rope is kept; dynamic NTK's tables depend
    on the prompt length and are built once per prefill.
  }];
  let options = [
    Option<"maxPositions", "max-positions", "int64_t", "1048576",
           "Positions the tables cover (the longest prompt)">
  ];
  let dependentDialects = ["h20::attn::AttnDialect", "mlir::tensor::TensorDialect"];
}

def FuseKVCaches : Pass<"h20-fuse-kv-caches", "mlir::func::FuncOp"> {
  let summary = "Write every layer's K/V into one planned KV cache";
  let description = [{
    Creates ONE kv.alloc for all attention layers (logical
    [layer][K|V][kv_head][position][head_dim] with a #kv.layout stating dim
    order, row alignment and page size), writes each layer's K and V (after
    RoPE) into its slot at position 0 (prefill) and makes each attention read
    kv.view's of it. Layers whose attentions read the very same K and V
    values share one slot, as do attentions carrying the same `kv.slot`
    integer attribute (the first of them writes; the others view its K/V). The capacity is `max-seq` tokens, or the prompt
    length when 0. K/V of every layer must agree on heads, head_dim and dtype
    (else the pass reports the layer and changes nothing).

    DeepSeek-V4.1's attn.sparse_attention / attn.indexer_* (with max-seq > 0):
    plans one allocation of per-layer sliding-window rings, one compressed
    latent slot per distinct compressed value (the layers sharing it view
    it) and one indexer-key slot per distinct keys value, at `align`-byte
    offsets (SparseKVPlan.h). The plan is recorded as the function's
    `kv.sparse_plan` and each op names the slots it reads
    (`kv.window_section`, `kv.compressed_section`, `kv.keys_section`);
    `h20-opt --print-kv-plan` prints it.
  }];
  let options = [
    Option<"maxSeq", "max-seq", "int64_t", "0",
           "Cache capacity in tokens (0: the prompt length)">,
    Option<"align", "align", "int64_t", "128",
           "Byte alignment of every cache row (>= 128 for TMA / 16-byte loads)">,
    Option<"page", "page", "int64_t", "0", "Page size in tokens (0: not paged)">,
    Option<"elementBytes", "element-bytes", "int64_t", "0",
           "Sparse plan: bytes per cached element (0: the IR's element type)">
  ];
  let dependentDialects = ["h20::kv::KVDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

def PrintKVPlan : Pass<"h20-print-kv-plan", "mlir::ModuleOp"> {
  let summary = "Test only: print the byte-offset plan of every kv.alloc";
  let description = [{
    Prints, for each kv.alloc, the cache type, element and row bytes, the
    byte stride of each logical dim, the byte offset of every (layer, kind)
    slot and the total, as kv::planLayout computes them. Option `capacity`
    sizes dynamic caches.
  }];
  let options = [
    Option<"capacity", "capacity", "int64_t", "0",
           "Tokens for caches of dynamic capacity">
  ];
}

def SelectTiles : Pass<"h20-select-tiles", "mlir::func::FuncOp"> {
  let summary = "Choose per-target tiles for attention, GEMMs and row kernels";
  let description = [{
    Writes `h20.tiles = #h20.tiles<...>` on every attn.attention, every
    onnx.MatMul with a 2-D weight and every memory-bound attn op
    (rms_norm, rope_apply), chosen by the analytic cost model
    (TileCostModel.h) for `target` (h20, h100, h200, h800, a100, l20, cpu)
    at the planning sequence length `seq-len` (used for dynamic dims). A
    tuning file (JSON: an object whose "overrides" array holds objects with
    target, kind, head_dim, block_m, block_n, stages, warpgroups, persistent) replaces
    the model's choice where it matches; an override that does not fit the
    target's shared memory is an error.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"h200\"", "Target description name">,
    Option<"seqLen", "seq-len", "int64_t", "32768",
           "Tokens assumed for dynamic sequence dims">,
    Option<"tuningFile", "tuning-file", "std::string", "\"\"",
           "JSON file of measured tile overrides">
  ];
  let dependentDialects = ["h20::hw::H20Dialect"];
}

def PredictPrefill : Pass<"h20-predict-prefill", "mlir::ModuleOp"> {
  let summary = "Print the cost model's predicted prefill time per target and GPU count";
  let description = [{
    A model, not a measurement. Sums, over every op of the module at the
    attn level (run h20-logits-last first for a last-position LM head), the
    estimate of the cost model h20-select-tiles uses (TileCostModel.h):
    attn.attention at its best attention tile, onnx.MatMul at its best GEMM
    tile (batch dims folded into M), rms_norm / rope / rope_apply as row
    kernels; every other op that computes a tensor (shape-only ops and
    weights excluded) is an unfused memory-bound kernel moving its result
    plus min(operand, result) bytes per operand at 80% of HBM bandwidth.
    Every dynamic dim is taken to be `seq-len` tokens; floating-point
    elements take `element-bytes` (2: bf16 storage, as --compute-type=bf16),
    integers their own width.
    On N > 1 GPUs the prefill is modelled as context parallelism (ring
    attention, causal load balanced): each GPU does 1/N of the one-GPU time
    and receives the other GPUs' K and V of every attention layer,
    (N-1)/N x S x kv_heads x (D + Dv) x element-bytes, over NVLink at half
    the target's NVLink figure (the datasheet's is both directions); those
    transfers overlap that layer's attention, so only what exceeds it is
    added. Targets without NVLink are predicted for one GPU only.
    With `plans=context,tensor`, N > 1 GPUs also get a tensor-parallel line
    (`plan=tensor`): the module split by h20-tensor-parallel over N ranks,
    one rank's kernels at full time, plus its attn.all_reduce results moved
    2 (N-1) / N times at half the NVLink figure (ring all-reduce) plus an
    assumed 20 us per call (one per op per `chunk`), not overlapped; "n/a"
    with the reason when the model cannot be split.
    Prints one line per (target, GPUs, plan) on stdout; `output` also
    writes JSON.
  }];
  let options = [
    ListOption<"targets", "targets", "std::string",
               "Target descriptions (default: h20,h200)">,
    ListOption<"gpus", "gpus", "int64_t", "GPU counts (default: 1,8)">,
    Option<"seqLen", "seq-len", "int64_t", "32768",
           "Tokens assumed for dynamic dims">,
    Option<"elementBytes", "element-bytes", "int64_t", "2",
           "Bytes per floating-point element (bf16/f16: 2, f32: 4)">,
    Option<"output", "output", "std::string", "\"\"",
           "Also write the prediction as JSON to this file">,
    ListOption<"plans", "plans", "std::string",
               "Multi-GPU plans to predict: context, tensor (default: context)">,
    Option<"chunk", "chunk", "int64_t", "0",
           "Tensor plan: tokens per prefill chunk (one all-reduce call per op per chunk; "
           "0: one pass)">
  ];
}

def CanonicalOrder : Pass<"h20-canonical-order", "mlir::func::FuncOp"> {
  let summary = "Order ops by a depth-first walk from the function's results";
  let description = [{
    Reorders each function body into the post-order of a depth-first walk
    from the return's operands (operands visited in order). Two functions
    whose dataflow graphs are the same print the same modulo SSA names,
    however their producers ordered the nodes. Ops not reachable from the
    return keep their relative order after the reachable ones.
  }];
}

def InputValueRanges : Pass<"h20-input-value-ranges", "mlir::func::FuncOp"> {
  let summary = "Record the value ranges index inputs must lie in; check constant indices";
  let description = [{
    ONNX makes an index outside its range an error (Gather, GatherElements,
    ScatterElements: [-s, s) for an axis of size s; RotaryEmbedding and
    attn.rope_apply: a row of the cos/sin cache, [0, rows)). For each such
    index that is a constant (up to value-preserving ops: integer Casts,
    Reshape, Squeeze, Unsqueeze, Identity, Expand, Transpose), every value is
    checked now: an error naming the ONNX node and op, the element, its value
    and the range. For each index that is a function argument up to those
    ops, the requirement is recorded on the argument as `h20.value_ranges`,
    an array of dictionaries (lo, hi, why) with lo and hi as DimSums (constant,
    and terms of input, dim, coeff) over input dims, which the targets
    copy into the manifest's inputs ("value_ranges") and h20-run checks
    before running. Other indices are left to the kernels' clamp.
  }];
}

#endif // H20_TRANSFORMS_PASSES
