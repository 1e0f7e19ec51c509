//===- RunPlan.h - what one prefill run will do, checked up front -*- C++ -*-===//
//
// A RunPlan is decided once per run, before anything touches a GPU: which
// parallel mode runs (one GPU, context parallel over virtual or NCCL ranks,
// tensor parallel over virtual or NCCL ranks), the prompt length and its
// chunk schedule, where every input and output lives in the program's
// buffers, the output shapes and their row copies, and the
// context-parallel plan (schedule, layer segments, K/V ring). planRun is
// pure (no CUDA, no files) so h20-run can refuse a bad prompt or mode
// before it loads gigabytes of weights, GpuExecutor::run executes the same
// plan, and RunPlanTest checks every refusal without a GPU. After IREE's
// HAL, where the host-side command-buffer recording is separate from the
// device that replays it.
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_RUNPLAN_H
#define H20_RUNTIME_RUNPLAN_H

#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h20::runtime {

/// How the steps of one run are spread over ranks.
enum class RunMode {
  Single,                 ///< one GPU, the plain chunk loop (T = 1)
  VirtualContextParallel, ///< N context-parallel ranks simulated on one GPU
  NcclContextParallel,    ///< this process is one of N context-parallel ranks
  VirtualTensorParallel,  ///< this executor is one of T ranks on one GPU
  NcclTensorParallel,     ///< this process is one of T tensor-parallel ranks
  /// One rank of T alone (h20-run --solo-rank): its steps at full shapes,
  /// the collectives skipped; a timing of one rank, not the model's outputs.
  SoloTensorParallel,
};

/// "single", "virtual-cp", "nccl-cp", "virtual-tp", "nccl-tp", "solo-tp".
const char *runModeName(RunMode mode);

/// What the caller asks of a run beside its inputs: GpuRunOptions' mode
/// fields and the ranks the executor was loaded with.
struct RunRequest {
  /// Without chunking: the value of the symbol n (S of a token-id run, 0
  /// for a generic graph). Unused for chunked programs (S comes from the
  /// chunked input).
  int64_t n = 0;
  int virtualRanks = 0;         ///< > 1: virtual context parallelism over N ranks
  bool contextParallel = false; ///< context parallelism over the NCCL communicator
  /// Tensor parallelism: the artifact's T (Manifest::tensorParallel()) and
  /// the rank this executor is; with T > 1, virtualTpRanks is the size of
  /// the virtual group (0: the ranks are NCCL's).
  int tpRanks = 1, tpRank = 0;
  int virtualTpRanks = 0;
  /// With T > 1 and no virtual group: run rank tpRank alone, skipping the
  /// collectives (RunMode::SoloTensorParallel).
  bool soloTp = false;
  /// The NCCL communicator the executor joined: 0 ranks when none.
  int ncclRanks = 0, ncclRank = 0;
};

/// One manifest output of the run.
struct OutputPlan {
  std::vector<int64_t> shape; ///< dynamic dims sized from the inputs
  int64_t bytes = 0;          ///< of the whole host tensor
  int buffer = -1;            ///< the program buffer holding it
  /// OutputMode::Rows: the product of the dims before the row dim and the
  /// bytes of one row (a chunk's rows are copied out after each chunk).
  int64_t rowsOuter = 0, rowBytes = 0;
};

/// Everything a run decides before it starts; filled by planRun.
struct RunPlan {
  RunMode mode = RunMode::Single;
  int64_t tokens = 0;                 ///< S: the chunked input's length, else RunRequest::n
  std::vector<SymbolValues> chunks;   ///< chunkSchedule(program, S)
  std::vector<int> inputBuffer;       ///< per manifest input: its program buffer, or -1
  std::vector<int> outputBuffer;      ///< per manifest output: its program buffer
  std::vector<std::vector<int64_t>> inputShapes;
  std::vector<OutputPlan> outputs;    ///< per manifest output
  bool lastOnly = false;              ///< every output is the last position's
  /// The chunked input (program.chunking): elements per token past the
  /// cut dim, bytes per element, and bytes per compiled chunk.
  int64_t idsInner = 1, idsElemBytes = 0, chunkBytes = 0;
  /// Context parallelism: the ranks, this process's rank (NCCL; -1 for a
  /// virtual run) and the plan.
  int cpRanks = 0, cpRank = -1;
  CpPlan cp;
  /// Tensor parallelism: T (> 1 in the two tensor-parallel modes).
  int tpRanks = 1;

  bool contextParallel() const {
    return mode == RunMode::VirtualContextParallel || mode == RunMode::NcclContextParallel;
  }
  bool tensorParallel() const {
    return mode == RunMode::VirtualTensorParallel || mode == RunMode::NcclTensorParallel ||
           mode == RunMode::SoloTensorParallel;
  }
  bool overNccl() const {
    return mode == RunMode::NcclContextParallel || mode == RunMode::NcclTensorParallel;
  }
};

/// Checks `inputs` (one per manifest input: dtype, rank, static dims,
/// bytes; unchunked inputs against their buffers), the prompt length
/// against every step (checkGpuProgramForLength), the requested mode
/// against the program and the ranks (one mode at a time; NCCL context
/// parallelism needs a communicator of N >= 2 and last-position outputs;
/// tensor parallelism needs T virtual or T NCCL ranks and no context
/// parallelism) and the output shapes against their buffers, and plans the
/// context-parallel schedule, segments and ring (planContextParallel).
/// False with one message (naming the input, output, step or flag) when
/// the run cannot go ahead; nothing is allocated either way.
bool planRun(const Manifest &manifest, const GpuProgram &program,
             const std::vector<HostTensor> &inputs, const RunRequest &request, RunPlan &plan,
             std::string &error);

/// The chunked input's bytes padded to whole compiled chunks
/// (plan.chunks.size() * plan.chunkBytes) with the program's pad value
/// (int64 or int32 token ids): every chunk then copies one full slice.
std::vector<uint8_t> paddedChunkedInput(const GpuProgram &program, const RunPlan &plan,
                                        const HostTensor &input);

/// How a run is asked to go: h20-run's flags other than its files
/// (RunOutputs.h RunFiles).
struct RunFlags {
  std::string device;        ///< --device: "cpu", "gpu" or "" (the artifact's target decides)
  std::string weightsDir;    ///< --weights-dir
  int64_t gpus = 0;          ///< --gpus; 0: not given
  bool virtualRanks = false; ///< --virtual-ranks
  bool dummyWeights = false; ///< --dummy-weights
  bool tuneGemms = false;    ///< --tune-gemms
  bool noCudaGraph = false;  ///< --no-cuda-graph
  bool profileSteps = false; ///< --profile-steps
  int64_t warmup = 1;        ///< --warmup: GPU prefills before the measured ones
  int64_t repeat = 1;        ///< --repeat: measured GPU prefills (the report gives their median)
  /// --solo-rank R: of a tensor-parallel artifact (--gpus T), run rank R
  /// alone on one GPU, its collectives skipped (a timing, not the model's
  /// outputs); -1: not given.
  int64_t soloRank = -1;
};

/// Where a run is asked to go, before the artifact's own plan: h20-run's
/// flags and the environment.
struct DeviceRequest : RunFlags {
  /// WORLD_SIZE as set (empty: not set); over 1 this process is one rank
  /// of a multi-process job, and it stands for --gpus when that is absent.
  std::string worldSize;
  bool graphRun = false; ///< named inputs (--input / --inputs-from), not --ids
};

/// Chooses CPU or GPU execution of artifact `m` (named `name` in messages)
/// for `request` into `gpu`. Refuses, naming the flag and the artifact: a
/// device other than cpu or gpu; a GPU artifact on the CPU or a CPU
/// artifact on the GPU (saying which --target or --device fits); a graph
/// run as one rank of a multi-process job; the GPU
/// flags (--gpus, --dummy-weights, --tune-gemms) or a multi-process job
/// with a CPU run; a tensor-parallel artifact on the CPU, or with a GPU
/// count other than its T (checkTensorParallelGpus); an artifact without
/// outputs. Pure.
bool chooseDevice(const Manifest &m, const std::string &name, const DeviceRequest &request,
                  bool &gpu, std::string &error);

} // namespace h20::runtime

#endif // H20_RUNTIME_RUNPLAN_H
