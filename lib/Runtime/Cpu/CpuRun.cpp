//===- CpuRun.cpp - one prefill of a CPU artifact ---------------------------===//
#include "h20/Runtime/Cpu/CpuRun.h"

#include "h20/Runtime/Cpu/CpuExecutor.h"
#include "h20/Runtime/Format/FileUtil.h"

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

  // Arguments in the entry's order: inputs, weights, outputs.
  Buffers inputBufs, weightBufs, outBufs;
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
  result.weightBytes = 0;
  for (const WeightSpec &w : m.weights) {
    int64_t bytes = 0;
    if (CpuStatus s = loadWeight(m, w, weightsDir, weightBufs, bytes, error); s != CpuStatus::Ok)
      return s;
    result.weightBytes += bytes;
    args.emplace_back(weightBufs.back()->data, w.shape);
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
    args.emplace_back(buf->data, shape);
    outBufs.push_back(std::move(buf));
    outShapes.push_back(shape);
  }
  if (!module.checkAbi(args, error)) {
    error = "'" + name + "' is inconsistent: " + error;
    return CpuStatus::BadInput;
  }
  auto tRun = std::chrono::steady_clock::now();
  module.run(args);
  result.prefillMs = msSince(tRun);

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
