//===- Contraction.cpp - kiln.matmul and kiln.attention to linalg ----------===//
//
// The untiled, reference form of the two contractions: plain linalg.generic ops with f32 accumulation. The
// tiled pipeline never reaches these patterns for ops it has tiled; they give `kiln-run --check` its reference
// and lower whatever is left untiled. Loop order puts the output's innermost dimension last so that the host
// backend's loops vectorise. A split attention (`kv_chunk`) gives each chunk of keys its own softmax and lse, and
// kiln.merge_splits combines the chunks by their lse; a split matmul (`k_chunk`) each chunk of the contraction
// its own partial product, and kiln.sum_splits adds them up.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

namespace {

/// Map of one matmul operand in the iteration space ([chunk,] batch..., m, k, n) of `numDims` dimensions, whose
/// batch dimensions start at `batchStart`: the operand's own batch dimensions broadcast against the result's,
/// then its matrix dimensions (`matrix`: the iteration dimensions they follow).
AffineMap matmulOperandMap(RankedTensorType operand, ArrayRef<int64_t> batchShape, unsigned numDims,
                           unsigned batchStart, ArrayRef<unsigned> matrix, MLIRContext *ctx) {
  AffineMap batchMap = getBroadcastMap(operand.getShape().drop_back(2), batchShape, ctx);
  SmallVector<AffineExpr> exprs;
  for (AffineExpr expr : batchMap.getResults())
    exprs.push_back(expr.shiftDims(batchMap.getNumDims(), batchStart));
  for (unsigned dim : matrix)
    exprs.push_back(getAffineDimExpr(dim, ctx));
  return AffineMap::get(numDims, 0, exprs, ctx);
}

/// Dimension `dim` of `value` zero-padded at its end to `chunks * chunk` and viewed as two, (chunks, chunk).
Value splitDim(OpBuilder &b, Location loc, Value value, int64_t dim, int64_t chunks, int64_t chunk) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = chunks * chunk;
  if (type.getDimSize(dim) != chunks * chunk)
    value = tensor::createPadHighOp(RankedTensorType::get(shape, type.getElementType()), value,
                                    floatConstant(b, loc, type.getElementType(), 0.0), /*nofold=*/false, loc, b);
  SmallVector<ReassociationIndices> reassociation;
  for (int64_t d = 0, rank = type.getRank(); d < rank; ++d)
    reassociation.push_back(d < dim ? ReassociationIndices{d} : d == dim ? ReassociationIndices{d, d + 1}
                                                                          : ReassociationIndices{d + 1});
  shape[dim] = chunk;
  shape.insert(shape.begin() + dim, chunks);
  return tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get(shape, type.getElementType()), value,
                                      reassociation);
}

/// The stored result of an f32 accumulator `acc` of `resultType`'s shape: the epilogue (its operands broadcast
/// to the result), or else the rounding to the result's element type.
Value finishAccumulator(OpBuilder &b, Location loc, Value acc, RankedTensorType resultType, Region &epilogue,
                        ValueRange epilogueOperands) {
  if (!epilogue.empty()) {
    SmallVector<Value> inputs{acc};
    SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(resultType.getRank())};
    for (Value operand : epilogueOperands) {
      inputs.push_back(operand);
      maps.push_back(getBroadcastMap(cast<RankedTensorType>(operand.getType()).getShape(), resultType.getShape(),
                                     b.getContext()));
    }
    return buildEpilogue(b, loc, epilogue, resultType.getShape(), resultType.getElementType(), inputs, maps);
  }
  if (resultType.getElementType() == b.getF32Type())
    return acc;
  return buildBroadcastElementwise(b, loc, resultType, acc, [](OpBuilder &, Location, ValueRange x) { return x[0]; });
}

struct MatmulLowering : OpConversionPattern<MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MatmulOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType resultType = op.getType();
    // A split matmul (`k_chunk = C`) has a leading chunk dimension c and contracts k = c * C + j: its operands'
    // contraction dimension is zero-padded to whole chunks and viewed as (c, j).
    std::optional<int64_t> chunk = op.getKChunk();
    unsigned chunkDims = chunk ? 1 : 0;
    ArrayRef<int64_t> batchShape = resultType.getShape().drop_front(chunkDims).drop_back(2);
    int64_t numBatch = batchShape.size();
    unsigned numDims = chunkDims + numBatch + 3;
    // Iteration dimensions: [chunk,] batch..., m, k (within the chunk), n.
    unsigned m = chunkDims + numBatch, k = m + 1, n = m + 2;
    SmallVector<unsigned> contracted{k};
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    RankedTensorType lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType();
    if (chunk) {
      contracted = {0, k};
      int64_t splits = op.getKChunkCount();
      lhs = splitDim(rewriter, loc, lhs, op.getTransposeLhs() ? lhsType.getRank() - 2 : lhsType.getRank() - 1,
                     splits, *chunk);
      rhs = splitDim(rewriter, loc, rhs, op.getTransposeRhs() ? rhsType.getRank() - 1 : rhsType.getRank() - 2,
                     splits, *chunk);
    }
    auto matrix = [&](bool transposed, ArrayRef<unsigned> first, ArrayRef<unsigned> second) {
      SmallVector<unsigned> dims(transposed ? second : first);
      llvm::append_range(dims, transposed ? first : second);
      return dims;
    };
    AffineMap lhsMap = matmulOperandMap(lhsType, batchShape, numDims, chunkDims,
                                        matrix(op.getTransposeLhs(), {m}, contracted), ctx);
    AffineMap rhsMap = matmulOperandMap(rhsType, batchShape, numDims, chunkDims,
                                        matrix(op.getTransposeRhs(), contracted, {n}), ctx);
    SmallVector<AffineExpr> outExprs;
    for (unsigned d = 0; d < chunkDims + numBatch; ++d)
      outExprs.push_back(getAffineDimExpr(d, ctx));
    outExprs.append({getAffineDimExpr(m, ctx), getAffineDimExpr(n, ctx)});
    AffineMap outMap = AffineMap::get(numDims, 0, outExprs, ctx);

    SmallVector<utils::IteratorType> iterators(numDims, utils::IteratorType::parallel);
    iterators[k] = utils::IteratorType::reduction;
    Value acc = createFilled(rewriter, loc, resultType.getShape(), rewriter.getF32Type(), 0.0);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{acc.getType()}, ValueRange{lhs, rhs}, ValueRange{acc},
        ArrayRef<AffineMap>{lhsMap, rhsMap, outMap}, iterators,
        [](OpBuilder &b, Location nestedLoc, ValueRange args) {
          Value product = arith::MulFOp::create(b, nestedLoc, widen(b, nestedLoc, args[0]),
                                                widen(b, nestedLoc, args[1]));
          linalg::YieldOp::create(b, nestedLoc, arith::AddFOp::create(b, nestedLoc, args[2], product).getResult());
        });
    rewriter.replaceOp(op, finishAccumulator(rewriter, loc, generic.getResult(0), resultType, op.getEpilogue(),
                                             adaptor.getEpilogueOperands()));
    return success();
  }
};

/// A split attention's (`kv_chunk = C`) results from its masked scores `logits` [B, H, Sq, Sk]: the keys padded
/// to N * C (scores -inf, values 0) and read as key c of chunk n at n * C + c, a softmax and P V per chunk over
/// the iteration space (n, b, h, i, c[, e]). A chunk a row sees no key of gets weights 0, so its lse is -inf.
SmallVector<Value> lowerChunks(OpBuilder &b, AttentionOp op, Value logits, Value v, int64_t chunk) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  auto scoreType = cast<RankedTensorType>(logits.getType());
  int64_t batch = scoreType.getDimSize(0), heads = scoreType.getDimSize(1), seqQ = scoreType.getDimSize(2);
  int64_t splits = op.getKvSplits(), padded = splits * chunk, group = op.getGroupSize();
  RankedTensorType vType = cast<RankedTensorType>(v.getType());
  int64_t valueDim = vType.getDimSize(3), seqDim = op.getSeqDim();
  const double negInf = -std::numeric_limits<double>::infinity();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };

  // Padded to whole chunks and viewed with the key split in two, (n, c): key n * C + c.
  Value scores = tensor::createPadHighOp(RankedTensorType::get({batch, heads, seqQ, padded}, f32), logits,
                                         floatConstant(b, loc, f32, negInf), /*nofold=*/false, loc, b);
  scores = tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get({batch, heads, seqQ, splits, chunk}, f32),
                                         scores, SmallVector<ReassociationIndices>{{0}, {1}, {2}, {3, 4}});
  SmallVector<int64_t> paddedV(vType.getShape()), splitV(vType.getShape());
  paddedV[seqDim] = padded;
  splitV[seqDim] = chunk;
  splitV.insert(splitV.begin() + seqDim, splits);
  Value values = tensor::createPadHighOp(RankedTensorType::get(paddedV, vType.getElementType()), v,
                                         floatConstant(b, loc, vType.getElementType(), 0.0), false, loc, b);
  SmallVector<ReassociationIndices> keySplit;
  for (int64_t dim = 0; dim < 4; ++dim)
    keySplit.push_back(dim < seqDim ? ReassociationIndices{dim}
                       : dim == seqDim ? ReassociationIndices{dim, dim + 1}
                                       : ReassociationIndices{dim + 1});
  values = tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get(splitV, vType.getElementType()), values,
                                         keySplit);

  // Iteration space (n, b, h, i, c).
  SmallVector<int64_t> space{splits, batch, heads, seqQ, chunk};
  AffineMap scoreMap = AffineMap::get(5, 0, {d(1), d(2), d(3), d(0), d(4)}, ctx);
  AffineMap full = b.getMultiDimIdentityMap(5), row = getDroppedAxesMap(5, {4}, ctx);
  auto first = [](OpBuilder &, Location, ValueRange x) { return x[0]; };
  Value rowMax = buildReduction(b, loc, space, {4}, Combiner::Max, scores, scoreMap, first);
  Value probs = buildElementwise(b, loc, space, f32, ValueRange{scores, rowMax}, {scoreMap, row},
                                 [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                                   return expBelowMax(nb, l, x[0], x[1]); // a chunk without keys: 0
                                 });
  Value rowSum = buildReduction(b, loc, space, {4}, Combiner::Sum, probs, full, first);

  // parts[n, b, h, i, e] = sum_c probs[n, b, h, i, c] * v[b, h / group, n, c, e]; dims (n, b, h, i, c, e).
  AffineExpr kvHead = d(2).floorDiv(group);
  AffineMap vMap = op.isSeqMajor() ? AffineMap::get(6, 0, {d(1), d(0), d(4), kvHead, d(5)}, ctx)
                                   : AffineMap::get(6, 0, {d(1), kvHead, d(0), d(4), d(5)}, ctx);
  SmallVector<int64_t> partShape{splits, batch, heads, seqQ, valueDim};
  Value sums = linalg::GenericOp::create(
                   b, loc, TypeRange{RankedTensorType::get(partShape, f32)}, ValueRange{probs, values},
                   ValueRange{createFilled(b, loc, partShape, f32, 0.0)},
                   ArrayRef<AffineMap>{AffineMap::get(6, 0, {d(0), d(1), d(2), d(3), d(4)}, ctx), vMap,
                                       AffineMap::get(6, 0, {d(0), d(1), d(2), d(3), d(5)}, ctx)},
                   {utils::IteratorType::parallel, utils::IteratorType::parallel, utils::IteratorType::parallel,
                    utils::IteratorType::parallel, utils::IteratorType::reduction, utils::IteratorType::parallel},
                   [](OpBuilder &nb, Location l, ValueRange args) {
                     Value p = arith::MulFOp::create(nb, l, args[0], widen(nb, l, args[1]));
                     linalg::YieldOp::create(nb, l, arith::AddFOp::create(nb, l, args[2], p).getResult());
                   })
                   .getResult(0);
  Value parts = buildElementwise(b, loc, partShape, f32, ValueRange{sums, rowSum}, {full, row},
                                 [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                                   return divideByTotal(nb, l, x[0], x[1]);
                                 });
  AffineMap id4 = b.getMultiDimIdentityMap(4);
  Value lse = buildElementwise(b, loc, {splits, batch, heads, seqQ}, f32, ValueRange{rowMax, rowSum}, {id4, id4},
                               [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                                 return arith::AddFOp::create(nb, l, x[0], math::LogOp::create(nb, l, x[1]));
                               });
  return {parts, lse};
}

/// kiln.merge_splits: per row, the chunks' weights exp(lse_n - max lse) (0 for a chunk of lse -inf, whose parts
/// are then not added), and the weighted sum of the parts over the sum of the weights.
struct MergeSplitsLowering : OpConversionPattern<MergeSplitsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MergeSplitsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Type f32 = rewriter.getF32Type();
    ArrayRef<int64_t> space = op.getParts().getType().getShape(); // (n, b, h, i, e)
    const double negInf = -std::numeric_limits<double>::infinity();
    AffineMap full = rewriter.getMultiDimIdentityMap(5), row = getDroppedAxesMap(5, {4}, ctx);
    auto first = [](OpBuilder &, Location, ValueRange x) { return x[0]; };
    Value max = buildReduction(rewriter, loc, space.drop_back(), {0}, Combiner::Max, adaptor.getLse(),
                               rewriter.getMultiDimIdentityMap(4), first);
    AffineMap rowMax = getDroppedAxesMap(4, {0}, ctx);
    Value weights = buildElementwise(rewriter, loc, space.drop_back(), f32, ValueRange{adaptor.getLse(), max},
                                     {rewriter.getMultiDimIdentityMap(4), rowMax},
                                     [&](OpBuilder &b, Location l, ValueRange x) -> Value {
                                       Value e = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, x[0], x[1]));
                                       Value none = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, x[0],
                                                                          floatConstant(b, l, f32, negInf));
                                       return arith::SelectOp::create(b, l, none, floatConstant(b, l, f32, 0.0), e);
                                     });
    Value total = buildReduction(rewriter, loc, space.drop_back(), {0}, Combiner::Sum, weights,
                                 rewriter.getMultiDimIdentityMap(4), first);
    Value weighted = buildReduction(rewriter, loc, space, {0}, Combiner::Sum, ValueRange{adaptor.getParts(), weights},
                                    {full, row}, [&](OpBuilder &b, Location l, ValueRange x) -> Value {
                                      Value zero = floatConstant(b, l, f32, 0.0);
                                      Value used = arith::CmpFOp::create(b, l, arith::CmpFPredicate::ONE, x[1], zero);
                                      Value term = arith::MulFOp::create(b, l, x[0], x[1]);
                                      return arith::SelectOp::create(b, l, used, term, zero);
                                    });
    AffineMap id4 = rewriter.getMultiDimIdentityMap(4);
    Value out = buildElementwise(rewriter, loc, op.getType().getShape(), op.getType().getElementType(),
                                 ValueRange{weighted, total}, {id4, AffineMap::get(4, 0, {getAffineDimExpr(0, ctx),
                                                                                         getAffineDimExpr(1, ctx),
                                                                                         getAffineDimExpr(2, ctx)},
                                                                                  ctx)},
                                 [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                   return divideByTotal(b, l, x[0], x[1]);
                                 });
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// kiln.sum_splits: the parts added along their chunk dimension in f32, then the epilogue (or the rounding to
/// the result's type).
struct SumSplitsLowering : OpConversionPattern<SumSplitsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SumSplitsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getType();
    ArrayRef<int64_t> space = op.getParts().getType().getShape();
    auto first = [](OpBuilder &, Location, ValueRange x) { return x[0]; };
    Value sum = buildReduction(rewriter, loc, space, {0}, Combiner::Sum, adaptor.getParts(),
                               rewriter.getMultiDimIdentityMap(space.size()), first);
    rewriter.replaceOp(op, finishAccumulator(rewriter, loc, sum, resultType, op.getEpilogue(),
                                             adaptor.getEpilogueOperands()));
    return success();
  }
};

struct AttentionLowering : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType q = op.getQ().getType(), v = op.getV().getType();
    const int64_t headsDim = op.getHeadsDim(), seqDim = op.getSeqDim();
    int64_t batch = q.getDimSize(0), heads = q.getDimSize(headsDim), seqQ = q.getDimSize(seqDim);
    int64_t seqK = v.getDimSize(seqDim), valueDim = v.getDimSize(3), group = op.getGroupSize();
    auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    Type f32 = rewriter.getF32Type();
    // An operand's (batch, head, position, feature) indices in the op's layout.
    auto inLayout = [&](unsigned dims, AffineExpr b, AffineExpr h, AffineExpr s, AffineExpr x) {
      return op.isSeqMajor() ? AffineMap::get(dims, 0, {b, s, h, x}, ctx) : AffineMap::get(dims, 0, {b, h, s, x}, ctx);
    };

    // scores[b, h, i, j] = sum_d q[b, h, i, d] * k[b, h / group, j, d]; dims (b, h, i, j, d).
    AffineMap qMap = inLayout(5, d(0), d(1), d(2), d(4));
    AffineMap kMap = inLayout(5, d(0), d(1).floorDiv(group), d(3), d(4));
    AffineMap sMap = AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx);
    SmallVector<int64_t> scoreShape{batch, heads, seqQ, seqK};
    Value scores = linalg::GenericOp::create(
                       rewriter, loc, TypeRange{RankedTensorType::get(scoreShape, f32)},
                       ValueRange{adaptor.getQ(), adaptor.getK()},
                       ValueRange{createFilled(rewriter, loc, scoreShape, f32, 0.0)},
                       ArrayRef<AffineMap>{qMap, kMap, sMap},
                       {utils::IteratorType::parallel, utils::IteratorType::parallel,
                        utils::IteratorType::parallel, utils::IteratorType::parallel,
                        utils::IteratorType::reduction},
                       [](OpBuilder &b, Location l, ValueRange args) {
                         Value p = arith::MulFOp::create(b, l, widen(b, l, args[0]), widen(b, l, args[1]));
                         linalg::YieldOp::create(b, l, arith::AddFOp::create(b, l, args[2], p).getResult());
                       })
                       .getResult(0);

    // Scale, add the mask, rewrite by the score_mod, hide what the causal mask (aligned bottom-right) or the mask_mod
    // hides.
    double scale = op.getEffectiveScale();
    bool causal = op.getCausal();
    int64_t diagonal = seqK - seqQ;
    SmallVector<Value> maskInputs{scores};
    if (Value mask = adaptor.getMask())
      maskInputs.push_back(mask);
    auto scoreType = RankedTensorType::get(scoreShape, f32);
    Value logits = buildBroadcastElementwise(
        rewriter, loc, scoreType, maskInputs, [&](OpBuilder &b, Location l, ValueRange x) -> Value {
          Value s = arith::MulFOp::create(b, l, x[0], floatConstant(b, l, f32, scale));
          if (x.size() > 1)
            s = arith::AddFOp::create(b, l, s, x[1]);
          if (!causal && !op.hasScoreMod() && !op.hasMaskMod())
            return s;
          // The logical (batch, head, query, key) position and the mod operands, as the mod regions take them.
          SmallVector<Value> position;
          for (int64_t dim = 0; dim < 4; ++dim)
            position.push_back(linalg::IndexOp::create(b, l, dim));
          auto modArgs = [&](ArrayRef<Value> leading) {
            SmallVector<Value> args(leading);
            llvm::append_range(args, adaptor.getModOperands());
            return args;
          };
          if (op.hasScoreMod()) {
            SmallVector<Value> leading{s};
            llvm::append_range(leading, position);
            s = inlineScalarRegion(b, op.getScoreMod(), modArgs(leading));
          }
          Value masked;
          if (causal) {
            Value limit = arith::AddIOp::create(b, l, position[2], arith::ConstantIndexOp::create(b, l, diagonal));
            masked = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, position[3], limit);
          }
          if (op.hasMaskMod()) {
            Value visible = inlineScalarRegion(b, op.getMaskMod(), modArgs(position));
            Value hidden = arith::XOrIOp::create(b, l, visible, arith::ConstantIntOp::create(b, l, 1, 1));
            masked = masked ? arith::OrIOp::create(b, l, masked, hidden).getResult() : hidden;
          }
          if (!masked)
            return s;
          return arith::SelectOp::create(
              b, l, masked, floatConstant(b, l, f32, -std::numeric_limits<double>::infinity()), s);
        });

    if (std::optional<int64_t> chunk = op.getKvChunk()) {
      rewriter.replaceOp(op, lowerChunks(rewriter, op, logits, adaptor.getV(), *chunk));
      return success();
    }

    // Softmax along j, keeping the row max and sum for the lse.
    AffineMap full4 = rewriter.getMultiDimIdentityMap(4);
    AffineMap row4 = getDroppedAxesMap(4, {3}, ctx);
    auto first = [](OpBuilder &, Location, ValueRange x) { return x[0]; };
    Value rowMax = buildReduction(rewriter, loc, scoreShape, {3}, Combiner::Max, logits, full4, first);
    Value probs = buildElementwise(rewriter, loc, scoreShape, f32, ValueRange{logits, rowMax}, {full4, row4},
                                   [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                     return expBelowMax(b, l, x[0], x[1]);
                                   });
    Value rowSum = buildReduction(rewriter, loc, scoreShape, {3}, Combiner::Sum, probs, full4, first);

    // out[b, h, i, e] = sum_j probs[b, h, i, j] * v[b, h / group, j, e] / rowSum; dims (b, h, i, j, e).
    AffineMap pMap = AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx);
    AffineMap vMap = inLayout(5, d(0), d(1).floorDiv(group), d(3), d(4));
    AffineMap oMap = AffineMap::get(5, 0, {d(0), d(1), d(2), d(4)}, ctx);
    SmallVector<int64_t> outShape{batch, heads, seqQ, valueDim};
    Value unnormalised = linalg::GenericOp::create(
                             rewriter, loc, TypeRange{RankedTensorType::get(outShape, f32)},
                             ValueRange{probs, adaptor.getV()},
                             ValueRange{createFilled(rewriter, loc, outShape, f32, 0.0)},
                             ArrayRef<AffineMap>{pMap, vMap, oMap},
                             {utils::IteratorType::parallel, utils::IteratorType::parallel,
                              utils::IteratorType::parallel, utils::IteratorType::reduction,
                              utils::IteratorType::parallel},
                             [](OpBuilder &b, Location l, ValueRange args) {
                               Value p = arith::MulFOp::create(b, l, args[0], widen(b, l, args[1]));
                               linalg::YieldOp::create(b, l, arith::AddFOp::create(b, l, args[2], p).getResult());
                             })
                             .getResult(0);
    RankedTensorType outType = op.getOut().getType();
    auto normalise = [](OpBuilder &b, Location l, ValueRange x) -> Value {
      return divideByTotal(b, l, x[0], x[1]);
    };
    // The output is computed in [b, h, i, e] and stored in the op's layout: over the output's dims (o0..o3),
    // the unnormalised sums and row sums are read at (b, h, i, e).
    ArrayRef<int64_t> storedShape = outType.getShape();
    AffineMap sumsMap = full4, rowSumMap = row4;
    if (op.isOutSeqMajor()) {
      sumsMap = AffineMap::get(4, 0, {d(0), d(2), d(1), d(3)}, ctx);
      rowSumMap = AffineMap::get(4, 0, {d(0), d(2), d(1)}, ctx);
    }
    Value out;
    if (op.hasEpilogue()) {
      SmallVector<Value> inputs{buildElementwise(rewriter, loc, storedShape, f32, ValueRange{unnormalised, rowSum},
                                                 {sumsMap, rowSumMap}, normalise)};
      SmallVector<AffineMap> maps{full4};
      for (Value operand : adaptor.getEpilogueOperands()) {
        inputs.push_back(operand);
        maps.push_back(getBroadcastMap(cast<RankedTensorType>(operand.getType()).getShape(), storedShape, ctx));
      }
      out = buildEpilogue(rewriter, loc, op.getEpilogue(), storedShape, outType.getElementType(), inputs, maps);
    } else {
      out = buildElementwise(rewriter, loc, storedShape, outType.getElementType(), ValueRange{unnormalised, rowSum},
                             {sumsMap, rowSumMap}, normalise);
    }
    SmallVector<Value> results{out};
    if (op.getLse()) {
      AffineMap id3 = rewriter.getMultiDimIdentityMap(3);
      results.push_back(buildElementwise(rewriter, loc, {batch, heads, seqQ}, f32, ValueRange{rowMax, rowSum},
                                         {id3, id3}, [](OpBuilder &b, Location l, ValueRange x) -> Value {
                                           return arith::AddFOp::create(b, l, x[0],
                                                                        math::LogOp::create(b, l, x[1]));
                                         }));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void kiln::populateContractionLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<MatmulLowering, AttentionLowering, MergeSplitsLowering, SumSplitsLowering>(patterns.getContext());
}
