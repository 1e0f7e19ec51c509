//===- Options.cpp - h20-run's command line ------------------------------===//
#include "RunCommon.h"

#include <cstdlib>
#include <cstring>

using namespace h20::runtime;

namespace h20run {

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
} // namespace h20run
