//===- OutlineKernels.cpp - The kiln-outline-kernels pass ------------------===//
//
// Splits each function into kernels and a host plan. Every compute op (a fused matmul or attention, a row
// kernel, and each remaining elementwise or data-movement op) moves into a private function marked
// `kiln.kernel` that writes its result into a destination argument, with the paged-cache views it reads
// (kiln.gather_pages, which its tiles read page by page); the original function becomes the plan:
// it allocates one buffer per kernel result (tensor.empty, a buffer after bufferization) and calls the kernels
// in order. Constants and views (reshapes, slices of one contiguous run: kiln::isPlanView) stay in the plan.
// Backends compile each kernel on its own.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNOUTLINEKERNELS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// Ops that stay in the host plan: compile-time data and views of bytes already there.
static bool staysInPlan(Operation *op) { return isa<ConstantOp>(op) || isPlanView(op); }

FailureOr<func::FuncOp> kiln::outlineKernel(RewriterBase &rewriter, Operation *op, StringRef name) {
  if (!isa<KilnDialect>(op->getDialect()) || staysInPlan(op) || op->getNumResults() == 0)
    return rewriter.notifyMatchFailure(op, "not a compute op of the kiln dialect");
  auto parent = op->getParentOfType<func::FuncOp>();
  auto module = op->getParentOfType<ModuleOp>();
  if (!parent || !module)
    return rewriter.notifyMatchFailure(op, "not inside a function of a module");
  Location loc = op->getLoc();

  // The views the kernel reads through (the paged caches' gathers, which its tiles read page by page) move in
  // with it; the kernel's inputs are the op's other operands and the views' operands, each once.
  SmallVector<Operation *> views;
  SetVector<Value> inputs;
  for (Value operand : op->getOperands()) {
    if (auto view = operand.getDefiningOp<GatherPagesOp>(); view && !isa<GatherPagesOp>(op)) {
      if (!llvm::is_contained(views, view.getOperation()))
        views.push_back(view);
      inputs.insert(view->getOperands().begin(), view->getOperands().end());
    } else {
      inputs.insert(operand);
    }
  }
  // Kernel signature: the inputs, then one destination per result.
  SmallVector<Type> inputTypes;
  for (Value input : inputs)
    inputTypes.push_back(input.getType());
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
  mapping.map(inputs.getArrayRef(), body->getArguments().take_front(inputs.size()));
  for (Operation *view : views)
    rewriter.clone(*view, mapping);
  Operation *clone = rewriter.clone(*op, mapping);
  SmallVector<Value> results;
  for (auto [index, result] : llvm::enumerate(clone->getResults())) {
    Value destination = body->getArgument(inputs.size() + index);
    auto write = bufferization::MaterializeInDestinationOp::create(rewriter, loc, result, destination);
    write.setWritable(false);
    results.push_back(write.getResult());
  }
  func::ReturnOp::create(rewriter, loc, results);

  // The plan: a buffer per result, then the call.
  rewriter.setInsertionPoint(op);
  SmallVector<Value> operands(inputs.begin(), inputs.end());
  for (Type resultType : op->getResultTypes()) {
    auto tensor = cast<RankedTensorType>(resultType);
    operands.push_back(tensor::EmptyOp::create(rewriter, loc, tensor.getShape(), tensor.getElementType()));
  }
  auto call = func::CallOp::create(rewriter, loc, kernel, operands);
  rewriter.replaceOp(op, call.getResults());
  for (Operation *view : views)
    if (view->use_empty())
      rewriter.eraseOp(view);
  return kernel;
}

bool kiln::writesKernelResult(Operation *op) {
  return llvm::any_of(op->getUsers(), [](Operation *user) {
    return isa<bufferization::MaterializeInDestinationOp>(user);
  });
}

Operation *kiln::kernelOpOf(func::FuncOp kernel) {
  Operation *first = nullptr, *writer = nullptr;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<scf::ForallOp>(op) && op.hasAttr(kTiledOpAttrName))
      return &op;
    if (!isa<KilnDialect>(op.getDialect()))
      continue;
    if (!first)
      first = &op;
    if (!writer && writesKernelResult(&op))
      writer = &op;
  }
  return writer ? writer : first;
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
      // A kernel reading a view takes it in with it (and erases it when nothing else reads it): the views
      // still read after the other kernels become kernels of their own.
      auto computeOps = [&](bool views) {
        SmallVector<Operation *> ops;
        for (Operation &op : plan.getBody().getOps())
          if (isa<KilnDialect>(op.getDialect()) && !staysInPlan(&op) && isa<GatherPagesOp>(op) == views)
            ops.push_back(&op);
        return ops;
      };
      int64_t index = 0;
      auto outlineAll = [&](ArrayRef<Operation *> ops) -> LogicalResult {
        for (Operation *op : ops) {
          std::string name =
              (plan.getSymName() + "_k" + Twine(index++) + "_" + op->getName().stripDialect()).str();
          if (failed(outlineKernel(rewriter, op, name)))
            return op->emitError() << "kiln-outline-kernels: cannot outline this op";
        }
        return success();
      };
      if (failed(outlineAll(computeOps(false))) || failed(outlineAll(computeOps(true))))
        return signalPassFailure();
    }
  }
};
} // namespace
