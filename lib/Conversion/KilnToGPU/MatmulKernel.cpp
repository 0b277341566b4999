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

#include "MatmulParts.h"

#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

FailureOr<KernelLaunch> kiln::buildMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module, MatmulOp op,
                                                StringRef name) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getLowering() != "mma_sync" || config.getTile().size() != 3)
    return op.emitOpError() << "needs a #kiln.config with lowering = \"mma_sync\" and tile = [BM, BN, BK] for "
                               "the GPU backend";
  if (failed(checkMatmulOperands(op, "mma_sync")))
    return failure();
  Type element = op.getLhs().getType().getElementType();
  bool transB = op.getTransposeRhs();
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
  int64_t sharedBytes = stages * (stageA + stageB) * 2;

  Location loc = op.getLoc();
  OpBuilder::InsertionGuard guard(builder);
  MatmulFrame frame = startMatmulKernel(builder, module, op, name, bm, bn, threads, sharedBytes, 16);
  IndexMath im{builder, loc};
  Value sharedA = sharedView(builder, loc, frame.kernel.sharedBytes, 0, stages * stageA, element);
  Value sharedB = sharedView(builder, loc, frame.kernel.sharedBytes, stages * stageA, stages * stageB, element);
  Value warp = im.div(frame.tid, 32), lane = im.rem(frame.tid, 32);
  Value wm0 = im.mul(im.div(warp, warpsN), wm), wn0 = im.mul(im.rem(warp, warpsN), wn);

  // At least one k-tile (K = 0 reads one zero-filled tile), which tells LLVM that the loop runs.
  Value kTiles = im.max(im.div(im.add(frame.sizeK, bk - 1), bk), im.c(1));
  // Copies k-tile `kTile` into ring slot `stage`, rows padded.
  auto issueLoads = [&](Value kTile, Value stage) {
    return copyTiles(
        builder, im, frame, bm, bn, bk, threads, kTile, sharedA,
        [&](Value row, Value col) { return im.add(im.mul(stage, stageA), im.add(im.mul(row, strideA), col)); },
        sharedB,
        [&](Value row, Value col) { return im.add(im.mul(stage, stageB), im.add(im.mul(row, strideB), col)); });
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
      builder, loc, im.c(0), kTiles, im.c(1), accInits,
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
  for (int64_t i = 0; i < fragsM; ++i)
    for (int64_t j = 0; j < fragsN; ++j) {
      Value acc = loop.getResult(i * fragsN + j);
      for (int64_t e = 0; e < 4; e += 2) {
        Value row = im.add(frame.m0, im.add(wm0, im.add(quadRow, i * 16 + (e >= 2 ? 8 : 0))));
        Value col = im.add(frame.n0, im.add(wn0, im.add(quadCol, j * 8)));
        storeOutputPair(builder, im, frame, row, col,
                        vector::ExtractOp::create(builder, loc, acc, ArrayRef<int64_t>{e}),
                        vector::ExtractOp::create(builder, loc, acc, ArrayRef<int64_t>{e + 1}));
      }
    }
  gpu::ReturnOp::create(builder, loc);
  return matmulLaunch(frame, bm, bn, threads, sharedBytes);
}
