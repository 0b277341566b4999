//===- TiledLoopLowering.h - What the lowerings of tiled kernels share -*- C++ -*-===//
//
// A tiled kernel reaches the GPU as kiln-tile leaves it: an outlined function whose scf.forall (mapped onto
// thread blocks) reads tiles of the function's arguments through tensor.extract_slice and tensor.pad, computes
// with kiln ops that carry a layout, and inserts its valid part into the result. Every lowering by layout (row
// kernels, mma.sync matmuls) needs the same groundwork: the arguments and their reshapes as flat global
// buffers with a shape, the destination the loop's result is written to, this block's iteration of the loop,
// the index arithmetic of tile offsets and clamped sizes recomputed in the kernel, and the tiles the loop reads
// from memory as descriptors that each lowering loads its own way. This is that groundwork, once.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_TILEDLOOPLOWERING_H
#define KILN_LIB_CONVERSION_KILNTOGPU_TILEDLOOPLOWERING_H

#include "IndexMath.h"

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <vector>

namespace mlir {
namespace kiln {
namespace gpukernel {

/// A split matmul's sum that kiln-fuse-split-sums moved into the kernel: its elements are computed where they
/// are read (loadFusedSum), from its chunks and its epilogue's operands (kernel parameters, in order).
struct FusedSumSource {
  SumSplitsOp sum;
  SmallVector<Value> epilogue;
};

/// A kernel buffer seen with a shape: a kernel parameter, or a reshape of one (buffers are flat and row-major,
/// so a reshape is only a new shape). In a size-generic kernel some extents are kernel parameters (`extents`,
/// one per dimension, null where the extent is the static one). A fused sum's tensor (`fused`) has its chunks
/// as its buffer.
struct GlobalTensor {
  Value buffer;
  SmallVector<int64_t> shape;
  SmallVector<Value> extents = {};
  std::optional<FusedSumSource> fused = std::nullopt;
};

/// A slice of a global tensor that is read when an op first uses it: `offsets` and valid `sizes` per source
/// dimension (index values; a size is never negative), the source dimensions that the tile's dimensions stand
/// for (`dims`, in order), and the value of the elements past the valid sizes (a tensor.pad's). A tile assembled
/// from slices of one tensor stacked along its first dimension (a key tile spanning several pages of a paged
/// cache) lists them as `pieces` of `pieceRows` rows each; its own fields are the first piece's.
struct GlobalTile {
  GlobalTensor source;
  SmallVector<Value> offsets, sizes;
  SmallVector<int64_t> dims;
  double pad = 0.0;
  std::vector<GlobalTile> pieces = {};
  int64_t pieceRows = 0;
};

/// Lowers the addressing of a tiled loop into a gpu.func under construction; the lowerings by layout derive
/// from it and lower the compute ops.
class TiledLoopLowering {
public:
  TiledLoopLowering(OpBuilder &b, Location loc) : b(b), loc(loc), im{b, loc} {}

  /// Binds the arguments of `kernel` (the outlined function whose tiled loop is `forall`) and their reshapes to
  /// the parameters of the gpu.func whose entry block is `entry`, recreates the function's top-level constants,
  /// and finds the arguments the loop's results are written to (through a reshape, for a single row). With
  /// `fusedSums`, a kiln.sum_splits of arguments before the loop (kiln-fuse-split-sums) is a global tensor whose
  /// elements the lowering computes (GlobalTensor::fused); without, it is an error. `what` names the lowering in
  /// errors.
  LogicalResult bindKernel(func::FuncOp kernel, scf::ForallOp forall, Block &entry, StringRef what,
                           bool fusedSums = false);

  /// Maps the induction variables of `forall` (constant bounds and steps) to this block's iteration: one block
  /// per iteration of a 1-D grid, the loop's last dimension fastest, or with `groupRows` > 1 its last two
  /// dimensions in groups of that many rows (iterations of the second-to-last), the rows of a group fastest.
  /// With `blocksPerIteration` > 1 each iteration is that many consecutive blocks (a thread-block cluster, whose
  /// rank clusterRank gives). Returns the number of blocks.
  FailureOr<int64_t> mapIterationToBlock(scf::ForallOp forall, StringRef what, int64_t groupRows = 1,
                                         int64_t blocksPerIteration = 1);
  /// This block's rank among the `blocks` consecutive blocks of its iteration (mapIterationToBlock).
  Value clusterRank(int64_t blocks);

  /// Makes the extent that loop induction variable `iv` runs up to the kernel value `extent`, a size-generic
  /// kernel's size parameter: mapIterationToBlock counts the loop's blocks from it.
  void setLoopExtent(Value iv, Value extent) { loopExtents[iv] = extent; }
  /// Says that the tiles along the dimensions whose extent is the kernel value `extent` are `tile` long: a slice
  /// or insertion along them covers min(tile, extent - offset) (tileSize), whatever constant the IR folded its
  /// clamp to for the sizes it was compiled for.
  void setExtentTile(Value extent, int64_t tile) { extentTiles[extent] = tile; }

  /// Lowers `op` when it computes addresses: index arithmetic (affine.min and affine.apply expanded, arith
  /// index ops and constants cloned), tensor.dim of a tile read from memory, the tensor.extract_slice and
  /// tensor.pad of a kernel buffer that make a GlobalTile, and the tensor.insert_slice of such tiles, one after
  /// the other along the rows of a tensor.empty, that assemble one from pieces. Returns whether it did; fails on
  /// a malformed read.
  FailureOr<bool> lowerAddressing(Operation *op, StringRef what);

protected:
  /// The kernel's value for an index of the loop body.
  Value index(Value value) { return mapping.lookupOrDefault(value); }
  /// The linear index in `global` of the element at `offsets` (one per dimension; may be empty for none) plus
  /// `along[i]` along dimension `dims[i]` (entries may be null).
  Value elementIndex(const GlobalTensor &global, ArrayRef<Value> offsets, ArrayRef<int64_t> dims,
                     ArrayRef<Value> along);
  /// A whole global tensor as a tile.
  GlobalTile wholeTile(const GlobalTensor &global);
  /// Where the insertion `op` writes into `destination`: its offsets and valid sizes (tileSize) per dimension of
  /// `destination`, and the dimensions that its source's dimensions stand for (`dims`).
  GlobalTile insertRegion(tensor::ParallelInsertSliceOp op, const GlobalTensor &destination);
  /// The extent of dimension `d` of `global` as the kernel reads it (a size parameter or a constant).
  Value extent(const GlobalTensor &global, int64_t d);
  /// The valid size along dimension `d` of `global` of a tile at `offset` whose size the IR computes as
  /// `irSize`: in a size-generic kernel, along a dimension of a kernel-value extent (setExtentTile), the tile
  /// (a whole tile where the compiled extent was a whole number of them, as the IR's constant says) clamped to
  /// the extent; otherwise `irSize`. Never negative.
  Value tileSize(const GlobalTensor &global, int64_t d, Value offset, Value irSize);

  OpBuilder &b;
  Location loc;
  IndexMath im;
  IRMapping mapping;
  DenseMap<Value, GlobalTensor> globals;
  DenseMap<Value, GlobalTile> globalTiles;
  /// Where the loop's first result goes (bindKernel), and each result in order.
  GlobalTensor output;
  SmallVector<GlobalTensor> outputs;
  /// The kernel-value extents of loop induction variables (setLoopExtent).
  DenseMap<Value, Value> loopExtents;
  /// The tile length along the dimensions of each kernel-value extent (setExtentTile).
  DenseMap<Value, int64_t> extentTiles;
};

/// Erases the ops of `func` whose results nothing uses and that have no effect (index arithmetic the lowering
/// recreated for a size the kernel reads another way): a size-generic kernel's text is then the same for every
/// size, as the kernel cache's key needs.
void eraseDeadOps(gpu::GPUFuncOp func);

/// Folds each f32 multiply or division by a constant whose operand is itself such a scaling (used nowhere else)
/// into one multiply by the product of the constants, and turns any other division by a constant into a
/// multiply by its reciprocal (ConstantScales.cpp): `(x * a) / b * c` costs one multiply.
void foldConstantScales(gpu::GPUFuncOp func);

/// `op` as (x, c) when it computes x * c (either operand order) or x / c with c an f32 constant that is a normal
/// number; c is then the factor it scales x by (1 / c for a division): a scaling that foldConstantScales and a
/// row maximum's scaling may move.
std::optional<std::pair<Value, double>> constantScalingOf(Operation *op);

/// Loads `count` elements of `buffer` from `at` (one vector load when `count` > 1; `at` must then be a multiple
/// of `count`), or `pad` where `valid` is false (the load then reads element 0, always in bounds).
SmallVector<Value> loadElements(OpBuilder &b, Location loc, IndexMath &im, Value buffer, Value at, int64_t count,
                                Value valid, double pad);

/// `count` consecutive elements of a fused sum (`source`, whose chunks are in `parts`) from row-major index
/// `at` (a multiple of `count`, as the sum's element count is), as the sum's own kernel computes and stores
/// them: the chunks added in order from zero (one `count`-wide load a chunk), the epilogue on each element's
/// epilogue operands, rounded to the sum's element type. Where `valid` (when given) is false nothing is read
/// and the element is `pad`.
SmallVector<Value> loadFusedSum(OpBuilder &b, Location loc, IndexMath &im, const FusedSumSource &source,
                                Value parts, Value at, int64_t count, Value valid = nullptr, double pad = 0.0);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_TILEDLOOPLOWERING_H
