//===- GpuCollectives.cpp - NCCL in the executor -----------------------===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

#include <thread>

namespace h20::runtime {
using namespace detail;

GpuStatus detail::waitForNccl(const CudaApi &cu, NcclComm &comm, CUstream stream, CUevent event,
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
  // A solo rank (GpuRunOptions::soloTensorParallel): counted above, not run
  // (its own partial stands in for the sum: a copy when not in place).
  if (tpRanks <= 1 || tpSolo) {
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

} // namespace h20::runtime
