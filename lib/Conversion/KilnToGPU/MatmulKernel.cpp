//===- MatmulKernel.cpp - kiln.matmul as an mma.sync GPU kernel ------------===//
//
// The Ampere-style GEMM that every tensor-core library starts from, emitted op by op:
//   - grid (ceil(N/BN), ceil(M/BM), batch); `warps` warps per block, laid out warpsM x warpsN over the tile;
//   - A [BM x BK] and B [BK x BN] (or B^T [BN x BK]) tiles copied with 16-byte cp.async into a `stages`-deep
//     ring in dynamic shared memory, rows padded by 16 bytes so that ldmatrix hits distinct banks; tiles past
//     the edge of M, N or K are zero-filled by the copy itself (cp.async's source size);
//   - ldmatrix.x4 (A) and ldmatrix.x2[.trans] (B) into registers, mma.sync.m16n8k16 with f32 accumulators;
//   - the epilogue region applied per element in registers, then a bounds-checked store.
// bf16 goes through nvvm.mma.sync directly (nvgpu.mma.sync only lowers f16); operands are packed as i32.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "KernelBuilding.h"

#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;


FailureOr<KernelLaunch> kiln::buildMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module, MatmulOp op,
                                                StringRef name) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getLowering() != "mma_sync" || config.getTile().size() != 3)
    return op.emitOpError() << "needs a #kiln.config with lowering = \"mma_sync\" and tile = [BM, BN, BK] for "
                               "the GPU backend";
  RankedTensorType lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType(), outType = op.getType();
  Type element = lhsType.getElementType();
  if (!element.isBF16() && !element.isF16())
    return op.emitOpError() << "the mma_sync lowering takes bf16 or f16 operands, got " << element;
  if (op.getTransposeLhs())
    return op.emitOpError() << "the mma_sync lowering does not take transpose_lhs yet";
  int64_t rank = outType.getRank(), m = outType.getDimSize(rank - 2), n = outType.getDimSize(rank - 1);
  int64_t k = lhsType.getDimSize(lhsType.getRank() - 1);
  bool transB = op.getTransposeRhs();
  if (k % 8 != 0 || (!transB && n % 8 != 0))
    return op.emitOpError() << "the mma_sync lowering copies 16-byte rows and needs K (" << k
                            << ") and, for an untransposed rhs, N (" << n << ") to be multiples of 8";
  int64_t bm = config.getTile()[0], bn = config.getTile()[1], bk = config.getTile()[2];
  int64_t warps = config.getWarps(), stages = config.getStages();
  // Warps split the tile into the squarest warp tiles the fragment sizes allow (fewer shared-memory reads per
  // mma), rows first on ties.
  int64_t warpsM = 1;
  int64_t bestImbalance = INT64_MAX;
  for (int64_t candidate : {8, 4, 2, 1}) {
    if (warps % candidate != 0 || bm % (candidate * 16) != 0 || bn % ((warps / candidate) * 8) != 0)
      continue;
    int64_t imbalance = std::abs(bm / candidate - bn / (warps / candidate));
    if (imbalance < bestImbalance)
      bestImbalance = imbalance, warpsM = candidate;
  }
  int64_t warpsN = warps / warpsM, wm = bm / warpsM, wn = bn / warpsN, threads = warps * 32;
  if (bm % (warpsM * 16) != 0 || bn % (warpsN * 8) != 0 || bk % 16 != 0 || stages < 2 ||
      (bm * bk / 8) % threads != 0 || (bk * bn / 8) % threads != 0)
    return op.emitOpError() << "#kiln.config " << config
                            << " does not fit the mma_sync kernel: need BM a multiple of 16 x warp rows, BN of 8 x "
                               "warp columns, BK of 16, stages >= 2 and the same number of 16-byte chunks of each "
                               "tile per thread";
  int64_t fragsM = wm / 16, fragsN = wn / 8;

  // Shared memory: rows padded by 8 elements (16 bytes).
  int64_t strideA = bk + 8, strideB = transB ? bk + 8 : bn + 8;
  int64_t stageA = bm * strideA, stageB = (transB ? bn : bk) * strideB;
  int64_t sharedElements = stages * (stageA + stageB), sharedBytes = sharedElements * 2;

  MLIRContext *ctx = builder.getContext();
  Location loc = op.getLoc();
  OpBuilder::InsertionGuard guard(builder);
  // Parameters: lhs, rhs, epilogue operands, out.
  SmallVector<RankedTensorType> buffers{lhsType, rhsType};
  for (Value operand : op.getEpilogueOperands())
    buffers.push_back(cast<RankedTensorType>(operand.getType()));
  buffers.push_back(outType);
  KernelFunction kernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes);
  Block &entry = kernel.func.getBody().front();
  Value lhs = entry.getArgument(0), rhs = entry.getArgument(1), out = entry.getArguments().back();
  ValueRange epilogueArgs = entry.getArguments().slice(2, op.getEpilogueOperands().size());
  IndexMath im{builder, loc};
  Value sharedA = sharedView(builder, loc, kernel.sharedBytes, 0, stages * stageA, element);
  Value sharedB = sharedView(builder, loc, kernel.sharedBytes, stages * stageA, stages * stageB, element);

  Value tid = gpu::ThreadIdOp::create(builder, loc, gpu::Dimension::x);
  Value blockN = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  Value blockM = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::y);
  Value batch = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::z);
  Value m0 = im.mul(blockM, bm), n0 = im.mul(blockN, bn);
  Value warp = im.div(tid, 32), lane = im.rem(tid, 32);
  Value wm0 = im.mul(im.div(warp, warpsN), wm), wn0 = im.mul(im.rem(warp, warpsN), wn);

  // Batch indices of the result, and each operand's batch offset (broadcast batch dims read index 0).
  ArrayRef<int64_t> outShape = outType.getShape();
  SmallVector<Value> resultIndex(rank, nullptr);
  {
    Value remaining = batch;
    for (int64_t d = rank - 3; d >= 0; --d) {
      resultIndex[d] = im.rem(remaining, outShape[d]);
      remaining = im.div(remaining, outShape[d]);
    }
  }
  auto batchOffset = [&](RankedTensorType type) {
    SmallVector<int64_t> batchShape(type.getShape().drop_back(2)), resultBatch(outShape.drop_back(2));
    Value index = broadcastLinearIndex(im, batchShape, resultBatch, ArrayRef<Value>(resultIndex).drop_back(2));
    return im.mul(index, type.getDimSize(type.getRank() - 2) * type.getDimSize(type.getRank() - 1));
  };
  Value offsetA = batchOffset(lhsType), offsetB = batchOffset(rhsType);
  Value outOffset = im.mul(batch, m * n);

  int64_t kTiles = llvm::divideCeilSigned(k, bk);
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  // Issues the copies of k-tile `kTile` into ring slot `stage`; out-of-range chunks copy 0 bytes (zero-fill).
  auto issueLoads = [&](Value kTile, Value stage) {
    Value k0 = im.mul(kTile, bk);
    SmallVector<Value> tokens;
    auto copy = [&](Value shared, Value sharedIndex, Value global, Value globalIndex, Value count) {
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(builder, loc, tokenType, shared, sharedIndex, global,
                                                        globalIndex, builder.getIndexAttr(8), count,
                                                        builder.getUnitAttr()));
    };
    auto chunkCount = [&](Value rowValid, Value column, int64_t limit) {
      Value left = arith::SubIOp::create(builder, loc, im.c(limit), im.min(column, im.c(limit)));
      return im.select(rowValid, im.min(left, im.c(8)), im.c(0));
    };
    // Each thread copies whole 16-byte chunks (the config check guarantees an equal number per thread).
    int64_t chunksA = bk / 8;
    for (int64_t i = 0; i < bm * bk / 8 / threads; ++i) {
      Value chunk = im.add(tid, i * threads);
      Value row = im.div(chunk, chunksA), col = im.mul(im.rem(chunk, chunksA), 8);
      Value gRow = im.add(m0, row), gCol = im.add(k0, col);
      Value count = chunkCount(im.lt(gRow, m), gCol, k);
      Value valid = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, count, im.c(0));
      Value src = im.select(valid, im.add(offsetA, im.add(im.mul(gRow, k), gCol)), im.c(0));
      copy(sharedA, im.add(im.mul(stage, stageA), im.add(im.mul(row, strideA), col)), lhs, src, count);
    }
    int64_t chunksB = (transB ? bk : bn) / 8;
    for (int64_t i = 0; i < bk * bn / 8 / threads; ++i) {
      Value chunk = im.add(tid, i * threads);
      Value row = im.div(chunk, chunksB), col = im.mul(im.rem(chunk, chunksB), 8);
      Value count, src;
      if (transB) { // rhs stored [N][K]: rows are n, columns k.
        Value gRow = im.add(n0, row), gCol = im.add(k0, col);
        count = chunkCount(im.lt(gRow, n), gCol, k);
        src = im.add(offsetB, im.add(im.mul(gRow, k), gCol));
      } else { // rhs stored [K][N]: rows are k, columns n.
        Value gRow = im.add(k0, row), gCol = im.add(n0, col);
        count = chunkCount(im.lt(gRow, k), gCol, n);
        src = im.add(offsetB, im.add(im.mul(gRow, n), gCol));
      }
      Value valid = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, count, im.c(0));
      src = im.select(valid, src, im.c(0));
      copy(sharedB, im.add(im.mul(stage, stageB), im.add(im.mul(row, strideB), col)), rhs, src, count);
    }
    return nvgpu::DeviceAsyncCreateGroupOp::create(builder, loc, tokenType, tokens).getResult();
  };

  Value lastGroup;
  for (int64_t s = 0; s < stages - 1; ++s)
    lastGroup = issueLoads(im.c(s), im.c(s));

  auto accType = VectorType::get({4}, builder.getF32Type());
  Value zeroAcc = arith::ConstantOp::create(builder, loc, DenseElementsAttr::get(accType, 0.0f));
  SmallVector<Value> accInits(fragsM * fragsN, zeroAcc);
  auto fragA = VectorType::get({4, 2}, element);
  Value laneRow16 = im.rem(lane, 16), laneHalf = im.mul(im.div(lane, 16), 8);

  auto loop = scf::ForOp::create(
      builder, loc, im.c(0), im.c(kTiles), im.c(1), accInits,
      [&](OpBuilder &nested, Location, Value kTile, ValueRange accs) {
        OpBuilder::InsertionGuard loopGuard(builder);
        builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        nvgpu::DeviceAsyncWaitOp::create(builder, loc, lastGroup, builder.getI32IntegerAttr(stages - 2));
        gpu::BarrierOp::create(builder, loc);
        Value next = im.add(kTile, stages - 1);
        issueLoads(next, im.rem(next, stages));
        Value stage = im.rem(kTile, stages);
        Value baseA = im.mul(stage, stageA), baseB = im.mul(stage, stageB);
        SmallVector<Value> current(accs);
        for (int64_t kk = 0; kk < bk / 16; ++kk) {
          SmallVector<SmallVector<Value>> aRegs, bRegs;
          for (int64_t i = 0; i < fragsM; ++i) {
            Value row = im.add(wm0, im.add(laneRow16, i * 16)), col = im.add(laneHalf, kk * 16);
            Value index = im.add(baseA, im.add(im.mul(row, strideA), col));
            Value frag = nvgpu::LdMatrixOp::create(builder, loc, fragA, sharedA, index, builder.getBoolAttr(false),
                                                   builder.getI32IntegerAttr(4));
            aRegs.push_back(packFragment(builder, loc, frag));
          }
          for (int64_t j = 0; j < fragsN; j += 2) {
            auto [first, second] = loadBFragmentPair(builder, loc, im, sharedB, baseB, strideB, lane,
                                                     im.c(kk * 16), im.add(wn0, j * 8), /*kMajor=*/!transB);
            bRegs.push_back(first);
            bRegs.push_back(second);
          }
          for (int64_t i = 0; i < fragsM; ++i)
            for (int64_t j = 0; j < fragsN; ++j) {
              Value &acc = current[i * fragsN + j];
              acc = mmaSync(builder, loc, aRegs[i], bRegs[j], acc, element.isBF16());
            }
        }
        scf::YieldOp::create(builder, loc, current);
      });
  nvgpu::DeviceAsyncWaitOp::create(builder, loc, lastGroup, builder.getI32IntegerAttr(0));

  // Epilogue and store, element by element: c0,c1 on row lane/4, c2,c3 eight rows below; columns 2*(lane%4)+{0,1}.
  Value quadRow = im.div(lane, 4), quadCol = im.mul(im.rem(lane, 4), 2);
  Type outElement = outType.getElementType();
  for (int64_t i = 0; i < fragsM; ++i)
    for (int64_t j = 0; j < fragsN; ++j) {
      Value acc = loop.getResult(i * fragsN + j);
      for (int64_t e = 0; e < 4; ++e) {
        Value row = im.add(m0, im.add(wm0, im.add(quadRow, i * 16 + (e >= 2 ? 8 : 0))));
        Value col = im.add(n0, im.add(wn0, im.add(quadCol, j * 8 + e % 2)));
        Value inside = im.andi(im.lt(row, m), im.lt(col, n));
        scf::IfOp::create(builder, loc, inside, [&](OpBuilder &thenBuilder, Location) {
          OpBuilder::InsertionGuard thenGuard(builder);
          builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
          Value value = vector::ExtractOp::create(builder, loc, acc, ArrayRef<int64_t>{e});
          if (op.hasEpilogue()) {
            Block &body = op.getEpilogue().front();
            IRMapping mapping;
            mapping.map(body.getArgument(0), value);
            SmallVector<Value> position(resultIndex);
            position[rank - 2] = row;
            position[rank - 1] = col;
            for (auto [index, operand] : llvm::enumerate(op.getEpilogueOperands())) {
              auto type = cast<RankedTensorType>(operand.getType());
              Value at = broadcastLinearIndex(im, type.getShape(), outShape, position);
              Value loaded = memref::LoadOp::create(builder, loc, epilogueArgs[index], at);
              if (!type.getElementType().isF32())
                loaded = arith::ExtFOp::create(builder, loc, builder.getF32Type(), loaded);
              mapping.map(body.getArgument(index + 1), loaded);
            }
            for (Operation &inner : body.without_terminator())
              builder.clone(inner, mapping);
            value = mapping.lookup(body.getTerminator()->getOperand(0));
          }
          if (!outElement.isF32())
            value = arith::TruncFOp::create(builder, loc, outElement, value);
          memref::StoreOp::create(builder, loc, value, out, im.add(outOffset, im.add(im.mul(row, n), col)));
          scf::YieldOp::create(builder, loc);
        });
      }
    }
  gpu::ReturnOp::create(builder, loc);

  int64_t batchCount = 1;
  for (int64_t d = 0; d < rank - 2; ++d)
    batchCount *= outShape[d];
  return KernelLaunch{{llvm::divideCeilSigned(n, bn), llvm::divideCeilSigned(m, bm), batchCount}, {threads, 1, 1}, sharedBytes};
}
