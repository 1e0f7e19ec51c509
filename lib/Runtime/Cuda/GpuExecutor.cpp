//===- GpuExecutor.cpp - run a GPU program on one GPU --------------------===//
//
// One context (the device's primary one, which cuBLASLt also uses), one
// stream, one device allocation planned by planBuffers plus the cuBLASLt
// workspace and, per run, the padded token ids. Every driver call is
// checked; failures name the step. This file holds the API: load() and
// run() in phases; GpuExecutorImpl.h lists the other parts.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/GpuExecutor.h"

#ifndef H20_HAVE_CUDA_HEADERS
#define H20_HAVE_CUDA_HEADERS 0
#endif

#if H20_HAVE_CUDA_HEADERS
#include "GpuExecutorImpl.h"

#include <cstdlib>
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

bool GpuExecutor::deviceIdentity(int, std::string &, int &, int &, std::string &reason) {
  reason = "built without CUDA headers";
  return false;
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

using namespace detail;

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
  if (hostPtr)
    cu->cuMemFreeHost(hostPtr);
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

bool GpuExecutor::deviceIdentity(int ordinal, std::string &name, int &ccMajor, int &ccMinor,
                                 std::string &reason) {
  const CudaApi *cu = cudaApi(reason);
  if (!cu)
    return false;
  CUdevice dev;
  char text[256] = {};
  CUresult r = cu->cuDeviceGet(&dev, ordinal);
  if (r == CUDA_SUCCESS)
    r = cu->cuDeviceGetName(text, sizeof text, dev);
  if (r == CUDA_SUCCESS)
    r = cu->cuDeviceGetAttribute(&ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (r == CUDA_SUCCESS)
    r = cu->cuDeviceGetAttribute(&ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  if (r != CUDA_SUCCESS) {
    reason = "GPU " + std::to_string(ordinal) + ": " + cudaErrorText(*cu, r);
    return false;
  }
  name = text;
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
  const char *share = std::getenv("H20_DUMMY_SHARE");
  if (options.dummyWeights && !(share && std::string(share) == "0")) {
    // Random weights of one shape and type are interchangeable: one copy
    // each (a two-layer Flash model's 58 GB of weights become 31 GB), unless
    // H20_DUMMY_SHARE=0 asks for the real model's memory.
    std::map<std::string, int> first;
    I.sameAs.assign(I.p.buffers.size(), -1);
    for (size_t bi = 0; bi < I.p.buffers.size(); ++bi) {
      const GpuBuffer &b = I.p.buffers[bi];
      if (b.kind != BufferKind::Weight || b.index < 0 || size_t(b.index) >= I.m.weights.size())
        continue;
      std::string key = b.dtype + ":" + std::to_string(b.bytes) + (b.host ? ":host" : "");
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
      (I.workspaceBytes && !I.alloc(I.workspace, I.workspaceBytes, "the cuBLASLt workspace")) ||
      !I.allocHost())
    return done(false);
  I.resetAddresses();
  I.loadStats.planBytes = I.plan.totalBytes;
  auto t0 = std::chrono::steady_clock::now();
  if (!I.uploadWeights(options) || !I.uploadConsts(artifact))
    return done(false);
  I.loadStats.loadWeightsMs = msSince(t0);
  I.loadStats.weightBytes = I.plan.weightBytes;
  I.loadStats.hostWeightBytes = I.plan.hostWeightBytes;
  I.loaded = true;
  return GpuStatus::Ok;
}

namespace {

/// Whether the chunk loop can replay CUDA graphs; when not, why
/// (GpuRunStats::cudaGraphNote).
bool useGraphs(const GpuRunOptions &o, const GpuProgram &p, const RunPlan &plan, bool syncEachStep,
               const std::string &graphsOff, std::string &note) {
  if (plan.contextParallel())
    note = "context parallelism: every step is launched on its own";
  else if (plan.tensorParallel())
    note = "tensor parallelism (" + std::to_string(plan.tpRanks) +
           " ranks): every step is launched on its own";
  else if (!o.cudaGraph)
    note = "disabled by the caller (--no-cuda-graph)";
  else if (!p.chunking)
    note = "the program is not chunked";
  else if (syncEachStep)
    note = "H20_GPU_SYNC=1 runs the steps one by one";
  else if (!graphsOff.empty())
    note = graphsOff;
  else
    return true;
  return false;
}

} // namespace

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
  request.soloTp = options.soloTensorParallel;
  request.ncclRanks = I.nccl ? I.nccl->ranks() : 0;
  request.ncclRank = I.nccl ? I.nccl->rank() : 0;
  RunPlan plan;
  std::string err;
  if (!planRun(m, p, inputs, request, plan, err))
    return done(I.fail(GpuStatus::BadInput, err));
  const std::vector<SymbolValues> &chunks = plan.chunks;
  stats.tokens = plan.tokens;
  const bool anyCp = plan.contextParallel();
  const bool ncclCp = plan.mode == RunMode::NcclContextParallel;
  const bool virtualTp = plan.mode == RunMode::VirtualTensorParallel;
  const bool ncclTp = plan.mode == RunMode::NcclTensorParallel;
  I.tpGroup = virtualTp ? options.virtualTensorParallel : nullptr;
  I.tpSolo = plan.mode == RunMode::SoloTensorParallel;
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
  if (plan.tensorParallel()) {
    stats.tpRanks = plan.tpRanks;
    stats.tpRank = I.tpRank;
    stats.tpMode = virtualTp ? "virtual" : I.tpSolo ? "solo" : "nccl";
  }
  outputs.assign(m.outputs.size(), HostTensor());
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    outputs[o].name = m.outputs[o].name;
    outputs[o].dtype = m.outputs[o].dtype;
    outputs[o].shape = plan.outputs[o].shape;
    outputs[o].data.assign(static_cast<size_t>(plan.outputs[o].bytes), 0);
  }

  // The run's memory and events (freed by RunState on every path): the
  // padded token ids, uploaded once (each chunk copies its slice), and the
  // context-parallel caches and arenas, before the clock starts.
  std::vector<uint8_t> padded; // outlives the stream synchronisation of ~RunState
  Impl::RunState rs(I, plan, options, outputs, stats);
  rs.resolved.resize(p.steps.size());
  if (p.chunking) {
    padded = paddedChunkedInput(p, plan, inputs[p.chunking->input]);
    rs.idsBytes = padded.size();
    if (!I.alloc(rs.ids, rs.idsBytes, "the token ids"))
      return done(false);
  }
  rs.cpLayers = anyCp ? plan.cp.segments.size() - 1 : 0;
  rs.events.assign(chunks.size() + 5 + 2 * rs.cpLayers, nullptr);
  for (CUevent &e : rs.events)
    if (!I.check(cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"))
      return done(false);
  CUevent evUp0 = rs.events[0], evUp1 = rs.events[1], evDl0 = rs.events[2],
          evDl1 = rs.events[3];
  if (anyCp && !I.prepareContextParallel(rs))
    return done(false);

  // NCCL ranks start together: a small all-reduce as a barrier, so one
  // rank's TTFT does not include waiting for a slower peer's start.
  // (Its timeout is longer: peers may still be loading their weights.)
  if (plan.overNccl()) {
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
  // From here on, a failure of this NCCL rank aborts its communicator
  // before RunState's stream synchronisation, which would otherwise wait
  // on queued NCCL work that a peer will not complete.
  struct AbortOnFailure {
    NcclComm *comm = nullptr;
    bool ok = false;
    ~AbortOnFailure() {
      if (comm && !ok)
        comm->abort();
    }
  } abortOnFailure{plan.overNccl() ? I.nccl.get() : nullptr, false};

  // TTFT starts here: ids on the host.
  auto t0 = std::chrono::steady_clock::now();
  if (!I.check(cu.cuEventRecord(evUp0, I.stream), "cuEventRecord"))
    return done(false);
  if (rs.ids && !I.check(cu.cuMemcpyHtoDAsync(rs.ids, padded.data(), rs.idsBytes, I.stream),
                         "uploading the token ids"))
    return done(false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool chunked = p.chunking && p.chunking->input == static_cast<int>(i);
    if (chunked || plan.inputBuffer[i] < 0 || inputs[i].data.empty())
      continue;
    if (!I.check(cu.cuMemcpyHtoDAsync(I.address(plan.inputBuffer[i]), inputs[i].data.data(),
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

  // The runner.
  ++I.runCount;
  rs.graphs = useGraphs(options, p, plan, I.syncEachStep, I.graphsOff, stats.cudaGraphNote);
  if (!(anyCp ? I.runContextParallel(rs) : I.runChunks(rs)))
    return done(false);
  // The last all-reduce of a tensor-parallel NCCL run must have finished
  // (watchdog on) before the downloads, as the last ring (runner).
  if (ncclTp && !I.waitAllReduce())
    return done(false);

  // Outputs to the host.
  if (!I.check(cu.cuEventRecord(evDl0, I.stream), "cuEventRecord"))
    return done(false);
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    if (p.outputs[o].mode == OutputMode::Rows || outputs[o].data.empty())
      continue;
    if (ncclCp && stats.cpOutputRank != plan.cpRank) {
      outputs[o].data.clear(); // the logits are on rank cpOutputRank
      continue;
    }
    if (!I.check(cu.cuMemcpyDtoHAsync(outputs[o].data.data(), I.address(plan.outputBuffer[o]),
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
  if (!anyCp && !I.reportChunk(rs, chunks.size() - 1))
    return done(false);
  if (!I.collectTimings(rs))
    return done(false);
  abortOnFailure.ok = true;
  tpScope.ok = true;
  return GpuStatus::Ok;
}

bool GpuExecutor::Impl::collectTimings(RunState &rs) {
  GpuRunStats &stats = rs.stats;
  const std::vector<SymbolValues> &chunks = rs.plan.chunks;
  float f = 0;
  stats.chunks = static_cast<int64_t>(chunks.size());
  if (!check(cu->cuEventElapsedTime(&f, rs.events[0], rs.events[1]), "cuEventElapsedTime"))
    return false;
  stats.uploadInputsMs = f;
  if (!check(cu->cuEventElapsedTime(&f, rs.events[1], rs.evChunk(chunks.size())),
             "cuEventElapsedTime"))
    return false;
  stats.prefillMs = f;
  if (!check(cu->cuEventElapsedTime(&f, rs.events[2], rs.events[3]), "cuEventElapsedTime"))
    return false;
  stats.downloadMs = f;
  for (size_t c = 0; c < chunks.size() && !rs.plan.contextParallel(); ++c) {
    double ms = 0;
    if (!chunkElapsed(rs, c, ms))
      return false;
    stats.chunkMs.push_back(ms);
  }
  for (size_t l = 0; l < rs.cpLayers; ++l) {
    if (!check(cu->cuEventElapsedTime(&f, rs.evRing(2 * l), rs.evRing(2 * l + 1)),
               "cuEventElapsedTime"))
      return false;
    stats.cpRingMs.push_back(f);
  }
  stats.peakGpuMemoryBytes = peakBytes;
  stats.deviceMemoryUsedBytes = peakDeviceUsed;
  return true;
}

#endif // H20_HAVE_CUDA_HEADERS

} // namespace h20::runtime
