//===- GpuExecutorImpl.h - the GPU executor's state, shared by its parts -===//
//
// Private to lib/Runtime/Cuda. GpuExecutor (GpuExecutor.h) is one Impl; its
// methods are spread over files by role, after IREE's CUDA HAL driver:
//   GpuExecutor.cpp            the API: load() and run() in phases
//   GpuLoad.cpp                modules, kernels, weights, consts
//   GpuSteps.cpp               one launcher per step kind (launch,
//                              attention, gemm, memset, copy)
//   GpuCollectives.cpp         NCCL: the communicator, all-reduce steps,
//                              waiting under the watchdog
//   GpuGraphs.cpp              the CUDA-graph cache of the chunk loop
//   GpuChunkRun.cpp            the runner of one GPU and of tensor
//                              parallelism: the chunk loop
//   GpuContextParallelRun.cpp  the context-parallel runner (virtual or
//                              NCCL ranks): layer-major pieces and the ring
//
//===----------------------------------------------------------------------===//
#ifndef H20_LIB_RUNTIME_CUDA_GPUEXECUTORIMPL_H
#define H20_LIB_RUNTIME_CUDA_GPUEXECUTORIMPL_H

#include "CublasLtGemm.h"
#include "h20/Runtime/Cuda/CudaDriver.h"
#include "h20/Runtime/Cuda/GpuExecutor.h"
#include "h20/Runtime/Cuda/LaunchParams.h"
#include "h20/Runtime/Parallel/NcclComm.h"
#include "h20/Runtime/RunPlan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace h20::runtime {
namespace detail {

constexpr int64_t kDefaultSharedMemory = 48 << 10;

inline double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

inline std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

/// True when the resolved step does nothing (a grid of 0, no bytes, ...).
inline bool isEmpty(const ResolvedStep &r) {
  if (auto *l = std::get_if<ResolvedLaunch>(&r))
    return l->empty;
  if (auto *g = std::get_if<ResolvedGemm>(&r))
    return g->empty;
  if (auto *m = std::get_if<ResolvedMemset>(&r))
    return m->bytes == 0;
  if (auto *a = std::get_if<ResolvedAllReduce>(&r))
    return a->bytes == 0;
  return std::get<ResolvedCopy>(r).bytes == 0;
}

/// Waits until `event` (else all of `stream`'s work) completed, polling
/// every 0.2 ms, and checks `comm` for asynchronous errors meanwhile.
/// Ok when done. PeerFailed with `error` when NCCL reported an error or,
/// with `timeoutS` > 0, that many seconds passed (a peer died or hangs);
/// Internal when the GPU work itself failed. On any failure the
/// communicator is aborted (a peer that died never leaves this rank
/// waiting in an NCCL kernel). (GpuCollectives.cpp)
GpuStatus waitForNccl(const CudaApi &cu, NcclComm &comm, CUstream stream, CUevent event,
                      double timeoutS, const std::string &what, std::string &error);

} // namespace detail

struct GpuExecutor::Impl {
  const CudaApi *cu = nullptr;
  const CublasLtApi *lt = nullptr;
  GpuDeviceInfo info;
  GpuLoadStats loadStats;
  Manifest m;
  GpuProgram p;
  BufferPlan plan;
  /// Per buffer: the earlier weight buffer whose memory it shares (-1:
  /// none). Only with GpuLoadOptions::dummyWeights.
  std::vector<int> sameAs;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  std::vector<CUmodule> modules;
  std::vector<CUfunction> stepFunction; ///< per step; null for gemm/memset/copy
  CUdeviceptr base = 0, workspace = 0;
  /// The host allocation of the tables placed on the host (BufferPlan::
  /// hostBytes; page-locked, mapped): its host address and the address
  /// kernels use for it.
  void *hostPtr = nullptr;
  CUdeviceptr hostBase = 0;
  uint64_t workspaceBytes = 0;
  bool tuneGemms = false; ///< GpuLoadOptions::tuneGemms
  bool gemmsTuned = false; ///< the first run tuned them
  std::unique_ptr<CublasLtGemm> gemm;
  uint64_t heldBytes = 0, peakBytes = 0, peakDeviceUsed = 0;
  bool loaded = false, loadTried = false;
  bool syncEachStep = false; ///< H20_GPU_SYNC=1: find the step of an asynchronous fault
  std::unique_ptr<NcclComm> nccl; ///< GpuLoadOptions::ncclRanks >= 1 and NCCL came up
  double ncclTimeoutS = 30;       ///< GpuLoadOptions::ncclTimeoutS
  CUdeviceptr ncclScratch = 0;    ///< 64 floats: the self-check's, then the barrier's

  // Tensor parallelism (GpuExecutor.h).
  int tpRanks = 1, tpRank = 0;            ///< T (manifest) and this executor's rank
  HostAllReduceGroup *tpGroup = nullptr;  ///< a virtual run's group (during run())
  bool tpSolo = false;                    ///< a solo rank's run: all-reduces skipped
  GpuRunStats *tpStats = nullptr;         ///< the current run's stats (during run())
  int64_t tpChunk = 0;                    ///< the chunk (or piece) being run
  std::vector<uint8_t> tpHost;            ///< virtual: a rank's all-reduce bytes
  CUevent arBefore = nullptr, arAfter = nullptr; ///< NCCL: around the last all-reduce
  bool arPending = false;                 ///< NCCL: an all-reduce not yet waited for
  size_t arStep = 0;                      ///< NCCL: its step
  int64_t arChunk = 0;                    ///< NCCL: its chunk
  /// NCCL: waits (watchdog on) for the all-reduce enqueued last, adds its
  /// GPU time to the stats.
  bool waitAllReduce();
  bool allReduce(size_t index, const ResolvedAllReduce &r);

  /// One kernel launch of a launch step, parameters included.
  struct KernelLaunch {
    CUfunction f = nullptr;
    unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, smem = 0;
    KernelParams params;

    bool sameAs(const KernelLaunch &o) const {
      return f == o.f && std::equal(grid, grid + 3, o.grid) &&
             std::equal(block, block + 3, o.block) && smem == o.smem && params == o.params;
    }
  };
  KernelLaunch launchScratch; ///< reused by every plain launch

  // CUDA graphs (see GpuExecutor.h). The steps are cut into segments: runs
  // of steps replayed as one graph, and single steps (gemm, memset, copy
  // naming p0) launched on their own between them.
  struct GraphNode {
    size_t step = 0;
    CUgraphNode node = nullptr; ///< the step's kernel node in `graph`
    KernelLaunch last;          ///< parameters the executable graph holds now
  };
  struct CapturedGraph {
    std::vector<int64_t> key; ///< see graphKey
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<GraphNode> nodes; ///< kernel nodes whose parameters name p0 or n
    int64_t nodeCount = 0;
    int64_t lastRun = -1; ///< the run that last launched it (for GpuRunStats::graphNodes)
  };
  struct Segment {
    size_t begin = 0, end = 0;
    bool graph = false; ///< else one step launched on its own
    bool plain = false; ///< too many distinct graphs: launched step by step from now on
    std::vector<std::unique_ptr<CapturedGraph>> graphs;
  };
  std::vector<Segment> segments;
  std::vector<StepSymbols> symbols; ///< per step
  std::string graphsOff; ///< non-empty: why no graphs are used any more (capture failed, no API)
  int64_t runCount = 0;

  bool isKernel(size_t i) const { return std::holds_alternative<LaunchStep>(p.steps[i]); }
  void planSegments();
  void destroyGraphs();
  std::vector<int64_t> graphKey(const Segment &seg, const std::vector<ResolvedStep> &rs) const;
  bool capture(Segment &seg, const std::vector<ResolvedStep> &rs, std::vector<int64_t> key,
               CapturedGraph *&out, std::string &why);
  bool runSegment(Segment &seg, const std::vector<ResolvedStep> &rs, GpuRunStats &stats);

  GpuStatus status = GpuStatus::Ok;
  std::string error;

  ~Impl();

  /// False (recording status and error) when `r` is not success; out of
  /// memory is always Resources.
  bool check(CUresult r, const std::string &what, GpuStatus kind = GpuStatus::Internal) {
    if (r == CUDA_SUCCESS)
      return true;
    status = r == CUDA_ERROR_OUT_OF_MEMORY ? GpuStatus::Resources : kind;
    error = what + ": " + cudaErrorText(*cu, r);
    return false;
  }
  bool fail(GpuStatus s, const std::string &message) {
    status = s;
    error = message;
    return false;
  }

  bool alloc(CUdeviceptr &ptr, uint64_t bytes, const std::string &what) {
    CUresult r = cu->cuMemAlloc(&ptr, std::max<uint64_t>(bytes, 256));
    if (r != CUDA_SUCCESS) {
      ptr = 0;
      size_t freeB = 0, totalB = 0;
      cu->cuMemGetInfo(&freeB, &totalB);
      return check(r, "allocating " + detail::gib(bytes) + " of GPU memory for " + what + " (" +
                          detail::gib(freeB) + " free of " + detail::gib(totalB) + ")");
    }
    heldBytes += bytes;
    if (heldBytes > peakBytes)
      peakBytes = heldBytes;
    size_t freeB = 0, totalB = 0;
    if (cu->cuMemGetInfo(&freeB, &totalB) == CUDA_SUCCESS)
      peakDeviceUsed = std::max<uint64_t>(peakDeviceUsed, totalB - freeB);
    return true;
  }
  void release(CUdeviceptr &ptr, uint64_t bytes) {
    if (!ptr)
      return;
    cu->cuMemFree(ptr);
    ptr = 0;
    heldBytes -= bytes;
  }

  /// Where each buffer is now: base + plan.offsets, except while a virtual
  /// context-parallel run binds a rank's KV cache and a piece's arena.
  std::vector<CUdeviceptr> addr;
  CUdeviceptr address(int buffer) const { return addr[buffer]; }
  void resetAddresses() {
    addr.resize(plan.offsets.size());
    for (size_t b = 0; b < plan.offsets.size(); ++b)
      addr[b] = (plan.onHost[b] ? hostBase : base) + plan.offsets[b];
  }
  /// The host address of buffer `b` when the plan keeps it in the host
  /// allocation, else null.
  char *hostAddress(int b) const {
    return plan.onHost[static_cast<size_t>(b)]
               ? static_cast<char *>(hostPtr) + plan.offsets[static_cast<size_t>(b)]
               : nullptr;
  }
  /// Allocates the plan's host buffers (pinned, mapped into the GPU's
  /// address space); true when there are none.
  bool allocHost();
  /// Copies `bytes` from host memory `src` to buffer `bi` at `offset`:
  /// enqueued on the stream for a device buffer (`src` must stay valid
  /// until the stream reaches it), done now for a host one.
  bool copyIn(int bi, uint64_t offset, const void *src, uint64_t bytes, const std::string &what);

  bool loadModules(const Artifact &artifact);
  bool resolveKernels();
  /// The cuBLASLt call of gemm step `index` as resolved for this chunk.
  GemmCall gemmCall(size_t index, const ResolvedGemm &r);
  /// GpuLoadOptions::tuneGemms: waits for the stream, then tunes every
  /// (ungrouped) gemm step of `rs`; the records go to stats.gemmTuning.
  bool tuneGemmSteps(const std::vector<ResolvedStep> &rs, GpuRunStats &stats);
  bool uploadWeights(const GpuLoadOptions &o);
  /// GpuLoadOptions::dummyWeights: fills weight buffer `bi` (manifest
  /// weight `w`) through the staging buffers instead of reading its file.
  bool uploadDummyWeight(int bi, const WeightSpec &w, void **stage, CUevent *done, bool *used,
                         int &slot, uint64_t stageBytes);
  /// The file of weight `w` (its model's directory, or --weights-dir),
  /// checked to hold `fileBytes` bytes at w's offset and to be the size it
  /// had when compiled; "" after fail() otherwise.
  std::string weightFile(const WeightSpec &w, const GpuLoadOptions &o, int64_t fileBytes);
  /// A derived weight (WeightSpec::derive, h20-quantize-linears): reads the
  /// stored tensor whole, computes buffer `bi`'s bytes on the host
  /// (deriveWeight) and uploads them.
  bool uploadDerivedWeight(int bi, const WeightSpec &w, const GpuLoadOptions &o);
  /// The stored tensor uploadDerivedWeight read last (file, offset), kept
  /// for the next weight derived from it (a linear's codes, then its
  /// scales: one read, not two); emptied when the weights are loaded.
  std::pair<std::string, int64_t> derivedSourceKey;
  std::vector<uint8_t> derivedSource;
  bool uploadConsts(const Artifact &artifact);
  bool initNccl(const GpuLoadOptions &o);
  std::string where(size_t index) const;
  /// Fills `k` for launch step `index` resolved as `step` (not empty).
  void buildKernel(size_t index, const ResolvedStep &step, KernelLaunch &k) const;
  bool launchKernel(size_t index, KernelLaunch &k);
  bool execute(size_t index, const ResolvedStep &step);

  // One run(): GpuExecutor.cpp plans it (RunPlan), uploads the inputs and
  // hands it to a runner; the runner enqueues every chunk's steps.
  struct RunState;
  /// The runner of one GPU and of tensor parallelism: every chunk's steps
  /// in order, as CUDA graphs where they can be (GpuChunkRun.cpp).
  bool runChunks(RunState &rs);
  /// Context parallelism (GpuContextParallelRun.cpp): the other ranks'
  /// caches and the other pieces' arenas, allocated before the run starts;
  /// then the layer-major run of the pieces with the K/V ring per layer.
  bool prepareContextParallel(RunState &rs);
  bool runContextParallel(RunState &rs);
  /// NCCL: waits for layer `l`'s ring: first without a time limit for this
  /// rank's own work before it, then under the watchdog for the ring.
  bool waitRing(RunState &rs, size_t l);
  /// The rows outputs of chunk `c` (symbols `sym`) to the host.
  bool downloadRows(RunState &rs, size_t c, const SymbolValues &sym);
  /// Chunk `c`'s GPU time; reportChunk also calls GpuRunOptions::progress.
  bool chunkElapsed(RunState &rs, size_t c, double &ms);
  bool reportChunk(RunState &rs, size_t c);
  /// The run's GPU times (uploads, prefill, downloads, chunks, rings) and
  /// peak memory into its stats.
  bool collectTimings(RunState &rs);
};

/// The context-parallel device memory of one run: the other virtual ranks'
/// KV caches (state buffers) and the other pieces' arenas and chunked-input
/// buffers (an NCCL rank: its own pieces' only), in one allocation, and
/// where each lies in it.
struct CpMemory {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  std::vector<uint64_t> stateRel; ///< per buffer: a state buffer's offset in a rank's cache
  std::vector<int> stateBufs, tempBufs;
  uint64_t stateSpan = 0, arenaSpan = 0, inputSpan = 0;
  uint64_t arenasAt = 0, inputsAt = 0; ///< offsets of the arenas and inputs in `ptr`
  int chunkedInput = -1;               ///< the chunked input's buffer
  /// Per piece: its arena/input slot (0: the plan's own); -1 for pieces of
  /// other NCCL ranks.
  std::vector<int64_t> slot;
};

/// What the phases of one run() share. Its destructor waits for the
/// stream, points the buffers back at the plan, and frees the run's
/// memory and events (on every path, success or failure).
struct GpuExecutor::Impl::RunState {
  Impl &I;
  const RunPlan &plan;
  const GpuRunOptions &options;
  std::vector<HostTensor> &outputs;
  GpuRunStats &stats;
  CUdeviceptr ids = 0; ///< the padded token ids, uploaded once
  uint64_t idsBytes = 0;
  /// [0, 1]: around the input upload; [2, 3]: around the output download;
  /// then chunks + 1 chunk boundaries; then 2 per context-parallel layer
  /// (before and after its ring).
  std::vector<CUevent> events;
  CpMemory cp;
  size_t cpLayers = 0;
  bool graphs = false; ///< the chunk loop replays CUDA graphs
  std::vector<ResolvedStep> resolved; ///< per step, for the chunk being run

  RunState(Impl &impl, const RunPlan &pl, const GpuRunOptions &o, std::vector<HostTensor> &out,
           GpuRunStats &st)
      : I(impl), plan(pl), options(o), outputs(out), stats(st) {}
  RunState(const RunState &) = delete;
  RunState &operator=(const RunState &) = delete;
  ~RunState() {
    I.cu->cuStreamSynchronize(I.stream);
    I.resetAddresses();
    I.release(cp.ptr, cp.bytes);
    for (CUevent e : events)
      if (e)
        I.cu->cuEventDestroy(e);
    I.release(ids, idsBytes);
  }
  CUevent evChunk(size_t c) const { return events[4 + c]; }
  CUevent evRing(size_t i) const { return events[5 + plan.chunks.size() + i]; }
};

} // namespace h20::runtime

#endif // H20_LIB_RUNTIME_CUDA_GPUEXECUTORIMPL_H
