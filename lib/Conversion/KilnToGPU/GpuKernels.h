//===- GpuKernels.h - The GPU kernels Kiln builds ------------------*- C++ -*-===//
//
// The GPU kernels: row kernels, matmuls and attentions lowered from their tiled IR by layout, and the builder
// that still emits one gpu.func for one kernel op (the elementwise and data-movement glue kernels). The
// "mma_sync" lowering (sm_80 and later) uses cp.async into dynamic shared memory, ldmatrix and mma.sync m16n8k16
// with f32 accumulators; the "wgmma" lowering (sm_90a) has the warpgroup's tensor cores read 128-byte swizzled
// shared memory (that TMA fills for matmuls, cp.async for attention's K and V).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_GPUKERNELS_H
#define KILN_LIB_CONVERSION_KILNTOGPU_GPUKERNELS_H

#include "Dialect/Kiln/KilnOps.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir {
namespace kiln {

/// A tensor map (TMA descriptor) that a kernel takes by value after its sizes: the runtime builds it at each
/// launch from the address of buffer parameter `buffer` and this layout (dims innermost first, byte strides of
/// dims 1 and up, the box each copy moves, the shared-memory swizzle in bytes).
struct TensorMapParam {
  int64_t buffer;
  StringRef dtype;
  SmallVector<int64_t, 3> dims, strides, box;
  int64_t swizzleBytes;
};

/// The most tensor maps a kernel may take (KILN_MAX_TENSOR_MAPS of the runtime).
constexpr unsigned kMaxTensorMaps = 8;

/// Launch shape of a generated kernel, recorded in the manifest.
struct KernelLaunch {
  int64_t grid[3];
  int64_t block[3];
  int64_t dynamicSharedBytes;
  /// The values of a size-generic kernel's index parameters, which follow its buffers.
  SmallVector<int64_t, 3> sizes = {};
  /// The tensor maps the kernel reads through TMA, which follow the sizes.
  SmallVector<TensorMapParam, 2> tensorMaps = {};
};

/// True for the ops that buildElementwiseKernel handles: elementwise arithmetic, activations, select, cast,
/// RoPE, the data movement between kernels (transpose, reshape, broadcast, slice, concat, gather), and the
/// reductions, softmax and logsumexp the row kernels do not take (over other or several axes).
bool isElementwiseKernelOp(Operation *op);

/// Builds a one-thread-per-element kernel for `op` (float tensors) as a gpu.func named `name` with parameters the
/// arguments of its outlined function (its operands, each once, and its output).
FailureOr<KernelLaunch> buildElementwiseKernel(OpBuilder &builder, gpu::GPUModuleOp module, Operation *op,
                                               StringRef name);

/// Builds the kernel of an append into paged caches (one thread per element of the new rows, each writing its
/// element of k and of v into its page) as a gpu.func named `name` with parameters `kernel`'s arguments. The
/// kernel must be marked kiln.updates_in_place: its destinations are the caches themselves.
FailureOr<KernelLaunch> buildAppendKvKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                            AppendKvOp append, StringRef name);

/// Lowers the tiled row kernel `kernel` (its loop as kiln-tile, kiln-decompose-rows and kiln-assign-layouts
/// leave it) to a gpu.func named `name` with parameters the function's arguments (operands, then the output):
/// one thread block per loop iteration, each tile value in registers by its #kiln.row_layout
/// (RowLayoutLowering.cpp).
FailureOr<KernelLaunch> lowerRowKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                       StringRef name);

/// Lowers the tiled "mma_sync" matmul `kernel` (its loop as kiln-tile and kiln-assign-layouts leave it) to a
/// gpu.func named `name` with parameters the function's arguments (operands, epilogue operands, then the
/// output): one thread block per output tile, the K loop a cp.async pipeline into shared memory feeding
/// ldmatrix and mma.sync by the loop's #kiln.mma_layout (MmaLayoutLowering.cpp).
FailureOr<KernelLaunch> lowerMmaMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                             StringRef name);

/// Lowers the tiled "wgmma" matmul `kernel` (sm_90a; its loop as kiln-tile and kiln-assign-layouts leave it)
/// like lowerMmaMatmulKernel, with the K loop fed by TMA into 128-byte swizzled shared memory and run on
/// wgmma.mma_async m64nBNk16 (WgmmaLayoutLowering.cpp); the kernel's parameters end with the tensor maps of A
/// and B (KernelLaunch::tensorMaps).
FailureOr<KernelLaunch> lowerWgmmaMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                               StringRef name);

/// Lowers the tiled loop of the outlined attention function `kernel` (kiln-tile, kiln-online-softmax,
/// kiln-split-masked-tiles and kiln-assign-layouts with a "mma_sync" config) into a gpu.func named `name` in
/// `module`: mma.sync fragments, K and V streamed through cp.async rings; size-generic in the lengths.
FailureOr<KernelLaunch> lowerMmaAttentionKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                                StringRef name);

/// Makes `kernel` (an sm_90a kernel) wait for the previous kernel of its stream before anything else and then
/// let its successor be scheduled (DependentLaunch.cpp), so that its launches may overlap that kernel
/// (programmatic dependent launch; the host function is marked `kiln.dependent_launch`).
void awaitPredecessorKernel(gpu::GPUFuncOp kernel);

/// Whether `kernel` (launched as `launch`) gains from being launched to overlap its predecessor: not when it
/// streams at least 64 MB and more of its blocks than the chip's multiprocessors share multiprocessors, where
/// blocks placed beside the running predecessor end up unevenly spread.
bool overlapsPredecessorWell(func::FuncOp kernel, const KernelLaunch &launch, Target target);

/// Gives `gpuModule`'s f32 exp and division the hardware's approximations with subnormal results flushed to
/// zero (FastMath.cpp): exp as libdevice's fast path, x / y as x times rcp.approx.ftz(y), and libdevice's
/// flush-to-zero paths through the module's nvvm-reflect-ftz flag.
void approximateExpAndDivision(gpu::GPUModuleOp gpuModule);

} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_GPUKERNELS_H
