//===- TargetCommon.h - what every target's artifact describes --*- C++ -*-===//
//
// The parts of compiling an artifact that do not depend on the target: the
// manifest's description of inputs, outputs and weights, and the
// destination-passing form of the entry function both targets bufferize.
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_TARGETCOMMON_H
#define H20_TARGET_TARGETCOMMON_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace h20 {

/// Told by a target after each of its stages, so a driver can show progress
/// (h20-opt --verbose, or a terminal): the stage's name ("GPU pipeline",
/// "LLVM -O3", "machine code", ...), its wall-clock time in seconds, and a
/// detail for the user, possibly empty ("412 steps, 83 buffers, arena 1.8
/// MiB"). May be empty.
using StageReport =
    std::function<void(llvm::StringRef stage, double seconds, llvm::StringRef detail)>;

/// Wall-clock seconds per stage, for StageReport: lap() returns the time
/// since construction or the previous lap().
struct StageClock {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double lap() {
    auto t = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(t - t0).count();
    t0 = t;
    return s;
  }
};

/// The manifest's dtype name of an element type ("float32", "bfloat16",
/// "int64", ...; "unsupported" for others).
std::string dtypeName(mlir::Type t);

/// Bytes per element of `t` in device or host memory: 8 for index (64-bit
/// on every h20 target), a byte for types narrower than 8 bits (i1, FP4
/// codes are stored a byte each unless packed), else bit width / 8.
int64_t elementBytes(mlir::Type t);

/// The vocabulary size: rows of the embedding table that a Gather on axis 0
/// reads with argument 0 (the token ids); none when there is no such Gather.
std::optional<int64_t> vocabSize(mlir::func::FuncOp func);

/// The manifest's "inputs" and "outputs": name, dtype, shape (-1 dynamic)
/// and, for each dynamic output dim, the input dim it is proven equal to
/// (SymbolicEvaluator), so h20-run can size outputs before running. Fails,
/// with an error on `func`, when an output dim is not provably an input dim.
mlir::FailureOr<std::pair<llvm::json::Array, llvm::json::Array>>
describeInterface(mlir::func::FuncOp func);

/// The manifest fields every target writes first: format and version,
/// `target`, `logits` (all/last), model_dir, vocab_size, max_positions (when
/// > 0) and the inputs/outputs of describeInterface. Fails like
/// describeInterface.
mlir::FailureOr<llvm::json::Object> beginManifest(mlir::ModuleOp module, mlir::func::FuncOp func,
                                                  llvm::StringRef target, bool logitsLast,
                                                  int64_t maxPositions);

/// The manifest as the artifact stores it (JSON, two-space indent).
std::string manifestText(llvm::json::Object manifest);

/// The manifest's "weights" from the `h20.weights` attribute that
/// h20-lower-to-linalg put on the function named `entry`: name, dtype (as
/// stored in the file), device_dtype (as the code uses it; differs after
/// h20-compute-type), shape, file, byte offset/length, and the file's size
/// at compile time.
llvm::json::Array describeWeights(mlir::ModuleOp module, llvm::StringRef entry);

/// Applies MLIR's pass-manager command-line options (--mlir-timing,
/// --mlir-print-ir-after-all, ...) to a pass manager a target builds
/// itself, so the developer options of h20-opt reach every pipeline.
/// Without registered options (a library user) it changes nothing. Fails
/// (with an error emitted) on an invalid option combination; h20-opt checks
/// that on its own pass manager before any target builds one.
mlir::LogicalResult applyDeveloperOptions(mlir::PassManager &pm);

} // namespace h20

#endif // H20_TARGET_TARGETCOMMON_H
