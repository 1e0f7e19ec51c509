//===- ProgramFixtures.h - GPU programs for the runtime's unit tests -----===//
//
// Two hand-written programs in the JSON format h20-opt emits (GpuProgram.h),
// shared by the tests that parse, plan and schedule them without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TEST_UNIT_PROGRAMFIXTURES_H
#define H20_TEST_UNIT_PROGRAMFIXTURES_H

#include "h20/Runtime/Cuda/AttentionParams.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace h20::test {

/// What a dense attention step reads and writes: Q, K, V, O as
/// {"buffer", "offset", "strides"} (4 strides: batch, head, seq, dim) of
/// [batch, heads | kv_heads, sq | skv, dim] views of `dtype`.
struct AttentionSpec {
  std::string kernel = "attn";
  nlohmann::json q, k, v, o;
  int64_t heads = 1, kvHeads = 1, dim = 1;
  nlohmann::json sq = 1, skv = 1;
  double scale = 1.0;
  bool causal = false;
  int64_t blockM = 64, threads = 128, smem = 0;
  bool tensorMaps = false; ///< TMA tensor maps of Q, K, V (the wgmma kernel's)
  std::string dtype = "bfloat16";
  nlohmann::json batch = 1;
  int64_t windowLeft = -1;
  double softcap = 0.0;
};

/// The dense attention step as h20-opt writes it (LibraryCallSteps.cpp): a
/// launch with one struct argument laid out as H20AttnParams, grid (sq,
/// heads, 1) divided by (block_m, 1, 1), role "attention".
inline nlohmann::json attentionLaunch(const AttentionSpec &a) {
  using json = nlohmann::json;
  using P = H20AttnParams;
  json fields = json::array();
  auto view = [&](const json &x, int64_t heads, const json &seq) {
    json v = x;
    v["sizes"] = {a.batch, heads, seq, a.dim};
    v["dtype"] = a.dtype;
    return v;
  };
  const struct {
    size_t pointer, stride, map;
    const json *x;
    int64_t heads;
    const json *seq;
  } ops[4] = {{offsetof(P, q), offsetof(P, q_stride), offsetof(P, tm_q), &a.q, a.heads, &a.sq},
              {offsetof(P, k), offsetof(P, k_stride), offsetof(P, tm_k), &a.k, a.kvHeads, &a.skv},
              {offsetof(P, v), offsetof(P, v_stride), offsetof(P, tm_v), &a.v, a.kvHeads, &a.skv},
              {offsetof(P, o), offsetof(P, o_stride), 0, &a.o, a.heads, &a.sq}};
  for (int i = 0; i < 4; ++i) {
    json v = view(*ops[i].x, ops[i].heads, *ops[i].seq);
    json pointer = {{"at", ops[i].pointer}, {"pointer", v}, {"written", i == 3}};
    if (i == 1 || i == 2)
      pointer["kv"] = true; // K, V
    fields.push_back(pointer);
    for (int d = 0; d < 4; ++d)
      fields.push_back({{"at", ops[i].stride + 8 * d}, {"i64", (*ops[i].x)["strides"][d]}});
    if (a.tensorMaps && i < 3) {
      v["box"] = {1, 1, 64, 64};
      v["swizzle"] = 128;
      json map = {{"at", ops[i].map}, {"tensor_map", v}, {"written", false}};
      if (i > 0)
        map["kv"] = true;
      fields.push_back(map);
    }
  }
  fields.push_back({{"at", offsetof(P, batch)}, {"i64", a.batch}});
  fields.push_back({{"at", offsetof(P, heads)}, {"i64", a.heads}});
  fields.push_back({{"at", offsetof(P, kv_heads)}, {"i64", a.kvHeads}});
  fields.push_back({{"at", offsetof(P, sq)}, {"i64", a.sq}});
  fields.push_back({{"at", offsetof(P, skv)}, {"i64", a.skv}});
  fields.push_back({{"at", offsetof(P, window_left)}, {"i64", a.windowLeft}});
  fields.push_back({{"at", offsetof(P, scale)}, {"f32", a.scale}});
  if (a.softcap != 0)
    fields.push_back({{"at", offsetof(P, softcap)}, {"f32", a.softcap}});
  fields.push_back({{"at", offsetof(P, causal)}, {"i32", a.causal ? 1 : 0}});
  if (a.tensorMaps)
    fields.push_back({{"at", offsetof(P, tma)}, {"tensor_maps_valid", true}});
  return {
      {"op", "launch"},
      {"module", 0},
      {"kernel", a.kernel},
      {"grid", {a.sq, a.heads, a.batch}},
      {"grid_div", {a.blockM, 1, 1}},
      {"block", {a.threads, 1, 1}},
      {"smem", a.smem},
      {"role", "attention"},
      {"args", {{{"struct", {{"bytes", sizeof(P)}, {"align", alignof(P)}, {"fields", fields}}}}}}};
}

/// One step of each op over a small model (GpuProgramTest, RunPlanTest).
namespace base_fixture {
using json = nlohmann::json;
using namespace h20::runtime;

/// A manifest for a small model: ids [1, S] int64 -> logits [1, 1, 8] and
/// hidden rows [1, S, 4]; weights w0 [4, 8] float32 and w1 [8] float16.
inline json baseManifest() {
  return json{
      {"format", "h20-artifact"},
      {"target", "h200"},
      {"max_positions", 64},
      {"inputs", {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}}},
      {"outputs",
       {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {1, 1, 8}}},
        {{"name", "hidden"},
         {"dtype", "float32"},
         {"shape", {1, -1, 4}},
         {"dims_from", {nullptr, {{"input", 0}, {"dim", 1}}, nullptr}}}}},
      {"weights",
       {{{"name", "w0"},
         {"file", "m.bin"},
         {"dtype", "float32"},
         {"shape", {4, 8}},
         {"offset", 0},
         {"length", 128}},
        {{"name", "w1"},
         {"file", "m.bin"},
         {"dtype", "float16"},
         {"shape", {8}},
         {"offset", 128},
         {"length", 16}}}},
      {"blobs",
       {{{"name", "kernels.ptx"}, {"kind", "ptx"}, {"offset", 0}, {"size", 100}},
        {{"name", "consts.bin"}, {"kind", "data"}, {"offset", 128}, {"size", 64}}}},
  };
}

/// A valid program for baseManifest: chunks of 16 tokens; one step of
/// each op.
inline json baseProgram() {
  json mat = {{"buffer", 0}, {"offset", 0}, {"batch_stride", 0}, {"row_stride", 4},
              {"col_stride", 1}};
  return json{
      {"arch", "sm_90"},
      {"symbols", {"p0", "n"}},
      {"chunking", {{"chunk", 16}, {"input", 0}, {"dim", 1}, {"pad_value", 0}}},
      {"outputs", {{{"mode", "last"}}, {{"mode", "rows"}, {"dim", 1}}}},
      {"modules", {{{"name", "kernels"}, {"ptx_blob", "kernels.ptx"}, {"cubin_blob", nullptr}}}},
      {"arena_bytes", 4096},
      {"buffers",
       {
           {{"kind", "input"}, {"index", 0}, {"bytes", 128}},                      // 0
           {{"kind", "output"}, {"index", 0}, {"bytes", 32}},                      // 1
           {{"kind", "output"}, {"index", 1}, {"bytes", 256}},                     // 2
           {{"kind", "weight"}, {"index", 0}, {"bytes", 64}, {"dtype", "bfloat16"}}, // 3
           {{"kind", "weight"}, {"index", 1}, {"bytes", 32}, {"dtype", "float32"}},  // 4
           {{"kind", "state"}, {"bytes", 64 * 4 * 2}, {"dtype", "bfloat16"}},      // 5: [64, 4]
           {{"kind", "temp"}, {"bytes", 1024}, {"offset", 0}, {"dtype", "bfloat16"}}, // 6
           {{"kind", "temp"}, {"bytes", 1024}, {"offset", 512}},                   // 7 (aliases 6)
           {{"kind", "const"}, {"blob", "consts.bin"}, {"blob_offset", 0}, {"bytes", 64}}, // 8
       }},
      {"steps",
       {
           {{"op", "launch"},
            {"module", 0},
            {"kernel", "embed"},
            {"grid", {{{"n", 1}}, 1, 1}},
            {"block", {128, 1, 1}},
            {"smem", 0},
            {"args",
             {{{"memref",
                {{"buffer", 0}, {"offset", 0}, {"sizes", {1, {{"n", 1}}}}, {"strides", {16, 1}}}}},
              {{"i64", {{"p0", 1}}}},
              {{"i32", 7}},
              {{"f32", 0.5}},
              {{"memref",
                {{"buffer", 5},
                 {"offset", {{"p0", 4}}},
                 {"sizes", {{{"n", 1}}, 4}},
                 {"strides", {4, 1}},
                 {"dtype", "bfloat16"}}}}}}},
           {{"op", "gemm"},
            {"dtype_a", "bfloat16"},
            {"dtype_b", "bfloat16"},
            {"dtype_c", "float32"},
            {"batch", 1},
            {"m", {{"n", 1}}},
            {"n", 8},
            {"k", 4},
            {"alpha", 1.0},
            {"beta", 0.0},
            {"a", {{"buffer", 6}, {"offset", 0}, {"batch_stride", 0}, {"row_stride", 4}, {"col_stride", 1}}},
            {"b", {{"buffer", 3}, {"offset", 0}, {"batch_stride", 0}, {"row_stride", 8}, {"col_stride", 1}}},
            {"c", {{"buffer", 7}, {"offset", 0}, {"batch_stride", 0}, {"row_stride", 8}, {"col_stride", 1}}}},
           attentionLaunch({"attn",
                            {{"buffer", 6}, {"offset", 0}, {"strides", {0, 2, 4, 1}}},
                            {{"buffer", 5}, {"offset", 0}, {"strides", {0, 0, 4, 1}}},
                            {{"buffer", 5}, {"offset", 2}, {"strides", {0, 0, 4, 1}}},
                            {{"buffer", 6}, {"offset", 0}, {"strides", {0, 2, 4, 1}}},
                            /*heads=*/2, /*kvHeads=*/1, /*dim=*/2, {{"n", 1}},
                            {{"p0", 1}, {"n", 1}}, /*scale=*/0.7, /*causal=*/true,
                            /*blockM=*/64, /*threads=*/128, /*smem=*/100000}),
           {{"op", "memset"}, {"buffer", 1}, {"offset_bytes", 0}, {"bytes", 32}, {"value", 0}},
           {{"op", "copy"},
            {"src", 7},
            {"src_offset_bytes", 0},
            {"dst", 2},
            {"dst_offset_bytes", 0},
            {"bytes", {{"n", 16}}}},
       }},
  };
}

/// Parses `gpu` as the program of baseManifest (or `manifest`); returns the
/// error ("" on success).
inline std::string parse(const json &gpu, GpuProgram &p, json manifest = baseManifest()) {
  manifest["gpu"] = gpu;
  std::string text = manifest.dump(), error;
  Manifest m;
  if (!parseManifest(text, m, error))
    return "manifest: " + error;
  if (!parseGpuProgram(text, m, 4096, p, error))
    return error.empty() ? "(empty error)" : error;
  return "";
}

inline std::string parseError(const json &gpu, json manifest = baseManifest()) {
  GpuProgram p;
  std::string e = parse(gpu, p, std::move(manifest));
  return e.empty() ? "(accepted)" : e;
}

} // namespace base_fixture

/// A 2-layer decoder that context parallelism can split
/// (ContextParallelTest, RunPlanTest).
namespace decoder_fixture {
using json = nlohmann::json;
using namespace h20::runtime;

// A 2-layer decoder in the shape h20-opt emits: chunks of C = 4 tokens, a
// fused KV cache [layers 2][k/v 2][heads 2][S 64][D 4] in bfloat16 (state
// buffer 3), per layer a QKV kernel, a K write and a V write into the
// cache (memrefs at p0), the attention (K/V from the cache, skv = C + p0)
// and an output kernel; the tail is the LM head (a gemm into the output).
inline constexpr int64_t kC = 4, kH = 2, kS = 64, kD = 4, kLayers = 2;

inline json manifest() {
  return json{
      {"format", "h20-artifact"},
      {"target", "h200"},
      {"max_positions", kS},
      {"inputs", {{{"name", "ids"}, {"dtype", "int64"}, {"shape", {1, -1}}}}},
      {"outputs", {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {1, 1, 8}}}}},
      {"weights",
       {{{"name", "w"}, {"file", "m.bin"}, {"dtype", "float32"}, {"shape", {4, 8}},
         {"offset", 0}, {"length", 128}}}},
      {"blobs", {{{"name", "kernels.ptx"}, {"kind", "ptx"}, {"offset", 0}, {"size", 100}}}},
  };
}

inline json memref(int buffer, json offset, json sizes, json strides) {
  return {{"memref", {{"buffer", buffer}, {"offset", offset}, {"sizes", sizes}, {"strides", strides}}}};
}

inline json launch(const std::string &kernel, json args) {
  return {{"op", "launch"}, {"module", 0}, {"kernel", kernel}, {"grid", {1, 1, 1}},
          {"block", {128, 1, 1}}, {"smem", 0}, {"args", args}};
}

inline int64_t layerOffset(int64_t l) { return l * 2 * kH * kS * kD; }

inline json program() {
  json steps = json::array();
  steps.push_back(launch("embed", {memref(0, 0, {1, kC}, {kC, 1}),
                                   memref(4, 0, {kC, 4}, {4, 1})}));
  json cacheStrides = {kLayers * 2 * kH * kS * kD, kS * kD, kD, 1};
  for (int64_t l = 0; l < kLayers; ++l) {
    steps.push_back(launch("qkv", {memref(4, 0, {kC, 4}, {4, 1}),
                                   memref(6, 0, {1, kH, kC, kD}, {kH * kC * kD, kC * kD, kD, 1}),
                                   memref(5, 0, {1, kH, kC, kD}, {kH * kC * kD, kC * kD, kD, 1})}));
    for (int64_t kv = 0; kv < 2; ++kv)
      steps.push_back(launch(kv ? "vwrite" : "kwrite",
                             {memref(5, 0, {1, kH, kC, kD}, {kH * kC * kD, kC * kD, kD, 1}),
                              memref(3, {{"c", layerOffset(l) + kv * kH * kS * kD}, {"p0", kD}},
                                     {1, kH, kC, kD}, cacheStrides)}));
    json qv = {{"buffer", 6}, {"offset", 0}, {"strides", {kH * kC * kD, kC * kD, kD, 1}}};
    json ov = {{"buffer", 7}, {"offset", 0}, {"strides", {kH * kC * kD, kC * kD, kD, 1}}};
    AttentionSpec at;
    at.q = qv;
    at.k = {{"buffer", 3}, {"offset", layerOffset(l)}, {"strides", cacheStrides}};
    at.v = {{"buffer", 3}, {"offset", layerOffset(l) + kH * kS * kD}, {"strides", cacheStrides}};
    at.o = ov;
    at.heads = at.kvHeads = kH;
    at.dim = kD;
    at.sq = kC;
    at.skv = {{"c", kC}, {"p0", 1}};
    at.scale = 0.5;
    at.causal = true;
    steps.push_back(attentionLaunch(at));
    steps.push_back(launch("post", {memref(7, 0, {1, kH, kC, kD}, {kH * kC * kD, kC * kD, kD, 1}),
                                    memref(4, 0, {kC, 4}, {4, 1})}));
  }
  steps.push_back({{"op", "gemm"}, {"dtype_a", "bfloat16"}, {"dtype_b", "bfloat16"},
                   {"dtype_c", "float32"}, {"batch", 1}, {"m", 1}, {"n", 8}, {"k", 4},
                   {"alpha", 1.0}, {"beta", 0.0},
                   {"a", {{"buffer", 4}, {"offset", {{"c", -4}, {"n", 4}}}, {"batch_stride", 0},
                          {"row_stride", 4}, {"col_stride", 1}}},
                   {"b", {{"buffer", 2}, {"offset", 0}, {"batch_stride", 0}, {"row_stride", 8},
                          {"col_stride", 1}}},
                   {"c", {{"buffer", 1}, {"offset", 0}, {"batch_stride", 0}, {"row_stride", 8},
                          {"col_stride", 1}}}});
  return json{
      {"arch", "sm_90"},
      {"symbols", {"p0", "n"}},
      {"chunking", {{"chunk", kC}, {"input", 0}, {"dim", 1}, {"pad_value", 0}}},
      {"outputs", {{{"mode", "last"}}}},
      {"modules", {{{"name", "kernels"}, {"ptx_blob", "kernels.ptx"}, {"cubin_blob", nullptr}}}},
      {"arena_bytes", 1024},
      {"buffers",
       {
           {{"kind", "input"}, {"index", 0}, {"bytes", kC * 8}},                       // 0
           {{"kind", "output"}, {"index", 0}, {"bytes", 32}},                          // 1
           {{"kind", "weight"}, {"index", 0}, {"bytes", 64}, {"dtype", "bfloat16"}},   // 2
           {{"kind", "state"}, {"bytes", kLayers * 2 * kH * kS * kD * 2}, {"dtype", "bfloat16"}}, // 3
           {{"kind", "temp"}, {"bytes", kC * 4 * 2}, {"offset", 0}, {"dtype", "bfloat16"}},      // 4 x
           {{"kind", "temp"}, {"bytes", kH * kC * kD * 2}, {"offset", 256}, {"dtype", "bfloat16"}}, // 5 kv
           {{"kind", "temp"}, {"bytes", kH * kC * kD * 2}, {"offset", 512}, {"dtype", "bfloat16"}}, // 6 q
           {{"kind", "temp"}, {"bytes", kH * kC * kD * 2}, {"offset", 768}, {"dtype", "bfloat16"}}, // 7 o
       }},
      {"steps", steps},
      // Layer l: its qkv, K/V writes, attention (step 4 + 5l), after the
      // previous layer's attention and post step.
      {"layers",
       {{{"layer", 0}, {"first_step", 0}, {"attention_step", 4}},
        {{"layer", 1}, {"first_step", 5}, {"attention_step", 9}}}},
  };
}

inline std::string parse(const json &gpu, GpuProgram &p) {
  json m = manifest();
  m["gpu"] = gpu;
  std::string text = m.dump(), error;
  Manifest man;
  if (!parseManifest(text, man, error))
    return "manifest: " + error;
  if (!parseGpuProgram(text, man, 4096, p, error))
    return error.empty() ? "(empty error)" : error;
  return "";
}

} // namespace decoder_fixture

} // namespace h20::test

#endif // H20_TEST_UNIT_PROGRAMFIXTURES_H
