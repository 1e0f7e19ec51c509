//===- ContextParallel.cpp - context-parallel prefill plans --------------===//
//
// The pure parts of context parallelism (ContextParallel.h): no CUDA here.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Parallel/ContextParallel.h"

#include "h20/Runtime/Format/Manifest.h"

#include <algorithm>
#include <set>

namespace h20::runtime {

namespace {

constexpr size_t kMaxRuns = size_t(1) << 20;

std::string num(int64_t v) { return std::to_string(v); }

/// Buffers a step references (any view), with duplicates.
std::vector<int> stepBuffers(const GpuStep &step) {
  std::vector<int> out;
  if (auto *l = std::get_if<LaunchStep>(&step)) {
    for (const LaunchArg &a : l->args) {
      if (a.kind == LaunchArg::MemRef)
        out.push_back(a.buffer);
      for (const StructField &f : a.fields)
        if (f.isView())
          out.push_back(f.buffer);
    }
  } else if (auto *g = std::get_if<GemmStep>(&step)) {
    out = {g->a.buffer, g->b.buffer, g->c.buffer};
    for (int b : {g->groupBuffer, g->scaleA.buffer, g->scaleB.buffer})
      if (b >= 0)
        out.push_back(b);
  } else if (auto *m = std::get_if<MemsetStep>(&step)) {
    out = {m->buffer};
  } else if (auto *c = std::get_if<CopyStep>(&step)) {
    out = {c->src, c->dst};
  } else if (auto *r = std::get_if<AllReduceStep>(&step)) {
    out = {r->src, r->dst};
  }
  return out;
}

bool isKind(const GpuProgram &p, int buffer, BufferKind kind) {
  return buffer >= 0 && buffer < static_cast<int>(p.buffers.size()) &&
         p.buffers[buffer].kind == kind;
}

/// Appends the contiguous byte runs of the strided box (offset, sizes,
/// strides in elements of `es` bytes) of `buffer`.
bool boxRuns(int buffer, int64_t offset, std::vector<int64_t> sizes, std::vector<int64_t> strides,
             int64_t es, std::vector<StateRun> &runs, std::string &error) {
  std::vector<int64_t> sz, st;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0)
      return true; // nothing written
    if (sizes[d] != 1) {
      sz.push_back(sizes[d]);
      st.push_back(strides[d]);
    }
  }
  // The innermost dims that are contiguous form one run of `len` elements.
  int64_t len = 1;
  while (!sz.empty() && st.back() == len) {
    len *= sz.back();
    sz.pop_back();
    st.pop_back();
  }
  uint64_t count = 1;
  for (int64_t s : sz) {
    count *= static_cast<uint64_t>(s);
    if (count > kMaxRuns) {
      error = "a view of state buffer " + num(buffer) + " breaks into more than " +
              num(static_cast<int64_t>(kMaxRuns)) + " contiguous runs";
      return false;
    }
  }
  if (runs.size() + count > kMaxRuns) {
    error = "the writes to the state buffers break into more than " +
            num(static_cast<int64_t>(kMaxRuns)) + " contiguous runs";
    return false;
  }
  std::vector<int64_t> idx(sz.size(), 0);
  for (uint64_t i = 0; i < count; ++i) {
    int64_t off = offset;
    for (size_t d = 0; d < sz.size(); ++d)
      off += idx[d] * st[d];
    runs.push_back({buffer, off * es, len * es});
    for (size_t d = sz.size(); d-- > 0;) {
      if (++idx[d] < sz[d])
        break;
      idx[d] = 0;
    }
  }
  return true;
}

} // namespace

bool planCpSchedule(int ranks, int64_t tokens, int64_t compiledChunk, CpSchedule &s,
                    std::string &error) {
  s = CpSchedule();
  if (ranks < 2 || ranks > 1024 || (ranks & (ranks - 1)) != 0) {
    error = "context parallelism: N = " + num(ranks) +
            " is not a power of two from 2 to 1024 (the zigzag split needs 2N equal chunks)";
    return false;
  }
  if (compiledChunk <= 0) {
    error = "context parallelism: the program is not chunked";
    return false;
  }
  int64_t parts = 2 * static_cast<int64_t>(ranks);
  if (tokens <= 0 || tokens % parts != 0) {
    error = "context parallelism: the prompt's " + num(tokens) + " tokens do not split into 2N = " +
            num(parts) + " equal context-parallel chunks (S must be a multiple of " +
            num(parts * compiledChunk) + ")";
    return false;
  }
  int64_t L = tokens / parts;
  if (L % compiledChunk != 0) {
    error = "context parallelism: a context-parallel chunk of " + num(L) + " tokens (S / 2N = " +
            num(tokens) + " / " + num(parts) + ") is not a multiple of the artifact's " +
            num(compiledChunk) + "-token compiled chunk (S must be a multiple of " +
            num(parts * compiledChunk) + ")";
    return false;
  }
  s.ranks = ranks;
  s.tokens = tokens;
  s.chunkTokens = L;
  s.compiledChunk = compiledChunk;
  int64_t per = L / compiledChunk;
  s.rankChunks.assign(ranks, {});
  s.rankPieces.assign(ranks, {});
  for (int r = 0; r < ranks; ++r)
    s.rankChunks[r] = {r, static_cast<int>(parts - 1 - r)};
  for (int64_t i = 0; i < parts; ++i) {
    CpChunk c;
    c.index = static_cast<int>(i);
    c.rank = static_cast<int>(i < ranks ? i : parts - 1 - i);
    c.begin = i * L;
    c.end = c.begin + L;
    c.firstPiece = i * per;
    c.pieces = per;
    s.chunks.push_back(c);
    for (int64_t j = 0; j < per; ++j) {
      s.pieces.push_back({c.begin + j * compiledChunk, compiledChunk,
                          (c.begin + j * compiledChunk) / compiledChunk});
      s.pieceRank.push_back(c.rank);
    }
  }
  for (int r = 0; r < ranks; ++r)
    for (int c : s.rankChunks[r])
      for (int64_t j = 0; j < per; ++j)
        s.rankPieces[r].push_back(s.chunks[c].firstPiece + j);
  s.lastPiece = static_cast<int64_t>(s.pieces.size()) - 1;
  return true;
}

bool splitLayerSegments(const GpuProgram &p, std::vector<CpSegment> &segments,
                        std::string &error) {
  segments.clear();
  if (!p.chunking) {
    error = "context parallelism needs a chunked program (compile with --chunk)";
    return false;
  }
  auto where = [&](size_t i) {
    return "step " + num(static_cast<int64_t>(i)) + " (" + stepOpName(p.steps[i]) + ")";
  };
  if (p.layers.empty()) {
    error = "context parallelism runs a program layer by layer, and this one declares no "
            "layers: recompile it with this h20-opt (it declares them for chunked programs "
            "whose every attention reads the KV cache)";
    return false;
  }
  // The declared layers (parseGpuProgram checked that they tile the steps
  // up to the last attention); each one's attention must read the cache.
  auto stateWriters = [&](size_t begin, size_t end) {
    std::vector<size_t> writers;
    for (size_t i = begin; i < end; ++i) {
      std::vector<int> bufs = stepBuffers(p.steps[i]);
      if (std::any_of(bufs.begin(), bufs.end(),
                      [&](int b) { return isKind(p, b, BufferKind::State); }))
        writers.push_back(i);
    }
    return writers;
  };
  for (const GpuLayer &l : p.layers) {
    const size_t a = static_cast<size_t>(l.attentionStep);
    if (a >= p.steps.size() || !isAttentionStep(p.steps[a])) {
      // parseGpuProgram rules this out; a hand-built program may not
      error = "layer " + num(l.layer) + ": step " + num(l.attentionStep) +
              " is not an attention step";
      return false;
    }
    // Its K and V ("kv" views) must be the cache, the rows the ring passes.
    bool kvInState = false, kvElsewhere = false;
    for (const LaunchArg &arg : std::get<LaunchStep>(p.steps[a]).args)
      for (const StructField &f : arg.fields)
        if (f.isView() && f.kv)
          (isKind(p, f.buffer, BufferKind::State) ? kvInState : kvElsewhere) = true;
    if (!kvInState || kvElsewhere) {
      error = where(a) + ": its K/V are not in a state buffer (the KV cache); context "
                         "parallelism passes K/V between ranks through the KV cache";
      return false;
    }
    CpSegment seg;
    seg.begin = static_cast<size_t>(l.firstStep);
    seg.end = a + 1;
    seg.attention = static_cast<int64_t>(a);
    seg.stateWriters = stateWriters(seg.begin, a);
    segments.push_back(seg);
  }
  CpSegment tail;
  tail.begin = segments.back().end;
  tail.end = p.steps.size();
  if (std::vector<size_t> w = stateWriters(tail.begin, tail.end); !w.empty()) {
    error = where(w.front()) + ": references the KV cache after the last attention step; "
                               "context parallelism cannot run this program";
    return false;
  }
  segments.push_back(tail);
  for (size_t s = 0; s + 1 < segments.size(); ++s)
    for (size_t i = segments[s].begin; i < segments[s].end; ++i)
      for (int b : stepBuffers(p.steps[i]))
        if (isKind(p, b, BufferKind::Output)) {
          error = where(i) + ": writes an output buffer before the last attention step; "
                             "context parallelism needs outputs written after it";
          return false;
        }
  return true;
}

bool stateWriteRuns(const GpuProgram &p, size_t index, const SymbolValues &s,
                    std::vector<StateRun> &runs, std::string &error) {
  ResolvedStep r;
  if (!resolveStep(p, index, s, r, error))
    return false;
  auto state = [&](int b) { return isKind(p, b, BufferKind::State); };
  if (auto *l = std::get_if<ResolvedLaunch>(&r)) {
    if (l->empty)
      return true;
    const LaunchStep &ls = std::get<LaunchStep>(p.steps[index]);
    auto written = [&](const ResolvedMemRef &v, const std::string &dtype) {
      return !state(v.buffer) || boxRuns(v.buffer, v.offset, v.sizes, v.strides,
                                         viewElementBytes(p, v.buffer, dtype), runs, error);
    };
    for (size_t a = 0; a < l->args.size(); ++a) {
      const ResolvedLaunchArg &arg = l->args[a];
      const LaunchArg &la = ls.args[a];
      if (arg.kind == LaunchArg::MemRef && !written(arg.memref, la.dtype))
        return false;
      for (size_t f = 0; f < arg.fields.size(); ++f)
        if (la.fields[f].isView() && la.fields[f].written &&
            !written(arg.fields[f].view, la.fields[f].dtype))
          return false;
    }
  } else if (auto *g = std::get_if<ResolvedGemm>(&r)) {
    if (!g->empty && state(g->c.buffer)) {
      const GemmStep &gs = std::get<GemmStep>(p.steps[index]);
      if (!boxRuns(g->c.buffer, g->c.offset, {g->batch, g->m, g->n},
                   {g->c.batchStride, g->c.rowStride, g->c.colStride},
                   dtypeSize(gs.dtypeC), runs, error))
        return false;
    }
  } else if (auto *m = std::get_if<ResolvedMemset>(&r)) {
    if (m->bytes > 0 && state(m->buffer))
      runs.push_back({m->buffer, m->offsetBytes, m->bytes});
  } else if (auto *c = std::get_if<ResolvedCopy>(&r)) {
    if (c->bytes > 0 && state(c->dst))
      runs.push_back({c->dst, c->dstOffsetBytes, c->bytes});
  } else if (auto *a = std::get_if<ResolvedAllReduce>(&r)) {
    if (a->bytes > 0 && state(a->dst))
      runs.push_back({a->dst, a->dstOffsetBytes, a->bytes});
  }
  return true;
}

void mergeStateRuns(std::vector<StateRun> &runs) {
  std::sort(runs.begin(), runs.end(), [](const StateRun &a, const StateRun &b) {
    return a.buffer != b.buffer ? a.buffer < b.buffer : a.offsetBytes < b.offsetBytes;
  });
  std::vector<StateRun> out;
  for (const StateRun &r : runs) {
    if (r.bytes <= 0)
      continue;
    if (!out.empty() && out.back().buffer == r.buffer &&
        r.offsetBytes <= out.back().offsetBytes + out.back().bytes) {
      out.back().bytes =
          std::max(out.back().offsetBytes + out.back().bytes, r.offsetBytes + r.bytes) -
          out.back().offsetBytes;
    } else {
      out.push_back(r);
    }
  }
  runs = std::move(out);
}

bool planCpRing(int ranks, std::vector<std::vector<std::vector<StateRun>>> written,
                CpRingPlan &plan, std::string &error) {
  plan = CpRingPlan();
  if (ranks < 1) {
    error = "ring of " + num(ranks) + " ranks";
    return false;
  }
  plan.rankLog.assign(ranks, {});
  for (size_t l = 0; l < written.size(); ++l) {
    std::vector<std::vector<StateRun>> &blocks = written[l];
    if (static_cast<int>(blocks.size()) != ranks) {
      error = "layer " + num(static_cast<int64_t>(l)) + ": blocks for " +
              num(static_cast<int64_t>(blocks.size())) + " ranks, expected " + num(ranks);
      return false;
    }
    // Blocks must be disjoint: a row has one owner.
    std::vector<std::pair<StateRun, int>> all;
    for (int r = 0; r < ranks; ++r) {
      mergeStateRuns(blocks[r]);
      for (const StateRun &run : blocks[r])
        all.push_back({run, r});
    }
    std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
      return a.first.buffer != b.first.buffer ? a.first.buffer < b.first.buffer
                                              : a.first.offsetBytes < b.first.offsetBytes;
    });
    for (size_t i = 1; i < all.size(); ++i) {
      const StateRun &a = all[i - 1].first, &b = all[i].first;
      if (a.buffer == b.buffer && b.offsetBytes < a.offsetBytes + a.bytes) {
        error = "layer " + num(static_cast<int64_t>(l)) + ": ranks " + num(all[i - 1].second) +
                " and " + num(all[i].second) + " both write bytes " + num(b.offsetBytes) +
                ".. of state buffer " + num(b.buffer) + "; context-parallel blocks must be "
                "disjoint";
        return false;
      }
    }
    std::vector<int64_t> blockBytes(ranks, 0);
    for (int r = 0; r < ranks; ++r)
      for (const StateRun &run : blocks[r])
        blockBytes[r] += run.bytes;
    CpLayerTraffic t;
    t.layer = static_cast<int>(l);
    t.steps = ranks - 1;
    for (int k = 1; k < ranks; ++k) {
      for (int r = 0; r < ranks; ++r) {
        CpCollective c;
        c.layer = static_cast<int>(l);
        c.step = k;
        c.sendTo = (r + 1) % ranks;
        c.recvFrom = (r - 1 + ranks) % ranks;
        c.sendOrigin = (r - k + 1 + ranks) % ranks;
        c.recvOrigin = (r - k + ranks) % ranks;
        c.sendBytes = blockBytes[c.sendOrigin];
        c.recvBytes = blockBytes[c.recvOrigin];
        plan.rankLog[r].push_back(c);
        for (const StateRun &run : blocks[c.recvOrigin]) {
          plan.copies.push_back({c.layer, k, c.recvFrom, r, c.recvOrigin, run});
          ++t.copies;
        }
        ++t.sends;
        t.bytes += c.recvBytes;
      }
    }
    plan.layers.push_back(t);
  }
  plan.blocks = std::move(written);
  return true;
}

bool planContextParallel(const GpuProgram &p, int ranks, int64_t tokens, CpPlan &plan,
                         std::string &error) {
  plan = CpPlan();
  if (!splitLayerSegments(p, plan.segments, error))
    return false;
  if (!planCpSchedule(ranks, tokens, p.chunking->chunk, plan.schedule, error))
    return false;
  // The schedule's pieces are chunks of the program: their derived
  // symbols (a compressor's partial groups) follow from p0, n and q.
  for (SymbolValues &piece : plan.schedule.pieces)
    deriveSymbols(p.derived, piece);
  const CpSchedule &s = plan.schedule;
  std::vector<std::vector<std::vector<StateRun>>> written;
  for (size_t l = 0; l + 1 < plan.segments.size(); ++l) {
    std::vector<std::vector<StateRun>> perRank(ranks);
    for (int r = 0; r < ranks; ++r)
      for (int64_t piece : s.rankPieces[r])
        for (size_t w : plan.segments[l].stateWriters) {
          std::string err;
          if (!stateWriteRuns(p, w, s.pieces[piece], perRank[r], err)) {
            error = "context parallelism: chunk at p0 = " + num(s.pieces[piece].p0) + ": " + err;
            return false;
          }
        }
    written.push_back(std::move(perRank));
  }
  return planCpRing(ranks, std::move(written), plan.ring, error);
}

bool collectivesMatch(const std::vector<std::vector<CpCollective>> &log, std::string &why) {
  int ranks = static_cast<int>(log.size());
  for (int r = 1; r < ranks; ++r)
    if (log[r].size() != log[0].size()) {
      why = "rank " + num(r) + " issues " + num(static_cast<int64_t>(log[r].size())) +
            " collectives, rank 0 " + num(static_cast<int64_t>(log[0].size()));
      return false;
    }
  for (size_t i = 0; i < (ranks ? log[0].size() : 0); ++i) {
    std::string at = "collective " + num(static_cast<int64_t>(i));
    for (int r = 0; r < ranks; ++r) {
      const CpCollective &c = log[r][i];
      if (c.layer != log[0][i].layer || c.step != log[0][i].step) {
        why = at + ": rank " + num(r) + " is at layer " + num(c.layer) + " step " +
              num(c.step) + ", rank 0 at layer " + num(log[0][i].layer) + " step " +
              num(log[0][i].step);
        return false;
      }
      if (c.sendTo < 0 || c.sendTo >= ranks || c.recvFrom < 0 || c.recvFrom >= ranks) {
        why = at + ": rank " + num(r) + " names a peer outside [0, " + num(ranks) + ")";
        return false;
      }
      const CpCollective &peer = log[c.sendTo][i];
      if (peer.recvFrom != r || peer.recvBytes != c.sendBytes ||
          peer.recvOrigin != c.sendOrigin) {
        why = at + ": rank " + num(r) + " sends " + num(c.sendBytes) + " bytes (block of rank " +
              num(c.sendOrigin) + ") to rank " + num(c.sendTo) + ", which receives " +
              num(peer.recvBytes) + " bytes (block of rank " + num(peer.recvOrigin) +
              ") from rank " + num(peer.recvFrom);
        return false;
      }
    }
  }
  return true;
}

} // namespace h20::runtime
