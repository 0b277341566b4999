//===- KernelBuilding.h - Building blocks of Kiln's GPU kernels ----*- C++ -*-===//
//
// Broadcast indexing, tensor-core fragments and the mma.sync call that the matmul and attention kernel builders
// share. Kept out of every file that does not emit GPU code, since it pulls in the NVVM and LLVM dialects.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_KERNELBUILDING_H
#define KILN_LIB_CONVERSION_KILNTOGPU_KERNELBUILDING_H

#include "IndexMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir {
namespace kiln {
namespace gpukernel {

/// Linear index into a row-major operand of `operandShape` that broadcasts (numpy rules) against a result of
/// `resultShape`, at the result position `indices` (one per result dim, or nullptr for 0). `runtimeExtents`,
/// when given, has one entry per result dim: where set, that dim's extent is the kernel value, and an operand
/// dim of more than 1 element there has that extent too (a size-generic kernel's rows and columns).
Value broadcastLinearIndex(IndexMath &m, ArrayRef<int64_t> operandShape, ArrayRef<int64_t> resultShape,
                           ArrayRef<Value> indices, ArrayRef<Value> runtimeExtents = {});

/// The multi-index in `shape` of row-major index `linear`.
SmallVector<Value> delinearize(IndexMath &m, ArrayRef<int64_t> shape, Value linear);

/// The TF32 registers of an f32 fragment's elements `values` (the i32 registers mma.sync takes): each rounded to
/// TF32 (to nearest, ties away from zero), or with `split` (3xTF32, f32 accuracy) the rounded values followed by
/// what each rounding left, rounded to TF32 too: twice the registers.
SmallVector<Value> tf32Registers(OpBuilder &b, Location loc, ArrayRef<Value> values, bool split);

/// The four registers of an A fragment, or the two of a B fragment, as nvvm.mma.sync takes them: pairs of f16
/// as vector<2xf16>, pairs of bf16 packed into i32; f32 elements (vector<1xf32> rows) as f32 values, which
/// `tf32Registers` turns into registers.
SmallVector<Value> packFragment(OpBuilder &b, Location loc, Value fragment);

/// The B fragments of two adjacent 8-column blocks (columns n0..n0+7 and n0+8..n0+15, rows k0..k0+15 of the
/// K x N operand, k0..k0+7 for 32-bit elements) with one ldmatrix.x4 from a shared tile stored row-major with
/// `stride` elements per row: `kMajor` for a [K][N] tile (a transposed load, 16-bit elements only), otherwise
/// [N][K]. Returns the two fragments as `packFragment` gives them.
std::pair<SmallVector<Value>, SmallVector<Value>> loadBFragmentPair(OpBuilder &b, Location loc, IndexMath &m,
                                                                    Value shared, Value base, int64_t stride,
                                                                    Value lane, Value k0, Value n0, bool kMajor);

/// A kernel under construction: its gpu.func and its dynamic shared memory as raw bytes.
struct KernelFunction {
  gpu::GPUFuncOp func;
  Value sharedBytes;
};

/// The extent of a size-generic kernel's buffers: bare pointers need a static memref shape, and the kernel's
/// index math, not the type, bounds every access (2^40 elements, beyond any GPU's memory).
constexpr int64_t kSizeGenericExtent = int64_t(1) << 40;

/// The gpu.func attribute saying that each of the kernel's index parameters (its sizes) is at most its value,
/// set where every size the plan launches the kernel with is at most kSizeBound (2^22: positions and their
/// differences then stay within the integers an f32 holds exactly, which kiln-fold-conversion-offsets needs).
constexpr llvm::StringLiteral kSizeBoundAttrName = "kiln.size_bound";
constexpr int64_t kSizeBound = int64_t(1) << 22;

/// Starts kernel `name` in `module`: a gpu.func taking each of `buffers` as a flat row-major memref (bare
/// pointers), launched with `threads` threads, with `sharedBytes` of dynamic shared memory (an extern workgroup
/// global aligned to `sharedAlignment` bytes; none when 0). Leaves `b` at the start of the kernel body. With
/// `sizeParams` > 0 the kernel is size-generic: its buffers are typed with kSizeGenericExtent elements and that
/// many index parameters (the sizes the code reads) follow them.
KernelFunction startKernel(OpBuilder &b, gpu::GPUModuleOp module, Location loc, StringRef name,
                           ArrayRef<RankedTensorType> buffers, int64_t threads, int64_t sharedBytes,
                           int64_t sharedAlignment = 16, unsigned sizeParams = 0);

/// A 1-D view of `size` elements of `element` at element offset `offset` of the kernel's shared memory.
Value sharedView(OpBuilder &b, Location loc, Value sharedBytes, int64_t offset, int64_t size, Type element);

/// Runs one mma.sync on the accumulator fragment `acc` (vector<4xf32>) and returns the new fragment: m16n8k16
/// for f16 or bf16 operands, as `packFragment` gives them, m16n8k8 TF32 for f32 ones (`element`), as
/// `tf32Registers` gives them. Split f32 fragments multiply as 3xTF32: the two small products first, so that
/// they are not lost against the large one, summed from zero with it and added to `acc` by a rounded f32 add
/// (the tensor core truncates what it adds to its accumulator, a bias that grows with the contraction: 3.8e-4
/// relative at K = 50257 when the three products went straight into the accumulator, as TF32 alone).
Value mmaSync(OpBuilder &b, Location loc, ArrayRef<Value> a, ArrayRef<Value> bFragment, Value acc, Type element);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_KERNELBUILDING_H
