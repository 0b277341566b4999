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
// The overlap has a cost where a kernel's thread blocks share multiprocessors: they are placed while the
// predecessor still holds some, so a grid of more blocks than multiprocessors (but few enough to run together,
// several to a multiprocessor) can end up unevenly spread. On the H200 a batch-32 decode attention (256 blocks of
// one warp and 74 KB over 537 MB of KV) took 162 us launched this way against 138 us the ordinary way, while the
// overlap saves about a microsecond. Kernels that stream at least 64 MB (15 us at the copy rate) and whose blocks
// share multiprocessors are therefore launched the ordinary way.
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

bool kiln::overlapsPredecessorWell(func::FuncOp kernel, const KernelLaunch &launch, Target target) {
  int64_t bytes = 0;
  for (Type type : kernel.getArgumentTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    bytes += tensor.getNumElements() * std::max<int64_t>(1, tensor.getElementTypeBitWidth() / 8);
  }
  const int64_t longKernelBytes = int64_t(64) << 20;
  if (bytes < longKernelBytes)
    return true;
  // Blocks a multiprocessor holds at once, by shared memory (1 KB of it reserved per block) and threads.
  const int64_t sharedPerMultiprocessor = maxSharedBytesPerBlock(target) + 1024;
  int64_t threads = launch.block[0] * launch.block[1] * launch.block[2];
  int64_t resident = std::min<int64_t>({32, sharedPerMultiprocessor / (launch.dynamicSharedBytes + 1024),
                                        2048 / std::max<int64_t>(1, threads)});
  int64_t blocks = launch.grid[0] * launch.grid[1] * launch.grid[2];
  return resident < 2 || blocks <= multiprocessorCount(target);
}
