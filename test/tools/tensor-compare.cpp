//===- tensor-compare.cpp - elementwise check of outputs vs references ---===//
//
// tensor-compare OUT REF [--atol A] [--rtol R]
// OUT and REF are .npy or TensorProto .pb files. Passes (exit 0) when the
// shapes match and every element satisfies |out - ref| <= A + R * |ref|
// (the ONNX backend-test rule; defaults 1e-3 / 1e-3, and 2e-3 / 2e-3 for
// float16). NaN matches NaN and equal infinities match.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/TensorIO.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace h20::runtime;

static double element(const HostTensor &t, size_t i) {
  const uint8_t *p = t.data.data();
  if (t.dtype == "float32") { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
  if (t.dtype == "float64") { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
  if (t.dtype == "int64") { int64_t v; std::memcpy(&v, p + 8 * i, 8); return double(v); }
  if (t.dtype == "int32") { int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
  if (t.dtype == "bool" || t.dtype == "int8") return double(int8_t(p[i]));
  if (t.dtype == "float16") { // IEEE half -> double
    uint16_t h; std::memcpy(&h, p + 2 * i, 2);
    int e = (h >> 10) & 31, m = h & 1023; double s = (h & 0x8000) ? -1 : 1;
    if (e == 31) return m ? NAN : s * INFINITY;
    return e ? s * std::ldexp(1024 + m, e - 25) : s * std::ldexp(m, -24);
  }
  if (t.dtype == "bfloat16") { uint16_t h; std::memcpy(&h, p + 2 * i, 2);
    uint32_t b = uint32_t(h) << 16; float f; std::memcpy(&f, &b, 4); return f; }
  return NAN;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tensor-compare OUT REF [--atol A] [--rtol R]\n");
    return 2;
  }
  HostTensor out, ref;
  std::string error;
  if (!readTensorFile(argv[1], out, error) || !readTensorFile(argv[2], ref, error)) {
    std::fprintf(stderr, "tensor-compare: %s\n", error.c_str());
    return 2;
  }
  double atol = ref.dtype == "float16" ? 2e-3 : 1e-3, rtol = atol;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--atol")) atol = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rtol")) rtol = std::atof(argv[i + 1]);
  }
  if (out.shape != ref.shape || out.dtype != ref.dtype) {
    std::printf("FAIL: %s %zu-d vs reference %s %zu-d\n", out.dtype.c_str(), out.shape.size(),
                ref.dtype.c_str(), ref.shape.size());
    return 1;
  }
  size_t n = 1;
  for (int64_t d : ref.shape)
    n *= size_t(d);
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    double o = element(out, i), r = element(ref, i);
    if ((std::isnan(o) && std::isnan(r)) || o == r)
      continue;
    double excess = std::fabs(o - r) - (atol + rtol * std::fabs(r));
    if (!(excess <= 0)) {
      ++bad;
      worst = std::max(worst, std::isnan(excess) ? INFINITY : excess);
    }
  }
  std::printf("%s: %zu of %zu elements outside %.0e + %.0e*|ref|\n", bad ? "FAIL" : "PASS", bad,
              n, atol, rtol);
  return bad ? 1 : 0;
}
