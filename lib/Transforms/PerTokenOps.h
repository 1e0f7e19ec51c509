//===- PerTokenOps.h - which ops a chunked prefill may split -*- C++ -*-===//
#ifndef H20_LIB_TRANSFORMS_PERTOKENOPS_H
#define H20_LIB_TRANSFORMS_PERTOKENOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace h20 {

/// Whether `op` is an ONNX elementwise op (unary, binary or variadic with
/// broadcasting, Where, Clip, Cast): result element i reads element i of
/// every operand, after broadcasting.
bool isOnnxElementwise(mlir::Operation *op);

/// The values of a constant integer tensor (onnx.Constant, any integer
/// type, sign-extended), or nothing when `v` is not one.
std::optional<llvm::SmallVector<int64_t>> constantInts(mlir::Value v);

/// Decides, op by op, whether running a decoder graph C tokens at a time
/// gives the same rows as running the whole prompt (chunked prefill).
///
/// The graph takes token ids [1, S] with S dynamic, so S (and values made
/// from it) is the only dynamic size: every dynamic dim of a value is a
/// token axis, and a static dim never carries tokens. An op acts per token
/// when it reads along static axes only (a reduction, Softmax, Concat,
/// Split, Slice, Gather, CumSum or TopK over the hidden or head axes), is
/// elementwise on values with at most one token axis, contracts a static
/// axis against an operand that does not depend on the prompt (MatMul by a
/// weight, however the weight is transposed or cast), multiplies two
/// activations batched over the token axis with static matrices (an [S, m,
/// k] x [S, k, n] mix), reshapes without putting two tokens in one row,
/// is a routed-experts call (routing per token), or is one of the ops
/// chunked prefill rewrites (attention through the KV cache, DeepSeek-
/// V4.1's window-only sparse attention through its latent cache, RoPE
/// tables).
///
/// Rows may also be groups of k consecutive tokens (DeepSeek-V4.1's
/// compressors): the Slice that rounds the token count down to whole
/// groups (x[0 : (S / k) * k]) and a Reshape that puts k tokens in one row
/// ([S, n] -> [S / k, k, n]) are per token when every chunk holds whole
/// groups, i.e. when the chunk size is a multiple of k; so are the
/// attention and indexer ops over compressed entries of `ratio` tokens,
/// whose entries chunked prefill carries in caches.
///
/// Token positions (Range(0, S) over the prompt's tokens, then elementwise
/// ops with constants: a position expression) restart at 0 in every chunk,
/// so they may not meet activations, except where chunked prefill
/// evaluates them at the chunk's global positions p0 + i: in an elementwise
/// op (DeepSeek-V4.1's Engram pads the n-gram of the first tokens with
/// Where(pos >= k, ...)), and as the indices of a Gather of earlier tokens'
/// rows (0 <= index <= pos: the token k positions back), whose rows
/// chunked prefill keeps in a token-history cache.
/// What cannot be shown per token is refused, with the reason.
class PerTokenOps {
public:
  /// `ids` is the graph's token-id argument; `chunk` the chunk size (0:
  /// not known, and then no op that groups tokens is per token).
  /// `carryGroups`: chunked prefill carries a compressor's partial last
  /// group into the next chunk (ChunkedPrefill's carry-partial-groups), so
  /// rows of groups need no chunk size that is a multiple of the group;
  /// a grouping Reshape must then read rows that a whole-groups Slice
  /// aligned (groupsSlice), through per-row ops.
  PerTokenOps(mlir::func::FuncOp func, mlir::Value ids, int64_t chunk = 0,
              bool carryGroups = false);

  /// k when `op` is a compressor's Slice to whole groups of k tokens,
  /// x[0 : (n / k) * k] along x's token axis (n its length as Shape reads
  /// it), else nothing.
  static std::optional<int64_t> groupsSlice(mlir::Operation *op);

  /// Why `op` cannot be chunked, or nothing when it acts per token.
  std::optional<std::string> whyNot(mlir::Operation *op) const;

  /// Whether `v` is computed from the token ids (data or shape).
  bool dependsOnPrompt(mlir::Value v) const { return fromPrompt.contains(v); }

  /// Tokens per row along `v`'s token axis: 1 for token rows, k for rows of
  /// groups of k tokens (after a grouping Reshape), 0 when not known (not
  /// a prompt activation).
  int64_t tokensPerRow(mlir::Value v) const { return rowTokens.lookup(v); }

  /// Whether `v` is a position expression (above): a function of the
  /// token positions Range(0, S, 1) alone, elementwise.
  bool isPositionExpr(mlir::Value v) const;

  /// Whether `op` is a Gather of earlier tokens' rows: data with the token
  /// axis first, indices a position expression with 0 <= index <= pos.
  bool isLookbackGather(mlir::Operation *op) const;

  /// The operands of `op` that are position expressions meeting
  /// activations (a lookback Gather's indices; an elementwise op's
  /// position operands beside an activation): what a chunk must evaluate
  /// at its global positions. Empty for every other op.
  llvm::SmallVector<unsigned> positionOperands(mlir::Operation *op) const;

private:
  std::optional<std::string> whyNotAxisOp(mlir::Operation *op) const;
  std::optional<std::string> whyNotMatMul(mlir::Operation *op) const;
  std::optional<std::string> whyNotReshape(mlir::Operation *op) const;
  std::optional<std::string> whyNotSizes(mlir::Operation *op) const;
  std::optional<std::string> whyNotCompressed(mlir::Operation *op) const;
  int64_t rowsOf(mlir::Operation *op) const;
  std::optional<int64_t> groupedRows(mlir::Operation *op) const;
  /// Why rows of `k` tokens (`what`) do not chunk: nothing when the chunk
  /// size is a multiple of k.
  std::optional<std::string> whyNotGroups(int64_t k, llvm::StringRef what) const;

  /// Whether `v`'s rows start at a multiple of k tokens: v comes from a
  /// Slice to whole groups of a multiple of k through ops that map one
  /// activation row to one row (a MatMul by a weight, elementwise ops).
  bool alignedToGroups(mlir::Value v, int64_t k) const;

  mlir::func::FuncOp func;
  mlir::Value ids;
  int64_t chunk;
  bool carryGroups;
  mutable llvm::DenseMap<mlir::Value, bool> positionExprs;
  /// tokensPerRow's values; -1 where an op mixes rows of different sizes.
  llvm::DenseMap<mlir::Value, int64_t> rowTokens;
  llvm::DenseSet<mlir::Value> fromPrompt;
  /// Values whose data are sizes of prompt values (Shape, Range, ...).
  llvm::DenseSet<mlir::Value> fromSizes;
};

} // namespace h20

#endif // H20_LIB_TRANSFORMS_PERTOKENOPS_H
