//===- KVDialect.cpp - kv dialect: cache type, layout, ops ---------------===//
#include "h20/Dialect/KV/IR/KVDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace h20::kv;

#include "h20/Dialect/KV/IR/KVDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "h20/Dialect/KV/IR/KVAttrs.cpp.inc"
#define GET_TYPEDEF_CLASSES
#include "h20/Dialect/KV/IR/KVTypes.cpp.inc"
#define GET_OP_CLASSES
#include "h20/Dialect/KV/IR/KVOps.cpp.inc"

void KVDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "h20/Dialect/KV/IR/KVAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "h20/Dialect/KV/IR/KVTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "h20/Dialect/KV/IR/KVOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// #kv.layout
//===----------------------------------------------------------------------===//

/// The cache's logical rank: [layer, kind, head, seq, dim].
static constexpr int64_t kCacheRank = 5;

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> order, int64_t align, int64_t page) {
  if (page < 0)
    return emitError() << "layout page must be >= 0 tokens, got " << page;
  if (static_cast<int64_t>(order.size()) != kCacheRank)
    return emitError() << "layout order must list " << kCacheRank
                       << " dimensions, got " << order.size();
  llvm::SmallBitVector seen(kCacheRank);
  for (int64_t d : order) {
    if (d < 0 || d >= kCacheRank || seen.test(d))
      return emitError() << "layout order must be a permutation of 0..4, got "
                         << "[" << llvm::make_range(order.begin(), order.end())
                         << "]";
    seen.set(d);
  }
  if (align <= 0 || (align & (align - 1)) != 0)
    return emitError() << "layout align must be a positive power of two, got "
                       << align;
  return success();
}

//===----------------------------------------------------------------------===//
// !kv.cache
//===----------------------------------------------------------------------===//

Type CacheType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  LayoutAttr layout;
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/true) ||
      parser.parseType(elementType) || parser.parseComma() ||
      parser.parseAttribute(layout) || parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), shape, elementType, layout);
}

void CacheType::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printDimensionList(getShape());
  printer << "x" << getElementType() << ", " << getLayout() << ">";
}

LogicalResult CacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                ArrayRef<int64_t> shape, Type elementType,
                                LayoutAttr layout) {
  if (static_cast<int64_t>(shape.size()) != kCacheRank)
    return emitError() << "kv cache must be [layers, 2, kv_heads, seq, "
                          "head_dim], got rank "
                       << shape.size();
  static const char *names[] = {"layers", "kind", "kv_heads", "seq",
                                "head_dim"};
  for (int64_t i = 0; i < kCacheRank; ++i) {
    if (ShapedType::isDynamic(shape[i])) {
      if (i != 3)
        return emitError() << "only the seq dimension of a kv cache may be "
                              "dynamic, but "
                           << names[i] << " is";
      continue;
    }
    if (shape[i] <= 0)
      return emitError() << "kv cache " << names[i] << " must be positive, got "
                         << shape[i];
  }
  if (shape[1] != 1 && shape[1] != 2)
    return emitError() << "kv cache kind dimension must be 2 (key, value) or 1 "
                          "(rows: key only), got "
                       << shape[1];
  if (!isCacheElementType(elementType))
    return emitError() << "kv cache element type must be f16, bf16, f32, "
                          "f8E4M3FN, i32 or i64, got "
                       << elementType;
  return success();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult AllocOp::verify() {
  auto type = getCache().getType();
  int64_t dynamic = llvm::count_if(type.getShape(), ShapedType::isDynamic);
  if (static_cast<int64_t>(getDynamicSizes().size()) != dynamic)
    return emitOpError("expects ")
           << dynamic << " dynamic size(s) for " << type << ", got "
           << getDynamicSizes().size();
  return success();
}

/// Checks (layer, kind) against `cache` and that `slice` is a
/// [1, kv_heads, S, head_dim] tensor of the cache's element type.
static LogicalResult verifySlice(Operation *op, CacheType cache,
                                 RankedTensorType slice, int64_t layer,
                                 int64_t kind, StringRef what) {
  if (layer < 0 || layer >= cache.numLayers())
    return op->emitOpError("layer ")
           << layer << " is out of range [0, " << cache.numLayers() << ")";
  const int64_t kinds = cache.getShape()[1];
  if (kind < 0 || kind >= kinds)
    return op->emitOpError("kind must be ")
           << (kinds == 2 ? "0 (key) or 1 (value)" : "0 (a cache of rows has no value half)")
           << ", got " << kind;
  if (slice.getRank() != 4)
    return op->emitOpError() << what << " must be [1, kv_heads, S, head_dim], "
                             << "got rank " << slice.getRank();
  auto fits = [](int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) || a == b;
  };
  if (!fits(slice.getDimSize(0), 1) ||
      !fits(slice.getDimSize(1), cache.numHeads()) ||
      !fits(slice.getDimSize(3), cache.headDim()))
    return op->emitOpError() << what << " type " << slice
                             << " does not match cache [1, "
                             << cache.numHeads() << ", S, " << cache.headDim()
                             << "]";
  if (slice.getElementType() != cache.getElementType())
    return op->emitOpError() << what << " element type "
                             << slice.getElementType()
                             << " differs from the cache's "
                             << cache.getElementType();
  return success();
}

LogicalResult WriteOp::verify() {
  return verifySlice(*this, getCache().getType(),
                     cast<RankedTensorType>(getValue().getType()), getLayer(),
                     getKind(), "value");
}

LogicalResult ViewOp::verify() {
  if (failed(verifySlice(*this, getCache().getType(),
                         cast<RankedTensorType>(getResult().getType()), getLayer(), getKind(),
                         "result")))
    return failure();
  // offset + length within the capacity where both are constants.
  APInt offset(64, 0), length;
  if ((!getOffset() || matchPattern(getOffset(), m_ConstantInt(&offset))) &&
      matchPattern(getLength(), m_ConstantInt(&length))) {
    const int64_t capacity = getCache().getType().getShape()[3];
    const int64_t first = offset.getSExtValue(), count = length.getSExtValue();
    int64_t end = 0;
    if (first < 0 || count < 0 || llvm::AddOverflow(first, count, end) ||
        (!ShapedType::isDynamic(capacity) && end > capacity))
      return emitOpError("tokens [") << first << ", " << first << " + " << count
                                     << ") are outside the cache's capacity " << capacity;
  }
  return success();
}
