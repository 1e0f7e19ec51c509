//===- SymbolicEvaluator.cpp - symbolic shapes and index tensors ---------===//
//
// Each rule follows the ONNX operator specification of the op it models;
// anything not understood yields "unknown" (never a guess), which callers
// treat as "cannot prove".
//
//===----------------------------------------------------------------------===//
#include "h20/Analysis/SymbolicEvaluator.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"
#include "h20/Dialect/KV/IR/KVDialect.h"
#include "h20/Dialect/Onnx/IR/OnnxDialect.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace h20;
namespace ox = h20::onnx;

namespace {

using Dims = SmallVector<SymExpr>;

bool isOne(const SymExpr &d) { return constantOf(d) == std::optional<int64_t>(1); }
bool isZero(const SymExpr &d) { return constantOf(d) == std::optional<int64_t>(0); }

/// Numpy-style broadcast of several shapes (ONNX "multidirectional").
std::optional<Dims> broadcast(ArrayRef<Dims> shapes) {
  size_t rank = 0;
  for (const Dims &s : shapes)
    rank = std::max(rank, s.size());
  Dims out(rank, symConst(1));
  for (size_t k = 0; k < rank; ++k) {
    for (const Dims &s : shapes) {
      if (k + s.size() < rank)
        continue;
      const SymExpr &d = s[k + s.size() - rank];
      if (isOne(d))
        continue;
      if (isOne(out[k]))
        out[k] = d;
      else if (!provablyEqual(out[k], d))
        return std::nullopt;
    }
  }
  return out;
}

/// Re-expresses an operand's element in the indices of a broadcast result.
SymExpr broadcastElem(const SymTensor &t, ArrayRef<SymExpr> outDims) {
  size_t rank = outDims.size(), r = t.dims.size();
  return substituteIndices(t.elem, [&](int64_t k) {
    int64_t outK = k + static_cast<int64_t>(rank - r);
    if (isOne(t.dims[k]) && !isOne(outDims[outK]))
      return symConst(0);
    return symIndex(outK);
  });
}

/// Element i of a small vector as a select chain over `index`; null (no
/// element expression) for an empty vector, e.g. a 0-element constant.
SymExpr selectChain(ArrayRef<SymExpr> values, SymExpr index) {
  if (values.empty())
    return nullptr;
  SymExpr e = values.back();
  for (int64_t i = static_cast<int64_t>(values.size()) - 2; i >= 0; --i)
    e = symSelect(symEq(index, symConst(i)), values[i], e);
  return e;
}

/// Clamps a Slice bound to [0, dim] per the ONNX Slice spec (step 1).
std::optional<SymExpr> sliceBound(SymExpr v, const SymExpr &dim) {
  if (auto c = constantOf(v)) {
    if (*c < 0)
      v = symAdd(dim, v);
    else if (*c >= (int64_t(1) << 62))
      return dim;
  }
  if (auto c = constantOf(v); c && *c < 0)
    return symConst(0);
  auto cv = constantOf(v), cd = constantOf(dim);
  if (cv && cd)
    return symConst(std::min(*cv, *cd));
  // Symbolic: accept only bounds provably within [0, dim], using that every
  // symbol (a dynamic dimension) is at least 1.
  auto diff = linearOf(symSub(dim, v));
  if (diff && diff->isConstant() && diff->constant >= 0)
    return v;
  if (cv && *cv >= 0) {
    auto ld = linearOf(dim);
    if (ld && llvm::all_of(ld->coeffs, [](const auto &kv) {
          return kv.first.first && kv.second > 0;
        })) {
      int64_t lowest = ld->constant;
      for (const auto &kv : ld->coeffs)
        lowest += kv.second;
      if (*cv <= lowest)
        return v;
    }
  }
  return std::nullopt;
}

/// ceil(a / b) for b != 0 (either sign), without overflow for |b| >= 1.
int64_t ceilDiv(int64_t a, int64_t b) {
  if (b == -1)
    return a == INT64_MIN ? INT64_MAX : -a;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q;
}

/// The value of a 0-d or 1-element float constant.
std::optional<double> floatConstant(Value v) {
  auto c = v.getDefiningOp<ox::ConstantOp>();
  auto attr = c ? dyn_cast<DenseFPElementsAttr>(c.getValue()) : nullptr;
  if (!attr || attr.getNumElements() != 1)
    return std::nullopt;
  return (*attr.getValues<APFloat>().begin()).convertToDouble();
}

/// The length of a float Range of constant start, limit and delta:
/// max(ceil((limit - start) / delta), 0) with limit - start taken in the
/// element type and the quotient in double, as the lowering (and ONNX
/// Runtime) compute it.
std::optional<int64_t> floatRangeLength(Operation *op) {
  auto start = floatConstant(op->getOperand(0)), limit = floatConstant(op->getOperand(1)),
       delta = floatConstant(op->getOperand(2));
  if (!start || !limit || !delta || *delta == 0)
    return std::nullopt;
  Type elt = cast<ShapedType>(op->getResult(0).getType()).getElementType();
  double diff = *limit - *start;
  if (elt.isF32())
    diff = static_cast<float>(*limit) - static_cast<float>(*start);
  else if (!elt.isF64())
    return std::nullopt;
  double n = std::ceil(diff / *delta);
  if (!(n < 9.0e18))
    return std::nullopt; // inf, NaN or beyond int64
  return std::max<int64_t>(static_cast<int64_t>(n), 0);
}

/// A Slice bound with a step other than 1, per ONNX Slice-13: negative
/// counts from the end; step > 0 clamps to [0, dim]; step < 0 clamps a
/// start to [0, dim - 1] and an end to [-1, dim - 1]. Exact for a constant
/// dim; over a symbolic dim only the forms whose clamp is certain (every
/// symbol is >= 1): the INT64 sentinels and, for step < 0, a start of -1.
std::optional<SymExpr> steppedSliceBound(SymExpr v, const SymExpr &dim, int64_t step,
                                         bool isEnd) {
  auto c = constantOf(v);
  if (!c)
    return std::nullopt;
  constexpr int64_t kHuge = int64_t(1) << 62;
  if (auto d = constantOf(dim)) {
    // max, then min, as the lowering: an empty dim gives -1 for step < 0.
    int64_t x = *c < 0 ? *c + *d : *c;
    if (step > 0)
      return symConst(std::min<int64_t>(std::max<int64_t>(x, 0), *d));
    return symConst(std::min<int64_t>(std::max<int64_t>(x, isEnd ? -1 : 0), *d - 1));
  }
  if (step > 0)
    return sliceBound(v, dim);
  if (*c >= kHuge)
    return symSub(dim, symConst(1));
  if (*c <= -kHuge)
    return symConst(isEnd ? -1 : 0);
  if (!isEnd && *c == -1)
    return symSub(dim, symConst(1));
  return std::nullopt;
}

/// Splits a symbolic dim into constant factor and symbolic factors, for
/// Reshape's -1 inference (product(in) / product(known out)).
bool factor(const SymExpr &d, int64_t &constant, SmallVectorImpl<SymExpr> &syms) {
  if (auto c = constantOf(d)) {
    constant *= *c;
    return true;
  }
  auto l = linearOf(d);
  if (!l)
    return false;
  // c * x with a single atom: factor the coefficient out.
  if (l->coeffs.size() == 1 && l->constant == 0) {
    auto [key, coeff] = *l->coeffs.begin();
    constant *= coeff;
    syms.push_back(key.first ? symSymbol(key.second) : symIndex(key.second));
    return true;
  }
  syms.push_back(d);
  return true;
}

/// Reshape's -1 dim: product(in) / product(the other out dims), or null
/// when that quotient has no closed form (symbolic factors that do not
/// cancel, a constant that does not divide).
SymExpr inferredReshapeDim(ArrayRef<SymExpr> in, ArrayRef<SymExpr> out) {
  int64_t cin = 1, cout = 1;
  SmallVector<SymExpr> sin, sout;
  for (const SymExpr &d : in)
    if (!factor(d, cin, sin))
      return nullptr;
  for (const SymExpr &d : out)
    if (d && !factor(d, cout, sout))
      return nullptr;
  for (const SymExpr &s : sout) {
    auto it = llvm::find_if(sin, [&](const SymExpr &x) { return provablyEqual(x, s); });
    if (it == sin.end())
      return nullptr;
    sin.erase(it);
  }
  if (cout == 0 || cin % cout != 0 || sin.size() > 1)
    return nullptr;
  SymExpr inferred = symConst(cin / cout);
  return sin.size() == 1 ? symMul(inferred, sin[0]) : inferred;
}

} // namespace

SymbolicEvaluator::SymbolicEvaluator(func::FuncOp func) {
  llvm::StringMap<SymExpr> byName;
  for (auto [argNo, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    auto params = func.getArgAttrOfType<ArrayAttr>(argNo, "onnx.dim_params");
    SymTensor t;
    for (int64_t k = 0; k < type.getRank(); ++k) {
      if (!type.isDynamicDim(k)) {
        t.dims.push_back(symConst(type.getDimSize(k)));
        continue;
      }
      std::string name;
      if (params && k < static_cast<int64_t>(params.size()))
        if (auto s = dyn_cast<StringAttr>(params[k]))
          name = s.str();
      if (name.empty()) {
        t.dims.push_back(newSymbol("arg" + std::to_string(argNo) + "_d" +
                                   std::to_string(k)));
        continue;
      }
      auto it = byName.find(name);
      if (it == byName.end())
        it = byName.insert({name, newSymbol(name)}).first;
      t.dims.push_back(it->second);
    }
    cache[arg] = std::make_unique<SymTensor>(std::move(t));
  }
}

SymExpr SymbolicEvaluator::newSymbol(const std::string &name) {
  names.push_back(name);
  return symSymbol(static_cast<int64_t>(names.size()) - 1);
}

SymTensor SymbolicEvaluator::fromType(Value v) {
  SymTensor t;
  auto type = cast<RankedTensorType>(v.getType());
  for (int64_t k = 0; k < type.getRank(); ++k)
    t.dims.push_back(type.isDynamicDim(k)
                         ? newSymbol("unknown" + std::to_string(names.size()))
                         : symConst(type.getDimSize(k)));
  return t;
}

const SymTensor *SymbolicEvaluator::get(Value v) {
  auto it = cache.find(v);
  if (it != cache.end())
    return it->second.get();
  // Evaluate the uncached producers first, deepest first, with an explicit
  // stack: compute() reads its operands through get(), so a chain of N ops
  // would otherwise recurse N frames deep (a 10k-node chain overflowed the
  // stack; a real 8B export has ~2.7k nodes). After this loop every operand
  // of v's producer is cached and compute(v) recurses one level only.
  SmallVector<std::pair<Operation *, bool>> stack;
  llvm::SmallPtrSet<Operation *, 16> visited;
  if (Operation *def = v.getDefiningOp())
    for (Value operand : def->getOperands())
      if (Operation *p = operand.getDefiningOp(); p && !cache.count(operand) && visited.insert(p).second)
        stack.push_back({p, false});
  while (!stack.empty()) {
    auto [op, expanded] = stack.back();
    if (expanded) {
      stack.pop_back();
      for (Value r : op->getResults())
        if (!cache.count(r))
          cacheComputed(r);
      continue;
    }
    stack.back().second = true;
    for (Value operand : op->getOperands())
      if (Operation *p = operand.getDefiningOp(); p && !cache.count(operand) && visited.insert(p).second)
        stack.push_back({p, false});
  }
  return cacheComputed(v);
}

const SymTensor *SymbolicEvaluator::cacheComputed(Value v) {
  std::optional<SymTensor> t = compute(v);
  if (!t && isa<RankedTensorType>(v.getType()))
    t = fromType(v);
  std::unique_ptr<SymTensor> entry;
  if (t)
    entry = std::make_unique<SymTensor>(std::move(*t));
  const SymTensor *result = entry.get();
  cache[v] = std::move(entry);
  return result;
}

std::optional<Dims> SymbolicEvaluator::shapeOf(Value v) {
  if (const SymTensor *t = get(v))
    return t->dims;
  return std::nullopt;
}

std::optional<Dims> SymbolicEvaluator::vectorOf(Value v) {
  const SymTensor *t = get(v);
  if (!t || t->dims.size() != 1)
    return std::nullopt;
  auto n = constantOf(t->dims[0]);
  if (n == std::optional<int64_t>(0))
    return Dims{}; // e.g. an empty `axes` list: no elements to describe
  if (!t->elem)
    return std::nullopt;
  if (!n || *n > 64)
    return std::nullopt;
  Dims out;
  for (int64_t i = 0; i < *n; ++i)
    out.push_back(substituteIndices(t->elem, [&](int64_t) { return symConst(i); }));
  return out;
}

std::optional<SmallVector<int64_t>> SymbolicEvaluator::axesOperand(Operation *op, unsigned index,
                                                                   int64_t rank, int64_t count) {
  SmallVector<int64_t> axes;
  if (op->getNumOperands() <= index || isa<NoneType>(op->getOperand(index).getType())) {
    for (int64_t k = 0; k < count; ++k)
      axes.push_back(k);
    return axes;
  }
  auto given = vectorOf(op->getOperand(index));
  if (!given)
    return std::nullopt;
  for (const SymExpr &x : *given) {
    auto c = constantOf(x);
    if (!c || *c < -rank || *c >= rank)
      return std::nullopt;
    axes.push_back(*c < 0 ? *c + rank : *c);
  }
  return axes;
}

std::optional<SymExpr> SymbolicEvaluator::scalarOf(Value v) {
  const SymTensor *t = get(v);
  if (!t || !t->elem)
    return std::nullopt;
  for (const SymExpr &d : t->dims)
    if (!isOne(d))
      return std::nullopt;
  return substituteIndices(t->elem, [](int64_t) { return symConst(0); });
}

bool SymbolicEvaluator::isConstantOnDomain(const SymExpr &e, ArrayRef<SymExpr> dims,
                                           int64_t value) {
  if (dims.size() > kMaxRank)
    return false;
  auto differs = toPresburgerSet(symNot(symEq(e, symConst(value))), kMaxRank,
                                 numSymbols());
  auto domain = domainSet(dims, kMaxRank, numSymbols());
  return differs && domain && differs->intersect(*domain).isIntegerEmpty();
}

std::optional<SymTensor> SymbolicEvaluator::compute(Value v) {
  if (!isa<TensorType>(v.getType()))
    return std::nullopt;
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return std::nullopt;
  return computeOpResult(result.getOwner(), result.getResultNumber());
}

namespace {

/// computeOpResult for one op result: the shape (and, for integer tensors,
/// the elements) of result `idx` of `op` from its operands', one method
/// per op kind that needs more than a few lines.
struct OpResultEvaluator {
  SymbolicEvaluator &ev;
  Operation *op;
  unsigned idx;
  Type elemType;
  bool integral;
  /// The evaluator's private state this needs: its symbol names, the
  /// symbols of -1 reshape dims, and how it makes a fresh symbol.
  SmallVectorImpl<std::string> &names;
  std::map<std::string, SymExpr> &reshapeSymbols;
  llvm::function_ref<SymExpr(const std::string &)> makeSymbol;

  OpResultEvaluator(SymbolicEvaluator &ev, Operation *op, unsigned idx,
                    SmallVectorImpl<std::string> &names,
                    std::map<std::string, SymExpr> &reshapeSymbols,
                    llvm::function_ref<SymExpr(const std::string &)> makeSymbol)
      : ev(ev), op(op), idx(idx),
        elemType(cast<ShapedType>(op->getResult(idx).getType()).getElementType()),
        integral(elemType.isIntOrIndex()), names(names), reshapeSymbols(reshapeSymbols),
        makeSymbol(makeSymbol) {}

  std::optional<SymTensor> run();

  const SymTensor *get(Value v) { return ev.get(v); }
  std::optional<Dims> shapeOf(Value v) { return ev.shapeOf(v); }
  std::optional<Dims> vectorOf(Value v) { return ev.vectorOf(v); }
  std::optional<SymExpr> scalarOf(Value v) { return ev.scalarOf(v); }
  std::optional<SmallVector<int64_t>> axesOperand(Operation *o, unsigned index, int64_t rank,
                                                  int64_t count) {
    return ev.axesOperand(o, index, rank, count);
  }
  bool isConstantOnDomain(const SymExpr &e, ArrayRef<SymExpr> dims, int64_t value) {
    return ev.isConstantOnDomain(e, dims, value);
  }
  SymExpr newSymbol(const std::string &name) { return makeSymbol(name); }

  /// Operand i's description; null when absent (none) or unknown.
  const SymTensor *operand(unsigned i) {
    if (i >= op->getNumOperands() || isa<NoneType>(op->getOperand(i).getType()))
      return nullptr;
    return get(op->getOperand(i));
  }
  /// The shape of operand i, elements unknown.
  std::optional<SymTensor> sameAs(unsigned i) {
    const SymTensor *t = operand(i);
    if (!t)
      return std::nullopt;
    return SymTensor{t->dims, nullptr};
  }
  std::optional<SymTensor> elementwise(llvm::function_ref<SymExpr(ArrayRef<SymExpr>)> fn);

  std::optional<SymTensor> evalConstant(ox::ConstantOp c);
  std::optional<SymTensor> evalShape(ox::ShapeOp s);
  std::optional<SymTensor> evalRange(ox::RangeOp);
  std::optional<SymTensor> evalUnsqueeze(ox::UnsqueezeOp);
  std::optional<SymTensor> evalSqueeze(ox::SqueezeOp);
  std::optional<SymTensor> evalReshape(ox::ReshapeOp r);
  std::optional<SymTensor> evalTranspose(ox::TransposeOp tr);
  std::optional<SymTensor> evalConcat(ox::ConcatOp c);
  std::optional<SymTensor> evalSlice(ox::SliceOp);
  std::optional<SymTensor> evalExpand(ox::ExpandOp);
  std::optional<SymTensor> evalGather(ox::GatherOp g);
  std::optional<SymTensor> evalSplit(ox::SplitOp split);
  std::optional<SymTensor> evalTopK(ox::TopKOp t);
  std::optional<SymTensor> evalGatherND(ox::GatherNDOp g);
  std::optional<SymTensor> evalLayerNormalization(ox::LayerNormalizationOp n);
  std::optional<SymTensor> evalCumSum(ox::CumSumOp c);
  std::optional<SymTensor> evalCast(ox::CastOp c);
  std::optional<SymTensor> evalMod(ox::ModOp m);
  std::optional<SymTensor> evalConstantOfShape(ox::ConstantOfShapeOp c);
  std::optional<SymTensor> evalFlatten(ox::FlattenOp f);
  std::optional<SymTensor> evalPad(ox::PadOp);
  std::optional<SymTensor> evalIndexerPicks();
  std::optional<SymTensor> evalReduction();
  std::optional<SymTensor> evalMatMul(ox::MatMulOp);
  std::optional<SymTensor> evalView(kv::ViewOp view);
};

/// Elementwise ops with broadcasting; `fn` combines operand elements.
std::optional<SymTensor>
OpResultEvaluator::elementwise(llvm::function_ref<SymExpr(ArrayRef<SymExpr>)> fn) {

    SmallVector<const SymTensor *> ins;
    SmallVector<Dims> shapes;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      const SymTensor *t = operand(i);
      if (!t)
        return std::nullopt;
      ins.push_back(t);
      shapes.push_back(t->dims);
    }
    auto dims = broadcast(shapes);
    if (!dims)
      return std::nullopt;
    SymTensor out{*dims, nullptr};
    if (!integral && !isa<ox::WhereOp>(op))
      return out;
    SmallVector<SymExpr> elems;
    for (const SymTensor *t : ins) {
      if (!t->elem)
        return out;
      elems.push_back(broadcastElem(*t, *dims));
    }
    out.elem = fn(elems);
    return out;
}

std::optional<SymTensor> OpResultEvaluator::evalConstant(ox::ConstantOp c) {
  auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
  auto type = cast<RankedTensorType>(c->getResult(0).getType());
  SymTensor t;
  for (int64_t d : type.getShape())
    t.dims.push_back(symConst(d));
  if (!attr || !attr.getElementType().isIntOrIndex())
    return t;
  if (attr.isSplat()) {
    APInt x = attr.getSplatValue<APInt>();
    t.elem = symConst(x.getBitWidth() == 1 ? x.getZExtValue() : x.getSExtValue());
    return t;
  }
  if (attr.getNumElements() > 64)
    return t;
  SmallVector<SymExpr> values;
  for (APInt x : attr.getValues<APInt>())
    values.push_back(symConst(x.getBitWidth() == 1 ? x.getZExtValue()
                                                   : x.getSExtValue()));
  // Row-major linear index.
  SymExpr linear = symConst(0);
  int64_t stride = 1;
  for (int64_t k = type.getRank() - 1; k >= 0; --k) {
    linear = symAdd(linear, symMul(symConst(stride), symIndex(k)));
    stride *= type.getDimSize(k);
  }
  t.elem = selectChain(values, linear);
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalShape(ox::ShapeOp s) {
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  int64_t r = in->dims.size();
  int64_t start = s.getStart().value_or(0), end = s.getEnd().value_or(r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  Dims values(in->dims.begin() + start, in->dims.begin() + end);
  SymTensor t{{symConst(end - start)}, nullptr};
  if (!values.empty())
    t.elem = selectChain(values, symIndex(0));
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalRange(ox::RangeOp) {
  // ONNX Range-11: max(ceil((limit - start) / delta), 0) elements
  // start + i * delta; a length without a closed form is a fresh
  // symbol (the lowering computes it at run time).
  if (!integral) {
    if (auto n = floatRangeLength(op))
      return SymTensor{{symConst(*n)}, nullptr};
    return SymTensor{{newSymbol("range" + std::to_string(names.size()))}, nullptr};
  }
  auto start = scalarOf(op->getOperand(0)), limit = scalarOf(op->getOperand(1)),
       delta = scalarOf(op->getOperand(2));
  auto step = delta ? constantOf(*delta) : std::nullopt;
  if (!start || !limit || !step || *step == 0)
    return SymTensor{{newSymbol("range" + std::to_string(names.size()))}, nullptr};
  SymExpr elem = symAdd(*start, symMul(symConst(*step), symIndex(0)));
  SymExpr diff = symSub(*limit, *start);
  if (auto d = constantOf(diff))
    return SymTensor{{symConst(std::max<int64_t>(ceilDiv(*d, *step), 0))}, elem};
  if (*step == 1)
    return SymTensor{{diff}, elem};
  if (*step == -1)
    return SymTensor{{symSub(*start, *limit)}, elem};
  return SymTensor{{newSymbol("range" + std::to_string(names.size()))}, elem};
}

std::optional<SymTensor> OpResultEvaluator::evalUnsqueeze(ox::UnsqueezeOp) {
  const SymTensor *in = operand(0);
  auto axes = vectorOf(op->getOperand(1));
  if (!in || !axes)
    return std::nullopt;
  int64_t outRank = in->dims.size() + axes->size();
  SmallVector<bool> inserted(outRank, false);
  for (const SymExpr &a : *axes) {
    auto c = constantOf(a);
    if (!c)
      return std::nullopt;
    int64_t ax = *c < 0 ? *c + outRank : *c;
    if (ax < 0 || ax >= outRank)
      return std::nullopt;
    inserted[ax] = true;
  }
  SymTensor t;
  SmallVector<int64_t> inToOut;
  for (int64_t k = 0, j = 0; k < outRank; ++k) {
    if (inserted[k]) {
      t.dims.push_back(symConst(1));
    } else {
      t.dims.push_back(in->dims[j++]);
      inToOut.push_back(k);
    }
  }
  if (in->elem)
    t.elem = substituteIndices(in->elem, [&](int64_t k) { return symIndex(inToOut[k]); });
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalSqueeze(ox::SqueezeOp) {
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  int64_t r = in->dims.size();
  SmallVector<bool> removed(r, false);
  if (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType())) {
    auto axes = vectorOf(op->getOperand(1));
    if (!axes)
      return std::nullopt;
    for (const SymExpr &a : *axes) {
      auto c = constantOf(a);
      if (!c)
        return std::nullopt;
      int64_t ax = *c < 0 ? *c + r : *c;
      if (ax < 0 || ax >= r || !isOne(in->dims[ax]))
        return std::nullopt;
      removed[ax] = true;
    }
  } else {
    for (int64_t k = 0; k < r; ++k)
      removed[k] = isOne(in->dims[k]);
  }
  SymTensor t;
  SmallVector<int64_t> inToOut(r, 0);
  for (int64_t k = 0; k < r; ++k) {
    if (removed[k])
      continue;
    inToOut[k] = t.dims.size();
    t.dims.push_back(in->dims[k]);
  }
  if (in->elem)
    t.elem = substituteIndices(in->elem, [&](int64_t k) {
      return removed[k] ? symConst(0) : symIndex(inToOut[k]);
    });
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalReshape(ox::ReshapeOp r) {
  const SymTensor *in = operand(0);
  auto target = vectorOf(op->getOperand(1));
  if (!in || !target)
    return std::nullopt;
  bool allowZero = r.getAllowzero().value_or(0) != 0;
  Dims out;
  int64_t inferAt = -1;
  for (auto [k, d] : llvm::enumerate(*target)) {
    auto c = constantOf(d);
    // ONNX Reshape: at most one -1, no other negative dim (h20-infer-
    // shapes reports such a shape, naming the node).
    if (c && (*c < -1 || (*c == -1 && inferAt >= 0)))
      return std::nullopt;
    if (c && *c == -1) {
      inferAt = k;
      out.push_back(nullptr);
    } else if (c && *c == 0 && !allowZero) {
      if (k >= in->dims.size())
        return std::nullopt;
      out.push_back(in->dims[k]);
    } else {
      out.push_back(d);
    }
  }
  if (inferAt >= 0) {
    // The -1 dim: the input's size over the others', when the
    // division is exact in closed form; else a fresh symbol (the rank
    // stays known, e.g. [-1, r, d] of a dim that is itself unknown).
    out[inferAt] = inferredReshapeDim(in->dims, out);
    if (!out[inferAt]) {
      // One symbol per (input dims, target) so equal reshapes of equal
      // shapes stay provably equal (e.g. a compressor's kv and gate).
      std::string key;
      for (const SymExpr &d : in->dims)
        key += toString(d) + ",";
      key += "->";
      for (const SymExpr &d : out)
        key += (d ? toString(d) : std::string("-1")) + ",";
      auto [it, added] = reshapeSymbols.try_emplace(key, nullptr);
      if (added)
        it->second = newSymbol("reshape" + std::to_string(names.size()));
      out[inferAt] = it->second;
    }
  }
  SymTensor t{out, nullptr};
  if (!in->elem)
    return t;
  // Elements carry over only when the reshape just adds/removes unit dims.
  SmallVector<int64_t> inNonUnit, outNonUnit;
  for (auto [k, d] : llvm::enumerate(in->dims))
    if (!isOne(d))
      inNonUnit.push_back(k);
  for (auto [k, d] : llvm::enumerate(out))
    if (!isOne(d))
      outNonUnit.push_back(k);
  if (inNonUnit.size() != outNonUnit.size())
    return t;
  for (auto [a, b] : llvm::zip(inNonUnit, outNonUnit))
    if (!provablyEqual(in->dims[a], out[b]))
      return t;
  t.elem = substituteIndices(in->elem, [&](int64_t k) {
    auto it = llvm::find(inNonUnit, k);
    return it == inNonUnit.end() ? symConst(0)
                                 : symIndex(outNonUnit[it - inNonUnit.begin()]);
  });
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalTranspose(ox::TransposeOp tr) {
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  int64_t r = in->dims.size();
  SmallVector<int64_t> perm;
  if (auto p = tr.getPerm())
    perm.assign(p->begin(), p->end());
  else
    for (int64_t k = r - 1; k >= 0; --k)
      perm.push_back(k);
  if (static_cast<int64_t>(perm.size()) != r)
    return std::nullopt;
  SymTensor t;
  for (int64_t p : perm)
    t.dims.push_back(in->dims[p]);
  if (in->elem) {
    SmallVector<int64_t> inv(r);
    for (int64_t k = 0; k < r; ++k)
      inv[perm[k]] = k;
    t.elem = substituteIndices(in->elem, [&](int64_t k) { return symIndex(inv[k]); });
  }
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalConcat(ox::ConcatOp c) {
  SmallVector<const SymTensor *> ins;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    const SymTensor *t = operand(i);
    if (!t)
      return std::nullopt;
    ins.push_back(t);
  }
  int64_t r = ins[0]->dims.size();
  int64_t axis = c.getAxis() < 0 ? c.getAxis() + r : c.getAxis();
  // ONNX Concat: one rank for all inputs, axis in [-r, r); anything
  // else is left to the verifier's message.
  if (axis < 0 || axis >= r ||
      llvm::any_of(ins, [&](const SymTensor *x) { return int64_t(x->dims.size()) != r; }))
    return std::nullopt;
  SymTensor t{ins[0]->dims, nullptr};
  SymExpr total = symConst(0);
  for (const SymTensor *in : ins)
    total = symAdd(total, in->dims[axis]);
  t.dims[axis] = total;
  // Pieces of length 0 along the axis contribute no element (an empty
  // constant has no element expression).
  llvm::erase_if(ins, [&](const SymTensor *x) { return isZero(x->dims[axis]); });
  if (ins.empty())
    return t;
  bool haveElems = llvm::all_of(ins, [](const SymTensor *x) { return x->elem != nullptr; });
  if (!haveElems)
    return t;
  // Piecewise along `axis`, built back to front.
  SymExpr offset = total;
  SymExpr e;
  for (int64_t i = ins.size() - 1; i >= 0; --i) {
    offset = symSub(offset, ins[i]->dims[axis]);
    SymExpr piece = substituteIndices(ins[i]->elem, [&](int64_t k) {
      return k == axis ? symSub(symIndex(k), offset) : symIndex(k);
    });
    e = e ? symSelect(symLt(symIndex(axis), symAdd(offset, ins[i]->dims[axis])), piece, e)
          : piece;
  }
  t.elem = e;
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalSlice(ox::SliceOp) {
  const SymTensor *in = operand(0);
  auto starts = vectorOf(op->getOperand(1)), ends = vectorOf(op->getOperand(2));
  if (in && (!starts || !ends)) {
    // Bounds not known in closed form (e.g. (S / r) * r): the sliced
    // dims become fresh symbols, the rank stays known.
    auto st = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    if (!st || st.getRank() != 1 || st.isDynamicDim(0))
      return std::nullopt;
    Dims unknown;
    for (int64_t k = 0; k < st.getDimSize(0); ++k)
      unknown.push_back(nullptr);
    if (!starts)
      starts = unknown;
    if (!ends)
      ends = unknown;
  }
  if (!in || !starts || !ends || starts->size() != ends->size())
    return std::nullopt;
  int64_t r = in->dims.size();
  auto axesOr = axesOperand(op, 3, r, starts->size());
  if (!axesOr)
    return std::nullopt;
  SmallVector<int64_t> axes = std::move(*axesOr);
  // Steps: constant and non-zero (ONNX Slice-13); a step other than
  // 1 goes through steppedSliceBound, and a length without a closed
  // form is a fresh symbol (the lowering computes it at run time).
  SmallVector<int64_t> steps(starts->size(), 1);
  if (op->getNumOperands() > 4 && !isa<NoneType>(op->getOperand(4).getType())) {
    auto given = vectorOf(op->getOperand(4));
    if (!given || given->size() != starts->size())
      return std::nullopt;
    for (auto [i, s] : llvm::enumerate(*given)) {
      auto c = constantOf(s);
      if (!c || *c == 0)
        return std::nullopt;
      steps[i] = *c;
    }
  }
  SymTensor t{in->dims, nullptr};
  SmallVector<SymExpr> offsets(r, symConst(0));
  SmallVector<int64_t> strides(r, 1);
  for (auto [i, ax] : llvm::enumerate(axes)) {
    if (ax < 0 || ax >= r)
      return std::nullopt;
    auto fresh = [&, a = ax] {
      offsets[a] = nullptr;
      t.dims[a] = newSymbol("slice" + std::to_string(names.size()));
    };
    if (!(*starts)[i] || !(*ends)[i]) {
      fresh();
      continue;
    }
    if (steps[i] != 1) {
      auto s = steppedSliceBound((*starts)[i], in->dims[ax], steps[i], false);
      auto e = steppedSliceBound((*ends)[i], in->dims[ax], steps[i], true);
      if (!s || !e) {
        fresh();
        continue;
      }
      SymExpr diff = symSub(*e, *s);
      offsets[ax] = *s;
      strides[ax] = steps[i];
      if (auto d = constantOf(diff))
        t.dims[ax] = symConst(std::max<int64_t>(ceilDiv(*d, steps[i]), 0));
      else if (steps[i] == -1)
        t.dims[ax] = symSub(*s, *e);
      else
        t.dims[ax] = newSymbol("slice" + std::to_string(names.size()));
      continue;
    }
    auto s = sliceBound((*starts)[i], in->dims[ax]);
    auto e = sliceBound((*ends)[i], in->dims[ax]);
    if (!s || !e)
      return std::nullopt;
    offsets[ax] = *s;
    t.dims[ax] = symSub(*e, *s);
  }
  if (in->elem && llvm::all_of(offsets, [](const SymExpr &o) { return bool(o); }))
    t.elem = substituteIndices(in->elem, [&](int64_t k) {
      SymExpr i = strides[k] == 1 ? symIndex(k) : symMul(symConst(strides[k]), symIndex(k));
      return symAdd(i, offsets[k]);
    });
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalExpand(ox::ExpandOp) {
  const SymTensor *in = operand(0);
  auto shape = vectorOf(op->getOperand(1));
  if (!in || !shape)
    return std::nullopt;
  auto dims = broadcast({in->dims, *shape});
  if (!dims)
    return std::nullopt;
  SymTensor t{*dims, nullptr};
  if (in->elem)
    t.elem = broadcastElem(*in, *dims);
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalGather(ox::GatherOp g) {
  const SymTensor *data = operand(0), *ind = operand(1);
  if (!data || !ind)
    return std::nullopt;
  int64_t r = data->dims.size(), q = ind->dims.size();
  int64_t axis = g.getAxis().value_or(0);
  if (axis < 0)
    axis += r;
  SymTensor t;
  t.dims.append(data->dims.begin(), data->dims.begin() + axis);
  t.dims.append(ind->dims.begin(), ind->dims.end());
  t.dims.append(data->dims.begin() + axis + 1, data->dims.end());
  if (data->elem && ind->elem) {
    SymExpr idx = substituteIndices(ind->elem, [&](int64_t k) { return symIndex(axis + k); });
    idx = symSelect(symLt(idx, symConst(0)), symAdd(idx, data->dims[axis]), idx);
    t.elem = substituteIndices(data->elem, [&](int64_t k) {
      if (k < axis) return symIndex(k);
      if (k == axis) return idx;
      return symIndex(k - 1 + q);
    });
  }
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalSplit(ox::SplitOp split) {
  // Output idx: the input's shape with the axis dim split[idx] (the
  // `split` input), else an equal share: ceil(d / n) each, the last
  // output what remains (ONNX Split-18; n = number of outputs).
  const SymTensor *in = operand(0);
  if (!in || in->dims.empty())
    return std::nullopt;
  int64_t r = in->dims.size(), axis = split.getAxis().value_or(0);
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    return std::nullopt;
  SymTensor t{in->dims, nullptr};
  int64_t n = op->getNumResults();
  if (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType())) {
    auto sizes = vectorOf(op->getOperand(1));
    if (!sizes || static_cast<int64_t>(sizes->size()) != n)
      return std::nullopt;
    t.dims[axis] = (*sizes)[idx];
    return t;
  }
  if (n == 1)
    return t;
  auto d = constantOf(in->dims[axis]);
  if (!d)
    return std::nullopt;
  int64_t chunk = (*d + n - 1) / n;
  t.dims[axis] = symConst(std::clamp<int64_t>(*d - chunk * static_cast<int64_t>(idx), 0, chunk));
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalTopK(ox::TopKOp t) {
  // X's shape with the axis dim replaced by K: K's value when it is
  // known symbolically (a constant, a shape element, a Min of them),
  // else a fresh symbol, one for both outputs.
  const SymTensor *x = operand(0);
  if (!x || x->dims.empty())
    return std::nullopt;
  int64_t r = x->dims.size(), axis = t.getAxis().value_or(-1);
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    return std::nullopt;
  SymTensor out{x->dims, nullptr};
  if (auto k = scalarOf(op->getOperand(1)))
    out.dims[axis] = *k;
  else if (idx == 1 && get(op->getResult(0)))
    out.dims[axis] = get(op->getResult(0))->dims[axis];
  else
    out.dims[axis] = newSymbol("topk_k" + std::to_string(names.size()));
  return out;
}

std::optional<SymTensor> OpResultEvaluator::evalGatherND(ox::GatherNDOp g) {
  // ONNX GatherND-13: indices.shape[:-1] + data.shape[b + m:] with
  // b = batch_dims and m = indices' last dim; a negative index counts
  // from the end of its data dim.
  const SymTensor *data = operand(0), *ind = operand(1);
  int64_t bd = g.getBatchDims().value_or(0);
  if (!data || !ind || ind->dims.empty())
    return std::nullopt;
  auto m = constantOf(ind->dims.back());
  int64_t q = ind->dims.size(), r = data->dims.size();
  if (!m || *m < 1 || bd < 0 || bd >= std::min(q, r) || bd + *m > r)
    return std::nullopt;
  SymTensor t;
  t.dims.append(ind->dims.begin(), ind->dims.end() - 1);
  t.dims.append(data->dims.begin() + bd + *m, data->dims.end());
  if (data->elem && ind->elem)
    t.elem = substituteIndices(data->elem, [&](int64_t k) {
      if (k < bd)
        return symIndex(k);
      if (k >= bd + *m)
        return symIndex(q - 1 + k - bd - *m);
      SymExpr i = substituteIndices(ind->elem, [&](int64_t j) {
        return j == q - 1 ? symConst(k - bd) : symIndex(j);
      });
      return symSelect(symLt(i, symConst(0)), symAdd(i, data->dims[k]), i);
    });
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalLayerNormalization(ox::LayerNormalizationOp n) {
  // ONNX LayerNormalization-17: Y has X's shape; Mean and InvStdDev
  // X's shape with the normalized dims [axis, r) 1.
  const SymTensor *x = operand(0);
  if (!x || x->dims.empty())
    return std::nullopt;
  int64_t r = x->dims.size(), axis = n.getAxis().value_or(-1);
  if (axis < -r || axis >= r)
    return std::nullopt;
  if (axis < 0)
    axis += r;
  SymTensor t{x->dims, nullptr};
  if (idx > 0)
    for (int64_t k = axis; k < r; ++k)
      t.dims[k] = symConst(1);
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalCumSum(ox::CumSumOp c) {
  const SymTensor *in = operand(0);
  auto axisE = scalarOf(op->getOperand(1));
  if (!in || !axisE || !constantOf(*axisE))
    return std::nullopt;
  SymTensor t{in->dims, nullptr};
  int64_t r = in->dims.size();
  int64_t axis = *constantOf(*axisE);
  if (axis < 0)
    axis += r;
  if (!in->elem || c.getExclusive().value_or(0) || c.getReverse().value_or(0))
    return t;
  // Closed form only for inputs constant along the whole tensor.
  SmallVector<int64_t> zeros(SymbolicEvaluator::kMaxRank, 0);
  SmallVector<int64_t> ones(ev.numSymbols(), 1);
  int64_t v = evaluate(in->elem, zeros, ones);
  if (isConstantOnDomain(in->elem, in->dims, v))
    t.elem = symMul(symConst(v), symAdd(symIndex(axis), symConst(1)));
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalCast(ox::CastOp c) {
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  SymTensor t{in->dims, nullptr};
  if (!in->elem || !integral)
    return t;
  auto inElt = cast<ShapedType>(op->getOperand(0).getType()).getElementType();
  if (!inElt.isIntOrIndex())
    return t;
  t.elem = elemType.isInteger(1) ? symNot(symEq(in->elem, symConst(0)))
                                 : in->elem;
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalMod(ox::ModOp m) {
  // Integer Mod of two constants: fmod = 0 takes the divisor's sign
  // (Python's %), fmod = 1 the dividend's (C's fmod).
  bool fmod = m.getFmod().value_or(0) != 0;
  return elementwise([fmod](ArrayRef<SymExpr> e) -> SymExpr {
    auto a = constantOf(e[0]), d = constantOf(e[1]);
    if (!a || !d || *d == 0 || (*a == INT64_MIN && *d == -1))
      return nullptr;
    int64_t r = *a % *d;
    if (!fmod && r != 0 && ((r < 0) != (*d < 0)))
      r += *d;
    return symConst(r);
  });
}

std::optional<SymTensor> OpResultEvaluator::evalConstantOfShape(ox::ConstantOfShapeOp c) {
  // ONNX ConstantOfShape: dims are the input's elements; integer
  // fills (default float 0) are known elementwise.
  auto dims = vectorOf(op->getOperand(0));
  if (!dims)
    return std::nullopt;
  SymTensor t{*dims, nullptr};
  if (!integral)
    return t;
  int64_t v = 0;
  if (auto a = c.getValue())
    if (auto d = dyn_cast<DenseElementsAttr>(*a); d && d.getNumElements() == 1) {
      APInt x = d.getValues<APInt>()[0];
      v = x.getBitWidth() == 1 ? x.getZExtValue() : x.getSExtValue();
    }
  t.elem = symConst(v);
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalFlatten(ox::FlattenOp f) {
  // ONNX Flatten: [prod(d[:axis]), prod(d[axis:])].
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  int64_t r = in->dims.size(), axis = f.getAxis().value_or(1);
  if (axis < -r || axis > r)
    return std::nullopt;
  if (axis < 0)
    axis += r;
  SymExpr outer = symConst(1), inner = symConst(1);
  for (int64_t k = 0; k < r; ++k)
    (k < axis ? outer : inner) = symMul(k < axis ? outer : inner, in->dims[k]);
  return SymTensor{{outer, inner}, nullptr};
}

std::optional<SymTensor> OpResultEvaluator::evalPad(ox::PadOp) {
  // ONNX Pad: every padded dim grows by its begin and end amounts;
  // pads must be known (constants or shape arithmetic).
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  int64_t r = in->dims.size();
  auto pads = vectorOf(op->getOperand(1));
  if (!pads)
    return std::nullopt;
  auto axes = axesOperand(op, 3, r, r);
  if (!axes)
    return std::nullopt;
  int64_t n = axes->size();
  if (static_cast<int64_t>(pads->size()) != 2 * n)
    return std::nullopt;
  SymTensor t{in->dims, nullptr};
  for (int64_t k = 0; k < n; ++k)
    t.dims[(*axes)[k]] = symAdd(symAdd(t.dims[(*axes)[k]], (*pads)[k]), (*pads)[n + k]);
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalIndexerPicks() {
  // [S, min(topk, T)] picks (q [S, Hi, Di], keys [T, Di]); the
  // candidate blocks [S, min(blocks, ceil(T / block))] get a symbol.
  const SymTensor *q = operand(0), *k = operand(1);
  if (!q || !k || q->dims.size() != 3 || k->dims.size() != 2)
    return std::nullopt;
  bool blocks = isa<attn::IndexerCandidatesOp>(op) ||
                (isa<ox::H20IndexerTopKCandidatesOp>(op) && idx == 1);
  if (blocks)
    return SymTensor{{q->dims[0], newSymbol("candidate_blocks" + std::to_string(names.size()))},
                     nullptr};
  auto topk = op->getAttrOfType<IntegerAttr>("topk");
  if (!topk)
    return std::nullopt;
  SymExpr limit = symConst(topk.getInt()), t = k->dims[0];
  return SymTensor{{q->dims[0], symSelect(symLe(limit, t), limit, t)}, nullptr};
}

std::optional<SymTensor> OpResultEvaluator::evalReduction() {
  // Axes from the `axes` input (opset 18) or attribute (before).
  const SymTensor *in = operand(0);
  if (!in)
    return std::nullopt;
  int64_t r = in->dims.size();
  SmallVector<bool> reduced(r, false);
  std::optional<Dims> axes;
  if (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType()))
    axes = vectorOf(op->getOperand(1));
  else if (auto a = op->getAttrOfType<DenseI64ArrayAttr>("axes"))
    axes = Dims(llvm::map_range(a.asArrayRef(), [](int64_t x) { return symConst(x); }));
  bool hasAxes = (op->getNumOperands() > 1 && !isa<NoneType>(op->getOperand(1).getType())) ||
                 op->getAttr("axes");
  if (hasAxes && !axes)
    return std::nullopt; // computed at run time: not modelled
  if (!axes || axes->empty()) {
    // ONNX Reduce*-18: no or empty axes reduce every axis, unless
    // noop_with_empty_axes, which makes the op an identity.
    auto noop = op->getAttrOfType<IntegerAttr>("noop_with_empty_axes");
    if (noop && noop.getInt() != 0)
      return SymTensor{in->dims, nullptr};
    axes = Dims();
    for (int64_t k = 0; k < r; ++k)
      axes->push_back(symConst(k));
  }
  for (const SymExpr &a : *axes) {
    auto c = constantOf(a);
    if (!c || *c < -r || *c >= r)
      return std::nullopt;
    reduced[*c < 0 ? *c + r : *c] = true;
  }
  bool keep = true;
  if (auto k = op->getAttrOfType<IntegerAttr>("keepdims"))
    keep = k.getInt() != 0;
  SymTensor t;
  for (int64_t k = 0; k < r; ++k) {
    if (!reduced[k])
      t.dims.push_back(in->dims[k]);
    else if (keep)
      t.dims.push_back(symConst(1));
  }
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalMatMul(ox::MatMulOp) {
  const SymTensor *a = operand(0), *b = operand(1);
  if (!a || !b || a->dims.size() < 2 || b->dims.size() < 2)
    return std::nullopt;
  Dims ba(a->dims.begin(), a->dims.end() - 2), bb(b->dims.begin(), b->dims.end() - 2);
  auto batch = broadcast({ba, bb});
  if (!batch)
    return std::nullopt;
  SymTensor t{*batch, nullptr};
  t.dims.push_back(a->dims[a->dims.size() - 2]);
  t.dims.push_back(b->dims.back());
  return t;
}

std::optional<SymTensor> OpResultEvaluator::evalView(kv::ViewOp view) {
  // [1, H, length, D]; length is tensor.dim(t, c) of a known tensor.
  auto rt = cast<RankedTensorType>(view.getResult().getType());
  SymTensor t;
  for (int64_t k = 0; k < 4; ++k)
    t.dims.push_back(symConst(rt.isDynamicDim(k) ? 1 : rt.getDimSize(k)));
  auto dim = view.getLength().getDefiningOp<tensor::DimOp>();
  auto c = dim ? dim.getConstantIndex() : std::nullopt;
  auto src = dim ? shapeOf(dim.getSource()) : std::nullopt;
  if (!c || !src || *c >= static_cast<int64_t>(src->size()))
    return std::nullopt;
  t.dims[2] = (*src)[*c];
  return t;
}

std::optional<SymTensor> OpResultEvaluator::run() {
  return llvm::TypeSwitch<Operation *, std::optional<SymTensor>>(op)
      .Case([&](ox::ConstantOp c) { return evalConstant(c); })
      .Case([&](ox::ShapeOp s) { return evalShape(s); })
      .Case([&](ox::RangeOp x) { return evalRange(x); })
      .Case([&](ox::UnsqueezeOp x) { return evalUnsqueeze(x); })
      .Case([&](ox::SqueezeOp x) { return evalSqueeze(x); })
      .Case([&](ox::ReshapeOp r) { return evalReshape(r); })
      .Case([&](ox::TransposeOp tr) { return evalTranspose(tr); })
      .Case([&](ox::ConcatOp c) { return evalConcat(c); })
      .Case([&](ox::SliceOp x) { return evalSlice(x); })
      .Case([&](ox::ExpandOp x) { return evalExpand(x); })
      .Case([&](ox::GatherOp g) { return evalGather(g); })
      .Case([&](ox::SplitOp split) { return evalSplit(split); })
      .Case([&](ox::GatherElementsOp) -> std::optional<SymTensor> {
        // The indices' shape (ONNX GatherElements).
        const SymTensor *ind = operand(1);
        return ind ? std::optional<SymTensor>(SymTensor{ind->dims, nullptr}) : std::nullopt;
      })
      .Case([&](ox::TopKOp t) { return evalTopK(t); })
      .Case([&](ox::GatherNDOp g) { return evalGatherND(g); })
      .Case([&](ox::LayerNormalizationOp n) { return evalLayerNormalization(n); })
      .Case([&](ox::CumSumOp c) { return evalCumSum(c); })
      .Case([&](ox::CastOp c) { return evalCast(c); })
      .Case([&](ox::AddOp) { return elementwise([](ArrayRef<SymExpr> e) { return symAdd(e[0], e[1]); }); })
      .Case([&](ox::SubOp) { return elementwise([](ArrayRef<SymExpr> e) { return symSub(e[0], e[1]); }); })
      .Case([&](ox::MulOp) { return elementwise([](ArrayRef<SymExpr> e) { return symMul(e[0], e[1]); }); })
      .Case([&](ox::EqualOp) { return elementwise([](ArrayRef<SymExpr> e) { return symEq(e[0], e[1]); }); })
      .Case([&](ox::LessOp) { return elementwise([](ArrayRef<SymExpr> e) { return symLt(e[0], e[1]); }); })
      .Case([&](ox::LessOrEqualOp) { return elementwise([](ArrayRef<SymExpr> e) { return symLe(e[0], e[1]); }); })
      .Case([&](ox::GreaterOp) { return elementwise([](ArrayRef<SymExpr> e) { return symLt(e[1], e[0]); }); })
      .Case([&](ox::GreaterOrEqualOp) { return elementwise([](ArrayRef<SymExpr> e) { return symLe(e[1], e[0]); }); })
      .Case([&](ox::AndOp) { return elementwise([](ArrayRef<SymExpr> e) { return symAnd(e[0], e[1]); }); })
      .Case([&](ox::OrOp) { return elementwise([](ArrayRef<SymExpr> e) { return symOr(e[0], e[1]); }); })
      .Case([&](ox::NotOp) { return elementwise([](ArrayRef<SymExpr> e) { return symNot(e[0]); }); })
      .Case([&](ox::WhereOp) {
        return elementwise([](ArrayRef<SymExpr> e) { return symSelect(e[0], e[1], e[2]); });
      })
      .Case([&](ox::MaxOp) {
        return elementwise([](ArrayRef<SymExpr> e) {
          SymExpr m = e[0];
          for (const SymExpr &x : e.drop_front())
            m = symSelect(symLe(x, m), m, x);
          return m;
        });
      })
      .Case([&](ox::MinOp) {
        return elementwise([](ArrayRef<SymExpr> e) {
          SymExpr m = e[0];
          for (const SymExpr &x : e.drop_front())
            m = symSelect(symLe(m, x), m, x);
          return m;
        });
      })
      .Case([&](ox::IdentityOp) -> std::optional<SymTensor> {
        const SymTensor *in = operand(0);
        return in ? std::optional<SymTensor>(*in) : std::nullopt;
      })
      .Case([&](ox::DivOp) {
        // Integer Div of two constants (truncating, as ONNX Runtime's
        // integer Div): the head-count ratios of Attention's function body.
        return elementwise([](ArrayRef<SymExpr> e) -> SymExpr {
          auto a = constantOf(e[0]), d = constantOf(e[1]);
          if (!a || !d || *d == 0 || (*a == INT64_MIN && *d == -1))
            return nullptr;
          return symConst(*a / *d);
        });
      })
      .Case([&](ox::ModOp m) { return evalMod(m); })
      .Case([&](ox::ConstantOfShapeOp c) { return evalConstantOfShape(c); })
      .Case([&](ox::SizeOp) -> std::optional<SymTensor> {
        // ONNX Size: a scalar, the product of the input's dims.
        const SymTensor *in = operand(0);
        if (!in)
          return std::nullopt;
        SymExpr n = symConst(1);
        for (const SymExpr &d : in->dims)
          n = symMul(n, d);
        return SymTensor{{}, n};
      })
      .Case([&](ox::FlattenOp f) { return evalFlatten(f); })
      .Case([&](ox::PadOp x) { return evalPad(x); })
      .Case<ox::PowOp, ox::BitwiseAndOp, ox::BitwiseOrOp,
            ox::BitwiseXorOp>([&](Operation *) {
        return elementwise([](ArrayRef<SymExpr>) -> SymExpr { return nullptr; });
      })
      .Case([&](ox::NegOp) {
        return elementwise([](ArrayRef<SymExpr> e) { return symSub(symConst(0), e[0]); });
      })
      .Case<ox::SqrtOp, ox::ReciprocalOp, ox::ExpOp, ox::LogOp, ox::SinOp,
            ox::CosOp, ox::TanhOp, ox::ErfOp, ox::GeluOp, ox::SigmoidOp, ox::SoftplusOp, ox::ReluOp,
            ox::AbsOp, ox::IsNaNOp, ox::SoftmaxOp, ox::RoundOp, ox::FloorOp, ox::CeilOp,
            ox::SignOp, ox::ClipOp, ox::BitwiseNotOp, ox::ScatterElementsOp, ox::RMSNormalizationOp,
            ox::RotaryEmbeddingOp, ox::TriluOp, ox::MsSimplifiedLayerNormalizationOp,
            attn::RmsNormOp, attn::RmsScaleOp, attn::RopeOp, attn::RopeApplyOp,
            ox::H20SinkAttentionOp,
            ox::H20SparseSinkAttentionOp, attn::SparseAttentionOp, ox::H20RoutedExpertsOp,
            ox::H20RoutedExpertsMxfp4Op,
            attn::AllReduceOp>(
          [&](Operation *) { return sameAs(0); })
      .Case<ox::H20IndexerTopKOp, ox::H20IndexerTopKCandidatesOp, ox::H20IndexerTopKInCandidatesOp,
            attn::IndexerTopKOp, attn::IndexerCandidatesOp>(
          [&](Operation *) { return evalIndexerPicks(); })
      .Case<ox::ReduceMeanOp, ox::ReduceSumOp, ox::ReduceMaxOp>(
          [&](Operation *) { return evalReduction(); })
      .Case([&](ox::MatMulOp x) { return evalMatMul(x); })
      .Case([&](ox::H20BlockScaledMatMulOp) -> std::optional<SymTensor> {
        // X [..., K] . W [N, K]^T -> [..., N]
        const SymTensor *x = operand(0), *w = operand(1);
        if (idx != 0 || !x || !w || x->dims.empty() || w->dims.size() != 2)
          return std::nullopt;
        SymTensor t{Dims(x->dims.begin(), x->dims.end() - 1), nullptr};
        t.dims.push_back(w->dims[0]);
        return t;
      })
      .Case([&](ox::AttentionOp) -> std::optional<SymTensor> {
        const SymTensor *q = operand(0), *v = operand(2);
        if (idx != 0 || !q || !v || q->dims.size() != 4 || v->dims.size() != 4)
          return std::nullopt;
        return SymTensor{{q->dims[0], q->dims[1], q->dims[2], v->dims[3]}, nullptr};
      })
      .Case([&](attn::AttentionScoresOp) -> std::optional<SymTensor> {
        const SymTensor *q = operand(0), *k = operand(1);
        if (!q || !k || q->dims.size() != 4 || k->dims.size() != 4)
          return std::nullopt;
        return SymTensor{{q->dims[0], q->dims[1], q->dims[2], k->dims[2]}, nullptr};
      })
      .Case([&](kv::ViewOp view) { return evalView(view); })
      .Case([&](attn::AttentionOp) -> std::optional<SymTensor> {
        const SymTensor *q = operand(0), *v = operand(2);
        if (!q || !v || q->dims.size() != 4 || v->dims.size() != 4)
          return std::nullopt;
        return SymTensor{{q->dims[0], q->dims[1], q->dims[2], v->dims[3]}, nullptr};
      })
      .Case([&](attn::AttentionScoresOp) -> std::optional<SymTensor> {
        const SymTensor *q = operand(0), *k = operand(1);
        if (!q || !k || q->dims.size() != 4 || k->dims.size() != 4)
          return std::nullopt;
        return SymTensor{{q->dims[0], q->dims[1], q->dims[2], k->dims[2]}, nullptr};
      })
      .Default([](Operation *) { return std::nullopt; });
}


} // namespace

std::optional<SymTensor> SymbolicEvaluator::computeOpResult(Operation *op, unsigned idx) {
  return OpResultEvaluator(*this, op, idx, names, reshapeSymbols,
                           [this](const std::string &name) { return newSymbol(name); })
      .run();
}
