//===- GpuProgramTest.cpp - GPU program parsing, validation, planning ----===//
//
// Everything here runs without a GPU: the program format (GpuProgram.h),
// the symbol arithmetic, the memory plan, the GEMM-to-cuBLASLt mapping
// (checked by emulating the column-major library call on the CPU) and the
// float conversions used when weights are uploaded.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Cuda/GemmPlan.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"

#include "ProgramFixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace h20::runtime;
using json = nlohmann::json;

using namespace h20::test::base_fixture;

TEST(LinearExpr, Evaluates) {
  int64_t v = 0;
  EXPECT_TRUE((LinearExpr{3, 2, -1}.evaluate({10, 4}, v)));
  EXPECT_EQ(v, 3 + 20 - 4);
  EXPECT_TRUE(LinearExpr::constant(-5).evaluate({100, 100}, v));
  EXPECT_EQ(v, -5);
  EXPECT_TRUE(LinearExpr::constant(7).isConstant());
  EXPECT_FALSE((LinearExpr{0, 0, 1}.isConstant()));
  v = 42;
  EXPECT_FALSE((LinearExpr{0, INT64_MAX, 0}.evaluate({2, 0}, v)));
  EXPECT_EQ(v, 42); // unchanged on overflow
  EXPECT_FALSE((LinearExpr{INT64_MAX, 0, 1}.evaluate({0, 1}, v)));
  EXPECT_FALSE((LinearExpr{INT64_MIN, 0, -1}.evaluate({0, 1}, v)));
}

TEST(GpuProgram, ParsesAValidProgram) {
  GpuProgram p;
  ASSERT_EQ(parse(baseProgram(), p), "");
  EXPECT_EQ(p.arch, "sm_90");
  EXPECT_EQ(p.archMajor, 9);
  EXPECT_EQ(p.archMinor, 0);
  ASSERT_TRUE(p.chunking.has_value());
  EXPECT_EQ(p.chunking->chunk, 16);
  ASSERT_EQ(p.outputs.size(), 2u);
  EXPECT_EQ(p.outputs[1].mode, OutputMode::Rows);
  ASSERT_EQ(p.buffers.size(), 9u);
  EXPECT_EQ(p.buffers[0].dtype, "int64"); // filled in from the manifest
  EXPECT_EQ(p.buffers[2].dtype, "float32");
  EXPECT_EQ(p.buffers[7].offset, 512);
  EXPECT_EQ(p.buffers[8].blob, "consts.bin");
  ASSERT_EQ(p.steps.size(), 5u);
  EXPECT_STREQ(stepOpName(p.steps[0]), "launch");
  const auto &l = std::get<LaunchStep>(p.steps[0]);
  ASSERT_EQ(l.args.size(), 5u);
  EXPECT_EQ(l.args[0].kind, LaunchArg::MemRef);
  EXPECT_EQ(l.args[0].sizes[1].n, 1);
  EXPECT_EQ(l.args[1].value.p0, 1);
  EXPECT_EQ(l.args[2].kind, LaunchArg::I32);
  EXPECT_FLOAT_EQ(l.args[3].f32, 0.5f);
  // The attention: a launch with one struct argument (H20AttnParams).
  const auto &a = std::get<LaunchStep>(p.steps[2]);
  EXPECT_TRUE(isAttentionStep(p.steps[2]));
  EXPECT_FALSE(isAttentionStep(p.steps[0]));
  EXPECT_EQ(a.gridDiv[0], 64);
  EXPECT_EQ(a.grid[0].n, 1);
  ASSERT_EQ(a.args.size(), 1u);
  const LaunchArg &params = a.args[0];
  EXPECT_EQ(params.kind, LaunchArg::Struct);
  EXPECT_EQ(params.structBytes, 640);
  EXPECT_EQ(params.structAlign, 64);
  const StructField &q = params.fields[0], &skv = params.fields[24];
  EXPECT_EQ(q.kind, StructField::Pointer);
  EXPECT_FALSE(q.written);
  EXPECT_EQ(q.buffer, 6);
  EXPECT_EQ(q.sizes[2].n, 1);
  EXPECT_EQ(skv.at, 192);
  EXPECT_EQ(skv.value.p0, 1);
  EXPECT_EQ(params.fields.back().kind, StructField::I32); // causal
  EXPECT_EQ(std::get<CopyStep>(p.steps[4]).bytes.n, 16);
}

TEST(GpuProgram, ScalarArgumentKinds) {
  json g = baseProgram();
  g["steps"][0]["args"] = {{{"bf16", 1.5}}, {{"f16", -2.0}}, {{"f64", 0.1}}, {{"f32", 3}}};
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  const auto &l = std::get<LaunchStep>(p.steps[0]);
  EXPECT_EQ(l.args[0].kind, LaunchArg::BF16);
  EXPECT_EQ(l.args[0].half, 0x3FC0);
  EXPECT_EQ(l.args[1].kind, LaunchArg::F16);
  EXPECT_EQ(l.args[1].half, 0xC000);
  EXPECT_EQ(l.args[2].kind, LaunchArg::F64);
  EXPECT_DOUBLE_EQ(l.args[2].f64, 0.1);
  EXPECT_FLOAT_EQ(l.args[3].f32, 3.0f);
  ResolvedStep r;
  std::string error;
  ASSERT_TRUE(resolveStep(p, 0, {0, 4}, r, error)) << error;
  EXPECT_EQ(std::get<ResolvedLaunch>(r).args[1].half, 0xC000);
  EXPECT_DOUBLE_EQ(std::get<ResolvedLaunch>(r).args[2].f64, 0.1);
  g["steps"][0]["args"] = {{{"f16", 1e39}}};
  EXPECT_NE(parseError(g).find("step 0 (launch): args[0].f16: does not fit a float"),
            std::string::npos)
      << parseError(g);
}

TEST(GpuProgram, DefaultsAndOptionalFields) {
  json g = baseProgram();
  // A struct without "align" and with no fields (all zero bytes).
  g["steps"][0]["args"].push_back({{"struct", {{"bytes", 16}, {"fields", json::array()}}}});
  g["steps"][3].erase("value");
  g["tf32"] = true;
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  const auto &l = std::get<LaunchStep>(p.steps[0]);
  EXPECT_EQ(l.gridDiv, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(l.role, "");
  EXPECT_EQ(l.args.back().structAlign, 8);
  EXPECT_TRUE(l.args.back().fields.empty());
  EXPECT_EQ(std::get<MemsetStep>(p.steps[3]).value, 0);
  EXPECT_TRUE(p.tf32);
  // A view's "written" defaults to true, "kv" to false.
  g = baseProgram();
  g["steps"][2]["args"][0]["struct"]["fields"][0].erase("written");
  ASSERT_EQ(parse(g, p), "");
  const StructField &q = std::get<LaunchStep>(p.steps[2]).args[0].fields[0];
  EXPECT_TRUE(q.written);
  EXPECT_FALSE(q.kv);
  EXPECT_TRUE(std::get<LaunchStep>(p.steps[2]).args[0].fields[5].kv); // K
}

TEST(GpuProgram, RejectsBadPrograms) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *message;
  };
  const Case cases[] = {
      {"unknown op", [](json &g) { g["steps"][3]["op"] = "frobnicate"; },
       "step 3: op: unknown op 'frobnicate'"},
      {"op not a string", [](json &g) { g["steps"][3]["op"] = 5; },
       "step 3.op: expected a string"},
      {"step not an object", [](json &g) { g["steps"][1] = 17; },
       "step 1: expected an object"},
      {"buffer out of range", [](json &g) { g["steps"][1]["a"]["buffer"] = 99; },
       "step 1 (gemm): a.buffer: 99 is not a buffer index (the program has 9 buffers)"},
      {"negative buffer index", [](json &g) { g["steps"][3]["buffer"] = -1; },
       "step 3 (memset): buffer: -1 is not a buffer index"},
      {"negative bytes", [](json &g) { g["buffers"][5]["bytes"] = -8; },
       "gpu.buffers[5].bytes: must be in [0, 2^50], got -8"},
      {"unknown gemm dtype", [](json &g) { g["steps"][1]["dtype_c"] = "int8"; },
       "step 1 (gemm): dtype_c: unsupported dtype 'int8'"},
      {"mixed gemm inputs", [](json &g) { g["steps"][1]["dtype_b"] = "float16"; },
       "dtype_a bfloat16 and dtype_b float16 differ"},
      {"grouped gemm without groups",
       [](json &g) { g["steps"][1]["groups"] = {{"count", 0}, {"offsets", {{"buffer", 7}, {"offset", 0}}}}; },
       "step 1 (gemm): groups.count: must be in [1, 2^20], got 0"},
      {"grouped gemm offsets of another dtype",
       [](json &g) { g["steps"][1]["groups"] = {{"count", 2}, {"offsets", {{"buffer", 3}, {"offset", 0}}}}; },
       "step 1 (gemm): groups.offsets: reads buffer 3 (bfloat16) as int32"},
      {"grouped gemm over a batch",
       [](json &g) {
         g["steps"][1]["batch"] = 2;
         g["steps"][1]["c"]["batch_stride"] = 8;
         g["steps"][1]["groups"] = {{"count", 1}, {"offsets", {{"buffer", 7}, {"offset", 0}}}};
       },
       "batch: must be 1 in a grouped GEMM, got 2"},
      {"block scales on a bf16 gemm",
       [](json &g) { g["steps"][1]["scale_a"] = {{"mode", "vec128"}, {"buffer", 4}, {"offset", 0}}; },
       "step 1 (gemm): scale_a / scale_b are only for float8_e4m3fn inputs"},
      {"gemm reads a buffer as another dtype",
       [](json &g) { g["steps"][1]["b"]["buffer"] = 4; },
       "step 1 (gemm): b: reads buffer 4 (float32) as bfloat16"},
      {"unknown buffer dtype", [](json &g) { g["buffers"][6]["dtype"] = "float8"; },
       "gpu.buffers[6].dtype: unknown dtype 'float8'"},
      {"unknown buffer kind", [](json &g) { g["buffers"][6]["kind"] = "scratch"; },
       "gpu.buffers[6].kind: unknown kind 'scratch'"},
      {"missing ptx blob", [](json &g) { g["modules"][0]["ptx_blob"] = "nope.ptx"; },
       "gpu.modules[0].ptx_blob: no blob named 'nope.ptx'"},
      {"module without code", [](json &g) { g["modules"][0]["ptx_blob"] = nullptr; },
       "gpu.modules[0]: has neither ptx_blob nor cubin_blob"},
      {"const outside its blob", [](json &g) { g["buffers"][8]["blob_offset"] = 32; },
       "lie outside blob 'consts.bin' of 64 bytes"},
      {"temp outside the arena", [](json &g) { g["buffers"][7]["offset"] = 3584; },
       "gpu.buffers[7]: bytes [3584, 4608) exceed arena_bytes 4096"},
      {"unaligned temp", [](json &g) { g["buffers"][7]["offset"] = 100; },
       "must be a non-negative multiple of 256"},
      {"weight bytes mismatch", [](json &g) { g["buffers"][3]["bytes"] = 128; },
       "128 bytes, but weight 'w0' [4, 8] as bfloat16 needs 64"},
      {"weight without dtype", [](json &g) { g["buffers"][3].erase("dtype"); },
       "a weight buffer needs \"dtype\""},
      {"unconvertible weight", [](json &g) { g["buffers"][4]["dtype"] = "int32"; },
       "weight 'w1' is float16 in the model; cannot convert it to int32"},
      {"weight index out of range", [](json &g) { g["buffers"][3]["index"] = 2; },
       "gpu.buffers[3].index: 2 is not a weight index"},
      {"output without a buffer", [](json &g) { g["buffers"][2]["index"] = 0; },
       "output 0 already has buffer 1"},
      {"input dtype mismatch", [](json &g) { g["buffers"][0]["dtype"] = "int32"; },
       "int32 differs from input 'ids''s int64"},
      {"chunk buffer too small", [](json &g) { g["buffers"][0]["bytes"] = 64; },
       "a chunk of 16 tokens needs 128"},
      {"rows output buffer too small", [](json &g) { g["buffers"][2]["bytes"] = 100; },
       "output 'hidden' [1, 16, 4] needs 256 bytes, the buffer has 100"},
      {"outputs count", [](json &g) { g["outputs"].erase(1); },
       "gpu.outputs: has 1 entries for the model's 2 outputs"},
      {"rows without chunking", [](json &g) { g["chunking"] = nullptr; },
       "mode \"rows\" needs gpu.chunking"},
      {"unknown output mode", [](json &g) { g["outputs"][0]["mode"] = "first"; },
       "unknown mode 'first'"},
      {"chunk of 0", [](json &g) { g["chunking"]["chunk"] = 0; },
       "gpu.chunking.chunk: must be >= 1"},
      {"bad arch", [](json &g) { g["arch"] = "hopper"; }, "gpu.arch: expected \"sm_XY\""},
      {"unknown symbol", [](json &g) { g["symbols"] = {"p0", "n", "m"}; },
       "unknown symbol 'm'"},
      {"undeclared chunk index", [](json &g) { g["steps"][3]["bytes"] = {{"q", 2}}; },
       "uses symbol 'q', which gpu.symbols does not declare"},
      {"undeclared symbol", [](json &g) { g["symbols"] = {"n"}; },
       "uses symbol 'p0', which gpu.symbols does not declare"},
      {"unknown key in a linear expression",
       [](json &g) { g["steps"][3]["bytes"] = {{"c", 1}, {"m", 2}}; },
       "step 3 (memset): bytes: unknown key 'm'"},
      {"float where an integer belongs", [](json &g) { g["steps"][3]["bytes"] = 1.5; },
       "step 3 (memset): bytes: expected an integer or"},
      {"integer over int64", [](json &g) { g["steps"][3]["bytes"] = 18446744073709551615ull; },
       "does not fit in int64"},
      {"unknown arg kind", [](json &g) { g["steps"][0]["args"][1] = {{"u8", 1}}; },
       "step 0 (launch): args[1]: unknown argument kind 'u8'"},
      {"memref rank mismatch",
       [](json &g) { g["steps"][0]["args"][0]["memref"]["strides"] = {1}; },
       "has 2 sizes but 1 strides"},
      {"grid of 2 dims", [](json &g) { g["steps"][0]["grid"] = {1, 1}; },
       "step 0 (launch): grid: expected 3 entries"},
      {"module out of range", [](json &g) { g["steps"][0]["module"] = 1; },
       "step 0 (launch): module: 1 is not a module index"},
      {"empty kernel name", [](json &g) { g["steps"][0]["kernel"] = ""; }, "kernel: is empty"},
      {"format 1's attention step", [](json &g) { g["steps"][2] = {{"op", "attention"}}; },
       "step 2 (attention): the \"attention\" step of artifact format 1 is gone"},
      {"unknown role", [](json &g) { g["steps"][2]["role"] = "mlp"; },
       "step 2 (launch): role: unknown role 'mlp'"},
      {"grid_div of 0", [](json &g) { g["steps"][2]["grid_div"] = {0, 1, 1}; },
       "step 2 (launch): grid_div[0]: must be in [1, 2^31-1], got 0"},
      {"struct view read as another dtype",
       [](json &g) {
         g["steps"][2]["args"][0]["struct"]["fields"][0]["pointer"]["dtype"] = "float32";
       },
       "args[0].struct.fields[0].pointer: reads buffer 6 (bfloat16) as float32"},
      {"overlapping struct fields",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][1]["at"] = 4; },
       "args[0].struct: the fields at bytes 0 and 4 overlap"},
      {"misaligned struct field",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][1]["at"] = 36; },
       "a field at byte 36 (8 bytes) is not aligned to 8"},
      {"struct fields at the same byte",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][1]["at"] = 0; },
       "the fields at bytes 0 and 0 overlap"},
      {"struct field past the end",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["bytes"] = 200; },
       "ends past the struct's 200 bytes"},
      {"struct field of two kinds",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][1]["i32"] = 1; },
       "needs exactly one of i64, i32, f32, pointer, tensor_map, tensor_maps_valid"},
      {"written on a scalar field",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][1]["written"] = false; },
       "written: is for pointer and tensor_map fields only"},
      {"struct over 4 KiB", [](json &g) { g["steps"][2]["args"][0]["struct"]["bytes"] = 8192; },
       "bytes: must be in [1, 4096], got 8192"},
      {"tensor map with a strided inner dim",
       [](json &g) {
         json &f = g["steps"][2]["args"][0]["struct"]["fields"][0];
         f["tensor_map"] = f["pointer"];
         f.erase("pointer");
         f["at"] = 256;
         f["tensor_map"]["box"] = {1, 1, 64, 64};
         f["tensor_map"]["strides"][3] = 2;
       },
       "tensor_map.strides: the innermost stride must be 1"},
      {"kernel parameters over CUDA's limit",
       [](json &g) {
         for (int i = 0; i < 9; ++i)
           g["steps"][0]["args"].push_back({{"struct", {{"bytes", 4096}, {"fields", json::array()}}}});
       },
       "step 0 (launch): args: 37000 bytes of kernel parameters, over CUDA's 32764"},
      {"struct field at a huge offset",
       [](json &g) {
         g["steps"][2]["args"][0]["struct"]["fields"][1]["at"] = 9223372036854775800LL;
       },
       "fields[1].at: must be in [0, 4096], got 9223372036854775800"},
      {"tensor map without its validity flag",
       [](json &g) {
         json &fields = g["steps"][2]["args"][0]["struct"]["fields"];
         json map = fields[0]["pointer"];
         map["box"] = {1, 1, 64, 64};
         fields.push_back({{"at", 256}, {"tensor_map", map}, {"written", false}});
       },
       "1 tensor maps need one tensor_maps_valid field, got 0"},
      {"a written K/V view",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][15]["kv"] = true; },
       "kv: a view of the KV cache is read"},
      {"attention without H20AttnParams' heads",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"].erase(21); },
       "role attention: no i64 field at byte 168 (heads)"},
      {"attention heads not a multiple of kv_heads",
       [](json &g) {
         g["steps"][2]["args"][0]["struct"]["fields"][21]["i64"] = 3;
         g["steps"][2]["args"][0]["struct"]["fields"][22]["i64"] = 2;
       },
       "heads 3 and kv_heads 2: need 1 <= heads <= 65535, a multiple of kv_heads"},
      {"attention causal with skv < sq",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][24]["i64"] = 1; },
       "skv 1 < sq 16 with causal"},
      {"attention sizes that are not the views'",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][23]["i64"] = 5; },
       "the view of q is not [batch, heads, seq, dim] with the struct's sizes and strides"},
      {"attention strides that are not the views'",
       [](json &g) { g["steps"][2]["args"][0]["struct"]["fields"][7]["i64"] = 1; },
       "the view of k is not [batch, heads, seq, dim]"},
      {"attention grid not (., heads, batch)",
       [](json &g) { g["steps"][2]["grid"][1] = 1; },
       "grid: must be (., heads 2, batch 1) for the attention kernel"},
      {"struct pointer past its buffer",
       [](json &g) {
         g["steps"][2]["args"][0]["struct"]["fields"][0]["pointer"]["offset"] = 500;
       },
       "step 2 (launch): args[0].fields[0]: accesses bytes up to"},
      {"missing field", [](json &g) { g["steps"][4].erase("dst"); },
       "step 4 (copy): missing field 'dst'"},
      {"memset value", [](json &g) { g["steps"][3]["value"] = 256; },
       "value: must be a byte value 0..255"},
      // Extents, checked for the longest prompt (max_positions 64).
      {"memref past its buffer",
       [](json &g) { g["steps"][0]["args"][4]["memref"]["offset"] = {{"p0", 4}, {"c", 4}}; },
       "step 0 (launch): args[4]: accesses bytes up to 520 of buffer 5, which has 512"},
      {"copy past its buffer", [](json &g) { g["steps"][4]["bytes"] = {{"n", 32}}; },
       "chunk 0: step 4 (copy): dst: accesses bytes up to 512 of buffer 2, which has 256 (p0=0, n=16)"},
      {"negative size at run time", [](json &g) { g["steps"][1]["m"] = {{"n", 1}, {"c", -17}}; },
       "step 1 (gemm): m: is -1 (negative)"},
      {"gemm without a unit stride", [](json &g) { g["steps"][1]["a"]["col_stride"] = 2; },
       "gemm operand a has row_stride 4 and col_stride 2: one of them must be 1"},
      {"overlapping copy through aliasing temps",
       [](json &g) {
         g["steps"][4]["dst"] = 6;
         g["steps"][4]["dst_offset_bytes"] = 520;
       },
       "step 4 (copy): source and destination ranges overlap"},
      {"block too large", [](json &g) { g["steps"][0]["block"] = {64, 32, 1}; },
       "step 0 (launch): block: 2048 threads per block is over 1024"},
      {"i32 overflow", [](json &g) { g["steps"][0]["args"][2] = {{"i32", 1ll << 40}}; },
       "does not fit i32"},
  };
  for (const Case &c : cases) {
    json g = baseProgram();
    c.mutate(g);
    std::string e = parseError(g);
    EXPECT_NE(e.find(c.message), std::string::npos)
        << c.name << ":\n  got:      " << e << "\n  expected: ..." << c.message << "...";
  }
}

TEST(GpuProgram, RejectsManifestsWithoutAProgram) {
  json m = baseManifest();
  std::string text = m.dump(), error;
  Manifest man;
  ASSERT_TRUE(parseManifest(text, man, error)) << error; // no entry needed off the CPU
  GpuProgram p;
  EXPECT_FALSE(parseGpuProgram(text, man, 4096, p, error));
  EXPECT_NE(error.find("has no \"gpu\" program (target 'h200')"), std::string::npos) << error;
  EXPECT_FALSE(parseGpuProgram("{not json", man, 4096, p, error));
  EXPECT_NE(error.find("invalid JSON"), std::string::npos) << error;
  // A blob outside the payload.
  json g = baseProgram();
  m["gpu"] = g;
  text = m.dump();
  EXPECT_FALSE(parseGpuProgram(text, man, 64, p, error));
  EXPECT_NE(error.find("blob 'kernels.ptx' (offset 0, 100 bytes) lies outside the artifact's "
                       "64-byte payload"),
            std::string::npos)
      << error;
  // CPU manifests still need their entry symbol.
  json cpu = baseManifest();
  cpu["target"] = "cpu";
  EXPECT_FALSE(parseManifest(cpu.dump(), man, error));
}

TEST(GpuProgram, ChunkSchedule) {
  GpuProgram p;
  ASSERT_EQ(parse(baseProgram(), p), "");
  auto s = chunkSchedule(p, 40);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].p0, 0);
  EXPECT_EQ(s[0].n, 16);
  EXPECT_EQ(s[1].p0, 16);
  EXPECT_EQ(s[2].p0, 32);
  EXPECT_EQ(s[2].n, 8);
  EXPECT_EQ(chunkSchedule(p, 16).size(), 1u);
  p.chunking.reset();
  s = chunkSchedule(p, 40);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].n, 40);
}

// q, the chunk's index p0 / C: rows of groups of ratio tokens (DeepSeek-
// V4.1's compressed entries before a chunk, p0 / 4 = q * C / 4).
TEST(GpuProgram, ChunkIndexSymbol) {
  int64_t v = 0;
  EXPECT_TRUE((LinearExpr{3, 0, 0, 3}.evaluate({24, 12, 2}, v)));
  EXPECT_EQ(v, 9);
  EXPECT_FALSE((LinearExpr{0, 0, 0, 1}.isConstant()));
  EXPECT_FALSE((LinearExpr{0, 0, 0, INT64_MAX}.evaluate({0, 0, 2}, v)));
  GpuProgram p;
  json g = baseProgram();
  g["symbols"] = {"p0", "n", "q"};
  g["steps"][3]["bytes"] = {{"c", 4}, {"q", 4}};
  ASSERT_EQ(parse(g, p), "");
  auto s = chunkSchedule(p, 40); // chunks of 16
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].q, 0);
  EXPECT_EQ(s[1].q, 1);
  EXPECT_EQ(s[2].q, 2);
  StepSymbols m = stepSymbols(p.steps[3], p.derived);
  EXPECT_TRUE(m.q && m.p0 && !m.n); // q is a chunk position: replayed graphs re-resolve it
  ResolvedStep r;
  std::string error;
  ASSERT_TRUE(resolveStep(p, 3, s[2], r, error)) << error;
  EXPECT_EQ(std::get<ResolvedMemset>(r).bytes, 12);
}

TEST(GpuProgram, ResolvesSymbols) {
  GpuProgram p;
  ASSERT_EQ(parse(baseProgram(), p), "");
  ResolvedStep r;
  std::string error;
  ASSERT_TRUE(resolveStep(p, 0, {32, 5}, r, error)) << error;
  const auto &l = std::get<ResolvedLaunch>(r);
  EXPECT_EQ(l.grid[0], 5);
  EXPECT_FALSE(l.empty);
  EXPECT_EQ(l.args[1].value, 32);
  EXPECT_EQ(l.args[2].value, 7);
  EXPECT_EQ(l.args[4].memref.offset, 128);
  EXPECT_EQ(l.args[4].memref.sizes[0], 5);
  ASSERT_TRUE(resolveStep(p, 2, {32, 5}, r, error)) << error;
  const auto &a = std::get<ResolvedLaunch>(r);
  EXPECT_EQ(a.grid, (std::array<int64_t, 3>{1, 2, 1})); // ceil(5 / 64) query blocks
  EXPECT_EQ(a.args[0].fields[0].view.sizes[2], 5);      // Q's rows: sq = n
  EXPECT_EQ(a.args[0].fields[24].value, 37);            // skv = p0 + n
  ASSERT_TRUE(resolveStep(p, 2, {0, 60}, r, error)) << error;
  EXPECT_EQ(std::get<ResolvedLaunch>(r).grid[0], 1);
  json g = baseProgram();
  g["steps"][2]["grid_div"] = {16, 1, 1};
  ASSERT_EQ(parse(g, p), "");
  ASSERT_TRUE(resolveStep(p, 2, {0, 33}, r, error)) << error;
  EXPECT_EQ(std::get<ResolvedLaunch>(r).grid[0], 3); // ceil(33 / 16)
  ASSERT_EQ(parse(baseProgram(), p), "");
  ASSERT_TRUE(resolveStep(p, 0, {0, 0}, r, error)) << error;
  EXPECT_TRUE(std::get<ResolvedLaunch>(r).empty); // grid x = n = 0
  ASSERT_TRUE(resolveStep(p, 1, {0, 0}, r, error)) << error;
  EXPECT_TRUE(std::get<ResolvedGemm>(r).empty); // m = 0
  EXPECT_FALSE(resolveStep(p, 9, {0, 0}, r, error));
  EXPECT_NE(error.find("step 9 does not exist"), std::string::npos);
  // A position past the KV cache (state: 64 rows) is refused with the values.
  EXPECT_FALSE(resolveStep(p, 0, {62, 5}, r, error));
  EXPECT_NE(error.find("(p0=62, n=5)"), std::string::npos) << error;
}

// Which steps name p0 / n: what the executor updates in a replayed CUDA
// graph (launch, attention) or keys its graphs on (gemm, memset, copy).
TEST(GpuProgram, StepSymbols) {
  GpuProgram p;
  ASSERT_EQ(parse(baseProgram(), p), "");
  ASSERT_EQ(p.steps.size(), 5u);
  StepSymbols launch = stepSymbols(p.steps[0], p.derived), gemm = stepSymbols(p.steps[1], p.derived),
              attn = stepSymbols(p.steps[2], p.derived), memset = stepSymbols(p.steps[3], p.derived),
              copy = stepSymbols(p.steps[4], p.derived);
  EXPECT_TRUE(launch.p0 && launch.n);
  EXPECT_TRUE(!gemm.p0 && gemm.n); // m = n
  EXPECT_TRUE(attn.p0 && attn.n);  // skv = p0 + n
  EXPECT_FALSE(memset.any());
  EXPECT_TRUE(!copy.p0 && copy.n);
  // Only a non-zero coefficient counts.
  json gpu = baseProgram();
  gpu["steps"][3]["offset_bytes"] = {{"c", 0}, {"p0", 0}, {"n", 0}};
  gpu["steps"][3]["bytes"] = {{"c", 32}};
  gpu["steps"][4]["src_offset_bytes"] = {{"p0", 2}};
  gpu["steps"][4]["bytes"] = 16;
  ASSERT_EQ(parse(gpu, p), "");
  EXPECT_FALSE(stepSymbols(p.steps[3], p.derived).any());
  EXPECT_TRUE(stepSymbols(p.steps[4], p.derived).p0);
  EXPECT_FALSE(stepSymbols(p.steps[4], p.derived).n);
  // A scalar launch argument counts too.
  gpu = baseProgram();
  gpu["steps"][0]["grid"] = {1, 1, 1};
  gpu["steps"][0]["args"] = {{{"i64", {{"n", 1}}}}};
  ASSERT_EQ(parse(gpu, p), "");
  EXPECT_TRUE(stepSymbols(p.steps[0], p.derived).n);
  EXPECT_FALSE(stepSymbols(p.steps[0], p.derived).p0);
}

TEST(GpuProgram, ChecksTheLastChunkOfALength) {
  json g = baseProgram();
  // The state holds 64 rows; a write of 16 rows at p0 would pass at the
  // largest multiple of the chunk below 64 only if n were the real count.
  g["steps"][0]["args"][4]["memref"]["sizes"][0] = 16;
  std::string e = parseError(g);
  EXPECT_EQ(e, "(accepted)"); // 48 + 16 = 64 rows: fits exactly
  g["buffers"][5]["bytes"] = 60 * 4 * 2; // a 60-row cache
  GpuProgram p;
  json m = baseManifest();
  m["max_positions"] = 60;
  EXPECT_NE(parse(g, p, m).find("for a prompt of 60 tokens, chunk 3: step 0 (launch): args[4]: "
                                "accesses bytes up to 512 of buffer 5, which has 480 (p0=48, n=12)"),
            std::string::npos)
      << parse(g, p, m);
  m.erase("max_positions"); // unknown maximum: checked at run time
  ASSERT_EQ(parse(g, p, m), "");
  std::string error;
  EXPECT_TRUE(checkGpuProgramForLength(p, 40, error)) << error;
  EXPECT_FALSE(checkGpuProgramForLength(p, 50, error));
  EXPECT_NE(error.find("chunk 3"), std::string::npos) << error;
}

TEST(GpuProgram, PlansBuffers) {
  GpuProgram p;
  ASSERT_EQ(parse(baseProgram(), p), "");
  BufferPlan plan;
  std::string error;
  ASSERT_TRUE(planBuffers(p, plan, error)) << error;
  ASSERT_EQ(plan.offsets.size(), p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i)
    EXPECT_EQ(plan.offsets[i] % 256, 0u) << "buffer " << i;
  // Weights first, in order, then consts, state, inputs, outputs, arena.
  EXPECT_EQ(plan.offsets[3], 0u);
  EXPECT_EQ(plan.offsets[4], 256u);
  EXPECT_EQ(plan.offsets[8], 512u);
  EXPECT_EQ(plan.offsets[5], 768u);
  EXPECT_EQ(plan.offsets[0], 1280u);
  EXPECT_EQ(plan.offsets[1], 1536u);
  EXPECT_EQ(plan.offsets[2], 1792u);
  EXPECT_EQ(plan.arenaOffset, 2048u);
  EXPECT_EQ(plan.offsets[6], 2048u);
  EXPECT_EQ(plan.offsets[7], 2048u + 512u);
  EXPECT_EQ(plan.totalBytes, 2048u + 4096u);
  EXPECT_EQ(plan.weightBytes, 96u);
  EXPECT_EQ(plan.stateBytes, 512u);
  EXPECT_EQ(plan.constBytes, 64u);
  EXPECT_EQ(plan.ioBytes, 128u + 32u + 256u);
  // Weight 4 sharing weight 3's memory (--dummy-weights): only a weight
  // of the same size; the const after them moves down.
  std::vector<int> sameAs(p.buffers.size(), -1);
  sameAs[4] = 3;
  EXPECT_FALSE(planBuffers(p, plan, error, sameAs)) << "64 vs 32 bytes";
  EXPECT_NE(error.find("cannot share"), std::string::npos) << error;
  GpuProgram same = p;
  same.buffers[4].bytes = 64;
  ASSERT_TRUE(planBuffers(same, plan, error, sameAs)) << error;
  EXPECT_EQ(plan.offsets[3], 0u);
  EXPECT_EQ(plan.offsets[4], 0u);
  EXPECT_EQ(plan.offsets[8], 256u);
  EXPECT_EQ(plan.weightBytes, 64u);
  sameAs[4] = -1;
  sameAs[8] = 5; // a const is never shared: ignored
  ASSERT_TRUE(planBuffers(p, plan, error, sameAs)) << error;
  EXPECT_EQ(plan.offsets[8], 512u);
  EXPECT_FALSE(planBuffers(p, plan, error, std::vector<int>(1, -1)));
  // No buffers still gives a usable (non-empty) allocation.
  GpuProgram empty;
  ASSERT_TRUE(planBuffers(empty, plan, error));
  EXPECT_EQ(plan.totalBytes, 256u);
}

// h20-place-tables: a weight the manifest places on the host has a host
// buffer, planned in its own allocation; the device plan shrinks by it.
TEST(GpuProgram, PlacesTablesOnTheHost) {
  json manifest = baseManifest();
  manifest["weights"][0]["placement"] = "host";
  json g = baseProgram();
  g["buffers"][3]["placement"] = "host";
  GpuProgram p;
  ASSERT_EQ(parse(g, p, manifest), "");
  EXPECT_TRUE(p.buffers[3].host);
  EXPECT_FALSE(p.buffers[4].host);
  // The writer keeps it: parsed again, written again, the same text.
  std::string written = writeGpuProgram(p);
  EXPECT_NE(written.find("\"placement\":\"host\""), std::string::npos) << written;
  GpuProgram again;
  ASSERT_EQ(parse(json::parse(written), again, manifest), "");
  EXPECT_TRUE(again.buffers[3].host);
  EXPECT_EQ(writeGpuProgram(again), written);
  BufferPlan plan;
  std::string error;
  ASSERT_TRUE(planBuffers(p, plan, error)) << error;
  EXPECT_TRUE(plan.onHost[3]);
  EXPECT_EQ(plan.offsets[3], 0u);
  EXPECT_EQ(plan.hostBytes, 256u);
  EXPECT_EQ(plan.hostWeightBytes, 64u);
  // The device allocation: weight 4 first now, the rest 256 bytes lower.
  EXPECT_EQ(plan.offsets[4], 0u);
  EXPECT_EQ(plan.offsets[8], 256u);
  EXPECT_EQ(plan.weightBytes, 32u);
  EXPECT_EQ(plan.totalBytes, 2048u + 4096u - 256u);
  for (size_t i = 0; i < p.buffers.size(); ++i)
    EXPECT_EQ(plan.onHost[i], i == 3) << "buffer " << i;
  // --dummy-weights never shares a host table's memory with a device one.
  GpuProgram same = p;
  same.buffers[4].bytes = 64;
  std::vector<int> sameAs(p.buffers.size(), -1);
  sameAs[4] = 3;
  EXPECT_FALSE(planBuffers(same, plan, error, sameAs));
  EXPECT_NE(error.find("cannot share"), std::string::npos) << error;
  // Without host tables there is no host allocation.
  GpuProgram plain;
  ASSERT_EQ(parse(baseProgram(), plain), "");
  ASSERT_TRUE(planBuffers(plain, plan, error)) << error;
  EXPECT_EQ(plan.hostBytes, 0u);
  // Refused: a placement the manifest does not give, one on another
  // kind of buffer, an unknown one.
  json g2 = baseProgram();
  g2["buffers"][3]["placement"] = "host";
  EXPECT_NE(parseError(g2).find("gpu.buffers[3].placement: weight 'w0' is placed on the host "
                                "here but on the device in the manifest"),
            std::string::npos)
      << parseError(g2);
  EXPECT_NE(parseError(baseProgram(), manifest).find("placed on the device here but on the host"),
            std::string::npos);
  json g3 = baseProgram();
  g3["buffers"][5]["placement"] = "host";
  EXPECT_NE(parseError(g3).find("gpu.buffers[5].placement: only a weight buffer has a placement"),
            std::string::npos)
      << parseError(g3);
  json g4 = g;
  g4["buffers"][3]["placement"] = "disk";
  EXPECT_NE(parseError(g4, manifest).find("\"disk\" is neither \"host\" nor \"device\""),
            std::string::npos)
      << parseError(g4, manifest);
  json m2 = baseManifest();
  m2["weights"][1]["placement"] = "nvme";
  EXPECT_NE(parseError(baseProgram(), m2).find("placement: \"nvme\" is neither"),
            std::string::npos)
      << parseError(baseProgram(), m2);
}

TEST(Manifest, ResolvesOutputShapes) {
  Manifest m;
  std::string error;
  ASSERT_TRUE(parseManifest(baseManifest().dump(), m, error)) << error;
  std::vector<int64_t> shape;
  ASSERT_TRUE(resolveOutputShape(m.outputs[1], {{1, 37}}, shape, error)) << error;
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 37, 4}));
  ASSERT_TRUE(resolveOutputShape(m.outputs[0], {{1, 37}}, shape, error));
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 1, 8}));
  EXPECT_FALSE(resolveOutputShape(m.outputs[1], {}, shape, error));
  EXPECT_NE(error.find("output 'hidden' dim 1 cannot be sized"), std::string::npos);
}

// --- GEMM mapping ---------------------------------------------------------------

namespace {

/// What cuBLASLt computes for `plan` (column-major, op per transpose flag),
/// emulated on doubles; `A`, `B` are the library's operands.
void emulateLibrary(const GemmPlan &plan, const std::vector<double> &A, const std::vector<double> &B,
                    std::vector<double> &C, double alpha, double beta) {
  for (int64_t t = 0; t < plan.batch; ++t)
    for (int64_t i = 0; i < plan.m; ++i)
      for (int64_t j = 0; j < plan.n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < plan.k; ++l) {
          // op(A)(i, l) and op(B)(l, j) on the stored column-major matrices.
          int64_t ar = plan.transA ? l : i, ac = plan.transA ? i : l;
          int64_t br = plan.transB ? j : l, bc = plan.transB ? l : j;
          EXPECT_LT(ar, plan.a.rows);
          EXPECT_LT(ac, plan.a.cols);
          EXPECT_LT(br, plan.b.rows);
          EXPECT_LT(bc, plan.b.cols);
          acc += A[t * plan.a.batchStride + ar + ac * plan.a.ld] *
                 B[t * plan.b.batchStride + br + bc * plan.b.ld];
        }
        double &c = C[t * plan.c.batchStride + i + j * plan.c.ld];
        c = alpha * acc + beta * c;
      }
}

} // namespace

TEST(GemmPlan, TypicalLayouts) {
  GemmPlan plan;
  std::string error;
  // Row-major everything: C^T = B^T A^T, no transposes, library m = n.
  GemmProblem p{1, 3, 5, 7, {0, 7, 1}, {0, 5, 1}, {0, 5, 1}};
  ASSERT_TRUE(planGemm(p, plan, error)) << error;
  EXPECT_TRUE(plan.swapped);
  EXPECT_FALSE(plan.transA);
  EXPECT_FALSE(plan.transB);
  EXPECT_EQ(plan.m, 5);
  EXPECT_EQ(plan.n, 3);
  EXPECT_EQ(plan.a.ld, 5);
  EXPECT_EQ(plan.b.ld, 7);
  EXPECT_EQ(plan.c.ld, 5);
  // x * W^T with W [n, k] row-major (nn.Linear): B has row_stride 1.
  p.b = {0, 1, 7};
  ASSERT_TRUE(planGemm(p, plan, error)) << error;
  EXPECT_TRUE(plan.transA);
  EXPECT_FALSE(plan.transB);
  // Column-major C: no swap.
  p.c = {0, 1, 3};
  ASSERT_TRUE(planGemm(p, plan, error)) << error;
  EXPECT_FALSE(plan.swapped);
  EXPECT_TRUE(plan.transA); // A is row-major
  EXPECT_FALSE(plan.transB);
  // Errors.
  p.a = {0, 2, 2};
  EXPECT_FALSE(planGemm(p, plan, error));
  EXPECT_NE(error.find("one of them must be 1"), std::string::npos) << error;
  p.a = {0, 3, 1}; // rows of 7 elements 3 apart
  EXPECT_FALSE(planGemm(p, plan, error));
  EXPECT_NE(error.find("overlapping rows"), std::string::npos) << error;
  p.a = {0, 7, 1};
  p.batch = 2;
  p.c.batchStride = 0;
  EXPECT_FALSE(planGemm(p, plan, error));
  EXPECT_NE(error.find("batch_stride 0"), std::string::npos) << error;
}

TEST(GemmPlan, MatchesTheRowMajorDefinition) {
  std::mt19937 rng(1234);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    GemmProblem p;
    p.batch = pick(1, 3);
    p.m = pick(1, 6);
    p.n = pick(1, 6);
    p.k = pick(1, 6);
    // Each operand row- or column-major, padded leading dims, maybe broadcast.
    auto strides = [&](int64_t rows, int64_t cols, bool broadcastOk) {
      GemmStrides s;
      bool rowMajor = pick(0, 1);
      int64_t ld = (rowMajor ? cols : rows) + pick(0, 2);
      s.rowStride = rowMajor ? ld : 1;
      s.colStride = rowMajor ? 1 : ld;
      int64_t extent = (rowMajor ? rows : cols) * ld;
      s.batchStride = broadcastOk && pick(0, 3) == 0 ? 0 : extent + pick(0, 3);
      return s;
    };
    p.a = strides(p.m, p.k, true);
    p.b = strides(p.k, p.n, true);
    p.c = strides(p.m, p.n, false);
    auto size = [&](const GemmStrides &s, int64_t rows, int64_t cols) {
      return static_cast<size_t>((p.batch - 1) * s.batchStride + (rows - 1) * s.rowStride +
                                 (cols - 1) * s.colStride + 1);
    };
    std::vector<double> A(size(p.a, p.m, p.k)), B(size(p.b, p.k, p.n)),
        C0(size(p.c, p.m, p.n));
    for (double &x : A)
      x = pick(-4, 4);
    for (double &x : B)
      x = pick(-4, 4);
    for (double &x : C0)
      x = pick(-4, 4);
    double alpha = pick(1, 3), beta = pick(0, 2);
    // Reference, by the definition.
    std::vector<double> ref = C0;
    for (int64_t t = 0; t < p.batch; ++t)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          double acc = 0;
          for (int64_t l = 0; l < p.k; ++l)
            acc += A[t * p.a.batchStride + i * p.a.rowStride + l * p.a.colStride] *
                   B[t * p.b.batchStride + l * p.b.rowStride + j * p.b.colStride];
          double &c = ref[t * p.c.batchStride + i * p.c.rowStride + j * p.c.colStride];
          c = alpha * acc + beta * c;
        }
    GemmPlan plan;
    std::string error;
    ASSERT_TRUE(planGemm(p, plan, error)) << error;
    EXPECT_GE(plan.a.ld, std::max<int64_t>(plan.a.rows, 1));
    EXPECT_GE(plan.b.ld, std::max<int64_t>(plan.b.rows, 1));
    EXPECT_GE(plan.c.ld, std::max<int64_t>(plan.c.rows, 1));
    EXPECT_EQ(plan.c.rows, plan.m);
    EXPECT_EQ(plan.c.cols, plan.n);
    std::vector<double> got = C0;
    emulateLibrary(plan, plan.swapped ? B : A, plan.swapped ? A : B, got, alpha, beta);
    ASSERT_EQ(got, ref) << "trial " << trial << ": batch " << p.batch << " m " << p.m << " n "
                        << p.n << " k " << p.k;
  }
}

// A grouped projection's operands stored with the group inside the row
// ([m, G, k] and [m, G, n], h20-transposes-into-gemms): batch strides
// smaller than a matrix, rows G times longer than a matrix row.
TEST(GemmPlan, InterleavedBatches) {
  const int64_t G = 3, m = 4, n = 2, k = 5;
  GemmProblem p;
  p.batch = G, p.m = m, p.n = n, p.k = k;
  p.a = {k, G * k, 1};
  p.b = {k * n, n, 1};
  p.c = {n, G * n, 1};
  std::vector<double> A(m * G * k), B(G * k * n), C(m * G * n, 0.0);
  for (size_t i = 0; i < A.size(); ++i)
    A[i] = static_cast<double>((i * 7) % 11) - 5;
  for (size_t i = 0; i < B.size(); ++i)
    B[i] = static_cast<double>((i * 5) % 7) - 3;
  std::vector<double> ref = C;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < k; ++l)
          acc += A[(i * G + g) * k + l] * B[(g * k + l) * n + j];
        ref[(i * G + g) * n + j] = acc;
      }
  GemmPlan plan;
  std::string error;
  ASSERT_TRUE(planGemm(p, plan, error)) << error;
  std::vector<double> got = C;
  emulateLibrary(plan, plan.swapped ? B : A, plan.swapped ? A : B, got, 1.0, 0.0);
  EXPECT_EQ(got, ref);
}

// --- Conversions ------------------------------------------------------------------

namespace {
float bitsToFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
} // namespace

TEST(Conversion, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBfloat16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x3F808000)), 0x3F80); // tie -> even (down)
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x3F818000)), 0x3F82); // tie -> even (up)
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x3F808001)), 0x3F81); // above the tie
  EXPECT_EQ(floatToBfloat16(bitsToFloat(0x7F7FFFFF)), 0x7F80); // rounds to infinity
  EXPECT_EQ(floatToBfloat16(INFINITY), 0x7F80);
  uint16_t nan = floatToBfloat16(bitsToFloat(0x7F800001)); // signalling NaN stays NaN
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7F80) == 0x7F80 && (h & 0x7F))
      continue; // NaNs
    ASSERT_EQ(floatToBfloat16(bfloat16ToFloat(static_cast<uint16_t>(h))), h);
  }
}

TEST(Conversion, HalfRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00); // tie with odd 0x7BFF -> infinity
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);    // tie -> even (zero)
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);    // above the tie
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);    // 1.5 units: tie -> even 2
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400); // rounds up to the smallest normal
  uint16_t nan = floatToHalf(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF))
      continue;
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
  // Random floats: the result is a nearest half, ties to even.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-30.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    float f = std::ldexp(1.0f + std::uniform_real_distribution<float>(0, 1)(rng), static_cast<int>(mag(rng)));
    if (i & 1)
      f = -f;
    uint16_t h = floatToHalf(f);
    double got = halfToFloat(h), err = std::fabs(got - f);
    if (std::isinf(got)) {
      ASSERT_GE(std::fabs(f), 65520.0f);
      continue;
    }
    for (int d : {-1, 1}) {
      uint16_t nb = static_cast<uint16_t>(h + d);
      if ((h & 0x7FFF) == 0 && d < 0)
        continue;
      double other = halfToFloat(nb);
      if (std::isinf(other) || ((nb ^ h) & 0x8000))
        continue;
      double oerr = std::fabs(other - f);
      ASSERT_TRUE(err < oerr || (err == oerr && (h & 1) == 0))
          << f << " -> " << std::hex << h << " but " << nb << " is as near";
    }
  }
}

TEST(Conversion, ConvertElements) {
  EXPECT_TRUE(canConvert("float32", "bfloat16"));
  EXPECT_TRUE(canConvert("float32", "float16"));
  EXPECT_TRUE(canConvert("bfloat16", "float32"));
  EXPECT_TRUE(canConvert("int64", "int64"));
  EXPECT_FALSE(canConvert("float16", "bfloat16"));
  EXPECT_FALSE(canConvert("int64", "int32"));
  EXPECT_FALSE(canConvert("float32", "float8"));
  float src[3] = {1.0f, -0.5f, 3.140625f};
  uint16_t bf[3], hf[3];
  convertElements("float32", src, "bfloat16", bf, 3);
  convertElements("float32", src, "float16", hf, 3);
  EXPECT_EQ(bf[0], 0x3F80);
  EXPECT_EQ(hf[1], 0xB800);
  float back[3];
  convertElements("bfloat16", bf, "float32", back, 3);
  EXPECT_FLOAT_EQ(back[2], 3.140625f);
  convertElements("float16", hf, "float32", back, 3);
  EXPECT_FLOAT_EQ(back[1], -0.5f);
  int64_t ints[2] = {5, -7}, out[2];
  convertElements("int64", ints, "int64", out, 2);
  EXPECT_EQ(out[1], -7);
}

// --- all_reduce (tensor parallelism) -------------------------------------------

namespace {
/// baseProgram plus step 5: an in-place bf16 all_reduce of n rows of 4
/// elements of temp buffer 6 (bfloat16).
json allReduceProgram() {
  json g = baseProgram();
  g["steps"].push_back({{"op", "all_reduce"},
                        {"dtype", "bf16"},
                        {"src", 6},
                        {"src_offset_bytes", 0},
                        {"dst", 6},
                        {"dst_offset_bytes", 0},
                        {"bytes", {{"n", 8}}}});
  return g;
}
} // namespace

TEST(GpuProgram, ParsesAllReduce) {
  GpuProgram p;
  ASSERT_EQ(parse(allReduceProgram(), p), "");
  ASSERT_EQ(p.steps.size(), 6u);
  EXPECT_STREQ(stepOpName(p.steps[5]), "all_reduce");
  const auto &a = std::get<AllReduceStep>(p.steps[5]);
  EXPECT_EQ(a.dtype, "bfloat16"); // "bf16" spelled out
  EXPECT_EQ(a.src, 6);
  EXPECT_EQ(a.dst, 6);
  EXPECT_EQ(a.bytes.n, 8);
  StepSymbols sy = stepSymbols(p.steps[5], p.derived);
  EXPECT_TRUE(sy.n);
  EXPECT_FALSE(sy.p0);
  ResolvedStep r;
  std::string error;
  ASSERT_TRUE(resolveStep(p, 5, {16, 5}, r, error)) << error;
  const auto &ra = std::get<ResolvedAllReduce>(r);
  EXPECT_EQ(ra.bytes, 40);
  EXPECT_TRUE(ra.inPlace());

  // f32 and the long spelling; a copy to another buffer (not in place).
  json g = baseProgram();
  g["steps"].push_back({{"op", "all_reduce"}, {"dtype", "float32"}, {"src", 7},
                        {"src_offset_bytes", 0}, {"dst", 2}, {"dst_offset_bytes", 16},
                        {"bytes", 64}});
  ASSERT_EQ(parse(g, p), "");
  EXPECT_EQ(std::get<AllReduceStep>(p.steps[5]).dtype, "float32");
  ASSERT_TRUE(resolveStep(p, 5, {0, 16}, r, error)) << error;
  EXPECT_FALSE(std::get<ResolvedAllReduce>(r).inPlace());
}

TEST(GpuProgram, RejectsBadAllReduces) {
  struct Case {
    const char *name;
    std::function<void(json &)> mutate;
    const char *message;
  };
  const Case cases[] = {
      {"unknown dtype", [](json &s) { s["dtype"] = "f8"; },
       "step 5 (all_reduce): dtype: unsupported dtype 'f8' (f32, f16, bf16)"},
      {"integer dtype", [](json &s) { s["dtype"] = "int32"; }, "unsupported dtype 'int32'"},
      {"missing dtype", [](json &s) { s.erase("dtype"); },
       "step 5 (all_reduce): missing field 'dtype'"},
      {"missing src", [](json &s) { s.erase("src"); }, "step 5 (all_reduce): missing field 'src'"},
      {"missing bytes", [](json &s) { s.erase("bytes"); },
       "step 5 (all_reduce): missing field 'bytes'"},
      {"odd bytes", [](json &s) { s["bytes"] = 6; s["dtype"] = "f32"; s["src"] = 7; s["dst"] = 7; },
       "step 5 (all_reduce): bytes: 6 is not a multiple of the 4-byte float32 element"},
      {"odd offset", [](json &s) { s["dst_offset_bytes"] = 3; },
       "step 5 (all_reduce): dst_offset_bytes: 3 is not a multiple of the 2-byte bfloat16 element"},
      {"buffer out of range", [](json &s) { s["dst"] = 42; },
       "step 5 (all_reduce): dst: 42 is not a buffer index"},
      {"buffer of another dtype", [](json &s) { s["dtype"] = "f32"; },
       "step 5 (all_reduce): src: reads buffer 6 (bfloat16) as float32"},
      {"linear expression", [](json &s) { s["bytes"] = {{"m", 2}}; },
       "unknown key 'm'"},
  };
  for (const Case &c : cases) {
    json g = allReduceProgram();
    c.mutate(g["steps"][5]);
    std::string e = parseError(g);
    EXPECT_NE(e.find(c.message), std::string::npos) << c.name << ": " << e;
  }
}

TEST(GpuProgram, ResolvesAllReduceRanges) {
  // bytes = 2n: a whole bf16 element per token.
  json g = allReduceProgram();
  g["steps"][5]["bytes"] = {{"n", 2}};
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  ResolvedStep r;
  std::string error;
  EXPECT_TRUE(resolveStep(p, 5, {0, 3}, r, error)) << error;
  // bytes = 3n with f16: odd for odd n (caught per chunk, not at parse time).
  g["steps"][5]["bytes"] = {{"n", 3}};
  g["steps"][5]["src"] = g["steps"][5]["dst"] = 7; // no dtype
  g["steps"][5]["dtype"] = "f16";
  ASSERT_EQ(parse(g, p), "");
  EXPECT_TRUE(resolveStep(p, 5, {0, 2}, r, error)) << error;
  EXPECT_FALSE(resolveStep(p, 5, {0, 3}, r, error));
  EXPECT_NE(error.find("step 5 (all_reduce): bytes: 9 is not a multiple of the 2-byte float16"),
            std::string::npos)
      << error;
  // Past the buffer's end.
  g = allReduceProgram();
  g["steps"][5]["bytes"] = 2048;
  EXPECT_NE(parseError(g).find("step 5 (all_reduce): src: accesses bytes up to 2048 of buffer 6"),
            std::string::npos)
      << parseError(g);
  // Overlapping but not the same range (temps 6 and 7 alias: 7 starts at
  // arena byte 512).
  g = allReduceProgram();
  g["steps"][5]["bytes"] = 64;
  g["steps"][5]["dst_offset_bytes"] = 32;
  EXPECT_NE(parseError(g).find("dst: overlaps the source without being the same range"),
            std::string::npos)
      << parseError(g);
  g["steps"][5]["dst"] = 7;
  g["steps"][5]["dtype"] = "bf16";
  g["steps"][5]["src_offset_bytes"] = 512;
  g["steps"][5]["dst_offset_bytes"] = 0; // arena byte 512 both: in place through the alias
  EXPECT_EQ(parseError(g), "(accepted)");
}

// --- Declared layers --------------------------------------------------------------

TEST(GpuProgram, ChecksDeclaredLayers) {
  namespace dec = h20::test::decoder_fixture;
  GpuProgram p;
  ASSERT_EQ(dec::parse(dec::program(), p), "");
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.layers[0].firstStep, 0);
  EXPECT_EQ(p.layers[0].attentionStep, 4);
  auto error = [&](const std::function<void(json &)> &edit) {
    json g = dec::program();
    edit(g);
    GpuProgram q;
    return dec::parse(g, q);
  };
  auto has = [](const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
  };
  // A gap between layers.
  std::string e = error([](json &g) { g["layers"][1]["first_step"] = 6; });
  EXPECT_TRUE(has(e, "gpu.layers[1].first_step: must be 5")) << e;
  // A layer that does not end at an attention step.
  e = error([](json &g) { g["layers"][0]["attention_step"] = 3; });
  EXPECT_TRUE(has(e, "gpu.layers[0]: step 3 is not an attention step")) << e;
  // Two attentions in one layer.
  e = error([](json &g) {
    g["layers"] = {{{"layer", 0}, {"first_step", 0}, {"attention_step", 9}}};
  });
  EXPECT_TRUE(has(e, "gpu.layers[0]: step 4 is an attention step inside the layer")) << e;
  // An attention no layer declares.
  e = error([](json &g) { g["layers"].erase(1); });
  EXPECT_TRUE(has(e, "attention step 9 belongs to no declared layer")) << e;
  // Out of range, negative layer, wrong type.
  e = error([](json &g) { g["layers"][1]["attention_step"] = 99; });
  EXPECT_TRUE(has(e, "gpu.layers[1].attention_step: must be in [5, 12)")) << e;
  e = error([](json &g) { g["layers"][0]["layer"] = -1; });
  EXPECT_TRUE(has(e, "gpu.layers[0].layer: must be >= 0")) << e;
  e = error([](json &g) { g["layers"] = 3; });
  EXPECT_TRUE(has(e, "gpu.layers: expected an array")) << e;
}
