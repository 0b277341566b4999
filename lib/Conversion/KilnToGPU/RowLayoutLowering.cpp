//===- RowLayoutLowering.cpp - Row kernels lowered from their tiled IR -----===//
//
// A row kernel reaches the GPU as kiln-tile, kiln-decompose-rows and kiln-assign-layouts leave it: an
// scf.forall over blocks of rows whose body reads [R, D] tiles (tensor.extract_slice, tensor.pad), computes
// with f32 row reductions and elementwise ops that each carry a #kiln.row_layout, and inserts its valid rows
// into the result. This file maps that loop nest onto a gpu.func: the forall's iterations onto thread blocks,
// and each tile value onto registers by its layout, one lowering per op family: global tiles load in 16-byte
// runs (padding rows and columns past the edge), elementwise ops act on each register, a row reduction folds a
// thread's registers, then its warp by butterfly shuffles, then the row's warps through shared memory, and the
// inserted slice stores the valid part. Every tile is read from memory once and stays in registers.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"
#include "TiledLoopLowering.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

namespace {

/// A tile value in a thread's registers. Along the row: one register per column the thread holds, chunk by
/// chunk (`vector` columns each); otherwise one register for a value that is constant along the row (a
/// reduced row, a scalar).
struct RegisterTile {
  SmallVector<Value> registers;
  bool alongRow = false;
};

/// Lowers the body of one tiled row kernel into the gpu.func under construction.
class RowKernelLowering : public TiledLoopLowering {
public:
  RowKernelLowering(OpBuilder &b, Location loc, RowLayoutAttr layout, int64_t rowsPerBlock, Value sharedBytes)
      : TiledLoopLowering(b, loc), threadsPerRow(layout.getThreadsPerRow()), vector(layout.getVector()),
        rowsPerBlock(rowsPerBlock), sharedBytes(sharedBytes) {
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    row = im.div(tid, threadsPerRow);
    thread = im.rem(tid, threadsPerRow);
  }

  /// Lowers the forall's body for this block's iteration (mapIterationToBlock).
  LogicalResult lowerBody(scf::ForallOp forall);

private:
  /// The first column of this thread's chunk `chunk` in its row.
  Value chunkColumn(int64_t chunk) { return im.add(im.mul(thread, vector), chunk * threadsPerRow * vector); }
  /// How many chunks a row of `width` columns spans.
  int64_t chunksOf(int64_t width) const { return llvm::divideCeilSigned(width, threadsPerRow * vector); }

  /// Lowers one op of the loop body by its family.
  LogicalResult lowerOp(Operation *op);
  /// The registers of a tile value, loading a global tile or tensor, or materializing a constant, on first use.
  FailureOr<RegisterTile> registersOf(Value value, Operation *user);
  /// This thread's columns of a tile read from memory, padded past its valid rows and columns.
  RegisterTile loadTile(const GlobalTile &tile, int64_t width);
  /// This thread's columns of a [D] operand that broadcasts over the rows.
  RegisterTile loadRowVector(const GlobalTensor &global);
  /// An elementwise op or a cast, register by register (a value constant along the row broadcasts).
  LogicalResult lowerElementwise(Operation *op);
  /// A reduction along the row: registers, then the warp, then the row's warps.
  LogicalResult lowerReduce(ReduceOp op);
  /// The store of a tile's valid part into the kernel's output.
  LogicalResult lowerInsert(tensor::ParallelInsertSliceOp op);
  /// Combines every thread's `partial` over its row; every thread of the row gets the result.
  Value reduceAcrossRow(Value partial, lowering::Combiner combiner);

  int64_t threadsPerRow, vector, rowsPerBlock;
  Value sharedBytes, row, thread;
  DenseMap<Value, RegisterTile> tiles;
};

} // namespace

RegisterTile RowKernelLowering::loadTile(const GlobalTile &tile, int64_t width) {
  const GlobalTensor &source = tile.source;
  // Runs of `vector` columns load as one vector when they are contiguous and never straddle the valid edge.
  int64_t rowDim = tile.dims[0], columnDim = tile.dims[1];
  std::optional<int64_t> validColumns = getConstantIntValue(tile.sizes[columnDim]);
  bool contiguous = columnDim == static_cast<int64_t>(source.shape.size()) - 1;
  int64_t run = contiguous && validColumns && *validColumns % vector == 0 ? vector : 1;
  Value rowValid = im.lt(row, tile.sizes[rowDim]);
  RegisterTile result{{}, /*alongRow=*/true};
  for (int64_t chunk = 0, chunks = chunksOf(width); chunk < chunks; ++chunk) {
    Value first = chunkColumn(chunk);
    for (int64_t j = 0; j < vector; j += run) {
      Value column = im.add(first, j);
      Value valid = im.andi(rowValid, im.lt(column, tile.sizes[columnDim]));
      Value at = elementIndex(source, tile.offsets, {rowDim, columnDim}, {row, column});
      llvm::append_range(result.registers,
                         source.fused ? loadFusedSum(b, loc, im, *source.fused, source.buffer, at, run, valid, tile.pad)
                                      : loadElements(b, loc, im, source.buffer, at, run, valid, tile.pad));
    }
  }
  return result;
}

RegisterTile RowKernelLowering::loadRowVector(const GlobalTensor &global) {
  // A [D] operand (a norm's weight or bias) broadcast over the rows: every row's threads read the same columns.
  int64_t width = global.shape.back();
  int64_t run = width % vector == 0 ? vector : 1;
  RegisterTile result{{}, /*alongRow=*/true};
  for (int64_t chunk = 0, chunks = chunksOf(width); chunk < chunks; ++chunk) {
    Value first = chunkColumn(chunk);
    for (int64_t j = 0; j < vector; j += run) {
      Value column = im.add(first, j);
      llvm::append_range(result.registers, loadElements(b, loc, im, global.buffer, column, run,
                                                        im.lt(column, width), 0.0));
    }
  }
  return result;
}

FailureOr<RegisterTile> RowKernelLowering::registersOf(Value value, Operation *user) {
  if (auto it = tiles.find(value); it != tiles.end())
    return it->second;
  auto type = cast<RankedTensorType>(value.getType());
  RegisterTile result;
  if (auto it = globalTiles.find(value); it != globalTiles.end()) {
    if (it->second.dims.size() != 2)
      return user->emitOpError() << "row-layout lowering: a tile read from memory must be [rows, columns]";
    result = loadTile(it->second, type.getShape().back());
  } else if (auto constant = value.getDefiningOp<ConstantOp>()) {
    auto elements = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!elements)
      return user->emitOpError() << "row-layout lowering: only splat constants are held in registers";
    result.registers.push_back(arith::ConstantOp::create(b, loc, cast<TypedAttr>(elements.getSplatValue<Attribute>())));
  } else if (auto it = globals.find(value); it != globals.end()) {
    const GlobalTensor &global = it->second;
    if (global.fused && type.getRank() != 2)
      return user->emitOpError() << "row-layout lowering: a split matmul's sum is read only as row tiles";
    if (type.getRank() == 0)
      result.registers.push_back(memref::LoadOp::create(b, loc, global.buffer, ValueRange{im.c(0)}));
    else if (type.getRank() == 1)
      result = loadRowVector(global);
    else if (type.getRank() == 2) // a whole [rows, columns] buffer, the tile of a one-block loop
      result = loadTile(wholeTile(global), type.getShape().back());
    else
      return user->emitOpError() << "row-layout lowering: operand of type " << type
                                 << " is neither a tile, a row vector nor a scalar";
  } else {
    return user->emitOpError() << "row-layout lowering: an operand is defined by an op this lowering does not take";
  }
  tiles[value] = result;
  return result;
}

LogicalResult RowKernelLowering::lowerElementwise(Operation *op) {
  SmallVector<RegisterTile> operands;
  bool alongRow = false;
  size_t count = 1;
  for (Value operand : op->getOperands()) {
    FailureOr<RegisterTile> registers = registersOf(operand, op);
    if (failed(registers))
      return failure();
    alongRow |= registers->alongRow;
    count = std::max(count, registers->registers.size());
    operands.push_back(*registers);
  }
  Type element = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  RegisterTile result{{}, alongRow};
  for (size_t i = 0; i < count; ++i) {
    SmallVector<Value> args;
    for (const RegisterTile &operand : operands)
      args.push_back(lowering::widen(b, loc, operand.alongRow ? operand.registers[i] : operand.registers[0]));
    Value value = isa<CastOp>(op) ? args[0] : lowering::buildScalarFormula(b, loc, op, args);
    if (!value)
      return op->emitOpError() << "row-layout lowering: no elementwise formula for this op";
    result.registers.push_back(lowering::narrow(b, loc, value, element));
  }
  tiles[op->getResult(0)] = result;
  return success();
}

/// Folds `value` over the `lanes` lanes (a power of two up to 32) of each aligned group of its warp by butterfly
/// shuffles: every lane of the group ends with the group's value.
static Value shuffleFold(OpBuilder &b, Location loc, Value value, int64_t lanes, lowering::Combiner combiner) {
  for (int32_t offset = static_cast<int32_t>(lanes) / 2; offset >= 1; offset /= 2)
    value = lowering::combine(
        b, loc, combiner, value,
        gpu::ShuffleOp::create(b, loc, value, offset, 32, gpu::ShuffleMode::XOR).getShuffleResult());
  return value;
}

Value RowKernelLowering::reduceAcrossRow(Value partial, lowering::Combiner combiner) {
  // A row of fewer than 32 threads is an aligned group of lanes of one warp.
  partial = shuffleFold(b, loc, partial, std::min<int64_t>(threadsPerRow, 32), combiner);
  int64_t warpsPerRow = threadsPerRow / 32;
  if (warpsPerRow <= 1)
    return partial;
  // Each warp's first lane posts its partial. Every warp then folds its row's posts: lane l reads post
  // l % warpsPerRow and the warp shuffles them together (a power-of-two count), or each thread reads them all in
  // turn. The second barrier keeps the next reduction's posts from overwriting partials still being read.
  Value partials = sharedView(b, loc, sharedBytes, 0, rowsPerBlock * warpsPerRow, b.getF32Type());
  Value warp = im.div(thread, 32), rowPosts = im.mul(row, warpsPerRow);
  scf::IfOp::create(b, loc, im.lt(im.rem(thread, 32), 1), [&](OpBuilder &post, Location) {
    memref::StoreOp::create(post, loc, partial, partials, ValueRange{im.add(rowPosts, warp)});
    scf::YieldOp::create(post, loc);
  });
  gpu::BarrierOp::create(b, loc);
  Value folded;
  if (llvm::isPowerOf2_64(warpsPerRow)) {
    Value post = im.add(rowPosts, im.rem(im.rem(thread, 32), warpsPerRow));
    folded = shuffleFold(b, loc, memref::LoadOp::create(b, loc, partials, ValueRange{post}), warpsPerRow, combiner);
  } else {
    folded = memref::LoadOp::create(b, loc, partials, ValueRange{rowPosts});
    for (int64_t w = 1; w < warpsPerRow; ++w)
      folded = lowering::combine(b, loc, combiner, folded,
                                 memref::LoadOp::create(b, loc, partials, ValueRange{im.add(rowPosts, w)}));
  }
  gpu::BarrierOp::create(b, loc);
  return folded;
}

LogicalResult RowKernelLowering::lowerReduce(ReduceOp op) {
  RankedTensorType input = op.getInput().getType();
  if (op.getAxes().size() != 1 || op.getAxes()[0] != input.getRank() - 1 || input.getRank() != 2)
    return op.emitOpError() << "row-layout lowering: only a reduction of a [rows, columns] tile along its row";
  FailureOr<RegisterTile> registers = registersOf(op.getInput(), op);
  if (failed(registers))
    return failure();
  if (!registers->alongRow)
    return op.emitOpError() << "row-layout lowering: the reduced tile is constant along its row";
  lowering::Combiner combiner = op.getKind() == ReduceKind::max   ? lowering::Combiner::Max
                                : op.getKind() == ReduceKind::min ? lowering::Combiner::Min
                                                                  : lowering::Combiner::Sum;
  const double inf = std::numeric_limits<double>::infinity();
  double identity = combiner == lowering::Combiner::Max ? -inf : combiner == lowering::Combiner::Min ? inf : 0.0;
  Value identityValue = lowering::floatConstant(b, loc, b.getF32Type(), identity);
  int64_t width = input.getShape().back();
  // Registers of columns past the row's end hold padding, which must not take part.
  Value partial = identityValue;
  for (auto [i, value] : llvm::enumerate(registers->registers)) {
    int64_t chunk = i / vector, j = i % vector;
    Value x = lowering::widen(b, loc, value);
    Value inside = im.lt(im.add(chunkColumn(chunk), j), width);
    partial = lowering::combine(b, loc, combiner, partial, arith::SelectOp::create(b, loc, inside, x, identityValue));
  }
  Value total = reduceAcrossRow(partial, combiner);
  if (op.getKind() == ReduceKind::mean)
    total = arith::DivFOp::create(b, loc, total, lowering::floatConstant(b, loc, b.getF32Type(), width));
  tiles[op.getResult()] = RegisterTile{{lowering::narrow(b, loc, total, op.getType().getElementType())}, false};
  return success();
}

LogicalResult RowKernelLowering::lowerInsert(tensor::ParallelInsertSliceOp op) {
  FailureOr<RegisterTile> registers = registersOf(op.getSource(), op);
  if (failed(registers))
    return failure();
  SmallVector<Value> offsets, sizes;
  for (OpFoldResult offset : op.getMixedOffsets())
    offsets.push_back(getValueOrCreateConstantIndexOp(b, loc, offset));
  for (OpFoldResult size : op.getMixedSizes())
    sizes.push_back(getValueOrCreateConstantIndexOp(b, loc, size));
  for (Value &value : offsets)
    value = index(value);
  for (Value &value : sizes)
    value = index(value);
  llvm::SmallBitVector dropped = op.getDroppedDims();
  SmallVector<int64_t> kept;
  for (int64_t d = 0, rank = output.shape.size(); d < rank; ++d)
    if (!dropped.test(d))
      kept.push_back(d);
  Type element = cast<MemRefType>(output.buffer.getType()).getElementType();
  Value rowValid = im.lt(row, sizes[kept[0]]);
  auto storeIf = [&](Value valid, Value at, ArrayRef<Value> values) {
    scf::IfOp::create(b, loc, valid, [&](OpBuilder &then, Location) {
      SmallVector<Value> narrowed;
      for (Value value : values)
        narrowed.push_back(lowering::narrow(then, loc, lowering::widen(then, loc, value), element));
      if (narrowed.size() == 1) {
        memref::StoreOp::create(then, loc, narrowed[0], output.buffer, ValueRange{at});
      } else {
        auto type = VectorType::get({static_cast<int64_t>(narrowed.size())}, element);
        Value packed = vector::FromElementsOp::create(then, loc, type, narrowed);
        vector::StoreOp::create(then, loc, packed, output.buffer, ValueRange{at}, /*nontemporal=*/false,
                                llvm::MaybeAlign(narrowed.size() * element.getIntOrFloatBitWidth() / 8));
      }
      scf::YieldOp::create(then, loc);
    });
  };
  if (!registers->alongRow) {
    // One value per row ([R] or [R, 1]): the row's first thread stores it.
    Value at = elementIndex(output, offsets, {kept[0]}, {row});
    storeIf(im.andi(rowValid, im.lt(thread, 1)), at, registers->registers[0]);
    return success();
  }
  if (kept.size() != 2)
    return op.emitOpError() << "row-layout lowering: a row tile must be inserted as [rows, columns]";
  auto type = cast<RankedTensorType>(op.getSource().getType());
  int64_t width = type.getShape().back(), columnDim = kept[1];
  std::optional<int64_t> validColumns = getConstantIntValue(sizes[columnDim]);
  bool contiguous = columnDim == static_cast<int64_t>(output.shape.size()) - 1;
  int64_t run = contiguous && validColumns && *validColumns % vector == 0 ? vector : 1;
  for (int64_t chunk = 0, chunks = chunksOf(width); chunk < chunks; ++chunk) {
    Value first = chunkColumn(chunk);
    for (int64_t j = 0; j < vector; j += run) {
      Value column = im.add(first, j);
      Value valid = im.andi(rowValid, im.lt(column, sizes[columnDim]));
      Value at = elementIndex(output, offsets, {kept[0], columnDim}, {row, column});
      ArrayRef<Value> values = ArrayRef<Value>(registers->registers).slice(chunk * vector + j, run);
      storeIf(valid, at, values);
    }
  }
  return success();
}

LogicalResult RowKernelLowering::lowerOp(Operation *op) {
  // The valid part of a register tile is the same registers.
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    if (auto it = tiles.find(slice.getSource()); it != tiles.end()) {
      auto copied = it->second;
      tiles[slice.getResult()] = std::move(copied);
      return success();
    }
  }
  // Index arithmetic (tile offsets and clamped sizes) is recomputed in the kernel; tiles of kernel buffers are
  // loaded when an op first uses them.
  FailureOr<bool> addressing = lowerAddressing(op, "row-layout lowering");
  if (failed(addressing))
    return failure();
  if (*addressing)
    return success();
  if (isa<tensor::ExtractSliceOp>(op))
    return op->emitOpError() << "row-layout lowering: a slice must take a tile of a kernel buffer";
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return lowerReduce(reduce);
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    // Within a tile a reshape only drops or adds the unit column of a reduced row.
    FailureOr<RegisterTile> registers = registersOf(reshape.getInput(), op);
    if (failed(registers) || registers->alongRow)
      return op->emitOpError() << "row-layout lowering: only a reduced row may be reshaped within a tile";
    tiles[reshape.getResult()] = *registers;
    return success();
  }
  if (isa<ConstantOp>(op))
    return success(); // held in registers when an op uses it
  if (isa<CastOp>(op) || lowering::hasFloatFormula(op))
    return lowerElementwise(op);
  return op->emitOpError() << "row-layout lowering: no lowering for this op in a row kernel";
}

LogicalResult RowKernelLowering::lowerBody(scf::ForallOp forall) {
  for (Operation &op : forall.getBody()->without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(&op);
    if (!insert || insert.getDest() != forall.getRegionIterArgs()[0])
      return op.emitOpError() << "row-layout lowering: a row kernel inserts its tile into its one result";
    if (failed(lowerInsert(insert)))
      return failure();
  }
  return success();
}

FailureOr<KernelLaunch> kiln::lowerRowKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                             StringRef name) {
  auto forall = dyn_cast_or_null<scf::ForallOp>(kernelOpOf(kernel));
  ConfigAttr config = forall ? getConfig(forall) : ConfigAttr();
  if (!config || config.getLowering() != "rows")
    return kernel.emitError() << "row-layout lowering: no tiled loop with a \"rows\" config in the kernel";
  RowLayoutAttr layout;
  forall.getBody()->walk([&](Operation *op) {
    if (auto attr = op->getAttrOfType<RowLayoutAttr>(kLayoutAttrName))
      layout = attr;
  });
  if (!layout)
    return forall.emitError() << "row-layout lowering: no #kiln.row_layout in the loop (run kiln-assign-layouts)";
  int64_t rowsPerBlock = config.getTile()[0], threads = rowsPerBlock * layout.getThreadsPerRow();
  if (threads != config.getWarps() * 32)
    return forall.emitError() << "row-layout lowering: " << rowsPerBlock << " rows of "
                              << layout.getThreadsPerRow() << " threads do not make the config's "
                              << config.getWarps() << " warps";

  int64_t warpsPerRow = layout.getThreadsPerRow() / 32;
  int64_t sharedBytes = warpsPerRow > 1 ? rowsPerBlock * warpsPerRow * 4 : 0;
  SmallVector<RankedTensorType> buffers;
  for (Type type : kernel.getArgumentTypes())
    buffers.push_back(cast<RankedTensorType>(type));
  Location loc = forall.getLoc();
  OpBuilder::InsertionGuard guard(builder);
  KernelFunction gpuKernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes);
  RowKernelLowering lowering(builder, loc, layout, rowsPerBlock, gpuKernel.sharedBytes);
  if (failed(lowering.bindKernel(kernel, forall, gpuKernel.func.getBody().front(), "row-layout lowering",
                                 /*fusedSums=*/true)))
    return failure();
  FailureOr<int64_t> blocks = lowering.mapIterationToBlock(forall, "row-layout lowering");
  if (failed(blocks) || failed(lowering.lowerBody(forall)))
    return failure();
  gpu::ReturnOp::create(builder, loc);
  return KernelLaunch{{*blocks, 1, 1}, {threads, 1, 1}, sharedBytes};
}
