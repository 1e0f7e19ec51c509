//===- Options.cpp - h20-run's command line ------------------------------===//
#include "RunCommon.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

using namespace h20::runtime;

namespace h20run {

namespace {

/// The usage text (--help).
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
    "  --dummy-weights     GPU: no weight files; reproducible pseudo-random weights\n"
    "                      (variance 1/fan_in; FP8 codes and MXFP4 bytes with their P.scale\n"
    "                      block scales at that size), to time a model without its\n"
    "                      checkpoint; the outputs mean nothing. Weights of one shape share\n"
    "                      a buffer unless H20_DUMMY_SHARE=0\n"
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
    "  --profile-steps     time every step (CUDA events, no graphs: not a benchmark); the 20\n"
    "                      costliest on stderr, every step in the report's \"step_profile\"\n"
    "  --tune-gemms        GPU, one GPU: time up to 8 cuBLASLt algorithms per GEMM shape\n"
    "                      before the first chunk and keep the fastest (report: \"gemm_tuning\")\n"
    "\n"
    "MULTI-GPU\n"
    "  --gpus N            GPUs of the prefill (default 1, or WORLD_SIZE): one process per GPU,\n"
    "                      started by h20-run, or by torchrun (WORLD_SIZE, RANK, LOCAL_RANK and\n"
    "                      H20_NCCL_ID_FILE, a fresh file all ranks see). Context parallel\n"
    "                      (--logits=last artifacts): K/V around an NCCL ring; tensor parallel\n"
    "                      (h20-opt --gpus T --parallel tensor): --gpus T, weight slices and\n"
    "                      all-reduces. A failing rank stops the job (H20_NCCL_TIMEOUT_S, 30 s)\n"
    "  --virtual-ranks     with --gpus N: simulate the N ranks on one GPU (context\n"
    "                      parallel: N a power of two, 2N zigzag chunks, the logits equal\n"
    "                      --gpus 1's; tensor parallel: T threads, outputs checked equal)\n"
    "  --solo-rank R       with --gpus T of a tensor-parallel artifact: run rank R alone on\n"
    "                      one GPU at full shapes, its all-reduces counted but skipped (a\n"
    "                      timing of one rank, e.g. with --dummy-weights --profile-steps; the\n"
    "                      logits are not the model's)\n"
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

/// The flags that take a text value, a count, or nothing.
const std::pair<const char *, std::string Options::*> kTextFlags[] = {
    {"--ids", &Options::ids},           {"--device", &Options::device},
    {"--dump-logits", &Options::dumpLogits}, {"--report", &Options::report},
    {"--weights-dir", &Options::weightsDir}, {"--inputs-from", &Options::inputsFrom},
    {"--outputs-to", &Options::outputsTo}};
struct CountFlag {
  const char *name;
  int64_t Options::*dst;
  long long lo, hi;
  const char *what; ///< the error message's start
};
const CountFlag kCountFlags[] = {
    {"--warmup", &Options::warmup, 0, 100, "--warmup takes a count from 0 to 100"},
    {"--repeat", &Options::repeat, 1, 100, "--repeat takes a count from 1 to 100"},
    {"--gpus", &Options::gpus, 1, 1024, "--gpus takes a GPU count from 1"},
    {"--solo-rank", &Options::soloRank, 0, 1023, "--solo-rank takes a rank from 0 to 1023"}};
const std::pair<const char *, bool Options::*> kSwitches[] = {
    {"--no-cuda-graph", &Options::noCudaGraph}, {"--profile-steps", &Options::profileSteps},
    {"--dummy-weights", &Options::dummyWeights}, {"--tune-gemms", &Options::tuneGemms},
    {"--virtual-ranks", &Options::virtualRanks}};

/// The rules between flags, once all are read.
bool checkCombinations(const Options &o, std::string &error) {
  const bool generic = !o.inputs.empty() || !o.inputsFrom.empty();
  if (o.artifact.empty() || (o.ids.empty() && !generic))
    error = "need an artifact and --ids (or --input / --inputs-from)";
  else if (!o.ids.empty() && generic)
    error = "--ids and --input / --inputs-from exclude each other";
  else if (o.virtualRanks && o.gpus < 2)
    error = "--virtual-ranks simulates N > 1 context-parallel ranks on one GPU: give --gpus N "
            "with N = 2, 4, 8, ...";
  else if (o.virtualRanks && generic)
    error = "--virtual-ranks runs a token-id prefill: give --ids, not --input / --inputs-from";
  else if (o.soloRank >= 0 && (o.gpus < 2 || o.virtualRanks || generic))
    error = "--solo-rank R runs rank R of a tensor-parallel artifact alone: give --gpus T (its "
            "ranks) and --ids, without --virtual-ranks";
  else if (o.soloRank >= o.gpus && o.soloRank >= 0)
    error = "--solo-rank " + std::to_string(o.soloRank) + " is not below --gpus " +
            std::to_string(o.gpus);
  else if (o.gpus > 1 && !o.virtualRanks && generic)
    error = "--gpus N > 1 runs a token-id prefill: give --ids, not --input / --inputs-from";
  return error.empty();
}

} // namespace

bool parseArgs(int argc, char **argv, Options &o, std::string &error) {
  o.argv = argv;
  bool quiet = false, verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto is = [&](const char *flag) {
      return a == flag || a.rfind(std::string(flag) + "=", 0) == 0;
    };
    // "--flag=VALUE" or "--flag VALUE"; an empty value is an error.
    std::string v;
    auto value = [&]() {
      size_t eq = a.find('=');
      if (eq != std::string::npos)
        v = a.substr(eq + 1);
      else if (i + 1 < argc)
        v = argv[++i];
      else
        return error = "option " + a + " needs a value", false;
      if (v.empty())
        return error = "option " + a.substr(0, eq) + " needs a non-empty value", false;
      return true;
    };
    auto text = std::find_if(std::begin(kTextFlags), std::end(kTextFlags),
                             [&](const auto &f) { return is(f.first); });
    auto count = std::find_if(std::begin(kCountFlags), std::end(kCountFlags),
                              [&](const CountFlag &f) { return is(f.name); });
    auto sw = std::find_if(std::begin(kSwitches), std::end(kSwitches),
                           [&](const auto &f) { return a == f.first; });
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (text != std::end(kTextFlags)) {
      if (!value())
        return false;
      o.*(text->second) = v;
    } else if (count != std::end(kCountFlags)) {
      if (!value())
        return false;
      char *end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || n < count->lo || n > count->hi)
        return error = std::string(count->what) + ", got '" + v + "'", false;
      o.*(count->dst) = n;
    } else if (sw != std::end(kSwitches)) {
      o.*(sw->second) = true;
    } else if (a == "--quiet" || a == "--verbose") {
      (a == "--quiet" ? quiet : verbose) = true;
      o.verbosity = a == "--quiet" ? 0 : 2;
    } else if (is("--input") || is("--output")) {
      const char *flag = is("--input") ? "--input" : "--output";
      if (!value())
        return false;
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return error = std::string(flag) + " takes NAME=PATH, got '" + v + "'", false;
      (is("--input") ? o.inputs : o.outputs).emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (!a.empty() && a[0] == '-') {
      return error = "unknown option '" + a + "'", false;
    } else if (o.artifact.empty()) {
      o.artifact = a;
    } else {
      return error = "unexpected argument '" + a + "'", false;
    }
  }
  if (quiet && verbose)
    return error = "--quiet and --verbose exclude each other", false;
  return checkCombinations(o, error);
}
} // namespace h20run
