//===- CpuTarget.cpp - compile attn-level IR to a host artifact ----------===//
#include "h20/Target/CpuTarget.h"
#include "h20/Target/TargetCommon.h"

#include "h20/Analysis/SymbolicEvaluator.h"
#include "h20/Conversion/Passes.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace mlir;

namespace h20 {
namespace {

constexpr llvm::StringLiteral kEntryFunc = "h20_main";

void buildBufferizationPipeline(PassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::buildBufferDeallocationPipeline(pm);
}

void buildLLVMPipeline(PassManager &pm) {
  pm.addPass(createConvertLinalgToLoopsPass());
  // One function per loop nest: LLVM's time is superlinear in a function's
  // size, and a whole model is otherwise one function.
  pm.addPass(h20::createOutlineLoopNests());
  // Subview metadata expands into affine.apply: lower affine after it.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // Allocations go through _mlir_memref_to_llvm_alloc/free, which the
  // entry wrapper defines: an allocation failure ends the run with a message
  // and exit code 3 instead of a null-pointer crash.
  FinalizeMemRefToLLVMConversionPassOptions memrefOptions;
  memrefOptions.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefOptions));
  // 16-bit math in float32 (x86 has no bf16/f16 math), and bfloat16
  // arithmetic emulated in float32 with its conversions as integer
  // arithmetic: LLVM would promote it through compiler-rt's __truncsfbf2,
  // which the loaded artifact cannot resolve (16-bit exports: transformers'
  // Casts around norms and RoPE, bf16 residual adds).
  pm.addPass(math::createMathExtendToSupportedTypes());
  // LLVM intrinsics first (rsqrt expands there); what has none (erf, ...)
  // becomes a libm call.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// LLVM IR -> optimised native object for the host CPU. With `llvmIR`, the
/// module with the host's triple and data layout is printed there instead,
/// and the result is empty.
FailureOr<std::string> emitObject(llvm::Module &m, int level, std::string &cpuName, Location loc,
                                  const StageReport &onStage, std::string *llvmIR) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return emitError(loc) << "no LLVM target for the host: " << error;
  // x86-64: the x86-64-v3 level (AVX2, FMA; every server CPU since 2015),
  // checked by h20-run, so an artifact runs on any such machine. Elsewhere:
  // the host CPU.
  llvm::SubtargetFeatures features;
  if (triple.getArch() == llvm::Triple::x86_64) {
    cpuName = "x86-64-v3";
  } else {
    cpuName = llvm::sys::getHostCPUName().str();
    for (auto &f : llvm::sys::getHostCPUFeatures())
      features.AddFeature(f.first(), f.second);
  }
  level = std::clamp(level, 0, 3);
  const llvm::OptimizationLevel optLevels[] = {llvm::OptimizationLevel::O0,
                                               llvm::OptimizationLevel::O1,
                                               llvm::OptimizationLevel::O2,
                                               llvm::OptimizationLevel::O3};
  const llvm::CodeGenOptLevel cgLevels[] = {llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less,
                                            llvm::CodeGenOptLevel::Default,
                                            llvm::CodeGenOptLevel::Aggressive};
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpuName, features.getString(), llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, cgLevels[level]));
  m.setTargetTriple(triple);
  m.setDataLayout(tm->createDataLayout());
  if (llvmIR) { // h20-opt --emit=llvm: the module as LLVM gets it
    // The CPU and its features ride on the target machine; in the printed
    // copy they go on every function, so opt-22 / llc-22 optimise for the
    // same CPU without -mcpu.
    for (llvm::Function &f : m)
      if (!f.isDeclaration()) {
        f.addFnAttr("target-cpu", cpuName);
        if (!features.getString().empty())
          f.addFnAttr("target-features", features.getString());
      }
    llvm::raw_string_ostream os(*llvmIR);
    m.print(os, nullptr);
    return std::string();
  }

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  StageClock clock;
  unsigned before = m.getInstructionCount();
  if (level == 0)
    pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0).run(m, mam);
  else
    pb.buildPerModuleDefaultPipeline(optLevels[level]).run(m, mam);
  if (onStage)
    onStage("LLVM -O" + std::to_string(level), clock.lap(),
            llvm::formatv("{0} instructions before, {1} after", before, m.getInstructionCount())
                .str());

  llvm::SmallString<0> obj;
  llvm::raw_svector_ostream os(obj);
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return emitError(loc) << "LLVM cannot emit an object file for " << triple.str();
  codegen.run(m);
  if (onStage)
    onStage("machine code", clock.lap(), cpuName);
  return std::string(obj.str());
}

/// Links the object and an argv-style entry wrapper into a shared object
/// with the system C compiler; returns its bytes. `argShapes`: each
/// argument's shape, or nothing for an index scalar (passed by value; the
/// runtime's argv slot points at its word).
FailureOr<std::string> linkSharedObject(const std::string &obj,
                                        ArrayRef<std::optional<SmallVector<int64_t>>> argShapes,
                                        ArrayRef<int64_t> chunking, Location loc) {
  unsigned numArgs = argShapes.size();
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    cc = llvm::sys::findProgramByName("gcc");
  if (!cc)
    return emitError(loc) << "no C compiler ('cc' or 'gcc') on PATH to link the CPU artifact";
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("h20-cpu", dir))
    return emitError(loc) << "cannot create a temporary directory";
  auto path = [&](llvm::StringRef name) {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  };
  std::string objPath = path("model.o"), cPath = path("entry.c"), soPath = path("model.so");
  std::string abi = std::to_string(numArgs);
  for (const std::optional<SmallVector<int64_t>> &shape : argShapes) {
    if (!shape) {
      abi += ", -1";
      continue;
    }
    abi += ", " + std::to_string(shape->size());
    for (int64_t d : *shape)
      abi += ", " + std::to_string(ShapedType::isDynamic(d) ? -1 : d);
  }
  std::string params, args;
  for (unsigned i = 0; i < numArgs; ++i) {
    const bool scalar = !argShapes[i];
    params += std::string(i ? ", " : "") + (scalar ? "long long" : "void *");
    args += std::string(i ? ", " : "") + (scalar ? "*(const long long *)a[" : "a[") +
            std::to_string(i) + "]";
  }
  std::string wrapper =
      "/* generated by h20: argv-style entry to the MLIR C interface, and the\n"
      "   allocation functions the generated code calls */\n"
      "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
      "void *_mlir_memref_to_llvm_alloc(size_t n) {\n"
      "  void *p = malloc(n);\n"
      "  if (!p && n) {\n"
      "    fprintf(stderr, \"h20-run: error: out of memory: the prefill needs %zu more \"\n"
      "            \"bytes (the prompt is too long for this machine)\\n\", n);\n"
      "    _exit(3);\n"
      "  }\n"
      "  return p;\n"
      "}\n"
      "void _mlir_memref_to_llvm_free(void *p) { free(p); }\n"
      "void _mlir_ciface_" + kEntryFunc.str() + "(" + params + ");\n"
      "void h20_entry(void **a) { _mlir_ciface_" + kEntryFunc.str() + "(" + args + "); }\n"
      "/* The ABI the code was compiled for: argument count, then per argument\n"
      "   its rank and dims (-1: dynamic), or rank -1 for an index scalar.\n"
      "   h20-run checks the manifest against it. */\n"
      "const long long h20_abi[] = {" + abi + "};\n";
  // A chunked prefill's facts, which h20-run checks the manifest's
  // cpu_chunked against: chunk, capacity, cache count, each cache's bytes
  // per element.
  if (!chunking.empty()) {
    wrapper += "const long long h20_chunking[] = {";
    for (auto [i, v] : llvm::enumerate(chunking))
      wrapper += (i ? ", " : "") + std::to_string(v);
    wrapper += "};\n";
  }
  auto cleanup = [&] {
    for (const std::string &p : {objPath, cPath, soPath})
      llvm::sys::fs::remove(p);
    llvm::sys::fs::remove(dir);
  };
  {
    std::error_code ec;
    llvm::raw_fd_ostream o(objPath, ec), c(cPath, ec);
    o << obj;
    c << wrapper;
  }
  std::string errMsg;
  llvm::SmallVector<llvm::StringRef> argv{*cc, "-shared", "-fPIC", "-O2", "-o", soPath,
                                          objPath, cPath, "-lm"};
  int rc = llvm::sys::ExecuteAndWait(*cc, argv, std::nullopt, {}, 0, 0, &errMsg);
  auto so = llvm::MemoryBuffer::getFile(soPath);
  cleanup();
  if (rc != 0 || !so)
    return emitError(loc) << "linking the CPU artifact with " << *cc << " failed (exit " << rc
                          << ") " << errMsg;
  return (*so)->getBuffer().str();
}

/// Makes the planned entry of `module` one chunk of `options.chunk` tokens
/// (h20-chunked-prefill, no whole-prompt fallback: the user chose the
/// chunk). Returns the entry, or failure after the pass's error.
FailureOr<func::FuncOp> chunkEntry(ModuleOp module, const CpuTargetOptions &options) {
  if (!options.maxPositions || *options.maxPositions <= 0)
    return module.emitError("CPU target: a chunked prefill (chunk ")
           << options.chunk << ") needs max-positions: the caches hold every position";
  PassManager pm(module.getContext());
  (void)applyDeveloperOptions(pm); // checked by h20-opt first
  ChunkedPrefillOptions c;
  c.chunk = options.chunk;
  c.maxPositions = *options.maxPositions;
  c.wholePromptFallback = false;
  // A chunk need not hold whole compressor groups (as on the GPU).
  c.carryPartialGroups = true;
  pm.addPass(createChunkedPrefill(c));
  if (failed(pm.run(module)))
    return failure();
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1 || !funcs.front()->hasAttr("h20.chunked"))
    return module.emitError("internal: h20-chunked-prefill left no chunked entry");
  return funcs.front();
}

} // namespace

LogicalResult compileForCpu(ModuleOp module, const CpuTargetOptions &options,
                            runtime::Artifact &artifact) {
  StageClock clock;
  MLIRContext *ctx = module.getContext();
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError("expected exactly one function (the graph), found ") << funcs.size();
  func::FuncOp func = funcs.front();

  {
    PassManager pm(ctx);
    if (options.logitsLast)
      pm.addPass(createLogitsLast());
    // Index inputs' ranges into the manifest (h20-run checks them),
    // constant indices checked now.
    pm.addNestedPass<func::FuncOp>(createInputValueRanges());
    if (failed(pm.run(module)))
      return failure();
  }
  auto begun = beginManifest(module, func, "cpu", options.logitsLast, options.maxPositions.value_or(0));
  if (failed(begun))
    return failure();
  llvm::json::Object manifest = std::move(*begun);
  if (options.chunk > 0) {
    auto chunked = chunkEntry(module, options);
    if (failed(chunked))
      return failure();
    func = *chunked;
  }
  // The code's own inputs: the graph's, or a chunk's ids, start and length.
  unsigned numInputs = func.getNumArguments(), numOutputs = func.getNumResults();

  func->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  PassManager toLinalg(ctx);
  (void)applyDeveloperOptions(toLinalg); // checked by h20-opt first
  // ONNX names live on in the manifest; LLVM has no use for them.
  RenameEntryOptions entry;
  entry.entryName = kEntryFunc.str();
  toLinalg.addPass(createRenameEntry(entry));
  toLinalg.addPass(createLowerToLinalg());
  toLinalg.addPass(createCanonicalizerPass());
  // A chunked prefill's caches outlive the call: arguments after the
  // weights, which the runtime allocates once and keeps.
  if (options.chunk > 0)
    toLinalg.addNestedPass<func::FuncOp>(createCachesToArguments());
  toLinalg.addNestedPass<func::FuncOp>(createOutputsToDestinations());
  if (failed(toLinalg.run(module)))
    return failure();
  // Shapes for the ABI table; nothing for an index scalar (chunk start and
  // length), which the entry takes by value.
  SmallVector<std::optional<SmallVector<int64_t>>> argShapes;
  llvm::json::Array caches;
  SmallVector<int64_t> cacheElementBytes;
  for (auto [i, t] : llvm::enumerate(func.getArgumentTypes())) {
    if (t.isIndex()) {
      argShapes.push_back(std::nullopt);
      continue;
    }
    auto shaped = dyn_cast<ShapedType>(t);
    if (!shaped)
      return func.emitError("CPU target: entry argument ") << i << " of type " << t
                                                           << " is neither a tensor nor an index";
    argShapes.push_back(SmallVector<int64_t>(shaped.getShape()));
    if (!func.getArgAttr(i, "h20.kv_cache"))
      continue;
    // Recorded in the manifest; LLVM has no use for the mark.
    func.removeArgAttr(i, "h20.kv_cache");
    llvm::json::Array shape;
    for (int64_t d : shaped.getShape())
      shape.push_back(d);
    caches.push_back(llvm::json::Object{{"dtype", dtypeName(shaped.getElementType())},
                                        {"shape", std::move(shape)}});
    cacheElementBytes.push_back(elementBytes(shaped.getElementType()));
  }
  const unsigned numCaches = caches.size();
  SmallVector<int64_t> chunking;
  if (options.chunk > 0) {
    auto c = func->getAttrOfType<DictionaryAttr>("h20.chunked");
    const int64_t capacity = c.getAs<IntegerAttr>("capacity").getInt();
    chunking = {options.chunk, capacity, static_cast<int64_t>(numCaches)};
    chunking.append(cacheElementBytes);
    manifest["cpu_chunked"] = llvm::json::Object{
        {"chunk", options.chunk},
        {"capacity", capacity},
        {"output", c.getAs<StringAttr>("output").getValue().str()},
        {"caches", std::move(caches)}};
  }
  PassManager bufferize(ctx);
  (void)applyDeveloperOptions(bufferize); // checked by h20-opt first
  buildBufferizationPipeline(bufferize);
  bufferize.addPass(createCopiesToLinalg());
  if (failed(bufferize.run(module)))
    return failure();
  PassManager pm(ctx);
  (void)applyDeveloperOptions(pm); // checked by h20-opt first
  buildLLVMPipeline(pm);
  // The weight list is read after h20-lower-to-linalg turned weights into
  // arguments; it survives on the (LLVM) function as an attribute.
  if (failed(pm.run(module)))
    return failure();
  if (options.onStage)
    options.onStage("CPU pipeline", clock.lap(), "linalg, bufferization, LLVM dialect");
  llvm::json::Array weights = describeWeights(module, kEntryFunc);
  unsigned numWeights = weights.size();
  registerBuiltinDialectTranslation(*ctx);
  registerLLVMDialectTranslation(*ctx);
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, llvmCtx);
  if (!llvmModule)
    return module.emitError("translation to LLVM IR failed");
  if (options.stopAtLLVMIR)
    return success();
  std::string cpu;
  auto obj = emitObject(*llvmModule, options.optLevel, cpu, module.getLoc(), options.onStage,
                        options.llvmIR);
  if (failed(obj))
    return failure();
  if (options.llvmIR)
    return success();
  if (argShapes.size() != numInputs + numWeights + numCaches + numOutputs)
    return module.emitError("internal: ") << argShapes.size() << " arguments for "
                                          << numInputs + numWeights + numCaches + numOutputs
                                          << " inputs, weights, caches and outputs";
  clock.lap(); // restart: emitObject reported its own stages
  auto so = linkSharedObject(*obj, argShapes, chunking, module.getLoc());
  if (failed(so))
    return failure();
  if (options.onStage)
    options.onStage("link", clock.lap(), llvm::formatv("{0} KiB", so->size() / 1024).str());

  uint64_t offset = runtime::appendBlob(artifact.payload, so->data(), so->size());
  manifest["weights"] = std::move(weights);
  manifest["cpu"] = cpu;
  manifest["entry"] = llvm::json::Object{
      {"symbol", "h20_entry"},
      {"abi", options.chunk > 0
                  ? "argv of MLIR memref descriptors: a chunk's ids, its start and length (index "
                    "scalars), weights, caches, outputs"
                  : "argv of MLIR memref descriptors: inputs, weights, outputs"}};
  manifest["blobs"] = llvm::json::Array{llvm::json::Object{
      {"name", "model.so"}, {"kind", "shared_object"}, {"offset", int64_t(offset)},
      {"size", int64_t(so->size())}}};
  artifact.manifest = manifestText(std::move(manifest));
  return success();
}

} // namespace h20
