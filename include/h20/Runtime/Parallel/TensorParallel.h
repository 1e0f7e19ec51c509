//===- TensorParallel.h - tensor-parallel weights and all-reduces -*- C++ -*-===//
//
// Tensor parallelism (h20-opt --gpus T --parallel tensor): every one of T
// ranks runs the whole program on its slice of the weights (manifest weight
// "shard", Manifest.h WeightShard) and the ranks sum partial results with
// "all_reduce" steps (GpuProgram.h). This header holds the pure parts,
// testable without a GPU:
//   - which elements of a stored (full) weight a rank reads (ShardSlice),
//     and how to stream them through a staging buffer (planShardReads);
//   - the host reduction of a virtual run (reduceSumHost) and the
//     rendezvous of T host threads at each all_reduce (HostAllReduceGroup);
//   - the per-rank log of all-reduces and its cross-rank check;
//   - the check that a run asks for the GPUs the artifact was compiled for.
// GpuExecutor runs the all_reduce steps (one rank per executor): a device
// copy for T = 1, the host group for virtual ranks, ncclAllReduce for T
// processes.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_TENSORPARALLEL_H
#define H20_RUNTIME_TENSORPARALLEL_H

#include "h20/Runtime/Format/Manifest.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace h20::runtime {

// --- Weight slices -------------------------------------------------------------

/// The elements of a stored weight that one rank loads, in the stored
/// tensor's row-major element order: `outer` runs of `runElements`
/// contiguous elements, run o starting at element firstElement + o *
/// strideElements. With axis A, full shape F, device shape D and start s:
/// outer = prod(F[:A]), inner = prod(F[A+1:]), runElements = D[A] * inner,
/// strideElements = F[A] * inner, firstElement = s * inner. On the device
/// the runs lie back to back (the device tensor, row-major, shape D). A
/// weight without a shard is one run of all its elements.
struct ShardSlice {
  int64_t outer = 1, runElements = 0, strideElements = 0, firstElement = 0;
  int64_t fullElements = 0; ///< elements of the stored tensor (prod(F))
  /// Element offset (in the stored tensor) of run `o`.
  int64_t runStart(int64_t o) const { return firstElement + o * strideElements; }
  int64_t deviceElements() const { return outer * runElements; }
};

/// The slice of weight `w` that tensor-parallel rank `rank` loads. False
/// with `error` (naming the weight) when the weight has a shard and `rank`
/// is not one of its starts' ranks, or the shapes do not fit (parseManifest
/// already refuses those). Element counts are at most 2^50.
bool shardSlice(const WeightSpec &w, int rank, ShardSlice &slice, std::string &error);

/// One read of a weight upload: `rows` runs of `runElements` elements, the
/// first at stored element `fileElement`, the next ones `strideElements`
/// further each; they land back to back at device element `deviceElement`.
/// When rows > 1 the file span read is (rows - 1) * strideElements +
/// runElements elements (the gaps are read and dropped: fewer, larger reads
/// than one per run).
struct ShardRead {
  int64_t fileElement = 0, rows = 1, runElements = 0, strideElements = 0, deviceElement = 0;
  /// Elements read from the file (the span, gaps included).
  int64_t spanElements() const { return (rows - 1) * strideElements + runElements; }
};

/// Cuts the upload of `slice` into reads whose file span and device part
/// are both at most `maxElements` (> 0) elements: several whole runs per
/// read when a run's stride fits, else one run in pieces. In device order.
std::vector<ShardRead> planShardReads(const ShardSlice &slice, int64_t maxElements);

/// Copies the elements of `slice` out of the stored tensor `full` (of
/// slice.fullElements elements of `elementBytes` bytes) into `out` (of
/// slice.deviceElements() elements): the host version of a sharded upload.
void extractShard(const ShardSlice &slice, const void *full, int64_t elementBytes, void *out);

// --- All-reduce ----------------------------------------------------------------

/// dst[i] = sum over r in 0..srcs.size()-1 (in that order) of srcs[r][i],
/// accumulated in float32 and rounded once to `dtype` ("float32",
/// "float16", "bfloat16"; round to nearest even). `count` elements each;
/// dst may be one of the sources. False for another dtype.
bool reduceSumHost(const std::vector<const void *> &srcs, const std::string &dtype, size_t count,
                   void *dst);

/// One all-reduce as a rank issued it: program step, chunk index (of the
/// run's chunk loop), bytes, dtype ("float32", "float16", "bfloat16").
struct TpCollective {
  int64_t step = -1, chunk = -1, bytes = -1;
  std::string dtype;
  bool operator==(const TpCollective &o) const {
    return step == o.step && chunk == o.chunk && bytes == o.bytes && dtype == o.dtype;
  }
};

/// True when every rank issued the same all-reduces in the same order
/// (same step, chunk, bytes and dtype at every position); else false with
/// `why` naming the first difference (rank, position, field).
bool tpCollectivesMatch(const std::vector<std::vector<TpCollective>> &rankLog, std::string &why);

/// The rendezvous of T host threads (one per virtual rank) at each
/// all_reduce step: every rank calls allReduce with its bytes; the last to
/// arrive checks that all described the same collective, sums the ranks'
/// data in rank order (reduceSumHost) and wakes the others; each copies the
/// sum into its `dst`. A rank that fails calls abort(): every waiting and
/// later call returns false with the reason (no rank waits for ever on a
/// dead peer). Thread-safe; one object per run of T ranks.
class HostAllReduceGroup {
public:
  explicit HostAllReduceGroup(int ranks);

  int ranks() const { return nranks; }

  /// Rank `rank`'s part of one all-reduce: `src` and `dst` (may be equal)
  /// hold what.bytes bytes of what.dtype. Blocks until every rank arrived.
  /// False with `error` when the group was aborted, the rank is out of
  /// range, the ranks describe different collectives (then the group is
  /// aborted), or the dtype is not summable.
  bool allReduce(int rank, const TpCollective &what, const void *src, void *dst,
                 std::string &error);

  /// Ends the group: waiting and future allReduce calls fail with `why`.
  /// The first reason is kept.
  void abort(const std::string &why);

  bool aborted() const;

private:
  int nranks;
  mutable std::mutex m;
  std::condition_variable cv;
  int64_t generation = 0;
  int arrived = 0;
  std::vector<const void *> srcs;
  std::vector<TpCollective> what;
  std::vector<uint8_t> result;
  bool isAborted = false;
  std::string abortReason;
};

// --- Runs ------------------------------------------------------------------------

/// Whether a run may execute `m`: an artifact with tensor_parallel T > 1
/// runs only with exactly T GPUs (`gpus`: --gpus, else WORLD_SIZE, 0 when
/// neither is given). False with the message h20-run prints (exit 2):
/// "this artifact was compiled for tensor parallelism over T GPUs (h20-opt
/// --gpus T --parallel tensor); run it with --gpus T [--virtual-ranks]".
bool checkTensorParallelGpus(const Manifest &m, int64_t gpus, std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_TENSORPARALLEL_H
