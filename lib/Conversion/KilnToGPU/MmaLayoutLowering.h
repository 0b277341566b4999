//===- MmaLayoutLowering.h - Tiles in mma.sync fragments ---------*- C++ -*-===//
//
// The lowering of tiled loops whose tile values live in mma.sync accumulator fragments (#kiln.mma_layout): the
// matmul's (MmaLayoutLowering.cpp), and the attention's (AttentionLayoutLowering.cpp), which builds on it for
// its output tile, its epilogue and its stores.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_MMALAYOUTLOWERING_H
#define KILN_LIB_CONVERSION_KILNTOGPU_MMALAYOUTLOWERING_H

#include "TiledLoopLowering.h"

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir {
namespace kiln {
namespace gpukernel {

/// Floats by which the rows of an f32 staging tile are longer than the tile: 32 bytes keep every 8-column chunk
/// 16-byte aligned and spread the rows a warp writes at once over distinct banks.
constexpr int64_t kStagingRowPad = 8;

/// A shared-memory ring of one operand: `stages` slots of a [rows, columns] tile, rows `stride` elements apart
/// (or swizzled).
struct OperandRing {
  Value shared;
  int64_t rows, columns, stride, slotElements;
  /// Stored as 128-byte swizzled panels of 64 columns (what wgmma reads; `stride` unused) instead of padded rows.
  bool swizzled = false;
};

/// Lowers the body of one tiled mma_sync matmul into the gpu.func under construction. A tile value in the
/// accumulator layout is a list of registers, fragment by fragment (i over the warp's 16-row fragments, j over
/// its 8-column ones) and four per fragment (registerRow, registerColumn).
class MmaMatmulLowering : public TiledLoopLowering {
public:
  MmaMatmulLowering(OpBuilder &b, Location loc, ConfigAttr config, MmaLayoutAttr layout, int64_t threads)
      : MmaMatmulLowering(b, loc, config.getTile()[0], config.getTile()[1], config.getTile()[2],
                          config.getStages(), layout, threads) {
    groupRows = config.getGroup();
    clusterSplits = config.getKSplits();
  }
  /// The same for a [bm, bn] result tile, bk-deep k-tiles and `stages` ring slots.
  MmaMatmulLowering(OpBuilder &b, Location loc, int64_t bm, int64_t bn, int64_t bk, int64_t stages,
                    MmaLayoutAttr layout, int64_t threads)
      : TiledLoopLowering(b, loc), bm(bm), bn(bn), bk(bk), stages(stages), threads(threads),
        fragsM(bm / layout.getWarpsM() / 16), fragsN(bn / layout.getWarpsN() / 8) {
    tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value warp = im.div(tid, 32);
    lane = im.rem(tid, 32);
    wm0 = im.mul(im.div(warp, layout.getWarpsN()), bm / layout.getWarpsM());
    wn0 = im.mul(im.rem(warp, layout.getWarpsN()), bn / layout.getWarpsN());
  }

  /// The operand rings, placed by the lowering's caller (they size the kernel's shared memory).
  OperandRing ringA, ringB;

  /// Makes the kernel size-generic: M, N and K are the kernel values `sizes` (its last three parameters), and
  /// the code reads them wherever the matmul's extents enter (the loop bounds, the clamped tile sizes, the
  /// buffers' strides), so that matmuls that differ only in their sizes build the same kernel.
  void makeSizeGeneric(func::FuncOp kernel, scf::ForallOp forall, ValueRange sizes, bool transposedB);

  /// Lowers the forall's body for this block's iteration.
  LogicalResult lowerBody(scf::ForallOp forall);

  /// Lowers the tiled matmul `kernel` (its loop `forall`, its tile matmul `product`, if K left one) into the
  /// gpu.func whose entry block is `entry`: binds the arguments, makes the kernel size-generic in M, N and K (the
  /// kernel values `sizeParams`, whose compiled values `sizes` receives) where there is a product, maps the loop
  /// onto blocks and lowers the body. Returns the number of blocks.
  FailureOr<int64_t> lowerKernel(func::FuncOp kernel, scf::ForallOp forall, MatmulOp product, Block &entry,
                                 ValueRange sizeParams, SmallVectorImpl<int64_t> &sizes);

  virtual ~MmaMatmulLowering() = default;

protected:
  /// Lowers one op of the forall's body.
  virtual LogicalResult lowerOp(Operation *op);
  /// The K loop as a pipeline over the operand rings.
  virtual LogicalResult lowerContraction(scf::ForOp loop);
  /// The loop over the chunks of a tile's contraction (`kiln.cluster_split`): this block computes the chunk of its
  /// rank in the cluster, whose partial tile stands for the loop's result, a sum over the cluster
  /// (`clusterSummed`).
  LogicalResult lowerClusterSplit(scf::ForOp chunks);
  /// The tile matmul that the K loop `loop` adds to its one accumulator, checked (step BK; constant bounds, or
  /// a split matmul's chunk bounds).
  FailureOr<MatmulOp> contractionProduct(scf::ForOp loop);
  /// The chunk C of a split matmul's K loop, which runs from its lower bound to min(lower bound + C, K) (as
  /// kiln-tile writes it); nullopt for a loop of constant bounds.
  static std::optional<int64_t> kChunkOf(scf::ForOp loop);
  /// The first k of the K loop `loop` in this block.
  Value kStart(scf::ForOp loop);
  /// The number of k-tiles of the K loop `loop` (at least one: K = 0 reads one zero-filled tile).
  Value kTileCount(scf::ForOp loop);
  /// Lowers the addressing of the K loop's body for k-tile `kTile`: the [rows, columns] tiles of kernel buffers
  /// that the tile matmul `product` reads there.
  FailureOr<std::pair<GlobalTile, GlobalTile>> kTileOperands(scf::ForOp loop, MatmulOp product, Value kTile);
  /// Lowers the addressing of the K loop's body for k-tile `kTile` and copies the tile matmul's operands into
  /// ring slot `slot` (zeros for a k-tile past the last, `kTiles`); returns the cp.async group.
  FailureOr<Value> stageOperands(scf::ForOp loop, MatmulOp product, Value kTile, Value kTiles, Value slot);
  /// Copies `tile` (of `ring`'s shape) into slot `slot` of `ring`, or zeros where `enabled` is false, appending
  /// its cp.async tokens.
  void copyTile(const GlobalTile &tile, const OperandRing &ring, Value slot, Value enabled,
                SmallVectorImpl<Value> &tokens);
  /// A tile matmul outside a K loop (a contraction of one k-tile, whose loop folding removed): its operands
  /// copied into slot 0 and multiplied into the registers of the accumulator its one user, a kiln.add, adds.
  virtual LogicalResult lowerSingleProduct(MatmulOp product);
  /// The accumulator tile in registers that the single tile matmul `product` is added to, and that addition.
  FailureOr<std::pair<ArrayRef<Value>, AddOp>> singleProductAccumulator(MatmulOp product);
  /// The [rows, columns] tile of a kernel buffer that a tile matmul operand reads (a slice, or a whole buffer).
  std::optional<GlobalTile> operandTile(Value operand);
  /// The accumulator fragments (vector<4xf32>, as mma.sync takes them) of a tile's registers, and back.
  SmallVector<Value> fragmentsOf(ArrayRef<Value> tile);
  SmallVector<Value> registersOf(ValueRange fragments);
  /// Multiplies the operand tiles in slot `slot` into the accumulator fragments `accs` as the tile matmul
  /// `product` says (its transposed rhs, its fp32_precision).
  SmallVector<Value> multiplySlot(Value slot, ArrayRef<Value> accs, MatmulOp product);
  /// An epilogue: checked, and kept for the store, which runs its body on each register it stores (reading
  /// operand tiles element by element).
  LogicalResult lowerEpilogue(linalg::GenericOp op);
  /// The epilogue `op` of register `r`, computed at the builder's insertion point: its inputs are tiles in
  /// registers, row vectors (read with the (d0, d1) -> (d0) map) or tiles in memory, and its body may read its
  /// position (linalg.index). `frags` is the width of the tile in 8-column fragments per warp (default: the
  /// result's).
  FailureOr<Value> epilogueValue(linalg::GenericOp op, int64_t r, int64_t frags = 0);
  /// The epilogue `op` at the tile position `position` gives (row, column; built when first needed), its
  /// register-tile and row-vector inputs as `registerInput` gives them (null for an input read from memory).
  FailureOr<Value> epilogueAt(linalg::GenericOp op, llvm::function_ref<std::pair<Value, Value>()> position,
                              llvm::function_ref<Value(Value)> registerInput);
  /// The store of a tile's valid part into the kernel's output.
  virtual LogicalResult lowerInsert(tensor::ParallelInsertSliceOp op);
  /// The same staged through `staging` (shared memory free for it: [bm, bn + kStagingRowPad] f32): every thread
  /// writes its registers of the one register tile the stored values come from (the inserted tile, or the
  /// epilogue's one register input), then the block stores the tile in chunks of 8 consecutive columns of a
  /// row, the epilogue applied per element of a chunk, each chunk as one 16-byte-aligned store where rows are
  /// whole chunks, else in pairs or elements. The epilogue is built once per 8 elements rather than once per
  /// register and the stores are whole pieces of consecutive columns. False (nothing built) when the inserted
  /// tile is not of that form. A tile summed over a cluster (`clusterSummed`) is staged the same way by every
  /// block of the cluster; after a cluster barrier each block stores its share of the tile's rows, each chunk
  /// the sum, rank by rank, of the chunks in every block's staging tile (read through distributed shared
  /// memory); a second barrier keeps every block's staging tile alive until all are read.
  FailureOr<bool> lowerStagedInsert(tensor::ParallelInsertSliceOp op, Value staging);
  /// The element of a tile read from memory (a GlobalTile, a kernel buffer or a reshape of either) at tile
  /// position `indices`, its pad value where it lies past the valid part.
  FailureOr<Value> memoryElement(Value tile, ArrayRef<Value> indices, Operation *user);
  /// The memory tile `tile` stands for: a GlobalTile, or a whole kernel buffer; nothing for any other value.
  std::optional<GlobalTile> memoryTile(Value tile);
  /// `count` consecutive elements of `read` from tile position `indices` (16-byte aligned where count > 1): all
  /// read, or all `read`'s pad value when `indices` lies past the valid part.
  SmallVector<Value> tileElements(const GlobalTile &read, ArrayRef<Value> indices, int64_t count);
  /// The memory tile behind an epilogue input when a chunk of 8 consecutive columns of the epilogue reads 8
  /// consecutive, 16-byte-aligned elements of it, valid or padding as a whole: `map` takes the column to the
  /// tile's last dimension alone, which is the buffer's contiguous one, of a static extent that is a multiple
  /// of 8. Nothing for any other input (read element by element).
  std::optional<GlobalTile> chunkTile(Value input, AffineMap map);

  /// The tile row and column of register `r` of an accumulator-layout tile.
  Value registerRow(int64_t r) { return registerRow(r, fragsN); }
  Value registerColumn(int64_t r) { return registerColumn(r, fragsN); }
  int64_t numRegisters() const { return fragsM * fragsN * 4; }
  /// The same for a tile of `frags` 8-column fragments per warp (a tile of another width than the result's).
  Value registerRow(int64_t r, int64_t frags) {
    return im.add(wm0, im.add(im.div(lane, 4), (r / 4 / frags) * 16 + (r % 4 / 2) * 8));
  }
  Value registerColumn(int64_t r, int64_t frags) {
    return im.add(wn0, im.add(im.mul(im.rem(lane, 4), 2), (r / 4 % frags) * 8 + r % 2));
  }
  /// Which of this thread's rows (two per 16-row fragment) register `r` of a tile of `frags` fragments is in:
  /// the index into a row vector's values (`rowValues`).
  static int64_t rowSlot(int64_t r, int64_t frags) { return (r / 4 / frags) * 2 + (r % 4) / 2; }

  int64_t bm, bn, bk, stages, threads, fragsM, fragsN;
  /// The config's group: the output tiles' blocks run in groups of this many tile rows (mapIterationToBlock).
  int64_t groupRows = 1;
  /// The config's k_splits: the blocks of the cluster that computes one output tile, each a chunk of its
  /// contraction.
  int64_t clusterSplits = 1;
  /// Tiles whose registers hold this block's partial tile of a cluster-split contraction: the values are their
  /// sum over the cluster, which the store computes (lowerStagedInsert).
  llvm::DenseSet<Value> clusterSummed;
  /// Row vectors ([bm] tiles, one value per row, as row reductions give them): this thread's values, two per
  /// 16-row fragment (rowSlot), the same in the four lanes of a quad.
  DenseMap<Value, SmallVector<Value>> rowValues;
  Value tid, lane, wm0, wn0;
  /// K as the kernel reads it, in a size-generic kernel.
  Value sizeK;
  DenseMap<Value, SmallVector<Value>> registers;
  /// Tiles that are an epilogue of registers (and their valid parts), computed where they are stored.
  DenseMap<Value, linalg::GenericOp> epilogues;
};


/// The tiled loop of an outlined kernel function lowered by a #kiln.mma_layout.
struct MmaTiledLoop {
  scf::ForallOp forall;
  ConfigAttr config;
  MmaLayoutAttr layout;
};

/// The tiled loop of `kernel` with a `configLowering` config whose tile has `tileSizes` sizes (`what` names the
/// op in errors, `lowering` the lowering) and the #kiln.mma_layout kiln-assign-layouts gave it.
FailureOr<MmaTiledLoop> mmaTiledLoop(func::FuncOp kernel, size_t tileSizes, StringRef what, StringRef lowering,
                                     StringRef configLowering = "mma_sync");

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_MMALAYOUTLOWERING_H
