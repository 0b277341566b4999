//===- OutlineKernels.cpp - The kiln-outline-kernels pass ------------------===//
//
// Splits each function into kernels and a host plan. Every compute op (a fused matmul or attention, a row
// kernel, and each remaining elementwise or data-movement op) moves into a private function marked
// `kiln.kernel` that writes its result into a destination argument; the original function becomes the plan:
// it allocates one buffer per kernel result (tensor.empty, a buffer after bufferization) and calls the kernels
// in order. Constants and reshapes (views) stay in the plan. Backends compile each kernel on its own.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNOUTLINEKERNELS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// Ops that stay in the host plan: compile-time data and metadata-only views.
static bool staysInPlan(Operation *op) { return isa<ConstantOp, ReshapeOp>(op); }

FailureOr<func::FuncOp> kiln::outlineKernel(RewriterBase &rewriter, Operation *op, StringRef name) {
  if (!isa<KilnDialect>(op->getDialect()) || staysInPlan(op) || op->getNumResults() == 0)
    return rewriter.notifyMatchFailure(op, "not a compute op of the kiln dialect");
  auto parent = op->getParentOfType<func::FuncOp>();
  auto module = op->getParentOfType<ModuleOp>();
  if (!parent || !module)
    return rewriter.notifyMatchFailure(op, "not inside a function of a module");
  Location loc = op->getLoc();

  // Kernel signature: the op's operands, then one destination per result.
  SmallVector<Type> inputTypes(op->getOperandTypes());
  llvm::append_range(inputTypes, op->getResultTypes());
  auto type = rewriter.getFunctionType(inputTypes, op->getResultTypes());
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(parent);
  auto kernel = func::FuncOp::create(rewriter, loc, name, type);
  kernel.setPrivate();
  kernel->setAttr("kiln.kernel", rewriter.getUnitAttr());
  SymbolTable(module).insert(kernel);

  Block *body = kernel.addEntryBlock();
  rewriter.setInsertionPointToStart(body);
  IRMapping mapping;
  mapping.map(op->getOperands(), body->getArguments().take_front(op->getNumOperands()));
  Operation *clone = rewriter.clone(*op, mapping);
  SmallVector<Value> results;
  for (auto [index, result] : llvm::enumerate(clone->getResults())) {
    Value destination = body->getArgument(op->getNumOperands() + index);
    auto write = bufferization::MaterializeInDestinationOp::create(rewriter, loc, result, destination);
    write.setWritable(false);
    results.push_back(write.getResult());
  }
  func::ReturnOp::create(rewriter, loc, results);

  // The plan: a buffer per result, then the call.
  rewriter.setInsertionPoint(op);
  SmallVector<Value> operands(op->getOperands());
  for (Type resultType : op->getResultTypes()) {
    auto tensor = cast<RankedTensorType>(resultType);
    operands.push_back(tensor::EmptyOp::create(rewriter, loc, tensor.getShape(), tensor.getElementType()));
  }
  auto call = func::CallOp::create(rewriter, loc, kernel, operands);
  rewriter.replaceOp(op, call.getResults());
  return kernel;
}

Operation *kiln::kernelOpOf(func::FuncOp kernel) {
  Operation *first = nullptr;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<scf::ForallOp>(op) && op.hasAttr(kTiledOpAttrName))
      return &op;
    if (!first && isa<KilnDialect>(op.getDialect()))
      first = &op;
  }
  return first;
}

StringRef kiln::kernelOpName(Operation *kernelOp) {
  if (auto tiled = kernelOp->getAttrOfType<StringAttr>(kTiledOpAttrName))
    return tiled.getValue();
  return kernelOp->getName().getStringRef();
}

namespace {
struct KilnOutlineKernelsPass : kiln::impl::KilnOutlineKernelsBase<KilnOutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    IRRewriter rewriter(&getContext());
    SmallVector<func::FuncOp> plans;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func->hasAttr("kiln.kernel") && !func.isExternal())
        plans.push_back(func);
    for (func::FuncOp plan : plans) {
      SmallVector<Operation *> ops;
      for (Operation &op : plan.getBody().getOps())
        if (isa<KilnDialect>(op.getDialect()) && !staysInPlan(&op))
          ops.push_back(&op);
      for (auto [index, op] : llvm::enumerate(ops)) {
        std::string name = (plan.getSymName() + "_k" + Twine(index) + "_" +
                            op->getName().stripDialect())
                               .str();
        if (failed(outlineKernel(rewriter, op, name))) {
          op->emitError() << "kiln-outline-kernels: cannot outline this op";
          return signalPassFailure();
        }
      }
    }
  }
};
} // namespace
