//===- HostProgram.cpp - the host side of a GPU function as a step list --===//
//
// The evaluator's core (HostEvaluator.h): arguments, integer arithmetic,
// allocations and views, host arrays, kernel launches, the op dispatch and
// the final buffer list; library calls are in LibraryCallSteps.cpp.
//
//===----------------------------------------------------------------------===//
#include "HostEvaluator.h"

#include "h20/Target/ArenaPlanner.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace h20::gpu {
namespace detail {

thread_local bool linOverflow = false;
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
                  StringRef dtype = "", bool host = false) -> LogicalResult {
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
    b.host = host;
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
    if (failed(bind(i, "weight", k, {}, roles.weightDtypes[k],
                    k < roles.weightOnHost.size() && roles.weightOnHost[k])))
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
  // Divisions of a chunk position by a constant: p0 / k, (p0 + n) / k,
  // p0 mod k of a compressor's groups of k tokens. Only of values that are
  // >= 0 in every chunk, where floor, truncation and unsigned division
  // agree.
  if (isa<arith::DivUIOp, arith::DivSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp,
          arith::CeilDivUIOp, arith::RemUIOp, arith::RemSIOp>(op) &&
      !args[0].isConst() && args[1].isConst() && args[1].c > 0) {
    const int64_t k = args[1].c;
    const bool ceil = isa<arith::CeilDivSIOp, arith::CeilDivUIOp>(op);
    const bool isUnsigned = isa<arith::DivUIOp, arith::CeilDivUIOp, arith::RemUIOp>(op);
    auto f = floorDiv(ceil ? args[0] + Lin{k - 1} : args[0], k, isUnsigned, op);
    if (failed(f))
      return failure();
    ints[r] = isa<arith::RemUIOp, arith::RemSIOp>(op) ? args[0] - f->scaled(k) : *f;
    return success();
  }
  for (const Lin &a : args)
    if (!a.isConst())
      return op->emitError("GPU target: a non-linear function of the chunk position ('")
             << op->getName() << "')";
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

bool Evaluator::nonNegative(const Lin &a) const {
  if (a.c < 0 || a.p0 < 0 || a.n < 0 || a.q < 0 || a.r < 0)
    return false;
  for (int j = 0; j < Lin::kD; ++j)
    if (a.d[j] < 0 || (a.d[j] > 0 && (derived[j].of.c < 0 || derived[j].of.p0 < 0 ||
                                      derived[j].of.n < 0 || derived[j].of.q < 0)))
      return false;
  return true;
}

FailureOr<Lin> Evaluator::floorDiv(const Lin &a, int64_t k, bool isUnsigned, Operation *user) {
  // Every coefficient a multiple of k: the quotient is exact (the rows of
  // a Reshape, an element count over the other dims' product), for a
  // signed division whatever the sign (an unsigned one would read a
  // negative value as a huge one).
  if (a.c % k == 0 && a.p0 % k == 0 && a.n % k == 0 && a.q % k == 0 && a.r % k == 0 &&
      llvm::all_of(a.d, [&](int64_t x) { return x % k == 0; }) &&
      (!isUnsigned || nonNegative(a))) {
    Lin e{a.c / k, a.p0 / k, a.n / k, a.q / k, a.r / k};
    for (int j = 0; j < Lin::kD; ++j)
      e.d[j] = a.d[j] / k;
    return e;
  }
  const int64_t chunk = chunkedInt("chunk");
  // Chunks start at multiples of C (p0 = q * C), so a position over k is
  // linear in q when k divides what it counts:
  // (c + p0 * P + q * Q) / k = c / k + q * (P * C + Q) / k, for c >= 0
  // and P * C + Q >= 0. The compressed entries before a chunk of whole
  // groups, p0 / 4 = q * (C / 4), are such a value.
  if (chunk > 0 && a.n == 0 && a.r == 0 && a.c >= 0 && a.noDerived()) {
    const int64_t q = checkedAdd(checkedMul(a.p0, chunk), a.q);
    if (q >= 0 && q % k == 0)
      return Lin{a.c / k, 0, 0, q / k};
  }
  if (a.r != 0)
    return user->emitError("GPU target: a division of the rank by ") << k;
  // Only of values >= 0 in every chunk, where floor, truncation and
  // unsigned division agree.
  if (!nonNegative(a))
    return user->emitError("GPU target: a division by ")
           << k << " of a chunk position that may be negative";
  // floor((floor(x / m) + c) / k) = floor((x + c * m) / (m * k)).
  runtime::LinearExpr of = a.expr();
  int64_t div = k;
  if (!a.noDerived()) {
    int used = -1;
    for (int j = 0; j < Lin::kD; ++j)
      if (a.d[j] != 0)
        used = used < 0 && a.d[j] == 1 ? j : Lin::kD;
    if (used < 0 || used == Lin::kD || a.p0 != 0 || a.n != 0 || a.q != 0)
      return user->emitError("GPU target: a division by ")
             << k << " of a chunk position that is not one derived symbol plus a constant";
    const runtime::DerivedSymbol &inner = derived[used];
    of = inner.of;
    of.c = checkedAdd(of.c, checkedMul(a.c, inner.div));
    div = checkedMul(inner.div, k);
  }
  if (linOverflow)
    return user->emitError("GPU target: a chunk position's division overflows 64 bits");
  // The program format's bounds (GpuProgram.h, "derived").
  for (int64_t x : {of.c, of.p0, of.n, of.q})
    if (x < -runtime::kMaxDerivedCoefficient || x > runtime::kMaxDerivedCoefficient)
      return user->emitError("GPU target: a division by ")
             << div << " of a chunk position with a coefficient " << x << " beyond +-2^20";
  if (div > runtime::kMaxDerivedDivisor)
    return user->emitError("GPU target: a division of a chunk position by ")
           << div << ", beyond 2^40";
  auto same = [&](const runtime::DerivedSymbol &s) {
    return s.div == div && s.of.c == of.c && s.of.p0 == of.p0 && s.of.n == of.n &&
           s.of.q == of.q;
  };
  auto found = llvm::find_if(derived, same);
  if (found != derived.end())
    return Lin::derived(static_cast<int>(found - derived.begin()));
  if (derived.size() >= static_cast<size_t>(Lin::kD))
    return user->emitError("GPU target: more than ")
           << Lin::kD << " distinct divisions of the chunk position (derived symbols)";
  derived.push_back({of, div});
  return Lin::derived(static_cast<int>(derived.size()) - 1);
}

std::optional<int64_t> Evaluator::largestOverChunks(const Lin &v) const {
  const int64_t c = chunkedInt("chunk"), capacity = chunkedInt("capacity");
  if (c <= 0 || capacity < c || v.n != 0 || v.r != 0)
    return std::nullopt;
  const int64_t chunks = capacity / c;
  if (v.noDerived()) {
    if (v.p0 < 0 || v.q < 0)
      return std::nullopt;
    const int64_t last = capacity - c;
    const int64_t value =
        checkedAdd(checkedAdd(v.c, checkedMul(v.p0, last)), checkedMul(v.q, chunks - 1));
    return value >= 0 ? std::optional<int64_t>(value) : std::nullopt;
  }
  // Every chunk: a count of the groups that end in a chunk rises and falls
  // with p0 mod k. capacity / C evaluations of a few terms each (at most
  // ~10^6 for a 1M-token capacity in chunks of one token).
  for (int j = 0; j < Lin::kD; ++j)
    if (v.d[j] != 0 && derived[j].of.n != 0)
      return std::nullopt;
  const runtime::LinearExpr e = v.expr();
  int64_t most = std::numeric_limits<int64_t>::min();
  for (int64_t q = 0; q < chunks; ++q) {
    runtime::SymbolValues s{q * c, c, q};
    int64_t value;
    if (!runtime::deriveSymbols(derived, s) || !e.evaluate(s, value))
      return std::nullopt;
    most = std::max(most, value);
  }
  return most >= 0 ? std::optional<int64_t>(most) : std::nullopt;
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
    int64_t most = s.c;
    if (t.isDynamicDim(k)) {
      auto v = integer(dynamic[d++], op);
      if (failed(v))
        return failure();
      s = *v;
      most = v->c;
      if (!v->isConst()) {
        // Sized by the chunk's position (a kernel's scratch over the rows
        // of every earlier position): the buffer holds the last chunk's,
        // the view keeps each chunk's own size (one such dim: its strides
        // stay linear).
        std::optional<int64_t> last = largestOverChunks(*v);
        if (!last || llvm::any_of(sizes, [](const Lin &s) { return !s.isConst(); }))
          return op->emitError("GPU target: an allocation whose size depends on the chunk "
                               "position");
        most = *last;
      }
    }
    sizes.push_back(s);
    bytes = checkedMul(bytes, most);
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
        if (call && call.getValue() == kFp8Quantize)
          return evalFp8Quantize(g);
        if (call && call.getValue() == kFp8Gemm)
          return evalFp8Gemm(g);
        return op->emitError("GPU target: internal: a linalg op was left on the host");
      })
      .Case([&](func::ReturnOp) { return success(); })
      .Default([&](Operation *) -> LogicalResult {
        return op->emitError("GPU target: '")
               << op->getName() << "' cannot run on the host of a GPU program";
      });
}

/// Temporaries share the arena by lifetime (packArena, ArenaPlanner.h).
void Evaluator::packArena() {
  std::vector<ArenaRequest> requests;
  std::vector<int> temps;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == "temp") {
      temps.push_back(static_cast<int>(i));
      requests.push_back({buffers[i].bytes, buffers[i].first, buffers[i].last});
    }
  std::vector<int64_t> offsets;
  program.arenaBytes = h20::gpu::packArena(requests, offsets);
  for (size_t t = 0; t < temps.size(); ++t)
    if (requests[t].first >= 0)
      buffers[temps[t]].arenaOffset = offsets[t];
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
    o.host = b.host;
    if (b.kind == "temp")
      o.offset = b.arenaOffset < 0 ? int64_t(0) : b.arenaOffset;
    if (b.kind == "const") {
      o.blob = "consts.bin";
      o.blobOffset = b.blobOffset;
    }
    program.buffers.push_back(std::move(o));
  }
  program.steps = std::move(steps);
  program.derived = std::move(derived);
  // The layers, when every attention reads a layer of the KV cache (an LLM
  // program; GpuProgram.h "layers"): layer i is the steps after the
  // previous attention up to its own.
  bool allFromCache = llvm::all_of(attentionLayers, [](auto &a) { return a.second >= 0; });
  int64_t first = 0;
  for (auto [step, layer] : attentionLayers) {
    if (!allFromCache)
      break;
    program.layers.push_back({layer, first, step});
    first = step + 1;
  }
  return success();
}

} // namespace detail

using namespace detail;

KernelModules planKernelModules(func::FuncOp func) {
  bool attention = false, indexer = false, sparse = false, moe = false, fp8 = false;
  func.walk([&](linalg::GenericOp g) {
    auto call = g.getLibraryCallAttr();
    if (!call)
      return;
    attention |= call.getValue() == kAttention;
    indexer |= call.getValue() == kIndexer;
    sparse |= call.getValue() == kSparseAttention;
    moe |= call.getValue() == kRoutedExperts;
    // (FP8 expert GEMMs quantise their token rows in the moe module's own
    // gather and SwiGLU kernels, not with this module.)
    fp8 |= call.getValue() == kFp8Quantize;
  });
  KernelModules m;
  int next = 1;
  for (auto [used, index] : {std::pair<bool, int *>{attention, &m.attention},
                             {indexer, &m.indexer},
                             {sparse, &m.sparseAttention},
                             {moe, &m.moe},
                             {fp8, &m.fp8}})
    if (used)
      *index = next++;
  return m;
}

LogicalResult buildHostProgram(func::FuncOp func, const ArgumentRoles &roles,
                               const KernelModules &modules, HostProgram &program) {
  return Evaluator(func, roles, modules, program).run();
}

} // namespace h20::gpu
