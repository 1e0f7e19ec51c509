//===- GpuExecutorTest.cpp - GpuExecutor on a real GPU --------------------===//
//
// Small hand-written programs run through GpuExecutor (and one through
// h20-run): GEMMs against CPU loops (float32 and bfloat16, row- and
// column-major, broadcast, beta), chunking with a state buffer, memset and
// copy, kernel launches from hand-written PTX (the memref parameter
// expansion and the H20AttnParams layout), CUDA graph replay of the chunk
// loop against plain launches, NCCL (a 1-rank communicator, through load()
// and h20-run). Without a GPU every test is skipped with the reason.
// Labelled `gpu` in ctest.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Cuda/GpuExecutor.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Parallel/NcclComm.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Format/WeightDerive.h"
#if H20_HAVE_CUDA_HEADERS
#include "h20/Runtime/Cuda/CudaDriver.h"

#include "ProgramFixtures.h"
#endif

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

using namespace h20::runtime;
using json = nlohmann::json;

#ifndef H20_RUN_PATH
#define H20_RUN_PATH "h20-run"
#endif

namespace {

/// A temporary directory, removed with its files.
struct TempDir {
  std::string path;
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/h20-gpu-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()))
      path = buf.data();
  }
  ~TempDir() {
    if (!path.empty())
      std::system(("rm -rf '" + path + "'").c_str());
  }
};

void writeBytes(const std::string &path, const void *data, size_t bytes) {
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, std::string(static_cast<const char *>(data), bytes), error))
      << error;
}

/// An artifact in memory: the manifest (with "gpu") and the payload blobs.
struct TestArtifact {
  json manifest;
  Artifact artifact;
  Manifest m;
  GpuProgram program;

  TestArtifact(const std::string &modelDir) {
    manifest = {{"format", "h20-artifact"}, {"target", "h200"}, {"model_dir", modelDir},
                {"inputs", json::array()}, {"outputs", json::array()},
                {"weights", json::array()}, {"blobs", json::array()}};
  }
  void addBlob(const std::string &name, const std::string &kind, const std::string &bytes) {
    uint64_t off = appendBlob(artifact.payload, bytes.data(), bytes.size());
    manifest["blobs"].push_back({{"name", name}, {"kind", kind}, {"offset", off}, {"size", bytes.size()}});
  }
  /// Parses manifest + program; fails the test on an error.
  void finish(const json &gpu) {
    manifest["gpu"] = gpu;
    artifact.manifest = manifest.dump();
    std::string error;
    ASSERT_TRUE(parseManifest(artifact.manifest, m, error)) << error;
    ASSERT_TRUE(parseGpuProgram(artifact.manifest, m, artifact.payload.size(), program, error))
        << error;
  }
};

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

HostTensor tensor(const std::string &dtype, std::vector<int64_t> shape, const void *data,
                  size_t bytes) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + bytes);
  return t;
}

std::vector<float> asFloats(const HostTensor &t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

double relL2(const std::vector<float> &got, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

json mat(int buffer, int64_t batchStride, int64_t rowStride, int64_t colStride) {
  return {{"buffer", buffer}, {"offset", 0}, {"batch_stride", batchStride},
          {"row_stride", rowStride}, {"col_stride", colStride}};
}

/// Hand-written PTX (sm_90): h20_test_axpy(memref x, memref y, f32 a) does
/// y[o + i*s] += a * x[o + i*s] for i < size; h20_test_attn_echo(H20AttnParams)
/// counts its blocks at o + 224 and block (0,0,0) copies the 224 parameter
/// bytes to o; h20_test_lm_last(memref ids, memref w, memref logits, i64 n,
/// i64 v) sets logits[j] = w[ids[n-1]*v + j]; h20_test_attn_ksum(H20AttnParams)
/// stores the sum of the float32 k[0 .. skv) (contiguous) at o.
std::string testPtx() {
  std::string echo;
  for (int o = 0; o < 224; o += 8)
    echo += "  ld.param.u64 %rd3, [p+" + std::to_string(o) + "];\n  st.global.u64 [%rd1+" +
            std::to_string(o) + "], %rd3;\n";
  return R"(.version 8.0
.target sm_90
.address_size 64

.visible .entry h20_test_axpy(
  .param .u64 xa, .param .u64 xp, .param .u64 xo, .param .u64 xs, .param .u64 xt,
  .param .u64 ya, .param .u64 yp, .param .u64 yo, .param .u64 ys, .param .u64 yt,
  .param .f32 a)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<16>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd1, [xp];
  ld.param.u64 %rd2, [xo];
  ld.param.u64 %rd3, [xs];
  ld.param.u64 %rd4, [xt];
  ld.param.u64 %rd5, [yp];
  ld.param.u64 %rd6, [yo];
  ld.param.u64 %rd7, [yt];
  ld.param.f32 %f1, [a];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mul.wide.u32 %rd8, %r1, %r2;
  cvt.u64.u32 %rd9, %r3;
  add.u64 %rd8, %rd8, %rd9;
  setp.ge.u64 %p1, %rd8, %rd3;
  @%p1 bra DONE;
  mad.lo.u64 %rd10, %rd8, %rd4, %rd2;
  shl.b64 %rd10, %rd10, 2;
  add.u64 %rd10, %rd10, %rd1;
  ld.global.f32 %f2, [%rd10];
  mad.lo.u64 %rd11, %rd8, %rd7, %rd6;
  shl.b64 %rd11, %rd11, 2;
  add.u64 %rd11, %rd11, %rd5;
  ld.global.f32 %f3, [%rd11];
  fma.rn.f32 %f3, %f1, %f2, %f3;
  st.global.f32 [%rd11], %f3;
DONE:
  ret;
}

.visible .entry h20_test_attn_echo(.param .align 8 .b8 p[224])
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  ld.param.u64 %rd1, [p+24];
  add.u64 %rd2, %rd1, 224;
  atom.global.add.u32 %r2, [%rd2], 1;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ctaid.y;
  mov.u32 %r5, %ctaid.z;
  or.b32 %r3, %r3, %r4;
  or.b32 %r3, %r3, %r5;
  setp.ne.u32 %p1, %r3, 0;
  @%p1 bra DONE;
)" + echo + R"(DONE:
  ret;
}

.visible .entry h20_test_attn_ksum(.param .align 8 .b8 p[224])
{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;
  .reg .f32 %f<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  or.b32 %r1, %r1, %r2;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra KDONE;
  ld.param.u64 %rd1, [p+8];
  ld.param.u64 %rd2, [p+24];
  ld.param.u64 %rd3, [p+192];
  mov.f32 %f1, 0f00000000;
  mov.u64 %rd4, 0;
KLOOP:
  setp.ge.s64 %p2, %rd4, %rd3;
  @%p2 bra KSTORE;
  shl.b64 %rd5, %rd4, 2;
  add.u64 %rd5, %rd5, %rd1;
  ld.global.f32 %f2, [%rd5];
  add.f32 %f1, %f1, %f2;
  add.u64 %rd4, %rd4, 1;
  bra KLOOP;
KSTORE:
  st.global.f32 [%rd2], %f1;
KDONE:
  ret;
}

.visible .entry h20_test_lm_last(
  .param .u64 ia, .param .u64 ip, .param .u64 io, .param .u64 is, .param .u64 it,
  .param .u64 wa, .param .u64 wp, .param .u64 wo, .param .u64 ws, .param .u64 wt,
  .param .u64 la, .param .u64 lp, .param .u64 lo, .param .u64 ls, .param .u64 lt,
  .param .u64 n, .param .u64 v)
{
  .reg .pred %p<2>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<16>;
  .reg .f32 %f<2>;
  mov.u32 %r1, %tid.x;
  cvt.u64.u32 %rd1, %r1;
  ld.param.u64 %rd2, [v];
  setp.ge.u64 %p1, %rd1, %rd2;
  @%p1 bra DONE;
  ld.param.u64 %rd3, [ip];
  ld.param.u64 %rd4, [io];
  ld.param.u64 %rd5, [n];
  add.u64 %rd6, %rd4, %rd5;
  sub.u64 %rd6, %rd6, 1;
  shl.b64 %rd6, %rd6, 3;
  add.u64 %rd6, %rd6, %rd3;
  ld.global.u64 %rd7, [%rd6];
  ld.param.u64 %rd8, [wp];
  ld.param.u64 %rd9, [wo];
  mad.lo.u64 %rd10, %rd7, %rd2, %rd9;
  add.u64 %rd10, %rd10, %rd1;
  shl.b64 %rd10, %rd10, 2;
  add.u64 %rd10, %rd10, %rd8;
  ld.global.f32 %f1, [%rd10];
  ld.param.u64 %rd11, [lp];
  ld.param.u64 %rd12, [lo];
  add.u64 %rd13, %rd12, %rd1;
  shl.b64 %rd13, %rd13, 2;
  add.u64 %rd13, %rd13, %rd11;
  st.global.f32 [%rd13], %f1;
DONE:
  ret;
}
)";
}

class GpuExecutorTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!GpuExecutor::available(reason))
      GTEST_SKIP() << "no GPU: " << reason;
    ASSERT_FALSE(dir.path.empty());
  }
  TempDir dir;
};

} // namespace

// C0 = A * B (row-major, B broadcast over the batch), C1 = A * W^T
// (nn.Linear weight, C1 column-major), C2 = C0 + 0.5 * A * B (beta 1).
TEST_F(GpuExecutorTest, GemmFloat32) {
  const int64_t T = 2, M = 37, N = 50, K = 64;
  std::vector<float> a = randomFloats(T * M * K, 1), b = randomFloats(K * N, 2),
                     w = randomFloats(N * K, 3);
  std::vector<float> weights = b;
  weights.insert(weights.end(), w.begin(), w.end());
  writeBytes(dir.path + "/w.bin", weights.data(), weights.size() * 4);
  TestArtifact t(dir.path);
  t.manifest["inputs"] = {{{"name", "a"}, {"dtype", "float32"}, {"shape", {T, M, K}}}};
  for (const char *name : {"c0", "c1", "c2"})
    t.manifest["outputs"].push_back({{"name", name}, {"dtype", "float32"}, {"shape", {T, M, N}}});
  t.manifest["weights"] = {
      {{"name", "b"}, {"file", "w.bin"}, {"dtype", "float32"}, {"shape", {K, N}}, {"offset", 0}},
      {{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"}, {"shape", {N, K}},
       {"offset", K * N * 4}}};
  int64_t cBytes = T * M * N * 4;
  json gemm = {{"op", "gemm"}, {"dtype_a", "float32"}, {"dtype_b", "float32"},
               {"dtype_c", "float32"}, {"batch", T}, {"m", M}, {"n", N}, {"k", K},
               {"alpha", 1.0}, {"beta", 0.0}};
  json g0 = gemm, g1 = gemm, g2 = gemm;
  g0["a"] = mat(0, M * K, K, 1);
  g0["b"] = mat(4, 0, N, 1);
  g0["c"] = mat(1, M * N, N, 1);
  g1["a"] = mat(0, M * K, K, 1);
  g1["b"] = mat(5, 0, 1, K); // B[k, j] = W[j, k]
  g1["c"] = mat(2, M * N, 1, M);
  g2["a"] = mat(0, M * K, K, 1);
  g2["b"] = mat(4, 0, N, 1);
  g2["c"] = mat(3, M * N, N, 1);
  g2["alpha"] = 0.5;
  g2["beta"] = 1.0;
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}}, {"chunking", nullptr},
      {"outputs", {{{"mode", "whole"}}, {{"mode", "whole"}}, {{"mode", "whole"}}}},
      {"modules", json::array()}, {"arena_bytes", 0},
      {"buffers",
       {{{"kind", "input"}, {"index", 0}, {"bytes", T * M * K * 4}},
        {{"kind", "output"}, {"index", 0}, {"bytes", cBytes}},
        {{"kind", "output"}, {"index", 1}, {"bytes", cBytes}},
        {{"kind", "output"}, {"index", 2}, {"bytes", cBytes}},
        {{"kind", "weight"}, {"index", 0}, {"bytes", K * N * 4}, {"dtype", "float32"}},
        {{"kind", "weight"}, {"index", 1}, {"bytes", N * K * 4}, {"dtype", "float32"}}}},
      {"steps",
       {g0, g1,
        {{"op", "copy"}, {"src", 1}, {"src_offset_bytes", 0}, {"dst", 3},
         {"dst_offset_bytes", 0}, {"bytes", cBytes}},
        g2}}};
  t.finish(gpu);
  GpuExecutor ex;
  std::string error;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  EXPECT_EQ(ex.loadStats().code, "none");
  EXPECT_EQ(ex.loadStats().weightBytes, uint64_t(2 * K * N * 4));
  std::vector<HostTensor> outs;
  GpuRunStats stats;
  ASSERT_EQ(ex.run({tensor("float32", {T, M, K}, a.data(), a.size() * 4)}, GpuRunOptions(), outs,
                   stats, error),
            GpuStatus::Ok)
      << error;
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].shape, (std::vector<int64_t>{T, M, N}));
  std::vector<double> r0(T * M * N), r1(T * M * N), r2(T * M * N);
  for (int64_t s = 0; s < T; ++s)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double ab = 0, aw = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = a[(s * M + i) * K + k];
          ab += x * b[k * N + j];
          aw += x * w[j * K + k];
        }
        r0[(s * M + i) * N + j] = ab;
        r1[s * M * N + i + j * M] = aw; // column-major
        r2[(s * M + i) * N + j] = 1.5 * ab;
      }
  EXPECT_LT(relL2(asFloats(outs[0]), r0), 1e-5);
  EXPECT_LT(relL2(asFloats(outs[1]), r1), 1e-5);
  EXPECT_LT(relL2(asFloats(outs[2]), r2), 1e-5);
  EXPECT_EQ(stats.chunks, 1);
  EXPECT_GT(stats.peakGpuMemoryBytes, 0u);
  // A second run on the same executor gives the same result.
  std::vector<HostTensor> again;
  ASSERT_EQ(ex.run({tensor("float32", {T, M, K}, a.data(), a.size() * 4)}, GpuRunOptions(), again,
                   stats, error),
            GpuStatus::Ok)
      << error;
  EXPECT_EQ(again[0].data, outs[0].data);
}

// Weights derived when loaded (h20-quantize-linears): a float32 W [K, N]
// in the file becomes W^T in e4m3 and its 128 x 128 block scales on the
// GPU, byte-equal to deriveWeight on the host (copied to two outputs).
TEST_F(GpuExecutorTest, DerivedWeightsAreUploaded) {
  const int64_t K = 200, N = 144, nb = 2, kb = 2;
  std::vector<float> w = randomFloats(K * N, 9);
  writeBytes(dir.path + "/w.bin", w.data(), w.size() * 4);
  TestArtifact t(dir.path);
  t.manifest["outputs"] = {{{"name", "q"}, {"dtype", "int8"}, {"shape", {N, K}}},
                           {{"name", "s"}, {"dtype", "float32"}, {"shape", {nb, kb}}}};
  t.manifest["weights"] = {
      {{"name", "w.fp8"}, {"file", "w.bin"}, {"dtype", "float32"}, {"shape", {N, K}},
       {"offset", 0}, {"length", K * N * 4}, {"derive", "fp8_block128"}, {"source_shape", {K, N}}},
      {{"name", "w.fp8.scale"}, {"file", "w.bin"}, {"dtype", "float32"}, {"shape", {nb, kb}},
       {"offset", 0}, {"length", K * N * 4}, {"derive", "fp8_block128_scale"},
       {"source_shape", {K, N}}}};
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}}, {"chunking", nullptr},
      {"outputs", {{{"mode", "whole"}}, {{"mode", "whole"}}}},
      {"modules", json::array()}, {"arena_bytes", 0},
      {"buffers",
       {{{"kind", "output"}, {"index", 0}, {"bytes", N * K}},
        {{"kind", "output"}, {"index", 1}, {"bytes", nb * kb * 4}},
        {{"kind", "weight"}, {"index", 0}, {"bytes", N * K}, {"dtype", "float8_e4m3fn"}},
        {{"kind", "weight"}, {"index", 1}, {"bytes", nb * kb * 4}, {"dtype", "float32"}}}},
      {"steps",
       {{{"op", "copy"}, {"src", 2}, {"src_offset_bytes", 0}, {"dst", 0},
         {"dst_offset_bytes", 0}, {"bytes", N * K}},
        {{"op", "copy"}, {"src", 3}, {"src_offset_bytes", 0}, {"dst", 1},
         {"dst_offset_bytes", 0}, {"bytes", nb * kb * 4}}}}};
  t.finish(gpu);
  GpuExecutor ex;
  std::string error;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  std::vector<HostTensor> outs;
  GpuRunStats stats;
  ASSERT_EQ(ex.run({}, GpuRunOptions(), outs, stats, error), GpuStatus::Ok) << error;
  ASSERT_EQ(outs.size(), 2u);
  std::vector<uint8_t> q(static_cast<size_t>(N * K));
  std::vector<float> s(static_cast<size_t>(nb * kb));
  deriveWeight(t.m.weights[0], w.data(), q.data());
  deriveWeight(t.m.weights[1], w.data(), s.data());
  EXPECT_EQ(outs[0].data, q);
  EXPECT_EQ(asFloats(outs[1]), s);
}

// A grouped GEMM (a mixture-of-experts layer's experts): rows [off[g],
// off[g+1]) of A times B[g], the offsets an int32 device buffer; an empty
// group, and offsets that fall make the run fail with the step named.
TEST_F(GpuExecutorTest, GemmGrouped) {
  const int64_t G = 4, M = 32, N = 24, K = 40;
  std::vector<float> a = randomFloats(M * K, 11), b = randomFloats(G * K * N, 12);
  writeBytes(dir.path + "/w.bin", b.data(), b.size() * 4);
  TestArtifact t(dir.path);
  t.manifest["inputs"] = {{{"name", "a"}, {"dtype", "float32"}, {"shape", {M, K}}},
                          {{"name", "off"}, {"dtype", "int32"}, {"shape", {G + 1}}}};
  t.manifest["outputs"] = {{{"name", "c"}, {"dtype", "float32"}, {"shape", {M, N}}}};
  t.manifest["weights"] = {{{"name", "b"}, {"file", "w.bin"}, {"dtype", "float32"},
                            {"shape", {G, K, N}}, {"offset", 0}}};
  json gemm = {{"op", "gemm"}, {"dtype_a", "float32"}, {"dtype_b", "float32"},
               {"dtype_c", "float32"}, {"batch", 1}, {"m", M}, {"n", N}, {"k", K},
               {"alpha", 1.0}, {"beta", 0.0}, {"a", mat(0, 0, K, 1)},
               {"b", mat(3, K * N, N, 1)}, {"c", mat(2, 0, N, 1)},
               {"groups", {{"count", G}, {"offsets", {{"buffer", 1}, {"offset", 0}}}}}};
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}}, {"chunking", nullptr},
      {"outputs", {{{"mode", "whole"}}}}, {"modules", json::array()}, {"arena_bytes", 0},
      {"buffers",
       {{{"kind", "input"}, {"index", 0}, {"bytes", M * K * 4}},
        {{"kind", "input"}, {"index", 1}, {"bytes", (G + 1) * 4}, {"dtype", "int32"}},
        {{"kind", "output"}, {"index", 0}, {"bytes", M * N * 4}},
        {{"kind", "weight"}, {"index", 0}, {"bytes", G * K * N * 4}, {"dtype", "float32"}}}},
      {"steps", {gemm}}};
  t.finish(gpu);
  GpuExecutor ex;
  std::string error;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  const std::vector<int32_t> off = {0, 5, 5, 17, 30}; // group 1 empty, rows 30.. unused
  std::vector<HostTensor> outs;
  GpuRunStats stats;
  ASSERT_EQ(ex.run({tensor("float32", {M, K}, a.data(), a.size() * 4),
                    tensor("int32", {G + 1}, off.data(), off.size() * 4)},
                   GpuRunOptions(), outs, stats, error),
            GpuStatus::Ok)
      << error;
  std::vector<float> got = asFloats(outs[0]);
  std::vector<double> want, have;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = off[g]; i < off[g + 1]; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += double(a[i * K + k]) * b[(g * K + k) * N + j];
        want.push_back(acc);
        have.push_back(got[i * N + j]);
      }
  std::vector<float> haveF(have.begin(), have.end());
  EXPECT_LT(relL2(haveF, want), 1e-5);
  const std::vector<int32_t> bad = {0, 9, 4, 17, 30};
  EXPECT_NE(ex.run({tensor("float32", {M, K}, a.data(), a.size() * 4),
                    tensor("int32", {G + 1}, bad.data(), bad.size() * 4)},
                   GpuRunOptions(), outs, stats, error),
            GpuStatus::Ok);
  EXPECT_NE(error.find("group offset 2 is 4"), std::string::npos) << error;
}

// bfloat16 inputs (the weight converted from float32 on upload), float32 and
// bfloat16 results.
TEST_F(GpuExecutorTest, GemmBfloat16) {
  const int64_t M = 70, N = 96, K = 128;
  std::vector<float> a = randomFloats(M * K, 4), w = randomFloats(K * N, 5);
  writeBytes(dir.path + "/w.bin", w.data(), w.size() * 4);
  std::vector<uint16_t> abf(a.size());
  convertElements("float32", a.data(), "bfloat16", abf.data(), a.size());
  TestArtifact t(dir.path);
  t.manifest["inputs"] = {{{"name", "a"}, {"dtype", "bfloat16"}, {"shape", {M, K}}}};
  t.manifest["outputs"] = {{{"name", "c32"}, {"dtype", "float32"}, {"shape", {M, N}}},
                           {{"name", "c16"}, {"dtype", "bfloat16"}, {"shape", {M, N}}}};
  t.manifest["weights"] = {{{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"},
                            {"shape", {K, N}}, {"offset", 0}, {"length", K * N * 4}}};
  json gemm = {{"op", "gemm"}, {"dtype_a", "bfloat16"}, {"dtype_b", "bfloat16"},
               {"batch", 1}, {"m", M}, {"n", N}, {"k", K}};
  json g0 = gemm, g1 = gemm;
  g0["dtype_c"] = "float32";
  g0["a"] = mat(0, 0, K, 1);
  g0["b"] = mat(3, 0, N, 1);
  g0["c"] = mat(1, 0, N, 1);
  g1["dtype_c"] = "bfloat16";
  g1["a"] = mat(0, 0, K, 1);
  g1["b"] = mat(3, 0, N, 1);
  g1["c"] = mat(2, 0, N, 1);
  json gpu = {{"arch", "sm_90"}, {"outputs", {{{"mode", "whole"}}, {{"mode", "whole"}}}},
              {"modules", json::array()},
              {"buffers",
               {{{"kind", "input"}, {"index", 0}, {"bytes", M * K * 2}},
                {{"kind", "output"}, {"index", 0}, {"bytes", M * N * 4}},
                {{"kind", "output"}, {"index", 1}, {"bytes", M * N * 2}},
                {{"kind", "weight"}, {"index", 0}, {"bytes", K * N * 2}, {"dtype", "bfloat16"}}}},
              {"steps", {g0, g1}}};
  t.finish(gpu);
  GpuExecutor ex;
  std::string error;
  GpuLoadOptions lo;
  lo.stagingBytes = 4096; // several pieces per weight, both staging buffers used
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, lo, error), GpuStatus::Ok) << error;
  std::vector<HostTensor> outs;
  GpuRunStats stats;
  ASSERT_EQ(ex.run({tensor("bfloat16", {M, K}, abf.data(), abf.size() * 2)}, GpuRunOptions(),
                   outs, stats, error),
            GpuStatus::Ok)
      << error;
  std::vector<double> ref(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(bfloat16ToFloat(abf[i * K + k])) *
               bfloat16ToFloat(floatToBfloat16(w[k * N + j]));
      ref[i * N + j] = acc;
    }
  EXPECT_LT(relL2(asFloats(outs[0]), ref), 1e-4);
  std::vector<float> c16(M * N);
  convertElements("bfloat16", outs[1].data.data(), "float32", c16.data(), c16.size());
  EXPECT_LT(relL2(c16, ref), 1e-2);
}

// Chunks of 4 over 10 ids: rows output, state kept across chunks (zeroed per
// run), pad value in the last chunk, memset, "last" outputs.
TEST_F(GpuExecutorTest, ChunkingStateMemsetCopy) {
  TestArtifact t(dir.path);
  t.manifest["inputs"] = {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}};
  t.manifest["outputs"] = {
      {{"name", "echo"}, {"dtype", "int64"}, {"shape", {1, -1}},
       {"dims_from", {nullptr, {{"input", 0}, {"dim", 1}}}}},
      {{"name", "state"}, {"dtype", "int64"}, {"shape", {1, 16}}},
      {{"name", "lastchunk"}, {"dtype", "int64"}, {"shape", {1, 4}}}};
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}},
      {"chunking", {{"chunk", 4}, {"input", 0}, {"dim", 1}, {"pad_value", 7}}},
      {"outputs", {{{"mode", "rows"}, {"dim", 1}}, {{"mode", "last"}}, {{"mode", "last"}}}},
      {"modules", json::array()}, {"arena_bytes", 512},
      {"buffers",
       {{{"kind", "input"}, {"index", 0}, {"bytes", 32}},
        {{"kind", "output"}, {"index", 0}, {"bytes", 32}},
        {{"kind", "output"}, {"index", 1}, {"bytes", 128}},
        {{"kind", "output"}, {"index", 2}, {"bytes", 32}},
        {{"kind", "state"}, {"bytes", 128}},
        {{"kind", "temp"}, {"bytes", 256}, {"offset", 256}}}},
      {"steps",
       {{{"op", "copy"}, {"src", 0}, {"src_offset_bytes", 0}, {"dst", 5},
         {"dst_offset_bytes", 0}, {"bytes", 32}},
        {{"op", "copy"}, {"src", 5}, {"src_offset_bytes", 0}, {"dst", 1},
         {"dst_offset_bytes", 0}, {"bytes", 32}},
        {{"op", "copy"}, {"src", 0}, {"src_offset_bytes", 0}, {"dst", 4},
         {"dst_offset_bytes", {{"p0", 8}}}, {"bytes", {{"n", 8}}}},
        {{"op", "memset"}, {"buffer", 4}, {"offset_bytes", 120}, {"bytes", 8}, {"value", 171}},
        {{"op", "copy"}, {"src", 4}, {"src_offset_bytes", 0}, {"dst", 2},
         {"dst_offset_bytes", 0}, {"bytes", 128}},
        {{"op", "copy"}, {"src", 0}, {"src_offset_bytes", 0}, {"dst", 3},
         {"dst_offset_bytes", 0}, {"bytes", 32}}}}};
  t.finish(gpu);
  GpuExecutor ex;
  std::string error;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  for (int64_t S : {10, 6}) {
    std::vector<int64_t> ids(S);
    for (int64_t i = 0; i < S; ++i)
      ids[i] = 100 + i + S;
    std::vector<int64_t> progress;
    GpuRunOptions ro;
    ro.progress = [&](int64_t chunk, int64_t chunks, int64_t done, int64_t tokens, double ms) {
      progress.push_back(chunk);
      EXPECT_EQ(chunks, (S + 3) / 4);
      EXPECT_EQ(tokens, S);
      EXPECT_EQ(done, std::min<int64_t>(S, 4 * (chunk + 1)));
      EXPECT_GE(ms, 0.0);
    };
    std::vector<HostTensor> outs;
    GpuRunStats stats;
    ASSERT_EQ(ex.run({tensor("int64", {1, S}, ids.data(), ids.size() * 8)}, ro, outs, stats,
                     error),
              GpuStatus::Ok)
        << error;
    int64_t chunks = (S + 3) / 4;
    EXPECT_EQ(stats.chunks, chunks);
    EXPECT_EQ(stats.tokens, S);
    EXPECT_EQ(stats.chunkMs.size(), size_t(chunks));
    ASSERT_EQ(progress.size(), size_t(chunks));
    ASSERT_EQ(outs[0].shape, (std::vector<int64_t>{1, S}));
    std::vector<int64_t> echo(S), state(16), last(4);
    std::memcpy(echo.data(), outs[0].data.data(), S * 8);
    std::memcpy(state.data(), outs[1].data.data(), 128);
    std::memcpy(last.data(), outs[2].data.data(), 32);
    EXPECT_EQ(echo, ids);
    for (int64_t i = 0; i < 15; ++i)
      EXPECT_EQ(state[i], i < S ? ids[i] : 0) << "state row " << i << " (S = " << S << ")";
    EXPECT_EQ(static_cast<uint64_t>(state[15]), 0xABABABABABABABABull);
    int64_t p0 = (chunks - 1) * 4;
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(last[i], p0 + i < S ? ids[p0 + i] : 7) << "last chunk position " << i;
  }
}

// Kernel launches: memref parameters (allocated, aligned, offset, sizes,
// strides) and the attention step's H20AttnParams, checked field by field.
TEST_F(GpuExecutorTest, LaunchesPtxKernels) {
  const int64_t L = 100;
  TestArtifact t(dir.path);
  t.addBlob("k.ptx", "ptx", testPtx());
  t.manifest["inputs"] = {{{"name", "x"}, {"dtype", "float32"}, {"shape", {L}}}};
  t.manifest["outputs"] = {{{"name", "y"}, {"dtype", "float32"}, {"shape", {L}}},
                           {{"name", "echo"}, {"dtype", "float32"}, {"shape", {640}}}};
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}},
      {"outputs", {{{"mode", "whole"}}, {{"mode", "whole"}}}},
      {"modules", {{{"name", "test"}, {"ptx_blob", "k.ptx"}}}}, {"arena_bytes", 8192},
      {"buffers",
       {{{"kind", "input"}, {"index", 0}, {"bytes", L * 4}},
        {{"kind", "output"}, {"index", 0}, {"bytes", L * 4}},
        {{"kind", "output"}, {"index", 1}, {"bytes", 640 * 4}},
        {{"kind", "temp"}, {"bytes", 4096}, {"offset", 0}, {"dtype", "float32"}},
        {{"kind", "state"}, {"bytes", 4096}, {"dtype", "float32"}}}},
      {"steps",
       {{{"op", "copy"}, {"src", 0}, {"src_offset_bytes", 0}, {"dst", 1},
         {"dst_offset_bytes", 0}, {"bytes", L * 4}},
        // Even elements: y += 2 x (size n/2, stride 2).
        {{"op", "launch"}, {"module", 0}, {"kernel", "h20_test_axpy"},
         {"grid", {2, 1, 1}}, {"block", {64, 1, 1}}, {"smem", 0},
         {"args",
          {{{"memref", {{"buffer", 0}, {"offset", 0}, {"sizes", {L / 2}}, {"strides", {2}}}}},
           {{"memref", {{"buffer", 1}, {"offset", 0}, {"sizes", {L / 2}}, {"strides", {2}}}}},
           {{"f32", 2.0}}}}},
        // Elements 1, 3, 5 (offset 1, three of them): y += -1 x, with 64 KiB
        // of dynamic shared memory (over the 48 KiB default).
        {{"op", "launch"}, {"module", 0}, {"kernel", "h20_test_axpy"},
         {"grid", {1, 1, 1}}, {"block", {32, 1, 1}}, {"smem", 65536},
         {"args",
          {{{"memref", {{"buffer", 0}, {"offset", 1}, {"sizes", {3}}, {"strides", {2}}}}},
           {{"memref", {{"buffer", 1}, {"offset", 1}, {"sizes", {3}}, {"strides", {2}}}}},
           {{"f32", -1.0}}}}},
        {{"op", "memset"}, {"buffer", 2}, {"offset_bytes", 0}, {"bytes", 640 * 4}, {"value", 0}},
        [] {
          h20::test::AttentionSpec a;
          a.kernel = "h20_test_attn_echo";
          a.dtype = "float32";
          a.blockM = 4;
          a.threads = 32;
          a.batch = 2;
          a.heads = 4;
          a.kvHeads = 2;
          a.sq = {{"n", 1}};
          a.skv = {{"n", 1}, {"c", 5}};
          a.dim = 8;
          a.scale = 0.125;
          a.causal = true;
          a.windowLeft = 3;
          a.softcap = 30.0;
          a.q = {{"buffer", 3}, {"offset", 8}, {"strides", {320, 80, 8, 1}}};
          a.k = {{"buffer", 4}, {"offset", 16}, {"strides", {240, 120, 8, 1}}};
          a.v = {{"buffer", 4}, {"offset", {{"c", 8}, {"n", 1}}}, {"strides", {240, 120, 8, 1}}};
          a.o = {{"buffer", 2}, {"offset", 0}, {"strides", {320, 80, 8, 1}}};
          return h20::test::attentionLaunch(a);
        }()}}};
  t.finish(gpu);
  GpuExecutor ex;
  std::string error;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  EXPECT_TRUE(ex.loadStats().code == "ptx") << ex.loadStats().code;
  std::vector<float> x = randomFloats(L, 9);
  std::vector<HostTensor> outs;
  GpuRunStats stats;
  GpuRunOptions ro;
  ro.n = 10;
  ASSERT_EQ(ex.run({tensor("float32", {L}, x.data(), x.size() * 4)}, ro, outs, stats, error),
            GpuStatus::Ok)
      << error;
  std::vector<float> y = asFloats(outs[0]);
  for (int64_t i = 0; i < L; ++i) {
    float expect = i % 2 == 0 ? 3 * x[i] : (i < 6 ? 0.0f : x[i]);
    EXPECT_FLOAT_EQ(y[i], expect) << "y[" << i << "]";
  }
  // The echoed parameters: pointers relative to the planned buffers.
  BufferPlan plan;
  ASSERT_TRUE(planBuffers(t.program, plan, error)) << error;
  const uint8_t *e = outs[1].data.data();
  auto u64 = [&](int off) {
    uint64_t v;
    std::memcpy(&v, e + off, 8);
    return v;
  };
  auto i64 = [&](int off) { return static_cast<int64_t>(u64(off)); };
  uint64_t base = u64(24) - plan.offsets[2]; // o = base + offsets[o buffer] + 0
  EXPECT_EQ(u64(0), base + plan.offsets[3] + 8 * 4);
  EXPECT_EQ(u64(8), base + plan.offsets[4] + 16 * 4);
  EXPECT_EQ(u64(16), base + plan.offsets[4] + 18 * 4);
  EXPECT_EQ(i64(32), 320); // q_stride
  EXPECT_EQ(i64(56), 1);
  EXPECT_EQ(i64(64), 240); // k_stride
  EXPECT_EQ(i64(72), 120);
  EXPECT_EQ(i64(96), 240); // v_stride
  EXPECT_EQ(i64(128), 320); // o_stride
  EXPECT_EQ(i64(160), 2);  // batch
  EXPECT_EQ(i64(168), 4);  // heads
  EXPECT_EQ(i64(176), 2);  // kv_heads
  EXPECT_EQ(i64(184), 10); // sq
  EXPECT_EQ(i64(192), 15); // skv
  EXPECT_EQ(i64(200), 3);  // window_left
  float scale, softcap;
  std::memcpy(&scale, e + 208, 4);
  std::memcpy(&softcap, e + 212, 4);
  EXPECT_FLOAT_EQ(scale, 0.125f);
  EXPECT_FLOAT_EQ(softcap, 30.0f);
  int32_t causal, blocks;
  std::memcpy(&causal, e + 216, 4);
  std::memcpy(&blocks, e + 224, 4);
  EXPECT_EQ(causal, 1);
  EXPECT_EQ(blocks, 3 * 4 * 2); // grid (ceil(10 / 4), heads, batch)
}

// Errors: a kernel missing from the module is a bad artifact; a step whose
// access leaves its buffer for this run's length is refused before running.
TEST_F(GpuExecutorTest, RefusesBadPrograms) {
  TestArtifact t(dir.path);
  t.addBlob("k.ptx", "ptx", testPtx());
  t.manifest["inputs"] = {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}};
  t.manifest["outputs"] = {{{"name", "y"}, {"dtype", "float32"}, {"shape", {1, 1, 4}}}};
  json gpu = {{"arch", "sm_90"}, {"symbols", {"p0", "n"}},
              {"chunking", {{"chunk", 4}, {"input", 0}, {"dim", 1}}},
              {"outputs", {{{"mode", "last"}}}},
              {"modules", {{{"ptx_blob", "k.ptx"}}}},
              {"buffers",
               {{{"kind", "input"}, {"index", 0}, {"bytes", 32}},
                {{"kind", "output"}, {"index", 0}, {"bytes", 16}},
                {{"kind", "state"}, {"bytes", 64}}}},
              {"steps",
               {{{"op", "memset"}, {"buffer", 2}, {"offset_bytes", {{"p0", 8}}},
                 {"bytes", {{"n", 8}}}}}}};
  t.finish(gpu);
  {
    GpuExecutor ex;
    std::string error;
    ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
    std::vector<int64_t> ids(9, 1);
    std::vector<HostTensor> outs;
    GpuRunStats stats;
    EXPECT_EQ(ex.run({tensor("int64", {1, 9}, ids.data(), 72)}, GpuRunOptions(), outs, stats,
                     error),
              GpuStatus::BadInput);
    EXPECT_NE(error.find("for a prompt of 9 tokens, chunk 2: step 0 (memset)"), std::string::npos)
        << error;
    ids.resize(8);
    EXPECT_EQ(ex.run({tensor("int64", {1, 8}, ids.data(), 64)}, GpuRunOptions(), outs, stats,
                     error),
              GpuStatus::Ok)
        << error;
  }
  json bad = gpu;
  bad["steps"].push_back({{"op", "launch"}, {"module", 0}, {"kernel", "no_such_kernel"},
                          {"grid", {1, 1, 1}}, {"block", {1, 1, 1}}, {"args", json::array()}});
  TestArtifact t2(dir.path);
  t2.addBlob("k.ptx", "ptx", testPtx());
  t2.manifest["inputs"] = t.manifest["inputs"];
  t2.manifest["outputs"] = t.manifest["outputs"];
  t2.finish(bad);
  GpuExecutor ex;
  std::string error;
  EXPECT_EQ(ex.load(t2.artifact, t2.m, t2.program, GpuLoadOptions(), error), GpuStatus::BadInput);
  EXPECT_NE(error.find("step 1 (launch): module 0 has no kernel 'no_such_kernel'"),
            std::string::npos)
      << error;
}

namespace {
/// Runs `cmd` through the shell; its exit status (-1 if it did not exit).
int runCommand(const std::string &cmd) {
  int s = std::system(cmd.c_str());
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}
} // namespace

namespace {
/// A GPU artifact in `dir` (written to `art`) whose "model" predicts token
/// (mul * last + add) mod V: ids in chunks of 4, one V x V weight from
/// lm.bin, last-position logits through h20_test_lm_last.
void writeLmLastArtifact(const std::string &dir, int64_t mul, int64_t add, std::string &art) {
  const int64_t V = 16;
  std::vector<float> w(V * V, 0.0f);
  for (int64_t i = 0; i < V; ++i)
    w[i * V + (i * mul + add) % V] = 1.0f; // next token after i is (mul i + add) mod V
  writeBytes(dir + "/lm.bin", w.data(), w.size() * 4);
  TestArtifact t(dir);
  t.addBlob("k.ptx", "ptx", testPtx());
  t.manifest["vocab_size"] = V;
  t.manifest["max_positions"] = 64;
  t.manifest["logits"] = "last";
  t.manifest["inputs"] = {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}};
  t.manifest["outputs"] = {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {1, 1, V}}}};
  t.manifest["weights"] = {{{"name", "w"}, {"file", "lm.bin"}, {"dtype", "float32"},
                            {"shape", {V, V}}, {"offset", 0}, {"length", V * V * 4},
                            {"file_size", V * V * 4}}};
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}},
      {"chunking", {{"chunk", 4}, {"input", 0}, {"dim", 1}, {"pad_value", 0}}},
      {"outputs", {{{"mode", "last"}}}},
      {"modules", {{{"name", "k"}, {"ptx_blob", "k.ptx"}}}},
      {"buffers",
       {{{"kind", "input"}, {"index", 0}, {"bytes", 32}},
        {{"kind", "output"}, {"index", 0}, {"bytes", V * 4}},
        {{"kind", "weight"}, {"index", 0}, {"bytes", V * V * 4}, {"dtype", "float32"}}}},
      {"steps",
       {{{"op", "launch"}, {"module", 0}, {"kernel", "h20_test_lm_last"},
         {"grid", {1, 1, 1}}, {"block", {32, 1, 1}},
         {"args",
          {{{"memref", {{"buffer", 0}, {"offset", 0}, {"sizes", {{{"n", 1}}}}, {"strides", {1}}}}},
           {{"memref", {{"buffer", 2}, {"offset", 0}, {"sizes", {V * V}}, {"strides", {1}}}}},
           {{"memref", {{"buffer", 1}, {"offset", 0}, {"sizes", {V}}, {"strides", {1}}}}},
           {{"i64", {{"n", 1}}}},
           {{"i64", V}}}}}}}};
  t.finish(gpu);
  std::string error;
  art = dir + "/lm.h20";
  ASSERT_TRUE(writeArtifact(art, t.artifact, error)) << error;
}

} // namespace

// End to end through h20-run: token ids in chunks of 4, a weight from a
// file, the last token's logits, the report.
TEST_F(GpuExecutorTest, H20RunEndToEnd) {
  const char *env = std::getenv("H20_RUN");
  std::string h20run = env && *env ? env : H20_RUN_PATH;
  if (access(h20run.c_str(), X_OK) != 0)
    GTEST_SKIP() << "h20-run not found at '" << h20run << "' (set H20_RUN)";
  const int64_t V = 16;
  std::string art, error;
  ASSERT_NO_FATAL_FAILURE(writeLmLastArtifact(dir.path, 3, 1, art));
  std::vector<int64_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 7}; // next: 3*7+1 mod 16 = 6
  std::string npy = encodeNpy("i8", {1, int64_t(ids.size())}, ids.data(), ids.size() * 8);
  ASSERT_NO_FATAL_FAILURE(writeBytes(dir.path + "/ids.npy", npy.data(), npy.size()));
  std::string cmd = "'" + h20run + "' '" + art + "' --ids '" + dir.path + "/ids.npy' --report '" +
                    dir.path + "/r.json' --dump-logits '" + dir.path + "/l.npy' > '" + dir.path +
                    "/out.txt' 2>&1";
  int rc = runCommand(cmd);
  std::string out;
  readFile(dir.path + "/out.txt", out, error);
  ASSERT_EQ(rc, 0) << out;
  std::string reportText;
  ASSERT_TRUE(readFile(dir.path + "/r.json", reportText, error)) << error;
  json r = json::parse(reportText);
  EXPECT_EQ(r["device"], "gpu");
  EXPECT_EQ(r["tokens"], int64_t(ids.size()));
  EXPECT_EQ(r["next_token_id"], (ids.back() * 3 + 1) % V);
  EXPECT_EQ(r["chunks"], 3);
  EXPECT_EQ(r["chunk_ms"].size(), 3u);
  EXPECT_EQ(r["compute_capability"].get<std::string>().substr(0, 1), "9");
  EXPECT_EQ(r["weight_bytes"], V * V * 4);
  EXPECT_EQ(r["warmup_runs"], 1);
  EXPECT_EQ(r["warmup_ttft_ms"].size(), 1u);
  for (const char *k : {"load_weights", "upload_ids", "prefill", "download", "total"})
    EXPECT_TRUE(r["stages_ms"].contains(k)) << k;
  EXPECT_NE(out.find("next token id: " + std::to_string((ids.back() * 3 + 1) % V)),
            std::string::npos)
      << out;
  // A missing weight file is bad input (exit 2), naming the file.
  std::remove((dir.path + "/lm.bin").c_str());
  rc = runCommand("'" + h20run + "' '" + art + "' --ids '" + dir.path + "/ids.npy' > '" +
                  dir.path + "/out.txt' 2>&1");
  readFile(dir.path + "/out.txt", out, error);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("lm.bin' is missing"), std::string::npos) << out;
}

// Throughput of the gemm step (cuBLASLt through GpuExecutor) at LLM-prefill
// sizes, bfloat16 in, float32 accumulate, for a [K, N] weight and for an
// nn.Linear [N, K] one. Opt-in (H20_GPU_BENCH=1): it moves ~1 GB.
TEST_F(GpuExecutorTest, GemmThroughput) {
  const char *bench = std::getenv("H20_GPU_BENCH");
  if (!bench || std::string(bench) != "1")
    GTEST_SKIP() << "set H20_GPU_BENCH=1 to measure GEMM throughput";
  const int64_t M = 4096, N = 8192, K = 8192, reps = 10;
  {
    std::vector<float> w = randomFloats(K * N, 11);
    writeBytes(dir.path + "/w.bin", w.data(), w.size() * 4);
  }
  std::vector<uint16_t> a(M * K);
  {
    std::vector<float> af = randomFloats(M * K, 12);
    convertElements("float32", af.data(), "bfloat16", a.data(), a.size());
  }
  for (bool linear : {false, true}) {
    TestArtifact t(dir.path);
    t.manifest["inputs"] = {{{"name", "a"}, {"dtype", "bfloat16"}, {"shape", {M, K}}}};
    t.manifest["outputs"] = {{{"name", "c"}, {"dtype", "bfloat16"}, {"shape", {M, N}}}};
    t.manifest["weights"] = {{{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"},
                              {"shape", linear ? json{N, K} : json{K, N}}, {"offset", 0}}};
    json g = {{"op", "gemm"}, {"dtype_a", "bfloat16"}, {"dtype_b", "bfloat16"},
              {"dtype_c", "bfloat16"}, {"batch", 1}, {"m", M}, {"n", N}, {"k", K},
              {"a", mat(0, 0, K, 1)}, {"b", linear ? mat(2, 0, 1, K) : mat(2, 0, N, 1)},
              {"c", mat(1, 0, N, 1)}};
    json gpu = {{"arch", "sm_90"}, {"outputs", {{{"mode", "whole"}}}}, {"modules", json::array()},
                {"buffers",
                 {{{"kind", "input"}, {"index", 0}, {"bytes", M * K * 2}},
                  {{"kind", "output"}, {"index", 0}, {"bytes", M * N * 2}},
                  {{"kind", "weight"}, {"index", 0}, {"bytes", K * N * 2}, {"dtype", "bfloat16"}}}},
                {"steps", json::array()}};
    for (int64_t r = 0; r < reps; ++r)
      gpu["steps"].push_back(g);
    t.finish(gpu);
    GpuExecutor ex;
    std::string error;
    ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
    std::vector<HostTensor> outs;
    GpuRunStats stats;
    HostTensor in = tensor("bfloat16", {M, K}, a.data(), a.size() * 2);
    for (int warm = 0; warm < 2; ++warm)
      ASSERT_EQ(ex.run({in}, GpuRunOptions(), outs, stats, error), GpuStatus::Ok) << error;
    double tflops = reps * 2.0 * M * N * K / (stats.prefillMs * 1e-3) / 1e12;
    std::printf("gemm %lld x %lld x %lld bf16 (%s weight): %.3f ms each, %.0f TFLOP/s; weights "
                "%.2f GiB uploaded in %.0f ms\n",
                static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                linear ? "[N, K]" : "[K, N]", stats.prefillMs / reps, tflops,
                ex.loadStats().weightBytes / double(1 << 30), ex.loadStats().loadWeightsMs);
    EXPECT_GT(tflops, 100.0);
  }
}

// --- CUDA graphs -------------------------------------------------------------

namespace {

/// A chunked program (chunks of 4) whose steps exercise every way a CUDA
/// graph replay can differ from plain launches: kernels whose parameters
/// name p0 and n (updated graph nodes), an attention step (skv = p0 + n, v
/// offset p0), a last-row gemm whose A offset names n (a graph per n), a
/// copy whose destination names p0 (run between two graphs), memsets, and
/// rows, state and last outputs.
///   state[j] += 2 * c[j] for the chunk's positions j (c[j] = j + 1);
///   X[0..16) = c[p0 .. p0 + 16) (memset, then X += 1 * c[p0 + i]);
///   G = X[n - 1, :] (X as [4, 4]) times W [4, 8];
///   state[32 + p0 + i] = X[i] for i < n (copy);
///   echo = the attention parameters (memset, then the echo kernel);
///   rows: token p0 + r gets X[2r], X[2r + 1].
void graphProgram(TestArtifact &t, const std::string &dir) {
  std::vector<float> w(32), c(64);
  for (int i = 0; i < 32; ++i)
    w[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  for (int i = 0; i < 64; ++i)
    c[i] = static_cast<float>(i + 1);
  writeBytes(dir + "/w.bin", w.data(), w.size() * 4);
  t.addBlob("k.ptx", "ptx", testPtx());
  t.addBlob("c.bin", "data", std::string(reinterpret_cast<const char *>(c.data()), 256));
  t.manifest["max_positions"] = 32;
  t.manifest["inputs"] = {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}};
  t.manifest["outputs"] = {
      {{"name", "rows"}, {"dtype", "float32"}, {"shape", {1, -1, 2}},
       {"dims_from", {nullptr, {{"input", 0}, {"dim", 1}}, nullptr}}},
      {{"name", "state"}, {"dtype", "float32"}, {"shape", {64}}},
      {{"name", "echo"}, {"dtype", "float32"}, {"shape", {64}}},
      {{"name", "g"}, {"dtype", "float32"}, {"shape", {1, 8}}}};
  t.manifest["weights"] = {{{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"},
                            {"shape", {4, 8}}, {"offset", 0}}};
  auto memref = [](int buffer, json offset, json size) {
    return json{{"memref", {{"buffer", buffer}, {"offset", offset}, {"sizes", {size}},
                            {"strides", {1}}}}};
  };
  auto axpy = [](json x, json y, double a) {
    return json{{"op", "launch"}, {"module", 0}, {"kernel", "h20_test_axpy"},
                {"grid", {1, 1, 1}}, {"block", {32, 1, 1}}, {"smem", 0},
                {"args", {x, y, {{"f32", a}}}}};
  };
  json p0 = {{"p0", 1}}, n = {{"n", 1}};
  json gpu = {
      {"arch", "sm_90"}, {"symbols", {"p0", "n"}},
      {"chunking", {{"chunk", 4}, {"input", 0}, {"dim", 1}, {"pad_value", 0}}},
      {"outputs", {{{"mode", "rows"}, {"dim", 1}}, {{"mode", "last"}}, {{"mode", "last"}},
                   {{"mode", "last"}}}},
      {"modules", {{{"name", "k"}, {"ptx_blob", "k.ptx"}}}}, {"arena_bytes", 256},
      {"buffers",
       {{{"kind", "input"}, {"index", 0}, {"bytes", 32}},                              // 0
        {{"kind", "output"}, {"index", 0}, {"bytes", 32}},                             // 1
        {{"kind", "output"}, {"index", 1}, {"bytes", 256}},                            // 2
        {{"kind", "output"}, {"index", 2}, {"bytes", 256}},                            // 3
        {{"kind", "output"}, {"index", 3}, {"bytes", 32}, {"dtype", "float32"}},       // 4
        {{"kind", "weight"}, {"index", 0}, {"bytes", 128}, {"dtype", "float32"}},      // 5
        {{"kind", "state"}, {"bytes", 256}, {"dtype", "float32"}},                     // 6
        {{"kind", "temp"}, {"bytes", 64}, {"offset", 0}, {"dtype", "float32"}},        // 7
        {{"kind", "const"}, {"blob", "c.bin"}, {"blob_offset", 0}, {"bytes", 256},
         {"dtype", "float32"}}}},                                                      // 8
      {"steps",
       {axpy(memref(8, p0, n), memref(6, p0, n), 2.0),                                 // 0
        {{"op", "memset"}, {"buffer", 7}, {"offset_bytes", 0}, {"bytes", 64}},         // 1
        axpy(memref(8, p0, 16), memref(7, 0, 16), 1.0),                                // 2
        {{"op", "gemm"}, {"dtype_a", "float32"}, {"dtype_b", "float32"},               // 3
         {"dtype_c", "float32"}, {"batch", 1}, {"m", 1}, {"n", 8}, {"k", 4},
         {"a", {{"buffer", 7}, {"offset", {{"c", -4}, {"n", 4}}}, {"batch_stride", 0},
                {"row_stride", 4}, {"col_stride", 1}}},
         {"b", mat(5, 0, 8, 1)}, {"c", mat(4, 0, 8, 1)}},
        {{"op", "copy"}, {"src", 7}, {"src_offset_bytes", 0}, {"dst", 6},              // 4
         {"dst_offset_bytes", {{"c", 128}, {"p0", 4}}}, {"bytes", {{"n", 4}}}},
        {{"op", "memset"}, {"buffer", 3}, {"offset_bytes", 0}, {"bytes", 256}},        // 5
        [&] {                                                                          // 6
          h20::test::AttentionSpec a;
          a.kernel = "h20_test_attn_echo";
          a.dtype = "float32";
          a.blockM = 4;
          a.threads = 32;
          a.heads = 2;
          a.kvHeads = 1;
          a.sq = n;
          a.skv = {{"p0", 1}, {"n", 1}};
          a.dim = 2;
          a.scale = 0.5;
          a.causal = true;
          a.q = {{"buffer", 7}, {"offset", 0}, {"strides", {16, 8, 2, 1}}};
          a.k = {{"buffer", 6}, {"offset", 0}, {"strides", {0, 0, 1, 1}}};
          a.v = {{"buffer", 6}, {"offset", p0}, {"strides", {0, 0, 1, 1}}};
          a.o = {{"buffer", 3}, {"offset", 0}, {"strides", {16, 8, 2, 1}}};
          return h20::test::attentionLaunch(a);
        }(),
        {{"op", "copy"}, {"src", 7}, {"src_offset_bytes", 0}, {"dst", 1},              // 7
         {"dst_offset_bytes", 0}, {"bytes", 32}},
        {{"op", "copy"}, {"src", 6}, {"src_offset_bytes", 0}, {"dst", 2},              // 8
         {"dst_offset_bytes", 0}, {"bytes", 256}}}}};
  t.finish(gpu);
}

} // namespace

// Graph replay and plain launches give the same bytes; graphs are captured
// once per distinct shape (here: n = 4 and the last chunk's n = 2 for the
// first segment, one for the last) and reused by the next run.
TEST_F(GpuExecutorTest, CudaGraphMatchesPlainLaunches) {
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(graphProgram(t, dir.path));
  GpuExecutor graphed, plain;
  std::string error;
  ASSERT_EQ(graphed.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok)
      << error;
  ASSERT_EQ(plain.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok)
      << error;
  BufferPlan plan;
  ASSERT_TRUE(planBuffers(t.program, plan, error)) << error;
  for (int64_t S : {10, 10, 7, 32}) {
    SCOPED_TRACE("S = " + std::to_string(S));
    std::vector<int64_t> ids(S, 1);
    HostTensor in = tensor("int64", {1, S}, ids.data(), ids.size() * 8);
    std::vector<HostTensor> og, op;
    GpuRunStats sg, sp;
    GpuRunOptions ro;
    ASSERT_EQ(graphed.run({in}, ro, og, sg, error), GpuStatus::Ok) << error;
    ro.cudaGraph = false;
    ASSERT_EQ(plain.run({in}, ro, op, sp, error), GpuStatus::Ok) << error;
    EXPECT_TRUE(sg.cudaGraph) << sg.cudaGraphNote;
    EXPECT_TRUE(sg.cudaGraphNote.empty()) << sg.cudaGraphNote;
    EXPECT_FALSE(sp.cudaGraph);
    EXPECT_EQ(sp.graphLaunches, 0);
    int64_t chunks = (S + 3) / 4;
    EXPECT_EQ(sg.graphLaunches, 2 * chunks); // two graph segments around the p0 copy
    ASSERT_EQ(og.size(), op.size());
    for (size_t o = 0; o < og.size(); ++o) {
      EXPECT_EQ(og[o].shape, op[o].shape) << og[o].name;
      if (og[o].name != "echo") {
        EXPECT_TRUE(og[o].data == op[o].data) << "output '" << og[o].name << "' differs";
      }
    }
    // The echoed attention parameters hold device pointers (each executor
    // has its own allocation): the same relative to q, the rest bit for bit.
    ASSERT_EQ(og[2].data.size(), op[2].data.size());
    for (int ptr = 8; ptr < 32; ptr += 8) {
      int64_t qg, qp, xg, xp;
      std::memcpy(&qg, og[2].data.data(), 8);
      std::memcpy(&qp, op[2].data.data(), 8);
      std::memcpy(&xg, og[2].data.data() + ptr, 8);
      std::memcpy(&xp, op[2].data.data() + ptr, 8);
      EXPECT_EQ(xg - qg, xp - qp) << "echoed pointer at byte " << ptr;
    }
    EXPECT_EQ(std::memcmp(og[2].data.data() + 32, op[2].data.data() + 32,
                          og[2].data.size() - 32),
              0)
        << "echoed attention parameters differ";
    // The values themselves.
    int64_t lastP0 = (chunks - 1) * 4, lastN = S - lastP0;
    std::vector<float> rows = asFloats(og[0]), state = asFloats(og[1]), g = asFloats(og[3]);
    for (int64_t j = 0; j < S; ++j) {
      int64_t p0 = j / 4 * 4, r = j % 4;
      EXPECT_EQ(rows[2 * j], float(p0 + 2 * r + 1)) << "row " << j;
      EXPECT_EQ(rows[2 * j + 1], float(p0 + 2 * r + 2)) << "row " << j;
    }
    for (int64_t j = 0; j < 32; ++j) {
      EXPECT_EQ(state[j], j < S ? 2.0f * float(j + 1) : 0.0f) << "state " << j;
      EXPECT_EQ(state[32 + j], j < S ? float(j + 1) : 0.0f) << "state " << 32 + j;
    }
    std::vector<float> w(32);
    for (int i = 0; i < 32; ++i)
      w[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    for (int j = 0; j < 8; ++j) {
      double ref = 0;
      for (int k = 0; k < 4; ++k)
        ref += double(lastP0 + (lastN - 1) * 4 + k + 1) * w[k * 8 + j];
      EXPECT_NEAR(g[j], ref, 1e-3) << "g " << j;
    }
    const uint8_t *e = og[2].data.data();
    auto i64 = [&](int off) {
      int64_t v;
      std::memcpy(&v, e + off, 8);
      return v;
    };
    uint64_t kPtr = static_cast<uint64_t>(i64(8)), vPtr = static_cast<uint64_t>(i64(16));
    EXPECT_EQ(vPtr - kPtr, uint64_t(lastP0 * 4)); // v offset p0 elements
    EXPECT_EQ(i64(184), lastN);                   // sq
    EXPECT_EQ(i64(192), S);                       // skv
    int32_t blocks;
    std::memcpy(&blocks, e + 224, 4);
    EXPECT_EQ(blocks, 2); // grid (ceil(n / 4), heads 2, batch 1), this chunk only
  }
}

// The step profile times every step of every chunk without changing the
// results: outputs equal a graphed run's, one call per step per chunk, no
// graph launched, a time for every step and their sum within the prefill.
TEST_F(GpuExecutorTest, StepProfileTimesEveryStep) {
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(graphProgram(t, dir.path));
  GpuExecutor gpu;
  std::string error;
  ASSERT_EQ(gpu.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok)
      << error;
  const int64_t S = 10, chunks = (S + 3) / 4;
  std::vector<int64_t> ids(S, 1);
  HostTensor in = tensor("int64", {1, S}, ids.data(), ids.size() * 8);
  std::vector<HostTensor> plain, profiled;
  GpuRunStats sp, sq;
  GpuRunOptions ro;
  ASSERT_EQ(gpu.run({in}, ro, plain, sp, error), GpuStatus::Ok) << error;
  EXPECT_TRUE(sp.stepMs.empty());
  ro.profileSteps = true;
  ASSERT_EQ(gpu.run({in}, ro, profiled, sq, error), GpuStatus::Ok) << error;
  EXPECT_FALSE(sq.cudaGraph);
  EXPECT_EQ(sq.graphLaunches, 0);
  ASSERT_EQ(sq.stepMs.size(), t.program.steps.size());
  ASSERT_EQ(sq.stepCalls.size(), t.program.steps.size());
  double sum = 0;
  for (size_t i = 0; i < sq.stepMs.size(); ++i) {
    EXPECT_EQ(sq.stepCalls[i], chunks) << "step " << i;
    EXPECT_GE(sq.stepMs[i], 0.0) << "step " << i;
    sum += sq.stepMs[i];
  }
  EXPECT_GT(sum, 0.0);
  EXPECT_LE(sum, sq.prefillMs * 1.01 + 0.01);
  ASSERT_EQ(plain.size(), profiled.size());
  for (size_t o = 0; o < plain.size(); ++o)
    if (plain[o].name != "echo") // holds device pointers
      EXPECT_TRUE(plain[o].data == profiled[o].data) << "output '" << plain[o].name << "'";
}

// --tune-gemms: the first run times cuBLASLt's candidates for every GEMM
// shape (records: the shape, a candidate count, the chosen one no slower
// than the heuristic's first), later runs reuse the choice (no records);
// outputs stay equal to an untuned executor's up to rounding (another
// algorithm may sum in another order), in a chunked program replayed as
// CUDA graphs and in an unchunked bf16 GEMM of a size with several
// candidates.
TEST_F(GpuExecutorTest, GemmTuningKeepsResults) {
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(graphProgram(t, dir.path));
  GpuExecutor tuned, plain;
  std::string error;
  GpuLoadOptions lo;
  lo.tuneGemms = true;
  ASSERT_EQ(tuned.load(t.artifact, t.m, t.program, lo, error), GpuStatus::Ok) << error;
  ASSERT_EQ(plain.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok)
      << error;
  std::vector<int64_t> ids(10, 1);
  HostTensor in = tensor("int64", {1, 10}, ids.data(), ids.size() * 8);
  std::vector<HostTensor> ot, op;
  GpuRunStats st, sp;
  ASSERT_EQ(tuned.run({in}, GpuRunOptions(), ot, st, error), GpuStatus::Ok) << error;
  ASSERT_EQ(plain.run({in}, GpuRunOptions(), op, sp, error), GpuStatus::Ok) << error;
  EXPECT_TRUE(st.cudaGraph) << st.cudaGraphNote;
  ASSERT_FALSE(st.gemmTuning.empty());
  EXPECT_TRUE(sp.gemmTuning.empty());
  for (const GemmTuning &g : st.gemmTuning) {
    EXPECT_NE(g.shape.find("float32 "), std::string::npos) << g.shape;
    if (g.candidates > 1) {
      EXPECT_LE(g.chosenMs, g.firstMs) << g.shape;
      EXPECT_GT(g.firstMs, 0.0) << g.shape;
    } else {
      EXPECT_FALSE(g.note.empty()) << g.shape;
    }
  }
  ASSERT_EQ(ot.size(), op.size());
  for (size_t o = 0; o < ot.size(); ++o) {
    if (ot[o].name == "echo") // holds device pointers
      continue;
    std::vector<float> a = asFloats(ot[o]), b = asFloats(op[o]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(b[i]))) << ot[o].name << "[" << i << "]";
  }
  GpuRunStats again;
  ASSERT_EQ(tuned.run({in}, GpuRunOptions(), ot, again, error), GpuStatus::Ok) << error;
  EXPECT_TRUE(again.gemmTuning.empty());

  // Unchunked bf16, 1024 x 1024 x 512: the heuristic offers several.
  TempDir big;
  const int64_t M = 1024, N = 1024, K = 512;
  std::vector<float> a = randomFloats(M * K, 8), w = randomFloats(K * N, 9);
  writeBytes(big.path + "/w.bin", w.data(), w.size() * 4);
  std::vector<uint16_t> abf(a.size());
  convertElements("float32", a.data(), "bfloat16", abf.data(), a.size());
  TestArtifact g(big.path);
  g.manifest["inputs"] = {{{"name", "a"}, {"dtype", "bfloat16"}, {"shape", {M, K}}}};
  g.manifest["outputs"] = {{{"name", "c"}, {"dtype", "float32"}, {"shape", {M, N}}}};
  g.manifest["weights"] = {{{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"},
                            {"shape", {K, N}}, {"offset", 0}, {"length", K * N * 4}}};
  json gemm = {{"op", "gemm"}, {"dtype_a", "bfloat16"}, {"dtype_b", "bfloat16"},
               {"dtype_c", "float32"}, {"batch", 1}, {"m", M}, {"n", N}, {"k", K},
               {"a", mat(0, 0, K, 1)}, {"b", mat(2, 0, N, 1)}, {"c", mat(1, 0, N, 1)}};
  json gpu = {{"arch", "sm_90"}, {"outputs", {{{"mode", "whole"}}}},
              {"modules", json::array()},
              {"buffers",
               {{{"kind", "input"}, {"index", 0}, {"bytes", M * K * 2}},
                {{"kind", "output"}, {"index", 0}, {"bytes", M * N * 4}},
                {{"kind", "weight"}, {"index", 0}, {"bytes", K * N * 2}, {"dtype", "bfloat16"}}}},
              {"steps", {gemm}}};
  g.finish(gpu);
  GpuExecutor bt, bp;
  ASSERT_EQ(bt.load(g.artifact, g.m, g.program, lo, error), GpuStatus::Ok) << error;
  ASSERT_EQ(bp.load(g.artifact, g.m, g.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  HostTensor ain = tensor("bfloat16", {M, K}, abf.data(), abf.size() * 2);
  ASSERT_EQ(bt.run({ain}, GpuRunOptions(), ot, st, error), GpuStatus::Ok) << error;
  ASSERT_EQ(bp.run({ain}, GpuRunOptions(), op, sp, error), GpuStatus::Ok) << error;
  ASSERT_EQ(st.gemmTuning.size(), 1u);
  const GemmTuning &r = st.gemmTuning[0];
  EXPECT_EQ(r.shape, "bfloat16 1024x1024x512");
  EXPECT_GT(r.candidates, 1) << r.note;
  EXPECT_GE(r.chosen, 0);
  EXPECT_LT(r.chosen, kGemmTuneCandidates);
  EXPECT_LE(r.chosenMs, r.firstMs);
  std::vector<double> ref(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      double x = bfloat16ToFloat(abf[i * K + k]);
      for (int64_t j = 0; j < N; ++j)
        ref[i * N + j] += x * bfloat16ToFloat(floatToBfloat16(w[k * N + j]));
    }
  EXPECT_LT(relL2(asFloats(ot[0]), ref), 1e-4);
  EXPECT_LT(relL2(asFloats(op[0]), ref), 1e-4);
}

// Captures: the first run captures 3 graphs (segment 1 for n = 4 and
// n = 2, segment 2 once); the same length again captures none and only
// updates kernel nodes; the plain executor is unaffected.
TEST_F(GpuExecutorTest, CudaGraphsAreReused) {
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(graphProgram(t, dir.path));
  GpuExecutor ex;
  std::string error;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok) << error;
  std::vector<int64_t> ids(10, 3);
  HostTensor in = tensor("int64", {1, 10}, ids.data(), ids.size() * 8);
  std::vector<HostTensor> outs;
  GpuRunStats st;
  ASSERT_EQ(ex.run({in}, GpuRunOptions(), outs, st, error), GpuStatus::Ok) << error;
  ASSERT_TRUE(st.cudaGraph) << st.cudaGraphNote;
  EXPECT_EQ(st.graphCaptures, 3);
  EXPECT_EQ(st.graphLaunches, 6);
  EXPECT_EQ(st.graphNodeUpdates, 4); // chunk 1: 2 axpys + attention; chunk 2: attention
  EXPECT_GT(st.graphNodes, 0);
  ASSERT_EQ(ex.run({in}, GpuRunOptions(), outs, st, error), GpuStatus::Ok) << error;
  EXPECT_EQ(st.graphCaptures, 0);
  EXPECT_EQ(st.graphLaunches, 6);
  EXPECT_EQ(st.graphNodeUpdates, 7); // the n = 2 graph already holds chunk 2's values
  // Not chunked: no graphs, and the reason.
  GpuRunOptions off;
  off.cudaGraph = false;
  ASSERT_EQ(ex.run({in}, off, outs, st, error), GpuStatus::Ok) << error;
  EXPECT_FALSE(st.cudaGraph);
  EXPECT_NE(st.cudaGraphNote.find("disabled"), std::string::npos) << st.cudaGraphNote;
}

// --- NCCL --------------------------------------------------------------------

#if H20_HAVE_CUDA_HEADERS
// A 1-rank communicator made the way N ranks make theirs, and an
// all-reduce on it (out of place and in place).
TEST_F(GpuExecutorTest, NcclOneRankAllReduce) {
  std::string reason;
  if (!ncclAvailable(reason))
    GTEST_SKIP() << "no NCCL: " << reason;
  EXPECT_EQ(ncclVersionText().substr(0, 2), "2.");
  const CudaApi *cu = cudaApi(reason);
  ASSERT_TRUE(cu) << reason;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  ASSERT_EQ(cu->cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu->cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  ASSERT_EQ(cu->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const size_t count = 1000;
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cu->cuMemAlloc(&a, count * 4), CUDA_SUCCESS);
  ASSERT_EQ(cu->cuMemAlloc(&b, count * 4), CUDA_SUCCESS);
  std::vector<float> x = randomFloats(count, 21), y(count, 0.0f);
  ASSERT_EQ(cu->cuMemcpyHtoD(a, x.data(), count * 4), CUDA_SUCCESS);
  {
    NcclComm comm;
    NcclComm::UniqueId id;
    std::string error;
    ASSERT_TRUE(NcclComm::newUniqueId(id, error)) << error;
    EXPECT_FALSE(comm.init(1, 1, id, error));
    EXPECT_NE(error.find("out of range"), std::string::npos) << error;
    EXPECT_FALSE(comm.allReduceSumF32(a, b, count, stream, error));
    ASSERT_TRUE(comm.init(1, 0, id, error)) << error;
    EXPECT_TRUE(comm.valid());
    EXPECT_EQ(comm.ranks(), 1);
    EXPECT_EQ(comm.rank(), 0);
    EXPECT_FALSE(comm.init(1, 0, id, error));
    ASSERT_TRUE(comm.allReduceSumF32(a, b, count, stream, error)) << error;
    ASSERT_TRUE(comm.allReduceSumF32(a, a, count, stream, error)) << error;
    ASSERT_EQ(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
    EXPECT_TRUE(comm.checkAsync(error)) << error;
    ASSERT_EQ(cu->cuMemcpyDtoH(y.data(), b, count * 4), CUDA_SUCCESS);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), count * 4), 0); // one rank: a copy
    ASSERT_EQ(cu->cuMemcpyDtoH(y.data(), a, count * 4), CUDA_SUCCESS);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), count * 4), 0);
    comm.destroy();
    EXPECT_FALSE(comm.valid());
    comm.destroy(); // idempotent
  }
  cu->cuMemFree(a);
  cu->cuMemFree(b);
  cu->cuStreamDestroy(stream);
  cu->cuDevicePrimaryCtxRelease(dev);
}
#endif

// load() with ncclRanks = 1 sets up the communicator (or says why not);
// more ranks need the id file, and a rank whose peers never join gives up
// after ncclTimeoutS instead of waiting for ever.
TEST_F(GpuExecutorTest, NcclThroughLoad) {
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(graphProgram(t, dir.path));
  std::string error, reason;
  GpuLoadOptions lo;
  lo.ncclRanks = 2;
  {
    GpuExecutor ex;
    EXPECT_EQ(ex.load(t.artifact, t.m, t.program, lo, error), GpuStatus::BadInput);
    EXPECT_NE(error.find("ncclIdFile"), std::string::npos) << error;
  }
  if (ncclAvailable(reason)) {
    GpuExecutor ex;
    lo.ncclIdFile = dir.path + "/nccl-id";
    lo.ncclTimeoutS = 2;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ex.load(t.artifact, t.m, t.program, lo, error), GpuStatus::PeerFailed);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(error.find("did not complete within 2 s"), std::string::npos) << error;
    EXPECT_LT(s, 20.0);
    EXPECT_EQ(fileSize(lo.ncclIdFile), 128) << "rank 0 shares the unique id";
  }
  lo = GpuLoadOptions();
  lo.ncclRanks = 1;
  GpuExecutor ex;
  ASSERT_EQ(ex.load(t.artifact, t.m, t.program, lo, error), GpuStatus::Ok) << error;
  if (ncclAvailable(reason)) {
    EXPECT_EQ(ex.loadStats().nccl, ncclVersionText());
    EXPECT_EQ(ex.loadStats().ncclRanks, 1);
    EXPECT_EQ(ex.loadStats().ncclRank, 0);
  } else {
    EXPECT_EQ(ex.loadStats().nccl, "unavailable: " + reason);
  }
  std::vector<int64_t> ids(5, 2);
  std::vector<HostTensor> outs;
  GpuRunStats st;
  EXPECT_EQ(ex.run({tensor("int64", {1, 5}, ids.data(), 40)}, GpuRunOptions(), outs, st, error),
            GpuStatus::Ok)
      << error;
  GpuExecutor none;
  ASSERT_EQ(none.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok)
      << error;
  EXPECT_EQ(none.loadStats().nccl, "");
}

// h20-run: --gpus / WORLD_SIZE over 1 is refused plainly; the report says
// what NCCL and the CUDA graphs did; --no-cuda-graph gives the same logits;
// without libnccl a 1-GPU run goes on and says so.
TEST_F(GpuExecutorTest, H20RunGpusNcclAndGraphs) {
  const char *env = std::getenv("H20_RUN");
  std::string h20run = env && *env ? env : H20_RUN_PATH;
  if (access(h20run.c_str(), X_OK) != 0)
    GTEST_SKIP() << "h20-run not found at '" << h20run << "' (set H20_RUN)";
  const int64_t V = 16;
  std::string art, error;
  ASSERT_NO_FATAL_FAILURE(writeLmLastArtifact(dir.path, 5, 2, art));
  std::vector<int64_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 7, 9, 11}; // next: 5*11+2 mod 16 = 9
  std::string npy = encodeNpy("i8", {1, int64_t(ids.size())}, ids.data(), ids.size() * 8);
  ASSERT_NO_FATAL_FAILURE(writeBytes(dir.path + "/ids.npy", npy.data(), npy.size()));
  auto h20 = [&](const std::string &envs, const std::string &args, std::string &out) {
    std::string cmd = envs + " '" + h20run + "' '" + art + "' --ids '" + dir.path + "/ids.npy' " +
                      args + " > '" + dir.path + "/out.txt' 2>&1";
    int rc = runCommand(cmd);
    std::string e;
    out.clear();
    readFile(dir.path + "/out.txt", out, e);
    return rc;
  };
  auto report = [&](const std::string &name) {
    std::string text, e;
    EXPECT_TRUE(readFile(dir.path + "/" + name, text, e)) << e;
    return text.empty() ? json() : json::parse(text);
  };
  std::string out;
  if (GpuExecutor::deviceCount(error) < 2) {
    // Refused before any rank starts: this toy program has no attention
    // for context parallelism to split (h20-run checks the artifact before
    // counting GPUs).
    EXPECT_EQ(h20("", "--gpus 2", out), 2) << out;
    EXPECT_NE(out.find("context parallelism runs a program layer by layer, and this one "
                       "declares no layers"),
              std::string::npos)
        << out;
  }
  EXPECT_EQ(h20("WORLD_SIZE=8 RANK=3 LOCAL_RANK=3", "", out), 2) << out;
  EXPECT_NE(out.find("rank 3: WORLD_SIZE=8: set H20_NCCL_ID_FILE"), std::string::npos) << out;
  EXPECT_EQ(h20("WORLD_SIZE=1", "--gpus 2", out), 2) << out;
  EXPECT_NE(out.find("disagrees with WORLD_SIZE=1"), std::string::npos) << out;
  EXPECT_EQ(h20("", "--gpus 0", out), 2) << out;
  // Graphs (default) and --no-cuda-graph: the same logits, bit for bit.
  ASSERT_EQ(h20("WORLD_SIZE=1 RANK=0 LOCAL_RANK=0",
                "--gpus 1 --report '" + dir.path + "/g.json' --dump-logits '" + dir.path +
                    "/g.npy'",
                out),
            0)
      << out;
  ASSERT_EQ(h20("", "--no-cuda-graph --report '" + dir.path + "/p.json' --dump-logits '" +
                        dir.path + "/p.npy'",
                out),
            0)
      << out;
  json g = report("g.json"), p = report("p.json");
  EXPECT_EQ(g["next_token_id"], (11 * 5 + 2) % V);
  EXPECT_EQ(p["next_token_id"], g["next_token_id"]);
  EXPECT_EQ(g["gpus"], 1);
  EXPECT_EQ(g["cuda_graph"]["used"], true) << g["cuda_graph"].dump();
  EXPECT_EQ(g["cuda_graph"]["launches"], 4);
  EXPECT_EQ(p["cuda_graph"]["used"], false);
  EXPECT_TRUE(p["cuda_graph"].contains("note"));
  std::string gl, pl;
  ASSERT_TRUE(readFile(dir.path + "/g.npy", gl, error)) << error;
  ASSERT_TRUE(readFile(dir.path + "/p.npy", pl, error)) << error;
  EXPECT_TRUE(gl == pl) << "logits differ between graph and plain launches";
  std::string reason;
  if (ncclAvailable(reason)) {
    ASSERT_TRUE(g["nccl"].is_object()) << g["nccl"].dump();
    EXPECT_EQ(g["nccl"]["version"], ncclVersionText());
    EXPECT_EQ(g["nccl"]["ranks"], 1);
  } else {
    EXPECT_EQ(g["nccl"], "unavailable: " + reason);
  }
  // No NCCL library: the 1-GPU run continues and the report says why.
  ASSERT_EQ(h20("H20_NCCL_LIBRARY=/nonexistent/libnccl.so.2",
                "--report '" + dir.path + "/n.json'", out),
            0)
      << out;
  json nr = report("n.json");
  ASSERT_TRUE(nr["nccl"].is_string()) << nr["nccl"].dump();
  EXPECT_EQ(nr["nccl"].get<std::string>().rfind("unavailable: libnccl.so.2 not found", 0), 0u)
      << nr["nccl"].dump();
  EXPECT_NE(out.find("NCCL unavailable"), std::string::npos) << out;
  EXPECT_EQ(nr["next_token_id"], g["next_token_id"]);
}

// --- Virtual context parallelism ----------------------------------------------

namespace {

/// A 2-layer toy decoder for virtual ranks, chunks of 4 tokens, S <= 32:
/// weight w[j] = j + 1; layer l writes its "K" rows (cache slot l, float32,
/// one value per position) as (l + 1) * w[p0 .. p0 + 4) with the axpy
/// kernel, and its "attention" (h20_test_attn_ksum) sums the slot's rows
/// [0, skv = p0 + 4): the sum is right only when every earlier row, also
/// those other ranks wrote, is in this rank's cache. The tail copies both
/// sums into output 0 ("last", [1, 1, 2]) and, with `rows`, layer 1's sum
/// into row p0 of output 1 ([1, S, 1], the chunk's other rows zeroed).
void cpProgram(TestArtifact &t, const std::string &dir, bool rows) {
  std::vector<float> w(32);
  for (int j = 0; j < 32; ++j)
    w[j] = float(j + 1);
  writeBytes(dir + "/w.bin", w.data(), w.size() * 4);
  t.addBlob("k.ptx", "ptx", testPtx());
  t.manifest["max_positions"] = 32;
  t.manifest["inputs"] = {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}};
  t.manifest["outputs"] = {{{"name", "sums"}, {"dtype", "float32"}, {"shape", {1, 1, 2}}}};
  if (rows)
    t.manifest["outputs"].push_back({{"name", "rows"}, {"dtype", "float32"}, {"shape", {1, -1, 1}},
                                     {"dims_from", {nullptr, {{"input", 0}, {"dim", 1}}, nullptr}}});
  t.manifest["weights"] = {{{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"},
                            {"shape", {32}}, {"offset", 0}, {"length", 128}}};
  json steps = json::array();
  for (int l = 0; l < 2; ++l) {
    steps.push_back(
        {{"op", "launch"}, {"module", 0}, {"kernel", "h20_test_axpy"}, {"grid", {1, 1, 1}},
         {"block", {32, 1, 1}}, {"smem", 0},
         {"args",
          {{{"memref", {{"buffer", 3}, {"offset", {{"p0", 1}}}, {"sizes", {4}}, {"strides", {1}}}}},
           {{"memref",
             {{"buffer", 4}, {"offset", {{"c", 32 * l}, {"p0", 1}}}, {"sizes", {4}}, {"strides", {1}}}}},
           {{"f32", double(l + 1)}}}}});
    json slot = {{"buffer", 4}, {"offset", 32 * l}, {"strides", {0, 0, 1, 1}}};
    json o = {{"buffer", 5 + l}, {"offset", 0}, {"strides", {0, 0, 0, 1}}};
    h20::test::AttentionSpec a;
    a.kernel = "h20_test_attn_ksum";
    a.dtype = "float32";
    a.threads = 32;
    a.sq = 4;
    a.skv = {{"c", 4}, {"p0", 1}};
    a.causal = true;
    a.q = o, a.k = slot, a.v = slot, a.o = o;
    steps.push_back(h20::test::attentionLaunch(a));
  }
  for (int l = 0; l < 2; ++l)
    steps.push_back({{"op", "copy"}, {"src", 5 + l}, {"src_offset_bytes", 0}, {"dst", 1},
                     {"dst_offset_bytes", 4 * l}, {"bytes", 4}});
  json outputs = {{{"mode", "last"}}};
  json buffers = {{{"kind", "input"}, {"index", 0}, {"bytes", 32}},
                  {{"kind", "output"}, {"index", 0}, {"bytes", 8}},
                  {{"kind", "output"}, {"index", 1}, {"bytes", 16}},
                  {{"kind", "weight"}, {"index", 0}, {"bytes", 128}, {"dtype", "float32"}},
                  {{"kind", "state"}, {"bytes", 2 * 32 * 4}, {"dtype", "float32"}},
                  {{"kind", "temp"}, {"bytes", 4}, {"offset", 0}, {"dtype", "float32"}},
                  {{"kind", "temp"}, {"bytes", 4}, {"offset", 256}, {"dtype", "float32"}}};
  if (rows) {
    outputs.push_back({{"mode", "rows"}, {"dim", 1}});
    steps.push_back({{"op", "memset"}, {"buffer", 2}, {"offset_bytes", 0}, {"bytes", 16}, {"value", 0}});
    steps.push_back({{"op", "copy"}, {"src", 6}, {"src_offset_bytes", 0}, {"dst", 2},
                     {"dst_offset_bytes", 0}, {"bytes", 4}});
  } else {
    buffers.erase(2);
    // Buffer indices after the removed output shift down by one.
    for (json &st : steps) {
      auto fix = [](json &b) {
        if (b.get<int>() > 2)
          b = b.get<int>() - 1;
      };
      if (st["op"] == "launch")
        for (json &a : st["args"]) {
          if (a.contains("memref"))
            fix(a["memref"]["buffer"]);
          if (a.contains("struct"))
            for (json &f : a["struct"]["fields"])
              if (f.contains("pointer"))
                fix(f["pointer"]["buffer"]);
        }
      if (st["op"] == "copy")
        fix(st["src"]), fix(st["dst"]);
    }
  }
  json gpu = {{"arch", "sm_90"}, {"symbols", {"p0", "n"}},
              {"chunking", {{"chunk", 4}, {"input", 0}, {"dim", 1}, {"pad_value", 0}}},
              {"outputs", outputs},
              {"modules", {{{"name", "k"}, {"ptx_blob", "k.ptx"}}}},
              {"arena_bytes", 512}, {"buffers", buffers}, {"steps", steps},
              // As the compiler declares them: layer l is its write and attention.
              {"layers",
               {{{"layer", 0}, {"first_step", 0}, {"attention_step", 1}},
                {{"layer", 1}, {"first_step", 2}, {"attention_step", 3}}}}};
  t.finish(gpu);
}

} // namespace

// N virtual ranks give the 1-GPU outputs bit for bit (and the exact sums),
// every rank issues the same collectives, and the executor's own buffers
// are back in place afterwards (a plain run after a virtual one is right).
TEST_F(GpuExecutorTest, VirtualRanksMatchOneGpu) {
  for (bool rows : {true, false}) {
    SCOPED_TRACE(rows ? "rows + last outputs" : "last output only");
    TempDir d;
    TestArtifact t(d.path);
    ASSERT_NO_FATAL_FAILURE(cpProgram(t, d.path, rows));
    GpuExecutor ex;
    std::string error;
    ASSERT_EQ(ex.load(t.artifact, t.m, t.program, GpuLoadOptions(), error), GpuStatus::Ok)
        << error;
    for (int64_t S : {16, 32}) {
      std::vector<int64_t> ids(S, 1);
      HostTensor in = tensor("int64", {1, S}, ids.data(), ids.size() * 8);
      std::vector<HostTensor> ref;
      GpuRunStats st;
      GpuRunOptions ro;
      ASSERT_EQ(ex.run({in}, ro, ref, st, error), GpuStatus::Ok) << error;
      std::vector<float> sums = asFloats(ref[0]);
      EXPECT_EQ(sums[0], float(S * (S + 1) / 2)) << "S = " << S;
      EXPECT_EQ(sums[1], float(S * (S + 1))) << "S = " << S;
      for (int N : {2, 4, 8}) {
        SCOPED_TRACE("S = " + std::to_string(S) + ", N = " + std::to_string(N));
        std::vector<HostTensor> out;
        ro.virtualRanks = N;
        GpuStatus s = ex.run({in}, ro, out, st, error);
        if (S % (2 * N * 4) != 0) {
          EXPECT_EQ(s, GpuStatus::BadInput);
          EXPECT_NE(error.find("context parallelism"), std::string::npos) << error;
          continue;
        }
        ASSERT_EQ(s, GpuStatus::Ok) << error;
        ASSERT_EQ(out.size(), ref.size());
        for (size_t o = 0; o < out.size(); ++o)
          EXPECT_TRUE(out[o].data == ref[o].data) << "output '" << out[o].name << "' differs";
        if (rows) {
          std::vector<float> r = asFloats(out[1]);
          for (int64_t j = 0; j < S; ++j)
            EXPECT_EQ(r[j], j % 4 ? 0.0f : float((j + 4) * (j + 5))) << "row " << j;
        }
        EXPECT_EQ(st.virtualRanks, N);
        EXPECT_EQ(st.cpChunkTokens, S / (2 * N));
        EXPECT_EQ(st.cpPieces, S / 4);
        EXPECT_EQ(st.cpTailPieces, rows ? S / 4 : 1);
        EXPECT_FALSE(st.cudaGraph);
        EXPECT_TRUE(st.cpCollectivesMatch) << st.cpCollectivesNote;
        ASSERT_EQ(st.cpRing.size(), 2u);
        for (const CpLayerTraffic &tr : st.cpRing) {
          EXPECT_EQ(tr.sends, N * (N - 1));
          EXPECT_EQ(tr.bytes, int64_t(N) * (N - 1) * (S / N) * 4); // a block: 2 chunks of S/2N rows
        }
        ASSERT_EQ(st.cpRankLog.size(), size_t(N));
        for (const auto &log : st.cpRankLog)
          EXPECT_EQ(log.size(), size_t(2 * (N - 1)));
        ro.virtualRanks = 0;
      }
      // The plain path again, with CUDA graphs: unchanged.
      std::vector<HostTensor> again;
      GpuRunOptions plain;
      ASSERT_EQ(ex.run({in}, plain, again, st, error), GpuStatus::Ok) << error;
      for (size_t o = 0; o < again.size(); ++o)
        EXPECT_TRUE(again[o].data == ref[o].data) << "output '" << again[o].name << "' differs";
    }
  }
}

// Through h20-run: --gpus 2 --virtual-ranks gives the --gpus 1 logits bit
// for bit, and the report's "context_parallel" section.
TEST_F(GpuExecutorTest, H20RunVirtualRanks) {
  const char *env = std::getenv("H20_RUN");
  std::string h20run = env && *env ? env : H20_RUN_PATH;
  if (access(h20run.c_str(), X_OK) != 0)
    GTEST_SKIP() << "h20-run not found at '" << h20run << "' (set H20_RUN)";
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(cpProgram(t, dir.path, false));
  std::string error, art = dir.path + "/cp.h20";
  ASSERT_TRUE(writeArtifact(art, t.artifact, error)) << error;
  std::vector<int64_t> ids(32, 1);
  std::string npy = encodeNpy("i8", {1, 32}, ids.data(), ids.size() * 8);
  ASSERT_NO_FATAL_FAILURE(writeBytes(dir.path + "/ids.npy", npy.data(), npy.size()));
  auto h20 = [&](const std::string &args) {
    return runCommand("'" + h20run + "' '" + art + "' --ids '" + dir.path + "/ids.npy' " + args +
                      " > '" + dir.path + "/out.txt' 2>&1");
  };
  auto text = [&](const std::string &name) {
    std::string s, e;
    readFile(dir.path + "/" + name, s, e);
    return s;
  };
  ASSERT_EQ(h20("--dump-logits '" + dir.path + "/n1.npy'"), 0) << text("out.txt");
  ASSERT_EQ(h20("--gpus 4 --virtual-ranks --dump-logits '" + dir.path + "/n4.npy' --report '" +
                dir.path + "/n4.json'"),
            0)
      << text("out.txt");
  EXPECT_NE(text("out.txt").find("context parallel (virtual): 4 ranks"), std::string::npos)
      << text("out.txt");
  EXPECT_TRUE(text("n1.npy") == text("n4.npy")) << "logits differ";
  json r = json::parse(text("n4.json"));
  const json &cp = r["context_parallel"];
  EXPECT_EQ(cp["mode"], "virtual");
  EXPECT_EQ(cp["ranks"], 4);
  EXPECT_EQ(cp["cp_chunk_tokens"], 4);
  EXPECT_EQ(cp["rank_chunks"], json({{0, 7}, {1, 6}, {2, 5}, {3, 4}}));
  EXPECT_EQ(cp["collectives_match"], true);
  ASSERT_EQ(cp["ring"].size(), 2u);
  EXPECT_EQ(cp["ring"][0]["sends"], 12);
  EXPECT_EQ(cp["ring"][0]["bytes"], 12 * 32);
  EXPECT_EQ(cp["rank0_collectives"].size(), 6u);
  EXPECT_EQ(r["gpus"], 1);
  EXPECT_EQ(r["cuda_graph"]["used"], false);
  // S = 24: 8 chunks of 3 tokens, not a multiple of the 4-token chunk.
  std::vector<int64_t> ids24(24, 1);
  npy = encodeNpy("i8", {1, 24}, ids24.data(), ids24.size() * 8);
  ASSERT_NO_FATAL_FAILURE(writeBytes(dir.path + "/ids.npy", npy.data(), npy.size()));
  EXPECT_EQ(h20("--gpus 4 --virtual-ranks"), 2);
  EXPECT_NE(text("out.txt").find("not a multiple of the artifact's 4-token compiled chunk"), std::string::npos)
      << text("out.txt");
}

// Tensor parallelism, 2 virtual ranks on one GPU: each loads its half of a
// [2, 6] weight (sharded on axis 1) and all-reduces it into the output, so
// both end with w[:, :3] + w[:, 3:]. With one rank the all_reduce is a copy.
TEST_F(GpuExecutorTest, TensorParallelVirtualAllReduce) {
  const std::vector<float> w = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};
  ASSERT_NO_FATAL_FAILURE(writeBytes(dir.path + "/w.bin", w.data(), w.size() * 4));
  auto artifact = [&](TestArtifact &t, bool tp) {
    t.manifest["outputs"] = {{{"name", "out"}, {"dtype", "float32"}, {"shape", {2, 3}}}};
    json weight = {{"name", "w"}, {"file", "w.bin"}, {"dtype", "float32"},
                   {"shape", {2, tp ? 3 : 6}}, {"offset", 0}, {"length", 48}};
    if (tp) {
      weight["shard"] = {{"axis", 1}, {"full_shape", {2, 6}}, {"starts", {0, 3}}};
      t.manifest["parallel"] = {{"gpus", 2}, {"plan", "tensor"}, {"tensor_parallel", 2}};
    }
    t.manifest["weights"] = {weight};
    json gpu = {{"arch", "sm_90"}, {"symbols", json::array()},
                {"outputs", {{{"mode", "whole"}}}}, {"modules", json::array()},
                {"arena_bytes", 256},
                {"buffers", {{{"kind", "output"}, {"index", 0}, {"bytes", 24}},
                             {{"kind", "weight"}, {"index", 0}, {"bytes", tp ? 24 : 48},
                              {"dtype", "float32"}}}},
                {"steps", {{{"op", "all_reduce"}, {"dtype", "f32"}, {"src", 1},
                            {"src_offset_bytes", tp ? 0 : 12}, {"dst", 0},
                            {"dst_offset_bytes", 0}, {"bytes", 24}}}}};
    t.finish(gpu);
  };
  TestArtifact t(dir.path);
  ASSERT_NO_FATAL_FAILURE(artifact(t, true));
  GpuExecutor ex[2];
  std::string error;
  for (int r = 0; r < 2; ++r) {
    GpuLoadOptions lo;
    lo.tensorParallelRank = r;
    ASSERT_EQ(ex[r].load(t.artifact, t.m, t.program, lo, error), GpuStatus::Ok) << error;
  }
  // Without its group (or NCCL) a tensor-parallel run is refused.
  {
    std::vector<HostTensor> outs;
    GpuRunStats stats;
    EXPECT_EQ(ex[0].run({}, GpuRunOptions(), outs, stats, error), GpuStatus::BadInput);
    EXPECT_NE(error.find("compiled for tensor parallelism over 2 GPUs"), std::string::npos)
        << error;
  }
  HostAllReduceGroup group(2);
  std::vector<HostTensor> outs[2];
  GpuRunStats stats[2];
  GpuStatus status[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      GpuRunOptions ro;
      ro.virtualTensorParallel = &group;
      status[r] = ex[r].run({}, ro, outs[r], stats[r], errors[r]);
      if (status[r] != GpuStatus::Ok)
        group.abort(errors[r]);
    });
  for (std::thread &th : threads)
    th.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(status[r], GpuStatus::Ok) << "rank " << r << ": " << errors[r];
    EXPECT_EQ(asFloats(outs[r][0]), (std::vector<float>{3, 5, 7, 23, 25, 27})) << "rank " << r;
    EXPECT_EQ(stats[r].tpRanks, 2);
    EXPECT_EQ(stats[r].tpRank, r);
    EXPECT_EQ(stats[r].tpMode, "virtual");
    EXPECT_EQ(stats[r].allReduces, 1);
    EXPECT_EQ(stats[r].allReduceBytes, 24);
    ASSERT_EQ(stats[r].tpLog.size(), 1u);
    EXPECT_EQ(stats[r].tpLog[0], (TpCollective{0, 0, 24, "float32"}));
    EXPECT_FALSE(stats[r].cudaGraph);
  }
  // One rank: a device copy (of bytes [12, 36) of the unsharded weight).
  TestArtifact one(dir.path);
  ASSERT_NO_FATAL_FAILURE(artifact(one, false));
  GpuExecutor single;
  ASSERT_EQ(single.load(one.artifact, one.m, one.program, GpuLoadOptions(), error), GpuStatus::Ok)
      << error;
  std::vector<HostTensor> o;
  GpuRunStats st;
  ASSERT_EQ(single.run({}, GpuRunOptions(), o, st, error), GpuStatus::Ok) << error;
  EXPECT_EQ(asFloats(o[0]), (std::vector<float>{3, 4, 5, 10, 11, 12}));
  EXPECT_EQ(st.tpRanks, 0);
  EXPECT_EQ(st.allReduces, 1);
}
