//===- GpuTarget.cpp - compile planned IR into a GPU artifact ------------===//
//
// The IR is compiled by one pass pipeline (buildGpuPipeline, lib/Pipelines:
// chunked -> linalg -> buffers -> gpu -> host); this file only reads what
// it left and serialises it: the step program evaluated from the host
// function (HostProgram.cpp), written from the runtime's typed structs
// (writeGpuProgram), the PTX (and cubin) of every kernel module, the
// constants and the manifest.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/GpuTarget.h"

#include "HostProgram.h"

#include "h20/Pipelines/Pipelines.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/PtxAssembler.h"
#include "h20/Target/TargetCommon.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"

using namespace mlir;

namespace h20 {
namespace {

constexpr llvm::StringLiteral kEntryFunc = "h20_main";

/// The CUDA toolkit, for libdevice (math functions in kernels): $CUDA_HOME
/// or /usr/local/cuda; empty when neither has nvvm/libdevice.
std::string toolkitPath() {
  for (std::string dir : {llvm::sys::Process::GetEnv("CUDA_HOME").value_or(""),
                          std::string("/usr/local/cuda")})
    if (!dir.empty() && llvm::sys::fs::exists(dir + "/nvvm/libdevice"))
      return dir;
  return "";
}

void registerGpuTranslations(MLIRContext *ctx) {
  DialectRegistry registry;
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadAllAvailableDialects();
}

/// The PTX of the gpu.binary gpu-module-to-binary produced; a module
/// without kernels when there is none (module 0 always exists).
FailureOr<std::string> kernelsPtx(ModuleOp module) {
  if (module.getOps<mlir::gpu::BinaryOp>().empty())
    return std::string(".version 8.0\n.target sm_90\n.address_size 64\n");
  for (auto bin : module.getOps<mlir::gpu::BinaryOp>())
    for (Attribute a : bin.getObjects())
      if (auto obj = dyn_cast<mlir::gpu::ObjectAttr>(a))
        return obj.getObject().getValue().str();
  return module.emitError("GPU target: no kernel binary was produced");
}

LogicalResult runPasses(ModuleOp module, llvm::function_ref<LogicalResult(PassManager &)> build) {
  PassManager pm(module.getContext());
  (void)applyDeveloperOptions(pm); // checked by h20-opt first
  if (failed(build(pm)))
    return failure();
  return pm.run(module);
}

/// A decoder: its only input is token ids [1, S] with S dynamic, so it runs
/// as a chunked prefill.
bool takesTokenIds(func::FuncOp func) {
  if (func.getNumArguments() != 1)
    return false;
  auto t = dyn_cast<RankedTensorType>(func.getArgument(0).getType());
  return t && t.getRank() == 2 && t.isDynamicDim(1) && t.getElementType().isInteger();
}

/// What the compiled function's arguments are, read from the IR the
/// pipeline left: the chunk from `h20.chunked`, the weights from the
/// manifest's list, the KV caches from their `h20.kv_cache` marks.
FailureOr<gpu::ArgumentRoles> argumentRoles(func::FuncOp func, unsigned numInputs,
                                            unsigned numOutputs,
                                            const llvm::json::Array &weights) {
  gpu::ArgumentRoles roles;
  roles.numInputs = numInputs;
  roles.numOutputs = numOutputs;
  roles.numWeights = weights.size();
  for (const llvm::json::Value &w : weights) {
    roles.weightDtypes.push_back(w.getAsObject()->getString("device_dtype")->str());
    auto placement = w.getAsObject()->getString("placement");
    roles.weightOnHost.push_back(placement && *placement == "host");
  }
  if (auto info = func->getAttrOfType<DictionaryAttr>("h20.chunked")) {
    auto chunk = info.getAs<IntegerAttr>("chunk");
    if (!chunk)
      return func.emitError("GPU target: internal: h20.chunked records no chunk");
    roles.chunkStartArg = 1;
    roles.chunkTokensArg = 2;
    roles.inputDims = {{1, chunk.getInt()}};
  } else {
    for (unsigned i = 0; i < numInputs; ++i) {
      auto t = dyn_cast<MemRefType>(func.getArgument(i).getType());
      roles.inputDims.push_back(std::vector<int64_t>(t ? t.getRank() : 0, -1));
    }
  }
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, "h20.kv_cache"))
      ++roles.numState;
  return roles;
}

/// The program's chunking and output modes, from `h20.chunked`.
void describeChunking(func::FuncOp func, unsigned numOutputs, runtime::GpuProgram &program) {
  auto info = func->getAttrOfType<DictionaryAttr>("h20.chunked");
  if (!info) {
    program.outputs.assign(numOutputs, runtime::GpuOutput{runtime::OutputMode::Whole, 0});
    return;
  }
  runtime::GpuChunking c;
  c.chunk = info.getAs<IntegerAttr>("chunk").getInt();
  program.chunking = c;
  bool last = info.getAs<StringAttr>("output").getValue() == "last";
  program.outputs.assign(numOutputs, last ? runtime::GpuOutput{runtime::OutputMode::Last, 0}
                                          : runtime::GpuOutput{runtime::OutputMode::Rows, 1});
}

/// Blobs and code modules as they are added to the artifact.
class ArtifactWriter {
public:
  ArtifactWriter(ModuleOp module, runtime::Artifact &artifact, std::string &log)
      : module(module), artifact(artifact), log(log) {}

  void addBlob(const std::string &name, StringRef kind, const std::string &bytes) {
    uint64_t offset = runtime::appendBlob(artifact.payload, bytes.data(), bytes.size());
    blobs.push_back(llvm::json::Object{{"name", name},
                                       {"kind", kind},
                                       {"offset", int64_t(offset)},
                                       {"size", int64_t(bytes.size())}});
  }

  /// The PTX, and its cubin when ptxas is there (the driver JITs PTX alone).
  LogicalResult addModule(const std::string &name, const std::string &ptx, const std::string &arch,
                          std::vector<runtime::GpuModule> &modules) {
    addBlob(name + ".ptx", "ptx", ptx);
    std::string cubin, report, error;
    runtime::GpuModule m{name, name + ".ptx", ""};
    switch (assemblePtx(ptx, arch, cubin, report, error)) {
    case PtxasStatus::Ok:
      addBlob(name + ".cubin", "cubin", cubin);
      m.cubinBlob = name + ".cubin";
      log += "ptxas " + name + ":\n" + report;
      break;
    case PtxasStatus::NotFound:
      log += "h20: ptxas not found; " + name + " ships as PTX only (the driver JITs it)\n";
      break;
    case PtxasStatus::Failed:
      return module.emitError("GPU target: ptxas rejected the ") << name << " PTX: " << error;
    }
    modules.push_back(std::move(m));
    return success();
  }

  llvm::json::Array takeBlobs() { return std::move(blobs); }

private:
  ModuleOp module;
  runtime::Artifact &artifact;
  std::string &log;
  llvm::json::Array blobs;
};

/// Compiles every module the steps name, in KernelModules' order: the
/// generated kernels, then the NVRTC-compiled attention, indexer, sparse
/// attention, routed-experts and FP8-quantising kernels the program uses.
LogicalResult addKernelModules(ModuleOp module, const gpu::HostProgram &host,
                               const gpu::KernelModules &plan, ArtifactWriter &writer,
                               std::vector<runtime::GpuModule> &modules) {
  auto ptx = kernelsPtx(module);
  if (failed(ptx) || failed(writer.addModule("kernels", *ptx, "sm_90", modules)))
    return failure();
  auto compiled = [&](const char *what, const char *name, const std::string &arch, bool ok,
                      const std::string &code, const std::string &nvrtcLog) -> LogicalResult {
    if (!ok)
      return module.emitError("GPU target: the ") << what << " did not compile: " << nvrtcLog;
    return writer.addModule(name, code, arch, modules);
  };
  std::string code, nvrtcLog;
  if (plan.attention >= 0) {
    // sm_90a only when a wgmma variant was chosen (attentionArch).
    const std::string arch = attentionArch(host.attentionVariants);
    bool ok = compileAttentionPtx(host.attentionVariants, arch, code, nvrtcLog);
    if (failed(compiled("attention kernel", "attention", arch, ok, code, nvrtcLog)))
      return failure();
  }
  if (plan.indexer >= 0) {
    bool ok = compileIndexerPtx(host.indexerKernels, "sm_90", code, nvrtcLog);
    if (failed(compiled("indexer kernel", "indexer", "sm_90", ok, code, nvrtcLog)))
      return failure();
  }
  if (plan.sparseAttention >= 0) {
    // sm_90a when the wgmma kernel was chosen (sparseAttentionArch).
    const std::string arch = sparseAttentionArch(host.sparseAttentionKernels);
    bool ok = compileSparseAttentionPtx(host.sparseAttentionKernels, arch, code, nvrtcLog);
    if (failed(compiled("sparse attention kernel", "sparse_attention", arch, ok, code,
                        nvrtcLog)))
      return failure();
  }
  if (plan.moe >= 0) {
    // sm_90a when a routed-experts op chose the wgmma MXFP4 GEMM.
    const std::string arch = host.moeWgmma ? "sm_90a" : "sm_90";
    bool ok = compileMoePtx(arch, code, nvrtcLog);
    if (failed(compiled("routed-experts kernels", "moe", arch, ok, code, nvrtcLog)))
      return failure();
  }
  if (plan.fp8 >= 0) {
    bool ok = compileFp8Ptx("sm_90", code, nvrtcLog);
    if (failed(compiled("FP8 quantising kernel", "fp8_quant", "sm_90", ok, code, nvrtcLog)))
      return failure();
  }
  return success();
}

/// The multi-GPU plan h20-choose-parallel-plan recorded (`h20.parallel`),
/// or null for a one-GPU module.
DictionaryAttr parallelPlanOf(ModuleOp module) {
  return module->getAttrOfType<DictionaryAttr>("h20.parallel");
}

/// Tensor-parallel ranks the recorded plan asks for (1: none).
int64_t planTensorRanks(ModuleOp module) {
  DictionaryAttr plan = parallelPlanOf(module);
  if (!plan)
    return 1;
  auto kind = plan.getAs<StringAttr>("plan");
  auto gpus = plan.getAs<IntegerAttr>("gpus");
  return kind && gpus && kind.getValue() == "tensor" ? gpus.getInt() : 1;
}

/// The manifest's "parallel" object: the recorded plan and what
/// h20-tensor-parallel split.
llvm::json::Object parallelJson(ModuleOp module, DictionaryAttr plan) {
  auto num = [&](StringRef k) -> llvm::json::Value {
    if (auto v = plan.getAs<IntegerAttr>(k))
      return v.getInt();
    if (auto v = plan.getAs<FloatAttr>(k))
      return v.getValueAsDouble() < 0 ? llvm::json::Value(nullptr)
                                       : llvm::json::Value(v.getValueAsDouble());
    return nullptr;
  };
  auto str = [&](StringRef k) {
    auto v = plan.getAs<StringAttr>(k);
    return v ? v.getValue().str() : std::string();
  };
  llvm::json::Object o{{"gpus", num("gpus")},
                       {"plan", str("plan")},
                       {"tensor_parallel", planTensorRanks(module)},
                       {"chosen_by", str("chosen_by")},
                       {"tokens", num("tokens")},
                       {"predicted_ms", llvm::json::Object{{"context", num("context_ms")},
                                                           {"tensor", num("tensor_ms")}}}};
  if (!str("note").empty())
    o["note"] = str("note");
  // What h20-tensor-parallel split (blocks that did not fit run whole).
  if (auto tp = module->getAttrOfType<DictionaryAttr>("h20.tensor_parallel")) {
    llvm::json::Object split;
    for (StringRef k : {"attention_blocks", "mlp_blocks", "expert_blocks", "attention_rows",
                        "query_gemms", "shared_expert_gemms", "replicated_attention"})
      if (auto v = tp.getAs<IntegerAttr>(k))
        split[k] = v.getInt();
    if (auto why = tp.getAs<StringAttr>("attention_rows_withdrawn"))
      split["attention_rows_withdrawn"] = why.getValue().str();
    o["split"] = std::move(split);
  }
  return o;
}

/// Checks that `module` can be compiled as `options` ask, before any pass.
LogicalResult checkModule(ModuleOp module, func::FuncOp func, const GpuTargetOptions &options,
                          bool decoder) {
  // A split module runs only as the tensor-parallel plan it was split for.
  int64_t splitRanks = 1;
  if (auto tp = module->getAttrOfType<DictionaryAttr>("h20.tensor_parallel"))
    if (auto r = tp.getAs<IntegerAttr>("ranks"))
      splitRanks = r.getInt();
  int64_t planRanks = planTensorRanks(module);
  if (splitRanks != planRanks)
    return module.emitError("GPU target: the module is split for ")
           << splitRanks << " tensor-parallel rank(s) but the plan asks for " << planRanks;
  if (decoder) {
    if (options.chunk <= 0)
      return module.emitError("GPU target: internal: no chunk size");
    return success();
  }
  // Anything but a decoder runs whole and must be static.
  for (BlockArgument a : func.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(a.getType());
    if (!t || !t.hasStaticShape())
      return func.emitError("GPU target: input ")
             << a.getArgNumber() << " has a dynamic shape; the GPU target runs graphs with "
             << "static inputs, or decoders whose only input is token ids [1, S] (chunked "
             << "prefill); this graph has " << func.getNumArguments() << " input(s)";
  }
  return success();
}

/// Tells options.onStage, when set, that `stage` took the time since the
/// last lap of `watch`.
void report(const GpuTargetOptions &options, StringRef stage, StageClock &watch,
            StringRef detail) {
  double s = watch.lap();
  if (options.onStage)
    options.onStage(stage, s, detail);
}

/// Serialises the compiled module: the step program evaluated from the
/// host function, the kernel modules, constants and the manifest; then
/// parses the manifest back with the runtime's own parser and validator, so
/// that a program h20-run would refuse is caught here, as a compiler bug.
LogicalResult writeArtifact(ModuleOp module, func::FuncOp func, const GpuTargetOptions &options,
                            llvm::json::Object manifest, unsigned numInputs, unsigned numOutputs,
                            runtime::Artifact &artifact, std::string &log) {
  llvm::json::Array weights = describeWeights(module, kEntryFunc);
  auto roles = argumentRoles(func, numInputs, numOutputs, weights);
  if (failed(roles))
    return failure();
  const gpu::KernelModules plan = gpu::planKernelModules(func);
  gpu::HostProgram host;
  StageClock watch;
  if (failed(gpu::buildHostProgram(func, *roles, plan, host)))
    return failure();
  std::string summary = llvm::formatv("{0} steps, {1} buffers, arena {2:f1} MiB",
                                      host.steps.size(), host.buffers.size(),
                                      host.arenaBytes / (1024.0 * 1024.0));
  log += "h20: GPU program: " + summary + "\n";
  report(options, "host program", watch, summary);

  runtime::GpuProgram program;
  program.arch = "sm_90";
  program.symbols = {"p0", "n"};
  program.derived = host.derived;
  auto anyStep = [&](bool runtime::StepSymbols::*flag) {
    return llvm::any_of(host.steps, [&](const runtime::GpuStep &s) {
      return runtime::stepSymbols(s, program.derived).*flag;
    });
  };
  // q (the chunk's index) only where a step counts rows of groups of
  // tokens: older runtimes refuse a symbol they do not know.
  if (anyStep(&runtime::StepSymbols::q))
    program.symbols.push_back("q");
  // rank only where a step reads it (an expert-parallel rank's experts).
  if (anyStep(&runtime::StepSymbols::rank))
    program.symbols.push_back("rank");
  describeChunking(func, numOutputs, program);
  ArtifactWriter writer(module, artifact, log);
  if (failed(addKernelModules(module, host, plan, writer, program.modules)))
    return failure();
  report(options, "kernels", watch,
         llvm::formatv("{0} module(s), PTX{1}", program.modules.size(),
                       llvm::any_of(program.modules,
                                    [](const runtime::GpuModule &m) { return !m.cubinBlob.empty(); })
                           ? " + cubin (ptxas)"
                           : " only (no ptxas)")
             .str());
  if (!host.constBlob.empty())
    writer.addBlob("consts.bin", "data", host.constBlob);
  program.buffers = std::move(host.buffers);
  program.steps = std::move(host.steps);
  if (program.chunking)
    program.layers = std::move(host.layers);
  // Context parallelism runs the program by its layers: refuse the plan
  // now rather than at run time.
  if (DictionaryAttr plan = parallelPlanOf(module))
    if (auto kind = plan.getAs<StringAttr>("plan");
        kind && kind.getValue() == "context" && program.layers.empty())
      return module.emitError("GPU target: the multi-GPU plan is context parallelism, which "
                              "runs a chunked program whose every attention reads the KV cache "
                              "layer by layer; this graph ")
             << (program.chunking ? "has an attention that does not read the KV cache"
                                  : "runs whole, not in chunks")
             << " (compile for one GPU, or --parallel tensor)";
  program.arenaBytes = host.arenaBytes;

  if (DictionaryAttr plan = parallelPlanOf(module))
    manifest["parallel"] = parallelJson(module, plan);
  manifest["compute_type"] = options.computeType;
  manifest["weights"] = std::move(weights);
  manifest["blobs"] = writer.takeBlobs();
  auto gpuObject = llvm::json::parse(runtime::writeGpuProgram(program));
  if (!gpuObject)
    return module.emitError("GPU target: internal: the step program is not JSON: ")
           << llvm::toString(gpuObject.takeError());
  manifest["gpu"] = std::move(*gpuObject);
  artifact.manifest = manifestText(std::move(manifest));
  runtime::Manifest parsed;
  runtime::GpuProgram reread;
  std::string error;
  if (!runtime::parseManifest(artifact.manifest, parsed, error) ||
      !runtime::parseGpuProgram(artifact.manifest, parsed, artifact.payload.size(), reread, error))
    return module.emitError("GPU target: internal: the artifact's step program does not parse "
                            "back: ")
           << error;
  return success();
}

} // namespace

LogicalResult compileForGpu(ModuleOp module, const GpuTargetOptions &options,
                            runtime::Artifact &artifact, std::string &log) {
  if (!options.stopAfter.empty() && !llvm::is_contained(gpuStages(), options.stopAfter))
    return module.emitError("GPU target: unknown stage '") << options.stopAfter << "'";
  registerGpuTranslations(module.getContext());
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError("expected exactly one function (the graph), found ") << funcs.size();
  func::FuncOp func = funcs.front();
  const bool decoder = takesTokenIds(func);
  if (failed(checkModule(module, func, options, decoder)))
    return failure();

  // The interface first (the manifest describes it): a last-position LM
  // head, and index inputs' ranges (h20-run checks them; constant indices
  // are checked now).
  if (failed(runPasses(module, [&](PassManager &pm) {
        if (options.logitsLast)
          pm.addPass(createLogitsLast());
        pm.addNestedPass<func::FuncOp>(h20::createInputValueRanges());
        return success();
      })))
    return failure();
  auto begun = beginManifest(module, func, options.target, options.logitsLast, options.maxPositions);
  if (failed(begun))
    return failure();
  const unsigned numInputs = func.getNumArguments(), numOutputs = func.getNumResults();

  GpuPipelineOptions pipeline;
  pipeline.chunk = decoder ? options.chunk : 0;
  pipeline.chunkGiven = options.chunkGiven;
  pipeline.maxPositions = options.maxPositions;
  pipeline.computeType = options.computeType;
  pipeline.attentionKernel = options.attentionKernel;
  pipeline.fp8Gemm = options.fp8Gemm;
  pipeline.expertGemm = options.expertGemm;
  pipeline.hostTableMinBytes = options.hostTableMinBytes;
  pipeline.stopAfter = options.stopAfter;
  pipeline.toolkitPath = toolkitPath();
  pipeline.entryName = kEntryFunc.str();
  pipeline.target = options.target;
  StageClock watch;
  if (failed(runPasses(module, [&](PassManager &pm) { return buildGpuPipeline(pm, pipeline); })))
    return failure();
  report(options, "GPU pipeline", watch,
         pipeline.chunk > 0 ? "chunks of " + std::to_string(pipeline.chunk) + " tokens" : "");
  if (!options.stopAfter.empty())
    return success();
  return writeArtifact(module, func, options, std::move(*begun), numInputs, numOutputs, artifact,
                       log);
}

} // namespace h20
