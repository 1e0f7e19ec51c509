//===- GpuExecutor.h - run a GPU program on one GPU -------------*- C++ -*-===//
//
// Executes a parsed GpuProgram (GpuProgram.h) through the CUDA driver API and
// cuBLASLt, both loaded at run time (CudaDriver.h): this header includes no
// CUDA header, so h20-run builds and starts without a GPU. Use:
//
//   GpuExecutor gpu;
//   GpuStatus s = gpu.load(artifact, manifest, program, loadOptions, error);
//   ...  = gpu.run(inputs, runOptions, outputs, stats, error);   // any number of times
//
// load() opens the GPU, loads the modules, allocates all device memory
// (one allocation, planned by planBuffers), streams the weights to the GPU
// and uploads the consts; with GpuLoadOptions::ncclRanks it also joins an
// NCCL communicator (NcclComm.h). run() zeroes the state buffers, uploads
// the inputs, runs the steps once per chunk and downloads the outputs.
//
// CUDA graphs: a chunked program's per-chunk steps are the same for every
// chunk except the values of expressions that name p0 or n. run() captures
// them once into a CUDA graph (stream capture: kernels, cuBLASLt GEMMs,
// memsets, copies) and replays it for every chunk, first updating the
// parameters of the kernel nodes (launch steps) whose
// expressions name a symbol. A gemm, memset or copy step that names n is
// part of the graph's key (chunks with another n, such as a short last
// chunk, get their own graph); one that names p0 runs outside the graphs,
// between them. Graphs are kept across runs. GpuRunOptions::cudaGraph =
// false (h20-run --no-cuda-graph) runs every step with its own launch;
// both give bit-identical results.
// Virtual context parallelism (GpuRunOptions::virtualRanks = N > 1; h20-run
// --gpus N --virtual-ranks): one GPU simulates the N-rank context-parallel
// prefill of ContextParallel.h. The S tokens are cut into 2N chunks of
// L = S / 2N tokens (L a multiple of the compiled chunk C; each CP chunk
// runs as L / C compiled chunks, "pieces", with the (p0, n) of the 1-GPU
// run), rank r holding CP chunks r and 2N-1-r. The program is split into
// the layer segments its compiler declared (splitLayerSegments) and run
// layer-major: for segment l, every rank runs its pieces' steps up to the
// attention, then the ring of layer l copies (cuMemcpyDtoDAsync on the
// stream) the K/V rows each rank wrote in that segment (the state-buffer
// views of the segment's steps, stateWriteRuns) from rank r-1's KV cache
// into rank r's, N-1 ring steps in the order of a real ring; then every
// rank runs its pieces' attention. The tail (after the last attention) runs
// only for the piece holding position S-1 when every output is "last",
// else for every piece in position order ("rows" outputs are downloaded
// after each). Device memory: every piece has its own copy of the temp
// arena and of the chunked input's buffer (its residual stream lives
// across segments), every rank its own copy of the state buffers (a
// full-size KV cache: its shard plus what it received); piece 0 and rank 0
// use the plan's own. No CUDA graphs in this mode. The results equal the
// 1-GPU run's bit for bit (same kernels on the same pieces; attention reads
// the same rows). GpuRunStats gets the ring's traffic per layer and the
// collectives each rank issued.
// Tensor parallelism (manifest parallel.tensor_parallel = T; TensorParallel.h):
// one executor is one rank (GpuLoadOptions::tensorParallelRank): load()
// uploads only the rank's slice of every sharded weight, and run() executes
// each "all_reduce" step as a sum over the T ranks: with T = 1 a device
// copy; with GpuRunOptions::virtualTensorParallel (T executors on one GPU,
// one host thread each) the stream is synchronised, the source bytes are
// downloaded, summed on the host by the group (float32, rank order, one
// rounding) and the sum uploaded to every rank's destination; otherwise
// through the communicator load() joined (ncclRanks = T, ncclRank = this
// rank): one ncclAllReduce on the stream, the host waiting (under the
// ncclTimeoutS watchdog, aborting the communicator on a dead peer) for each
// all-reduce before it enqueues the next. T > 1 runs without CUDA graphs
// and without context parallelism. GpuRunStats gets the all-reduces this
// rank issued (tpLog), their count, bytes and time.
// The implementation is split by role under lib/Runtime/Cuda
// (GpuExecutorImpl.h lists the parts); RunPlan.h plans each run.
// Built without the CUDA headers, every call fails with "built without CUDA
// headers" (GpuStatus::NoDevice).
//
//===----------------------------------------------------------------------===//
#ifndef H20_RUNTIME_GPUEXECUTOR_H
#define H20_RUNTIME_GPUEXECUTOR_H

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Cuda/GemmPlan.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/TensorIO.h"
#include "h20/Runtime/Parallel/TensorParallel.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace h20::runtime {

/// How a call ended; h20-run maps these to its exit codes.
enum class GpuStatus {
  Ok,        ///< exit 0
  Internal,  ///< exit 1: a driver/library failure that a valid artifact should not cause
  /// exit 1: an N-GPU job's NCCL failed, or a peer rank died or hung (its
  /// communicator was aborted); not a bug of this rank
  PeerFailed,
  BadInput,  ///< exit 2: bad artifact, inputs, weight files, or a GPU that cannot run the code
  Resources, ///< exit 3: out of GPU (or pinned host) memory
  NoDevice,  ///< exit 2: no driver, no GPU, or no CUDA support in this build
};

/// The GPU a GpuExecutor runs on.
struct GpuDeviceInfo {
  int ordinal = 0;
  std::string name;               ///< "NVIDIA H200"
  int driverVersion = 0;          ///< cuDriverGetVersion: 13000 for CUDA 13.0
  int ccMajor = 0, ccMinor = 0;   ///< compute capability
  uint64_t totalMemoryBytes = 0;
  int multiprocessors = 0;
};

struct GpuLoadOptions {
  int device = 0;          ///< CUDA device ordinal
  std::string weightsDir;  ///< where weight files are; empty: the manifest's model_dir
  /// Do not read weight files: fill every weight with reproducible
  /// pseudo-random values (uniform, variance 1 / fan_in, fan_in = the
  /// second-to-last dim; 1-D weights are 1, integer weights 0). For timing a model whose
  /// checkpoint is not at hand (like vLLM's --load-format dummy); its
  /// outputs mean nothing. Weights of one shape and type share one device
  /// buffer (their values would be equal in kind anyway), so a model of N
  /// equal layers needs the weight memory of one.
  bool dummyWeights = false;
  uint64_t stagingBytes = uint64_t(32) << 20; ///< per pinned staging buffer (two are used)
  uint64_t workspaceBytes = uint64_t(32) << 20; ///< cuBLASLt workspace (only with gemm steps)
  /// Choose each GEMM's cuBLASLt algorithm by timing (CublasLtGemm::tune)
  /// instead of taking the heuristic's first choice: in the first run, on
  /// the GPU alone, before its first chunk (so its TTFT includes the
  /// tuning, tens of ms per distinct GEMM shape); later runs reuse the
  /// choices. Only plain single-GPU chunk loops (not context or tensor
  /// parallel runs, not grouped GEMMs) are tuned. GpuRunStats::gemmTuning
  /// says what was measured.
  bool tuneGemms = false;
  /// NCCL: 0 = no communicator. 1 = join a 1-rank communicator (the same
  /// path N ranks take) and all-reduce a small buffer once as a
  /// self-check; when libnccl.so.2 is missing or NCCL fails, load() goes on
  /// without it and loadStats().nccl says why. Over 1: this process is rank
  /// ncclRank of an N-process job (one GPU each); the unique id comes
  /// through ncclIdFile (NcclComm::exchangeUniqueId) and any NCCL failure
  /// fails load() (BadInput when NCCL is missing, else PeerFailed).
  int ncclRanks = 0;
  int ncclRank = 0; ///< this process's rank in [0, ncclRanks)
  std::string ncclIdFile; ///< ncclRanks > 1: where rank 0 leaves the unique id
  /// ncclRanks > 1, seconds: how long a rank waits for rank 0's id, for
  /// every peer to join, and for a layer's K/V ring once its own work
  /// before the ring is done (the run's start barrier, where peers may
  /// still be loading weights, gets 20 times this); past it the
  /// communicator is aborted and load()/run() fail (a dead peer never
  /// hangs the job).
  double ncclTimeoutS = 30;
  /// Tensor parallelism: the rank (0 .. T-1, T = the manifest's
  /// parallel.tensor_parallel) whose weight slices this executor loads and
  /// whose place it takes in the all-reduces. Over NCCL it must equal
  /// ncclRank.
  int tensorParallelRank = 0;
};

/// What load() did.
struct GpuLoadStats {
  std::string code;        ///< "cubin", "ptx", or "none" (no modules)
  double loadWeightsMs = 0; ///< weights + consts to the GPU, host wall time
  uint64_t weightBytes = 0; ///< device bytes of all weight buffers
  /// Bytes of the weights kept in pinned host memory (h20-place-tables),
  /// not in weightBytes or planBytes.
  uint64_t hostWeightBytes = 0;
  uint64_t planBytes = 0;   ///< the one device allocation (weights, state, I/O, arena)
  /// NCCL: empty when not asked for (ncclRanks 0); the library version
  /// ("2.28.9") when the communicator is up and its all-reduce self-check
  /// passed; "unavailable: REASON" otherwise.
  std::string nccl;
  int ncclRanks = 0, ncclRank = 0; ///< the communicator's size and this rank (when up)
  double ncclInitMs = 0;           ///< communicator set-up and self-check, host wall time
};

/// Called after each chunk finished on the GPU: chunk index (0-based),
/// chunk count, tokens done so far, all tokens, the chunk's GPU time in ms.
using GpuProgressFn = std::function<void(int64_t chunk, int64_t chunks, int64_t tokensDone,
                                         int64_t tokens, double chunkMs)>;

struct GpuRunOptions {
  /// Without chunking: the value of the symbol n (S for a token-id run, 0
  /// for a generic graph). With chunking n is per chunk and this is unused.
  int64_t n = 0;
  GpuProgressFn progress; ///< may be empty
  /// Replay a chunked program's chunks as CUDA graphs (see above). Ignored
  /// (plain launches) for programs without chunking, under H20_GPU_SYNC=1,
  /// or when the driver lacks the graph API.
  bool cudaGraph = true;
  /// Over 1: simulate N = virtualRanks context-parallel ranks on this GPU
  /// (see above): N a power of two, the program chunked, S a multiple of
  /// 2N * C. 0 or 1: the plain chunk loop. Forces cudaGraph off.
  int virtualRanks = 0;
  /// Run this process's share of the N-rank context-parallel prefill over
  /// the communicator load() joined (GpuLoadOptions::ncclRanks = N > 1):
  /// the schedule, segments and ring of the virtual mode, but this rank
  /// runs only its own pieces and the ring's K/V blocks travel by NCCL
  /// (one ncclSend + ncclRecv group per ring step, a transfer per
  /// contiguous run of the block). Every output must be "last" (compile
  /// with --logits=last); the rank holding position S-1 runs the tail and
  /// is the only one whose `outputs` hold data (GpuRunStats::cpOutputRank).
  /// A ring that does not finish within ncclTimeoutS, or an asynchronous
  /// NCCL error, aborts the communicator: run() fails (PeerFailed) naming
  /// the layer. False: a plain single-GPU run on this rank (warm-up).
  bool contextParallel = false;
  /// Time every step of every chunk with a pair of CUDA events (the chunks
  /// run as plain launches, not graphs, and the host waits for each chunk):
  /// GpuRunStats::stepMs / stepCalls. Ignored with context parallelism.
  /// For finding where a prefill's time goes; the TTFT of such a run is
  /// not a benchmark.
  bool profileSteps = false;
  /// Tensor parallelism simulated on one GPU: the group of the T virtual
  /// ranks (one executor and one host thread each, all running the same
  /// run() calls); all_reduce steps meet there. Not owned. Null: T = 1, or
  /// T > 1 over NCCL.
  HostAllReduceGroup *virtualTensorParallel = nullptr;
  /// One tensor-parallel rank alone (h20-run --solo-rank; the executor was
  /// loaded as that rank): every all_reduce step is counted but not run, so
  /// each rank-local step runs at its full shapes while the outputs are
  /// not the model's. For timing one rank of a job larger than this GPU.
  bool soloTensorParallel = false;
};

/// Timings (ms) and sizes of one run().
struct GpuRunStats {
  int64_t tokens = 0;          ///< S: the chunked input's length (else options.n)
  int64_t chunks = 0;
  double uploadInputsMs = 0;   ///< inputs host -> device (GPU events)
  double prefillMs = 0;        ///< first chunk start -> last chunk end (GPU events)
  double downloadMs = 0;       ///< "last"/"whole" outputs device -> host (GPU events)
  double ttftMs = 0;           ///< host wall time: before the input upload -> outputs on the host
  std::vector<double> chunkMs; ///< per chunk (GPU events)
  uint64_t peakGpuMemoryBytes = 0; ///< the most device memory this executor held (its own allocations)
  uint64_t deviceMemoryUsedBytes = 0; ///< total - free on the device at that point (all users)
  /// CUDA graphs: whether chunks ran as graph replays; when not, or when
  /// some part fell back to plain launches, why (empty otherwise).
  bool cudaGraph = false;
  std::string cudaGraphNote;
  /// GpuRunOptions::profileSteps: per program step, its GPU time summed
  /// over the chunks (ms, CUDA events) and the number of chunks it ran in
  /// (a step of size 0 still counts). Empty otherwise.
  std::vector<double> stepMs;
  std::vector<int64_t> stepCalls;
  /// GpuLoadOptions::tuneGemms: the shapes tuned during this run (the
  /// first), each with the heuristic's first choice's and the chosen
  /// algorithm's time. Empty in later runs and without tuning.
  std::vector<GemmTuning> gemmTuning;
  int64_t graphCaptures = 0;    ///< graphs captured and instantiated during this run
  int64_t graphLaunches = 0;    ///< cuGraphLaunch calls
  int64_t graphNodeUpdates = 0; ///< kernel nodes whose parameters were updated
  int64_t graphNodes = 0;       ///< nodes of the graphs launched (sum over the distinct graphs)
  // Context parallelism (GpuRunOptions::virtualRanks > 1 or
  // contextParallel); empty otherwise.
  int virtualRanks = 0;          ///< N of a virtual run; 0 otherwise
  int ncclRanks = 0;             ///< N of an NCCL run (contextParallel); 0 otherwise
  int cpRank = -1;               ///< NCCL run: this process's rank
  int cpOutputRank = -1;         ///< the rank whose outputs hold the logits
  int64_t cpChunkTokens = 0;     ///< L = S / 2N
  int64_t cpPieces = 0;          ///< compiled chunks of the run
  int64_t cpTailPieces = 0;      ///< pieces the tail (LM head) ran for
  std::vector<std::vector<int>> cpRankChunks;      ///< per rank: its CP chunks
  std::vector<CpLayerTraffic> cpRing;              ///< per layer: the ring's traffic
  std::vector<double> cpRingMs;                    ///< per layer: the ring's copies (GPU events)
  /// Per rank: the collectives it issued (an NCCL run: only cpRank's is
  /// filled, the others are empty).
  std::vector<std::vector<CpCollective>> cpRankLog;
  bool cpCollectivesMatch = false; ///< collectivesMatch(cpRankLog) (virtual runs)
  std::string cpCollectivesNote;   ///< why not, when they do not match
  uint64_t cpExtraBytes = 0;       ///< device memory of the other ranks' caches and pieces' arenas
  // Tensor parallelism (all_reduce steps; with T = 1 they are copies).
  int tpRanks = 0;        ///< T of a tensor-parallel run (T > 1); 0 otherwise
  int tpRank = -1;        ///< this executor's rank (T > 1)
  std::string tpMode;     ///< "virtual", "nccl" or "solo" (T > 1)
  std::vector<TpCollective> tpLog; ///< the all-reduces this rank issued, in order
  int64_t allReduces = 0, allReduceBytes = 0; ///< all_reduce steps run (not empty), their bytes
  /// Time in the all-reduces: virtual, host wall time (download, waiting for
  /// the other ranks, sum, upload); NCCL, GPU time of the ncclAllReduce
  /// kernels (waiting for peers included).
  double allReduceMs = 0;
};

class GpuExecutor {
public:
  GpuExecutor();
  ~GpuExecutor();
  GpuExecutor(const GpuExecutor &) = delete;
  GpuExecutor &operator=(const GpuExecutor &) = delete;

  /// True when the driver loads and at least one GPU is present; otherwise
  /// false with `reason` (the driver's error, "no CUDA-capable device", or
  /// "built without CUDA headers"). Cheap after the first call.
  static bool available(std::string &reason);

  /// The GPUs the driver sees (CUDA_VISIBLE_DEVICES applies); -1 with
  /// `reason` when the driver does not load or answer.
  static int deviceCount(std::string &reason);

  /// The driver's name of GPU `ordinal` ("NVIDIA H200") and its compute
  /// capability (9, 0); false with `reason` when the driver does not load
  /// or has no such GPU.
  static bool deviceIdentity(int ordinal, std::string &name, int &ccMajor, int &ccMinor,
                             std::string &reason);

  /// Prepares `program` of `artifact` (whose parsed manifest is `manifest`)
  /// on GPU options.device: checks the compute capability against
  /// program.arch, loads the modules (cubin on a GPU of the arch's major
  /// version, else PTX) and resolves every kernel, sets the dynamic shared
  /// memory limit of kernels that need over 48 KiB, checks that the plan fits
  /// the free GPU memory (else Resources, saying how much is needed),
  /// allocates it, streams every weight from its file through pinned staging
  /// buffers (converting float32 to the buffer's bfloat16/float16 on the
  /// host), and uploads the consts. The executor keeps copies of `manifest`
  /// and `program`; `artifact` is only read during the call. Call once.
  GpuStatus load(const Artifact &artifact, const Manifest &manifest, const GpuProgram &program,
                 const GpuLoadOptions &options, std::string &error);

  /// Runs the loaded program on `inputs` (one per manifest input, in order,
  /// dtype as the manifest says; the chunked input is token ids [1, S]).
  /// Fills `outputs` (one per manifest output: name, dtype, shape with
  /// dynamic dims sized from the inputs, data) and `stats`. Every step is
  /// checked for the run's chunks before anything is uploaded (BadInput with
  /// the step index and field). Driver failures during the steps are
  /// Internal, naming the step.
  GpuStatus run(const std::vector<HostTensor> &inputs, const GpuRunOptions &options,
                std::vector<HostTensor> &outputs, GpuRunStats &stats, std::string &error);

  /// The GPU, after a successful load().
  const GpuDeviceInfo &device() const;
  /// What load() did.
  const GpuLoadStats &loadStats() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace h20::runtime

#endif // H20_RUNTIME_GPUEXECUTOR_H
