//===- SparseAttnToLinalg.cpp - DeepSeek-V4.1 attn ops as linalg/scf -----===//
//
// Reference decompositions of attn.sparse_attention, attn.indexer_topk and
// attn.indexer_candidates (see their ODS descriptions): what the CPU target
// runs and what faster paths are tested against. Memory stays linear in S:
// attention scores are [S, H, window + K] with keys read through their
// indices (never gathered into a copy), and the indexer scores one query row
// at a time ([Hi, T] live), selecting its top-k by repeated scans (O(K T)
// per row: a reference, not a fast path).
//
//===----------------------------------------------------------------------===//
#include "AttnToLinalg.h"
#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace h20::lowering;

namespace h20::lowering {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// The input that carries a library call's `start` (query row 0's prompt
/// position, e.g. the chunk's first position p0) to the host program: a
/// never-read i8 temporary of start + 1 elements, whose length minus one
/// the host program passes to the kernel (LibraryCallSteps.cpp,
/// takeStartCarrier). Not as a scalar operand: the canonicalizer folds a
/// constant scalar into the body of a new generic without the call's
/// attributes. Not as the length itself: a zero-length operand lets the
/// canonicalizer erase the call.
Value startCarrier(OpBuilder &b, Location loc, Value start) {
  return tensor::EmptyOp::create(b, loc,
                                 RankedTensorType::get({ShapedType::kDynamic}, b.getI8Type()),
                                 ValueRange{arith::AddIOp::create(b, loc, start, cIdx(b, loc, 1))});
}

Value cmpI(OpBuilder &b, Location loc, arith::CmpIPredicate p, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, p, x, y);
}

/// Key slot j of query row i (prompt position start + i) of an
/// attn.sparse_attention: slots [0, W) are the window positions
/// start + i - j (latent row start + i - j - latentStart: a window ring's
/// first row is position latentStart; a null latentStart is 0), slots
/// [W, W + K) the compressed rows indices[i, j - W]. `valid` says whether
/// the slot holds a visible key (a window position >= 0 whose row is in
/// the latent).
struct KeySlot {
  Value valid;     ///< i1
  Value fromWin;   ///< i1: the key is latent[row] (else compressed[row])
  Value row;       ///< index, meaningful when valid
};

KeySlot keySlot(OpBuilder &b, Location loc, Value i, Value start, Value latentStart, Value j,
                int64_t window, Value indices, Value numCompressed) {
  Value w = cIdx(b, loc, window), zero = cIdx(b, loc, 0);
  Value inWindow = cmpI(b, loc, arith::CmpIPredicate::slt, j, w);
  Value winRow = arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, i, start), j);
  Value winOk = cmpI(b, loc, arith::CmpIPredicate::sge, winRow, zero);
  if (latentStart) {
    winRow = arith::SubIOp::create(b, loc, winRow, latentStart);
    winOk = arith::AndIOp::create(b, loc, winOk,
                                  cmpI(b, loc, arith::CmpIPredicate::sge, winRow, zero));
  }
  if (!indices)
    return {arith::AndIOp::create(b, loc, inWindow, winOk), inWindow, winRow};
  // Compressed slot k = j - W (clamped into range so the read is in bounds
  // even for window slots; its result is then ignored).
  Value k = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, j, w), zero);
  Value raw = tensor::ExtractOp::create(b, loc, indices, ValueRange{i, k});
  Value c = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
  Value cOk = arith::AndIOp::create(b, loc, cmpI(b, loc, arith::CmpIPredicate::sge, c, zero),
                                    cmpI(b, loc, arith::CmpIPredicate::slt, c, numCompressed));
  Value valid = arith::SelectOp::create(b, loc, inWindow, winOk, cOk);
  Value row = arith::SelectOp::create(b, loc, inWindow, winRow, c);
  return {valid, inWindow, row};
}

/// latent[row, d] or compressed[row, d] as `ct`, 0 when the slot is not
/// valid (never read then: the compressed set may be empty).
Value readKey(OpBuilder &b, Location loc, const KeySlot &slot, Value d, Value latent,
              Value compressed, Type ct) {
  auto ifOp = scf::IfOp::create(
      b, loc, slot.valid,
      [&](OpBuilder &tb, Location tl) {
        Value v;
        if (!compressed) {
          v = tensor::ExtractOp::create(tb, tl, latent, ValueRange{slot.row, d});
        } else {
          auto pick = scf::IfOp::create(
              tb, tl, slot.fromWin,
              [&](OpBuilder &wb, Location wl) {
                scf::YieldOp::create(wb, wl, tensor::ExtractOp::create(wb, wl, latent, ValueRange{slot.row, d})
                                                 .getResult());
              },
              [&](OpBuilder &cb, Location cl) {
                scf::YieldOp::create(
                    cb, cl, tensor::ExtractOp::create(cb, cl, compressed, ValueRange{slot.row, d}).getResult());
              });
          v = pick.getResult(0);
        }
        scf::YieldOp::create(tb, tl, castScalar(tb, tl, v, ct));
      },
      [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, floatConst(eb, el, ct, 0.0)); });
  return ifOp.getResult(0);
}

} // namespace

FailureOr<Value> lowerSparseAttention(OpBuilder &b, attn::SparseAttentionOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value q = op.getQuery(), latent = op.getLatent(), sink = op.getSink();
  Value compressed = op.getCompressed(), indices = op.getIndices();
  auto qt = cast<RankedTensorType>(q.getType());
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  Type ct = computeTypeFor(qt.getElementType());
  int64_t window = static_cast<int64_t>(op.getWindow());
  double scale = op.getScale().convertToDouble();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };

  Value S = dimOf(b, loc, q, 0), H = dimOf(b, loc, q, 1), D = dimOf(b, loc, q, 2);
  Value T = compressed ? dimOf(b, loc, compressed, 0) : cIdx(b, loc, 0);
  Value start = op.getStart() ? op.getStart() : cIdx(b, loc, 0);
  Value latentStart = op.getLatentStart();
  Value slots = cIdx(b, loc, window);
  int64_t staticSlots = window;
  if (indices) {
    slots = arith::AddIOp::create(b, loc, slots, dimOf(b, loc, indices, 1));
    int64_t k = cast<RankedTensorType>(indices.getType()).getDimSize(1);
    staticSlots = ShapedType::isDynamic(k) ? ShapedType::kDynamic : window + k;
  }
  auto scoreType = RankedTensorType::get({qt.getDimSize(0), qt.getDimSize(1), staticSlots}, ct);
  auto rowType = RankedTensorType::get({qt.getDimSize(0), qt.getDimSize(1)}, ct);

  // Element d of query row i's key in slot j (i is loop dim 0).
  auto keyAt = [&](OpBuilder &nb, Location nl, unsigned jDim, unsigned dDim) {
    Value i = linalg::IndexOp::create(nb, nl, 0), j = linalg::IndexOp::create(nb, nl, jDim);
    KeySlot slot = keySlot(nb, nl, i, start, latentStart, j, window, indices, T);
    return readKey(nb, nl, slot, linalg::IndexOp::create(nb, nl, dDim), latent, compressed, ct);
  };

  // 1. scores[i,h,j] = scale * <q[i,h,:], key_j(i)>, -inf for invisible slots.
  Value dots0 = filledTensor(b, loc, scoreType, {S, H, slots}, floatConst(b, loc, ct, 0.0));
  Value dots = linalg::GenericOp::create(
                   b, loc, TypeRange{scoreType}, ValueRange{q}, ValueRange{dots0},
                   {AffineMap::get(4, 0, {d(0), d(1), d(3)}, ctx), AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
                   iterators({false, false, false, true}),
                   [&](OpBuilder &nb, Location nl, ValueRange a) {
                     Value key = keyAt(nb, nl, /*jDim=*/2, /*dDim=*/3);
                     Value p = arith::MulFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), key);
                     linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[1], p)});
                   })
                   .getResult(0);
  Value scores = linalg::GenericOp::create(
                     b, loc, TypeRange{scoreType}, ValueRange{dots},
                     ValueRange{emptyTensor(b, loc, scoreType, {S, H, slots})},
                     {AffineMap::getMultiDimIdentityMap(3, ctx), AffineMap::getMultiDimIdentityMap(3, ctx)},
                     parallel(3),
                     [&](OpBuilder &nb, Location nl, ValueRange a) {
                       Value i = linalg::IndexOp::create(nb, nl, 0), j = linalg::IndexOp::create(nb, nl, 2);
                       KeySlot slot = keySlot(nb, nl, i, start, latentStart, j, window, indices, T);
                       Value s = arith::MulFOp::create(nb, nl, a[0], floatConst(nb, nl, ct, scale));
                       linalg::YieldOp::create(
                           nb, nl, ValueRange{arith::SelectOp::create(nb, nl, slot.valid, s,
                                                                      floatConst(nb, nl, ct, -kInf))});
                     })
                     .getResult(0);

  // 2. m[i,h] = max(max_j s, sink[h]); den[i,h] = sum_j exp(s - m) + exp(sink - m).
  Value max0 = linalg::GenericOp::create(
                   b, loc, TypeRange{rowType}, ValueRange{sink}, ValueRange{emptyTensor(b, loc, rowType, {S, H})},
                   {AffineMap::get(2, 0, {d(1)}, ctx), AffineMap::getMultiDimIdentityMap(2, ctx)}, parallel(2),
                   [&](OpBuilder &nb, Location nl, ValueRange a) {
                     linalg::YieldOp::create(nb, nl, castScalar(nb, nl, a[0], ct));
                   })
                   .getResult(0);
  Value rowMax = linalg::GenericOp::create(
                     b, loc, TypeRange{rowType}, ValueRange{scores}, ValueRange{max0},
                     {AffineMap::getMultiDimIdentityMap(3, ctx), AffineMap::get(3, 0, {d(0), d(1)}, ctx)},
                     iterators({false, false, true}),
                     [&](OpBuilder &nb, Location nl, ValueRange a) {
                       linalg::YieldOp::create(nb, nl, ValueRange{arith::MaximumFOp::create(nb, nl, a[0], a[1])});
                     })
                     .getResult(0);
  Value den0 = linalg::GenericOp::create(
                   b, loc, TypeRange{rowType}, ValueRange{sink, rowMax},
                   ValueRange{emptyTensor(b, loc, rowType, {S, H})},
                   {AffineMap::get(2, 0, {d(1)}, ctx), AffineMap::getMultiDimIdentityMap(2, ctx),
                    AffineMap::getMultiDimIdentityMap(2, ctx)},
                   parallel(2),
                   [&](OpBuilder &nb, Location nl, ValueRange a) {
                     Value e = math::ExpOp::create(
                         nb, nl, arith::SubFOp::create(nb, nl, castScalar(nb, nl, a[0], ct), a[1]));
                     linalg::YieldOp::create(nb, nl, ValueRange{e});
                   })
                   .getResult(0);
  Value den = linalg::GenericOp::create(
                  b, loc, TypeRange{rowType}, ValueRange{scores, rowMax}, ValueRange{den0},
                  {AffineMap::getMultiDimIdentityMap(3, ctx), AffineMap::get(3, 0, {d(0), d(1)}, ctx),
                   AffineMap::get(3, 0, {d(0), d(1)}, ctx)},
                  iterators({false, false, true}),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value e = math::ExpOp::create(nb, nl, arith::SubFOp::create(nb, nl, a[0], a[1]));
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], e)});
                  })
                  .getResult(0);

  // 3. out[i,h,:] = sum_j exp(s_j - m) key_j / den (keys read through their slots).
  auto accType = RankedTensorType::get(qt.getShape(), ct);
  Value num0 = filledTensor(b, loc, accType, {S, H, D}, floatConst(b, loc, ct, 0.0));
  Value num = linalg::GenericOp::create(
                  b, loc, TypeRange{accType}, ValueRange{scores, rowMax}, ValueRange{num0},
                  {AffineMap::get(4, 0, {d(0), d(1), d(3)}, ctx), AffineMap::get(4, 0, {d(0), d(1)}, ctx),
                   AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
                  iterators({false, false, false, true}),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value key = keyAt(nb, nl, /*jDim=*/3, /*dDim=*/2);
                    Value e = math::ExpOp::create(nb, nl, arith::SubFOp::create(nb, nl, a[0], a[1]));
                    linalg::YieldOp::create(
                        nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], arith::MulFOp::create(nb, nl, e, key))});
                  })
                  .getResult(0);
  return linalg::GenericOp::create(
             b, loc, TypeRange{rt}, ValueRange{num, den}, ValueRange{emptyTensor(b, loc, rt, {S, H, D})},
             {AffineMap::getMultiDimIdentityMap(3, ctx), AffineMap::get(3, 0, {d(0), d(1)}, ctx),
              AffineMap::getMultiDimIdentityMap(3, ctx)},
             parallel(3),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value y = arith::DivFOp::create(nb, nl, a[0], a[1]);
               linalg::YieldOp::create(nb, nl, castScalar(nb, nl, y, rt.getElementType()));
             })
      .getResult(0);
}

namespace {

/// The number of compressed entries query row i (prompt position
/// start + i) sees: (start + i + 1) / ratio, its complete groups.
Value visibleEntries(OpBuilder &b, Location loc, Value i, Value start, int64_t ratio) {
  Value pos = arith::AddIOp::create(b, loc, i, start);
  return arith::DivSIOp::create(b, loc, arith::AddIOp::create(b, loc, pos, cIdx(b, loc, 1)),
                                cIdx(b, loc, ratio));
}

/// The indexer's score row of query i: [T] f32, -inf where entry t is not
/// visible (t >= visibleEntries, or outside the candidate blocks).
Value indexerRow(OpBuilder &b, Location loc, Value q, Value k, Value w, Value i, Value start,
                 int64_t ratio, double scale, Value candidates, int64_t blockSize) {
  MLIRContext *ctx = b.getContext();
  auto d = [&](unsigned n) { return getAffineDimExpr(n, ctx); };
  Type f32 = b.getF32Type();
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(k.getType());
  Value Hi = dimOf(b, loc, q, 1), T = dimOf(b, loc, k, 0);
  auto dotsType = RankedTensorType::get({qt.getDimSize(1), kt.getDimSize(0)}, f32);
  auto rowType = RankedTensorType::get({kt.getDimSize(0)}, f32);
  // dots[h,t] = <q[i,h,:], k[t,:]>
  Value dots = linalg::GenericOp::create(
                   b, loc, TypeRange{dotsType}, ValueRange{k},
                   ValueRange{filledTensor(b, loc, dotsType, {Hi, T}, floatConst(b, loc, f32, 0.0))},
                   {AffineMap::get(3, 0, {d(1), d(2)}, ctx), AffineMap::get(3, 0, {d(0), d(1)}, ctx)},
                   iterators({false, false, true}),
                   [&](OpBuilder &nb, Location nl, ValueRange a) {
                     Value h = linalg::IndexOp::create(nb, nl, 0), dd = linalg::IndexOp::create(nb, nl, 2);
                     Value qv = tensor::ExtractOp::create(nb, nl, q, ValueRange{i, h, dd});
                     Value p = arith::MulFOp::create(nb, nl, castScalar(nb, nl, qv, f32), castScalar(nb, nl, a[0], f32));
                     linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[1], p)});
                   })
                   .getResult(0);
  // row[t] = sum_h w[i,h] * relu(dots[h,t]) * scale
  Value row = linalg::GenericOp::create(
                  b, loc, TypeRange{rowType}, ValueRange{dots},
                  ValueRange{filledTensor(b, loc, rowType, {T}, floatConst(b, loc, f32, 0.0))},
                  {AffineMap::get(2, 0, {d(1), d(0)}, ctx), AffineMap::get(2, 0, {d(0)}, ctx)},
                  iterators({false, true}),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value h = linalg::IndexOp::create(nb, nl, 1);
                    Value wv = castScalar(nb, nl, tensor::ExtractOp::create(nb, nl, w, ValueRange{i, h}), f32);
                    Value relu = arith::MaximumFOp::create(nb, nl, a[0], floatConst(nb, nl, f32, 0.0));
                    Value s = arith::MulFOp::create(nb, nl, arith::MulFOp::create(nb, nl, relu, floatConst(nb, nl, f32, scale)), wv);
                    linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[1], s)});
                  })
                  .getResult(0);
  // Visibility (and candidate membership).
  Value visibleCount = visibleEntries(b, loc, i, start, ratio);
  Value numCand = candidates ? dimOf(b, loc, candidates, 1) : Value();
  return linalg::GenericOp::create(
             b, loc, TypeRange{rowType}, ValueRange{row}, ValueRange{emptyTensor(b, loc, rowType, {T})},
             {AffineMap::getMultiDimIdentityMap(1, ctx), AffineMap::getMultiDimIdentityMap(1, ctx)}, parallel(1),
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value t = linalg::IndexOp::create(nb, nl, 0);
               Value ok = cmpI(nb, nl, arith::CmpIPredicate::slt, t, visibleCount);
               if (candidates) {
                 Value block = arith::IndexCastOp::create(
                     nb, nl, nb.getI64Type(), arith::DivSIOp::create(nb, nl, t, cIdx(nb, nl, blockSize)));
                 auto scan = scf::ForOp::create(
                     nb, nl, cIdx(nb, nl, 0), numCand, cIdx(nb, nl, 1),
                     ValueRange{arith::ConstantIntOp::create(nb, nl, 0, 1).getResult()},
                     [&](OpBuilder &sb, Location sl, Value c, ValueRange found) {
                       Value cb = tensor::ExtractOp::create(sb, sl, candidates, ValueRange{i, c});
                       Value hit = cmpI(sb, sl, arith::CmpIPredicate::eq, cb, block);
                       scf::YieldOp::create(sb, sl, ValueRange{arith::OrIOp::create(sb, sl, found[0], hit)});
                     });
                 ok = arith::AndIOp::create(nb, nl, ok, scan.getResult(0));
               }
               linalg::YieldOp::create(
                   nb, nl, ValueRange{arith::SelectOp::create(nb, nl, ok, a[0], floatConst(nb, nl, f32, -kInf))});
             })
      .getResult(0);
}

/// Writes the positions of the `k` largest finite entries of `row` [N]
/// (largest first, ties to the lower position; `none` where fewer remain)
/// into row i of `out` [S, K] i64. Repeated scans: each pick is the best
/// entry ranking after the previous one.
Value selectTopK(OpBuilder &b, Location loc, Value row, Value n, Value k, Value none, Value out, Value i) {
  Type f32 = b.getF32Type();
  Value zero = cIdx(b, loc, 0), one = cIdx(b, loc, 1);
  Value negInf = floatConst(b, loc, f32, -kInf);
  Value none64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), none);
  auto picks = scf::ForOp::create(
      b, loc, zero, k, one, ValueRange{out, floatConst(b, loc, f32, kInf), cIdx(b, loc, -1)},
      [&](OpBuilder &jb, Location jl, Value j, ValueRange st) {
        // st: out, previous pick (value, position); a candidate ranks after it
        // when smaller, or equal and at a higher position.
        auto scan = scf::ForOp::create(
            jb, jl, zero, n, one, ValueRange{negInf, none},
            [&](OpBuilder &eb, Location el, Value e, ValueRange best) {
              Value v = tensor::ExtractOp::create(eb, el, row, ValueRange{e});
              Value below = arith::CmpFOp::create(eb, el, arith::CmpFPredicate::OLT, v, st[1]);
              Value tieAfter = arith::AndIOp::create(
                  eb, el, arith::CmpFOp::create(eb, el, arith::CmpFPredicate::OEQ, v, st[1]),
                  cmpI(eb, el, arith::CmpIPredicate::sgt, e, st[2]));
              Value after = arith::OrIOp::create(eb, el, below, tieAfter);
              Value better = arith::CmpFOp::create(eb, el, arith::CmpFPredicate::OGT, v, best[0]);
              Value take = arith::AndIOp::create(eb, el, after, better);
              scf::YieldOp::create(eb, el,
                                   ValueRange{arith::SelectOp::create(eb, el, take, v, best[0]),
                                              arith::SelectOp::create(eb, el, take, e, best[1])});
            });
        Value found = arith::CmpFOp::create(jb, jl, arith::CmpFPredicate::OGT, scan.getResult(0), negInf);
        Value pos = arith::IndexCastOp::create(jb, jl, jb.getI64Type(), scan.getResult(1));
        Value written = tensor::InsertOp::create(jb, jl, arith::SelectOp::create(jb, jl, found, pos, none64),
                                                 st[0], ValueRange{i, j});
        scf::YieldOp::create(jb, jl, ValueRange{written, scan.getResult(0), scan.getResult(1)});
      });
  return picks.getResult(0);
}

} // namespace

FailureOr<Value> lowerIndexerTopK(OpBuilder &b, attn::IndexerTopKOp op) {
  Location loc = op.getLoc();
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  Value q = op.getQuery(), k = op.getKeys(), w = op.getWeights();
  Value S = dimOf(b, loc, q, 0), T = dimOf(b, loc, k, 0);
  // K = min(topk, T); a chunked prefill's picks keep the static K of its
  // last chunk (h20-chunked-prefill), which an earlier chunk's fewer
  // entries may not fill: those columns get `none` (T), like every pick
  // past the visible entries.
  Value K = rt.isDynamicDim(1)
                ? arith::MinSIOp::create(b, loc, cIdx(b, loc, static_cast<int64_t>(op.getTopk())), T)
                      .getResult()
                : cIdx(b, loc, rt.getDimSize(1));
  int64_t blockSize = op.getBlockSize() ? static_cast<int64_t>(*op.getBlockSize()) : 1;
  Value out = emptyTensor(b, loc, rt, {S, K});
  Value start = op.getStart() ? op.getStart() : cIdx(b, loc, 0);
  auto rows = scf::ForOp::create(
      b, loc, cIdx(b, loc, 0), S, cIdx(b, loc, 1), ValueRange{out},
      [&](OpBuilder &rb, Location rl, Value i, ValueRange acc) {
        Value row = indexerRow(rb, rl, q, k, w, i, start, static_cast<int64_t>(op.getRatio()),
                               op.getScale().convertToDouble(), op.getCandidates(), blockSize);
        scf::YieldOp::create(rb, rl, selectTopK(rb, rl, row, T, K, T, acc[0], i));
      });
  return rows.getResult(0);
}

FailureOr<Value> lowerIndexerCandidates(OpBuilder &b, attn::IndexerCandidatesOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  Value q = op.getQuery(), k = op.getKeys(), w = op.getWeights();
  Type f32 = b.getF32Type();
  int64_t bs = static_cast<int64_t>(op.getBlockSize());
  int64_t ratio = static_cast<int64_t>(op.getRatio());
  Value S = dimOf(b, loc, q, 0), T = dimOf(b, loc, k, 0);
  Value NB = arith::CeilDivSIOp::create(b, loc, T, cIdx(b, loc, bs));
  // As the top-k's K: a static result width is filled, with `none` (NB)
  // past the blocks there are.
  Value KB = rt.isDynamicDim(1)
                 ? arith::MinSIOp::create(b, loc, cIdx(b, loc, static_cast<int64_t>(op.getBlocks())), NB)
                       .getResult()
                 : cIdx(b, loc, rt.getDimSize(1));
  auto blockType = RankedTensorType::get({ShapedType::kDynamic}, f32);
  Value out = emptyTensor(b, loc, rt, {S, KB});
  Value start = op.getStart() ? op.getStart() : cIdx(b, loc, 0);
  auto rows = scf::ForOp::create(
      b, loc, cIdx(b, loc, 0), S, cIdx(b, loc, 1), ValueRange{out},
      [&](OpBuilder &rb, Location rl, Value i, ValueRange acc) {
        Value row = indexerRow(rb, rl, q, k, w, i, start, ratio, op.getScale().convertToDouble(),
                               Value(), 1);
        // Block scores: the best visible entry; the newest visible entry's
        // block pinned to +inf.
        Value visible = visibleEntries(rb, rl, i, start, ratio);
        Value blocks0 = filledTensor(rb, rl, blockType, {NB}, floatConst(rb, rl, f32, -kInf));
        Value blocks = linalg::GenericOp::create(
                           rb, rl, TypeRange{blockType}, ValueRange{row}, ValueRange{blocks0},
                           {AffineMap::get(1, 0, {getAffineDimExpr(0, ctx)}, ctx),
                            AffineMap::get(1, 0, {getAffineDimExpr(0, ctx).floorDiv(bs)}, ctx)},
                           iterators({true}),
                           [&](OpBuilder &nb, Location nl, ValueRange a) {
                             linalg::YieldOp::create(nb, nl, ValueRange{arith::MaximumFOp::create(nb, nl, a[0], a[1])});
                           })
                           .getResult(0);
        Value hasVisible = cmpI(rb, rl, arith::CmpIPredicate::sgt, visible, cIdx(rb, rl, 0));
        auto pinned = scf::IfOp::create(
            rb, rl, hasVisible,
            [&](OpBuilder &tb, Location tl) {
              Value newest = arith::DivSIOp::create(tb, tl, arith::SubIOp::create(tb, tl, visible, cIdx(tb, tl, 1)),
                                                    cIdx(tb, tl, bs));
              scf::YieldOp::create(
                  tb, tl, tensor::InsertOp::create(tb, tl, floatConst(tb, tl, f32, kInf), blocks, ValueRange{newest})
                              .getResult());
            },
            [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, blocks); });
        scf::YieldOp::create(rb, rl, selectTopK(rb, rl, pinned.getResult(0), NB, KB, NB, acc[0], i));
      });
  return rows.getResult(0);
}

FailureOr<Value> lowerSparseAttentionToLibraryCall(OpBuilder &b, attn::SparseAttentionOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value q = op.getQuery(), latent = op.getLatent(), sink = op.getSink();
  Value compressed = op.getCompressed(), indices = op.getIndices();
  auto qt = cast<RankedTensorType>(q.getType());
  auto rt = cast<RankedTensorType>(op.getResult().getType());
  Type et = qt.getElementType();
  int64_t window = static_cast<int64_t>(op.getWindow());
  const bool kernelApplies = h20::sparseAttentionKernelApplies(op);
  if (!kernelApplies && op->hasAttr(attn::kSplitRowsAttr))
    return op.emitError("internal: a sparse attention split by query rows that the GPU kernel "
                        "does not run (h20-check-row-splits withdraws such splits)");
  if (!kernelApplies)
    return lowerSparseAttention(b, op);
  // The kernel takes the queries as the last S of the latent's rows: with a
  // start, the latent is cut to its first start + S - latent_start rows (a
  // view, no copy).
  Value latentStart = op.getLatentStart();
  if (Value start = op.getStart()) {
    Value rows = arith::AddIOp::create(b, loc, start, dimOf(b, loc, q, 0));
    if (latentStart)
      rows = arith::SubIOp::create(b, loc, rows, latentStart);
    auto lt = cast<RankedTensorType>(latent.getType());
    SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes{rows, tensor::getMixedSize(b, loc, latent, 1)};
    SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
    auto st = RankedTensorType::get({ShapedType::kDynamic, lt.getDimSize(1)}, lt.getElementType());
    latent = tensor::ExtractSliceOp::create(b, loc, st, latent, offsets, sizes, strides);
  }
  SmallVector<Value> dyn;
  for (int64_t k = 0; k < rt.getRank(); ++k)
    if (rt.isDynamicDim(k))
      dyn.push_back(dimOf(b, loc, q, k));
  Value init = tensor::EmptyOp::create(b, loc, rt, dyn);
  SmallVector<Value> ins{q, latent, sink};
  if (compressed)
    ins.append({compressed, indices});
  // A window ring's kernel also needs the queries' start (its first rows
  // may be positions < 0): a last input carries it.
  if (latentStart)
    ins.push_back(startCarrier(b, loc, op.getStart()));
  SmallVector<Value> operands(ins);
  operands.push_back(init);
  SmallVector<AffineMap> maps;
  SmallVector<utils::IteratorType> its;
  carrierIndexing(ctx, operands, /*parallelDims=*/3, maps, its);
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{rt}, ins, ValueRange{init}, maps, its,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        // Placeholder that uses every operand; never run.
        Value f = arith::AddFOp::create(nb, nl, a[0], a[1]);
        f = arith::AddFOp::create(nb, nl, f, castScalar(nb, nl, a[2], et));
        if (compressed) {
          f = arith::AddFOp::create(nb, nl, f, a[3]);
          f = arith::AddFOp::create(nb, nl, f, arith::SIToFPOp::create(nb, nl, et, a[4]));
        }
        if (latentStart)
          f = arith::AddFOp::create(nb, nl, f, arith::SIToFPOp::create(nb, nl, et, a[a.size() - 2]));
        linalg::YieldOp::create(nb, nl, ValueRange{arith::AddFOp::create(nb, nl, f, a.back())});
      });
  g.setLibraryCallAttr(b.getStringAttr(kSparseAttentionLibraryCall));
  SmallVector<NamedAttribute> attrs{b.getNamedAttr("scale", op.getScaleAttr()),
                                    b.getNamedAttr("window", b.getI64IntegerAttr(window))};
  if (latentStart) // the last input carries the start
    attrs.push_back(b.getNamedAttr("ring", b.getUnitAttr()));
  g->setAttr(kSparseAttentionAttrs, b.getDictionaryAttr(attrs));
  // h20-choose-attention-kernels' choice, read by the host program.
  if (Attribute kernel = op->getAttr("h20.kernel"))
    g->setAttr("h20.kernel", kernel);
  attn::copyRowSplit(op, g);
  return g.getResult(0);
}

FailureOr<Value> lowerIndexerToLibraryCall(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  MLIRContext *ctx = b.getContext();
  auto topk = dyn_cast<attn::IndexerTopKOp>(op);
  auto cands = dyn_cast<attn::IndexerCandidatesOp>(op);
  if (!topk && !cands)
    return op->emitError("internal: not an indexer op");
  Value q = op->getOperand(0), k = op->getOperand(1), w = op->getOperand(2);
  Value candidates = topk ? topk.getCandidates() : Value();
  int64_t mode = cands ? 2 : candidates ? 1 : 0;
  int64_t ratio = static_cast<int64_t>(topk ? topk.getRatio() : cands.getRatio());
  int64_t block = cands ? static_cast<int64_t>(cands.getBlockSize())
                        : topk.getBlockSize() ? static_cast<int64_t>(*topk.getBlockSize()) : 1;
  double scale = (topk ? topk.getScale() : cands.getScale()).convertToDouble();
  if (ratio < 1 || block < 1)
    return op->emitError("indexer: ratio and block size must be >= 1");
  auto rt = cast<RankedTensorType>(op->getResult(0).getType());
  Value S = dimOf(b, loc, q, 0), T = dimOf(b, loc, k, 0);
  // Result [S, K]: K = min(topk, T), or KB = min(blocks, NB).
  Value K;
  // ceil(T / block) as floor((T + block - 1) / block) (T >= 0): a chunked
  // prefill's host program evaluates the floor form in the chunk index.
  Value NB = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, T, cIdx(b, loc, block - 1)), cIdx(b, loc, block));
  if (topk)
    K = arith::MinSIOp::create(b, loc, cIdx(b, loc, static_cast<int64_t>(topk.getTopk())), T);
  else
    K = arith::MinSIOp::create(b, loc, cIdx(b, loc, static_cast<int64_t>(cands.getBlocks())), NB);
  SmallVector<Value> outDyn;
  if (rt.isDynamicDim(0))
    outDyn.push_back(S);
  if (rt.isDynamicDim(1))
    outDyn.push_back(K);
  Value out = tensor::EmptyOp::create(b, loc, rt, outDyn);
  // Scratch columns: the T entry scores (mode 2: then the NB block scores;
  // mode 1: the KB * block entries of the candidate blocks, which can pass T
  // by up to block - 1 when the last block is partial).
  Value width = T;
  if (mode == 2)
    width = arith::AddIOp::create(b, loc, T, NB);
  // (mode 1: T + the KB * block entries, a bound of the larger of the two
  // that a chunked prefill's host program evaluates in the chunk index.)
  if (mode == 1)
    width = arith::AddIOp::create(
        b, loc, T,
        arith::MulIOp::create(b, loc, dimOf(b, loc, candidates, 1), cIdx(b, loc, block)));
  // One scratch row per CTA of the persistent grid h20-choose-attention-
  // kernels sized for the target (the H200's when it did not run).
  int64_t ctas = kIndexerCtas;
  if (auto kernel = op->getAttrOfType<DictionaryAttr>("h20.kernel"))
    if (auto c = kernel.getAs<IntegerAttr>("ctas"); c && c.getInt() > 0)
      ctas = c.getInt();
  auto scratchType = RankedTensorType::get({ctas, ShapedType::kDynamic}, b.getF32Type());
  Value scratch = tensor::EmptyOp::create(b, loc, scratchType, ValueRange{width});

  SmallVector<Value> ins{q, k, w};
  if (candidates)
    ins.push_back(candidates);
  // The start (query row 0's prompt position): a last input carries it.
  Value start = topk ? topk.getStart() : cands.getStart();
  if (start)
    ins.push_back(startCarrier(b, loc, start));
  SmallVector<Value> outs{out, scratch};
  SmallVector<Value> operands(ins);
  operands.append(outs.begin(), outs.end());
  SmallVector<AffineMap> maps;
  SmallVector<utils::IteratorType> its;
  carrierIndexing(ctx, operands, /*parallelDims=*/4, maps, its);
  Type f32 = b.getF32Type();
  auto g = linalg::GenericOp::create(
      b, loc, TypeRange{rt, scratchType}, ins, outs, maps, its,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        // Placeholder that uses every operand; never run.
        Value f = castScalar(nb, nl, a[0], f32);
        f = arith::AddFOp::create(nb, nl, f, castScalar(nb, nl, a[1], f32));
        f = arith::AddFOp::create(nb, nl, f, castScalar(nb, nl, a[2], f32));
        f = arith::AddFOp::create(nb, nl, f, a.back());
        Value i = a[a.size() - 2];
        if (candidates)
          i = arith::AddIOp::create(nb, nl, i, a[3]);
        if (start)
          i = arith::AddIOp::create(
              nb, nl, i, arith::ExtUIOp::create(nb, nl, nb.getI64Type(), a[ins.size() - 1]));
        linalg::YieldOp::create(nb, nl, ValueRange{i, f});
      });
  g.setLibraryCallAttr(b.getStringAttr(kIndexerLibraryCall));
  g->setAttr(kIndexerAttrs,
             b.getDictionaryAttr({b.getNamedAttr("mode", b.getI64IntegerAttr(mode)),
                                  b.getNamedAttr("ratio", b.getI64IntegerAttr(ratio)),
                                  b.getNamedAttr("block", b.getI64IntegerAttr(block)),
                                  b.getNamedAttr("scale", b.getF64FloatAttr(scale))}));
  if (Attribute kernel = op->getAttr("h20.kernel"))
    g->setAttr("h20.kernel", kernel);
  attn::copyRowSplit(op, g);
  return g.getResult(0);
}

} // namespace h20::lowering
