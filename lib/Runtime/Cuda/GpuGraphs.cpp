//===- GpuGraphs.cpp - the CUDA-graph cache of the chunk loop ----------===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

namespace h20::runtime {
using namespace detail;

namespace {

/// Appends the resolved values of a gemm, memset or copy step.
void appendResolved(const ResolvedStep &r, std::vector<int64_t> &key) {
  if (auto *g = std::get_if<ResolvedGemm>(&r)) {
    key.insert(key.end(), {g->batch, g->m, g->n, g->k});
    for (const ResolvedGemmOperand *o : {&g->a, &g->b, &g->c})
      key.insert(key.end(), {o->buffer, o->offset, o->batchStride, o->rowStride, o->colStride});
    // A block-scaled FP8 gemm's scale views: a captured GEMM keeps the
    // scale pointers it was captured with.
    key.insert(key.end(), {g->scaleBufferA, g->scaleOffsetA, g->scaleBufferB, g->scaleOffsetB});
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

// --- CUDA graphs ---------------------------------------------------------------

void GpuExecutor::Impl::planSegments() {
  segments.clear();
  symbols.resize(p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    symbols[i] = stepSymbols(p.steps[i], p.derived);
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
    kp.kernelParams = launchScratch.params.pointers();
    if (!check(c.cuGraphExecKernelNodeSetParams(g->exec, gn.node, &kp),
               where(gn.step) + ": updating its CUDA graph node"))
      return false;
    gn.last = launchScratch;
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

} // namespace h20::runtime
