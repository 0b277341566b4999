//===- MmaLayoutLowering.cpp - mma.sync matmuls lowered from their tiled IR -===//
//
// A "mma_sync" matmul reaches the GPU as kiln-tile and kiln-assign-layouts leave it: an scf.forall over
// [BM, BN] output tiles (batch dims first) whose body runs an scf.for over BK-deep slices of the contraction,
// multiplying padded operand tiles with a tile kiln.matmul and adding the product to an f32 accumulator that
// starts as a linalg.fill of zeros; after the loop, the epilogue (a linalg.generic reading tiles of its
// operands) or a cast, and the insertion of the tile's valid part. This file maps that loop nest onto a
// gpu.func by the loop's #kiln.mma_layout, op by op:
//   - the forall's iterations become thread blocks (TiledLoopLowering);
//   - the K loop becomes a software pipeline over a ring of `stages` shared-memory slots: the operand tiles the
//     loop body reads (tensor.extract_slice + tensor.pad of kernel buffers) are copied for k-tile t + stages - 1
//     while k-tile t is multiplied, by 16-byte cp.async where the rows allow it (narrower cp.async, or
//     synchronous element loads of 16-bit elements, where a row length is not a multiple of 16 bytes),
//     past-the-edge elements zero-filled by the copy, rows padded (kiln::mmaOperandSlots) so that the fragment
//     loads read distinct banks;
//   - the tile matmul and its accumulation become ldmatrix loads of A and B fragments and mma.sync m16n8k16
//     into each warp's accumulator fragments; f32 operands run m16n8k8 on TF32 tensor cores, rounded to TF32
//     (to nearest) as their fragments are loaded, as cuBLAS does when TF32 is allowed;
//   - the epilogue's body and casts run on each accumulator register, reading their operand tiles element by
//     element, and the inserted slice stores the valid part, two columns at a time where rows allow.
// The kernel is size-generic, like the kernel cache expects of a matmul: M, N and K are parameters that the
// loop bounds, the clamped tile sizes (a remaining extent `M - i` reads the parameter) and the strides read, so
// that matmuls that differ only in their sizes share one kernel; what the code does depend on stays static (the
// batch shape, whether an extent is a whole number of tiles, the copy and store widths the row lengths allow).
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "ClusterSums.h"
#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"
#include "MmaLayoutLowering.h"
#include "Transforms/Transforms.h"
#include "WgmmaBuilding.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

static constexpr StringLiteral kWhat = "mma-layout lowering";


/// Whether `index` < `size`, known true when `size` is the constant `extent` (the tile is whole along it).
static Value inside(IndexMath &im, Value index, Value size, int64_t extent) {
  std::optional<int64_t> known = IndexMath::known(size);
  if (known && *known >= extent)
    return arith::ConstantIntOp::create(im.b, im.loc, 1, 1);
  return im.lt(index, size);
}

void MmaMatmulLowering::copyTile(const GlobalTile &tile, const OperandRing &ring, Value slot, Value enabled,
                                 SmallVectorImpl<Value> &tokens) {
  const GlobalTensor &source = tile.source;
  int64_t rowDim = tile.dims[0], columnDim = tile.dims[1];
  int64_t rank = source.shape.size();
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  Type element = cast<MemRefType>(source.buffer.getType()).getElementType();
  int64_t bytes = element.getIntOrFloatBitWidth() / 8, chunk = 16 / bytes;
  // The widest copy whose global address stays aligned: tile columns start at multiples of a 16-byte chunk, so
  // the row length decides (16-byte cp.async for a multiple of a chunk, else 8 or 4 bytes, else element loads).
  int64_t width = 1;
  if (columnDim == rank - 1)
    for (int64_t candidate : {chunk, chunk / 2, chunk / 4})
      if (candidate * bytes >= 4 && source.shape.back() % candidate == 0) {
        width = candidate;
        break;
      }
  bool elementLoads = width * bytes < 4;
  int64_t chunksPerRow = ring.columns / chunk, chunks = ring.rows * chunksPerRow;
  Value slotBase = im.mul(slot, ring.slotElements);
  // A tile assembled from pieces (a key tile over several pages): each row reads its piece's slice, whose first
  // element is at a base of its own.
  SmallVector<Value> pieceBases;
  for (const GlobalTile &piece : tile.pieces)
    pieceBases.push_back(elementIndex(source, piece.offsets, {}, {}));
  auto ofPiece = [&](Value row, function_ref<Value(int64_t)> field) {
    Value piece = im.div(row, tile.pieceRows), value = field(tile.pieces.size() - 1);
    for (int64_t p = static_cast<int64_t>(tile.pieces.size()) - 2; p >= 0; --p)
      value = im.select(im.lt(piece, p + 1), field(p), value);
    return value;
  };
  // Whether `row` of the tile holds data, and the global index of its element at column `at`.
  auto rowInside = [&](Value row) {
    if (tile.pieces.empty())
      return inside(im, row, tile.sizes[rowDim], ring.rows);
    Value size = ofPiece(row, [&](int64_t p) { return tile.pieces[p].sizes[rowDim]; });
    return inside(im, im.rem(row, tile.pieceRows), size, tile.pieceRows);
  };
  auto globalIndex = [&](Value row, Value at) {
    if (tile.pieces.empty())
      return elementIndex(source, tile.offsets, {rowDim, columnDim}, {row, at});
    Value base = ofPiece(row, [&](int64_t p) { return pieceBases[p]; });
    return im.add(base, elementIndex(source, {}, {rowDim, columnDim}, {im.rem(row, tile.pieceRows), at}));
  };
  for (int64_t first = 0; first < chunks; first += threads) {
    Value index = im.add(tid, first);
    auto copyChunk = [&](SmallVectorImpl<Value> &chunkTokens) {
      Value row = im.div(index, chunksPerRow), column = im.mul(im.rem(index, chunksPerRow), chunk);
      Value sharedAt = im.add(slotBase, ring.swizzled ? swizzledPanelIndex(im, row, column, ring.rows)
                                                      : im.add(im.mul(row, ring.stride), column));
      Value rowValid = im.andi(enabled, rowInside(row));
      std::optional<int64_t> wholeColumns = IndexMath::known(tile.sizes[columnDim]);
      if (elementLoads) {
        // Element loads, predicated, stored to shared memory as one 16-byte chunk.
        SmallVector<Value> values;
        for (int64_t e = 0; e < chunk; ++e) {
          Value at = im.add(column, e);
          Value valid = im.andi(rowValid, inside(im, at, tile.sizes[columnDim], ring.columns));
          Value globalAt = globalIndex(row, at);
          llvm::append_range(values, loadElements(b, loc, im, source.buffer, globalAt, 1, valid, 0.0));
        }
        Value chunkValue = vector::FromElementsOp::create(b, loc, VectorType::get({chunk}, element), values);
        vector::StoreOp::create(b, loc, chunkValue, ring.shared, ValueRange{sharedAt}, /*nontemporal=*/false,
                                llvm::MaybeAlign(16));
        return;
      }
      for (int64_t part = 0; part < chunk; part += width) {
        Value at = im.add(column, part);
        // Elements of this part before the valid edge (all or none where the tile is whole along the row).
        Value count;
        if (wholeColumns && *wholeColumns >= ring.columns) {
          count = im.select(rowValid, im.c(width), im.c(0));
        } else {
          Value left = arith::SubIOp::create(b, loc, tile.sizes[columnDim], im.min(at, tile.sizes[columnDim]));
          count = im.select(rowValid, im.min(left, im.c(width)), im.c(0));
        }
        Value globalAt = globalIndex(row, at);
        Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, count, im.c(0));
        chunkTokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
            b, loc, tokenType, ring.shared, im.add(sharedAt, part), source.buffer, im.select(any, globalAt, im.c(0)),
            b.getIndexAttr(width), count, width * bytes == 16 ? b.getUnitAttr() : UnitAttr()));
      }
    };
    if (first + threads <= chunks) {
      copyChunk(tokens);
      continue;
    }
    // The last round of a tile whose chunks do not split evenly over the threads: the threads past the last
    // chunk copy nothing (a thread's cp.async group may be empty; repeating a chunk instead would be two writes
    // of one shared-memory address, a race however equal the bytes).
    scf::IfOp::create(b, loc, im.lt(index, chunks), [&](OpBuilder &then, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(then.getInsertionBlock(), then.getInsertionPoint());
      // The group is committed after the branch; its tokens only order the copies, which the branch does.
      SmallVector<Value> branchTokens;
      copyChunk(branchTokens);
      scf::YieldOp::create(b, loc);
    });
  }
}

FailureOr<std::pair<GlobalTile, GlobalTile>> MmaMatmulLowering::kTileOperands(scf::ForOp loop, MatmulOp product,
                                                                            Value kTile) {
  // A tile that divides K has a constant depth, whatever its offset: only the k-tile count bounds a prefetch.
  mapping.map(loop.getInductionVar(), im.add(im.mul(kTile, bk), kStart(loop)));
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (&op == product.getOperation() || isa<AddOp>(op))
      continue;
    FailureOr<bool> addressing = lowerAddressing(&op, kWhat);
    if (failed(addressing))
      return failure();
    if (auto tensorCast = dyn_cast<tensor::CastOp>(op)) {
      if (auto it = globalTiles.find(tensorCast.getSource()); it != globalTiles.end()) {
        auto copied = it->second;
        globalTiles[tensorCast.getResult()] = std::move(copied);
        continue;
      }
    }
    if (!*addressing)
      return op.emitOpError() << kWhat << ": the K loop may only read operand tiles and multiply them";
  }
  std::optional<GlobalTile> lhs = operandTile(product.getLhs()), rhs = operandTile(product.getRhs());
  if (!lhs || !rhs)
    return product.emitOpError() << kWhat << ": the tile matmul must read [rows, columns] tiles of kernel buffers";
  return std::make_pair(*lhs, *rhs);
}

FailureOr<Value> MmaMatmulLowering::stageOperands(scf::ForOp loop, MatmulOp product, Value kTile, Value kTiles,
                                                  Value slot) {
  FailureOr<std::pair<GlobalTile, GlobalTile>> operands = kTileOperands(loop, product, kTile);
  if (failed(operands))
    return failure();
  SmallVector<Value> tokens;
  Value enabled = im.lt(kTile, kTiles);
  copyTile(operands->first, ringA, slot, enabled, tokens);
  copyTile(operands->second, ringB, slot, enabled, tokens);
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  return nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens).getResult();
}

SmallVector<Value> MmaMatmulLowering::multiplySlot(Value slot, ArrayRef<Value> accs, MatmulOp product) {
  Type element = cast<MemRefType>(ringA.shared.getType()).getElementType();
  bool transposedB = product.getTransposeRhs();
  // 16-bit operands run m16n8k16; f32 ones m16n8k8 as TF32, whose fragment rows are 4 elements (16 bytes) wide,
  // their elements rounded to TF32, or with fp32_precision = "ieee" split into two TF32 parts (3xTF32).
  bool tf32 = element.isF32(), split = tf32 && product.getFp32Precision() == "ieee";
  int64_t depth = tf32 ? 8 : 16;
  auto fragA = VectorType::get({4, tf32 ? 1 : 2}, element);
  Value baseA = im.mul(slot, ringA.slotElements), baseB = im.mul(slot, ringB.slotElements);
  Value laneRow16 = im.rem(lane, 16), laneHalf = im.mul(im.div(lane, 16), depth / 2);
  // A fragment's registers (with their remainders' when f32 values are split).
  auto toRegisters = [&](SmallVector<Value> values, SmallVectorImpl<SmallVector<Value>> &into) {
    into.push_back(tf32 ? tf32Registers(b, loc, values, split) : values);
  };
  SmallVector<Value> current(accs);
  for (int64_t kk = 0; kk < bk / depth; ++kk) {
    SmallVector<SmallVector<Value>> aRegs, bRegs;
    for (int64_t i = 0; i < fragsM; ++i) {
      Value row = im.add(wm0, im.add(laneRow16, i * 16)), col = im.add(laneHalf, kk * depth);
      Value at = im.add(baseA, im.add(im.mul(row, ringA.stride), col));
      Value fragment = nvgpu::LdMatrixOp::create(b, loc, fragA, ringA.shared, at, b.getBoolAttr(false),
                                                 b.getI32IntegerAttr(4));
      toRegisters(packFragment(b, loc, fragment), aRegs);
    }
    if (tf32 && !transposedB) {
      // ldmatrix transposes only 16-bit elements: a [K, N] tile's TF32 fragments are read element by element,
      // lane l taking rows k = l % 4 and l % 4 + 4 of column n = l / 4 (the rows' padding keeps the 32 lanes on
      // distinct banks).
      Value k = im.add(im.rem(lane, 4), kk * depth);
      for (int64_t j = 0; j < fragsN; ++j) {
        Value n = im.add(wn0, im.add(im.div(lane, 4), j * 8));
        SmallVector<Value> fragment;
        for (int64_t half = 0; half < 2; ++half) {
          Value at = im.add(baseB, im.add(im.mul(im.add(k, half * 4), ringB.stride), n));
          fragment.push_back(memref::LoadOp::create(b, loc, ringB.shared, ValueRange{at}));
        }
        toRegisters(fragment, bRegs);
      }
    } else {
      // One ldmatrix.x4 reads the B fragments of two adjacent 8-column blocks (an odd last one reads 8 columns
      // past the warp tile, inside the ring's padding or spare rows, and is not used).
      for (int64_t j = 0; j < fragsN; j += 2) {
        auto [first, second] = loadBFragmentPair(b, loc, im, ringB.shared, baseB, ringB.stride, lane,
                                                 im.c(kk * depth), im.add(wn0, j * 8), /*kMajor=*/!transposedB);
        toRegisters(first, bRegs);
        toRegisters(second, bRegs);
      }
    }
    for (int64_t i = 0; i < fragsM; ++i)
      for (int64_t j = 0; j < fragsN; ++j)
        current[i * fragsN + j] = mmaSync(b, loc, aRegs[i], bRegs[j], current[i * fragsN + j], element);
  }
  return current;
}

FailureOr<MatmulOp> MmaMatmulLowering::contractionProduct(scf::ForOp loop) {
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  auto add = loop.getNumRegionIterArgs() == 1 ? yield.getOperand(0).getDefiningOp<AddOp>() : AddOp();
  MatmulOp product;
  if (add) {
    Value iterArg = loop.getRegionIterArgs()[0];
    Value other = add.getLhs() == iterArg ? add.getRhs() : add.getRhs() == iterArg ? add.getLhs() : Value();
    product = other ? other.getDefiningOp<MatmulOp>() : MatmulOp();
  }
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()),
                         ub = getConstantIntValue(loop.getUpperBound()), step = getConstantIntValue(loop.getStep());
  bool bounded = (lb && ub) || kChunkOf(loop);
  if (!product || !bounded || !step || *step != bk)
    return loop.emitOpError() << kWhat << ": the K loop must add a tile matmul to its one accumulator, stepping "
                                          "by BK over constant bounds or a split matmul's chunk";
  if (!registers.count(loop.getInitArgs()[0]))
    return loop.emitOpError() << kWhat << ": the accumulator must start as a tile in registers";
  return product;
}

std::optional<int64_t> MmaMatmulLowering::kChunkOf(scf::ForOp loop) {
  auto min = loop.getUpperBound().getDefiningOp<arith::MinSIOp>();
  auto end = min ? min.getLhs().getDefiningOp<arith::AddIOp>() : arith::AddIOp();
  if (!end || end.getLhs() != loop.getLowerBound() || !getConstantIntValue(min.getRhs()))
    return std::nullopt;
  return getConstantIntValue(end.getRhs());
}

Value MmaMatmulLowering::kStart(scf::ForOp loop) {
  if (std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()))
    return im.c(*lb);
  return index(loop.getLowerBound());
}

Value MmaMatmulLowering::kTileCount(scf::ForOp loop) {
  Value start = kStart(loop);
  std::optional<int64_t> chunk = kChunkOf(loop);
  // K: the kernel's size parameter where it has one, else the constant the IR was compiled for; a chunk ends C
  // past its start or at K.
  Value upper = chunk ? loop.getUpperBound().getDefiningOp<arith::MinSIOp>().getRhs() : loop.getUpperBound();
  Value end = sizeK ? sizeK : im.c(*getConstantIntValue(upper));
  // A chunk that starts past K (the last ones of a cluster split may) reads one zero-filled k-tile: the end is
  // clamped to the start, so that the unsigned difference cannot wrap.
  if (chunk)
    end = im.max(im.min(im.add(start, *chunk), end), start);
  return im.max(im.div(im.add(im.sub(end, start), bk - 1), bk), im.c(1));
}

LogicalResult MmaMatmulLowering::lowerContraction(scf::ForOp loop) {
  FailureOr<MatmulOp> found = contractionProduct(loop);
  if (failed(found))
    return failure();
  MatmulOp product = *found;
  SmallVector<Value> accs = fragmentsOf(registers.find(loop.getInitArgs()[0])->second);
  Value kTiles = kTileCount(loop);
  Value lastGroup;
  for (int64_t s = 0; s < stages - 1; ++s) {
    FailureOr<Value> group = stageOperands(loop, product, im.c(s), kTiles, im.c(s));
    if (failed(group))
      return failure();
    lastGroup = *group;
  }
  LogicalResult status = success();
  auto pipeline = scf::ForOp::create(
      b, loc, im.c(0), kTiles, im.c(1), accs, [&](OpBuilder &nested, Location, Value kTile, ValueRange iter) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        // k-tile kTile has landed in every thread's copies; its slot's previous reads are done.
        nvgpu::DeviceAsyncWaitOp::create(b, loc, lastGroup, b.getI32IntegerAttr(stages - 2));
        gpu::BarrierOp::create(b, loc);
        Value next = im.add(kTile, stages - 1);
        if (failed(stageOperands(loop, product, next, kTiles, im.rem(next, stages))))
          status = failure();
        scf::YieldOp::create(b, loc, multiplySlot(im.rem(kTile, stages), SmallVector<Value>(iter), product));
      });
  if (failed(status))
    return failure();
  nvgpu::DeviceAsyncWaitOp::create(b, loc, lastGroup, b.getI32IntegerAttr(0));
  registers[loop.getResult(0)] = registersOf(pipeline.getResults());
  return success();
}

std::optional<GlobalTile> MmaMatmulLowering::operandTile(Value operand) {
  std::optional<GlobalTile> tile;
  if (auto it = globalTiles.find(operand); it != globalTiles.end())
    tile = it->second;
  else if (auto global = globals.find(operand); global != globals.end())
    tile = wholeTile(global->second);
  if (tile && tile->dims.size() != 2)
    return std::nullopt;
  return tile;
}

SmallVector<Value> MmaMatmulLowering::fragmentsOf(ArrayRef<Value> tile) {
  auto fragmentType = VectorType::get({4}, b.getF32Type());
  SmallVector<Value> fragments;
  for (int64_t f = 0; f < fragsM * fragsN; ++f) {
    SmallVector<Value> elements;
    for (Value value : tile.slice(f * 4, 4))
      elements.push_back(lowering::widen(b, loc, value));
    fragments.push_back(vector::FromElementsOp::create(b, loc, fragmentType, elements));
  }
  return fragments;
}

SmallVector<Value> MmaMatmulLowering::registersOf(ValueRange fragments) {
  SmallVector<Value> result;
  for (Value fragment : fragments)
    for (int64_t e = 0; e < 4; ++e)
      result.push_back(vector::ExtractOp::create(b, loc, fragment, ArrayRef<int64_t>{e}));
  return result;
}

FailureOr<std::pair<ArrayRef<Value>, AddOp>> MmaMatmulLowering::singleProductAccumulator(MatmulOp product) {
  auto add = product->hasOneUse() ? dyn_cast<AddOp>(*product->user_begin()) : AddOp();
  Value other = !add ? Value() : add.getLhs() == product.getResult() ? add.getRhs() : add.getLhs();
  auto accumulator = other ? registers.find(other) : registers.end();
  if (accumulator == registers.end() || !operandTile(product.getLhs()) || !operandTile(product.getRhs()))
    return product.emitOpError() << kWhat << ": a tile matmul reads [rows, columns] tiles of kernel buffers and "
                                            "is added to an accumulator tile";
  return std::make_pair(ArrayRef<Value>(accumulator->second), add);
}

LogicalResult MmaMatmulLowering::lowerSingleProduct(MatmulOp product) {
  FailureOr<std::pair<ArrayRef<Value>, AddOp>> accumulator = singleProductAccumulator(product);
  if (failed(accumulator))
    return failure();
  auto [init, add] = *accumulator;
  std::optional<GlobalTile> lhs = operandTile(product.getLhs()), rhs = operandTile(product.getRhs());
  SmallVector<Value> tokens;
  Value enabled = arith::ConstantIntOp::create(b, loc, 1, 1);
  copyTile(*lhs, ringA, im.c(0), enabled, tokens);
  copyTile(*rhs, ringB, im.c(0), enabled, tokens);
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  Value group = nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
  nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(0));
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> accs = multiplySlot(im.c(0), fragmentsOf(init), product);
  registers[add.getResult()] = registersOf(accs);
  return success();
}

FailureOr<Value> MmaMatmulLowering::memoryElement(Value tile, ArrayRef<Value> indices, Operation *user) {
  if (auto reshape = tile.getDefiningOp<ReshapeOp>()) {
    // Row-major: the same linear position in the reshaped tile's shape.
    ArrayRef<int64_t> shape = reshape.getType().getShape(), sourceShape = reshape.getInput().getType().getShape();
    Value linear = im.c(0);
    for (auto [index, extent] : llvm::zip(indices, shape))
      linear = im.add(im.mul(linear, extent), index);
    SmallVector<Value> sourceIndices(sourceShape.size());
    for (int64_t d = static_cast<int64_t>(sourceShape.size()) - 1; d >= 0; --d) {
      sourceIndices[d] = im.rem(linear, sourceShape[d]);
      linear = im.div(linear, sourceShape[d]);
    }
    return memoryElement(reshape.getInput(), sourceIndices, user);
  }
  std::optional<GlobalTile> read = memoryTile(tile);
  if (!read)
    return user->emitOpError() << kWhat << ": an epilogue operand must be a tile of a kernel buffer";
  return tileElements(*read, indices, 1)[0];
}

std::optional<GlobalTile> MmaMatmulLowering::memoryTile(Value tile) {
  if (auto it = globalTiles.find(tile); it != globalTiles.end())
    return it->second;
  if (auto global = globals.find(tile); global != globals.end())
    return wholeTile(global->second);
  return std::nullopt;
}

SmallVector<Value> MmaMatmulLowering::tileElements(const GlobalTile &read, ArrayRef<Value> indices, int64_t count) {
  Value valid = arith::ConstantIntOp::create(b, loc, 1, 1);
  for (auto [d, index] : llvm::zip(read.dims, indices))
    valid = im.andi(valid, im.lt(index, read.sizes[d]));
  Value at = elementIndex(read.source, read.offsets, read.dims, indices);
  return loadElements(b, loc, im, read.source.buffer, at, count, valid, read.pad);
}

std::optional<GlobalTile> MmaMatmulLowering::chunkTile(Value input, AffineMap map) {
  std::optional<GlobalTile> found = memoryTile(input);
  if (!found)
    return std::nullopt;
  const GlobalTile &read = *found;
  ArrayRef<int64_t> shape = read.source.shape;
  Type element = cast<MemRefType>(read.source.buffer.getType()).getElementType();
  if (!read.pieces.empty() || read.dims.empty() || read.dims.back() != static_cast<int64_t>(shape.size()) - 1 ||
      ShapedType::isDynamic(shape.back()) || shape.back() % 8 != 0 || !element.isIntOrFloat() ||
      8 * element.getIntOrFloatBitWidth() > 128 || map.getNumResults() != read.dims.size())
    return std::nullopt;
  // The column reaches the last result alone, unscaled; no other result reads it.
  AffineExpr column = getAffineDimExpr(1, map.getContext());
  for (auto [i, result] : llvm::enumerate(map.getResults()))
    if (i + 1 == map.getNumResults() ? result != column : result.isFunctionOfDim(1))
      return std::nullopt;
  return read;
}

LogicalResult MmaMatmulLowering::lowerEpilogue(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumLoops() != 2 || !llvm::all_of(op.getIteratorTypesArray(), [](auto t) {
        return t == utils::IteratorType::parallel;
      }))
    return op.emitOpError() << kWhat << ": an epilogue is a 2-D elementwise linalg.generic with one result";
  for (auto [input, map] : llvm::zip(op.getDpsInputs(), op.getIndexingMapsArray()))
    if ((registers.count(input) && !map.isIdentity()) ||
        (rowValues.count(input) && map != AffineMap::get(2, 0, b.getAffineDimExpr(0))))
      return op.emitOpError() << kWhat << ": the accumulator must be read element for element, a row vector by "
                                          "its row";
  epilogues[op.getResult(0)] = op;
  return success();
}

FailureOr<Value> MmaMatmulLowering::epilogueValue(linalg::GenericOp op, int64_t r, int64_t frags) {
  frags = frags ? frags : fragsN;
  Value row, column;
  auto position = [&] {
    if (!row)
      row = registerRow(r, frags), column = registerColumn(r, frags);
    return std::make_pair(row, column);
  };
  auto registerInput = [&](Value tile) -> Value {
    if (auto it = registers.find(tile); it != registers.end())
      return it->second[r];
    if (auto it = rowValues.find(tile); it != rowValues.end())
      return it->second[rowSlot(r, frags)];
    return Value();
  };
  return epilogueAt(op, position, registerInput);
}

FailureOr<Value> MmaMatmulLowering::epilogueAt(linalg::GenericOp op,
                                               llvm::function_ref<std::pair<Value, Value>()> position,
                                               llvm::function_ref<Value(Value)> registerInput) {
  Block &body = op->getRegion(0).front();
  IRMapping scalars;
  for (auto [input, map, argument] : llvm::zip(op.getDpsInputs(), op.getIndexingMapsArray(), body.getArguments())) {
    if (Value value = registerInput(input)) {
      scalars.map(argument, value);
      continue;
    }
    auto [row, column] = position();
    std::optional<SmallVector<Value, 8>> indices = affine::expandAffineMap(b, loc, map, {row, column});
    if (!indices)
      return op.emitOpError() << kWhat << ": cannot expand an epilogue operand's indexing map";
    FailureOr<Value> element = memoryElement(input, *indices, op);
    if (failed(element))
      return failure();
    scalars.map(argument, *element);
  }
  // Values the body captures from the kernel function (constants) are the kernel's copies.
  body.walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (!op->isAncestor(operand.getParentRegion()->getParentOp()) && !scalars.contains(operand))
        scalars.map(operand, index(operand));
  });
  for (Operation &inner : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      auto [row, column] = position();
      scalars.map(index.getResult(), index.getDim() == 0 ? row : column);
      continue;
    }
    // A kernel buffer the body reads (an attention mod's table): the element from memory, its extent.
    if (auto extract = dyn_cast<tensor::ExtractOp>(inner); extract && globals.count(extract.getTensor())) {
      SmallVector<Value> indices;
      for (Value at : extract.getIndices())
        indices.push_back(scalars.lookupOrDefault(at));
      FailureOr<Value> element = memoryElement(extract.getTensor(), indices, op);
      if (failed(element))
        return failure();
      scalars.map(extract.getResult(), *element);
      continue;
    }
    if (auto dim = dyn_cast<tensor::DimOp>(inner); dim && globals.count(dim.getSource()) && dim.getConstantIndex()) {
      scalars.map(dim.getResult(), extent(globals.find(dim.getSource())->second, *dim.getConstantIndex()));
      continue;
    }
    b.clone(inner, scalars);
  }
  return scalars.lookupOrDefault(body.getTerminator()->getOperand(0));
}

FailureOr<bool> MmaMatmulLowering::lowerStagedInsert(tensor::ParallelInsertSliceOp op, Value staging) {
  // The one register tile the stored values come from: the inserted tile, or the epilogue's one register input.
  auto epilogue = epilogues.find(op.getSource());
  Value staged = registers.count(op.getSource()) ? op.getSource() : Value();
  if (epilogue != epilogues.end()) {
    for (Value input : epilogue->second.getDpsInputs()) {
      if (rowValues.count(input) || (registers.count(input) && staged))
        return false;
      if (registers.count(input))
        staged = input;
    }
  }
  GlobalTile region = insertRegion(op, output);
  // A tile summed over a cluster: each of its blocks stores a share of whole rows (the last one fewer).
  bool summed = staged && clusterSummed.contains(staged);
  int64_t chunksPerRow = bn / 8, chunks = bm * chunksPerRow, stride = bn + kStagingRowPad;
  int64_t perShare = summed ? llvm::divideCeil(bm, clusterSplits) * chunksPerRow : chunks;
  // At most two iterations: a thread's chunks in an iteration load their epilogue operands together, so that a
  // wide tile does not wait for global memory once per chunk; a narrow one keeps one chunk an iteration (on the
  // H200, a 4096 x 14336 x 4096 GEMM adding an [M, N] operand: 631 TFLOP/s in four iterations of 4 chunks, 640 in
  // two of 8 or one of 16). A share that the threads do not divide stores its last iteration's chunks guarded.
  int64_t perIteration = std::max<int64_t>(1, perShare / threads / 2);
  bool partialIteration = perShare % (threads * perIteration) != 0;
  if (!staged || region.dims.size() != 2 || bn % 8 != 0 || (partialIteration && !summed))
    return false;
  ArrayRef<Value> tile = registers.find(staged)->second;
  // The ring is free once every warp is past its last read; each thread writes its registers as pairs.
  gpu::BarrierOp::create(b, loc);
  auto pairType = VectorType::get({2}, b.getF32Type());
  for (int64_t r = 0; r < numRegisters(); r += 2) {
    Value pair = vector::FromElementsOp::create(
        b, loc, pairType, ValueRange{lowering::widen(b, loc, tile[r]), lowering::widen(b, loc, tile[r + 1])});
    Value at = im.add(im.mul(registerRow(r), stride), registerColumn(r));
    vector::StoreOp::create(b, loc, pair, staging, ValueRange{at}, /*nontemporal=*/false, llvm::MaybeAlign(8));
  }
  gpu::BarrierOp::create(b, loc);
  Value stagingBase, firstChunk = im.c(0);
  if (summed) {
    // Every block of the cluster has staged its partial tile; this one stores share `rank` of the rows.
    clusterBarrier(b, loc);
    stagingBase = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, staging);
    firstChunk = im.mul(clusterRank(clusterSplits), perShare);
  }

  ArrayRef<Value> sizes = region.sizes;
  ArrayRef<int64_t> kept = region.dims;
  Type element = cast<MemRefType>(output.buffer.getType()).getElementType();
  // Whole chunks where rows are whole chunks (a chunk is then inside or outside as a whole and 16-byte aligned),
  // else pairs where rows are even, else elements.
  bool lastDim = kept[1] == static_cast<int64_t>(output.shape.size()) - 1;
  int64_t width = lastDim && output.shape.back() % 8 == 0 ? 8 : lastDim && output.shape.back() % 2 == 0 ? 2 : 1;
  auto quarter = VectorType::get({4}, b.getF32Type());
  // Epilogue inputs read from memory 8 columns at a time (a residual, a bias, another GEMM's output): one
  // 16-byte load per chunk, all of an iteration's chunks loaded before any is stored, so that the loads are in
  // flight together (a store may alias them, which would keep a later load from moving above it).
  SmallVector<std::pair<Value, GlobalTile>, 2> chunkInputs;
  SmallVector<AffineMap> chunkMaps;
  if (epilogue != epilogues.end())
    for (auto [input, map] : llvm::zip(epilogue->second.getDpsInputs(), epilogue->second.getIndexingMapsArray()))
      if (input != staged && !rowValues.count(input))
        if (std::optional<GlobalTile> read = chunkTile(input, map)) {
          chunkInputs.emplace_back(input, *read);
          chunkMaps.push_back(map);
        }
  using Preloaded = DenseMap<Value, SmallVector<Value>>;
  auto preloadChunk = [&](Value chunk) {
    Value row = im.div(chunk, chunksPerRow), column = im.mul(im.rem(chunk, chunksPerRow), 8);
    Preloaded preloaded;
    for (auto [entry, map] : llvm::zip(chunkInputs, chunkMaps)) {
      auto &[input, read] = entry;
      std::optional<SmallVector<Value, 8>> indices = affine::expandAffineMap(b, loc, map, {row, column});
      preloaded[input] = tileElements(read, *indices, 8);
    }
    return preloaded;
  };
  LogicalResult status = success();
  auto storeChunk = [&](Value chunk, Preloaded &preloaded) {
    Value row = im.div(chunk, chunksPerRow), column = im.mul(im.rem(chunk, chunksPerRow), 8);
    Value at = im.add(im.mul(row, stride), column);
    SmallVector<Value> values;
    if (summed) {
      // The chunk summed over the cluster's staging tiles; rows past the valid part (not stored) read nothing.
      SmallVector<Type> types(8, b.getF32Type());
      auto inside = scf::IfOp::create(b, loc, types, im.lt(row, sizes[kept[0]]), /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(inside.thenBlock());
        scf::YieldOp::create(b, loc, clusterSum(b, loc, stagingBase, im.mul(at, 4), 8, clusterSplits));
        b.setInsertionPointToStart(inside.elseBlock());
        Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
        scf::YieldOp::create(b, loc, SmallVector<Value>(8, zero));
      }
      llvm::append_range(values, inside.getResults());
    }
    for (int64_t half = 0; half < 2 && !summed; ++half) {
      Value four = vector::LoadOp::create(b, loc, quarter, staging, ValueRange{im.add(at, 4 * half)},
                                          /*nontemporal=*/false, llvm::MaybeAlign(16));
      for (int64_t e = 0; e < 4; ++e)
        values.push_back(vector::ExtractOp::create(b, loc, four, ArrayRef<int64_t>{e}));
    }
    // The epilogue runs on every element of the chunk (its operand reads are guarded loads, in bounds); only the
    // stores are guarded.
    for (int64_t e = 0; e < 8 && epilogue != epilogues.end(); ++e) {
      Value elementColumn = im.add(column, e);
      FailureOr<Value> value = epilogueAt(
          epilogue->second, [&] { return std::make_pair(row, elementColumn); },
          [&](Value input) {
            if (input == staged)
              return values[e];
            auto it = preloaded.find(input);
            return it == preloaded.end() ? Value() : it->second[e];
          });
      if (failed(value))
        status = failure();
      else
        values[e] = *value;
    }
    for (Value &value : values)
      value = lowering::narrow(b, loc, lowering::widen(b, loc, value), element);
    for (int64_t first = 0; first < 8; first += width) {
      Value elementColumn = im.add(column, first);
      Value valid = im.andi(im.lt(row, sizes[kept[0]]), im.lt(elementColumn, sizes[kept[1]]));
      Value globalAt = elementIndex(output, region.offsets, kept, {row, elementColumn});
      scf::IfOp::create(b, loc, valid, [&](OpBuilder &then, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(then.getInsertionBlock(), then.getInsertionPoint());
        if (width == 1) {
          memref::StoreOp::create(b, loc, values[first], output.buffer, ValueRange{globalAt});
        } else {
          Value piece = vector::FromElementsOp::create(b, loc, VectorType::get({width}, element),
                                                       ArrayRef<Value>(values).slice(first, width));
          vector::StoreOp::create(b, loc, piece, output.buffer, ValueRange{globalAt}, /*nontemporal=*/false,
                                  llvm::MaybeAlign(std::min<int64_t>(16, width * element.getIntOrFloatBitWidth() / 8)));
        }
        scf::YieldOp::create(b, loc);
      });
    }
  };
  int64_t step = threads * perIteration;
  scf::ForOp::create(b, loc, im.c(0), im.c(llvm::alignTo(perShare, step)), im.c(step), ValueRange{},
                     [&](OpBuilder &nested, Location, Value first, ValueRange) {
                       OpBuilder::InsertionGuard guard(b);
                       b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
                       SmallVector<Value> chunksHere, inShare;
                       SmallVector<Preloaded, 4> preloaded;
                       for (int64_t u = 0; u < perIteration; ++u) {
                         Value local = im.add(first, im.add(tid, u * threads));
                         if (partialIteration)
                           inShare.push_back(im.lt(local, im.c(perShare)));
                         chunksHere.push_back(im.add(firstChunk, local));
                         preloaded.push_back(preloadChunk(chunksHere.back()));
                       }
                       for (int64_t u = 0; u < perIteration; ++u) {
                         if (!partialIteration) {
                           storeChunk(chunksHere[u], preloaded[u]);
                           continue;
                         }
                         scf::IfOp::create(b, loc, inShare[u], [&](OpBuilder &then, Location) {
                           OpBuilder::InsertionGuard inner(b);
                           b.setInsertionPoint(then.getInsertionBlock(), then.getInsertionPoint());
                           storeChunk(chunksHere[u], preloaded[u]);
                           scf::YieldOp::create(b, loc);
                         });
                       }
                       scf::YieldOp::create(b, loc);
                     });
  if (failed(status))
    return failure();
  // No block leaves (and frees its shared memory) while another may still read its staging tile.
  if (summed)
    clusterBarrier(b, loc);
  return true;
}

LogicalResult MmaMatmulLowering::lowerInsert(tensor::ParallelInsertSliceOp op) {
  auto tile = registers.find(op.getSource());
  auto epilogue = epilogues.find(op.getSource());
  if (tile == registers.end() && epilogue == epilogues.end())
    return op.emitOpError() << kWhat << ": the inserted tile must be in registers or an epilogue of them";
  bool summed = clusterSummed.contains(op.getSource());
  if (epilogue != epilogues.end())
    for (Value input : epilogue->second.getDpsInputs())
      summed = summed || clusterSummed.contains(input);
  if (summed)
    return op.emitOpError() << kWhat << ": a tile summed over a cluster is stored through shared memory, from "
                                        "one register tile and an epilogue without row vectors";
  GlobalTile region = insertRegion(op, output);
  ArrayRef<Value> offsets = region.offsets, sizes = region.sizes;
  ArrayRef<int64_t> kept = region.dims;
  if (kept.size() != 2)
    return op.emitOpError() << kWhat << ": a matmul tile is inserted as [rows, columns]";
  Type element = cast<MemRefType>(output.buffer.getType()).getElementType();
  // With an even row length, an even column's pair lies wholly inside or outside and starts 2-element aligned.
  bool pairs = kept[1] == static_cast<int64_t>(output.shape.size()) - 1 && output.shape.back() % 2 == 0;
  for (int64_t r = 0; r < numRegisters(); r += pairs ? 2 : 1) {
    Value row = registerRow(r), column = registerColumn(r);
    Value valid = im.andi(inside(im, row, sizes[kept[0]], bm), inside(im, column, sizes[kept[1]], bn));
    Value at = elementIndex(output, offsets, kept, {row, column});
    // The epilogue runs where its element is stored, as the store needs it.
    LogicalResult status = success();
    scf::IfOp::create(b, loc, valid, [&](OpBuilder &then, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(then.getInsertionBlock(), then.getInsertionPoint());
      SmallVector<Value> values;
      for (int64_t e = 0; e < (pairs ? 2 : 1) && succeeded(status); ++e) {
        FailureOr<Value> value = tile != registers.end() ? FailureOr<Value>(tile->second[r + e])
                                                         : epilogueValue(epilogue->second, r + e);
        if (failed(value))
          status = failure();
        else
          values.push_back(lowering::narrow(b, loc, lowering::widen(b, loc, *value), element));
      }
      if (values.size() == 1) {
        memref::StoreOp::create(b, loc, values[0], output.buffer, ValueRange{at});
      } else if (values.size() == 2) {
        Value pair = vector::FromElementsOp::create(b, loc, VectorType::get({2}, element), values);
        vector::StoreOp::create(b, loc, pair, output.buffer, ValueRange{at}, /*nontemporal=*/false,
                                llvm::MaybeAlign(2 * element.getIntOrFloatBitWidth() / 8));
      }
      scf::YieldOp::create(b, loc);
    });
    if (failed(status))
      return failure();
  }
  return success();
}

LogicalResult MmaMatmulLowering::lowerClusterSplit(scf::ForOp chunks) {
  std::optional<int64_t> lb = getConstantIntValue(chunks.getLowerBound()),
                         ub = getConstantIntValue(chunks.getUpperBound()),
                         step = getConstantIntValue(chunks.getStep());
  auto yield = cast<scf::YieldOp>(chunks.getBody()->getTerminator());
  auto add = chunks.getNumRegionIterArgs() == 1 ? yield.getOperand(0).getDefiningOp<AddOp>() : AddOp();
  Value sum = chunks.getNumRegionIterArgs() == 1 ? chunks.getRegionIterArgs()[0] : Value();
  Value part = add && add.getLhs() == sum ? add.getRhs() : Value();
  if (!lb || *lb != 0 || !ub || *ub != clusterSplits || !step || *step != 1 || !part ||
      !registers.count(chunks.getInitArgs()[0]))
    return chunks.emitOpError() << kWhat << ": the chunks of a cluster-split contraction are a loop over the "
                                << clusterSplits << " blocks of a cluster (the config's k_splits) adding each "
                                   "chunk's tile to a sum that starts in registers";
  mapping.map(chunks.getInductionVar(), clusterRank(clusterSplits));
  for (Operation &op : chunks.getBody()->without_terminator())
    if (&op != add.getOperation() && failed(lowerOp(&op)))
      return failure();
  auto partial = registers.find(part);
  if (partial == registers.end())
    return add.emitOpError() << kWhat << ": a chunk's partial tile must be in registers";
  auto copied = partial->second;
  registers[chunks.getResult(0)] = std::move(copied);
  clusterSummed.insert(chunks.getResult(0));
  return success();
}

LogicalResult MmaMatmulLowering::lowerOp(Operation *op) {
  // A cluster-summed tile's registers hold this block's partial sum: only the store may read them (through a
  // slice, a cast or an epilogue), where the sum over the cluster is computed.
  if (!isa<tensor::ExtractSliceOp, CastOp, linalg::GenericOp>(op) &&
      llvm::any_of(op->getOperands(), [&](Value operand) { return clusterSummed.contains(operand); }))
    return op->emitOpError() << kWhat << ": a tile summed over a cluster is only sliced, cast, run through an "
                                         "epilogue and stored";
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    // The valid part of a register tile is the same registers.
    if (auto it = registers.find(slice.getSource()); it != registers.end()) {
      auto copied = it->second;
      registers[slice.getResult()] = std::move(copied);
      if (clusterSummed.contains(slice.getSource()))
        clusterSummed.insert(slice.getResult());
      return success();
    }
    if (auto it = epilogues.find(slice.getSource()); it != epilogues.end()) {
      auto copied = it->second;
      epilogues[slice.getResult()] = std::move(copied);
      return success();
    }
  }
  FailureOr<bool> addressing = lowerAddressing(op, kWhat);
  if (failed(addressing))
    return failure();
  if (*addressing || isa<tensor::EmptyOp, ReshapeOp>(op))
    return success(); // a reshape of a tile read from memory is read through (memoryElement)
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    registers[fill.getResult(0)] = SmallVector<Value>(numRegisters(), mapping.lookupOrDefault(fill.value()));
    return success();
  }
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return loop->hasAttr(kClusterSplitAttrName) ? lowerClusterSplit(loop) : lowerContraction(loop);
  if (auto product = dyn_cast<MatmulOp>(op))
    return lowerSingleProduct(product);
  if (isa<AddOp>(op) && registers.count(op->getResult(0)))
    return success(); // the accumulation of a tile matmul, lowered with it
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return lowerEpilogue(generic);
  if (auto castOp = dyn_cast<CastOp>(op)) {
    auto it = registers.find(castOp.getInput());
    if (it == registers.end())
      return op->emitOpError() << kWhat << ": only a tile in registers is cast";
    if (clusterSummed.contains(castOp.getInput())) {
      // Rounded where the sum is stored (lowerStagedInsert narrows every stored value to the output's type).
      auto copied = it->second;
      registers[castOp.getResult()] = std::move(copied);
      clusterSummed.insert(castOp.getResult());
      return success();
    }
    Type element = castOp.getType().getElementType();
    SmallVector<Value> result;
    for (Value value : it->second)
      result.push_back(lowering::narrow(b, loc, lowering::widen(b, loc, value), element));
    registers[castOp.getResult()] = result;
    return success();
  }
  return op->emitOpError() << kWhat << ": no lowering for this op in a matmul kernel";
}

void MmaMatmulLowering::makeSizeGeneric(func::FuncOp kernel, scf::ForallOp forall, ValueRange sizes,
                                        bool transposedB) {
  Value m = sizes[0], n = sizes[1];
  sizeK = sizes[2];
  // The function's arguments, as outlined: lhs [..., M, K], rhs [..., K, N] or [..., N, K], the epilogue's
  // operands (broadcasting against the result), then the result [..., M, N].
  auto result = cast<RankedTensorType>(kernel.getArgumentTypes().back());
  int64_t rank = result.getRank();
  auto extentsOf = [&](Value argument) -> SmallVector<Value> {
    auto type = cast<RankedTensorType>(argument.getType());
    int64_t r = type.getRank();
    SmallVector<Value> extents(r);
    unsigned position = cast<BlockArgument>(argument).getArgNumber();
    if (position == 0) {
      extents[r - 2] = m, extents[r - 1] = sizeK;
    } else if (position == 1) {
      extents[r - 2] = transposedB ? n : sizeK, extents[r - 1] = transposedB ? sizeK : n;
    } else {
      for (int64_t j = 0; j < r; ++j) {
        int64_t resultDim = rank - r + j;
        if (type.getDimSize(j) != 1 && resultDim == rank - 2)
          extents[j] = m;
        else if (type.getDimSize(j) != 1 && resultDim == rank - 1)
          extents[j] = n;
      }
    }
    return extents;
  };
  for (BlockArgument argument : kernel.getArguments())
    if (auto it = globals.find(argument); it != globals.end())
      it->second.extents = extentsOf(argument);
  output.extents = extentsOf(kernel.getArguments().back());
  SmallVector<Value> ivs = forall.getInductionVars();
  setLoopExtent(ivs[rank - 2], m);
  setLoopExtent(ivs[rank - 1], n);
  setExtentTile(m, bm);
  setExtentTile(n, bn);
  setExtentTile(sizeK, bk);
}

LogicalResult MmaMatmulLowering::lowerBody(scf::ForallOp forall) {
  for (Operation &op : forall.getBody()->without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(&op);
    if (!insert || insert.getDest() != forall.getRegionIterArgs()[0])
      return op.emitOpError() << kWhat << ": a matmul kernel inserts its tile into its one result";
    if (failed(lowerInsert(insert)))
      return failure();
  }
  return success();
}

FailureOr<int64_t> MmaMatmulLowering::lowerKernel(func::FuncOp kernel, scf::ForallOp forall, MatmulOp product,
                                                  Block &entry, ValueRange sizeParams,
                                                  SmallVectorImpl<int64_t> &sizes) {
  if (failed(bindKernel(kernel, forall, entry, kWhat)))
    return failure();
  if (product) {
    auto lhs = cast<RankedTensorType>(kernel.getArgumentTypes().front());
    auto result = cast<RankedTensorType>(kernel.getArgumentTypes().back());
    sizes.assign({result.getDimSize(result.getRank() - 2), result.getShape().back(), lhs.getShape().back()});
    makeSizeGeneric(kernel, forall, sizeParams, product.getTransposeRhs());
  }
  FailureOr<int64_t> blocks = mapIterationToBlock(forall, kWhat, groupRows, clusterSplits);
  if (failed(blocks) || failed(lowerBody(forall)))
    return failure();
  return blocks;
}

FailureOr<MmaTiledLoop> gpukernel::mmaTiledLoop(func::FuncOp kernel, size_t tileSizes, StringRef what,
                                                StringRef lowering, StringRef configLowering) {
  auto forall = dyn_cast_or_null<scf::ForallOp>(kernelOpOf(kernel));
  ConfigAttr config = forall ? getConfig(forall) : ConfigAttr();
  if (!config || config.getLowering() != configLowering || config.getTile().size() != tileSizes)
    return kernel.emitError() << lowering << ": no tiled loop with a \"" << configLowering << "\" " << what
                              << " config in the kernel";
  auto layout = forall->getAttrOfType<MmaLayoutAttr>(kLayoutAttrName);
  if (!layout)
    return forall.emitError() << lowering << ": no #kiln.mma_layout on the loop (run kiln-assign-layouts)";
  return MmaTiledLoop{forall, config, layout};
}

FailureOr<KernelLaunch> kiln::lowerMmaMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                                   func::FuncOp kernel, StringRef name) {
  FailureOr<MmaTiledLoop> tiled = mmaTiledLoop(kernel, 3, "matmul", kWhat);
  if (failed(tiled))
    return failure();
  auto [forall, config, layout] = *tiled;
  int64_t bm = config.getTile()[0], bn = config.getTile()[1], bk = config.getTile()[2];
  int64_t threads = config.getWarps() * 32;
  MatmulOp product;
  forall.getBody()->walk([&](MatmulOp op) { product = op; });
  bool transposedB = product && product.getTransposeRhs();
  Type element = product ? product.getLhs().getType().getElementType() : builder.getBF16Type();
  int64_t depth = element.isF32() ? 8 : 16;
  if (layout.getWarpsM() * layout.getWarpsN() != config.getWarps() || bm % (layout.getWarpsM() * 16) != 0 ||
      bn % (layout.getWarpsN() * 8) != 0 || bk % depth != 0 || config.getStages() < 2)
    return forall.emitError() << kWhat << ": " << layout << " does not split " << config
                              << " into whole m16n8k" << depth << " fragments";

  // The operand rings (kiln::mmaOperandSlots: the layout kiln-select-config sizes the stages by).
  MmaOperandSlots slots = mmaOperandSlots(bm, bn, bk, transposedB, element.getIntOrFloatBitWidth());
  int64_t sharedBytes = product ? config.getStages() * slots.stageBytes : 0;

  SmallVector<RankedTensorType> buffers;
  for (Type type : kernel.getArgumentTypes())
    buffers.push_back(cast<RankedTensorType>(type));
  Location loc = forall.getLoc();
  OpBuilder::InsertionGuard guard(builder);
  // Size-generic (M, N and K parameters after the buffers) when there is a contraction to run.
  KernelFunction gpuKernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes,
                                         /*sharedAlignment=*/16, /*sizeParams=*/product ? 3 : 0);
  MmaMatmulLowering lowering(builder, loc, config, layout, threads);
  if (product) {
    int64_t stages = config.getStages();
    lowering.ringA = {sharedView(builder, loc, gpuKernel.sharedBytes, 0, stages * slots.slotA, element),
                      slots.rowsA, slots.columnsA, slots.strideA, slots.slotA};
    lowering.ringB = {
        sharedView(builder, loc, gpuKernel.sharedBytes, stages * slots.slotA, stages * slots.slotB, element),
        slots.rowsB, slots.columnsB, slots.strideB, slots.slotB};
  }
  Block &entry = gpuKernel.func.getBody().front();
  SmallVector<int64_t, 3> sizes;
  FailureOr<int64_t> blocks =
      lowering.lowerKernel(kernel, forall, product, entry, entry.getArguments().take_back(3), sizes);
  if (failed(blocks))
    return failure();
  gpu::ReturnOp::create(builder, loc);
  eraseDeadOps(gpuKernel.func);
  return KernelLaunch{{*blocks, 1, 1}, {threads, 1, 1}, sharedBytes, sizes};
}
