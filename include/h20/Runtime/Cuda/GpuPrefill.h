//===- GpuPrefill.h - the measured prefills of one GPU process --*- C++ -*-===//
//
// What h20-run does between loading an artifact and writing its report, for
// every GPU run mode: one executor (one GPU, or this process's rank of an
// NCCL job) or one per virtual tensor-parallel rank (all on this GPU, one
// host thread each, meeting at the all-reduces), the warm-up prefills, the
// measured ones, their median, and the virtual ranks' agreement. The mode
// itself was chosen and checked before (RunPlan.h, RankEnvironment.h).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_CUDA_GPUPREFILL_H
#define H20_RUNTIME_CUDA_GPUPREFILL_H

#include "h20/Runtime/Cuda/GpuExecutor.h"
#include "h20/Runtime/Parallel/RankEnvironment.h"
#include "h20/Runtime/Parallel/TensorParallel.h"
#include "h20/Runtime/RunPlan.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace h20::runtime {

/// What h20-run's flags ask of a GPU job.
struct GpuJobRequest : RunFlags {
  std::string artifact; ///< its path, to name it in messages
  int64_t tokens = 0;   ///< S of a token-id prefill; 0: a graph run (--input)
};

/// A GPU job, planned before the GPU is touched: how this process takes
/// part (RankMode), what it loads and how it runs, and the checked plan of
/// the run (RunPlan.h; the executors plan the same again in run()).
struct GpuJob {
  RankMode mode = RankMode::Single;
  GpuLoadOptions load;
  GpuRunOptions run; ///< without a progress callback
  int tensorParallel = 1;  ///< T of the artifact (manifest)
  int virtualTpRanks = 0;  ///< T when the T ranks are simulated on this GPU
  int contextRanks = 0;    ///< N > 1 of a context-parallel job (virtual or NCCL)
  RunPlan plan;
};

/// Whether this machine shows the `gpus` GPUs a launched N-GPU job needs
/// (GpuExecutor::deviceCount); false with `error`, a sentence for the user.
bool checkGpusVisible(int gpus, std::string &error);

/// Plans a GPU job: this process's place among the GPUs (assignRanks with
/// the rank variables read through `getenv`: WORLD_SIZE, RANK, LOCAL_RANK,
/// H20_NCCL_ID_FILE, H20_NCCL_TIMEOUT_S), the parallel mode (tensor
/// parallel when the artifact says T > 1, else context parallel for N > 1
/// GPUs, virtual with --virtual-ranks: N a power of two), the load and run
/// options, and planRun over `inputs`. False with `error`, a sentence for
/// the user (planRun's prefixed with the artifact's name), on the first rule
/// broken.
bool planGpuJob(const Manifest &m, const GpuProgram &program,
                const std::vector<HostTensor> &inputs, const GpuJobRequest &request,
                const std::function<const char *(const char *)> &getenv, GpuJob &job,
                std::string &error);

/// One rank's prefills: the outputs and per-stage figures of the last
/// measured run, every run's TTFT (ms, host wall time), the GEMM tuning
/// of the run that tuned (the first), and how it ended.
struct RankRun {
  std::vector<HostTensor> outputs;
  GpuRunStats st;
  std::vector<double> warmupMs, runMs;
  std::vector<GemmTuning> gemmTuning;
  GpuStatus status = GpuStatus::Ok;
  std::string error;
};

/// What virtual tensor-parallel ranks must agree on: every rank got the
/// same sums, so the same outputs bit for bit, and issued the same
/// all-reduces. Both true for other modes.
struct TpCheck {
  bool outputsMatch = true, logsMatch = true;
  std::string outputsNote, logsNote;
};

/// The prefills of one process.
class GpuPrefill {
public:
  /// Loads one executor with `lo`, or, when `virtualTpRanks` T > 1, T of
  /// them (tensorParallelRank 0..T-1) on the same GPU. On failure `error`
  /// names the virtual rank.
  GpuStatus load(const Artifact &artifact, const Manifest &m, const GpuProgram &program,
                 const GpuLoadOptions &lo, int virtualTpRanks, std::string &error);

  /// `warmup` warm-up prefills (over the first chunk only when chunked:
  /// they load every kernel and let cuBLASLt pick its algorithms), then
  /// `repeat` >= 1 measured ones of `inputs` with `options` (the progress
  /// callback goes to rank 0 only). Stops at the first failure and returns
  /// it, naming the rank: the first failure that is not a consequence of
  /// another rank's. On success ranks()[0].st.ttftMs is the median of the
  /// measured runs and tpCheck() compares the virtual ranks.
  GpuStatus run(const std::vector<HostTensor> &inputs, const GpuRunOptions &options,
                int64_t warmup, int64_t repeat, std::string &error);

  GpuExecutor &executor(int rank = 0) { return *executors_[rank]; }
  int executorCount() const { return static_cast<int>(executors_.size()); }
  const std::vector<RankRun> &ranks() const { return runs_; }
  const TpCheck &tpCheck() const { return tpCheck_; }

private:
  std::vector<std::unique_ptr<GpuExecutor>> executors_;
  std::unique_ptr<HostAllReduceGroup> group_; ///< virtual tensor parallelism
  const GpuProgram *program_ = nullptr;
  std::vector<RankRun> runs_;
  TpCheck tpCheck_;
};

} // namespace h20::runtime

#endif // H20_RUNTIME_CUDA_GPUPREFILL_H
