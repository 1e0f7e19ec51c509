//===- h20-opt.cpp - h20's compiler driver -------------------------------===//
//
// Two modes:
//  * `h20-opt model.onnx [--emit=onnx|attn] [-o out.mlir]` imports an ONNX
//    model (or reads .mlir) and runs the pipeline up to the requested level;
//  * anything else is plain MlirOptMain with h20's dialects and passes.
// Exit codes: 0 success, 1 internal error, 2 bad input.
//
//===----------------------------------------------------------------------===//
#include "h20/Import/Onnx/OnnxImporter.h"
#include "h20/InitAll.h"
#include "h20/Pipelines/Pipelines.h"
#include "h20/Support/AtomicFile.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static llvm::cl::opt<std::string> emitLevel(
    "emit",
    llvm::cl::desc("Compile to this level and print it: onnx (imported IR) "
                   "or attn (after canonicalisation, mask analysis and "
                   "raising). Implied as 'onnx' for .onnx/.onnxtext inputs."),
    llvm::cl::init(""));

namespace {
constexpr int kExitBadInput = 2;

bool isOnnxFile(llvm::StringRef name) {
  return name.ends_with(".onnx") || name.ends_with(".onnxtext");
}

/// Prints diagnostics as "h20-opt: error: <loc>: message" on stderr.
int compile(llvm::StringRef input, llvm::StringRef output,
            DialectRegistry &registry) {
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Messages name the ONNX node; a dump of the op would only repeat it.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, llvm::errs());

  OwningOpRef<ModuleOp> module;
  if (isOnnxFile(input)) {
    module = h20::importOnnxModel(input, ctx);
  } else {
    std::string message;
    auto file = openInputFile(input, &message);
    if (!file) {
      llvm::errs() << "h20-opt: error: " << message << "\n";
      return kExitBadInput;
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  }
  if (!module)
    return kExitBadInput;

  std::string level = emitLevel.empty() ? "onnx" : emitLevel.getValue();
  PassManager pm(&ctx);
  if (failed(h20::buildEmitPipeline(pm, level))) {
    llvm::errs() << "h20-opt: error: unknown --emit level '" << level
                 << "' (expected onnx or attn)\n";
    return kExitBadInput;
  }
  if (failed(pm.run(*module)))
    return kExitBadInput;

  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  os << "\n";
  std::string error;
  if (!h20::writeFileAtomically(output, text, error)) {
    llvm::errs() << "h20-opt: error: " << error << "\n";
    return kExitBadInput;
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  DialectRegistry registry;
  h20::registerAllDialects(registry);
  h20::registerAllPasses();
  auto [input, output] = registerAndParseCLIOptions(
      argc, argv, "h20 compiler driver and pass runner\n", registry);
  if (isOnnxFile(input) || !emitLevel.empty())
    return compile(input, output, registry);
  return asMainReturnCode(MlirOptMain(argc, argv, input, output, registry));
}
