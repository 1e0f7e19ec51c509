//===- h20-opt.cpp - h20's compiler driver -------------------------------===//
//
// Three modes:
//  * `h20-opt model.onnx [--emit=onnx|attn] [-o out.mlir]` imports an ONNX
//    model (or reads .mlir) and prints the IR at the requested level
//    (`--emit=planned --target=T`; a GPU target's stages with
//    `--emit=chunked|linalg|buffers|gpu|host --target=h200`);
//  * `h20-opt model.onnx --target=cpu -o model.h20 [--logits=last]` compiles
//    it into an artifact for h20-run;
//  * anything else is plain MlirOptMain with h20's dialects and passes.
// Invoked as `h20c` (a link to h20-opt), it compiles with the common path's
// defaults: the GPU present (--target=auto), last-position logits, the
// artifact beside the working directory as MODEL.h20, and its memory plan.
// Exit codes: 0 success, 1 internal error, 2 bad input.
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/TargetDescription.h"
#include "h20/Analysis/TileCostModel.h"
#include "h20/Dialect/KV/IR/KVLayout.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Import/Onnx/OnnxImporter.h"
#include "h20/InitAll.h"
#include "h20/Pipelines/Pipelines.h"
#include "h20/Runtime/Cuda/GpuExecutor.h"
#include "h20/Runtime/Format/Artifact.h"
#include "h20/Runtime/Format/FileUtil.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Target/CpuTarget.h"
#include "h20/Target/GpuTarget.h"
#include "h20/Target/TargetCommon.h"
#include "h20/Transforms/Passes.h"
#include "h20/Transforms/PrefillCostModel.h"
#include "h20/Transforms/SparseKVPlan.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>

using namespace mlir;

static constexpr int kExitBadInput = 2;

// h20's own options, grouped for --help (printHelp); MLIR's and LLVM's
// options stay usable and are listed by --help-hidden.
static llvm::cl::OptionCategory ioCategory("What to produce");
static llvm::cl::OptionCategory compileCategory("Compiling an artifact (any target)");
static llvm::cl::OptionCategory gpuCategory("GPU targets");
static llvm::cl::OptionCategory multiGpuCategory("Multi-GPU prefill");
static llvm::cl::OptionCategory planCategory("Plans and reports");
static llvm::cl::OptionCategory messageCategory("Messages");

static llvm::cl::opt<std::string> emitLevel(
    "emit",
    llvm::cl::desc("Compile to this level and print it: onnx (imported IR), "
                   "attn (after canonicalisation, mask analysis and raising), "
                   "planned (attn + RoPE tables, fused KV cache, tiles for "
                   "--target); with a GPU --target also the GPU target's "
                   "stages: chunked, linalg, buffers, gpu, host (ARCHITECTURE.md); with "
                   "--target=cpu: llvm (the LLVM IR handed to LLVM's optimiser). "
                   "Implied as 'onnx' for .onnx/.onnxtext inputs."),
    llvm::cl::cat(ioCategory), llvm::cl::value_desc("stage"), llvm::cl::init(""));
static llvm::cl::opt<std::string> targetName(
    "target",
    llvm::cl::desc("The GPU to compile for, h20, h100, h200 or h800 (all sm_90; the choice "
                   "sets tiles, chunk and plans), or cpu; with -o it writes an artifact. With "
                   "--emit=planned: the target to plan for (also a100, l20). auto: the GPU present "
                   "if it is one of the four, else cpu"),
    llvm::cl::cat(compileCategory), llvm::cl::value_desc("name"), llvm::cl::init(""));
static llvm::cl::opt<int64_t> maxSeq(
    "max-seq",
    llvm::cl::desc("--emit=planned: KV-cache capacity and RoPE table length in "
                   "tokens (0: prompt-sized cache, 1M-position tables)"),
    llvm::cl::cat(planCategory), llvm::cl::value_desc("tokens"), llvm::cl::init(0));
static llvm::cl::opt<std::string> logitsMode(
    "logits",
    llvm::cl::desc("all: logits for every position (default); last: the LM head "
                   "for the last position only (what TTFT needs)"),
    llvm::cl::cat(compileCategory), llvm::cl::value_desc("all|last"), llvm::cl::init("all"));
static llvm::cl::opt<int64_t> chunkTokens(
    "chunk",
    llvm::cl::desc("GPU targets: tokens per prefill chunk (0: about 8192, or with routed "
                   "experts 512 rows an expert, a whole number of attention waves on the "
                   "target, at most max-positions). --target=cpu: 0 runs the whole prompt "
                   "in one call (default); C > 0 runs chunks of C tokens with KV caches for "
                   "max-positions (default 8192)"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("tokens"), llvm::cl::init(0));
static llvm::cl::opt<std::string> computeType(
    "compute-type",
    llvm::cl::desc("GPU targets: storage type of weights, activations and KV cache: bf16 "
                   "(default), f16 or f32; accumulation is float32 either way"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("bf16|f16|f32"), llvm::cl::init("bf16"));
static llvm::cl::opt<std::string> attentionKernel(
    "attention-kernel",
    llvm::cl::desc("GPU targets: auto (default: the wgmma kernels, dense and V4.1 sparse "
                   "attention and the MXFP4 expert GEMM, where they have a variant, else "
                   "mma.sync / FMA) or mma (the mma.sync kernels everywhere, for comparisons); "
                   "recorded per op by h20-choose-attention-kernels"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("auto|mma"), llvm::cl::init("auto"));
static llvm::cl::opt<std::string> fp8Gemm(
    "fp8-gemm",
    llvm::cl::desc("GPU targets, FP8 linears (ai.h20 BlockScaledMatMul): fp8 (default: inputs "
                   "quantised per 1 x 128 block, block-scaled FP8 GEMMs, as DeepSeek's inference "
                   "runs them) or dequantize (the weight dequantised per chunk, a GEMM of the "
                   "compute type: bf16 accuracy, bf16 speed; the weight stays FP8 at rest)"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("fp8|dequantize"), llvm::cl::init("fp8"));
static llvm::cl::opt<std::string> expertGemm(
    "expert-gemm",
    llvm::cl::desc("GPU targets, MXFP4 routed experts (DeepSeek-V4.1 --fp4-experts): bf16 "
                   "(default: the weights dequantised to bf16 in the GEMM's load path) or fp8 "
                   "(token rows quantised per 1 x 128 block, the weights made e4m3 per 128-input "
                   "block in the load path: FP8 tensor cores with FP8 activation error; "
                   "Hopper, bf16 tokens, K multiples of 128; today slower than bf16, see "
                   "BENCHMARKS.md)"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("bf16|fp8"), llvm::cl::init("bf16"));
static llvm::cl::opt<std::string> hostTables(
    "host-tables",
    llvm::cl::desc("GPU targets: where large lookup tables live (weights only ever read by "
                   "row Gathers, such as DeepSeek-V4.1's Engram n-gram tables: 183 GiB each "
                   "in bf16): auto (default: tables of 4 GiB or more in pinned host memory the "
                   "GPU reads over PCIe, the rest on the GPU), none (all on the GPU) or all "
                   "(every gather-only table on the host; tests) (h20-place-tables)"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("auto|none|all"), llvm::cl::init("auto"));
static llvm::cl::opt<std::string> quantizeLinears(
    "quantize-linears",
    llvm::cl::desc("GPU targets: none (default) or fp8: the float linears' weights quantised "
                   "when loaded (128 x 128 blocks, scale max|w| / 448) and run as block-scaled "
                   "FP8 GEMMs, their inputs quantised per 1 x 128 block on the fly; the LM head "
                   "and tensor-parallel shards stay in the compute type (h20-quantize-linears)"),
    llvm::cl::cat(gpuCategory), llvm::cl::value_desc("none|fp8"), llvm::cl::init("none"));
static llvm::cl::opt<int> cpuOptLevel(
    "cpu-opt-level",
    llvm::cl::desc("--target=cpu: LLVM optimisation level 0..3 (default 3: fastest code; 0 "
                   "compiles large graphs far faster, same results)"),
    llvm::cl::cat(compileCategory), llvm::cl::value_desc("0..3"), llvm::cl::init(3));
static llvm::cl::opt<bool> printKVPlan(
    "print-kv-plan",
    llvm::cl::desc("--emit=planned: print the KV-cache plan (slots, byte offsets, bytes per "
                   "token) for --max-seq tokens to stdout"),
    llvm::cl::cat(planCategory), llvm::cl::init(false));
static llvm::cl::opt<bool> printMemory(
    "print-memory",
    llvm::cl::desc("GPU target: print the device memory one GPU needs to run the artifact "
                   "(weights, KV cache, inputs/outputs, constants, temp arena) to stdout"),
    llvm::cl::cat(planCategory), llvm::cl::init(false));
static llvm::cl::opt<int64_t> maxPositions(
    "max-positions",
    llvm::cl::desc("Longest prompt the artifact accepts (h20-run refuses longer ones); "
                   "CPU: 0 = no limit; GPU: sizes the KV cache and RoPE tables, 0 = 8192"),
    llvm::cl::cat(compileCategory), llvm::cl::value_desc("tokens"), llvm::cl::init(0));

static llvm::cl::opt<int64_t> gpuCount(
    "gpus",
    llvm::cl::desc("GPU targets: GPUs the prefill will run on (h20-run --gpus N); with N > 1 "
                   "the artifact records the multi-GPU plan (see --parallel)"),
    llvm::cl::cat(multiGpuCategory), llvm::cl::value_desc("N"), llvm::cl::init(1));
static llvm::cl::opt<std::string> parallelPlan(
    "parallel",
    llvm::cl::desc("With --gpus N > 1: context (split the prompt; the artifact runs on any N), "
                   "tensor (split heads and MLP columns over N ranks: the artifact runs on "
                   "exactly N), or auto (default: the plan the cost model predicts faster at "
                   "--max-positions tokens on --target)"),
    llvm::cl::cat(multiGpuCategory), llvm::cl::value_desc("auto|context|tensor"), llvm::cl::init("auto"));
static llvm::cl::opt<bool> splitAttentionRows(
    "split-attention-rows",
    llvm::cl::desc("With --parallel tensor: split DeepSeek-V4.1's sparse attention and indexers "
                   "by query rows over the ranks (default; each rank attends 1/N of a chunk's "
                   "queries and an all-reduce gathers them); =false runs them whole on every "
                   "rank"),
    llvm::cl::cat(multiGpuCategory), llvm::cl::init(true));
static llvm::cl::opt<bool> quiet(
    "quiet",
    llvm::cl::desc("Print errors and warnings only: no stage progress, plan notes, memory "
                   "plan or compile log"),
    llvm::cl::cat(messageCategory), llvm::cl::init(false));
static llvm::cl::opt<bool> verbose(
    "verbose",
    llvm::cl::desc("Print every compile stage with its time (also when stderr is not a "
                   "terminal) and the compile log (ptxas register reports); the default "
                   "prints the stages only on a terminal"),
    llvm::cl::cat(messageCategory), llvm::cl::init(false));

namespace {

/// What h20-run allocates on one GPU for `artifact` (the runtime's own
/// plan, planBuffers: each buffer 256-byte aligned): printed in GiB with
/// --print-memory, and compared with the target's memory always (a plan
/// that does not fit is a warning: h20-run would refuse it on that GPU).
/// Fails with `error` if the artifact's program does not parse.
bool checkDeviceMemory(const h20::runtime::Artifact &artifact, bool print, std::string &error) {
  h20::runtime::Manifest m;
  h20::runtime::GpuProgram program;
  h20::runtime::BufferPlan plan;
  if (!h20::runtime::parseManifest(artifact.manifest, m, error) ||
      !h20::runtime::parseGpuProgram(artifact.manifest, m, artifact.payload.size(), program,
                                     error) ||
      !h20::runtime::planBuffers(program, plan, error))
    return false;
  auto gib = [](uint64_t b) { return static_cast<double>(b) / (1ull << 30); };
  const uint64_t arena = plan.totalBytes - plan.arenaOffset;
  // Context parallelism replicates the weights on every GPU; a tensor-
  // parallel program's buffers are already one rank's share.
  std::string gpus = "1 GPU";
  if (m.parallel)
    gpus = std::to_string(m.parallel->gpus) + " GPUs, " + m.parallel->plan + " parallel";
  if (print)
    llvm::outs() << llvm::format(
        "h20: device memory per GPU (%s, %lld-token prompts): weights %.2f GiB, KV cache %.2f "
        "GiB, inputs/outputs %.2f GiB, constants %.2f GiB, temp arena %.2f GiB; total %.2f GiB "
        "(%llu bytes)\n",
        gpus.c_str(), static_cast<long long>(m.maxPositions.value_or(0)), gib(plan.weightBytes),
        gib(plan.stateBytes), gib(plan.ioBytes), gib(plan.constBytes), gib(arena),
        gib(plan.totalBytes), static_cast<unsigned long long>(plan.totalBytes));
  if (print && plan.hostBytes) {
    const std::vector<std::string> names = h20::runtime::hostTableNames(program, plan, m);
    llvm::outs() << llvm::format("h20: pinned host memory per GPU: %.2f GiB for %zu gather-only "
                                 "table(s) the GPU reads over PCIe (",
                                 gib(plan.hostBytes), names.size())
                 << llvm::join(names, ", ") << "; --host-tables=none keeps them on the GPU)\n";
  }
  // h20-run needs the plan plus the cuBLASLt workspace in free memory,
  // and the CUDA context takes about 0.5 GiB of the device's: 1 GiB kept
  // for both. (Context parallelism allocates more than this plan on each
  // GPU: its ranks' extra arenas, and the virtual ranks' caches.)
  constexpr uint64_t kReserve = uint64_t(1) << 30;
  const h20::TargetDescription *t = h20::findTarget(targetName);
  if (t && t->memoryBytes > 0 &&
      plan.totalBytes + kReserve > static_cast<uint64_t>(t->memoryBytes)) {
    const bool context = m.parallel && m.parallel->plan == "context";
    llvm::errs() << llvm::format(
        "h20-opt: warning: the program needs %.2f GiB per GPU (%s: weights %.2f GiB, KV cache "
        "%.2f GiB, temp arena %.2f GiB, inputs, outputs and constants %.2f GiB%s), and an %s "
        "has %.2f GiB, about 1 GiB of it taken by the CUDA context and cuBLASLt: h20-run will "
        "refuse it there. Keep the weights quantised (an FP8 / FP4 export), split them over "
        "more GPUs (--gpus), or plan for fewer tokens (--max-positions)\n",
        gib(plan.totalBytes), gpus.c_str(), gib(plan.weightBytes), gib(plan.stateBytes),
        gib(arena), gib(plan.ioBytes + plan.constBytes),
        context ? "; context parallelism needs more on each GPU" : "", t->name.str().c_str(),
        gib(static_cast<uint64_t>(t->memoryBytes)));
  }
  return true;
}

/// Prints every KV-cache plan of `module`: the dense cache (kv.alloc) and
/// the sparse-attention plan (kv.sparse_plan).
void printKVPlans(ModuleOp module) {
  module.walk([](func::FuncOp f) {
    f.walk([](h20::kv::AllocOp alloc) {
      h20::kv::CacheType type = alloc.getCache().getType();
      auto plan = h20::kv::planLayout(type);
      llvm::outs() << "kv plan (dense): " << type;
      if (plan)
        llvm::outs() << ", " << plan->totalBytes << " bytes ("
                     << llvm::format("%.2f", plan->totalBytes / double(int64_t(1) << 30))
                     << " GiB), " << plan->strides[3] << " bytes per token per layer and kind\n";
      else
        llvm::outs() << ": capacity is the prompt length (give --max-seq to size it)\n";
    });
    h20::SparseKVPlan sparse;
    if (h20::readSparseKVPlan(f, sparse))
      llvm::outs() << h20::formatSparseKVPlan(sparse);
  });
}

/// Chooses the multi-GPU plan for `gpus` > 1 GPUs (h20-choose-parallel-plan
/// records it as `h20.parallel`), prints it, and returns the tensor-parallel
/// ranks it asks for (1: context parallelism); 0 when the plan is
/// impossible (the pass said why).
int64_t chooseParallelPlan(ModuleOp module, int64_t gpus, int64_t tokens, int64_t chunk,
                           int64_t elementBytes, bool logitsLast) {
  PassManager pm(module.getContext());
  h20::ChooseParallelPlanOptions o;
  o.target = targetName;
  o.gpus = gpus;
  o.tokens = tokens;
  o.chunk = chunk;
  o.elementBytes = elementBytes;
  o.logitsLast = logitsLast;
  o.plan = parallelPlan;
  o.attentionRows = splitAttentionRows;
  o.normScales = computeType != "f16"; // as buildPlanPipeline
  pm.addPass(h20::createChooseParallelPlan(o));
  if (failed(pm.run(module)))
    return 0;
  auto plan = module->getAttrOfType<DictionaryAttr>("h20.parallel");
  auto str = [&](StringRef k) {
    auto v = plan.getAs<StringAttr>(k);
    return v ? v.getValue().str() : std::string();
  };
  auto ms = [&](StringRef k) {
    double v = plan.getAs<FloatAttr>(k).getValueAsDouble();
    char text[32];
    std::snprintf(text, sizeof text, "%.4g ms", v);
    return v < 0 ? std::string("n/a") : std::string(text);
  };
  if (!quiet) {
    llvm::errs() << "h20-opt: " << gpus << " GPUs: plan " << str("plan") << " ("
                 << str("chosen_by") << "); predicted at " << tokens << " tokens on " << gpus
                 << "x " << targetName << ": context " << ms("context_ms") << ", tensor "
                 << ms("tensor_ms");
    if (!str("note").empty())
      llvm::errs() << "; " << str("note");
    llvm::errs() << "\n";
    if (auto parts = plan.getAs<DictionaryAttr>("tensor_breakdown_ms"); parts && verbose) {
      llvm::errs() << "h20-opt: tensor plan, one rank (a model):";
      for (NamedAttribute p : parts)
        if (auto v = dyn_cast<FloatAttr>(p.getValue())) {
          char text[48];
          std::snprintf(text, sizeof text, " %.4g ms", v.getValueAsDouble());
          llvm::errs() << " " << p.getName().getValue() << text;
        }
      llvm::errs() << "\n";
    }
  }
  return str("plan") == "tensor" ? gpus : 1;
}

/// --help: what h20-opt does, the common command lines, and h20's own
/// options by group, each description wrapped to the terminal's 80
/// columns. MLIR's and LLVM's options (passes, --mlir-*) are for
/// developers: --help-hidden lists them.
void printHelp() {
  llvm::outs()
      << "h20-opt: h20's compiler. Imports an ONNX model, raises and plans it\n"
         "(attention, RoPE, KV cache, tiles) and compiles it into an artifact that\n"
         "h20-run runs; or prints the IR at a stage; or, given MLIR, runs passes like\n"
         "mlir-opt.\n\n"
         "USAGE\n"
         "  h20-opt MODEL.onnx --target=h200 --logits=last --max-positions=N -o MODEL.h20\n"
         "      compile for an H200 (h20, h100, h800 alike), prompts up to N tokens\n"
         "  h20-opt MODEL.onnx --target=cpu -o MODEL.h20      compile for this CPU\n"
         "  h20-opt MODEL.onnx --emit=planned --target=h20 --max-seq=N --print-kv-plan\n"
         "      the plan for N tokens on a GPU, without compiling\n"
         "  h20-opt MODEL.onnx --emit=attn                    the raised IR\n"
         "  h20-opt IN.mlir --PASS ...                        run passes (mlir-opt)\n"
         "  -o FILE: the artifact, or the IR (default: stdout); written atomically.\n"
         "  Exit codes: 0 ok, 1 internal error, 2 bad input or command line (the\n"
         "  message names the option, ONNX node, file or value).\n";
  llvm::cl::OptionCategory *groups[] = {&ioCategory,       &compileCategory, &gpuCategory,
                                         &multiGpuCategory, &planCategory,    &messageCategory};
  auto &all = llvm::cl::getRegisteredOptions();
  for (llvm::cl::OptionCategory *category : groups) {
    llvm::outs() << "\n" << category->getName().upper() << "\n";
    // Alphabetical within a group (the option map has no order).
    std::vector<llvm::cl::Option *> options;
    for (auto &entry : all)
      if (llvm::is_contained(entry.second->Categories, category))
        options.push_back(entry.second);
    llvm::sort(options, [](llvm::cl::Option *a, llvm::cl::Option *b) {
      return a->ArgStr < b->ArgStr;
    });
    for (llvm::cl::Option *o : options) {
      std::string flag = "  --" + o->ArgStr.str();
      if (!o->ValueStr.empty())
        flag += "=<" + o->ValueStr.str() + ">";
      llvm::outs() << flag << "\n";
      // The description, wrapped at 80 columns under a 6-space indent.
      std::string line = "      ";
      for (llvm::StringRef rest = o->HelpStr; !rest.empty();) {
        auto [word, tail] = rest.split(' ');
        rest = tail;
        if (line.size() > 6 && line.size() + 1 + word.size() > 80) {
          llvm::outs() << line << "\n";
          line = "      ";
        }
        line += (line.size() > 6 ? " " : "") + word.str();
      }
      llvm::outs() << line << "\n";
    }
  }
  llvm::outs() << "\nAll MLIR passes and LLVM options: h20-opt --help-hidden.\n"
                  "Environment: CUDA_HOME, the CUDA toolkit for NVRTC, ptxas and libdevice\n"
                  "(default /usr/local/cuda).\n";
}

/// The compile's stages on stderr, one line each ("h20-opt: [ 12.3 s]
/// import (2.1 s): 1,204 ops"): with --verbose always, by default only when
/// stderr is a terminal, never with --quiet.
class Progress {
public:
  Progress()
      : on(!quiet && (verbose || getenv("H20_VERBOSE") ||
                      llvm::sys::Process::StandardErrIsDisplayed())) {}

  /// `name` ended now: its time is the time since the last stage.
  void stage(llvm::StringRef name, llvm::StringRef detail = "") {
    auto now = std::chrono::steady_clock::now();
    print(name, std::chrono::duration<double>(now - last).count(), detail);
    last = now;
  }
  /// A target's stage (StageReport), which timed itself.
  void print(llvm::StringRef name, double seconds, llvm::StringRef detail) {
    last = std::chrono::steady_clock::now();
    if (!on)
      return;
    double total = std::chrono::duration<double>(last - start).count();
    llvm::errs() << llvm::format("h20-opt: [%6.1f s] %s (%.1f s)", total, name.str().c_str(),
                                 seconds);
    if (!detail.empty())
      llvm::errs() << ": " << detail;
    llvm::errs() << "\n";
  }
  h20::StageReport reporter() {
    return [this](llvm::StringRef n, double s, llvm::StringRef d) { print(n, s, d); };
  }

private:
  bool on;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
};

/// "12.3 MiB of code and constants" for the progress lines (the weights
/// stay in the model's files).
std::string artifactSize(const h20::runtime::Artifact &artifact) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB of code and constants",
                (artifact.payload.size() + artifact.manifest.size()) / (1024.0 * 1024.0));
  return text;
}

/// The number of operations in `module`, for the progress lines.
int64_t countOps(ModuleOp module) {
  int64_t n = 0;
  module.walk([&](Operation *) { ++n; });
  return n - 1;
}

bool isOnnxFile(llvm::StringRef name) {
  return name.ends_with_insensitive(".onnx") || name.ends_with_insensitive(".onnxtext");
}

/// --target=auto: the first GPU the CUDA driver sees. A Hopper GPU
/// (compute capability 9.x) is the target its name says (H20, H100, H200,
/// H800; another sm_90 part, e.g. a GH200, is planned as an H100); no GPU
/// (or no driver) is the CPU. Says which unless --quiet. Empty, with
/// `error`, for a GPU h20 has no code generator for.
std::string autoTarget(std::string &error) {
  auto chose = [](const std::string &target, const std::string &why) {
    if (!quiet)
      llvm::errs() << "h20-opt: --target=auto chose " << target << ": " << why << "\n";
    return target;
  };
  std::string reason, name;
  int major = 0, minor = 0;
  if (h20::runtime::GpuExecutor::deviceCount(reason) <= 0)
    return chose("cpu", "no GPU (" + (reason.empty() ? std::string("the driver sees none") : reason) +
                            ")");
  if (!h20::runtime::GpuExecutor::deviceIdentity(0, name, major, minor, reason)) {
    error = "--target=auto: " + reason + "; give --target (h20, h100, h200, h800 or cpu)";
    return "";
  }
  std::string cc = std::to_string(major) + "." + std::to_string(minor);
  if (major != 9) {
    error = "--target=auto: GPU 0 is an " + name + " (compute capability " + cc +
            "); h20 generates GPU code for Hopper (sm_90) only: compile for the CPU with "
            "--target=cpu";
    return "";
  }
  const h20::TargetDescription *t = h20::targetForGpuName(name);
  if (!t || t->computeCapability != 90)
    return chose("h100", name + " (GPU 0, compute capability " + cc +
                             ") has no description of its own; planned as an H100");
  return chose(t->name.str(), name + " (GPU 0, compute capability " + cc + ")");
}

int fail(const std::string &message) {
  llvm::errs() << "h20-opt: error: " << message << "\n";
  return kExitBadInput;
}

/// Whether --target is one h20 generates GPU code for (sm_90: h20, h100,
/// h200, h800; a100 and l20 are for planning only).
bool generatesGpuCode() {
  const h20::TargetDescription *d = h20::findTarget(targetName);
  return d && d->computeCapability == 90;
}

/// What the flags ask h20-opt to produce.
struct Mode {
  bool planning = false;      ///< --emit=planned
  bool gpuStage = false;      ///< --emit=chunked|linalg|buffers|gpu|host
  bool llvmStage = false;     ///< --emit=llvm (CPU)
  bool buildArtifact = false; ///< --target without --emit: an artifact (or --emit=llvm)
  bool gpuArtifact = false;   ///< the GPU target runs: an artifact or a GPU stage
};

/// Checks the flags against each other and `input` / `output` before any
/// work; "" when they hold, else the message. Fills `mode`.
std::string checkFlags(llvm::StringRef input, llvm::StringRef output, Mode &mode) {
  const bool sm90 = generatesGpuCode();
  mode.planning = emitLevel == "planned";
  if (mode.planning && targetName.empty())
    return "--emit=planned needs --target (h20, h100, h200, h800, a100, l20, cpu)";
  // A GPU target stage: compiled as an artifact would be, printed there.
  mode.gpuStage = llvm::is_contained(h20::gpuStages(), emitLevel.getValue());
  if (mode.gpuStage && !sm90)
    return "--emit=" + emitLevel + " is a GPU target stage: it needs --target=h20, h100, h200 or "
           "h800";
  // --emit=llvm: the CPU target's LLVM IR, before LLVM optimises it.
  mode.llvmStage = emitLevel == "llvm";
  if (mode.llvmStage && targetName != "cpu")
    return "--emit=llvm is a CPU target stage: it needs --target=cpu";
  mode.buildArtifact = !targetName.empty() && !mode.planning && !mode.gpuStage;
  if (!emitLevel.empty() && !mode.planning && !mode.gpuStage && !mode.llvmStage &&
      !targetName.empty())
    return "--target with --emit=" + emitLevel + ": use --emit=planned, a GPU stage (chunked, "
           "linalg, buffers, gpu, host), --emit=llvm with --target=cpu, or no --emit to compile "
           "an artifact";
  if (!targetName.empty() && !h20::findTarget(targetName))
    return "unknown --target '" + targetName +
           "' (known: auto, h20, h100, h200, h800, a100, l20, cpu)";
  mode.gpuArtifact = (mode.buildArtifact && targetName != "cpu") || mode.gpuStage;
  if (mode.gpuArtifact && !sm90)
    return "target '" + targetName + "' has no code generator (GPU code is generated for "
           "sm_90: h20, h100, h200, h800; or use --target=cpu)";
  if (cpuOptLevel < 0 || cpuOptLevel > 3)
    return "--cpu-opt-level must be 0, 1, 2 or 3, got " + std::to_string(cpuOptLevel);
  if (!llvm::is_contained({"bf16", "f16", "f32"}, computeType.getValue()))
    return "--compute-type must be bf16, f16 or f32, got '" + computeType + "'";
  if (!llvm::is_contained({"auto", "mma"}, attentionKernel.getValue()))
    return "--attention-kernel must be auto or mma, got '" + attentionKernel + "'";
  if (!llvm::is_contained({"fp8", "dequantize"}, fp8Gemm.getValue()))
    return "--fp8-gemm must be fp8 or dequantize, got '" + fp8Gemm + "'";
  if (!llvm::is_contained({"bf16", "fp8"}, expertGemm.getValue()))
    return "--expert-gemm must be bf16 or fp8, got '" + expertGemm + "'";
  if (!llvm::is_contained({"auto", "none", "all"}, hostTables.getValue()))
    return "--host-tables must be auto, none or all, got '" + hostTables + "'";
  if (hostTables != "auto" && targetName == "cpu")
    return "--host-tables=" + hostTables + " needs a GPU --target (h20, h100, h200, h800): the CPU "
           "target keeps every table in host memory anyway";
  if (!llvm::is_contained({"none", "fp8"}, quantizeLinears.getValue()))
    return "--quantize-linears must be none or fp8, got '" + quantizeLinears + "'";
  if (quantizeLinears == "fp8" && !mode.gpuArtifact &&
      !(emitLevel == "planned" && !targetName.empty() && targetName != "cpu"))
    return "--quantize-linears=fp8 needs a GPU --target (h20, h100, h200, h800): the CPU "
           "target has no FP8 linears";
  if (expertGemm == "fp8" && targetName == "cpu")
    return "--expert-gemm=fp8 needs a GPU --target (h20, h100, h200, h800): the CPU target "
           "computes MXFP4 experts in float";
  if (chunkTokens < 0 || chunkTokens > (int64_t(1) << 20))
    return "--chunk must be between 1 and 1048576 tokens (0: the target's default: about 8192 "
           "on a GPU, the whole prompt in one call on the CPU)";
  if (gpuCount < 1 || gpuCount > 8)
    return "--gpus must be between 1 and 8 (the GPUs of one node: h20-run's ranks run on one "
           "host), got " + std::to_string(gpuCount);
  if (gpuCount == 1 && parallelPlan.getNumOccurrences())
    return "--parallel plans a multi-GPU prefill: give --gpus N with N > 1";
  if (!llvm::is_contained({"auto", "context", "tensor"}, parallelPlan.getValue()))
    return "--parallel must be auto, context or tensor, got '" + parallelPlan + "'";
  if (gpuCount > 1 && !mode.gpuArtifact)
    return "--gpus N > 1 plans a multi-GPU prefill: it needs a GPU --target (h20, h100, h200, "
           "h800) and -o (an artifact)";
  if (mode.buildArtifact && !mode.llvmStage && output == "-")
    return "--target writes a binary artifact: give its path with -o";
  // RoPE tables and tile planning grow with it; 16M tokens is far beyond
  // any model's context.
  constexpr int64_t kMaxTokens = int64_t(1) << 24;
  if (maxSeq < 0 || maxSeq > kMaxTokens)
    return "--max-seq must be between 0 and " + std::to_string(kMaxTokens) + ", got " +
           std::to_string(maxSeq);
  if (maxPositions > kMaxTokens)
    return "--max-positions must be at most " + std::to_string(kMaxTokens);
  if (output != "-" && h20::runtime::sameFile(input.str(), output.str()))
    return "output '" + output.str() + "' is the input file; refusing to overwrite it";
  if (logitsMode != "all" && logitsMode != "last")
    return "--logits must be 'all' or 'last', got '" + logitsMode + "'";
  if (maxPositions < 0)
    return "--max-positions must be >= 0 (0: no limit)";
  return "";
}

/// The GPU prefill's sizes: the longest prompt, the chunk, and the KV
/// cache's capacity (max-positions rounded up to whole chunks, since the
/// cache and RoPE tables hold every position a chunk can touch).
struct ChunkPlan {
  int64_t maxPositions = 0, chunk = 0, capacity = 0;
};

/// The largest moePrefillChunkGoal of `module`'s routed-experts ops
/// (onnx.h20.RoutedExperts[Mxfp4]: router [Dm, E], top_k), 0 without any.
int64_t moeChunkGoal(ModuleOp module) {
  int64_t goal = 0;
  module.walk([&](Operation *op) {
    if (!isa<h20::onnx::H20RoutedExpertsOp, h20::onnx::H20RoutedExpertsMxfp4Op>(op))
      return;
    auto router = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    auto topK = op->getAttrOfType<IntegerAttr>("top_k");
    if (router && router.getRank() == 2 && !router.isDynamicDim(1) && topK)
      goal = std::max(goal, h20::moePrefillChunkGoal(router.getDimSize(1), topK.getInt()));
  });
  return goal;
}

ChunkPlan chooseChunk(ModuleOp module) {
  ChunkPlan c;
  c.maxPositions = maxPositions > 0 ? maxPositions.getValue() : 8192;
  // A chunk longer than the longest prompt only costs memory: clamp it.
  int64_t promptCap = (c.maxPositions + 63) / 64 * 64;
  // Default: about 8192 tokens (on an H200, seed-dense at 128K tokens took
  // 2741 ms in 8192-token chunks against 2799 ms in 2048-token ones: bigger
  // GEMMs, fewer launches; bench/results/chunk-size-h200.json), rounded to
  // a whole number of attention waves on the target (defaultPrefillChunk).
  // A model with routed experts: at least the chunk that gives each expert
  // kMoeRowsPerExpertPerChunk rows (V4.1-Flash: 33792 on an H200).
  const h20::TargetDescription *desc = h20::findTarget(targetName);
  const int64_t goal = std::max<int64_t>(8192, moeChunkGoal(module));
  int64_t defaultChunk = desc && desc->computeCapability > 0
                             ? h20::defaultPrefillChunk(*desc, 128, goal)
                             : 8192;
  c.chunk = std::min<int64_t>(chunkTokens > 0 ? chunkTokens.getValue() : defaultChunk,
                              promptCap);
  c.capacity = (c.maxPositions + c.chunk - 1) / c.chunk * c.chunk;
  return c;
}

/// Every error about an op imported from an ONNX node names that node and
/// its op type, also the verifier's and upstream passes' messages ("'linalg
/// .generic' op inferred ..."), which know nothing of ONNX. Installed on
/// `ctx` for the handler's lifetime.
struct NodeNamingDiagnostics {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler;
  ScopedDiagnosticHandler nodeNames;

  explicit NodeNamingDiagnostics(MLIRContext &ctx)
      : handler(sourceMgr, &ctx, llvm::errs()),
        nodeNames(&ctx, [this](Diagnostic &diag) { return rename(diag); }) {
    // Messages name the ONNX node; a dump of the op would only repeat it.
    ctx.printOpOnDiagnostic(false);
  }

  LogicalResult rename(Diagnostic &diag) {
    std::string node = h20::onnx::describeNode(diag.getLocation());
    std::string message = diag.str();
    if (diag.getSeverity() != DiagnosticSeverity::Error || node.empty() ||
        message.find(node) != std::string::npos ||
        (node[0] == 'n' && message.find(node.substr(0, node.find(" (op"))) != std::string::npos))
      return failure(); // printed as it is by the SourceMgr handler
    handler.emitDiagnostic(diag.getLocation(), node + ": " + message, diag.getSeverity());
    for (Diagnostic &note : diag.getNotes())
      handler.emitDiagnostic(note.getLocation(), note.str(), note.getSeverity());
    return success();
  }
};

/// Imports `input` (ONNX) or parses it (MLIR); null after an error.
OwningOpRef<ModuleOp> loadInput(llvm::StringRef input, MLIRContext &ctx,
                                llvm::SourceMgr &sourceMgr) {
  if (isOnnxFile(input)) {
    // Only the GPU code generator runs onnx.h20.RoutedExperts as an op
    // (picked experts only, grouped GEMMs); elsewhere (the CPU target,
    // planning for another target, --emit without a target) the call's
    // function body is imported: every expert for every token, exact.
    h20::OnnxImportOptions importOptions;
    // So is onnx.h20.BlockScaledMatMul: only the GPU runs FP8 GEMMs; the
    // body dequantises the FP8 weight exactly and multiplies in float.
    if (!generatesGpuCode())
      importOptions.expandFunctions = {"RoutedExperts", "RoutedExpertsMxfp4", "BlockScaledMatMul"};
    return h20::importOnnxModel(input, ctx, importOptions);
  }
  std::string message;
  auto file = openInputFile(input, &message);
  if (!file) {
    fail(message);
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &ctx);
}

/// A GPU artifact's front half: the attn level, the multi-GPU plan (--gpus
/// N > 1), then the plan pipeline (RoPE tables, the KV caches for
/// `chunks.capacity` positions, tiles). Returns an exit code.
int planForGpu(ModuleOp module, const ChunkPlan &chunks, int64_t kvElementBytes,
               Progress &progress) {
  MLIRContext *ctx = module.getContext();
  PassManager pm(ctx);
  // Attn level first: the multi-GPU plan is chosen there, and a tensor-
  // parallel split must precede the KV-cache plan.
  if (failed(h20::applyDeveloperOptions(pm)) || failed(h20::buildEmitPipeline(pm, "attn")) ||
      failed(pm.run(module)))
    return kExitBadInput;
  progress.stage("attn", "masks, attention and RoPE raised");
  int64_t tensorRanks = 1;
  if (gpuCount > 1) {
    tensorRanks = chooseParallelPlan(module, gpuCount, chunks.maxPositions, chunks.chunk,
                                     computeType == "f32" ? 4 : 2, logitsMode == "last");
    if (tensorRanks == 0)
      return kExitBadInput;
  }
  PassManager plan(ctx);
  if (failed(h20::applyDeveloperOptions(plan)))
    return kExitBadInput;
  h20::buildPlanPipeline(plan, targetName, chunks.capacity, kvElementBytes, tensorRanks,
                         computeType, quantizeLinears == "fp8");
  if (failed(plan.run(module)))
    return kExitBadInput;
  if (quantizeLinears == "fp8" && !quiet)
    module.walk([](func::FuncOp f) {
      auto q = f->getAttrOfType<DictionaryAttr>("h20.quantized_linears");
      if (!q)
        return;
      llvm::errs() << "h20-opt: --quantize-linears=fp8: " << q.getAs<IntegerAttr>("fp8").getInt()
                   << " linear(s) as block-scaled FP8 GEMMs, "
                   << q.getAs<IntegerAttr>("kept").getInt() << " kept in the compute type";
      if (auto first = q.getAs<StringAttr>("first_kept"))
        llvm::errs() << " (the first: " << first.getValue() << ")";
      llvm::errs() << "\n";
    });
  progress.stage("plan", "KV cache and RoPE tables for " + std::to_string(chunks.capacity) +
                             " positions, chunks of " + std::to_string(chunks.chunk) + " tokens");
  // What the split covered: a block that did not fit stays whole on every
  // rank (correct, only not split).
  if (auto tp = module->getAttrOfType<DictionaryAttr>("h20.tensor_parallel"); tp && !quiet) {
    auto count = [&](StringRef k) {
      auto v = tp.getAs<IntegerAttr>(k);
      return v ? v.getInt() : int64_t(0);
    };
    llvm::errs() << "h20-opt: tensor parallel split: " << count("attention_blocks")
                 << " attention block(s), " << count("mlp_blocks") << " MLP block(s), "
                 << count("expert_blocks") << " routed-experts block(s) by expert, "
                 << count("attention_rows") << " sparse attention(s) by query rows"
                 << (count("query_gemms")
                         ? " (and " + std::to_string(count("query_gemms")) + " query-side GEMM(s))"
                         : std::string())
                 << (count("shared_expert_gemms")
                         ? ", " + std::to_string(count("shared_expert_gemms")) +
                               " shared-expert GEMM(s) by rows"
                         : std::string())
                 << "; " << count("replicated_attention") << " attention op(s) left whole\n";
  }
  return 0;
}

/// Printed IR or LLVM IR to `output` (stdout for "-"), the file written
/// atomically. Returns an exit code.
int writeText(llvm::StringRef output, const std::string &text) {
  if (output == "-") {
    llvm::outs() << text;
    return 0;
  }
  std::string error;
  return h20::runtime::writeFileAtomically(output.str(), text, error) ? 0 : fail(error);
}

/// Writes `artifact` to `output` and reports it. Returns an exit code.
int writeArtifactFile(llvm::StringRef output, const h20::runtime::Artifact &artifact,
                      Progress &progress) {
  std::string error;
  if (!h20::runtime::writeArtifact(output.str(), artifact, error))
    return fail(error);
  progress.stage("write " + output.str(), artifactSize(artifact));
  return 0;
}

/// The GPU target (planned module): an artifact to `output`, or with
/// --emit=STAGE the IR at that stage left in `module` for the caller to
/// print. Returns an exit code.
int compileGpu(ModuleOp module, const Mode &mode, const ChunkPlan &chunks,
               llvm::StringRef output, Progress &progress) {
  h20::GpuTargetOptions options;
  options.target = targetName;
  options.logitsLast = logitsMode == "last";
  options.maxPositions = chunks.maxPositions;
  options.chunk = chunks.chunk;
  options.chunkGiven = chunkTokens > 0;
  options.computeType = computeType;
  options.attentionKernel = attentionKernel;
  options.fp8Gemm = fp8Gemm;
  options.expertGemm = expertGemm;
  options.hostTableMinBytes = hostTables == "none" ? -1
                              : hostTables == "all" ? 0
                                                    : h20::kHostTableMinBytes;
  if (mode.gpuStage)
    options.stopAfter = emitLevel;
  options.onStage = progress.reporter();
  h20::runtime::Artifact artifact;
  std::string log;
  LogicalResult ok = h20::compileForGpu(module, options, artifact, log);
  if (!quiet && (verbose || getenv("H20_VERBOSE")))
    llvm::errs() << log;
  if (failed(ok))
    return kExitBadInput;
  if (mode.gpuStage)
    return 0;
  if (int rc = writeArtifactFile(output, artifact, progress))
    return rc;
  std::string error;
  if (!checkDeviceMemory(artifact, printMemory, error))
    return fail("internal: " + error);
  return 0;
}

/// The CPU target (attn-level module, or planned for `chunks` when its
/// chunk is set): an artifact to `output`, or with --emit=llvm its LLVM IR.
/// Returns an exit code.
int compileCpu(ModuleOp module, const Mode &mode, const ChunkPlan &chunks,
               llvm::StringRef output, Progress &progress) {
  h20::CpuTargetOptions options;
  options.logitsLast = logitsMode == "last";
  options.optLevel = cpuOptLevel;
  if (maxPositions > 0)
    options.maxPositions = maxPositions;
  if (chunks.chunk > 0) {
    options.chunk = chunks.chunk;
    options.maxPositions = chunks.maxPositions;
  }
  options.onStage = progress.reporter();
  std::string llvmIR;
  if (mode.llvmStage)
    options.llvmIR = &llvmIR;
  h20::runtime::Artifact artifact;
  if (failed(h20::compileForCpu(module, options, artifact)))
    return kExitBadInput;
  return mode.llvmStage ? writeText(output, llvmIR)
                        : writeArtifactFile(output, artifact, progress);
}

/// h20-opt's own modes (see the file comment): import or parse `input`,
/// run the pipelines the flags ask for, and write the IR or the artifact.
/// Returns the exit code.
int compile(llvm::StringRef input, llvm::StringRef output, DialectRegistry &registry) {
  if (targetName == "auto") {
    std::string error;
    std::string chosen = autoTarget(error);
    if (chosen.empty())
      return fail(error);
    targetName.setValue(chosen);
  }
  Mode mode;
  if (std::string error = checkFlags(input, output, mode); !error.empty())
    return fail(error);

  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  NodeNamingDiagnostics diagnostics(ctx);
  Progress progress;
  OwningOpRef<ModuleOp> module = loadInput(input, ctx, diagnostics.sourceMgr);
  if (!module)
    return kExitBadInput;
  progress.stage(isOnnxFile(input) ? "import" : "parse",
                 std::to_string(countOps(*module)) + " ops");

  // An artifact is compiled from the attn level; the attn pipeline leaves
  // IR that is already there (--emit=attn output, or a pass under test)
  // as it is, and raises onnx-level .mlir like an ONNX file.
  // A chunked CPU artifact starts from the planned level too (KV caches
  // and RoPE tables for the positions its chunks reach).
  const bool cpuChunked = mode.buildArtifact && !mode.gpuArtifact && chunkTokens > 0;
  std::string level = mode.gpuArtifact || cpuChunked ? "planned"
                      : mode.buildArtifact           ? "attn"
                      : emitLevel.empty()  ? "onnx"
                                           : emitLevel.getValue();
  const ChunkPlan chunks = chooseChunk(*module);
  if (printKVPlan && level != "planned")
    return fail("--print-kv-plan needs --emit=planned (or a GPU --target)");
  // The sparse KV plan is sized in the GPU targets' storage type.
  int64_t kvElementBytes = cpuChunked ? 4
                           : targetName.empty() || targetName == "cpu" ? 0
                           : computeType == "f32"                      ? 4
                                                                       : 2;
  if (mode.gpuArtifact) {
    if (int rc = planForGpu(*module, chunks, kvElementBytes, progress))
      return rc;
  } else {
    PassManager pm(&ctx);
    if (failed(h20::applyDeveloperOptions(pm)))
      return kExitBadInput;
    if (failed(h20::buildEmitPipeline(pm, level, targetName,
                                      cpuChunked ? chunks.capacity : maxSeq.getValue(),
                                      kvElementBytes, 1, computeType, quantizeLinears == "fp8")))
      return fail("unknown --emit level '" + level +
                  "' (expected onnx, attn or planned; with a GPU --target also chunked, linalg, "
                  "buffers, gpu, host; with --target=cpu llvm)");
    if (failed(pm.run(*module)))
      return kExitBadInput;
    progress.stage(level);
  }
  if (printKVPlan)
    printKVPlans(*module);
  if (mode.gpuArtifact) {
    if (int rc = compileGpu(*module, mode, chunks, output, progress); rc || !mode.gpuStage)
      return rc;
  } else if (mode.buildArtifact) {
    return compileCpu(*module, mode, cpuChunked ? chunks : ChunkPlan{}, output, progress);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  // GPU stages print affine maps in place (no #map aliases), so a test
  // can check an indexing map where it is used.
  OpPrintingFlags flags;
  if (mode.gpuStage)
    flags.useLocalScope();
  module->print(os, flags);
  os << "\n";
  return writeText(output, text);
}
} // namespace

const char *kH20cHelp =
    "h20c MODEL.onnx [h20-opt options]: h20-opt with the common path's defaults, each\n"
    "used only where the command line gives none: --target=auto (the GPU present, else\n"
    "the CPU), --logits=last, -o MODEL.h20 (in the working directory), --print-memory.\n"
    "Longer prompts than 8192 tokens on a GPU: add --max-positions=N.\n\n";

/// Whether `args` (after the program name) spell option `flag`: -flag,
/// --flag, -flag=V or --flag=V.
bool flagGiven(llvm::ArrayRef<std::string> args, llvm::StringRef flag) {
  for (const std::string &arg : args.drop_front()) {
    llvm::StringRef a(arg);
    if (!a.consume_front("-"))
      continue;
    a.consume_front("-");
    if (a == flag || a.starts_with(flag.str() + "="))
      return true;
  }
  return false;
}

/// h20c's command line: argv with the defaults of kH20cHelp added where
/// the user gave none.
std::vector<std::string> h20cArguments(int argc, char **argv) {
  std::vector<std::string> args(argv, argv + argc);
  auto given = [&](llvm::StringRef flag) { return flagGiven(args, flag); };
  std::string input;
  for (size_t i = 1; i < args.size() && input.empty(); ++i)
    if (isOnnxFile(args[i]))
      input = args[i];
  // Right after the program name: a later occurrence (the user's, also
  // from a response file) wins.
  std::vector<std::string> defaults;
  if (!given("target"))
    defaults.push_back("--target=auto");
  if (!given("logits"))
    defaults.push_back("--logits=last");
  if (!given("o") && !input.empty())
    defaults.insert(defaults.end(), {"-o", llvm::sys::path::stem(input).str() + ".h20"});
  if (!given("print-memory") && !given("quiet"))
    defaults.push_back("--print-memory");
  args.insert(args.begin() + 1, defaults.begin(), defaults.end());
  return args;
}

int main(int argc, char **argv) {
  const bool h20c = llvm::sys::path::filename(argv[0]) == "h20c";
  for (int i = 1; i < argc; ++i)
    if (llvm::is_contained({"-h", "-help", "--help"}, llvm::StringRef(argv[i]))) {
      if (h20c)
        llvm::outs() << kH20cHelp;
      printHelp();
      return 0;
    }
  std::vector<std::string> h20cArgs;
  std::vector<char *> h20cArgv;
  const bool userLogits = flagGiven(std::vector<std::string>(argv, argv + argc), "logits");
  if (h20c) {
    h20cArgs = h20cArguments(argc, argv);
    for (std::string &a : h20cArgs)
      h20cArgv.push_back(a.data());
    argc = static_cast<int>(h20cArgv.size());
    argv = h20cArgv.data();
  }
  DialectRegistry registry;
  h20::registerAllDialects(registry);
  h20::registerAllPasses();
  // MlirOptMain's own parser (registerAndParseCLIOptions) exits 1 on an
  // unknown or malformed option; h20's tools exit 2 for every bad input,
  // so the options are registered as MlirOptMain does and parsed here with
  // an error stream, which makes the parser return instead of exiting.
  std::string helpHeader = registerCLIOptions("h20 compiler driver and pass runner\n", registry);
  static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional, llvm::cl::desc("<input file>"),
                                              llvm::cl::init("-"));
  static llvm::cl::opt<std::string> outputFile("o", llvm::cl::desc("Output filename"),
                                               llvm::cl::value_desc("filename"),
                                               llvm::cl::init("-"));
  if (!llvm::cl::ParseCommandLineOptions(argc, argv, helpHeader, &llvm::errs()))
    return kExitBadInput;
  std::string input = inputFile, output = outputFile;
  if (h20c && !isOnnxFile(input))
    return fail("h20c compiles an ONNX model: h20c MODEL.onnx [h20-opt options] (h20c --help); "
                "got '" + input + "'");
  if (h20c && !emitLevel.empty())
    return fail("h20c writes artifacts; print the IR at a stage with h20-opt --emit=" +
                emitLevel.getValue());
  if (quiet && verbose)
    return fail("--quiet and --verbose exclude each other");
  if (isOnnxFile(input) || !emitLevel.empty() || !targetName.empty()) {
    int rc = compile(input, output, registry);
    if (h20c && rc == 0 && !quiet)
      llvm::errs() << "h20c: wrote " << output << " for --target=" << targetName
                   << "; run its prefill: h20-run " << output << " --ids PROMPT.npy\n";
    if (h20c && rc != 0 && !userLogits)
      llvm::errs() << "h20c: note: h20c compiles with --logits=last by default; if the error is "
                      "about the LM head, add --logits=all\n";
    return rc;
  }
  // Bad IR (syntax, verifier) is bad input: exit code 2, like the rest.
  return failed(MlirOptMain(argc, argv, input, output, registry)) ? kExitBadInput : 0;
}
