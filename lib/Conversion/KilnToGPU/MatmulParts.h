//===- MatmulParts.h - What the wgmma GEMM kernel builds around its loop -*- C++ -*-===//
//
// The wgmma (Hopper) matmul kernel, still built whole from the op, keeps what surrounds its tensor-core loop
// here: the operand checks, the kernel parameters and batch offsets, and the epilogue applied per element of a
// tile staged in shared memory before the bounds-checked store. (The mma_sync matmul is lowered from its tiled
// loop: MmaLayoutLowering.cpp.)
//
// The kernel is size-generic: M, N and K are kernel parameters that the code reads (the manifest's `sizes`),
// so that matmuls of one config, dtype and epilogue that differ only in their sizes build the same kernel, which
// kiln-share-kernel-modules then compiles once. What the code does depend on stays static: the batch shape, the
// epilogue operands' broadcasting, whether N is a multiple of 8 or of 2 (the store's width), and whether M, N and
// K are whole numbers of tiles.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_MATMULPARTS_H
#define KILN_LIB_CONVERSION_KILNTOGPU_MATMULPARTS_H

#include "GpuKernels.h"
#include "KernelBuilding.h"


namespace mlir {
namespace kiln {
namespace gpukernel {

/// One kiln.matmul inside the kernel being built: its sizes, the kernel's parameters and the thread block's
/// place in the output.
struct MatmulFrame {
  /// Mutable: an op handle's accessors are not const.
  mutable MatmulOp op;
  /// Rows of the result, its columns, and the reduction size: for the launch and the static choices only.
  int64_t m, n, k;
  /// The rhs is stored [N][K] (transpose_rhs) rather than [K][N].
  bool transB;
  /// The same sizes as the kernel reads them, from its parameters.
  Value sizeM, sizeN, sizeK;
  /// The kernel, its dynamic shared memory and its parameters.
  KernelFunction kernel;
  Value lhs, rhs, out;
  SmallVector<Value> epilogueArgs;
  /// The thread's index in the block, and the first row and column of the block's output tile.
  Value tid, m0, n0;
  /// The result's batch indices for this block (then two null entries for the row and column).
  SmallVector<Value> resultIndex;
  /// This block's batch in the lhs and the rhs (linear indices over each one's own batch dims, broadcast dims
  /// reading 0), and the element offsets of those batches and of the output's.
  Value batchA, batchB, offsetA, offsetB, outOffset;
};

/// Checks what the TMA-fed lowering needs of `op` (bf16 or f16 operands, no transpose_lhs, K and, for an
/// untransposed rhs, N multiples of 8 so that rows copy in 16-byte chunks); the diagnostic names `lowering`.
LogicalResult checkMatmulOperands(MatmulOp op, StringRef lowering);

/// Starts the kernel of `op`: a gpu.func named `name` taking lhs, rhs, the epilogue operands and the output,
/// then M, N and K, launched on a grid (ceil(N/bn), ceil(M/bm), batch) of `threads` threads with `sharedBytes` of dynamic shared
/// memory aligned to `sharedAlignment` bytes.
MatmulFrame startMatmulKernel(OpBuilder &b, gpu::GPUModuleOp module, MatmulOp op, StringRef name, int64_t bm,
                              int64_t bn, int64_t threads, int64_t sharedBytes, int64_t sharedAlignment);

/// Applies the matmul's epilogue to the f32 accumulators of output elements (row, column) and (row, column + 1),
/// `column` even, casts them to the output type and stores those inside the output: as one two-element store
/// when the output's rows have an even length (the pair is then aligned, and inside or outside as a whole).
void storeOutputPair(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value row, Value column, Value first,
                     Value second);

/// Floats by which the rows of an f32 staging tile are longer than the tile: 32 bytes keep every 8-column chunk
/// 16-byte aligned and spread the rows a warp stores at once over distinct banks.
constexpr int64_t kStagingRowPad = 8;

/// Stores the block's bm x bn tile of f32 accumulators, staged row-major in shared memory (`staging`, rows of
/// bn + kStagingRowPad floats), through the epilogue: a loop of at most four iterations over chunks of 8
/// consecutive columns of a row, each thread taking up to four chunks an iteration, each chunk cast and stored
/// with one 16-byte aligned vector store when the output's rows are whole chunks (N a multiple of 8: a chunk is
/// then inside or outside as a whole), else in pairs (N even) or element by element. The epilogue is built once
/// per 8 elements rather than once per accumulator, and the stores are whole 16-byte pieces of consecutive
/// columns.
void storeStagedTile(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value staging, int64_t bm, int64_t bn,
                     int64_t threads);

/// The launch of a matmul kernel with tiles of bm x bn and `threads` threads.
KernelLaunch matmulLaunch(const MatmulFrame &frame, int64_t bm, int64_t bn, int64_t threads, int64_t sharedBytes);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_MATMULPARTS_H
