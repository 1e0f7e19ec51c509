//===- Passes.td - h20 conversion passes -------------------*- tablegen -*-===//
#ifndef H20_CONVERSION_PASSES
#define H20_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def LowerToLinalg : Pass<"h20-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower attn ops (reference decompositions) and onnx ops to linalg";
  let description = [{
    Rewrites every attn op into its reference decomposition on linalg /
    tensor / arith / math (this decomposition is the op's meaning: the CPU
    target runs it and tests compare against it), and every remaining onnx op
    into linalg / tensor / arith / math. onnx.Weight values become trailing
    arguments of the function, listed in order in its `h20.weights` attribute
    (initializer names). Fails, naming the op, on anything it cannot lower.

    With `library-calls` (the GPU target), MatMul and attn.attention do not
    decompose: each becomes one linalg.generic whose `library_call` names the
    routine that implements it (`h20_gemm`: cuBLASLt, `h20_attention`: the
    generated attention kernel); so do attn.indexer_topk and
    attn.indexer_candidates (`h20_indexer`, with a float32 scratch output).
    Such a generic only carries operands and attributes to the target; its
    body is a placeholder that must never run. TopK and ScatterElements then
    take their parallel forms (one output element per iteration) instead of
    sequential loop nests. onnx.h20.BlockScaledMatMul (FP8 weight, 128 x 128
    block scales) becomes `h20_fp8_quantize` + `h20_gemm_fp8`, or with
    `fp8-gemm=dequantize` (and for shapes the FP8 GEMM cannot take, with a
    warning) a generated dequantising kernel + `h20_gemm`.
  }];
  let options = [
    Option<"libraryCalls", "library-calls", "bool", "false",
           "Keep MatMul and attention as library-call generics (GPU target)">,
    Option<"fp8Gemm", "fp8-gemm", "std::string", "\"fp8\"",
           "With library-calls, onnx.h20.BlockScaledMatMul as a block-scaled FP8 "
           "GEMM (fp8: inputs quantised per 1 x 128 block) or as a GEMM of the "
           "input's type on a per-chunk dequantised copy of the weight "
           "(dequantize)">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::tensor::TensorDialect",
    "mlir::scf::SCFDialect"
  ];
}

def LinalgToGpuLoops : Pass<"h20-linalg-to-gpu-loops", "mlir::func::FuncOp"> {
  let summary = "Turn linalg ops on memrefs into scf.parallel loops mapped to GPU blocks/threads";
  let description = [{
    The memory-bound part of the GPU target: every linalg op on memrefs
    (except library-call generics, which the target implements with a
    routine) becomes loops, its parallel dims collapsed into one and tiled by
    `block-size`: the tile loop is mapped to blocks (x), the in-tile loop to
    threads (x), reductions stay sequential inside a thread, nested parallel
    loops are sequential. `convert-parallel-loops-to-gpu` then makes each a
    gpu.launch. An op without parallel dims runs as one thread. A generic
    whose reduction dims precede parallel ones is interchanged first so
    that reductions are innermost. Shape arithmetic (every operand a static
    integer memref of <= 16 elements, allocated by the host program, its
    inputs written and its outputs read by no device op: kernels and
    library calls cannot read host memory) is unrolled into host loads, stores and
    arithmetic instead of becoming a kernel.

    Row reductions (`row-reductions`, on by default): a linalg.generic whose
    only reduction dim is its innermost loop, into one 32/64-bit scalar output
    per row, with a single associative combiner (addf, mulf, maximumf, ...)
    becomes a gpu.launch directly: one block per row (the parallel dims,
    delinearised from block_x), min(block-size, row length rounded up to 32)
    threads striding the row so that a warp reads consecutive elements, the
    partial results combined with gpu.all_reduce (shuffles and shared memory
    after convert-gpu-to-nvvm), the row's initial output combined in by
    thread 0.

    Vectorized elementwise ops (`vector-width` W > 1, default 8): a generic
    (named ops such as linalg.copy are generalized first) whose loops are
    all parallel, whose innermost loop has a static trip count divisible by
    W, whose memref operands are indexed by projected permutations that end
    in the innermost loop dim with unit innermost stride (a contiguous
    vector) or do not use it (broadcast; outputs must be contiguous), and
    whose body is arith/math ops on int/float scalars (and loads of one
    element at an index the loops do not change, such as a scalar weight
    fused into the body: loaded once per vector and broadcast), becomes an
    scf.parallel over the loops with the innermost one divided by W: per
    iteration one vector.load of W elements per operand, the body on
    vector<W> values, one vector.store per output. The loop is then
    collapsed, tiled and mapped as above. One element per thread keeps one
    load in flight per thread; W loads per thread go out together. Each
    vector access carries the alignment (up to 16 bytes) its memref proves:
    the host program's buffers are 256-byte aligned; the type's offset and
    outer strides (a dynamic stride of an identity layout: the static sizes
    inside it), or a memref.subview's offsets times its source's strides,
    and the vector's bytes must all be multiples of it. NVPTX then emits one
    16-byte load per 8 bf16 elements; without a proof, W element-sized
    loads. Element types narrower than a byte (i1) are not
    vectorized: LLVM would pack a vector of i1 into bits, while h20 stores
    one byte per i1 element.

    Choose-then-apply: an op carrying `h20.launch = {block, vector,
    row_reduction}` (h20-choose-launch-shapes, the GPU pipeline's choice)
    is lowered with those values; the options below apply to ops without
    it (lit tests of this pass alone).
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::gpu::GPUDialect",
                           "mlir::affine::AffineDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect"];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256", "Threads per block">,
    Option<"rowReductions", "row-reductions", "bool", "true",
           "One block per row for reductions over the innermost loop dim">,
    Option<"vectorWidth", "vector-width", "int64_t", "8",
           "Elements per thread of vectorizable elementwise ops (1: one per thread)">
  ];
}

def ChooseLaunchShapes : Pass<"h20-choose-launch-shapes", "mlir::func::FuncOp"> {
  let summary = "Choose each generated kernel's block size and vector width, in the IR";
  let description = [{
    GPU target, on memrefs after bufferization: the choice half of
    h20-linalg-to-gpu-loops. Every linalg op that pass will turn into a
    generated kernel (buffer semantics, not a library call, not inside a
    loop) gets `h20.launch = {block = B : i64, vector = W : i64,
    row_reduction = R}`: B threads per block (and at most B threads per
    row of a row reduction), W elements per thread of a vectorizable
    elementwise op (1: one per thread), R whether a reduction over the
    innermost dim may run as one block per row. h20-linalg-to-gpu-loops
    applies what the op carries (its options are the fallback for IR
    without the attribute) and still checks that the op has the form each
    strategy needs; a shape computation it unrolls on the host ignores it.

    The values per target: B = 256 (8 warps: enough to hide HBM latency
    on every sm_90 part, and a row of 4096-8192 bf16 elements is 16-32
    elements per thread), W = 8 (one 16-byte load per thread of a bf16
    row: the widest global load; f32 rows take two). Measured on an H200
    by the issue-7 runs; `block-size` / `vector-width` override them for
    experiments, and the choice is visible at `h20-opt --emit=buffers`.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"h200\"",
           "GPU the kernels are chosen for (h20, h100, h200, h800)">,
    Option<"blockSize", "block-size", "int64_t", "0", "Threads per block (0: the target's)">,
    Option<"vectorWidth", "vector-width", "int64_t", "0",
           "Elements per thread of vectorizable elementwise ops (0: the target's)">
  ];
}

def TransposesIntoGemms : Pass<"h20-transposes-into-gemms", "mlir::func::FuncOp"> {
  let summary = "Read and write a batched GEMM's transposed operands through its indexing maps";
  let description = [{
    GPU target, after h20-lower-to-linalg: for an `h20_gemm` generic with a
    batch loop (loops batch..., m, n, k), an input that is a
    linalg.transpose used only there is read from the transpose's input
    (its map composed with the permutation), and a result used only by a
    linalg.transpose is written in that transpose's layout when its init
    is a linalg.fill (re-created on the transpose's tensor.empty, which
    must be movable before the GEMM). Applied only where the operand stays contiguous
    along one of its matrix's loops (m or k for A, k or n for B, m or n for
    C), so that cuBLASLt reads it with a leading dimension and a batch
    stride (the host evaluator takes every extent from the maps). No copy
    is left: DeepSeek-V4.1's grouped output projection wo_a read its
    [C, 8, 4096] input as [8, C, 4096] and wrote [8, C, 1024] for a
    [C, 8, 1024] consumer, two transposes per layer.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect"];
}

def FuseElementwise : Pass<"h20-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse chains of elementwise linalg ops on tensors, transposes included";
  let description = [{
    GPU target, before bufferization: an elementwise producer (every loop
    parallel) with one use fuses into its consumer generic (upstream
    linalg elementwise-fusion patterns), so that a chain of them is one
    kernel and one pass over memory. A library-call generic (`h20_gemm`,
    `h20_attention`, `h20_indexer`) neither fuses into its consumer nor
    absorbs its producers.

    Transposes (linalg.transpose, e.g. attention's [B, S, H, D] ->
    [B, H, S, D] before RoPE): a `tensor.extract` of a transpose's result
    reads the transpose's input at the permuted indices (result dim d is
    input dim permutation[d]); a transpose whose only remaining use is a
    non-library generic's input is generalized, and fuses into it as any
    elementwise producer does. On seed-dense this removes the Q and K
    head transposes (16 KiB moved per token and layer each in bf16).

    Unit reshapes: a generic input that is a tensor with unit dims
    inserted (tensor.reshape by a tensor.from_elements shape whose other
    sizes are the tensor's own, or tensor.expand_shape), read at index 0
    along each inserted dim, is read from the tensor itself with those map
    results dropped, so the reshape does not keep its producer apart.
    The pass runs twice: again after h20-unroll-small-reductions, whose
    unrolled reductions are elementwise by then (V4.1's Sinkhorn steps:
    a row sum and the division by it become one kernel).
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect"];
}

def WidenElementwise : Pass<"h20-widen-elementwise", "mlir::func::FuncOp"> {
  let summary = "Compute the bodies of 16-bit elementwise generics in f32, rounding once";
  let description = [{
    GPU target, after h20-fuse-elementwise: in every linalg.generic whose
    loops are all parallel and that is not a library call, each arith /
    math op on bf16 or f16 values computes in f32 instead (operands
    extended once, results kept in f32 for the ops that read them), so
    the body rounds to 16 bits only where a value leaves it (the yield)
    or where the graph itself rounds (an explicit arith.truncf, kept).
    arith.extf of a value held in f32 reads that value. Reductions keep
    their 16-bit accumulators (the row-reduction kernels match their
    bodies as they are).

    Why: a fused SiLU(g) * u in bf16 rounded after each of its six ops;
    PyTorch's kernels compute such chains in f32 and round per kernel
    (XLA does the same). Measured on a Llama-3-8B-shaped bf16 export at
    32K tokens on an H200 (BENCHMARKS.md, MODELS.md).

    The GPU pipeline runs it twice: again after h20-unroll-small-reductions
    and the second h20-fuse-elementwise, since a short reduction (V4.1's
    mHC mixes over 4 streams, the Sinkhorn sums) is elementwise only once
    unrolled; its sums then accumulate in f32, as a GEMM's do.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def ConcatInPlace : Pass<"h20-concat-in-place", "mlir::func::FuncOp"> {
  let summary = "Insert a concat's other pieces into the tensor its own slices come from";
  let description = [{
    GPU target, linalg stage (after h20-lower-to-linalg and the
    canonicalizer): a chain of tensor.insert_slice ops (unit strides) into
    a tensor.empty that tiles it along one static axis, where some pieces
    are tensor.extract_slice ops of one tensor X of the same type and
    provably the same sizes (read off X's producer: tensor.empty,
    tensor.reshape by tensor.from_elements, tensor.expand_shape, a
    destination-style op's init), taken at the very offsets and sizes they
    are inserted at, becomes a chain of inserts of the other pieces into X.
    Same values; the pieces of X are not copied (one-shot bufferization
    updates X in place where it is dead afterwards). Why: DeepSeek-V4.1's
    RoPE on 64 of 512 channels (split, rotate, concat) copied the other
    448 channels of the query and of the attention output, the largest
    generated kernel of a Flash rank.
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

def UnrollSmallReductions : Pass<"h20-unroll-small-reductions", "mlir::func::FuncOp"> {
  let summary = "Rewrite a generic's short static reduction as an all-parallel generic";
  let description = [{
    GPU target, after h20-widen-elementwise: a linalg.generic on tensors
    (not a library call) with exactly one reduction loop, of static extent
    R in [2, 8], that inputs read only as a plain index (never inside an
    expression such as i + j), no linalg.index in its body and outputs
    that do not read that loop, becomes an all-parallel generic. Each
    input whose map reads the reduction dim is passed R times (the dim
    replaced by j = 0 .. R-1);
    the body applies the old body R times in order, each taking the
    previous one's yields as its outputs. Same operations, order and
    rounding as the reduction loop; the elementwise kernel path then
    vectorizes it (h20-linalg-to-gpu-loops). An output initialised by a
    linalg.fill used by nothing else starts from the fill's scalar in the
    body (its init becomes the fill's destination; the fill goes), so the
    generic can fuse into its consumer (h20-fuse-elementwise runs again
    after this pass). Why: DeepSeek-V4.1's mHC mixes (sums over 4 residual
    streams) ran one scalar element per thread at about a fifth of HBM
    bandwidth, 16% of a Flash rank's steps; its Sinkhorn normalisations
    (20 iterations of row and column sums over [4, 4] per token) were five
    kernel launches per step: 82% of the rank's 15154 launches per chunk.
  }];
}

def ChooseAttentionKernels : Pass<"h20-choose-attention-kernels", "mlir::func::FuncOp"> {
  let summary = "Choose the GPU kernel of every attention, indexer and MoE op; record it in the IR";
  let description = [{
    GPU target, on attn-level IR before h20-lower-to-linalg: the one place
    the attention kernel is chosen (chooseAttentionVariant,
    lib/Target/GPU/AttentionKernel.cpp), choose-then-apply. An op the
    kernels can run gets `h20.kernel = {kind, block_m, block_n, threads,
    stages, schedule}` (kind "wgmma", "mma" or "fma"; the mma/fma tiles
    follow the op's `h20.tiles` hint when h20-select-tiles left one); the
    lowering carries it to the library call and the host program builds
    that variant and no other. An op they cannot run gets `h20.decompose
    = "REASON"` (the first rule below it breaks, in words) and is lowered
    as generic kernels: no mask or sink operand it could
    take, head dims the kernels lack, other element types, a window
    without causal masking, top-left causal alignment with S_q != S_kv
    (the kernels are bottom-right), or more than 65535 heads or batches.

    `kernel=mma` keeps the kind-0 kernels (mma.sync, FMA for f32) where
    a wgmma kernel would run, dense and sparse attention alike, for
    comparisons (h20-opt --attention-kernel=mma).

    DeepSeek-V4.1's kernels are chosen here too, for `target`, and the
    host program builds what the IR names (IndexerKernel.h,
    SparseAttentionKernel.h, MoeKernel.h):
    - the lightning indexer (attn.indexer_topk, attn.indexer_candidates):
      `h20.kernel = {ctas = C, kind, ...}`. `ctas` is the FMA kernel's
      persistent grid (each CTA loops over query rows; one scratch row per
      CTA), two per SM of `target` (the occupancy its 264-CTA grid has on
      an H200's 132 SMs): 156 on an H20 (78 SMs), where 264 would leave a
      partial third wave. kind "mma" (16-bit query and keys, static K) adds
      the tensor-core kernel's padded_heads, padded_dim, cap (candidate
      buffer entries per query row) and ctas_per_sm, sized to the target's
      shared memory per CTA and per SM (chooseIndexerMma), and for top-k
      within candidate blocks the entries its shared memory was sized for
      (the keys' static count, or the last chunk's: h20.chunked's capacity
      / ratio); kind "fma" otherwise (f32, or entries unknown).
    - sparse attention: `h20.kernel = {kind, padded_dim, heads_per_cta,
      threads}`: kind "wgmma" (384 threads; sm_90a) on Hopper targets where
      the padded head dim is 128, 256 or 512 and its shared memory holds
      the window + picks, else "mma" (256 threads); window + picks that fit
      neither are an error naming the op.
    - routed experts (onnx.h20.RoutedExperts[Mxfp4]): `h20.kernel =
      {tile_tokens, expert_gemm}`, the token tile whose scratch fits 8 GiB
      (moeTileTokens) and the expert GEMM: "mxfp4_fp8" (sm_90a, only
      with expert-gemm=fp8: FP8 tensor cores), "mxfp4_wgmma" (sm_90a; bf16
      tokens on a Hopper target unless kernel=mma) or "mxfp4" (mma.sync),
      all dequantising in the GEMM's load path, or "cublaslt" (grouped
      GEMMs on float weights).
    Hopper GPUs share shared memory and registers per SM, so today only the
    FMA indexer's grid differs between them.
  }];
  let options = [
    Option<"kernel", "kernel", "std::string", "\"auto\"",
           "auto (wgmma where it has a variant) or mma">,
    Option<"target", "target", "std::string", "\"h200\"",
           "the GPU the grids are sized for (TargetDescription: h20, h100, h200, h800)">,
    Option<"expertGemm", "expert-gemm", "std::string", "\"bf16\"",
           "MXFP4 routed experts: bf16 (dequantised to bf16 in the GEMM's load path) or "
           "fp8 (token rows quantised per 1 x 128 block in the gather and SwiGLU kernels, "
           "weights made e4m3 per 128-input "
           "block: mxfp4_fp8 where the token type is bf16, both GEMMs' K are multiples "
           "of 128 and the target is Hopper)">,
  ];
}

def CachesToArguments : Pass<"h20-caches-to-arguments", "mlir::func::FuncOp"> {
  let summary = "Turn each KV cache into a function argument the runtime keeps across chunks";
  let description = [{
    GPU target, on linalg-on-tensors before bufferization: every
    `tensor.empty` that h20-lower-to-linalg marked `h20.kv_cache` becomes a
    new argument of the function, appended after the existing ones in walk
    order and marked `bufferization.writable` and `h20.kv_cache` (what the
    host program binds as a state buffer), so one-shot bufferization
    writes each chunk's K/V rows into it in place; the runtime allocates it
    once (a state buffer) and zeroes it per run.
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect"];
}

def DropGemmInitFill : Pass<"h20-drop-gemm-init-fill", "mlir::func::FuncOp"> {
  let summary = "Drop the zero fill of an h20_gemm's init: cuBLASLt writes C with beta = 0";
  let description = [{
    GPU target, on linalg-on-tensors after h20-lower-to-linalg: a
    `linalg.generic` with library call `h20_gemm` runs as one cuBLASLt call
    with beta = 0, which overwrites its output; the `linalg.fill` that
    initialises that output (the reference lowering's zero accumulator) is
    dead work, one pass over the output's bytes per GEMM. Each init fed by
    a fill reads the fill's own init instead, and fills left without uses
    are erased. Other generics keep their fills (a reduction accumulates
    into them).
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def OutlineKernels : Pass<"h20-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Outline every gpu.launch into one gpu.module, equal kernels once";
  let description = [{
    GPU target, in place of upstream gpu-kernel-outlining (which makes one
    gpu.module per kernel): the body of every gpu.launch in a func.func
    becomes a gpu.func (upstream's outlineKernelFunc: the values it uses
    from above become arguments) in one gpu.module named `module-name`,
    and the launch a gpu.launch_func of it. Kernels are named as upstream
    names its modules (FUNC_kernel, FUNC_kernel_0, ...). Kernels that
    print the same apart from their name are kept once (the first), and
    their launches all point at it: the layers of one kind generate the
    same kernels, so the module grows with the number of distinct layer
    kinds, not with depth. Module-level symbols a kernel uses are copied
    in. The artifact then holds one PTX module for the generated kernels,
    loaded once by the runtime. Unlike upstream, only launches inside
    func.func ops are outlined, and a launch that names its own module or
    function (`module(@m) function(@f)`) is refused, as is a module that
    already has a symbol named `module-name`.
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string", "\"h20_kernels\"",
           "the gpu.module's name">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::cf::ControlFlowDialect"];
}

def OutputsToDestinations : Pass<"h20-outputs-to-destinations", "mlir::func::FuncOp"> {
  let summary = "Results become caller-allocated memref arguments (destination-passing ABI)";
  let description = [{
    Both targets, on linalg-on-tensors right before one-shot bufferization:
    each result of the function, a ranked tensor, becomes a trailing memref
    argument of the same shape and element type (identity layout), written
    with `bufferization.materialize_in_destination` (restrict, writable);
    the function then returns nothing. The runtime allocates these buffers
    (the artifact's outputs); bufferization computes each result in place
    in its destination where it can, else copies it there once.
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect",
                           "mlir::memref::MemRefDialect"];
}

def CopiesToLinalg : Pass<"h20-copies-to-linalg", "mlir::ModuleOp"> {
  let summary = "Rewrite memref.copy into linalg.copy";
  let description = [{
    Both targets, after bufferization: a `memref.copy` between strided
    views would lower to a call into MLIR's runner-utils library; as a
    `linalg.copy` it lowers like every other structured op (host loops on
    the CPU target, a generated kernel on the GPU target), so artifacts
    never depend on MLIR's runtime libraries.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def SinkLaunchConstants : Pass<"h20-sink-launch-constants", "mlir::func::FuncOp"> {
  let summary = "Clone the constants a gpu.launch body uses into the body";
  let description = [{
    GPU target, after convert-parallel-loops-to-gpu and before kernel
    outlining: every `arith.constant` a `gpu.launch` body uses from above
    is cloned into the body (MLIR's sinkOperationsIntoLaunchOp), so the
    outlined kernel has it as an immediate instead of a launch argument. A
    float argument would cost a parameter slot per launch, and values such
    as -inf have no JSON form in the step program.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def RenameEntry : Pass<"h20-rename-entry", "mlir::ModuleOp"> {
  let summary = "Name the graph function for the target and drop its ONNX names";
  let description = [{
    Both targets, once the artifact's manifest has taken the interface's
    names: the module's one function is renamed `name` and its argument and
    result attributes (`onnx.name`, ...) are dropped, so later passes see a
    plain entry point. Fails unless the module has exactly one function.
  }];
  let options = [
    Option<"entryName", "name", "std::string", "\"h20_main\"", "the entry function's name">,
  ];
}

def OutlineLoopNests : Pass<"h20-outline-loop-nests", "mlir::ModuleOp"> {
  let summary = "Move each top-level loop nest of the entry function into its own function";
  let description = [{
    CPU target, after convert-linalg-to-loops: every `scf.for` /
    `scf.parallel` directly in the body of a public function becomes a call
    of a new private function (`<name>_loop<N>`, internal linkage,
    `noinline`) that holds the loop nest; the values the nest uses from
    above become its arguments, except constants, which are cloned into it.
    A whole model lowered to loops is otherwise one LLVM function of
    hundreds of thousands of instructions, on which LLVM's superlinear
    passes (SLP vectorizer, loop rotation, instruction selection) take
    minutes; per-nest functions keep compile time linear in the model's
    size. A nest equal to one outlined before (the same operations on
    arguments of the same types, as a model's layers and experts repeat
    them) calls that function instead of a copy: DeepSeek-V4.1 tiny has
    145 distinct nests among 2575. The loops themselves are unchanged, so
    the results are the same bits. Nests with fewer than `min-ops`
    operations stay where they are.
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"1",
           "Outline only nests with at least this many operations">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect", "mlir::LLVM::LLVMDialect"];
}

#endif // H20_CONVERSION_PASSES
