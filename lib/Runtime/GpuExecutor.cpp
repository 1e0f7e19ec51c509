//===- GpuExecutor.cpp - run a GPU program on one GPU --------------------===//
//
// One context (the device's primary one, which cuBLASLt also uses), one
// stream, one device allocation planned by planBuffers plus the cuBLASLt
// workspace and, per run, the padded token ids. Every driver call is
// checked; failures name the step.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/GpuExecutor.h"
#include "h20/Runtime/RunPlan.h"

#ifndef H20_HAVE_CUDA_HEADERS
#define H20_HAVE_CUDA_HEADERS 0
#endif

#if H20_HAVE_CUDA_HEADERS
#include "CublasLtGemm.h"
#include "h20/Runtime/AttentionParams.h"
#include "h20/Runtime/AttentionTma.h"
#include "h20/Runtime/CudaDriver.h"
#include "h20/Runtime/FileUtil.h"
#include "h20/Runtime/NcclComm.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#endif

namespace h20::runtime {

#if !H20_HAVE_CUDA_HEADERS

namespace {
const char *kNoCuda = "no CUDA-capable GPU/driver: this h20 was built without CUDA headers "
                      "(no CUDA toolkit at build time), so it cannot run on the GPU";
}

struct GpuExecutor::Impl {
  GpuDeviceInfo info;
  GpuLoadStats loadStats;
};

GpuExecutor::GpuExecutor() : impl(std::make_unique<Impl>()) {}
GpuExecutor::~GpuExecutor() = default;

bool GpuExecutor::available(std::string &reason) {
  reason = "built without CUDA headers";
  return false;
}

int GpuExecutor::deviceCount(std::string &reason) {
  reason = "built without CUDA headers";
  return -1;
}

GpuStatus GpuExecutor::load(const Artifact &, const Manifest &, const GpuProgram &,
                            const GpuLoadOptions &, std::string &error) {
  error = kNoCuda;
  return GpuStatus::NoDevice;
}

GpuStatus GpuExecutor::run(const std::vector<HostTensor> &, const GpuRunOptions &,
                           std::vector<HostTensor> &, GpuRunStats &, std::string &error) {
  error = kNoCuda;
  return GpuStatus::NoDevice;
}

const GpuDeviceInfo &GpuExecutor::device() const { return impl->info; }
const GpuLoadStats &GpuExecutor::loadStats() const { return impl->loadStats; }

#else // H20_HAVE_CUDA_HEADERS

namespace {

constexpr int64_t kDefaultSharedMemory = 48 << 10;

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

int64_t product(const std::vector<int64_t> &v, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < v.size(); ++i)
    n *= v[i];
  return n;
}


} // namespace

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

  /// One kernel launch of a launch or attention step, parameters included.
  struct KernelLaunch {
    CUfunction f = nullptr;
    unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, smem = 0;
    bool attention = false;
    std::vector<uint64_t> slots; ///< launch: one 8-byte slot per kernel parameter
    H20AttnParams attn{};        ///< attention: the one parameter (zeroed padding)
    std::vector<void *> ptrs;    ///< filled by params()

    /// The kernelParams array for cuLaunchKernel / a kernel node.
    void **params() {
      if (attention) {
        ptrs.assign(1, &attn);
      } else {
        ptrs.resize(slots.size());
        for (size_t i = 0; i < slots.size(); ++i)
          ptrs[i] = &slots[i];
      }
      return ptrs.empty() ? nullptr : ptrs.data();
    }
    bool sameAs(const KernelLaunch &o) const {
      return f == o.f && std::equal(grid, grid + 3, o.grid) &&
             std::equal(block, block + 3, o.block) && smem == o.smem &&
             attention == o.attention &&
             (attention ? std::memcmp(&attn, &o.attn, sizeof attn) == 0 : slots == o.slots);
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

  bool isKernel(size_t i) const {
    return std::holds_alternative<LaunchStep>(p.steps[i]) ||
           std::holds_alternative<AttentionStep>(p.steps[i]);
  }
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
      return check(r, "allocating " + gib(bytes) + " of GPU memory for " + what + " (" +
                          gib(freeB) + " free of " + gib(totalB) + ")");
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
      addr[b] = base + plan.offsets[b];
  }

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
  bool uploadConsts(const Artifact &artifact);
  bool initNccl(const GpuLoadOptions &o);
  std::string where(size_t index) const;
  /// Fills `k` for launch/attention step `index` resolved as `step` (not
  /// empty).
  void buildKernel(size_t index, const ResolvedStep &step, KernelLaunch &k) const;
  bool launchKernel(size_t index, KernelLaunch &k);
  bool execute(size_t index, const ResolvedStep &step);
};

namespace {

/// True when the resolved step does nothing (a grid of 0, no bytes, ...).
bool isEmpty(const ResolvedStep &r) {
  if (auto *l = std::get_if<ResolvedLaunch>(&r))
    return l->empty;
  if (auto *g = std::get_if<ResolvedGemm>(&r))
    return g->empty;
  if (auto *a = std::get_if<ResolvedAttention>(&r))
    return a->empty;
  if (auto *m = std::get_if<ResolvedMemset>(&r))
    return m->bytes == 0;
  if (auto *a = std::get_if<ResolvedAllReduce>(&r))
    return a->bytes == 0;
  return std::get<ResolvedCopy>(r).bytes == 0;
}

/// Appends the resolved values of a gemm, memset or copy step.
void appendResolved(const ResolvedStep &r, std::vector<int64_t> &key) {
  if (auto *g = std::get_if<ResolvedGemm>(&r)) {
    key.insert(key.end(), {g->batch, g->m, g->n, g->k});
    for (const ResolvedGemmOperand *o : {&g->a, &g->b, &g->c})
      key.insert(key.end(), {o->buffer, o->offset, o->batchStride, o->rowStride, o->colStride});
  } else if (auto *m = std::get_if<ResolvedMemset>(&r)) {
    key.insert(key.end(), {m->buffer, m->offsetBytes, m->bytes});
  } else if (auto *c = std::get_if<ResolvedCopy>(&r)) {
    key.insert(key.end(), {c->src, c->dst, c->srcOffsetBytes, c->dstOffsetBytes, c->bytes});
  } else if (auto *a = std::get_if<ResolvedAllReduce>(&r)) {
    key.insert(key.end(), {a->src, a->dst, a->srcOffsetBytes, a->dstOffsetBytes, a->bytes});
  }
}

/// Distinct graphs one segment may hold before it is launched step by step
/// (shapes that change with every chunk would recapture every chunk).
constexpr size_t kMaxGraphsPerSegment = 8;

} // namespace

GpuExecutor::Impl::~Impl() {
  if (!cu)
    return;
  if (ctx)
    cu->cuCtxSetCurrent(ctx);
  if (stream)
    cu->cuStreamSynchronize(stream);
  destroyGraphs();
  if (arBefore)
    cu->cuEventDestroy(arBefore);
  if (arAfter)
    cu->cuEventDestroy(arAfter);
  nccl.reset();
  if (ncclScratch)
    cu->cuMemFree(ncclScratch);
  gemm.reset();
  release(workspace, workspaceBytes);
  release(base, plan.totalBytes);
  for (CUmodule mod : modules)
    cu->cuModuleUnload(mod);
  if (stream)
    cu->cuStreamDestroy(stream);
  if (ctx)
    cu->cuDevicePrimaryCtxRelease(dev);
}

GpuExecutor::GpuExecutor() : impl(std::make_unique<Impl>()) {}
GpuExecutor::~GpuExecutor() = default;

const GpuDeviceInfo &GpuExecutor::device() const { return impl->info; }
const GpuLoadStats &GpuExecutor::loadStats() const { return impl->loadStats; }

bool GpuExecutor::available(std::string &reason) {
  int count = deviceCount(reason);
  if (count == 0)
    reason = "the driver sees no GPU";
  return count > 0;
}

int GpuExecutor::deviceCount(std::string &reason) {
  const CudaApi *cu = cudaApi(reason);
  if (!cu)
    return -1;
  int count = 0;
  CUresult r = cu->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    reason = "cuDeviceGetCount failed: " + cudaErrorText(*cu, r);
    return -1;
  }
  return count;
}

bool GpuExecutor::Impl::loadModules(const Artifact &artifact) {
  bool useCubin = info.ccMajor == p.archMajor;
  int cubins = 0, ptxs = 0;
  for (size_t i = 0; i < p.modules.size(); ++i) {
    const GpuModule &mod = p.modules[i];
    std::string what = "module " + std::to_string(i) + (mod.name.empty() ? "" : " ('" + mod.name + "')");
    auto blobBytes = [&](const std::string &name) {
      for (const BlobSpec &b : m.blobs)
        if (b.name == name)
          return std::string(reinterpret_cast<const char *>(artifact.payload.data()) + b.offset,
                             b.size);
      return std::string();
    };
    CUmodule handle = nullptr;
    std::string cubinError;
    if (useCubin && !mod.cubinBlob.empty()) {
      std::string image = blobBytes(mod.cubinBlob);
      CUresult r = cu->cuModuleLoadDataEx(&handle, image.data(), 0, nullptr, nullptr);
      if (r == CUDA_SUCCESS) {
        ++cubins;
        modules.push_back(handle);
        continue;
      }
      handle = nullptr;
      cubinError = cudaErrorText(*cu, r);
      if (mod.ptxBlob.empty())
        return fail(GpuStatus::BadInput, what + ": the cubin does not load on " + info.name +
                                             ": " + cubinError);
    }
    if (mod.ptxBlob.empty())
      return fail(GpuStatus::BadInput,
                  what + " has only a cubin for " + p.arch + ", and " + info.name +
                      " has compute capability " + std::to_string(info.ccMajor) + "." +
                      std::to_string(info.ccMinor) + "; recompile with PTX");
    std::string ptx = blobBytes(mod.ptxBlob); // std::string keeps a NUL after the text
    std::vector<char> log(16384, 0);
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size()))};
    CUresult r = cu->cuModuleLoadDataEx(&handle, ptx.c_str(), 2, opts, values);
    if (r != CUDA_SUCCESS) {
      if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return check(r, what);
      std::string jitLog(log.data(), strnlen(log.data(), log.size()));
      return fail(GpuStatus::BadInput,
                  what + ": the PTX does not load on " + info.name + ": " +
                      cudaErrorText(*cu, r) + (jitLog.empty() ? "" : "\n" + jitLog) +
                      (cubinError.empty() ? "" : "\n(the cubin did not load either: " + cubinError + ")"));
    }
    ++ptxs;
    modules.push_back(handle);
  }
  loadStats.code = cubins && ptxs ? "cubin+ptx" : cubins ? "cubin" : ptxs ? "ptx" : "none";
  return true;
}

bool GpuExecutor::Impl::resolveKernels() {
  std::map<std::pair<int, std::string>, CUfunction> functions;
  std::map<CUfunction, std::pair<int64_t, size_t>> maxSmem; // bytes, first step asking for it
  stepFunction.assign(p.steps.size(), nullptr);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    int module;
    std::string kernel;
    int64_t smem;
    if (auto *l = std::get_if<LaunchStep>(&p.steps[i])) {
      module = l->module, kernel = l->kernel, smem = l->smem;
    } else if (auto *a = std::get_if<AttentionStep>(&p.steps[i])) {
      module = a->module, kernel = a->kernel, smem = a->smem;
    } else {
      continue;
    }
    std::string where = "step " + std::to_string(i) + " (" + stepOpName(p.steps[i]) + ")";
    auto key = std::make_pair(module, kernel);
    auto it = functions.find(key);
    if (it == functions.end()) {
      CUfunction f = nullptr;
      CUresult r = cu->cuModuleGetFunction(&f, modules[module], kernel.c_str());
      if (r != CUDA_SUCCESS)
        return fail(GpuStatus::BadInput, where + ": module " + std::to_string(module) +
                                             " has no kernel '" + kernel + "' (" +
                                             cudaErrorText(*cu, r) + ")");
      it = functions.emplace(key, f).first;
    }
    stepFunction[i] = it->second;
    auto &mx = maxSmem[it->second];
    if (smem > mx.first)
      mx = {smem, i};
  }
  int optin = 0;
  if (!check(cu->cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                      dev),
             "cuDeviceGetAttribute"))
    return false;
  for (auto &[f, mx] : maxSmem) {
    // The 48 KB default bounds static plus dynamic shared memory: a kernel
    // with its own __shared__ arrays needs the opt-in sooner.
    int staticSmem = 0;
    if (!check(cu->cuFuncGetAttribute(&staticSmem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f),
               "cuFuncGetAttribute"))
      return false;
    if (mx.first + staticSmem <= kDefaultSharedMemory)
      continue;
    std::string where = "step " + std::to_string(mx.second) + " (" +
                        stepOpName(p.steps[mx.second]) + ")";
    if (mx.first + staticSmem > optin)
      return fail(GpuStatus::BadInput, where + ": the kernel asks for " +
                                           std::to_string(mx.first) +
                                           " bytes of dynamic shared memory beside " +
                                           std::to_string(staticSmem) + " static; " + info.name +
                                           " allows " + std::to_string(optin) + " in all");
    if (!check(cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(mx.first)),
               where + ": setting the kernel's dynamic shared memory to " +
                   std::to_string(mx.first) + " bytes",
               GpuStatus::BadInput))
      return false;
  }
  return true;
}

bool GpuExecutor::Impl::uploadWeights(const GpuLoadOptions &o) {
  uint64_t stageBytes = std::max<uint64_t>(o.stagingBytes, 1 << 16);
  void *stage[2] = {nullptr, nullptr};
  CUevent done[2] = {nullptr, nullptr};
  bool used[2] = {false, false};
  struct Cleanup {
    Impl &self;
    void **stage;
    CUevent *done;
    ~Cleanup() {
      self.cu->cuStreamSynchronize(self.stream);
      for (int s = 0; s < 2; ++s) {
        if (stage[s])
          self.cu->cuMemFreeHost(stage[s]);
        if (done[s])
          self.cu->cuEventDestroy(done[s]);
      }
    }
  } cleanup{*this, stage, done};
  bool any = std::any_of(p.buffers.begin(), p.buffers.end(),
                         [](const GpuBuffer &b) { return b.kind == BufferKind::Weight; });
  if (!any)
    return true;
  for (int s = 0; s < 2; ++s) {
    if (!check(cu->cuMemAllocHost(&stage[s], stageBytes),
               "allocating " + gib(stageBytes) + " of pinned host memory for weight staging",
               GpuStatus::Resources) ||
        !check(cu->cuEventCreate(&done[s], CU_EVENT_DISABLE_TIMING), "cuEventCreate"))
      return false;
  }
  std::vector<uint8_t> raw; // file bytes of a piece that needs converting
  int slot = 0;
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const GpuBuffer &b = p.buffers[bi];
    if (b.kind != BufferKind::Weight)
      continue;
    const WeightSpec &w = m.weights[b.index];
    std::string name = "weight '" + w.name + "'";
    if (o.dummyWeights) {
      if (!sameAs.empty() && sameAs[bi] >= 0)
        continue; // filled as the buffer it shares
      if (!uploadDummyWeight(static_cast<int>(bi), w, stage, done, used, slot, stageBytes))
        return false;
      continue;
    }
    if (!w.offset || w.file.empty())
      return fail(GpuStatus::BadInput, name + " is stored in typed protobuf fields, not raw bytes; "
                                              "re-export the model with raw_data or external data");
    // The rank's slice of the stored tensor (all of it without a shard).
    ShardSlice slice;
    std::string err;
    if (!shardSlice(w, tpRank, slice, err))
      return fail(GpuStatus::BadInput, err);
    int64_t srcEs = dtypeSize(w.dtype), dstEs = dtypeSize(b.dtype);
    int64_t fileBytes = slice.fullElements * srcEs;
    if (w.length && *w.length != fileBytes)
      return fail(GpuStatus::BadInput, name + " is " + std::to_string(*w.length) +
                                           " bytes in the model but its " +
                                           (w.shard ? "full shape" : "shape") + " needs " +
                                           std::to_string(fileBytes));
    if (slice.deviceElements() * dstEs != b.bytes)
      return fail(GpuStatus::BadInput, name + ": its buffer has " + std::to_string(b.bytes) +
                                           " bytes, the slice needs " +
                                           std::to_string(slice.deviceElements() * dstEs));
    std::string file = (o.weightsDir.empty() ? m.modelDir : o.weightsDir) + "/" + w.file;
    int64_t size = fileSize(file);
    if (size < 0)
      return fail(GpuStatus::BadInput,
                  name + ": file '" + file + "' is missing (moved? give --weights-dir)");
    if (w.fileSize && size != *w.fileSize)
      return fail(GpuStatus::BadInput, "weight file '" + file + "' has " + std::to_string(size) +
                                           " bytes, but had " + std::to_string(*w.fileSize) +
                                           " when the artifact was compiled: recompile it");
    if (*w.offset < 0 || *w.offset > size || fileBytes > size - *w.offset)
      return fail(GpuStatus::BadInput, name + ": file '" + file + "' ends before byte " +
                                           std::to_string(*w.offset + fileBytes));
    bool convert = w.dtype != b.dtype;
    int64_t perPiece = static_cast<int64_t>(stageBytes) / std::max(srcEs, dstEs);
    CUdeviceptr dst = address(static_cast<int>(bi));
    for (const ShardRead &rd : planShardReads(slice, perPiece)) {
      if (used[slot] && !check(cu->cuEventSynchronize(done[slot]), "uploading " + name))
        return false;
      const int64_t n = rd.rows * rd.runElements;
      const bool contiguous = rd.rows == 1 || rd.runElements == rd.strideElements;
      uint64_t off = static_cast<uint64_t>(*w.offset + rd.fileElement * srcEs);
      if (!convert && contiguous) {
        if (!readFileRange(file, off, static_cast<uint64_t>(n * srcEs), stage[slot], err))
          return fail(GpuStatus::BadInput, name + ": " + err);
      } else {
        // Read the span (gaps between a slice's runs included), keep the runs.
        raw.resize(static_cast<size_t>(rd.spanElements() * srcEs));
        if (!readFileRange(file, off, raw.size(), raw.data(), err))
          return fail(GpuStatus::BadInput, name + ": " + err);
        for (int64_t row = 0; row < rd.rows; ++row)
          convertElements(w.dtype, raw.data() + row * rd.strideElements * srcEs, b.dtype,
                          static_cast<uint8_t *>(stage[slot]) + row * rd.runElements * dstEs,
                          static_cast<size_t>(rd.runElements));
      }
      if (!check(cu->cuMemcpyHtoDAsync(dst + rd.deviceElement * dstEs, stage[slot], n * dstEs,
                                       stream),
                 "uploading " + name) ||
          !check(cu->cuEventRecord(done[slot], stream), "uploading " + name))
        return false;
      used[slot] = true;
      slot ^= 1;
    }
  }
  return check(cu->cuStreamSynchronize(stream), "uploading the weights");
}

bool GpuExecutor::Impl::uploadDummyWeight(int bi, const WeightSpec &w, void **stage,
                                          CUevent *done, bool *used, int &slot,
                                          uint64_t stageBytes) {
  // Uniform in [-a, a] with a = sqrt(3 / fan_in), i.e. variance 1 / fan_in
  // (fan_in: the second-to-last dim, the reduced one of a [.., K, N] MatMul
  // weight), so activations keep their scale through the layers and router
  // logits differ between tokens (balanced expert loads); 1-D weights (norm
  // scales, biases, sinks) are 1, integer ones 0. A splitmix64 stream seeded by the weight's
  // index; one staging buffer of values is generated and repeated over the
  // weight: reproducible, and cheap for tens of GB.
  const GpuBuffer &b = p.buffers[bi];
  if (b.dtype != "float32" && b.dtype != "float16" && b.dtype != "bfloat16")
    // Integer tables (indices, hashes): zeros, which index validly.
    return check(cu->cuMemsetD8Async(address(bi), 0, static_cast<size_t>(b.bytes), stream),
                 "zeroing dummy weight '" + w.name + "'");
  const int64_t es = dtypeSize(b.dtype);
  const int64_t count = b.bytes / es;
  const int64_t fanIn = w.shape.size() >= 2 ? std::max<int64_t>(1, w.shape[w.shape.size() - 2]) : 0;
  const double a = fanIn ? std::sqrt(3.0 / static_cast<double>(fanIn)) : 0.0;
  const int64_t perPiece = std::min<int64_t>(count, static_cast<int64_t>(stageBytes) / es);
  std::vector<float> values(static_cast<size_t>(perPiece));
  uint64_t state = 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(b.index) + 1);
  for (float &v : values) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
    v = fanIn ? static_cast<float>((2.0 * u - 1.0) * a) : 1.0f;
  }
  const std::string name = "dummy weight '" + w.name + "'";
  for (int s = 0; s < 2; ++s) {
    if (used[s] && !check(cu->cuEventSynchronize(done[s]), "uploading " + name))
      return false;
    used[s] = false;
  }
  // Both staging buffers hold the same values: uploads alternate without
  // waiting on one buffer.
  for (int s = 0; s < 2; ++s)
    convertElements("float32", values.data(), b.dtype, stage[s], values.size());
  const CUdeviceptr dst = address(bi);
  for (int64_t doneElems = 0; doneElems < count;) {
    const int64_t n = std::min(perPiece, count - doneElems);
    if (!check(cu->cuMemcpyHtoDAsync(dst + doneElems * es, stage[slot], n * es, stream),
               "uploading " + name))
      return false;
    doneElems += n;
  }
  return check(cu->cuStreamSynchronize(stream), "uploading " + name);
}

bool GpuExecutor::Impl::uploadConsts(const Artifact &artifact) {
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const GpuBuffer &b = p.buffers[bi];
    if (b.kind != BufferKind::Const || b.bytes == 0)
      continue;
    const BlobSpec *blob = nullptr;
    for (const BlobSpec &s : m.blobs)
      if (s.name == b.blob)
        blob = &s;
    if (!blob)
      return fail(GpuStatus::BadInput, "buffer " + std::to_string(bi) + ": no blob '" + b.blob + "'");
    const uint8_t *src = artifact.payload.data() + blob->offset + b.blobOffset;
    if (!check(cu->cuMemcpyHtoD(address(static_cast<int>(bi)), src, static_cast<size_t>(b.bytes)),
               "uploading const buffer " + std::to_string(bi)))
      return false;
  }
  return true;
}

/// Waits until `event` (else all of `stream`'s work) completed, polling
/// every 0.2 ms, and checks `comm` for asynchronous errors meanwhile.
/// Ok when done. PeerFailed with `error` when NCCL reported an error or,
/// with `timeoutS` > 0, that many seconds passed (a peer died or hangs);
/// Internal when the GPU work itself failed. On any failure the
/// communicator is aborted (a peer that died never leaves this rank
/// waiting in an NCCL kernel).
static GpuStatus waitForNccl(const CudaApi &cu, NcclComm &comm, CUstream stream, CUevent event,
                             double timeoutS, const std::string &what, std::string &error) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    CUresult r = event ? cu.cuEventQuery(event) : cu.cuStreamQuery(stream);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
      error = what + ": " + cudaErrorText(cu, r);
      comm.abort();
      return GpuStatus::Internal;
    }
    if (r == CUDA_SUCCESS || i % 64 == 0) {
      std::string asyncError;
      if (!comm.checkAsync(asyncError)) {
        error = what + ": " + asyncError;
        comm.abort();
        return GpuStatus::PeerFailed;
      }
      if (r == CUDA_SUCCESS)
        return GpuStatus::Ok;
      double waited = msSince(t0) / 1000.0;
      if (timeoutS > 0 && waited > timeoutS) {
        error = what + " did not finish within " + std::to_string(int(timeoutS)) +
                " s (a peer rank died or hangs?); the NCCL communicator was aborted";
        comm.abort();
        return GpuStatus::PeerFailed;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

/// The communicator (unique id, init rank), checked by one all-reduce.
/// With one rank any failure leaves NCCL off and says why in
/// loadStats.nccl (one GPU does not need it) and the call returns true;
/// with N > 1 ranks a failure fails load().
bool GpuExecutor::Impl::initNccl(const GpuLoadOptions &o) {
  auto t0 = std::chrono::steady_clock::now();
  std::string why;
  const bool multi = o.ncclRanks > 1;
  // With N > 1 ranks the status says whose fault a failure is.
  GpuStatus status = GpuStatus::PeerFailed;
  auto unavailable = [&](const std::string &reason) {
    loadStats.nccl = "unavailable: " + reason;
    loadStats.ncclInitMs = msSince(t0);
    if (!multi)
      return true;
    return fail(status, "NCCL: " + reason);
  };
  if (!ncclAvailable(why)) {
    status = GpuStatus::BadInput;
    return unavailable(why);
  }
  NcclComm::UniqueId id;
  auto comm = std::make_unique<NcclComm>();
  bool idTimedOut = false;
  bool gotId = multi ? NcclComm::exchangeUniqueId(o.ncclIdFile, o.ncclRank, o.ncclTimeoutS, id,
                                                  why, &idTimedOut)
                     : NcclComm::newUniqueId(id, why);
  if (!gotId && multi && !idTimedOut)
    status = GpuStatus::BadInput; // the id file cannot be written or read
  CUcontext context = ctx;
  const CudaApi *api = cu;
  if (!gotId || !comm->init(o.ncclRanks, o.ncclRank, id, why, multi ? o.ncclTimeoutS : 0,
                            [api, context] { api->cuCtxSetCurrent(context); }))
    return unavailable(why);
  // Self-check: all-reduce (sum) 64 floats in place; every rank holds
  // i + 1 + rank, so the sum is ranks * (i + 1) + ranks * (ranks - 1) / 2.
  const size_t count = 64;
  std::vector<float> host(count), back(count, -1.0f);
  for (size_t i = 0; i < count; ++i)
    host[i] = static_cast<float>(i + 1 + o.ncclRank);
  CUdeviceptr buf = 0;
  CUresult r = cu->cuMemAlloc(&buf, count * sizeof(float));
  if (r != CUDA_SUCCESS) {
    comm->abort();
    status = GpuStatus::Resources;
    return unavailable("allocating the all-reduce check buffer: " + cudaErrorText(*cu, r));
  }
  bool ok = (r = cu->cuMemcpyHtoD(buf, host.data(), count * sizeof(float))) == CUDA_SUCCESS;
  if (!ok) {
    why = "cuMemcpyHtoD: " + cudaErrorText(*cu, r);
    status = GpuStatus::Internal;
  }
  // Waits for the stream's NCCL work under the watchdog; a failure sets
  // `status` to whose fault it is.
  auto waitStream = [&](const char *what) {
    GpuStatus w = waitForNccl(*cu, *comm, stream, nullptr, o.ncclTimeoutS, what, why);
    if (w != GpuStatus::Ok)
      status = w;
    return w == GpuStatus::Ok;
  };
  ok = ok && comm->allReduceSumF32(buf, buf, count, stream, why) &&
       waitStream("the all-reduce self-check");
  if (ok && (r = cu->cuMemcpyDtoH(back.data(), buf, count * sizeof(float))) != CUDA_SUCCESS) {
    why = "cuMemcpyDtoH: " + cudaErrorText(*cu, r);
    status = GpuStatus::Internal;
    ok = false;
  }
  for (size_t i = 0; ok && i < count; ++i) {
    double ranks = o.ncclRanks;
    float expect = static_cast<float>(ranks * double(i + 1) + ranks * (ranks - 1) / 2);
    if (back[i] != expect) {
      why = "the all-reduce self-check gave " + std::to_string(back[i]) + " at element " +
            std::to_string(i) + ", expected " + std::to_string(expect);
      status = GpuStatus::Internal;
      ok = false;
    }
  }
  // N > 1: one tiny send/receive with the ring neighbours, so NCCL sets up
  // the point-to-point connections the ring uses now, under the watchdog,
  // instead of inside the first prefill's ncclGroupEnd.
  if (ok && multi) {
    int next = (o.ncclRank + 1) % o.ncclRanks, prev = (o.ncclRank + o.ncclRanks - 1) % o.ncclRanks;
    ok = comm->groupSendRecv({{true, next, buf, 4}, {false, prev, buf + 4, 4}}, stream, why) &&
         waitStream("connecting to the ring neighbours");
  }
  if (!ok) {
    cu->cuMemFree(buf);
    comm->abort();
    return unavailable(why);
  }
  // Every rank has joined: the id file is no longer needed, and a later
  // job must not read this job's id from it.
  if (multi && o.ncclRank == 0)
    std::remove(o.ncclIdFile.c_str());
  ncclScratch = buf;
  nccl = std::move(comm);
  ncclTimeoutS = o.ncclTimeoutS;
  loadStats.nccl = ncclVersionText();
  loadStats.ncclRanks = nccl->ranks();
  loadStats.ncclRank = nccl->rank();
  loadStats.ncclInitMs = msSince(t0);
  return true;
}

GpuStatus GpuExecutor::load(const Artifact &artifact, const Manifest &manifest,
                            const GpuProgram &program, const GpuLoadOptions &options,
                            std::string &error) {
  Impl &I = *impl;
  auto done = [&](bool ok) {
    if (ok)
      return GpuStatus::Ok;
    error = I.error;
    return I.status;
  };
  if (I.loadTried)
    return done(I.fail(GpuStatus::Internal, "GpuExecutor::load called twice"));
  I.loadTried = true;
  if (options.ncclRanks > 1 && options.ncclIdFile.empty())
    return done(I.fail(GpuStatus::BadInput,
                       "ncclRanks = " + std::to_string(options.ncclRanks) +
                           " needs ncclIdFile: the file through which rank 0 shares the NCCL "
                           "unique id"));
  if (options.ncclRanks < 0 || options.ncclRank < 0 ||
      (options.ncclRanks > 0 && options.ncclRank >= options.ncclRanks))
    return done(I.fail(GpuStatus::BadInput, "NCCL rank " + std::to_string(options.ncclRank) +
                                                " of " + std::to_string(options.ncclRanks) +
                                                " ranks is out of range"));
  const int tpRanks = manifest.tensorParallel();
  if (options.tensorParallelRank < 0 || options.tensorParallelRank >= tpRanks)
    return done(I.fail(GpuStatus::BadInput,
                       "tensor-parallel rank " + std::to_string(options.tensorParallelRank) +
                           " does not exist: the artifact has " + std::to_string(tpRanks) +
                           " tensor-parallel rank(s)"));
  if (tpRanks > 1 && options.ncclRanks > 1 &&
      (options.ncclRanks != tpRanks || options.ncclRank != options.tensorParallelRank))
    return done(I.fail(GpuStatus::BadInput,
                       "NCCL rank " + std::to_string(options.ncclRank) + " of " +
                           std::to_string(options.ncclRanks) + " cannot be tensor-parallel rank " +
                           std::to_string(options.tensorParallelRank) + " of " +
                           std::to_string(tpRanks) + " (the ranks must be the same)"));
  I.tpRanks = tpRanks;
  I.tpRank = options.tensorParallelRank;
  std::string reason;
  I.cu = cudaApi(reason);
  if (!I.cu)
    return done(I.fail(GpuStatus::NoDevice, "no CUDA-capable GPU/driver: " + reason));
  const CudaApi &cu = *I.cu;
  int count = 0;
  if (!I.check(cu.cuDeviceGetCount(&count), "no CUDA-capable GPU/driver: cuDeviceGetCount",
               GpuStatus::NoDevice))
    return done(false);
  if (count == 0)
    return done(I.fail(GpuStatus::NoDevice, "no CUDA-capable GPU/driver: the driver sees no GPU"));
  if (options.device < 0 || options.device >= count)
    return done(I.fail(GpuStatus::BadInput, "GPU " + std::to_string(options.device) +
                                                " does not exist (" + std::to_string(count) +
                                                " visible)"));
  GpuDeviceInfo &info = I.info;
  info.ordinal = options.device;
  char name[256] = {0};
  size_t total = 0;
  if (!I.check(cu.cuDeviceGet(&I.dev, options.device), "cuDeviceGet") ||
      !I.check(cu.cuDeviceGetName(name, sizeof name - 1, I.dev), "cuDeviceGetName") ||
      !I.check(cu.cuDeviceGetAttribute(&info.ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       I.dev),
               "cuDeviceGetAttribute") ||
      !I.check(cu.cuDeviceGetAttribute(&info.ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       I.dev),
               "cuDeviceGetAttribute") ||
      !I.check(cu.cuDeviceGetAttribute(&info.multiprocessors,
                                       CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, I.dev),
               "cuDeviceGetAttribute") ||
      !I.check(cu.cuDeviceTotalMem(&total, I.dev), "cuDeviceTotalMem") ||
      !I.check(cu.cuDriverGetVersion(&info.driverVersion), "cuDriverGetVersion"))
    return done(false);
  info.name = name;
  info.totalMemoryBytes = total;
  I.m = manifest;
  I.p = program;
  if (info.ccMajor * 10 + info.ccMinor < I.p.archMajor * 10 + I.p.archMinor)
    return done(I.fail(GpuStatus::BadInput,
                       "GPU " + std::to_string(options.device) + " (" + info.name +
                           ") has compute capability " + std::to_string(info.ccMajor) + "." +
                           std::to_string(info.ccMinor) + "; the artifact (target '" + I.m.target +
                           "') needs " + I.p.arch + " or newer"));
  if (!I.check(cu.cuDevicePrimaryCtxRetain(&I.ctx, I.dev), "creating the CUDA context"))
    return done(false);
  if (!I.check(cu.cuCtxSetCurrent(I.ctx), "cuCtxSetCurrent") ||
      !I.check(cu.cuStreamCreate(&I.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return done(false);
  const char *sync = std::getenv("H20_GPU_SYNC");
  I.syncEachStep = sync && *sync && std::strcmp(sync, "0") != 0;
  if (std::string missing; !cudaGraphSupport(cu, missing))
    I.graphsOff = "no CUDA graphs: " + missing;
  I.planSegments();
  if (options.ncclRanks >= 1 && !I.initNccl(options))
    return done(false);

  if (!I.loadModules(artifact) || !I.resolveKernels())
    return done(false);
  bool hasGemm = std::any_of(I.p.steps.begin(), I.p.steps.end(), [](const GpuStep &s) {
    return std::holds_alternative<GemmStep>(s);
  });
  if (hasGemm) {
    I.lt = cublasLtApi(reason);
    if (!I.lt)
      return done(I.fail(GpuStatus::BadInput, "the artifact's GEMMs need cuBLASLt: " + reason));
    I.gemm = std::make_unique<CublasLtGemm>(*I.lt);
    if (!I.gemm->init(reason))
      return done(I.fail(reason.find("ALLOC_FAILED") != std::string::npos ? GpuStatus::Resources
                                                                          : GpuStatus::Internal,
                         reason));
    I.workspaceBytes = options.workspaceBytes;
    I.tuneGemms = options.tuneGemms;
  }
  if (options.dummyWeights) {
    // Random weights of one shape and type are interchangeable: one copy
    // each (a two-layer Flash model's 58 GB of weights become 31 GB).
    std::map<std::string, int> first;
    I.sameAs.assign(I.p.buffers.size(), -1);
    for (size_t bi = 0; bi < I.p.buffers.size(); ++bi) {
      const GpuBuffer &b = I.p.buffers[bi];
      if (b.kind != BufferKind::Weight || b.index < 0 || size_t(b.index) >= I.m.weights.size())
        continue;
      std::string key = b.dtype + ":" + std::to_string(b.bytes);
      for (int64_t d : I.m.weights[b.index].shape)
        key += "x" + std::to_string(d);
      auto [it, isNew] = first.emplace(key, static_cast<int>(bi));
      if (!isNew)
        I.sameAs[bi] = it->second;
    }
  }
  if (!planBuffers(I.p, I.plan, reason, I.sameAs))
    return done(I.fail(GpuStatus::BadInput, reason));
  size_t freeB = 0, totalB = 0;
  if (!I.check(cu.cuMemGetInfo(&freeB, &totalB), "cuMemGetInfo"))
    return done(false);
  uint64_t need = I.plan.totalBytes + I.workspaceBytes;
  if (need > freeB) {
    uint64_t arena = static_cast<uint64_t>(I.p.arenaBytes);
    return done(I.fail(GpuStatus::Resources,
                       "the artifact needs " + gib(need) + " of GPU memory (weights " +
                           gib(I.plan.weightBytes) + ", KV cache/state " + gib(I.plan.stateBytes) +
                           ", activations " + gib(arena) + ", inputs/outputs " +
                           gib(I.plan.ioBytes) + ", consts " + gib(I.plan.constBytes) +
                           ", cuBLASLt workspace " + gib(I.workspaceBytes) + "); GPU " +
                           std::to_string(options.device) + " (" + info.name + ") has " +
                           gib(freeB) + " free of " + gib(totalB)));
  }
  if (!I.alloc(I.base, I.plan.totalBytes, "the program's buffers") ||
      (I.workspaceBytes && !I.alloc(I.workspace, I.workspaceBytes, "the cuBLASLt workspace")))
    return done(false);
  I.resetAddresses();
  I.loadStats.planBytes = I.plan.totalBytes;
  auto t0 = std::chrono::steady_clock::now();
  if (!I.uploadWeights(options) || !I.uploadConsts(artifact))
    return done(false);
  I.loadStats.loadWeightsMs = msSince(t0);
  I.loadStats.weightBytes = I.plan.weightBytes;
  I.loaded = true;
  return GpuStatus::Ok;
}

std::string GpuExecutor::Impl::where(size_t index) const {
  std::string w = "step " + std::to_string(index) + " (" + stepOpName(p.steps[index]) + ")";
  if (auto *l = std::get_if<LaunchStep>(&p.steps[index]))
    w += ", kernel '" + l->kernel + "'";
  else if (auto *a = std::get_if<AttentionStep>(&p.steps[index]))
    w += ", kernel '" + a->kernel + "'";
  return w;
}

void GpuExecutor::Impl::buildKernel(size_t index, const ResolvedStep &step,
                                    KernelLaunch &k) const {
  k.f = stepFunction[index];
  if (auto *r = std::get_if<ResolvedLaunch>(&step)) {
    const LaunchStep &ls = std::get<LaunchStep>(p.steps[index]);
    k.attention = false;
    std::memset(&k.attn, 0, sizeof k.attn);
    for (int d = 0; d < 3; ++d) {
      k.grid[d] = static_cast<unsigned>(r->grid[d]);
      k.block[d] = static_cast<unsigned>(r->block[d]);
    }
    k.smem = static_cast<unsigned>(ls.smem);
    size_t count = 0;
    for (const ResolvedLaunchArg &a : r->args)
      count += a.kind == LaunchArg::MemRef ? 3 + 2 * a.memref.sizes.size() : 1;
    k.slots.assign(count, 0);
    size_t n = 0;
    for (const ResolvedLaunchArg &a : r->args) {
      switch (a.kind) {
      case LaunchArg::I64:
        k.slots[n++] = static_cast<uint64_t>(a.value);
        break;
      case LaunchArg::I32: {
        int32_t v = static_cast<int32_t>(a.value);
        std::memcpy(&k.slots[n++], &v, sizeof v);
        break;
      }
      case LaunchArg::F32:
        std::memcpy(&k.slots[n++], &a.f32, sizeof a.f32);
        break;
      case LaunchArg::F64:
        std::memcpy(&k.slots[n++], &a.f64, sizeof a.f64);
        break;
      case LaunchArg::F16:
      case LaunchArg::BF16:
        std::memcpy(&k.slots[n++], &a.half, sizeof a.half);
        break;
      case LaunchArg::MemRef: {
        CUdeviceptr ptr = address(a.memref.buffer);
        k.slots[n++] = ptr; // allocated
        k.slots[n++] = ptr; // aligned
        k.slots[n++] = static_cast<uint64_t>(a.memref.offset);
        for (int64_t s : a.memref.sizes)
          k.slots[n++] = static_cast<uint64_t>(s);
        for (int64_t s : a.memref.strides)
          k.slots[n++] = static_cast<uint64_t>(s);
        break;
      }
      }
    }
    return;
  }
  const ResolvedAttention &r = std::get<ResolvedAttention>(step);
  const AttentionStep &as = std::get<AttentionStep>(p.steps[index]);
  int64_t es = dtypeSize(as.dtype);
  k.attention = true;
  k.slots.clear();
  H20AttnParams &params = k.attn;
  std::memset(&params, 0, sizeof params);
  auto ptr = [&](const ResolvedAttentionView &v) {
    return reinterpret_cast<void *>(address(v.buffer) + static_cast<uint64_t>(v.offset * es));
  };
  params.q = ptr(r.q);
  params.k = ptr(r.k);
  params.v = ptr(r.v);
  params.o = ptr(r.o);
  for (int d = 0; d < 4; ++d) {
    params.q_stride[d] = r.q.strides[d];
    params.k_stride[d] = r.k.strides[d];
    params.v_stride[d] = r.v.strides[d];
    params.o_stride[d] = r.o.strides[d];
  }
  params.batch = r.batch;
  params.heads = as.heads;
  params.kv_heads = as.kvHeads;
  params.sq = r.sq;
  params.skv = r.skv;
  params.window_left = as.windowLeft;
  params.scale = static_cast<float>(as.scale);
  params.softcap = static_cast<float>(as.softcap);
  params.causal = as.causal ? 1 : 0;
  // The wgmma kernel loads its tiles by TMA when the views allow it (else
  // cp.async, tma = 0); the maps follow this launch's pointers and lengths.
  if (as.kernel.rfind("h20_attention_wgmma_", 0) == 0)
    encodeAttentionTensorMaps(*cu, params, static_cast<int>(es), as.headDim, as.headDimV);
  k.grid[0] = static_cast<unsigned>(r.gridX);
  k.grid[1] = static_cast<unsigned>(as.heads);
  k.grid[2] = static_cast<unsigned>(r.batch);
  k.block[0] = static_cast<unsigned>(as.threads);
  k.block[1] = k.block[2] = 1;
  k.smem = static_cast<unsigned>(as.smem);
}

bool GpuExecutor::Impl::launchKernel(size_t index, KernelLaunch &k) {
  CUresult res = cu->cuLaunchKernel(k.f, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                                    k.block[2], k.smem, stream, k.params(), nullptr);
  return res == CUDA_SUCCESS || check(res, where(index) + ": cuLaunchKernel");
}

GemmCall GpuExecutor::Impl::gemmCall(size_t index, const ResolvedGemm &r) {
  const GemmStep &gs = std::get<GemmStep>(p.steps[index]);
  GemmCall call;
  call.dtypeA = gs.dtypeA;
  call.dtypeB = gs.dtypeB;
  call.dtypeC = gs.dtypeC;
  call.problem.batch = r.batch;
  call.problem.m = r.m;
  call.problem.n = r.n;
  call.problem.k = r.k;
  call.problem.a = {r.a.batchStride, r.a.rowStride, r.a.colStride};
  call.problem.b = {r.b.batchStride, r.b.rowStride, r.b.colStride};
  call.problem.c = {r.c.batchStride, r.c.rowStride, r.c.colStride};
  call.a = address(r.a.buffer) + r.a.offset * dtypeSize(gs.dtypeA);
  call.b = address(r.b.buffer) + r.b.offset * dtypeSize(gs.dtypeB);
  call.c = address(r.c.buffer) + r.c.offset * dtypeSize(gs.dtypeC);
  call.alpha = static_cast<float>(gs.alpha);
  call.beta = static_cast<float>(gs.beta);
  call.tf32 = p.tf32;
  return call;
}

bool GpuExecutor::Impl::tuneGemmSteps(const std::vector<ResolvedStep> &rs, GpuRunStats &stats) {
  // Nothing else may run while the candidates are timed.
  if (!check(cu->cuStreamSynchronize(stream), "waiting for the GPU before tuning the GEMMs"))
    return false;
  const size_t before = gemm->tunings().size();
  for (size_t i = 0; i < rs.size(); ++i) {
    const auto *r = std::get_if<ResolvedGemm>(&rs[i]);
    if (!r || r->empty || r->groups != 0)
      continue;
    std::string err;
    if (!gemm->tune(gemmCall(i, *r), *cu, workspaceBytes, err))
      return fail(GpuStatus::Internal, where(i) + ": " + err);
  }
  stats.gemmTuning.assign(gemm->tunings().begin() + static_cast<std::ptrdiff_t>(before),
                          gemm->tunings().end());
  gemmsTuned = true;
  return true;
}

bool GpuExecutor::Impl::execute(size_t index, const ResolvedStep &step) {
  const CudaApi &c = *cu;
  if (isKernel(index)) {
    if (isEmpty(step))
      return true;
    buildKernel(index, step, launchScratch);
    return launchKernel(index, launchScratch);
  }
  if (auto *r = std::get_if<ResolvedGemm>(&step)) {
    if (r->empty)
      return true;
    const GemmStep &gs = std::get<GemmStep>(p.steps[index]);
    GemmCall call = gemmCall(index, *r);
    std::string err;
    bool oom = false;
    if (r->groups == 0) {
      if (!gemm->run(call, stream, workspace, workspaceBytes, err, oom))
        return fail(oom ? GpuStatus::Resources : GpuStatus::Internal, where(index) + ": " + err);
      return true;
    }
    // Grouped: the row split was computed on the device (e.g. the experts'
    // token counts); read it back, check it, then one GEMM per group.
    std::vector<int32_t> off(static_cast<size_t>(r->groups) + 1);
    if (!check(c.cuMemcpyDtoHAsync(off.data(), address(r->groupBuffer) + r->groupOffset * 4,
                                   off.size() * 4, stream),
               where(index) + ": reading the group offsets") ||
        !check(c.cuStreamSynchronize(stream), where(index) + ": cuStreamSynchronize"))
      return false;
    for (size_t g = 0; g < off.size(); ++g)
      if (off[g] < 0 || off[g] > r->m || (g > 0 && off[g] < off[g - 1]))
        return fail(GpuStatus::Internal,
                    where(index) + ": group offset " + std::to_string(g) + " is " +
                        std::to_string(off[g]) + " (the offsets must rise within [0, " +
                        std::to_string(r->m) + "])");
    const CUdeviceptr a0 = call.a, b0 = call.b, c0 = call.c;
    for (int64_t g = 0; g < r->groups; ++g) {
      const int64_t rows = off[g + 1] - off[g];
      if (rows == 0)
        continue;
      call.problem.m = rows;
      call.a = a0 + off[g] * r->a.rowStride * dtypeSize(gs.dtypeA);
      call.b = b0 + g * r->b.batchStride * dtypeSize(gs.dtypeB);
      call.c = c0 + off[g] * r->c.rowStride * dtypeSize(gs.dtypeC);
      if (!gemm->run(call, stream, workspace, workspaceBytes, err, oom))
        return fail(oom ? GpuStatus::Resources : GpuStatus::Internal,
                    where(index) + ": group " + std::to_string(g) + ": " + err);
    }
    return true;
  }
  if (auto *r = std::get_if<ResolvedMemset>(&step)) {
    if (r->bytes == 0)
      return true;
    const MemsetStep &ms = std::get<MemsetStep>(p.steps[index]);
    CUresult res = c.cuMemsetD8Async(address(r->buffer) + r->offsetBytes,
                                     static_cast<unsigned char>(ms.value),
                                     static_cast<size_t>(r->bytes), stream);
    return res == CUDA_SUCCESS || check(res, where(index) + ": cuMemsetD8Async");
  }
  if (auto *a = std::get_if<ResolvedAllReduce>(&step))
    return allReduce(index, *a);
  const ResolvedCopy &r = std::get<ResolvedCopy>(step);
  if (r.bytes == 0)
    return true;
  CUresult res = c.cuMemcpyDtoDAsync(address(r.dst) + r.dstOffsetBytes,
                                     address(r.src) + r.srcOffsetBytes,
                                     static_cast<size_t>(r.bytes), stream);
  return res == CUDA_SUCCESS || check(res, where(index) + ": cuMemcpyDtoDAsync");
}

bool GpuExecutor::Impl::allReduce(size_t index, const ResolvedAllReduce &r) {
  if (r.bytes == 0)
    return true;
  const CudaApi &c = *cu;
  const AllReduceStep &as = std::get<AllReduceStep>(p.steps[index]);
  const TpCollective what{static_cast<int64_t>(index), tpChunk, r.bytes, as.dtype};
  if (tpStats) {
    tpStats->tpLog.push_back(what);
    ++tpStats->allReduces;
    tpStats->allReduceBytes += r.bytes;
  }
  const CUdeviceptr src = address(r.src) + r.srcOffsetBytes;
  const CUdeviceptr dst = address(r.dst) + r.dstOffsetBytes;
  const size_t bytes = static_cast<size_t>(r.bytes);
  if (tpRanks <= 1) {
    if (r.inPlace())
      return true;
    CUresult res = c.cuMemcpyDtoDAsync(dst, src, bytes, stream);
    return res == CUDA_SUCCESS || check(res, where(index) + ": cuMemcpyDtoDAsync");
  }
  const std::string at = where(index) + " of chunk " + std::to_string(tpChunk) + " (rank " +
                         std::to_string(tpRank) + " of " + std::to_string(tpRanks) + ")";
  if (tpGroup) {
    // Virtual: this rank's bytes to the host, the group's sum back.
    auto t0 = std::chrono::steady_clock::now();
    tpHost.resize(bytes);
    if (!check(c.cuMemcpyDtoHAsync(tpHost.data(), src, bytes, stream), at + ": download") ||
        !check(c.cuStreamSynchronize(stream), at + ": the steps before it"))
      return false;
    std::string err;
    if (!tpGroup->allReduce(tpRank, what, tpHost.data(), tpHost.data(), err))
      return fail(GpuStatus::PeerFailed, at + ": " + err);
    // From pageable memory: returns once the bytes are staged, so tpHost
    // may be reused; ordered on the stream before the next steps.
    if (!check(c.cuMemcpyHtoDAsync(dst, tpHost.data(), bytes, stream), at + ": upload"))
      return false;
    if (tpStats)
      tpStats->allReduceMs += msSince(t0);
    return true;
  }
  if (!nccl || nccl->ranks() != tpRanks)
    return fail(GpuStatus::BadInput, at + ": no " + std::to_string(tpRanks) +
                                         "-rank NCCL communicator and no virtual ranks");
  // One all-reduce in flight: the previous one must have finished (under
  // the watchdog) before this one is enqueued, so a dead peer is noticed
  // within ncclTimeoutS and the host never blocks in a full launch queue.
  if (!waitAllReduce())
    return false;
  if (!arBefore && (!check(c.cuEventCreate(&arBefore, CU_EVENT_DEFAULT), "cuEventCreate") ||
                    !check(c.cuEventCreate(&arAfter, CU_EVENT_DEFAULT), "cuEventCreate")))
    return false;
  if (!check(c.cuEventRecord(arBefore, stream), "cuEventRecord"))
    return false;
  std::string err;
  if (!nccl->allReduceSum(src, dst, bytes / static_cast<size_t>(dtypeSize(as.dtype)), as.dtype,
                          stream, err)) {
    nccl->abort();
    return fail(GpuStatus::PeerFailed, at + ": " + err);
  }
  if (!check(c.cuEventRecord(arAfter, stream), "cuEventRecord"))
    return false;
  arPending = true;
  arStep = index;
  arChunk = tpChunk;
  return true;
}

bool GpuExecutor::Impl::waitAllReduce() {
  if (!arPending)
    return true;
  arPending = false;
  const std::string at = "rank " + std::to_string(tpRank) + ": " + where(arStep) + " of chunk " +
                         std::to_string(arChunk);
  std::string err;
  // First this rank's own work before the all-reduce (no limit), then the
  // all-reduce itself, which needs every peer (ncclTimeoutS).
  GpuStatus w = waitForNccl(*cu, *nccl, stream, arBefore, 0, at, err);
  if (w == GpuStatus::Ok)
    w = waitForNccl(*cu, *nccl, stream, arAfter, ncclTimeoutS, at + ": the all-reduce", err);
  if (w != GpuStatus::Ok)
    return fail(w, err);
  float ms = 0;
  if (tpStats && cu->cuEventElapsedTime(&ms, arBefore, arAfter) == CUDA_SUCCESS)
    tpStats->allReduceMs += ms;
  return true;
}

// --- CUDA graphs ---------------------------------------------------------------

void GpuExecutor::Impl::planSegments() {
  segments.clear();
  symbols.resize(p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    symbols[i] = stepSymbols(p.steps[i]);
    // A kernel's parameters are updated in the graph; a gemm/memset/copy
    // cannot be, so one naming p0 (a new value every chunk) runs outside.
    bool outside = !isKernel(i) && symbols[i].p0;
    if (outside || segments.empty() || !segments.back().graph) {
      Segment seg;
      seg.begin = i;
      seg.end = i + 1;
      seg.graph = !outside;
      segments.push_back(std::move(seg));
    } else {
      segments.back().end = i + 1;
    }
  }
}

void GpuExecutor::Impl::destroyGraphs() {
  for (Segment &seg : segments) {
    for (auto &g : seg.graphs) {
      if (g->exec)
        cu->cuGraphExecDestroy(g->exec);
      if (g->graph)
        cu->cuGraphDestroy(g->graph);
    }
    seg.graphs.clear();
  }
}

/// What distinguishes the graphs of one segment: for every step naming a
/// symbol, whether it is empty (not captured at all), and for a gemm,
/// memset or copy its resolved values (they cannot be updated in place).
std::vector<int64_t> GpuExecutor::Impl::graphKey(const Segment &seg,
                                                 const std::vector<ResolvedStep> &rs) const {
  std::vector<int64_t> key;
  for (size_t i = seg.begin; i < seg.end; ++i) {
    if (!symbols[i].any())
      continue;
    key.push_back(static_cast<int64_t>(i));
    key.push_back(isEmpty(rs[i]) ? 1 : 0);
    if (!isKernel(i))
      appendResolved(rs[i], key);
  }
  return key;
}

bool GpuExecutor::Impl::capture(Segment &seg, const std::vector<ResolvedStep> &rs,
                                std::vector<int64_t> key, CapturedGraph *&out, std::string &why) {
  const CudaApi &c = *cu;
  auto g = std::make_unique<CapturedGraph>();
  g->key = std::move(key);
  // Relaxed: cuBLASLt may set itself up (host calls) while being captured.
  CUresult r = c.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED);
  if (r != CUDA_SUCCESS) {
    why = "cuStreamBeginCapture: " + cudaErrorText(c, r);
    return false;
  }
  bool ok = true;
  KernelLaunch k;
  for (size_t i = seg.begin; ok && i < seg.end; ++i) {
    if (isEmpty(rs[i]))
      continue;
    if (!isKernel(i)) {
      if (!execute(i, rs[i])) {
        why = error;
        ok = false;
      }
      continue;
    }
    buildKernel(i, rs[i], k);
    if (!launchKernel(i, k)) {
      why = error;
      ok = false;
      break;
    }
    if (!symbols[i].any())
      continue;
    // Single stream: the capture's one dependency is the node just added.
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode *deps = nullptr;
    size_t ndeps = 0;
    r = c.cuStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &ndeps);
    if (r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE || ndeps != 1) {
      why = where(i) + ": cannot find its captured node (" +
            (r != CUDA_SUCCESS ? cudaErrorText(c, r)
                               : std::to_string(ndeps) + " capture dependencies") +
            ")";
      ok = false;
      break;
    }
    CUgraphNode node = deps[0];
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    CUDA_KERNEL_NODE_PARAMS kp;
    std::memset(&kp, 0, sizeof kp);
    bool same = c.cuGraphNodeGetType(node, &type) == CUDA_SUCCESS &&
                type == CU_GRAPH_NODE_TYPE_KERNEL &&
                c.cuGraphKernelNodeGetParams(node, &kp) == CUDA_SUCCESS &&
                (kp.func == k.f || !kp.func) && kp.gridDimX == k.grid[0] &&
                kp.gridDimY == k.grid[1] && kp.gridDimZ == k.grid[2] &&
                kp.blockDimX == k.block[0] && kp.blockDimY == k.block[1] &&
                kp.blockDimZ == k.block[2] && kp.sharedMemBytes == k.smem;
    if (!same) {
      why = where(i) + ": the captured node is not this step's kernel";
      ok = false;
      break;
    }
    GraphNode gn;
    gn.step = i;
    gn.node = node;
    gn.last = k;
    g->nodes.push_back(std::move(gn));
  }
  CUgraph graph = nullptr;
  r = c.cuStreamEndCapture(stream, &graph);
  if (ok && r != CUDA_SUCCESS) {
    why = "cuStreamEndCapture: " + cudaErrorText(c, r);
    ok = false;
  }
  if (!ok) {
    if (graph)
      c.cuGraphDestroy(graph);
    return false;
  }
  g->graph = graph;
  size_t count = 0;
  if (c.cuGraphGetNodes(graph, nullptr, &count) == CUDA_SUCCESS)
    g->nodeCount = static_cast<int64_t>(count);
  r = c.cuGraphInstantiate(&g->exec, graph, 0);
  if (r != CUDA_SUCCESS) {
    g->exec = nullptr;
    c.cuGraphDestroy(graph);
    why = "cuGraphInstantiate: " + cudaErrorText(c, r);
    return false;
  }
  seg.graphs.push_back(std::move(g));
  out = seg.graphs.back().get();
  return true;
}

bool GpuExecutor::Impl::runSegment(Segment &seg, const std::vector<ResolvedStep> &rs,
                                   GpuRunStats &stats) {
  auto plainly = [&] {
    for (size_t i = seg.begin; i < seg.end; ++i)
      if (!execute(i, rs[i]))
        return false;
    return true;
  };
  std::string range = "steps " + std::to_string(seg.begin) + ".." + std::to_string(seg.end - 1);
  if (!seg.graph || seg.plain || !graphsOff.empty())
    return plainly();
  bool any = false;
  for (size_t i = seg.begin; i < seg.end && !any; ++i)
    any = !isEmpty(rs[i]);
  if (!any)
    return true;
  std::vector<int64_t> key = graphKey(seg, rs);
  CapturedGraph *g = nullptr;
  for (auto &cand : seg.graphs)
    if (cand->key == key)
      g = cand.get();
  if (!g) {
    if (seg.graphs.size() >= kMaxGraphsPerSegment) {
      seg.plain = true;
      stats.cudaGraphNote = range + " take more than " + std::to_string(kMaxGraphsPerSegment) +
                            " distinct shapes: launched one by one";
      return plainly();
    }
    std::string why;
    if (!capture(seg, rs, std::move(key), g, why)) {
      // Nothing ran; the steps run plainly (a real error shows again there).
      graphsOff = "capturing " + range + " failed (" + why + "): running without CUDA graphs";
      stats.cudaGraphNote = graphsOff;
      status = GpuStatus::Ok;
      error.clear();
      return plainly();
    }
    ++stats.graphCaptures;
  }
  const CudaApi &c = *cu;
  for (GraphNode &gn : g->nodes) {
    buildKernel(gn.step, rs[gn.step], launchScratch);
    if (launchScratch.sameAs(gn.last))
      continue;
    CUDA_KERNEL_NODE_PARAMS kp;
    std::memset(&kp, 0, sizeof kp);
    kp.func = launchScratch.f;
    kp.gridDimX = launchScratch.grid[0];
    kp.gridDimY = launchScratch.grid[1];
    kp.gridDimZ = launchScratch.grid[2];
    kp.blockDimX = launchScratch.block[0];
    kp.blockDimY = launchScratch.block[1];
    kp.blockDimZ = launchScratch.block[2];
    kp.sharedMemBytes = launchScratch.smem;
    kp.kernelParams = launchScratch.params();
    if (!check(c.cuGraphExecKernelNodeSetParams(g->exec, gn.node, &kp),
               where(gn.step) + ": updating its CUDA graph node"))
      return false;
    gn.last.f = launchScratch.f;
    std::copy(launchScratch.grid, launchScratch.grid + 3, gn.last.grid);
    std::copy(launchScratch.block, launchScratch.block + 3, gn.last.block);
    gn.last.smem = launchScratch.smem;
    gn.last.attention = launchScratch.attention;
    gn.last.slots = launchScratch.slots;
    gn.last.attn = launchScratch.attn;
    ++stats.graphNodeUpdates;
  }
  if (!check(c.cuGraphLaunch(g->exec, stream), "launching the CUDA graph of " + range))
    return false;
  ++stats.graphLaunches;
  if (g->lastRun != runCount) {
    g->lastRun = runCount;
    stats.graphNodes += g->nodeCount;
  }
  stats.cudaGraph = true;
  return true;
}

GpuStatus GpuExecutor::run(const std::vector<HostTensor> &inputs, const GpuRunOptions &options,
                           std::vector<HostTensor> &outputs, GpuRunStats &stats,
                           std::string &error) {
  Impl &I = *impl;
  I.status = GpuStatus::Ok;
  auto done = [&](bool ok) {
    if (ok)
      return GpuStatus::Ok;
    error = I.error;
    return I.status;
  };
  if (!I.loaded)
    return done(I.fail(GpuStatus::Internal, "GpuExecutor::run before a successful load"));
  const CudaApi &cu = *I.cu;
  const Manifest &m = I.m;
  const GpuProgram &p = I.p;
  stats = GpuRunStats();
  if (!I.check(cu.cuCtxSetCurrent(I.ctx), "cuCtxSetCurrent"))
    return done(false);

  // The plan: inputs, length, mode, context-parallel schedule, outputs
  // (RunPlan.h), checked before anything is uploaded.
  RunRequest request;
  request.n = options.n;
  request.virtualRanks = options.virtualRanks;
  request.contextParallel = options.contextParallel;
  request.tpRanks = I.tpRanks;
  request.tpRank = I.tpRank;
  request.virtualTpRanks =
      options.virtualTensorParallel ? options.virtualTensorParallel->ranks() : 0;
  request.ncclRanks = I.nccl ? I.nccl->ranks() : 0;
  request.ncclRank = I.nccl ? I.nccl->rank() : 0;
  RunPlan plan;
  std::string err;
  if (!planRun(m, p, inputs, request, plan, err))
    return done(I.fail(GpuStatus::BadInput, err));
  const std::vector<int> &inputBuffer = plan.inputBuffer, &outputBuffer = plan.outputBuffer;
  const int64_t S = plan.tokens;
  const std::vector<SymbolValues> &chunks = plan.chunks;
  stats.tokens = S;
  const bool virtualCp = plan.mode == RunMode::VirtualContextParallel;
  const bool ncclCp = plan.mode == RunMode::NcclContextParallel;
  const bool anyCp = plan.contextParallel();
  const int T = plan.tpRanks;
  const bool virtualTp = plan.mode == RunMode::VirtualTensorParallel;
  const bool ncclTp = plan.mode == RunMode::NcclTensorParallel;
  I.tpGroup = virtualTp ? options.virtualTensorParallel : nullptr;
  I.tpStats = &stats;
  I.tpChunk = 0;
  I.arPending = false;
  // Ends the run's tensor-parallel state; a failing virtual rank ends the
  // group, so no other rank waits for it at an all-reduce.
  struct TpScope {
    Impl &I;
    bool ok = false;
    ~TpScope() {
      if (I.tpGroup && !ok)
        I.tpGroup->abort("rank " + std::to_string(I.tpRank) + " failed: " + I.error);
      I.tpGroup = nullptr;
      I.tpStats = nullptr;
      I.arPending = false;
    }
  } tpScope{I};
  if (T > 1) {
    stats.tpRanks = T;
    stats.tpRank = I.tpRank;
    stats.tpMode = virtualTp ? "virtual" : "nccl";
  }
  const int cpRanks = plan.cpRanks;
  const int me = plan.cpRank;
  const CpPlan &cp = plan.cp;
  const bool lastOnly = plan.lastOnly;

  outputs.assign(m.outputs.size(), HostTensor());
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    outputs[o].name = m.outputs[o].name;
    outputs[o].dtype = m.outputs[o].dtype;
    outputs[o].shape = plan.outputs[o].shape;
    outputs[o].data.assign(static_cast<size_t>(plan.outputs[o].bytes), 0);
  }

  // Padded token ids, uploaded once; each chunk copies its slice.
  CUdeviceptr ids = 0;
  uint64_t idsBytes = 0;
  struct Scoped {
    Impl &I;
    CUdeviceptr &ids;
    uint64_t &bytes;
    std::vector<CUevent> events;
    ~Scoped() {
      I.cu->cuStreamSynchronize(I.stream);
      for (CUevent e : events)
        if (e)
          I.cu->cuEventDestroy(e);
      I.release(ids, bytes);
    }
  } scoped{I, ids, idsBytes, {}};
  const int64_t chunkBytes = plan.chunkBytes;
  std::vector<uint8_t> padded;
  if (p.chunking) {
    padded = paddedChunkedInput(p, plan, inputs[p.chunking->input]);
    idsBytes = padded.size();
    if (!I.alloc(ids, idsBytes, "the token ids"))
      return done(false);
  }
  size_t cpLayers = anyCp ? cp.segments.size() - 1 : 0;
  size_t nev = chunks.size() + 5 + 2 * cpLayers;
  scoped.events.assign(nev, nullptr);
  for (CUevent &e : scoped.events)
    if (!I.check(cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"))
      return done(false);
  CUevent evUp0 = scoped.events[0], evUp1 = scoped.events[1], evDl0 = scoped.events[2],
          evDl1 = scoped.events[3];
  CUevent *evChunk = scoped.events.data() + 4; // chunks.size() + 1 boundaries
  CUevent *evRing = evChunk + chunks.size() + 1;  // virtual ranks: 2 per layer

  // Context parallelism: the other virtual ranks' KV caches (state
  // buffers) and the other pieces' arenas and chunked-input buffers (an
  // NCCL rank: its own pieces' only), in one allocation.
  struct CpMemory {
    Impl &I;
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
    ~CpMemory() {
      I.cu->cuStreamSynchronize(I.stream);
      I.resetAddresses();
      I.release(ptr, bytes);
    }
  } cpMem{I, 0, 0};
  auto align = [](uint64_t v) { return (v + 255) / 256 * 256; };
  std::vector<uint64_t> stateRel(p.buffers.size(), 0);
  std::vector<int> stateBufs, tempBufs;
  uint64_t stateSpan = 0, arenaSpan = align(static_cast<uint64_t>(p.arenaBytes)), inputSpan = 0;
  uint64_t arenasAt = 0, inputsAt = 0;
  int chunkedInput = p.chunking ? inputBuffer[p.chunking->input] : -1;
  // Per piece: its arena/input slot (0: the plan's own); -1 for pieces of
  // other NCCL ranks.
  std::vector<int64_t> slot;
  if (anyCp) {
    slot.assign(cp.schedule.pieces.size(), -1);
    if (virtualCp)
      for (size_t k = 0; k < slot.size(); ++k)
        slot[k] = static_cast<int64_t>(k);
    else
      for (size_t k = 0; k < cp.schedule.rankPieces[me].size(); ++k)
        slot[cp.schedule.rankPieces[me][k]] = static_cast<int64_t>(k);
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      if (p.buffers[b].kind == BufferKind::State) {
        stateRel[b] = stateSpan;
        stateSpan = align(stateSpan + static_cast<uint64_t>(p.buffers[b].bytes));
        stateBufs.push_back(static_cast<int>(b));
      } else if (p.buffers[b].kind == BufferKind::Temp) {
        tempBufs.push_back(static_cast<int>(b));
      }
    }
    if (chunkedInput >= 0)
      inputSpan = align(static_cast<uint64_t>(p.buffers[chunkedInput].bytes));
    // An NCCL rank holds one KV cache (its own, the plan's).
    uint64_t ranks = virtualCp ? static_cast<uint64_t>(cpRanks) : 1;
    uint64_t pieces = virtualCp ? cp.schedule.pieces.size() : cp.schedule.rankPieces[me].size();
    arenasAt = (ranks - 1) * stateSpan;
    inputsAt = arenasAt + (pieces - 1) * arenaSpan;
    cpMem.bytes = inputsAt + (pieces - 1) * inputSpan;
    size_t freeB = 0, totalB = 0;
    if (!I.check(cu.cuMemGetInfo(&freeB, &totalB), "cuMemGetInfo"))
      return done(false);
    if (cpMem.bytes > freeB)
      return done(I.fail(GpuStatus::Resources,
                         (virtualCp ? std::to_string(ranks) + " virtual ranks need "
                                    : "rank " + std::to_string(me) + " of " +
                                          std::to_string(cpRanks) + " needs ") +
                             gib(cpMem.bytes) +
                             " more GPU memory (" + std::to_string(ranks - 1) +
                             " more KV caches of " + gib(stateSpan) + ", " +
                             std::to_string(pieces - 1) + " more arenas of " + gib(arenaSpan) +
                             "); " + gib(freeB) + " free"));
    if (cpMem.bytes &&
        !I.alloc(cpMem.ptr, cpMem.bytes, "the context-parallel KV caches and arenas"))
      return done(false);
  }
  // Points the state buffers at rank `rank`'s KV cache and the temps and
  // the chunked input at piece `piece`'s arena and buffer.
  // (An NCCL rank has only its own cache: the plan's.)
  auto cacheAddress = [&](int rank, int b) {
    return rank == 0 || ncclCp ? I.base + I.plan.offsets[b]
                               : cpMem.ptr + (rank - 1) * stateSpan + stateRel[b];
  };
  auto bind = [&](int rank, int64_t piece) {
    for (int b : stateBufs)
      I.addr[b] = cacheAddress(rank, b);
    uint64_t k = static_cast<uint64_t>(slot[piece]);
    for (int b : tempBufs)
      I.addr[b] = k == 0 ? I.base + I.plan.offsets[b]
                         : cpMem.ptr + arenasAt + (k - 1) * arenaSpan +
                               static_cast<uint64_t>(p.buffers[b].offset);
    if (chunkedInput >= 0)
      I.addr[chunkedInput] = k == 0 ? I.base + I.plan.offsets[chunkedInput]
                                    : cpMem.ptr + inputsAt + (k - 1) * inputSpan;
  };

  // NCCL ranks start together: a small all-reduce as a barrier, so one
  // rank's TTFT does not include waiting for a slower peer's start.
  // (Its timeout is longer: peers may still be loading their weights.)
  if (ncclCp || ncclTp) {
    if (!I.nccl->allReduceSumF32(I.ncclScratch, I.ncclScratch, 1, I.stream, err)) {
      I.nccl->abort();
      return done(I.fail(GpuStatus::PeerFailed, err));
    }
    GpuStatus w = waitForNccl(cu, *I.nccl, I.stream, nullptr, 20 * I.ncclTimeoutS,
                              "rank " + std::to_string(I.nccl->rank()) + ": the start barrier",
                              err);
    if (w != GpuStatus::Ok)
      return done(I.fail(w, err));
  }
  // From here on, a failure of this NCCL rank aborts its communicator, so
  // the destructors' stream synchronisation never waits on queued NCCL
  // work that a peer will not complete.
  struct AbortOnFailure {
    NcclComm *comm = nullptr;
    bool ok = false;
    ~AbortOnFailure() {
      if (comm && !ok)
        comm->abort();
    }
  } abortOnFailure{ncclCp || ncclTp ? I.nccl.get() : nullptr, false};
  // NCCL: wait for the ring of layer l: first, without a time limit, for
  // this rank's own work before it (attention of layer l - 1, the layer's
  // projections), then, under the timeout, for the ring itself.
  auto waitRing = [&](size_t l) {
    GpuStatus w = waitForNccl(cu, *I.nccl, I.stream, evRing[2 * l], 0,
                              "rank " + std::to_string(me) + ": layer " + std::to_string(l), err);
    if (w == GpuStatus::Ok)
      w = waitForNccl(cu, *I.nccl, I.stream, evRing[2 * l + 1], I.ncclTimeoutS,
                      "rank " + std::to_string(me) + ": the ring of layer " + std::to_string(l),
                      err);
    return w == GpuStatus::Ok ? true : I.fail(w, err);
  };
  // TTFT starts here: ids on the host.
  auto t0 = std::chrono::steady_clock::now();
  if (!I.check(cu.cuEventRecord(evUp0, I.stream), "cuEventRecord"))
    return done(false);
  if (ids && !I.check(cu.cuMemcpyHtoDAsync(ids, padded.data(), idsBytes, I.stream),
                      "uploading the token ids"))
    return done(false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool chunked = p.chunking && p.chunking->input == static_cast<int>(i);
    if (chunked || inputBuffer[i] < 0 || inputs[i].data.empty())
      continue;
    if (!I.check(cu.cuMemcpyHtoDAsync(I.address(inputBuffer[i]), inputs[i].data.data(),
                                      inputs[i].data.size(), I.stream),
                 "uploading input '" + m.inputs[i].name + "'"))
      return done(false);
  }
  if (!I.check(cu.cuEventRecord(evUp1, I.stream), "cuEventRecord"))
    return done(false);
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].kind == BufferKind::State && p.buffers[b].bytes > 0 &&
        !I.check(cu.cuMemsetD8Async(I.address(static_cast<int>(b)), 0,
                                    static_cast<size_t>(p.buffers[b].bytes), I.stream),
                 "zeroing state buffer " + std::to_string(b)))
      return done(false);
  if (virtualCp && arenasAt &&
      !I.check(cu.cuMemsetD8Async(cpMem.ptr, 0, static_cast<size_t>(arenasAt), I.stream),
               "zeroing the virtual ranks' KV caches"))
    return done(false);

  // Rows outputs of chunk `c` (symbols `sym`) to the host.
  auto downloadRows = [&](size_t c, const SymbolValues &sym) {
    for (size_t o = 0; o < m.outputs.size(); ++o) {
      if (p.outputs[o].mode != OutputMode::Rows || sym.n == 0)
        continue;
      const OutputPlan &rc = plan.outputs[o];
      for (int64_t x = 0; x < rc.rowsOuter; ++x) {
        uint8_t *dst = outputs[o].data.data() + (x * S + sym.p0) * rc.rowBytes;
        CUdeviceptr src = I.address(outputBuffer[o]) + x * p.chunking->chunk * rc.rowBytes;
        if (!I.check(cu.cuMemcpyDtoHAsync(dst, src, static_cast<size_t>(sym.n * rc.rowBytes),
                                          I.stream),
                     "downloading output '" + m.outputs[o].name + "' of chunk " +
                         std::to_string(c)))
          return false;
      }
    }
    return true;
  };

  auto chunkElapsed = [&](size_t c, double &ms) {
    float f = 0;
    if (!I.check(cu.cuEventElapsedTime(&f, evChunk[c], evChunk[c + 1]), "cuEventElapsedTime"))
      return false;
    ms = f;
    return true;
  };
  auto report = [&](size_t c) {
    if (!options.progress)
      return true;
    if (!I.check(cu.cuEventSynchronize(evChunk[c + 1]),
                 "running chunk " + std::to_string(c) + " (H20_GPU_SYNC=1 names the step)"))
      return false;
    double ms = 0;
    if (!chunkElapsed(c, ms))
      return false;
    options.progress(static_cast<int64_t>(c), static_cast<int64_t>(chunks.size()),
                     chunks[c].p0 + chunks[c].n, S, ms);
    return true;
  };
  // CUDA graphs for the chunk loop (see GpuExecutor.h), when they can be used.
  ++I.runCount;
  bool graphs = false;
  if (!options.cudaGraph)
    stats.cudaGraphNote = "disabled by the caller (--no-cuda-graph)";
  else if (!p.chunking)
    stats.cudaGraphNote = "the program is not chunked";
  else if (I.syncEachStep)
    stats.cudaGraphNote = "H20_GPU_SYNC=1 runs the steps one by one";
  else if (!I.graphsOff.empty())
    stats.cudaGraphNote = I.graphsOff;
  else
    graphs = true;
  std::vector<ResolvedStep> resolved(p.steps.size());
  if (anyCp) {
    stats.cudaGraphNote = "context parallelism: every step is launched on its own";
    graphs = false;
  }
  if (T > 1) {
    stats.cudaGraphNote = "tensor parallelism (" + std::to_string(T) +
                          " ranks): every step is launched on its own";
    graphs = false;
  }
  // Step profile: one event before each step and one after the last.
  const bool profile = options.profileSteps && !anyCp;
  struct StepEvents {
    Impl &I;
    std::vector<CUevent> ev;
    ~StepEvents() {
      for (CUevent e : ev)
        if (e)
          I.cu->cuEventDestroy(e);
    }
  } stepEv{I, {}};
  std::vector<CUevent> &stepEvents = stepEv.ev;
  if (profile) {
    graphs = false;
    stats.cudaGraphNote = "step profile: every step is launched on its own";
    stats.stepMs.assign(p.steps.size(), 0.0);
    stats.stepCalls.assign(p.steps.size(), 0);
    stepEvents.assign(p.steps.size() + 1, nullptr);
    for (CUevent &e : stepEvents)
      if (!I.check(cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"))
        return done(false);
  }
  // Virtual ranks: steps [from, to) of piece `piece` on its rank.
  auto runPiece = [&](int64_t piece, size_t from, size_t to) {
    const CpSchedule &cs = cp.schedule;
    bind(cs.pieceRank[piece], piece);
    I.tpChunk = piece;
    const SymbolValues &sym = cs.pieces[piece];
    for (size_t i = from; i < to; ++i) {
      if (!resolveStep(p, i, sym, resolved[i], err))
        return I.fail(GpuStatus::BadInput, "chunk " + std::to_string(piece) + ": " + err);
      if (!I.execute(i, resolved[i]))
        return false;
      if (I.syncEachStep &&
          !I.check(cu.cuStreamSynchronize(I.stream),
                   "step " + std::to_string(i) + " (" + stepOpName(p.steps[i]) + ") of chunk " +
                       std::to_string(piece) + " (rank " + std::to_string(cs.pieceRank[piece]) +
                       ")"))
        return false;
    }
    return true;
  };
  if (anyCp) {
    const CpSchedule &cs = cp.schedule;
    const int N = cs.ranks;
    // The ranks this process runs: all (virtual) or its own.
    std::vector<int> mine;
    for (int r = 0; r < N; ++r)
      if (virtualCp || r == me)
        mine.push_back(r);
    stats.virtualRanks = virtualCp ? N : 0;
    stats.ncclRanks = ncclCp ? N : 0;
    stats.cpRank = me;
    stats.cpOutputRank = cs.pieceRank[cs.lastPiece];
    stats.cpChunkTokens = cs.chunkTokens;
    stats.cpPieces = static_cast<int64_t>(cs.pieces.size());
    stats.cpRankChunks = cs.rankChunks;
    stats.cpRankLog.assign(N, {});
    stats.cpExtraBytes = cpMem.bytes;
    if (!I.check(cu.cuEventRecord(evChunk[0], I.stream), "cuEventRecord"))
      return done(false);
    for (size_t l = 0; l < cpLayers; ++l) {
      const CpSegment &seg = cp.segments[l];
      // NCCL: the previous layer's ring must have finished (watchdog on)
      // before this layer is enqueued. Without it a ring stuck on a dead
      // peer would let the host fill the launch queue and block in a
      // launch for ever; with it at most one layer's attention waits
      // behind a ring, and the GPU still runs that attention while the
      // host enqueues the next layer.
      if (ncclCp && l > 0 && !waitRing(l - 1))
        return done(false);
      // Every rank: its pieces up to the layer's attention (this writes
      // their K/V rows into the rank's own cache).
      for (int r : mine)
        for (int64_t piece : cs.rankPieces[r]) {
          if (l == 0 && chunkedInput >= 0) {
            bind(r, piece);
            if (!I.check(cu.cuMemcpyDtoDAsync(I.address(chunkedInput), ids + piece * chunkBytes,
                                              static_cast<size_t>(chunkBytes), I.stream),
                         "copying chunk " + std::to_string(piece) + "'s token ids"))
              return done(false);
          }
          if (!runPiece(piece, seg.begin, static_cast<size_t>(seg.attention)))
            return done(false);
        }
      // The ring: N-1 steps; at step k rank r receives from rank r-1 the
      // block that started at rank r-k (rank r-1 got it at step k-1).
      if (!I.check(cu.cuEventRecord(evRing[2 * l], I.stream), "cuEventRecord"))
        return done(false);
      // The plan's copies and collectives of this layer, in issue order.
      for (const CpCopy &c : cp.ring.copies) {
        if (c.layer != static_cast<int>(l) || ncclCp)
          continue;
        CUdeviceptr dst = cacheAddress(c.to, c.run.buffer) + c.run.offsetBytes;
        CUdeviceptr src = cacheAddress(c.from, c.run.buffer) + c.run.offsetBytes;
        if (!I.check(cu.cuMemcpyDtoDAsync(dst, src, static_cast<size_t>(c.run.bytes), I.stream),
                     "layer " + std::to_string(l) + " ring step " + std::to_string(c.step) +
                         ": copying rank " + std::to_string(c.from) + "'s K/V rows to rank " +
                         std::to_string(c.to)))
          return done(false);
      }
      // NCCL: this rank's collectives of the layer; each ring step is one
      // group (send the block to r+1, receive one from r-1), a transfer
      // per contiguous run, in the plan's order on both sides.
      for (const CpCollective &c : cp.ring.rankLog[ncclCp ? me : 0]) {
        if (!ncclCp || c.layer != static_cast<int>(l))
          continue;
        std::vector<NcclComm::Transfer> group;
        for (const StateRun &run : cp.ring.blocks[l][c.sendOrigin])
          group.push_back({true, c.sendTo, cacheAddress(me, run.buffer) + run.offsetBytes,
                           static_cast<size_t>(run.bytes)});
        for (const StateRun &run : cp.ring.blocks[l][c.recvOrigin])
          group.push_back({false, c.recvFrom, cacheAddress(me, run.buffer) + run.offsetBytes,
                           static_cast<size_t>(run.bytes)});
        if (!I.nccl->groupSendRecv(group, I.stream, err))
          return done(I.fail(GpuStatus::PeerFailed, "rank " + std::to_string(me) + ", layer " +
                                                      std::to_string(l) + " ring step " +
                                                      std::to_string(c.step) + ": " + err));
      }
      for (int r : mine)
        for (const CpCollective &c : cp.ring.rankLog[r])
          if (c.layer == static_cast<int>(l))
            stats.cpRankLog[r].push_back(c);
      if (!I.check(cu.cuEventRecord(evRing[2 * l + 1], I.stream), "cuEventRecord"))
        return done(false);
      // Every rank: the attention of its pieces.
      for (int r : mine)
        for (int64_t piece : cs.rankPieces[r])
          if (!runPiece(piece, static_cast<size_t>(seg.attention), seg.end))
            return done(false);
    }
    // The tail: only the piece holding the last position when every output
    // is "last" (on its rank); else every piece in position order.
    const CpSegment &tail = cp.segments.back();
    for (int64_t piece = lastOnly ? cs.lastPiece : 0;
         piece < static_cast<int64_t>(cs.pieces.size()); ++piece) {
      if (slot[piece] < 0)
        continue; // another NCCL rank's

      if (!runPiece(piece, tail.begin, tail.end) ||
          !downloadRows(static_cast<size_t>(piece), cs.pieces[piece]))
        return done(false);
      ++stats.cpTailPieces;
    }
    if (!I.check(cu.cuEventRecord(evChunk[chunks.size()], I.stream), "cuEventRecord"))
      return done(false);
    I.resetAddresses();
    stats.cpRing = cp.ring.layers;
    if (virtualCp)
      stats.cpCollectivesMatch = collectivesMatch(stats.cpRankLog, stats.cpCollectivesNote);
  }
  for (size_t c = 0; c < chunks.size() && !anyCp; ++c) {
    const SymbolValues &sym = chunks[c];
    I.tpChunk = static_cast<int64_t>(c);
    if (!I.check(cu.cuEventRecord(evChunk[c], I.stream), "cuEventRecord"))
      return done(false);
    if (p.chunking &&
        !I.check(cu.cuMemcpyDtoDAsync(I.address(inputBuffer[p.chunking->input]),
                                      ids + c * chunkBytes, static_cast<size_t>(chunkBytes),
                                      I.stream),
                 "copying chunk " + std::to_string(c) + "'s token ids"))
      return done(false);
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (!resolveStep(p, i, sym, resolved[i], err))
        return done(I.fail(GpuStatus::BadInput, "chunk " + std::to_string(c) + ": " + err));
    // Tuned before the first chunk's steps are enqueued (the GPU then
    // holds only this chunk's ids) and before any graph captures a GEMM.
    if (c == 0 && I.tuneGemms && !I.gemmsTuned && T <= 1 && I.gemm &&
        !I.tuneGemmSteps(resolved, stats))
      return done(false);
    if (graphs) {
      for (Impl::Segment &seg : I.segments)
        if (!I.runSegment(seg, resolved, stats))
          return done(false);
    } else {
      for (size_t i = 0; i < p.steps.size(); ++i) {
        if (profile && !I.check(cu.cuEventRecord(stepEvents[i], I.stream), "cuEventRecord"))
          return done(false);
        if (!I.execute(i, resolved[i]))
          return done(false);
        if (I.syncEachStep &&
            !I.check(cu.cuStreamSynchronize(I.stream),
                     "step " + std::to_string(i) + " (" + stepOpName(p.steps[i]) +
                         ") of chunk " + std::to_string(c)))
          return done(false);
      }
    }
    if (profile) {
      size_t last = p.steps.size();
      if (!I.check(cu.cuEventRecord(stepEvents[last], I.stream), "cuEventRecord") ||
          !I.check(cu.cuEventSynchronize(stepEvents[last]),
                   "running chunk " + std::to_string(c) + " (step profile)"))
        return done(false);
      for (size_t i = 0; i < last; ++i) {
        float f = 0;
        if (!I.check(cu.cuEventElapsedTime(&f, stepEvents[i], stepEvents[i + 1]),
                     "cuEventElapsedTime"))
          return done(false);
        stats.stepMs[i] += f;
        ++stats.stepCalls[i];
      }
    }
    if (!downloadRows(c, sym))
      return done(false);
    if (!I.check(cu.cuEventRecord(evChunk[c + 1], I.stream), "cuEventRecord"))
      return done(false);
    // Report the previous chunk while this one runs.
    if (c > 0 && !report(c - 1))
      return done(false);
  }
  // NCCL: the last layer's ring must have finished (watchdog on) before
  // the downloads: a copy to pageable host memory blocks the host until
  // the stream reaches it, so behind a ring stuck on a dead peer it would
  // block for ever. (Earlier rings were waited for layer by layer.)
  if (ncclCp && cpLayers > 0 && !waitRing(cpLayers - 1))
    return done(false);
  // Likewise the last all-reduce of a tensor-parallel NCCL run.
  if (ncclTp && !I.waitAllReduce())
    return done(false);
  if (!I.check(cu.cuEventRecord(evDl0, I.stream), "cuEventRecord"))
    return done(false);
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    if (p.outputs[o].mode == OutputMode::Rows || outputs[o].data.empty())
      continue;
    if (ncclCp && stats.cpOutputRank != me) {
      outputs[o].data.clear(); // the logits are on rank cpOutputRank
      continue;
    }
    if (!I.check(cu.cuMemcpyDtoHAsync(outputs[o].data.data(), I.address(outputBuffer[o]),
                                      outputs[o].data.size(), I.stream),
                 "downloading output '" + m.outputs[o].name + "'"))
      return done(false);
  }
  if (!I.check(cu.cuEventRecord(evDl1, I.stream), "cuEventRecord"))
    return done(false);
  if (!I.check(cu.cuStreamSynchronize(I.stream),
               "running the program (an asynchronous failure of some step; H20_GPU_SYNC=1 "
               "names it)"))
    return done(false);
  stats.ttftMs = msSince(t0);
  if (!anyCp && !report(chunks.size() - 1))
    return done(false);

  float f = 0;
  stats.chunks = static_cast<int64_t>(chunks.size());
  if (!I.check(cu.cuEventElapsedTime(&f, evUp0, evUp1), "cuEventElapsedTime"))
    return done(false);
  stats.uploadInputsMs = f;
  if (!I.check(cu.cuEventElapsedTime(&f, evUp1, evChunk[chunks.size()]), "cuEventElapsedTime"))
    return done(false);
  stats.prefillMs = f;
  if (!I.check(cu.cuEventElapsedTime(&f, evDl0, evDl1), "cuEventElapsedTime"))
    return done(false);
  stats.downloadMs = f;
  for (size_t c = 0; c < chunks.size() && !anyCp; ++c) {
    double ms = 0;
    if (!chunkElapsed(c, ms))
      return done(false);
    stats.chunkMs.push_back(ms);
  }
  for (size_t l = 0; l < cpLayers; ++l) {
    if (!I.check(cu.cuEventElapsedTime(&f, evRing[2 * l], evRing[2 * l + 1]),
                 "cuEventElapsedTime"))
      return done(false);
    stats.cpRingMs.push_back(f);
  }
  stats.peakGpuMemoryBytes = I.peakBytes;
  stats.deviceMemoryUsedBytes = I.peakDeviceUsed;
  abortOnFailure.ok = true;
  tpScope.ok = true;
  return GpuStatus::Ok;
}

#endif // H20_HAVE_CUDA_HEADERS

} // namespace h20::runtime
