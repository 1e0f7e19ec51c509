//===- TensorParallel.cpp - tensor-parallel weights and all-reduces ------===//
//
// The pure parts of tensor parallelism (TensorParallel.h): no CUDA here.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Parallel/TensorParallel.h"

#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/TensorIO.h"

#include <algorithm>
#include <cstring>

namespace h20::runtime {

namespace {
std::string num(int64_t v) { return std::to_string(v); }

int64_t product(const std::vector<int64_t> &v, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < v.size(); ++i)
    n *= v[i];
  return n;
}

float loadFloat(const void *p, size_t i, const std::string &dtype) {
  if (dtype == "float32") {
    float f;
    std::memcpy(&f, static_cast<const uint8_t *>(p) + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t *>(p) + 2 * i, 2);
  return dtype == "bfloat16" ? bfloat16ToFloat(h) : halfToFloat(h);
}
} // namespace

bool shardSlice(const WeightSpec &w, int rank, ShardSlice &s, std::string &error) {
  s = ShardSlice();
  int64_t count = 0;
  const std::vector<int64_t> &full = w.shard ? w.shard->fullShape : w.shape;
  if (!elementCount(full, count) || !elementCount(w.shape, s.runElements)) {
    error = "weight '" + w.name + "' has an invalid shape";
    return false;
  }
  s.fullElements = count;
  if (!w.shard) {
    s.strideElements = s.runElements;
    return true;
  }
  const WeightShard &sh = *w.shard;
  const size_t a = static_cast<size_t>(sh.axis);
  if (sh.axis < 0 || a >= w.shape.size() || sh.fullShape.size() != w.shape.size()) {
    error = "weight '" + w.name + "': shard axis " + num(sh.axis) + " does not fit its shape";
    return false;
  }
  if (rank < 0 || rank >= static_cast<int>(sh.starts.size())) {
    error = "weight '" + w.name + "' is sharded over " + num(static_cast<int64_t>(sh.starts.size())) +
            " tensor-parallel ranks; rank " + num(rank) + " does not exist";
    return false;
  }
  const int64_t start = sh.starts[rank], size = w.shape[a], fullSize = sh.fullShape[a];
  if (start < 0 || size > fullSize || start > fullSize - size) {
    error = "weight '" + w.name + "': rank " + num(rank) + "'s slice [" + num(start) + ", " +
            num(start + size) + ") along axis " + num(sh.axis) + " is outside [0, " +
            num(fullSize) + ")";
    return false;
  }
  const int64_t inner = product(sh.fullShape, a + 1, sh.fullShape.size());
  s.outer = product(sh.fullShape, 0, a);
  s.runElements = size * inner;
  s.strideElements = fullSize * inner;
  s.firstElement = start * inner;
  return true;
}

std::vector<ShardRead> planShardReads(const ShardSlice &s, int64_t maxElements) {
  std::vector<ShardRead> reads;
  maxElements = std::max<int64_t>(maxElements, 1);
  if (s.outer <= 0 || s.runElements <= 0)
    return reads;
  // Contiguous runs (no shard, or a slice of the outermost axis): one run.
  ShardSlice c = s;
  if (c.strideElements == c.runElements || c.outer == 1) {
    c.runElements *= c.outer;
    c.strideElements = c.runElements;
    c.outer = 1;
  }
  if (c.strideElements <= maxElements && c.outer > 1) {
    // Whole runs, as many per read as their stride allows.
    const int64_t per = std::max<int64_t>(1, maxElements / c.strideElements);
    for (int64_t o = 0; o < c.outer; o += per) {
      ShardRead r;
      r.rows = std::min(per, c.outer - o);
      r.fileElement = c.runStart(o);
      r.runElements = c.runElements;
      r.strideElements = c.strideElements;
      r.deviceElement = o * c.runElements;
      reads.push_back(r);
    }
    return reads;
  }
  // Each run in pieces of at most maxElements.
  for (int64_t o = 0; o < c.outer; ++o)
    for (int64_t e = 0; e < c.runElements; e += maxElements) {
      ShardRead r;
      r.rows = 1;
      r.runElements = std::min(maxElements, c.runElements - e);
      r.strideElements = r.runElements;
      r.fileElement = c.runStart(o) + e;
      r.deviceElement = o * c.runElements + e;
      reads.push_back(r);
    }
  return reads;
}

void extractShard(const ShardSlice &s, const void *full, int64_t es, void *out) {
  const auto *src = static_cast<const uint8_t *>(full);
  auto *dst = static_cast<uint8_t *>(out);
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + o * s.runElements * es, src + s.runStart(o) * es,
                static_cast<size_t>(s.runElements * es));
}

bool reduceSumHost(const std::vector<const void *> &srcs, const std::string &dtype, size_t count,
                   void *dst) {
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16")
    return false;
  auto *out = static_cast<uint8_t *>(dst);
  for (size_t i = 0; i < count; ++i) {
    float acc = 0.0f;
    for (size_t r = 0; r < srcs.size(); ++r) {
      float v = loadFloat(srcs[r], i, dtype);
      acc = r == 0 ? v : acc + v;
    }
    if (dtype == "float32") {
      std::memcpy(out + 4 * i, &acc, 4);
    } else {
      uint16_t h = dtype == "bfloat16" ? floatToBfloat16(acc) : floatToHalf(acc);
      std::memcpy(out + 2 * i, &h, 2);
    }
  }
  return true;
}

namespace {
/// The first field in which two collectives differ, described; "" if none.
std::string difference(const TpCollective &a, const TpCollective &b) {
  if (a.step != b.step)
    return "step " + num(a.step) + " vs " + num(b.step);
  if (a.chunk != b.chunk)
    return "chunk " + num(a.chunk) + " vs " + num(b.chunk);
  if (a.bytes != b.bytes)
    return "bytes " + num(a.bytes) + " vs " + num(b.bytes);
  if (a.dtype != b.dtype)
    return "dtype " + a.dtype + " vs " + b.dtype;
  return "";
}
} // namespace

bool tpCollectivesMatch(const std::vector<std::vector<TpCollective>> &log, std::string &why) {
  for (size_t r = 1; r < log.size(); ++r) {
    size_t n = std::min(log[r].size(), log[0].size());
    for (size_t i = 0; i < n; ++i) {
      std::string d = difference(log[r][i], log[0][i]);
      if (!d.empty()) {
        why = "all-reduce " + num(static_cast<int64_t>(i)) + ": rank " +
              num(static_cast<int64_t>(r)) + " vs rank 0: " + d;
        return false;
      }
    }
    if (log[r].size() != log[0].size()) {
      why = "rank " + num(static_cast<int64_t>(r)) + " issued " +
            num(static_cast<int64_t>(log[r].size())) + " all-reduces, rank 0 " +
            num(static_cast<int64_t>(log[0].size()));
      return false;
    }
  }
  return true;
}

HostAllReduceGroup::HostAllReduceGroup(int ranks)
    : nranks(std::max(ranks, 1)), srcs(static_cast<size_t>(std::max(ranks, 1)), nullptr),
      what(static_cast<size_t>(std::max(ranks, 1))) {}

bool HostAllReduceGroup::aborted() const {
  std::lock_guard<std::mutex> lock(m);
  return isAborted;
}

void HostAllReduceGroup::abort(const std::string &why) {
  std::lock_guard<std::mutex> lock(m);
  if (!isAborted) {
    isAborted = true;
    abortReason = why;
  }
  cv.notify_all();
}

bool HostAllReduceGroup::allReduce(int rank, const TpCollective &w, const void *src, void *dst,
                                   std::string &error) {
  std::unique_lock<std::mutex> lock(m);
  if (rank < 0 || rank >= nranks) {
    error = "all-reduce: rank " + num(rank) + " of " + num(nranks) + " does not exist";
    return false;
  }
  if (isAborted) {
    error = abortReason;
    return false;
  }
  const int64_t es = dtypeSize(w.dtype);
  if (w.bytes < 0 || es == 0 || w.bytes % es != 0 ||
      (w.dtype != "float32" && w.dtype != "float16" && w.dtype != "bfloat16")) {
    error = "all-reduce of step " + num(w.step) + ": " + num(w.bytes) + " bytes of " + w.dtype +
            " cannot be summed";
    return false;
  }
  srcs[rank] = src;
  what[rank] = w;
  const int64_t gen = generation;
  if (++arrived == nranks) {
    arrived = 0;
    for (int r = 1; r < nranks; ++r) {
      std::string d = difference(what[r], what[0]);
      if (!d.empty()) {
        isAborted = true;
        abortReason = "the virtual ranks' all-reduces differ: rank " + num(r) + " vs rank 0: " + d;
        cv.notify_all();
        error = abortReason;
        return false;
      }
    }
    result.resize(static_cast<size_t>(w.bytes));
    reduceSumHost(srcs, w.dtype, static_cast<size_t>(w.bytes / es), result.data());
    ++generation;
    cv.notify_all();
  } else {
    cv.wait(lock, [&] { return generation != gen || isAborted; });
    if (generation == gen) {
      error = abortReason;
      return false;
    }
  }
  // The result stays until every rank arrived at the next all-reduce, so
  // each rank copies it out after the wake-up.
  if (w.bytes > 0)
    std::memcpy(dst, result.data(), static_cast<size_t>(w.bytes));
  return true;
}

bool checkTensorParallelGpus(const Manifest &m, int64_t gpus, std::string &error) {
  const int T = m.tensorParallel();
  if (T <= 1 || gpus == T)
    return true;
  error = "this artifact was compiled for tensor parallelism over " + num(T) +
          " GPUs (h20-opt --gpus " + num(T) + " --parallel tensor); run it with --gpus " + num(T) +
          " [--virtual-ranks]" +
          (gpus > 0 ? " (got --gpus " + num(gpus) + ")" : std::string());
  return false;
}

} // namespace h20::runtime
