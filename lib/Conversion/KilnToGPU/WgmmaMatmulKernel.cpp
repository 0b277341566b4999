//===- WgmmaMatmulKernel.cpp - kiln.matmul as a Hopper wgmma kernel --------===//
//
// On sm_90a the tensor cores read their operands straight from shared memory, a warpgroup (4 warps) at a time,
// asynchronously: wgmma.mma_async m64nNk16 does 64 x N x 16 per instruction against the ldmatrix + mma.sync
// kernel's 16 x 8 x 16 per warp, and no register file traffic for A and B. The kernel:
//   - grid (ceil(N/BN), ceil(M/BM), batch); BM / 64 warpgroups per block, each owning 64 rows x BN columns,
//     its accumulators (BN / 2 f32 per thread) in registers;
//   - A [BM x 64] and B tiles copied with 16-byte cp.async into a `stages`-deep ring, in the 128-byte swizzled
//     layout that wgmma reads without bank conflicts (chunk c of row r lands at chunk c ^ (r % 8)): A and a
//     transposed B ([N][K]) K-major, an untransposed B ([K][N]) N-major in 64-column panels;
//   - per k-tile: wait for its copies, fence them into the async proxy, one barrier, start the copies of a tile
//     `stages` - 2 ahead into the slot the wgmma two tiles back read, then 4 wgmma (K = 64) committed as a group,
//     and wait until only that group is in flight, so the tensor cores run while the next tile's copies land;
//   - the accumulators staged in shared memory as an f32 tile (the operand ring is free by then), then stored
//     by the whole block in chunks of 8 consecutive columns, the epilogue region applied per element of a
//     chunk: a fifth of the code of one epilogue copy per accumulator, which assembles a quarter faster, and
//     whole 16-byte stores.
// Shared-memory descriptors are built in the kernel from the buffer's address (wgmma's 64-bit matrix
// descriptor: start address, leading and stride byte offsets, swizzle mode); the buffer is 1024-byte aligned,
// the period of the 128-byte swizzle, so that every descriptor's base offset is 0.
//
//===----------------------------------------------------------------------===//

#include "MatmulParts.h"
#include "WgmmaBuilding.h"

#include "Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

FailureOr<KernelLaunch> kiln::buildWgmmaMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module, MatmulOp op,
                                                     StringRef name) {
  ConfigAttr config = getConfig(op);
  if (!config || config.getLowering() != "wgmma" || config.getTile().size() != 3)
    return op.emitOpError() << "needs a #kiln.config with lowering = \"wgmma\" and tile = [BM, BN, BK] for the "
                               "wgmma kernel";
  if (failed(checkMatmulOperands(op, "wgmma")))
    return failure();
  Type element = op.getLhs().getType().getElementType();
  int64_t bm = config.getTile()[0], bn = config.getTile()[1], bk = config.getTile()[2];
  int64_t warps = config.getWarps(), stages = config.getStages();
  // BK is one swizzled row.
  if (bm % 64 != 0 || warps != bm / 16 || bn % 64 != 0 || bn > 256 || bk != kSwizzleRowElements || stages < 3 ||
      (bk * bn / 8) % (warps * 32) != 0)
    return op.emitOpError() << "#kiln.config " << config
                            << " does not fit the wgmma kernel: need BM a multiple of 64 with one warpgroup (4 "
                               "warps) per 64 rows, BN a multiple of 64 up to 256, BK = 64, stages >= 3 and whole "
                               "16-byte chunks of the B tile per thread";
  int64_t threads = warps * 32;
  bool transB = op.getTransposeRhs();

  // One slot of A is bm rows of 128 bytes; one of B bn rows (K-major) or bn / 64 panels of 64 k-rows. The f32
  // tile the epilogue stores from reuses the ring.
  int64_t slotA = bm * kSwizzleRowElements, slotB = bn * kSwizzleRowElements;
  int64_t stagingBytes = bm * (bn + kStagingRowPad) * 4;
  int64_t sharedBytes = std::max(stages * (slotA + slotB) * 2, stagingBytes);
  if (sharedBytes > maxSharedBytesPerBlock(Target::Sm90a))
    return op.emitOpError() << "#kiln.config " << config << " needs " << sharedBytes
                            << " bytes of shared memory for its operand ring or its epilogue tile; the GPU has "
                            << maxSharedBytesPerBlock(Target::Sm90a);

  Location loc = op.getLoc();
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  MatmulFrame frame = startMatmulKernel(builder, module, op, name, bm, bn, threads, sharedBytes, 1024);
  IndexMath im{builder, loc};
  Value sharedA = sharedView(builder, loc, frame.kernel.sharedBytes, 0, stages * slotA, element);
  Value sharedB = sharedView(builder, loc, frame.kernel.sharedBytes, stages * slotA, stages * slotB, element);

  // A [bm][64] and a transposed B [bn][64] are one panel; an untransposed B [64][bn] is bn / 64 panels.
  auto issueLoads = [&](Value kTile, Value slot) {
    return copyTiles(
        builder, im, frame, bm, bn, bk, threads, kTile, sharedA,
        [&](Value row, Value col) { return im.add(im.mul(slot, slotA), swizzledPanelIndex(im, row, col, bm)); },
        sharedB,
        [&](Value row, Value col) {
          return im.add(im.mul(slot, slotB), swizzledPanelIndex(im, row, col, transB ? bn : bk));
        });
  };

  // A: K-major, 8-row groups 1024 bytes apart. B: K-major the same way, or N-major with 64-column panels
  // (leading offset) of 64 k-rows, 8-k-row groups 1024 bytes apart (stride offset).
  DescriptorBuilder descriptors(builder, loc, frame.kernel.sharedBytes);
  int64_t leadingB = transB ? 16 : bk * kSwizzleRowBytes;
  int64_t stepB = transB ? 32 : 16 * kSwizzleRowBytes; // bytes between the K = 16 steps of B
  Value warpgroup = im.div(frame.tid, 128);

  Value lastGroup;
  for (int64_t s = 0; s < stages - 2; ++s)
    lastGroup = issueLoads(im.c(s), im.c(s));

  Value zero = zeroAccumulator(builder, loc, bn);
  Type accType = zero.getType();
  // At least one k-tile (K = 0 reads one zero-filled tile), which tells LLVM that the loop runs.
  Value kTiles = im.max(im.div(im.add(frame.sizeK, bk - 1), bk), im.c(1));
  auto wgmmaType = element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  auto loop = scf::ForOp::create(
      builder, loc, im.c(0), kTiles, im.c(1), ValueRange{zero},
      [&](OpBuilder &nested, Location, Value kTile, ValueRange accs) {
        OpBuilder::InsertionGuard loopGuard(builder);
        builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        // This tile's copies are in once at most the stages - 3 younger groups are pending; then they are made
        // visible to wgmma, which reads through the async proxy.
        nvgpu::DeviceAsyncWaitOp::create(builder, loc, lastGroup, builder.getI32IntegerAttr(stages - 3));
        fenceCopiesForWgmma(builder, loc);
        gpu::BarrierOp::create(builder, loc);
        // Every warpgroup has finished the wgmma of tile kTile - 2 (waited for below): its slot is free.
        Value next = im.add(kTile, stages - 2);
        issueLoads(next, im.rem(next, stages));
        Value slot = im.rem(kTile, stages);
        Value offsetA = im.add(im.mul(slot, slotA * 2), im.mul(warpgroup, 64 * kSwizzleRowBytes));
        Value offsetB = im.add(im.c(stages * slotA * 2), im.mul(slot, slotB * 2));
        NVVM::WgmmaFenceAlignedOp::create(builder, loc);
        Value acc = accs.front();
        for (int64_t step = 0; step < bk / 16; ++step) {
          Value descA = descriptors.get(im.add(offsetA, step * 32), 16, 8 * kSwizzleRowBytes);
          Value descB = descriptors.get(im.add(offsetB, step * stepB), leadingB, 8 * kSwizzleRowBytes);
          acc = NVVM::WgmmaMmaAsyncOp::create(
              builder, loc, accType, acc, descA, descB, NVVM::MMAShapeAttr::get(ctx, 64, bn, 16), wgmmaType,
              wgmmaType, NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one,
              NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
              transB ? NVVM::MMALayout::col : NVVM::MMALayout::row, /*satfinite=*/nullptr);
        }
        NVVM::WgmmaGroupSyncAlignedOp::create(builder, loc);
        NVVM::WgmmaWaitGroupSyncOp::create(builder, loc, builder.getI64IntegerAttr(1));
        scf::YieldOp::create(builder, loc, acc);
      });
  NVVM::WgmmaWaitGroupSyncOp::create(builder, loc, builder.getI64IntegerAttr(0));
  nvgpu::DeviceAsyncWaitOp::create(builder, loc, lastGroup, builder.getI32IntegerAttr(0));

  // Every warpgroup is done reading the ring: it becomes the f32 tile. Accumulator layout of m64nNk16: warp w of
  // the warpgroup holds rows 16w..16w+15; for each 8-column block j, d[4j], d[4j+1] sit on row lane/4, columns
  // 8j + 2 (lane % 4) + {0, 1}, and d[4j+2], d[4j+3] eight rows below.
  gpu::BarrierOp::create(builder, loc);
  Type f32 = builder.getF32Type();
  Value staging = sharedView(builder, loc, frame.kernel.sharedBytes, 0, bm * (bn + kStagingRowPad), f32);
  Value lane = im.rem(frame.tid, 32), warpInGroup = im.rem(im.div(frame.tid, 32), 4);
  Value rowBase = im.add(im.mul(warpgroup, 64), im.add(im.mul(warpInGroup, 16), im.div(lane, 4)));
  Value colBase = im.mul(im.rem(lane, 4), 2);
  Value result = loop.getResult(0);
  auto pairType = VectorType::get({2}, f32);
  for (int64_t j = 0; j < bn / 8; ++j)
    for (int64_t e = 0; e < 4; e += 2) {
      Value pair = vector::FromElementsOp::create(
          builder, loc, pairType,
          ValueRange{LLVM::ExtractValueOp::create(builder, loc, result, ArrayRef<int64_t>{4 * j + e}),
                     LLVM::ExtractValueOp::create(builder, loc, result, ArrayRef<int64_t>{4 * j + e + 1})});
      Value at = im.add(im.mul(im.add(rowBase, e >= 2 ? 8 : 0), bn + kStagingRowPad), im.add(colBase, 8 * j));
      vector::StoreOp::create(builder, loc, pair, staging, ValueRange{at}, /*nontemporal=*/false,
                              llvm::MaybeAlign(8));
    }
  gpu::BarrierOp::create(builder, loc);
  storeStagedTile(builder, im, frame, staging, bm, bn, threads);
  gpu::ReturnOp::create(builder, loc);
  return matmulLaunch(frame, bm, bn, threads, sharedBytes);
}
