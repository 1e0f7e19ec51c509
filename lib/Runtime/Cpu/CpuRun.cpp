//===- CpuRun.cpp - one prefill of a CPU artifact ---------------------------===//
#include "h20/Runtime/Cpu/CpuRun.h"

#include "h20/Runtime/Cpu/CpuExecutor.h"
#include "h20/Runtime/Format/FileUtil.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/resource.h>

namespace h20::runtime {
namespace {

/// A 64-byte aligned heap buffer (the generated code's loads assume it).
struct Buffer {
  explicit Buffer(size_t bytes) {
    if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0)
      data = nullptr;
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  void *data = nullptr;
};
using Buffers = std::vector<std::unique_ptr<Buffer>>;

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Reads weight `w` into a new buffer appended to `bufs`.
CpuStatus loadWeight(const Manifest &m, const WeightSpec &w, const std::string &weightsDir,
                     Buffers &bufs, int64_t &bytes, std::string &error) {
  // parseManifest bounds the shape (static, at most 2^50 elements).
  int64_t count = 0;
  if (!elementCount(w.shape, count)) {
    error = "weight '" + w.name + "' has an invalid shape";
    return CpuStatus::BadInput;
  }
  bytes = count * dtypeSize(w.dtype);
  if (!w.offset || w.file.empty()) {
    error = "weight '" + w.name +
            "' is stored in typed protobuf fields, not raw bytes; re-export the model with "
            "raw_data or external data";
    return CpuStatus::BadInput;
  }
  if (w.length && *w.length != bytes) {
    error = "weight '" + w.name + "' is " + std::to_string(*w.length) +
            " bytes in the model but its shape needs " + std::to_string(bytes);
    return CpuStatus::BadInput;
  }
  auto buf = std::make_unique<Buffer>(bytes);
  if (!buf->data) {
    error = "out of memory loading weight '" + w.name + "' (" + std::to_string(bytes) +
            " bytes)";
    return CpuStatus::Resources;
  }
  std::string file = (weightsDir.empty() ? m.modelDir : weightsDir) + "/" + w.file;
  int64_t size = fileSize(file);
  if (size < 0) {
    error = "weight '" + w.name + "': file '" + file + "' is missing (moved? give --weights-dir)";
    return CpuStatus::BadInput;
  }
  if (w.fileSize && size != *w.fileSize) {
    error = "weight file '" + file + "' has " + std::to_string(size) + " bytes, but had " +
            std::to_string(*w.fileSize) + " when the artifact was compiled: recompile it";
    return CpuStatus::BadInput;
  }
  if (!readFileRange(file, *w.offset, bytes, buf->data, error)) {
    error = "weight '" + w.name + "': " + error;
    return CpuStatus::BadInput;
  }
  bufs.push_back(std::move(buf));
  return CpuStatus::Ok;
}

/// The whole prompt in one call: the entry's arguments in its order
/// (inputs, copied into aligned buffers; weights; outputs).
CpuStatus runWhole(const std::string &name, CpuModule &module, const Manifest &m,
                   const std::vector<HostTensor> &inputs, const Buffers &weightBufs,
                   const Buffers &outBufs, const std::vector<std::vector<int64_t>> &outShapes,
                   CpuRunResult &result, std::string &error) {
  Buffers inputBufs;
  std::vector<MemRefDescriptor> args;
  for (const HostTensor &t : inputs) {
    auto buf = std::make_unique<Buffer>(t.data.size());
    if (!buf->data) {
      error = "out of memory for input '" + t.name + "'";
      return CpuStatus::Resources;
    }
    std::memcpy(buf->data, t.data.data(), t.data.size());
    args.emplace_back(buf->data, t.shape);
    inputBufs.push_back(std::move(buf));
  }
  for (size_t w = 0; w < m.weights.size(); ++w)
    args.emplace_back(weightBufs[w]->data, m.weights[w].shape);
  for (size_t j = 0; j < outBufs.size(); ++j)
    args.emplace_back(outBufs[j]->data, outShapes[j]);
  if (!module.checkAbi(args, error)) {
    error = "'" + name + "' is inconsistent: " + error;
    return CpuStatus::BadInput;
  }
  auto tRun = std::chrono::steady_clock::now();
  module.run(args);
  result.prefillMs = msSince(tRun);
  return CpuStatus::Ok;
}

/// A chunked artifact's prefill (CpuChunking): the caches zeroed, then one
/// call per chunk of C tokens (the last may be shorter) with its ids, its
/// first position and length, and its part of the output: its rows of
/// [1, S, ...] ("rows"), or the whole [1, 1, ...] output that each chunk
/// overwrites with its last real row ("last", the last chunk's stays).
CpuStatus runChunks(const std::string &name, CpuModule &module, const Manifest &m,
                    const std::vector<HostTensor> &inputs, const Buffers &weightBufs,
                    const Buffers &outBufs, const std::vector<std::vector<int64_t>> &outShapes,
                    CpuRunResult &result, std::string &error) {
  const CpuChunking &c = *m.cpuChunking;
  if (inputs.size() != 1 || inputs[0].shape.size() != 2 || inputs[0].shape[0] != 1 ||
      outBufs.size() != 1) {
    error = "'" + name + "' is inconsistent: a chunked prefill takes one [1, S] input of token "
            "ids and gives one output";
    return CpuStatus::BadInput;
  }
  if (!module.checkChunking(c, error)) {
    error = "'" + name + "' is inconsistent: " + error;
    return CpuStatus::BadInput;
  }
  const int64_t S = inputs[0].shape[1];
  if (S < 1) {
    error = "the prompt is empty: a chunked prefill needs at least one token";
    return CpuStatus::BadInput;
  }
  if (S > c.capacity) {
    error = "the prompt has " + std::to_string(S) + " tokens but '" + name +
            "' holds caches for " + std::to_string(c.capacity) +
            " positions: recompile with a larger --max-positions";
    return CpuStatus::BadInput;
  }
  Buffers caches;
  for (const CpuChunking::Cache &k : c.caches) {
    int64_t count = 0;
    if (!elementCount(k.shape, count)) {
      error = "'" + name + "' is inconsistent: a cache of shape " + shapeText(k.shape);
      return CpuStatus::BadInput;
    }
    int64_t bytes = count * dtypeSize(k.dtype);
    auto buf = std::make_unique<Buffer>(bytes);
    if (!buf->data) {
      error = "out of memory for the chunked prefill's caches (" + std::to_string(bytes) +
              " bytes)";
      return CpuStatus::Resources;
    }
    std::memset(buf->data, 0, bytes);
    caches.push_back(std::move(buf));
  }
  const std::vector<int64_t> &outShape = outShapes[0];
  const bool rows = c.output == "rows";
  // Bytes of one output row (one token): the dims after [1, S].
  int64_t rowBytes = dtypeSize(m.outputs[0].dtype);
  for (size_t k = 2; k < outShape.size(); ++k)
    rowBytes *= outShape[k];
  if (outShape.size() < 2 || outShape[0] != 1 || outShape[1] != (rows ? S : 1)) {
    error = "'" + name + "' is inconsistent: its output " + shapeText(outShape) +
            " is not [1, " + (rows ? std::string("S") : std::string("1")) + ", ...]";
    return CpuStatus::BadInput;
  }
  // Each chunk's ids in an aligned buffer of their own.
  const int64_t idBytes = dtypeSize(inputs[0].dtype);
  Buffer ids(c.chunk * idBytes);
  if (!ids.data) {
    error = "out of memory for a chunk's token ids";
    return CpuStatus::Resources;
  }
  auto tRun = std::chrono::steady_clock::now();
  for (int64_t p0 = 0; p0 < S; p0 += c.chunk) {
    const int64_t n = std::min(c.chunk, S - p0);
    std::memcpy(ids.data, inputs[0].data.data() + p0 * idBytes, n * idBytes);
    std::vector<MemRefDescriptor> args;
    args.emplace_back(ids.data, std::vector<int64_t>{1, n});
    args.push_back(MemRefDescriptor::index(p0));
    args.push_back(MemRefDescriptor::index(n));
    for (size_t w = 0; w < m.weights.size(); ++w)
      args.emplace_back(weightBufs[w]->data, m.weights[w].shape);
    for (size_t k = 0; k < caches.size(); ++k)
      args.emplace_back(caches[k]->data, c.caches[k].shape);
    std::vector<int64_t> shape = outShape;
    shape[1] = rows ? n : 1;
    args.emplace_back(static_cast<uint8_t *>(outBufs[0]->data) + (rows ? p0 * rowBytes : 0),
                      shape);
    // Every chunk: the last one's length differs, which a static dim
    // would refuse.
    if (!module.checkAbi(args, error)) {
      error = "'" + name + "' is inconsistent: " + error;
      return CpuStatus::BadInput;
    }
    module.run(args);
  }
  result.prefillMs = msSince(tRun);
  return CpuStatus::Ok;
}

} // namespace

CpuStatus runCpuPrefill(const std::string &name, const Artifact &artifact, const Manifest &m,
                        const std::vector<HostTensor> &inputs, const std::string &weightsDir,
                        CpuRunResult &result, std::string &error) {
  auto tLoad = std::chrono::steady_clock::now();
  if (m.blobs.empty()) {
    error = "'" + name + "' holds no code";
    return CpuStatus::BadInput;
  }
#if defined(__x86_64__)
  if (m.cpu == "x86-64-v3" && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    error = "'" + name + "' was compiled for x86-64-v3 (AVX2, FMA), which this CPU lacks";
    return CpuStatus::BadInput;
  }
#endif
  CpuModule module;
  if (!module.load(artifact.payload, m.blobs[0].offset, m.blobs[0].size, m.entrySymbol, error))
    return CpuStatus::Internal;

  Buffers weightBufs, outBufs;
  result.weightBytes = 0;
  for (const WeightSpec &w : m.weights) {
    int64_t bytes = 0;
    if (CpuStatus s = loadWeight(m, w, weightsDir, weightBufs, bytes, error); s != CpuStatus::Ok)
      return s;
    result.weightBytes += bytes;
  }
  result.loadMs = msSince(tLoad);

  // Outputs, sized from the input dims they are proven equal to.
  std::vector<std::vector<int64_t>> inputShapes, outShapes;
  for (const HostTensor &t : inputs)
    inputShapes.push_back(t.shape);
  for (const TensorSpec &o : m.outputs) {
    std::vector<int64_t> shape;
    int64_t count = 0;
    if (!resolveOutputShape(o, inputShapes, shape, error) || !elementCount(shape, count)) {
      error = "'" + name + "': " + error;
      return CpuStatus::BadInput;
    }
    auto buf = std::make_unique<Buffer>(count * dtypeSize(o.dtype));
    if (!buf->data) {
      error = "out of memory for output '" + o.name + "'";
      return CpuStatus::Resources;
    }
    outBufs.push_back(std::move(buf));
    outShapes.push_back(shape);
  }
  CpuStatus ran = m.cpuChunking ? runChunks(name, module, m, inputs, weightBufs, outBufs,
                                            outShapes, result, error)
                                : runWhole(name, module, m, inputs, weightBufs, outBufs,
                                           outShapes, result, error);
  if (ran != CpuStatus::Ok)
    return ran;

  result.outputs.assign(m.outputs.size(), HostTensor{});
  for (size_t j = 0; j < m.outputs.size(); ++j) {
    HostTensor &t = result.outputs[j];
    t.name = m.outputs[j].name;
    t.dtype = m.outputs[j].dtype;
    t.shape = outShapes[j];
    int64_t count = 1;
    for (int64_t d : t.shape)
      count *= d;
    const auto *p = static_cast<const uint8_t *>(outBufs[j]->data);
    t.data.assign(p, p + count * dtypeSize(t.dtype));
  }
  return CpuStatus::Ok;
}

nlohmann::json cpuRunReport(const Manifest &m, const CpuRunResult &r, int64_t tokens,
                            int64_t nextToken, double totalMs) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return {{"device", "cpu"},
          {"tokens", tokens},
          {"next_token_id", nextToken},
          {"ttft_ms", r.prefillMs},
          {"tokens_per_s", tokens / (r.prefillMs / 1000.0)},
          {"peak_host_memory_bytes", int64_t(usage.ru_maxrss) * 1024},
          {"weight_bytes", r.weightBytes},
          {"stages_ms", {{"load", r.loadMs}, {"prefill", r.prefillMs}, {"total", totalMs}}},
          {"logits", m.logits}};
}

void printCpuSummary(const nlohmann::json &report, FILE *out) {
  auto num = [&](const char *key) { return report.at(key).get<double>(); };
  std::fprintf(out, "next token id: %lld\n", report.at("next_token_id").get<long long>());
  std::fprintf(out,
               "prefill: %lld tokens in %.1f ms (%.0f tokens/s) on the CPU; weights %.2f GiB "
               "loaded in %.1f ms; peak host memory %.2f GiB; total %.1f ms\n",
               report.at("tokens").get<long long>(), num("ttft_ms"), num("tokens_per_s"),
               num("weight_bytes") / (1ull << 30), report.at("stages_ms").at("load").get<double>(),
               num("peak_host_memory_bytes") / (1ull << 30),
               report.at("stages_ms").at("total").get<double>());
}

} // namespace h20::runtime
