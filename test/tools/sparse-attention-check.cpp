//===- sparse-attention-check.cpp - V4.1 sparse attention and indexer on a GPU ===//
//
// sparse-attention-check [--no-check] [--time S1,S2,...] [--ratio R]
//                        [--indexer-time S:R,...] [--candidates-time S:R,...]
//                        [--within-time S:R,...] [--reps N] [--json PATH]
//
// Correctness: compiles the attn.sparse_attention kernel variants
// (lib/Target/GPU/kernels/sparse_attention.cuh, NVRTC), runs a matrix of
// cases on random inputs and compares every output with a float64 CPU
// reference computed from the same rounded inputs (the op's formula in
// AttnOps.td): window only and window + compressed picks, picks that are
// "none" (T) or negative, rows whose window is cut by the prompt start,
// heads not a multiple of 64, D = 40 / 64 / 128 / 512 (padded dims),
// f16 and bf16 with f32 / 16-bit sinks, a strided view (query and output
// with padded head pitch, latent rows with a gap) that also must equal the
// contiguous run bit for bit, an unaligned view (no 16-byte paths), and an
// unaligned latent beside aligned compressed rows.
// Elements outside the output view must stay untouched. Tolerance:
// relative L2 <= 1e-2 per case (P is rounded to the element type).
// The tensor-core lightning indexer (kernels/indexer_mma.cuh) runs six
// top-k cases (tiny and Flash head shapes, f32 / 16-bit weights, K 512 over
// 1000 entries so its buffer is cut, a head dim of 20, exact ties between
// equal keys), four candidate-block cases (blocks of 1, 4, 8, 32) and five
// top-k-within-candidates cases (mode 1: 6 to 2048 blocks of 3, 4, 8 or
// 100 entries per row, with repeated and out-of-range block indices and
// rows without any valid block), each run twice: streaming the key tiles
// the picks touch and gathering the picked entries; every row is checked against float64
// scores: distinct visible entries (blocks: blocks with a visible entry,
// the newest pinned first; mode 1: entries of the row's valid candidate
// blocks) in score order, none left out with a higher score, ties to the
// lower index, T (NB) in the unused slots.
//
// Timing (--time): DeepSeek-V4.1-Flash shapes: 64 query heads, one 512-wide
// latent head, window 128, top-512 compressed picks out of T = S / R
// (--ratio, default 2) entries drawn from the visible ones (entry t visible
// to row i iff t < (i + 1) / R), bf16 inputs generated on the device.
// Before timing, 48 rows spread over the prompt are checked against the
// float64 reference. CUDA events, one warm-up, median of --reps (default 5);
// both kernels (mma.sync, then wgmma) at each S.
// FLOPs count only visible key slots: 4 * D * (window keys + picks) per
// query row and head. --indexer-time times the GPU lightning indexer
// (kernels/indexer_mma.cuh, mode 0) at V4.1-Flash shapes (32 heads x 128, top
// 512, bf16 query/keys/weights) for each S:ratio; FLOPs 2 * 32 * 128 per
// visible (row, entry) pair. --candidates-time S:R,... times
// attn.indexer_candidates the same way (V4.1-Flash: the 2048 best blocks
// of 8 entries); --within-time S:R,... the top-512 within those blocks
// (the reindex layer, mode 1; its candidates made by a mode-2 run on the
// same inputs; FLOPs: the pairs inside the candidate blocks), streaming
// the touched key tiles and gathering the picked entries
// (indexer_within_candidates_mma[_gather]).
//
// Prints one line per case and timing, exits 1 on any failure, 0 with
// "SKIP: no GPU (<reason>)" without a driver or device. --json writes the
// timings as a JSON array (atomically).
//
//===----------------------------------------------------------------------===//
#include "GpuCheckTool.h"
#include "h20/Runtime/Cuda/CudaDriver.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/IndexerKernel.h"
#include "h20/Target/SparseAttentionKernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace h20;

namespace {

using h20::checktool::api;
using h20::checktool::check;

// ---- element conversions ---------------------------------------------------------

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
using h20::runtime::bfloat16ToFloat;
using h20::runtime::floatToBfloat16;
/// 16-bit type dt (1 f16, 2 bf16): round to nearest even, and back (the
/// runtime's conversions, GpuProgram.h).
uint16_t to16(int dt, float f) {
  return dt == 1 ? h20::runtime::floatToHalf(f) : floatToBfloat16(f);
}
float from16(int dt, uint16_t h) {
  return dt == 1 ? h20::runtime::halfToFloat(h) : bfloat16ToFloat(h);
}

// ---- device buffers and kernel arguments ---------------------------------------

struct Buffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(n) { check(api->cuMemAlloc(&ptr, std::max<size_t>(n, 16)), "cuMemAlloc"); }
  ~Buffer() { api->cuMemFree(ptr); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
};

/// MLIR's expanded memref descriptor: base, aligned, offset, sizes, strides.
void pushMemref(std::vector<uint64_t> &slots, CUdeviceptr p, int64_t offset,
                const std::vector<int64_t> &sizes, const std::vector<int64_t> &strides) {
  slots.push_back(p);
  slots.push_back(p);
  slots.push_back(uint64_t(offset));
  for (int64_t s : sizes)
    slots.push_back(uint64_t(s));
  for (int64_t s : strides)
    slots.push_back(uint64_t(s));
}
void pushF32(std::vector<uint64_t> &slots, float f) { slots.push_back(bitsOf(f)); }

void launch(CUfunction f, unsigned gx, unsigned gy, unsigned block, unsigned smem,
            std::vector<uint64_t> &slots) {
  std::vector<void *> ptrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    ptrs[i] = &slots[i];
  check(api->cuLaunchKernel(f, gx, gy, 1, block, 1, 1, smem, nullptr, ptrs.data(), nullptr),
        "cuLaunchKernel");
}

std::map<std::string, CUfunction> functions;

/// The dynamic shared memory each loaded kernel may take: the opt-in is a
/// cap, so a later launch of the same kernel asking for more (the scalar
/// indexer's row grows with heads x dim) must raise it first.
std::map<std::string, int64_t> smemOptIn;

/// Raises `name`'s dynamic shared memory cap to `smem` bytes if it is below.
void allowSmem(CUfunction f, const std::string &name, int64_t smem) {
  if (smem <= smemOptIn[name])
    return;
  check(api->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)),
        "cuFuncSetAttribute");
  smemOptIn[name] = smem;
}

CUfunction loadPtx(const std::string &ptx, const std::string &name, int64_t smem) {
  auto it = functions.find(name);
  if (it != functions.end()) {
    allowSmem(it->second, name, smem);
    return it->second;
  }
  CUmodule mod;
  check(api->cuModuleLoadDataEx(&mod, ptx.c_str(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
  CUfunction f;
  check(api->cuModuleGetFunction(&f, mod, name.c_str()), "cuModuleGetFunction");
  allowSmem(f, name, smem);
  functions[name] = f;
  return f;
}

/// The kernel `name`, compiled by `compile(ptx, log)` and loaded the first
/// time it is asked for; an NVRTC failure ends the tool with its log.
template <typename Compile>
CUfunction kernelOnce(const std::string &name, int64_t smem, Compile compile) {
  if (auto it = functions.find(name); it != functions.end()) {
    allowSmem(it->second, name, smem);
    return it->second;
  }
  std::string ptx, log;
  if (!compile(ptx, log)) {
    std::fprintf(stderr, "sparse-attention-check: %s\n", log.c_str());
    std::exit(1);
  }
  return loadPtx(ptx, name, smem);
}

CUfunction sparseKernel(const SparseAttentionKernel &k) {
  return kernelOnce(k.name(), kSparseAttentionSmemLimit, [&](std::string &ptx, std::string &log) {
    return compileSparseAttentionPtx({k}, sparseAttentionArch({k}), ptx, log);
  });
}

/// Uniform values in [-amp, amp) as 16-bit elements, generated on the GPU
/// (the timed shapes hold tens of GB): element e = hash(seed, e).
const char *kFillSource = R"(
extern "C" __global__ void h20_fill16(unsigned short *p, long long n, unsigned seed, float amp,
                                      int dt) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    unsigned long long x = (unsigned long long)e * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29;
    float u = (float)(x >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    float v = u * amp;
    unsigned short h;
    if (dt == 1) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    else asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    p[e] = h;
  }
}
)";

void fill16(CUdeviceptr p, int64_t n, unsigned seed, float amp, int dt) {
  static CUfunction f = nullptr;
  if (!f) {
    std::string ptx, log;
    if (!compileCudaToPtx(kFillSource, "", "h20_fill.cuh", "h20_fill.cu", "90", ptx, log)) {
      std::fprintf(stderr, "sparse-attention-check: fill kernel: %s\n", log.c_str());
      std::exit(1);
    }
    f = loadPtx(ptx, "h20_fill16", 0);
  }
  std::vector<uint64_t> slots{p, uint64_t(n), seed, bitsOf(amp), uint64_t(dt)};
  // Kernel parameters: (pointer, i64, u32, f32, i32): each read from its slot.
  std::vector<void *> ptrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    ptrs[i] = &slots[i];
  check(api->cuLaunchKernel(f, 4096, 1, 1, 256, 1, 1, 0, nullptr, ptrs.data(), nullptr), "fill");
}

// ---- the reference ---------------------------------------------------------------

/// Host copies of one case's inputs as floats (already rounded), row-major.
struct HostCase {
  int64_t S, H, D, T, K, W;
  int64_t P; ///< the first query's prompt position; the latent has P + S rows
  std::vector<float> q, lat, sink, cmp;
  std::vector<int64_t> idx;
};

/// out[h, :] of query row i in float64 (AttnOps.td, attn.sparse_attention).
void referenceRow(const HostCase &c, int64_t i, double scale, const float *qRow /*[H, D]*/,
                  const std::vector<const float *> &keys, std::vector<double> &out) {
  out.assign(size_t(c.H * c.D), 0.0);
  std::vector<double> s(keys.size());
  for (int64_t h = 0; h < c.H; ++h) {
    double m = c.sink[size_t(h)];
    for (size_t j = 0; j < keys.size(); ++j) {
      double dot = 0;
      for (int64_t d = 0; d < c.D; ++d)
        dot += double(qRow[h * c.D + d]) * keys[j][d];
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    double den = std::exp(c.sink[size_t(h)] - m);
    for (size_t j = 0; j < keys.size(); ++j) {
      double e = std::exp(s[j] - m);
      den += e;
      for (int64_t d = 0; d < c.D; ++d)
        out[size_t(h * c.D + d)] += e * keys[j][d];
    }
    for (int64_t d = 0; d < c.D; ++d)
      out[size_t(h * c.D + d)] /= den;
  }
  (void)i;
}

/// The visible keys of query row i (prompt position P + i): window rows
/// P + i, P + i - 1, .. then valid picks.
std::vector<const float *> keysOf(const HostCase &c, int64_t i) {
  std::vector<const float *> keys;
  const int64_t pos = c.P + i;
  for (int64_t j = 0; j < c.W && pos - j >= 0; ++j)
    keys.push_back(&c.lat[size_t((pos - j) * c.D)]);
  for (int64_t k = 0; k < c.K; ++k) {
    int64_t t = c.idx[size_t(i * c.K + k)];
    if (t >= 0 && t < c.T)
      keys.push_back(&c.cmp[size_t(t * c.D)]);
  }
  return keys;
}

// ---- correctness cases -----------------------------------------------------------

enum Layout { kContiguous, kStrided, kUnaligned, kMixed };

struct Case {
  const char *name;
  int dt, sinkType;
  int64_t S, H, D, T, K, W;
  Layout layout;
  /// Queries at prompt positions start.. (a later prefill chunk): the
  /// latent holds start + S rows, the queries the last S.
  int64_t start = 0;
  /// A window ring (>= 0): the latent holds only the `ring` positions
  /// before start, then the chunk's S (ChunkedPrefill.cpp's cacheRows);
  /// rows of positions < 0 hold NaN, which must never be read.
  int64_t ring = -1;
};

/// Runs one case on the kernel of `kind` (0 mma.sync, 1 wgmma); returns the
/// output bits [S, H, D] (for bit compares).
bool runCase(const Case &cs, int kind, std::vector<uint16_t> *outBits) {
  std::mt19937_64 rng(uint64_t(cs.S * 131 + cs.H * 7 + cs.D + cs.K * 3 + cs.dt));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  HostCase c{cs.S, cs.H, cs.D, cs.T, cs.K, cs.W, cs.start, {}, {}, {}, {}, {}};
  const int64_t L = cs.ring >= 0 ? cs.ring + cs.S : cs.start + cs.S; // latent rows
  // Latent row r holds position first + r.
  const int64_t first = cs.ring >= 0 ? cs.start - cs.ring : 0;
  const bool compressed = cs.K > 0;
  auto round = [&](float x) { return from16(cs.dt, to16(cs.dt, x)); };
  c.q.resize(size_t(c.S * c.H * c.D));
  c.lat.resize(size_t((cs.start + cs.S) * c.D)); // by position
  c.cmp.resize(size_t(std::max<int64_t>(c.T, 1) * c.D));
  c.sink.resize(size_t(c.H));
  for (float &x : c.q)
    x = round(2.0f * uni(rng));
  for (float &x : c.lat)
    x = round(uni(rng));
  for (float &x : c.cmp)
    x = round(uni(rng));
  for (float &x : c.sink)
    x = cs.sinkType == 0 ? 2.0f * uni(rng) : round(2.0f * uni(rng));
  // Picks: distinct visible entries (t < (pos + 1) / 2), then T ("none")
  // or -1.
  c.idx.assign(size_t(c.S * std::max<int64_t>(c.K, 1)), c.T);
  for (int64_t i = 0; i < c.S && compressed; ++i) {
    int64_t vis = std::min<int64_t>((c.P + i + 1) / 2, c.T);
    std::vector<int64_t> all(static_cast<size_t>(vis));
    for (int64_t t = 0; t < vis; ++t)
      all[size_t(t)] = t;
    std::shuffle(all.begin(), all.end(), rng);
    for (int64_t k = 0; k < c.K; ++k)
      c.idx[size_t(i * c.K + k)] = k < vis ? all[size_t(k)] : (k % 3 == 0 ? -1 : c.T);
  }

  // Device views. Strided: query/output head pitch D + 8 and row pitch
  // H * (D + 8) + 16, latent row pitch D + 24, compressed D + 8; unaligned:
  // base offset 1 and pitches + 1 (no 16-byte path).
  int64_t qPitchH = c.D, qPitchS = c.H * c.D, latPitch = c.D, cmpPitch = c.D, base = 0;
  if (cs.layout == kStrided) {
    qPitchH = c.D + 8, qPitchS = c.H * (c.D + 8) + 16, latPitch = c.D + 24, cmpPitch = c.D + 8;
  } else if (cs.layout == kUnaligned) {
    qPitchH = c.D + 1, qPitchS = c.H * (c.D + 1) + 1, latPitch = c.D + 1, cmpPitch = c.D + 3;
    base = 1;
  }
  // Mixed: only the latent unaligned (scalar loads), the compressed rows on
  // the 16-byte path, whose zero-filled padding chunks must name an
  // aligned address of their own view.
  int64_t latBase = base;
  if (cs.layout == kMixed)
    latPitch = c.D + 1, latBase = 1;
  const int64_t qElems = base + c.S * qPitchS, latElems = latBase + L * latPitch,
                cmpElems = base + std::max<int64_t>(c.T, 1) * cmpPitch;
  std::vector<uint16_t> hq(size_t(qElems), 0xffff), hlat(size_t(latElems), 0xffff),
      hcmp(size_t(cmpElems), 0xffff);
  for (int64_t i = 0; i < c.S; ++i)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t d = 0; d < c.D; ++d)
        hq[size_t(base + i * qPitchS + h * qPitchH + d)] = to16(cs.dt, c.q[size_t((i * c.H + h) * c.D + d)]);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t d = 0; d < c.D; ++d)
      hlat[size_t(latBase + i * latPitch + d)] =
          first + i < 0 ? uint16_t(0x7fc1)
                        : to16(cs.dt, c.lat[size_t((first + i) * c.D + d)]);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t d = 0; d < c.D; ++d)
      hcmp[size_t(base + t * cmpPitch + d)] = to16(cs.dt, c.cmp[size_t(t * c.D + d)]);
  std::vector<unsigned char> hsink(size_t(c.H) * 4);
  for (int64_t h = 0; h < c.H; ++h) {
    if (cs.sinkType == 0) {
      std::memcpy(&hsink[size_t(h) * 4], &c.sink[size_t(h)], 4);
    } else {
      uint16_t v = to16(cs.sinkType, c.sink[size_t(h)]);
      std::memcpy(&hsink[size_t(h) * 2], &v, 2);
    }
  }
  Buffer dq(hq.size() * 2), dlat(hlat.size() * 2), dcmp(hcmp.size() * 2), dsink(hsink.size()),
      didx(c.idx.size() * 8), dout(hq.size() * 2);
  check(api->cuMemcpyHtoD(dq.ptr, hq.data(), dq.bytes), "copy");
  check(api->cuMemcpyHtoD(dlat.ptr, hlat.data(), dlat.bytes), "copy");
  check(api->cuMemcpyHtoD(dcmp.ptr, hcmp.data(), dcmp.bytes), "copy");
  check(api->cuMemcpyHtoD(dsink.ptr, hsink.data(), dsink.bytes), "copy");
  check(api->cuMemcpyHtoD(didx.ptr, c.idx.data(), didx.bytes), "copy");
  std::vector<uint16_t> canary(hq.size(), 0x7fc1); // a NaN pattern
  check(api->cuMemcpyHtoD(dout.ptr, canary.data(), dout.bytes), "copy");

  SparseAttentionKernel k{cs.dt, cs.sinkType, int(sparseAttentionPaddedDim(c.D)), compressed, kind};
  CUfunction f = sparseKernel(k);
  const double scale = 1.0 / std::sqrt(double(c.D));
  std::vector<uint64_t> slots;
  pushMemref(slots, dq.ptr, base, {c.S, c.H, c.D}, {qPitchS, qPitchH, 1});
  pushMemref(slots, dlat.ptr, latBase, {L, c.D}, {latPitch, 1});
  pushMemref(slots, dsink.ptr, 0, {c.H}, {1});
  pushMemref(slots, dcmp.ptr, base, {c.T, c.D}, {cmpPitch, 1});
  pushMemref(slots, didx.ptr, 0, {c.S, std::max<int64_t>(c.K, 1)}, {std::max<int64_t>(c.K, 1), 1});
  pushMemref(slots, dout.ptr, base, {c.S, c.H, c.D}, {qPitchS, qPitchH, 1});
  pushF32(slots, float(scale * 1.4426950408889634));
  slots.push_back(uint64_t(c.W));
  slots.push_back(uint64_t(cs.start));
  const int64_t smem = sparseAttentionSmemBytes(k.paddedDim, c.W + c.K, kind);
  launch(f, unsigned(c.S), unsigned((c.H + 63) / 64), unsigned(k.threads()), unsigned(smem), slots);
  check(api->cuCtxSynchronize(), "sparse attention kernel");
  std::vector<uint16_t> hout(hq.size());
  check(api->cuMemcpyDtoH(hout.data(), dout.ptr, dout.bytes), "copy");

  double err2 = 0, ref2 = 0;
  bool untouched = true;
  std::vector<char> inView(hout.size(), 0);
  std::vector<double> ref;
  if (outBits)
    outBits->clear();
  for (int64_t i = 0; i < c.S; ++i) {
    referenceRow(c, i, scale, &c.q[size_t(i * c.H * c.D)], keysOf(c, i), ref);
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t d = 0; d < c.D; ++d) {
        size_t at = size_t(base + i * qPitchS + h * qPitchH + d);
        inView[at] = 1;
        double got = from16(cs.dt, hout[at]), want = ref[size_t(h * c.D + d)];
        err2 += (got - want) * (got - want);
        ref2 += want * want;
        if (outBits)
          outBits->push_back(hout[at]);
      }
  }
  for (size_t e = 0; e < hout.size(); ++e)
    if (!inView[e] && hout[e] != 0x7fc1)
      untouched = false;
  double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  bool ok = rel <= 1e-2 && std::isfinite(rel) && untouched;
  std::printf("%s %-5s %-34s S=%-4lld H=%-3lld D=%-3lld T=%-4lld K=%-3lld W=%-3lld start=%-4lld %s "
              "rel_l2=%.2e%s\n",
              ok ? "PASS" : "FAIL", kind == 1 ? "wgmma" : "mma", cs.name, (long long)c.S, (long long)c.H, (long long)c.D,
              (long long)c.T, (long long)c.K, (long long)c.W, (long long)c.P,
              cs.dt == 1 ? "f16" : "bf16", rel,
              untouched ? "" : " (wrote outside the output view)");
  return ok;
}

bool runChecks() {
  const Case cases[] = {
      {"window-only", 2, 0, 150, 64, 64, 0, 0, 128, kContiguous},
      {"window+picks", 2, 0, 300, 64, 128, 150, 64, 128, kContiguous},
      {"heads-not-64 (tiny shape)", 2, 2, 129, 4, 40, 64, 16, 8, kContiguous},
      {"heads-over-64", 1, 1, 70, 80, 64, 35, 32, 16, kContiguous},
      {"heads-over-64, D 128", 2, 0, 70, 80, 128, 35, 32, 16, kContiguous},
      // Head dims that pad (partial 16-byte chunks: element copies) and the
      // wgmma kernel's N = 128 (DP 256).
      {"head dim 100", 2, 0, 150, 64, 100, 75, 32, 16, kContiguous},
      {"head dim 256", 1, 1, 100, 64, 256, 50, 64, 32, kContiguous},
      {"many-slots-f16", 1, 0, 200, 16, 128, 100, 200, 128, kContiguous},
      {"flash-head-dim", 2, 0, 96, 64, 512, 48, 64, 64, kContiguous},
      {"strided", 2, 0, 300, 64, 128, 150, 64, 128, kStrided},
      {"unaligned", 2, 0, 300, 64, 128, 150, 64, 128, kUnaligned},
      {"mixed alignment, D 40", 2, 0, 129, 4, 40, 64, 16, 8, kMixed},
      // The same at D 128 (the wgmma kernel): one producer thread copies
      // window rows element by element and picked rows by cp.async in the
      // same key block.
      {"mixed alignment, D 128", 2, 0, 129, 4, 128, 64, 16, 8, kMixed},
      // A later prefill chunk: 100 queries at positions 250..349 over a
      // 350-row latent, window reaching back into the earlier chunk.
      {"chunk at position 250", 2, 0, 100, 64, 128, 175, 64, 128, kContiguous, 250},
      {"chunk at position 7, strided", 1, 1, 40, 4, 40, 23, 16, 8, kStrided, 7},
      // Window rings: the latent holds the W - 1 rows before the chunk,
      // then the chunk's; in the first chunk those rows are positions < 0
      // (NaN, never read), and with start < W - 1 some of them.
      {"ring, first chunk", 2, 0, 150, 64, 128, 0, 0, 128, kContiguous, 0, 127},
      {"ring, chunk at position 100", 2, 0, 100, 64, 128, 50, 64, 128, kContiguous, 100, 127},
      {"ring, chunk at position 400", 2, 0, 100, 64, 128, 250, 64, 128, kContiguous, 400, 127},
      {"ring, chunk at position 20, strided", 1, 1, 40, 4, 40, 23, 16, 16, kStrided, 20, 15},
  };
  bool all = true;
  // Both kernels; the wgmma one where it takes the head dim.
  for (int kind : {0, 1}) {
    std::vector<uint16_t> contiguous;
    for (const Case &cs : cases) {
      if (kind == 1 && !sparseAttentionWgmmaTakes(sparseAttentionPaddedDim(cs.D)))
        continue;
      std::vector<uint16_t> bits;
      all &= runCase(cs, kind, &bits);
      if (std::strcmp(cs.name, "window+picks") == 0)
        contiguous = bits;
      if ((cs.layout == kStrided || cs.layout == kUnaligned) && cs.start == 0) {
        bool same = bits == contiguous;
        std::printf("%s %s equals the contiguous run bit for bit\n", same ? "PASS" : "FAIL",
                    cs.name);
        all &= same;
      }
    }
  }
  return all;
}

// ---- timing at V4.1-Flash shapes ---------------------------------------------------

/// Distinct visible picks for row i: (start + k * p) mod vis with p prime >
/// vis (so k -> pick is injective for k < vis); T when fewer are visible.
void makePicks(std::vector<int64_t> &idx, int64_t S, int64_t K, int64_t T, int64_t ratio) {
  const int64_t p = 1000003;
  idx.resize(size_t(S * K));
  for (int64_t i = 0; i < S; ++i) {
    int64_t vis = std::min<int64_t>((i + 1) / ratio, T);
    uint64_t start = uint64_t(i) * 0x9E3779B97F4A7C15ull >> 20;
    for (int64_t k = 0; k < K; ++k)
      idx[size_t(i * K + k)] = k < vis ? int64_t((start + uint64_t(k) * p) % uint64_t(vis)) : T;
  }
}

double medianMs(CUfunction f, unsigned gx, unsigned gy, unsigned block, unsigned smem,
                std::vector<uint64_t> &slots, int reps) {
  return checktool::medianMs([&] { launch(f, gx, gy, block, smem, slots); }, nullptr, 1, reps);
}

std::string json = "[";

bool timeSparse(int64_t S, int64_t ratio, int reps, int kind) {
  const int64_t H = 64, D = 512, W = 128, K = 512, T = S / ratio;
  const int dt = 2;
  Buffer dq(size_t(S * H * D) * 2), dlat(size_t(S * D) * 2), dcmp(size_t(std::max<int64_t>(T, 1) * D) * 2),
      dsink(size_t(H) * 4), didx(size_t(S * K) * 8), dout(size_t(S * H * D) * 2);
  fill16(dq.ptr, S * H * D, 11, 2.0f, dt);
  fill16(dlat.ptr, S * D, 12, 1.0f, dt);
  fill16(dcmp.ptr, T * D, 13, 1.0f, dt);
  std::vector<float> sink(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    sink[size_t(h)] = float(h % 7) * 0.25f - 0.5f;
  check(api->cuMemcpyHtoD(dsink.ptr, sink.data(), dsink.bytes), "copy");
  std::vector<int64_t> idx;
  makePicks(idx, S, K, T, ratio);
  check(api->cuMemcpyHtoD(didx.ptr, idx.data(), didx.bytes), "copy");
  SparseAttentionKernel k{dt, 0, 512, true, kind};
  CUfunction f = sparseKernel(k);
  const unsigned threads = unsigned(k.threads());
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<uint64_t> slots;
  pushMemref(slots, dq.ptr, 0, {S, H, D}, {H * D, D, 1});
  pushMemref(slots, dlat.ptr, 0, {S, D}, {D, 1});
  pushMemref(slots, dsink.ptr, 0, {H}, {1});
  pushMemref(slots, dcmp.ptr, 0, {T, D}, {D, 1});
  pushMemref(slots, didx.ptr, 0, {S, K}, {K, 1});
  pushMemref(slots, dout.ptr, 0, {S, H, D}, {H * D, D, 1});
  pushF32(slots, float(scale * 1.4426950408889634));
  slots.push_back(uint64_t(W));
  slots.push_back(uint64_t(0)); // start: the whole prompt
  const unsigned smem = unsigned(sparseAttentionSmemBytes(512, W + K, kind));
  launch(f, unsigned(S), 1, threads, smem, slots);
  check(api->cuCtxSynchronize(), "sparse attention kernel");

  // Spot check of 48 rows against float64.
  HostCase c{S, H, D, T, K, W, 0, {}, {}, {}, {}, {}};
  std::vector<uint16_t> lat16(size_t(S * D)), cmp16(size_t(std::max<int64_t>(T, 1) * D));
  check(api->cuMemcpyDtoH(lat16.data(), dlat.ptr, dlat.bytes), "copy");
  check(api->cuMemcpyDtoH(cmp16.data(), dcmp.ptr, size_t(T * D) * 2), "copy");
  c.lat.resize(lat16.size());
  c.cmp.resize(cmp16.size());
  for (size_t e = 0; e < lat16.size(); ++e)
    c.lat[e] = bfloat16ToFloat(lat16[e]);
  for (size_t e = 0; e < cmp16.size(); ++e)
    c.cmp[e] = bfloat16ToFloat(cmp16[e]);
  c.sink = sink;
  c.idx = std::move(idx);
  double err2 = 0, ref2 = 0;
  std::vector<uint16_t> q16(size_t(H * D)), o16(size_t(H * D));
  std::vector<float> qf(size_t(H * D));
  std::vector<double> ref;
  for (int r = 0; r < 48; ++r) {
    int64_t i = r < 4 ? r : (S - 1) * r / 47;
    check(api->cuMemcpyDtoH(q16.data(), dq.ptr + CUdeviceptr(i * H * D * 2), q16.size() * 2), "copy");
    check(api->cuMemcpyDtoH(o16.data(), dout.ptr + CUdeviceptr(i * H * D * 2), o16.size() * 2), "copy");
    for (size_t e = 0; e < q16.size(); ++e)
      qf[e] = bfloat16ToFloat(q16[e]);
    referenceRow(c, i, scale, qf.data(), keysOf(c, i), ref);
    for (size_t e = 0; e < ref.size(); ++e) {
      double got = bfloat16ToFloat(o16[e]);
      err2 += (got - ref[e]) * (got - ref[e]);
      ref2 += ref[e] * ref[e];
    }
  }
  double rel = std::sqrt(err2 / ref2);
  bool ok = rel <= 1e-2;
  const char *kname = kind == 1 ? "sparse_attention_wgmma" : "sparse_attention";
  std::printf("%s flash %s S=%lld ratio=%lld: 48 rows vs float64 rel_l2=%.2e\n",
              ok ? "PASS" : "FAIL", kname, (long long)S, (long long)ratio, rel);

  double flops = 0;
  for (int64_t i = 0; i < S; ++i)
    flops += double(std::min<int64_t>(W, i + 1) + std::min<int64_t>(K, std::min<int64_t>((i + 1) / ratio, T)));
  flops *= 4.0 * double(D) * double(H);
  double ms = medianMs(f, unsigned(S), 1, threads, smem, slots, reps);
  double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("TIME %s S=%lld ratio=%lld H=64 D=512 W=128 K=512 bf16: %.3f ms, "
              "%.1f TFLOP/s (%.3e FLOPs)\n",
              kname, (long long)S, (long long)ratio, ms, tflops, flops);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s{\"kernel\": \"%s\", \"S\": %lld, \"ratio\": %lld, \"H\": 64, "
                "\"D\": 512, \"window\": 128, \"topk\": 512, \"ms\": %.4f, \"flops\": %.6e, "
                "\"tflops\": %.2f, \"check_rel_l2\": %.3e}",
                json.size() > 1 ? ", " : "", kname, (long long)S, (long long)ratio, ms, flops, tflops,
                rel);
  json += buf;
  return ok;
}

// ---- indexer (tensor-core streaming top-k) cases ---------------------------------

/// The mma indexer kernel for (heads, dim, K), compiled and loaded; in
/// mode 1 gathering the picked entries (gather 1) or streaming the key
/// tiles they touch (0).
CUfunction indexerMmaKernel(int dt, int wt, int64_t Hi, int64_t Di, int64_t K, IndexerKernel &k,
                            int mode = 0, int64_t block = 1, int64_t entries = -1,
                            int gather = 0) {
  if (!chooseIndexerMma(mode, dt, dt, wt, Hi, Di, K, k, block, entries, kIndexerMmaMaxSmem,
                        kIndexerMmaSmemPerSm, 0, gather)) {
    std::fprintf(stderr, "sparse-attention-check: no mma indexer variant for %lld x %lld, K %lld\n",
                 (long long)Hi, (long long)Di, (long long)K);
    std::exit(1);
  }
  if (functions.count(k.name())) {
    // Mode 1's shared memory grows with T: raise the kernel's limit.
    CUfunction f = functions[k.name()];
    check(api->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  int(indexerMmaSmemBytes(k, entries, block))),
          "cuFuncSetAttribute");
    return f;
  }
  return kernelOnce(k.name(), indexerMmaSmemBytes(k, entries, block),
                    [&](std::string &ptx, std::string &log) {
                      return compileIndexerPtx({k}, "sm_90", ptx, log);
                    });
}

/// The scalar (FMA) indexer kernel (indexer.cuh), compiled and loaded:
/// the GPU target's choice for float32 inputs, and for mode 1 when the
/// entry count is not static.
CUfunction indexerScalarKernel(int dt, int wt, int mode, int64_t Hi, int64_t Di, int64_t KB,
                               IndexerKernel &k) {
  k = IndexerKernel{dt, dt, wt, mode};
  return kernelOnce(k.name(), indexerSmemBytes(mode, Hi, Di, KB),
                    [&](std::string &ptx, std::string &log) {
                      return compileIndexerPtx({k}, "sm_90", ptx, log);
                    });
}

struct IndexerCase {
  const char *name;
  int dt, wt;
  int64_t S, Hi, Di, ratio, K;
  bool duplicateKeys; ///< keys 2j and 2j + 1 equal: exact ties, the lower index must win
  int64_t block = 0;  ///< > 0: attn.indexer_candidates (mode 2), K = blocks of `block` entries
  int64_t within = 0; ///< > 0: mode 1, top-K entries within `within` candidate blocks per row
  int64_t start = 0;  ///< the first query's prompt position (a later prefill chunk)
  bool scalar = false; ///< the scalar kernel (indexer.cuh), not the tensor-core one
};

/// Mode 1's candidate lists [S, KB]: per row a random mix of blocks (the
/// newest visible one included for most rows), clustered runs, repeats and
/// out-of-range indices (-1, NB, a huge one), which the kernel ignores;
/// every 7th row has no valid block at all.
std::vector<int64_t> candidateLists(int64_t S, int64_t KB, int64_t NB, int64_t ratio, int64_t bs,
                                    std::mt19937_64 &rng, int64_t start = 0) {
  std::vector<int64_t> cand(size_t(S * KB));
  for (int64_t i = 0; i < S; ++i) {
    int64_t *row = &cand[size_t(i * KB)];
    const int64_t visBlocks =
        std::max<int64_t>(1, std::min<int64_t>(((start + i + 1) / ratio + bs - 1) / bs, NB));
    for (int64_t c = 0; c < KB; ++c) {
      const uint64_t r = rng();
      if (i % 7 == 3)
        row[c] = c % 3 == 0 ? -1 : c % 3 == 1 ? NB : int64_t(1) << 40;
      else if (c == 0)
        row[c] = visBlocks - 1;
      else if (r % 11 == 0)
        row[c] = r % 2 ? -1 : NB + int64_t(r % 5);
      else if (r % 5 == 0 && c > 0)
        row[c] = row[c - 1]; // a repeat
      else if (r % 3 == 0)
        row[c] = std::min<int64_t>(NB - 1, (c > 0 && row[c - 1] >= 0 ? row[c - 1] : 0) + 1); // a run
      else
        row[c] = int64_t(r % uint64_t(NB));
    }
  }
  return cand;
}

/// Runs one case on the mma kernel and checks each row against float64
/// scores: the first min(K, visible) slots hold distinct visible entries
/// in non-increasing score order, none scores below an entry left out
/// (within 1e-5 of the row's largest |score|), ties at equal keys go to the
/// lower index, and the other slots hold T. Query row i is prompt position
/// cs.start + i; the keys are the entries of every position up to the
/// last query's.
bool runIndexerCase(const IndexerCase &cs, int gather = 0) {
  std::mt19937_64 rng(uint64_t(cs.S * 17 + cs.Hi * 5 + cs.Di + cs.K + cs.start));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t S = cs.S, Hi = cs.Hi, Di = cs.Di, T = (cs.start + S) / cs.ratio;
  const int64_t bs = std::max<int64_t>(cs.block, 1), NB = std::max<int64_t>((T + bs - 1) / bs, 1);
  const int mode = cs.within > 0 ? 1 : cs.block > 0 ? 2 : 0;
  const int64_t KB = std::max<int64_t>(cs.within, 1);
  const int64_t items = mode == 2 ? NB : T, K = std::min<int64_t>(cs.K, items);
  std::vector<float> q(static_cast<size_t>(S * Hi * Di)), k(static_cast<size_t>(std::max<int64_t>(T, 1) * Di)),
      w(static_cast<size_t>(S * Hi));
  for (float &x : q)
    x = from16(cs.dt, to16(cs.dt, uni(rng)));
  for (float &x : k)
    x = from16(cs.dt, to16(cs.dt, uni(rng)));
  if (cs.duplicateKeys)
    for (int64_t t = 1; t < T; t += 2)
      std::copy(&k[size_t((t - 1) * Di)], &k[size_t(t * Di)], &k[size_t(t * Di)]);
  for (float &x : w)
    x = cs.wt == 0 ? uni(rng) : from16(cs.wt, to16(cs.wt, uni(rng)));
  std::vector<uint16_t> hq(q.size()), hk(k.size());
  for (size_t e = 0; e < q.size(); ++e)
    hq[e] = to16(cs.dt, q[e]);
  for (size_t e = 0; e < k.size(); ++e)
    hk[e] = to16(cs.dt, k[e]);
  std::vector<unsigned char> hw(w.size() * 4);
  for (size_t e = 0; e < w.size(); ++e) {
    if (cs.wt == 0) {
      std::memcpy(&hw[e * 4], &w[e], 4);
    } else {
      uint16_t v = to16(cs.wt, w[e]);
      std::memcpy(&hw[e * 2], &v, 2);
    }
  }
  std::vector<int64_t> cand = mode == 1 ? candidateLists(S, KB, NB, cs.ratio, bs, rng, cs.start)
                                        : std::vector<int64_t>(size_t(S * KB), 0);
  Buffer dq(hq.size() * 2), dk(hk.size() * 2), dw(hw.size()),
      dout(size_t(S * std::max<int64_t>(K, 1)) * 8), dcand(cand.size() * 8);
  check(api->cuMemcpyHtoD(dcand.ptr, cand.data(), dcand.bytes), "copy");
  check(api->cuMemcpyHtoD(dq.ptr, hq.data(), dq.bytes), "copy");
  check(api->cuMemcpyHtoD(dk.ptr, hk.data(), dk.bytes), "copy");
  check(api->cuMemcpyHtoD(dw.ptr, hw.data(), dw.bytes), "copy");
  IndexerKernel kern;
  CUfunction f = cs.scalar ? indexerScalarKernel(cs.dt, cs.wt, mode, Hi, Di, KB, kern)
                           : indexerMmaKernel(cs.dt, cs.wt, Hi, Di, K, kern, mode, bs, T, gather);
  // The scalar kernel's scratch: a float32 row per CTA of T entry scores
  // (mode 2: + NB block scores; mode 1: the KB * block candidate entries).
  const int64_t ctas = 16;
  const int64_t width = std::max<int64_t>(
      {T, int64_t(1), mode == 2 ? T + NB : 0, mode == 1 ? KB * bs : 0});
  Buffer dscratch(size_t(cs.scalar ? ctas * width : 1) * 4);
  const float scale = float(1.0 / std::sqrt(double(Di)));
  std::vector<uint64_t> slots;
  pushMemref(slots, dq.ptr, 0, {S, Hi, Di}, {Hi * Di, Di, 1});
  pushMemref(slots, dk.ptr, 0, {T, Di}, {Di, 1});
  pushMemref(slots, dw.ptr, 0, {S, Hi}, {Hi, 1});
  pushMemref(slots, dcand.ptr, 0, {S, KB}, {KB, 1}); // mode 1 only reads it
  pushMemref(slots, dout.ptr, 0, {S, K}, {K, 1});
  if (cs.scalar)
    pushMemref(slots, dscratch.ptr, 0, {ctas, width}, {width, 1});
  else
    pushMemref(slots, dout.ptr, 0, {1, 1}, {1, 1}); // scratch: unread by the mma kernel
  slots.push_back(uint64_t(cs.ratio));
  slots.push_back(uint64_t(bs));
  pushF32(slots, scale);
  slots.push_back(uint64_t(cs.start));
  if (cs.scalar)
    launch(f, unsigned(ctas), 1, kIndexerThreads, unsigned(indexerSmemBytes(mode, Hi, Di, KB)),
           slots);
  else
    launch(f, unsigned((S + kern.rowsPerCta() - 1) / kern.rowsPerCta()), 1, kIndexerMmaThreads,
           unsigned(indexerMmaSmemBytes(kern, T, bs)), slots);
  check(api->cuCtxSynchronize(), "indexer kernel");
  std::vector<int64_t> out(size_t(S * K));
  check(api->cuMemcpyDtoH(out.data(), dout.ptr, out.size() * 8), "copy");

  int bad = 0;
  std::string first;
  std::vector<double> sc;
  for (int64_t i = 0; i < S; ++i) {
    const int64_t vis = std::min<int64_t>((cs.start + i + 1) / cs.ratio, T);
    sc.assign(size_t(vis), 0.0);
    double big = 0;
    for (int64_t t = 0; t < vis; ++t) {
      double s = 0;
      for (int64_t h = 0; h < Hi; ++h) {
        double dot = 0;
        for (int64_t d = 0; d < Di; ++d)
          dot += double(q[size_t((i * Hi + h) * Di + d)]) * k[size_t(t * Di + d)];
        s += std::max(dot, 0.0) * double(w[size_t(i * Hi + h)]) * double(scale);
      }
      sc[size_t(t)] = s;
      big = std::max(big, std::fabs(s));
    }
    const double eps = 1e-5 * big + 1e-12;
    // Mode 2: the items are the blocks holding a visible entry, scored by
    // their best one; the newest entry's block is pinned to +inf.
    const int64_t none = mode == 2 ? NB : T;
    int64_t visItems = vis;
    // Mode 1: only entries of the row's valid candidate blocks are items.
    std::vector<char> allowed(size_t(vis), 1);
    if (mode == 1) {
      std::vector<char> inList(size_t(NB), 0);
      for (int64_t c = 0; c < KB; ++c) {
        const int64_t b = cand[size_t(i * KB + c)];
        if (b >= 0 && b < NB)
          inList[size_t(b)] = 1;
      }
      for (int64_t t = 0; t < vis; ++t)
        allowed[size_t(t)] = inList[size_t(t / bs)];
    }
    int64_t allowedCount = 0;
    for (char a : allowed)
      allowedCount += a;
    if (mode == 2) {
      visItems = (vis + bs - 1) / bs;
      std::vector<double> blocks(size_t(visItems), -1e300);
      for (int64_t t = 0; t < vis; ++t)
        blocks[size_t(t / bs)] = std::max(blocks[size_t(t / bs)], sc[size_t(t)]);
      if (visItems > 0)
        blocks[size_t(visItems - 1)] = 1e300;
      sc = blocks;
    }
    const int64_t n = std::min(K, mode == 1 ? allowedCount : visItems);
    std::vector<char> taken(size_t(visItems), 0);
    std::string why;
    double minTaken = 1e300;
    for (int64_t j = 0; j < K && why.empty(); ++j) {
      int64_t t = out[size_t(i * K + j)];
      if (j >= n) {
        if (t != none)
          why = "slot " + std::to_string(j) + " holds " + std::to_string(t) + ", not " +
                std::to_string(none);
        continue;
      }
      if (t < 0 || t >= visItems || taken[size_t(t)] || (mode == 1 && !allowed[size_t(t)])) {
        why = "slot " + std::to_string(j) + " holds " + std::to_string(t) +
              " (invisible, repeated or outside the candidate blocks)";
        continue;
      }
      taken[size_t(t)] = 1;
      if (j > 0 && sc[size_t(t)] > sc[size_t(out[size_t(i * K + j - 1)])] + eps)
        why = "not in score order at slot " + std::to_string(j);
      minTaken = std::min(minTaken, sc[size_t(t)]);
    }
    for (int64_t t = 0; t < visItems && why.empty(); ++t) {
      if (taken[size_t(t)] || (mode == 1 && !allowed[size_t(t)]))
        continue;
      if (sc[size_t(t)] > minTaken + eps)
        why = "entry " + std::to_string(t) + " left out with a higher score";
      // An exact tie with a taken entry of a higher index: the lower must win.
      if (mode != 2 && cs.duplicateKeys && t % 2 == 0 && t + 1 < visItems && taken[size_t(t + 1)])
        why = "tie of entries " + std::to_string(t) + " and " + std::to_string(t + 1) +
              " went to the higher index";
    }
    if (!why.empty() && bad++ == 0)
      first = "row " + std::to_string(i) + ": " + why;
  }
  std::printf("%s indexer-%s m%d %-26s S=%-4lld Hi=%-2lld Di=%-3lld ratio=%lld K=%-3lld "
              "start=%lld %s%s%s\n",
              bad ? "FAIL" : "PASS", cs.scalar ? "fma" : kern.gather ? "mma-gather" : "mma", mode,
              cs.name, (long long)S,
              (long long)Hi, (long long)Di, (long long)cs.ratio, (long long)K, (long long)cs.start,
              cs.dt == 1 ? "f16" : "bf16", bad ? ", first: " : "", first.c_str());
  return bad == 0;
}

bool runIndexerChecks() {
  const IndexerCase cases[] = {
      {"tiny shape", 2, 2, 129, 4, 24, 1, 8, false},
      {"flash heads, f32 weights", 2, 0, 300, 32, 128, 2, 64, false},
      {"cuts (K 512, 1000 entries)", 2, 2, 1000, 32, 128, 1, 512, false},
      {"64 heads x 256, f16", 1, 1, 400, 64, 256, 1, 100, false},
      {"dim 20 (no 16-byte path)", 2, 2, 200, 8, 20, 1, 16, false},
      {"exact ties", 2, 2, 600, 32, 128, 1, 64, true},
      {"blocks of 4 (tiny shape)", 2, 2, 129, 4, 24, 1, 6, false, 4},
      {"blocks of 8, cuts", 2, 0, 1200, 32, 128, 1, 100, false, 8},
      {"blocks of 1, ratio 2", 1, 1, 300, 16, 64, 2, 40, false, 1},
      {"blocks of 32, equal key pairs", 2, 2, 700, 32, 128, 1, 12, true, 32},
      {"within 6 blocks of 4 (tiny)", 2, 2, 129, 4, 24, 1, 8, false, 4, 6},
      {"within 64 blocks of 8, cuts", 2, 0, 1500, 32, 128, 1, 100, false, 8, 64},
      {"within 300 blocks of 3, ratio 2", 1, 1, 900, 16, 64, 2, 40, true, 3, 300},
      {"within 2048 blocks of 8 (Flash)", 2, 2, 2100, 32, 128, 1, 512, false, 8, 2048},
      {"within blocks of 100 (span tiles)", 2, 2, 800, 64, 128, 1, 64, true, 100, 5},
      // Later prefill chunks: queries at positions 700.. and 333..
      {"chunk at 700, ratio 4", 2, 2, 200, 32, 128, 4, 64, false, 0, 0, 700},
      {"chunk at 333, blocks of 4", 2, 0, 150, 4, 24, 1, 6, false, 4, 0, 333},
      {"chunk at 500, within blocks", 2, 2, 300, 32, 128, 2, 40, true, 8, 16, 500},
      // The scalar kernel (float32 graphs; mode 1 with a dynamic entry
      // count), whole prompt and at later positions.
      {"fma, whole prompt", 2, 2, 129, 4, 24, 1, 8, false, 0, 0, 0, true},
      {"fma, chunk at 700, ratio 4", 2, 2, 200, 8, 64, 4, 64, false, 0, 0, 700, true},
      {"fma, chunk at 333, blocks of 4", 2, 0, 150, 4, 24, 1, 6, false, 4, 0, 333, true},
      {"fma, chunk at 500, within blocks", 2, 2, 300, 8, 64, 2, 40, true, 8, 16, 500, true},
      {"fma, whole prompt, within blocks", 2, 2, 300, 8, 64, 2, 40, true, 8, 16, 0, true},
  };
  bool all = true;
  for (const IndexerCase &c : cases) {
    all &= runIndexerCase(c);
    // Mode 1 on tensor cores: both ways to find the picked entries.
    if (c.within > 0 && !c.scalar)
      all &= runIndexerCase(c, 1);
  }
  return all;
}

/// mode 0: top-512 entries; mode 2: V4.1-Flash's candidate blocks (the 2048
/// best blocks of 8 entries).
/// mode 1: the top-512 entries within 2048 candidate blocks of 8 per row
/// (the reindex layer; here the blocks of a mode-2 run on the same inputs,
/// as in the model).
bool timeIndexer(int64_t S, int64_t ratio, int reps, int mode = 0, int gather = 0) {
  const int64_t Hi = 32, Di = 128, T = S / ratio, block = mode == 0 ? 1 : 8;
  const int64_t NB = (T + block - 1) / block, KB = std::min<int64_t>(2048, NB);
  const int64_t K = mode == 2 ? KB : 512;
  Buffer dq(size_t(S * Hi * Di) * 2), dk(size_t(std::max<int64_t>(T, 1) * Di) * 2),
      dw(size_t(S * Hi) * 2), dout(size_t(S * K) * 8);
  fill16(dq.ptr, S * Hi * Di, 21, 1.0f, 2);
  fill16(dk.ptr, T * Di, 22, 1.0f, 2);
  fill16(dw.ptr, S * Hi, 23, 1.0f, 2);
  Buffer dcand(size_t(S * KB) * 8);
  if (mode == 1) {
    // The candidate blocks: a mode-2 run on the same query and keys.
    IndexerKernel kb;
    CUfunction fb = indexerMmaKernel(2, 2, Hi, Di, KB, kb, 2, block);
    std::vector<uint64_t> slots;
    pushMemref(slots, dq.ptr, 0, {S, Hi, Di}, {Hi * Di, Di, 1});
    pushMemref(slots, dk.ptr, 0, {T, Di}, {Di, 1});
    pushMemref(slots, dw.ptr, 0, {S, Hi}, {Hi, 1});
    pushMemref(slots, dcand.ptr, 0, {S, KB}, {KB, 1});
    pushMemref(slots, dcand.ptr, 0, {S, KB}, {KB, 1});
    pushMemref(slots, dcand.ptr, 0, {1, 1}, {1, 1});
    slots.push_back(uint64_t(ratio));
    slots.push_back(uint64_t(block));
    pushF32(slots, float(1.0 / std::sqrt(double(Di))));
    slots.push_back(0); // start: the whole prompt
    launch(fb, unsigned((S + kb.rowsPerCta() - 1) / kb.rowsPerCta()), 1, kIndexerMmaThreads,
           unsigned(indexerMmaSmemBytes(kb)), slots);
    check(api->cuCtxSynchronize(), "candidate blocks");
  }
  IndexerKernel k;
  CUfunction f = indexerMmaKernel(2, 2, Hi, Di, K, k, mode, block, T, gather);
  const int64_t smem = indexerMmaSmemBytes(k, T, block);
  std::vector<uint64_t> slots;
  pushMemref(slots, dq.ptr, 0, {S, Hi, Di}, {Hi * Di, Di, 1});
  pushMemref(slots, dk.ptr, 0, {T, Di}, {Di, 1});
  pushMemref(slots, dw.ptr, 0, {S, Hi}, {Hi, 1});
  if (mode == 1)
    pushMemref(slots, dcand.ptr, 0, {S, KB}, {KB, 1});
  else
    pushMemref(slots, dout.ptr, 0, {S, K}, {K, 1}); // candidates: unused
  pushMemref(slots, dout.ptr, 0, {S, K}, {K, 1});
  pushMemref(slots, dout.ptr, 0, {1, 1}, {1, 1}); // scratch: unread by the mma kernel
  slots.push_back(uint64_t(ratio));
  slots.push_back(uint64_t(block));
  pushF32(slots, float(1.0 / std::sqrt(double(Di))));
  slots.push_back(0); // start: the whole prompt
  double flops = 0;
  // Scored pairs: every visible entry; mode 1: those of the row's
  // candidate blocks (at most KB x block; the floor of a kernel that
  // scores only candidates).
  for (int64_t i = 0; i < S; ++i)
    flops += double(std::min<int64_t>(std::min<int64_t>((i + 1) / ratio, T),
                                      mode == 1 ? KB * block : T));
  flops *= 2.0 * double(Hi) * double(Di);
  const unsigned ctas = unsigned((S + k.rowsPerCta() - 1) / k.rowsPerCta());
  double ms = medianMs(f, ctas, 1, kIndexerMmaThreads, unsigned(smem), slots, reps);
  double tflops = flops / (ms * 1e-3) / 1e12;
  const char *kname = mode == 2   ? "indexer_candidates_mma"
                      : mode == 1 ? (k.gather ? "indexer_within_candidates_mma_gather"
                                              : "indexer_within_candidates_mma")
                                  : "indexer_topk_mma";
  std::printf("TIME %s S=%lld ratio=%lld Hi=32 Di=128 K=%lld bf16: %.3f ms, %.1f TFLOP/s "
              "(%.3e FLOPs)\n",
              kname, (long long)S, (long long)ratio, (long long)K, ms, tflops, flops);
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "%s{\"kernel\": \"%s\", \"S\": %lld, \"ratio\": %lld, \"H\": 32, "
                "\"D\": 128, \"topk\": %lld, \"block\": %lld, \"ms\": %.4f, \"flops\": %.6e, "
                "\"tflops\": %.2f}",
                json.size() > 1 ? ", " : "", kname, (long long)S, (long long)ratio, (long long)K,
                (long long)block, ms, flops, tflops);
  json += buf;
  return true;
}

std::vector<int64_t> parseList(const char *s) {
  std::vector<int64_t> v;
  for (const char *p = s; *p;) {
    char *end;
    v.push_back(std::strtoll(p, &end, 10));
    p = *end ? end + 1 : end;
  }
  return v;
}

} // namespace

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0); // lines survive a timeout's kill
  bool doCheck = true;
  std::vector<int64_t> times, indexerTimes, candidateTimes, withinTimes;
  int64_t ratio = 2;
  int reps = 5;
  std::string jsonPath;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    auto value = [&]() -> const char * {
      if (a + 1 >= argc) {
        std::fprintf(stderr, "sparse-attention-check: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++a];
    };
    if (arg == "--no-check")
      doCheck = false;
    else if (arg == "--time")
      times = parseList(value());
    else if (arg == "--ratio")
      ratio = std::atoll(value());
    else if (arg == "--indexer-time")
      indexerTimes = parseList(value()); // S:R pairs, parsed as S, R, S, R...
    else if (arg == "--candidates-time")
      candidateTimes = parseList(value());
    else if (arg == "--within-time")
      withinTimes = parseList(value());
    else if (arg == "--reps")
      reps = std::max(1, std::atoi(value()));
    else if (arg == "--json")
      jsonPath = value();
    else {
      std::fprintf(stderr, "sparse-attention-check: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  if (ratio < 1 || indexerTimes.size() % 2 != 0 || candidateTimes.size() % 2 != 0 ||
      withinTimes.size() % 2 != 0) {
    std::fprintf(stderr, "sparse-attention-check: --ratio must be >= 1, --indexer-time S:R pairs\n");
    return 2;
  }
  CUdevice dev;
  if (!h20::checktool::openDevice("sparse-attention-check", dev))
    return 0;
  if (std::string error; !nvrtcAvailable(&error)) {
    std::printf("SKIP: %s\n", error.c_str());
    return 0;
  }
  char name[128] = {0};
  api->cuDeviceGetName(name, sizeof name, dev);
  std::printf("device: %s\n", name);
  bool ok = true;
  if (doCheck) {
    ok &= runChecks();
    ok &= runIndexerChecks();
  }
  for (int64_t S : times)
    for (int kind : {0, 1}) // mma.sync, then wgmma
      ok &= timeSparse(S, ratio, reps, kind);
  for (size_t p = 0; p + 1 < indexerTimes.size(); p += 2)
    ok &= timeIndexer(indexerTimes[p], indexerTimes[p + 1], std::max(1, reps / 2));
  for (size_t p = 0; p + 1 < candidateTimes.size(); p += 2)
    ok &= timeIndexer(candidateTimes[p], candidateTimes[p + 1], std::max(1, reps / 2), 2);
  for (size_t p = 0; p + 1 < withinTimes.size(); p += 2) {
    // Both ways to find the picked entries (chooseIndexerMma's rule picks one).
    ok &= timeIndexer(withinTimes[p], withinTimes[p + 1], std::max(1, reps / 2), 1, 0);
    ok &= timeIndexer(withinTimes[p], withinTimes[p + 1], std::max(1, reps / 2), 1, 1);
  }
  json += "]\n";
  if (!jsonPath.empty()) {
    std::string err;
    if (!h20::runtime::writeFileAtomically(jsonPath, json, err)) {
      std::fprintf(stderr, "sparse-attention-check: %s\n", err.c_str());
      return 1;
    }
  }
  std::printf("%s\n", ok ? "sparse-attention-check: all passed" : "sparse-attention-check: FAILED");
  return ok ? 0 : 1;
}
