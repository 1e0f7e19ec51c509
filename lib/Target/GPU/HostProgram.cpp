//===- HostProgram.cpp - the host side of a GPU function as a step list --===//
#include "HostProgram.h"

#include "h20/Dialect/H20/IR/H20Dialect.h"
#include "h20/Target/TargetCommon.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <map>

using namespace mlir;

namespace h20::gpu {
namespace {

/// What a diagnostic says of `v`: its type and producer (an op's name and
/// location, or the argument number). Printing the value itself walks the
/// whole function for SSA names, which costs minutes on a 32-layer graph.
std::string describe(Value v) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << v.getType();
  if (auto arg = dyn_cast<BlockArgument>(v))
    os << " (argument " << arg.getArgNumber() << ")";
  else if (Operation *def = v.getDefiningOp())
    os << " (result of " << def->getName() << " at " << def->getLoc() << ")";
  return out;
}

constexpr llvm::StringLiteral kGemm = "h20_gemm", kAttention = "h20_attention",
                              kAllReduce = "h20_all_reduce",
                              kIndexer = "h20_indexer",
                              kSparseAttention = "h20_sparse_attention",
                              kRoutedExperts = "h20_routed_experts";
constexpr int64_t kAlign = 256;

/// Set when Lin arithmetic overflowed int64; the evaluator turns it into
/// an error on the op being evaluated.
thread_local bool linOverflow = false;

int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  linOverflow |= __builtin_add_overflow(a, b, &r);
  return r;
}
int64_t checkedSub(int64_t a, int64_t b) {
  int64_t r;
  linOverflow |= __builtin_sub_overflow(a, b, &r);
  return r;
}
int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  linOverflow |= __builtin_mul_overflow(a, b, &r);
  return r;
}

/// c + p0 * P0 + n * N, every operation checked for int64 overflow.
struct Lin {
  int64_t c = 0, p0 = 0, n = 0;
  bool isConst() const { return p0 == 0 && n == 0; }
  Lin operator+(const Lin &o) const {
    return {checkedAdd(c, o.c), checkedAdd(p0, o.p0), checkedAdd(n, o.n)};
  }
  Lin operator-(const Lin &o) const {
    return {checkedSub(c, o.c), checkedSub(p0, o.p0), checkedSub(n, o.n)};
  }
  Lin scaled(int64_t k) const { return {checkedMul(c, k), checkedMul(p0, k), checkedMul(n, k)}; }
  /// The program's form of the value.
  runtime::LinearExpr expr() const { return {c, p0, n}; }
};

/// An integer kernel argument (i64 or i32).
runtime::LaunchArg intArg(runtime::LaunchArg::Kind kind, Lin v) {
  runtime::LaunchArg a;
  a.kind = kind;
  a.value = v.expr();
  return a;
}

/// A float kernel argument of `t` (f32, f16 or bf16), rounded as the
/// runtime rounds it when it reads the program back.
runtime::LaunchArg floatArg(Type t, double v) {
  runtime::LaunchArg a;
  a.kind = t.isF16() ? runtime::LaunchArg::F16 : t.isBF16() ? runtime::LaunchArg::BF16
                                                          : runtime::LaunchArg::F32;
  a.f32 = static_cast<float>(v);
  if (t.isF16())
    a.half = runtime::floatToHalf(a.f32);
  else if (t.isBF16())
    a.half = runtime::floatToBfloat16(a.f32);
  return a;
}

runtime::LaunchArg f32Arg(double v) {
  runtime::LaunchArg a;
  a.kind = runtime::LaunchArg::F32;
  a.f32 = static_cast<float>(v);
  return a;
}

/// A launch step of `kernel` in `module` with a 1-D block.
runtime::LaunchStep launchStep(int module, std::string kernel, Lin gridX, int64_t threads,
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

struct Buffer {
  std::string kind;  ///< input, output, weight, state, temp, const
  int64_t index = -1;
  int64_t bytes = 0;
  std::string dtype;
  int first = -1, last = -1;
  int64_t blobOffset = -1;
  int64_t arenaOffset = -1;
};

int64_t elementBytes(Type t) {
  if (t.isIndex())
    return 8;
  unsigned bits = t.getIntOrFloatBitWidth();
  return bits < 8 ? 1 : bits / 8;
}


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
  /// A row-major view of all of `buffer`.
  View identityView(int buffer, Type element, ArrayRef<Lin> sizes) {
    View v{buffer, Lin{}, SmallVector<Lin>(sizes), {}, element};
    v.strides.resize(sizes.size());
    Lin stride{1};
    for (size_t k = sizes.size(); k-- > 0;) {
      v.strides[k] = stride;
      stride = stride.scaled(sizes[k].c);
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
  LogicalResult evalGemm(linalg::GenericOp op);
  LogicalResult evalAllReduce(linalg::GenericOp op);
  LogicalResult evalAttention(linalg::GenericOp op);
  LogicalResult evalIndexer(linalg::GenericOp op);
  LogicalResult evalSparseAttention(linalg::GenericOp op);
  LogicalResult evalRoutedExperts(linalg::GenericOp op);
  /// The views of a library call's operands, inputs then inits.
  FailureOr<SmallVector<View>> operandViews(linalg::GenericOp op) {
    SmallVector<View> v;
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
  DenseMap<Value, Lin> ints;
  DenseMap<Value, double> floats;
  DenseMap<Value, View> views;
  std::vector<Buffer> buffers;
  std::map<std::string, int> globals;
  std::vector<runtime::GpuStep> steps;
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

LogicalResult Evaluator::bindArguments() {
  unsigned i = 0;
  auto memrefArg = [&](unsigned a) { return dyn_cast<MemRefType>(func.getArgument(a).getType()); };
  auto staticSizes = [&](MemRefType t, ArrayRef<int64_t> dims) {
    SmallVector<Lin> sizes;
    for (int64_t k = 0; k < t.getRank(); ++k)
      sizes.push_back(Lin{t.isDynamicDim(k) ? dims[k] : t.getDimSize(k)});
    return sizes;
  };
  auto bytesOf = [&](MemRefType t, ArrayRef<Lin> sizes) {
    int64_t n = elementBytes(t.getElementType());
    for (const Lin &s : sizes)
      n = checkedMul(n, s.c);
    return n;
  };
  auto bind = [&](unsigned a, StringRef kind, int64_t index, ArrayRef<int64_t> dims,
                  StringRef dtype = "") -> LogicalResult {
    MemRefType t = memrefArg(a);
    if (!t || !t.getLayout().isIdentity())
      return func.emitError("GPU target: argument ") << a << " is not an identity memref";
    SmallVector<int64_t> d(dims.begin(), dims.end());
    d.resize(t.getRank(), -1);
    for (int64_t k = 0; k < t.getRank(); ++k)
      if (t.isDynamicDim(k) && d[k] < 0)
        return func.emitError("GPU target: argument ") << a << " dim " << k
                                                        << " has no static size";
    SmallVector<Lin> sizes = staticSizes(t, d);
    Buffer b{kind.str(), index, bytesOf(t, sizes),
             dtype.empty() ? dtypeName(t.getElementType()) : dtype.str()};
    views[func.getArgument(a)] = identityView(addBuffer(b), t.getElementType(), sizes);
    return success();
  };
  for (unsigned k = 0; k < roles.numInputs; ++k, ++i)
    if (failed(bind(i, "input", k, roles.inputDims[k])))
      return failure();
  if (roles.chunkStartArg >= 0)
    ints[func.getArgument(i++)] = Lin{0, 1, 0};
  if (roles.chunkTokensArg >= 0)
    ints[func.getArgument(i++)] = Lin{0, 0, 1};
  for (unsigned k = 0; k < roles.numWeights; ++k, ++i)
    if (failed(bind(i, "weight", k, {}, roles.weightDtypes[k])))
      return failure();
  for (unsigned k = 0; k < roles.numState; ++k, ++i)
    if (failed(bind(i, "state", k, {})))
      return failure();
  for (unsigned k = 0; k < roles.numOutputs; ++k, ++i) {
    // Outputs have the inputs' dynamic sizes (the chunk) where dynamic.
    MemRefType t = memrefArg(i);
    SmallVector<int64_t> dims(t ? t.getRank() : 0, -1);
    if (t)
      for (int64_t d = 0; d < t.getRank(); ++d)
        if (t.isDynamicDim(d) && !roles.inputDims.empty())
          dims[d] = roles.inputDims[0].size() > 1 ? roles.inputDims[0][1] : -1;
    if (failed(bind(i, "output", k, dims)))
      return failure();
  }
  if (i != func.getNumArguments())
    return func.emitError("GPU target: internal: ")
           << func.getNumArguments() << " arguments, " << i << " described";
  return success();
}

LogicalResult Evaluator::evalArith(Operation *op) {
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      ints[c.getResult()] = Lin{i.getInt()};
    else if (auto f = dyn_cast<FloatAttr>(c.getValue()))
      floats[c.getResult()] = f.getValueAsDouble();
    else
      return op->emitError("GPU target: a non-scalar constant on the host");
    return success();
  }
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp,
          arith::TruncIOp>(op)) {
    auto a = integer(op->getOperand(0), op);
    if (failed(a))
      return failure();
    ints[op->getResult(0)] = *a;
    return success();
  }
  SmallVector<Lin> args;
  for (Value v : op->getOperands()) {
    auto a = integer(v, op);
    if (failed(a))
      return failure();
    args.push_back(*a);
  }
  Value r = op->getResult(0);
  if (isa<arith::AddIOp>(op)) {
    ints[r] = args[0] + args[1];
    return success();
  }
  if (isa<arith::SubIOp>(op)) {
    ints[r] = args[0] - args[1];
    return success();
  }
  if (isa<arith::MulIOp>(op)) {
    auto m = mul(args[0], args[1], op);
    if (failed(m))
      return failure();
    ints[r] = *m;
    return success();
  }
  for (const Lin &a : args)
    if (!a.isConst())
      return op->emitError("GPU target: a non-linear function of the chunk position");
  int64_t a = args[0].c, b = args.size() > 1 ? args[1].c : 0;
  auto nonzero = [&]() -> LogicalResult {
    if (b == -1 && a == std::numeric_limits<int64_t>::min())
      return op->emitError("GPU target: a division overflows 64 bits");
    return b == 0 ? op->emitError("GPU target: division by zero on the host") : success();
  };
  std::optional<int64_t> v =
      llvm::TypeSwitch<Operation *, std::optional<int64_t>>(op)
          .Case([&](arith::DivSIOp) { return failed(nonzero()) ? std::nullopt : std::optional(a / b); })
          .Case([&](arith::DivUIOp) {
            return failed(nonzero()) ? std::nullopt
                                     : std::optional(int64_t(uint64_t(a) / uint64_t(b)));
          })
          .Case([&](arith::RemSIOp) { return failed(nonzero()) ? std::nullopt : std::optional(a % b); })
          .Case([&](arith::CeilDivSIOp) {
            return failed(nonzero()) ? std::nullopt
                                     : std::optional((a + b - (b > 0 ? 1 : -1)) / b);
          })
          .Case([&](arith::FloorDivSIOp) {
            if (failed(nonzero()))
              return std::optional<int64_t>();
            int64_t q = a / b;
            return std::optional((a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);
          })
          .Case([&](arith::MinSIOp) { return std::optional(std::min(a, b)); })
          .Case([&](arith::MaxSIOp) { return std::optional(std::max(a, b)); })
          .Case([&](arith::MinUIOp) { return std::optional(int64_t(std::min(uint64_t(a), uint64_t(b)))); })
          .Case([&](arith::MaxUIOp) { return std::optional(int64_t(std::max(uint64_t(a), uint64_t(b)))); })
          .Case([&](arith::RemUIOp) {
            return failed(nonzero()) ? std::nullopt
                                     : std::optional(int64_t(uint64_t(a) % uint64_t(b)));
          })
          .Case([&](arith::AndIOp) { return std::optional(a & b); })
          .Case([&](arith::OrIOp) { return std::optional(a | b); })
          .Case([&](arith::XOrIOp) { return std::optional(a ^ b); })
          .Case([&](arith::CmpIOp c) {
            bool t = false;
            switch (c.getPredicate()) {
            case arith::CmpIPredicate::eq: t = a == b; break;
            case arith::CmpIPredicate::ne: t = a != b; break;
            case arith::CmpIPredicate::slt: t = a < b; break;
            case arith::CmpIPredicate::sle: t = a <= b; break;
            case arith::CmpIPredicate::sgt: t = a > b; break;
            case arith::CmpIPredicate::sge: t = a >= b; break;
            case arith::CmpIPredicate::ult: t = uint64_t(a) < uint64_t(b); break;
            case arith::CmpIPredicate::ule: t = uint64_t(a) <= uint64_t(b); break;
            case arith::CmpIPredicate::ugt: t = uint64_t(a) > uint64_t(b); break;
            case arith::CmpIPredicate::uge: t = uint64_t(a) >= uint64_t(b); break;
            }
            return std::optional<int64_t>(t);
          })
          .Case([&](arith::SelectOp) { return std::optional(a ? b : args[2].c); })
          .Default([](Operation *) { return std::nullopt; });
  if (!v)
    return op->emitError("GPU target: host arithmetic '")
           << op->getName() << "' is not supported";
  ints[r] = Lin{*v};
  return success();
}

LogicalResult Evaluator::evalAlloc(Operation *op, MemRefType t, ValueRange dynamic) {
  if (t.hasStaticShape() && t.getNumElements() <= 16 &&
      (t.getElementType().isIndex() || t.getElementType().isInteger())) {
    // Also a device buffer: a kernel may fill it (an integer Range); the
    // host then never knows its elements, and view() refuses the device
    // use of one the host wrote.
    hostArrays[op->getResult(0)] =
        std::make_shared<std::vector<std::optional<Lin>>>(t.getNumElements());
  }
  if (!t.getLayout().isIdentity())
    return op->emitError("GPU target: allocation with a layout");
  SmallVector<Lin> sizes;
  unsigned d = 0;
  int64_t bytes = elementBytes(t.getElementType());
  for (int64_t k = 0; k < t.getRank(); ++k) {
    Lin s{t.getDimSize(k)};
    if (t.isDynamicDim(k)) {
      auto v = integer(dynamic[d++], op);
      if (failed(v))
        return failure();
      if (!v->isConst())
        return op->emitError("GPU target: an allocation whose size depends on the chunk "
                             "position");
      s = *v;
    }
    sizes.push_back(s);
    bytes = checkedMul(bytes, s.c);
  }
  Buffer b{"temp", -1, bytes, dtypeName(t.getElementType())};
  views[op->getResult(0)] = identityView(addBuffer(b), t.getElementType(), sizes);
  return success();
}

FailureOr<std::vector<std::optional<Lin>>> Evaluator::hostElements(Value memref, Operation *op) {
  auto it = hostArrays.find(memref);
  auto t = dyn_cast<MemRefType>(memref.getType());
  if (it == hostArrays.end() || !t || t.getRank() != 1 || t.isDynamicDim(0))
    return failure();
  std::vector<std::optional<Lin>> out;
  for (int64_t k = 0; k < t.getDimSize(0); ++k) {
    int64_t at = k;
    if (auto layout = hostLayouts.find(memref); layout != hostLayouts.end())
      at = layout->second.first + k * layout->second.second[0];
    if (at < 0 || at >= static_cast<int64_t>(it->second->size()))
      return failure();
    out.push_back((*it->second)[at]);
  }
  return out;
}

FailureOr<int64_t> Evaluator::flatIndex(Value memref, ValueRange indices, Operation *op) {
  auto t = cast<MemRefType>(memref.getType());
  // A subview of a host array: its offset and strides into the array;
  // otherwise the array itself, row-major (host arrays have static shapes).
  int64_t flat = 0;
  SmallVector<int64_t> strides(t.getRank(), 1);
  if (auto layout = hostLayouts.find(memref); layout != hostLayouts.end()) {
    flat = layout->second.first;
    strides.assign(layout->second.second.begin(), layout->second.second.end());
  } else {
    for (int64_t k = t.getRank() - 1; k > 0; --k)
      strides[k - 1] = strides[k] * t.getDimSize(k);
  }
  for (auto [k, v] : llvm::enumerate(indices)) {
    auto i = integer(v, op);
    if (failed(i))
      return failure();
    if (!i->isConst())
      return op->emitError("GPU target: a host index that depends on the chunk position");
    if (i->c < 0 || (!t.isDynamicDim(k) && i->c >= t.getDimSize(k)))
      return op->emitError("GPU target: host index ") << i->c << " out of bounds";
    flat += i->c * strides[k];
  }
  if (flat < 0 || flat >= static_cast<int64_t>(hostArrays.lookup(memref)->size()))
    return op->emitError("GPU target: host index out of bounds of its array");
  return flat;
}

LogicalResult Evaluator::evalHostAccess(Operation *op) {
  if (auto st = dyn_cast<memref::StoreOp>(op)) {
    auto it = hostArrays.find(st.getMemRef());
    if (it == hostArrays.end())
      return op->emitError("GPU target: a host store into device memory");
    auto v = integer(st.getValueToStore(), op);
    auto i = flatIndex(st.getMemRef(), st.getIndices(), op);
    if (failed(v) || failed(i))
      return failure();
    (*it->second)[*i] = *v;
    hostWritten.insert(it->second.get());
    return success();
  }
  if (auto ld = dyn_cast<memref::LoadOp>(op)) {
    auto it = hostArrays.find(ld.getMemRef());
    if (it == hostArrays.end())
      return op->emitError("GPU target: a host load from device memory (a value the graph "
                           "computes on the device is needed on the host)");
    auto i = flatIndex(ld.getMemRef(), ld.getIndices(), op);
    if (failed(i))
      return failure();
    if (!(*it->second)[*i])
      return op->emitError("GPU target: a host load of an element never stored");
    ints[ld.getResult()] = *(*it->second)[*i];
    return success();
  }
  auto r = cast<memref::ReshapeOp>(op);
  // Copied out before inserting: operator[] may rehash the map.
  std::shared_ptr<std::vector<std::optional<Lin>>> srcArray;
  if (auto src = hostArrays.find(r.getSource()); src != hostArrays.end())
    srcArray = src->second;
  if (srcArray)
    hostArrays[r.getResult()] = srcArray;
  bool hostOnly = srcArray && hostWritten.count(srcArray.get());
  if (!views.count(r.getSource()) || hostOnly) {
    if (srcArray)
      return success();
    return op->emitError("GPU target: unknown buffer ") << r.getSource();
  }
  auto v = view(r.getSource(), op);
  auto shapeElems = hostElements(r.getShape(), op);
  if (failed(shapeElems) || failed(v))
    return op->emitError("GPU target: memref.reshape with a shape not known on the host");
  View out{v->buffer, v->offset, {}, {}, v->element};
  for (const std::optional<Lin> &s : *shapeElems) {
    if (!s)
      return op->emitError("GPU target: memref.reshape with an unset shape element");
    out.sizes.push_back(*s);
  }
  // The source is contiguous (bufferization gives reshape an identity
  // layout), so the result is too.
  out.strides.resize(out.sizes.size());
  Lin stride{1};
  for (size_t k = out.sizes.size(); k-- > 0;) {
    out.strides[k] = stride;
    auto next = mul(stride, out.sizes[k], op);
    if (failed(next))
      return failure();
    stride = *next;
  }
  views[r.getResult()] = out;
  return success();
}

LogicalResult Evaluator::evalGlobal(memref::GetGlobalOp op) {
  auto module = op->getParentOfType<ModuleOp>();
  auto global = module.lookupSymbol<memref::GlobalOp>(op.getNameAttr());
  if (!global || !global.getInitialValue())
    return op->emitError("GPU target: global without a value");
  auto data = dyn_cast<DenseElementsAttr>(*global.getInitialValue());
  if (!data)
    return op->emitError("GPU target: global without dense data");
  MemRefType t = op.getType();
  std::string key = op.getName().str();
  int id;
  auto it = globals.find(key);
  if (it != globals.end()) {
    id = it->second;
  } else {
    std::string bytes;
    int64_t eb = elementBytes(t.getElementType());
    int64_t count = t.getNumElements();
    if (t.getElementType().isInteger(1)) {
      for (bool v : data.getValues<bool>())
        bytes.push_back(v ? 1 : 0);
      if (data.isSplat())
        bytes.assign(count, bytes.empty() ? 0 : bytes[0]);
    } else {
      ArrayRef<char> raw = data.getRawData();
      if (data.isSplat()) {
        for (int64_t k = 0; k < count; ++k)
          bytes.append(raw.data(), eb);
      } else {
        bytes.assign(raw.data(), raw.size());
      }
    }
    while (program.constBlob.size() % kAlign)
      program.constBlob.push_back(0);
    Buffer b{"const", -1, static_cast<int64_t>(bytes.size()), dtypeName(t.getElementType())};
    b.blobOffset = static_cast<int64_t>(program.constBlob.size());
    program.constBlob += bytes;
    id = addBuffer(b);
    // The buffer is rounded up to whole alignment units: so is its blob
    // range (zero padding), which the runtime checks against the blob.
    program.constBlob.resize(b.blobOffset + buffers[id].bytes, '\0');
    globals[key] = id;
  }
  SmallVector<Lin> sizes;
  for (int64_t s : t.getShape())
    sizes.push_back(Lin{s});
  views[op.getResult()] = identityView(id, t.getElementType(), sizes);
  // Small integer constants may also serve host code (reshape shapes).
  if (t.getNumElements() <= 16 && (t.getElementType().isIndex() || t.getElementType().isInteger())) {
    auto host = std::make_shared<std::vector<std::optional<Lin>>>();
    for (APInt v : data.getValues<APInt>())
      host->push_back(Lin{v.getSExtValue()});
    if (data.isSplat())
      host->assign(t.getNumElements(), host->empty() ? std::optional<Lin>() : (*host)[0]);
    hostArrays[op.getResult()] = host;
  }
  return success();
}

LogicalResult Evaluator::evalLaunch(mlir::gpu::LaunchFuncOp op) {
  auto dims = [&](mlir::gpu::KernelDim3 d) -> FailureOr<std::array<runtime::LinearExpr, 3>> {
    std::array<runtime::LinearExpr, 3> a;
    Value xyz[3] = {d.x, d.y, d.z};
    for (int k = 0; k < 3; ++k) {
      auto l = integer(xyz[k], op);
      if (failed(l))
        return failure();
      a[k] = l->expr();
    }
    return a;
  };
  auto grid = dims(op.getGridSizeOperandValues());
  auto block = dims(op.getBlockSizeOperandValues());
  if (failed(grid) || failed(block))
    return failure();
  std::vector<runtime::LaunchArg> args;
  for (Value v : op.getKernelOperands()) {
    Type t = v.getType();
    if (isa<MemRefType>(t)) {
      auto vw = view(v, op);
      if (failed(vw))
        return failure();
      args.push_back(memrefArg(*vw));
    } else if (t.isIndex() || t.isInteger(64) || t.isInteger(32)) {
      auto l = integer(v, op);
      if (failed(l))
        return failure();
      args.push_back(intArg(t.isInteger(32) ? runtime::LaunchArg::I32 : runtime::LaunchArg::I64, *l));
    } else if ((t.isF32() || t.isBF16() || t.isF16()) && floats.count(v)) {
      // A float constant the outlining passed instead of sinking; 16-bit
      // ones rounded to nearest even.
      args.push_back(floatArg(t, floats[v]));
    } else {
      return op->emitError("GPU target: kernel argument of type ") << t << " is not supported";
    }
  }
  int64_t smem = 0;
  if (Value s = op.getDynamicSharedMemorySize()) {
    auto l = integer(s, op);
    if (failed(l) || !l->isConst())
      return op->emitError("GPU target: dynamic shared memory must be a constant");
    smem = l->c;
  }
  runtime::LaunchStep launch;
  launch.module = modules.generated;
  launch.kernel = op.getKernelName().getValue().str();
  launch.grid = *grid;
  launch.block = *block;
  launch.smem = smem;
  launch.args = std::move(args);
  steps.push_back(std::move(launch));
  return success();
}

LogicalResult Evaluator::evalGemm(linalg::GenericOp op) {
  auto maps = op.getIndexingMapsArray();
  auto a = view(op.getDpsInputs()[0], op), b = view(op.getDpsInputs()[1], op),
       c = view(op.getDpsInits()[0], op);
  if (failed(a) || failed(b) || failed(c))
    return failure();
  int64_t r = static_cast<int64_t>(c->sizes.size());
  if (r < 2 || maps[2].getNumResults() != r)
    return op->emitError("GPU target: GEMM output of rank < 2");
  // Stride of each operand along loop dim `d` (0 when broadcast).
  auto strideAlong = [&](const View &v, AffineMap m, int64_t d) {
    for (unsigned k = 0; k < m.getNumResults(); ++k)
      if (auto e = dyn_cast<AffineDimExpr>(m.getResult(k)); e && e.getPosition() == d)
        return v.strides[k];
    return Lin{0};
  };
  const View *ops[3] = {&*a, &*b, &*c};
  Lin batch{1};
  Lin batchStride[3] = {Lin{0}, Lin{0}, Lin{0}};
  bool haveBatch = false;
  for (int64_t d = r - 3; d >= 0; --d) {
    Lin extent = c->sizes[d];
    if (!extent.isConst())
      return op->emitError("GPU target: a GEMM batch that depends on the chunk position");
    if (extent.c == 1)
      continue;
    for (int k = 0; k < 3; ++k) {
      Lin s = strideAlong(*ops[k], maps[k], d);
      if (haveBatch) {
        // Collapsible only if this dim continues the inner batch dims.
        Lin expect = batchStride[k].scaled(batch.c);
        if (s.c != expect.c || s.p0 != expect.p0 || s.n != expect.n)
          return op->emitError("GPU target: GEMM batch dims that do not collapse into one "
                               "strided batch");
      } else {
        batchStride[k] = s;
      }
    }
    batch = batch.scaled(extent.c);
    haveBatch = true;
  }
  auto mat = [&](const View &v, AffineMap m, int64_t rowDim, int64_t colDim) {
    int k = &v == &*a ? 0 : &v == &*b ? 1 : 2;
    return gemmOperand(v, batchStride[k], strideAlong(v, m, rowDim), strideAlong(v, m, colDim));
  };
  // Loop dims: batch..., m (r-2), n (r-1), k (r).
  runtime::GemmStep g;
  g.dtypeA = dtypeName(a->element);
  g.dtypeB = dtypeName(b->element);
  g.dtypeC = dtypeName(c->element);
  g.batch = batch.expr();
  g.m = c->sizes[r - 2].expr();
  g.n = c->sizes[r - 1].expr();
  g.k = a->sizes.back().expr();
  g.a = mat(*a, maps[0], r - 2, r);
  g.b = mat(*b, maps[1], r, r - 1);
  g.c = mat(*c, maps[2], r - 2, r - 1);
  steps.push_back(std::move(g));
  return success();
}

/// An `h20_all_reduce` generic (attn.all_reduce) as one "all_reduce" step:
/// dst = the sum over the tensor-parallel ranks of src. Both views must be
/// contiguous (one NCCL buffer each).
LogicalResult Evaluator::evalAllReduce(linalg::GenericOp op) {
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  const View &src = (*operands)[0], &dst = (*operands)[1];
  auto contiguousBytes = [&](const View &v) -> FailureOr<Lin> {
    Lin expect{1};
    for (size_t k = v.sizes.size(); k-- > 0;) {
      const Lin &st = v.strides[k];
      bool one = v.sizes[k].isConst() && v.sizes[k].c == 1;
      if (!one && (st.c != expect.c || st.p0 != expect.p0 || st.n != expect.n))
        return op->emitError("GPU target: an all-reduce of a strided (non-contiguous) view");
      auto next = mul(expect, v.sizes[k], op);
      if (failed(next))
        return failure();
      expect = *next;
    }
    return expect.scaled(elementBytes(v.element));
  };
  auto srcBytes = contiguousBytes(src), dstBytes = contiguousBytes(dst);
  if (failed(srcBytes) || failed(dstBytes))
    return failure();
  if (srcBytes->c != dstBytes->c || srcBytes->p0 != dstBytes->p0 || srcBytes->n != dstBytes->n ||
      src.element != dst.element)
    return op->emitError("GPU target: all-reduce source and destination differ in size or type");
  use(src.buffer);
  use(dst.buffer);
  int64_t eb = elementBytes(src.element);
  Type e = src.element;
  if (!e.isF32() && !e.isF16() && !e.isBF16())
    return op->emitError("GPU target: an all-reduce of ") << e << " (f32, f16 or bf16 only)";
  runtime::AllReduceStep step;
  step.dtype = dtypeName(e);
  step.src = src.buffer;
  step.srcOffsetBytes = src.offset.scaled(eb).expr();
  step.dst = dst.buffer;
  step.dstOffsetBytes = dst.offset.scaled(eb).expr();
  step.bytes = srcBytes->expr();
  steps.push_back(std::move(step));
  return success();
}

LogicalResult Evaluator::evalAttention(linalg::GenericOp op) {
  auto q = view(op.getDpsInputs()[0], op), k = view(op.getDpsInputs()[1], op),
       v = view(op.getDpsInputs()[2], op), o = view(op.getDpsInits()[0], op);
  if (failed(q) || failed(k) || failed(v) || failed(o))
    return failure();
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.attention");
  if (!attrs)
    return op->emitError("GPU target: attention call without its attributes");
  bool causal = attrs.getAs<BoolAttr>("causal").getValue();
  bool bottomRight = attrs.getAs<BoolAttr>("bottom_right").getValue();
  Lin sq = q->sizes[2], skv = k->sizes[2];
  if (causal && !bottomRight &&
      (sq.c != skv.c || sq.p0 != skv.p0 || sq.n != skv.n))
    return op->emitError("GPU target: top-left causal attention with S_q != S_kv is not "
                         "supported by the kernel");
  // Chunked prefill: in the last chunk the rows past the prompt's end are
  // padding, and a padded query row would attend to every key before it.
  // Causal attention whose query rows are the chunk's (bottom-right
  // aligned, S_q = C) runs on the n real rows against the keys up to the
  // last real one (S_kv - C + n). The padding's rows of O are left as they
  // are: no real row reads them (row-wise ops, causal attention, the last
  // real row's logits). Not in a whole-prompt chunk (h20.chunked "whole"):
  // such a graph has ops that mix rows, causal but possibly masking the
  // padding arithmetically, and an unwritten row could hold NaN.
  auto chunkedInfo = func->getAttrOfType<DictionaryAttr>("h20.chunked");
  bool wholePrompt = chunkedInfo && chunkedInfo.get("whole");
  if (causal && bottomRight && !wholePrompt && roles.chunkTokensArg >= 0 &&
      !roles.inputDims.empty() && roles.inputDims[0].size() > 1) {
    int64_t chunk = roles.inputDims[0][1];
    if (sq.isConst() && sq.c == chunk && skv.n == 0 && skv.c >= chunk) {
      sq = Lin{0, 0, 1};
      skv = skv - Lin{chunk, 0, 0} + Lin{0, 0, 1};
    }
  }
  if (!q->sizes[1].isConst() || !k->sizes[1].isConst() || !q->sizes[3].isConst() ||
      !v->sizes[3].isConst())
    return op->emitError("GPU target: attention heads and head dims must be static");
  int dtype = q->element.isF32() ? 0 : q->element.isF16() ? 1 : q->element.isBF16() ? 2 : -1;
  if (dtype < 0 || k->element != q->element || v->element != q->element)
    return op->emitError("GPU target: attention needs Q, K, V of one type f32/f16/bf16");
  // The kernel h20-choose-attention-kernels chose and recorded; nothing is
  // chosen here.
  auto chosen = attrs.getAs<DictionaryAttr>("kernel");
  if (!chosen)
    return op->emitError("GPU target: internal: an attention library call without a chosen "
                         "kernel (h20-choose-attention-kernels did not run)");
  auto field = [&](StringRef name) -> int64_t {
    auto a = chosen.getAs<IntegerAttr>(name);
    return a ? a.getInt() : -1;
  };
  auto kindAttr = chosen.getAs<StringAttr>("kind");
  AttentionVariant variant;
  variant.kind = kindAttr && kindAttr.getValue() == "wgmma" ? 1 : 0;
  variant.dtype = dtype;
  variant.headDim = static_cast<int>(q->sizes[3].c);
  variant.headDimV = static_cast<int>(v->sizes[3].c);
  variant.blockM = static_cast<int>(field("block_m"));
  variant.blockN = static_cast<int>(field("block_n"));
  variant.threads = static_cast<int>(field("threads"));
  variant.stages = static_cast<int>(field("stages"));
  variant.schedule = static_cast<int>(field("schedule"));
  std::string why;
  if (!variant.isSupported(&why))
    return op->emitError("GPU target: the recorded attention kernel ")
           << chosen << " is not one the kernels have: " << why;
  if (llvm::find(program.attentionVariants, variant) == program.attentionVariants.end())
    program.attentionVariants.push_back(variant);
  auto v4 = [&](const View &x) {
    use(x.buffer);
    runtime::AttentionView a;
    a.buffer = x.buffer;
    a.offset = x.offset.expr();
    for (int d = 0; d < 4; ++d)
      a.strides[d] = x.strides[d].expr();
    return a;
  };
  int64_t window = -1;
  if (auto w = attrs.getAs<IntegerAttr>("window"))
    window = w.getInt();
  double softcap = 0;
  if (auto s = attrs.getAs<FloatAttr>("softcap"))
    softcap = s.getValueAsDouble();
  runtime::AttentionStep step;
  step.module = modules.attention;
  step.kernel = variant.kernelName();
  step.dtype = dtypeName(q->element);
  step.blockM = variant.blockM;
  step.threads = variant.threads;
  step.smem = variant.smemBytes();
  step.q = v4(*q);
  step.k = v4(*k);
  step.v = v4(*v);
  step.o = v4(*o);
  step.batch = q->sizes[0].expr();
  step.sq = sq.expr();
  step.skv = skv.expr();
  step.heads = q->sizes[1].c;
  step.kvHeads = k->sizes[1].c;
  step.headDim = q->sizes[3].c;
  step.headDimV = v->sizes[3].c;
  step.scale = attrs.getAs<FloatAttr>("scale").getValueAsDouble();
  step.softcap = softcap;
  step.causal = causal;
  step.windowLeft = window;
  steps.push_back(std::move(step));
  return success();
}

LogicalResult Evaluator::evalIndexer(linalg::GenericOp op) {
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.indexer");
  if (!attrs)
    return op->emitError("GPU target: indexer call without its attributes");
  int mode = static_cast<int>(attrs.getAs<IntegerAttr>("mode").getInt());
  unsigned numIns = mode == 1 ? 4 : 3;
  if (op.getNumDpsInputs() != numIns || op.getNumDpsInits() != 2)
    return op->emitError("GPU target: internal: malformed indexer call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  const SmallVector<View> &v = *operands;
  const View &q = v[0], &k = v[1], &w = v[2];
  const View &out = v[numIns], &scratch = v[numIns + 1];
  const View &cand = mode == 1 ? v[3] : out; // any rank-2 int64 view when unused
  auto code = [](Type t) { return t.isF32() ? 0 : t.isF16() ? 1 : t.isBF16() ? 2 : -1; };
  IndexerKernel kernel{code(q.element), code(k.element), code(w.element), mode};
  if (kernel.queryType < 0 || kernel.keyType < 0 || kernel.weightType < 0)
    return op->emitError("GPU target: the indexer kernel takes f32/f16/bf16 query, keys and "
                         "weights");
  if (q.sizes.size() != 3 || k.sizes.size() != 2 || w.sizes.size() != 2 ||
      cand.sizes.size() != 2 || out.sizes.size() != 2 || scratch.sizes.size() != 2)
    return op->emitError("GPU target: internal: indexer operands of unexpected ranks");
  if (!q.sizes[1].isConst() || !q.sizes[2].isConst() || !out.sizes[1].isConst() ||
      !cand.sizes[1].isConst() || !scratch.sizes[0].isConst())
    return op->emitError("GPU target: indexer heads, head dim, top-k and candidates must be "
                         "static");
  if (out.sizes[1].c > kIndexerMaxK)
    return op->emitError("GPU target: the indexer kernel selects at most ")
           << kIndexerMaxK << " entries per query, this op " << out.sizes[1].c;
  int64_t smem = indexerSmemBytes(mode, q.sizes[1].c, q.sizes[2].c, cand.sizes[1].c);
  // 16-bit top-k (mode 0), top-k within candidate blocks (mode 1) and
  // candidate blocks (mode 2): the tensor-core kernel with the streaming
  // top-k.
  IndexerKernel mma;
  const int64_t block = attrs.getAs<IntegerAttr>("block").getInt();
  const int64_t entries = k.sizes[0].isConst() ? k.sizes[0].c : -1; // sizes mode 1's bits
  const bool useMma = chooseIndexerMma(mode, kernel.queryType, kernel.keyType, kernel.weightType,
                                       q.sizes[1].c, q.sizes[2].c, out.sizes[1].c, mma, block,
                                       mode == 1 ? entries : -1);
  if (useMma) {
    kernel = mma;
    smem = indexerMmaSmemBytes(mma, std::max<int64_t>(entries, 0), block);
  }
  if (!useMma && smem > 160 * 1024)
    return op->emitError("GPU target: the indexer's query row (")
           << q.sizes[1].c << " heads x " << q.sizes[2].c << ") does not fit in shared memory";
  if (llvm::find(program.indexerKernels, kernel) == program.indexerKernels.end())
    program.indexerKernels.push_back(kernel);
  // The mma kernel: a CTA per rowsPerCta() query rows (S CTAs when S is
  // not known here; the extra ones return at once).
  Lin gridX{scratch.sizes[0].c};
  if (useMma)
    gridX = q.sizes[0].isConst()
                ? Lin{std::max<int64_t>(1, (q.sizes[0].c + mma.rowsPerCta() - 1) / mma.rowsPerCta())}
                : q.sizes[0];
  std::vector<runtime::LaunchArg> args;
  for (const View *x : {&q, &k, &w, &cand, &out, &scratch})
    args.push_back(memrefArg(*x));
  args.push_back(intArg(runtime::LaunchArg::I64, Lin{attrs.getAs<IntegerAttr>("ratio").getInt()}));
  args.push_back(intArg(runtime::LaunchArg::I64, Lin{attrs.getAs<IntegerAttr>("block").getInt()}));
  args.push_back(f32Arg(attrs.getAs<FloatAttr>("scale").getValueAsDouble()));
  steps.push_back(launchStep(modules.indexer, kernel.name(), gridX,
                             useMma ? kIndexerMmaThreads : kIndexerThreads, smem, std::move(args)));
  return success();
}

LogicalResult Evaluator::evalSparseAttention(linalg::GenericOp op) {
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.sparse_attention");
  if (!attrs)
    return op->emitError("GPU target: sparse attention call without its attributes");
  const unsigned numIns = op.getNumDpsInputs();
  if ((numIns != 3 && numIns != 5) || op.getNumDpsInits() != 1)
    return op->emitError("GPU target: internal: malformed sparse attention call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  const SmallVector<View> &v = *operands;
  const bool compressed = numIns == 5;
  const View &q = v[0], &lat = v[1], &sink = v[2], &out = v.back();
  // Window-only: the kernel never reads compressed rows or indices; any
  // rank-2 views fill their parameters.
  const View &cmp = compressed ? v[3] : lat, &idx = compressed ? v[4] : lat;
  auto code = [](Type t) { return t.isF32() ? 0 : t.isF16() ? 1 : t.isBF16() ? 2 : -1; };
  if (q.sizes.size() != 3 || lat.sizes.size() != 2 || sink.sizes.size() != 1 ||
      cmp.sizes.size() != 2 || idx.sizes.size() != 2 || out.sizes.size() != 3)
    return op->emitError("GPU target: internal: sparse attention operands of unexpected ranks");
  const int dt = code(q.element);
  if ((dt != 1 && dt != 2) || code(lat.element) != dt || code(out.element) != dt ||
      (compressed && code(cmp.element) != dt) || code(sink.element) < 0)
    return op->emitError("GPU target: the sparse attention kernel takes f16/bf16 query, latent, "
                         "compressed rows and output of one type");
  if (!q.sizes[1].isConst() || !q.sizes[2].isConst() || !idx.sizes[1].isConst())
    return op->emitError("GPU target: sparse attention heads, head dim and picks must be static");
  const int64_t window = attrs.getAs<IntegerAttr>("window").getInt();
  const int64_t heads = q.sizes[1].c, dim = q.sizes[2].c;
  const int64_t slots = window + (compressed ? idx.sizes[1].c : 0);
  SparseAttentionKernel kernel{dt, code(sink.element),
                               static_cast<int>(sparseAttentionPaddedDim(dim)), compressed};
  const int64_t smem = sparseAttentionSmemBytes(kernel.paddedDim, slots);
  if (dim > kSparseAttentionMaxHeadDim || smem > kSparseAttentionSmemLimit)
    return op->emitError("GPU target: sparse attention with head dim ")
           << dim << " and " << slots << " key slots does not fit the kernel's shared memory";
  if (llvm::find(program.sparseAttentionKernels, kernel) == program.sparseAttentionKernels.end())
    program.sparseAttentionKernels.push_back(kernel);
  std::vector<runtime::LaunchArg> args;
  for (const View *x : {&q, &lat, &sink, &cmp, &idx, &out})
    args.push_back(memrefArg(*x));
  // The kernel's softmax runs in base 2: the scale times log2(e).
  const double scale = attrs.getAs<FloatAttr>("scale").getValueAsDouble();
  args.push_back(f32Arg(scale * 1.4426950408889634));
  args.push_back(intArg(runtime::LaunchArg::I64, Lin{window}));
  runtime::LaunchStep launch = launchStep(modules.sparseAttention, kernel.name(), q.sizes[0],
                                          kSparseAttentionThreads, smem, std::move(args));
  launch.grid[1] = runtime::LinearExpr::constant((heads + kSparseAttentionHeadsPerCta - 1) /
                                                 kSparseAttentionHeadsPerCta);
  steps.push_back(std::move(launch));
  return success();
}

/// Token rows of one routed-experts tile: its scratch (router logits, the
/// permuted rows Xp, G, U, A, Yp) is at most about this many bytes. Larger
/// tiles give each expert's GEMM more rows (better tensor-core use); the
/// scratch lives in the arena beside the layer's other temporaries.
constexpr int64_t kMoeTileScratchBytes = int64_t(8) << 30;

LogicalResult Evaluator::evalRoutedExperts(linalg::GenericOp op) {
  auto attrs = op->getAttrOfType<DictionaryAttr>("h20.routed_experts");
  if (!attrs)
    return op->emitError("GPU target: routed experts call without its attributes");
  if (op.getNumDpsInputs() != 6 || op.getNumDpsInits() != 1)
    return op->emitError("GPU target: internal: malformed routed experts call");
  auto operands = operandViews(op);
  if (failed(operands))
    return failure();
  const SmallVector<View> &v = *operands;
  const View &x = v[0], &router = v[1], &bias = v[2], &w1 = v[3], &w3 = v[4], &w2 = v[5],
             &y = v[6];
  auto code = [](Type t) { return t.isF32() ? 0 : t.isF16() ? 1 : t.isBF16() ? 2 : -1; };
  const int dt = code(x.element), bt = code(bias.element);
  if (dt < 0 || bt < 0 || code(y.element) != dt)
    return op->emitError("GPU target: routed experts take f32/f16/bf16 tokens and bias");
  if (x.sizes.size() != 2 || router.sizes.size() != 2 || bias.sizes.size() != 1 ||
      w1.sizes.size() != 3 || w3.sizes.size() != 3 || w2.sizes.size() != 3 || y.sizes.size() != 2)
    return op->emitError("GPU target: internal: routed experts operands of unexpected ranks");
  for (const View *w : {&x, &router, &bias, &w1, &w3, &w2, &y})
    for (const Lin &d : w->sizes)
      if (!d.isConst())
        return op->emitError("GPU target: routed experts need static shapes (the token count "
                             "of a whole-prompt program)");
  const int64_t n = x.sizes[0].c, dm = x.sizes[1].c, e = router.sizes[1].c,
                inter = w1.sizes[2].c;
  const int64_t k = attrs.getAs<IntegerAttr>("top_k").getInt();
  if (std::string why; !moeShapeSupported(e, k, &why))
    return op->emitError("GPU target: routed experts: ") << why;
  program.usesMoe = true;
  if (n == 0)
    return success();
  const std::string dtype = dtypeName(x.element);
  const int64_t es = elementBytes(x.element);
  Builder types(op.getContext());
  Type f32 = types.getF32Type(), i32 = types.getI32Type();

  // Tile of tokens and its scratch, allocated once and reused by every tile.
  const int64_t perToken = e * 4 + k * (4 + 4 + 4 + 4) + k * dm * es + 2 * k * inter * 4 +
                           k * inter * es + k * dm * 4;
  int64_t tile = std::max<int64_t>(1, kMoeTileScratchBytes / perToken);
  if (tile >= 256)
    tile = tile / 256 * 256;
  tile = std::min(tile, n);
  if (tile * k > kMoeMaxRows)
    tile = kMoeMaxRows / k;
  auto temp = [&](int64_t elems, Type t) {
    return addBuffer(Buffer{"temp", -1, checkedMul(elems, elementBytes(t)), dtypeName(t)});
  };
  const int bLogits = temp(tile * e, f32), bIds = temp(tile * k, i32), bW = temp(tile * k, f32),
            bCounts = temp(e, i32), bOff = temp(e + 1, i32), bPos = temp(tile * k, i32),
            bRowTok = temp(tile * k, i32), bXp = temp(tile * k * dm, x.element),
            bG = temp(tile * k * inter, f32), bU = temp(tile * k * inter, f32),
            bA = temp(tile * k * inter, x.element), bYp = temp(tile * k * dm, f32);

  // Row-major views of the scratch, and of the operands at a row offset.
  auto rows = [&](int buffer, ArrayRef<int64_t> shape, Type t) {
    SmallVector<Lin> sizes;
    for (int64_t d : shape)
      sizes.push_back(Lin{d});
    return identityView(buffer, t, sizes);
  };
  auto rowSlice = [&](const View &base, int64_t first, int64_t count) {
    View r = base;
    r.offset = base.offset + base.strides[0].scaled(first);
    r.sizes[0] = Lin{count};
    return r;
  };
  auto mat = [&](const View &w, unsigned rowDim, unsigned colDim, Lin batchStride) {
    return gemmOperand(w, batchStride, w.strides[rowDim], w.strides[colDim]);
  };
  auto gemm = [&](const View &a, const View &b, const View &c, int64_t m, int64_t nn,
                  int64_t kk, bool grouped) {
    runtime::GemmStep g;
    g.dtypeA = g.dtypeB = dtype;
    g.dtypeC = "float32";
    g.batch = runtime::LinearExpr::constant(1);
    g.m = runtime::LinearExpr::constant(m);
    g.n = runtime::LinearExpr::constant(nn);
    g.k = runtime::LinearExpr::constant(kk);
    g.a = mat(a, 0, 1, Lin{0});
    g.b = grouped ? mat(b, 1, 2, b.strides[0]) : mat(b, 0, 1, Lin{0});
    g.c = mat(c, 0, 1, Lin{0});
    if (grouped) {
      use(bOff);
      g.groups = e;
      g.groupBuffer = bOff;
    }
    steps.push_back(std::move(g));
  };
  auto launch = [&](const std::string &kernel, int64_t grid, ArrayRef<const View *> views,
                    std::vector<runtime::LaunchArg> scalars) {
    std::vector<runtime::LaunchArg> args;
    for (const View *w : views)
      args.push_back(memrefArg(*w));
    args.insert(args.end(), scalars.begin(), scalars.end());
    steps.push_back(launchStep(modules.moe, kernel, Lin{grid}, kMoeThreads, 0, std::move(args)));
  };
  const double temperature = attrs.getAs<FloatAttr>("temp").getValueAsDouble();
  const double scaling = attrs.getAs<FloatAttr>("scaling").getValueAsDouble();
  // limit <= 0 clamps nothing (transformers' swiglu_limit rule): the kernel
  // clamps to the largest float, which no finite value exceeds.
  double limit = attrs.getAs<FloatAttr>("limit").getValueAsDouble();
  if (!(limit > 0))
    limit = std::numeric_limits<float>::max();
  for (int64_t t0 = 0; t0 < n; t0 += tile) {
    const int64_t tt = std::min(tile, n - t0), r = tt * k;
    const View xt = rowSlice(x, t0, tt), yt = rowSlice(y, t0, tt);
    const View logits = rows(bLogits, {tt, e}, f32), ids = rows(bIds, {tt, k}, i32),
               weights = rows(bW, {tt, k}, f32), counts = rows(bCounts, {e}, i32),
               offsets = rows(bOff, {e + 1}, i32), pos = rows(bPos, {tt, k}, i32),
               rowTok = rows(bRowTok, {r}, i32), xp = rows(bXp, {r, dm}, x.element),
               g = rows(bG, {r, inter}, f32), u = rows(bU, {r, inter}, f32),
               a = rows(bA, {r, inter}, x.element), yp = rows(bYp, {r, dm}, f32);
    gemm(xt, router, logits, tt, e, dm, false);
    use(bCounts);
    runtime::MemsetStep clear;
    clear.buffer = bCounts;
    clear.bytes = runtime::LinearExpr::constant(e * 4);
    steps.push_back(clear);
    launch(moeRouteKernel(bt), moeRouteGrid(tt),
           {&logits, &bias, &ids, &weights, &counts}, {f32Arg(temperature), f32Arg(scaling)});
    launch(moePositionsKernel(), moePositionsGrid(e), {&ids, &counts, &offsets, &pos, &rowTok}, {});
    launch(moeGatherKernel(dt), moeGatherGrid(r),
           {&xt, &rowTok, &xp}, {});
    gemm(xp, w1, g, r, inter, dm, true);
    gemm(xp, w3, u, r, inter, dm, true);
    launch(moeSwigluKernel(dt), moeSwigluGrid(r * inter), {&g, &u, &a}, {f32Arg(limit)});
    gemm(a, w2, yp, r, dm, inter, true);
    launch(moeCombineKernel(dt), moeCombineGrid(tt), {&yp, &pos, &weights, &yt}, {});
  }
  return success();
}

LogicalResult Evaluator::evaluate(Operation *op) {
  if (op->getDialect() && op->getDialect()->getNamespace() == "arith")
    return evalArith(op);
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](memref::AllocOp a) { return evalAlloc(op, a.getType(), a.getDynamicSizes()); })
      .Case([&](memref::AllocaOp a) { return evalAlloc(op, a.getType(), a.getDynamicSizes()); })
      .Case([&](memref::DeallocOp) { return success(); })
      .Case<memref::StoreOp, memref::LoadOp, memref::ReshapeOp>(
          [&](Operation *o) { return evalHostAccess(o); })
      .Case([&](memref::GetGlobalOp g) { return evalGlobal(g); })
      .Case([&](memref::DimOp d) -> LogicalResult {
        auto v = view(d.getSource(), op);
        auto k = integer(d.getIndex(), op);
        if (failed(v) || failed(k))
          return failure();
        if (!k->isConst() || k->c < 0 || k->c >= static_cast<int64_t>(v->sizes.size()))
          return op->emitError("GPU target: memref.dim of a dimension out of range");
        ints[d.getResult()] = v->sizes[k->c];
        return success();
      })
      .Case([&](memref::CastOp c) -> LogicalResult {
        auto v = view(c.getSource(), op);
        if (failed(v))
          return failure();
        views[c.getResult()] = *v;
        return success();
      })
      .Case([&](memref::SubViewOp s) -> LogicalResult {
        // Subviews of a host array are host accesses, not device uses.
        FailureOr<View> src = failure();
        if (hostArrays.count(s.getSource()) && views.count(s.getSource()))
          src = views[s.getSource()];
        else
          src = view(s.getSource(), op);
        if (failed(src))
          return failure();
        View r{src->buffer, src->offset, {}, {}, src->element};
        llvm::SmallBitVector dropped = s.getDroppedDims();
        auto offs = s.getMixedOffsets(), sizes = s.getMixedSizes(), strides = s.getMixedStrides();
        for (unsigned k = 0; k < offs.size(); ++k) {
          auto o = fold(offs[k], op), sz = fold(sizes[k], op), st = fold(strides[k], op);
          if (failed(o) || failed(sz) || failed(st))
            return failure();
          auto delta = mul(*o, src->strides[k], op);
          auto stride = mul(src->strides[k], *st, op);
          if (failed(delta) || failed(stride))
            return failure();
          r.offset = r.offset + *delta;
          if (!dropped.test(k)) {
            r.sizes.push_back(*sz);
            r.strides.push_back(*stride);
          }
        }
        views[s.getResult()] = r;
        // A subview of a small host array (shape arithmetic written piece by
        // piece, e.g. a Concat of shapes) is that array at an offset.
        if (auto host = hostArrays.find(s.getSource()); host != hostArrays.end()) {
          View base = views[s.getSource()];
          bool constant = r.offset.isConst() && base.offset.isConst();
          for (const Lin &st : r.strides)
            constant &= st.isConst();
          if (!constant && hostWritten.count(host->second.get()))
            return op->emitError("GPU target: a subview at a chunk-dependent offset of an "
                                 "integer array the host computed");
          if (constant) {
            std::shared_ptr<std::vector<std::optional<Lin>>> array = host->second;
            hostArrays[s.getResult()] = array; // may rehash: `host` is stale after
            SmallVector<int64_t> strides;
            for (const Lin &st : r.strides)
              strides.push_back(st.c);
            int64_t offset = r.offset.c - base.offset.c;
            if (auto outer = hostLayouts.find(s.getSource()); outer != hostLayouts.end())
              offset += outer->second.first;
            hostLayouts[s.getResult()] = {offset, strides};
          }
        }
        return success();
      })
      .Case([&](memref::ExpandShapeOp e) -> LogicalResult {
        auto src = view(e.getSrc(), op);
        if (failed(src))
          return failure();
        View r{src->buffer, src->offset, {}, {}, src->element};
        SmallVector<OpFoldResult> shape = e.getMixedOutputShape();
        for (OpFoldResult f : shape) {
          auto s = fold(f, op);
          if (failed(s))
            return failure();
          r.sizes.push_back(*s);
        }
        r.strides.resize(r.sizes.size());
        for (auto [k, group] : llvm::enumerate(e.getReassociationIndices())) {
          Lin stride = src->strides[k];
          for (size_t j = group.size(); j-- > 0;) {
            r.strides[group[j]] = stride;
            auto next = mul(stride, r.sizes[group[j]], op);
            if (failed(next))
              return failure();
            stride = *next;
          }
        }
        views[e.getResult()] = r;
        return success();
      })
      .Case([&](memref::CollapseShapeOp c) -> LogicalResult {
        auto src = view(c.getSrc(), op);
        if (failed(src))
          return failure();
        View r{src->buffer, src->offset, {}, {}, src->element};
        for (const auto &group : c.getReassociationIndices()) {
          Lin size{1};
          for (int64_t d : group) {
            auto s = mul(size, src->sizes[d], op);
            if (failed(s))
              return failure();
            size = *s;
          }
          r.sizes.push_back(size);
          r.strides.push_back(group.empty() ? Lin{1} : src->strides[group.back()]);
        }
        views[c.getResult()] = r;
        return success();
      })
      .Case([&](memref::ReinterpretCastOp c) -> LogicalResult {
        auto src = view(c.getSource(), op);
        if (failed(src))
          return failure();
        View r{src->buffer, {}, {}, {}, src->element};
        auto off = fold(c.getMixedOffsets()[0], op);
        if (failed(off))
          return failure();
        r.offset = *off;
        for (OpFoldResult f : c.getMixedSizes()) {
          auto s = fold(f, op);
          if (failed(s))
            return failure();
          r.sizes.push_back(*s);
        }
        for (OpFoldResult f : c.getMixedStrides()) {
          auto s = fold(f, op);
          if (failed(s))
            return failure();
          r.strides.push_back(*s);
        }
        views[c.getResult()] = r;
        return success();
      })
      .Case([&](mlir::gpu::LaunchFuncOp l) { return evalLaunch(l); })
      .Case([&](linalg::GenericOp g) -> LogicalResult {
        auto call = g.getLibraryCallAttr();
        if (call && call.getValue() == kGemm)
          return evalGemm(g);
        if (call && call.getValue() == kAttention)
          return evalAttention(g);
        if (call && call.getValue() == kAllReduce)
          return evalAllReduce(g);
        if (call && call.getValue() == kIndexer)
          return evalIndexer(g);
        if (call && call.getValue() == kSparseAttention)
          return evalSparseAttention(g);
        if (call && call.getValue() == kRoutedExperts)
          return evalRoutedExperts(g);
        return op->emitError("GPU target: internal: a linalg op was left on the host");
      })
      .Case([&](func::ReturnOp) { return success(); })
      .Default([&](Operation *) -> LogicalResult {
        return op->emitError("GPU target: '")
               << op->getName() << "' cannot run on the host of a GPU program";
      });
}

/// First-fit packing of temporaries by lifetime [first, last] step.
void Evaluator::packArena() {
  std::vector<int> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == "temp" && buffers[i].first >= 0)
      order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    if (buffers[x].bytes != buffers[y].bytes)
      return buffers[x].bytes > buffers[y].bytes;
    return x < y;
  });
  std::vector<int> placed;
  int64_t arena = 0;
  for (int i : order) {
    Buffer &b = buffers[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed) {
      const Buffer &o = buffers[j];
      if (o.first <= b.last && b.first <= o.last)
        busy.push_back({o.arenaOffset, o.arenaOffset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [lo, hi] : busy) {
      if (at + b.bytes <= lo)
        break;
      at = std::max(at, hi);
    }
    b.arenaOffset = at;
    arena = std::max(arena, at + b.bytes);
    placed.push_back(i);
  }
  program.arenaBytes = arena;
}

LogicalResult Evaluator::run() {
  if (failed(bindArguments()))
    return failure();
  linOverflow = false;
  for (Operation &op : func.getBody().front()) {
    if (failed(evaluate(&op)))
      return failure();
    if (linOverflow)
      return op.emitError("GPU target: a size, offset or index overflows 64 bits");
  }
  packArena();
  for (const Buffer &b : buffers) {
    runtime::GpuBuffer o;
    o.kind = llvm::StringSwitch<runtime::BufferKind>(b.kind)
                 .Case("input", runtime::BufferKind::Input)
                 .Case("output", runtime::BufferKind::Output)
                 .Case("weight", runtime::BufferKind::Weight)
                 .Case("state", runtime::BufferKind::State)
                 .Case("const", runtime::BufferKind::Const)
                 .Default(runtime::BufferKind::Temp);
    o.index = b.index;
    o.bytes = b.bytes;
    o.dtype = b.dtype;
    if (b.kind == "temp")
      o.offset = b.arenaOffset < 0 ? int64_t(0) : b.arenaOffset;
    if (b.kind == "const") {
      o.blob = "consts.bin";
      o.blobOffset = b.blobOffset;
    }
    program.buffers.push_back(std::move(o));
  }
  program.steps = std::move(steps);
  return success();
}

} // namespace

KernelModules planKernelModules(func::FuncOp func) {
  bool attention = false, indexer = false, sparse = false, moe = false;
  func.walk([&](linalg::GenericOp g) {
    auto call = g.getLibraryCallAttr();
    if (!call)
      return;
    attention |= call.getValue() == kAttention;
    indexer |= call.getValue() == kIndexer;
    sparse |= call.getValue() == kSparseAttention;
    moe |= call.getValue() == kRoutedExperts;
  });
  KernelModules m;
  int next = 1;
  for (auto [used, index] : {std::pair<bool, int *>{attention, &m.attention},
                             {indexer, &m.indexer},
                             {sparse, &m.sparseAttention},
                             {moe, &m.moe}})
    if (used)
      *index = next++;
  return m;
}

LogicalResult buildHostProgram(func::FuncOp func, const ArgumentRoles &roles,
                               const KernelModules &modules, HostProgram &program) {
  return Evaluator(func, roles, modules, program).run();
}

} // namespace h20::gpu
