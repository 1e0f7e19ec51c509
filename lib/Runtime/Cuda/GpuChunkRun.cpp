//===- GpuChunkRun.cpp - the chunk loop of one GPU and of tensor parallelism ===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
// Every chunk: its token ids into the chunked input's buffer, its steps
// resolved for (p0, n), then enqueued as CUDA-graph replays (GpuGraphs.cpp)
// or one launch per step (step profile, H20_GPU_SYNC=1, tensor
// parallelism), its rows outputs downloaded; the previous chunk is
// reported while this one runs.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

namespace h20::runtime {
using namespace detail;

bool GpuExecutor::Impl::downloadRows(RunState &rs, size_t c, const SymbolValues &sym) {
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    if (p.outputs[o].mode != OutputMode::Rows || sym.n == 0)
      continue;
    const OutputPlan &rc = rs.plan.outputs[o];
    for (int64_t x = 0; x < rc.rowsOuter; ++x) {
      uint8_t *dst = rs.outputs[o].data.data() + (x * rs.plan.tokens + sym.p0) * rc.rowBytes;
      CUdeviceptr src = address(rc.buffer) + x * p.chunking->chunk * rc.rowBytes;
      if (!check(cu->cuMemcpyDtoHAsync(dst, src, static_cast<size_t>(sym.n * rc.rowBytes),
                                       stream),
                 "downloading output '" + m.outputs[o].name + "' of chunk " + std::to_string(c)))
        return false;
    }
  }
  return true;
}

bool GpuExecutor::Impl::chunkElapsed(RunState &rs, size_t c, double &ms) {
  float f = 0;
  if (!check(cu->cuEventElapsedTime(&f, rs.evChunk(c), rs.evChunk(c + 1)), "cuEventElapsedTime"))
    return false;
  ms = f;
  return true;
}

bool GpuExecutor::Impl::reportChunk(RunState &rs, size_t c) {
  if (!rs.options.progress)
    return true;
  if (!check(cu->cuEventSynchronize(rs.evChunk(c + 1)),
             "running chunk " + std::to_string(c) + " (H20_GPU_SYNC=1 names the step)"))
    return false;
  double ms = 0;
  if (!chunkElapsed(rs, c, ms))
    return false;
  const std::vector<SymbolValues> &chunks = rs.plan.chunks;
  rs.options.progress(static_cast<int64_t>(c), static_cast<int64_t>(chunks.size()),
                      chunks[c].p0 + chunks[c].n, rs.plan.tokens, ms);
  return true;
}

namespace {

/// A pair of CUDA events around every step (GpuRunOptions::profileSteps).
struct StepEvents {
  const CudaApi *cu;
  std::vector<CUevent> ev;
  ~StepEvents() {
    for (CUevent e : ev)
      if (e)
        cu->cuEventDestroy(e);
  }
};

} // namespace

bool GpuExecutor::Impl::runChunks(RunState &rs) {
  const RunPlan &plan = rs.plan;
  const std::vector<SymbolValues> &chunks = plan.chunks;
  GpuRunStats &stats = rs.stats;
  std::string err;
  // Step profile: one event before each step and one after the last.
  const bool profile = rs.options.profileSteps;
  StepEvents stepEv{cu, {}};
  std::vector<CUevent> &stepEvents = stepEv.ev;
  if (profile) {
    rs.graphs = false;
    stats.cudaGraphNote = "step profile: every step is launched on its own";
    stats.stepMs.assign(p.steps.size(), 0.0);
    stats.stepCalls.assign(p.steps.size(), 0);
    stepEvents.assign(p.steps.size() + 1, nullptr);
    for (CUevent &e : stepEvents)
      if (!check(cu->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"))
        return false;
  }
  std::vector<ResolvedStep> &resolved = rs.resolved;
  for (size_t c = 0; c < chunks.size(); ++c) {
    SymbolValues sym = chunks[c];
    sym.rank = tpRank; // 0 unless this executor is a tensor-parallel rank
    tpChunk = static_cast<int64_t>(c);
    if (!check(cu->cuEventRecord(rs.evChunk(c), stream), "cuEventRecord"))
      return false;
    if (p.chunking &&
        !check(cu->cuMemcpyDtoDAsync(address(plan.inputBuffer[p.chunking->input]),
                                     rs.ids + c * plan.chunkBytes,
                                     static_cast<size_t>(plan.chunkBytes), stream),
               "copying chunk " + std::to_string(c) + "'s token ids"))
      return false;
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (!resolveStep(p, i, sym, resolved[i], err))
        return fail(GpuStatus::BadInput, "chunk " + std::to_string(c) + ": " + err);
    // Tuned before the first chunk's steps are enqueued (the GPU then
    // holds only this chunk's ids) and before any graph captures a GEMM.
    if (c == 0 && tuneGemms && !gemmsTuned && plan.tpRanks <= 1 && gemm &&
        !tuneGemmSteps(resolved, stats))
      return false;
    if (rs.graphs) {
      for (Segment &seg : segments)
        if (!runSegment(seg, resolved, stats))
          return false;
    } else {
      for (size_t i = 0; i < p.steps.size(); ++i) {
        if (profile && !check(cu->cuEventRecord(stepEvents[i], stream), "cuEventRecord"))
          return false;
        if (!execute(i, resolved[i]))
          return false;
        if (syncEachStep &&
            !check(cu->cuStreamSynchronize(stream),
                   "step " + std::to_string(i) + " (" + stepOpName(p.steps[i]) + ") of chunk " +
                       std::to_string(c)))
          return false;
      }
    }
    if (profile) {
      size_t last = p.steps.size();
      if (!check(cu->cuEventRecord(stepEvents[last], stream), "cuEventRecord") ||
          !check(cu->cuEventSynchronize(stepEvents[last]),
                 "running chunk " + std::to_string(c) + " (step profile)"))
        return false;
      for (size_t i = 0; i < last; ++i) {
        float f = 0;
        if (!check(cu->cuEventElapsedTime(&f, stepEvents[i], stepEvents[i + 1]),
                   "cuEventElapsedTime"))
          return false;
        stats.stepMs[i] += f;
        ++stats.stepCalls[i];
      }
    }
    if (!downloadRows(rs, c, sym))
      return false;
    if (!check(cu->cuEventRecord(rs.evChunk(c + 1), stream), "cuEventRecord"))
      return false;
    // Report the previous chunk while this one runs.
    if (c > 0 && !reportChunk(rs, c - 1))
      return false;
  }
  return true;
}

} // namespace h20::runtime
