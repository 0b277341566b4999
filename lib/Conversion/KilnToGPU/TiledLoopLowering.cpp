//===- TiledLoopLowering.cpp - What the lowerings of tiled kernels share ---===//
//
// Kernel arguments and views, the block's iteration, index arithmetic and tile reads of a tiled loop, for the
// lowerings by layout (see TiledLoopLowering.h).
//
//===----------------------------------------------------------------------===//

#include "TiledLoopLowering.h"

#include "KernelBuilding.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

Value TiledLoopLowering::extent(const GlobalTensor &global, int64_t d) {
  if (d < static_cast<int64_t>(global.extents.size()) && global.extents[d])
    return global.extents[d];
  return im.c(global.shape[d]);
}

Value TiledLoopLowering::tileSize(const GlobalTensor &global, int64_t d, Value offset, Value irSize) {
  Value dynamic = d < static_cast<int64_t>(global.extents.size()) ? global.extents[d] : Value();
  auto tile = dynamic ? extentTiles.find(dynamic) : extentTiles.end();
  if (tile == extentTiles.end()) {
    std::optional<int64_t> known = IndexMath::known(irSize);
    return known ? im.c(std::max<int64_t>(*known, 0)) : arith::MaxSIOp::create(b, loc, irSize, im.c(0)).getResult();
  }
  if (global.shape[d] % tile->second == 0)
    return im.c(tile->second);
  Value left = arith::MaxSIOp::create(b, loc, im.sub(dynamic, offset), im.c(0));
  return arith::MinSIOp::create(b, loc, left, im.c(tile->second));
}

LogicalResult TiledLoopLowering::bindKernel(func::FuncOp kernel, scf::ForallOp forall, Block &entry,
                                            StringRef what, bool fusedSums) {
  if (forall.getNumResults() == 0)
    return forall.emitError() << what << ": a tiled kernel has a result";
  DenseMap<Value, GlobalTensor> views;
  outputs.assign(forall.getNumResults(), GlobalTensor{});
  for (auto [argument, parameter] : llvm::zip(kernel.getArguments(), entry.getArguments()))
    views[argument] = GlobalTensor{parameter, llvm::to_vector(cast<RankedTensorType>(argument.getType()).getShape())};
  for (Operation &op : kernel.getBody().front()) {
    if (isa<arith::ConstantOp>(&op)) {
      b.clone(op, mapping);
    } else if (auto reshape = dyn_cast<ReshapeOp>(&op)) {
      auto source = views.find(reshape.getInput());
      if (source != views.end())
        views[reshape.getResult()] = GlobalTensor{source->second.buffer, llvm::to_vector(reshape.getType().getShape()),
                                                  {}, source->second.fused};
    } else if (auto sum = dyn_cast<SumSplitsOp>(&op)) {
      // A split matmul's sum moved in by kiln-fuse-split-sums: of whole kernel buffers, computed where read.
      auto wholeBuffer = [&](Value value) -> Value {
        auto it = views.find(value);
        return it != views.end() && !it->second.fused && it->second.extents.empty() ? it->second.buffer : Value();
      };
      FusedSumSource source{sum, {}};
      Value parts = wholeBuffer(sum.getParts());
      for (Value operand : sum.getEpilogueOperands())
        source.epilogue.push_back(wholeBuffer(operand));
      if (!fusedSums || !parts || llvm::is_contained(source.epilogue, Value()))
        return sum.emitOpError() << what << ": cannot read a split matmul's sum computed in the kernel";
      views[sum.getResult()] = GlobalTensor{parts, llvm::to_vector(sum.getType().getShape()), {}, source};
    } else if (auto write = dyn_cast<bufferization::MaterializeInDestinationOp>(&op)) {
      Value written = write.getSource();
      if (auto reshape = written.getDefiningOp<ReshapeOp>())
        written = reshape.getInput();
      auto destination = views.find(write.getDest());
      for (OpResult result : forall.getResults())
        if (written == result && destination != views.end())
          outputs[result.getResultNumber()] =
              GlobalTensor{destination->second.buffer,
                           llvm::to_vector(cast<RankedTensorType>(result.getType()).getShape())};
    }
  }
  for (const GlobalTensor &written : outputs)
    if (!written.buffer)
      return forall.emitError() << what << ": the loop's result is not written to a kernel argument";
  output = outputs[0];
  for (auto &[value, global] : views)
    globals[value] = global;
  return success();
}

Value TiledLoopLowering::clusterRank(int64_t blocks) {
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  return arith::RemUIOp::create(b, loc, block, im.c(blocks));
}

FailureOr<int64_t> TiledLoopLowering::mapIterationToBlock(scf::ForallOp forall, StringRef what,
                                                           int64_t groupRows, int64_t blocksPerIteration) {
  SmallVector<int64_t> lbs, counts, steps;
  for (auto [lb, ub, step] : llvm::zip(forall.getMixedLowerBound(), forall.getMixedUpperBound(),
                                       forall.getMixedStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb), u = getConstantIntValue(ub), s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return forall.emitError() << what << ": the loop needs constant bounds and steps";
    lbs.push_back(*l);
    steps.push_back(*s);
    counts.push_back(std::max<int64_t>(0, llvm::divideCeilSigned(*u - *l, *s)));
  }
  int64_t blocks = 1;
  for (int64_t count : counts)
    blocks *= count;
  // A dimension whose extent is a kernel value counts its iterations from it (the grid is the launch's).
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  if (blocksPerIteration > 1)
    block = arith::DivUIOp::create(b, loc, block, im.c(blocksPerIteration));
  SmallVector<Value> ivs(counts.size());
  SmallVector<Value> inductionVars = forall.getInductionVars();
  auto countOf = [&](int64_t d) {
    auto known = loopExtents.find(inductionVars[d]);
    if (known == loopExtents.end())
      return im.c(counts[d]);
    return im.div(im.add(im.sub(known->second, lbs[d]), steps[d] - 1), steps[d]);
  };
  int64_t rank = counts.size(), last = rank - 1;
  if (groupRows > 1 && rank >= 2) {
    // The last two dimensions in groups of `groupRows` rows, the rows of a group fastest: the blocks that run at
    // once share a few rows' tiles of one operand and a few columns' of the other.
    Value rows = countOf(rank - 2), columns = countOf(last);
    // Leading dimensions (a batch) take the block index over one slice's tiles.
    Value inner = block;
    if (rank > 2) {
      Value tiles = im.mul(rows, columns);
      inner = arith::RemUIOp::create(b, loc, block, tiles);
      block = arith::DivUIOp::create(b, loc, block, tiles);
    }
    Value perGroup = im.mul(columns, groupRows);
    Value firstRow = im.mul(arith::DivUIOp::create(b, loc, inner, perGroup).getResult(), groupRows);
    Value groupSize = im.min(im.sub(rows, firstRow), im.c(groupRows));
    Value within = arith::RemUIOp::create(b, loc, inner, perGroup);
    Value row = im.add(firstRow, arith::RemUIOp::create(b, loc, within, groupSize).getResult());
    Value column = arith::DivUIOp::create(b, loc, within, groupSize);
    ivs[rank - 2] = im.add(im.mul(row, steps[rank - 2]), lbs[rank - 2]);
    ivs[last] = im.add(im.mul(column, steps[last]), lbs[last]);
    last = rank - 3;
  }
  for (int64_t d = last; d >= 0; --d) {
    if (!loopExtents.count(inductionVars[d])) {
      // The outermost dimension takes what is left of the block index whole: the kernel then does not depend on
      // its count (the chunks of a split attention, however many the keys make, share one kernel).
      Value position = d == 0 ? block : im.rem(block, counts[d]);
      ivs[d] = im.add(im.mul(position, steps[d]), lbs[d]);
      block = im.div(block, counts[d]);
      continue;
    }
    Value count = countOf(d);
    Value position = d == 0 ? block : arith::RemUIOp::create(b, loc, block, count).getResult();
    ivs[d] = im.add(im.mul(position, steps[d]), lbs[d]);
    block = arith::DivUIOp::create(b, loc, block, count);
  }
  mapping.map(inductionVars, ivs);
  return blocks * blocksPerIteration;
}

Value TiledLoopLowering::elementIndex(const GlobalTensor &global, ArrayRef<Value> offsets, ArrayRef<int64_t> dims,
                                      ArrayRef<Value> along) {
  // Row-major strides, from the extents the kernel reads.
  SmallVector<Value> strides(global.shape.size());
  Value stride = im.c(1);
  for (int64_t d = static_cast<int64_t>(global.shape.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride = im.mul(stride, extent(global, d));
  }
  Value at = im.c(0);
  for (auto [d, offset] : llvm::enumerate(offsets))
    at = im.add(at, im.mul(offset, strides[d]));
  for (auto [d, value] : llvm::zip(dims, along))
    if (value)
      at = im.add(at, im.mul(value, strides[d]));
  return at;
}

GlobalTile TiledLoopLowering::wholeTile(const GlobalTensor &global) {
  GlobalTile tile{global, {}, {}, {}, 0.0};
  for (int64_t d = 0, rank = global.shape.size(); d < rank; ++d) {
    tile.offsets.push_back(im.c(0));
    tile.sizes.push_back(extent(global, d));
    tile.dims.push_back(d);
  }
  return tile;
}

GlobalTile TiledLoopLowering::insertRegion(tensor::ParallelInsertSliceOp op, const GlobalTensor &destination) {
  GlobalTile region{destination, {}, {}, {}, 0.0};
  for (OpFoldResult offset : op.getMixedOffsets())
    region.offsets.push_back(index(getValueOrCreateConstantIndexOp(b, loc, offset)));
  for (auto [d, size] : llvm::enumerate(op.getMixedSizes()))
    region.sizes.push_back(
        tileSize(destination, d, region.offsets[d], index(getValueOrCreateConstantIndexOp(b, loc, size))));
  llvm::SmallBitVector dropped = op.getDroppedDims();
  for (int64_t d = 0, rank = destination.shape.size(); d < rank; ++d)
    if (!dropped.test(d))
      region.dims.push_back(d);
  return region;
}

FailureOr<bool> TiledLoopLowering::lowerAddressing(Operation *op, StringRef what) {
  if (isa<affine::AffineMinOp, affine::AffineApplyOp>(op)) {
    // The map's results in arith; a min takes the least of them (signed: a clamped size past the end of its
    // dimension is negative), an apply has one.
    auto map = isa<affine::AffineMinOp>(op) ? cast<affine::AffineMinOp>(op).getMap()
                                            : cast<affine::AffineApplyOp>(op).getMap();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(index(operand));
    std::optional<SmallVector<Value, 8>> results = affine::expandAffineMap(b, loc, map, operands);
    if (!results)
      return op->emitOpError() << what << ": cannot expand this affine map";
    Value value = (*results)[0];
    for (Value other : llvm::drop_begin(*results))
      value = arith::MinSIOp::create(b, loc, value, other);
    mapping.map(op->getResult(0), value);
    return true;
  }
  if (auto dim = dyn_cast<tensor::DimOp>(op)) {
    // The extent of a tile read from memory (a tensor.pad's high padding is computed from it).
    auto tile = globalTiles.find(dim.getSource());
    std::optional<int64_t> which = dim.getConstantIndex();
    if (tile == globalTiles.end() || !which || *which >= static_cast<int64_t>(tile->second.dims.size()))
      return op->emitOpError() << what << ": only the extent of a tile read from memory is known";
    mapping.map(dim.getResult(), tile->second.sizes[tile->second.dims[*which]]);
    return true;
  }
  if (isa<arith::ConstantOp>(op) || (isa<arith::ArithDialect>(op->getDialect()) &&
                                     llvm::all_of(op->getResultTypes(), [](Type t) { return t.isIndex(); }))) {
    b.clone(*op, mapping);
    return true;
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto global = globals.find(slice.getSource());
    if (global == globals.end())
      return false;
    GlobalTile tile{global->second, {}, {}, {}, 0.0};
    for (OpFoldResult offset : slice.getMixedOffsets())
      tile.offsets.push_back(index(getValueOrCreateConstantIndexOp(b, loc, offset)));
    // A clamped size is negative for a tile past the end (a prefetch beyond the last k-tile): nothing is valid.
    for (auto [d, size] : llvm::enumerate(slice.getMixedSizes()))
      tile.sizes.push_back(
          tileSize(global->second, d, tile.offsets[d], index(getValueOrCreateConstantIndexOp(b, loc, size))));
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    for (int64_t d = 0, rank = tile.offsets.size(); d < rank; ++d)
      if (!dropped.test(d))
        tile.dims.push_back(d);
    globalTiles[slice.getResult()] = tile;
    return true;
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    auto piece = globalTiles.find(insert.getSource());
    if (piece == globalTiles.end())
      return false;
    // Pieces of equal rows, whole, stacked in order from row 0 of an empty tile.
    auto assembled = globalTiles.find(insert.getDest());
    GlobalTile tile = assembled != globalTiles.end() ? assembled->second : GlobalTile{};
    int64_t rows = insert.getSourceType().getDimSize(0);
    std::optional<int64_t> row = getConstantIntValue(insert.getMixedOffsets()[0]),
                           column = getConstantIntValue(insert.getMixedOffsets()[1]);
    bool fresh = assembled == globalTiles.end() && insert.getDest().getDefiningOp<tensor::EmptyOp>();
    if ((!fresh && assembled == globalTiles.end()) || insert.getSourceType().getRank() != 2 || !row ||
        *row != static_cast<int64_t>(tile.pieces.size()) * rows || column != 0 ||
        insert.getSourceType().getDimSize(1) != insert.getDestType().getDimSize(1) ||
        (!tile.pieces.empty() && (tile.pieceRows != rows || tile.source.buffer != piece->second.source.buffer)))
      return op->emitOpError() << what << ": a tile is assembled from whole row blocks of equal height, in order, "
                                          "of one kernel buffer";
    if (tile.pieces.empty()) {
      tile = piece->second;
      tile.pieceRows = rows;
    }
    tile.pieces.push_back(piece->second);
    globalTiles[insert.getResult()] = tile;
    return true;
  }
  if (auto pad = dyn_cast<tensor::PadOp>(op)) {
    if (auto global = globals.find(pad.getSource()); global != globals.end())
      globalTiles[pad.getSource()] = wholeTile(global->second);
    auto it = globalTiles.find(pad.getSource());
    APFloat value(0.0);
    Value padValue = pad.getConstantPaddingValue();
    if (it == globalTiles.end() || !padValue || !matchPattern(padValue, m_ConstantFloat(&value)))
      return op->emitOpError() << what << ": only a tile read from a kernel buffer may be padded, with a constant";
    GlobalTile tile = it->second;
    tile.pad = value.convertToDouble();
    globalTiles[pad.getResult()] = tile;
    return true;
  }
  return false;
}

void gpukernel::eraseDeadOps(gpu::GPUFuncOp func) {
  // Users come after what they use: the ops without regions in reverse order.
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (op->getNumRegions() == 0)
      ops.push_back(op);
  });
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

SmallVector<Value> gpukernel::loadElements(OpBuilder &b, Location loc, IndexMath &im, Value buffer, Value at,
                                           int64_t count, Value valid, double pad) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  Value safe = im.select(valid, at, im.c(0));
  // An integer buffer (an attention mod's table of ids) pads with the integer value.
  Value padValue = isa<FloatType>(element)
                       ? lowering::floatConstant(b, loc, element, pad)
                       : arith::ConstantOp::create(b, loc, b.getIntegerAttr(element, static_cast<int64_t>(pad)))
                             .getResult();
  SmallVector<Value> values;
  if (count == 1) {
    values.push_back(memref::LoadOp::create(b, loc, buffer, ValueRange{safe}));
  } else {
    auto type = VectorType::get({count}, element);
    Value loaded = vector::LoadOp::create(b, loc, type, buffer, ValueRange{safe}, /*nontemporal=*/false,
                                          llvm::MaybeAlign(count * element.getIntOrFloatBitWidth() / 8));
    for (int64_t j = 0; j < count; ++j)
      values.push_back(vector::ExtractOp::create(b, loc, loaded, ArrayRef<int64_t>{j}));
  }
  for (Value &value : values)
    value = arith::SelectOp::create(b, loc, valid, value, padValue);
  return values;
}

SmallVector<Value> gpukernel::loadFusedSum(OpBuilder &b, Location loc, IndexMath &im, const FusedSumSource &source,
                                           Value parts, Value at, int64_t count, Value valid, double pad) {
  SumSplitsOp sum = source.sum;
  RankedTensorType result = sum.getType();
  int64_t chunks = sum.getParts().getType().getDimSize(0), elements = result.getNumElements();
  // `count` elements of `buffer` from `from` as stored (a vector load when more than one), guarded by `valid`.
  auto load = [&](Value buffer, Value from, int64_t width) -> SmallVector<Value> {
    if (valid)
      return loadElements(b, loc, im, buffer, from, width, valid, 0.0);
    if (width == 1)
      return {memref::LoadOp::create(b, loc, buffer, ValueRange{from})};
    Type element = cast<MemRefType>(buffer.getType()).getElementType();
    Value loaded = vector::LoadOp::create(b, loc, VectorType::get({width}, element), buffer, ValueRange{from},
                                          /*nontemporal=*/false, llvm::MaybeAlign(16));
    SmallVector<Value> values;
    for (int64_t i = 0; i < width; ++i)
      values.push_back(vector::ExtractOp::create(b, loc, loaded, ArrayRef<int64_t>{i}));
    return values;
  };
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  auto loop = scf::ForOp::create(
      b, loc, im.c(0), im.c(chunks), im.c(1), SmallVector<Value>(count, zero),
      [&](OpBuilder &nested, Location, Value n, ValueRange acc) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        SmallVector<Value> next;
        for (auto [sum, part] : llvm::zip(acc, load(parts, im.add(im.mul(n, elements), at), count)))
          next.push_back(arith::AddFOp::create(b, loc, sum, part));
        scf::YieldOp::create(b, loc, next);
      });
  SmallVector<Value> values;
  Type element = result.getElementType();
  for (int64_t i = 0; i < count; ++i) {
    Value value = loop.getResult(i);
    if (sum.hasEpilogue()) {
      ArrayRef<int64_t> shape = result.getShape();
      SmallVector<Value> index = delinearize(im, shape, i == 0 ? at : im.add(at, i));
      SmallVector<Value> args{value};
      for (auto [operand, buffer] : llvm::zip(sum.getEpilogueOperands(), source.epilogue)) {
        ArrayRef<int64_t> operandShape = cast<RankedTensorType>(operand.getType()).getShape();
        args.push_back(lowering::widen(b, loc, load(buffer, broadcastLinearIndex(im, operandShape, shape, index), 1)[0]));
      }
      value = lowering::inlineScalarRegion(b, sum.getEpilogue(), args);
    }
    value = lowering::narrow(b, loc, value, element);
    if (valid)
      value = arith::SelectOp::create(b, loc, valid, value, lowering::floatConstant(b, loc, element, pad));
    values.push_back(value);
  }
  return values;
}
