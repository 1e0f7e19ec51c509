//===- GpuLoad.cpp - modules, kernels, weights, consts -----------------===//
//
// Part of the GPU executor; GpuExecutorImpl.h says which part holds what.
//
//===----------------------------------------------------------------------===//
#include "GpuExecutorImpl.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/WeightDerive.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

namespace h20::runtime {
using namespace detail;

bool GpuExecutor::Impl::loadModules(const Artifact &artifact) {
  bool useCubin = info.ccMajor == p.archMajor;
  int cubins = 0, ptxs = 0;
  for (size_t i = 0; i < p.modules.size(); ++i) {
    const GpuModule &mod = p.modules[i];
    std::string what = "module " + std::to_string(i) + (mod.name.empty() ? "" : " ('" + mod.name + "')");
    auto blobBytes = [&](const std::string &name) {
      for (const BlobSpec &b : m.blobs)
        if (b.name == name)
          return std::string(reinterpret_cast<const char *>(artifact.payload.data()) + b.offset,
                             b.size);
      return std::string();
    };
    CUmodule handle = nullptr;
    std::string cubinError;
    if (useCubin && !mod.cubinBlob.empty()) {
      std::string image = blobBytes(mod.cubinBlob);
      CUresult r = cu->cuModuleLoadDataEx(&handle, image.data(), 0, nullptr, nullptr);
      if (r == CUDA_SUCCESS) {
        ++cubins;
        modules.push_back(handle);
        continue;
      }
      handle = nullptr;
      cubinError = cudaErrorText(*cu, r);
      if (mod.ptxBlob.empty())
        return fail(GpuStatus::BadInput, what + ": the cubin does not load on " + info.name +
                                             ": " + cubinError);
    }
    if (mod.ptxBlob.empty())
      return fail(GpuStatus::BadInput,
                  what + " has only a cubin for " + p.arch + ", and " + info.name +
                      " has compute capability " + std::to_string(info.ccMajor) + "." +
                      std::to_string(info.ccMinor) + "; recompile with PTX");
    std::string ptx = blobBytes(mod.ptxBlob); // std::string keeps a NUL after the text
    std::vector<char> log(16384, 0);
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size()))};
    CUresult r = cu->cuModuleLoadDataEx(&handle, ptx.c_str(), 2, opts, values);
    if (r != CUDA_SUCCESS) {
      if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return check(r, what);
      std::string jitLog(log.data(), strnlen(log.data(), log.size()));
      return fail(GpuStatus::BadInput,
                  what + ": the PTX does not load on " + info.name + ": " +
                      cudaErrorText(*cu, r) + (jitLog.empty() ? "" : "\n" + jitLog) +
                      (cubinError.empty() ? "" : "\n(the cubin did not load either: " + cubinError + ")"));
    }
    ++ptxs;
    modules.push_back(handle);
  }
  loadStats.code = cubins && ptxs ? "cubin+ptx" : cubins ? "cubin" : ptxs ? "ptx" : "none";
  return true;
}

bool GpuExecutor::Impl::resolveKernels() {
  std::map<std::pair<int, std::string>, CUfunction> functions;
  std::map<CUfunction, std::pair<int64_t, size_t>> maxSmem; // bytes, first step asking for it
  stepFunction.assign(p.steps.size(), nullptr);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    int module;
    std::string kernel;
    int64_t smem;
    if (auto *l = std::get_if<LaunchStep>(&p.steps[i])) {
      module = l->module, kernel = l->kernel, smem = l->smem;
    } else {
      continue;
    }
    std::string where = "step " + std::to_string(i) + " (" + stepOpName(p.steps[i]) + ")";
    auto key = std::make_pair(module, kernel);
    auto it = functions.find(key);
    if (it == functions.end()) {
      CUfunction f = nullptr;
      CUresult r = cu->cuModuleGetFunction(&f, modules[module], kernel.c_str());
      if (r != CUDA_SUCCESS)
        return fail(GpuStatus::BadInput, where + ": module " + std::to_string(module) +
                                             " has no kernel '" + kernel + "' (" +
                                             cudaErrorText(*cu, r) + ")");
      it = functions.emplace(key, f).first;
    }
    stepFunction[i] = it->second;
    auto &mx = maxSmem[it->second];
    if (smem > mx.first)
      mx = {smem, i};
  }
  int optin = 0;
  if (!check(cu->cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                      dev),
             "cuDeviceGetAttribute"))
    return false;
  for (auto &[f, mx] : maxSmem) {
    // The 48 KB default bounds static plus dynamic shared memory: a kernel
    // with its own __shared__ arrays needs the opt-in sooner.
    int staticSmem = 0;
    if (!check(cu->cuFuncGetAttribute(&staticSmem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f),
               "cuFuncGetAttribute"))
      return false;
    if (mx.first + staticSmem <= kDefaultSharedMemory)
      continue;
    std::string where = "step " + std::to_string(mx.second) + " (" +
                        stepOpName(p.steps[mx.second]) + ")";
    if (mx.first + staticSmem > optin)
      return fail(GpuStatus::BadInput, where + ": the kernel asks for " +
                                           std::to_string(mx.first) +
                                           " bytes of dynamic shared memory beside " +
                                           std::to_string(staticSmem) + " static; " + info.name +
                                           " allows " + std::to_string(optin) + " in all");
    if (!check(cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(mx.first)),
               where + ": setting the kernel's dynamic shared memory to " +
                   std::to_string(mx.first) + " bytes",
               GpuStatus::BadInput))
      return false;
  }
  return true;
}

bool GpuExecutor::Impl::allocHost() {
  if (plan.hostBytes == 0)
    return true;
  // Pinning more than the machine has free would push the rest of the
  // system into swap or the OOM killer first: refuse it by name.
  {
    const int64_t avail = hostMemAvailableBytes();
    if (avail >= 0 && plan.hostBytes > static_cast<uint64_t>(avail))
      return fail(GpuStatus::Resources,
                  "the artifact keeps " + gib(plan.hostBytes) +
                      " of tables in page-locked host memory (h20-place-tables), and this "
                      "machine has " + gib(static_cast<uint64_t>(avail)) +
                      " available (MemAvailable); h20-opt --host-tables=none keeps them on the "
                      "GPU");
  }
  // Portable: any context of the process may use it; device-mapped: the
  // kernels read it through hostBase (under unified addressing the same
  // address as hostPtr).
  CUresult r = cu->cuMemHostAlloc(&hostPtr, plan.hostBytes,
                                  CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    hostPtr = nullptr;
    std::string tables;
    for (const std::string &name : hostTableNames(p, plan, m))
      tables += (tables.empty() ? "'" : ", '") + name + "'";
    return check(r, "allocating " + gib(plan.hostBytes) +
                        " of page-locked host memory for the tables the compiler placed on the "
                        "host (" + tables + "; h20-opt --host-tables=none keeps them on the GPU)",
                 GpuStatus::Resources);
  }
  if (!check(cu->cuMemHostGetDevicePointer(&hostBase, hostPtr, 0),
             "mapping the host tables into the GPU's address space"))
    return false;
  resetAddresses();
  return true;
}

bool GpuExecutor::Impl::copyIn(int bi, uint64_t offset, const void *src, uint64_t bytes,
                               const std::string &what) {
  if (char *host = hostAddress(bi)) {
    std::memcpy(host + offset, src, bytes);
    return true;
  }
  return check(cu->cuMemcpyHtoDAsync(address(bi) + offset, src, bytes, stream), what);
}

bool GpuExecutor::Impl::uploadWeights(const GpuLoadOptions &o) {
  uint64_t stageBytes = std::max<uint64_t>(o.stagingBytes, 1 << 16);
  void *stage[2] = {nullptr, nullptr};
  CUevent done[2] = {nullptr, nullptr};
  bool used[2] = {false, false};
  struct Cleanup {
    Impl &self;
    void **stage;
    CUevent *done;
    ~Cleanup() {
      self.cu->cuStreamSynchronize(self.stream);
      for (int s = 0; s < 2; ++s) {
        if (stage[s])
          self.cu->cuMemFreeHost(stage[s]);
        if (done[s])
          self.cu->cuEventDestroy(done[s]);
      }
    }
  } cleanup{*this, stage, done};
  bool any = std::any_of(p.buffers.begin(), p.buffers.end(),
                         [](const GpuBuffer &b) { return b.kind == BufferKind::Weight; });
  if (!any)
    return true;
  for (int s = 0; s < 2; ++s) {
    if (!check(cu->cuMemAllocHost(&stage[s], stageBytes),
               "allocating " + gib(stageBytes) + " of pinned host memory for weight staging",
               GpuStatus::Resources) ||
        !check(cu->cuEventCreate(&done[s], CU_EVENT_DISABLE_TIMING), "cuEventCreate"))
      return false;
  }
  std::vector<uint8_t> raw; // file bytes of a piece that needs converting
  int slot = 0;
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const GpuBuffer &b = p.buffers[bi];
    if (b.kind != BufferKind::Weight)
      continue;
    const WeightSpec &w = m.weights[b.index];
    std::string name = "weight '" + w.name + "'";
    if (o.dummyWeights) {
      if (!sameAs.empty() && sameAs[bi] >= 0)
        continue; // filled as the buffer it shares
      if (!uploadDummyWeight(static_cast<int>(bi), w, stage, done, used, slot, stageBytes))
        return false;
      continue;
    }
    if (!w.offset || w.file.empty())
      return fail(GpuStatus::BadInput, name + " is stored in typed protobuf fields, not raw bytes; "
                                              "re-export the model with raw_data or external data");
    if (!w.derive.empty()) {
      if (!uploadDerivedWeight(static_cast<int>(bi), w, o))
        return false;
      continue;
    }
    // The rank's slice of the stored tensor (all of it without a shard).
    ShardSlice slice;
    std::string err;
    if (!shardSlice(w, tpRank, slice, err))
      return fail(GpuStatus::BadInput, err);
    int64_t srcEs = dtypeSize(w.dtype), dstEs = dtypeSize(b.dtype);
    int64_t fileBytes = slice.fullElements * srcEs;
    if (w.length && *w.length != fileBytes)
      return fail(GpuStatus::BadInput, name + " is " + std::to_string(*w.length) +
                                           " bytes in the model but its " +
                                           (w.shard ? "full shape" : "shape") + " needs " +
                                           std::to_string(fileBytes));
    if (slice.deviceElements() * dstEs != b.bytes)
      return fail(GpuStatus::BadInput, name + ": its buffer has " + std::to_string(b.bytes) +
                                           " bytes, the slice needs " +
                                           std::to_string(slice.deviceElements() * dstEs));
    std::string file = weightFile(w, o, fileBytes);
    if (file.empty())
      return false;
    bool convert = w.dtype != b.dtype;
    int64_t perPiece = static_cast<int64_t>(stageBytes) / std::max(srcEs, dstEs);
    char *host = hostAddress(static_cast<int>(bi));
    for (const ShardRead &rd : planShardReads(slice, perPiece)) {
      const int64_t n = rd.rows * rd.runElements;
      const bool contiguous = rd.rows == 1 || rd.runElements == rd.strideElements;
      uint64_t off = static_cast<uint64_t>(*w.offset + rd.fileElement * srcEs);
      // A host table's bytes as stored: read into place, no staging copy.
      if (host && !convert && contiguous) {
        if (!readFileRange(file, off, static_cast<uint64_t>(n * srcEs),
                           host + rd.deviceElement * dstEs, err))
          return fail(GpuStatus::BadInput, name + ": " + err);
        continue;
      }
      if (used[slot] && !check(cu->cuEventSynchronize(done[slot]), "uploading " + name))
        return false;
      if (!convert && contiguous) {
        if (!readFileRange(file, off, static_cast<uint64_t>(n * srcEs), stage[slot], err))
          return fail(GpuStatus::BadInput, name + ": " + err);
      } else {
        // Read the span (gaps between a slice's runs included), keep the runs.
        raw.resize(static_cast<size_t>(rd.spanElements() * srcEs));
        if (!readFileRange(file, off, raw.size(), raw.data(), err))
          return fail(GpuStatus::BadInput, name + ": " + err);
        for (int64_t row = 0; row < rd.rows; ++row)
          convertElements(w.dtype, raw.data() + row * rd.strideElements * srcEs, b.dtype,
                          static_cast<uint8_t *>(stage[slot]) + row * rd.runElements * dstEs,
                          static_cast<size_t>(rd.runElements));
      }
      if (!copyIn(static_cast<int>(bi), static_cast<uint64_t>(rd.deviceElement * dstEs),
                  stage[slot], static_cast<uint64_t>(n * dstEs), "uploading " + name) ||
          !check(cu->cuEventRecord(done[slot], stream), "uploading " + name))
        return false;
      used[slot] = true;
      slot ^= 1;
    }
  }
  derivedSourceKey = {};
  std::vector<uint8_t>().swap(derivedSource);
  return check(cu->cuStreamSynchronize(stream), "uploading the weights");
}

std::string GpuExecutor::Impl::weightFile(const WeightSpec &w, const GpuLoadOptions &o,
                                          int64_t fileBytes) {
  const std::string name = "weight '" + w.name + "'";
  std::string file = (o.weightsDir.empty() ? m.modelDir : o.weightsDir) + "/" + w.file;
  int64_t size = fileSize(file);
  std::string why;
  if (size < 0)
    why = name + ": file '" + file + "' is missing (moved? give --weights-dir)";
  else if (w.fileSize && size != *w.fileSize)
    why = "weight file '" + file + "' has " + std::to_string(size) + " bytes, but had " +
          std::to_string(*w.fileSize) + " when the artifact was compiled: recompile it";
  else if (*w.offset < 0 || *w.offset > size || fileBytes > size - *w.offset)
    why = name + ": file '" + file + "' ends before byte " + std::to_string(*w.offset + fileBytes);
  if (why.empty())
    return file;
  fail(GpuStatus::BadInput, why);
  return "";
}

bool GpuExecutor::Impl::uploadDerivedWeight(int bi, const WeightSpec &w,
                                            const GpuLoadOptions &o) {
  const std::string name = "weight '" + w.name + "'";
  const GpuBuffer &b = p.buffers[static_cast<size_t>(bi)];
  const int64_t elements = w.shape[0] * w.shape[1];
  const int64_t fileBytes = w.sourceShape[0] * w.sourceShape[1] * dtypeSize(w.dtype);
  if (w.length && *w.length != fileBytes)
    return fail(GpuStatus::BadInput, name + " is " + std::to_string(*w.length) +
                                         " bytes in the model but its source shape needs " +
                                         std::to_string(fileBytes));
  if (elements * dtypeSize(b.dtype) != b.bytes)
    return fail(GpuStatus::BadInput, name + ": its buffer has " + std::to_string(b.bytes) +
                                         " bytes, the derived tensor needs " +
                                         std::to_string(elements * dtypeSize(b.dtype)));
  std::string file = weightFile(w, o, fileBytes);
  if (file.empty())
    return false;
  std::pair<std::string, int64_t> key{file, *w.offset};
  if (derivedSourceKey != key || derivedSource.size() != static_cast<size_t>(fileBytes)) {
    derivedSource.resize(static_cast<size_t>(fileBytes));
    std::string err;
    if (!readFileRange(file, static_cast<uint64_t>(*w.offset), derivedSource.size(),
                       derivedSource.data(), err)) {
      derivedSourceKey = {};
      return fail(GpuStatus::BadInput, name + ": " + err);
    }
    derivedSourceKey = std::move(key);
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(b.bytes));
  deriveWeight(w, derivedSource.data(), bytes.data());
  return copyIn(bi, 0, bytes.data(), bytes.size(), "uploading " + name) &&
         check(cu->cuStreamSynchronize(stream), "uploading " + name);
}

bool GpuExecutor::Impl::uploadDummyWeight(int bi, const WeightSpec &w, void **stage,
                                          CUevent *done, bool *used, int &slot,
                                          uint64_t stageBytes) {
  // Uniform in [-a, a] with a = sqrt(3 / fan_in), i.e. variance 1 / fan_in
  // (fan_in: the second-to-last dim, the reduced one of a [.., K, N] MatMul
  // weight), so activations keep their scale through the layers and router
  // logits differ between tokens (balanced expert loads); 1-D weights (norm
  // scales, biases, sinks) are 1, integer ones 0. A splitmix64 stream
  // seeded by the weight's name gives P values V (P <= 2M), and stored element j of
  // the weight (its index in the unsplit tensor) is V[j mod P]: cheap for
  // tens of GB, reproducible, and a tensor-parallel rank's slice holds the
  // values the unsplit weight holds there, so virtual ranks with dummy
  // weights can be compared with one GPU at full shapes. (With
  // H20_DUMMY_SHARE unset, weights of one shape and type share one buffer,
  // keyed by their device bytes: a sharded and an unsharded weight of one
  // shape share on one GPU but not on a rank. Comparisons set it to 0.)
  //
  // Block-quantised weights (DeepSeek's checkpoint convention: P.scale holds
  // the block scales of P.weight) get values of the same scale: FP8 e4m3
  // codes of magnitude < 1 (exponent field <= 6: never NaN) with float
  // scales sqrt(3 / K), K = 128 x the scale's last dim; int8 "*.scale"
  // tensors (MXFP4's ue8m0 exponents, one per 32 inputs) 2^round(log2(1 /
  // (2.25 sqrt(K)))) with K = 32 x the last dim (2.25: the mean e2m1
  // magnitude); other int8 tensors (packed e2m1 codes) random bytes. Other
  // integer tables (indices, hashes) stay zeros, which index validly.
  const GpuBuffer &b = p.buffers[bi];
  const bool isFloat = b.dtype == "float32" || b.dtype == "float16" || b.dtype == "bfloat16";
  const bool isScale =
      w.name.size() > 6 && w.name.compare(w.name.size() - 6, 6, ".scale") == 0 && !w.shape.empty();
  if (!isFloat && b.dtype != "int8" && b.dtype != "float8_e4m3fn") {
    if (char *host = hostAddress(bi)) {
      std::memset(host, 0, static_cast<size_t>(b.bytes));
      return true;
    }
    return check(cu->cuMemsetD8Async(address(bi), 0, static_cast<size_t>(b.bytes), stream),
                 "zeroing dummy weight '" + w.name + "'");
  }
  const int64_t es = dtypeSize(b.dtype);
  ShardSlice slice;
  std::string err;
  if (!shardSlice(w, tpRank, slice, err))
    return fail(GpuStatus::BadInput, err);
  if (slice.deviceElements() * es != b.bytes)
    return fail(GpuStatus::BadInput, "dummy weight '" + w.name + "': its buffer has " +
                                         std::to_string(b.bytes) + " bytes, the slice needs " +
                                         std::to_string(slice.deviceElements() * es));
  const int64_t fanIn = w.shape.size() >= 2 ? std::max<int64_t>(1, w.shape[w.shape.size() - 2]) : 0;
  const double a = fanIn ? std::sqrt(3.0 / static_cast<double>(fanIn)) : 0.0;
  // The staging buffers hold V twice, so any P elements from V[j mod P] on
  // are contiguous there. P is at most 2M values (the largest tensor all of
  // whose values still differ: V4.1-Flash's router, 5120 x 384): making V
  // costs host time per weight, and a full-scale rank has ~1000 weights
  // (with P up to the 32 MB staging buffer, 43.65 GiB of dummy weights took
  // 70 s to load on an H100, 4.9 GB/s for 8 layers' 57.8 GiB).
  constexpr int64_t kMaxPeriod = int64_t(1) << 21;
  const int64_t period = std::min<int64_t>(
      {slice.fullElements, static_cast<int64_t>(stageBytes) / es / 2, kMaxPeriod});
  // Seeded by the weight's name (FNV-1a): the same in every artifact of a
  // model, however its weights are ordered or split.
  uint64_t state = 0xCBF29CE484222325ull;
  for (unsigned char c : w.name)
    state = (state ^ c) * 0x100000001B3ull;
  auto next = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  if (isFloat) {
    values.resize(static_cast<size_t>(period));
    const double blockK = isScale ? 128.0 * static_cast<double>(w.shape.back()) : 0.0;
    for (float &v : values) {
      const double u = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
      v = isScale ? static_cast<float>(std::sqrt(3.0 / blockK))
          : fanIn ? static_cast<float>((2.0 * u - 1.0) * a)
                  : 1.0f;
    }
  } else {
    bytes.resize(static_cast<size_t>(period));
    const double k = 32.0 * static_cast<double>(w.shape.back());
    const auto e8m0 =
        static_cast<uint8_t>(127 + std::lround(std::log2(1.0 / (2.25 * std::sqrt(k)))));
    for (uint8_t &v : bytes) {
      const auto r = static_cast<uint8_t>(next() >> 56);
      v = b.dtype == "float8_e4m3fn" ? static_cast<uint8_t>((r & 0x80) | (r % 0x38))
          : isScale                  ? e8m0
                                     : r;
    }
  }
  const std::string name = "dummy weight '" + w.name + "'";
  for (int s = 0; s < 2; ++s) {
    if (used[s] && !check(cu->cuEventSynchronize(done[s]), "uploading " + name))
      return false;
    used[s] = false;
  }
  // Both staging buffers hold the same values (V, V), for either slot.
  for (int s = 0; s < 2; ++s)
    for (int copy = 0; copy < 2; ++copy) {
      char *to = static_cast<char *>(stage[s]) + copy * period * es;
      if (isFloat)
        convertElements("float32", values.data(), b.dtype, to, values.size());
      else
        std::memcpy(to, bytes.data(), bytes.size());
    }
  // Each run of the slice (ShardSlice: stored elements [runStart(o),
  // runStart(o) + runElements), placed one after the other on the device)
  // in pieces of at most P elements starting at V[j mod P].
  int64_t device = 0;
  for (int64_t o = 0; o < slice.outer; ++o)
    for (int64_t j = slice.runStart(o), end = j + slice.runElements; j < end;) {
      const int64_t n = std::min(period, end - j);
      const char *from = static_cast<const char *>(stage[slot]) + (j % period) * es;
      if (!copyIn(bi, static_cast<uint64_t>(device * es), from, static_cast<uint64_t>(n * es),
                  "uploading " + name))
        return false;
      device += n;
      j += n;
    }
  return check(cu->cuStreamSynchronize(stream), "uploading " + name);
}

bool GpuExecutor::Impl::uploadConsts(const Artifact &artifact) {
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const GpuBuffer &b = p.buffers[bi];
    if (b.kind != BufferKind::Const || b.bytes == 0)
      continue;
    const BlobSpec *blob = nullptr;
    for (const BlobSpec &s : m.blobs)
      if (s.name == b.blob)
        blob = &s;
    if (!blob)
      return fail(GpuStatus::BadInput, "buffer " + std::to_string(bi) + ": no blob '" + b.blob + "'");
    const uint8_t *src = artifact.payload.data() + blob->offset + b.blobOffset;
    if (!check(cu->cuMemcpyHtoD(address(static_cast<int>(bi)), src, static_cast<size_t>(b.bytes)),
               "uploading const buffer " + std::to_string(bi)))
      return false;
  }
  return true;
}

} // namespace h20::runtime
