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
#include "h20/Runtime/Artifact.h"
#include "h20/Runtime/ContextParallel.h"
#include "h20/Runtime/CpuExecutor.h"
#include "h20/Runtime/FileUtil.h"
#include "h20/Runtime/GpuExecutor.h"
#include "h20/Runtime/GpuProgram.h"
#include "h20/Runtime/Manifest.h"
#include "h20/Runtime/Npy.h"
#include "h20/Runtime/RankLauncher.h"
#include "h20/Runtime/TensorIO.h"
#include "h20/Runtime/TensorParallel.h"

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

namespace {

constexpr int kExitInternal = 1, kExitBadInput = 2, kExitResources = 3;

/// "rank R: " in a process of a multi-GPU job (WORLD_SIZE > 1), so the
/// messages of N ranks can be told apart.
std::string gRankPrefix;
int gLastFailure = 1; ///< the exit code fail() last returned

/// Logits of `count` elements as float32 (float16 and bfloat16, what a
/// 16-bit export's LM head returns, widened exactly); empty for a dtype
/// that is not a float convertElements widens to float32.
std::vector<float> logitsAsFloat32(const std::string &dtype, const void *data, size_t count) {
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16")
    return {};
  std::vector<float> out(count);
  convertElements(dtype, data, "float32", out.data(), count);
  return out;
}

int fail(int code, const std::string &message, bool bug = true) {
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

/// What a step is, for the step profile: the kernel's name, or the GEMM's
/// shape (m x n x k, each the expression's constant part, "+n" when it
/// grows with the chunk's tokens), or the op.
std::string stepLabel(const GpuStep &step) {
  if (auto *l = std::get_if<LaunchStep>(&step))
    return l->kernel;
  if (auto *a = std::get_if<AttentionStep>(&step))
    return a->kernel;
  if (auto *g = std::get_if<GemmStep>(&step)) {
    auto dim = [](const LinearExpr &e) {
      std::string t = std::to_string(e.c);
      if (e.n)
        t = (e.c ? t + "+" : std::string()) + "n";
      return t;
    };
    return std::string(g->groups ? "grouped gemm " : "gemm ") + g->dtypeA + " " + dim(g->m) +
           "x" + dim(g->n) + "x" + dim(g->k);
  }
  return stepOpName(step);
}

/// The step profile of a run made with GpuRunOptions::profileSteps: every
/// step's time (JSON), and the 20 costliest labels (stepLabel, summed over
/// their steps and chunks) printed to `out`.
nlohmann::json stepProfile(const GpuProgram &program, const GpuRunStats &st, FILE *out) {
  nlohmann::json steps = nlohmann::json::array();
  std::map<std::string, std::pair<double, int64_t>> byLabel;
  double total = 0;
  for (size_t i = 0; i < st.stepMs.size() && i < program.steps.size(); ++i) {
    std::string label = stepLabel(program.steps[i]);
    steps.push_back({{"step", i},
                     {"op", stepOpName(program.steps[i])},
                     {"name", label},
                     {"ms", st.stepMs[i]},
                     {"calls", st.stepCalls[i]}});
    byLabel[label].first += st.stepMs[i];
    byLabel[label].second += st.stepCalls[i];
    total += st.stepMs[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(byLabel.begin(),
                                                                       byLabel.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
  std::fprintf(out, "step profile: %.1f ms of GPU time in %zu steps (%lld chunks)\n", total,
               st.stepMs.size(), static_cast<long long>(st.chunks));
  std::fprintf(out, "  %10s %6s %8s  %s\n", "ms", "%", "calls", "kernel / GEMM");
  for (size_t r = 0; r < rows.size() && r < 20; ++r)
    std::fprintf(out, "  %10.2f %5.1f%% %8lld  %s\n", rows[r].second.first,
                 total > 0 ? 100.0 * rows[r].second.first / total : 0.0,
                 static_cast<long long>(rows[r].second.second), rows[r].first.c_str());
  return {{"total_ms", total}, {"steps", steps}};
}

const char *kUsage =
    "usage: h20-run MODEL.h20 --ids IDS [--device cpu|gpu] [--dump-logits OUT.npy]\n"
    "               [--report REPORT.json] [--warmup N] [--repeat N] [--gpus N]\n"
    "               [--no-cuda-graph] [--virtual-ranks] [--weights-dir DIR]\n"
    "               [--profile-steps] [--dummy-weights] [--tune-gemms]\n"
    "       h20-run MODEL.h20 (--input NAME=PATH ... | --inputs-from DIR)\n"
    "               [--output NAME=PATH ...] [--outputs-to DIR] [--report REPORT.json]\n"
    "               [--weights-dir DIR]\n"
    "  IDS: int64/int32 .npy of shape [S] or [1, S], or whitespace-separated text\n"
    "  PATH: .npy or serialized ONNX TensorProto (.pb); DIR: input_J.pb / output_J.pb\n"
    "        in graph order (the ONNX backend-test layout)\n"
    "  --warmup N: on the GPU, run the prefill N times first (default 1; over one\n"
    "        chunk when chunked) so ttft_ms excludes first-launch costs (kernel\n"
    "        loading, cuBLASLt setup); 0 measures a cold start\n"
    "  --repeat N: on the GPU, run the measured prefill N times (default 1);\n"
    "        ttft_ms is their median, ttft_runs_ms lists them all\n"
    "  --gpus N: GPUs of the prefill (default 1, or WORLD_SIZE). N > 1 runs the\n"
    "        context-parallel prefill described under --virtual-ranks on N GPUs,\n"
    "        one process per GPU, K/V passed by NCCL: h20-run starts the N\n"
    "        processes itself (GPUs 0..N-1), or, under a launcher that sets\n"
    "        WORLD_SIZE, RANK and LOCAL_RANK (torchrun), it is one of them and\n"
    "        H20_NCCL_ID_FILE must name a fresh file all ranks see (rank 0 writes\n"
    "        the NCCL id there). Needs --logits=last artifacts; the rank holding\n"
    "        the last position writes the logits and the report. A rank that\n"
    "        fails or dies stops the job: the others abort after\n"
    "        H20_NCCL_TIMEOUT_S seconds (default 30) waiting on one layer's\n"
    "        K/V ring, and h20-run's own launcher stops them at once\n"
    "  --virtual-ranks: with --gpus N (N = 2, 4, 8, ...: a power of two), simulate\n"
    "        N-GPU context parallelism on one GPU. The S prompt tokens are cut into\n"
    "        2N equal chunks of L = S/2N tokens; rank r holds chunks r and 2N-1-r\n"
    "        (zigzag: balanced causal work). L must be a multiple of the artifact's\n"
    "        compiled chunk C (so S a multiple of 2N*C); each CP chunk runs as L/C\n"
    "        compiled chunks. The program runs layer by layer: every rank runs its\n"
    "        chunks up to the layer's attention, the ranks pass the K/V rows they\n"
    "        wrote around a ring (N-1 steps, device copies between the ranks' own\n"
    "        full-size KV caches standing in for NCCL), then every rank runs its\n"
    "        attention; the LM head runs on the rank holding the last position.\n"
    "        Memory: N KV caches and one activation arena per compiled chunk. No\n"
    "        CUDA graphs. The logits equal the --gpus 1 run's. The report gains\n"
    "        \"context_parallel\": the assignment, the ring's sends and bytes per\n"
    "        layer, and whether the ranks' collective sequences match\n"
    "  Tensor-parallel artifacts (h20-opt --gpus T --parallel tensor) run only\n"
    "        with --gpus T: T processes, one per GPU, each loading its slices of\n"
    "        the weights and summing partial results with ncclAllReduce (rank 0\n"
    "        writes the logits and the report); with --virtual-ranks, T ranks on\n"
    "        one GPU (one thread each; the all-reduces summed on the host),\n"
    "        whose outputs are checked bitwise equal. The report gains\n"
    "        \"tensor_parallel\": mode, ranks, all-reduce count, bytes and time,\n"
    "        whether the ranks' all-reduce logs match\n"
    "  --no-cuda-graph: launch every step of every chunk on its own instead of\n"
    "        replaying each chunk as a CUDA graph (same results, more launch gaps)\n"
    "  --profile-steps: time every step of every chunk (CUDA events; no CUDA\n"
    "        graphs, the host waits for each chunk, so the TTFT is no benchmark):\n"
    "        the 20 costliest kernels/GEMMs on stderr, every step in the report's\n"
    "        \"step_profile\"\n"
    "  --tune-gemms: GPU only: time cuBLASLt's candidate algorithms for every\n"
    "        GEMM shape of the program (up to 8 each, on scratch operands) before\n"
    "        the first chunk of the first run (the warm-up's, by default) and keep\n"
    "        the fastest, instead of the heuristic's first choice; the report's\n"
    "        \"gemm_tuning\" lists each shape's times. Single-GPU chunk loops only\n"
    "  --dummy-weights: GPU only: read no weight file; fill every weight with\n"
    "        reproducible pseudo-random values (uniform, variance 1/fan_in; 1-D\n"
    "        weights 1, integer ones 0) to time a model whose checkpoint is not at\n"
    "        hand (e.g. a --graph-only export); weights of one shape and type\n"
    "        share one buffer (layers with the same shapes need the memory of\n"
    "        one). The outputs mean nothing\n"
    "  --weights-dir DIR: where the model's ONNX file and external data are now\n"
    "        (default: where they were at compile time)\n"
    "  exit codes: 0 ok, 1 internal error (or another rank of an N-GPU job failed),\n"
    "        2 bad input, 3 out of memory; the N-GPU launcher: a failed rank's code,\n"
    "        128 + signal when it was stopped by a signal\n";

struct Options {
  std::string artifact, ids, device, dumpLogits, report, inputsFrom, outputsTo, weightsDir;
  char **argv = nullptr; ///< the command line, for the ranks h20-run starts
  int64_t warmup = 1; ///< GPU: warm-up prefills before the measured one
  int64_t repeat = 1; ///< GPU: measured prefills (the report gives their median)
  int64_t gpus = 0;   ///< --gpus; 0: not given
  bool noCudaGraph = false;
  bool profileSteps = false;
  bool dummyWeights = false; ///< --dummy-weights
  bool tuneGemms = false;    ///< --tune-gemms
  bool virtualRanks = false; ///< --virtual-ranks
  std::vector<std::pair<std::string, std::string>> inputs, outputs; ///< NAME=PATH
};

bool parseArgs(int argc, char **argv, Options &o, std::string &error) {
  o.argv = argv;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // "--flag=VALUE" or "--flag VALUE"; an empty value is an error.
    auto value = [&](std::string &dst) {
      size_t eq = a.find('=');
      std::string flag = a.substr(0, eq);
      if (eq != std::string::npos) {
        dst = a.substr(eq + 1);
      } else if (i + 1 < argc) {
        dst = argv[++i];
      } else {
        error = "option " + a + " needs a value";
        return false;
      }
      if (dst.empty()) {
        error = "option " + flag + " needs a non-empty value";
        return false;
      }
      return true;
    };
    // An integer option value in [lo, hi]; `what` starts the error message.
    auto count = [&](auto &dst, long long lo, long long hi, const char *what) {
      std::string v;
      if (!value(v))
        return false;
      char *end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || n < lo || n > hi) {
        error = std::string(what) + ", got '" + v + "'";
        return false;
      }
      dst = static_cast<std::remove_reference_t<decltype(dst)>>(n);
      return true;
    };
    auto is = [&](const char *flag) {
      return a == flag || a.rfind(std::string(flag) + "=", 0) == 0;
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (is("--ids")) {
      if (!value(o.ids)) return false;
    } else if (is("--device")) {
      if (!value(o.device)) return false;
    } else if (is("--dump-logits")) {
      if (!value(o.dumpLogits)) return false;
    } else if (is("--report")) {
      if (!value(o.report)) return false;
    } else if (is("--weights-dir")) {
      if (!value(o.weightsDir)) return false;
    } else if (is("--warmup")) {
      if (!count(o.warmup, 0, 100, "--warmup takes a count from 0 to 100")) return false;
    } else if (is("--repeat")) {
      if (!count(o.repeat, 1, 100, "--repeat takes a count from 1 to 100")) return false;
    } else if (is("--gpus")) {
      if (!count(o.gpus, 1, 1024, "--gpus takes a GPU count from 1")) return false;
    } else if (a == "--no-cuda-graph") {
      o.noCudaGraph = true;
    } else if (a == "--profile-steps") {
      o.profileSteps = true;
    } else if (a == "--dummy-weights") {
      o.dummyWeights = true;
    } else if (a == "--tune-gemms") {
      o.tuneGemms = true;
    } else if (a == "--virtual-ranks") {
      o.virtualRanks = true;
    } else if (is("--inputs-from")) {
      if (!value(o.inputsFrom)) return false;
    } else if (is("--outputs-to")) {
      if (!value(o.outputsTo)) return false;
    } else if (is("--input") || is("--output")) {
      bool in = is("--input");
      std::string v;
      if (!value(v)) return false;
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        error = std::string(in ? "--input" : "--output") + " takes NAME=PATH, got '" + v + "'";
        return false;
      }
      (in ? o.inputs : o.outputs).emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (!a.empty() && a[0] == '-') {
      error = "unknown option '" + a + "'";
      return false;
    } else if (o.artifact.empty()) {
      o.artifact = a;
    } else {
      error = "unexpected argument '" + a + "'";
      return false;
    }
  }
  bool generic = !o.inputs.empty() || !o.inputsFrom.empty();
  if (o.artifact.empty() || (o.ids.empty() && !generic)) {
    error = "need an artifact and --ids (or --input / --inputs-from)";
    return false;
  }
  if (!o.ids.empty() && generic) {
    error = "--ids and --input / --inputs-from exclude each other";
    return false;
  }
  if (o.virtualRanks && o.gpus < 2) {
    error = "--virtual-ranks simulates N > 1 context-parallel ranks on one GPU: give --gpus N "
            "with N = 2, 4, 8, ...";
    return false;
  }
  if (o.virtualRanks && generic) {
    error = "--virtual-ranks runs a token-id prefill: give --ids, not --input / --inputs-from";
    return false;
  }
  if (o.gpus > 1 && !o.virtualRanks && generic) {
    error = "--gpus N > 1 runs a token-id prefill: give --ids, not --input / --inputs-from";
    return false;
  }
  return true;
}

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

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int exitCode(GpuStatus s) {
  switch (s) {
  case GpuStatus::Ok: return 0;
  case GpuStatus::Internal:
  case GpuStatus::PeerFailed: return kExitInternal;
  case GpuStatus::BadInput:
  case GpuStatus::NoDevice: return kExitBadInput;
  case GpuStatus::Resources: return kExitResources;
  }
  return kExitInternal;
}
/// fail() for a GpuStatus: exit code and whether it is h20's bug.
int fail(GpuStatus s, const std::string &message) {
  return fail(exitCode(s), message, s != GpuStatus::PeerFailed);
}

/// Writes the outputs of a generic run (--output NAME=PATH, --outputs-to).
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

/// Reads the integer environment variable `name` into `out`; false with
/// `error` when it is set but not a non-negative integer. `set` says
/// whether it is set (and not empty).
bool envCount(const char *name, int64_t &out, bool &set, std::string &error) {
  const char *v = std::getenv(name);
  set = v && *v;
  if (!set)
    return true;
  char *end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0 || n > (1 << 20)) {
    error = std::string(name) + "='" + v + "' is not a non-negative integer";
    return false;
  }
  out = n;
  return true;
}

/// How this process takes part in the prefill.
enum class RankMode {
  Single, ///< one GPU (--gpus 1, or --virtual-ranks)
  Launch, ///< --gpus N > 1 without WORLD_SIZE: start N rank processes
  Worker, ///< rank RANK of WORLD_SIZE > 1 processes
};

/// The GPUs of the prefill and this process's place among them: --gpus N
/// (else WORLD_SIZE, else 1), RANK, LOCAL_RANK (the CUDA device),
/// H20_NCCL_ID_FILE and H20_NCCL_TIMEOUT_S for the ranks of an N-GPU job.
bool gpuRanks(const Options &opt, int tensorParallel, GpuLoadOptions &lo, RankMode &mode,
              std::string &error) {
  int64_t world = 1, rank = 0, local = 0, timeout = 30;
  bool worldSet = false, rankSet = false, localSet = false, timeoutSet = false;
  if (!envCount("WORLD_SIZE", world, worldSet, error) ||
      !envCount("RANK", rank, rankSet, error) ||
      !envCount("LOCAL_RANK", local, localSet, error) ||
      !envCount("H20_NCCL_TIMEOUT_S", timeout, timeoutSet, error))
    return false;
  mode = RankMode::Single;
  if (opt.gpus && worldSet && world != opt.gpus) {
    error = "--gpus " + std::to_string(opt.gpus) + " disagrees with WORLD_SIZE=" +
            std::to_string(world);
    return false;
  }
  if (opt.virtualRanks) {
    // One process simulates every rank: no NCCL, GPU LOCAL_RANK (default 0).
    if (worldSet && world > 1) {
      error = "--virtual-ranks simulates the " + std::to_string(opt.gpus) +
              " ranks in one process; do not launch it as WORLD_SIZE=" + std::to_string(world) +
              " processes";
      return false;
    }
    lo.ncclRanks = 0;
    lo.ncclRank = 0;
    lo.device = static_cast<int>(local);
    return true;
  }
  if (worldSet && world > 1 && !rankSet) {
    error = "WORLD_SIZE=" + std::to_string(world) + " without RANK: each process of a " +
            "multi-GPU job needs its RANK (and LOCAL_RANK, its GPU; default RANK)";
    return false;
  }
  if (!localSet)
    local = rank; // one host: rank r on GPU r
  int64_t n = opt.gpus ? opt.gpus : worldSet ? world : 1;
  if (n < 1) {
    error = "WORLD_SIZE=0: no GPU to run on";
    return false;
  }
  if (rank >= n) {
    error = "RANK=" + std::to_string(rank) + " is not below the " + std::to_string(n) +
            " GPU(s) of the prefill";
    return false;
  }
  if (timeoutSet && timeout < 1) {
    error = "H20_NCCL_TIMEOUT_S=0: give the seconds a rank may wait for its peers (>= 1)";
    return false;
  }
  lo.ncclRanks = static_cast<int>(n);
  lo.ncclRank = static_cast<int>(rank);
  lo.device = static_cast<int>(local);
  lo.ncclTimeoutS = static_cast<double>(timeout);
  if (n > 1 && (!opt.inputs.empty() || !opt.inputsFrom.empty())) {
    error = "an N-GPU prefill (N = " + std::to_string(n) + ") runs token ids: give --ids, not "
            "--input / --inputs-from";
    return false;
  }
  if (n > 1 && tensorParallel == 1 && (n & (n - 1)) != 0) {
    error = "--gpus " + std::to_string(n) + ": context parallelism needs a power of two (the "
            "prompt is cut into 2N equal chunks)";
    return false;
  }
  lo.tensorParallelRank = tensorParallel > 1 ? static_cast<int>(rank) : 0;
  if (n > 1 && !worldSet) {
    mode = RankMode::Launch;
    return true;
  }
  if (n > 1) {
    const char *idFile = std::getenv("H20_NCCL_ID_FILE");
    if (!idFile || !*idFile) {
      error = "WORLD_SIZE=" + std::to_string(n) + ": set H20_NCCL_ID_FILE to a fresh file every "
              "rank can see (rank 0 writes the NCCL unique id there), or let h20-run start the "
              "ranks itself (--gpus N without WORLD_SIZE)";
      return false;
    }
    lo.ncclIdFile = idFile;
    mode = RankMode::Worker;
  }
  return true;
}

/// Runs a GPU artifact: parses its "gpu" program, loads it (weights streamed
/// to the GPU), runs the prefill, writes what was asked and the report.
int runOnGpu(const Options &opt, const Artifact &artifact, const Manifest &m,
             const std::vector<HostTensor> &inputs, int64_t S, bool generic,
             std::chrono::steady_clock::time_point tStart) {
  std::string error;
  GpuProgram program;
  if (!parseGpuProgram(artifact.manifest, m, artifact.payload.size(), program, error))
    return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
  GpuLoadOptions lo;
  lo.weightsDir = opt.weightsDir;
  lo.dummyWeights = opt.dummyWeights;
  lo.tuneGemms = opt.tuneGemms;
  // T > 1: tensor parallelism (each rank its weight slices, all-reduces);
  // main() made sure --gpus is T.
  const int T = m.tensorParallel();
  RankMode mode = RankMode::Single;
  if (!gpuRanks(opt, T, lo, mode, error))
    return fail(kExitBadInput, error);
  const bool virtualTp = T > 1 && opt.virtualRanks;
  const int cpRanks = T > 1               ? 0
                      : opt.virtualRanks  ? static_cast<int>(opt.gpus)
                      : mode != RankMode::Single ? lo.ncclRanks
                                                 : 0;
  if (cpRanks > 1) {
    if (opt.virtualRanks && (opt.gpus & (opt.gpus - 1)) != 0)
      return fail(kExitBadInput,
                  "--virtual-ranks needs a power of two for --gpus (the prompt is cut into 2N "
                  "equal chunks), got " + std::to_string(opt.gpus));
    // The whole plan (chunks, layer segments, ring) before the GPU is touched.
    CpPlan cp;
    if (!planContextParallel(program, cpRanks, S, cp, error))
      return fail(kExitBadInput, "'" + opt.artifact + "': " + error);
    bool lastOnly = std::all_of(program.outputs.begin(), program.outputs.end(),
                                [](const GpuOutput &o) { return o.mode == OutputMode::Last; });
    if (mode != RankMode::Single && !lastOnly)
      return fail(kExitBadInput, "'" + opt.artifact + "' returns the logits of every position; "
                                 "an N-GPU prefill needs an artifact compiled with --logits=last");
  }
  // A rank of an N-GPU job that fails after joining NCCL leaves with
  // _exit: the executor's destructor would call ncclCommDestroy, which
  // waits for peers that have given up (or died).
  struct WorkerExit {
    bool worker = false, ok = false;
    ~WorkerExit() {
      if (worker && !ok) {
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(gLastFailure);
      }
    }
  };
  if (mode == RankMode::Launch) {
    // One clear message here rather than one per rank (after the checks
    // of the artifact and prompt above, which need no GPU).
    int visible = GpuExecutor::deviceCount(error);
    if (visible < 0)
      return fail(kExitBadInput, "no CUDA-capable GPU/driver: " + error);
    if (visible < lo.ncclRanks)
      return fail(kExitBadInput, "--gpus " + std::to_string(lo.ncclRanks) + ": this machine has " +
                                     std::to_string(visible) + " GPU(s) visible");
    return launchRanks(lo.ncclRanks, "/proc/self/exe", opt.argv);
  }
  WorkerExit workerExit{mode == RankMode::Worker, false};
  // One executor, or one per virtual tensor-parallel rank (all on this GPU).
  const int executors = virtualTp ? T : 1;
  std::vector<std::unique_ptr<GpuExecutor>> gpus;
  GpuStatus s = GpuStatus::Ok;
  for (int r = 0; r < executors; ++r) {
    gpus.push_back(std::make_unique<GpuExecutor>());
    GpuLoadOptions lr = lo;
    if (virtualTp)
      lr.tensorParallelRank = r;
    s = gpus[r]->load(artifact, m, program, lr, error);
    if (s != GpuStatus::Ok)
      return fail(s, (virtualTp ? "virtual rank " + std::to_string(r) + ": " : std::string()) +
                         error);
  }
  GpuExecutor &gpu = *gpus[0];
  const GpuDeviceInfo &dev = gpu.device();
  const GpuLoadStats &ls = gpu.loadStats();
  if (ls.nccl.rfind("unavailable", 0) == 0)
    std::fprintf(stderr, "h20-run: note: NCCL %s; the 1-GPU prefill runs without it\n",
                 ls.nccl.c_str());

  std::unique_ptr<HostAllReduceGroup> group;
  if (virtualTp)
    group = std::make_unique<HostAllReduceGroup>(T);
  GpuRunOptions ro;
  ro.n = generic ? 0 : S;
  ro.cudaGraph = !opt.noCudaGraph && cpRanks < 2;
  ro.profileSteps = opt.profileSteps;
  ro.virtualRanks = cpRanks > 1 && opt.virtualRanks ? cpRanks : 0;
  ro.contextParallel = mode == RankMode::Worker && T == 1;
  ro.virtualTensorParallel = group.get();
  if (program.chunking && isatty(STDERR_FILENO) && cpRanks < 2)
    ro.progress = [](int64_t chunk, int64_t chunks, int64_t done, int64_t tokens, double ms) {
      std::fprintf(stderr, "\rprefill: chunk %lld/%lld, %lld/%lld tokens (%.1f ms)\x1b[K",
                   static_cast<long long>(chunk + 1), static_cast<long long>(chunks),
                   static_cast<long long>(done), static_cast<long long>(tokens), ms);
      if (chunk + 1 == chunks)
        std::fputc('\n', stderr);
      std::fflush(stderr);
    };
  // One rank's prefills: warm-up runs load every kernel and let cuBLASLt
  // pick its algorithms (a chunked program warms up on its first chunk
  // only); then the measured runs, whose outputs and per-stage figures are
  // the last run's, ttft_ms the median of all.
  struct RankRun {
    std::vector<HostTensor> outputs;
    GpuRunStats st;
    std::vector<double> warmupMs, runMs;
    std::vector<GemmTuning> gemmTuning; ///< from the run that tuned (the first)
    GpuStatus status = GpuStatus::Ok;
    std::string error;
  };
  auto prefills = [&](GpuExecutor &ex, GpuRunOptions runOpts, RankRun &rr) {
    for (int64_t w = 0; w < opt.warmup; ++w) {
      std::vector<HostTensor> warmInputs = inputs;
      GpuRunOptions wo;
      wo.n = runOpts.n;
      wo.cudaGraph = runOpts.cudaGraph;
      wo.virtualTensorParallel = runOpts.virtualTensorParallel;
      if (program.chunking) {
        HostTensor &t = warmInputs[program.chunking->input];
        int dim = program.chunking->dim;
        int64_t outer = 1, inner = dtypeSize(t.dtype);
        for (int d = 0; d < static_cast<int>(t.shape.size()); ++d)
          if (d < dim)
            outer *= t.shape[d];
          else if (d > dim)
            inner *= t.shape[d];
        if (outer == 1 && dim < static_cast<int>(t.shape.size()) &&
            t.shape[dim] > program.chunking->chunk) {
          t.shape[dim] = program.chunking->chunk;
          t.data.resize(static_cast<size_t>(t.shape[dim] * inner));
        }
      }
      rr.status = ex.run(warmInputs, wo, rr.outputs, rr.st, rr.error);
      if (rr.status != GpuStatus::Ok)
        return;
      rr.warmupMs.push_back(rr.st.ttftMs);
      if (!rr.st.gemmTuning.empty())
        rr.gemmTuning = rr.st.gemmTuning;
    }
    for (int64_t r = 0; r < opt.repeat; ++r) {
      rr.status = ex.run(inputs, runOpts, rr.outputs, rr.st, rr.error);
      if (rr.status != GpuStatus::Ok)
        return;
      rr.runMs.push_back(rr.st.ttftMs);
      if (!rr.st.gemmTuning.empty())
        rr.gemmTuning = rr.st.gemmTuning;
    }
  };
  std::vector<RankRun> runs(executors);
  if (executors == 1) {
    prefills(gpu, ro, runs[0]);
  } else {
    // Virtual tensor parallelism: one thread per rank, in lockstep at the
    // all-reduces; a failing rank ends the group (the others stop there).
    std::vector<std::thread> threads;
    for (int r = 0; r < executors; ++r)
      threads.emplace_back([&, r] {
        GpuRunOptions rankOpts = ro;
        if (r != 0)
          rankOpts.progress = nullptr;
        prefills(*gpus[r], rankOpts, runs[r]);
        if (runs[r].status != GpuStatus::Ok)
          group->abort("virtual rank " + std::to_string(r) + " failed: " + runs[r].error);
      });
    for (std::thread &t : threads)
      t.join();
  }
  // The first failure that is not a consequence of another rank's.
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < executors; ++r)
      if (runs[r].status != GpuStatus::Ok &&
          (pass == 1 || runs[r].status != GpuStatus::PeerFailed))
        return fail(runs[r].status, (executors > 1 ? "virtual rank " + std::to_string(r) + ": "
                                                   : std::string()) +
                                        runs[r].error);
  std::vector<HostTensor> &outputs = runs[0].outputs;
  GpuRunStats &st = runs[0].st;
  const std::vector<double> &warmupMs = runs[0].warmupMs, &runMs = runs[0].runMs;
  std::vector<double> sortedMs = runMs;
  std::sort(sortedMs.begin(), sortedMs.end());
  size_t mid = sortedMs.size() / 2;
  st.ttftMs = sortedMs.size() % 2 ? sortedMs[mid] : (sortedMs[mid - 1] + sortedMs[mid]) / 2;
  // Virtual tensor parallelism: every rank got the same sums, so the same
  // outputs, bit for bit; and issued the same all-reduces.
  bool tpOutputsMatch = true, tpLogsMatch = true;
  std::string tpOutputsNote, tpLogsNote;
  if (virtualTp) {
    std::vector<std::vector<TpCollective>> logs;
    for (int r = 0; r < executors; ++r) {
      logs.push_back(runs[r].st.tpLog);
      for (size_t o = 0; o < outputs.size() && tpOutputsMatch; ++o)
        if (o >= runs[r].outputs.size() || runs[r].outputs[o].data != outputs[o].data) {
          tpOutputsMatch = false;
          tpOutputsNote = "virtual rank " + std::to_string(r) + "'s output '" + outputs[o].name +
                          "' differs from rank 0's";
        }
    }
    tpLogsMatch = tpCollectivesMatch(logs, tpLogsNote);
  }

  if (mode == RankMode::Worker) {
    // The rank's log for the launcher (collectives compared across ranks).
    int me = lo.ncclRank;
    nlohmann::json log{{"rank", me},
                       {"gpu", dev.ordinal},
                       {"ttft_ms", st.ttftMs},
                       {"ttft_runs_ms", runMs},
                       {"collectives", collectivesToJson(me < static_cast<int>(st.cpRankLog.size())
                                                             ? st.cpRankLog[me]
                                                             : std::vector<CpCollective>{})},
                       {"tp_collectives", tpCollectivesToJson(st.tpLog)}};
    if (!writeRankLog(me, log.dump(1) + "\n", error))
      return fail(kExitBadInput, error);
    // Context parallelism: the rank holding the last position has the
    // logits; tensor parallelism: every rank has them, rank 0 writes.
    const int outputRank = T > 1 ? 0 : st.cpOutputRank;
    if (outputRank != me) {
      workerExit.ok = true;
      return 0; // the logits, outputs and report are the output rank's
    }
  }
  if (!writeOutputs(opt, outputs, error))
    return fail(kExitBadInput, error);
  if (generic) {
    std::printf("ran %zu input(s) -> %zu output(s) in %.1f ms on %s (GPU %d)\n", inputs.size(),
                outputs.size(), st.ttftMs, dev.name.c_str(), dev.ordinal);
    workerExit.ok = true;
    return 0;
  }

  // Next token: argmax over the last position's logits (output 0).
  const HostTensor &lt = outputs[0];
  if (lt.shape.empty() || lt.shape.back() <= 0)
    return fail(kExitBadInput, "output 0 is not logits [..., vocab]");
  int64_t vocab = lt.shape.back(), rows = 1;
  for (int64_t d : lt.shape)
    rows *= d;
  std::vector<float> wide = logitsAsFloat32(lt.dtype, lt.data.data(), static_cast<size_t>(rows));
  if (wide.empty() && rows > 0)
    return fail(kExitBadInput, "output 0 is " + lt.dtype + ", not float32/float16/bfloat16 logits");
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
      !writeFileAtomically(opt.dumpLogits, encodeNpyF32(lt.shape, logits), error))
    return fail(kExitBadInput, error);

  double totalMs = msSince(tStart);
  double tokensPerS = st.ttftMs > 0 ? S / (st.ttftMs / 1000.0) : 0.0;
  char driver[32], cc[16];
  std::snprintf(driver, sizeof driver, "%d.%d", dev.driverVersion / 1000,
                (dev.driverVersion % 1000) / 10);
  std::snprintf(cc, sizeof cc, "%d.%d", dev.ccMajor, dev.ccMinor);
  nlohmann::json report{{"device", "gpu"},
                        {"gpu", dev.name},
                        {"driver", driver},
                        {"compute_capability", cc},
                        {"code", ls.code},
                        {"tokens", S},
                        {"next_token_id", next},
                        {"ttft_ms", st.ttftMs},
                        {"tokens_per_s", tokensPerS},
                        {"stages_ms",
                         {{"load_weights", ls.loadWeightsMs},
                          {"upload_ids", st.uploadInputsMs},
                          {"prefill", st.prefillMs},
                          {"download", st.downloadMs},
                          {"total", totalMs}}},
                        {"warmup_runs", opt.warmup},
                        {"warmup_ttft_ms", warmupMs},
                        {"ttft_runs_ms", runMs},
                        {"chunks", st.chunks},
                        {"chunk_ms", st.chunkMs},
                        {"peak_gpu_memory_bytes", st.peakGpuMemoryBytes},
                        {"device_memory_used_bytes", st.deviceMemoryUsedBytes},
                        {"weight_bytes", ls.weightBytes},
                        {"logits", m.logits}};
  report["gpus"] = opt.virtualRanks ? 1 : std::max(lo.ncclRanks, 1); // physical GPUs
  if (ls.nccl.empty() || ls.nccl.rfind("unavailable", 0) == 0)
    report["nccl"] = ls.nccl.empty() ? "not used" : ls.nccl;
  else
    report["nccl"] = {{"version", ls.nccl},
                      {"ranks", ls.ncclRanks},
                      {"rank", ls.ncclRank},
                      {"init_ms", ls.ncclInitMs}};
  report["cuda_graph"] = {{"used", st.cudaGraph},
                          {"captures", st.graphCaptures},
                          {"launches", st.graphLaunches},
                          {"node_updates", st.graphNodeUpdates},
                          {"nodes", st.graphNodes}};
  if (!st.cudaGraphNote.empty())
    report["cuda_graph"]["note"] = st.cudaGraphNote;
  if (opt.tuneGemms) {
    nlohmann::json tuning = nlohmann::json::array();
    for (const GemmTuning &t : runs[0].gemmTuning) {
      nlohmann::json row = {{"shape", t.shape},
                            {"candidates", t.candidates},
                            {"chosen", t.chosen},
                            {"first_ms", t.firstMs},
                            {"chosen_ms", t.chosenMs}};
      if (!t.note.empty())
        row["note"] = t.note;
      tuning.push_back(row);
    }
    report["gemm_tuning"] = tuning;
  }
  int64_t ringBytes = 0;
  double ringMs = 0;
  const int cpN = st.virtualRanks > 1 ? st.virtualRanks : st.ncclRanks;
  if (cpN > 1) {
    nlohmann::json ring = nlohmann::json::array();
    for (size_t l = 0; l < st.cpRing.size(); ++l) {
      const CpLayerTraffic &t = st.cpRing[l];
      double ms = l < st.cpRingMs.size() ? st.cpRingMs[l] : 0.0;
      ring.push_back({{"layer", t.layer},
                      {"steps", t.steps},
                      {"sends", t.sends},
                      {"copies", t.copies},
                      {"bytes", t.bytes},
                      {"ms", ms}});
      ringBytes += t.bytes;
      ringMs += ms;
    }
    nlohmann::json perRank = nlohmann::json::array();
    for (const auto &log : st.cpRankLog) {
      int64_t bytes = 0;
      for (const CpCollective &c : log)
        bytes += c.sendBytes;
      perRank.push_back({{"collectives", log.size()}, {"send_bytes", bytes}});
    }
    // A virtual run: rank 0's collectives; an NCCL run: this rank's.
    int shown = st.ncclRanks > 1 ? st.cpRank : 0;
    nlohmann::json rank0 = collectivesToJson(
        shown >= 0 && shown < static_cast<int>(st.cpRankLog.size()) ? st.cpRankLog[shown]
                                                                     : std::vector<CpCollective>{});
    report["context_parallel"] = {{"mode", st.ncclRanks > 1 ? "nccl" : "virtual"},
                                  {"ranks", cpN},
                                  {"cp_chunks", 2 * cpN},
                                  {"cp_chunk_tokens", st.cpChunkTokens},
                                  {"compiled_chunk", program.chunking->chunk},
                                  {"pieces", st.cpPieces},
                                  {"tail_pieces", st.cpTailPieces},
                                  {"rank_chunks", st.cpRankChunks},
                                  {"ring", ring},
                                  {"ring_bytes", ringBytes},
                                  {"ring_ms", ringMs},
                                  {"ranks_log", perRank},
                                  {st.ncclRanks > 1 ? "rank_collectives" : "rank0_collectives",
                                   rank0},
                                  {"extra_gpu_memory_bytes", st.cpExtraBytes},
                                  {"ttft_ms", st.ttftMs}};
    // NCCL: each rank knows only its own collectives; the launcher compares them.
    if (st.virtualRanks > 1)
      report["context_parallel"]["collectives_match"] = st.cpCollectivesMatch;
    if (!st.cpCollectivesNote.empty())
      report["context_parallel"]["collectives_note"] = st.cpCollectivesNote;
  }
  if (m.parallel) // the multi-GPU plan h20-opt recorded
    report["parallel"] = nlohmann::json::parse(m.parallel->json, nullptr, false);
  if (T > 1) {
    nlohmann::json perRank = nlohmann::json::array();
    for (int r = 0; r < executors; ++r)
      perRank.push_back({{"weight_bytes", gpus[r]->loadStats().weightBytes},
                         {"load_weights_ms", gpus[r]->loadStats().loadWeightsMs},
                         {"all_reduce_ms", runs[r].st.allReduceMs},
                         {"ttft_ms", runs[r].runMs.empty() ? 0.0 : runs[r].runMs.back()}});
    nlohmann::json tp{{"mode", virtualTp ? "virtual" : "nccl"},
                      {"ranks", T},
                      {"all_reduces", st.allReduces},
                      {"all_reduce_bytes", st.allReduceBytes},
                      {"all_reduce_ms", st.allReduceMs}};
    if (virtualTp) {
      tp["logs_match"] = tpLogsMatch;
      tp["outputs_match"] = tpOutputsMatch;
      if (!tpLogsNote.empty())
        tp["logs_note"] = tpLogsNote;
      if (!tpOutputsNote.empty())
        tp["outputs_note"] = tpOutputsNote;
      tp["ranks_log"] = perRank;
    } else {
      // Each process knows only its own log; the launcher compares them.
      tp["rank"] = lo.ncclRank;
      tp["logs_match"] = nullptr;
      tp["logs_note"] = "each rank's all-reduces are compared by h20-run's launcher (--gpus N "
                        "without WORLD_SIZE) once every rank has finished";
      tp["ranks_log"] = perRank; // this rank's
    }
    tp["rank0_all_reduces"] = tpCollectivesToJson(st.tpLog);
    report["tensor_parallel"] = tp;
  }
  if (!st.stepMs.empty())
    report["step_profile"] = stepProfile(program, st, stderr);
  if (!opt.report.empty() && !writeFileAtomically(opt.report, report.dump(2) + "\n", error))
    return fail(kExitBadInput, error);
  std::printf("next token id: %lld\n", static_cast<long long>(next));
  if (st.virtualRanks > 1)
    std::printf("context parallel (virtual): %d ranks x 2 chunks of %lld tokens; ring %.2f GiB "
                "in %.1f ms over %zu layers; collectives %s\n",
                st.virtualRanks, static_cast<long long>(st.cpChunkTokens),
                static_cast<double>(ringBytes) / (1ull << 30), ringMs, st.cpRing.size(),
                st.cpCollectivesMatch ? "match" : ("DIFFER: " + st.cpCollectivesNote).c_str());
  if (st.ncclRanks > 1)
    std::printf("context parallel (NCCL %s): rank %d of %d holds the last position; %d x 2 "
                "chunks of %lld tokens; ring %.2f GiB over %zu layers (this rank's share %.1f "
                "ms)\n",
                ls.nccl.c_str(), st.cpRank, st.ncclRanks, st.ncclRanks,
                static_cast<long long>(st.cpChunkTokens),
                static_cast<double>(ringBytes) / (1ull << 30), st.cpRing.size(), ringMs);
  if (T > 1)
    std::printf("tensor parallel (%s): %d ranks; %lld all-reduces of %.2f MiB in %.1f ms (rank "
                "0)%s%s\n",
                virtualTp ? "virtual" : ("NCCL " + ls.nccl).c_str(), T,
                static_cast<long long>(st.allReduces),
                static_cast<double>(st.allReduceBytes) / (1 << 20), st.allReduceMs,
                virtualTp ? (tpLogsMatch ? "; all-reduce logs match" : "; all-reduce logs DIFFER")
                          : "",
                virtualTp ? (tpOutputsMatch ? "; outputs bitwise equal across ranks"
                                            : "; outputs DIFFER across ranks")
                          : "");
  std::printf("prefill: %lld tokens in %.1f ms (%.0f tokens/s) on %s (GPU %d, %s); weights "
              "%.2f GiB loaded in %.1f ms; total %.1f ms\n",
              static_cast<long long>(S), st.ttftMs, tokensPerS, dev.name.c_str(), dev.ordinal,
              ls.code.c_str(), static_cast<double>(ls.weightBytes) / (1ull << 30),
              ls.loadWeightsMs, totalMs);
  workerExit.ok = true;
  if (virtualTp && (!tpOutputsMatch || !tpLogsMatch))
    return fail(kExitInternal, "virtual tensor parallelism: " +
                                   (!tpOutputsMatch ? tpOutputsNote : tpLogsNote));
  return 0;
}

} // namespace

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
  for (HostTensor &t : inputs) {
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
