//===- HostEvaluator.h - the evaluator behind buildHostProgram -*- C++ -*-===//
//
// Private to lib/Target/GPU. The evaluator walks the host function once
// and turns it into the step program: its core (arguments, integers,
// allocations, views, host arrays, kernel launches; HostProgram.cpp), one
// step emitter per library call (GEMM, attention, all-reduce, indexer,
// sparse attention, routed experts, FP8 quantisation and GEMM;
// LibraryCallSteps.cpp), and the arena
// plan of the temporaries (ArenaPlanner.h).
//
//===----------------------------------------------------------------------===//
#ifndef H20_TARGET_GPU_HOSTEVALUATOR_H
#define H20_TARGET_GPU_HOSTEVALUATOR_H

#include "HostProgram.h"

#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Target/TargetCommon.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <array>
#include <map>
#include <memory>
#include <optional>

namespace h20::gpu::detail {

using namespace mlir;

/// What a diagnostic says of `v`: its type and producer (an op's name and
/// location, or the argument number). Printing the value itself walks the
/// whole function for SSA names, which costs minutes on a 32-layer graph.
inline std::string describe(Value v) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << v.getType();
  if (auto arg = dyn_cast<BlockArgument>(v))
    os << " (argument " << arg.getArgNumber() << ")";
  else if (Operation *def = v.getDefiningOp())
    os << " (result of " << def->getName() << " at " << def->getLoc() << ")";
  return out;
}

inline constexpr llvm::StringLiteral kGemm = "h20_gemm", kAttention = "h20_attention",
                              kAllReduce = "h20_all_reduce",
                              kIndexer = "h20_indexer",
                              kSparseAttention = "h20_sparse_attention",
                              kRoutedExperts = "h20_routed_experts",
                              kFp8Quantize = "h20_fp8_quantize", kFp8Gemm = "h20_gemm_fp8";
inline constexpr int64_t kAlign = 256;

/// Set when Lin arithmetic overflowed int64; the evaluator turns it into
/// an error on the op being evaluated.
extern thread_local bool linOverflow;

inline int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  linOverflow |= __builtin_add_overflow(a, b, &r);
  return r;
}
inline int64_t checkedSub(int64_t a, int64_t b) {
  int64_t r;
  linOverflow |= __builtin_sub_overflow(a, b, &r);
  return r;
}
inline int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  linOverflow |= __builtin_mul_overflow(a, b, &r);
  return r;
}

/// c + p0 * P0 + n * N + q * Q + r * R + sum_k d_k * D_k (q = p0 / C, the
/// chunk's index; r the tensor-parallel rank, which only the library-call
/// emitters put in: no IR value evaluates to it; d_k the program's derived
/// symbols, floor divisions of the others, Evaluator::floorDiv), every
/// operation checked for int64 overflow.
struct Lin {
  static constexpr int kD = runtime::kMaxDerived;
  int64_t c = 0, p0 = 0, n = 0, q = 0, r = 0;
  std::array<int64_t, kD> d{};
  bool noDerived() const {
    return llvm::all_of(d, [](int64_t x) { return x == 0; });
  }
  bool isConst() const { return p0 == 0 && n == 0 && q == 0 && r == 0 && noDerived(); }
  bool operator==(const Lin &o) const {
    return c == o.c && p0 == o.p0 && n == o.n && q == o.q && r == o.r && d == o.d;
  }
  bool operator!=(const Lin &o) const { return !(*this == o); }
  Lin operator+(const Lin &o) const {
    Lin s{checkedAdd(c, o.c), checkedAdd(p0, o.p0), checkedAdd(n, o.n), checkedAdd(q, o.q),
          checkedAdd(r, o.r)};
    for (int k = 0; k < kD; ++k)
      s.d[k] = checkedAdd(d[k], o.d[k]);
    return s;
  }
  Lin operator-(const Lin &o) const { return *this + o.scaled(-1); }
  Lin scaled(int64_t k) const {
    Lin s{checkedMul(c, k), checkedMul(p0, k), checkedMul(n, k), checkedMul(q, k),
          checkedMul(r, k)};
    for (int j = 0; j < kD; ++j)
      s.d[j] = checkedMul(d[j], k);
    return s;
  }
  /// The derived symbol d_k.
  static Lin derived(int k) {
    Lin s;
    s.d[k] = 1;
    return s;
  }
  /// The program's form of the value.
  runtime::LinearExpr expr() const {
    runtime::LinearExpr e{c, p0, n, q, r};
    e.d = d;
    return e;
  }
};

/// An integer kernel argument (i64 or i32).
inline runtime::LaunchArg intArg(runtime::LaunchArg::Kind kind, Lin v) {
  runtime::LaunchArg a;
  a.kind = kind;
  a.value = v.expr();
  return a;
}

/// An f32 kernel argument.
inline runtime::LaunchArg f32Arg(double v) {
  runtime::LaunchArg a;
  a.kind = runtime::LaunchArg::F32;
  a.f32 = static_cast<float>(v);
  return a;
}

/// A float kernel argument of `t` (f32, f16 or bf16), rounded as the
/// runtime rounds it when it reads the program back.
inline runtime::LaunchArg floatArg(Type t, double v) {
  runtime::LaunchArg a = f32Arg(v);
  if (t.isF16()) {
    a.kind = runtime::LaunchArg::F16;
    a.half = runtime::floatToHalf(a.f32);
  } else if (t.isBF16()) {
    a.kind = runtime::LaunchArg::BF16;
    a.half = runtime::floatToBfloat16(a.f32);
  }
  return a;
}

/// A launch step of `kernel` in `module` with a 1-D block.
inline runtime::LaunchStep launchStep(int module, std::string kernel, Lin gridX, int64_t threads,
                               int64_t smem, std::vector<runtime::LaunchArg> args) {
  runtime::LaunchStep l;
  l.module = module;
  l.kernel = std::move(kernel);
  l.grid = {gridX.expr(), runtime::LinearExpr::constant(1), runtime::LinearExpr::constant(1)};
  l.block = {runtime::LinearExpr::constant(threads), runtime::LinearExpr::constant(1),
             runtime::LinearExpr::constant(1)};
  l.smem = smem;
  l.args = std::move(args);
  return l;
}

struct View {
  int buffer = -1;
  Lin offset;
  SmallVector<Lin> sizes, strides;
  Type element;
};

/// A library call's operand views (inputs, then inits).
using Views = SmallVector<View, 4>;

struct Buffer {
  std::string kind;  ///< input, output, weight, state, temp, const
  int64_t index = -1;
  int64_t bytes = 0;
  std::string dtype;
  int first = -1, last = -1;
  int64_t blobOffset = -1;
  int64_t arenaOffset = -1;
  bool host = false; ///< weight: in pinned host memory (h20-place-tables)
};

/// The kernels' element-type code (MoeKernel.h and the others): 0 f32, 1
/// f16, 2 bf16; -1 for any other type.
inline int kernelElementCode(Type t) { return t.isF32() ? 0 : t.isF16() ? 1 : t.isBF16() ? 2 : -1; }


class Evaluator {
public:
  Evaluator(func::FuncOp func, const ArgumentRoles &roles, const KernelModules &modules,
            HostProgram &program)
      : func(func), roles(roles), modules(modules), program(program) {}

  LogicalResult run();

private:
  FailureOr<Lin> integer(Value v, Operation *user) {
    auto it = ints.find(v);
    if (it != ints.end())
      return it->second;
    return user->emitError("GPU target: this host value is not a known integer (computed on "
                           "the device?): ")
           << describe(v);
  }
  FailureOr<Lin> fold(OpFoldResult r, Operation *user) {
    if (auto a = dyn_cast<Attribute>(r))
      return Lin{cast<IntegerAttr>(a).getInt()};
    return integer(cast<Value>(r), user);
  }
  /// The integer `key` of the function's h20.chunked (chunk, capacity), 0
  /// when absent.
  int64_t chunkedInt(StringRef key) const {
    auto info = func->getAttrOfType<DictionaryAttr>("h20.chunked");
    auto v = info ? info.getAs<IntegerAttr>(key) : IntegerAttr();
    return v ? v.getInt() : 0;
  }
  /// The largest value `v` takes over the chunks of a chunked prefill
  /// (p0 = q * C for q < capacity / C, from h20.chunked's chunk and
  /// capacity), when it depends on the chunk's position and not on its
  /// token count or the rank: a buffer sized by it holds every chunk's.
  /// Without derived symbols `v` must grow with the position (its last
  /// chunk's value); with them every chunk is evaluated (a count of whole
  /// groups is periodic in q). Nothing otherwise, or when it is negative.
  std::optional<int64_t> largestOverChunks(const Lin &v) const;
  /// floor(a / k) for k > 0 as a Lin: exact where k divides every
  /// coefficient (of a signed division, or of a value >= 0); linear in q
  /// where chunks hold whole groups of k (q * C + c over k with k dividing
  /// C and c >= 0); else a derived symbol of the program, for a >= 0 in
  /// every chunk (found or declared; floor of a derived symbol plus a
  /// constant folds: floor((floor(x / m) + c) / k) = floor((x + c m) /
  /// (m k))). Fails on `user` when `a` names the rank, may be negative,
  /// mixes derived symbols, exceeds the format's bounds, or the program
  /// has kMaxDerived already.
  FailureOr<Lin> floorDiv(const Lin &a, int64_t k, bool isUnsigned, Operation *user);
  /// True when `a` is >= 0 in every chunk (the symbols are): no negative
  /// coefficient, and only derived symbols of such values.
  bool nonNegative(const Lin &a) const;
  FailureOr<Lin> mul(Lin a, Lin b, Operation *user) {
    if (a.isConst())
      return b.scaled(a.c);
    if (b.isConst())
      return a.scaled(b.c);
    return user->emitError("GPU target: a product of two chunk-dependent values");
  }
  FailureOr<View> view(Value v, Operation *user) {
    auto it = views.find(v);
    if (auto host = hostArrays.find(v);
        it != views.end() && host != hostArrays.end() && hostWritten.count(host->second.get()))
      return user->emitError("GPU target: an integer array the host computed is used on the "
                             "device: ")
             << describe(v);
    if (it != views.end())
      return it->second;
    // Name the operand, not the value: a value without a buffer here may
    // be one whose producer is gone.
    for (OpOperand &o : user->getOpOperands())
      if (o.get() == v)
        return user->emitError("GPU target: internal: operand ")
               << o.getOperandNumber() << " of '" << user->getName() << "' has no buffer";
    return user->emitError("GPU target: internal: a value has no buffer");
  }
  int addBuffer(Buffer b) {
    // At least one alignment unit: a zero-element tensor still has an
    // address. Weights keep their exact size (the runtime checks it against
    // the weight's shape and allocates each one on its own, aligned).
    if (b.kind != "weight")
      b.bytes = std::max<int64_t>(kAlign, (b.bytes + kAlign - 1) / kAlign * kAlign);
    buffers.push_back(std::move(b));
    return static_cast<int>(buffers.size()) - 1;
  }
  void use(int buffer) {
    Buffer &b = buffers[buffer];
    if (b.first < 0)
      b.first = currentStep();
    b.last = currentStep();
  }
  int currentStep() const { return static_cast<int>(steps.size()); }
  /// A row-major view of `sizes` over `buffer`. At most one size may
  /// depend on the chunk (evalAlloc checks): the strides outside it are
  /// then linear in it.
  View identityView(int buffer, Type element, ArrayRef<Lin> sizes) {
    View v{buffer, Lin{}, SmallVector<Lin>(sizes), {}, element};
    v.strides.resize(sizes.size());
    Lin stride{1};
    for (size_t k = sizes.size(); k-- > 0;) {
      v.strides[k] = stride;
      stride = sizes[k].isConst() ? stride.scaled(sizes[k].c) : sizes[k].scaled(stride.c);
    }
    return v;
  }
  /// `v` as a memref kernel argument (a use of its buffer).
  runtime::LaunchArg memrefArg(const View &v) {
    use(v.buffer);
    runtime::LaunchArg a;
    a.kind = runtime::LaunchArg::MemRef;
    a.buffer = v.buffer;
    a.offset = v.offset.expr();
    for (const Lin &s : v.sizes)
      a.sizes.push_back(s.expr());
    for (const Lin &s : v.strides)
      a.strides.push_back(s.expr());
    return a;
  }
  /// A GEMM operand over `v` (a use of its buffer).
  runtime::GemmOperand gemmOperand(const View &v, Lin batchStride, Lin rowStride, Lin colStride) {
    use(v.buffer);
    return {v.buffer, v.offset.expr(), batchStride.expr(), rowStride.expr(), colStride.expr()};
  }

  LogicalResult bindArguments();
  LogicalResult evaluate(Operation *op);
  LogicalResult evalArith(Operation *op);
  LogicalResult evalAlloc(Operation *op, MemRefType t, ValueRange dynamic);
  LogicalResult evalGlobal(memref::GetGlobalOp op);
  LogicalResult evalLaunch(mlir::gpu::LaunchFuncOp op);
  /// The gathered op of a query-row split (attn::kSplitGatherAttr on
  /// `op`): a memset step zeroing its whole output `out` first, so that
  /// the all-reduce after it sums only each rank's rows. Nothing for an op
  /// that is not gathered; an error naming `what` when `out` is not
  /// contiguous.
  LogicalResult clearIfGathered(Operation *op, const View &out, StringRef what);
  LogicalResult evalGemm(linalg::GenericOp op);
  LogicalResult evalAllReduce(linalg::GenericOp op);
  LogicalResult evalAttention(linalg::GenericOp op);
  LogicalResult evalIndexer(linalg::GenericOp op);
  LogicalResult evalSparseAttention(linalg::GenericOp op);
  LogicalResult evalRoutedExperts(linalg::GenericOp op);
  LogicalResult evalFp8Quantize(linalg::GenericOp op);
  /// The launch that quantises x [rows, k] (element code dt) per 1 x 128
  /// block into xq (e4m3) and xs [ceil(k / 128), rows] f32
  /// (kernels/fp8_quant.cuh): FP8 linears' inputs and FP8 expert GEMMs'.
  void addFp8QuantizeStep(int dt, const View &x, const View &xq, const View &xs, Lin rows,
                          int64_t k);
  LogicalResult evalFp8Gemm(linalg::GenericOp op);
  /// The views of a library call's operands, inputs then inits.
  FailureOr<Views> operandViews(linalg::GenericOp op) {
    Views v;
    for (Value x : llvm::concat<Value>(op.getDpsInputs(), op.getDpsInits())) {
      auto vw = view(x, op);
      if (failed(vw))
        return failure();
      v.push_back(*vw);
    }
    return v;
  }
  void packArena();

  func::FuncOp func;
  const ArgumentRoles &roles;
  const KernelModules &modules;
  HostProgram &program;
  /// The derived symbols declared so far (HostProgram::derived).
  std::vector<runtime::DerivedSymbol> derived;
  DenseMap<Value, Lin> ints;
  DenseMap<Value, double> floats;
  DenseMap<Value, View> views;
  std::vector<Buffer> buffers;
  std::map<std::string, int> globals;
  std::vector<runtime::GpuStep> steps;
  /// Each attention step's index and the KV-cache layer it reads (-1: K is
  /// not a view of the cache), for the program's layer list.
  std::vector<std::pair<int64_t, int64_t>> attentionLayers;
  /// Small integer memrefs that only the host touches (shapes for
  /// memref.reshape, scalars read back): their elements, as known.
  DenseMap<Value, std::shared_ptr<std::vector<std::optional<Lin>>>> hostArrays;
  /// Subviews of host arrays: element offset and strides into the array
  /// (flat row-major of the allocation); memrefs not listed are the array.
  DenseMap<Value, std::pair<int64_t, SmallVector<int64_t>>> hostLayouts;
  /// The host arrays a host store wrote (their device copies are stale).
  llvm::SmallPtrSet<const void *, 8> hostWritten;

  LogicalResult evalHostAccess(Operation *op);
  FailureOr<int64_t> flatIndex(Value memref, ValueRange indices, Operation *op);
  /// The elements of a static rank-1 host array (or subview of one), in order.
  FailureOr<std::vector<std::optional<Lin>>> hostElements(Value memref, Operation *op);
};

} // namespace h20::gpu::detail

#endif // H20_TARGET_GPU_HOSTEVALUATOR_H
