//===- Options.cpp - h20-run's command line ------------------------------===//
#include "RunCommon.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace h20::runtime;

namespace h20run {

const char *kUsage =
    "h20-run: runs the prefill of an artifact compiled by h20-opt, on a GPU or the CPU\n"
    "(the artifact's target), and prints the next token and the time to first token.\n"
    "\n"
    "USAGE\n"
    "  h20-run MODEL.h20 --ids IDS [OPTIONS]            an LLM's prefill from token ids\n"
    "  h20-run MODEL.h20 (--input NAME=PATH ... | --inputs-from DIR) [OPTIONS]   any graph\n"
    "\n"
    "INPUTS\n"
    "  --ids IDS           int64/int32 .npy of shape [S] or [1, S], or whitespace-separated\n"
    "                      text; longer prompts than the artifact's --max-positions are refused\n"
    "  --input NAME=PATH   a named graph input: .npy or a serialized ONNX TensorProto (.pb)\n"
    "  --inputs-from DIR   input_J.pb in graph order (the ONNX backend-test layout)\n"
    "  --weights-dir DIR   where the model's ONNX file and external data are now (default:\n"
    "                      where they were at compile time)\n"
    "  --dummy-weights     GPU: read no weight file; fill every weight with reproducible\n"
    "                      pseudo-random values (uniform, variance 1/fan_in; 1-D weights 1,\n"
    "                      integer ones 0) to time a model whose checkpoint is not at hand;\n"
    "                      weights of one shape and type share one buffer. The outputs mean\n"
    "                      nothing\n"
    "\n"
    "OUTPUTS (all written atomically; none may overwrite an input or another output)\n"
    "  --dump-logits OUT.npy   the logits (float32) of a token-id prefill\n"
    "  --output NAME=PATH      a named graph output (.npy or .pb)\n"
    "  --outputs-to DIR        every output as output_J.pb\n"
    "  --report REPORT.json    the run's record: next token, ttft_ms, tokens/s, memory,\n"
    "                          stage times, device (the keys: Runtime/Cuda/GpuReport.h)\n"
    "\n"
    "DEVICE AND TIMING\n"
    "  --device cpu|gpu    must match the artifact's target (default: that target)\n"
    "  --warmup N          GPU: run the prefill N times first (default 1; over one chunk when\n"
    "                      chunked) so ttft_ms excludes first-launch costs; 0: a cold start\n"
    "  --repeat N          GPU: measured prefills (default 1); ttft_ms is their median,\n"
    "                      ttft_runs_ms lists them all\n"
    "  --no-cuda-graph     launch every step of every chunk on its own instead of replaying\n"
    "                      each chunk as a CUDA graph (same results, more launch gaps)\n"
    "  --profile-steps     time every step of every chunk (CUDA events, no CUDA graphs: the\n"
    "                      TTFT is no benchmark); the 20 costliest kernels/GEMMs on stderr,\n"
    "                      every step in the report's \"step_profile\"\n"
    "  --tune-gemms        GPU, one GPU: time up to 8 cuBLASLt algorithms per GEMM shape\n"
    "                      before the first chunk and keep the fastest (report: \"gemm_tuning\")\n"
    "\n"
    "MULTI-GPU\n"
    "  --gpus N            GPUs of the prefill (default 1, or WORLD_SIZE). For a context-\n"
    "                      parallel artifact (--logits=last) h20-run starts one process per\n"
    "                      GPU (GPUs 0..N-1), K/V passed around a ring by NCCL; under a\n"
    "                      launcher that sets WORLD_SIZE, RANK and LOCAL_RANK (torchrun) it is\n"
    "                      one of them and H20_NCCL_ID_FILE must name a fresh file all ranks\n"
    "                      see. The rank holding the last position writes the logits and the\n"
    "                      report. A tensor-parallel artifact (h20-opt --gpus T --parallel\n"
    "                      tensor) runs only with --gpus T: each rank loads its weight slices\n"
    "                      and sums partial results with ncclAllReduce. A failing rank stops\n"
    "                      the job (the others after H20_NCCL_TIMEOUT_S s, default 30)\n"
    "  --virtual-ranks     with --gpus N: simulate the N ranks on one GPU. Context parallel\n"
    "                      (N a power of two): the prompt in 2N zigzag chunks of L = S/2N\n"
    "                      tokens (L a multiple of the compiled chunk), layer by layer, the K/V\n"
    "                      ring as device copies between the ranks' own KV caches; the logits\n"
    "                      equal the --gpus 1 run's. Tensor parallel: T threads, all-reduces\n"
    "                      summed on the host, the ranks' outputs checked bitwise equal. The\n"
    "                      report gains \"context_parallel\" / \"tensor_parallel\"\n"
    "\n"
    "MESSAGES\n"
    "  --quiet             errors only: no progress, notes or summary (the files hold the\n"
    "                      results)\n"
    "  --verbose           GPU: progress (weights loaded, chunks) also when stderr is\n"
    "                      not a terminal; the default shows it on a terminal only\n"
    "  -h, --help          this text\n"
    "\n"
    "EXIT CODES\n"
    "  0 ok, 1 internal error (or another rank of an N-GPU job failed), 2 bad input, 3 out\n"
    "  of memory; the N-GPU launcher: a failed rank's code, 128 + signal for a signal\n";

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
    } else if (a == "--quiet") {
      o.verbosity = 0;
    } else if (a == "--verbose") {
      o.verbosity = 2;
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
  if (std::count(argv + 1, argv + argc, std::string("--quiet")) &&
      std::count(argv + 1, argv + argc, std::string("--verbose"))) {
    error = "--quiet and --verbose exclude each other";
    return false;
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
