//===- GpuSteps.cpp - one launcher per step kind -----------------------===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"
#include "h20/Runtime/Cuda/AttentionTma.h"

namespace h20::runtime {
using namespace detail;

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

} // namespace h20::runtime
