//===- MatmulParts.cpp - What the wgmma GEMM kernel builds around its loop --===//
//
// Operand checks, kernel start and batch offsets, and the epilogue and stores of the wgmma matmul kernel: per
// chunk of 8 columns from a tile staged in shared memory, or per pair of columns where rows are not whole chunks.
//
//===----------------------------------------------------------------------===//

#include "MatmulParts.h"

#include "Transforms/Transforms.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

LogicalResult gpukernel::checkMatmulOperands(MatmulOp op, StringRef lowering) {
  RankedTensorType lhsType = op.getLhs().getType(), outType = op.getType();
  Type element = lhsType.getElementType();
  if (!element.isBF16() && !element.isF16())
    return op.emitOpError() << "the " << lowering << " lowering takes bf16 or f16 operands, got " << element;
  if (op.getTransposeLhs())
    return op.emitOpError() << "the " << lowering << " lowering does not take transpose_lhs yet";
  int64_t n = outType.getDimSize(outType.getRank() - 1), k = lhsType.getDimSize(lhsType.getRank() - 1);
  if (k % 8 != 0 || (!op.getTransposeRhs() && n % 8 != 0))
    return op.emitOpError() << "the " << lowering << " lowering copies 16-byte rows and needs K (" << k
                            << ") and, for an untransposed rhs, N (" << n << ") to be multiples of 8";
  return success();
}

MatmulFrame gpukernel::startMatmulKernel(OpBuilder &b, gpu::GPUModuleOp module, MatmulOp op, StringRef name,
                                         int64_t bm, int64_t bn, int64_t threads, int64_t sharedBytes,
                                         int64_t sharedAlignment) {
  RankedTensorType lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType(), outType = op.getType();
  int64_t rank = outType.getRank();
  MatmulFrame frame{op,
                    outType.getDimSize(rank - 2),
                    outType.getDimSize(rank - 1),
                    lhsType.getDimSize(lhsType.getRank() - 1),
                    op.getTransposeRhs()};
  Location loc = op.getLoc();
  // Parameters: lhs, rhs, epilogue operands, out.
  SmallVector<RankedTensorType> buffers{lhsType, rhsType};
  for (Value operand : op.getEpilogueOperands())
    buffers.push_back(cast<RankedTensorType>(operand.getType()));
  buffers.push_back(outType);
  frame.kernel = startKernel(b, module, loc, name, buffers, threads, sharedBytes, sharedAlignment,
                             /*sizeParams=*/3);
  Block &entry = frame.kernel.func.getBody().front();
  unsigned numBuffers = buffers.size();
  frame.lhs = entry.getArgument(0);
  frame.rhs = entry.getArgument(1);
  frame.out = entry.getArgument(numBuffers - 1);
  frame.sizeM = entry.getArgument(numBuffers);
  frame.sizeN = entry.getArgument(numBuffers + 1);
  frame.sizeK = entry.getArgument(numBuffers + 2);
  auto epilogueArgs = entry.getArguments().slice(2, op.getEpilogueOperands().size());
  frame.epilogueArgs.assign(epilogueArgs.begin(), epilogueArgs.end());

  IndexMath im{b, loc};
  frame.tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value blockN = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value blockM = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  Value batch = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  frame.m0 = im.mul(blockM, bm);
  frame.n0 = im.mul(blockN, bn);

  // Batch indices of the result, and each operand's batch offset (broadcast batch dims read index 0).
  ArrayRef<int64_t> outShape = outType.getShape();
  frame.resultIndex.assign(rank, nullptr);
  Value remaining = batch;
  for (int64_t d = rank - 3; d >= 0; --d) {
    frame.resultIndex[d] = im.rem(remaining, outShape[d]);
    remaining = im.div(remaining, outShape[d]);
  }
  auto batchIndex = [&](RankedTensorType type) {
    SmallVector<int64_t> batchShape(type.getShape().drop_back(2)), resultBatch(outShape.drop_back(2));
    return broadcastLinearIndex(im, batchShape, resultBatch, ArrayRef<Value>(frame.resultIndex).drop_back(2));
  };
  frame.batchA = batchIndex(lhsType);
  frame.batchB = batchIndex(rhsType);
  frame.offsetA = im.mul(frame.batchA, im.mul(frame.sizeM, frame.sizeK));
  frame.offsetB = im.mul(frame.batchB, im.mul(frame.sizeK, frame.sizeN));
  frame.outOffset = im.mul(batch, im.mul(frame.sizeM, frame.sizeN));
  return frame;
}

/// The epilogue applied to the f32 accumulator `value` of output element (row, column), in the output type.
static Value finishElement(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value row, Value column,
                           Value value) {
  Location loc = im.loc;
  MatmulOp op = frame.op;
  RankedTensorType outType = op.getType();
  int64_t rank = outType.getRank();
  if (op.hasEpilogue()) {
    Block &body = op.getEpilogue().front();
    IRMapping mapping;
    mapping.map(body.getArgument(0), value);
    SmallVector<Value> position(frame.resultIndex);
    position[rank - 2] = row;
    position[rank - 1] = column;
    for (auto [index, operand] : llvm::enumerate(op.getEpilogueOperands())) {
      auto type = cast<RankedTensorType>(operand.getType());
      SmallVector<Value> extents(rank, nullptr);
      extents[rank - 2] = frame.sizeM;
      extents[rank - 1] = frame.sizeN;
      Value at = broadcastLinearIndex(im, type.getShape(), outType.getShape(), position, extents);
      Value loaded = memref::LoadOp::create(b, loc, frame.epilogueArgs[index], at);
      if (!type.getElementType().isF32())
        loaded = arith::ExtFOp::create(b, loc, b.getF32Type(), loaded);
      mapping.map(body.getArgument(index + 1), loaded);
    }
    for (Operation &inner : body.without_terminator())
      b.clone(inner, mapping);
    value = mapping.lookup(body.getTerminator()->getOperand(0));
  }
  if (!outType.getElementType().isF32())
    value = arith::TruncFOp::create(b, loc, outType.getElementType(), value);
  return value;
}

/// Stores output element (row, column) through the epilogue when it lies inside the output.
static void storeOutputElement(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value row, Value column,
                               Value value) {
  Value inside = im.andi(im.lt(row, frame.sizeM), im.lt(column, frame.sizeN));
  scf::IfOp::create(b, im.loc, inside, [&](OpBuilder &thenBuilder, Location) {
    OpBuilder::InsertionGuard thenGuard(b);
    b.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
    memref::StoreOp::create(b, im.loc, finishElement(b, im, frame, row, column, value), frame.out,
                            im.add(frame.outOffset, im.add(im.mul(row, frame.sizeN), column)));
    scf::YieldOp::create(b, im.loc);
  });
}

void gpukernel::storeOutputPair(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value row, Value column,
                                Value first, Value second) {
  if (frame.n % 2 != 0) {
    storeOutputElement(b, im, frame, row, column, first);
    storeOutputElement(b, im, frame, row, im.add(column, 1), second);
    return;
  }
  // With an even row length, an even column's pair lies wholly inside or outside and starts 2-element aligned.
  Location loc = im.loc;
  Value inside = im.andi(im.lt(row, frame.sizeM), im.lt(column, frame.sizeN));
  scf::IfOp::create(b, loc, inside, [&](OpBuilder &thenBuilder, Location) {
    OpBuilder::InsertionGuard thenGuard(b);
    b.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
    Value low = finishElement(b, im, frame, row, column, first);
    Value high = finishElement(b, im, frame, row, im.add(column, 1), second);
    auto pairType = VectorType::get({2}, low.getType());
    Value pair = vector::FromElementsOp::create(b, loc, pairType, ValueRange{low, high});
    int64_t bytes = 2 * low.getType().getIntOrFloatBitWidth() / 8;
    vector::StoreOp::create(b, loc, pair, frame.out,
                            ValueRange{im.add(frame.outOffset, im.add(im.mul(row, frame.sizeN), column))},
                            /*nontemporal=*/false, llvm::MaybeAlign(bytes));
    scf::YieldOp::create(b, loc);
  });
}

/// Stores chunk `chunk` (8 consecutive columns of a row) of a staged tile: its f32 values from shared memory,
/// through the epilogue, into the output (see storeStagedTile).
static void storeStagedChunk(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value staging,
                             int64_t chunksPerRow, int64_t stride, Type outElement, VectorType quarter,
                             Value chunk) {
  Location loc = im.loc;
  Value localRow = im.div(chunk, chunksPerRow), localColumn = im.mul(im.rem(chunk, chunksPerRow), 8);
  Value row = im.add(frame.m0, localRow), column = im.add(frame.n0, localColumn);
  Value at = im.add(im.mul(localRow, stride), localColumn);
  SmallVector<Value> values;
  for (int64_t half = 0; half < 2; ++half) {
    Value four = vector::LoadOp::create(b, loc, quarter, staging, ValueRange{im.add(at, 4 * half)},
                                        /*nontemporal=*/false, llvm::MaybeAlign(16));
    for (int64_t e = 0; e < 4; ++e)
      values.push_back(vector::ExtractOp::create(b, loc, four, ArrayRef<int64_t>{e}));
  }
  if (frame.n % 8 != 0) {
    // Rows that are not whole chunks (a transposed rhs allows any N): pairs where N is even, else elements.
    for (int64_t e = 0; e < 8; e += 2)
      storeOutputPair(b, im, frame, row, im.add(column, e), values[e], values[e + 1]);
  } else {
    // The epilogue runs on every chunk, at the nearest position inside the output (so that its operand loads
    // stay in bounds and issue without waiting for a branch); only the store is guarded.
    Value safeRow = im.min(row, im.sub(frame.sizeM, 1)), safeColumn = im.min(column, im.sub(frame.sizeN, 8));
    SmallVector<Value> finished;
    for (int64_t e = 0; e < 8; ++e)
      finished.push_back(finishElement(b, im, frame, safeRow, im.add(safeColumn, e), values[e]));
    Value pieces = vector::FromElementsOp::create(b, loc, VectorType::get({8}, outElement), finished);
    Value inside = im.andi(im.lt(row, frame.sizeM), im.lt(column, frame.sizeN));
    scf::IfOp::create(b, loc, inside, [&](OpBuilder &thenBuilder, Location) {
      OpBuilder::InsertionGuard thenGuard(b);
      b.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
      vector::StoreOp::create(b, loc, pieces, frame.out,
                              ValueRange{im.add(frame.outOffset, im.add(im.mul(row, frame.sizeN), column))},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
      scf::YieldOp::create(b, loc);
    });
  }
}

void gpukernel::storeStagedTile(OpBuilder &b, IndexMath &im, const MatmulFrame &frame, Value staging, int64_t bm,
                                int64_t bn, int64_t threads) {
  Location loc = im.loc;
  int64_t chunksPerRow = bn / 8, stride = bn + kStagingRowPad, chunks = bm * chunksPerRow;
  // At most four iterations: a thread's chunks in an iteration load their epilogue operands together, so that
  // a wide tile does not wait for global memory once per chunk; a narrow one keeps one chunk an iteration.
  int64_t perIteration = std::max<int64_t>(1, chunks / threads / 4);
  assert(chunks % (threads * perIteration) == 0 && "every thread takes as many chunks");
  Type outElement = frame.op.getType().getElementType();
  auto quarter = VectorType::get({4}, b.getF32Type());
  scf::ForOp::create(
      b, loc, im.c(0), im.c(chunks), im.c(threads * perIteration), ValueRange{},
      [&](OpBuilder &nested, Location, Value first, ValueRange) {
        OpBuilder::InsertionGuard loopGuard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        for (int64_t u = 0; u < perIteration; ++u)
          storeStagedChunk(b, im, frame, staging, chunksPerRow, stride, outElement, quarter,
                           im.add(first, im.add(frame.tid, u * threads)));
        scf::YieldOp::create(b, loc);
      });
}

KernelLaunch gpukernel::matmulLaunch(const MatmulFrame &frame, int64_t bm, int64_t bn, int64_t threads,
                                     int64_t sharedBytes) {
  ArrayRef<int64_t> outShape = frame.op.getType().getShape();
  int64_t batchCount = 1;
  for (int64_t extent : outShape.drop_back(2))
    batchCount *= extent;
  return KernelLaunch{{llvm::divideCeilSigned(frame.n, bn), llvm::divideCeilSigned(frame.m, bm), batchCount},
                      {threads, 1, 1},
                      sharedBytes,
                      {frame.m, frame.n, frame.k}};
}
