//===- GpuProgram.h - the GPU launch plan of an artifact --------*- C++ -*-===//
//
// Reference documentation of the "gpu" program format. Plain C++: no CUDA and
// no MLIR header; everything here runs (and is tested) without a GPU.
//
// An artifact whose manifest has "target": "h200" (or "h100", "h800", "h20")
// carries a "gpu" object: the program h20-run executes on the GPU through
// GpuExecutor. Its fields:
//
//   "arch": "sm_90"        compute capability the code was built for ("sm_XY"
//                          or "sm_XYa"). The GPU must have at least X.Y; a
//                          cubin is used only on a GPU of the same major
//                          version, else the PTX is JIT-compiled by the driver.
//   "symbols": ["p0", "n"] the runtime integers linear expressions may name
//                          ("p0", "n", "q" and "rank" exist): p0 = position
//                          of the chunk's first token, n = real tokens in it,
//                          q = p0 / C, the chunk's index (rows of groups of
//                          tokens, e.g. p0 / 4 = q * C / 4, are linear in q);
//                          "rank" = this rank's index under tensor / expert
//                          parallelism (0 otherwise), e.g. the first expert
//                          of a rank's slice of the routed experts.
//   "derived": [{"of": L, "div": k}, ...]  optional, at most 8: symbols
//                          d0, d1, ... = floor(L / k), L over p0, n and q
//                          only (coefficients within +-2^20), 1 <= k <=
//                          2^40, set
//                          per chunk before its steps run. A chunk size that
//                          splits a compressor's groups of k tokens places
//                          and sizes them by p0 / k, (p0 + C) / k and
//                          p0 mod k = p0 - k d, none linear in q.
//   "chunking": null | {"chunk": C, "input": i, "dim": d, "pad_value": v}
//                          input i (token ids [1, S]) is cut along dim d into
//                          chunks of C tokens: chunk c has p0 = c*C and
//                          n = min(C, S - p0); its tokens are copied into input
//                          i's buffer, the rest of the buffer is filled with v,
//                          and all steps run once per chunk. Without chunking
//                          the steps run once with p0 = 0 and n = S for a
//                          token-id run (h20-run --ids), n = 0 otherwise.
//   "outputs": [{"mode": "rows", "dim": d} | {"mode": "last"} | {"mode": "whole"}]
//                          one per manifest output. "rows": the output buffer
//                          holds the chunk's rows (manifest shape with dim d =
//                          C); rows [0, n) go to host rows [p0, p0 + n) after
//                          every chunk. "last"/"whole": the buffer is copied
//                          to the host after the final chunk ("last": e.g. the
//                          logits of the last real token, [1, 1, V]).
//   "modules": [{"name": s, "ptx_blob": s | null, "cubin_blob": s | null}]
//                          code, as names of manifest "blobs" (at least one of
//                          the two per module).
//   "buffers": [...]       device buffers, addressed by index in this list:
//       {"kind": "input",  "index": i, "bytes": B}   manifest input i (chunk-sized
//                                                    when chunked, else whole)
//       {"kind": "output", "index": i, "bytes": B}   manifest output i
//       {"kind": "weight", "index": w, "bytes": B, "dtype": t}
//                          manifest weight w, converted on upload when t (the
//                          device dtype) differs from the file's: float32 ->
//                          bfloat16/float16 (round to nearest even), and
//                          bfloat16/float16 -> float32. B must be the weight's
//                          element count times t's size. "placement":
//                          "host" (optional, as the manifest weight's): the
//                          buffer is page-locked host memory mapped into the
//                          GPU's address space, not device memory; kernels
//                          read it over PCIe (h20-place-tables' large
//                          gather-only tables). No other kind has one.
//       {"kind": "state",  "bytes": B}               zeroed once per run before
//                                                    chunk 0; persists (KV cache)
//       {"kind": "temp",   "bytes": B, "offset": O}  bytes [O, O + B) of the one
//                          arena (arena_bytes); temps may alias. O is a
//                          multiple of 256.
//       {"kind": "const",  "blob": s, "blob_offset": X, "bytes": B}
//                          bytes [X, X + B) of blob s, uploaded once at load
//     Any buffer may carry "dtype" (required for weights); then every step that
//     reads it with a dtype (gemm, a memref or struct view with "dtype") must use
//     that dtype. Every buffer's base address is 256-byte aligned.
//   "arena_bytes": A       size of the temp arena
//   "tf32": false          optional; true lets float32 GEMMs use TF32
//   "steps": [...]         run in order, on one stream, once per chunk.
//
// A linear expression L is a JSON integer or an object {"c": k, "p0": a,
// "n": b, "q": d, "rank": r, "d0": e0, ...} (missing keys are 0) with the
// value k + a*p0 + b*n + d*q + r*rank + e0*d0 + ...; int64, overflow is an
// error. Offsets, sizes and strides count elements unless named _bytes.
//
// Steps ("op"):
//   "launch": {"module": m, "kernel": name, "grid": [L, L, L], "block": [L, L, L],
//              "smem": bytes, "args": [ARG...], "grid_div": [k, k, k] (optional),
//              "role": "attention" (optional)}
//       ARG: {"i64": L} | {"i32": L} | {"f32": number} | {"f64": number} |
//            {"f16": number} | {"bf16": number} | {"memref": VIEW} |
//            {"struct": {"bytes": B, "align": A, "fields": [FIELD...]}}
//       VIEW: {"buffer": b, "offset": L, "sizes": [L...], "strides": [L...],
//              "dtype": t (optional)}  elements of the buffer, outermost dim
//              first; without a dtype, the buffer's (else bytes).
//       Scalars are passed with their own size (f16/bf16: 2 bytes, the
//       number rounded to nearest even).
//       A memref becomes 3 + 2*rank kernel parameters, as MLIR's expanded
//       memref descriptor: (void *allocated, void *aligned, int64 offset,
//       int64 sizes[rank], int64 strides[rank]); both pointers are the
//       buffer's base address.
//       A struct is one kernel parameter of B bytes (1 <= B <= 4096, A a
//       power of two <= 64), zero except for its fields, each at byte
//       offset "at", inside the struct, not overlapping another, aligned to
//       its size (tensor maps to 64):
//         {"at": o, "i64": L} | {"at": o, "i32": L} | {"at": o, "f32": x}
//         {"at": o, "pointer": VIEW, "written": bool}
//             8 bytes: the device address of the view's element "offset";
//             the sizes and strides bound what the kernel may touch.
//         {"at": o, "tensor_map": VIEW + {"box": [k...], "swizzle": 0|32|64|128},
//          "written": bool}
//             128 bytes: a TMA tensor map (CUtensorMap) of the view, made at
//             launch time by cuTensorMapEncodeTiled: rank 1..5, the
//             innermost stride 1, boxes of "box" elements (outermost first,
//             each 1..256), the given swizzle in bytes, elements past a
//             dim's end read as zeros.
//         {"at": o, "tensor_maps_valid": true}
//             i32: 1 when every tensor map of the struct could be made, else
//             0 and all of them zero (a base not 16-byte aligned, a stride
//             not a multiple of 16 bytes, a dim of size 0 or over
//             2^31 - 512, a box wider than the swizzle span, a driver
//             without tensor maps, H20_ATTENTION_TMA=0); the kernel then
//             loads without them. A struct with tensor maps has exactly one
//             such field, one without none.
//         "written" (default true) says whether the kernel may write the
//         view; context parallelism counts written views of state buffers.
//         "kv": true (with "written": false) marks the views of an
//         attention's K and V: context parallelism requires them to be in
//         a state buffer (the KV cache).
//       grid_div (default [1, 1, 1], each >= 1): grid dim d is
//       ceil(grid[d] / grid_div[d]), e.g. one block per 128 query rows. A
//       grid dimension of 0 skips the launch.
//       role "attention": the step is a layer's attention (see "layers"),
//       the dense attention kernel (AttentionParams.h): one struct
//       argument of H20AttnParams' 640 bytes with pointer fields q, k, v,
//       o and i64 fields batch, heads, kv_heads, sq, skv and the 16
//       strides at its offsets, grid (sq, heads, batch) with grid_div
//       (block_m, 1, 1). For every chunk the runtime checks that these
//       sizes and strides are the views' (so the views' bounds cover what
//       the kernel touches), heads is a multiple of kv_heads (<= 65535),
//       Q/K and V/O head dims agree, and causal (the i32 at "causal") has
//       skv >= sq.
//   "gemm": {"dtype_a", "dtype_b", "dtype_c": "float32"|"float16"|"bfloat16",
//            "batch": L, "m": L, "n": L, "k": L, "alpha": 1.0, "beta": 0.0,
//            "a": MAT, "b": MAT, "c": MAT}
//       MAT: {"buffer": b, "offset": L, "batch_stride": L, "row_stride": L,
//             "col_stride": L}
//       C[t,i,j] = alpha * sum_k A[t,i,k] * B[t,k,j] + beta * C[t,i,j] with
//       X[t,r,c] at element offset + t*batch_stride + r*row_stride +
//       c*col_stride. Each matrix has col_stride 1 (row-major) or row_stride 1
//       (column-major); batch_stride 0 broadcasts A or B. dtype_a == dtype_b;
//       dtype_c is the same or float32. Accumulation in float32 (cuBLASLt).
//       Optional "groups": {"count": G, "offsets": {"buffer": b, "offset": L}}
//       makes it a grouped GEMM (a mixture-of-experts layer's experts): batch
//       must be 1, A and C hold m rows, B holds G matrices (B[g] at
//       offset + g*batch_stride), and the G + 1 int32 elements at "offsets"
//       (device memory, written by an earlier step) split the rows: group g
//       multiplies rows [off[g], off[g+1]) of A by B[g] into the same rows of
//       C. The runtime reads the offsets back before the GEMMs (a stream
//       synchronisation) and fails the run unless 0 <= off[0] <= ... <=
//       off[G] <= m; rows of C outside [off[0], off[G]) are not written.
//       Block-scaled FP8 (DeepSeek-V3's recipe): dtype_a = dtype_b =
//       "float8_e4m3fn" (dtype_c float32, float16 or bfloat16), batch 1,
//       alpha 1, beta 0, no groups, A row-major (col_stride 1), B
//       column-major (row_stride 1: a weight W [n, k] stored row-major,
//       B = W^T), C row-major, k and n multiples of 16, and both
//       "scale_a": {"mode": "vec128", "buffer": b, "offset": L} and
//       "scale_b": {"mode": "blk128x128", "buffer": b, "offset": L}, float32
//       buffers, offsets in elements:
//         A[i, k'] is scaled by sa[(k' / 128) * m + i]  (ceil(k / 128) x m,
//           i fastest: one scale per 1 x 128 block of a row of A),
//         B[k', j] by sb[(j / 128) * kp + k' / 128]  (ceil(n / 128) x kp,
//           kp = ceil(k / 128) rounded up to a multiple of 4),
//       C = sum over k' of (A * sa)(B * sb), accumulated in float32: the
//       layouts cuBLASLt's CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F and
//       BLK128x128_32F read (cublasLt.h, CUDA 13; test/tools/gemm-fp8-check
//       measures them on the GPU).
//   "memset": {"buffer": b, "offset_bytes": L, "bytes": L, "value": 0..255}
//   "copy":   {"src": b, "src_offset_bytes": L, "dst": b, "dst_offset_bytes": L,
//              "bytes": L}           device to device; ranges may not overlap
//   "all_reduce": {"dtype": "f32"|"f16"|"bf16", "src": b, "src_offset_bytes": L,
//              "dst": b, "dst_offset_bytes": L, "bytes": L}
//       tensor parallelism (TensorParallel.h): dst bytes [dst_off, dst_off +
//       bytes) = the element-wise sum, over the T tensor-parallel ranks
//       (manifest parallel.tensor_parallel), of each rank's src bytes
//       [src_off, src_off + bytes), in dtype. bytes and both offsets are
//       multiples of the dtype's size; src and dst may be the same range
//       (in place) but may not overlap otherwise. With T = 1 a device copy
//       (none when src and dst are the same range). The dtype may also be
//       spelled float32 / float16 / bfloat16; a buffer with a dtype must
//       have this one.
//
// Layers (optional): "layers": [{"layer": l, "first_step": b,
// "attention_step": a}, ...], in step order. The compiler declares them for
// a chunked program whose every attention step (a launch with role
// "attention") reads K and V from the KV cache (l: that cache layer): layer
// i's steps are [b_i, a_i], b_0 = 0 and b_{i+1} = a_i + 1; the steps after
// the last attention are the tail. Every attention step is some layer's
// a_i. Context parallelism (splitLayerSegments) runs the program by these
// layers.
//
// Every view a step declares (memref arguments, struct pointers and tensor
// maps, GEMM operands, memset/copy ranges) is checked against its buffer's bytes before it runs
// (for the actual p0 and n of each chunk); a memref whose buffer has no
// dtype is checked in elements of one byte. What a compiled kernel does with
// its arguments is not verified: a generated kernel's loop bounds come from
// its integer arguments and the shapes it was compiled for, and the
// attention kernel's head dims from its variant. The artifact's CRC catches
// corruption, not a deliberately edited program; run artifacts you trust.
//
// Virtual context parallelism (ContextParallel.h; h20-run --gpus N
// --virtual-ranks) runs the steps layer-major over several chunks at once.
// It relies on the shape h20-opt gives an LLM program: its declared
// layers, checked (splitLayerSegments): chunked; every attention step reads K and V from a
// state buffer (the fused KV cache); the steps before a layer's attention
// write that layer's K/V rows for the chunk as views on the state buffer
// (launch memrefs at an offset linear in p0, e.g. [1, heads, C, D] with
// strides [., S*D, D, 1]): any view a step declares on a state buffer
// counts as rows it writes (struct views unless "written": false), and those rows are what the
// simulated ring copies between ranks; outputs are written only after the
// last attention step (the tail: final norm, LM head), which does not touch
// the state buffers.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_GPUPROGRAM_H
#define H20_RUNTIME_GPUPROGRAM_H

#include "h20/Runtime/Format/Manifest.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace h20::runtime {

/// The most derived symbols (GpuProgram::derived) one program may declare.
inline constexpr int kMaxDerived = 8;
/// Bounds on a derived symbol's `of` coefficients and constant (|x|) and
/// on its divisor: no prompt the runtime accepts (< 2^40 tokens)
/// overflows them.
inline constexpr int64_t kMaxDerivedCoefficient = int64_t(1) << 20;
inline constexpr int64_t kMaxDerivedDivisor = int64_t(1) << 40;

/// Values of the program's symbols for one chunk.
struct SymbolValues {
  int64_t p0 = 0; ///< position of the chunk's first token
  int64_t n = 0;  ///< real tokens in the chunk
  /// The chunk's index, p0 / C (chunks start at multiples of C): what
  /// rows of groups of tokens are counted in, e.g. p0 / 4 = q * (C / 4)
  /// for compressed entries of 4 tokens, which no integer multiple of p0
  /// expresses.
  int64_t q = 0;
  /// This rank's index under tensor / expert parallelism (0 on one GPU);
  /// the same for every chunk of a run.
  int64_t rank = 0;
  /// The derived symbols' values, floor(of / div) of GpuProgram::derived
  /// (deriveSymbols fills them); 0 past the program's count.
  std::array<int64_t, kMaxDerived> d{};
};

/// c + p0*P0 + n*N + q*Q + rank*R + sum_k d_k*D_k.
struct LinearExpr {
  int64_t c = 0, p0 = 0, n = 0, q = 0, r = 0;
  /// Coefficients of the derived symbols d0 .. d7 ("d0".. in JSON).
  std::array<int64_t, kMaxDerived> d{};

  /// The constant `v`.
  static LinearExpr constant(int64_t v) { return {v, 0, 0, 0, 0}; }
  /// True when no derived symbol appears.
  bool noDerived() const {
    for (int64_t x : d)
      if (x != 0)
        return false;
    return true;
  }
  /// True when the value does not depend on any symbol.
  bool isConstant() const { return p0 == 0 && n == 0 && q == 0 && r == 0 && noDerived(); }
  /// Evaluates for `s` into `out`; false (out unchanged) on int64 overflow.
  bool evaluate(const SymbolValues &s, int64_t &out) const;
};

/// A symbol the compiler derives from the chunk's position:
/// d = floor(of / div), `of` over p0, n and q only (no rank, no derived
/// symbol), div >= 1. A chunk size that is not a multiple of a
/// compressor's group k makes p0 / k, (p0 + n) / k and p0 mod k
/// = p0 - k * (p0 / k) non-linear in the chunk index; the group rows
/// carried between chunks are sized and placed by them
/// (h20-chunked-prefill's carry-partial-groups).
struct DerivedSymbol {
  LinearExpr of;
  int64_t div = 1;
};

enum class BufferKind { Input, Output, Weight, State, Temp, Const };

/// One device buffer of the program.
struct GpuBuffer {
  BufferKind kind = BufferKind::Temp;
  int64_t index = -1;     ///< input/output/weight: index in the manifest's list
  int64_t bytes = 0;      ///< size in bytes (>= 0)
  std::string dtype;      ///< element dtype; empty when not given
  int64_t offset = 0;     ///< temp: byte offset in the arena
  std::string blob;       ///< const: blob name
  int64_t blobOffset = 0; ///< const: byte offset in the blob
  /// weight: kept in page-locked host memory mapped into the GPU's address
  /// space, read by kernels over PCIe (JSON "placement": "host";
  /// h20-place-tables chooses it for large gather-only tables).
  bool host = false;
};

struct GpuChunking {
  int64_t chunk = 0;    ///< C, tokens per chunk (> 0)
  int input = 0;        ///< the chunked input's index
  int dim = 1;          ///< the dim of that input that is cut
  int64_t padValue = 0; ///< filler for positions past the prompt's end
};

enum class OutputMode { Rows, Last, Whole };

struct GpuOutput {
  OutputMode mode = OutputMode::Whole;
  int dim = 0; ///< Rows: the dim holding the chunk's rows
};

/// One layer of an LLM program, as the compiler declares it ("layers"):
/// steps [firstStep, attentionStep] compute the layer up to and including
/// its attention, which reads K and V of KV-cache layer `layer`.
struct GpuLayer {
  int64_t layer = 0;         ///< the KV-cache layer the attention reads
  int64_t firstStep = 0;     ///< the step after the previous layer's attention (0 first)
  int64_t attentionStep = 0; ///< a launch step with role "attention"
};

struct GpuModule {
  std::string name;
  std::string ptxBlob, cubinBlob; ///< blob names; empty when absent
};

/// One field of a "struct" launch argument (see "struct" above).
struct StructField {
  enum Kind { I64, I32, F32, Pointer, TensorMap, TensorMapsValid } kind = I64;
  int64_t at = 0;    ///< byte offset in the struct
  LinearExpr value;  ///< I64, I32
  float f32 = 0;     ///< F32
  int buffer = -1;   ///< Pointer, TensorMap: the view (as a memref argument's)
  LinearExpr offset;
  std::vector<LinearExpr> sizes, strides;
  std::string dtype;
  bool written = true;      ///< Pointer, TensorMap: the kernel may write the view
  bool kv = false;          ///< Pointer, TensorMap: the view is an attention's K or V
  std::vector<int64_t> box; ///< TensorMap: box extent per dim, outermost first
  int swizzle = 0;          ///< TensorMap: 0, 32, 64 or 128 bytes

  /// Bytes the field occupies in the struct (8, 4 or 128).
  int64_t bytes() const;
  bool isView() const { return kind == Pointer || kind == TensorMap; }
};

/// A kernel argument of a launch step.
struct LaunchArg {
  enum Kind { I64, I32, F32, F64, F16, BF16, MemRef, Struct } kind = I64;
  LinearExpr value; ///< I64, I32
  float f32 = 0;    ///< F32
  double f64 = 0;   ///< F64
  uint16_t half = 0; ///< F16, BF16: the bits
  int buffer = -1;  ///< MemRef: buffer index
  LinearExpr offset;
  std::vector<LinearExpr> sizes, strides; ///< MemRef: same length (the rank)
  std::string dtype;                      ///< MemRef: optional element dtype
  int64_t structBytes = 0, structAlign = 1; ///< Struct: size and alignment
  std::vector<StructField> fields;          ///< Struct: in the order written
};

struct LaunchStep {
  int module = 0;
  std::string kernel;
  std::array<LinearExpr, 3> grid, block;
  std::array<int64_t, 3> gridDiv{1, 1, 1}; ///< grid dim d = ceil(grid[d] / gridDiv[d])
  int64_t smem = 0; ///< dynamic shared memory, bytes
  std::vector<LaunchArg> args;
  std::string role; ///< "" or "attention" (a layer's attention, see "layers")

  bool isAttention() const { return role == "attention"; }
};

/// A matrix operand of a gemm step; strides in elements.
struct GemmOperand {
  int buffer = -1;
  LinearExpr offset, batchStride, rowStride, colStride;
};

/// Scale blocks along k (128 elements each) of a block-scaled FP8 gemm,
/// and kp, that count rounded up to 4: the length of a 128 x 128 scale row
/// ("gemm" above).
inline int64_t fp8KBlocks(int64_t k) { return (k + 127) / 128; }
inline int64_t fp8PaddedKBlocks(int64_t k) { return (fp8KBlocks(k) + 3) / 4 * 4; }

/// Block scales of an FP8 gemm operand ("scale_a" / "scale_b" above).
struct GemmScale {
  std::string mode; ///< "" (none), "vec128" (A) or "blk128x128" (B)
  int buffer = -1;
  LinearExpr offset; ///< float32 elements
};

struct GemmStep {
  std::string dtypeA, dtypeB, dtypeC;
  LinearExpr batch, m, n, k;
  double alpha = 1.0, beta = 0.0;
  GemmOperand a, b, c;
  /// Grouped GEMM (see "groups" above): 0 for a plain one, else G, with the
  /// int32 row offsets [G + 1] at element `groupOffset` of `groupBuffer`.
  int64_t groups = 0;
  int groupBuffer = -1;
  LinearExpr groupOffset;
  /// Block-scaled FP8 (dtype_a = "float8_e4m3fn"): both set; else neither.
  GemmScale scaleA, scaleB;
};

struct MemsetStep {
  int buffer = -1;
  LinearExpr offsetBytes, bytes;
  int value = 0;
};

struct CopyStep {
  int src = -1, dst = -1;
  LinearExpr srcOffsetBytes, dstOffsetBytes, bytes;
};

/// All-reduce (sum) over the tensor-parallel ranks; see "all_reduce" above.
struct AllReduceStep {
  std::string dtype; ///< "float32", "float16" or "bfloat16"
  int src = -1, dst = -1;
  LinearExpr srcOffsetBytes, dstOffsetBytes, bytes;
};

using GpuStep =
    std::variant<LaunchStep, GemmStep, MemsetStep, CopyStep, AllReduceStep>;

/// The parsed, validated "gpu" object of a manifest.
struct GpuProgram {
  std::string arch; ///< "sm_90"
  int archMajor = 0, archMinor = 0;
  std::vector<std::string> symbols;
  /// Derived symbols d0, d1, ... ("derived"), evaluated per chunk after
  /// p0, n and q (deriveSymbols); at most kMaxDerived.
  std::vector<DerivedSymbol> derived;
  std::optional<GpuChunking> chunking;
  std::vector<GpuOutput> outputs;
  std::vector<GpuModule> modules;
  std::vector<GpuBuffer> buffers;
  int64_t arenaBytes = 0;
  bool tf32 = false;
  std::vector<GpuStep> steps;
  /// The layers the compiler declared ("layers"); empty when it declared
  /// none (a graph that is not a chunked LLM).
  std::vector<GpuLayer> layers;
};

/// Name of a step's op ("launch", "gemm", ..., "all_reduce").
const char *stepOpName(const GpuStep &step);

/// True when `step` is a layer's attention: a launch with role "attention".
bool isAttentionStep(const GpuStep &step);

/// Bytes per element of a view of `buffer` (a memref argument, a struct
/// pointer or tensor map) read as `dtype`: its size, else the buffer's
/// dtype's, else 1 (a buffer without a dtype counts bytes).
int64_t viewElementBytes(const GpuProgram &p, int buffer, const std::string &dtype);

/// Which symbols a step's linear expressions name (a non-zero coefficient
/// anywhere: offsets, sizes, strides, grid, block, scalar arguments).
struct StepSymbols {
  bool p0 = false, n = false; ///< p0: the step depends on the chunk's position (p0 or q)
  bool q = false;             ///< the step uses the chunk index q
  bool rank = false;          ///< the step uses the rank (not per chunk)
  bool any() const { return p0 || n; }
};
/// A derived symbol counts as the base symbols its `of` names.
StepSymbols stepSymbols(const GpuStep &step, const std::vector<DerivedSymbol> &derived);

/// Fills s.d from s.p0, s.n and s.q: d_k = floor(of_k / div_k), rounding
/// toward minus infinity. False on int64 overflow (then s.d is partly
/// filled).
bool deriveSymbols(const std::vector<DerivedSymbol> &derived, SymbolValues &s);

/// Parses and validates manifest["gpu"] from the manifest JSON text, against
/// the already parsed manifest `m` (inputs, outputs, weights, blobs) and the
/// artifact's payload size (blobs must lie inside it). Every structural
/// error (unknown op or dtype, wrong JSON type, buffer index out of range,
/// negative size, temp outside the arena, missing blob, a weight buffer whose
/// bytes do not match the weight, ...) gives false and an `error` naming the
/// step index or buffer index and the field. When the maximum prompt length
/// is known (the chunked input's static dim, else manifest max_positions),
/// also runs checkGpuProgramForLength for it.
bool parseGpuProgram(const std::string &manifestJson, const Manifest &m, uint64_t payloadSize,
                     GpuProgram &program, std::string &error);

/// Writes `program` as the manifest's "gpu" object (JSON text): the inverse
/// of parseGpuProgram, which reads every field back to the same value (the
/// compiler writes its program with this and parses it back before the
/// artifact is written; GpuProgramTest round-trips every step kind).
/// `archMajor`/`archMinor` are not written (they follow from `arch`); a
/// 16-bit launch scalar is written as its `f32` value. Does not validate:
/// parse the result for that.
std::string writeGpuProgram(const GpuProgram &program);

/// The chunks of a run over `length` tokens: (p0, n) for each. Without
/// chunking one chunk {0, length}. length 0 gives one chunk {0, 0}.
std::vector<SymbolValues> chunkSchedule(const GpuProgram &program, int64_t length);

// --- Steps with the symbols substituted --------------------------------------

struct ResolvedMemRef {
  int buffer = -1;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

/// A struct field with its expressions evaluated (value: I64, I32; view:
/// Pointer, TensorMap).
struct ResolvedStructField {
  int64_t value = 0;
  ResolvedMemRef view;
};

struct ResolvedLaunchArg {
  LaunchArg::Kind kind = LaunchArg::I64;
  int64_t value = 0; ///< I64, I32 (I32 checked to fit)
  float f32 = 0;
  double f64 = 0;
  uint16_t half = 0;
  ResolvedMemRef memref;
  std::vector<ResolvedStructField> fields; ///< Struct: one per LaunchArg::fields
};

struct ResolvedLaunch {
  std::array<int64_t, 3> grid{}, block{};
  std::vector<ResolvedLaunchArg> args;
  bool empty = false; ///< a grid dimension is 0: nothing to launch
};

struct ResolvedGemmOperand {
  int buffer = -1;
  int64_t offset = 0, batchStride = 0, rowStride = 0, colStride = 0;
};

struct ResolvedGemm {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  ResolvedGemmOperand a, b, c;
  bool empty = false; ///< batch, m or n is 0
  int64_t groups = 0;      ///< grouped GEMM: G (GemmStep::groups)
  int groupBuffer = -1;    ///< where its int32 row offsets [G + 1] are
  int64_t groupOffset = 0; ///< in elements
  /// Block-scaled FP8: the scale buffers and float32 element offsets
  /// (scaleBufferA < 0: not FP8).
  int scaleBufferA = -1, scaleBufferB = -1;
  int64_t scaleOffsetA = 0, scaleOffsetB = 0;
};

struct ResolvedMemset {
  int buffer = -1;
  int64_t offsetBytes = 0, bytes = 0;
};

struct ResolvedCopy {
  int src = -1, dst = -1;
  int64_t srcOffsetBytes = 0, dstOffsetBytes = 0, bytes = 0;
};

struct ResolvedAllReduce {
  int src = -1, dst = -1;
  int64_t srcOffsetBytes = 0, dstOffsetBytes = 0, bytes = 0;
  /// src and dst are the same bytes (in place; with one rank nothing to do)
  bool inPlace() const { return src == dst && srcOffsetBytes == dstOffsetBytes; }
};

using ResolvedStep =
    std::variant<ResolvedLaunch, ResolvedGemm, ResolvedMemset, ResolvedCopy, ResolvedAllReduce>;

/// Evaluates step `index` of `program` for the symbol values `s` and checks
/// every access against its buffer's bytes (sizes >= 0, strides >= 0, the
/// last element inside the buffer), grid/block limits (grid x <= 2^31-1,
/// y, z <= 65535, block product <= 1024), gemm layouts (planGemm), copy
/// ranges that overlap (also through aliasing temps), all_reduce sizes and
/// offsets that are not whole elements and ranges that overlap without
/// being the same. False with `error`
/// "step I (op): ..." on the first violation.
bool resolveStep(const GpuProgram &program, size_t index, const SymbolValues &s,
                 ResolvedStep &out, std::string &error);

/// Resolves every step for the chunks of a `length`-token run that bound
/// the accesses of affine expressions (the first, the second-to-last and
/// the last chunk); false with the first error, prefixed with the symbol
/// values.
bool checkGpuProgramForLength(const GpuProgram &program, int64_t length, std::string &error);

// --- Memory plan ---------------------------------------------------------------

/// Where each buffer lives in one device allocation: weights, consts, state,
/// inputs and outputs one after the other, then the temp arena; every base
/// 256-byte aligned. Weights placed on the host (GpuBuffer::host) live in a
/// second, host allocation instead, planned the same way.
struct BufferPlan {
  std::vector<uint64_t> offsets; ///< per buffer, byte offset from its allocation's base
  std::vector<bool> onHost;      ///< per buffer: in the host allocation
  uint64_t arenaOffset = 0;      ///< where the temp arena starts
  uint64_t totalBytes = 0;       ///< size of the device allocation
  uint64_t weightBytes = 0, constBytes = 0, stateBytes = 0, ioBytes = 0; ///< sums of buffer sizes
  uint64_t hostBytes = 0;        ///< size of the host allocation (0: none)
  uint64_t hostWeightBytes = 0;  ///< sum of the host buffers' sizes
};

/// The manifest names of the weights `plan` keeps in the host allocation,
/// in buffer order (for messages).
std::vector<std::string> hostTableNames(const GpuProgram &program, const BufferPlan &plan,
                                        const Manifest &manifest);

/// Computes the plan for a validated program; false with `error` when the
/// total overflows. `sameAs` (empty, or one entry per buffer): a weight
/// buffer i with sameAs[i] = j >= 0 (j < i, a weight of the same byte
/// size) takes j's place instead of its own, and its bytes are not counted
/// again (--dummy-weights: weights of one shape and type share memory).
bool planBuffers(const GpuProgram &program, BufferPlan &plan, std::string &error,
                 const std::vector<int> &sameAs = {});

// --- Element conversions --------------------------------------------------------

/// float32 -> bfloat16 bits, round to nearest even (NaN stays a quiet NaN).
uint16_t floatToBfloat16(float f);
/// float32 -> IEEE float16 bits, round to nearest even, overflow to infinity.
uint16_t floatToHalf(float f);
/// bfloat16 bits -> float32 (exact).
float bfloat16ToFloat(uint16_t h);
/// IEEE float16 bits -> float32 (exact).
float halfToFloat(uint16_t h);

/// True when convertElements supports `from` -> `to` (equal dtypes of known
/// size, float32 -> bfloat16/float16, bfloat16/float16 -> float32).
bool canConvert(const std::string &from, const std::string &to);

/// Converts `count` elements of dtype `from` at `src` into dtype `to` at
/// `dst` (which holds count * dtypeSize(to) bytes). Requires canConvert.
void convertElements(const std::string &from, const void *src, const std::string &to, void *dst,
                     size_t count);

} // namespace h20::runtime

#endif // H20_RUNTIME_GPUPROGRAM_H
