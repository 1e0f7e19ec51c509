//===- Manifest.h - an artifact's manifest.json, parsed ---------*- C++ -*-===//
#ifndef H20_RUNTIME_MANIFEST_H
#define H20_RUNTIME_MANIFEST_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h20::runtime {

struct HostTensor;

/// An output dim that is a linear combination of input dims (e.g. a present
/// KV cache of S_past + S tokens): constant + sum(coeff * input[input].dim).
struct DimSum {
  struct Term {
    int input = 0, dim = 0;
    int64_t coeff = 1;
  };
  int64_t constant = 0;
  std::vector<Term> terms;
};

/// A range an input's values must lie in (manifest input "value_ranges",
/// written by h20-input-value-ranges): lo <= value < hi for every element,
/// lo and hi sums of input dims; `why` names the ONNX node that needs it
/// (e.g. "indices of node 'g' (op 'Gather')").
struct ValueRange {
  DimSum lo, hi;
  std::string why;
};

struct TensorSpec {
  std::string name;
  std::string dtype;           ///< "float32", "int64", ...
  std::vector<int64_t> shape;  ///< -1 for a dynamic dim
  /// Outputs: for each dynamic dim, the (input, dim) it equals.
  std::vector<std::optional<std::pair<int, int>>> dimsFrom;
  /// Outputs: dynamic dims that equal no single input dim, as DimSums
  /// (manifest "dims_sum", parallel to the shape; null elsewhere).
  std::vector<std::optional<DimSum>> dimSums;
  /// Inputs: the ONNX dim_param of each dim ("" for none), when the model
  /// names any. The compiler takes dims with one name to be equal.
  std::vector<std::string> dimParams;
  /// Inputs: ranges every value must lie in (integer inputs only).
  std::vector<ValueRange> valueRanges;
};

/// A tensor-parallel weight (manifest weight "shard"): the stored tensor
/// (file, offset, length, dtype) is the FULL tensor of shape `fullShape`;
/// tensor-parallel rank r of T holds elements [starts[r], starts[r] +
/// shape[axis]) along `axis` (WeightSpec::shape is the device shape: equal
/// to fullShape except at `axis`). Two ranks may have the same start
/// (replicated). Validated by parseManifest: same rank as the shape, axis in
/// range, every slice inside fullShape, one start per rank.
struct WeightShard {
  int axis = 0;
  std::vector<int64_t> fullShape;
  std::vector<int64_t> starts; ///< per tensor-parallel rank, element index along axis
};

struct WeightSpec {
  std::string name, file, dtype;
  std::vector<int64_t> shape; ///< the device shape (a shard's, when `shard` is set)
  std::optional<int64_t> offset, length; ///< bytes of the full (stored) tensor
  std::optional<int64_t> fileSize; ///< size of `file` at compile time
  std::optional<WeightShard> shard; ///< tensor parallelism: which slice each rank holds
  /// A weight computed from the stored tensor when loaded (manifest
  /// "derive", h20-quantize-linears; empty: the stored tensor itself, maybe
  /// converted): the file holds a float [K, N] tensor (`sourceShape`, of
  /// `dtype`); "fp8_block128": its transpose [N, K] in float8_e4m3fn, each
  /// 128 x 128 block divided by its scale; "fp8_block128_scale": the
  /// scales [ceil(N / 128), ceil(K / 128)] float32. See deriveWeight
  /// (WeightDerive.h). Validated by parseManifest against `shape`.
  std::string derive;
  std::vector<int64_t> sourceShape;
  /// Manifest "placement" (h20-place-tables): "host" for a table kept in
  /// pinned host memory the GPU reads over PCIe; empty or "device"
  /// otherwise. Its program buffer says the same (GpuBuffer::host).
  std::string placement;
};

/// The manifest's "parallel" object: how many GPUs the artifact was
/// compiled for and which multi-GPU plan was chosen.
struct ParallelPlan {
  int gpus = 1;            ///< N
  std::string plan;        ///< "context" or "tensor"
  int tensorParallel = 1;  ///< T: N for "tensor", 1 for "context"
  std::string chosenBy;    ///< "cost model" or "user" ("" when absent)
  /// predicted_ms.context / .tensor (absent or null: unknown)
  std::optional<double> predictedContextMs, predictedTensorMs;
  std::optional<int64_t> tokens; ///< the prompt length the choice was made for
  std::string json;        ///< the object as written (for reports)
};

struct BlobSpec {
  std::string name, kind;
  uint64_t offset = 0, size = 0;
};

/// A CPU artifact compiled for a chunked prefill (h20-opt --target=cpu
/// --chunk=C, manifest "cpu_chunked"): the entry takes one chunk's token ids
/// [1, n] (n <= C; every chunk but the last holds C), its first position p0
/// and n as index scalars, the weights, the caches (zeroed before the first
/// chunk, kept across chunks, in this order) and the chunk's output: its
/// rows ([1, n, ...], `output` "rows") or its last real row ("last").
struct CpuChunking {
  int64_t chunk = 0;    ///< C, tokens per chunk
  int64_t capacity = 0; ///< positions the caches hold (max-positions rounded up to chunks)
  std::string output;   ///< "rows" or "last"
  struct Cache {
    std::string dtype;          ///< "float32", "int64", ...
    std::vector<int64_t> shape; ///< static
  };
  std::vector<Cache> caches;
};

struct Manifest {
  std::string target;   ///< "cpu", "h200", ...
  std::string logits;   ///< "all" or "last"
  std::string modelDir; ///< where weight files are resolved
  std::string entrySymbol; ///< CPU entry point; empty for GPU artifacts
  std::string cpu; ///< CPU level the code was compiled for ("x86-64-v3", ...)
  std::optional<int64_t> vocabSize, maxPositions;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<WeightSpec> weights;
  std::vector<BlobSpec> blobs;
  std::optional<ParallelPlan> parallel; ///< absent: one GPU, no tensor parallelism
  std::optional<CpuChunking> cpuChunking; ///< absent: the whole prompt in one call

  /// T: the tensor-parallel ranks the artifact needs (1 without "parallel").
  int tensorParallel() const { return parallel ? parallel->tensorParallel : 1; }
};

/// Parses manifest JSON; false with `error` naming the missing/invalid field
/// (e.g. "weight 3 shard starts[1]: ..."). Checks the "parallel" object
/// (gpus >= 1; plan "context" with tensor_parallel 1 or "tensor" with
/// tensor_parallel == gpus; chosen_by "cost model" / "user"; predicted_ms
/// numbers or null; tokens >= 0; other keys ignored) and every weight
/// "shard" against it (WeightShard).
bool parseManifest(const std::string &json, Manifest &m, std::string &error);

/// The shape of output `o` for inputs of the given shapes: each dynamic dim
/// is the input dim its "dims_from" names, or the sum its "dims_sum" gives.
/// False with `error` naming the output and dim when one cannot be sized
/// (an index out of range, a negative or overflowing sum).
bool resolveOutputShape(const TensorSpec &o, const std::vector<std::vector<int64_t>> &inputShapes,
                        std::vector<int64_t> &shape, std::string &error);

/// Checks what the compiled code assumes of dynamic input dims: every dim
/// that carries a given ONNX dim_param has one value across all inputs.
/// `inputShapes[i]` is the shape of input i. False with `error` naming both
/// inputs, the dims, their sizes and the dim_param.
bool checkDimParams(const std::vector<TensorSpec> &inputs,
                    const std::vector<std::vector<int64_t>> &inputShapes, std::string &error);

/// Checks every integer input's values against its spec's valueRanges
/// (bounds evaluated on the inputs' shapes). `inputs[i]` is input i (int64
/// and int32 inputs are checked, others not). False with `error` naming the input, the first element outside,
/// its value, the range and why (the ONNX node); h20-run exits 2 on it
/// before anything runs. ONNX: an out-of-range index is an error (Gather,
/// GatherElements, ScatterElements specs).
bool checkValueRanges(const std::vector<TensorSpec> &specs, const std::vector<HostTensor> &inputs,
                      std::string &error);

/// Bytes per element of a manifest dtype, 0 if unknown.
int64_t dtypeSize(const std::string &dtype);

/// "[1, ?, 8]": a shape for messages, dynamic dims (< 0) as "?".
std::string shapeText(const std::vector<int64_t> &shape);

} // namespace h20::runtime

#endif // H20_RUNTIME_MANIFEST_H
