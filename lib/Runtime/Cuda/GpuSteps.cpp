//===- GpuSteps.cpp - one launcher per step kind -----------------------===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

namespace h20::runtime {
using namespace detail;

std::string GpuExecutor::Impl::where(size_t index) const {
  std::string w = "step " + std::to_string(index) + " (" + stepOpName(p.steps[index]) + ")";
  if (auto *l = std::get_if<LaunchStep>(&p.steps[index]))
    w += ", kernel '" + l->kernel + "'";
  return w;
}

void GpuExecutor::Impl::buildKernel(size_t index, const ResolvedStep &step,
                                    KernelLaunch &k) const {
  const ResolvedLaunch &r = std::get<ResolvedLaunch>(step);
  const LaunchStep &ls = std::get<LaunchStep>(p.steps[index]);
  k.f = stepFunction[index];
  for (int d = 0; d < 3; ++d) {
    k.grid[d] = static_cast<unsigned>(r.grid[d]);
    k.block[d] = static_cast<unsigned>(r.block[d]);
  }
  k.smem = static_cast<unsigned>(ls.smem);
  // A struct's tensor maps that cannot be made (alignment, an old driver)
  // leave the kernel on its loads without them (tensor_maps_valid = 0).
  packLaunchParams(p, ls, r, [this](int b) { return static_cast<uint64_t>(address(b)); }, *cu,
                   k.params);
}

bool GpuExecutor::Impl::launchKernel(size_t index, KernelLaunch &k) {
  CUresult res = cu->cuLaunchKernel(k.f, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                                    k.block[2], k.smem, stream, k.params.pointers(), nullptr);
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
  if (r.scaleBufferA >= 0) {
    call.scaleA = address(r.scaleBufferA) + r.scaleOffsetA * 4;
    call.scaleB = address(r.scaleBufferB) + r.scaleOffsetB * 4;
  }
  return call;
}

bool GpuExecutor::Impl::tuneGemmSteps(const std::vector<ResolvedStep> &rs, GpuRunStats &stats) {
  // Nothing else may run while the candidates are timed.
  if (!check(cu->cuStreamSynchronize(stream), "waiting for the GPU before tuning the GEMMs"))
    return false;
  const size_t before = gemm->tunings().size();
  for (size_t i = 0; i < rs.size(); ++i) {
    const auto *r = std::get_if<ResolvedGemm>(&rs[i]);
    // Block-scaled FP8 GEMMs keep the heuristic's choice: the scratch
    // operands tune() times on have no scales.
    if (!r || r->empty || r->groups != 0 || r->scaleBufferA >= 0)
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

} // namespace h20::runtime
