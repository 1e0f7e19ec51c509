//===- attention-check.cpp - the GPU attention kernel against an fp64 reference ===//
//
// attention-check [--filter SUBSTR] [--no-timing] [--sweep] [--no-check]
//                 [--time S1,S2,...] [--kernels default|wgmma|all]
//                 [--wgmma-variants STAGES:SCHEDULE,...] [--json PATH] [--dump DIR]
//
// Compiles the attention kernel variants (chooseAttentionVariant, NVRTC via
// compileAttentionPtx, PTX loaded by the driver), runs a matrix of cases on
// random inputs and compares each output with a CPU fp64 reference computed
// from the same (rounded) inputs: causal with a chunk offset (sq < skv),
// sq == skv, odd lengths and lengths below one tile, GQA / MQA / MHA,
// sliding window (with and without causal), softcap, rows without a visible
// key (zeros), strided views (BSHD Q/O, KV-cache slices, dim stride 2 with
// unaligned rows — each also bit-compared with the contiguous run), offsets
// past 2^31 elements; f32 / f16 / bf16; D = 16, 64, 128, 256 (and D != Dv).
// Elements outside an output view must stay untouched. Tolerance: relative
// L2 <= 1e-5 for f32, <= 1e-2 for f16/bf16.
//
// Prints one line per case (PASS/FAIL, error) and exits 1 on any failure,
// 0 when all pass, and 0 with "SKIP: no GPU (<reason>)" when the driver or a
// device is missing. Then times causal bf16 attention (B=1, H=32, D=128,
// S=8192; CUDA events, 3 warm-ups, median of 10) and prints TFLOP/s
// (4 * S^2 * D * H / 2 FLOPs); --sweep times several tile variants per D.
//
// Kernel families: on an sm_90 device (H20/H100/H200) every case also runs
// on the wgmma kernel (AttentionVariant kind 1, compiled for sm_90a) when it
// has a variant for the case's dtype and dims (f16/bf16, D = Dv in {64, 128,
// 256}); `--kernels default` checks only the mma.sync kernel (kind 0,
// chooseMmaAttentionVariant, what h20-opt --attention-kernel=mma compiles),
// `--kernels wgmma` only the wgmma kernel (h20's default where it
// has a variant). Timing covers the default variant, plus the
// wgmma variant with --sweep or `--kernels all` (only it with `--kernels
// wgmma`).
//   --time S1,S2,...  time at these S (default 8192)
//   --wgmma-variants STAGES:SCHEDULE,...  also check and time these wgmma
//                     variants (AttentionVariant::stages / ::schedule)
// The wgmma kernel loads by TMA where the views allow (as h20-run does);
// H20_ATTENTION_TMA=0 makes it use cp.async. Timing lines name which.
//   --no-check        skip the correctness cases (timing only)
//   --no-timing       skip the timing
//   --dump DIR        after timing h20's wgmma kernel at each S, write its
//                     inputs and output to DIR/attn-S<S>.{q,k,v,o}.npy
//                     (bench/attn_check_torch.py compares them with SDPA)
//   --json PATH       also write the timings as a JSON array of {"kernel",
//                     "S", "H", "D", "ms", "tflops"} (atomically: PATH.tmp,
//                     then rename)
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/AttentionParams.h"
#include "h20/Runtime/Cuda/AttentionTma.h"
#include "GpuCheckTool.h"
#include "h20/Runtime/Cuda/CudaDriver.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Target/AttentionKernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace h20;

namespace {

using h20::checktool::api;
using h20::checktool::check;

// ---- element conversions (round to nearest even) ------------------------------

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t toBf16(float f) {
  uint32_t x = bitsOf(f);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
float fromBf16(uint16_t h) { return floatOf(uint32_t(h) << 16); }
uint16_t toF16(float f) {
  uint32_t x = bitsOf(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)
    return uint16_t(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) // >= 65520 rounds to infinity
    return uint16_t(sign | 0x7c00u);
  if (x < 0x38800000u) // below 2^-14: subnormal, in units of 2^-24
    return uint16_t(sign | uint32_t(std::nearbyint(floatOf(x) * 16777216.0f)));
  return uint16_t(sign | ((x - 0x38000000u + 0xfffu + ((x >> 13) & 1u)) >> 13));
}
float fromF16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0)
    return (sign ? -1.f : 1.f) * float(m) * 5.9604644775390625e-08f; // 2^-24
  if (e == 31)
    return floatOf(sign | 0x7f800000u | (m << 13));
  return floatOf(sign | ((e + 112) << 23) | (m << 13));
}

int elemBytes(int dtype) { return dtype == 0 ? 4 : 2; }
const char *dtypeName(int dtype) { return dtype == 0 ? "f32" : dtype == 1 ? "f16" : "bf16"; }

/// Rounds `x` to the dtype (the values the kernel sees) and returns it as float.
float roundTo(int dtype, float x) {
  if (dtype == 1)
    return fromF16(toF16(x));
  if (dtype == 2)
    return fromBf16(toBf16(x));
  return x;
}
void storeElem(int dtype, unsigned char *dst, float x) {
  if (dtype == 0) {
    std::memcpy(dst, &x, 4);
  } else {
    uint16_t h = dtype == 1 ? toF16(x) : toBf16(x);
    std::memcpy(dst, &h, 2);
  }
}
float loadElem(int dtype, const unsigned char *src) {
  if (dtype == 0) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, src, 2);
  return dtype == 1 ? fromF16(h) : fromBf16(h);
}

// ---- strided device views -------------------------------------------------------

enum Layout {
  kContiguous = 0, ///< [B, H, S, D] everywhere
  kCacheViews = 1, ///< Q/O as [B, S, H, D]; K/V slices of a [2, B, H, S+13, D] cache at position 5
  kDimStride2 = 2, ///< dim stride 2, row pitch 2D+3, base offset 1: no 16-byte vectors
  kHugeOffset = 3, ///< K/V batch stride 2^31 + 8 elements (64-bit offsets)
};

/// One logical [B, H, S, D] tensor as a strided view into a device buffer.
struct View {
  int dtype = 0;
  int64_t dims[4] = {0, 0, 0, 0};
  long long stride[4] = {0, 0, 0, 0};
  int64_t offset = 0; ///< elements from the buffer start to element 0
  int64_t size = 0;   ///< elements in the buffer
  CUdeviceptr buf = 0;

  int64_t index(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return offset + b * stride[0] + h * stride[1] + s * stride[2] + d * stride[3];
  }
  int64_t count() const { return dims[0] * dims[1] * dims[2] * dims[3]; }
  /// Elements [lo, hi) of the buffer that batch b's view touches.
  void batchSpan(int64_t b, int64_t &lo, int64_t &hi) const {
    lo = index(b, 0, 0, 0);
    hi = index(b, dims[1] - 1, dims[2] - 1, dims[3] - 1) + 1;
  }
};

/// Makes a view of logical dims [B, H, S, D] for tensor `which` ('q', 'k',
/// 'v' or 'o') in `layout` and allocates its buffer, filled with 0xff bytes
/// (NaN in every dtype: elements the kernel must not touch, or must write).
View makeView(int dtype, int layout, char which, int64_t B, int64_t H, int64_t S, int64_t D) {
  View v;
  v.dtype = dtype;
  int64_t dims[4] = {B, H, S, D};
  std::copy(dims, dims + 4, v.dims);
  bool kv = which == 'k' || which == 'v';
  auto set = [&](long long sb, long long sh, long long ss, long long sd) {
    v.stride[0] = sb, v.stride[1] = sh, v.stride[2] = ss, v.stride[3] = sd;
  };
  switch (layout) {
  case kCacheViews:
    if (!kv) {
      set(S * H * D, D, H * D, 1);
    } else {
      int64_t P = S + 13;
      set(H * P * D, P * D, D, 1);
      v.offset = (which == 'v' ? B * H * P * D : 0) + 5 * D;
      v.size = 2 * B * H * P * D;
    }
    break;
  case kDimStride2: {
    long long pitch = 2 * D + 3;
    set(H * S * pitch, S * pitch, pitch, 2);
    v.offset = 1;
    break;
  }
  case kHugeOffset:
    if (kv)
      set((1LL << 31) + 8, S * D, D, 1);
    else
      set(H * S * D, S * D, D, 1);
    break;
  default:
    set(H * S * D, S * D, D, 1);
  }
  if (!v.size) {
    int64_t lo, hi;
    v.batchSpan(B - 1, lo, hi);
    v.size = hi;
  }
  check(api->cuMemAlloc(&v.buf, size_t(v.size) * elemBytes(dtype)), "cuMemAlloc");
  check(api->cuMemsetD8Async(v.buf, 0xff, size_t(v.size) * elemBytes(dtype), nullptr),
        "cuMemsetD8Async");
  return v;
}

void freeView(View &v) {
  if (v.buf)
    api->cuMemFree(v.buf);
  v.buf = 0;
}

/// Copies the logical tensor `x` ([B, H, S, D], row-major) into the view,
/// one batch span at a time (spans of different batches do not overlap).
void upload(const View &v, const std::vector<float> &x) {
  const int eb = elemBytes(v.dtype);
  for (int64_t b = 0; b < v.dims[0]; ++b) {
    int64_t lo, hi;
    v.batchSpan(b, lo, hi);
    std::vector<unsigned char> host(size_t(hi - lo) * eb, 0xff);
    for (int64_t h = 0; h < v.dims[1]; ++h)
      for (int64_t s = 0; s < v.dims[2]; ++s)
        for (int64_t d = 0; d < v.dims[3]; ++d)
          storeElem(v.dtype, &host[size_t(v.index(b, h, s, d) - lo) * eb],
                    x[((b * v.dims[1] + h) * v.dims[2] + s) * v.dims[3] + d]);
    check(api->cuMemcpyHtoD(v.buf + size_t(lo) * eb, host.data(), host.size()), "cuMemcpyHtoD");
  }
}

/// Reads the view back into a logical [B, H, S, D] tensor; counts the
/// elements inside the batch spans but outside the view that are no longer
/// 0xff bytes (written although they must not be) into `stray`.
std::vector<float> download(const View &v, int64_t &stray) {
  const int eb = elemBytes(v.dtype);
  std::vector<float> x(size_t(v.count()));
  stray = 0;
  for (int64_t b = 0; b < v.dims[0]; ++b) {
    int64_t lo, hi;
    v.batchSpan(b, lo, hi);
    std::vector<unsigned char> host(size_t(hi - lo) * eb);
    check(api->cuMemcpyDtoH(host.data(), v.buf + size_t(lo) * eb, host.size()), "cuMemcpyDtoH");
    std::vector<bool> inView(size_t(hi - lo), false);
    for (int64_t h = 0; h < v.dims[1]; ++h)
      for (int64_t s = 0; s < v.dims[2]; ++s)
        for (int64_t d = 0; d < v.dims[3]; ++d) {
          int64_t at = v.index(b, h, s, d) - lo;
          inView[size_t(at)] = true;
          x[size_t(((b * v.dims[1] + h) * v.dims[2] + s) * v.dims[3] + d)] =
              loadElem(v.dtype, &host[size_t(at) * eb]);
        }
    for (size_t i = 0; i < inView.size(); ++i)
      if (!inView[i])
        for (int k = 0; k < eb; ++k)
          if (host[i * eb + k] != 0xff) {
            ++stray;
            break;
          }
  }
  return x;
}

// ---- cases and the fp64 reference -----------------------------------------------

struct Case {
  std::string name;
  int dtype = 2, d = 128, dv = 128;
  int64_t batch = 1, heads = 1, kvHeads = 1, sq = 1, skv = 1;
  bool causal = false;
  int64_t window = -1;
  float softcap = 0.f;
  float scale = 0.f; ///< 0: 1 / sqrt(D)
  int layout = kContiguous;
};

/// The visibility rule of the kernel (AttentionParams.h).
bool visible(const Case &c, int64_t i, int64_t j) {
  int64_t pos = c.skv - c.sq + i;
  if (c.causal && j > pos)
    return false;
  return c.window < 0 || j > pos - c.window;
}

/// o[b,h,i,:] = sum_j softmax_j(s_ij) v[b,kh,j,:] in fp64, rows without a
/// visible key = 0; q [B,H,sq,D], k [B,Hkv,skv,D], v [B,Hkv,skv,Dv].
std::vector<double> reference(const Case &c, float scale, const std::vector<float> &q,
                              const std::vector<float> &k, const std::vector<float> &v) {
  std::vector<double> o(size_t(c.batch * c.heads * c.sq * c.dv), 0.0);
  const int64_t group = c.heads / c.kvHeads;
  auto work = [&](int64_t bh) {
    int64_t b = bh / c.heads, h = bh % c.heads, kh = h / group;
    std::vector<double> s(size_t(c.skv));
    for (int64_t i = 0; i < c.sq; ++i) {
      const float *qi = &q[size_t(((b * c.heads + h) * c.sq + i) * c.d)];
      double mx = -INFINITY;
      for (int64_t j = 0; j < c.skv; ++j) {
        if (!visible(c, i, j)) {
          s[size_t(j)] = -INFINITY;
          continue;
        }
        const float *kj = &k[size_t(((b * c.kvHeads + kh) * c.skv + j) * c.d)];
        double dot = 0;
        for (int d = 0; d < c.d; ++d)
          dot += double(qi[d]) * double(kj[d]);
        dot *= scale;
        if (c.softcap > 0)
          dot = c.softcap * std::tanh(dot / c.softcap);
        s[size_t(j)] = dot;
        mx = std::max(mx, dot);
      }
      if (mx == -INFINITY)
        continue; // no visible key: zeros
      double sum = 0;
      for (int64_t j = 0; j < c.skv; ++j)
        sum += s[size_t(j)] = std::exp(s[size_t(j)] - mx);
      double *oi = &o[size_t(((b * c.heads + h) * c.sq + i) * c.dv)];
      for (int64_t j = 0; j < c.skv; ++j) {
        if (s[size_t(j)] == 0)
          continue;
        const float *vj = &v[size_t(((b * c.kvHeads + kh) * c.skv + j) * c.dv)];
        double p = s[size_t(j)] / sum;
        for (int d = 0; d < c.dv; ++d)
          oi[d] += p * vj[d];
      }
    }
  };
  const int64_t jobs = c.batch * c.heads;
  unsigned nthreads = std::max(1u, std::min(std::thread::hardware_concurrency(), 32u));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < nthreads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t bh = t; bh < jobs; bh += nthreads)
        work(bh);
    });
  for (std::thread &t : pool)
    t.join();
  return o;
}

// ---- kernels ------------------------------------------------------------------------

struct Kernel {
  AttentionVariant variant;
  CUfunction fn = nullptr;
};

std::map<std::string, Kernel> kernels; // by kernel name
std::vector<CUmodule> modules;

/// Compiles `variants` for `arch` into one module and registers their functions.
bool loadModule(const std::vector<AttentionVariant> &variants, const std::string &arch) {
  std::string ptx, log;
  if (!compileAttentionPtx(variants, arch, ptx, log)) {
    std::printf("FAIL compile: %s\n", log.c_str());
    return false;
  }
  CUmodule mod;
  check(api->cuModuleLoadDataEx(&mod, ptx.c_str(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
  modules.push_back(mod);
  for (const AttentionVariant &v : variants) {
    Kernel k;
    k.variant = v;
    check(api->cuModuleGetFunction(&k.fn, mod, v.kernelName().c_str()), "cuModuleGetFunction");
    check(api->cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  int(v.smemBytes())),
          "cuFuncSetAttribute");
    kernels[v.kernelName()] = k;
  }
  return true;
}

/// Compiles `variants` into one module per required architecture (kind 0
/// for sm_90 as the GPU target ships it, kind 1 for sm_90a) and registers
/// their functions.
bool loadKernels(const std::vector<AttentionVariant> &all) {
  for (const char *arch : {"sm_90", "sm_90a"}) {
    std::vector<AttentionVariant> variants;
    for (const AttentionVariant &v : all)
      if (v.requiredArch() == arch && !kernels.count(v.kernelName()))
        variants.push_back(v);
    if (!variants.empty() && !loadModule(variants, arch))
      return false;
  }
  return true;
}

H20AttnParams makeParams(const Case &c, float scale, const View &q, const View &k, const View &v,
                         const View &o) {
  H20AttnParams p;
  std::memset(&p, 0, sizeof p);
  const int eb = elemBytes(c.dtype);
  p.q = reinterpret_cast<const void *>(q.buf + size_t(q.offset) * eb);
  p.k = reinterpret_cast<const void *>(k.buf + size_t(k.offset) * eb);
  p.v = reinterpret_cast<const void *>(v.buf + size_t(v.offset) * eb);
  p.o = reinterpret_cast<void *>(o.buf + size_t(o.offset) * eb);
  std::copy(q.stride, q.stride + 4, p.q_stride);
  std::copy(k.stride, k.stride + 4, p.k_stride);
  std::copy(v.stride, v.stride + 4, p.v_stride);
  std::copy(o.stride, o.stride + 4, p.o_stride);
  p.batch = c.batch, p.heads = c.heads, p.kv_heads = c.kvHeads, p.sq = c.sq, p.skv = c.skv;
  p.window_left = c.window;
  p.scale = scale;
  p.softcap = c.softcap;
  p.causal = c.causal ? 1 : 0;
  return p;
}

/// `p` as kernel `k` takes it: for the wgmma kernel with TMA tensor maps
/// where the views allow them, as the runtime does (GpuExecutor); p.tma
/// says whether they were made (not with H20_ATTENTION_TMA=0).
H20AttnParams forKernel(const Kernel &k, H20AttnParams p) {
  const AttentionVariant &v = k.variant;
  if (v.kind == 1)
    h20::runtime::encodeAttentionTensorMaps(*api, p, elemBytes(v.dtype), v.headDim, v.headDimV);
  return p;
}

/// Launches `k` on `p` (made by forKernel).
void launch(const Kernel &k, const H20AttnParams &p, CUstream stream) {
  const AttentionVariant &v = k.variant;
  H20AttnParams copy = p;
  void *args[] = {&copy};
  check(api->cuLaunchKernel(k.fn, unsigned((p.sq + v.blockM - 1) / v.blockM), unsigned(p.heads),
                            unsigned(p.batch), unsigned(v.threads), 1, 1,
                            unsigned(v.smemBytes()), stream, args, nullptr),
        "cuLaunchKernel");
}

/// Which kernel families run (--kernels): the default choice
/// (chooseAttentionVariant), the wgmma kernel, or both.
enum class Families { Default, Wgmma, All };

/// The variants that check case `c` (each distinct once): the default choice
/// unless `families` is Wgmma, and the wgmma variant (when `wgmma` — an
/// sm_90 device — and it supports the case) unless `families` is Default.
/// --wgmma-variants: (stages, schedule) pairs checked and timed besides the
/// wgmma kernel's default.
std::vector<std::pair<int, int>> extraWgmma;

std::vector<AttentionVariant> variantsFor(const Case &c, Families families, bool wgmma) {
  std::vector<AttentionVariant> out;
  if (families != Families::Wgmma)
    out.push_back(*chooseMmaAttentionVariant(c.dtype, c.d, c.dv));
  if (wgmma && families != Families::Default)
    if (std::optional<AttentionVariant> w = chooseWgmmaAttentionVariant(c.dtype, c.d, c.dv)) {
      if (std::find(out.begin(), out.end(), *w) == out.end())
        out.push_back(*w);
      for (auto [stages, schedule] : extraWgmma) {
        AttentionVariant x = *w;
        x.stages = stages, x.schedule = schedule;
        if (x.isSupported() && std::find(out.begin(), out.end(), x) == out.end())
          out.push_back(x);
      }
    }
  return out;
}

/// Runs `c` in `layout` on inputs q/k/v (logical, already rounded); returns
/// the logical output and the count of stray writes.
std::vector<float> runCase(const Kernel &kernel, const Case &c, int layout, float scale,
                           const std::vector<float> &q, const std::vector<float> &k,
                           const std::vector<float> &v, int64_t &stray) {
  View vq = makeView(c.dtype, layout, 'q', c.batch, c.heads, c.sq, c.d);
  View vk = makeView(c.dtype, layout, 'k', c.batch, c.kvHeads, c.skv, c.d);
  View vv = makeView(c.dtype, layout, 'v', c.batch, c.kvHeads, c.skv, c.dv);
  View vo = makeView(c.dtype, layout, 'o', c.batch, c.heads, c.sq, c.dv);
  upload(vq, q);
  upload(vk, k);
  upload(vv, v);
  launch(kernel, forKernel(kernel, makeParams(c, scale, vq, vk, vv, vo)), nullptr);
  check(api->cuCtxSynchronize(), "kernel");
  std::vector<float> out = download(vo, stray);
  for (View *x : {&vq, &vk, &vv, &vo})
    freeView(*x);
  return out;
}

/// Runs one case on each of `variants` (same inputs) against the fp64
/// reference; prints one line per variant; returns the number of FAILs.
int runCheck(const Case &c, const std::vector<AttentionVariant> &variants, std::mt19937 &rng) {
  const float scale = c.scale > 0 ? c.scale : 1.f / std::sqrt(float(c.d));
  std::uniform_real_distribution<float> uni(-2.f, 2.f);
  auto fill = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float &e : x)
      e = roundTo(c.dtype, uni(rng));
    return x;
  };
  std::vector<float> q = fill(c.batch * c.heads * c.sq * c.d);
  std::vector<float> k = fill(c.batch * c.kvHeads * c.skv * c.d);
  std::vector<float> v = fill(c.batch * c.kvHeads * c.skv * c.dv);
  std::vector<double> ref = reference(c, scale, q, k, v);
  int failures = 0;
  for (const AttentionVariant &var : variants) {
    const Kernel &kernel = kernels.at(var.kernelName());
    int64_t stray = 0;
    std::vector<float> out = runCase(kernel, c, c.layout, scale, q, k, v, stray);

    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      double e = double(out[i]) - ref[i];
      num += e * e;
      den += ref[i] * ref[i];
    }
    const double tol = c.dtype == 0 ? 1e-5 : 1e-2;
    // All rows empty: the output must be exactly zero.
    const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    bool pass = err <= tol && stray == 0; // NaN fails
    std::string extra;
    if (stray)
      extra += " stray-writes=" + std::to_string(stray);
    if (c.layout != kContiguous) {
      int64_t stray0 = 0;
      std::vector<float> base = runCase(kernel, c, kContiguous, scale, q, k, v, stray0);
      int64_t differ = 0;
      for (size_t i = 0; i < out.size(); ++i)
        differ += std::memcmp(&out[i], &base[i], sizeof(float)) != 0;
      if (differ || stray0)
        pass = false;
      extra += " vs-contiguous: " + std::to_string(differ) + " differ";
    }
    std::printf("%s %-44s rel_l2=%.3e (tol %.0e) [%s]%s\n", pass ? "PASS" : "FAIL",
                c.name.c_str(), err, tol, var.kernelName().c_str(), extra.c_str());
    std::fflush(stdout);
    failures += !pass;
  }
  return failures;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](Case c, const std::string &what) {
    c.name = std::string(dtypeName(c.dtype)) + "-d" + std::to_string(c.d) +
             (c.dv != c.d ? "-dv" + std::to_string(c.dv) : "") + " " + what;
    out.push_back(c);
  };
  for (int dtype : {0, 1, 2})
    for (int d : {16, 64, 128, 256}) {
      Case c;
      c.dtype = dtype, c.d = c.dv = d;
      auto shape = [&](int64_t b, int64_t h, int64_t hkv, int64_t sq, int64_t skv, bool causal) {
        Case x = c;
        x.batch = b, x.heads = h, x.kvHeads = hkv, x.sq = sq, x.skv = skv, x.causal = causal;
        return x;
      };
      add(shape(2, 4, 4, 129, 129, true), "mha causal sq=skv=129 b=2");
      add(shape(1, 8, 2, 7, 1000, true), "gqa8/2 causal chunk sq=7 skv=1000");
      add(shape(1, 4, 1, 200, 333, false), "mqa4/1 full sq=200 skv=333");
      add(shape(1, 2, 2, 1, 1, true), "causal sq=skv=1");
      add(shape(1, 2, 1, 1, 77, true), "causal sq=1 skv=77");
      add(shape(1, 3, 3, 7, 7, false), "full sq=skv=7 (< tile)");
      Case w = shape(1, 4, 2, 300, 300, true);
      w.window = 64;
      add(w, "gqa causal window=64 s=300");
      w = shape(1, 2, 1, 100, 1000, true);
      w.window = 37;
      add(w, "causal window=37 chunk sq=100 skv=1000");
      w = shape(1, 2, 1, 100, 300, false);
      w.window = 50;
      add(w, "window=50 without causal sq=100 skv=300");
      Case sc = shape(1, 2, 2, 129, 129, true);
      sc.softcap = 2.f, sc.scale = 0.5f;
      add(sc, "causal softcap=2 scale=0.5");
      add(shape(1, 2, 2, 50, 20, true), "causal sq=50 > skv=20 (30 empty rows)");
      w = shape(1, 2, 2, 33, 40, true);
      w.window = 0;
      add(w, "causal window=0 (all rows empty)");
      Case l = shape(2, 4, 2, 77, 130, true);
      l.layout = kCacheViews;
      add(l, "strided bshd-q/o cache-k/v gqa causal");
      l.layout = kDimStride2;
      add(l, "strided dim-stride-2 unaligned gqa causal");
    }
  // D != Dv, longer sequences, 64-bit offsets.
  Case c;
  c.dtype = 2, c.d = 192, c.dv = 128, c.heads = 4, c.kvHeads = 2, c.sq = 300, c.skv = 300;
  c.causal = true;
  add(c, "gqa causal s=300");
  c.dtype = 0;
  add(c, "gqa causal s=300");
  for (int dtype : {1, 2}) {
    Case big;
    big.dtype = dtype, big.heads = 2, big.kvHeads = 2, big.sq = 1000, big.skv = 1000;
    add(big, "full s=1000");
    big.causal = true;
    add(big, "causal s=1000");
  }
  Case huge;
  huge.dtype = 2, huge.batch = 2, huge.heads = 2, huge.kvHeads = 1, huge.sq = 64, huge.skv = 96;
  huge.causal = true, huge.layout = kHugeOffset;
  add(huge, "k/v batch stride 2^31+8 (64-bit offsets)");
  return out;
}

// ---- timing ---------------------------------------------------------------------------

/// Fills the contiguous view `v` (f16/bf16 or f32) with uniform values in
/// [-2, 2) from a xorshift generator seeded by `seed`: fast enough for the
/// 2^29-element inputs of S = 128K, and never zeros.
void uploadRandom(const View &v, uint64_t seed) {
  const int eb = elemBytes(v.dtype);
  std::vector<unsigned char> host(size_t(v.size) * eb);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < v.size; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float f = float(x >> 40) * (4.f / 16777216.f) - 2.f;
    storeElem(v.dtype, &host[size_t(i) * eb], f);
  }
  check(api->cuMemcpyHtoD(v.buf, host.data(), host.size()), "cuMemcpyHtoD");
}

/// Timing inputs per (dtype, D, Dv, H, S), kept for the next variant of the
/// same problem and released by releaseTimingInputs().
std::map<std::vector<int64_t>, std::vector<View>> timingInputs;

void releaseTimingInputs() {
  for (auto &[key, views] : timingInputs)
    for (View &v : views)
      freeView(v);
  timingInputs.clear();
}

/// Median time (ms) of one launch of `k` on B=1 causal attention with H heads,
/// S = sq = skv, contiguous random inputs (3 warm-ups, 10 timed, CUDA events);
/// `tma` says whether the launches loaded by TMA. The parameter (tensor
/// maps included) is made once, outside the timed launches.
double timeCausal(const Kernel &k, int64_t H, int64_t S, bool &tma) {
  const AttentionVariant &var = k.variant;
  Case c;
  c.dtype = var.dtype, c.d = var.headDim, c.dv = var.headDimV;
  c.heads = c.kvHeads = H, c.sq = c.skv = S, c.causal = true;
  std::vector<View> &io = timingInputs[{c.dtype, c.d, c.dv, H, S}];
  if (io.empty()) {
    io.push_back(makeView(c.dtype, kContiguous, 'q', 1, H, S, c.d));
    io.push_back(makeView(c.dtype, kContiguous, 'k', 1, H, S, c.d));
    io.push_back(makeView(c.dtype, kContiguous, 'v', 1, H, S, c.dv));
    io.push_back(makeView(c.dtype, kContiguous, 'o', 1, H, S, c.dv));
    for (int i = 0; i < 3; ++i)
      uploadRandom(io[size_t(i)], uint64_t(7 + i));
  }
  const H20AttnParams p =
      forKernel(k, makeParams(c, 1.f / std::sqrt(float(c.d)), io[0], io[1], io[2], io[3]));
  tma = p.tma != 0;
  return checktool::medianMs([&] { launch(k, p, nullptr); }, nullptr, 3, 10);
}

/// --dump DIR: after timing h20's wgmma kernel at S, its inputs and output
/// as DIR/attn-S<S>.{q,k,v,o}.npy ([1, H, S, D], 16-bit elements as '<u2'
/// for bf16, '<f2' for f16), for bench/attn_check_torch.py's comparison with
/// PyTorch SDPA on the same inputs.
std::string dumpDir;

bool dumpTimingCase(const AttentionVariant &var, int64_t H, int64_t S) {
  const std::vector<View> &io = timingInputs[{var.dtype, var.headDim, var.headDimV, H, S}];
  const char *names[] = {"q", "k", "v", "o"};
  const std::string descr = var.dtype == 2 ? "u2" : "f2";
  for (size_t i = 0; i < io.size() && i < 4; ++i) {
    const View &v = io[i];
    std::string bytes(size_t(v.size) * 2, '\0');
    check(api->cuMemcpyDtoH(bytes.data(), v.buf, bytes.size()), "cuMemcpyDtoH");
    const std::string path = dumpDir + "/attn-S" + std::to_string(S) + "." + names[i] + ".npy";
    std::string error;
    if (!h20::runtime::writeFileAtomically(
            path, h20::runtime::encodeNpy(descr, {1, H, S, v.dims[3]}, bytes.data(), bytes.size()),
            error)) {
      std::fprintf(stderr, "attention-check: --dump: %s\n", error.c_str());
      return false;
    }
  }
  std::printf("DUMP %s S=%lld -> %s/attn-S%lld.{q,k,v,o}.npy\n", var.kernelName().c_str(),
              static_cast<long long>(S), dumpDir.c_str(), static_cast<long long>(S));
  return true;
}

/// One timing, for --json.
struct Timing {
  std::string kernel;
  int64_t S, H, D;
  double ms, tflops;
};
std::vector<Timing> timings;

void reportTiming(const Kernel &k, int64_t H, int64_t S) {
  bool tma = false;
  double ms = timeCausal(k, H, S, tma);
  const AttentionVariant &v = k.variant;
  // Causal: half of the 2 * S^2 * (D + Dv) * H FLOPs of full attention.
  double flops = double(S) * double(S) * double(v.headDim + v.headDimV) * double(H);
  double tflops = flops / (ms * 1e-3) / 1e12;
  // The loads the wgmma kernel used: TMA or cp.async (H20_ATTENTION_TMA=0).
  const std::string name = v.kernelName() + (v.kind == 1 ? (tma ? "+tma" : "+cpasync") : "");
  std::printf("TIME %-56s B=1 H=%lld S=%lld causal: %.3f ms, %.1f TFLOP/s\n", name.c_str(),
              static_cast<long long>(H), static_cast<long long>(S), ms, tflops);
  std::fflush(stdout);
  timings.push_back({name, S, H, v.headDim, ms, tflops});
}

/// Writes `timings` to `path` as a JSON array, atomically (path.tmp, rename).
bool writeJson(const std::string &path) {
  const std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "attention-check: cannot write %s\n", tmp.c_str());
    return false;
  }
  std::fprintf(f, "[");
  for (size_t i = 0; i < timings.size(); ++i) {
    const Timing &t = timings[i];
    std::fprintf(f,
                 "%s\n  {\"kernel\": \"%s\", \"S\": %lld, \"H\": %lld, \"D\": %lld, \"ms\": %.6f, "
                 "\"tflops\": %.3f}",
                 i ? "," : "", t.kernel.c_str(), static_cast<long long>(t.S),
                 static_cast<long long>(t.H), static_cast<long long>(t.D), t.ms, t.tflops);
  }
  std::fprintf(f, "\n]\n");
  bool ok = std::fflush(f) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "attention-check: cannot write %s\n", path.c_str());
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

/// Parses "S1,S2,..." (positive integers) into `out`; false on bad input.
bool parseSizes(const char *text, std::vector<int64_t> &out) {
  out.clear();
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char *end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || v <= 0 || v > (1LL << 24))
      return false;
    out.push_back(v);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return !out.empty();
}

} // namespace

int main(int argc, char **argv) {
  // The two families are checked separately: chooseMmaAttentionVariant
  // picks the mma.sync kernel ("default"), chooseWgmmaAttentionVariant the
  // wgmma kernel (what h20 compiles to where it has a variant).
  std::string filter, jsonPath;
  bool timing = true, sweep = false, checks = true;
  std::optional<Families> familiesOpt;
  std::vector<int64_t> sizes = {8192};
  const char *usage = "usage: attention-check [--filter SUBSTR] [--no-timing] [--sweep] "
                      "[--no-check] [--time S1,S2,...] [--kernels default|wgmma|all] "
                      "[--wgmma-variants STAGES:SCHEDULE,...] [--json PATH] [--dump DIR]\n";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-timing")) {
      timing = false;
    } else if (!std::strcmp(argv[i], "--sweep")) {
      sweep = true;
    } else if (!std::strcmp(argv[i], "--no-check")) {
      checks = false;
    } else if (!std::strcmp(argv[i], "--time") && i + 1 < argc) {
      if (!parseSizes(argv[++i], sizes)) {
        std::fprintf(stderr, "attention-check: --time wants S1,S2,... (positive integers)\n");
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--wgmma-variants") && i + 1 < argc) {
      // STAGES:SCHEDULE,... e.g. 3:1,2:2
      std::string list = argv[++i];
      size_t pos = 0;
      while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos
                                                                       : comma - pos);
        int st = 0, sc = 0;
        if (std::sscanf(item.c_str(), "%d:%d", &st, &sc) != 2) {
          std::fprintf(stderr, "attention-check: --wgmma-variants wants STAGES:SCHEDULE,...\n");
          return 2;
        }
        extraWgmma.push_back({st, sc});
        if (comma == std::string::npos)
          break;
        pos = comma + 1;
      }
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      jsonPath = argv[++i];
    } else if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) {
      dumpDir = argv[++i];
    } else if (!std::strcmp(argv[i], "--kernels") && i + 1 < argc) {
      std::string k = argv[++i];
      if (k == "default")
        familiesOpt = Families::Default;
      else if (k == "wgmma")
        familiesOpt = Families::Wgmma;
      else if (k == "all")
        familiesOpt = Families::All;
      else {
        std::fprintf(stderr, "%s", usage);
        return 2;
      }
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  CUdevice dev;
  if (!h20::checktool::openDevice("attention-check", dev))
    return 0;
  char name[256] = {0};
  api->cuDeviceGetName(name, sizeof name, dev);
  int major = 0, minor = 0;
  api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  std::printf("device: %s (sm_%d%d)\n", name, major, minor);
  if (major < 9) {
    std::printf("SKIP: no GPU (the kernels are compiled for sm_90; this device is sm_%d%d)\n",
                major, minor);
    return 0;
  }
  // compute_90a PTX (the wgmma kernel) runs on compute capability 9.0 only.
  const bool wgmma = major == 9 && minor == 0;
  if (!wgmma)
    std::printf("NOTE: sm_%d%d is not sm_90: the wgmma kernel is not checked\n", major, minor);
  // Checks run both families by default; timing only the default choice
  // unless --sweep or --kernels says otherwise.
  const Families checkFamilies = familiesOpt.value_or(Families::All);
  const Families timeFamilies =
      familiesOpt.value_or(sweep ? Families::All : Families::Default);

  std::vector<Case> all = cases();
  std::vector<Case> selected;
  if (checks)
    for (const Case &c : all)
      if (filter.empty() || c.name.find(filter) != std::string::npos)
        selected.push_back(c);
  std::vector<AttentionVariant> variants;
  for (const Case &c : selected)
    for (const AttentionVariant &v : variantsFor(c, checkFamilies, wgmma))
      if (std::find(variants.begin(), variants.end(), v) == variants.end())
        variants.push_back(v);
  Case timedCase;
  timedCase.dtype = 2, timedCase.d = timedCase.dv = 128;
  const std::vector<AttentionVariant> timed = variantsFor(timedCase, timeFamilies, wgmma);
  if (timing)
    for (const AttentionVariant &v : timed)
      if (std::find(variants.begin(), variants.end(), v) == variants.end())
        variants.push_back(v);
  if (!variants.empty() && !loadKernels(variants))
    return 1;

  std::mt19937 rng(2026);
  int failures = 0, runs = 0;
  for (const Case &c : selected) {
    std::vector<AttentionVariant> vs = variantsFor(c, checkFamilies, wgmma);
    runs += int(vs.size());
    failures += runCheck(c, vs, rng);
  }
  if (checks)
    std::printf("%s: %d of %d cases failed\n", failures ? "FAIL" : "PASS", failures, runs);

  if (timing) {
    std::vector<AttentionVariant> sw;
    if (sweep) {
      // The defaults of the other dtypes, then tile variants per head dim
      // (bf16), then the wgmma variants of the other dims, timed on the
      // same problem.
      sw = {*chooseMmaAttentionVariant(2, 64, 64), *chooseMmaAttentionVariant(2, 256, 256),
            *chooseMmaAttentionVariant(1, 128, 128), *chooseMmaAttentionVariant(0, 128, 128)};
      for (int d : {64, 128, 256})
        for (int bm : {64, 128})
          for (int bn : {32, 64, 128})
            for (int rowsPerWarp : {16, 32}) {
              AttentionVariant v{2, d, d, bm, bn, bm / rowsPerWarp * 32};
              if (v.isSupported() && std::find(sw.begin(), sw.end(), v) == sw.end())
                sw.push_back(v);
            }
      if (wgmma)
        for (int dtype : {1, 2})
          for (int d : {64, 128, 256})
            sw.push_back(*chooseWgmmaAttentionVariant(dtype, d, d));
      std::vector<AttentionVariant> rest;
      for (const AttentionVariant &v : sw)
        if (std::find(timed.begin(), timed.end(), v) == timed.end() &&
            std::find(rest.begin(), rest.end(), v) == rest.end())
          rest.push_back(v);
      sw = rest;
      if (!loadKernels(sw))
        sw.clear();
    }
    for (int64_t S : sizes) {
      bool dumped = false;
      for (const AttentionVariant &v : timed) {
        reportTiming(kernels.at(v.kernelName()), 32, S);
        // The first wgmma variant timed is h20's choice (chooseWgmmaAttentionVariant).
        if (!dumpDir.empty() && v.kind == 1 && !dumped) {
          dumped = true;
          if (!dumpTimingCase(v, 32, S))
            failures += 1;
        }
      }
      for (const AttentionVariant &v : sw)
        reportTiming(kernels.at(v.kernelName()), 32, S);
      releaseTimingInputs();
    }
    if (!jsonPath.empty() && !writeJson(jsonPath))
      failures += 1;
  }
  for (CUmodule m : modules)
    api->cuModuleUnload(m);
  api->cuDevicePrimaryCtxRelease(dev);
  return failures ? 1 : 0;
}
