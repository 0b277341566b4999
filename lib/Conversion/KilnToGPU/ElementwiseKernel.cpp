//===- ElementwiseKernel.cpp - Glue kernels: elementwise and data movement -===//
//
// The kernels between the fused matmuls and attentions — a transpose back to [B, S, H*D], a leftover
// elementwise op or a fused chain of them (kiln.elementwise: its body per element), a cast, a broadcast, a slice, a concat, a gather, a reduction, softmax or logsumexp over
// axes the row kernels do not take, the merge of a split attention's chunks, the sum of a split matmul's chunks
// with the matmul's epilogue — as one thread per output element
// (RoPE: per rotation pair): the thread
// turns its linear index into a multi-index, reads each
// operand at the index the op implies (broadcast, permuted, strided, selected, looked up, or looped over),
// computes the op's f32 formula (the same one the host lowering and epilogues use), and stores. They move bytes
// rather than compute, so simplicity wins over tensor cores here. A data movement or elementwise op whose output
// rows are whole 16-byte runs, each read from its operands contiguously (a slice along the outer dimensions or at
// aligned columns, a reshape, a transpose that keeps the innermost dimension, a broadcast of outer dimensions) or
// as one broadcast element, takes a run per thread: one 16-byte load per operand and one store, where element by
// element GPT-2's q/k/v slices moved 0.66 TB/s. Integer and bool tensors are moved, compared, chosen between and
// cast as they are, and integers computed on in their own type (a bool is a byte in memory, so an op that reads
// or writes one takes an element a thread). A split matmul's sum that kiln-fuse-split-sums moved into RoPE's, the
// KV append's or another sum's kernel is computed by the thread that reads an element of it, from the chunks.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"
#include "TiledLoopLowering.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

/// Kernel ops this builder handles.
bool kiln::isElementwiseKernelOp(Operation *op) {
  if (isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp, CastOp, RopeOp, ConcatOp, GatherOp, MergeSplitsOp,
          SumSplitsOp>(op))
    return true;
  // Reductions, softmax and logsumexp the row kernels do not take (other axes, several axes): one thread per
  // output element.
  if (isa<ReduceOp, SoftmaxOp, LogSumExpOp>(op))
    return !isRowOp(op);
  return lowering::hasScalarFormula(op) || isa<SelectOp, CompareOp, ElementwiseOp>(op);
}

/// Row-major linear index of `indices` in `shape`.
static Value linearize(IndexMath &m, ArrayRef<int64_t> shape, ArrayRef<Value> indices) {
  Value linear = m.c(0);
  int64_t stride = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    linear = m.add(linear, m.mul(indices[d], stride));
    stride *= shape[d];
  }
  return linear;
}

/// An operand of a glue kernel's op that its thread computes instead of reading: a split matmul's sum that
/// kiln-fuse-split-sums moved into the kernel, read through reshapes (which keep each element's row-major index).
struct FusedSum {
  FusedSumSource source;
  /// The kernel parameter of the sum's chunks.
  unsigned parts;
};

/// The fused sum `value` is, in `kernel`: a kiln.sum_splits of the kernel's arguments, through reshapes; its
/// epilogue operands are bound to the parameters of `entry` when the kernel is built (fusedSumElements).
static std::optional<FusedSum> fusedSumOf(Value value, func::FuncOp kernel) {
  while (auto reshape = value.getDefiningOp<ReshapeOp>())
    value = reshape.getInput();
  auto sum = value.getDefiningOp<SumSplitsOp>();
  if (!sum)
    return std::nullopt;
  for (Value operand : sum->getOperands()) {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (!argument || argument.getOwner() != &kernel.getBody().front())
      return std::nullopt;
  }
  return FusedSum{FusedSumSource{sum, {}}, cast<BlockArgument>(sum.getParts()).getArgNumber()};
}

/// The fused sums among the operands of a glue kernel's op, by operand number.
using FusedSums = llvm::SmallDenseMap<unsigned, FusedSum, 2>;

/// The parameters of `op`'s kernel, which are its function's arguments (an operand passed twice is one argument;
/// the destinations last), and in `parameterOf` the parameter that holds each operand of `op`; an error on `op`
/// when an operand is not an argument of the function, unless `fused` is given and the operand is a split
/// matmul's sum that `op` reads per element (kiln::readsFusedSplitSum): then `fused` holds it.
static FailureOr<SmallVector<RankedTensorType>> kernelParameters(Operation *op, SmallVectorImpl<unsigned> &parameterOf,
                                                                 FusedSums *fused = nullptr) {
  auto kernel = op->getParentOfType<func::FuncOp>();
  if (!kernel)
    return op->emitOpError() << "is not inside an outlined kernel function";
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (argument && argument.getOwner() == &kernel.getBody().front()) {
      parameterOf.push_back(argument.getArgNumber());
      continue;
    }
    std::optional<FusedSum> sum =
        fused && readsFusedSplitSum(op, index) ? fusedSumOf(operand, kernel) : std::nullopt;
    if (!sum)
      return op->emitOpError() << "the GPU glue kernels read only their function's arguments (and a split "
                                  "matmul's sum where kiln-fuse-split-sums put one)";
    fused->try_emplace(index, *sum);
    parameterOf.push_back(std::numeric_limits<unsigned>::max());
  }
  SmallVector<RankedTensorType> parameters;
  for (Type type : kernel.getArgumentTypes())
    parameters.push_back(cast<RankedTensorType>(type));
  return parameters;
}

/// `width` consecutive elements of a fused sum from row-major index `at` (loadFusedSum), widened to f32.
static SmallVector<Value, 8> fusedSumElements(OpBuilder &builder, Location loc, IndexMath &im, Block &entry,
                                              const FusedSum &fused, Value at, int64_t width) {
  FusedSumSource source = fused.source;
  for (Value operand : source.sum.getEpilogueOperands())
    source.epilogue.push_back(entry.getArgument(cast<BlockArgument>(operand).getArgNumber()));
  SmallVector<Value, 8> values;
  for (Value value : loadFusedSum(builder, loc, im, source, entry.getArgument(fused.parts), at, width))
    values.push_back(lowering::widen(builder, loc, value));
  return values;
}

/// A kernel of one thread per item, 256 to a block, over `buffers` (its parameters: flat, bare pointers): `body` builds, at the
/// builder, what the thread of item `linear` does (ending in its scf.yield), inside a guard for `linear < items`.
static KernelLaunch buildThreadPerItemKernel(
    OpBuilder &builder, gpu::GPUModuleOp module, Location loc, StringRef name, ArrayRef<RankedTensorType> buffers,
    int64_t items, llvm::function_ref<void(Block &entry, IndexMath &im, Value linear)> body) {
  const int64_t threads = 256;
  OpBuilder::InsertionGuard guard(builder);
  KernelFunction kernel = startKernel(builder, module, loc, name, buffers, threads, /*sharedBytes=*/0);
  Block &entry = kernel.func.getBody().front();
  IndexMath im{builder, loc};
  Value tid = gpu::ThreadIdOp::create(builder, loc, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  Value linear = im.add(im.mul(block, threads), tid);
  scf::IfOp::create(builder, loc, im.lt(linear, items), [&](OpBuilder &thenBuilder, Location) {
    OpBuilder::InsertionGuard thenGuard(builder);
    builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
    body(entry, im, linear);
  });
  gpu::ReturnOp::create(builder, loc);
  return KernelLaunch{{llvm::divideCeilSigned(items, threads), 1, 1}, {threads, 1, 1}, 0};
}

/// RoPE as one thread per 8 consecutive rotation pairs of a row (rotate-half with D/2 a multiple of 8; else one
/// pair): the thread reads its 8 first elements and their 8 partners as two 16-byte loads (at most), the pairs'
/// factors likewise (with full tables, each element's own), and writes both rotated runs as whole vectors. (A
/// thread per pair issued a 2-byte access per element and per factor: 1 of 4 TB/s on the H200.) Threads follow
/// the pairs in row-major order, so a warp reads consecutive memory.
static FailureOr<KernelLaunch> buildRopeKernel(OpBuilder &builder, gpu::GPUModuleOp module, RopeOp rope,
                                               StringRef name) {
  SmallVector<unsigned> parameterOf;
  FusedSums fused;
  FailureOr<SmallVector<RankedTensorType>> buffers = kernelParameters(rope, parameterOf, &fused);
  if (failed(buffers))
    return failure();
  RankedTensorType type = rope.getInput().getType();
  ArrayRef<int64_t> shape = type.getShape();
  Type element = type.getElementType();
  int64_t rank = shape.size(), half = shape.back() / 2, pairs = type.getNumElements() / 2;
  int64_t width = !rope.getInterleaved() && half % 8 == 0 ? 8 : 1;
  auto vectorType = VectorType::get({width}, element);
  llvm::MaybeAlign alignment(std::min<int64_t>(16, width * element.getIntOrFloatBitWidth() / 8));
  int64_t positionDim = rope.getPositionDim();
  Location loc = rope.getLoc();
  auto thread = [&](Block &entry, IndexMath &im, Value linear) {
    // Pairs `pair` .. `pair` + width - 1 of row `row` (the row-major index over every dimension but the last);
    // the row's position is its index along the position dimension.
    Value firstPair = im.mul(linear, width);
    Value pair = im.rem(firstPair, half), row = im.div(firstPair, half), remaining = row;
    for (int64_t d = rank - 2; d > positionDim; --d)
      remaining = im.div(remaining, shape[d]);
    Value position = im.rem(remaining, shape[positionDim]);
    Value rowStart = im.mul(row, 2 * half);
    Value first = rope.getInterleaved() ? im.add(rowStart, im.mul(pair, 2)) : im.add(rowStart, pair);
    Value second = im.add(first, rope.getInterleaved() ? 1 : half);
    // `width` consecutive elements of operand `operand` from `at`, widened to f32.
    auto load = [&](unsigned operand, Value at) {
      if (auto sum = fused.find(operand); sum != fused.end())
        return fusedSumElements(builder, loc, im, entry, sum->second, at, width);
      Value buffer = entry.getArgument(parameterOf[operand]);
      SmallVector<Value, 8> values;
      if (width == 1) {
        values.push_back(lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, buffer, at)));
        return values;
      }
      Value loaded =
          vector::LoadOp::create(builder, loc, vectorType, buffer, ValueRange{at}, /*nontemporal=*/false, alignment);
      for (int64_t i = 0; i < width; ++i)
        values.push_back(
            lowering::widen(builder, loc, vector::ExtractOp::create(builder, loc, loaded, ArrayRef<int64_t>{i})));
      return values;
    };
    SmallVector<Value, 8> a = load(0, first), b = load(0, second);
    SmallVector<Value, 8> cosA, sinA, cosB, sinB;
    if (rope.hasFullTables()) { // row `position` of the [S, D] tables, at each element's column
      Value tableRow = im.mul(position, 2 * half);
      Value atA = im.add(tableRow, im.sub(first, rowStart)), atB = im.add(tableRow, im.sub(second, rowStart));
      cosA = load(1, atA), sinA = load(2, atA), cosB = load(1, atB), sinB = load(2, atB);
    } else {
      Value angle = im.add(im.mul(position, half), pair);
      cosA = cosB = load(1, angle);
      sinA = sinB = load(2, angle);
    }
    auto store = [&](ArrayRef<Value> values, Value at) {
      SmallVector<Value, 8> narrow;
      for (Value value : values)
        narrow.push_back(lowering::narrow(builder, loc, value, element));
      Value output = entry.getArguments().back();
      if (width == 1) {
        memref::StoreOp::create(builder, loc, narrow.front(), output, at);
        return;
      }
      Value vector = vector::FromElementsOp::create(builder, loc, vectorType, narrow);
      vector::StoreOp::create(builder, loc, vector, output, ValueRange{at}, /*nontemporal=*/false, alignment);
    };
    // (a, b) becomes (a cos - b sin, a sin + b cos).
    SmallVector<Value, 8> firstOut, secondOut;
    for (int64_t i = 0; i < width; ++i)
      firstOut.push_back(arith::SubFOp::create(builder, loc, arith::MulFOp::create(builder, loc, a[i], cosA[i]),
                                               arith::MulFOp::create(builder, loc, b[i], sinA[i])));
    store(firstOut, first);
    for (int64_t i = 0; i < width; ++i)
      secondOut.push_back(arith::AddFOp::create(builder, loc, arith::MulFOp::create(builder, loc, a[i], sinB[i]),
                                                arith::MulFOp::create(builder, loc, b[i], cosB[i])));
    store(secondOut, second);
    scf::YieldOp::create(builder, loc);
  };
  return buildThreadPerItemKernel(builder, module, loc, name, *buffers, pairs / width, thread);
}

FailureOr<KernelLaunch> kiln::buildAppendKvKernel(OpBuilder &builder, gpu::GPUModuleOp module, func::FuncOp kernel,
                                                 AppendKvOp append, StringRef name) {
  if (!kernel->hasAttr(kUpdatesInPlaceAttrName))
    return append.emitOpError() << "on the GPU writes only the new rows into caches updated in place: its plan "
                                   "needs kiln-update-caches-in-place first";
  Location loc = append.getLoc();
  RankedTensorType cacheType = append.getKCache().getType(), rowsType = append.getK().getType();
  ArrayRef<int64_t> rows = rowsType.getShape(); // [B, Hkv, S_new, D]
  int64_t numPages = cacheType.getDimSize(0), pageSize = cacheType.getDimSize(1);
  int64_t maxPages = append.getBlockTable().getType().getDimSize(1), capacity = maxPages * pageSize;
  SmallVector<unsigned> parameterOf;
  FusedSums fused;
  FailureOr<SmallVector<RankedTensorType>> buffers = kernelParameters(append, parameterOf, &fused);
  if (failed(buffers))
    return failure();
  unsigned tableArg = parameterOf[4], positionsArg = parameterOf[5];
  unsigned kDestination = buffers->size() - 2, vDestination = buffers->size() - 1;
  auto thread = [&](Block &entry, IndexMath &im, Value linear) {
    // Element (b, h, s, d) of the new rows goes to position p = positions[b] + s: page block_table[b, p / page],
    // row p % page. A position outside the table or a page id outside the caches writes nothing.
    Value d = im.rem(linear, rows[3]), token = im.div(linear, rows[3]);
    Value s = im.rem(token, rows[2]), head = im.rem(im.div(token, rows[2]), rows[1]);
    Value b = im.div(token, rows[2] * rows[1]);
    auto loadIndex = [&](unsigned argument, Value at) {
      return arith::IndexCastOp::create(builder, loc, builder.getIndexType(),
                                        memref::LoadOp::create(builder, loc, entry.getArgument(argument), at));
    };
    Value position = im.add(loadIndex(positionsArg, b), s);
    Value inTable = im.lt(position, capacity); // unsigned: a negative position is out too
    Value column = im.min(im.div(position, pageSize), im.c(maxPages - 1));
    Value page = loadIndex(tableArg, im.add(im.mul(b, maxPages), column));
    Value valid = im.andi(inTable, im.lt(page, numPages));
    scf::IfOp::create(builder, loc, valid, [&](OpBuilder &thenBuilder, Location) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
      Value slot = im.add(im.mul(im.add(im.mul(page, pageSize), im.rem(position, pageSize)), rows[1]), head);
      Value at = im.add(im.mul(slot, rows[3]), d);
      for (auto [operand, destination] : {std::pair{2u, kDestination}, std::pair{3u, vDestination}}) {
        Value row;
        if (auto sum = fused.find(operand); sum != fused.end())
          row = lowering::narrow(builder, loc, fusedSumElements(builder, loc, im, entry, sum->second, linear, 1)[0],
                                 rowsType.getElementType());
        else
          row = memref::LoadOp::create(builder, loc, entry.getArgument(parameterOf[operand]), linear);
        memref::StoreOp::create(builder, loc, row, entry.getArgument(destination), at);
      }
      scf::YieldOp::create(builder, loc);
    });
    scf::YieldOp::create(builder, loc);
  };
  return buildThreadPerItemKernel(builder, module, loc, name, *buffers, rowsType.getNumElements(), thread);
}

/// Whether `op` is a data movement or an elementwise formula that the generic thread computes (one value per
/// output element from one load per operand).
static bool isPerElementOp(Operation *op) {
  return isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp, CastOp, ElementwiseOp>(op) ||
         lowering::hasScalarFormula(op);
}

/// How operand `operand` of a per-element op is read by a run of consecutive output elements within one row.
enum class RunRead { Contiguous, Splat, Neither };

/// How a run of consecutive elements of one output row reads operand `operand` of `op` (the run starts at a
/// column that is a multiple of its length): as consecutive elements (the operand's innermost index follows the
/// output's with stride 1 from an offset that keeps the run's alignment), as one element (broadcast along the
/// innermost dimension), or neither.
static RunRead runRead(Operation *op, RankedTensorType operand, RankedTensorType result, int64_t run) {
  ArrayRef<int64_t> in = operand.getShape(), out = result.getShape();
  if (isa<ReshapeOp>(op))
    return RunRead::Contiguous; // the same linear index; rows of the output are whole runs
  if (auto transpose = dyn_cast<TransposeOp>(op))
    return transpose.getPermutation().back() == static_cast<int64_t>(out.size()) - 1 ? RunRead::Contiguous
                                                                                      : RunRead::Neither;
  if (auto slice = dyn_cast<SliceOp>(op))
    return slice.getStrides().back() == 1 && slice.getOffsets().back() % run == 0 && in.back() % run == 0
               ? RunRead::Contiguous
               : RunRead::Neither;
  // Broadcasting operands: along the innermost dimension a run reads one element.
  if (in.empty() || in.back() == 1)
    return out.back() == 1 ? RunRead::Contiguous : RunRead::Splat;
  return in.back() == out.back() ? RunRead::Contiguous : RunRead::Neither;
}

/// The elements a thread of a per-element op's kernel computes: 16 bytes of the widest element type among its
/// operands and result, where every row of the output is a whole number of such runs and each operand is read by
/// them contiguously or as one broadcast element; else 1. An i1 operand or result (a byte per element in memory,
/// which a vector of i1 would read as packed bits) takes one element a thread.
static int64_t runLength(Operation *op) {
  auto isBool = [](Type type) { return cast<RankedTensorType>(type).getElementType().isInteger(1); };
  if (!isPerElementOp(op) || llvm::any_of(op->getOperandTypes(), isBool) || isBool(op->getResult(0).getType()))
    return 1;
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t widest = result.getElementTypeBitWidth();
  for (Type type : op->getOperandTypes())
    widest = std::max<int64_t>(widest, cast<RankedTensorType>(type).getElementTypeBitWidth());
  int64_t run = 128 / widest;
  if (result.getRank() == 0 || result.getShape().back() % run != 0)
    return 1;
  for (Type type : op->getOperandTypes())
    if (runRead(op, cast<RankedTensorType>(type), result, run) == RunRead::Neither)
      return 1;
  return run;
}

FailureOr<KernelLaunch> kiln::buildElementwiseKernel(OpBuilder &builder, gpu::GPUModuleOp module, Operation *op,
                                                     StringRef name) {
  if (!isElementwiseKernelOp(op))
    return op->emitOpError() << "has no elementwise GPU kernel";
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  if (auto rope = dyn_cast<RopeOp>(op))
    return buildRopeKernel(builder, module, rope, name);

  int64_t count = resultType.getNumElements();
  Location loc = op->getLoc();
  SmallVector<unsigned> parameterOf;
  FusedSums fused;
  FailureOr<SmallVector<RankedTensorType>> parameters = kernelParameters(op, parameterOf, &fused);
  if (failed(parameters))
    return failure();
  // Each operand's type, by operand number.
  SmallVector<RankedTensorType> buffers;
  for (Type type : op->getOperandTypes())
    buffers.push_back(cast<RankedTensorType>(type));
  // Runs of consecutive elements per thread (16-byte loads and stores) where the op reads its operands that way.
  int64_t run = runLength(op);
  auto thread = [&](Block &entry, IndexMath &im, Value item) {
    Value linear = im.mul(item, run);
    ArrayRef<int64_t> shape = resultType.getShape();
    SmallVector<Value> index = delinearize(im, shape, linear);
    // Where each operand is read for this output element.
    auto sourceIndex = [&](unsigned operand) -> Value {
      ArrayRef<int64_t> operandShape = buffers[operand].getShape();
      if (isa<ReshapeOp>(op))
        return linear;
      if (auto transpose = dyn_cast<TransposeOp>(op)) {
        SmallVector<Value> source(shape.size());
        for (auto [d, from] : llvm::enumerate(transpose.getPermutation()))
          source[from] = index[d];
        return linearize(im, operandShape, source);
      }
      if (auto slice = dyn_cast<SliceOp>(op)) {
        SmallVector<Value> source;
        for (int64_t d = 0, e = shape.size(); d < e; ++d)
          source.push_back(im.add(im.mul(index[d], slice.getStrides()[d]), slice.getOffsets()[d]));
        return linearize(im, operandShape, source);
      }
      return broadcastLinearIndex(im, operandShape, shape, index);
    };
    auto load = [&](unsigned operand, Value at) {
      return lowering::widen(builder, loc,
                             memref::LoadOp::create(builder, loc, entry.getArgument(parameterOf[operand]), at));
    };
    auto store = [&](Value result) {
      memref::StoreOp::create(builder, loc, lowering::narrow(builder, loc, result, resultType.getElementType()),
                              entry.getArguments().back(), linear);
      scf::YieldOp::create(builder, loc);
    };
    if (auto concat = dyn_cast<ConcatOp>(op)) {
      // Every input is read at this position clamped into its own extent; the one that holds it is selected.
      int64_t axis = concat.getAxis(), offset = 0;
      Value result;
      for (unsigned i = 0; i < op->getNumOperands(); ++i) {
        ArrayRef<int64_t> inputShape = buffers[i].getShape();
        int64_t size = inputShape[axis];
        Value local = arith::SubIOp::create(builder, loc, index[axis], im.c(offset));
        Value inside = arith::AndIOp::create(
            builder, loc, arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::sge, local, im.c(0)),
            im.lt(local, size));
        SmallVector<Value> source(index.begin(), index.end());
        source[axis] = im.select(inside, local, im.c(0));
        Value value = load(i, linearize(im, inputShape, source));
        result = result ? arith::SelectOp::create(builder, loc, inside, value, result).getResult() : value;
        offset += size;
      }
      return store(result);
    }
    if (auto gather = dyn_cast<GatherOp>(op)) {
      // The index tensor's element at this position picks the table row (negative counts from the end; out of
      // range is clamped, so that no index reads outside the table).
      int64_t axis = gather.getAxis();
      ArrayRef<int64_t> tableShape = buffers[0].getShape(), indexShape = buffers[1].getShape();
      int64_t indexRank = indexShape.size(), size = tableShape[axis];
      Value raw = memref::LoadOp::create(builder, loc, entry.getArgument(parameterOf[1]),
                                         linearize(im, indexShape, ArrayRef<Value>(index).slice(axis, indexRank)));
      Value row = arith::IndexCastOp::create(builder, loc, builder.getIndexType(), raw);
      Value negative = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt, row, im.c(0));
      row = im.select(negative, im.add(row, size), row);
      row = arith::MaxSIOp::create(builder, loc, row, im.c(0));
      row = arith::MinSIOp::create(builder, loc, row, im.c(size - 1));
      SmallVector<Value> source(index.begin(), index.begin() + axis);
      source.push_back(row);
      source.append(index.begin() + axis + indexRank, index.end());
      return store(load(0, linearize(im, tableShape, source)));
    }
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      // Loop over the reduced positions of this output element's slice, folding in f32.
      ArrayRef<int64_t> inputShape = buffers[0].getShape(), axes = reduce.getAxes();
      int64_t reduced = 1;
      for (int64_t axis : axes)
        reduced *= inputShape[axis];
      ReduceKind kind = reduce.getKind();
      const double inf = std::numeric_limits<double>::infinity();
      double init = kind == ReduceKind::max ? -inf : kind == ReduceKind::min ? inf : 0.0;
      Value start = arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(init));
      auto loop = scf::ForOp::create(
          builder, loc, im.c(0), im.c(reduced), im.c(1), ValueRange{start},
          [&](OpBuilder &nested, Location, Value r, ValueRange acc) {
            OpBuilder::InsertionGuard loopGuard(builder);
            builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
            SmallVector<Value> source(inputShape.size());
            Value rest = r;
            for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
              source[*it] = im.rem(rest, inputShape[*it]);
              rest = im.div(rest, inputShape[*it]);
            }
            for (int64_t d = 0, out = 0, rank = inputShape.size(); d < rank; ++d) {
              bool isReduced = llvm::is_contained(axes, d);
              if (!isReduced)
                source[d] = index[out];
              if (!isReduced || reduce.getKeepDims())
                ++out;
            }
            Value x = load(0, linearize(im, inputShape, source));
            Value folded = kind == ReduceKind::max   ? arith::MaximumFOp::create(builder, loc, acc[0], x).getResult()
                           : kind == ReduceKind::min ? arith::MinimumFOp::create(builder, loc, acc[0], x).getResult()
                                                     : arith::AddFOp::create(builder, loc, acc[0], x).getResult();
            scf::YieldOp::create(builder, loc, folded);
          });
      Value result = loop.getResult(0);
      if (kind == ReduceKind::mean)
        result = arith::DivFOp::create(builder, loc, result,
                                       arith::ConstantOp::create(builder, loc,
                                                                 builder.getF32FloatAttr(static_cast<double>(reduced))));
      return store(result);
    }
    if (isa<MergeSplitsOp>(op)) {
      // The chunks' weights exp(lse_n - max lse) for this element's row, 0 (and the part, undefined, left out of
      // the sum) for a chunk without a visible key; the weighted parts over the weights.
      int64_t chunks = buffers[0].getDimSize(0), rowLength = shape.back(), rows = count / rowLength;
      Value row = im.div(linear, rowLength);
      Value negInf = arith::ConstantOp::create(builder, loc,
                                               builder.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
      Value zero = arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(0.0f));
      auto overChunks = [&](ValueRange inits, llvm::function_ref<SmallVector<Value>(Value, ValueRange)> step) {
        return scf::ForOp::create(builder, loc, im.c(0), im.c(chunks), im.c(1), inits,
                                  [&](OpBuilder &nested, Location, Value n, ValueRange acc) {
                                    OpBuilder::InsertionGuard loopGuard(builder);
                                    builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
                                    scf::YieldOp::create(builder, loc, step(n, acc));
                                  })
            .getResults();
      };
      Value max = overChunks(ValueRange{negInf}, [&](Value n, ValueRange acc) -> SmallVector<Value> {
        Value lse = load(1, im.add(im.mul(n, rows), row));
        return {arith::MaximumFOp::create(builder, loc, acc[0], lse)};
      })[0];
      ValueRange sums = overChunks(ValueRange{zero, zero}, [&](Value n, ValueRange acc) -> SmallVector<Value> {
        Value lse = load(1, im.add(im.mul(n, rows), row));
        Value none = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OEQ, lse, negInf);
        Value weight = arith::SelectOp::create(
            builder, loc, none, zero, math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, lse, max)));
        Value used = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::ONE, weight, zero);
        Value part = load(0, im.add(im.mul(n, count), linear));
        Value term = arith::SelectOp::create(builder, loc, used, arith::MulFOp::create(builder, loc, weight, part),
                                             zero);
        return {arith::AddFOp::create(builder, loc, acc[0], weight),
                arith::AddFOp::create(builder, loc, acc[1], term)};
      });
      return store(lowering::divideByTotal(builder, loc, sums[1], sums[0]));
    }
    if (auto sum = dyn_cast<SumSplitsOp>(op)) {
      // The chunks' parts of this element added in chunk order (consecutive threads read consecutive words of
      // each chunk), then the epilogue on the sum and this element's epilogue operands.
      Value zero = arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(0.0f));
      auto loop = scf::ForOp::create(builder, loc, im.c(0), im.c(buffers[0].getDimSize(0)), im.c(1),
                                     ValueRange{zero}, [&](OpBuilder &nested, Location, Value n, ValueRange acc) {
                                       OpBuilder::InsertionGuard loopGuard(builder);
                                       builder.setInsertionPoint(nested.getInsertionBlock(),
                                                                 nested.getInsertionPoint());
                                       Value part = load(0, im.add(im.mul(n, count), linear));
                                       scf::YieldOp::create(builder, loc,
                                                            arith::AddFOp::create(builder, loc, acc[0], part).getResult());
                                     });
      if (!sum.hasEpilogue())
        return store(loop.getResult(0));
      SmallVector<Value> args{loop.getResult(0)};
      for (unsigned i = 1; i < op->getNumOperands(); ++i) {
        auto fusedSum = fused.find(i);
        args.push_back(fusedSum == fused.end()
                           ? load(i, sourceIndex(i))
                           : fusedSumElements(builder, loc, im, entry, fusedSum->second, sourceIndex(i), 1)[0]);
      }
      return store(lowering::inlineScalarRegion(builder, sum.getEpilogue(), args));
    }
    if (isa<SoftmaxOp, LogSumExpOp>(op)) {
      // Two passes along the axis — the max, then the sum of exp(x - max) — in f32.
      bool isSoftmax = isa<SoftmaxOp>(op);
      int64_t axis = isSoftmax ? static_cast<int64_t>(cast<SoftmaxOp>(op).getAxis())
                               : static_cast<int64_t>(cast<LogSumExpOp>(op).getAxis());
      ArrayRef<int64_t> inputShape = buffers[0].getShape();
      auto at = [&](Value j) {
        SmallVector<Value> source(index.begin(), index.end());
        if (isSoftmax)
          source[axis] = j;
        else
          source.insert(source.begin() + axis, j);
        return linearize(im, inputShape, source);
      };
      auto pass = [&](double init, llvm::function_ref<Value(Value, Value)> step) {
        Value start = arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(init));
        return scf::ForOp::create(builder, loc, im.c(0), im.c(inputShape[axis]), im.c(1), ValueRange{start},
                                  [&](OpBuilder &nested, Location, Value j, ValueRange acc) {
                                    OpBuilder::InsertionGuard loopGuard(builder);
                                    builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
                                    scf::YieldOp::create(builder, loc, step(acc[0], load(0, at(j))));
                                  })
            .getResult(0);
      };
      Value rowMax = pass(-std::numeric_limits<double>::infinity(), [&](Value acc, Value x) {
        return arith::MaximumFOp::create(builder, loc, acc, x).getResult();
      });
      Value max = lowering::finiteMax(builder, loc, rowMax); // a row of -inf: exponentials 0, not NaN
      Value sum = pass(0.0, [&](Value acc, Value x) {
        Value e = math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, x, max));
        return arith::AddFOp::create(builder, loc, acc, e).getResult();
      });
      if (!isSoftmax)
        return store(arith::AddFOp::create(builder, loc, max, math::LogOp::create(builder, loc, sum)));
      Value self = math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, load(0, linear), max));
      if (cast<SoftmaxOp>(op).getZeroEmptyRows())
        return store(lowering::divideByTotal(builder, loc, self, sum));
      return store(arith::DivFOp::create(builder, loc, self, sum));
    }
    // Each operand's values for the run: `run` consecutive elements (one vector load), or one element for all.
    SmallVector<SmallVector<Value, 8>> operands;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      Value buffer = entry.getArgument(parameterOf[i]), at = sourceIndex(i);
      SmallVector<Value, 8> lanes;
      if (run == 1 || runRead(op, buffers[i], resultType, run) == RunRead::Splat) {
        lanes.assign(run, lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, buffer, at)));
      } else {
        Type element = buffers[i].getElementType();
        Value loaded = vector::LoadOp::create(builder, loc, VectorType::get({run}, element), buffer, ValueRange{at},
                                              /*nontemporal=*/false,
                                              llvm::MaybeAlign(run * element.getIntOrFloatBitWidth() / 8));
        for (int64_t lane = 0; lane < run; ++lane)
          lanes.push_back(
              lowering::widen(builder, loc, vector::ExtractOp::create(builder, loc, loaded, ArrayRef<int64_t>{lane})));
      }
      operands.push_back(std::move(lanes));
    }
    SmallVector<Value, 8> results;
    for (int64_t lane = 0; lane < run; ++lane) {
      SmallVector<Value> values;
      for (const SmallVector<Value, 8> &lanes : operands)
        values.push_back(lanes[lane]);
      Value result;
      if (isa<CastOp>(op))
        result = lowering::convertScalar(builder, loc, values[0], resultType.getElementType());
      else if (isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp>(op))
        result = values[0];
      else if (auto fused = dyn_cast<ElementwiseOp>(op))
        result = lowering::inlineElementwiseBody(builder, fused.getBody(), values);
      else
        result = lowering::buildScalarFormula(builder, loc, op, values);
      results.push_back(lowering::narrow(builder, loc, result, resultType.getElementType()));
    }
    Value output = entry.getArguments().back();
    if (run == 1) {
      memref::StoreOp::create(builder, loc, results[0], output, linear);
    } else {
      Type element = resultType.getElementType();
      vector::StoreOp::create(builder, loc,
                              vector::FromElementsOp::create(builder, loc, VectorType::get({run}, element), results),
                              output, ValueRange{linear}, /*nontemporal=*/false,
                              llvm::MaybeAlign(run * element.getIntOrFloatBitWidth() / 8));
    }
    scf::YieldOp::create(builder, loc);
  };
  return buildThreadPerItemKernel(builder, module, loc, name, *parameters, count / run, thread);
}
