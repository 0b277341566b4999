//===- DependentLaunch.cpp - Kernels that wait for their predecessor -------===//
//
// A run plan launches its kernels back to back on one stream, and a decode step's kernels are short (a few
// microseconds each): the gap between one kernel's end and the next one's first instructions is a large part of
// the step. On sm_90 a kernel launched with programmatic dependent launch may have its blocks scheduled while
// the previous kernel still runs, provided it waits for that kernel itself before touching memory. Every sm_90a
// kernel starts with that wait (griddepcontrol.wait: the predecessor has finished and its writes are visible),
// then lets its own successor be scheduled (griddepcontrol.launch_dependents, once all of its blocks have
// passed the wait), and its launch is marked `kiln.dependent_launch`, which the manifest carries to the runtime
// (for every kernel but the first of a run plan, kilnc decides). A kernel launched the ordinary way waits for
// nothing there, so the same code runs either way.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::kiln;

void kiln::awaitPredecessorKernel(gpu::GPUFuncOp kernel) {
  // After the leading constants, which kiln-share-kernel-modules sorts to compare kernels.
  Block &entry = kernel.getBody().front();
  auto first = llvm::find_if(entry, [](Operation &op) { return !isa<arith::ConstantOp>(op); });
  OpBuilder builder(&entry, first);
  Location loc = kernel.getLoc();
  NVVM::GriddepcontrolOp::create(builder, loc, NVVM::GridDepActionKind::wait);
  NVVM::GriddepcontrolOp::create(builder, loc, NVVM::GridDepActionKind::launch_dependents);
}
