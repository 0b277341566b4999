//===- Elementwise.cpp - kiln elementwise ops to linalg --------------------===//
//
// Arithmetic, activations, comparisons, select, cast and constants. Each op becomes one broadcasting linalg.generic whose
// body computes in f32 (narrow types are widened on load and rounded once on store), which is also how the GPU
// kernels compute their epilogues. Integer arithmetic computes in its own type, with the divisions guarded: a zero
// divisor would trap on the host CPU. A fused chain (kiln.elementwise) is its body inlined per element.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

namespace {

Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Value one = floatConstant(b, loc, x.getType(), 1.0);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one, arith::AddFOp::create(b, loc, one, e));
}

Value gelu(OpBuilder &b, Location loc, Value x, bool tanhForm) {
  Type type = x.getType();
  Value half = floatConstant(b, loc, type, 0.5), one = floatConstant(b, loc, type, 1.0);
  Value inner;
  if (tanhForm) {
    // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    Value x3 = arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    Value cubic =
        arith::AddFOp::create(b, loc, x, arith::MulFOp::create(b, loc, floatConstant(b, loc, type, 0.044715), x3));
    inner = math::TanhOp::create(
        b, loc, arith::MulFOp::create(b, loc, floatConstant(b, loc, type, std::sqrt(2.0 / M_PI)), cubic));
  } else {
    inner = math::ErfOp::create(b, loc, arith::MulFOp::create(b, loc, x, floatConstant(b, loc, type, M_SQRT1_2)));
  }
  Value gate = arith::MulFOp::create(b, loc, half, arith::AddFOp::create(b, loc, one, inner));
  return arith::MulFOp::create(b, loc, x, gate);
}

/// Python's (and numpy's, ONNX Mod's) `%` on floats: the truncated remainder moved into the divisor's sign where
/// it has the other one; a zero remainder is a zero of the divisor's sign.
Value flooredRemainder(OpBuilder &b, Location loc, Value x, Value y) {
  Value r = arith::RemFOp::create(b, loc, x, y);
  Value zero = floatConstant(b, loc, x.getType(), 0.0);
  Value rNegative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, r, zero);
  Value yNegative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, y, zero);
  Value rNonzero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, r, zero);
  Value differ = arith::AndIOp::create(b, loc, rNonzero, arith::XOrIOp::create(b, loc, rNegative, yNegative));
  Value moved = arith::SelectOp::create(b, loc, differ, arith::AddFOp::create(b, loc, r, y), r);
  Value rZero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, r, zero);
  return arith::SelectOp::create(b, loc, rZero, math::CopySignOp::create(b, loc, zero, y), moved);
}

/// An integer constant of `type` (i32 or i64).
Value intConstant(OpBuilder &b, Location loc, Type type, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, value));
}

/// An integer division `divide(x, divisor)` (a quotient, or a remainder when `isRemainder`) with its divisor
/// guarded: 0 for a zero divisor, and for a signed division by -1 the wrapped negation (a remainder 0), where
/// the raw instruction is undefined (a zero divisor, INT_MIN / -1) and traps on the host CPU.
Value guardedDivision(OpBuilder &b, Location loc, Value x, Value y, bool isSigned, bool isRemainder,
                      llvm::function_ref<Value(Value divisor)> divide) {
  Type type = y.getType();
  Value zero = intConstant(b, loc, type, 0), one = intConstant(b, loc, type, 1);
  Value yZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, y, zero);
  Value yMinusOne = isSigned ? Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, y,
                                                           intConstant(b, loc, type, -1)))
                             : Value(arith::ConstantOp::create(b, loc, b.getBoolAttr(false)));
  Value trivial = arith::OrIOp::create(b, loc, yZero, yMinusOne);
  Value divided = divide(arith::SelectOp::create(b, loc, trivial, one, y));
  Value byMinusOne = isRemainder ? zero : Value(arith::SubIOp::create(b, loc, zero, x));
  return arith::SelectOp::create(b, loc, yZero, zero, arith::SelectOp::create(b, loc, yMinusOne, byMinusOne, divided));
}

/// The quotient of integers truncated toward zero (kiln.div), guarded.
Value truncatedQuotient(OpBuilder &b, Location loc, Value x, Value y) {
  return guardedDivision(b, loc, x, y, /*isSigned=*/true, /*isRemainder=*/false,
                         [&](Value divisor) { return arith::DivSIOp::create(b, loc, x, divisor); });
}

/// The remainder of integer division truncated toward zero (the sign of x; kiln.fmod), guarded.
Value truncatedIntRemainder(OpBuilder &b, Location loc, Value x, Value y) {
  return guardedDivision(b, loc, x, y, /*isSigned=*/true, /*isRemainder=*/true,
                         [&](Value divisor) { return arith::RemSIOp::create(b, loc, x, divisor); });
}

/// Python's `%` on integers: the truncated remainder moved into the divisor's sign where it has the other one.
Value flooredIntRemainder(OpBuilder &b, Location loc, Value x, Value y) {
  Value r = truncatedIntRemainder(b, loc, x, y);
  Value zero = intConstant(b, loc, x.getType(), 0);
  Value rNegative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, zero);
  Value yNegative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, y, zero);
  Value rNonzero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, zero);
  Value differ = arith::AndIOp::create(b, loc, rNonzero, arith::XOrIOp::create(b, loc, rNegative, yNegative));
  return arith::SelectOp::create(b, loc, differ, arith::AddIOp::create(b, loc, r, y), r);
}

/// x^e for integers by squaring, one step per bit of the exponent (wrapping like repeated multiplication); a
/// negative exponent gives the truncated 1 / x^-e: 1 for x = 1, +-1 for x = -1, 0 otherwise (a zero base too).
Value integerPower(OpBuilder &b, Location loc, Value x, Value e) {
  Type type = x.getType();
  unsigned width = type.getIntOrFloatBitWidth();
  Value zero = intConstant(b, loc, type, 0), one = intConstant(b, loc, type, 1);
  Value result = one, square = x, rest = e;
  for (unsigned bit = 0; bit + 1 < width; ++bit) { // the sign bit aside: a negative exponent is handled below
    Value odd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, arith::AndIOp::create(b, loc, rest, one),
                                      zero);
    result = arith::SelectOp::create(b, loc, odd, arith::MulIOp::create(b, loc, result, square), result);
    square = arith::MulIOp::create(b, loc, square, square);
    rest = arith::ShRUIOp::create(b, loc, rest, one);
  }
  Value eNegative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, e, zero);
  Value xOne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, one);
  Value xMinusOne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, intConstant(b, loc, type, -1));
  Value eOdd =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, arith::AndIOp::create(b, loc, e, one), zero);
  Value minusOnePower = arith::SelectOp::create(b, loc, eOdd, intConstant(b, loc, type, -1), one);
  Value inverse = arith::SelectOp::create(b, loc, xOne, one, arith::SelectOp::create(b, loc, xMinusOne,
                                                                                     minusOnePower, zero));
  return arith::SelectOp::create(b, loc, eNegative, inverse, result);
}

/// The formula of an arithmetic op on signed integers (two operands, or one for neg and abs), or a null value for
/// any other op.
Value integerFormula(OpBuilder &b, Location loc, Operation *op, ValueRange x) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](AddOp) { return arith::AddIOp::create(b, loc, x[0], x[1]); })
      .Case([&](SubOp) { return arith::SubIOp::create(b, loc, x[0], x[1]); })
      .Case([&](MulOp) { return arith::MulIOp::create(b, loc, x[0], x[1]); })
      .Case([&](DivOp) { return truncatedQuotient(b, loc, x[0], x[1]); })
      .Case([&](MaxOp) { return arith::MaxSIOp::create(b, loc, x[0], x[1]); })
      .Case([&](MinOp) { return arith::MinSIOp::create(b, loc, x[0], x[1]); })
      .Case([&](PowOp) { return integerPower(b, loc, x[0], x[1]); })
      .Case([&](FmodOp) { return truncatedIntRemainder(b, loc, x[0], x[1]); })
      .Case([&](RemainderOp) { return flooredIntRemainder(b, loc, x[0], x[1]); })
      .Case([&](NegOp) { return arith::SubIOp::create(b, loc, intConstant(b, loc, x[0].getType(), 0), x[0]); })
      .Case([&](AbsOp) {
        Value zero = intConstant(b, loc, x[0].getType(), 0);
        Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x[0], zero);
        return arith::SelectOp::create(b, loc, negative, arith::SubIOp::create(b, loc, zero, x[0]), x[0]);
      })
      .Default([](Operation *) { return Value(); });
}

/// A float truncated toward zero to the signed integer type `to`, saturating: NaN gives 0 and values beyond the
/// type's range its minimum or maximum, as the GPU's cvt.rzi does (arith.fptosi leaves them undefined, and the
/// host CPU gives the minimum for all of them).
Value saturatingFloatToInt(OpBuilder &b, Location loc, Value value, Type to) {
  Type f32 = b.getF32Type();
  Value x = isa<FloatType>(value.getType()) && value.getType().getIntOrFloatBitWidth() < 32
                ? Value(arith::ExtFOp::create(b, loc, f32, value))
                : value;
  Type from = x.getType();
  unsigned width = to.getIntOrFloatBitWidth();
  double limit = std::ldexp(1.0, static_cast<int>(width) - 1); // 2^(width-1), exact in f32
  Value tooHigh = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x, floatConstant(b, loc, from, limit));
  Value tooLow = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, floatConstant(b, loc, from, -limit));
  Value isNan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  Value outside = arith::OrIOp::create(b, loc, arith::OrIOp::create(b, loc, tooHigh, tooLow), isNan);
  Value inRange = arith::SelectOp::create(b, loc, outside, floatConstant(b, loc, from, 0.0), x);
  Value converted = arith::FPToSIOp::create(b, loc, to, inRange);
  APInt maximum = APInt::getSignedMaxValue(width), minimum = APInt::getSignedMinValue(width);
  Value high = arith::ConstantOp::create(b, loc, b.getIntegerAttr(to, maximum));
  Value low = arith::ConstantOp::create(b, loc, b.getIntegerAttr(to, minimum));
  Value clamped = arith::SelectOp::create(b, loc, tooHigh, high, arith::SelectOp::create(b, loc, tooLow, low,
                                                                                         converted));
  return arith::SelectOp::create(b, loc, isNan, intConstant(b, loc, to, 0), clamped);
}

/// `x <predicate> y` on two scalars of one type: ordered float comparisons (unordered for `ne`), signed integer
/// ones.
Value compare(OpBuilder &b, Location loc, ComparePredicate predicate, Value x, Value y) {
  if (isa<FloatType>(x.getType())) {
    arith::CmpFPredicate floatPredicate;
    switch (predicate) {
    case ComparePredicate::lt: floatPredicate = arith::CmpFPredicate::OLT; break;
    case ComparePredicate::le: floatPredicate = arith::CmpFPredicate::OLE; break;
    case ComparePredicate::gt: floatPredicate = arith::CmpFPredicate::OGT; break;
    case ComparePredicate::ge: floatPredicate = arith::CmpFPredicate::OGE; break;
    case ComparePredicate::eq: floatPredicate = arith::CmpFPredicate::OEQ; break;
    case ComparePredicate::ne: floatPredicate = arith::CmpFPredicate::UNE; break;
    }
    return arith::CmpFOp::create(b, loc, floatPredicate, x, y);
  }
  // i1 compares unsigned (true > false); wider integers signed.
  bool isBool = x.getType().isInteger(1);
  arith::CmpIPredicate intPredicate;
  switch (predicate) {
  case ComparePredicate::lt: intPredicate = isBool ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt; break;
  case ComparePredicate::le: intPredicate = isBool ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle; break;
  case ComparePredicate::gt: intPredicate = isBool ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt; break;
  case ComparePredicate::ge: intPredicate = isBool ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge; break;
  case ComparePredicate::eq: intPredicate = arith::CmpIPredicate::eq; break;
  case ComparePredicate::ne: intPredicate = arith::CmpIPredicate::ne; break;
  }
  return arith::CmpIOp::create(b, loc, intPredicate, x, y);
}

} // namespace

Value lowering::inlineElementwiseBody(OpBuilder &b, Region &body, ValueRange args) {
  Block &block = body.front();
  IRMapping mapping;
  mapping.map(block.getArguments(), args);
  for (Operation &op : block.without_terminator()) {
    // An integer division as its own IR wrote it could divide by 0 (or INT_MIN by -1), which traps on the host
    // CPU: the divisor is guarded as the formulas guard theirs (0 for a zero divisor, x / -1 the negation).
    if (isa<arith::DivSIOp, arith::RemSIOp, arith::CeilDivSIOp, arith::FloorDivSIOp, arith::DivUIOp, arith::RemUIOp,
            arith::CeilDivUIOp>(op)) {
      Value x = mapping.lookup(op.getOperand(0)), y = mapping.lookup(op.getOperand(1));
      bool isSigned = !isa<arith::DivUIOp, arith::RemUIOp, arith::CeilDivUIOp>(op);
      bool isRemainder = isa<arith::RemSIOp, arith::RemUIOp>(op);
      mapping.map(op.getResult(0), guardedDivision(b, op.getLoc(), x, y, isSigned, isRemainder, [&](Value divisor) {
                    IRMapping operands;
                    operands.map(op.getOperand(0), x);
                    operands.map(op.getOperand(1), divisor);
                    return b.clone(op, operands)->getResult(0);
                  }));
      continue;
    }
    b.clone(op, mapping);
  }
  return mapping.lookup(block.getTerminator()->getOperand(0));
}

bool lowering::hasScalarFormula(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, FmodOp, RemainderOp, NegOp, ExpOp, LogOp, SqrtOp,
             RsqrtOp, ReciprocalOp, AbsOp, TanhOp, ErfOp, SinOp, CosOp, FloorOp, CeilOp, SigmoidOp, ReluOp, SiluOp,
             GeluOp>(op);
}

bool lowering::hasFloatFormula(Operation *op) {
  return hasScalarFormula(op) && isa<FloatType>(getElementTypeOrSelf(op->getResult(0).getType()));
}

Value lowering::buildScalarFormula(OpBuilder &b, Location loc, Operation *op, ValueRange x) {
  if (!x.empty() && isa<IntegerType>(x[0].getType()) && !isa<SelectOp, CompareOp>(op))
    return integerFormula(b, loc, op, x);
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](AddOp) { return arith::AddFOp::create(b, loc, x[0], x[1]); })
      .Case([&](SubOp) { return arith::SubFOp::create(b, loc, x[0], x[1]); })
      .Case([&](MulOp) { return arith::MulFOp::create(b, loc, x[0], x[1]); })
      .Case([&](DivOp) { return arith::DivFOp::create(b, loc, x[0], x[1]); })
      .Case([&](MaxOp) { return arith::MaximumFOp::create(b, loc, x[0], x[1]); })
      .Case([&](MinOp) { return arith::MinimumFOp::create(b, loc, x[0], x[1]); })
      .Case([&](PowOp) { return math::PowFOp::create(b, loc, x[0], x[1]); })
      .Case([&](FmodOp) { return arith::RemFOp::create(b, loc, x[0], x[1]); })
      .Case([&](RemainderOp) { return flooredRemainder(b, loc, x[0], x[1]); })
      .Case([&](NegOp) { return arith::NegFOp::create(b, loc, x[0]); })
      .Case([&](ExpOp) { return math::ExpOp::create(b, loc, x[0]); })
      .Case([&](LogOp) { return math::LogOp::create(b, loc, x[0]); })
      .Case([&](SqrtOp) { return math::SqrtOp::create(b, loc, x[0]); })
      .Case([&](RsqrtOp) { return math::RsqrtOp::create(b, loc, x[0]); })
      .Case([&](AbsOp) { return math::AbsFOp::create(b, loc, x[0]); })
      .Case([&](TanhOp) { return math::TanhOp::create(b, loc, x[0]); })
      .Case([&](ErfOp) { return math::ErfOp::create(b, loc, x[0]); })
      .Case([&](SinOp) { return math::SinOp::create(b, loc, x[0]); })
      .Case([&](CosOp) { return math::CosOp::create(b, loc, x[0]); })
      .Case([&](FloorOp) { return math::FloorOp::create(b, loc, x[0]); })
      .Case([&](CeilOp) { return math::CeilOp::create(b, loc, x[0]); })
      .Case([&](ReciprocalOp) {
        return arith::DivFOp::create(b, loc, floatConstant(b, loc, x[0].getType(), 1.0), x[0]);
      })
      .Case([&](SigmoidOp) { return sigmoid(b, loc, x[0]); })
      .Case([&](ReluOp) {
        return arith::MaximumFOp::create(b, loc, x[0], floatConstant(b, loc, x[0].getType(), 0.0));
      })
      .Case([&](SiluOp) { return arith::MulFOp::create(b, loc, x[0], sigmoid(b, loc, x[0])); })
      .Case([&](GeluOp gelu) { return ::gelu(b, loc, x[0], gelu.getApproximate() == GeluApproximation::tanh); })
      .Case([&](SelectOp) { return arith::SelectOp::create(b, loc, x[0], x[1], x[2]); })
      .Case([&](CompareOp op) { return compare(b, loc, op.getPredicate(), x[0], x[1]); })
      .Default([](Operation *) { return Value(); });
}

Value lowering::convertScalar(OpBuilder &b, Location loc, Value value, Type to) {
  Type from = value.getType();
  if (from == to)
    return value;
  auto fromFloat = dyn_cast<FloatType>(from), toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat) {
    if (fromFloat.getWidth() == toFloat.getWidth()) {
      // f16 <-> bf16: exact through f32, then one rounding.
      Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
      return arith::TruncFOp::create(b, loc, to, wide);
    }
    return fromFloat.getWidth() < toFloat.getWidth() ? Value(arith::ExtFOp::create(b, loc, to, value))
                                                     : Value(arith::TruncFOp::create(b, loc, to, value));
  }
  if (fromFloat) {
    if (to.isInteger(1))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value, floatConstant(b, loc, from, 0.0));
    return saturatingFloatToInt(b, loc, value, to);
  }
  if (toFloat)
    return from.isInteger(1) ? Value(arith::UIToFPOp::create(b, loc, to, value))
                             : Value(arith::SIToFPOp::create(b, loc, to, value));
  unsigned fromWidth = from.getIntOrFloatBitWidth(), toWidth = to.getIntOrFloatBitWidth();
  if (toWidth == 1)
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, value,
                                 arith::ConstantOp::create(b, loc, b.getIntegerAttr(from, 0)));
  if (fromWidth == 1)
    return arith::ExtUIOp::create(b, loc, to, value);
  return fromWidth < toWidth ? Value(arith::ExtSIOp::create(b, loc, to, value))
                             : Value(arith::TruncIOp::create(b, loc, to, value));
}

namespace {

/// Lowers an elementwise op whose formula needs nothing but its operands.
template <typename Op>
struct ElementwiseLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    Operation *operation = op.getOperation();
    rewriter.replaceOp(op, buildBroadcastElementwise(rewriter, op.getLoc(), resultType, adaptor.getOperands(),
                                                     [operation](OpBuilder &b, Location loc, ValueRange x) {
                                                       return buildScalarFormula(b, loc, operation, x);
                                                     }));
    return success();
  }
};

/// A fused chain: its body, per element of the broadcast inputs (widened to their compute types, as the body
/// takes them), the result rounded once.
struct FusedElementwiseLowering : OpConversionPattern<ElementwiseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ElementwiseOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Region &body = op.getBody();
    rewriter.replaceOp(op, buildBroadcastElementwise(rewriter, op.getLoc(), op.getType(), adaptor.getInputs(),
                                                     [&body](OpBuilder &b, Location, ValueRange x) {
                                                       return inlineElementwiseBody(b, body, x);
                                                     }));
    return success();
  }
};

struct CastLowering : OpConversionPattern<CastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CastOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    RankedTensorType resultType = op.getType();
    Type to = resultType.getElementType();
    Location loc = op.getLoc();
    // Convert straight from the source type: widening first would round twice.
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{resultType}, adaptor.getInput(),
        ValueRange{createEmpty(rewriter, loc, resultType.getShape(), to)},
        SmallVector<AffineMap>(2, rewriter.getMultiDimIdentityMap(resultType.getRank())),
        SmallVector<utils::IteratorType>(resultType.getRank(), utils::IteratorType::parallel),
        [&](OpBuilder &b, Location nestedLoc, ValueRange args) {
          linalg::YieldOp::create(b, nestedLoc, convertScalar(b, nestedLoc, args[0], to));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ConstantLowering : OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ConstantOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, cast<TypedAttr>(op.getValue()));
    return success();
  }
};

} // namespace

void kiln::populateElementwiseLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<ElementwiseLowering<AddOp>, ElementwiseLowering<SubOp>, ElementwiseLowering<MulOp>,
               ElementwiseLowering<DivOp>, ElementwiseLowering<MaxOp>, ElementwiseLowering<MinOp>,
               ElementwiseLowering<PowOp>, ElementwiseLowering<FmodOp>, ElementwiseLowering<RemainderOp>,
               ElementwiseLowering<NegOp>, ElementwiseLowering<ExpOp>,
               ElementwiseLowering<LogOp>, ElementwiseLowering<SqrtOp>, ElementwiseLowering<RsqrtOp>,
               ElementwiseLowering<ReciprocalOp>, ElementwiseLowering<AbsOp>, ElementwiseLowering<TanhOp>,
               ElementwiseLowering<ErfOp>, ElementwiseLowering<SinOp>, ElementwiseLowering<CosOp>,
               ElementwiseLowering<FloorOp>, ElementwiseLowering<CeilOp>, ElementwiseLowering<SigmoidOp>,
               ElementwiseLowering<ReluOp>, ElementwiseLowering<SiluOp>, ElementwiseLowering<GeluOp>,
               ElementwiseLowering<SelectOp>, ElementwiseLowering<CompareOp>, FusedElementwiseLowering, CastLowering,
               ConstantLowering>(
      patterns.getContext());
}
