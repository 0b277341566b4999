//===- FuseElementwise.cpp - The kiln-fuse-elementwise pass ----------------===//
//
// Fuses each chain of elementwise ops (arithmetic, activations, comparisons, selects, casts) that no matmul,
// attention or row kernel took in into one kiln.elementwise: one kernel that reads every input once per
// element and stores one result, where each op would otherwise be a kernel with its result in memory. A chain
// grows from its last op through producers whose shape broadcasts to its own and whose every user is in the
// chain or is another such elementwise op (such a producer is computed again in each chain that reads it, and goes
// with the last of them); splat constants become constants of the body. Each op's formula is the one its own kernel evaluates (buildScalarFormula), and
// intermediates the unfused ops would store in f16/bf16 are rounded to that type, so the fused kernel computes
// the same bits. Runs after the other fusions, which match single ops (norms, RoPE, activations, epilogues).
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "Dialect/Kiln/ShapeInference.h"
#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISE
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// An op a fused chain evaluates per element.
static bool isChainOp(Operation *op) {
  return op->getNumResults() == 1 && (lowering::hasScalarFormula(op) || isa<SelectOp, CompareOp, CastOp>(op));
}

/// The splat value of a kiln.constant, or null.
static DenseElementsAttr splatConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : DenseElementsAttr();
  return dense && dense.isSplat() ? dense : DenseElementsAttr();
}

/// The type a kiln.elementwise body computes an element of `element` in: f32 for floats, else the type itself.
static Type computeType(Type element) {
  return isa<FloatType>(element) ? Float32Type::get(element.getContext()) : element;
}

/// A splat constant's value as a scalar of its compute type.
static Value scalarConstant(OpBuilder &b, Location loc, DenseElementsAttr splat) {
  Type element = splat.getElementType();
  if (auto floatType = dyn_cast<FloatType>(element)) {
    bool losesInfo;
    APFloat value = splat.getSplatValue<APFloat>();
    value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &losesInfo); // exact from f16/bf16/f32
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value.convertToFloat()));
  }
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(element, splat.getSplatValue<APInt>()));
}

/// The most ops one fused body takes: a bound on the recomputation below, far above real chains.
static constexpr unsigned kMaxChainOps = 64;

/// The ops of the chain that ends in `root`, in program order: producers in its block whose shape broadcasts to
/// the root's (a smaller one is computed per element of the root, its inputs broadcast straight to the root's
/// shape, since numpy's broadcasts compose) and whose every user is in the chain, or is an elementwise op of such
/// a shape too. The latter are computed again in each chain that reads them (they stay for their other readers
/// until the last of those chains takes them): a few more instructions per element against a kernel and a round
/// trip through memory.
static SmallVector<Operation *> chainEndingIn(Operation *root) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(root->getResult(0).getType()).getShape();
  auto ofShape = [&](Operation *op) {
    if (!isChainOp(op) || op->getBlock() != root->getBlock())
      return false;
    auto merged = broadcastShapes(cast<RankedTensorType>(op->getResult(0).getType()).getShape(), shape);
    auto *dims = std::get_if<SmallVector<int64_t>>(&merged);
    return dims && ArrayRef<int64_t>(*dims) == shape;
  };
  SetVector<Operation *> members;
  members.insert(root);
  for (bool grew = true; grew && members.size() < kMaxChainOps;) {
    grew = false;
    for (unsigned i = 0; i < members.size() && members.size() < kMaxChainOps; ++i) {
      for (Value operand : members[i]->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || members.contains(producer) || !ofShape(producer) ||
            !llvm::all_of(producer->getUsers(),
                          [&](Operation *user) { return members.contains(user) || ofShape(user); }))
          continue;
        members.insert(producer);
        grew = true;
        if (members.size() == kMaxChainOps)
          break;
      }
    }
  }
  SmallVector<Operation *> ordered = members.takeVector();
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

FailureOr<ElementwiseOp> kiln::fuseElementwiseChain(RewriterBase &rewriter, Operation *root) {
  if (!isChainOp(root))
    return rewriter.notifyMatchFailure(root, "not an elementwise op");
  SmallVector<Operation *> chain = chainEndingIn(root);
  if (chain.size() < 2)
    return rewriter.notifyMatchFailure(root, "no elementwise producer to fuse");

  // The chain's inputs: every operand made outside it but splat constants, each once.
  SetVector<Value> inputs;
  for (Operation *op : chain)
    for (Value operand : op->getOperands())
      if (!llvm::is_contained(chain, operand.getDefiningOp()) && !splatConstant(operand))
        inputs.insert(operand);
  Location loc = root->getLoc();
  rewriter.setInsertionPoint(root);
  auto fused = ElementwiseOp::create(rewriter, loc, root->getResult(0).getType(), inputs.getArrayRef());
  SmallVector<Type> argumentTypes;
  for (Value input : inputs)
    argumentTypes.push_back(computeType(cast<RankedTensorType>(input.getType()).getElementType()));
  Block *body = rewriter.createBlock(&fused.getBody(), {}, argumentTypes,
                                     SmallVector<Location>(inputs.size(), loc));
  rewriter.setInsertionPointToStart(body);

  IRMapping scalars;
  for (auto [input, argument] : llvm::zip(inputs, body->getArguments()))
    scalars.map(input, argument);
  auto scalarOf = [&](Value operand) -> Value {
    if (Value known = scalars.lookupOrNull(operand))
      return known;
    Value constant = scalarConstant(rewriter, loc, splatConstant(operand));
    scalars.map(operand, constant);
    return constant;
  };
  for (Operation *op : chain) {
    SmallVector<Value> args = llvm::map_to_vector(op->getOperands(), scalarOf);
    Type element = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
    Value result = isa<CastOp>(op) ? lowering::convertScalar(rewriter, loc, args[0], element)
                                   : lowering::buildScalarFormula(rewriter, loc, op, args);
    // What the unfused op would store in f16/bf16 is rounded to that type; the store rounds the last value.
    if (isa<FloatType>(element) && !element.isF32() && op != root && result.getType() != element)
      result = arith::TruncFOp::create(rewriter, loc, element, result);
    scalars.map(op->getResult(0), lowering::widen(rewriter, loc, result));
  }
  YieldOp::create(rewriter, loc, scalars.lookup(root->getResult(0)));

  rewriter.replaceOp(root, fused.getResult());
  // Members that other chains still read stay for them.
  for (Operation *op : llvm::reverse(ArrayRef(chain).drop_back()))
    if (op->use_empty())
      rewriter.eraseOp(op);
  return fused;
}

namespace {
struct KilnFuseElementwisePass : kiln::impl::KilnFuseElementwiseBase<KilnFuseElementwisePass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation()->walk([&](func::FuncOp function) {
      if (function.isExternal())
        return;
      // From the last op back: each op not yet fused ends the longest chain it can.
      Block &block = function.getBody().front();
      for (Operation *op = block.empty() ? nullptr : &block.back(); op;) {
        Operation *previous = op->getPrevNode();
        if (FailureOr<ElementwiseOp> fused = fuseElementwiseChain(rewriter, op); succeeded(fused))
          previous = fused->getOperation()->getPrevNode();
        op = previous;
      }
      // Splat constants the chains took in as body constants and nothing else reads.
      for (Operation &op : llvm::make_early_inc_range(block))
        if (isa<ConstantOp>(op) && op.use_empty())
          rewriter.eraseOp(&op);
    });
  }
};
} // namespace
