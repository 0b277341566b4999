//===- WgmmaMatmulKernel.cpp - kiln.matmul as a Hopper wgmma kernel --------===//
//
// On sm_90a the tensor cores read their operands straight from shared memory, a warpgroup (4 warps) at a time,
// asynchronously: wgmma.mma_async m64nNk16 does 64 x N x 16 per instruction against the ldmatrix + mma.sync
// kernel's 16 x 8 x 16 per warp, and no register file traffic for A and B. The kernel:
//   - grid (ceil(N/BN), ceil(M/BM), batch); BM / 64 warpgroups per block, each owning 64 rows x BN columns,
//     its accumulators (BN / 2 f32 per thread) in registers;
//   - A [BM x 64] and B tiles copied by TMA into a `stages`-deep ring, in the 128-byte swizzled layout that
//     wgmma reads without bank conflicts (chunk c of row r lands at chunk c ^ (r % 8)): A and a transposed B
//     ([N][K]) K-major, an untransposed B ([K][N]) N-major in 64-column panels. The tensor maps (parameters
//     after the sizes, which the runtime builds at each launch) zero-fill what lies past M, N and K, so the
//     kernel has no bounds code for its loads, and one thread issues a whole tile's copies where every thread
//     used to compute the addresses of its cp.async chunks (the 77-row GEMM's PTX: 388 lines instead of 496,
//     LLVM's share of a cold compile a quarter shorter, the assembler's 15-20%);
//   - per k-tile: wait on the slot's mbarrier (which the tile's copies complete, at the parity of its round
//     through the ring), one barrier, start the copies of a tile `stages` - 2 ahead into the slot the wgmma two
//     tiles back read, then 4 wgmma (K = 64) committed as a group, and wait until only that group is in flight,
//     so the tensor cores run while the next tiles land;
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
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

namespace {
/// The kernel's TMA copies: one tensor map per operand (parameters after the sizes), an mbarrier per ring slot
/// that the copies complete, and the one thread that issues them.
struct TmaCopies {
  OpBuilder &b;
  Location loc;
  IndexMath &im;
  Value mapA, mapB;
  /// The shared buffer's address, and the byte offset of the slots' mbarriers in it.
  Value base;
  int64_t barrierOffset;

  /// A shared-memory pointer `byteOffset` bytes into the buffer.
  Value pointer(Value byteOffset) const {
    Value address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), im.add(base, byteOffset));
    return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3), address);
  }
  Value barrier(Value slot) const { return pointer(im.add(im.mul(slot, 8), barrierOffset)); }
  /// Copies the box of `map` at `coordinates` (innermost first) to `byteOffset`, completing on `bar`.
  void copy(Value map, Value byteOffset, ArrayRef<Value> coordinates, Value bar) const {
    SmallVector<Value> i32s;
    for (Value c : coordinates)
      i32s.push_back(arith::IndexCastOp::create(b, loc, b.getI32Type(), c));
    Value cluster = LLVM::AddrSpaceCastOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 7),
                                                  pointer(byteOffset));
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(b, loc, cluster, map, i32s, bar, ValueRange{},
                                                           Value(), Value(), NVVM::TMALoadMode::TILE,
                                                           /*isCTAOnly=*/false, nullptr, Value());
  }
};
} // namespace

/// Appends `count` tensor-map parameters (`!llvm.ptr`, what a TMA copy names its map by) to the kernel `func`
/// and lists them in `kiln.tensor_map_params`, which kiln-tensor-map-params turns into by-value grid constants
/// once the kernel is lowered. Returns the index of the first.
static FailureOr<unsigned> appendTensorMapParams(gpu::GPUFuncOp func, unsigned count) {
  Builder b(func.getContext());
  unsigned first = func.getNumArguments();
  SmallVector<int64_t> indices;
  for (unsigned i = 0; i < count; ++i) {
    if (failed(func.insertArgument(first + i, LLVM::LLVMPointerType::get(func.getContext()), {}, func.getLoc())))
      return func.emitOpError() << "cannot take a tensor-map parameter";
    indices.push_back(first + i);
  }
  func->setAttr("kiln.tensor_map_params", b.getDenseI64ArrayAttr(indices));
  return first;
}

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
  // BK is one swizzled row; a TMA box spans at most 256 rows.
  if (bm % 64 != 0 || bm > 256 || warps != bm / 16 || bn % 64 != 0 || bn > 256 || bk != kSwizzleRowElements ||
      stages < 3)
    return op.emitOpError() << "#kiln.config " << config
                            << " does not fit the wgmma kernel: need BM a multiple of 64 up to 256 with one "
                               "warpgroup (4 warps) per 64 rows, BN a multiple of 64 up to 256, BK = 64 and "
                               "stages >= 3";
  RankedTensorType lhsType = op.getLhs().getType(), rhsType = op.getRhs().getType();
  int64_t k = lhsType.getDimSize(lhsType.getRank() - 1);
  if (lhsType.getNumElements() == 0 || rhsType.getNumElements() == 0)
    return op.emitOpError() << "the wgmma kernel reads its tiles through TMA, which needs operands of at least "
                               "one element (M, N, K and the batch dims > 0; the mma_sync lowering takes empty "
                               "ones)";
  int64_t threads = warps * 32;
  bool transB = op.getTransposeRhs();

  // One slot of A is bm rows of 128 bytes; one of B bn rows (K-major) or bn / 64 panels of 64 k-rows. The f32
  // tile the epilogue stores from reuses the ring; the slots' mbarriers follow both.
  int64_t slotA = bm * kSwizzleRowElements, slotB = bn * kSwizzleRowElements;
  int64_t stagingBytes = bm * (bn + kStagingRowPad) * 4;
  int64_t barrierOffset = llvm::alignTo(std::max(stages * (slotA + slotB) * 2, stagingBytes), 8);
  int64_t sharedBytes = barrierOffset + stages * 8;
  if (sharedBytes > maxSharedBytesPerBlock(Target::Sm90a))
    return op.emitOpError() << "#kiln.config " << config << " needs " << sharedBytes
                            << " bytes of shared memory for its operand ring or its epilogue tile; the GPU has "
                            << maxSharedBytesPerBlock(Target::Sm90a);

  Location loc = op.getLoc();
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  MatmulFrame frame = startMatmulKernel(builder, module, op, name, bm, bn, threads, sharedBytes, 1024);
  IndexMath im{builder, loc};

  // The tensor maps of A and B follow the sizes: A as [batch][M][K] in boxes of bm rows x 64 columns; B as
  // [batch][N][K] in boxes of bn x 64 (transposed), else [batch][K][N] in 64 x 64 panels. The boxes land in the
  // 128-byte swizzled layout wgmma reads (chunk c of row r at chunk c ^ (r % 8)), and what lies past M, N or K
  // reads as zeros.
  FailureOr<unsigned> mapIndex = appendTensorMapParams(frame.kernel.func, 2);
  if (failed(mapIndex))
    return failure();
  Block &entry = frame.kernel.func.getBody().front();
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, frame.kernel.sharedBytes);
  TmaCopies tma{builder, loc, im, entry.getArgument(*mapIndex), entry.getArgument(*mapIndex + 1), base,
                barrierOffset};
  int64_t elementBytes = element.getIntOrFloatBitWidth() / 8;
  int32_t stageBytes = static_cast<int32_t>((slotA + slotB) * elementBytes);
  Value kTiles = im.max(im.div(im.add(frame.sizeK, bk - 1), bk), im.c(1));
  Value leader = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, frame.tid, im.c(0));
  auto issueLoads = [&](Value kTile) {
    Value slot = im.rem(kTile, stages), k0 = im.mul(kTile, bk), bar = tma.barrier(slot);
    NVVM::MBarrierArriveExpectTxOp::create(builder, loc, Type(), bar,
                                           arith::ConstantIntOp::create(builder, loc, stageBytes, 32),
                                           NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
    tma.copy(tma.mapA, im.mul(slot, slotA * 2), {k0, frame.m0, frame.batchA}, bar);
    Value slotStart = im.add(im.c(stages * slotA * 2), im.mul(slot, slotB * 2));
    if (transB) {
      tma.copy(tma.mapB, slotStart, {k0, frame.n0, frame.batchB}, bar);
      return;
    }
    for (int64_t panel = 0; panel < bn / 64; ++panel)
      tma.copy(tma.mapB, im.add(slotStart, panel * bk * kSwizzleRowBytes), {im.add(frame.n0, panel * 64), k0,
                                                                              frame.batchB},
               bar);
  };
  // One thread sets up the slots' mbarriers (one arrival each: its own, with the bytes to expect) and starts
  // the first stages - 2 tiles; the barrier makes the mbarriers visible to every thread before any waits.
  auto ifLeader = [&](Value condition, llvm::function_ref<void()> body) {
    auto branch = scf::IfOp::create(builder, loc, condition, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard ifGuard(builder);
    builder.setInsertionPointToStart(branch.thenBlock());
    body();
  };
  ifLeader(leader, [&] {
    for (int64_t s = 0; s < stages; ++s)
      NVVM::MBarrierInitOp::create(builder, loc, tma.barrier(im.c(s)),
                                   arith::ConstantIntOp::create(builder, loc, 1, 32), Value());
    NVVM::FenceMbarrierInitOp::create(builder, loc);
    for (int64_t s = 0; s < stages - 2; ++s)
      ifLeader(im.lt(im.c(s), kTiles), [&] { issueLoads(im.c(s)); });
  });
  gpu::BarrierOp::create(builder, loc);

  // A: K-major, 8-row groups 1024 bytes apart. B: K-major the same way, or N-major with 64-column panels
  // (leading offset) of 64 k-rows, 8-k-row groups 1024 bytes apart (stride offset).
  DescriptorBuilder descriptors(builder, loc, frame.kernel.sharedBytes);
  int64_t leadingB = transB ? 16 : bk * kSwizzleRowBytes;
  int64_t stepB = transB ? 32 : 16 * kSwizzleRowBytes; // bytes between the K = 16 steps of B
  Value warpgroup = im.div(frame.tid, 128);

  Value zero = zeroAccumulator(builder, loc, bn);
  Type accType = zero.getType();
  auto wgmmaType = element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  // A waiting thread may be suspended up to 10 ms at a time (the hint of mbarrier.try_wait; the wait loops).
  Value ticks = arith::ConstantIntOp::create(builder, loc, 10'000'000, 32);
  auto loop = scf::ForOp::create(
      builder, loc, im.c(0), kTiles, im.c(1), ValueRange{zero},
      [&](OpBuilder &nested, Location, Value kTile, ValueRange accs) {
        OpBuilder::InsertionGuard loopGuard(builder);
        builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        // This tile has landed once its slot's mbarrier completes the phase of its round through the ring.
        Value slot = im.rem(kTile, stages);
        Value parity = arith::IndexCastOp::create(builder, loc, builder.getI32Type(),
                                                  im.rem(im.div(kTile, stages), 2));
        NVVM::MBarrierTryWaitParityOp::create(builder, loc, tma.barrier(slot), parity, ticks);
        // Every warpgroup has finished the wgmma of tile kTile - 2 (waited for below): its slot is free.
        gpu::BarrierOp::create(builder, loc);
        Value next = im.add(kTile, stages - 2);
        ifLeader(arith::AndIOp::create(builder, loc, leader, im.lt(next, kTiles)), [&] { issueLoads(next); });
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
  KernelLaunch launch = matmulLaunch(frame, bm, bn, threads, sharedBytes);
  // The maps' layouts: [batch][M][K] for A; [batch][N][K] or [batch][K][N] for B (innermost first below).
  int64_t n = frame.n, m = frame.m;
  int64_t batchA = lhsType.getNumElements() / (m * k), batchB = rhsType.getNumElements() / (k * n);
  StringRef dtype = element.isBF16() ? "bf16" : "f16";
  launch.tensorMaps.push_back({0, dtype, {k, m, batchA}, {k * elementBytes, m * k * elementBytes}, {bk, bm, 1},
                               kSwizzleRowBytes});
  if (transB)
    launch.tensorMaps.push_back({1, dtype, {k, n, batchB}, {k * elementBytes, n * k * elementBytes}, {bk, bn, 1},
                                 kSwizzleRowBytes});
  else
    launch.tensorMaps.push_back({1, dtype, {n, k, batchB}, {n * elementBytes, k * n * elementBytes}, {64, bk, 1},
                                 kSwizzleRowBytes});
  return launch;
}
