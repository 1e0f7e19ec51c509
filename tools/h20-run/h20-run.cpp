//===- h20-run.cpp - run a compiled h20 artifact's prefill ---------------===//
//
// h20-run model.h20 --ids ids.npy [--device cpu] [--dump-logits out.npy]
//                   [--report report.json]
// Loads the artifact, checks the prompt against the model (vocabulary, the
// longest accepted prompt), loads the weights it references by byte range,
// runs the prefill and prints the next token id and the time it took.
// CPU artifacts run their shared object here; GPU artifacts (target h200,
// h100, h800, h20) run their "gpu" program through GpuExecutor.
// Exit codes: 0 success, 1 internal error, 2 bad input, 3 out of resources.
// Plain C++: no MLIR in the runtime.
//
//===----------------------------------------------------------------------===//
#include "RunCommon.h"

#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Cpu/CpuExecutor.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Cuda/GpuExecutor.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Runtime/Format/Npy.h"
#include "h20/Runtime/Parallel/RankLauncher.h"
#include "h20/Runtime/Format/TensorIO.h"
#include "h20/Runtime/Parallel/TensorParallel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace h20::runtime;

namespace h20run {


std::string gRankPrefix;
int gLastFailure = 1;

std::vector<float> logitsAsFloat32(const std::string &dtype, const void *data, size_t count) {
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16")
    return {};
  std::vector<float> out(count);
  convertElements(dtype, data, "float32", out.data(), count);
  return out;
}

int fail(int code, const std::string &message, bool bug) {
  gLastFailure = code;
  // The library's messages may already name the rank ("rank R: ...",
  // "rank R, layer ...").
  std::string own = gRankPrefix.substr(0, gRankPrefix.size() > 2 ? gRankPrefix.size() - 2 : 0);
  bool named = !own.empty() && message.rfind(own, 0) == 0 &&
               (message.size() == own.size() || !std::isdigit(static_cast<unsigned char>(message[own.size()])));
  std::fprintf(stderr, "h20-run: error: %s%s%s\n", named ? "" : gRankPrefix.c_str(),
               message.c_str(),
               code == kExitInternal && bug ? " (internal error; please report)" : "");
  return code;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool writeOutputs(const Options &opt, const std::vector<HostTensor> &outputs, std::string &error) {
  for (size_t j = 0; j < outputs.size(); ++j) {
    const HostTensor &t = outputs[j];
    std::vector<std::string> paths;
    if (!opt.outputsTo.empty())
      paths.push_back(opt.outputsTo + "/output_" + std::to_string(j) + ".pb");
    for (auto &[name, path] : opt.outputs)
      if (name == t.name)
        paths.push_back(path);
    for (const std::string &path : paths)
      if (!writeTensorFile(path, t, error)) {
        error = "output '" + t.name + "': " + error;
        return false;
      }
  }
  return true;
}

} // namespace h20run

using namespace h20run;

namespace {

/// 64-byte aligned heap buffer.
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

} // namespace

/// Runs a CPU artifact: loads its shared object and the weights (by byte
/// range of the model's files), runs the prefill, writes what was asked and
/// the report. Returns the process exit code.
int runOnCpu(const Options &opt, const Artifact &artifact, const Manifest &m,
             const std::vector<HostTensor> &inputs, int64_t S, bool generic,
             std::chrono::steady_clock::time_point tStart) {
  std::string error;
  // Code.
  auto tLoad = std::chrono::steady_clock::now();
  if (m.blobs.empty())
    return fail(kExitBadInput, "'" + opt.artifact + "' holds no code");
  CpuModule module;
  if (!module.load(artifact.payload, m.blobs[0].offset, m.blobs[0].size, m.entrySymbol, error))
    return fail(kExitInternal, error);

  // Weights, by byte range of the ONNX file / external data.
  std::vector<std::unique_ptr<Buffer>> weightBufs;
  std::vector<MemRefDescriptor> args;
  std::vector<std::unique_ptr<Buffer>> inputBufs;
  for (const HostTensor &t : inputs) {
    auto buf = std::make_unique<Buffer>(t.data.size());
    if (!buf->data)
      return fail(kExitResources, "out of memory for an input");
    std::memcpy(buf->data, t.data.data(), t.data.size());
    args.emplace_back(buf->data, t.shape);
    inputBufs.push_back(std::move(buf));
  }
  uint64_t weightBytes = 0;
  for (const WeightSpec &w : m.weights) {
    // parseManifest bounds the shape (static, at most 2^50 elements).
    int64_t count = 0;
    if (!elementCount(w.shape, count))
      return fail(kExitBadInput, "weight '" + w.name + "' has an invalid shape");
    int64_t bytes = count * dtypeSize(w.dtype);
    if (!w.offset || w.file.empty())
      return fail(kExitBadInput, "weight '" + w.name +
                                     "' is stored in typed protobuf fields, not raw bytes; "
                                     "re-export the model with raw_data or external data");
    if (w.length && *w.length != bytes)
      return fail(kExitBadInput, "weight '" + w.name + "' is " + std::to_string(*w.length) +
                                     " bytes in the model but its shape needs " +
                                     std::to_string(bytes));
    auto buf = std::make_unique<Buffer>(bytes);
    if (!buf->data)
      return fail(kExitResources, "out of memory loading weight '" + w.name + "' (" +
                                      std::to_string(bytes) + " bytes)");
    std::string file = (opt.weightsDir.empty() ? m.modelDir : opt.weightsDir) + "/" + w.file;
    int64_t size = fileSize(file);
    if (size < 0)
      return fail(kExitBadInput, "weight '" + w.name + "': file '" + file +
                                     "' is missing (moved? give --weights-dir)");
    if (w.fileSize && size != *w.fileSize)
      return fail(kExitBadInput, "weight file '" + file + "' has " + std::to_string(size) +
                                     " bytes, but had " + std::to_string(*w.fileSize) +
                                     " when the artifact was compiled: recompile it");
    if (!readFileRange(file, *w.offset, bytes, buf->data, error))
      return fail(kExitBadInput, "weight '" + w.name + "': " + error);
    weightBytes += bytes;
    args.emplace_back(buf->data, w.shape);
    weightBufs.push_back(std::move(buf));
  }
  double loadMs = msSince(tLoad);

  // Outputs, sized from the input dims they are proven equal to.
  std::vector<std::unique_ptr<Buffer>> outBufs;
  std::vector<std::vector<int64_t>> outShapes;
  std::vector<std::vector<int64_t>> inputShapes;
  for (const HostTensor &t : inputs)
    inputShapes.push_back(t.shape);
  for (const TensorSpec &o : m.outputs) {
    std::vector<int64_t> shape;
    int64_t count = 0;
    if (!resolveOutputShape(o, inputShapes, shape, error) || !elementCount(shape, count))
      return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
    auto buf = std::make_unique<Buffer>(count * dtypeSize(o.dtype));
    if (!buf->data)
      return fail(kExitResources, "out of memory for output '" + o.name + "'");
    args.emplace_back(buf->data, shape);
    outBufs.push_back(std::move(buf));
    outShapes.push_back(shape);
  }

  if (!module.checkAbi(args, error))
    return fail(kExitBadInput, "'" + opt.artifact + "' is inconsistent: " + error);
  auto tRun = std::chrono::steady_clock::now();
  module.run(args);
  double prefillMs = msSince(tRun);

  // Requested outputs (--output / --outputs-to) are written in both modes:
  // a token-id prefill may return more than its logits (e.g. debug outputs).
  if (generic || !opt.outputs.empty() || !opt.outputsTo.empty()) {
    std::vector<HostTensor> host(m.outputs.size());
    for (size_t j = 0; j < m.outputs.size(); ++j) {
      HostTensor &t = host[j];
      t.name = m.outputs[j].name;
      t.dtype = m.outputs[j].dtype;
      t.shape = outShapes[j];
      int64_t count = 1;
      for (int64_t d : t.shape)
        count *= d;
      const auto *p = static_cast<const uint8_t *>(outBufs[j]->data);
      t.data.assign(p, p + count * dtypeSize(t.dtype));
    }
    if (!writeOutputs(opt, host, error))
      return fail(kExitBadInput, error);
  }
  if (generic) {
    std::printf("ran %zu input(s) -> %zu output(s) in %.1f ms on the CPU\n", inputs.size(),
                m.outputs.size(), prefillMs);
    return 0;
  }

  // Next token: argmax over the last position's logits (output 0).
  const std::vector<int64_t> &ls = outShapes[0];
  if (ls.empty())
    return fail(kExitBadInput, "output 0 is not logits [..., vocab]");
  int64_t vocab = ls.back(), rows = 1;
  if (vocab <= 0)
    return fail(kExitBadInput, "output 0 (logits) has no vocabulary dim");
  for (int64_t d : ls)
    rows *= d;
  std::vector<float> wide =
      logitsAsFloat32(m.outputs[0].dtype, outBufs[0]->data, static_cast<size_t>(rows));
  if (wide.empty() && rows > 0)
    return fail(kExitBadInput, "output 0 is " + m.outputs[0].dtype +
                                   ", not float32/float16/bfloat16 logits");
  rows /= vocab;
  if (rows < 1)
    return fail(kExitBadInput, "output 0 (logits) is empty");
  const float *logits = wide.data();
  const float *last = logits + (rows - 1) * vocab;
  int64_t next = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (last[v] > last[next])
      next = v;

  if (!opt.dumpLogits.empty() &&
      !writeFileAtomically(opt.dumpLogits, encodeNpyF32(ls, logits), error))
    return fail(kExitBadInput, error);

  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  double totalMs = msSince(tStart);
  nlohmann::json report{{"device", "cpu"},
                        {"tokens", S},
                        {"next_token_id", next},
                        {"ttft_ms", prefillMs},
                        {"tokens_per_s", S / (prefillMs / 1000.0)},
                        {"peak_host_memory_bytes", int64_t(usage.ru_maxrss) * 1024},
                        {"weight_bytes", weightBytes},
                        {"stages_ms", {{"load", loadMs}, {"prefill", prefillMs}, {"total", totalMs}}},
                        {"logits", m.logits}};
  if (!opt.report.empty() && !writeFileAtomically(opt.report, report.dump(2) + "\n", error))
    return fail(kExitBadInput, error);
  std::printf("next token id: %lld\n", static_cast<long long>(next));
  std::printf("prefill: %lld tokens in %.1f ms (%.0f tokens/s) on the CPU; total %.1f ms\n",
              static_cast<long long>(S), prefillMs, S / (prefillMs / 1000.0), totalMs);
  return 0;
}

int main(int argc, char **argv) {
  auto tStart = std::chrono::steady_clock::now();
  // One process of a multi-process job (WORLD_SIZE > 1, as torchrun or
  // h20-run's own launcher sets it); gpuRanks validates the variables.
  const char *worldEnv = std::getenv("WORLD_SIZE"), *rankEnv = std::getenv("RANK");
  const bool multiProcess = worldEnv && std::atoi(worldEnv) > 1;
  if (multiProcess && rankEnv)
    gRankPrefix = "rank " + std::string(rankEnv) + ": ";
  Options opt;
  std::string error;
  if (!parseArgs(argc, argv, opt, error))
    return fail(kExitBadInput, error + "\n" + kUsage);
  if (multiProcess && (!opt.inputs.empty() || !opt.inputsFrom.empty()))
    return fail(kExitBadInput, "an N-GPU prefill (WORLD_SIZE=" + std::string(worldEnv) +
                                   ") runs token ids: give --ids, not --input / --inputs-from");

  Artifact artifact;
  if (!readArtifact(opt.artifact, artifact, error))
    return fail(kExitBadInput, error);
  Manifest m;
  if (!parseManifest(artifact.manifest, m, error))
    return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  // Outputs: checked before any work, so a bad path cannot leave some
  // outputs written and others not; none may overwrite an input or another.
  {
    for (auto &o : opt.outputs)
      if (std::none_of(m.outputs.begin(), m.outputs.end(),
                       [&](const TensorSpec &t) { return t.name == o.first; }))
        return fail(kExitBadInput,
                    "--output '" + o.first + "': the model has no output of that name");
    std::vector<std::string> outs;
    for (const std::string *p : {&opt.dumpLogits, &opt.report})
      if (!p->empty())
        outs.push_back(*p);
    for (auto &o : opt.outputs)
      outs.push_back(o.second);
    std::vector<std::string> ins{opt.artifact};
    if (!opt.ids.empty())
      ins.push_back(opt.ids);
    for (auto &i : opt.inputs)
      ins.push_back(i.second);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!checkWritable(outs[i], error))
        return fail(kExitBadInput, error);
      for (const std::string &in : ins)
        if (outs[i] == in || sameFile(outs[i], in))
          return fail(kExitBadInput, "output '" + outs[i] + "' is an input file; refusing to overwrite it");
      struct stat st;
      bool special = stat(outs[i].c_str(), &st) == 0 && !S_ISREG(st.st_mode);
      for (size_t j = 0; j < i && !special; ++j)
        if (outs[i] == outs[j] || sameFile(outs[i], outs[j]))
          return fail(kExitBadInput, "output '" + outs[i] + "' is named twice");
    }
    if (!opt.outputsTo.empty() && !checkWritable(opt.outputsTo + "/output_0.pb", error))
      return fail(kExitBadInput, error);
  }
#if defined(__x86_64__)
  if (m.cpu == "x86-64-v3" &&
      !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return fail(kExitBadInput, "'" + opt.artifact +
                                   "' was compiled for x86-64-v3 (AVX2, FMA), which this CPU lacks");
#endif
  std::string device = opt.device.empty() ? (m.target == "cpu" ? "cpu" : "gpu") : opt.device;
  if (device != "cpu" && device != "gpu")
    return fail(kExitBadInput, "--device must be cpu or gpu, got '" + device + "'");
  if (device == "cpu" && m.target != "cpu")
    return fail(kExitBadInput, "'" + opt.artifact + "' was compiled for target '" + m.target +
                                   "'; compile with --target=cpu to run on the CPU");
  if (device == "cpu" && opt.gpus)
    return fail(kExitBadInput, "--gpus applies to GPU artifacts; '" + opt.artifact +
                                   "' runs on the CPU");
  if (device == "cpu" && opt.dummyWeights)
    return fail(kExitBadInput, "--dummy-weights applies to GPU runs; '" + opt.artifact +
                                   "' runs on the CPU");
  if (device == "cpu" && opt.tuneGemms)
    return fail(kExitBadInput, "--tune-gemms applies to GPU runs; '" + opt.artifact +
                                   "' runs on the CPU");
  if (device == "cpu" && multiProcess)
    return fail(kExitBadInput, "WORLD_SIZE=" + std::string(worldEnv) + ": '" + opt.artifact +
                                   "' runs on the CPU, in one process; do not start it as a "
                                   "multi-GPU job");
  {
    const bool sharded = std::any_of(m.weights.begin(), m.weights.end(),
                                     [](const WeightSpec &w) { return w.shard.has_value(); });
    if (device == "cpu" && (m.tensorParallel() > 1 || sharded))
      return fail(kExitBadInput, "'" + opt.artifact + "' was compiled for tensor parallelism over " +
                                     std::to_string(m.tensorParallel()) +
                                     " GPUs; it does not run on the CPU");
    // --gpus, else WORLD_SIZE (a rank of a launched job), else not given.
    int64_t gpusGiven = opt.gpus ? opt.gpus : multiProcess ? std::atoll(worldEnv) : 0;
    if (!checkTensorParallelGpus(m, gpusGiven, error))
      return fail(kExitBadInput, error);
  }
  if (device == "gpu" && m.target == "cpu")
    return fail(kExitBadInput, "'" + opt.artifact + "' was compiled for target '" + m.target +
                                   "', which runs on the CPU: use --device cpu");
  if (m.outputs.empty())
    return fail(kExitBadInput, "'" + opt.artifact + "' declares no outputs");

  // Inputs: token ids (the LLM path) or named tensors (any graph).
  bool generic = opt.ids.empty();
  std::vector<HostTensor> inputs(m.inputs.size());
  int64_t S = 0;
  if (!generic) {
    if (m.inputs.size() != 1)
      return fail(kExitBadInput, "--ids feeds one input (token ids); this model has " +
                                     std::to_string(m.inputs.size()) + ": use --input");
    std::vector<int64_t> ids;
    if (!readTokenIds(opt.ids, ids, error))
      return fail(kExitBadInput, error);
    S = static_cast<int64_t>(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || (m.vocabSize && ids[i] >= *m.vocabSize))
        return fail(kExitBadInput, "token id " + std::to_string(ids[i]) + " at position " +
                                       std::to_string(i) + " is outside the vocabulary [0, " +
                                       (m.vocabSize ? std::to_string(*m.vocabSize) : "?") + ")");
    }
    if (m.maxPositions && S > *m.maxPositions)
      return fail(kExitBadInput, "prompt of " + std::to_string(S) +
                                     " tokens exceeds the model's maximum of " +
                                     std::to_string(*m.maxPositions) + " positions");
    const TensorSpec &in = m.inputs[0];
    if (in.shape.size() != 2 || (in.shape[0] != 1 && in.shape[0] != -1) ||
        (in.dtype != "int64" && in.dtype != "int32"))
      return fail(kExitBadInput, "the model's input '" + in.name +
                                     "' is not token ids [1, S] of int64/int32: use --input");
    if (in.shape[1] != -1 && in.shape[1] != S)
      return fail(kExitBadInput, "the model takes exactly " + std::to_string(in.shape[1]) +
                                     " tokens; got " + std::to_string(S));
    HostTensor &t = inputs[0];
    t.dtype = in.dtype;
    t.shape = {1, S};
    t.data.resize(S * dtypeSize(in.dtype));
    for (int64_t i = 0; i < S; ++i) {
      if (in.dtype == "int64")
        std::memcpy(t.data.data() + 8 * i, &ids[i], 8);
      else {
        int32_t v = static_cast<int32_t>(ids[i]);
        std::memcpy(t.data.data() + 4 * i, &v, 4);
      }
    }
  } else {
    for (const auto &binding : opt.inputs)
      if (std::none_of(m.inputs.begin(), m.inputs.end(),
                       [&](const TensorSpec &t) { return t.name == binding.first; }))
        return fail(kExitBadInput,
                    "--input '" + binding.first + "': the model has no input of that name");
    for (size_t j = 0; j < m.inputs.size(); ++j) {
      const TensorSpec &spec = m.inputs[j];
      std::string path;
      for (auto &[name, p] : opt.inputs)
        if (name == spec.name)
          path = p;
      if (path.empty() && !opt.inputsFrom.empty())
        path = opt.inputsFrom + "/input_" + std::to_string(j) + ".pb";
      if (path.empty())
        return fail(kExitBadInput, "no value for input '" + spec.name + "' (give --input " +
                                       spec.name + "=PATH or --inputs-from DIR)");
      HostTensor &t = inputs[j];
      if (!readTensorFile(path, t, error))
        return fail(kExitBadInput, "input '" + spec.name + "': " + error);
      bool shapeOk = t.shape.size() == spec.shape.size();
      for (size_t k = 0; shapeOk && k < t.shape.size(); ++k)
        shapeOk = spec.shape[k] < 0 || spec.shape[k] == t.shape[k];
      if (t.dtype != spec.dtype || !shapeOk) {
        auto str = [](const std::vector<int64_t> &v) {
          std::string r = "[";
          for (size_t k = 0; k < v.size(); ++k)
            r += (k ? ", " : "") + (v[k] < 0 ? std::string("?") : std::to_string(v[k]));
          return r + "]";
        };
        return fail(kExitBadInput, "input '" + spec.name + "' from '" + path + "' is " +
                                       t.dtype + str(t.shape) + " but the model takes " +
                                       spec.dtype + str(spec.shape));
      }
    }
  }

  {
    // Dims the model names alike are one value in the compiled code.
    std::vector<std::vector<int64_t>> shapes;
    for (const HostTensor &t : inputs)
      shapes.push_back(t.shape);
    if (!checkDimParams(m.inputs, shapes, error))
      return fail(kExitBadInput, error);
    // Index inputs within the ranges the compiler recorded (ONNX: an
    // out-of-range index is an error; the kernels would only clamp).
    if (!checkValueRanges(m.inputs, inputs, error))
      return fail(kExitBadInput, error);
  }

  if (device == "gpu")
    return runOnGpu(opt, artifact, m, inputs, S, generic, tStart);

  return runOnCpu(opt, artifact, m, inputs, S, generic, tStart);
}
