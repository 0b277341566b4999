//===- LinalgBuilders.cpp - linalg.generic builders with f32 bodies --------===//
//
// Broadcast maps, f32 widening and the generic elementwise and reduction builders that every kiln op lowering
// is made of.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

AffineMap lowering::getBroadcastMap(ArrayRef<int64_t> operandShape, ArrayRef<int64_t> resultShape,
                                    MLIRContext *ctx) {
  int64_t offset = resultShape.size() - operandShape.size();
  SmallVector<AffineExpr> exprs;
  for (auto [i, size] : llvm::enumerate(operandShape)) {
    int64_t dim = offset + i;
    exprs.push_back(size == 1 && resultShape[dim] != 1 ? getAffineConstantExpr(0, ctx)
                                                        : getAffineDimExpr(dim, ctx));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, ctx);
}

AffineMap lowering::getDroppedAxesMap(int64_t rank, ArrayRef<int64_t> axes, MLIRContext *ctx) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(axes, d))
      exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

Value lowering::createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value lowering::floatConstant(OpBuilder &b, Location loc, Type type, double value) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

Value lowering::finiteMax(OpBuilder &b, Location loc, Value max) {
  Value lowest = floatConstant(b, loc, max.getType(), -std::numeric_limits<float>::max());
  return arith::MaximumFOp::create(b, loc, max, lowest);
}

Value lowering::expBelowMax(OpBuilder &b, Location loc, Value x, Value max) {
  return math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, x, finiteMax(b, loc, max)));
}

Value lowering::divideByTotal(OpBuilder &b, Location loc, Value sum, Value total) {
  Type type = total.getType();
  Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, total, floatConstant(b, loc, type, 0.0));
  Value divisor = arith::SelectOp::create(b, loc, none, floatConstant(b, loc, type, 1.0), total);
  return arith::DivFOp::create(b, loc, sum, divisor);
}

Value lowering::createFilled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elementType,
                             double value) {
  Value fill = floatConstant(b, loc, elementType, value);
  return linalg::FillOp::create(b, loc, ValueRange{fill}, ValueRange{createEmpty(b, loc, shape, elementType)})
      .getResult(0);
}

Value lowering::widen(OpBuilder &b, Location loc, Value scalar) {
  auto type = dyn_cast<FloatType>(scalar.getType());
  if (!type || type.getWidth() >= 32)
    return scalar;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), scalar);
}

Value lowering::narrow(OpBuilder &b, Location loc, Value scalar, Type type) {
  if (scalar.getType() == type || !isa<FloatType>(type) || !isa<FloatType>(scalar.getType()))
    return scalar;
  return arith::TruncFOp::create(b, loc, type, scalar);
}

Value lowering::buildElementwise(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type resultElementType,
                                 ValueRange inputs, ArrayRef<AffineMap> maps, ScalarBody body) {
  SmallVector<AffineMap> indexingMaps(maps);
  indexingMaps.push_back(b.getMultiDimIdentityMap(shape.size()));
  SmallVector<utils::IteratorType> iterators(shape.size(), utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get(shape, resultElementType)}, inputs,
      ValueRange{createEmpty(b, loc, shape, resultElementType)}, indexingMaps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        SmallVector<Value> widened;
        for (Value arg : args.drop_back())
          widened.push_back(widen(nested, nestedLoc, arg));
        Value result = body(nested, nestedLoc, widened);
        linalg::YieldOp::create(nested, nestedLoc, narrow(nested, nestedLoc, result, resultElementType));
      });
  return generic.getResult(0);
}

Value lowering::buildBroadcastElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                                          ValueRange inputs, ScalarBody body) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(getBroadcastMap(cast<RankedTensorType>(input.getType()).getShape(), resultType.getShape(),
                                   b.getContext()));
  return buildElementwise(b, loc, resultType.getShape(), resultType.getElementType(), inputs, maps, body);
}

Value lowering::combine(OpBuilder &b, Location loc, Combiner combiner, Value lhs, Value rhs) {
  switch (combiner) {
  case Combiner::Sum:
    return arith::AddFOp::create(b, loc, lhs, rhs);
  case Combiner::Max:
    return arith::MaximumFOp::create(b, loc, lhs, rhs);
  case Combiner::Min:
    return arith::MinimumFOp::create(b, loc, lhs, rhs);
  }
  llvm_unreachable("unknown combiner");
}

/// The neutral element of a combiner.
static double identityOf(Combiner combiner) {
  switch (combiner) {
  case Combiner::Sum:
    return 0.0;
  case Combiner::Max:
    return -std::numeric_limits<double>::infinity();
  case Combiner::Min:
    return std::numeric_limits<double>::infinity();
  }
  llvm_unreachable("unknown combiner");
}

Value lowering::buildReduction(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, ArrayRef<int64_t> axes,
                               Combiner combiner, ValueRange inputs, ArrayRef<AffineMap> maps,
                               ScalarBody element) {
  SmallVector<int64_t> reducedShape;
  for (auto [d, size] : llvm::enumerate(shape))
    if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
      reducedShape.push_back(size);
  Type f32 = b.getF32Type();
  Value init = createFilled(b, loc, reducedShape, f32, identityOf(combiner));

  SmallVector<AffineMap> indexingMaps(maps);
  indexingMaps.push_back(getDroppedAxesMap(shape.size(), axes, b.getContext()));
  SmallVector<utils::IteratorType> iterators;
  for (int64_t d = 0, e = shape.size(); d < e; ++d)
    iterators.push_back(llvm::is_contained(axes, d) ? utils::IteratorType::reduction
                                                    : utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, indexingMaps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        SmallVector<Value> widened;
        for (Value arg : args.drop_back())
          widened.push_back(widen(nested, nestedLoc, arg));
        Value value = element(nested, nestedLoc, widened);
        linalg::YieldOp::create(nested, nestedLoc, combine(nested, nestedLoc, combiner, args.back(), value));
      });
  return generic.getResult(0);
}

/// A tensor.extract that reads zero (false) where an index lies outside the tensor: the index clamped into it,
/// the element replaced after the read.
static Value guardedExtract(OpBuilder &b, tensor::ExtractOp extract, IRMapping &mapping) {
  Location loc = extract.getLoc();
  Value tensor = mapping.lookupOrDefault(extract.getTensor());
  Value inside = arith::ConstantIntOp::create(b, loc, 1, 1), zeroIndex = arith::ConstantIndexOp::create(b, loc, 0);
  SmallVector<Value> indices;
  for (auto [dim, index] : llvm::enumerate(extract.getIndices())) {
    Value at = mapping.lookupOrDefault(index);
    Value extent = tensor::DimOp::create(b, loc, tensor, dim);
    // Unsigned: a negative index is past the end too.
    Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, at, extent);
    inside = arith::AndIOp::create(b, loc, inside, valid);
    indices.push_back(arith::SelectOp::create(b, loc, valid, at, zeroIndex));
  }
  Value element = tensor::ExtractOp::create(b, loc, tensor, indices);
  Type type = element.getType();
  Value zero = isa<FloatType>(type) ? floatConstant(b, loc, type, 0.0)
                                    : arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, 0)).getResult();
  return arith::SelectOp::create(b, loc, inside, element, zero);
}

IRMapping lowering::hoistInvariantOps(OpBuilder &b, Region &region, ArrayRef<std::pair<unsigned, Value>> invariant) {
  Block &body = region.front();
  IRMapping mapping;
  for (auto [number, value] : invariant)
    mapping.map(body.getArgument(number), value);
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() != 0 ||
        !llvm::all_of(op.getOperands(), [&](Value operand) { return mapping.contains(operand); }))
      continue;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op))
      mapping.map(extract.getResult(), guardedExtract(b, extract, mapping));
    else
      b.clone(op, mapping);
  }
  // Only the ops' results: the block arguments are bound again where the region is inlined.
  for (auto [number, value] : invariant)
    mapping.erase(body.getArgument(number));
  return mapping;
}

Value lowering::inlineScalarRegion(OpBuilder &b, Region &region, ValueRange args, const IRMapping *hoisted) {
  Block &body = region.front();
  IRMapping mapping;
  mapping.map(body.getArguments(), args);
  for (Operation &op : body.without_terminator()) {
    if (hoisted && op.getNumResults() > 0 && hoisted->contains(op.getResult(0))) {
      for (Value result : op.getResults())
        mapping.map(result, hoisted->lookup(result));
      continue;
    }
    if (auto extract = dyn_cast<tensor::ExtractOp>(op))
      mapping.map(extract.getResult(), guardedExtract(b, extract, mapping));
    else
      b.clone(op, mapping);
  }
  return mapping.lookup(body.getTerminator()->getOperand(0));
}

Value lowering::buildEpilogue(OpBuilder &b, Location loc, Region &epilogue, ArrayRef<int64_t> shape,
                              Type resultElementType, ValueRange inputs, ArrayRef<AffineMap> maps) {
  return buildElementwise(b, loc, shape, resultElementType, inputs, maps,
                          [&](OpBuilder &nested, Location, ValueRange args) -> Value {
                            return inlineScalarRegion(nested, epilogue, args);
                          });
}
