//===- moe-check.cpp - the routed-experts (MoE) kernels on a GPU -----------===//
//
// moe-check
//
// Compiles lib/Target/GPU/kernels/moe.cuh (compileMoePtx, NVRTC), loads it
// with the CUDA driver API and checks every kernel against a CPU reference
// on random inputs:
//   route      E=8 K=2 and E=384 K=6 (bias f32 / f16 / bf16), E=1024 K=16,
//              K=E, exact ties (equal logits and bias: the lower expert
//              first), NaN and -inf keys; ids in key order (a GPU/CPU
//              expf ulp may swap keys within 1e-5: counted, not failed),
//              weights vs the float formula, counts = the picks' histogram;
//              the route's own output then goes through positions.
//   positions  offsets, pos and rowToken equal to a CPU stable counting
//              sort exactly (several 8192-pick steps, empty experts, a
//              strided ids / pos view).
//   gather     bit-exact rows, f32 / f16 / bf16, 16-byte and element paths
//              (a strided, unaligned view); nothing outside Xp's view
//              written, nor its rows from offsets[E] on (an expert-parallel
//              rank places only its experts' picks).
//   swiglu     values around +-limit (exactly at, just past, far past,
//              large negative gates), f32 / f16 / bf16, contiguous, G and U
//              as halves of one [R, 2I] buffer, an unaligned view; rows
//              from offsets[E] on untouched.
//   combine    f32 / f16 / bf16 outputs, contiguous, a strided Y, an
//              unaligned Y and Yp (element path); nothing outside Y's view
//              written.
//   fp8 A      (sm_90a) the FP8 forms of gather and swiglu: Aq / As bit for
//              bit the quantised gathered rows; SwiGLU scales within 1e-5
//              and codes within e4m3 rounding of float64; partial blocks,
//              zero blocks, unplaced rows untouched; timed at V4.1-Flash
//              shapes against the 16-bit kernel + the quantising kernel.
//   fp4 gemm   the grouped GEMM over MXFP4 weights (moe_fp4_gemm.cuh), bf16
//              tensor-core and f32 / f16 CUDA-core kernels, against float64
//              (empty and one-row experts, partial tiles, subnormal scales,
//              rows past the experts untouched); timed at V4.1-Flash's
//              expert shapes.
// Prints one line per case, exits 1 on any failure, 0 with "SKIP: no GPU
// (<reason>)" without a driver or device.
//
//===----------------------------------------------------------------------===//
#include "GpuCheckTool.h"
#include "h20/Runtime/Cuda/CudaDriver.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/WeightDerive.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/Fp8Kernel.h"
#include "h20/Target/MoeKernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
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
const char *typeName(int t) { return t == 0 ? "f32" : t == 1 ? "f16" : "bf16"; }
int elemBytes(int dt) { return dt == 0 ? 4 : 2; }
/// Element type dt (0 f32, 1 f16, 2 bf16) as its bits (round to nearest
/// even: the runtime's conversions, GpuProgram.h), and back.
uint32_t toBits(int dt, float f) {
  return dt == 0   ? bitsOf(f)
         : dt == 1 ? h20::runtime::floatToHalf(f)
                   : h20::runtime::floatToBfloat16(f);
}
float fromBits(int dt, uint32_t b) {
  if (dt == 0) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  return dt == 1 ? h20::runtime::halfToFloat(uint16_t(b))
                 : h20::runtime::bfloat16ToFloat(uint16_t(b));
}
float roundTo(int dt, float f) { return fromBits(dt, toBits(dt, f)); }

/// Host storage of `n` elements of type dt, as raw bytes.
struct HostArray {
  int dt;
  std::vector<unsigned char> bytes;
  HostArray(int dt, size_t n, uint32_t fillBits = 0) : dt(dt), bytes(n * size_t(elemBytes(dt))) {
    for (size_t i = 0; i < n; ++i)
      setBits(i, fillBits);
  }
  size_t size() const { return bytes.size() / size_t(elemBytes(dt)); }
  uint32_t bits(size_t i) const {
    uint32_t b = 0;
    std::memcpy(&b, &bytes[i * size_t(elemBytes(dt))], size_t(elemBytes(dt)));
    return b;
  }
  void setBits(size_t i, uint32_t b) {
    std::memcpy(&bytes[i * size_t(elemBytes(dt))], &b, size_t(elemBytes(dt)));
  }
  float get(size_t i) const { return fromBits(dt, bits(i)); }
  void set(size_t i, float f) { setBits(i, toBits(dt, f)); }
};

// ---- device buffers, kernel arguments, the module ----------------------------------

struct Buffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(n) {
    check(api->cuMemAlloc(&ptr, std::max<size_t>(n, 16)), "cuMemAlloc");
  }
  Buffer(const void *host, size_t n) : Buffer(n) { upload(host); }
  ~Buffer() { api->cuMemFree(ptr); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  void upload(const void *host) {
    if (bytes)
      check(api->cuMemcpyHtoD(ptr, host, bytes), "cuMemcpyHtoD");
  }
  void download(void *host) const {
    if (bytes)
      check(api->cuMemcpyDtoH(host, ptr, bytes), "cuMemcpyDtoH");
  }
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

CUmodule module = nullptr;
std::map<std::string, CUfunction> functions;

CUfunction kernel(const std::string &name) {
  auto it = functions.find(name);
  if (it != functions.end())
    return it->second;
  CUfunction f;
  check(api->cuModuleGetFunction(&f, module, name.c_str()),
        ("cuModuleGetFunction " + name).c_str());
  functions[name] = f;
  return f;
}

void launch(const std::string &name, int64_t grid, std::vector<uint64_t> &slots) {
  std::vector<void *> ptrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    ptrs[i] = &slots[i];
  check(api->cuLaunchKernel(kernel(name), unsigned(grid), 1, 1, kMoeThreads, 1, 1, 0, nullptr,
                            ptrs.data(), nullptr),
        ("cuLaunchKernel " + name).c_str());
  check(api->cuCtxSynchronize(), name.c_str());
}

bool report(bool ok, const std::string &what, const std::string &detail) {
  std::printf("%s %-58s %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  return ok;
}

// ---- positions: CPU stable counting sort -------------------------------------------

struct Permutation {
  std::vector<int32_t> offsets, pos, rowToken;
};
Permutation countingSort(const std::vector<int32_t> &ids, int64_t T, int64_t K, int64_t E) {
  Permutation p;
  std::vector<int32_t> counts(size_t(E), 0);
  for (int32_t e : ids)
    ++counts[size_t(e)];
  p.offsets.assign(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e)
    p.offsets[size_t(e + 1)] = p.offsets[size_t(e)] + counts[size_t(e)];
  std::vector<int32_t> next(p.offsets.begin(), p.offsets.end() - 1);
  p.pos.assign(size_t(T * K), -1);
  p.rowToken.assign(size_t(T * K), -1);
  for (int64_t a = 0; a < T * K; ++a) {
    int32_t r = next[size_t(ids[size_t(a)])]++;
    p.pos[size_t(a)] = r;
    p.rowToken[size_t(r)] = int32_t(a / K);
  }
  return p;
}

/// Launches h20_moe_positions: ids and pos [T, K] (row pitch `pitch`),
/// counts [El], offsets [El + 1], rowToken [T * K]; this rank's experts
/// are [first, first + El).
void launchPositions(CUdeviceptr ids, CUdeviceptr counts, CUdeviceptr offsets, CUdeviceptr pos,
                     CUdeviceptr rowToken, int64_t T, int64_t K, int64_t pitch, int64_t El,
                     int64_t first) {
  std::vector<uint64_t> slots;
  pushMemref(slots, ids, 0, {T, K}, {pitch, 1});
  pushMemref(slots, counts, 0, {El}, {1});
  pushMemref(slots, offsets, 0, {El + 1}, {1});
  pushMemref(slots, pos, 0, {T, K}, {pitch, 1});
  pushMemref(slots, rowToken, 0, {T * K}, {1});
  slots.push_back(uint64_t(first));
  launch(moePositionsKernel(), moePositionsGrid(El), slots);
}

/// Launches h20_moe_route_b* (bias type `biasType`): logits [T, E], bias
/// [E], ids / weights / pos [T, K], counts [El]; this rank's experts are
/// [first, first + El) (El = E, first = 0 on one GPU).
void launchRoute(int biasType, CUdeviceptr logits, CUdeviceptr bias, CUdeviceptr ids,
                 CUdeviceptr weights, CUdeviceptr counts, CUdeviceptr pos, int64_t T, int64_t E,
                 int64_t K, int64_t El, int64_t first, float temp, float scaling) {
  std::vector<uint64_t> slots;
  pushMemref(slots, logits, 0, {T, E}, {E, 1});
  pushMemref(slots, bias, 0, {E}, {1});
  pushMemref(slots, ids, 0, {T, K}, {K, 1});
  pushMemref(slots, weights, 0, {T, K}, {K, 1});
  pushMemref(slots, counts, 0, {El}, {1});
  pushMemref(slots, pos, 0, {T, K}, {K, 1});
  pushF32(slots, temp);
  pushF32(slots, scaling);
  slots.push_back(uint64_t(first));
  launch(moeRouteKernel(biasType), moeRouteGrid(T), slots);
}

/// Runs h20_moe_positions on ids [T, K] (row pitch idPitch >= K, also used
/// for pos) and counts; compares with countingSort. `label` names the case.
bool runPositions(const std::string &label, const std::vector<int32_t> &ids, int64_t T, int64_t K,
                  int64_t E, int64_t idPitch) {
  std::vector<int32_t> counts(size_t(E), 0);
  for (int32_t e : ids)
    ++counts[size_t(e)];
  std::vector<int32_t> hid(size_t(std::max<int64_t>(T, 1) * idPitch), -7);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < K; ++j)
      hid[size_t(t * idPitch + j)] = ids[size_t(t * K + j)];
  const int64_t R = T * K;
  std::vector<int32_t> canaryPos(hid.size(), -3), canaryOff(size_t(E + 2), -3),
      canaryRow(size_t(std::max<int64_t>(R, 1) + 1), -3);
  Buffer did(hid.data(), hid.size() * 4), dcnt(counts.data(), counts.size() * 4),
      doff(canaryOff.data(), canaryOff.size() * 4), dpos(canaryPos.data(), canaryPos.size() * 4),
      drow(canaryRow.data(), canaryRow.size() * 4);
  launchPositions(did.ptr, dcnt.ptr, doff.ptr, dpos.ptr, drow.ptr, T, K, idPitch, E, 0);
  std::vector<int32_t> off(canaryOff.size()), pos(canaryPos.size()), row(canaryRow.size());
  doff.download(off.data());
  dpos.download(pos.data());
  drow.download(row.data());
  Permutation want = countingSort(ids, T, K, E);
  std::string why;
  for (int64_t e = 0; e <= E && why.empty(); ++e)
    if (off[size_t(e)] != want.offsets[size_t(e)])
      why = "offsets[" + std::to_string(e) + "] = " + std::to_string(off[size_t(e)]) + ", want " +
            std::to_string(want.offsets[size_t(e)]);
  if (why.empty() && off[size_t(E + 1)] != -3)
    why = "wrote past offsets[E]";
  for (int64_t t = 0; t < T && why.empty(); ++t)
    for (int64_t j = 0; j < idPitch && why.empty(); ++j) {
      const int32_t got = pos[size_t(t * idPitch + j)];
      const int32_t exp = j < K ? want.pos[size_t(t * K + j)] : -3;
      if (got != exp)
        why = "pos[" + std::to_string(t) + ", " + std::to_string(j) + "] = " + std::to_string(got) +
              ", want " + std::to_string(exp);
    }
  for (int64_t r = 0; r <= R && why.empty(); ++r) {
    const int32_t exp = r < R ? want.rowToken[size_t(r)] : -3;
    if (row[size_t(r)] != exp)
      why = "rowToken[" + std::to_string(r) + "] = " + std::to_string(row[size_t(r)]) + ", want " +
            std::to_string(exp);
  }
  char detail[160];
  std::snprintf(detail, sizeof detail, "T=%lld K=%lld E=%lld pitch=%lld%s%s", (long long)T,
                (long long)K, (long long)E, (long long)idPitch, why.empty() ? "" : ": ",
                why.c_str());
  return report(why.empty(), "positions " + label, detail);
}

bool runPositionsChecks() {
  bool ok = true;
  std::mt19937_64 rng(7);
  struct C {
    const char *name;
    int64_t T, K, E, pitch;
    int evenOnly; // experts drawn from the even ones only (odd ones empty)
  } cases[] = {
      {"E=8 K=2", 100, 2, 8, 2, 0},
      {"E=384 K=6", 1000, 6, 384, 6, 0},
      {"E=384 K=6, 60K picks (many steps)", 10000, 6, 384, 6, 0},
      {"empty experts", 700, 4, 64, 4, 1},
      {"strided ids/pos view", 333, 6, 384, 9, 0},
      {"one token", 1, 6, 384, 6, 0},
      {"E=1024 K=16", 300, 16, 1024, 16, 0},
  };
  for (const C &c : cases) {
    std::vector<int32_t> ids(size_t(c.T * c.K));
    std::vector<int32_t> all(size_t(c.E));
    std::iota(all.begin(), all.end(), 0);
    for (int64_t t = 0; t < c.T; ++t) {
      std::shuffle(all.begin(), all.end(), rng);
      int64_t j = 0;
      for (size_t x = 0; x < all.size() && j < c.K; ++x)
        if (!c.evenOnly || all[x] % 2 == 0)
          ids[size_t(t * c.K + j++)] = all[x];
    }
    ok &= runPositions(c.name, ids, c.T, c.K, c.E, c.pitch);
  }
  return ok;
}

// ---- route ----------------------------------------------------------------------------

struct RouteCase {
  const char *name;
  int64_t T, E, K;
  int biasType;
  bool ties;    ///< experts 2i and 2i+1 share logits and bias (exact ties)
  bool special; ///< a few tokens with NaN / -inf / all-equal logits
};

float softplusSqrt(float l, float temp) {
  const float x = l / temp;
  return std::sqrt(std::fmax(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))));
}

/// Expert parallelism, rank 1 of 2 (experts [E/2, E)): the route again
/// with counts over E/2 experts and first = E/2, then positions. Its picks
/// must be the one-GPU run's (`ids`), its counts the upper half of
/// `counts`, pos -1 for every pick of a lower expert, and positions a
/// stable counting sort of the upper experts' picks alone.
bool runRouteExpertParallel(const RouteCase &c, Buffer &dlog, Buffer &dbias,
                            const std::vector<int32_t> &ids, const std::vector<int32_t> &counts,
                            float temp, float scaling) {
  const int64_t T = c.T, E = c.E, K = c.K, El = E / 2, first = E / 2;
  std::vector<int32_t> ids2(size_t(T * K), -5), counts2(size_t(El), 0), pos(size_t(T * K), -3),
      offs(size_t(El + 2), -3), row(size_t(T * K) + 1, -3);
  std::vector<float> w2(size_t(T * K), -5.0f);
  Buffer dids(ids2.data(), ids2.size() * 4), dw(w2.data(), w2.size() * 4),
      dcnt(counts2.data(), counts2.size() * 4), dpos(pos.data(), pos.size() * 4),
      doff(offs.data(), offs.size() * 4), drow(row.data(), row.size() * 4);
  launchRoute(c.biasType, dlog.ptr, dbias.ptr, dids.ptr, dw.ptr, dcnt.ptr, dpos.ptr, T, E, K, El,
              first, temp, scaling);
  launchPositions(dids.ptr, dcnt.ptr, doff.ptr, dpos.ptr, drow.ptr, T, K, K, El, first);
  dids.download(ids2.data());
  dcnt.download(counts2.data());
  dpos.download(pos.data());
  doff.download(offs.data());
  drow.download(row.data());
  // The upper experts' picks alone, renumbered from 0, sorted on the CPU.
  std::vector<int32_t> localIds;
  std::vector<int64_t> localPick; // pick index a = t * K + j of each
  for (int64_t a = 0; a < T * K; ++a)
    if (ids[size_t(a)] >= first) {
      localIds.push_back(ids[size_t(a)] - int32_t(first));
      localPick.push_back(a);
    }
  std::string why;
  if (ids2 != ids)
    why = "its picks differ from the one-GPU route's";
  for (int64_t e = 0; e < El && why.empty(); ++e)
    if (counts2[size_t(e)] != counts[size_t(first + e)])
      why = "counts[" + std::to_string(e) + "] = " + std::to_string(counts2[size_t(e)]) +
            ", want " + std::to_string(counts[size_t(first + e)]);
  const int64_t R = static_cast<int64_t>(localIds.size());
  Permutation want = countingSort(localIds, R, 1, El);
  for (int64_t e = 0; e <= El && why.empty(); ++e)
    if (offs[size_t(e)] != want.offsets[size_t(e)])
      why = "offsets[" + std::to_string(e) + "] differ";
  for (int64_t a = 0, l = 0; a < T * K && why.empty(); ++a) {
    const bool local = ids[size_t(a)] >= first;
    const int32_t exp = local ? want.pos[size_t(l)] : -1;
    if (pos[size_t(a)] != exp)
      why = "pos of pick " + std::to_string(a) + " = " + std::to_string(pos[size_t(a)]) +
            ", want " + std::to_string(exp);
    if (local && why.empty() && row[size_t(exp)] != int32_t(a / K))
      why = "rowToken[" + std::to_string(exp) + "] is not the pick's token";
    l += local;
  }
  if (why.empty() && row[size_t(R)] != -3)
    why = "wrote rowToken past the rank's picks";
  return report(why.empty(), std::string("route ") + c.name + " expert-parallel rank 1 of 2",
                why.empty() ? "counts, pos and the permutation of the upper experts' picks" : why);
}

bool runRoute(const RouteCase &c) {
  std::mt19937_64 rng(uint64_t(c.T * 31 + c.E * 7 + c.K + c.biasType));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const float temp = 1.25f, scaling = 2.5f;
  const int64_t T = c.T, E = c.E, K = c.K;
  std::vector<float> logits(size_t(T * E));
  HostArray bias(c.biasType, size_t(E));
  for (float &x : logits)
    x = 4.0f * uni(rng);
  for (int64_t e = 0; e < E; ++e)
    bias.set(size_t(e), 0.2f * uni(rng));
  if (c.ties) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 1; e < E; e += 2)
        logits[size_t(t * E + e)] = logits[size_t(t * E + e - 1)];
    for (int64_t e = 1; e < E; e += 2)
      bias.setBits(size_t(e), bias.bits(size_t(e - 1)));
  }
  const float inf = std::numeric_limits<float>::infinity();
  if (c.special && T >= 4) {
    for (int64_t e = 0; e < E; ++e) {
      logits[size_t(0 * E + e)] = 0.5f; // equal scores: the bias alone orders them
      logits[size_t(1 * E + e)] = e % 3 == 0 ? NAN : logits[size_t(1 * E + e)]; // NaN scores
      logits[size_t(2 * E + e)] = e < E - 2 ? -inf : 1.0f; // softplus(-inf) = 0: score 0
      logits[size_t(3 * E + e)] = e % 2 ? NAN : -inf;      // NaN keys (as -inf) and zero scores
    }
  }
  // The reference keys and scores (float, the kernel's formula).
  std::vector<float> score(size_t(T * E)), key(size_t(T * E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) {
      const float s = softplusSqrt(logits[size_t(t * E + e)], temp);
      float k = s + bias.get(size_t(e));
      if (std::isnan(k))
        k = -inf;
      score[size_t(t * E + e)] = s;
      key[size_t(t * E + e)] = k;
    }
  std::vector<int32_t> ids(size_t(T * K), -5), counts(size_t(E), 0);
  std::vector<float> weights(size_t(T * K), -5.0f);
  Buffer dlog(logits.data(), logits.size() * 4), dbias(bias.bytes.data(), bias.bytes.size()),
      dids(ids.data(), ids.size() * 4), dw(weights.data(), weights.size() * 4),
      dcnt(counts.data(), counts.size() * 4);
  // pos: never written with every expert on this rank (any [T, K] view).
  launchRoute(c.biasType, dlog.ptr, dbias.ptr, dids.ptr, dw.ptr, dcnt.ptr, dids.ptr, T, E, K, E, 0,
              temp, scaling);
  dids.download(ids.data());
  dw.download(weights.data());
  dcnt.download(counts.data());

  std::string why;
  int nearTies = 0;
  double maxWErr = 0;
  std::vector<int32_t> hist(size_t(E), 0);
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T && why.empty(); ++t) {
    const float *kt = &key[size_t(t * E)];
    std::iota(order.begin(), order.end(), 0);
    // Keys descending, equal keys by index (ONNX TopK's order).
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return kt[a] > kt[b] || (kt[a] == kt[b] && a < b); });
    std::vector<char> seen(size_t(E), 0);
    float sum = 0;
    for (int64_t j = 0; j < K && why.empty(); ++j) {
      const int32_t g = ids[size_t(t * K + j)];
      const std::string at = "token " + std::to_string(t) + " pick " + std::to_string(j);
      if (g < 0 || g >= E || seen[size_t(g)]) {
        why = at + ": expert " + std::to_string(g) + " (out of range or repeated)";
        break;
      }
      seen[size_t(g)] = 1;
      ++hist[size_t(g)];
      const int64_t want = order[size_t(j)];
      if (g != want) {
        const float a = kt[g], b = kt[want];
        const bool close = std::isfinite(a) && std::isfinite(b) &&
                           std::fabs(a - b) <= 1e-5f * std::max(1.0f, std::fabs(b));
        if (!close || a == b) {
          // Not a near tie, or an exact tie broken towards the higher index.
          why = at + ": expert " + std::to_string(g) + " (key " + std::to_string(a) + "), want " +
                std::to_string(want) + " (key " + std::to_string(b) + ")";
          break;
        }
        ++nearTies;
      }
      // Exact ties: every lower expert with the same key was picked before.
      for (int64_t e = 0; e < g && why.empty(); ++e)
        if (kt[e] == kt[g] && !seen[size_t(e)])
          why = at + ": exact tie of experts " + std::to_string(e) + " and " + std::to_string(g) +
                " went to the higher index";
      sum += score[size_t(t * E + g)];
    }
    for (int64_t j = 0; j < K && why.empty(); ++j) {
      const int32_t g = ids[size_t(t * K + j)];
      const float want = score[size_t(t * E + g)] / (sum + 1e-20f) * scaling;
      const float got = weights[size_t(t * K + j)];
      // NaN scores (NaN logits) make every weight of the token NaN, here as there.
      const double err =
          std::isnan(want) && std::isnan(got)
              ? 0.0
              : std::fabs(double(got) - want) / std::max(1e-6, std::fabs(double(want)));
      maxWErr = std::max(maxWErr, err);
      if (!(err <= 1e-5))
        why = "token " + std::to_string(t) + " weight " + std::to_string(j) + " = " +
              std::to_string(got) + ", want " + std::to_string(want);
    }
  }
  for (int64_t e = 0; e < E && why.empty(); ++e)
    if (counts[size_t(e)] != hist[size_t(e)])
      why = "counts[" + std::to_string(e) + "] = " + std::to_string(counts[size_t(e)]) +
            ", picks " + std::to_string(hist[size_t(e)]);
  char detail[200];
  std::snprintf(detail, sizeof detail,
                "T=%lld E=%lld K=%lld bias %s near-ties=%d max_w_rel=%.1e%s%s", (long long)T,
                (long long)E, (long long)K, typeName(c.biasType), nearTies, maxWErr,
                why.empty() ? "" : ": ", why.c_str());
  bool ok = report(why.empty(), std::string("route ") + c.name, detail);
  // The route's own ids and atomics-made counts through positions.
  if (ok) {
    std::vector<int32_t> canary(size_t(T * K) + 1, -3), offs(size_t(E + 1), -3);
    Buffer doff(offs.data(), offs.size() * 4), dpos(canary.data(), size_t(T * K) * 4),
        drow(canary.data(), canary.size() * 4);
    launchPositions(dids.ptr, dcnt.ptr, doff.ptr, dpos.ptr, drow.ptr, T, K, K, E, 0);
    std::vector<int32_t> pos(size_t(T * K)), row(canary.size());
    doff.download(offs.data());
    dpos.download(pos.data());
    drow.download(row.data());
    Permutation want = countingSort(ids, T, K, E);
    row.pop_back();
    const bool same = offs == want.offsets && pos == want.pos && row == want.rowToken;
    ok &= report(same, std::string("route ") + c.name + " -> positions",
                 same ? "equals the CPU counting sort" : "differs from the CPU counting sort");
  }
  if (ok && E % 2 == 0)
    ok &= runRouteExpertParallel(c, dlog, dbias, ids, counts, temp, scaling);
  return ok;
}

bool runRouteChecks() {
  const RouteCase cases[] = {
      {"E=8 K=2", 100, 8, 2, 0, false, true},
      {"E=384 K=6", 300, 384, 6, 2, false, true},
      {"E=384 K=6", 257, 384, 6, 1, false, false},
      {"E=384 K=6", 200, 384, 6, 0, false, false},
      {"E=384 K=6 exact ties", 200, 384, 6, 2, true, true},
      {"E=8 K=2 exact ties", 64, 8, 2, 1, true, false},
      {"E=1024 K=16", 50, 1024, 16, 0, false, true},
      {"K=E=16", 40, 16, 16, 2, false, true},
      {"E=33 K=5 (a partial last lane round)", 77, 33, 5, 0, true, true},
  };
  bool ok = true;
  for (const RouteCase &c : cases)
    ok &= runRoute(c);
  return ok;
}

// ---- gather -----------------------------------------------------------------------------

/// `placed` (default R): the rows the positions kernel placed (offsets'
/// last entry); the rows from it on must be left untouched.
bool runGather(int dt, int64_t T, int64_t D, int64_t R, bool strided, const char *label = nullptr,
               int64_t placed = -1) {
  if (placed < 0)
    placed = R;
  std::mt19937_64 rng(uint64_t(T + D * 3 + R * 5 + dt + strided));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t xOff = strided ? 1 : 0, xPitch = strided ? D + 3 : D;
  const int64_t pOff = strided ? 2 : 0, pPitch = strided ? D + 5 : D;
  HostArray x(dt, size_t(xOff + T * xPitch));
  for (size_t i = 0; i < x.size(); ++i)
    x.set(i, uni(rng));
  std::vector<int32_t> rowToken(static_cast<size_t>(R));
  for (int32_t &r : rowToken)
    r = int32_t(rng() % uint64_t(T));
  const uint32_t canary = dt == 0 ? 0x7fc00123u : 0x7fc1u;
  HostArray xp(dt, size_t(pOff + R * pPitch + 3), canary);
  // offsets [E + 1] with E = 2: the last entry is what the kernel reads.
  std::vector<int32_t> offsets = {0, int32_t(placed / 2), int32_t(placed)};
  Buffer dx(x.bytes.data(), x.bytes.size()), drt(rowToken.data(), rowToken.size() * 4),
      dxp(xp.bytes.data(), xp.bytes.size()), doff(offsets.data(), offsets.size() * 4);
  std::vector<uint64_t> slots;
  pushMemref(slots, dx.ptr, xOff, {T, D}, {xPitch, 1});
  pushMemref(slots, drt.ptr, 0, {R}, {1});
  pushMemref(slots, dxp.ptr, pOff, {R, D}, {pPitch, 1});
  pushMemref(slots, doff.ptr, 0, {3}, {1});
  launch(moeGatherKernel(dt), moeGatherGrid(R), slots);
  HostArray got(dt, xp.size());
  dxp.download(got.bytes.data());
  std::string why;
  std::vector<char> inView(xp.size(), 0);
  for (int64_t r = 0; r < placed && why.empty(); ++r)
    for (int64_t d = 0; d < D && why.empty(); ++d) {
      const size_t at = size_t(pOff + r * pPitch + d);
      inView[at] = 1;
      if (got.bits(at) != x.bits(size_t(xOff + rowToken[size_t(r)] * xPitch + d)))
        why = "Xp[" + std::to_string(r) + ", " + std::to_string(d) + "] differs";
    }
  for (size_t i = 0; i < got.size() && why.empty(); ++i)
    if (!inView[i] && got.bits(i) != canary)
      why = "wrote outside Xp's view (element " + std::to_string(i) + ")";
  char detail[200];
  std::snprintf(detail, sizeof detail, "T=%lld Dm=%lld R=%lld placed=%lld%s%s", (long long)T,
                (long long)D, (long long)R, (long long)placed,
                why.empty() ? " bit-exact, the rest untouched" : ": ", why.c_str());
  return report(why.empty(),
                std::string("gather ") + typeName(dt) + " " +
                    (label     ? label
                     : strided ? "strided+unaligned (element path)"
                               : "contiguous"),
                detail);
}

bool runGatherChecks() {
  bool ok = true;
  for (int dt : {0, 1, 2}) {
    ok &= runGather(dt, 50, 256, 300, false);
    ok &= runGather(dt, 37, 200, 123, true);
  }
  ok &= runGather(2, 20, 100, 61, false, "Dm 100, not whole 16-byte chunks (element path)");
  ok &= runGather(2, 300, 5120, 90, false, "Dm 5120");
  // A rank of an expert-parallel split: only its experts' rows placed.
  ok &= runGather(2, 300, 5120, 90, false, "11 of 90 rows placed", 11);
  ok &= runGather(0, 37, 200, 123, true, "none placed", 0);
  return ok;
}

// ---- swiglu -----------------------------------------------------------------------------

enum Layout { kContiguous, kHalves, kUnaligned, kStrided };

double swigluRef(float g, float u, float limit) {
  const float gc = g > limit ? limit : g;
  const float uc = u > limit ? limit : (u < -limit ? -limit : u);
  return double(gc) / (1.0 + std::exp(-double(gc))) * double(uc);
}

bool runSwiglu(int dt, int64_t R, int64_t I, Layout layout, int64_t placed = -1) {
  if (placed < 0)
    placed = R;
  std::mt19937_64 rng(uint64_t(R * 3 + I + dt * 11 + layout));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const float limit = 7.0f;
  // G and U: one [R, 2I] buffer (G its left half, U its right) for kHalves;
  // an odd offset and pitch for kUnaligned (element path); padded rows for
  // kStrided. A: pitch I (contiguous / halves), I + 4 (strided), I + 1
  // offset 1 (unaligned).
  int64_t gOff = 0, uOff = 0, gPitch = I, uPitch = I, aOff = 0, aPitch = I;
  size_t gElems = size_t(R * I), uElems = size_t(R * I);
  if (layout == kHalves) {
    gPitch = uPitch = 2 * I, uOff = I;
    gElems = uElems = size_t(R * 2 * I);
  } else if (layout == kUnaligned) {
    gOff = 1, uOff = 3, gPitch = I + 1, uPitch = I + 3, aOff = 1, aPitch = I + 1;
    gElems = size_t(1 + R * (I + 1)), uElems = size_t(3 + R * (I + 3));
  } else if (layout == kStrided) {
    gPitch = I + 8, uPitch = I + 4, aOff = 4, aPitch = I + 4;
    gElems = size_t(R * (I + 8)), uElems = size_t(R * (I + 4));
  }
  std::vector<float> g(gElems, NAN), u(uElems, NAN);
  // Exactly at, just past and far past +-limit; gates whose exp(-g) overflows.
  const float special[] = {
      limit, -limit, limit * 1.0001f, -limit * 1.0001f, 3 * limit, -3 * limit, -100.0f, -1000.0f,
      0.0f,  1e-3f};
  auto draw = [&](int64_t r, int64_t i, int which) {
    const uint64_t h = uint64_t(r * 1315423911u + i * 2654435761u + which);
    if (h % 7 == 0)
      return special[(h / 7) % 10];
    return 1.5f * limit * uni(rng);
  };
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < I; ++i) {
      g[size_t(gOff + r * gPitch + i)] = draw(r, i, 0);
      u[size_t(uOff + r * uPitch + i)] = draw(r, i, 1);
    }
  std::vector<float> gu;
  const std::vector<float> *gBuf = &g, *uBuf = &u;
  if (layout == kHalves) {
    gu = g;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < I; ++i)
        gu[size_t(uOff + r * uPitch + i)] = u[size_t(uOff + r * uPitch + i)];
    gBuf = uBuf = &gu;
  }
  const uint32_t canary = dt == 0 ? 0x7fc00123u : 0x7fc1u;
  HostArray a(dt, size_t(aOff + R * aPitch + 2), canary);
  std::vector<int32_t> offsets = {0, int32_t(placed)};
  Buffer dg(gBuf->data(), gBuf->size() * 4), du(uBuf->data(), uBuf->size() * 4),
      da(a.bytes.data(), a.bytes.size()), doff(offsets.data(), offsets.size() * 4);
  std::vector<uint64_t> slots;
  pushMemref(slots, dg.ptr, gOff, {R, I}, {gPitch, 1});
  pushMemref(slots, layout == kHalves ? dg.ptr : du.ptr, uOff, {R, I}, {uPitch, 1});
  pushMemref(slots, da.ptr, aOff, {R, I}, {aPitch, 1});
  pushMemref(slots, doff.ptr, 0, {2}, {1});
  pushF32(slots, limit);
  launch(moeSwigluKernel(dt), moeSwigluGrid(R * I), slots);
  HostArray got(dt, a.size());
  da.download(got.bytes.data());
  std::string why;
  double maxErr = 0;
  std::vector<char> inView(a.size(), 0);
  // f32: float32 arithmetic (expf, the division) vs float64; 16-bit: the
  // rounding of that (half an ulp) and a possible flip of it.
  const double relTol = dt == 0 ? 2e-6 : dt == 1 ? 1.0 / 1024 : 1.0 / 128;
  for (int64_t r = 0; r < placed && why.empty(); ++r)
    for (int64_t i = 0; i < I && why.empty(); ++i) {
      const size_t at = size_t(aOff + r * aPitch + i);
      inView[at] = 1;
      const float gv = (*gBuf)[size_t(gOff + r * gPitch + i)],
                  uv = (*uBuf)[size_t(uOff + r * uPitch + i)];
      const double want = swigluRef(gv, uv, limit), v = got.get(at);
      const double err = std::fabs(v - want) / std::max(std::fabs(want), 1e-3);
      maxErr = std::max(maxErr, err);
      if (!(err <= relTol))
        why = "A[" + std::to_string(r) + ", " + std::to_string(i) + "] = " + std::to_string(v) +
              ", want " + std::to_string(want) + " (g " + std::to_string(gv) + ", u " +
              std::to_string(uv) + ")";
    }
  for (size_t i = 0; i < got.size() && why.empty(); ++i)
    if (!inView[i] && got.bits(i) != canary)
      why = "wrote outside A's view (element " + std::to_string(i) + ")";
  const char *names[] = {"contiguous", "G|U halves of [R, 2I]", "unaligned (element path)",
                         "strided A"};
  char detail[260];
  std::snprintf(detail, sizeof detail, "R=%lld placed=%lld I=%lld grid=%lld max_rel=%.1e%s%s",
                (long long)R, (long long)placed, (long long)I, (long long)moeSwigluGrid(R * I),
                maxErr, why.empty() ? "" : ": ", why.c_str());
  return report(why.empty(), std::string("swiglu ") + typeName(dt) + " " + names[layout], detail);
}

bool runSwigluChecks() {
  bool ok = true;
  for (int dt : {0, 1, 2}) {
    ok &= runSwiglu(dt, 77, 96, kContiguous);
    ok &= runSwiglu(dt, 50, 1000, kHalves);
    ok &= runSwiglu(dt, 41, 67, kUnaligned);
    ok &= runSwiglu(dt, 33, 128, kStrided);
  }
  ok &= runSwiglu(2, 600, 2048, kContiguous); // grid-stride: 1.2M elements over 300 CTAs
  // An expert-parallel rank: 75 of 600 rows placed; the rest untouched.
  ok &= runSwiglu(2, 600, 2048, kContiguous, 75);
  ok &= runSwiglu(0, 41, 67, kUnaligned, 0);
  return ok;
}

// ---- combine ----------------------------------------------------------------------------

bool runCombine(int dt, int64_t T, int64_t K, int64_t D, Layout layout) {
  std::mt19937_64 rng(uint64_t(T * 5 + K + D * 7 + dt * 3 + layout));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t R = T * K;
  // Yp: contiguous, or odd offset / pitch (kUnaligned). Y: pitch D, D + 8
  // offset 4 (kStrided), D + 1 offset 1 (kUnaligned).
  const int64_t ypOff = layout == kUnaligned ? 1 : 0, ypPitch = layout == kUnaligned ? D + 1 : D;
  int64_t yOff = 0, yPitch = D;
  if (layout == kStrided)
    yOff = 4, yPitch = D + 8;
  else if (layout == kUnaligned)
    yOff = 1, yPitch = D + 1;
  std::vector<float> yp(size_t(ypOff + R * ypPitch));
  for (float &v : yp)
    v = 3.0f * uni(rng);
  std::vector<int32_t> perm(static_cast<size_t>(R));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<float> w(size_t(T * K));
  for (float &v : w)
    v = 0.5f * (uni(rng) + 1.0f);
  const uint32_t canary = dt == 0 ? 0x7fc00123u : 0x7fc1u;
  HostArray y(dt, size_t(yOff + T * yPitch + 3), canary);
  Buffer dyp(yp.data(), yp.size() * 4), dpos(perm.data(), perm.size() * 4),
      dw(w.data(), w.size() * 4), dy(y.bytes.data(), y.bytes.size());
  std::vector<uint64_t> slots;
  pushMemref(slots, dyp.ptr, ypOff, {R, D}, {ypPitch, 1});
  pushMemref(slots, dpos.ptr, 0, {T, K}, {K, 1});
  pushMemref(slots, dw.ptr, 0, {T, K}, {K, 1});
  pushMemref(slots, dy.ptr, yOff, {T, D}, {yPitch, 1});
  launch(moeCombineKernel(dt), moeCombineGrid(T), slots);
  HostArray got(dt, y.size());
  dy.download(got.bytes.data());
  std::string why;
  std::vector<char> inView(y.size(), 0);
  for (int64_t t = 0; t < T && why.empty(); ++t)
    for (int64_t c = 0; c < D && why.empty(); ++c) {
      // float32, j in order, fused multiply-adds: the kernel's sum exactly.
      float acc = 0.0f;
      for (int64_t j = 0; j < K; ++j) {
        const float v = yp[size_t(ypOff + perm[size_t(t * K + j)] * ypPitch + c)];
        acc = std::fma(w[size_t(t * K + j)], v, acc);
      }
      const size_t at = size_t(yOff + t * yPitch + c);
      inView[at] = 1;
      const float want = roundTo(dt, acc), v = got.get(at);
      // f32: bit-exact; 16-bit: the rounding of the same float.
      if (got.bits(at) != toBits(dt, acc))
        why = "Y[" + std::to_string(t) + ", " + std::to_string(c) + "] = " + std::to_string(v) +
              ", want " + std::to_string(want);
    }
  for (size_t i = 0; i < got.size() && why.empty(); ++i)
    if (!inView[i] && got.bits(i) != canary)
      why = "wrote outside Y's view (element " + std::to_string(i) + ")";
  const char *names[] = {"contiguous", "", "unaligned Y and Yp (element path)", "strided Y"};
  char detail[220];
  std::snprintf(detail, sizeof detail, "T=%lld K=%lld Dm=%lld%s%s", (long long)T, (long long)K,
                (long long)D, why.empty() ? " bit-exact vs float32 fma in j order" : ": ",
                why.c_str());
  return report(why.empty(), std::string("combine ") + typeName(dt) + " " + names[layout], detail);
}

bool runCombineChecks() {
  bool ok = true;
  for (int dt : {0, 1, 2}) {
    ok &= runCombine(dt, 60, 6, 200, kContiguous);
    ok &= runCombine(dt, 45, 6, 136, kStrided);
    ok &= runCombine(dt, 31, 2, 77, kUnaligned);
  }
  ok &= runCombine(2, 20, 16, 5120, kContiguous); // K 16, the Flash hidden size
  return ok;
}

// ---- fp4 gemm: grouped GEMM over MXFP4 weights --------------------------------------

/// e2m1 value of a 4-bit code, and 2^(s - 127) of a ue8m0 byte (OCP MX v1.0).
double e2m1Value(unsigned c) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (c & 8) ? -mag[c & 7] : mag[c & 7];
}
double e8m0Value(unsigned s) { return s == 255 ? NAN : std::ldexp(1.0, int(s) - 127); }

/// The expert GEMM's kernel arguments: `slots` (A's memref(s) already
/// pushed) plus Wq [E, N, K / 2], Ws [E, N, K / 32], offsets [E + 1] and C
/// [R, N], all contiguous; the pointers cuLaunchKernel takes (into `slots`,
/// which must outlive them).
std::vector<void *> expertGemmArgs(std::vector<uint64_t> &slots, const Buffer &dq,
                                   const Buffer &ds, const Buffer &doff, const Buffer &dc,
                                   int64_t E, int64_t N, int64_t K, int64_t R) {
  pushMemref(slots, dq.ptr, 0, {E, N, K / 2}, {N * K / 2, K / 2, 1});
  pushMemref(slots, ds.ptr, 0, {E, N, K / 32}, {N * K / 32, K / 32, 1});
  pushMemref(slots, doff.ptr, 0, {E + 1}, {1});
  pushMemref(slots, dc.ptr, 0, {R, N}, {N, 1});
  std::vector<void *> ptrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    ptrs[i] = &slots[i];
  return ptrs;
}

/// Launches expert GEMM kernel `name` (grid gx x gy, `smem` bytes of
/// dynamic shared memory, arguments `ptrs`) when called; sets the kernel's
/// dynamic shared memory limit first.
std::function<void()> expertGemmLauncher(const std::string &name, unsigned gx, unsigned gy,
                                         unsigned smem, std::vector<void *> &ptrs) {
  check(api->cuFuncSetAttribute(kernel(name), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                int(smem)),
        ("cuFuncSetAttribute " + name).c_str());
  return [name, gx, gy, smem, &ptrs] {
    check(api->cuLaunchKernel(kernel(name), gx, gy, 1, kMoeThreads, 1, 1, smem, nullptr,
                              ptrs.data(), nullptr),
          ("cuLaunchKernel " + name).c_str());
  };
}

/// "" when rows [rowsReal, R) of C [R, N] still hold the 1234.5 fill the
/// expert GEMM must not touch, else which row it wrote.
std::string rowsPastExpertsTouched(const std::vector<float> &c, int64_t rowsReal, int64_t R,
                                   int64_t N) {
  for (int64_t r = rowsReal; r < R; ++r)
    for (int64_t n = 0; n < N; ++n)
      if (c[size_t(r * N + n)] != 1234.5f)
        return "wrote row " + std::to_string(r) + " past the experts' rows";
  return "";
}

/// Fast reproducible bits for the large cases (splitmix64; mt19937 and a
/// float distribution per element took most of moe-check's minutes).
uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// A uniform float in [-1, 1) from 24 bits of x.
float unitFloat(uint64_t x) { return float(int64_t(x >> 40) - (1 << 23)) / float(1 << 23); }

/// C = A . W_e^T per expert row range against a float64 reference (A's
/// rounded elements times the exactly dequantised weights): |C - ref| <=
/// 1e-5 * sum |a w| + 1e-30 (float32 accumulation); rows outside
/// [off[0], off[E]) and columns past N stay untouched. The same operands
/// run on each kernel of `variants` (false: mma.sync / CUDA cores; true:
/// the wgmma kernel), C reset between them. With `timeIt`, the median time
/// of 20 launches as TFLOP/s over the real rows.
bool runFp4Gemm(int dt, const std::vector<int32_t> &counts, int64_t N, int64_t K, bool timeIt,
                bool bigScales, const std::vector<bool> &variants) {
  const int64_t E = int64_t(counts.size());
  std::vector<int32_t> off(size_t(E) + 1, 0);
  for (int64_t e = 0; e < E; ++e)
    off[size_t(e) + 1] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off[size_t(E)] + 3; // 3 rows past the experts' stay untouched
  const uint64_t seed = uint64_t(N * 31 + K * 7 + E + dt) << 32;
  HostArray a(dt, size_t(R * K));
  for (size_t i = 0; i < a.size(); ++i)
    a.set(i, unitFloat(splitmix(seed + i)));
  std::vector<uint8_t> wq(size_t(E * N * K / 2)), ws(size_t(E * N * K / 32));
  for (size_t i = 0; i < wq.size(); i += 8) {
    const uint64_t r = splitmix(seed ^ (0x5bd1e995ull + i));
    for (size_t j = 0; j < 8 && i + j < wq.size(); ++j)
      wq[i + j] = uint8_t(r >> (8 * j));
  }
  // Mostly 2^-9..2^1, some 2^-127 (subnormal); bigScales: up to 2^67 (the
  // bf16 kernel's two-multiply path above 2^1).
  for (size_t i = 0; i < ws.size(); ++i) {
    const uint64_t r = splitmix(seed ^ (0x27d4eb2full + i));
    ws[i] = uint8_t(i % 97 == 5 ? 0 : bigScales ? 120 + r % 75 : 118 + r % 11);
  }
  const std::vector<float> fill(size_t(R * N), 1234.5f);
  std::vector<float> c(fill.size());
  Buffer da(a.bytes.data(), a.bytes.size()), dq(wq.data(), wq.size()), ds(ws.data(), ws.size()),
      doff(off.data(), off.size() * 4), dc(fill.data(), fill.size() * 4);
  std::vector<uint64_t> slots;
  pushMemref(slots, da.ptr, 0, {R, K}, {K, 1});
  std::vector<void *> ptrs = expertGemmArgs(slots, dq, ds, doff, dc, E, N, K, R);
  const int64_t rowsReal = off[size_t(E)];
  const unsigned gx = unsigned(moeFp4GemmGridX(N, dt)),
                 gy = unsigned(moeFp4GemmGridY(rowsReal, E, dt));
  bool all = true;
  for (bool wg : variants) {
    const auto go = expertGemmLauncher(moeFp4GemmKernel(dt, wg), gx, gy,
                                       unsigned(moeFp4GemmSmemBytes(dt, wg)), ptrs);
    dc.upload(fill.data());
    go();
    check(api->cuCtxSynchronize(), "fp4 gemm");
    dc.download(c.data());
    std::string why;
    double worst = 0.0;
    std::vector<double> w(static_cast<size_t>(K));
    // Every element of small cases, a sample of rows and columns of large ones.
    const int64_t rowStep = rowsReal > 4096 ? 251 : 1, colStep = rowsReal > 4096 ? 97 : 1;
    for (int64_t e = 0; e < E && why.empty(); ++e)
      for (int64_t n = 0; n < N && why.empty(); n += colStep) {
        if (off[size_t(e)] == off[size_t(e) + 1])
          continue;
        for (int64_t k = 0; k < K; ++k) {
          const uint8_t b = wq[size_t((e * N + n) * (K / 2) + k / 2)];
          w[size_t(k)] = e2m1Value(k % 2 ? b >> 4 : b & 15) *
                         e8m0Value(ws[size_t((e * N + n) * (K / 32) + k / 32)]);
        }
        for (int64_t r = off[size_t(e)]; r < off[size_t(e) + 1] && why.empty(); r += rowStep) {
          double ref = 0.0, mag = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = double(a.get(size_t(r * K + k))) * w[size_t(k)];
            ref += p;
            mag += std::fabs(p);
          }
          const double got = c[size_t(r * N + n)], err = std::fabs(got - ref);
          worst = std::max(worst, err / (mag + 1e-30));
          if (!(err <= 1e-5 * mag + 1e-30))
            why = "C[" + std::to_string(r) + ", " + std::to_string(n) +
                  "] = " + std::to_string(got) + ", want " + std::to_string(ref);
        }
      }
    if (why.empty())
      why = rowsPastExpertsTouched(c, rowsReal, R, N);
    char detail[260];
    std::snprintf(detail, sizeof detail,
                  "E=%lld R=%lld N=%lld K=%lld%s max err %.2e of sum|aw|%s%s", (long long)E,
                  (long long)rowsReal, (long long)N, (long long)K,
                  bigScales ? " scales to 2^67" : "", worst, why.empty() ? "" : ": ", why.c_str());
    const bool ok =
        report(why.empty(), std::string("fp4 gemm ") + typeName(dt) + (wg ? " wgmma" : ""), detail);
    all &= ok;
    if (ok && timeIt) {
      const double ms = h20::checktool::medianMs(go, nullptr, 3, 20);
      std::printf("TIME fp4 gemm %s%s E=%lld rows=%lld N=%lld K=%lld: %.3f ms, %.1f TFLOP/s, "
                  "weights %.1f GB/s\n",
                  typeName(dt), wg ? " wgmma" : "", (long long)E, (long long)rowsReal,
                  (long long)N, (long long)K, ms,
                  2.0 * double(rowsReal) * double(N) * double(K) / (ms * 1e-3) / 1e12,
                  double(wq.size() + ws.size()) / (ms * 1e-3) / 1e9);
    }
  }
  return all;
}

/// The FP8 expert GEMM (h20_moe_fp4_gemm_fp8_wg): A quantised here as
/// fp8_quant.cuh does (per row and 128 inputs, scale amax / 448), each
/// 128-input block of a weight row as the kernel does (e2m1 * 2^(si - m) in
/// e4m3, block scale 2^(m - 127)), against a float64 reference of those
/// quantised operands: |C - ref| <= 1e-3 * sum |a w| (FP8 MMA
/// accumulation, below). Also reports the rel. L2 distance from the
/// unquantised product (the FP8 error itself) and,
/// with `timeIt`, the median time. `spread`: the ue8m0 scales of a row's
/// four blocks of 32 span up to this many octaves (> 8: the smallest lose
/// bits in e4m3; the reference rounds them as the kernel does).
bool runFp4GemmFp8(const std::vector<int32_t> &counts, int64_t N, int64_t K, bool timeIt,
                   int spread = 6) {
  const int64_t E = int64_t(counts.size()), KB = K / 128;
  std::vector<int32_t> off(size_t(E) + 1, 0);
  for (int64_t e = 0; e < E; ++e)
    off[size_t(e) + 1] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off[size_t(E)] + 3, rowsReal = off[size_t(E)];
  // A element (r, k): uniform in [-1, 1), the second half of each block of
  // 128 scaled by 0.05 (uneven blocks); regenerated where needed, not stored.
  const uint64_t seed = uint64_t(N * 131 + K * 17 + E + spread) << 32;
  auto aval = [&](int64_t r, int64_t k) {
    return unitFloat(splitmix(seed + uint64_t(r * K + k))) * (k % 128 < 64 ? 1.0f : 0.05f);
  };
  std::vector<uint8_t> aq(size_t(R * K));
  std::vector<float> as(size_t(KB * R));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t kb = 0; kb < KB; ++kb) {
      float amax = 0.0f;
      for (int64_t k = kb * 128; k < kb * 128 + 128; ++k)
        amax = std::max(amax, std::fabs(aval(r, k)));
      const float sc = std::max(amax, 1e-4f) / 448.0f;
      as[size_t(kb * R + r)] = sc;
      for (int64_t k = kb * 128; k < kb * 128 + 128; ++k)
        aq[size_t(r * K + k)] = runtime::encodeE4m3(aval(r, k) / sc);
    }
  auto adeq = [&](int64_t r, int64_t k) {
    return double(runtime::decodeE4m3(aq[size_t(r * K + k)])) *
           double(as[size_t((k / 128) * R + r)]);
  };
  std::vector<uint8_t> wq(size_t(E * N * K / 2)), ws(size_t(E * N * K / 32));
  for (size_t i = 0; i < wq.size(); i += 8) {
    const uint64_t x = splitmix(seed ^ (0x5bd1e995ull + i));
    for (size_t j = 0; j < 8 && i + j < wq.size(); ++j)
      wq[i + j] = uint8_t(x >> (8 * j));
  }
  for (size_t i = 0; i < ws.size(); ++i)
    ws[i] = uint8_t(i % 97 == 5 // some 2^-127: their sub-blocks round to 0 in e4m3
                        ? 0
                        : 118 + splitmix(seed ^ (0x27d4eb2full + i)) % uint64_t(spread + 1));
  std::vector<float> c(size_t(R * N), 1234.5f);
  Buffer da(aq.data(), aq.size()), das(as.data(), as.size() * 4), dq(wq.data(), wq.size()),
      ds(ws.data(), ws.size()), doff(off.data(), off.size() * 4), dc(c.data(), c.size() * 4);
  std::vector<uint64_t> slots;
  pushMemref(slots, da.ptr, 0, {R, K}, {K, 1});
  pushMemref(slots, das.ptr, 0, {KB, R}, {R, 1});
  std::vector<void *> ptrs = expertGemmArgs(slots, dq, ds, doff, dc, E, N, K, R);
  const unsigned gx = unsigned(moeFp4GemmGridX(N, 2)),
                 gy = unsigned(moeFp4GemmGridY(rowsReal, E, 2));
  const auto go =
      expertGemmLauncher(moeFp4GemmFp8Kernel(), gx, gy, unsigned(moeFp4GemmFp8SmemBytes()), ptrs);
  go();
  check(api->cuCtxSynchronize(), "fp8 gemm");
  dc.download(c.data());
  std::string why;
  double worst = 0.0, errL2 = 0.0, refL2 = 0.0;
  std::vector<double> wk(static_cast<size_t>(K)), wx(static_cast<size_t>(K));
  const int64_t rowStep = rowsReal > 4096 ? 251 : 1, colStep = rowsReal > 4096 ? 97 : 1;
  for (int64_t e = 0; e < E && why.empty(); ++e)
    for (int64_t n = 0; n < N && why.empty(); n += colStep) {
      if (off[size_t(e)] == off[size_t(e) + 1])
        continue;
      const uint8_t *srow = &ws[size_t((e * N + n) * (K / 32))];
      for (int64_t kb = 0; kb < KB; ++kb) {
        int m = 0;
        for (int i = 0; i < 4; ++i)
          m = std::max(m, int(srow[kb * 4 + i]));
        for (int64_t k = kb * 128; k < kb * 128 + 128; ++k) {
          const uint8_t b = wq[size_t((e * N + n) * (K / 2) + k / 2)];
          const unsigned code = k % 2 ? b >> 4 : b & 15;
          const int si = srow[k / 32];
          wk[size_t(k)] =
              double(runtime::decodeE4m3(runtime::encodeE4m3(
                  float(e2m1Value(code) * std::ldexp(1.0, si - m))))) *
              e8m0Value(unsigned(m));
          wx[size_t(k)] = e2m1Value(code) * e8m0Value(unsigned(si));
        }
      }
      for (int64_t r = off[size_t(e)]; r < off[size_t(e) + 1] && why.empty(); r += rowStep) {
        double ref = 0.0, mag = 0.0, exact = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = adeq(r, k) * wk[size_t(k)];
          ref += p;
          mag += std::fabs(p);
          exact += double(aval(r, k)) * wx[size_t(k)];
        }
        const double got = c[size_t(r * N + n)], err = std::fabs(got - ref);
        worst = std::max(worst, err / (mag + 1e-30));
        errL2 += (got - exact) * (got - exact);
        refL2 += exact * exact;
        // Hopper's FP8 MMA adds its products with about 14 mantissa bits
        // (DeepSeek-V3 technical report, section 3.3.2; measured here
        // 1e-5..2.2e-4 of sum |a w| per 128-input block): 1e-3, where a
        // wrong scale or code would be off by a whole factor.
        if (!(err <= 1e-3 * mag + 1e-30))
          why = "C[" + std::to_string(r) + ", " + std::to_string(n) + "] = " + std::to_string(got) +
                ", want " + std::to_string(ref);
      }
    }
  if (why.empty())
    why = rowsPastExpertsTouched(c, rowsReal, R, N);
  char detail[300];
  std::snprintf(detail, sizeof detail,
                "E=%lld R=%lld N=%lld K=%lld scale spread 2^%d max err %.2e of sum|aw|, "
                "FP8 rel. L2 from the unquantised product %.2e%s%s",
                (long long)E, (long long)rowsReal, (long long)N, (long long)K, spread, worst,
                std::sqrt(errL2 / std::max(refL2, 1e-300)), why.empty() ? "" : ": ", why.c_str());
  const bool ok = report(why.empty(), "fp4 gemm fp8 wgmma", detail);
  if (ok && timeIt) {
    const double ms = h20::checktool::medianMs(go, nullptr, 3, 20);
    std::printf("TIME fp4 gemm fp8 wgmma E=%lld rows=%lld N=%lld K=%lld: %.3f ms, %.1f TFLOP/s\n",
                (long long)E, (long long)rowsReal, (long long)N, (long long)K, ms,
                2.0 * double(rowsReal) * double(N) * double(K) / (ms * 1e-3) / 1e12);
  }
  return ok;
}

// ---- gather and SwiGLU in FP8 (the FP8 expert GEMM's A) ---------------------------

/// The FP8 quantising module (fp8_quant.cuh), for the unfused baseline the
/// timings compare with: the 16-bit gather / SwiGLU, then this kernel.
CUmodule fp8Module = nullptr;

/// Canary-filled device copies of Aq [R, K] bytes and As [ceil(K / 128), R]
/// f32 with the memref slots of both (row pitch K, As pitch R).
struct Fp8Out {
  int64_t R, K, KB;
  std::vector<uint8_t> q;
  std::vector<float> s;
  Buffer dq, ds;
  Fp8Out(int64_t R, int64_t K)
      : R(R), K(K), KB((K + 127) / 128), q(size_t(R * K), 0xA5), s(size_t(KB * R), -7.0f),
        dq(q.data(), q.size()), ds(s.data(), s.size() * 4) {}
  void push(std::vector<uint64_t> &slots) const {
    pushMemref(slots, dq.ptr, 0, {R, K}, {K, 1});
    pushMemref(slots, ds.ptr, 0, {KB, R}, {R, 1});
  }
  void download() {
    dq.download(q.data());
    ds.download(s.data());
  }
  /// Rows from `placed` on must keep their canaries.
  std::string untouchedFrom(int64_t placed) const {
    for (int64_t r = placed; r < R; ++r) {
      for (int64_t k = 0; k < K; ++k)
        if (q[size_t(r * K + k)] != 0xA5)
          return "wrote Aq of unplaced row " + std::to_string(r);
      for (int64_t b = 0; b < KB; ++b)
        if (s[size_t(b * R + r)] != -7.0f)
          return "wrote As of unplaced row " + std::to_string(r);
    }
    return "";
  }
};

/// One row's blocks of 128 as fp8_quant.cuh quantises them (float32:
/// scale max(amax, 1e-4) / 448, code e4m3(v / scale) to nearest even).
void quantizeRowRef(const float *v, int64_t K, std::vector<uint8_t> &q, std::vector<float> &s) {
  const int64_t KB = (K + 127) / 128;
  q.assign(size_t(K), 0);
  s.assign(size_t(KB), 0.0f);
  for (int64_t b = 0; b < KB; ++b) {
    float amax = 0.0f;
    for (int64_t k = b * 128; k < std::min(K, b * 128 + 128); ++k)
      amax = std::max(amax, std::fabs(v[k]));
    const float sc = std::max(amax, 1e-4f) / 448.0f;
    s[size_t(b)] = sc;
    for (int64_t k = b * 128; k < std::min(K, b * 128 + 128); ++k)
      q[size_t(k)] = runtime::encodeE4m3(v[k] / sc);
  }
}

/// Median ms of `name` (moe module) or, with `fp8`, of the FP8 module's.
double timeKernel(const std::string &name, int64_t grid, std::vector<uint64_t> &slots,
                  bool fp8 = false) {
  CUfunction f = nullptr;
  if (fp8)
    check(api->cuModuleGetFunction(&f, fp8Module, name.c_str()), name.c_str());
  else
    f = kernel(name);
  std::vector<void *> ptrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    ptrs[i] = &slots[i];
  return h20::checktool::medianMs(
      [&] {
        check(api->cuLaunchKernel(f, unsigned(grid), 1, 1, kMoeThreads, 1, 1, 0, nullptr,
                                  ptrs.data(), nullptr),
              name.c_str());
      },
      nullptr, 3, 20);
}

/// The unfused baseline's FP8 step: h20_fp8_quantize_bf16 over all R rows
/// of `src` [R, K] bf16 (what the host program launched before the fused
/// kernels: its grid is R's, not the placed rows').
double timeQuantizeBf16(const Buffer &src, int64_t R, int64_t K, Fp8Out &out) {
  std::vector<uint64_t> slots;
  pushMemref(slots, src.ptr, 0, {R, K}, {K, 1});
  out.push(slots);
  return timeKernel("h20_fp8_quantize_bf16", (R * ((K + 127) / 128) + 7) / 8, slots, true);
}

/// h20_moe_gather_fp8_<dt>: Aq / As bit for bit what quantising the
/// gathered rows gives (quantizeRowRef of X[rowToken[r]]; a token outside
/// [0, T) a zero row), the unplaced rows untouched. `xPitch` > D with
/// `xOff` 1: an unaligned X (element path). With `timeIt`: the fused
/// kernel against the 16-bit gather + h20_fp8_quantize_bf16 (same run).
bool runGatherFp8(int dt, int64_t T, int64_t D, int64_t R, int64_t placed, bool unaligned,
                  bool timeIt = false) {
  const int64_t xOff = unaligned ? 1 : 0, xPitch = unaligned ? D + 3 : D;
  const uint64_t seed = uint64_t(T * 7 + D * 13 + R + dt * 5 + unaligned) << 24;
  HostArray x(dt, size_t(xOff + T * xPitch));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      // Blocks of very different magnitudes, one all zero (the 1e-4 floor).
      const int64_t blk = d / 128;
      const float mag = (t + blk) % 5 == 3 ? 0.0f : std::ldexp(1.0f, int((t * 3 + blk) % 21) - 14);
      x.set(size_t(xOff + t * xPitch + d), mag * unitFloat(splitmix(seed + uint64_t(t * D + d))));
    }
  std::vector<int32_t> rowToken(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r)
    rowToken[size_t(r)] = r == 1 ? -1 : int32_t(splitmix(seed ^ uint64_t(r)) % uint64_t(T));
  std::vector<int32_t> offsets = {0, int32_t(placed / 2), int32_t(placed)};
  Buffer dx(x.bytes.data(), x.bytes.size()), drt(rowToken.data(), rowToken.size() * 4),
      doff(offsets.data(), offsets.size() * 4);
  Fp8Out out(R, D);
  std::vector<uint64_t> slots;
  pushMemref(slots, dx.ptr, xOff, {T, D}, {xPitch, 1});
  pushMemref(slots, drt.ptr, 0, {R}, {1});
  out.push(slots);
  pushMemref(slots, doff.ptr, 0, {3}, {1});
  launch(moeGatherFp8Kernel(dt), moeGatherGrid(R), slots);
  out.download();
  std::string why;
  std::vector<float> row(static_cast<size_t>(D));
  std::vector<uint8_t> q;
  std::vector<float> sc;
  const int64_t step = placed > 4096 ? 97 : 1;
  for (int64_t r = 0; r < placed && why.empty(); r += step) {
    const int32_t tok = rowToken[size_t(r)];
    for (int64_t d = 0; d < D; ++d)
      row[size_t(d)] = tok >= 0 ? x.get(size_t(xOff + tok * xPitch + d)) : 0.0f;
    quantizeRowRef(row.data(), D, q, sc);
    for (int64_t d = 0; d < D && why.empty(); ++d)
      if (out.q[size_t(r * D + d)] != q[size_t(d)])
        why = "Aq[" + std::to_string(r) + ", " + std::to_string(d) + "] differs";
    for (int64_t b = 0; b < out.KB && why.empty(); ++b)
      if (std::memcmp(&out.s[size_t(b * R + r)], &sc[size_t(b)], 4) != 0)
        why = "As[" + std::to_string(b) + ", " + std::to_string(r) + "] differs";
  }
  if (why.empty())
    why = out.untouchedFrom(placed);
  char detail[240];
  std::snprintf(detail, sizeof detail, "T=%lld Dm=%lld R=%lld placed=%lld%s%s", (long long)T,
                (long long)D, (long long)R, (long long)placed,
                why.empty() ? " bit-exact, the rest untouched" : ": ", why.c_str());
  const bool ok = report(why.empty(),
                         std::string("gather fp8 ") + typeName(dt) +
                             (unaligned ? " unaligned (element path)" : ""),
                         detail);
  if (ok && timeIt && fp8Module) {
    const double fused = timeKernel(moeGatherFp8Kernel(dt), moeGatherGrid(R), slots);
    Buffer xp(size_t(R * D * 2));
    std::vector<uint64_t> g16;
    pushMemref(g16, dx.ptr, xOff, {T, D}, {xPitch, 1});
    pushMemref(g16, drt.ptr, 0, {R}, {1});
    pushMemref(g16, xp.ptr, 0, {R, D}, {D, 1});
    pushMemref(g16, doff.ptr, 0, {3}, {1});
    const double gather = timeKernel(moeGatherKernel(dt), moeGatherGrid(R), g16);
    const double quant = timeQuantizeBf16(xp, R, D, out);
    std::printf("TIME gather fp8 %s R=%lld placed=%lld Dm=%lld: fused %.3f ms; unfused %.3f "
                "(gather) + %.3f (quantize all R rows) = %.3f ms\n",
                typeName(dt), (long long)R, (long long)placed, (long long)D, fused, gather, quant,
                gather + quant);
  }
  return ok;
}

/// h20_moe_swiglu_fp8: for the placed rows, each block's scale within
/// 1e-5 of max |SwiGLU| / 448 (float64 reference; GPU expf differs by
/// ulps) and each code within e4m3's rounding of the reference (half a
/// step: 2^-4 of the value, 2^-10 of the scale in the subnormal range);
/// the unplaced rows untouched. G and U hold swiglu's special values. With
/// `timeIt`: against the 16-bit SwiGLU + h20_fp8_quantize_bf16.
bool runSwigluFp8(int64_t R, int64_t I, int64_t placed, bool unaligned, bool timeIt = false) {
  const float limit = 7.0f;
  const int64_t off = unaligned ? 1 : 0, pitch = unaligned ? I + 1 : I;
  const uint64_t seed = uint64_t(R * 3 + I + unaligned) << 28;
  const float special[] = {limit, -limit, limit * 1.0001f, 3 * limit, -3 * limit, -100.0f,
                           -1000.0f, 0.0f, 1e-3f, 1e-30f};
  std::vector<float> g(size_t(off + R * pitch), NAN), u(g.size(), NAN);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < I; ++i) {
      const uint64_t h = splitmix(seed + uint64_t(r * I + i));
      // Rows of different magnitudes (the per-block scales differ).
      const float mag = std::ldexp(1.0f, int(r % 9) - 6);
      const size_t at = size_t(off + r * pitch + i);
      g[at] = h % 13 == 0 ? special[(h >> 8) % 10] : 1.5f * limit * unitFloat(h);
      u[at] = h % 11 == 0 ? special[(h >> 12) % 10] : mag * unitFloat(splitmix(h));
    }
  std::vector<int32_t> offsets = {0, int32_t(placed)};
  Buffer dg(g.data(), g.size() * 4), du(u.data(), u.size() * 4),
      doff(offsets.data(), offsets.size() * 4);
  Fp8Out out(R, I);
  std::vector<uint64_t> slots;
  pushMemref(slots, dg.ptr, off, {R, I}, {pitch, 1});
  pushMemref(slots, du.ptr, off, {R, I}, {pitch, 1});
  out.push(slots);
  pushMemref(slots, doff.ptr, 0, {2}, {1});
  pushF32(slots, limit);
  launch(moeSwigluFp8Kernel(), moeGatherGrid(R), slots);
  out.download();
  std::string why;
  double worstScale = 0.0;
  std::vector<double> ref(static_cast<size_t>(I));
  const int64_t step = placed > 4096 ? 97 : 1;
  for (int64_t r = 0; r < placed && why.empty(); r += step) {
    for (int64_t i = 0; i < I; ++i)
      ref[size_t(i)] =
          swigluRef(g[size_t(off + r * pitch + i)], u[size_t(off + r * pitch + i)], limit);
    for (int64_t b = 0; b < out.KB && why.empty(); ++b) {
      double amax = 0.0;
      for (int64_t i = b * 128; i < std::min(I, b * 128 + 128); ++i)
        amax = std::max(amax, std::fabs(ref[size_t(i)]));
      const double want = std::max(amax, 1e-4) / 448.0, got = out.s[size_t(b * R + r)];
      const double se = std::fabs(got - want) / want;
      worstScale = std::max(worstScale, se);
      if (!(se <= 1e-5)) {
        why = "As[" + std::to_string(b) + ", " + std::to_string(r) + "] = " +
              std::to_string(got) + ", want " + std::to_string(want);
        break;
      }
      for (int64_t i = b * 128; i < std::min(I, b * 128 + 128) && why.empty(); ++i) {
        const double v = double(runtime::decodeE4m3(out.q[size_t(r * I + i)])) * got,
                     w = ref[size_t(i)];
        if (!(std::fabs(v - w) <= 0.0626 * std::fabs(w) + got * (1.001 / 1024)))
          why = "Aq[" + std::to_string(r) + ", " + std::to_string(i) + "] = " + std::to_string(v) +
                ", want " + std::to_string(w);
      }
    }
  }
  if (why.empty())
    why = out.untouchedFrom(placed);
  char detail[260];
  std::snprintf(detail, sizeof detail, "R=%lld placed=%lld I=%lld max scale err %.1e%s%s",
                (long long)R, (long long)placed, (long long)I, worstScale,
                why.empty() ? ", codes within e4m3 rounding" : ": ", why.c_str());
  const bool ok = report(
      why.empty(), std::string("swiglu fp8") + (unaligned ? " unaligned (element path)" : ""),
      detail);
  if (ok && timeIt && fp8Module) {
    const double fused = timeKernel(moeSwigluFp8Kernel(), moeGatherGrid(R), slots);
    Buffer a16(size_t(R * I * 2));
    std::vector<uint64_t> s16;
    pushMemref(s16, dg.ptr, off, {R, I}, {pitch, 1});
    pushMemref(s16, du.ptr, off, {R, I}, {pitch, 1});
    pushMemref(s16, a16.ptr, 0, {R, I}, {I, 1});
    pushMemref(s16, doff.ptr, 0, {2}, {1});
    pushF32(s16, limit);
    const double swiglu = timeKernel(moeSwigluKernel(2), moeSwigluGrid(R * I), s16);
    const double quant = timeQuantizeBf16(a16, R, I, out);
    std::printf("TIME swiglu fp8 R=%lld placed=%lld I=%lld: fused %.3f ms; unfused %.3f "
                "(swiglu bf16) + %.3f (quantize all R rows) = %.3f ms\n",
                (long long)R, (long long)placed, (long long)I, fused, swiglu, quant,
                swiglu + quant);
  }
  return ok;
}

/// Edge cases on every type, then V4.1-Flash's shapes timed: a 33792-token
/// chunk's 202752 picks on one GPU (all placed) and on one rank of eight
/// (expert parallelism: ~1/8 placed).
bool runFp8ActivationChecks() {
  bool ok = true;
  for (int dt : {0, 1, 2}) {
    ok &= runGatherFp8(dt, 40, 384, 70, 70, false);
    ok &= runGatherFp8(dt, 33, 200, 61, 50, true); // a partial last block
  }
  ok &= runGatherFp8(2, 300, 5120, 90, 11, false);
  ok &= runGatherFp8(2, 30, 256, 20, 0, false);
  // K 131: Aq rows not 8-byte aligned (byte stores), a 3-element block.
  ok &= runGatherFp8(2, 33, 131, 40, 40, false);
  ok &= runSwigluFp8(77, 384, 77, false);
  ok &= runSwigluFp8(45, 200, 30, true);
  ok &= runSwigluFp8(40, 131, 35, false);
  ok &= runSwigluFp8(600, 2304, 75, false);
  const int64_t R = 33792 * 6;
  for (int64_t placed : {R, R / 8}) {
    ok &= runGatherFp8(2, 33792, 5120, R, placed, false, true);
    ok &= runSwigluFp8(R, 2304, placed, false, true);
  }
  return ok;
}

/// The bf16 cases run on the mma.sync kernel and, where the module was
/// compiled for sm_90a (`wgmma`), on the wgmma kernel too (same operands).
bool runFp4GemmChecks(bool wgmma) {
  bool ok = true;
  std::vector<bool> bf16Kernels{false};
  if (wgmma)
    bf16Kernels.push_back(true);
  // Empty experts, one-row experts, partial row and column tiles, K not a
  // multiple of the bf16 kernel's 64, a K of one k tile, many k tiles.
  ok &= runFp4Gemm(2, {0, 1, 130, 256, 37}, 200, 96, false, false, bf16Kernels);
  ok &= runFp4Gemm(2, {5, 0, 0, 128}, 128, 64, false, false, bf16Kernels);
  ok &= runFp4Gemm(2, {40, 17}, 32, 32, false, false, bf16Kernels);
  ok &= runFp4Gemm(2, {33, 90}, 64, 128, false, /*bigScales=*/true, bf16Kernels);
  ok &= runFp4Gemm(2, {300, 7, 129}, 264, 1056, false, false, bf16Kernels);
  if (wgmma) {
    // The FP8 kernel (K a multiple of 128): the same edge cases, one k tile,
    // scale blocks spanning more than e4m3's 8 spare octaves.
    ok &= runFp4GemmFp8({0, 1, 130, 256, 37}, 200, 256, false);
    ok &= runFp4GemmFp8({5, 0, 0, 128}, 128, 128, false);
    ok &= runFp4GemmFp8({300, 7, 129}, 264, 1152, false, /*spread=*/12);
  }
  for (int dt : {0, 1}) {
    ok &= runFp4Gemm(dt, {3, 70, 0, 65}, 72, 64, false, false, {false});
    ok &= runFp4Gemm(dt, {1, 2}, 40, 32, false, false, {false});
  }
  // V4.1-Flash's experts (W1/W3: N 2304, K 5120; W2: N 5120, K 2304) at
  // the compiler's default chunk of an MoE graph (33792 tokens x 6 picks
  // over 384 experts: 528 rows an expert on average, drawn from 264..792).
  std::mt19937_64 rng(7);
  std::vector<int32_t> counts(384);
  for (int32_t &c : counts)
    c = int32_t(264 + int64_t(rng() % 529));
  ok &= runFp4Gemm(2, counts, 2304, 5120, true, false, bf16Kernels);
  ok &= runFp4Gemm(2, counts, 5120, 2304, true, false, bf16Kernels);
  if (wgmma) {
    ok &= runFp4GemmFp8(counts, 2304, 5120, true);
    ok &= runFp4GemmFp8(counts, 5120, 2304, true);
  }
  return ok;
}

} // namespace

/// moe-check [SECTION...]: route, positions, gather, swiglu, combine,
/// fp8 (the FP8 gather / SwiGLU), fp4 (the expert GEMMs); all by default.
int main(int argc, char **argv) {
  const std::vector<std::string> sections(argv + 1, argv + argc);
  auto wanted = [&](const char *s) {
    return sections.empty() || std::find(sections.begin(), sections.end(), s) != sections.end();
  };
  std::setvbuf(stdout, nullptr, _IOLBF, 0); // lines survive a timeout's kill
  CUdevice dev;
  if (!h20::checktool::openDevice("moe-check", dev))
    return 0;
  if (std::string error; !nvrtcAvailable(&error)) {
    std::printf("SKIP: %s\n", error.c_str());
    return 0;
  }
  char name[128] = {0};
  api->cuDeviceGetName(name, sizeof name, dev);
  std::printf("device: %s\n", name);
  // sm_90a (the wgmma GEMM too) on a compute capability 9.0 device.
  int major = 0, minor = 0;
  api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  const bool wgmma = major == 9 && minor == 0;
  std::string ptx, log;
  if (!compileMoePtx(wgmma ? "sm_90a" : "sm_90", ptx, log)) {
    std::fprintf(stderr, "moe-check: %s\n", log.c_str());
    return 1;
  }
  check(api->cuModuleLoadDataEx(&module, ptx.c_str(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
  bool ok = true;
  if (wanted("route"))
    ok &= runRouteChecks();
  if (wanted("positions"))
    ok &= runPositionsChecks();
  if (wanted("gather"))
    ok &= runGatherChecks();
  if (wanted("swiglu"))
    ok &= runSwigluChecks();
  if (wanted("combine"))
    ok &= runCombineChecks();
  if (wgmma && wanted("fp8")) {
    if (!compileFp8Ptx("sm_90a", ptx, log)) {
      std::fprintf(stderr, "moe-check: %s\n", log.c_str());
      return 1;
    }
    check(api->cuModuleLoadDataEx(&fp8Module, ptx.c_str(), 0, nullptr, nullptr),
          "cuModuleLoadDataEx fp8");
    ok &= runFp8ActivationChecks();
  }
  if (wanted("fp4"))
    ok &= runFp4GemmChecks(wgmma);
  std::printf("%s\n", ok ? "moe-check: all passed" : "moe-check: FAILED");
  return ok ? 0 : 1;
}
