//===- GpuContextParallelRun.cpp - the context-parallel runner -----------===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
// Virtual ranks (all on this GPU, the ring as device copies) or this NCCL
// rank's share (the ring as ncclSend/ncclRecv groups), layer-major: for
// each layer every rank runs its pieces up to the attention, the ring
// moves the K/V rows written in the layer, then every rank runs its
// pieces' attention; the tail runs for the piece holding the last position
// (GpuExecutor.h describes the schedule, ContextParallel.h plans it).
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"

namespace h20::runtime {
using namespace detail;

bool GpuExecutor::Impl::prepareContextParallel(RunState &rs) {
  const RunPlan &plan = rs.plan;
  const CpSchedule &cs = plan.cp.schedule;
  const bool virtualCp = plan.mode == RunMode::VirtualContextParallel;
  const int me = plan.cpRank;
  CpMemory &cp = rs.cp;
  auto align = [](uint64_t v) { return (v + 255) / 256 * 256; };
  cp.stateRel.assign(p.buffers.size(), 0);
  cp.arenaSpan = align(static_cast<uint64_t>(p.arenaBytes));
  cp.chunkedInput = p.chunking ? plan.inputBuffer[p.chunking->input] : -1;
  cp.slot.assign(cs.pieces.size(), -1);
  if (virtualCp)
    for (size_t k = 0; k < cp.slot.size(); ++k)
      cp.slot[k] = static_cast<int64_t>(k);
  else
    for (size_t k = 0; k < cs.rankPieces[me].size(); ++k)
      cp.slot[cs.rankPieces[me][k]] = static_cast<int64_t>(k);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].kind == BufferKind::State) {
      cp.stateRel[b] = cp.stateSpan;
      cp.stateSpan = align(cp.stateSpan + static_cast<uint64_t>(p.buffers[b].bytes));
      cp.stateBufs.push_back(static_cast<int>(b));
    } else if (p.buffers[b].kind == BufferKind::Temp) {
      cp.tempBufs.push_back(static_cast<int>(b));
    }
  }
  if (cp.chunkedInput >= 0)
    cp.inputSpan = align(static_cast<uint64_t>(p.buffers[cp.chunkedInput].bytes));
  // An NCCL rank holds one KV cache (its own, the plan's).
  uint64_t ranks = virtualCp ? static_cast<uint64_t>(plan.cpRanks) : 1;
  uint64_t pieces = virtualCp ? cs.pieces.size() : cs.rankPieces[me].size();
  cp.arenasAt = (ranks - 1) * cp.stateSpan;
  cp.inputsAt = cp.arenasAt + (pieces - 1) * cp.arenaSpan;
  uint64_t bytes = cp.inputsAt + (pieces - 1) * cp.inputSpan;
  size_t freeB = 0, totalB = 0;
  if (!check(cu->cuMemGetInfo(&freeB, &totalB), "cuMemGetInfo"))
    return false;
  if (bytes > freeB)
    return fail(GpuStatus::Resources,
                (virtualCp ? std::to_string(ranks) + " virtual ranks need "
                           : "rank " + std::to_string(me) + " of " +
                                 std::to_string(plan.cpRanks) + " needs ") +
                    gib(bytes) + " more GPU memory (" + std::to_string(ranks - 1) +
                    " more KV caches of " + gib(cp.stateSpan) + ", " +
                    std::to_string(pieces - 1) + " more arenas of " + gib(cp.arenaSpan) + "); " +
                    gib(freeB) + " free");
  if (bytes && !alloc(cp.ptr, bytes, "the context-parallel KV caches and arenas"))
    return false;
  cp.bytes = cp.ptr ? bytes : 0;
  return true;
}

bool GpuExecutor::Impl::waitRing(RunState &rs, size_t l) {
  std::string err;
  const int me = rs.plan.cpRank;
  GpuStatus w = waitForNccl(*cu, *nccl, stream, rs.evRing(2 * l), 0,
                            "rank " + std::to_string(me) + ": layer " + std::to_string(l), err);
  if (w == GpuStatus::Ok)
    w = waitForNccl(*cu, *nccl, stream, rs.evRing(2 * l + 1), ncclTimeoutS,
                    "rank " + std::to_string(me) + ": the ring of layer " + std::to_string(l),
                    err);
  return w == GpuStatus::Ok ? true : fail(w, err);
}

namespace {

/// Where the buffers of a rank and a piece lie during a context-parallel
/// run: rank `rank`'s KV cache (state buffers) and piece `piece`'s arena
/// and chunked-input buffer; rank 0 and slot 0 use the plan's own, as
/// does an NCCL rank's single cache.
struct CpBinding {
  const CpMemory &cp;
  const GpuProgram &p;
  const BufferPlan &plan;
  CUdeviceptr base;
  bool nccl;

  CUdeviceptr cacheAddress(int rank, int b) const {
    return rank == 0 || nccl ? base + plan.offsets[b]
                             : cp.ptr + (rank - 1) * cp.stateSpan + cp.stateRel[b];
  }
  void bind(std::vector<CUdeviceptr> &addr, int rank, int64_t piece) const {
    for (int b : cp.stateBufs)
      addr[b] = cacheAddress(rank, b);
    uint64_t k = static_cast<uint64_t>(cp.slot[piece]);
    for (int b : cp.tempBufs)
      addr[b] = k == 0 ? base + plan.offsets[b]
                       : cp.ptr + cp.arenasAt + (k - 1) * cp.arenaSpan +
                             static_cast<uint64_t>(p.buffers[b].offset);
    if (cp.chunkedInput >= 0)
      addr[cp.chunkedInput] = k == 0 ? base + plan.offsets[cp.chunkedInput]
                                     : cp.ptr + cp.inputsAt + (k - 1) * cp.inputSpan;
  }
};

} // namespace

bool GpuExecutor::Impl::runContextParallel(RunState &rs) {
  const RunPlan &plan = rs.plan;
  const CpPlan &cpPlan = plan.cp;
  const CpSchedule &cs = cpPlan.schedule;
  const bool virtualCp = plan.mode == RunMode::VirtualContextParallel;
  const bool ncclCp = plan.mode == RunMode::NcclContextParallel;
  const int me = plan.cpRank;
  const int N = cs.ranks;
  GpuRunStats &stats = rs.stats;
  const CpBinding at{rs.cp, p, this->plan, base, ncclCp};
  std::string err;
  if (virtualCp && rs.cp.arenasAt &&
      !check(cu->cuMemsetD8Async(rs.cp.ptr, 0, static_cast<size_t>(rs.cp.arenasAt), stream),
             "zeroing the virtual ranks' KV caches"))
    return false;
  // Steps [from, to) of piece `piece` on its rank.
  auto runPiece = [&](int64_t piece, size_t from, size_t to) {
    at.bind(addr, cs.pieceRank[piece], piece);
    tpChunk = piece;
    const SymbolValues &sym = cs.pieces[piece];
    for (size_t i = from; i < to; ++i) {
      if (!resolveStep(p, i, sym, rs.resolved[i], err))
        return fail(GpuStatus::BadInput, "chunk " + std::to_string(piece) + ": " + err);
      if (!execute(i, rs.resolved[i]))
        return false;
      if (syncEachStep &&
          !check(cu->cuStreamSynchronize(stream),
                 "step " + std::to_string(i) + " (" + stepOpName(p.steps[i]) + ") of chunk " +
                     std::to_string(piece) + " (rank " + std::to_string(cs.pieceRank[piece]) + ")"))
        return false;
    }
    return true;
  };
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
  stats.cpExtraBytes = rs.cp.bytes;
  if (!check(cu->cuEventRecord(rs.evChunk(0), stream), "cuEventRecord"))
    return false;
  for (size_t l = 0; l < rs.cpLayers; ++l) {
    const CpSegment &seg = cpPlan.segments[l];
    // NCCL: the previous layer's ring must have finished (watchdog on)
    // before this layer is enqueued. Without it a ring stuck on a dead
    // peer would let the host fill the launch queue and block in a launch
    // for ever; with it at most one layer's attention waits behind a ring,
    // and the GPU still runs that attention while the host enqueues the
    // next layer.
    if (ncclCp && l > 0 && !waitRing(rs, l - 1))
      return false;
    // Every rank: its pieces up to the layer's attention (this writes
    // their K/V rows into the rank's own cache).
    for (int r : mine)
      for (int64_t piece : cs.rankPieces[r]) {
        if (l == 0 && rs.cp.chunkedInput >= 0) {
          at.bind(addr, r, piece);
          if (!check(cu->cuMemcpyDtoDAsync(address(rs.cp.chunkedInput),
                                           rs.ids + piece * plan.chunkBytes,
                                           static_cast<size_t>(plan.chunkBytes), stream),
                     "copying chunk " + std::to_string(piece) + "'s token ids"))
            return false;
        }
        if (!runPiece(piece, seg.begin, static_cast<size_t>(seg.attention)))
          return false;
      }
    // The ring: N-1 steps; at step k rank r receives from rank r-1 the
    // block that started at rank r-k (rank r-1 got it at step k-1).
    if (!check(cu->cuEventRecord(rs.evRing(2 * l), stream), "cuEventRecord"))
      return false;
    // The plan's copies and collectives of this layer, in issue order.
    for (const CpCopy &c : cpPlan.ring.copies) {
      if (c.layer != static_cast<int>(l) || ncclCp)
        continue;
      CUdeviceptr dst = at.cacheAddress(c.to, c.run.buffer) + c.run.offsetBytes;
      CUdeviceptr src = at.cacheAddress(c.from, c.run.buffer) + c.run.offsetBytes;
      if (!check(cu->cuMemcpyDtoDAsync(dst, src, static_cast<size_t>(c.run.bytes), stream),
                 "layer " + std::to_string(l) + " ring step " + std::to_string(c.step) +
                     ": copying rank " + std::to_string(c.from) + "'s K/V rows to rank " +
                     std::to_string(c.to)))
        return false;
    }
    // NCCL: this rank's collectives of the layer; each ring step is one
    // group (send the block to r+1, receive one from r-1), a transfer per
    // contiguous run, in the plan's order on both sides.
    for (const CpCollective &c : cpPlan.ring.rankLog[ncclCp ? me : 0]) {
      if (!ncclCp || c.layer != static_cast<int>(l))
        continue;
      std::vector<NcclComm::Transfer> group;
      for (const StateRun &run : cpPlan.ring.blocks[l][c.sendOrigin])
        group.push_back({true, c.sendTo, at.cacheAddress(me, run.buffer) + run.offsetBytes,
                         static_cast<size_t>(run.bytes)});
      for (const StateRun &run : cpPlan.ring.blocks[l][c.recvOrigin])
        group.push_back({false, c.recvFrom, at.cacheAddress(me, run.buffer) + run.offsetBytes,
                         static_cast<size_t>(run.bytes)});
      if (!nccl->groupSendRecv(group, stream, err))
        return fail(GpuStatus::PeerFailed, "rank " + std::to_string(me) + ", layer " +
                                               std::to_string(l) + " ring step " +
                                               std::to_string(c.step) + ": " + err);
    }
    for (int r : mine)
      for (const CpCollective &c : cpPlan.ring.rankLog[r])
        if (c.layer == static_cast<int>(l))
          stats.cpRankLog[r].push_back(c);
    if (!check(cu->cuEventRecord(rs.evRing(2 * l + 1), stream), "cuEventRecord"))
      return false;
    // Every rank: the attention of its pieces.
    for (int r : mine)
      for (int64_t piece : cs.rankPieces[r])
        if (!runPiece(piece, static_cast<size_t>(seg.attention), seg.end))
          return false;
  }
  // The tail: only the piece holding the last position when every output
  // is "last" (on its rank); else every piece in position order.
  const CpSegment &tail = cpPlan.segments.back();
  for (int64_t piece = plan.lastOnly ? cs.lastPiece : 0;
       piece < static_cast<int64_t>(cs.pieces.size()); ++piece) {
    if (rs.cp.slot[piece] < 0)
      continue; // another NCCL rank's
    if (!runPiece(piece, tail.begin, tail.end) ||
        !downloadRows(rs, static_cast<size_t>(piece), cs.pieces[piece]))
      return false;
    ++stats.cpTailPieces;
  }
  if (!check(cu->cuEventRecord(rs.evChunk(plan.chunks.size()), stream), "cuEventRecord"))
    return false;
  resetAddresses();
  stats.cpRing = cpPlan.ring.layers;
  if (virtualCp)
    stats.cpCollectivesMatch = collectivesMatch(stats.cpRankLog, stats.cpCollectivesNote);
  // NCCL: the last layer's ring must have finished (watchdog on) before
  // the downloads: a copy to pageable host memory blocks the host until the
  // stream reaches it, so behind a ring stuck on a dead peer it would block
  // for ever. (Earlier rings were waited for layer by layer.)
  if (ncclCp && rs.cpLayers > 0 && !waitRing(rs, rs.cpLayers - 1))
    return false;
  return true;
}

} // namespace h20::runtime
