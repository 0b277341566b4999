//===- MatmulKernel.h - kiln.matmul as an mma.sync GPU kernel -----*- C++ -*-===//
//
// Builds the gpu.func of one matmul kernel for the "mma_sync" lowering (sm_80 and later): thread blocks own
// BM x BN output tiles, warps own sub-tiles, operands stream through a multi-stage cp.async pipeline in
// dynamic shared memory, ldmatrix feeds mma.sync m16n8k16 with f32 accumulators, and the epilogue runs in
// registers before a bounds-checked store.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_MATMULKERNEL_H
#define KILN_LIB_CONVERSION_KILNTOGPU_MATMULKERNEL_H

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir {
namespace kiln {

/// Launch shape of a generated kernel, recorded in the manifest.
struct KernelLaunch {
  int64_t grid[3];
  int64_t block[3];
  int64_t dynamicSharedBytes;
};

/// Builds, inside `module`, the kernel computing `op` (which must carry an "mma_sync" #kiln.config) as a
/// gpu.func named `name`. Its parameters are the matmul's operands, then its epilogue operands, then the output,
/// each as a flat row-major buffer. Fails with a diagnostic on `op` when the op is outside what the kernel
/// handles (element types, transposes, alignment).
FailureOr<KernelLaunch> buildMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module, MatmulOp op,
                                          StringRef name);

} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_MATMULKERNEL_H
