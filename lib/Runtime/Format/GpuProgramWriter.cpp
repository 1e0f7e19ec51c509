//===- GpuProgramWriter.cpp - a typed GpuProgram as the "gpu" JSON object ===//
//
// The inverse of parseGpuProgram: the compiler builds the program as the
// runtime's own structs (GpuProgram.h) and writes it with this, so the
// format has one definition, read and written by the same code. Fields
// with their default value are still written where the parser requires
// them; optional ones (tf32, a view's dtype, a launch's grid_div and role, a
// GEMM's groups, layers) only when set.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/Format/GpuProgram.h"

#include <nlohmann/json.hpp>

namespace h20::runtime {
namespace {

using json = nlohmann::json;

/// An integer when constant, else {"c": c, "p0": a, "n": b, "q": d,
/// "rank": r, "d0": .., ...} without zero symbol coefficients.
json linearJson(const LinearExpr &e) {
  if (e.isConstant())
    return e.c;
  json o = {{"c", e.c}};
  if (e.p0)
    o["p0"] = e.p0;
  if (e.n)
    o["n"] = e.n;
  if (e.q)
    o["q"] = e.q;
  if (e.r)
    o["rank"] = e.r;
  for (int k = 0; k < kMaxDerived; ++k)
    if (e.d[k])
      o["d" + std::to_string(k)] = e.d[k];
  return o;
}

json linearArray(const LinearExpr *first, size_t count) {
  json a = json::array();
  for (size_t i = 0; i < count; ++i)
    a.push_back(linearJson(first[i]));
  return a;
}

const char *bufferKindName(BufferKind k) {
  switch (k) {
  case BufferKind::Input: return "input";
  case BufferKind::Output: return "output";
  case BufferKind::Weight: return "weight";
  case BufferKind::State: return "state";
  case BufferKind::Temp: return "temp";
  case BufferKind::Const: return "const";
  }
  return "temp";
}

json bufferJson(const GpuBuffer &b) {
  json o = {{"kind", bufferKindName(b.kind)}, {"bytes", b.bytes}};
  if (!b.dtype.empty())
    o["dtype"] = b.dtype;
  if (b.kind == BufferKind::Input || b.kind == BufferKind::Output || b.kind == BufferKind::Weight)
    o["index"] = b.index;
  if (b.kind == BufferKind::Temp)
    o["offset"] = b.offset;
  if (b.host)
    o["placement"] = "host";
  if (b.kind == BufferKind::Const) {
    o["blob"] = b.blob;
    o["blob_offset"] = b.blobOffset;
  }
  return o;
}

/// A VIEW: buffer, offset, sizes, strides and the dtype when given.
template <class T> json viewJson(const T &v) {
  json m = {{"buffer", v.buffer},
            {"offset", linearJson(v.offset)},
            {"sizes", linearArray(v.sizes.data(), v.sizes.size())},
            {"strides", linearArray(v.strides.data(), v.strides.size())}};
  if (!v.dtype.empty())
    m["dtype"] = v.dtype;
  return m;
}

json fieldJson(const StructField &f) {
  json o = {{"at", f.at}};
  switch (f.kind) {
  case StructField::I64: o["i64"] = linearJson(f.value); break;
  case StructField::I32: o["i32"] = linearJson(f.value); break;
  case StructField::F32: o["f32"] = double(f.f32); break;
  case StructField::Pointer: o["pointer"] = viewJson(f); break;
  case StructField::TensorMap: {
    json m = viewJson(f);
    m["box"] = f.box;
    m["swizzle"] = f.swizzle;
    o["tensor_map"] = std::move(m);
    break;
  }
  case StructField::TensorMapsValid: o["tensor_maps_valid"] = true; break;
  }
  if (f.isView())
    o["written"] = f.written;
  if (f.kv)
    o["kv"] = true;
  return o;
}

json argJson(const LaunchArg &a) {
  switch (a.kind) {
  case LaunchArg::I64: return {{"i64", linearJson(a.value)}};
  case LaunchArg::I32: return {{"i32", linearJson(a.value)}};
  // 16-bit scalars keep the float they were written as (the parser rounds
  // it to `half` again, to the same bits).
  case LaunchArg::F32: return {{"f32", double(a.f32)}};
  case LaunchArg::F16: return {{"f16", double(a.f32)}};
  case LaunchArg::BF16: return {{"bf16", double(a.f32)}};
  case LaunchArg::F64: return {{"f64", a.f64}};
  case LaunchArg::MemRef: return {{"memref", viewJson(a)}};
  case LaunchArg::Struct: {
    json fields = json::array();
    for (const StructField &f : a.fields)
      fields.push_back(fieldJson(f));
    return {{"struct",
             {{"bytes", a.structBytes}, {"align", a.structAlign}, {"fields", std::move(fields)}}}};
  }
  }
  return nullptr;
}

json operandJson(const GemmOperand &g) {
  return {{"buffer", g.buffer},
          {"offset", linearJson(g.offset)},
          {"batch_stride", linearJson(g.batchStride)},
          {"row_stride", linearJson(g.rowStride)},
          {"col_stride", linearJson(g.colStride)}};
}

json stepJson(const LaunchStep &s) {
  json args = json::array();
  for (const LaunchArg &a : s.args)
    args.push_back(argJson(a));
  json o = {{"op", "launch"},
            {"module", s.module},
            {"kernel", s.kernel},
            {"grid", linearArray(s.grid.data(), 3)},
            {"block", linearArray(s.block.data(), 3)},
            {"smem", s.smem},
            {"args", std::move(args)}};
  if (s.gridDiv != std::array<int64_t, 3>{1, 1, 1})
    o["grid_div"] = s.gridDiv;
  if (!s.role.empty())
    o["role"] = s.role;
  return o;
}

json stepJson(const GemmStep &s) {
  json o = {{"op", "gemm"},
            {"dtype_a", s.dtypeA},
            {"dtype_b", s.dtypeB},
            {"dtype_c", s.dtypeC},
            {"batch", linearJson(s.batch)},
            {"m", linearJson(s.m)},
            {"n", linearJson(s.n)},
            {"k", linearJson(s.k)},
            {"alpha", s.alpha},
            {"beta", s.beta},
            {"a", operandJson(s.a)},
            {"b", operandJson(s.b)},
            {"c", operandJson(s.c)}};
  if (s.groups > 0)
    o["groups"] = {{"count", s.groups},
                   {"offsets", {{"buffer", s.groupBuffer}, {"offset", linearJson(s.groupOffset)}}}};
  for (auto [key, sc] : {std::pair<const char *, const GemmScale *>{"scale_a", &s.scaleA},
                         {"scale_b", &s.scaleB}})
    if (!sc->mode.empty())
      o[key] = {{"mode", sc->mode}, {"buffer", sc->buffer}, {"offset", linearJson(sc->offset)}};
  return o;
}

json stepJson(const MemsetStep &s) {
  return {{"op", "memset"},
          {"buffer", s.buffer},
          {"offset_bytes", linearJson(s.offsetBytes)},
          {"bytes", linearJson(s.bytes)},
          {"value", s.value}};
}

json stepJson(const CopyStep &s) {
  return {{"op", "copy"},
          {"src", s.src},
          {"src_offset_bytes", linearJson(s.srcOffsetBytes)},
          {"dst", s.dst},
          {"dst_offset_bytes", linearJson(s.dstOffsetBytes)},
          {"bytes", linearJson(s.bytes)}};
}

/// The short spelling the format documents for an all-reduce ("f32", ...).
const char *allReduceDtype(const std::string &t) {
  return t == "float32" ? "f32" : t == "float16" ? "f16" : t == "bfloat16" ? "bf16" : t.c_str();
}

json stepJson(const AllReduceStep &s) {
  return {{"op", "all_reduce"},
          {"dtype", allReduceDtype(s.dtype)},
          {"src", s.src},
          {"src_offset_bytes", linearJson(s.srcOffsetBytes)},
          {"dst", s.dst},
          {"dst_offset_bytes", linearJson(s.dstOffsetBytes)},
          {"bytes", linearJson(s.bytes)}};
}

const char *outputModeName(OutputMode m) {
  return m == OutputMode::Rows ? "rows" : m == OutputMode::Last ? "last" : "whole";
}

} // namespace

std::string writeGpuProgram(const GpuProgram &p) {
  json g = {{"arch", p.arch}, {"symbols", p.symbols}, {"arena_bytes", p.arenaBytes}};
  if (p.tf32)
    g["tf32"] = true;
  if (!p.derived.empty()) {
    json derived = json::array();
    for (const DerivedSymbol &d : p.derived)
      derived.push_back({{"of", linearJson(d.of)}, {"div", d.div}});
    g["derived"] = std::move(derived);
  }
  if (p.chunking)
    g["chunking"] = {{"chunk", p.chunking->chunk},
                     {"input", p.chunking->input},
                     {"dim", p.chunking->dim},
                     {"pad_value", p.chunking->padValue}};
  else
    g["chunking"] = nullptr;
  json outputs = json::array();
  for (const GpuOutput &o : p.outputs) {
    json j = {{"mode", outputModeName(o.mode)}};
    if (o.mode == OutputMode::Rows)
      j["dim"] = o.dim;
    outputs.push_back(std::move(j));
  }
  g["outputs"] = std::move(outputs);
  json modules = json::array();
  for (const GpuModule &m : p.modules)
    modules.push_back({{"name", m.name},
                       {"ptx_blob", m.ptxBlob.empty() ? json(nullptr) : json(m.ptxBlob)},
                       {"cubin_blob", m.cubinBlob.empty() ? json(nullptr) : json(m.cubinBlob)}});
  g["modules"] = std::move(modules);
  json buffers = json::array();
  for (const GpuBuffer &b : p.buffers)
    buffers.push_back(bufferJson(b));
  g["buffers"] = std::move(buffers);
  json steps = json::array();
  for (const GpuStep &s : p.steps)
    steps.push_back(std::visit([](const auto &x) { return stepJson(x); }, s));
  g["steps"] = std::move(steps);
  if (!p.layers.empty()) {
    json layers = json::array();
    for (const GpuLayer &l : p.layers)
      layers.push_back(
          {{"layer", l.layer}, {"first_step", l.firstStep}, {"attention_step", l.attentionStep}});
    g["layers"] = std::move(layers);
  }
  return g.dump();
}

} // namespace h20::runtime
