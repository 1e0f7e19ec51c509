//===- npy-compare.cpp - compare float32 .npy outputs with a reference ---===//
//
// npy-compare OUT.npy REF.npy [--max-rel-l2 X] [--ref-last-row]
// Prints the relative L2 error ||out - ref|| / ||ref|| over the whole tensor
// and the argmax of the last row of both; exits 0 only if the error is at
// most X (default 1e-4) and the argmaxes agree. --ref-last-row compares OUT
// (one row) with the last row of REF (for --logits=last artifacts).
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace h20::runtime;

static bool load(const char *path, NpyArray &a) {
  std::string bytes, error;
  if (!readFile(path, bytes, error) || !parseNpy(bytes, a, error) || a.dtype != "f4") {
    std::fprintf(stderr, "npy-compare: %s: %s\n", path,
                 error.empty() ? "not float32" : error.c_str());
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: npy-compare OUT.npy REF.npy [--max-rel-l2 X] [--ref-last-row]\n");
    return 2;
  }
  double maxRel = 1e-4;
  bool refLastRow = false;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-rel-l2") && i + 1 < argc)
      maxRel = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--ref-last-row"))
      refLastRow = true;
  }
  NpyArray out, ref;
  if (!load(argv[1], out) || !load(argv[2], ref))
    return 2;
  size_t n = out.data.size() / 4, m = ref.data.size() / 4;
  if (out.shape.empty() || ref.shape.empty())
    return 2;
  size_t cols = static_cast<size_t>(ref.shape.back());
  const float *o = reinterpret_cast<const float *>(out.data.data());
  const float *r = reinterpret_cast<const float *>(ref.data.data());
  if (refLastRow) {
    r += m - cols;
    m = cols;
  }
  if (n != m || static_cast<size_t>(out.shape.back()) != cols) {
    std::fprintf(stderr, "npy-compare: shapes differ (%zu vs %zu elements)\n", n, m);
    return 1;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = double(o[i]) - double(r[i]);
    num += d * d;
    den += double(r[i]) * double(r[i]);
  }
  double rel = std::sqrt(num / den);
  auto argmax = [&](const float *row) {
    size_t best = 0;
    for (size_t v = 1; v < cols; ++v)
      if (row[v] > row[best])
        best = v;
    return best;
  };
  size_t ao = argmax(o + n - cols), ar = argmax(r + m - cols);
  bool ok = std::isfinite(rel) && rel <= maxRel && ao == ar;
  std::printf("rel_l2 %.3e (max %.1e), argmax %zu vs reference %zu: %s\n", rel, maxRel, ao, ar,
              ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
