//===- WgmmaLayoutLowering.cpp - wgmma matmuls lowered from their tiled IR --===//
//
// On sm_90a a "wgmma" matmul reaches the GPU tiled like a "mma_sync" one (kiln-tile: the forall over [BM, BN]
// output tiles, the K loop adding a tile matmul of padded operand tiles to an f32 accumulator, the epilogue and
// the insertion of the valid part), with a #kiln.mma_layout of one warp per 16 rows (kiln-assign-layouts). That
// layout is the accumulator of wgmma.mma_async m64nBNk16: warp w of warpgroup g holds rows 64g + 16w .. + 15,
// and for each 8-column block j the registers 4j .. 4j + 3 in the mma.sync C layout. So everything but the K loop
// lowers as MmaMatmulLowering lowers it (the accumulator's registers, the epilogue per register, the bounds-checked
// stores, the size-generic parameters); this lowering replaces the K loop:
//   - the operand tiles the loop body reads become TMA copies (one thread issues a whole tile's; the tensor maps
//     are kernel parameters after the sizes, which the runtime builds at each launch) into a `stages`-deep ring
//     in the 128-byte swizzled layout that wgmma reads without bank conflicts: A and a transposed B ([N][K])
//     K-major, an untransposed B ([K][N]) N-major in 64-column panels. A tensor map zero-fills what lies past the
//     buffer's edge, which is exactly the tile's padding, so the kernel has no bounds code for its loads;
//   - per k-tile: wait on the slot's "full" mbarrier (which the tile's copies complete, at the parity of its
//     round through the ring), then BK / 16 wgmma committed as one group, and wait until only that group is in
//     flight, so that the tensor cores run while the next tiles land. The previous tile's wgmma is then done:
//     one thread per warpgroup arrives on that slot's "empty" mbarrier, and the copying thread, once every
//     warpgroup has arrived, starts the copies of the tile `stages` - 1 ahead into it. So `stages` - 1 tiles
//     are in flight (not `stages` - 2, as a block-wide barrier per k-tile allowed) and no warp waits for
//     another but the copying one.
// Shared-memory descriptors are built in the kernel from the buffer's address; the buffer is 1024-byte aligned,
// the period of the swizzle, so that every descriptor's base offset is 0. A config with k_splits > 1 launches
// each output tile as a cluster of that many blocks, each running the pipeline over its chunk of K; the partial
// tiles are added up through distributed shared memory as they are stored (MmaMatmulLowering, ClusterSums.h).
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "KernelBuilding.h"
#include "MmaLayoutLowering.h"
#include "Transforms/Transforms.h"
#include "WgmmaBuilding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

static constexpr StringLiteral kWhat = "wgmma lowering";

/// The shared memory of a [bm, bn] tile on `stages` ring slots (16-bit operands, BK = 64): per slot one of A
/// (bm rows of one 128-byte swizzle row) and one of B (bn x BK), the f32 staging tile of the stores over them
/// (free by then), then two mbarriers per slot ("full", then "empty"), which start here.
static int64_t barrierOffsetOf(int64_t bm, int64_t bn, int64_t stages) {
  return llvm::alignTo(std::max(stages * (bm + bn) * kSwizzleRowBytes, bm * (bn + kStagingRowPad) * 4), 8);
}

/// All of the shared memory of that tile: the ring or the staging tile, then the mbarriers.
static int64_t sharedBytesOf(int64_t bm, int64_t bn, int64_t stages) {
  return barrierOffsetOf(bm, bn, stages) + 2 * stages * 8;
}

namespace {
/// The two operand tiles of one k-tile.
using OperandTiles = std::pair<GlobalTile, GlobalTile>;

/// Lowers one tiled "wgmma" matmul: MmaMatmulLowering with its K loop fed by TMA and run on warpgroup MMAs.
class WgmmaMatmulLowering : public MmaMatmulLowering {
public:
  /// `sharedBytes` is the kernel's dynamic shared memory, `maps` its first tensor-map parameter (then B's).
  WgmmaMatmulLowering(OpBuilder &b, Location loc, ConfigAttr config, MmaLayoutAttr layout, Value sharedBytes,
                      Value mapA, Value mapB, Type element)
      : MmaMatmulLowering(b, loc, config, layout, config.getWarps() * 32), sharedBytes(sharedBytes), mapA(mapA),
        mapB(mapB), element(element) {}

  /// Bytes of one ring slot of A (BM rows of one 128-byte swizzle row) and of B (BN x BK elements).
  int64_t slotBytesA() const { return bm * kSwizzleRowBytes; }
  int64_t slotBytesB() const { return bn * bk * elementBytes(); }
  int64_t barrierOffset() const { return barrierOffsetOf(bm, bn, stages); }

  /// The tensor maps the copies read (A's, then B's), known once the K loop is lowered.
  SmallVector<TensorMapParam, 2> maps;

protected:
  LogicalResult lowerContraction(scf::ForOp loop) override;
  LogicalResult lowerSingleProduct(MatmulOp product) override;
  /// The result's stores, staged through shared memory where there is a product (and so shared memory).
  LogicalResult lowerInsert(tensor::ParallelInsertSliceOp op) override;

private:
  int64_t elementBytes() const { return element.getIntOrFloatBitWidth() / 8; }
  /// Runs the pipeline over `kTiles` k-tiles whose operand tiles `operands` lowers (at the builder's insertion
  /// point) on the accumulator registers `init`; returns the result's registers.
  FailureOr<SmallVector<Value>> runPipeline(MatmulOp product, Value kTiles,
                                            llvm::function_ref<FailureOr<OperandTiles>(Value)> operands,
                                            ArrayRef<Value> init);
  /// Starts the TMA copies of k-tile `kTile` (operand tiles `tiles`) into its ring slot, completing on the slot's
  /// mbarrier; records the tensor maps they read.
  LogicalResult issueCopies(MatmulOp product, const OperandTiles &tiles, Value kTile);
  /// Copies `tile` ([rows, columns]) as panels of 64 columns into `byteOffset` through tensor map `map`
  /// (entry `mapIndex` of `maps`), completing on `barrier`.
  LogicalResult copyByTma(Operation *user, const GlobalTile &tile, unsigned mapIndex, Value map, int64_t rows,
                         int64_t columns, Value byteOffset, Value barrier);
  /// A shared-memory pointer `byteOffset` bytes into the buffer.
  Value pointer(Value byteOffset);
  /// The slot's mbarrier that its tile's copies complete.
  Value barrier(Value slot) { return pointer(im.add(im.mul(slot, 8), barrierOffset())); }
  /// The slot's mbarrier that every warpgroup arrives on once its wgmma have read the slot.
  Value emptyBarrier(Value slot) { return pointer(im.add(im.mul(slot, 8), barrierOffset() + stages * 8)); }

  Value sharedBytes, mapA, mapB;
  Type element;
};
} // namespace

Value WgmmaMatmulLowering::pointer(Value byteOffset) {
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, sharedBytes);
  Value address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), im.add(base, byteOffset));
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3), address);
}

LogicalResult WgmmaMatmulLowering::copyByTma(Operation *user, const GlobalTile &tile, unsigned mapIndex, Value map,
                                            int64_t rows, int64_t columns, Value byteOffset, Value bar) {
  const GlobalTensor &source = tile.source;
  int64_t rank = source.shape.size();
  auto buffer = dyn_cast<BlockArgument>(source.buffer);
  if (rank < 2 || tile.dims != ArrayRef<int64_t>{rank - 2, rank - 1} || tile.pad != 0.0 || !buffer)
    return user->emitOpError() << kWhat << ": an operand tile must be the last two dims of a kernel buffer, "
                                           "zero-padded (a tensor map copies it)";
  int64_t inner = source.shape[rank - 1], outer = source.shape[rank - 2];
  if (inner * elementBytes() % 16 != 0)
    return user->emitOpError() << kWhat << ": rows of " << inner << " elements are not 16-byte multiples, which "
                                           "a tensor map's strides must be";
  int64_t batches = 1;
  for (int64_t extent : ArrayRef<int64_t>(source.shape).drop_back(2))
    batches *= extent;
  TensorMapParam param{buffer.getArgNumber(), element.isBF16() ? "bf16" : "f16", {inner, outer, batches},
                       {inner * elementBytes(), inner * outer * elementBytes()}, {kSwizzleRowElements, rows, 1},
                       kSwizzleRowBytes};
  if (maps.size() <= mapIndex)
    maps.push_back(param);
  // The batch: the linear index of the tile's offsets over the leading dims.
  Value batch = im.c(0);
  for (int64_t d = 0; d < rank - 2; ++d)
    batch = im.add(im.mul(batch, source.shape[d]), tile.offsets[d]);
  for (int64_t panel = 0; panel < columns / kSwizzleRowElements; ++panel) {
    SmallVector<Value> coordinates;
    for (Value c : {im.add(tile.offsets[rank - 1], panel * kSwizzleRowElements), tile.offsets[rank - 2], batch})
      coordinates.push_back(arith::IndexCastOp::create(b, loc, b.getI32Type(), c));
    Value destination = LLVM::AddrSpaceCastOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext(), 7),
        pointer(im.add(byteOffset, panel * rows * kSwizzleRowBytes)));
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(b, loc, destination, map, coordinates, bar, ValueRange{},
                                                           Value(), Value(), NVVM::TMALoadMode::TILE,
                                                           /*isCTAOnly=*/false, nullptr, Value());
  }
  return success();
}

LogicalResult WgmmaMatmulLowering::issueCopies(MatmulOp product, const OperandTiles &tiles, Value kTile) {
  Value slot = im.rem(kTile, stages), bar = barrier(slot);
  NVVM::MBarrierArriveExpectTxOp::create(
      b, loc, Type(), bar,
      arith::ConstantIntOp::create(b, loc, static_cast<int32_t>(slotBytesA() + slotBytesB()), 32),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
  // A [BM, BK] is one box of BK columns; B [BN, BK] (transposed) the same, [BK, BN] BN / 64 panels of BK rows.
  bool transposedB = product.getTransposeRhs();
  if (failed(copyByTma(product, tiles.first, 0, mapA, bm, bk, im.mul(slot, slotBytesA()), bar)))
    return failure();
  Value offsetB = im.add(im.c(stages * slotBytesA()), im.mul(slot, slotBytesB()));
  return copyByTma(product, tiles.second, 1, mapB, transposedB ? bn : bk, transposedB ? bk : bn, offsetB, bar);
}

FailureOr<SmallVector<Value>>
WgmmaMatmulLowering::runPipeline(MatmulOp product, Value kTiles,
                                 llvm::function_ref<FailureOr<OperandTiles>(Value)> operands, ArrayRef<Value> init) {
  MLIRContext *ctx = b.getContext();
  bool transposedB = product.getTransposeRhs();
  Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, im.c(0));
  LogicalResult status = success();
  // A single product's one k-tile: no copies past it to guard.
  std::optional<int64_t> knownTiles = IndexMath::known(kTiles);
  auto ifThen = [&](Value condition, llvm::function_ref<void()> body) {
    scf::IfOp::create(b, loc, condition, [&](OpBuilder &then, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(then.getInsertionBlock(), then.getInsertionPoint());
      body();
      scf::YieldOp::create(b, loc);
    });
  };
  auto startCopies = [&](Value kTile) {
    FailureOr<OperandTiles> tiles = operands(kTile);
    if (failed(tiles) || failed(issueCopies(product, *tiles, kTile)))
      status = failure();
  };
  // One thread sets up the slots' mbarriers (a full one: one arrival, its own with the bytes to expect; an empty
  // one: an arrival per warpgroup) and starts the first stages - 1 tiles; the barrier makes the mbarriers visible
  // to every thread before any waits.
  int64_t warpgroups = threads / 128;
  ifThen(leader, [&] {
    for (int64_t s = 0; s < stages; ++s) {
      NVVM::MBarrierInitOp::create(b, loc, barrier(im.c(s)), arith::ConstantIntOp::create(b, loc, 1, 32), Value());
      NVVM::MBarrierInitOp::create(b, loc, emptyBarrier(im.c(s)),
                                   arith::ConstantIntOp::create(b, loc, warpgroups, 32), Value());
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
    for (int64_t s = 0; s < stages - 1 && (!knownTiles || s < *knownTiles); ++s)
      ifThen(im.lt(im.c(s), kTiles), [&] { startCopies(im.c(s)); });
  });
  gpu::BarrierOp::create(b, loc);
  if (failed(status))
    return failure();

  // A: K-major, 8-row groups 1024 bytes apart. B: K-major the same way, or N-major with 64-column panels
  // (leading offset) of BK k-rows, 8-k-row groups 1024 bytes apart (stride offset).
  DescriptorBuilder descriptors(b, loc, sharedBytes);
  int64_t leadingB = transposedB ? 16 : bk * kSwizzleRowBytes;
  int64_t stepB = transposedB ? 32 : 16 * kSwizzleRowBytes; // bytes between the K = 16 steps of B
  Value warpgroup = im.div(tid, 128);
  Value accumulator = fragmentsAccumulator(b, loc, fragmentsOf(init));
  auto wgmmaType = element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  // A waiting thread may be suspended up to 10 ms at a time (the hint of mbarrier.try_wait; the wait loops).
  Value ticks = arith::ConstantIntOp::create(b, loc, 10'000'000, 32);
  auto loop = scf::ForOp::create(
      b, loc, im.c(0), kTiles, im.c(1), ValueRange{accumulator},
      [&](OpBuilder &nested, Location, Value kTile, ValueRange iter) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        // This tile has landed once its slot's mbarrier completes the phase of its round through the ring.
        Value slot = im.rem(kTile, stages);
        Value parity = arith::IndexCastOp::create(b, loc, b.getI32Type(), im.rem(im.div(kTile, stages), 2));
        NVVM::MBarrierTryWaitParityOp::create(b, loc, barrier(slot), parity, ticks);
        Value offsetA = im.add(im.mul(slot, slotBytesA()), im.mul(warpgroup, 64 * kSwizzleRowBytes));
        Value offsetB = im.add(im.c(stages * slotBytesA()), im.mul(slot, slotBytesB()));
        NVVM::WgmmaFenceAlignedOp::create(b, loc);
        Value acc = iter.front();
        for (int64_t step = 0; step < bk / 16; ++step) {
          Value descA = descriptors.get(offsetA, 16, 8 * kSwizzleRowBytes, step * 32);
          Value descB = descriptors.get(offsetB, leadingB, 8 * kSwizzleRowBytes, step * stepB);
          acc = NVVM::WgmmaMmaAsyncOp::create(
              b, loc, acc.getType(), acc, descA, descB, NVVM::MMAShapeAttr::get(ctx, 64, bn, 16), wgmmaType,
              wgmmaType, NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one, NVVM::WGMMAScaleIn::one,
              NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
              transposedB ? NVVM::MMALayout::col : NVVM::MMALayout::row, /*satfinite=*/nullptr);
        }
        NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
        NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(1));
        // This warpgroup's wgmma of tile kTile - 1 are done: it releases that tile's slot. The copying thread
        // refills the slot with tile kTile + stages - 1 once every warpgroup has (at the parity of the previous
        // tile's round; in the first iteration the slot is one the prologue left unused).
        if (!knownTiles || *knownTiles > 1) {
          Value previous = im.sub(kTile, 1), started = im.lt(im.c(0), kTile);
          Value previousSlot = im.rem(previous, stages);
          ifThen(im.andi(started, im.lt(im.rem(tid, 128), 1)), [&] {
            NVVM::MBarrierArriveOp::create(b, loc, Type(), emptyBarrier(previousSlot), Value(),
                                           NVVM::MemScopeKind::CTA, /*relaxed=*/false);
          });
          Value next = im.add(kTile, stages - 1);
          if (!knownTiles || *knownTiles > stages - 1)
            ifThen(im.andi(leader, im.lt(next, kTiles)), [&] {
              ifThen(started, [&] {
                Value round = arith::IndexCastOp::create(b, loc, b.getI32Type(), im.rem(im.div(previous, stages), 2));
                NVVM::MBarrierTryWaitParityOp::create(b, loc, emptyBarrier(previousSlot), round, ticks);
              });
              startCopies(next);
            });
        }
        scf::YieldOp::create(b, loc, acc);
      });
  if (failed(status))
    return failure();
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, b.getI64IntegerAttr(0));
  return registersOf(accumulatorFragments(b, loc, loop.getResult(0)));
}

LogicalResult WgmmaMatmulLowering::lowerContraction(scf::ForOp loop) {
  FailureOr<MatmulOp> product = contractionProduct(loop);
  if (failed(product))
    return failure();
  SmallVector<Value> init(registers.find(loop.getInitArgs()[0])->second);
  FailureOr<SmallVector<Value>> result = runPipeline(
      *product, kTileCount(loop), [&](Value kTile) { return kTileOperands(loop, *product, kTile); }, init);
  if (failed(result))
    return failure();
  registers[loop.getResult(0)] = *result;
  return success();
}

LogicalResult WgmmaMatmulLowering::lowerSingleProduct(MatmulOp product) {
  FailureOr<std::pair<ArrayRef<Value>, AddOp>> accumulator = singleProductAccumulator(product);
  if (failed(accumulator))
    return failure();
  SmallVector<Value> init(accumulator->first);
  AddOp add = accumulator->second;
  OperandTiles tiles{*operandTile(product.getLhs()), *operandTile(product.getRhs())};
  FailureOr<SmallVector<Value>> result =
      runPipeline(product, im.c(1), [&](Value) -> FailureOr<OperandTiles> { return tiles; }, init);
  if (failed(result))
    return failure();
  registers[add.getResult()] = *result;
  return success();
}

LogicalResult WgmmaMatmulLowering::lowerInsert(tensor::ParallelInsertSliceOp op) {
  if (mapA) {
    Value staging = sharedView(b, loc, sharedBytes, 0, bm * (bn + kStagingRowPad), b.getF32Type());
    FailureOr<bool> staged = lowerStagedInsert(op, staging);
    if (failed(staged) || *staged)
      return success(succeeded(staged));
  }
  return MmaMatmulLowering::lowerInsert(op);
}

FailureOr<KernelLaunch> kiln::lowerWgmmaMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                                     func::FuncOp kernel, StringRef name) {
  FailureOr<MmaTiledLoop> tiled = mmaTiledLoop(kernel, 3, "matmul", kWhat, "wgmma");
  if (failed(tiled))
    return failure();
  auto [forall, config, layout] = *tiled;
  MatmulOp product;
  forall.getBody()->walk([&](MatmulOp op) { product = op; });
  Type element = product ? product.getLhs().getType().getElementType() : builder.getBF16Type();
  if (!fitsWgmmaMatmul(config, element, !product || product.getTransposeRhs()) ||
      layout.getWarpsM() != config.getWarps() || layout.getWarpsN() != 1)
    return forall.emitError() << kWhat << ": " << config << " with " << layout
                              << " is not a wgmma matmul (kiln-assign-layouts checks the config)";
  if (product && llvm::any_of(kernel.getArgumentTypes().take_front(2),
                              [](Type type) { return cast<RankedTensorType>(type).getNumElements() == 0; }))
    return product.emitOpError() << "the wgmma lowering reads its tiles through TMA, which needs operands of at "
                                    "least one element (M, N and the batch dims > 0; the mma_sync lowering takes "
                                    "empty ones)";
  int64_t threads = config.getWarps() * 32;
  SmallVector<RankedTensorType> buffers;
  for (Type type : kernel.getArgumentTypes())
    buffers.push_back(cast<RankedTensorType>(type));
  Location loc = forall.getLoc();
  int64_t stages = config.getStages();
  int64_t sharedBytes = product ? sharedBytesOf(config.getTile()[0], config.getTile()[1], stages) : 0;
  OpBuilder::InsertionGuard guard(builder);
  KernelFunction gpuKernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes,
                                         /*sharedAlignment=*/1024, /*sizeParams=*/product ? 3 : 0);
  Block &entry = gpuKernel.func.getBody().front();
  // A contraction split over a cluster (k_splits): each output tile's blocks are one cluster, consecutive in x.
  if (config.getKSplits() > 1)
    gpuKernel.func->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                            builder.getDenseI32ArrayAttr({static_cast<int32_t>(config.getKSplits()), 1, 1}));
  unsigned firstMap = entry.getNumArguments();
  Value mapA, mapB;
  if (product) {
    // The tensor maps of A and B follow the sizes (`!llvm.ptr`, what a TMA copy names its map by), listed in
    // `kiln.tensor_map_params`, which kiln-tensor-map-params turns into by-value grid constants.
    auto pointerType = LLVM::LLVMPointerType::get(builder.getContext());
    if (failed(gpuKernel.func.insertArgument(firstMap, pointerType, {}, loc)) ||
        failed(gpuKernel.func.insertArgument(firstMap + 1, pointerType, {}, loc)))
      return gpuKernel.func.emitOpError() << "cannot take a tensor-map parameter";
    gpuKernel.func->setAttr("kiln.tensor_map_params", builder.getDenseI64ArrayAttr({firstMap, firstMap + 1}));
    mapA = entry.getArgument(firstMap), mapB = entry.getArgument(firstMap + 1);
  }
  WgmmaMatmulLowering lowering(builder, loc, config, layout, gpuKernel.sharedBytes, mapA, mapB, element);
  SmallVector<int64_t, 3> sizes;
  FailureOr<int64_t> blocks =
      lowering.lowerKernel(kernel, forall, product, entry, entry.getArguments().slice(firstMap - 3, 3), sizes);
  if (failed(blocks))
    return failure();
  gpu::ReturnOp::create(builder, loc);
  eraseDeadOps(gpuKernel.func);
  return KernelLaunch{{*blocks, 1, 1}, {threads, 1, 1}, sharedBytes, sizes, lowering.maps};
}
