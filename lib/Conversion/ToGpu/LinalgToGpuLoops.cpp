//===- LinalgToGpuLoops.cpp - linalg on memrefs -> GPU-mapped loops -------===//
//
// One kernel per structured op, one thread per output element of the
// collapsed parallel space; a reduction over the innermost loop dim (a row
// reduction such as RMSNorm's sum of squares or softmax's max and sum) is a
// kernel of one block per output element instead, its threads striding the
// row (coalesced) and combining with gpu.all_reduce (warp shuffles and shared
// memory once lowered to NVVM); rows of a static length <= 8 leave a warp
// mostly idle and stay sequential. Other reductions run sequentially in their
// thread. Elementwise ops whose innermost loop is contiguous in memory take
// `vector-width` consecutive elements per thread as one vector.load per
// operand, so each thread issues that many loads before it computes (with
// one element per thread a kernel kept one load in flight per thread). A
// vector access carries the alignment its memref's layout proves (buffers
// are 256-byte aligned; offsets and strides from the type, a subview's
// offsets from their operands), so the backend emits 16-byte loads and
// stores where it can, element-sized ones issued together elsewhere. Reduction dims are moved innermost
// first (only the outer parallel loop maps onto the grid). Shape arithmetic
// on small integer buffers the host allocates is unrolled into host code
// instead of becoming a kernel, so the host program can evaluate it.
// Library calls (GEMM, attention, indexer) are left for the target. See
// Passes.td.
//
//===----------------------------------------------------------------------===//
#include "h20/Conversion/Passes.h"

#include "GeneratedKernels.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

namespace h20 {
#define GEN_PASS_DEF_LINALGTOGPULOOPS
#include "h20/Conversion/Passes.h.inc"
} // namespace h20

using namespace mlir;

namespace {

gpu::ParallelLoopDimMappingAttr mapping(MLIRContext *ctx, gpu::Processor p) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, p, id, id);
}

/// Marks every scf.parallel nested in `root` sequential: only the outer
/// tile/thread pair is mapped to the grid.
void markNestedSequential(Operation *root) {
  root->walk([&](scf::ParallelOp inner) {
    if (inner->hasAttr(gpu::getMappingAttrName()))
      return;
    SmallVector<gpu::ParallelLoopDimMappingAttr> seq(
        inner.getNumLoops(), mapping(inner.getContext(), gpu::Processor::Sequential));
    (void)gpu::setMappingAttr(inner, seq);
  });
}

/// A linalg.generic whose loops are parallel dims then exactly one reduction
/// dim, the innermost, into one init indexed by all the parallel dims and
/// not the reduction dim, with a body `yield combine(out, f(ins))`: the
/// combiner one associative, commutative arith op that gpu.all_reduce knows,
/// on a 32- or 64-bit scalar (what NVVM's shuffles carry), with a neutral
/// element for the threads that get no element of the row.
struct RowReduction {
  linalg::GenericOp op;
  Operation *combiner;
  gpu::AllReduceOperation kind;
  TypedAttr neutral;
  /// The value of a linalg.fill of the whole output right before the op,
  /// folded into the kernel (one launch less); null when none.
  Value fill = nullptr;
};

std::optional<RowReduction> matchRowReduction(linalg::LinalgOp linalgOp) {
  auto op = dyn_cast<linalg::GenericOp>(linalgOp.getOperation());
  if (!op || op.getNumDpsInits() != 1 || op->getNumResults() != 0)
    return std::nullopt;
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  unsigned n = iters.size();
  if (n == 0 || !linalg::isReductionIterator(iters[n - 1]))
    return std::nullopt;
  // A row of at most 8 elements (mHC's sum over 4 streams) is folded by one
  // thread per output element: a block per element would leave most of its
  // warp idle and launch S x C blocks (2.7e9 at 512K tokens x 5120, over
  // the grid's 2^31 - 1; 403 ms at 128K where the sequential form reads
  // the same bytes coalesced).
  if (int64_t k = op.getStaticLoopRanges()[n - 1]; !ShapedType::isDynamic(k) && k <= 8)
    return std::nullopt;
  for (unsigned i = 0; i + 1 < n; ++i)
    if (!linalg::isParallelIterator(iters[i]))
      return std::nullopt;
  OpOperand *init = op.getDpsInitOperand(0);
  AffineMap outMap = op.getMatchingIndexingMap(init);
  if (!outMap.isProjectedPermutation() || outMap.getNumResults() != n - 1 ||
      outMap.isFunctionOfDim(n - 1))
    return std::nullopt;
  for (OpOperand &in : op->getOpOperands())
    if (!isa<MemRefType>(in.get().getType()) && op.isDpsInput(&in) &&
        !in.get().getType().isIntOrIndexOrFloat())
      return std::nullopt;
  Block &body = op.getRegion().front();
  BlockArgument outArg = op.getMatchingBlockArgument(init);
  Type t = outArg.getType();
  if (!(t.isF32() || t.isF64() || t.isInteger(32) || t.isInteger(64)))
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield->getNumOperands() != 1)
    return std::nullopt;
  Operation *comb = yield->getOperand(0).getDefiningOp();
  if (!comb || comb->getBlock() != &body || comb->getNumOperands() != 2 ||
      comb->getNumResults() != 1 || comb->getNumRegions() != 0 || !outArg.hasOneUse() ||
      *outArg.getUsers().begin() != comb || !comb->getResult(0).hasOneUse() ||
      comb->getOperand(0) == comb->getOperand(1))
    return std::nullopt;
  // Reads only: a body that writes memory must keep its order.
  for (Operation &o : body.without_terminator())
    if (!isMemoryEffectFree(&o) && !isa<memref::LoadOp>(o))
      return std::nullopt;
  using K = gpu::AllReduceOperation;
  std::optional<K> kind =
      llvm::TypeSwitch<Operation *, std::optional<K>>(comb)
          .Case<arith::AddFOp, arith::AddIOp>([](auto) { return K::ADD; })
          .Case<arith::MulFOp, arith::MulIOp>([](auto) { return K::MUL; })
          .Case([](arith::MaximumFOp) { return K::MAXIMUMF; })
          .Case([](arith::MinimumFOp) { return K::MINIMUMF; })
          .Case([](arith::MaxNumFOp) { return K::MAXNUMF; })
          .Case([](arith::MinNumFOp) { return K::MINNUMF; })
          .Case([](arith::MaxSIOp) { return K::MAXSI; })
          .Case([](arith::MinSIOp) { return K::MINSI; })
          .Case([](arith::MaxUIOp) { return K::MAXUI; })
          .Case([](arith::MinUIOp) { return K::MINUI; })
          .Case([](arith::AndIOp) { return K::AND; })
          .Case([](arith::OrIOp) { return K::OR; })
          .Case([](arith::XOrIOp) { return K::XOR; })
          .Default([](Operation *) { return std::nullopt; });
  std::optional<TypedAttr> neutral = arith::getNeutralElement(comb);
  if (!kind || !neutral || neutral->getType() != t)
    return std::nullopt;
  return RowReduction{op, comb, *kind, *neutral};
}

/// The trip counts of `op`'s loops, as index values created before it.
SmallVector<Value> loopSizes(RewriterBase &rw, linalg::GenericOp op) {
  Location loc = op.getLoc();
  rw.setInsertionPoint(op);
  SmallVector<Value> sizes;
  for (Range range : cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(rw, loc))
    sizes.push_back(getValueOrCreateConstantIndexOp(rw, loc, range.size));
  return sizes;
}

/// The indices of an operand with indexing map `map` at loop indices `ivs`.
SmallVector<Value> operandIndices(OpBuilder &b, Location loc, AffineMap map, ValueRange ivs) {
  SmallVector<Value> idx;
  for (unsigned i = 0; i < map.getNumResults(); ++i) {
    AffineExpr e = map.getResult(i);
    if (auto d = dyn_cast<AffineDimExpr>(e))
      idx.push_back(ivs[d.getPosition()]);
    else
      idx.push_back(affine::AffineApplyOp::create(b, loc, map.getSubMap({i}), ivs));
  }
  return idx;
}

/// Replaces a row reduction by a gpu.launch of one block per output element
/// (the parallel dims, delinearised from block_x). Thread t folds the
/// elements t, t + T, t + 2T, ... of its row (consecutive threads read
/// consecutive elements) starting from the neutral element; gpu.all_reduce
/// combines the T partial results; thread 0 combines the total with the
/// initial output element and stores it. T is `maxThreads` (a multiple of
/// 32), or the row length rounded up to a multiple of 32 when that is less.
void lowerRowReduction(RewriterBase &rw, const RowReduction &r, int64_t maxThreads) {
  linalg::GenericOp op = r.op;
  Location loc = op.getLoc();
  SmallVector<Value> sizes = loopSizes(rw, op);
  unsigned n = sizes.size();
  int64_t k = op.getStaticLoopRanges()[n - 1];
  int64_t threads = std::max<int64_t>(32, maxThreads / 32 * 32);
  if (!ShapedType::isDynamic(k))
    threads = std::min(threads, std::max<int64_t>(32, llvm::alignTo(k, 32)));
  Value one = arith::ConstantIndexOp::create(rw, loc, 1);
  Value rows = one;
  for (unsigned i = 0; i + 1 < n; ++i)
    rows = arith::MulIOp::create(rw, loc, rows, sizes[i]);
  Value numThreads = arith::ConstantIndexOp::create(rw, loc, threads);
  auto launch = gpu::LaunchOp::create(rw, loc, rows, one, one, numThreads, one, one);
  Block &entry = launch.getBody().front();
  rw.setInsertionPointToEnd(&entry);
  Value row = launch.getBlockIds().x, tid = launch.getThreadIds().x;
  SmallVector<Value> ivs(n);
  for (int i = int(n) - 2; i >= 0; --i) {
    if (i == 0) {
      ivs[i] = row;
    } else {
      ivs[i] = arith::RemUIOp::create(rw, loc, row, sizes[i]);
      row = arith::DivUIOp::create(rw, loc, row, sizes[i]);
    }
  }
  Block &body = op.getRegion().front();
  BlockArgument outArg = op.getMatchingBlockArgument(op.getDpsInitOperand(0));
  Value neutral = arith::ConstantOp::create(rw, loc, r.neutral);
  // A row that the threads divide evenly: a loop with a constant trip count
  // (LLVM unrolls it: several loads in flight per thread), element
  // i * T + t. Otherwise t, t + T, ... below the row length.
  bool even = !ShapedType::isDynamic(k) && k % threads == 0;
  Value lb = even ? arith::ConstantIndexOp::create(rw, loc, 0).getResult() : tid;
  Value ub = even ? arith::ConstantIndexOp::create(rw, loc, k / threads).getResult()
                  : sizes[n - 1];
  Value step = arith::ConstantIndexOp::create(rw, loc, even ? 1 : threads);
  Value stride = arith::ConstantIndexOp::create(rw, loc, threads);
  auto loop = scf::ForOp::create(
      rw, loc, lb, ub, step, ValueRange{neutral},
      [&](OpBuilder &b, Location l, Value iv, ValueRange acc) {
        ivs[n - 1] = even ? arith::AddIOp::create(
                                b, l, arith::MulIOp::create(b, l, iv, stride), tid)
                                .getResult()
                          : iv;
        IRMapping map;
        for (OpOperand *in : op.getDpsInputOperands()) {
          Value v = in->get();
          if (isa<MemRefType>(v.getType()))
            v = memref::LoadOp::create(
                b, l, v, operandIndices(b, l, op.getMatchingIndexingMap(in), ivs));
          map.map(op.getMatchingBlockArgument(in), v);
        }
        map.map(outArg, acc[0]);
        for (Operation &o : body.without_terminator()) {
          if (auto index = dyn_cast<linalg::IndexOp>(o)) {
            map.map(index.getResult(), ivs[index.getDim()]);
            continue;
          }
          b.clone(o, map);
        }
        scf::YieldOp::create(b, l, map.lookup(r.combiner->getResult(0)));
      });
  auto total = gpu::AllReduceOp::create(rw, loc, loop.getResult(0),
                                        gpu::AllReduceOperationAttr::get(rw.getContext(), r.kind),
                                        rw.getUnitAttr());
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value first = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, tid, zero);
  scf::IfOp::create(rw, loc, first, [&](OpBuilder &b, Location l) {
    Value out = op.getDpsInitOperand(0)->get();
    SmallVector<Value> idx =
        operandIndices(b, l, op.getMatchingIndexingMap(op.getDpsInitOperand(0)), ivs);
    Value old = r.fill ? r.fill : memref::LoadOp::create(b, l, out, idx).getResult();
    IRMapping map;
    Value part = r.combiner->getOperand(0) == outArg ? r.combiner->getOperand(1)
                                                     : r.combiner->getOperand(0);
    map.map(outArg, old);
    map.map(part, total.getResult());
    Value res = b.clone(*r.combiner, map)->getResult(0);
    memref::StoreOp::create(b, l, res, out, idx);
    scf::YieldOp::create(b, l);
  });
  gpu::TerminatorOp::create(rw, loc);
  rw.eraseOp(op);
}

/// Whether `map` (over n loops) reads along the innermost loop: its last
/// result is that loop's dim, alone or plus terms of other dims and
/// constants ("rest", e.g. RoPE's t * D/2 + j), and no other result uses
/// it. Then consecutive iterations of that loop touch consecutive elements
/// of a unit-stride operand. `restDivisor` gets the largest number known to
/// divide rest (0 when there is no rest).
bool readsInnermost(AffineMap map, unsigned n, int64_t *restDivisor = nullptr) {
  if (map.getNumResults() == 0)
    return false;
  AffineExpr inner = getAffineDimExpr(n - 1, map.getContext());
  for (unsigned i = 0; i + 1 < map.getNumResults(); ++i)
    if (map.getResult(i).isFunctionOfDim(n - 1))
      return false;
  AffineExpr last = map.getResult(map.getNumResults() - 1);
  int64_t divisor = 0;
  if (last != inner) {
    auto add = dyn_cast<AffineBinaryOpExpr>(last);
    if (!add || add.getKind() != AffineExprKind::Add)
      return false;
    AffineExpr rest = add.getLHS() == inner ? add.getRHS()
                      : add.getRHS() == inner ? add.getLHS()
                                              : AffineExpr();
    if (!rest || rest.isFunctionOfDim(n - 1))
      return false;
    divisor = static_cast<int64_t>(rest.getLargestKnownDivisor());
  }
  if (restDivisor)
    *restDivisor = divisor;
  return true;
}

bool unitInnermostStride(Type t) {
  auto m = dyn_cast<MemRefType>(t);
  if (!m || m.getRank() == 0)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(m.getStridesAndOffset(strides, offset)) && strides.back() == 1;
}

Value rootOf(Value v);

/// A memref.load in `op`'s body of a scalar element whose memref and
/// indices are all defined outside `op`, of memory `op` does not write:
/// the same value at every iteration.
bool isUniformLoad(linalg::GenericOp op, Operation *x) {
  auto load = dyn_cast<memref::LoadOp>(x);
  if (!load || !load.getType().isIntOrFloat())
    return false;
  Region &r = op.getRegion();
  if (!llvm::all_of(load->getOperands(),
                    [&](Value v) { return !r.isAncestor(v.getParentRegion()); }))
    return false;
  const Value root = rootOf(load.getMemRef());
  return llvm::none_of(op.getDpsInits(), [&](Value out) { return rootOf(out) == root; });
}

/// An elementwise linalg.generic that vectorizes by `width` along its
/// innermost loop: every loop parallel, the innermost of a static trip count
/// divisible by `width`; every memref operand indexed by a map that either
/// reads along the innermost loop dim (readsInnermost, with unit innermost
/// stride and any further term a multiple of `width`: a contiguous,
/// aligned vector) or does not use it (one element, broadcast); outputs of
/// the first kind; a body of arith/math ops on int or
/// float scalars (no linalg.index, no regions) and loads of one element at
/// an index the loops do not change (isUniformLoad: a scalar weight such as
/// V4.1's mHC scales, read once per vector and broadcast).
bool vectorizableElementwise(linalg::GenericOp op, int64_t width) {
  if (width < 2 || op->getNumResults() != 0 || op.getNumDpsInits() == 0)
    return false;
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  unsigned n = iters.size();
  if (n == 0 || !llvm::all_of(iters, linalg::isParallelIterator))
    return false;
  int64_t k = op.getStaticLoopRanges()[n - 1];
  if (ShapedType::isDynamic(k) || k % width != 0)
    return false;
  for (OpOperand &o : op->getOpOperands()) {
    Type t = o.get().getType();
    if (!isa<MemRefType>(t)) {
      if (op.isDpsInit(&o) || !t.isIntOrFloat())
        return false;
      continue; // a scalar operand: broadcast in registers
    }
    // Elements of at least a byte: LLVM packs a vector of i1 into bits,
    // while h20's i1 memrefs hold one byte per element.
    Type elem = cast<MemRefType>(t).getElementType();
    if (!elem.isIntOrFloat() || elem.getIntOrFloatBitWidth() < 8)
      return false;
    AffineMap map = op.getMatchingIndexingMap(&o);
    int64_t rest = 0;
    bool along = readsInnermost(map, n, &rest);
    if (along ? !unitInnermostStride(t) : map.isFunctionOfDim(n - 1))
      return false;
    // The vector's first index must stay a multiple of `width` (what the
    // alignment vectorAlignment proves assumes).
    if (along && rest != 0 && rest % width != 0)
      return false;
    if (op.isDpsInit(&o) && !along)
      return false;
  }
  for (Operation &x : op.getRegion().front().without_terminator()) {
    if (isUniformLoad(op, &x))
      continue;
    Dialect *d = x.getDialect();
    if (!d || (d->getNamespace() != "arith" && d->getNamespace() != "math") ||
        x.getNumRegions() != 0 || !isMemoryEffectFree(&x))
      return false;
    for (Type t : llvm::concat<Type>(x.getOperandTypes(), x.getResultTypes()))
      if (!t.isIntOrFloat())
        return false;
  }
  return true;
}

/// A divisor of the element offset of view `v` from its allocation's base
/// (0: the offset is 0): the type's static offset, or, for a dynamic one, a
/// subview's offsets times its source's static strides (recursively; an
/// offset operand we know nothing about contributes its stride). 1 when
/// nothing is known.
int64_t offsetDivisor(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  if (!t)
    return 1;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(t.getStridesAndOffset(strides, offset)))
    return 1;
  if (!ShapedType::isDynamic(offset))
    return offset < 0 ? -offset : offset;
  Operation *def = v.getDefiningOp();
  if (auto s = dyn_cast_or_null<memref::SubViewOp>(def)) {
    SmallVector<int64_t> srcStrides;
    int64_t srcOffset;
    if (failed(s.getSourceType().getStridesAndOffset(srcStrides, srcOffset)))
      return 1;
    int64_t d = offsetDivisor(s.getSource());
    for (auto [o, stride] : llvm::zip(s.getMixedOffsets(), srcStrides)) {
      if (ShapedType::isDynamic(stride))
        return 1;
      std::optional<int64_t> c = getConstantIntValue(o);
      d = std::gcd(d, c ? *c * stride : stride);
    }
    return d < 0 ? -d : d;
  }
  if (auto c = dyn_cast_or_null<memref::CollapseShapeOp>(def))
    return offsetDivisor(c.getSrc());
  if (auto e = dyn_cast_or_null<memref::ExpandShapeOp>(def))
    return offsetDivisor(e.getSrc());
  return 1;
}

/// Byte alignment of every vector<width> access of `memref` that
/// lowerVectorized makes (the innermost index a multiple of `width`, the
/// others anything): the largest power of two up to 16 dividing the base
/// (256: every buffer the host program hands a kernel is 256-byte aligned,
/// GpuProgram.h), the offset (offsetDivisor), each outer stride of a dim
/// longer than 1 (a dynamic stride of an identity layout is a multiple of
/// the static sizes inside it) and the vector's bytes. 0 when that is no
/// more than the element's own alignment.
int64_t vectorAlignment(Value memref, int64_t width) {
  auto t = cast<MemRefType>(memref.getType());
  int64_t eb = t.getElementTypeBitWidth() / 8;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (eb <= 0 || failed(t.getStridesAndOffset(strides, offset)))
    return 0;
  // memref.view moves the pointer by a byte shift its type does not show:
  // nothing is proven through one (the host program has none today).
  for (Value v = memref; Operation *def = v.getDefiningOp();) {
    if (isa<memref::ViewOp>(def))
      return 0;
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  int64_t g = std::gcd<int64_t>(256, width * eb);
  g = std::gcd(g, offsetDivisor(memref) * eb);
  ArrayRef<int64_t> shape = t.getShape();
  for (int64_t i = 0; i + 1 < t.getRank(); ++i) {
    if (shape[i] == 1)
      continue; // its index is always 0
    int64_t stride = strides[i];
    if (ShapedType::isDynamic(stride)) {
      if (!t.getLayout().isIdentity())
        return 0;
      stride = 1;
      for (int64_t j = i + 1; j < t.getRank(); ++j)
        if (!ShapedType::isDynamic(shape[j]))
          stride *= shape[j];
    }
    g = std::gcd(g, stride * eb);
  }
  int64_t align = std::min<int64_t>(16, g & -g);
  return align > eb ? align : 0;
}

/// Replaces `op` (vectorizableElementwise) by an scf.parallel over its
/// loops with the innermost one divided by `width`; each iteration loads a
/// vector<width> per operand (vector.load; vector.broadcast of one element
/// for operands that do not vary along the innermost loop), applies the
/// body to vectors and stores one vector per output. Returns the loop.
scf::ParallelOp lowerVectorized(RewriterBase &rw, linalg::GenericOp op, int64_t width) {
  Location loc = op.getLoc();
  SmallVector<Value> ubs = loopSizes(rw, op);
  unsigned n = ubs.size();
  int64_t k = op.getStaticLoopRanges()[n - 1];
  ubs[n - 1] = arith::ConstantIndexOp::create(rw, loc, k / width);
  Value c0 = arith::ConstantIndexOp::create(rw, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(rw, loc, 1);
  Value cw = arith::ConstantIndexOp::create(rw, loc, width);
  SmallVector<Value> lbs(n, c0), steps(n, c1);
  Block &body = op.getRegion().front();
  auto alignOf = [&](Value memref) {
    int64_t a = vectorAlignment(memref, width);
    return a ? llvm::MaybeAlign(a) : llvm::MaybeAlign();
  };
  auto par = scf::ParallelOp::create(
      rw, loc, lbs, ubs, steps, [&](OpBuilder &b, Location l, ValueRange ivs) {
        SmallVector<Value> at(ivs.begin(), ivs.end());
        at[n - 1] = arith::MulIOp::create(b, l, ivs[n - 1], cw);
        auto vec = [&](Type t) { return VectorType::get({width}, t); };
        auto splat = [&](Value v) -> Value {
          return vector::BroadcastOp::create(b, l, vec(v.getType()), v);
        };
        IRMapping map;
        for (OpOperand &o : op->getOpOperands()) {
          BlockArgument arg = op.getMatchingBlockArgument(&o);
          if (op.isDpsInit(&o) && arg.use_empty())
            continue;
          Value v = o.get();
          if (!isa<MemRefType>(v.getType())) {
            map.map(arg, splat(v));
            continue;
          }
          AffineMap m = op.getMatchingIndexingMap(&o);
          SmallVector<Value> idx = operandIndices(b, l, m, at);
          if (readsInnermost(m, n))
            map.map(arg, vector::LoadOp::create(b, l, vec(arg.getType()), v, idx,
                                                /*nontemporal=*/false, alignOf(v)));
          else
            map.map(arg, splat(memref::LoadOp::create(b, l, v, idx)));
        }
        for (Operation &x : body.without_terminator()) {
          if (isUniformLoad(op, &x)) { // one scalar load, broadcast
            map.map(x.getResult(0), splat(b.clone(x)->getResult(0)));
            continue;
          }
          if (auto cst = dyn_cast<arith::ConstantOp>(x)) {
            auto attr = DenseElementsAttr::get(vec(cst.getType()), cst.getValue());
            map.map(cst.getResult(), arith::ConstantOp::create(b, l, attr));
            continue;
          }
          for (Value operand : x.getOperands()) // defined above the op: one value for all lanes
            if (!map.contains(operand))
              map.map(operand, splat(operand));
          Operation *c = b.clone(x, map);
          for (OpResult r : c->getResults())
            r.setType(vec(r.getType()));
        }
        auto yield = cast<linalg::YieldOp>(body.getTerminator());
        for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable())) {
          Value v = yield.getOperand(unsigned(i));
          Value stored = map.contains(v) ? map.lookup(v) : splat(v);
          vector::StoreOp::create(b, l, stored, init.get(),
                                  operandIndices(b, l, op.getMatchingIndexingMap(&init), at),
                                  /*nontemporal=*/false, alignOf(init.get()));
        }
      });
  rw.eraseOp(op);
  return par;
}

/// `loop` (no reductions) with its dims in the order `order` (new dim j is
/// old dim order[j]); returns the new loop, built where `loop` was.
scf::ParallelOp permuteDims(RewriterBase &rw, scf::ParallelOp loop, ArrayRef<unsigned> order) {
  SmallVector<Value> lbs, ubs, steps;
  for (unsigned i : order) {
    lbs.push_back(loop.getLowerBound()[i]);
    ubs.push_back(loop.getUpperBound()[i]);
    steps.push_back(loop.getStep()[i]);
  }
  rw.setInsertionPoint(loop);
  auto p = scf::ParallelOp::create(rw, loop.getLoc(), lbs, ubs, steps);
  for (auto [k, v] : llvm::enumerate(loop->getAttrs()))
    p->setAttr(v.getName(), v.getValue());
  Block *body = p.getBody();
  rw.eraseOp(body->getTerminator());
  SmallVector<Value> ivs(order.size());
  for (auto [j, i] : llvm::enumerate(order))
    ivs[i] = body->getArgument(j);
  rw.mergeBlocks(loop.getBody(), body, ivs);
  rw.eraseOp(loop);
  return p;
}

/// The order that puts the dims of `loop` with a bound not known at compile
/// time outermost (stable; the innermost dim, which consecutive threads
/// walk through memory along, stays innermost). Collapsing the nest into
/// one thread index then divides only by constants (multiply-shifts) for
/// every dim but the outermost: a division by a run-time value is a
/// 64-bit software division, about a hundred instructions a thread, which
/// made transposes of a chunk's [C, H, D] rows run at a tenth of the
/// memory bandwidth. Empty when the order is already so.
SmallVector<unsigned> dynamicDimsOutermost(scf::ParallelOp loop) {
  const unsigned n = loop.getNumLoops();
  auto isStatic = [&](unsigned i) {
    return getConstantIntValue(loop.getUpperBound()[i]) &&
           getConstantIntValue(loop.getLowerBound()[i]) && getConstantIntValue(loop.getStep()[i]);
  };
  SmallVector<unsigned> order;
  for (unsigned i = 0; i + 1 < n; ++i)
    if (!isStatic(i))
      order.push_back(i);
  for (unsigned i = 0; i + 1 < n; ++i)
    if (isStatic(i))
      order.push_back(i);
  order.push_back(n - 1);
  for (unsigned i = 0; i < n; ++i)
    if (order[i] != i)
      return order;
  return {};
}

Value rootOf(Value v);

/// Keeps the output element that a sequential reduction loop of a thread
/// (linalgOpToParallelLoops' scf.for over a reduction dim) loads and stores
/// back every iteration in a register: one load before the loop, the value
/// carried through it, one store after. The loop body must load and store
/// that element once each (the same memref and loop-invariant indices,
/// the load first) and touch the memref no other way. The values computed
/// are the same, without a round trip through memory per iteration (the
/// mHC stream mixes, [S, 4, 4] x [S, 4, C], did 4 of them per element).
/// A load of another view of the output's allocation in the loop leaves the
/// loop as it is (it would read the element from memory).
void accumulateInRegisters(RewriterBase &rw, Operation *root) {
  SmallVector<scf::ForOp> loops;
  root->walk([&](scf::ForOp f) { loops.push_back(f); });
  // Equal indices: one value, or the results of two equal affine.apply ops
  // (linalgOpToParallelLoops makes one per access).
  auto sameIndex = [](Value a, Value b) {
    if (a == b)
      return true;
    auto x = a.getDefiningOp<affine::AffineApplyOp>(), y = b.getDefiningOp<affine::AffineApplyOp>();
    return x && y && x.getAffineMap() == y.getAffineMap() &&
           llvm::equal(x.getMapOperands(), y.getMapOperands());
  };
  for (scf::ForOp f : loops) {
    if (f.getNumResults() != 0)
      continue;
    // The index arithmetic that does not depend on the reduction goes
    // before the loop (the element's indices must be available there).
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(f.getOperation()));
    memref::LoadOp load;
    memref::StoreOp store;
    bool ok = true;
    for (Operation &op : f.getBody()->without_terminator()) {
      if (auto s = dyn_cast<memref::StoreOp>(op)) {
        ok &= !store;
        store = s;
      } else if (op.getNumRegions() != 0) {
        ok = false; // nested loops or branches: leave them
      }
    }
    if (!ok || !store)
      continue;
    Value m = store.getMemRef();
    auto invariant = [&](Value v) { return !f->isAncestor(v.getParentBlock()->getParentOp()); };
    if (!invariant(m) || !llvm::all_of(store.getIndices(), invariant))
      continue;
    // No other view of the same allocation may be read in the loop: it
    // would see the element in memory, not the running value.
    const Value root = rootOf(m);
    for (Operation &op : f.getBody()->without_terminator())
      if (auto l = dyn_cast<memref::LoadOp>(op);
          l && l.getMemRef() != m && rootOf(l.getMemRef()) == root)
        ok = false;
    for (Operation &op : f.getBody()->without_terminator()) {
      if (&op == store.getOperation())
        break;
      if (auto l = dyn_cast<memref::LoadOp>(op); l && l.getMemRef() == m) {
        ok &= !load && l.getIndices().size() == store.getIndices().size() &&
              llvm::all_of(llvm::zip(l.getIndices(), store.getIndices()),
                           [&](auto p) { return sameIndex(std::get<0>(p), std::get<1>(p)); });
        load = l;
      }
    }
    // The only other access to `m` after the store would be another load.
    for (Operation *o = store->getNextNode(); o; o = o->getNextNode())
      if (auto l = dyn_cast<memref::LoadOp>(o); l && l.getMemRef() == m)
        ok = false;
    if (!ok || !load)
      continue;
    rw.setInsertionPoint(f);
    Value init = memref::LoadOp::create(rw, load.getLoc(), m, load.getIndices());
    Value stored = store.getValue();
    const SmallVector<Value> indices(store.getIndices());
    auto yields = [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
      return SmallVector<Value>{stored};
    };
    FailureOr<LoopLikeOpInterface> carried =
        cast<LoopLikeOpInterface>(f.getOperation())
            .replaceWithAdditionalYields(rw, ValueRange{init}, false, yields);
    if (failed(carried))
      continue;
    auto nf = cast<scf::ForOp>(carried->getOperation());
    rw.replaceAllUsesWith(load.getResult(), nf.getRegionIterArgs().back());
    rw.eraseOp(load);
    rw.eraseOp(store);
    rw.setInsertionPointAfter(nf);
    memref::StoreOp::create(rw, nf.getLoc(), nf.getResults().back(), m, indices);
  }
}

/// The allocation (or global) a memref view is taken of.
Value rootOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

/// Shape arithmetic: every operand a static integer/index memref of at most
/// 16 elements (what the host program keeps on the host).
bool isHostShapeArithmetic(linalg::LinalgOp op) {
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<MemRefType>(v.getType());
    if (!t || !t.hasStaticShape() || t.getNumElements() > 16 ||
        !(t.getElementType().isIntOrIndex()))
      return false;
  }
  return true;
}

struct LinalgToGpuLoopsPass : h20::impl::LinalgToGpuLoopsBase<LinalgToGpuLoopsPass> {
  using LinalgToGpuLoopsBase::LinalgToGpuLoopsBase;

  /// What h20-choose-launch-shapes recorded on `op` (`h20.launch`), else
  /// this pass's options.
  struct Launch {
    int64_t block, vector;
    bool rowReduction;
  };
  Launch launchOf(Operation *op) {
    Launch l{blockSize, vectorWidth, rowReductions};
    if (auto d = op->getAttrOfType<DictionaryAttr>("h20.launch")) {
      if (auto v = d.getAs<IntegerAttr>("block"))
        l.block = v.getInt();
      if (auto v = d.getAs<IntegerAttr>("vector"))
        l.vector = v.getInt();
      if (auto v = d.getAs<BoolAttr>("row_reduction"))
        l.rowReduction = v.getValue();
    }
    return l;
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    IRRewriter rewriter(ctx);
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) {
      if (h20::becomesGeneratedKernel(op))
        ops.push_back(op);
    });
    // Shape arithmetic on values the host knows (e.g. a slice bound from
    // S / r) runs on the host, unrolled, so the host program can evaluate
    // it: as a kernel its result would live on the device. An input some
    // device op writes, or an output some device op reads (e.g. an iota
    // of positions a mask kernel compares), keeps the op on the device.
    {
      DenseMap<Value, SmallVector<Operation *>> writers, readers;
      func.walk([&](linalg::LinalgOp op) {
        if (!op.hasPureBufferSemantics())
          return;
        for (Value init : op.getDpsInits())
          writers[rootOf(init)].push_back(op);
        for (Value in : op.getDpsInputs())
          readers[rootOf(in)].push_back(op);
      });
      // A gather reads a buffer in its body (memref.load of the positions a
      // RoPE table lookup indexes by), not as an input: a reader too.
      func.walk([&](memref::LoadOp load) {
        if (auto owner = load->getParentOfType<linalg::LinalgOp>())
          readers[rootOf(load.getMemRef())].push_back(owner);
      });
      // Host memory is what the host program allocates (memref.alloc, or a
      // constant global to read); function arguments are device buffers.
      auto hostRoot = [](Value v, bool read) {
        Operation *def = rootOf(v).getDefiningOp();
        return isa_and_nonnull<memref::AllocOp>(def) ||
               (read && isa_and_nonnull<memref::GetGlobalOp>(def));
      };
      llvm::SmallPtrSet<Operation *, 8> onHost;
      for (linalg::LinalgOp op : ops) {
        bool host = isHostShapeArithmetic(op);
        for (Value in : op.getDpsInputs())
          host &= hostRoot(in, /*read=*/true);
        for (Value out : op.getDpsInits())
          host &= hostRoot(out, /*read=*/false);
        if (host)
          onHost.insert(op);
      }
      // Every writer of a host op's inputs and reader of its outputs must
      // run on the host too: drop candidates until that holds.
      for (bool changed = true; changed;) {
        changed = false;
        for (linalg::LinalgOp op : ops) {
          if (!onHost.contains(op))
            continue;
          bool ok = true;
          for (Value in : op.getDpsInputs())
            for (Operation *w : writers.lookup(rootOf(in)))
              ok &= onHost.contains(w);
          for (Value out : op.getDpsInits())
            for (Operation *r : readers.lookup(rootOf(out)))
              ok &= onHost.contains(r);
          if (!ok) {
            onHost.erase(op);
            changed = true;
          }
        }
      }
      SmallVector<linalg::LinalgOp> rest;
      for (linalg::LinalgOp op : ops) {
        if (!onHost.contains(op)) {
          rest.push_back(op);
          continue;
        }
        rewriter.setInsertionPoint(op);
        FailureOr<linalg::LinalgLoops> loops = linalg::linalgOpToLoops(rewriter, op);
        if (failed(loops)) {
          op->emitError("cannot lower this shape computation to host code");
          return signalPassFailure();
        }
        rewriter.eraseOp(op);
        if (!loops->empty()) {
          SmallVector<scf::ForOp> nest;
          loops->front()->walk([&](scf::ForOp f) { nest.push_back(f); }); // innermost first
          for (scf::ForOp f : nest)
            if (failed(loopUnrollFull(f))) {
              mlir::emitError(f.getLoc(), "cannot unroll a host shape computation");
              return signalPassFailure();
            }
        }
      }
      ops = std::move(rest);
    }
    // Loops nest in dim order, and only the outer parallel loop maps onto
    // the grid: reduction dims go innermost (e.g. a sum over dim 1 of
    // [S, R, C] into [S, C]), which also lets such an op match the row
    // reductions below when a single reduction dim is left innermost.
    for (linalg::LinalgOp &op : ops) {
      auto g = dyn_cast<linalg::GenericOp>(op.getOperation());
      if (!g)
        continue;
      SmallVector<utils::IteratorType> its = g.getIteratorTypesArray();
      SmallVector<unsigned> perm;
      for (unsigned d = 0; d < its.size(); ++d)
        if (linalg::isParallelIterator(its[d]))
          perm.push_back(d);
      for (unsigned d = 0; d < its.size(); ++d)
        if (!linalg::isParallelIterator(its[d]))
          perm.push_back(d);
      if (llvm::equal(perm, llvm::seq<unsigned>(0, its.size())))
        continue;
      rewriter.setInsertionPoint(g);
      Attribute launch = g->getAttr("h20.launch");
      FailureOr<linalg::GenericOp> moved = linalg::interchangeGenericOp(rewriter, g, perm);
      if (failed(moved)) {
        g->emitError("cannot put this op's reduction loops innermost");
        return signalPassFailure();
      }
      op = cast<linalg::LinalgOp>(moved->getOperation());
      if (launch)
        op->setAttr("h20.launch", launch);
    }
    // Row reductions first. A linalg.fill right before one, into the same
    // buffer, is folded into it: the reduction writes every output element,
    // and the fill value is its initial value.
    llvm::SmallPtrSet<Operation *, 8> done;
    {
      for (linalg::LinalgOp op : ops) {
        const Launch launch = launchOf(op);
        if (!launch.rowReduction)
          continue;
        std::optional<RowReduction> r = matchRowReduction(op);
        if (!r)
          continue;
        auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
        if (fill && fill.hasPureBufferSemantics() &&
            fill.getInputs()[0].getDefiningOp<arith::ConstantOp>() &&
            fill.getDpsInits()[0] == r->op.getDpsInitOperand(0)->get() &&
            fill.getInputs()[0].getType() ==
                r->op.getMatchingBlockArgument(r->op.getDpsInitOperand(0)).getType()) {
          r->fill = fill.getInputs()[0];
          done.insert(fill);
          rewriter.eraseOp(fill);
        }
        done.insert(op);
        lowerRowReduction(rewriter, *r, launch.block);
      }
    }
    for (linalg::LinalgOp op : ops) {
      if (done.contains(op.getOperation()))
        continue;
      rewriter.setInsertionPoint(op);
      const Launch launch = launchOf(op);
      // Named ops (linalg.copy, ...) as generics, so they can vectorize.
      if (launch.vector > 1 && !isa<linalg::GenericOp>(op.getOperation())) {
        FailureOr<linalg::GenericOp> g = linalg::generalizeNamedOp(rewriter, op);
        if (succeeded(g))
          op = cast<linalg::LinalgOp>(g->getOperation());
      }
      if (auto g = dyn_cast<linalg::GenericOp>(op.getOperation());
          g && vectorizableElementwise(g, launch.vector)) {
        if (failed(mapToGrid(rewriter, func, lowerVectorized(rewriter, g, launch.vector),
                             launch.block)))
          return signalPassFailure();
        continue;
      }
      bool hasParallel = llvm::any_of(op.getIteratorTypesArray(), linalg::isParallelIterator);
      Location loc = op.getLoc();
      // An op with only reductions: give it a one-iteration parallel loop
      // to become a one-thread kernel.
      scf::ParallelOp single;
      if (!hasParallel) {
        Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
        Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
        single = scf::ParallelOp::create(rewriter, loc, ValueRange{c0}, ValueRange{c1},
                                         ValueRange{c1});
        rewriter.setInsertionPoint(single.getBody()->getTerminator());
        op->moveBefore(single.getBody()->getTerminator());
      }
      FailureOr<linalg::LinalgLoops> loops = linalg::linalgOpToParallelLoops(rewriter, op);
      if (failed(loops)) {
        op->emitError("cannot turn this op into GPU loops");
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
      if (!loops->empty())
        accumulateInRegisters(rewriter, loops->front());
      auto outer = single ? single
                          : (loops->empty() ? scf::ParallelOp()
                                            : dyn_cast<scf::ParallelOp>(loops->front()));
      if (!outer) {
        mlir::emitError(loc, "internal: a linalg op with parallel dims gave no parallel loop");
        return signalPassFailure();
      }
      if (failed(mapToGrid(rewriter, func, outer, launch.block)))
        return signalPassFailure();
    }
  }

  /// Collapses the top-level loop `outer` into one dim, tiles it by
  /// `block` and maps tiles to blocks (x), in-tile iterations to threads
  /// (x); nested parallel loops run sequentially.
  LogicalResult mapToGrid(RewriterBase &rewriter, func::FuncOp func, scf::ParallelOp outer,
                          int64_t block) {
    MLIRContext *ctx = func.getContext();
    if (outer.getNumLoops() > 1 && outer.getNumResults() == 0)
      if (SmallVector<unsigned> order = dynamicDimsOutermost(outer); !order.empty())
        outer = permuteDims(rewriter, outer, order);
    if (outer.getNumLoops() > 1) {
      std::vector<unsigned> all(outer.getNumLoops());
      for (unsigned i = 0; i < all.size(); ++i)
        all[i] = i;
      rewriter.setInsertionPoint(outer);
      Block *parent = outer->getBlock();
      Operation *before = outer->getPrevNode();
      collapseParallelLoops(rewriter, outer, {all});
      // The collapsed loop replaced `outer`, built where it was (after the
      // bounds it computes). Every loop made so far is mapped, so it is the
      // first unmapped parallel loop from there: a few ops, not a scan of
      // the function (quadratic over a 40-layer model's ~10^4 ops).
      outer = nullptr;
      for (Operation *o = before ? before->getNextNode() : &parent->front(); o && !outer;
           o = o->getNextNode())
        if (auto p = dyn_cast<scf::ParallelOp>(o); p && !p->hasAttr(gpu::getMappingAttrName()))
          outer = p;
    }
    if (!outer)
      return func.emitError("internal: collapsed loop not found");
    auto [tiles, threads] = scf::tileParallelLoop(outer, {block}, /*noMinMaxBounds=*/true);
    (void)gpu::setMappingAttr(tiles, {mapping(ctx, gpu::Processor::BlockX)});
    (void)gpu::setMappingAttr(threads, {mapping(ctx, gpu::Processor::ThreadX)});
    markNestedSequential(threads);
    return success();
  }
};

} // namespace
