//===- WgmmaBuilding.h - Building blocks of Kiln's Hopper kernels --*- C++ -*-===//
//
// What the wgmma GEMM and attention kernels share: the 128-byte swizzled shared-memory layout that wgmma reads
// without bank conflicts, the 64-bit shared-memory matrix descriptors built in the kernel, the warpgroup MMA
// with its A operand in registers (which the NVVM dialect has no op for), and the move between wgmma's
// accumulator struct and the 16 x 8 fragments (vector<4xf32>) the rest of a kernel works on. Tiles are stored as
// panels of 64 columns (128 bytes of bf16/f16), rows contiguous within a panel; a panel's start must be
// 1024-byte aligned, the period of the swizzle.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_WGMMABUILDING_H
#define KILN_LIB_CONVERSION_KILNTOGPU_WGMMABUILDING_H

#include "KernelBuilding.h"

namespace mlir {
namespace kiln {
namespace gpukernel {

/// Bytes in one row of a swizzled panel, and the bf16/f16 elements they hold.
constexpr int64_t kSwizzleRowBytes = 128;
constexpr int64_t kSwizzleRowElements = 64;

/// Element offset of the 16-byte chunk that starts at (row, column) of a tile stored as panels of 64 columns of
/// `rows` rows each: chunk c of a row lands at chunk c ^ (row % 8) within its 128-byte row.
Value swizzledPanelIndex(IndexMath &m, Value row, Value column, int64_t rows);

/// Builds wgmma shared-memory matrix descriptors for one dynamic shared-memory buffer.
struct DescriptorBuilder {
  OpBuilder &b;
  Location loc;
  /// The buffer's shared address in 16-byte units (it fits the descriptor's 14-bit field: shared memory is
  /// under 256 KB).
  Value baseUnits;

  /// Starts from the raw byte buffer `sharedBytes` of startKernel.
  DescriptorBuilder(OpBuilder &b, Location loc, Value sharedBytes);
  /// The descriptor of the matrix at `byteOffset` in the buffer, 128-byte swizzled, with the given leading and
  /// stride byte offsets (see the PTX ISA's wgmma matrix descriptor: K-major tiles use only the stride, the
  /// distance between 8-row groups; MN-major ones also the leading offset, the distance between 64-column panels).
  /// A matrix `stepBytes` (a multiple of 16) past `byteOffset` adds that to the start field of the descriptor
  /// at `byteOffset`: the steps of one tile share its address arithmetic.
  Value get(Value byteOffset, int64_t leadingBytes, int64_t strideBytes, int64_t stepBytes = 0);
};

/// Makes this thread's cp.async copies into shared memory (generic proxy) visible to wgmma's reads (async proxy);
/// a barrier after it extends that to the whole block.
void fenceCopiesForWgmma(OpBuilder &b, Location loc);

/// An accumulator of N / 2 f32 per thread for wgmma m64nNk16, as an LLVM struct of zeros.
Value zeroAccumulator(OpBuilder &b, Location loc, int64_t n);

/// wgmma.fence: orders the registers written so far (accumulators, A operands) before the wgmma that follow.
void fenceWgmmaOperands(OpBuilder &b, Location loc);

/// One group of wgmma.mma_async m64nNk16 (f32 accumulators) with A from registers, issued back to back and
/// committed as one group but not waited for (a pipeline issues several groups, then waits with wgmmaWaitFor):
/// step i takes `a[i]`, this thread's four 32-bit registers of the warp's 16 x 16 A fragment (the mma.sync
/// m16n8k16 A layout; bf16 pairs packed in i32, f16 as vector<2xf16>), and `descriptorsB[i]`, the B matrix in
/// shared memory, N-major when `bNMajor` (K-major otherwise). The caller places fenceWgmmaOperands before the
/// first group it issues, after every register and descriptor the MMAs read exists: nothing may write registers
/// between the fence and the MMAs.
Value issueWgmmaRegisterAGroup(OpBuilder &b, Location loc, Value accumulator, ArrayRef<SmallVector<Value>> a,
                               ArrayRef<Value> descriptorsB, int64_t n, bool bf16, bool bNMajor);

/// Waits until at most `pending` wgmma groups are in flight and returns `accumulator` as the wait defines it: its
/// registers pass through the waiting instruction, so no use of them can be scheduled before it. `readRegisters`
/// are A operands that the groups being waited for read: the wait uses them too, so that their registers are not
/// reused (overwritten while the MMAs still read them) before it.
Value wgmmaWaitFor(OpBuilder &b, Location loc, int64_t pending, Value accumulator,
                   ArrayRef<Value> readRegisters = {});

/// The accumulator struct of m64nNk16 as this thread's N / 8 fragments, each vector<4xf32> in the mma.sync
/// C layout (rows lane / 4 and 8 below of the warp's 16, columns 2 (lane % 4) + {0, 1} of the 8-column block).
SmallVector<Value> accumulatorFragments(OpBuilder &b, Location loc, Value accumulator);
/// The inverse of accumulatorFragments.
Value fragmentsAccumulator(OpBuilder &b, Location loc, ArrayRef<Value> fragments);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_WGMMABUILDING_H
