//===- GpuTarget.cpp - compile planned IR into a GPU artifact ------------===//
//
// Pipeline (see GpuTarget.h): chunk rewrite -> linalg with library calls ->
// bufferization -> GPU loops -> kernels (one gpu.module, NVVM, PTX) + host
// step program. The artifact holds the PTX (and cubin) of the generated
// kernels (module 0) and of the attention variants (module 1), the
// constants, and the program in the manifest's "gpu" object.
//
//===----------------------------------------------------------------------===//
#include "h20/Target/GpuTarget.h"

#include "HostProgram.h"

#include "h20/Conversion/Passes.h"
#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Runtime/Format/GpuProgram.h"
#include "h20/Runtime/Format/Manifest.h"
#include "h20/Target/AttentionKernel.h"
#include "h20/Target/IndexerKernel.h"
#include "h20/Target/PtxAssembler.h"
#include "h20/Target/TargetCommon.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Utils/GPUUtils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/TargetSelect.h"

using namespace mlir;

namespace h20 {
namespace {

constexpr llvm::StringLiteral kEntryFunc = "h20_main";
constexpr llvm::StringLiteral kKernelModule = "h20_kernels";

/// The CUDA toolkit, for libdevice (math functions in kernels): $CUDA_HOME
/// or /usr/local/cuda; empty when neither has nvvm/libdevice.
std::string toolkitPath() {
  for (std::string dir : {llvm::sys::Process::GetEnv("CUDA_HOME").value_or(""),
                          std::string("/usr/local/cuda")})
    if (!dir.empty() && llvm::sys::fs::exists(dir + "/nvvm/libdevice"))
      return dir;
  return "";
}

/// The PTX of the (single) gpu.binary gpu-module-to-binary produced.
FailureOr<std::string> extractPtx(ModuleOp module) {
  for (auto bin : module.getOps<mlir::gpu::BinaryOp>())
    for (Attribute a : bin.getObjects())
      if (auto obj = dyn_cast<mlir::gpu::ObjectAttr>(a))
        return obj.getObject().getValue().str();
  return module.emitError("GPU target: no kernel binary was produced");
}

LogicalResult runPasses(ModuleOp module, llvm::function_ref<void(PassManager &)> build) {
  PassManager pm(module.getContext());
  (void)applyDeveloperOptions(pm); // checked by h20-opt first
  build(pm);
  return pm.run(module);
}

std::string arenaSummary(const gpu::HostProgram &p) {
  return llvm::formatv("{0} steps, {1} buffers, arena {2} MiB", p.steps.size(), p.buffers.size(),
                       p.arenaBytes / (1024.0 * 1024.0))
      .str();
}

} // namespace

llvm::ArrayRef<llvm::StringRef> gpuStages() {
  static const llvm::StringRef kStages[] = {"chunked", "linalg", "buffers", "gpu", "host"};
  return kStages;
}

LogicalResult compileForGpu(ModuleOp module, const GpuTargetOptions &options,
                            runtime::Artifact &artifact, std::string &log) {
  if (!options.stopAfter.empty() && !llvm::is_contained(gpuStages(), options.stopAfter))
    return module.emitError("GPU target: unknown stage '") << options.stopAfter << "'";
  auto stopsAfter = [&](StringRef stage) { return options.stopAfter == stage; };
  MLIRContext *ctx = module.getContext();
  {
    DialectRegistry registry;
    NVVM::registerNVVMTargetInterfaceExternalModels(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    registerGPUDialectTranslation(registry);
    registerNVVMDialectTranslation(registry);
    ctx->appendDialectRegistry(registry);
    ctx->loadAllAvailableDialects();
  }
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError("expected exactly one function (the graph), found ") << funcs.size();
  func::FuncOp func = funcs.front();

  // A split module runs only as the tensor-parallel plan it was split for.
  int64_t splitRanks = 1;
  if (auto tp = module->getAttrOfType<DictionaryAttr>("h20.tensor_parallel"))
    if (auto r = tp.getAs<IntegerAttr>("ranks"))
      splitRanks = r.getInt();
  int64_t planRanks = options.parallel.plan == "tensor" ? options.parallel.gpus : 1;
  if (splitRanks != planRanks)
    return module.emitError("GPU target: the module is split for ")
           << splitRanks << " tensor-parallel rank(s) but the plan asks for " << planRanks;

  if (options.logitsLast && failed(runPasses(module, [](PassManager &pm) {
        pm.addPass(createLogitsLast());
      })))
    return failure();
  // Index inputs' ranges into the manifest (h20-run checks them), constant
  // indices checked now.
  if (failed(runPasses(module, [](PassManager &pm) {
        pm.addNestedPass<func::FuncOp>(h20::createInputValueRanges());
      })))
    return failure();

  auto begun = beginManifest(module, func, options.target, options.logitsLast, options.maxPositions);
  if (failed(begun))
    return failure();
  llvm::json::Object manifest = std::move(*begun);
  unsigned numInputs = func.getNumArguments(), numOutputs = func.getNumResults();

  // Decoder (token ids [1, S]): one chunk of a chunked prefill. Anything
  // else runs whole and must be static.
  gpu::ArgumentRoles roles;
  roles.numInputs = numInputs;
  roles.numOutputs = numOutputs;
  bool chunked = false;
  if (numInputs == 1) {
    auto t = dyn_cast<RankedTensorType>(func.getArgument(0).getType());
    chunked = t && t.getRank() == 2 && t.isDynamicDim(1) && t.getElementType().isInteger();
  }
  llvm::json::Value chunking = nullptr;
  llvm::json::Array outputModes;
  if (chunked) {
    if (options.chunk <= 0)
      return module.emitError("GPU target: internal: no chunk size");
    if (failed(runPasses(module, [](PassManager &pm) {
          ChunkedPrefillOptions o;
          o.wholePromptFallback = true;
          pm.addPass(createChunkedPrefill(o));
        })))
      return failure();
    auto info = func->getAttrOfType<DictionaryAttr>("h20.chunked");
    // A graph that cannot run a chunk at a time runs as one chunk of the
    // longest prompt the artifact accepts (h20-run refuses longer ones).
    int64_t chunk = options.chunk;
    if (auto whole = info ? info.getAs<StringAttr>("whole") : StringAttr()) {
      if (options.maxPositions <= 0)
        return module.emitError("GPU target: internal: no max-positions for a whole-prompt graph");
      chunk = options.maxPositions;
      module.emitWarning("GPU target: this graph runs the whole prompt as one chunk of ")
          << chunk << " tokens (--max-positions), as it cannot run a chunk at a time: "
          << whole.getValue();
    }
    roles.chunkStartArg = 1;
    roles.chunkTokensArg = 2;
    roles.inputDims = {{1, chunk}};
    chunking = llvm::json::Object{{"chunk", chunk}, {"input", 0}, {"dim", 1}, {"pad_value", 0}};
    StringRef mode = info ? info.getAs<StringAttr>("output").getValue() : "rows";
    for (unsigned i = 0; i < numOutputs; ++i)
      outputModes.push_back(mode == "last" ? llvm::json::Object{{"mode", "last"}}
                                           : llvm::json::Object{{"mode", "rows"}, {"dim", 1}});
  } else {
    for (BlockArgument a : func.getArguments()) {
      auto t = dyn_cast<RankedTensorType>(a.getType());
      if (!t || !t.hasStaticShape())
        return func.emitError("GPU target: input ")
               << a.getArgNumber() << " has a dynamic shape; the GPU target runs graphs with "
               << "static inputs, or decoders whose only input is token ids [1, S] (chunked "
               << "prefill); this graph has " << numInputs << " input(s)";
      roles.inputDims.push_back(std::vector<int64_t>(t.getRank(), -1));
    }
    for (unsigned i = 0; i < numOutputs; ++i)
      outputModes.push_back(llvm::json::Object{{"mode", "whole"}});
  }

  if (options.computeType != "f32") {
    if (failed(runPasses(module, [&](PassManager &pm) {
          ComputeTypeOptions o;
          o.type = options.computeType;
          pm.addNestedPass<func::FuncOp>(createComputeType(o));
        })))
      return failure();
  }
  manifest["compute_type"] = options.computeType;

  // ONNX names live on in the manifest.
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    func.setArgAttrs(i, DictionaryAttr::get(ctx));
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    func.setResultAttrs(i, DictionaryAttr::get(ctx));
  func.setName(kEntryFunc);
  if (stopsAfter("chunked"))
    return success();

  if (failed(runPasses(module, [&](PassManager &pm) {
        // One kernel choice per attention, recorded (or h20.decompose).
        ChooseAttentionKernelsOptions choose;
        choose.kernel = options.attentionKernel;
        pm.addNestedPass<func::FuncOp>(createChooseAttentionKernels(choose));
        LowerToLinalgOptions o;
        o.libraryCalls = true;
        pm.addPass(createLowerToLinalg(o));
        pm.addPass(createCanonicalizerPass());
      })))
    return failure();
  // Elementwise producers (head transposes included) fuse into their single
  // consumer: one kernel and one pass over memory instead of several.
  if (failed(runPasses(module, [](PassManager &pm) {
        pm.addNestedPass<func::FuncOp>(createFuseElementwise());
        // 16-bit bodies compute in f32 and round once per kernel.
        pm.addNestedPass<func::FuncOp>(createWidenElementwise());
        // cuBLASLt writes C with beta = 0: a GEMM's zero fill is dead.
        pm.addNestedPass<func::FuncOp>(createDropGemmInitFill());
      })))
    return failure();
  if (stopsAfter("linalg"))
    return success();
  llvm::json::Array weights = describeWeights(module, kEntryFunc);
  roles.numWeights = weights.size();
  for (const llvm::json::Value &w : weights)
    roles.weightDtypes.push_back(w.getAsObject()->getString("device_dtype")->str());
  // The KV caches become arguments after the inputs (h20-caches-to-arguments).
  unsigned argsBefore = func.getNumArguments();
  if (failed(runPasses(module, [](PassManager &pm) {
        pm.addNestedPass<func::FuncOp>(createCachesToArguments());
      })))
    return failure();
  roles.numState = func.getNumArguments() - argsBefore;
  outputsToDestinations(func);

  if (failed(runPasses(module, [](PassManager &pm) {
        // A result computed into a fresh tensor and then inserted into a
        // KV cache (K after RoPE, V) is computed in the cache slot instead:
        // no temporary, no copy.
        pm.addPass(bufferization::createEmptyTensorEliminationPass());
        bufferization::OneShotBufferizePassOptions bufferize;
        bufferize.bufferizeFunctionBoundaries = true;
        bufferize.functionBoundaryTypeConversion =
            bufferization::LayoutMapOption::IdentityLayoutMap;
        pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
        // A value computed in its cache slot leaves a copy of that slot
        // onto an identical subview: CSE merges the two views, and the
        // canonicalizer drops the self-copy.
        pm.addPass(createCSEPass());
        pm.addPass(createCanonicalizerPass());
      })))
    return failure();
  copiesToLinalg(module);
  if (stopsAfter("buffers"))
    return success();
  if (failed(runPasses(module, [](PassManager &pm) {
        pm.addNestedPass<func::FuncOp>(createLinalgToGpuLoops());
        pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
      })))
    return failure();
  // Constants a kernel uses become part of it, not launch arguments (a
  // float argument would cost a parameter slot and -inf has no JSON form).
  func.walk([](mlir::gpu::LaunchOp launch) {
    (void)sinkOperationsIntoLaunchOp(launch, [](Operation *op) {
      return isa<arith::ConstantOp>(op);
    });
  });
  if (failed(runPasses(module, [](PassManager &pm) {
        pm.addPass(createGpuKernelOutliningPass());
        pm.addPass(createLowerAffinePass());
        pm.addPass(createCanonicalizerPass());
        MergeKernelModulesOptions merge;
        merge.moduleName = kKernelModule.str();
        pm.addPass(createMergeKernelModules(merge));
      })))
    return failure();
  if (stopsAfter("gpu"))
    return success();

  std::string toolkit = toolkitPath();
  if (failed(runPasses(module, [&](PassManager &pm) {
        OpPassManager &kernels = pm.nest<mlir::gpu::GPUModuleOp>();
        kernels.addPass(createSCFToControlFlowPass());
        // bf16/f16 math (exp, tanh, ...) has no libdevice function: compute
        // it in f32.
        kernels.addPass(math::createMathExtendToSupportedTypes());
        ConvertGpuOpsToNVVMOpsOptions nvvm;
        nvvm.indexBitwidth = 64;
        kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
        kernels.addPass(createReconcileUnrealizedCastsPass());
        GpuNVVMAttachTargetOptions attach;
        attach.chip = "sm_90";
        attach.features = "+ptx80";
        attach.optLevel = 3;
        pm.addPass(createGpuNVVMAttachTarget(attach));
        GpuModuleToBinaryPassOptions binary;
        binary.compilationTarget = "isa";
        binary.toolkitPath = toolkit;
        pm.addPass(createGpuModuleToBinaryPass(binary));
      })))
    return failure();
  bool haveKernels = !module.getOps<mlir::gpu::BinaryOp>().empty();
  std::string kernelsPtx;
  if (haveKernels) {
    auto ptx = extractPtx(module);
    if (failed(ptx))
      return failure();
    kernelsPtx = std::move(*ptx);
  }

  if (stopsAfter("host"))
    return success();
  gpu::HostProgram program;
  if (failed(gpu::buildHostProgram(func, roles, program)))
    return failure();
  log += "h20: GPU program: " + arenaSummary(program) + "\n";

  // Blobs: PTX and cubin of both modules, constants.
  llvm::json::Array blobs, modules;
  auto addBlob = [&](const std::string &name, StringRef kind, const std::string &bytes) {
    uint64_t offset = runtime::appendBlob(artifact.payload, bytes.data(), bytes.size());
    blobs.push_back(llvm::json::Object{{"name", name},
                                       {"kind", kind},
                                       {"offset", int64_t(offset)},
                                       {"size", int64_t(bytes.size())}});
  };
  auto addModule = [&](const std::string &name, const std::string &ptx,
                       const std::string &arch = "sm_90") -> LogicalResult {
    addBlob(name + ".ptx", "ptx", ptx);
    std::string cubin, report, error;
    llvm::json::Value cubinName = nullptr;
    switch (assemblePtx(ptx, arch, cubin, report, error)) {
    case PtxasStatus::Ok:
      addBlob(name + ".cubin", "cubin", cubin);
      cubinName = name + ".cubin";
      log += "ptxas " + name + ":\n" + report;
      break;
    case PtxasStatus::NotFound:
      log += "h20: ptxas not found; " + name + " ships as PTX only (the driver JITs it)\n";
      break;
    case PtxasStatus::Failed:
      return module.emitError("GPU target: ptxas rejected the ") << name << " PTX: " << error;
    }
    modules.push_back(llvm::json::Object{
        {"name", name}, {"ptx_blob", name + ".ptx"}, {"cubin_blob", std::move(cubinName)}});
    return success();
  };
  // Module 0 exists even without generated kernels (attention is module 1).
  if (!haveKernels)
    kernelsPtx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  if (failed(addModule("kernels", kernelsPtx)))
    return failure();
  std::string attnPtx, attnLog;
  if (!program.attentionVariants.empty()) {
    // sm_90a only when a wgmma variant was chosen (attentionArch).
    const std::string attnArch = attentionArch(program.attentionVariants);
    if (!compileAttentionPtx(program.attentionVariants, attnArch, attnPtx, attnLog))
      return module.emitError("GPU target: the attention kernel did not compile: ") << attnLog;
    if (failed(addModule("attention", attnPtx, attnArch)))
      return failure();
  }
  // A CUDA-source kernel module: its launch steps name `placeholder` until
  // the module's index is known.
  auto addSourceModule = [&](const std::string &name, const std::string &ptx,
                             int64_t placeholder) -> LogicalResult {
    int64_t index = static_cast<int64_t>(modules.size());
    if (failed(addModule(name, ptx)))
      return failure();
    for (llvm::json::Value &step : program.steps) {
      llvm::json::Object *o = step.getAsObject();
      if (o && o->getInteger("module") == placeholder)
        (*o)["module"] = index;
    }
    return success();
  };
  if (!program.indexerKernels.empty()) {
    std::string ptx, nvrtcLog;
    if (!compileIndexerPtx(program.indexerKernels, "sm_90", ptx, nvrtcLog))
      return module.emitError("GPU target: the indexer kernel did not compile: ") << nvrtcLog;
    if (failed(addSourceModule("indexer", ptx, gpu::kIndexerModulePlaceholder)))
      return failure();
  }
  if (!program.sparseAttentionKernels.empty()) {
    std::string ptx, nvrtcLog;
    if (!compileSparseAttentionPtx(program.sparseAttentionKernels, "sm_90", ptx, nvrtcLog))
      return module.emitError("GPU target: the sparse attention kernel did not compile: ")
             << nvrtcLog;
    if (failed(addSourceModule("sparse_attention", ptx, gpu::kSparseAttentionModulePlaceholder)))
      return failure();
  }
  if (program.usesMoe) {
    std::string ptx, nvrtcLog;
    if (!compileMoePtx("sm_90", ptx, nvrtcLog))
      return module.emitError("GPU target: the routed-experts kernels did not compile: ")
             << nvrtcLog;
    if (failed(addSourceModule("moe", ptx, gpu::kMoeModulePlaceholder)))
      return failure();
  }
  if (!program.constBlob.empty())
    addBlob("consts.bin", "data", program.constBlob);

  if (options.parallel.gpus > 1) {
    const GpuTargetOptions::Parallel &par = options.parallel;
    auto ms = [](double v) -> llvm::json::Value {
      if (v < 0)
        return nullptr;
      return v;
    };
    llvm::json::Object o{{"gpus", par.gpus},
                         {"plan", par.plan},
                         {"tensor_parallel", par.plan == "tensor" ? par.gpus : int64_t(1)},
                         {"chosen_by", par.chosenBy},
                         {"tokens", par.tokens},
                         {"predicted_ms", llvm::json::Object{{"context", ms(par.contextMs)},
                                                             {"tensor", ms(par.tensorMs)}}}};
    if (!par.note.empty())
      o["note"] = par.note;
    // What h20-tensor-parallel split (blocks that did not fit run whole).
    if (auto tp = module->getAttrOfType<DictionaryAttr>("h20.tensor_parallel")) {
      llvm::json::Object split;
      for (StringRef k : {"attention_blocks", "mlp_blocks", "replicated_attention"})
        if (auto v = tp.getAs<IntegerAttr>(k))
          split[k] = v.getInt();
      o["split"] = std::move(split);
    }
    manifest["parallel"] = std::move(o);
  }
  manifest["weights"] = std::move(weights);
  manifest["blobs"] = std::move(blobs);
  manifest["gpu"] = llvm::json::Object{{"arch", "sm_90"},
                                       {"symbols", llvm::json::Array{"p0", "n"}},
                                       {"chunking", std::move(chunking)},
                                       {"outputs", std::move(outputModes)},
                                       {"modules", std::move(modules)},
                                       {"buffers", std::move(program.buffers)},
                                       {"arena_bytes", program.arenaBytes},
                                       {"steps", std::move(program.steps)}};
  artifact.manifest = manifestText(std::move(manifest));
  // The compiler reads back what it wrote, with the runtime's own parser
  // and validator: a program h20-run would refuse is a compiler bug, caught
  // here rather than on the GPU machine.
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

} // namespace h20
