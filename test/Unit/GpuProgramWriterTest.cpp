//===- GpuProgramWriterTest.cpp - the program format round-trips ---------===//
//
// writeGpuProgram is the inverse of parseGpuProgram: the compiler writes
// its program with it and the runtime reads it back, so every field must
// survive write -> parse unchanged. Checked on a program with every step
// kind, argument kind and optional field, and on the compiler's defaults.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/GpuProgram.h"

#include "ProgramFixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace h20::runtime;
using json = nlohmann::json;
using namespace h20::test::base_fixture;

namespace {

/// baseProgram plus what it lacks: a grouped GEMM, an all-reduce, f64 /
/// f16 / bf16 scalars, alpha/beta, tf32 and tensor maps in the attention's
/// struct.
json fullProgram() {
  json g = baseProgram();
  g["tf32"] = true;
  json &launchArgs = g["steps"][0]["args"];
  launchArgs.push_back({{"f64", 0.125}});
  launchArgs.push_back({{"f16", 0.1}});
  launchArgs.push_back({{"bf16", -3.5}});
  json grouped = g["steps"][1];
  grouped["alpha"] = 0.5;
  grouped["beta"] = 1.0;
  grouped["groups"] = {{"count", 2}, {"offsets", {{"buffer", 7}, {"offset", {{"c", 4}, {"p0", 2}}}}}};
  g["steps"].push_back(grouped);
  json &fields = g["steps"][2]["args"][0]["struct"]["fields"];
  json map = fields[0]["pointer"];
  map["box"] = {1, 1, 64, 64};
  map["swizzle"] = 128;
  fields.push_back({{"at", 256}, {"tensor_map", map}, {"written", false}});
  fields.push_back({{"at", 220}, {"tensor_maps_valid", true}});
  fields.push_back({{"at", 212}, {"f32", 30.0}});
  g["steps"].push_back({{"op", "all_reduce"},
                        {"dtype", "f32"},
                        {"src", 7},
                        {"src_offset_bytes", 0},
                        {"dst", 7},
                        {"dst_offset_bytes", 0},
                        {"bytes", {{"n", 16}}}});
  return g;
}

/// Parses `gpu`, writes it, parses the text again: both parses must be
/// the same program, which the written text witnesses field by field.
void expectRoundTrip(const json &gpu) {
  GpuProgram first;
  ASSERT_EQ(parse(gpu, first), "");
  std::string written = writeGpuProgram(first);
  GpuProgram second;
  ASSERT_EQ(parse(json::parse(written), second), "") << written;
  EXPECT_EQ(writeGpuProgram(second), written);
  EXPECT_EQ(first.steps.size(), second.steps.size());
  EXPECT_EQ(first.buffers.size(), second.buffers.size());
}

} // namespace

TEST(GpuProgramWriter, RoundTripsTheBaseProgram) { expectRoundTrip(baseProgram()); }

TEST(GpuProgramWriter, RoundTripsEveryStepAndArgumentKind) {
  json full = fullProgram();
  expectRoundTrip(full);
  GpuProgram p;
  ASSERT_EQ(parse(json::parse(writeGpuProgram([&] {
                    GpuProgram q;
                    EXPECT_EQ(parse(full, q), "");
                    return q;
                  }())),
                  p),
            "");
  EXPECT_TRUE(p.tf32);
  ASSERT_EQ(p.steps.size(), 7u);
  const auto &l = std::get<LaunchStep>(p.steps[0]);
  ASSERT_EQ(l.args.size(), 8u);
  EXPECT_EQ(l.args[1].kind, LaunchArg::I64);
  EXPECT_EQ(l.args[1].value.p0, 1);
  EXPECT_EQ(l.args[4].dtype, "bfloat16");
  EXPECT_EQ(l.args[4].offset.p0, 4);
  EXPECT_EQ(l.args[5].kind, LaunchArg::F64);
  EXPECT_EQ(l.args[5].f64, 0.125);
  EXPECT_EQ(l.args[6].kind, LaunchArg::F16);
  EXPECT_EQ(l.args[6].half, floatToHalf(0.1f));
  EXPECT_EQ(l.args[7].kind, LaunchArg::BF16);
  EXPECT_EQ(l.args[7].half, floatToBfloat16(-3.5f));
  const auto &gg = std::get<GemmStep>(p.steps[5]);
  EXPECT_EQ(gg.groups, 2);
  EXPECT_EQ(gg.groupBuffer, 7);
  EXPECT_EQ(gg.groupOffset.c, 4);
  EXPECT_EQ(gg.groupOffset.p0, 2);
  EXPECT_EQ(gg.alpha, 0.5);
  EXPECT_EQ(gg.beta, 1.0);
  const auto &a = std::get<LaunchStep>(p.steps[2]);
  EXPECT_EQ(a.role, "attention");
  EXPECT_EQ(a.gridDiv[0], 64);
  const std::vector<StructField> &f = a.args[0].fields;
  ASSERT_EQ(f.size(), 31u);
  EXPECT_EQ(f[24].value.p0, 1); // skv
  EXPECT_EQ(f[24].value.n, 1);
  EXPECT_FLOAT_EQ(f[26].f32, 0.7f); // scale
  EXPECT_EQ(f[28].kind, StructField::TensorMap);
  EXPECT_EQ(f[28].box, (std::vector<int64_t>{1, 1, 64, 64}));
  EXPECT_EQ(f[28].swizzle, 128);
  EXPECT_FALSE(f[28].written);
  EXPECT_EQ(f[28].sizes[2].n, 1);
  EXPECT_EQ(f[29].kind, StructField::TensorMapsValid);
  EXPECT_EQ(f[29].at, 220);
  EXPECT_FLOAT_EQ(f[30].f32, 30.0f);
  const auto &r = std::get<AllReduceStep>(p.steps[6]);
  EXPECT_EQ(r.dtype, "float32");
  EXPECT_EQ(r.bytes.n, 16);
}

/// A block-scaled FP8 gemm (GpuProgram.h "gemm"): float8 A [4, 32]
/// row-major, B = W^T of W [16, 32], bf16 C, and its two scale views, in
/// temporaries past the base program's.
json fp8Program(const char *modeB = "blk128x128") {
  json g = baseProgram();
  json &bufs = g["buffers"];
  const int base = static_cast<int>(bufs.size());
  bufs.push_back({{"kind", "temp"}, {"bytes", 128}, {"offset", 2048}, {"dtype", "float8_e4m3fn"}});
  bufs.push_back({{"kind", "temp"}, {"bytes", 512}, {"offset", 2304}, {"dtype", "float8_e4m3fn"}});
  bufs.push_back({{"kind", "temp"}, {"bytes", 32}, {"offset", 3072}, {"dtype", "float32"}});
  bufs.push_back({{"kind", "temp"}, {"bytes", 128}, {"offset", 3328}, {"dtype", "bfloat16"}});
  auto mat = [](int b, int row, int col) {
    return json{{"buffer", b},
                {"offset", 0},
                {"batch_stride", 0},
                {"row_stride", row},
                {"col_stride", col}};
  };
  g["steps"].push_back({{"op", "gemm"},
                        {"dtype_a", "float8_e4m3fn"},
                        {"dtype_b", "float8_e4m3fn"},
                        {"dtype_c", "bfloat16"},
                        {"batch", 1},
                        {"m", 4},
                        {"n", 16},
                        {"k", 32},
                        {"a", mat(base, 32, 1)},
                        {"b", mat(base + 1, 1, 32)},
                        {"c", mat(base + 3, 16, 1)},
                        {"scale_a", {{"mode", "vec128"}, {"buffer", base + 2}, {"offset", 0}}},
                        {"scale_b", {{"mode", modeB}, {"buffer", base + 2}, {"offset", 4}}}});
  return g;
}

TEST(GpuProgramWriter, RoundTripsABlockScaledFp8Gemm) {
  json g = fp8Program();
  expectRoundTrip(g);
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  const auto &s = std::get<GemmStep>(p.steps.back());
  EXPECT_EQ(s.dtypeA, "float8_e4m3fn");
  EXPECT_EQ(s.scaleA.mode, "vec128");
  EXPECT_EQ(s.scaleB.mode, "blk128x128");
  EXPECT_EQ(s.scaleB.buffer, s.scaleA.buffer);
  EXPECT_EQ(s.scaleB.offset.c, 4);
  GpuProgram bad;
  EXPECT_NE(parse(fp8Program("vec128"), bad).find("scale_b.mode: must be \"blk128x128\""),
            std::string::npos);
  json noScales = fp8Program();
  noScales["steps"].back().erase("scale_b");
  EXPECT_NE(parse(noScales, bad).find("scale_b"), std::string::npos);
}

// An expert-parallel rank's first expert: a launch argument linear in the
// `rank` symbol, declared only where a step reads it; it round-trips,
// marks its step, evaluates with the rank, and is refused undeclared.
TEST(GpuProgramWriter, RoundTripsTheRankSymbol) {
  json g = baseProgram();
  g["symbols"] = {"p0", "n", "rank"};
  g["steps"][0]["args"][2] = {{"i32", {{"c", 0}, {"rank", 48}}}};
  expectRoundTrip(g);
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  const LaunchArg &a = std::get<LaunchStep>(p.steps[0]).args[2];
  EXPECT_EQ(a.value.r, 48);
  EXPECT_FALSE(a.value.isConstant());
  EXPECT_TRUE(stepSymbols(p.steps[0], p.derived).rank);
  EXPECT_FALSE(stepSymbols(p.steps[1], p.derived).rank);
  int64_t v = -1;
  SymbolValues s;
  s.rank = 3;
  ASSERT_TRUE(a.value.evaluate(s, v));
  EXPECT_EQ(v, 144);
  g["symbols"] = {"p0", "n"};
  GpuProgram bad;
  EXPECT_NE(parse(g, bad).find("uses symbol 'rank', which gpu.symbols does not declare"),
            std::string::npos);
}

// Derived symbols (a compressor's groups of 4 split by chunks of 16 + 2):
// floor((p0 + 2) / 4) and floor(p0 / 3) in a memset's size round-trip,
// evaluate per chunk in chunkSchedule (floor, not truncation), mark the
// step as naming p0 (and n where their `of` does), and malformed
// declarations are refused with the field named (7 ways).
TEST(GpuProgramWriter, RoundTripsDerivedSymbols) {
  json g = baseProgram();
  g["derived"] = {{{"of", {{"c", 2}, {"p0", 1}}}, {"div", 4}},
                  {{"of", {{"c", -5}, {"p0", 1}, {"n", 1}}}, {"div", 3}}};
  // 2 d0 - d1 + 4 stays within the memset's 32-byte buffer for every
  // chunk of the longest prompt (64 tokens), which the parser checks.
  g["steps"][3]["bytes"] = {{"c", 4}, {"d0", 2}, {"d1", -1}};
  expectRoundTrip(g);
  GpuProgram p;
  ASSERT_EQ(parse(g, p), "");
  ASSERT_EQ(p.derived.size(), 2u);
  EXPECT_EQ(p.derived[0].div, 4);
  EXPECT_EQ(p.derived[1].of.n, 1);
  auto chunks = chunkSchedule(p, 40); // chunks of 16: p0 = 0, 16, 32; n = 16, 16, 8
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].d[0], 0);  // 2 / 4
  EXPECT_EQ(chunks[1].d[0], 4);  // 18 / 4
  EXPECT_EQ(chunks[2].d[0], 8);  // 34 / 4
  EXPECT_EQ(chunks[0].d[1], 3);  // 11 / 3
  EXPECT_EQ(chunks[2].d[1], 11); // 35 / 3
  SymbolValues neg{0, 1, 0};
  ASSERT_TRUE(deriveSymbols(p.derived, neg));
  EXPECT_EQ(neg.d[1], -2); // floor(-4 / 3), not truncation's -1
  ResolvedStep r;
  std::string error;
  ASSERT_TRUE(resolveStep(p, 3, chunks[1], r, error)) << error;
  EXPECT_EQ(std::get<ResolvedMemset>(r).bytes, 2 * 4 - 9 + 4); // d0 = 18 / 4, d1 = 27 / 3
  StepSymbols m = stepSymbols(p.steps[3], p.derived);
  EXPECT_TRUE(m.p0 && m.n);
  EXPECT_FALSE(stepSymbols(p.steps[3], {}).any()); // without the table: constant
  GpuProgram bad;
  auto refused = [&](json d, const char *what) {
    json b = g;
    b["symbols"] = {"p0", "n", "rank"};
    b["derived"] = std::move(d);
    std::string e = parse(b, bad);
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  refused(json::array({{{"of", {{"p0", 1}}}, {"div", 0}}, g["derived"][1]}), "gpu.derived[0].div");
  refused(json::array({{{"of", {{"p0", 1}}}, {"div", (int64_t(1) << 40) + 1}}, g["derived"][1]}),
          "must be in [1, 2^40]");
  refused(json::array({{{"of", {{"rank", 1}}}, {"div", 4}}, g["derived"][1]}),
          "may name only p0, n and q");
  refused(json::array({{{"of", {{"d1", 1}}}, {"div", 4}}, g["derived"][1]}),
          "which gpu.derived does not declare");
  refused(json::array({{{"of", {{"p0", int64_t(1) << 21}}}, {"div", 4}}, g["derived"][1]}),
          "outside +-2^20");
  refused(json::array({g["derived"][0]}), "uses derived symbol 'd1'");
  json many = json::array();
  for (int k = 0; k < 9; ++k)
    many.push_back(g["derived"][0]);
  refused(many, "at most 8 derived symbols");
}

// What the compiler builds: a program from structs, never parsed before.
TEST(GpuProgramWriter, WritesAProgramBuiltFromStructs) {
  GpuProgram p;
  p.arch = "sm_90";
  p.symbols = {"p0", "n"};
  p.outputs = {{OutputMode::Whole, 0}, {OutputMode::Whole, 0}};
  p.modules = {{"kernels", "kernels.ptx", ""}};
  p.arenaBytes = 512;
  p.buffers.push_back({BufferKind::Output, 0, 256, "float32", 0, "", 0});
  p.buffers.push_back({BufferKind::Output, 1, 256, "float32", 0, "", 0});
  p.buffers.push_back({BufferKind::Temp, -1, 256, "float32", 256, "", 0});
  MemsetStep m;
  m.buffer = 2;
  m.offsetBytes = LinearExpr{0, 0, 1};
  m.bytes = LinearExpr::constant(4);
  m.value = 7;
  p.steps.push_back(m);
  CopyStep c;
  c.src = 2;
  c.dst = 0;
  c.bytes = LinearExpr::constant(32);
  p.steps.push_back(c);
  json manifest = baseManifest();
  manifest["outputs"][1]["shape"] = {1, 4, 4};
  manifest["outputs"][1].erase("dims_from");
  GpuProgram back;
  ASSERT_EQ(parse(json::parse(writeGpuProgram(p)), back, manifest), "") << writeGpuProgram(p);
  EXPECT_FALSE(back.chunking.has_value());
  EXPECT_FALSE(back.tf32);
  ASSERT_EQ(back.buffers.size(), 3u);
  EXPECT_EQ(back.buffers[2].offset, 256);
  EXPECT_EQ(back.buffers[2].dtype, "float32");
  const auto &ms = std::get<MemsetStep>(back.steps[0]);
  EXPECT_EQ(ms.offsetBytes.n, 1);
  EXPECT_EQ(ms.value, 7);
  EXPECT_EQ(std::get<CopyStep>(back.steps[1]).bytes.c, 32);
  EXPECT_EQ(writeGpuProgram(back), writeGpuProgram(p));
}

TEST(GpuProgramWriter, RoundTripsDeclaredLayers) {
  json g = h20::test::decoder_fixture::program();
  GpuProgram first;
  ASSERT_EQ(h20::test::decoder_fixture::parse(g, first), "");
  ASSERT_EQ(first.layers.size(), 2u);
  json written = json::parse(writeGpuProgram(first));
  EXPECT_EQ(written["layers"], g["layers"]);
  GpuProgram second;
  ASSERT_EQ(h20::test::decoder_fixture::parse(written, second), "");
  ASSERT_EQ(second.layers.size(), 2u);
  EXPECT_EQ(second.layers[1].layer, 1);
  EXPECT_EQ(second.layers[1].firstStep, 5);
  EXPECT_EQ(second.layers[1].attentionStep, 9);
  // No layers declared: none written.
  g.erase("layers");
  GpuProgram none;
  ASSERT_EQ(h20::test::decoder_fixture::parse(g, none), "");
  EXPECT_FALSE(json::parse(writeGpuProgram(none)).contains("layers"));
}
