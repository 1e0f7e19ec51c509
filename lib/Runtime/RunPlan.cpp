//===- RunPlan.cpp - what one prefill run will do, checked up front ------===//
//
// Pure: no CUDA, no files. The checks GpuExecutor::run and h20-run share.
//
//===----------------------------------------------------------------------===//
#include "h20/Runtime/RunPlan.h"

#include "h20/Runtime/Parallel/TensorParallel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace h20::runtime {
namespace {

int64_t product(const std::vector<int64_t> &v, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < v.size(); ++i)
    n *= v[i];
  return n;
}

/// Each manifest input against its spec and, unless it is the chunked
/// input, against the buffer the program holds it in.
bool checkInputs(const Manifest &m, const GpuProgram &p, const std::vector<HostTensor> &inputs,
                 RunPlan &plan, std::string &error) {
  if (inputs.size() != m.inputs.size()) {
    error = "the model takes " + std::to_string(m.inputs.size()) + " inputs, got " +
            std::to_string(inputs.size());
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const HostTensor &t = inputs[i];
    const TensorSpec &spec = m.inputs[i];
    int64_t es = dtypeSize(t.dtype);
    int64_t n = 0;
    if (!elementCount(t.shape, n)) {
      error = "input '" + spec.name + "' " + shapeText(t.shape) +
              " has a negative dim or too many elements";
      return false;
    }
    bool shapeOk = t.shape.size() == spec.shape.size();
    for (size_t d = 0; shapeOk && d < t.shape.size(); ++d)
      shapeOk = t.shape[d] >= 0 && (spec.shape[d] < 0 || spec.shape[d] == t.shape[d]);
    if (t.dtype != spec.dtype || !shapeOk || es == 0 ||
        static_cast<int64_t>(t.data.size()) != n * es) {
      error = "input '" + spec.name + "' is " + t.dtype + shapeText(t.shape) + " (" +
              std::to_string(t.data.size()) + " bytes); the model takes " + spec.dtype +
              shapeText(spec.shape);
      return false;
    }
    plan.inputShapes.push_back(t.shape);
    int b = plan.inputBuffer[i];
    bool chunked = p.chunking && p.chunking->input == static_cast<int>(i);
    if (!chunked && b >= 0 && static_cast<int64_t>(t.data.size()) > p.buffers[b].bytes) {
      error = "input '" + spec.name + "' " + shapeText(t.shape) + " has " +
              std::to_string(t.data.size()) + " bytes; the artifact's buffer for it holds " +
              std::to_string(p.buffers[b].bytes) + " (compiled for smaller inputs)";
      return false;
    }
  }
  return true;
}

/// The run's mode from the request; false when the request mixes modes or
/// does not fit the ranks the executor has.
bool chooseMode(const GpuProgram &p, const RunRequest &r, RunPlan &plan, std::string &error) {
  const bool virtualCp = r.virtualRanks > 1, ncclCp = r.contextParallel;
  const int T = r.tpRanks;
  if (virtualCp && ncclCp) {
    error = "a run is either virtual (virtualRanks) or over NCCL (contextParallel)";
    return false;
  }
  if (ncclCp && r.ncclRanks < 2) {
    error = "a context-parallel NCCL run needs a communicator of 2 or more ranks (load with "
            "ncclRanks = N)";
    return false;
  }
  if (r.ncclRanks > 0 && (r.ncclRank < 0 || r.ncclRank >= r.ncclRanks)) {
    error = "NCCL rank " + std::to_string(r.ncclRank) + " is not in [0, " +
            std::to_string(r.ncclRanks) + ")";
    return false;
  }
  if (T > 1 && (r.tpRank < 0 || r.tpRank >= T)) {
    error = "tensor-parallel rank " + std::to_string(r.tpRank) + " is not in [0, " +
            std::to_string(T) + ")";
    return false;
  }
  if (T > 1 && (virtualCp || ncclCp)) {
    error = "context parallelism over an artifact compiled for tensor parallelism (" +
            std::to_string(T) + " ranks) is not supported";
    return false;
  }
  plan.tpRanks = T > 1 ? T : 1;
  if (r.soloTp && (T <= 1 || r.virtualTpRanks > 0 || r.ncclRanks > 0)) {
    error = T <= 1 ? "a solo rank (--solo-rank) runs one rank of a tensor-parallel artifact; this "
                     "one is not one"
                   : "a solo rank (--solo-rank) runs alone, without virtual or NCCL peers";
    return false;
  }
  if (r.soloTp) {
    plan.mode = RunMode::SoloTensorParallel;
  } else if (T > 1 && r.virtualTpRanks > 0) {
    if (r.virtualTpRanks != T) {
      error = "a group of " + std::to_string(r.virtualTpRanks) +
              " virtual ranks for an artifact of " + std::to_string(T) + " tensor-parallel ranks";
      return false;
    }
    plan.mode = RunMode::VirtualTensorParallel;
  } else if (T > 1) {
    if (r.ncclRanks != T || r.ncclRank != r.tpRank) {
      error = "this artifact was compiled for tensor parallelism over " + std::to_string(T) +
              " GPUs; run it with " + std::to_string(T) + " NCCL ranks (--gpus " +
              std::to_string(T) + ") or " + std::to_string(T) + " virtual ranks (--virtual-ranks)";
      return false;
    }
    plan.mode = RunMode::NcclTensorParallel;
  } else if (virtualCp) {
    plan.mode = RunMode::VirtualContextParallel;
    plan.cpRanks = r.virtualRanks;
  } else if (ncclCp) {
    plan.mode = RunMode::NcclContextParallel;
    plan.cpRanks = r.ncclRanks;
    plan.cpRank = r.ncclRank;
  }
  plan.lastOnly = std::all_of(p.outputs.begin(), p.outputs.end(),
                              [](const GpuOutput &o) { return o.mode == OutputMode::Last; });
  if (plan.mode == RunMode::NcclContextParallel && !plan.lastOnly) {
    error = "the artifact returns the logits of every position; an N-GPU prefill needs an "
            "artifact compiled with --logits=last (per-row outputs would be spread over the "
            "ranks)";
    return false;
  }
  return true;
}

/// Output shapes from the input shapes, each against its buffer (a rows
/// output: one chunk's rows).
bool planOutputs(const Manifest &m, const GpuProgram &p, RunPlan &plan, std::string &error) {
  plan.outputs.assign(m.outputs.size(), OutputPlan());
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    const TensorSpec &spec = m.outputs[o];
    OutputPlan &out = plan.outputs[o];
    if (!resolveOutputShape(spec, plan.inputShapes, out.shape, error))
      return false;
    int64_t es = dtypeSize(spec.dtype);
    out.bytes = product(out.shape, 0, out.shape.size()) * es;
    out.buffer = plan.outputBuffer[o];
    const GpuBuffer &buf = p.buffers[out.buffer];
    if (p.outputs[o].mode == OutputMode::Rows) {
      int d = p.outputs[o].dim;
      if (out.shape[d] != plan.tokens) {
        error = "output '" + spec.name + "' " + shapeText(out.shape) + ": its row dim " +
                std::to_string(d) + " is not the " + std::to_string(plan.tokens) + " tokens";
        return false;
      }
      out.rowsOuter = product(out.shape, 0, d);
      out.rowBytes = product(out.shape, d + 1, out.shape.size()) * es;
      int64_t need = out.rowsOuter * p.chunking->chunk * out.rowBytes;
      if (need > buf.bytes) {
        error = "output '" + spec.name + "': a chunk of rows needs " + std::to_string(need) +
                " bytes; its buffer has " + std::to_string(buf.bytes);
        return false;
      }
    } else if (out.bytes > buf.bytes) {
      error = "output '" + spec.name + "' " + shapeText(out.shape) + " needs " +
              std::to_string(out.bytes) + " bytes; its buffer has " + std::to_string(buf.bytes);
      return false;
    }
  }
  return true;
}

} // namespace

const char *runModeName(RunMode mode) {
  switch (mode) {
  case RunMode::Single:
    return "single";
  case RunMode::VirtualContextParallel:
    return "virtual-cp";
  case RunMode::NcclContextParallel:
    return "nccl-cp";
  case RunMode::VirtualTensorParallel:
    return "virtual-tp";
  case RunMode::NcclTensorParallel:
    return "nccl-tp";
  case RunMode::SoloTensorParallel:
    return "solo-tp";
  }
  return "?";
}

bool planRun(const Manifest &m, const GpuProgram &p, const std::vector<HostTensor> &inputs,
             const RunRequest &request, RunPlan &plan, std::string &error) {
  plan = RunPlan();
  plan.inputBuffer.assign(m.inputs.size(), -1);
  plan.outputBuffer.assign(m.outputs.size(), -1);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].kind == BufferKind::Input)
      plan.inputBuffer[p.buffers[b].index] = static_cast<int>(b);
    else if (p.buffers[b].kind == BufferKind::Output)
      plan.outputBuffer[p.buffers[b].index] = static_cast<int>(b);
  }
  if (!checkInputs(m, p, inputs, plan, error))
    return false;
  plan.tokens = request.n;
  if (!p.chunking && request.n < 0) {
    error = "the symbol n is " + std::to_string(request.n) + " (negative)";
    return false;
  }
  if (p.chunking) {
    const GpuChunking &ch = *p.chunking;
    const HostTensor &ids = inputs[ch.input];
    if (product(ids.shape, 0, ch.dim) != 1) {
      error = "the chunked input '" + m.inputs[ch.input].name + "' " + shapeText(ids.shape) +
              " must have batch 1";
      return false;
    }
    plan.tokens = ids.shape[ch.dim];
    if (plan.tokens < 1) {
      error = "the prompt is empty: the chunked input '" + m.inputs[ch.input].name + "' " +
              shapeText(ids.shape) + " has no tokens";
      return false;
    }
    plan.idsInner = product(ids.shape, ch.dim + 1, ids.shape.size());
    plan.idsElemBytes = dtypeSize(ids.dtype);
    plan.chunkBytes = ch.chunk * plan.idsInner * plan.idsElemBytes;
  }
  plan.chunks = chunkSchedule(p, plan.tokens);
  if (!checkGpuProgramForLength(p, plan.tokens, error))
    return false;
  // The mode and, for context parallelism, its whole plan (chunks,
  // segments, ring), so a prompt it cannot split fails here.
  if (!chooseMode(p, request, plan, error))
    return false;
  if (plan.contextParallel() && !planContextParallel(p, plan.cpRanks, plan.tokens, plan.cp, error))
    return false;
  return planOutputs(m, p, plan, error);
}

std::vector<uint8_t> paddedChunkedInput(const GpuProgram &p, const RunPlan &plan,
                                        const HostTensor &input) {
  if (!p.chunking || plan.idsElemBytes <= 0)
    return {};
  size_t bytes = plan.chunks.size() * static_cast<size_t>(plan.chunkBytes);
  std::vector<uint8_t> padded(bytes);
  const int64_t es = plan.idsElemBytes;
  for (size_t e = 0; e < bytes / es; ++e) {
    if (es == 8) {
      int64_t v = p.chunking->padValue;
      std::memcpy(padded.data() + e * 8, &v, 8);
    } else {
      int32_t v = static_cast<int32_t>(p.chunking->padValue);
      std::memcpy(padded.data() + e * 4, &v, 4);
    }
  }
  std::memcpy(padded.data(), input.data.data(), std::min(input.data.size(), bytes));
  return padded;
}

bool chooseDevice(const Manifest &m, const std::string &name, const DeviceRequest &rq,
                  bool &gpu, std::string &error) {
  const std::string art = "'" + name + "'";
  std::string device = rq.device.empty() ? (m.target == "cpu" ? "cpu" : "gpu") : rq.device;
  auto refuse = [&](const std::string &message) {
    error = message;
    return false;
  };
  if (device != "cpu" && device != "gpu")
    return refuse("--device must be cpu or gpu, got '" + device + "'");
  gpu = device == "gpu";
  const int64_t worldSize = rq.worldSize.empty() ? 0 : std::atoll(rq.worldSize.c_str());
  const bool multiProcess = worldSize > 1;
  if (multiProcess && rq.graphRun)
    return refuse("an N-GPU prefill (WORLD_SIZE=" + rq.worldSize +
                  ") runs token ids: give --ids, not --input / --inputs-from");
  if (!gpu) {
    if (m.target != "cpu")
      return refuse(art + " was compiled for target '" + m.target +
                    "'; compile with --target=cpu to run on the CPU");
    if (rq.gpus)
      return refuse("--gpus applies to GPU artifacts; " + art + " runs on the CPU");
    if (rq.dummyWeights)
      return refuse("--dummy-weights applies to GPU runs; " + art + " runs on the CPU");
    if (rq.tuneGemms)
      return refuse("--tune-gemms applies to GPU runs; " + art + " runs on the CPU");
    if (multiProcess)
      return refuse("WORLD_SIZE=" + rq.worldSize + ": " + art +
                    " runs on the CPU, in one process; do not start it as a multi-GPU job");
    const bool sharded = std::any_of(m.weights.begin(), m.weights.end(),
                                     [](const WeightSpec &w) { return w.shard.has_value(); });
    if (m.tensorParallel() > 1 || sharded)
      return refuse(art + " was compiled for tensor parallelism over " +
                    std::to_string(m.tensorParallel()) + " GPUs; it does not run on the CPU");
  }
  // --gpus, else WORLD_SIZE (a rank of a launched job), else not given.
  const int64_t gpusGiven = rq.gpus ? rq.gpus : multiProcess ? worldSize : 0;
  if (!checkTensorParallelGpus(m, gpusGiven, error))
    return false;
  if (gpu && m.target == "cpu")
    return refuse(art + " was compiled for target '" + m.target +
                  "', which runs on the CPU: use --device cpu");
  if (m.outputs.empty())
    return refuse(art + " declares no outputs");
  return true;
}

} // namespace h20::runtime
