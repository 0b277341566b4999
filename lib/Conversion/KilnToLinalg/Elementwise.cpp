//===- Elementwise.cpp - kiln elementwise ops to linalg --------------------===//
//
// Arithmetic, activations, select, cast and constants. Each op becomes one broadcasting linalg.generic whose
// body computes in f32 (narrow types are widened on load and rounded once on store), which is also how the GPU
// kernels compute their epilogues.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

namespace {

/// f32 scalar formula of an elementwise op.
using Formula = Value (*)(OpBuilder &, Location, ValueRange);

Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Value one = floatConstant(b, loc, x.getType(), 1.0);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one, arith::AddFOp::create(b, loc, one, e));
}

template <typename Op>
Value formulaOf(OpBuilder &b, Location loc, ValueRange x);

#define KILN_BINARY_FORMULA(KilnOp, ArithOp)                                                                \
  template <>                                                                                               \
  Value formulaOf<KilnOp>(OpBuilder & b, Location loc, ValueRange x) {                                      \
    return ArithOp::create(b, loc, x[0], x[1]);                                                             \
  }
KILN_BINARY_FORMULA(AddOp, arith::AddFOp)
KILN_BINARY_FORMULA(SubOp, arith::SubFOp)
KILN_BINARY_FORMULA(MulOp, arith::MulFOp)
KILN_BINARY_FORMULA(DivOp, arith::DivFOp)
KILN_BINARY_FORMULA(MaxOp, arith::MaximumFOp)
KILN_BINARY_FORMULA(MinOp, arith::MinimumFOp)
KILN_BINARY_FORMULA(PowOp, math::PowFOp)
#undef KILN_BINARY_FORMULA

#define KILN_UNARY_FORMULA(KilnOp, MathOp)                                                                  \
  template <>                                                                                               \
  Value formulaOf<KilnOp>(OpBuilder & b, Location loc, ValueRange x) {                                      \
    return MathOp::create(b, loc, x[0]);                                                                    \
  }
KILN_UNARY_FORMULA(NegOp, arith::NegFOp)
KILN_UNARY_FORMULA(ExpOp, math::ExpOp)
KILN_UNARY_FORMULA(LogOp, math::LogOp)
KILN_UNARY_FORMULA(SqrtOp, math::SqrtOp)
KILN_UNARY_FORMULA(RsqrtOp, math::RsqrtOp)
KILN_UNARY_FORMULA(AbsOp, math::AbsFOp)
KILN_UNARY_FORMULA(TanhOp, math::TanhOp)
KILN_UNARY_FORMULA(ErfOp, math::ErfOp)
#undef KILN_UNARY_FORMULA

template <>
Value formulaOf<ReciprocalOp>(OpBuilder &b, Location loc, ValueRange x) {
  return arith::DivFOp::create(b, loc, floatConstant(b, loc, x[0].getType(), 1.0), x[0]);
}
template <>
Value formulaOf<SigmoidOp>(OpBuilder &b, Location loc, ValueRange x) {
  return sigmoid(b, loc, x[0]);
}
template <>
Value formulaOf<ReluOp>(OpBuilder &b, Location loc, ValueRange x) {
  return arith::MaximumFOp::create(b, loc, x[0], floatConstant(b, loc, x[0].getType(), 0.0));
}
template <>
Value formulaOf<SiluOp>(OpBuilder &b, Location loc, ValueRange x) {
  return arith::MulFOp::create(b, loc, x[0], sigmoid(b, loc, x[0]));
}

/// Lowers an elementwise op whose formula needs nothing but its operands.
template <typename Op>
struct ElementwiseLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    rewriter.replaceOp(op, buildBroadcastElementwise(rewriter, op.getLoc(), resultType, adaptor.getOperands(),
                                                     formulaOf<Op>));
    return success();
  }
};

struct GeluLowering : OpConversionPattern<GeluOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GeluOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    bool tanhForm = op.getApproximate() == GeluApproximation::tanh;
    auto body = [tanhForm](OpBuilder &b, Location loc, ValueRange args) -> Value {
      Value x = args[0];
      Type type = x.getType();
      Value half = floatConstant(b, loc, type, 0.5), one = floatConstant(b, loc, type, 1.0);
      Value inner;
      if (tanhForm) {
        // sqrt(2/pi) * (x + 0.044715 x^3)
        Value x3 = arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
        Value cubic = arith::AddFOp::create(
            b, loc, x, arith::MulFOp::create(b, loc, floatConstant(b, loc, type, 0.044715), x3));
        inner = math::TanhOp::create(
            b, loc, arith::MulFOp::create(b, loc, floatConstant(b, loc, type, std::sqrt(2.0 / M_PI)), cubic));
      } else {
        inner = math::ErfOp::create(
            b, loc, arith::MulFOp::create(b, loc, x, floatConstant(b, loc, type, M_SQRT1_2)));
      }
      Value gate = arith::MulFOp::create(b, loc, half, arith::AddFOp::create(b, loc, one, inner));
      return arith::MulFOp::create(b, loc, x, gate);
    };
    rewriter.replaceOp(op, buildBroadcastElementwise(rewriter, op.getLoc(), op.getType(), adaptor.getInput(),
                                                     body));
    return success();
  }
};

struct SelectLowering : OpConversionPattern<SelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SelectOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto body = [](OpBuilder &b, Location loc, ValueRange args) -> Value {
      return arith::SelectOp::create(b, loc, args[0], args[1], args[2]);
    };
    rewriter.replaceOp(op, buildBroadcastElementwise(rewriter, op.getLoc(), op.getType(), adaptor.getOperands(),
                                                     body));
    return success();
  }
};

/// Converts one scalar between any two element types of the dialect.
Value convertScalar(OpBuilder &b, Location loc, Value value, Type to) {
  Type from = value.getType();
  if (from == to)
    return value;
  auto fromFloat = dyn_cast<FloatType>(from), toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat)
    return fromFloat.getWidth() < toFloat.getWidth() ? Value(arith::ExtFOp::create(b, loc, to, value))
                                                     : Value(arith::TruncFOp::create(b, loc, to, value));
  if (fromFloat) {
    if (to.isInteger(1))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value, floatConstant(b, loc, from, 0.0));
    return arith::FPToSIOp::create(b, loc, to, value);
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
               ElementwiseLowering<PowOp>, ElementwiseLowering<NegOp>, ElementwiseLowering<ExpOp>,
               ElementwiseLowering<LogOp>, ElementwiseLowering<SqrtOp>, ElementwiseLowering<RsqrtOp>,
               ElementwiseLowering<ReciprocalOp>, ElementwiseLowering<AbsOp>, ElementwiseLowering<TanhOp>,
               ElementwiseLowering<ErfOp>, ElementwiseLowering<SigmoidOp>, ElementwiseLowering<ReluOp>,
               ElementwiseLowering<SiluOp>, GeluLowering, SelectLowering, CastLowering, ConstantLowering>(
      patterns.getContext());
}
