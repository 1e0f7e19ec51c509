//===- SparseKVPlan.cpp - the KV-cache plan of DeepSeek-V4.1 attention ---===//
#include "h20/Transforms/SparseKVPlan.h"

#include "h20/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace h20 {
namespace {

constexpr llvm::StringLiteral kPlanAttr = "kv.sparse_plan";

const char *kindName(SparseKVSection::Kind k) {
  switch (k) {
  case SparseKVSection::Window: return "window";
  case SparseKVSection::Compressed: return "compressed";
  case SparseKVSection::IndexerKeys: return "indexer_keys";
  }
  return "?";
}

std::string where(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName() << " at " << op->getLoc();
  return s;
}

/// a * b, false on int64 overflow.
bool mul(int64_t a, int64_t b, int64_t &out) { return !__builtin_mul_overflow(a, b, &out); }
bool add(int64_t a, int64_t b, int64_t &out) { return !__builtin_add_overflow(a, b, &out); }

} // namespace

bool planSparseKV(func::FuncOp func, int64_t capacity, int64_t elementBytes, int64_t align,
                  SparseKVPlan &plan, std::string &error, Operation **culprit) {
  plan = SparseKVPlan();
  if (culprit)
    *culprit = func;
  auto blame = [&](Operation *op) {
    if (culprit)
      *culprit = op;
  };
  SmallVector<attn::SparseAttentionOp> layers;
  func.walk([&](attn::SparseAttentionOp op) { layers.push_back(op); });
  if (layers.empty())
    return true;
  if (capacity < 1 || align < 1 || (align & (align - 1)) != 0) {
    error = "the sparse KV plan needs a capacity >= 1 token (max-seq) and a power-of-two "
            "alignment; got capacity " + std::to_string(capacity) + ", align " +
            std::to_string(align);
    return false;
  }
  plan.capacity = capacity;
  plan.align = align;
  int64_t eb = elementBytes;
  if (eb <= 0) {
    Type elt = cast<RankedTensorType>(layers[0].getLatent().getType()).getElementType();
    eb = std::max<int64_t>(1, elt.getIntOrFloatBitWidth() / 8);
  }
  plan.elementBytes = eb;

  // Which layer an indexer op serves: the first attention reading its
  // picks (directly, or through the top-k its candidates feed).
  llvm::DenseMap<Operation *, int64_t> indexerLayer;
  for (auto [l, op] : llvm::enumerate(layers)) {
    Value idx = op.getIndices();
    if (!idx)
      continue;
    if (auto topk = idx.getDefiningOp<attn::IndexerTopKOp>()) {
      indexerLayer.try_emplace(topk, int64_t(l));
      if (Value c = topk.getCandidates())
        if (Operation *cand = c.getDefiningOp<attn::IndexerCandidatesOp>())
          indexerLayer.try_emplace(cand, int64_t(l));
    }
  }

  MLIRContext *ctx = func.getContext();
  auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(ctx, 64), v); };
  auto addSection = [&](SparseKVSection s, Operation *op) {
    int64_t raw = 0;
    if (!mul(s.dim, eb, raw)) {
      blame(op);
      error = where(op) + ": a cache row overflows";
      return false;
    }
    if (!add(raw, align - 1, s.rowBytes)) {
      blame(op);
      error = where(op) + ": a cache row overflows";
      return false;
    }
    s.rowBytes = s.rowBytes / align * align;
    if (!mul(s.rows, s.rowBytes, s.bytes)) {
      blame(op);
      error = where(op) + ": the slot's size overflows int64";
      return false;
    }
    plan.sections.push_back(s);
    return true;
  };
  auto staticDim = [&](Value v, int64_t d, Operation *op, int64_t &out) {
    auto t = cast<RankedTensorType>(v.getType());
    out = t.getDimSize(d);
    if (ShapedType::isDynamic(out)) {
      blame(op);
      error = where(op) + ": the cached rows' width (dim " + std::to_string(d) +
              " of its operand) is dynamic";
      return false;
    }
    return true;
  };

  // Window rings: one per attention layer.
  for (auto [l, op] : llvm::enumerate(layers)) {
    SparseKVSection s;
    s.kind = SparseKVSection::Window;
    s.layers = {int64_t(l)};
    s.rows = std::min<int64_t>(op.getWindow(), capacity);
    if (!staticDim(op.getLatent(), 1, op, s.dim) || !addSection(s, op))
      return false;
    op->setAttr("kv.window_section", i64(int64_t(plan.sections.size()) - 1));
  }
  // A growing slot (compressed latents, indexer keys): one per distinct
  // value, rows = capacity / ratio, read by the listed layers. Returns its
  // index, or -1 with `error` when the value's slot has another ratio
  // (`how` words the conflict).
  llvm::DenseMap<Value, int64_t> slotOf[2]; // compressed, indexer keys
  auto growingSlot = [&](Value v, SparseKVSection::Kind kind, int64_t ratio, Operation *op,
                         int64_t layer, const char *how) -> int64_t {
    auto &slots = slotOf[kind == SparseKVSection::Compressed ? 0 : 1];
    auto [it, inserted] = slots.try_emplace(v, int64_t(plan.sections.size()));
    if (inserted) {
      SparseKVSection s;
      s.kind = kind;
      s.ratio = ratio;
      s.rows = capacity / ratio;
      if (!staticDim(v, 1, op, s.dim) || !addSection(s, op))
        return -1;
    } else if (plan.sections[it->second].ratio != ratio) {
      blame(op);
      error = std::string(op->getName().getStringRef()) + " (attention layer " +
              std::to_string(layer) + "): reads " + how + " of ratio " +
              std::to_string(plan.sections[it->second].ratio) + " " +
              (kind == SparseKVSection::Compressed ? "through picks of" : "with") + " ratio " +
              std::to_string(ratio);
      return -1;
    }
    std::vector<int64_t> &readers = plan.sections[it->second].layers;
    if (!llvm::is_contained(readers, layer))
      readers.push_back(layer);
    return it->second;
  };
  // Compressed latents, viewed by every layer that reads them.
  for (auto [l, op] : llvm::enumerate(layers)) {
    Value c = op.getCompressed();
    if (!c)
      continue;
    auto topk = op.getIndices() ? op.getIndices().getDefiningOp<attn::IndexerTopKOp>() : nullptr;
    if (!topk) {
      blame(op);
      error = std::string(op->getName().getStringRef()) + " (attention layer " + std::to_string(l) +
              "): its compressed entries are picked by something other than attn.indexer_topk, "
              "so their compress ratio (rows per token) is unknown";
      return false;
    }
    int64_t slot = growingSlot(c, SparseKVSection::Compressed, std::max<int64_t>(1, topk.getRatio()),
                               op, int64_t(l), "a compressed slot");
    if (slot < 0)
      return false;
    op->setAttr("kv.compressed_section", i64(slot));
  }
  // Indexer keys of the indexer ops whose picks some attention reads.
  bool ok = true;
  func.walk([&](Operation *op) {
    if (!ok || !isa<attn::IndexerTopKOp, attn::IndexerCandidatesOp>(op))
      return;
    auto lit = indexerLayer.find(op);
    if (lit == indexerLayer.end())
      return; // an indexer whose picks no attention reads needs no cached keys
    int64_t ratio = std::max<int64_t>(1, op->getAttrOfType<IntegerAttr>("ratio").getInt());
    int64_t slot = growingSlot(op->getOperand(1), SparseKVSection::IndexerKeys, ratio, op,
                               lit->second, "an indexer-key slot");
    if (slot < 0)
      ok = false;
    else
      op->setAttr("kv.keys_section", i64(slot));
  });
  if (!ok)
    return false;

  // One allocation: slots back to back at `align`-byte offsets.
  int64_t at = 0;
  for (SparseKVSection &s : plan.sections) {
    if (!add(at, align - 1, s.offset)) {
      error = "the sparse KV plan's total size overflows int64";
      return false;
    }
    s.offset = s.offset / align * align;
    if (!add(s.offset, s.bytes, at)) {
      error = "the sparse KV plan's total size overflows int64";
      return false;
    }
    if (s.kind == SparseKVSection::Window)
      plan.windowBytes += s.bytes;
    else
      plan.bytesPerToken += double(s.dim) * double(eb) / double(s.ratio);
  }
  plan.totalBytes = at;

  // Record it on the function.
  SmallVector<Attribute> sections;
  for (const SparseKVSection &s : plan.sections) {
    SmallVector<NamedAttribute> f;
    f.emplace_back(StringAttr::get(ctx, "kind"), StringAttr::get(ctx, kindName(s.kind)));
    f.emplace_back(StringAttr::get(ctx, "layers"), DenseI64ArrayAttr::get(ctx, s.layers));
    for (auto [name, v] : {std::pair<const char *, int64_t>{"ratio", s.ratio},
                           {"rows", s.rows}, {"dim", s.dim}, {"row_bytes", s.rowBytes},
                           {"offset", s.offset}, {"bytes", s.bytes}})
      f.emplace_back(StringAttr::get(ctx, name), i64(v));
    sections.push_back(DictionaryAttr::get(ctx, f));
  }
  SmallVector<NamedAttribute> p;
  p.emplace_back(StringAttr::get(ctx, "capacity"), i64(plan.capacity));
  p.emplace_back(StringAttr::get(ctx, "element_bytes"), i64(plan.elementBytes));
  p.emplace_back(StringAttr::get(ctx, "align"), i64(plan.align));
  p.emplace_back(StringAttr::get(ctx, "total_bytes"), i64(plan.totalBytes));
  p.emplace_back(StringAttr::get(ctx, "window_bytes"), i64(plan.windowBytes));
  p.emplace_back(StringAttr::get(ctx, "bytes_per_token"),
                 FloatAttr::get(Float64Type::get(ctx), plan.bytesPerToken));
  p.emplace_back(StringAttr::get(ctx, "sections"), ArrayAttr::get(ctx, sections));
  func->setAttr(kPlanAttr, DictionaryAttr::get(ctx, p));
  return true;
}

bool readSparseKVPlan(func::FuncOp func, SparseKVPlan &plan) {
  plan = SparseKVPlan();
  auto d = func->getAttrOfType<DictionaryAttr>(kPlanAttr);
  if (!d)
    return false;
  auto geti = [](DictionaryAttr a, llvm::StringRef k) {
    auto v = a.getAs<IntegerAttr>(k);
    return v ? v.getInt() : 0;
  };
  plan.capacity = geti(d, "capacity");
  plan.elementBytes = geti(d, "element_bytes");
  plan.align = geti(d, "align");
  plan.totalBytes = geti(d, "total_bytes");
  plan.windowBytes = geti(d, "window_bytes");
  if (auto f = d.getAs<FloatAttr>("bytes_per_token"))
    plan.bytesPerToken = f.getValueAsDouble();
  auto sections = d.getAs<ArrayAttr>("sections");
  for (Attribute a : sections ? sections : ArrayAttr()) {
    auto s = dyn_cast<DictionaryAttr>(a);
    if (!s)
      continue;
    SparseKVSection x;
    llvm::StringRef kind = s.getAs<StringAttr>("kind") ? s.getAs<StringAttr>("kind").getValue() : "";
    x.kind = kind == "compressed"     ? SparseKVSection::Compressed
             : kind == "indexer_keys" ? SparseKVSection::IndexerKeys
                                      : SparseKVSection::Window;
    if (auto l = s.getAs<DenseI64ArrayAttr>("layers"))
      x.layers.assign(l.asArrayRef().begin(), l.asArrayRef().end());
    x.ratio = geti(s, "ratio");
    x.rows = geti(s, "rows");
    x.dim = geti(s, "dim");
    x.rowBytes = geti(s, "row_bytes");
    x.offset = geti(s, "offset");
    x.bytes = geti(s, "bytes");
    plan.sections.push_back(x);
  }
  return true;
}

std::string formatSparseKVPlan(const SparseKVPlan &plan) {
  std::string out;
  llvm::raw_string_ostream os(out);
  const double gib = double(int64_t(1) << 30);
  os << "kv plan (sparse attention): " << plan.capacity << " tokens, " << plan.elementBytes
     << " bytes per element, rows aligned to " << plan.align << " bytes; one allocation of "
     << plan.totalBytes << " bytes (" << llvm::format("%.2f", plan.totalBytes / gib) << " GiB)\n";
  os << llvm::format("  %4s  %-12s  %-14s %5s %10s %6s %14s %14s\n", "slot", "kind", "layers",
                     "ratio", "rows", "dim", "offset", "bytes");
  for (auto [i, s] : llvm::enumerate(plan.sections)) {
    std::string layers;
    for (auto [k, l] : llvm::enumerate(s.layers))
      layers += (k ? "," : "") + std::to_string(l);
    os << llvm::format("  %4zu  %-12s  %-14s %5lld %10lld %6lld %14lld %14lld\n", i,
                       kindName(s.kind), layers.c_str(), (long long)s.ratio, (long long)s.rows,
                       (long long)s.dim, (long long)s.offset, (long long)s.bytes);
  }
  os << "  window rings: " << plan.windowBytes
     << " bytes (fixed); compressed latents and indexer keys: "
     << llvm::format("%.1f", plan.bytesPerToken) << " bytes per token\n";
  return out;
}

} // namespace h20
