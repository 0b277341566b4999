//===- OnlineSoftmax.cpp - The kiln-online-softmax pass --------------------===//
//
// The FlashAttention recurrence as a rewrite. kiln-tile leaves attention as: loop 1 writes score tiles into a
// row (initialised to -inf), kiln.softmax normalises the row, loop 2 reads the probabilities tile by tile and
// accumulates acc += f(P_tile). When both loops walk the same tiles, they fuse into one loop carrying
//   m' = max(m, rowmax(S)),  P = exp2(S - m'),  alpha = exp2(m - m'),  l' = l alpha + rowsum(P),
//   acc' = acc alpha + f(P)
// and the result is acc / l (and the log-sum-exp, when asked, m ln2 + ln l). Scores are kept in base 2: log2(e)
// is folded into the score scale when the tile is a scaled product, otherwise applied as one multiply. A row
// whose running max is still -inf uses 0 in its place, so fully masked tiles contribute nothing instead of NaN.
//
// A score_mod whose results are bounded (a softcap: cap * tanh(x) lies in [-cap, cap]) needs no running max: its
// upper bound U serves as a fixed one, P = exp2(S - U) <= 1, and the loop carries only l and acc, with neither
// alpha nor the accumulator's rescale per tile (the work a softcap adds to each score is then paid for by work it
// removes). It holds where no visible score's P underflows: the scores' whole range, in base 2, at most
// kFixedMaxHeadroom below U, so the smallest P keeps 26 binary orders above f32's smallest normal, and P keeps
// that range on its way to the tensor cores (rounded to bf16 or kept f32; f16's exponent is too short). The
// bounds are those of the score_mod's f32 arithmetic, each result widened by its rounding, and at most 2^20 in
// base 2. Since P V is then up to 2^-100 smaller than with a running maximum, in a row whose scores all sit near
// the lower bound the products of values below about 2^-26 (1.5e-8) fall into f32's subnormal range, which the
// GPU flushes: such an output may be off by up to about 2^-26 in absolute terms; elsewhere it is the running
// maximum's answer up to rounding.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "TilingUtils.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNONLINESOFTMAX
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

static constexpr double kLog2E = 1.4426950408889634;
static constexpr double kLn2 = 0.6931471805599453;

/// True when `offsets`/`sizes` of a slice are [0, iv] / [rows, width] with unit strides.
static bool isColumnTile(OffsetSizeAndStrideOpInterface slice, Value iv, int64_t rows, int64_t width) {
  ArrayRef<int64_t> staticSizes = slice.getStaticSizes();
  if (slice.getMixedOffsets().size() != 2 || !slice.hasUnitStride() || staticSizes[0] != rows ||
      staticSizes[1] != width)
    return false;
  std::optional<int64_t> rowOffset = getConstantIntValue(slice.getMixedOffsets()[0]);
  return rowOffset == 0 && dyn_cast<Value>(slice.getMixedOffsets()[1]) == iv;
}

/// True when two loops have the same bounds and step.
static bool sameIterationSpace(scf::ForOp a, scf::ForOp b) {
  auto same = [](Value x, Value y) {
    if (x == y)
      return true;
    std::optional<int64_t> cx = getConstantIntValue(x), cy = getConstantIntValue(y);
    return cx && cy && *cx == *cy;
  };
  return same(a.getLowerBound(), b.getLowerBound()) && same(a.getUpperBound(), b.getUpperBound()) &&
         same(a.getStep(), b.getStep());
}

/// True when `value` is a linalg.fill of -inf.
static bool isNegInfFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  FloatAttr constant;
  return fill && matchPattern(fill.getInputs()[0], m_Constant(&constant)) &&
         constant.getValue().isInfinity() && constant.getValue().isNegative();
}

/// The score tile below its position masking: the scf.if that masks only the tiles needing it (its then
/// branch a `kiln.position_mask` generic of the else value) and such generics, looked through.
static Value belowPositionMasks(Value v) {
  while (true) {
    if (auto ifOp = v.getDefiningOp<scf::IfOp>()) {
      unsigned index = cast<OpResult>(v).getResultNumber();
      Value thenValue = ifOp.thenYield().getOperand(index), elseValue = ifOp.elseYield().getOperand(index);
      auto masking = thenValue.getDefiningOp<linalg::GenericOp>();
      if (!masking || !masking->hasAttr("kiln.position_mask") || masking.getDpsInputs()[0] != elseValue)
        return v;
      v = elseValue;
      continue;
    }
    auto masking = v.getDefiningOp<linalg::GenericOp>();
    if (!masking || !masking->hasAttr("kiln.position_mask"))
      return v;
    v = masking.getDpsInputs()[0];
  }
}

/// Brings a score tile to base 2. When the tile is `s * c` with a scalar constant c, seen through the
/// position masking (which commutes with a positive scale), c becomes c log2(e); otherwise one multiply.
static Value toBase2(OpBuilder &b, Location loc, Value tile) {
  Value v = belowPositionMasks(tile);
  if (auto mul = v.getDefiningOp<MulOp>()) {
    DenseElementsAttr scale;
    if (matchPattern(mul.getRhs(), m_Constant(&scale)) && scale.isSplat() &&
        scale.getType().getElementType().isF32() && scale.getSplatValue<APFloat>().isNonZero() &&
        !scale.getSplatValue<APFloat>().isNegative()) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(mul);
      double folded = scale.getSplatValue<APFloat>().convertToDouble() * kLog2E;
      auto type = cast<RankedTensorType>(scale.getType());
      Value constant = ConstantOp::create(
          b, loc, DenseElementsAttr::get(type, ArrayRef<Attribute>{b.getF32FloatAttr(folded)}));
      mul.getRhsMutable().assign(constant);
      return tile;
    }
  }
  return MulOp::create(b, loc, cast<RankedTensorType>(tile.getType()), tile, scalarConstant(b, loc, kLog2E));
}

/// The most a fixed maximum may exceed the least visible score, in base 2 (see the file comment).
static constexpr double kFixedMaxHeadroom = 100.0;

/// The interval of a scalar f32 value computed in a score_mod's body from constants, tanh (whatever its
/// argument) and products, quotients by constants, sums, differences and negations of bounded values; null for
/// anything else (the score itself, a table read). `known` memoizes the values already bounded, so that a body
/// whose values reuse each other costs one visit per value.
using Interval = std::pair<double, double>;
static std::optional<Interval> boundsOf(Value value, DenseMap<Value, std::optional<Interval>> &known) {
  if (auto it = known.find(value); it != known.end())
    return it->second;
  auto bound = [&]() -> std::optional<Interval> {
    FloatAttr constant;
    if (matchPattern(value, m_Constant(&constant)) && std::isfinite(constant.getValueAsDouble()))
      return Interval{constant.getValueAsDouble(), constant.getValueAsDouble()};
    Operation *op = value.getDefiningOp();
    if (!op)
      return std::nullopt;
    if (isa<math::TanhOp>(op))
      return Interval{-1.0, 1.0};
    if (auto negation = dyn_cast<arith::NegFOp>(op)) {
      std::optional<Interval> x = boundsOf(negation.getOperand(), known);
      return x ? std::optional<Interval>(Interval{-x->second, -x->first}) : std::nullopt;
    }
    if (!isa<arith::MulFOp, arith::DivFOp, arith::AddFOp, arith::SubFOp>(op))
      return std::nullopt;
    std::optional<Interval> x = boundsOf(op->getOperand(0), known);
    if (!x)
      return std::nullopt;
    std::optional<Interval> y = boundsOf(op->getOperand(1), known);
    if (!y)
      return std::nullopt;
    Interval exact;
    if (isa<arith::AddFOp>(op)) {
      exact = {x->first + y->first, x->second + y->second};
    } else if (isa<arith::SubFOp>(op)) {
      exact = {x->first - y->second, x->second - y->first};
    } else if (isa<arith::MulFOp>(op)) {
      double corners[] = {x->first * y->first, x->first * y->second, x->second * y->first, x->second * y->second};
      exact = {*std::min_element(std::begin(corners), std::end(corners)),
               *std::max_element(std::begin(corners), std::end(corners))};
    } else {
      // A quotient by a constant other than zero only.
      if (y->first != y->second || y->first == 0)
        return std::nullopt;
      exact = {std::min(x->first / y->first, x->second / y->first),
               std::max(x->first / y->first, x->second / y->first)};
    }
    // The kernel rounds each result to f32: widened by one f32 ulp of its largest magnitude (2^-23 relative), so
    // that a large intermediate that rounding moves far (x + 2^40 - 2^40) widens the interval as far.
    double ulp = std::max(std::abs(exact.first), std::abs(exact.second)) * 0x1p-23;
    return Interval{exact.first - ulp, exact.second + ulp};
  }();
  // Bounds that overflowed a double (or became NaN) bound nothing.
  if (bound && (!std::isfinite(bound->first) || !std::isfinite(bound->second)))
    bound = std::nullopt;
  known[value] = bound;
  return bound;
}

/// The fixed base-2 maximum for a row of `scores` (a score tile of the row loop, before toBase2) whose
/// probabilities reach the tensor cores with f32's exponent range (`pKeepsRange`): U log2(e), where the tile is a score_mod's generic (seen
/// through the position masking, whose -inf hides a score) bounded above by U and below by L with (U - L) log2(e)
/// within kFixedMaxHeadroom; null otherwise.
static std::optional<double> fixedMaxOf(Value scores, bool pKeepsRange) {
  if (!pKeepsRange)
    return std::nullopt;
  auto scoreMod = belowPositionMasks(scores).getDefiningOp<linalg::GenericOp>();
  if (!scoreMod || scoreMod.getNumResults() != 1)
    return std::nullopt;
  DenseMap<Value, std::optional<Interval>> known;
  std::optional<Interval> bounds = boundsOf(scoreMod.getBody()->getTerminator()->getOperand(0), known);
  if (!bounds || !((bounds->second - bounds->first) * kLog2E <= kFixedMaxHeadroom))
    return std::nullopt;
  // Bounds of at most 2^20 in base 2, so that the f32 roundings of the fixed maximum and of each score in base 2
  // stay within 2^-3 of exact.
  if (std::max(std::abs(bounds->first), std::abs(bounds->second)) * kLog2E > 0x1p20)
    return std::nullopt;
  return bounds->second * kLog2E;
}

/// max(x, -inf -> 0): the running max used as the exponent offset.
static Value safeMax(OpBuilder &b, Location loc, Value m) {
  Value negInf = floatConstant(b, loc, m.getType(), -std::numeric_limits<double>::infinity());
  Value isNegInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, negInf);
  return arith::SelectOp::create(b, loc, isNegInf, floatConstant(b, loc, m.getType(), 0.0), m);
}

LogicalResult kiln::rewriteOnlineSoftmax(RewriterBase &rewriter, SoftmaxOp softmax) {
  RankedTensorType rowType = softmax.getType();
  if (rowType.getRank() != 2 || softmax.getAxis() != 1 || !rowType.getElementType().isF32())
    return rewriter.notifyMatchFailure(softmax, "expects an f32 softmax over axis 1 of a 2-D row");
  int64_t rows = rowType.getDimSize(0);

  // Loop 1 builds the row from column tiles.
  auto producer = softmax.getInput().getDefiningOp<scf::ForOp>();
  if (!producer || producer.getNumRegionIterArgs() != 1 || !isNegInfFill(producer.getInitArgs()[0]))
    return rewriter.notifyMatchFailure(softmax, "the row is not built by an scf.for from a -inf row");
  auto insert = producer.getBody()->getTerminator()->getOperand(0).getDefiningOp<tensor::InsertSliceOp>();
  if (!insert || insert.getDest() != producer.getRegionIterArgs()[0] ||
      !producer.getRegionIterArgs()[0].hasOneUse() || insert.getStaticSizes().size() != 2)
    return rewriter.notifyMatchFailure(softmax, "the row loop does not insert one column tile per step");
  int64_t width = insert.getStaticSizes()[1];
  if (!isColumnTile(insert, producer.getInductionVar(), rows, width) ||
      getConstantIntValue(producer.getStep()) != width)
    return rewriter.notifyMatchFailure(softmax, "the row loop's tiles are not [rows, step] at column iv");

  LogSumExpOp logSumExp;
  for (Operation *user : producer.getResult(0).getUsers()) {
    if (user == softmax.getOperation())
      continue;
    auto lse = dyn_cast<LogSumExpOp>(user);
    if (!lse || logSumExp || lse.getAxis() != 1)
      return rewriter.notifyMatchFailure(softmax, "the row has users other than the softmax and its logsumexp");
    logSumExp = lse;
  }

  // Loop 2 reads the probabilities tile by tile and accumulates.
  scf::ForOp consumer;
  SmallVector<tensor::ExtractSliceOp> reads;
  for (Operation *user : softmax->getUsers()) {
    auto read = dyn_cast<tensor::ExtractSliceOp>(user);
    auto loop = read ? dyn_cast<scf::ForOp>(read->getParentOp()) : scf::ForOp();
    if (!loop || (consumer && loop != consumer) || !isColumnTile(read, loop.getInductionVar(), rows, width))
      return rewriter.notifyMatchFailure(softmax, "the probabilities are not read tile by tile in one scf.for");
    consumer = loop;
    reads.push_back(read);
  }
  if (!consumer || consumer->getBlock() != producer->getBlock() || !sameIterationSpace(producer, consumer) ||
      consumer.getNumRegionIterArgs() != 1)
    return rewriter.notifyMatchFailure(softmax, "no accumulation loop over the same tiles");
  Value acc = consumer.getRegionIterArgs()[0];
  auto update = consumer.getBody()->getTerminator()->getOperand(0).getDefiningOp<AddOp>();
  if (!update || !acc.hasOneUse() || (update.getLhs() != acc && update.getRhs() != acc))
    return rewriter.notifyMatchFailure(softmax, "the loop does not accumulate acc + f(P)");
  // Rescaling acc by alpha and dividing by l at the end is only right when f is linear in P: each tile of P
  // must feed a matmul whose product is the accumulated term.
  Value term = update.getLhs() == acc ? update.getRhs() : update.getLhs();
  // P may be rounded to the other operand's type on its way (a kiln.cast), as the tensor cores take it.
  for (tensor::ExtractSliceOp read : reads) {
    for (Operation *user : read->getUsers()) {
      if (auto rounding = dyn_cast<CastOp>(user); rounding && rounding->hasOneUse())
        user = *rounding->user_begin();
      auto product = dyn_cast<MatmulOp>(user);
      if (!product || product.hasEpilogue() || product.getResult() != term)
        return rewriter.notifyMatchFailure(softmax, "the accumulated term is not a matmul of the P tile");
    }
  }
  // The log-sum-exp is rebuilt after the fused loop; everything that reads it must come after that loop.
  if (logSumExp)
    for (Operation *user : logSumExp->getUsers()) {
      Operation *ancestor = consumer->getBlock()->findAncestorOpInBlock(*user);
      if (!ancestor || !consumer->isBeforeInBlock(ancestor))
        return rewriter.notifyMatchFailure(softmax, "the logsumexp is used before the accumulation loop");
    }

  Location loc = softmax.getLoc();
  Type f32 = rewriter.getF32Type();
  // P reaches the tensor cores as f32 or rounded by a cast; every such rounding must keep f32's exponent range.
  bool pKeepsRange = true;
  for (tensor::ExtractSliceOp read : reads)
    for (Operation *user : read->getUsers())
      if (auto rounding = dyn_cast<CastOp>(user)) {
        Type type = rounding.getType().getElementType();
        pKeepsRange &= type.isF32() || type.isBF16();
      }
  std::optional<double> fixedMax = fixedMaxOf(insert.getSource(), pKeepsRange);
  MLIRContext *ctx = rewriter.getContext();
  auto accType = cast<RankedTensorType>(acc.getType());
  AffineMap tileId = rewriter.getMultiDimIdentityMap(2), rowOfTile = getDroppedAxesMap(2, {1}, ctx);
  AffineMap rowId = rewriter.getMultiDimIdentityMap(1);

  rewriter.setInsertionPoint(consumer);
  SmallVector<Value> inits;
  if (!fixedMax)
    inits.push_back(createFilled(rewriter, loc, {rows}, f32, -std::numeric_limits<double>::infinity()));
  inits.push_back(createFilled(rewriter, loc, {rows}, f32, 0.0));
  inits.push_back(consumer.getInitArgs()[0]);
  auto fused = scf::ForOp::create(
      rewriter, loc, producer.getLowerBound(), producer.getUpperBound(), producer.getStep(), inits,
      [&](OpBuilder &b, Location l, Value iv, ValueRange carried) {
        Value m = fixedMax ? Value() : carried[0], sum = carried[carried.size() - 2], accIn = carried.back();
        IRMapping scoreMapping;
        scoreMapping.map(producer.getInductionVar(), iv);
        for (Operation &op : producer.getBody()->without_terminator())
          if (&op != insert.getOperation())
            b.clone(op, scoreMapping);
        Value scores = toBase2(b, l, scoreMapping.lookupOrDefault(insert.getSource()));

        auto first = [](OpBuilder &, Location, ValueRange x) { return x[0]; };
        auto accumulate = [&](Value probs, Value accStart) {
          IRMapping valueMapping;
          valueMapping.map(consumer.getInductionVar(), iv);
          valueMapping.map(acc, accStart);
          for (tensor::ExtractSliceOp read : reads)
            valueMapping.map(read.getResult(), probs);
          for (Operation &op : consumer.getBody()->without_terminator())
            if (!llvm::is_contained(reads, dyn_cast<tensor::ExtractSliceOp>(&op)))
              b.clone(op, valueMapping);
          return valueMapping.lookup(update.getResult());
        };
        if (fixedMax) {
          // P = exp2(S - U) against the fixed maximum; l and acc add this tile's terms unscaled.
          double offset = *fixedMax;
          Value probs = buildElementwise(b, l, {rows, width}, f32, ValueRange{scores}, {tileId},
                                         [&](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                           Value shifted = arith::SubFOp::create(nb, nl, x[0], floatConstant(nb, nl, f32, offset));
                                           return math::Exp2Op::create(nb, nl, shifted);
                                         });
          Value tileSum = buildReduction(b, l, {rows, width}, {1}, Combiner::Sum, probs, tileId, first);
          Value sumNew = buildElementwise(b, l, {rows}, f32, ValueRange{sum, tileSum}, {rowId, rowId},
                                          [](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                            return arith::AddFOp::create(nb, nl, x[0], x[1]);
                                          });
          scf::YieldOp::create(b, l, ValueRange{sumNew, accumulate(probs, accIn)});
          return;
        }
        Value tileMax = buildReduction(b, l, {rows, width}, {1}, Combiner::Max, scores, tileId, first);
        Value mNew = buildElementwise(b, l, {rows}, f32, ValueRange{m, tileMax}, {rowId, rowId},
                                      [](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                        return arith::MaximumFOp::create(nb, nl, x[0], x[1]);
                                      });
        Value probs = buildElementwise(b, l, {rows, width}, f32, ValueRange{scores, mNew}, {tileId, rowOfTile},
                                       [](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                         Value shifted = arith::SubFOp::create(nb, nl, x[0], safeMax(nb, nl, x[1]));
                                         return math::Exp2Op::create(nb, nl, shifted);
                                       });
        Value alpha = buildElementwise(b, l, {rows}, f32, ValueRange{m, mNew}, {rowId, rowId},
                                       [](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                         Value shifted = arith::SubFOp::create(nb, nl, x[0], safeMax(nb, nl, x[1]));
                                         return math::Exp2Op::create(nb, nl, shifted);
                                       });
        Value tileSum = buildReduction(b, l, {rows, width}, {1}, Combiner::Sum, probs, tileId, first);
        Value sumNew = buildElementwise(b, l, {rows}, f32, ValueRange{sum, alpha, tileSum}, {rowId, rowId, rowId},
                                        [](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                          Value scaled = arith::MulFOp::create(nb, nl, x[0], x[1]);
                                          return arith::AddFOp::create(nb, nl, scaled, x[2]);
                                        });
        AffineMap accId = b.getMultiDimIdentityMap(accType.getRank());
        AffineMap accRow = AffineMap::get(accType.getRank(), 0, getAffineDimExpr(0, ctx));
        Value accScaled = buildElementwise(b, l, accType.getShape(), accType.getElementType(),
                                           ValueRange{accIn, alpha}, {accId, accRow},
                                           [](OpBuilder &nb, Location nl, ValueRange x) -> Value {
                                             return arith::MulFOp::create(nb, nl, x[0], x[1]);
                                           });

        scf::YieldOp::create(b, l, ValueRange{mNew, sumNew, accumulate(probs, accScaled)});
      });

  unsigned results = fused.getNumResults();
  Value finalSum = fused.getResult(results - 2), finalAcc = fused.getResult(results - 1);
  Value finalMax = fixedMax ? Value() : fused.getResult(0);
  bool zeroEmptyRows = softmax.getZeroEmptyRows();
  AffineMap accId = rewriter.getMultiDimIdentityMap(accType.getRank());
  AffineMap accRow = AffineMap::get(accType.getRank(), 0, getAffineDimExpr(0, ctx));
  Value normalised = buildElementwise(rewriter, loc, accType.getShape(), accType.getElementType(),
                                      ValueRange{finalAcc, finalSum}, {accId, accRow},
                                      [&](OpBuilder &b, Location l, ValueRange x) -> Value {
                                        return zeroEmptyRows ? divideByTotal(b, l, x[0], x[1])
                                                             : arith::DivFOp::create(b, l, x[0], x[1]);
                                      });
  rewriter.replaceAllUsesWith(consumer.getResult(0), normalised);
  if (logSumExp) {
    if (!finalMax)
      finalMax = createFilled(rewriter, loc, {rows}, f32, *fixedMax);
    Value lse = buildElementwise(rewriter, loc, {rows}, f32, ValueRange{finalMax, finalSum}, {rowId, rowId},
                                 [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                   Value natural = arith::MulFOp::create(b, l, x[0], floatConstant(b, l, x[0].getType(), kLn2));
                                   return arith::AddFOp::create(b, l, natural, math::LogOp::create(b, l, x[1]));
                                 });
    rewriter.replaceOp(logSumExp, lse);
  }
  rewriter.eraseOp(consumer);
  rewriter.eraseOp(softmax);
  rewriter.eraseOp(producer);
  return success();
}

namespace {
struct KilnOnlineSoftmaxPass : kiln::impl::KilnOnlineSoftmaxBase<KilnOnlineSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<SoftmaxOp> candidates;
    getOperation()->walk([&](SoftmaxOp op) { candidates.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (SoftmaxOp op : candidates)
      (void)rewriteOnlineSoftmax(rewriter, op);
  }
};
} // namespace
