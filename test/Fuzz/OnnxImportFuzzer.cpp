//===- OnnxImportFuzzer.cpp - libFuzzer target: the ONNX importer --------===//
//
// Feeds raw bytes to the importer as a binary ONNX model (what `h20-opt
// model.onnx` reads) in a fresh MLIRContext set up as h20-opt sets it up
// (diagnostics collected by a handler, no op dumps). The contract checked:
// a failed import has emitted at least one error diagnostic; a successful one
// yields a module that verifies and prints. Anything else -- a crash, an
// abort, a sanitizer report, a failure without a diagnostic -- is a finding.
//
// External data is looked up beside a model path in a scratch directory that
// holds data.bin (16 MiB, sparse: the seeds' weights point into it) and w.bin
// (64 bytes), so inputs reach both the present-and-long-enough and the
// missing/short paths. The importer never reads external bytes.
//
//===----------------------------------------------------------------------===//
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"
#include "h20/Import/Onnx/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {
std::string modelPath, scratchDir;

void makeFile(const std::string &path, off_t bytes) {
  if (truncate(path.c_str(), 0) != 0)
    if (FILE *f = std::fopen(path.c_str(), "wb"))
      std::fclose(f);
  if (truncate(path.c_str(), bytes) != 0)
    std::abort();
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char dir[] = "/tmp/h20-fuzz-onnx-XXXXXX";
  if (!mkdtemp(dir))
    std::abort();
  makeFile(std::string(dir) + "/data.bin", off_t(16) << 20);
  makeFile(std::string(dir) + "/w.bin", 64);
  modelPath = std::string(dir) + "/model.onnx";
  scratchDir = dir;
  std::atexit([] {
    unlink((scratchDir + "/data.bin").c_str());
    unlink((scratchDir + "/w.bin").c_str());
    rmdir(scratchDir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  registry.insert<h20::onnx::OnnxDialect, mlir::func::FuncDialect>();
  // One thread: the importer does not use the pool, and a pool per input
  // would dominate the time.
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.printOpOnDiagnostic(false);
  bool sawError = false;
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      sawError = true;
    llvm::raw_string_ostream os(messages);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = h20::importOnnxModelFromBuffer(bytes, modelPath, ctx);
  if (!module) {
    if (!sawError) {
      std::fprintf(stderr, "import failed without an error diagnostic\n");
      std::abort();
    }
    return 0;
  }
  if (mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "imported module does not verify:\n%s", messages.c_str());
    std::abort();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return 0;
}
