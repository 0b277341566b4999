//===- FuseEpilogue.cpp - The kiln-fuse-epilogue pass ----------------------===//
//
// Folds the chain of elementwise ops that consumes a matmul or an attention — bias add, scale, activation,
// residual add, a gating multiply by another tensor, a final cast — into the producer's epilogue region, so
// that the output tile is finished in registers and stored once. A producer whose result has other users is left
// alone: fusing it would compute it twice or store it twice. A view between the producer and the chain, or within
// the chain (a GEMM over flattened rows viewed back as [B, S, N] before or after its bias), moves below it.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "Matching.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSEEPILOGUE
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// A float-to-float cast that keeps the shape.
static bool isFusibleCast(Operation *op) {
  auto cast = dyn_cast<CastOp>(op);
  return cast && isa<FloatType>(cast.getInput().getType().getElementType()) &&
         isa<FloatType>(cast.getType().getElementType());
}

/// The epilogue operands of a matmul or attention.
static OperandRange epilogueOperandsOf(Operation *op) {
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return matmul.getEpilogueOperands();
  return cast<AttentionOp>(op).getEpilogueOperands();
}

/// Moves a view of a producer's result below the elementwise op that reads it, while the op's other operands can
/// take the unviewed shape: `op(reshape(y), x)` becomes `reshape(op(y, reshape(x)))` for `x` of the viewed shape
/// (viewed back), a vector along the last dimension or a scalar (as they are), and the last dimension unchanged.
/// A GEMM written over flattened rows ([B*S, N], viewed as [B, S, N] before its bias, activation or residual: as
/// torch's aten graphs and ONNX exporters write nn.Linear) then has its chain directly on its result.
static void sinkViewsOfResult(RewriterBase &rewriter, Value produced) {
  auto flatType = cast<RankedTensorType>(produced.getType());
  while (produced.hasOneUse()) {
    auto view = dyn_cast<ReshapeOp>(*produced.getUsers().begin());
    // (A view to rank 0, a matmul of two vectors viewed as a scalar, has no last dimension to keep.)
    if (!view || !view->hasOneUse() || view.getType().getRank() == 0 || flatType.getRank() == 0 ||
        view.getType().getShape().back() != flatType.getShape().back())
      return;
    Operation *user = *view->getUsers().begin();
    if (user->getNumResults() != 1 || !(lowering::hasFloatFormula(user) || isFusibleCast(user)) ||
        cast<RankedTensorType>(user->getResult(0).getType()).getShape() != view.getType().getShape())
      return;
    SmallVector<Value> operands;
    for (Value operand : user->getOperands()) {
      auto type = cast<RankedTensorType>(operand.getType());
      if (operand == view.getResult()) {
        operands.push_back(produced);
      } else if (type.getShape() == view.getType().getShape()) {
        rewriter.setInsertionPoint(user);
        operands.push_back(ReshapeOp::create(rewriter, user->getLoc(),
                                             RankedTensorType::get(flatType.getShape(), type.getElementType()),
                                             operand));
      } else if (type.getRank() <= 1) {
        operands.push_back(operand);
      } else {
        return;
      }
    }
    rewriter.setInsertionPoint(user);
    auto resultType = cast<RankedTensorType>(user->getResult(0).getType());
    Operation *flat = rewriter.clone(*user);
    flat->setOperands(operands);
    flat->getResult(0).setType(RankedTensorType::get(flatType.getShape(), resultType.getElementType()));
    rewriter.replaceOpWithNewOp<ReshapeOp>(user, resultType, flat->getResult(0));
    rewriter.eraseOp(view);
    produced = flat->getResult(0);
  }
}

FailureOr<Operation *> kiln::fuseEpilogue(RewriterBase &rewriter, Operation *producer) {
  if (!isa<MatmulOp, AttentionOp>(producer))
    return rewriter.notifyMatchFailure(producer, "only a matmul or an attention has an epilogue");
  if (auto attention = dyn_cast<AttentionOp>(producer); attention && attention.getKvChunk())
    return rewriter.notifyMatchFailure(producer, "a split attention's chunks take no epilogue (its merge does)");
  if (auto matmul = dyn_cast<MatmulOp>(producer); matmul && matmul.getKChunk())
    return rewriter.notifyMatchFailure(producer, "a split matmul's chunks take no epilogue (their sum does)");
  Value produced = producer->getResult(0);
  sinkViewsOfResult(rewriter, produced);
  auto resultShape = cast<RankedTensorType>(produced.getType()).getShape();
  Region &oldEpilogue = producer->getRegion(0);
  OperandRange oldOperands = epilogueOperandsOf(producer);
  // Walk the single-use chain of consumers that keep the producer's shape.
  SmallVector<Operation *> chain;
  Value current = produced;
  while (current.hasOneUse()) {
    // A view within the chain (a bias added over flattened rows, then the activation or the residual add
    // over [B, S, N], as nn.Linear with a bias traces) moves below it as well.
    if (current != produced)
      sinkViewsOfResult(rewriter, current);
    Operation *user = *current.getUsers().begin();
    if (user->getNumResults() != 1 || !(lowering::hasFloatFormula(user) || isFusibleCast(user)))
      break;
    auto userType = cast<RankedTensorType>(user->getResult(0).getType());
    if (userType.getShape() != resultShape)
      break;
    // x op x reads the chain twice; the epilogue sees each value once.
    if (llvm::count(user->getOperands(), current) != 1)
      break;
    chain.push_back(user);
    current = user->getResult(0);
  }
  if (chain.empty())
    return rewriter.notifyMatchFailure(producer, "no single-use elementwise consumer of the producer's shape");

  Operation *last = chain.back();
  auto resultType = cast<RankedTensorType>(last->getResult(0).getType());
  // Tensors the chain reads become epilogue operands, except splat constants, which become scalars.
  SmallVector<Value> operands(oldOperands);
  llvm::MapVector<Value, APFloat> splats;
  for (Operation *op : chain)
    for (Value operand : op->getOperands()) {
      if (llvm::is_contained(chain, operand.getDefiningOp()) || operand == produced ||
          llvm::is_contained(operands, operand) || splats.count(operand))
        continue;
      DenseElementsAttr constant;
      if (matchPattern(operand, m_Constant(&constant)) && constant.isSplat() &&
          isa<FloatType>(constant.getElementType()))
        splats.insert({operand, constant.getSplatValue<APFloat>()});
      else
        operands.push_back(operand);
    }

  rewriter.setInsertionPoint(last);
  Location loc = producer->getLoc();
  Operation *fused;
  if (auto matmul = dyn_cast<MatmulOp>(producer)) {
    fused = MatmulOp::create(rewriter, loc, resultType, matmul.getLhs(), matmul.getRhs(), matmul.getTransposeLhs(),
                             matmul.getTransposeRhs(), operands, matmul.getFp32PrecisionAttr(), IntegerAttr());
  } else {
    auto attention = cast<AttentionOp>(producer);
    Type lseType = attention.getLse() ? attention.getLse().getType() : Type();
    fused = AttentionOp::create(rewriter, loc, resultType, lseType, attention.getQ(), attention.getK(),
                                attention.getV(), attention.getMask(), attention.getScaleAttr(),
                                attention.getCausal(), attention.getLayoutAttr(), attention.getOutLayoutAttr(),
                                operands, ValueRange{}, IntegerAttr(), DenseI64ArrayAttr(), StringAttr());
    cast<AttentionOp>(fused).takeVariantFrom(attention);
  }
  // A config pinned on the producer (#kiln.config) pins the fused kernel.
  fused->setDiscardableAttrs(producer->getDiscardableAttrDictionary());
  Type f32 = rewriter.getF32Type();
  Block *body = rewriter.createBlock(&fused->getRegion(0), {}, SmallVector<Type>(operands.size() + 1, f32),
                                     SmallVector<Location>(operands.size() + 1, loc));
  rewriter.setInsertionPointToStart(body);

  // Scalar value of every tensor the chain reads: the accumulator, the epilogue operands, the chain's results.
  IRMapping scalars;
  Value accumulator = body->getArgument(0);
  if (!oldEpilogue.empty()) {
    // An existing epilogue runs first; its yield is the value the chain continues from.
    Block &old = oldEpilogue.front();
    IRMapping inner;
    inner.map(old.getArgument(0), body->getArgument(0));
    for (auto [index, operand] : llvm::enumerate(oldOperands))
      inner.map(old.getArgument(index + 1), body->getArgument(index + 1));
    for (Operation &op : old.without_terminator())
      rewriter.clone(op, inner);
    accumulator = inner.lookup(old.getTerminator()->getOperand(0));
  }
  // Every intermediate the unfused graph would store in f16/bf16 is rounded to that type here too; the last
  // value is rounded by the store itself.
  auto roundLikeStore = [&](Value scalar, Value tensor) -> Value {
    Type element = cast<RankedTensorType>(tensor.getType()).getElementType();
    if (tensor == last->getResult(0) || element == f32)
      return scalar;
    Value rounded = arith::TruncFOp::create(rewriter, loc, element, scalar);
    return arith::ExtFOp::create(rewriter, loc, f32, rounded);
  };
  scalars.map(produced, roundLikeStore(accumulator, produced));
  for (auto [index, operand] : llvm::enumerate(operands))
    scalars.map(operand, body->getArgument(index + 1));
  for (auto &[operand, value] : splats) {
    bool losesInfo;
    APFloat single = value;
    single.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
    scalars.map(operand, arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(single.convertToFloat())));
  }
  for (Operation *op : chain) {
    Value result;
    if (auto cast = dyn_cast<CastOp>(op)) {
      result = scalars.lookup(cast.getInput());
    } else {
      SmallVector<Value> args;
      for (Value operand : op->getOperands())
        args.push_back(scalars.lookup(operand));
      result = lowering::buildScalarFormula(rewriter, loc, op, args);
    }
    scalars.map(op->getResult(0), roundLikeStore(result, op->getResult(0)));
  }
  YieldOp::create(rewriter, loc, scalars.lookup(last->getResult(0)));

  rewriter.replaceOp(last, fused->getResult(0));
  for (Operation *op : llvm::reverse(llvm::ArrayRef(chain).drop_back()))
    rewriter.eraseOp(op);
  // An attention's log-sum-exp is unchanged by the epilogue.
  if (producer->getNumResults() > 1)
    rewriter.replaceAllUsesWith(producer->getResult(1), fused->getResult(1));
  rewriter.eraseOp(producer);
  for (auto &[operand, value] : splats)
    if (operand.use_empty())
      rewriter.eraseOp(operand.getDefiningOp());
  return fused;
}

namespace {
struct KilnFuseEpiloguePass : kiln::impl::KilnFuseEpilogueBase<KilnFuseEpiloguePass> {
  void runOnOperation() override {
    forEachInProgramOrder<MatmulOp, AttentionOp>(
        getOperation(), [](IRRewriter &rewriter, Operation *op) { (void)fuseEpilogue(rewriter, op); });
  }
};
} // namespace
