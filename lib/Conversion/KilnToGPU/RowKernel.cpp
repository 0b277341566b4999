//===- RowKernel.cpp - softmax, norms and last-axis reductions as GPU kernels ===//
//
// Row kernels normalise or reduce along the last dimension: one warp per row, four rows per block (a block of
// eight warps per row for rows of 1024 columns and more). Each thread strides over the row's columns, several
// independent loads in flight per step, accumulating in f32; warps combine their partial results with butterfly
// shuffles (and wide rows through shared memory), and a last pass writes the normalised row (or the row's first
// thread writes its one reduced value). Rows are re-read from global memory between passes; they are small
// enough to stay in L1/L2.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

bool kiln::isRowKernelOp(Operation *op) {
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    return static_cast<int64_t>(softmax.getAxis()) == softmax.getType().getRank() - 1;
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return reduce.getAxes().size() == 1 && reduce.getAxes()[0] == reduce.getInput().getType().getRank() - 1;
  if (auto logSumExp = dyn_cast<LogSumExpOp>(op))
    return static_cast<int64_t>(logSumExp.getAxis()) == logSumExp.getInput().getType().getRank() - 1;
  return isa<RmsNormOp, LayerNormOp>(op);
}

/// `combine` folded over the 32 lanes of a warp.
static Value warpReduce(OpBuilder &b, Location loc, Value value, llvm::function_ref<Value(Value, Value)> combine) {
  for (int32_t offset : {16, 8, 4, 2, 1})
    value = combine(value, gpu::ShuffleOp::create(b, loc, value, offset, 32, gpu::ShuffleMode::XOR).getShuffleResult());
  return value;
}

FailureOr<KernelLaunch> kiln::buildRowKernel(OpBuilder &builder, gpu::GPUModuleOp module, Operation *op,
                                             StringRef name) {
  if (!isRowKernelOp(op))
    return op->emitOpError() << "has no row GPU kernel (softmax, reduce and logsumexp must be along the last axis)";
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  auto inputType = cast<RankedTensorType>(op->getOperand(0).getType());
  int64_t width = inputType.getDimSize(inputType.getRank() - 1);
  int64_t rows = inputType.getNumElements() / std::max<int64_t>(width, 1);
  // Narrow rows: one warp per row, four rows per block. Wide rows (1024 columns and more, as in the hidden
  // dimension of a Transformer): a block of eight warps per row, so that a few rows (decoding) still spread
  // over many multiprocessors and each thread walks a short stretch; the warps combine through shared memory.
  const bool wide = width >= 1024;
  const int64_t warps = wide ? 8 : 4, threads = warps * 32, rowThreads = wide ? threads : 32;
  const int64_t rowsPerBlock = threads / rowThreads, sharedBytes = wide ? warps * 4 : 0;
  Location loc = op->getLoc();
  OpBuilder::InsertionGuard guard(builder);
  SmallVector<RankedTensorType> buffers;
  for (Type operand : op->getOperandTypes())
    buffers.push_back(cast<RankedTensorType>(operand));
  buffers.push_back(type);
  KernelFunction kernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes);
  Block &entry = kernel.func.getBody().front();
  Value input = entry.getArgument(0), out = entry.getArguments().back();
  IndexMath im{builder, loc};
  auto f32c = [&](double value) { return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(value)); };
  Value partials = wide ? sharedView(builder, loc, kernel.sharedBytes, 0, warps, builder.getF32Type()) : Value();

  Value tid = gpu::ThreadIdOp::create(builder, loc, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  // `lane` is the thread's place among the row's threads; the row is the block's (wide) or the warp's.
  Value lane = im.rem(tid, rowThreads), row = im.add(im.mul(block, rowsPerBlock), im.div(tid, rowThreads));
  scf::IfOp::create(builder, loc, im.lt(row, rows), [&](OpBuilder &thenBuilder, Location) {
    OpBuilder::InsertionGuard thenGuard(builder);
    builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
    Value rowBase = im.mul(row, width);
    auto load = [&](Value buffer, Value index) {
      return lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, buffer, index));
    };
    // Each thread walks its columns (lane, lane + rowThreads, ...) `unroll` at a time, issuing that many
    // independent loads before using them, so that it keeps several loads in flight instead of waiting on one
    // load per iteration. `unroll` divides width / rowThreads, so every unrolled column is inside the row.
    int64_t unroll = 1;
    for (int64_t candidate : {8, 4, 2})
      if (width % (rowThreads * candidate) == 0) {
        unroll = candidate;
        break;
      }
    // The loop over this lane's groups of `unroll` columns; `body` gets the group's columns and loaded values.
    auto forEachGroup = [&](ValueRange init,
                            llvm::function_ref<SmallVector<Value>(ArrayRef<Value>, ArrayRef<Value>, ValueRange)>
                                body) {
      return scf::ForOp::create(builder, loc, lane, im.c(width), im.c(rowThreads * unroll), init,
                                [&](OpBuilder &nested, Location, Value first, ValueRange acc) {
                                  OpBuilder::InsertionGuard loopGuard(builder);
                                  builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
                                  SmallVector<Value> columns, values;
                                  for (int64_t j = 0; j < unroll; ++j)
                                    columns.push_back(j ? im.add(first, im.c(rowThreads * j)) : first);
                                  for (Value column : columns)
                                    values.push_back(load(input, im.add(rowBase, column)));
                                  scf::YieldOp::create(builder, loc, body(columns, values, acc));
                                });
    };
    // One strided pass over this lane's columns, folding `step(acc, x, column)` into an f32 accumulator.
    auto reducePass = [&](double init, llvm::function_ref<Value(Value, Value, Value)> step) {
      auto loop = forEachGroup(ValueRange{f32c(init)}, [&](ArrayRef<Value> columns, ArrayRef<Value> values,
                                                            ValueRange acc) -> SmallVector<Value> {
        Value folded = acc[0];
        for (auto [column, x] : llvm::zip(columns, values))
          folded = step(folded, x, column);
        return {folded};
      });
      return loop.getResult(0);
    };
    // The final pass writing `f(x, column)` for each of this lane's columns.
    auto writePass = [&](llvm::function_ref<Value(Value, Value)> f) {
      forEachGroup(ValueRange{}, [&](ArrayRef<Value> columns, ArrayRef<Value> values, ValueRange) {
        for (auto [column, x] : llvm::zip(columns, values)) {
          Value y = lowering::narrow(builder, loc, f(x, column), type.getElementType());
          memref::StoreOp::create(builder, loc, y, out, im.add(rowBase, column));
        }
        return SmallVector<Value>{};
      });
    };
    Value count = f32c(static_cast<double>(width));
    const double inf = std::numeric_limits<double>::infinity();
    auto add = [&](Value x, Value y) { return arith::AddFOp::create(builder, loc, x, y).getResult(); };
    auto maximum = [&](Value x, Value y) { return arith::MaximumFOp::create(builder, loc, x, y).getResult(); };
    auto minimum = [&](Value x, Value y) { return arith::MinimumFOp::create(builder, loc, x, y).getResult(); };
    // A strided pass folded by `step`, then combined across the warp by `combine`: the row's value in every lane.
    auto rowReduce = [&](double init, llvm::function_ref<Value(Value, Value, Value)> step,
                         llvm::function_ref<Value(Value, Value)> combine) {
      Value value = warpReduce(builder, loc, reducePass(init, step), combine);
      if (!wide)
        return value;
      // Each warp's lane 0 posts its partial; every thread folds the posted partials. The barriers keep a
      // second reduction's posts from overwriting partials still being read.
      Value warp = im.div(tid, 32);
      scf::IfOp::create(builder, loc, im.lt(im.rem(tid, 32), 1), [&](OpBuilder &postBuilder, Location) {
        memref::StoreOp::create(postBuilder, loc, value, partials, warp);
        scf::YieldOp::create(postBuilder, loc);
      });
      gpu::BarrierOp::create(builder, loc);
      Value folded = memref::LoadOp::create(builder, loc, partials, im.c(0));
      for (int64_t w = 1; w < warps; ++w)
        folded = combine(folded, memref::LoadOp::create(builder, loc, partials, im.c(w)));
      gpu::BarrierOp::create(builder, loc);
      return folded;
    };
    auto rowSum = [&](llvm::function_ref<Value(Value)> term) {
      return rowReduce(0.0, [&](Value acc, Value x, Value) { return add(acc, term(x)); }, add);
    };
    // The row's max, and the sum of exp(x - max): softmax's and logsumexp's two passes.
    auto maxAndSumExp = [&]() {
      Value max = rowReduce(-inf, [&](Value acc, Value x, Value) { return maximum(acc, x); }, maximum);
      Value sum = rowSum([&](Value x) {
        return math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, x, max));
      });
      return std::make_pair(max, sum);
    };
    if (isa<ReduceOp, LogSumExpOp>(op)) {
      Value result;
      if (auto reduce = dyn_cast<ReduceOp>(op)) {
        ReduceKind kind = reduce.getKind();
        llvm::function_ref<Value(Value, Value)> combine =
            kind == ReduceKind::max ? llvm::function_ref<Value(Value, Value)>(maximum)
            : kind == ReduceKind::min ? llvm::function_ref<Value(Value, Value)>(minimum)
                                      : llvm::function_ref<Value(Value, Value)>(add);
        double init = kind == ReduceKind::max ? -inf : kind == ReduceKind::min ? inf : 0.0;
        result = rowReduce(init, [&](Value acc, Value x, Value) { return combine(acc, x); }, combine);
        if (kind == ReduceKind::mean)
          result = arith::DivFOp::create(builder, loc, result, count);
      } else {
        std::pair<Value, Value> maxSum = maxAndSumExp();
        result = add(maxSum.first, math::LogOp::create(builder, loc, maxSum.second));
      }
      // Every lane holds the row's value; lane 0 stores it.
      scf::IfOp::create(builder, loc, im.lt(lane, 1), [&](OpBuilder &storeBuilder, Location) {
        Value narrowed = lowering::narrow(storeBuilder, loc, result, type.getElementType());
        memref::StoreOp::create(storeBuilder, loc, narrowed, out, row);
        scf::YieldOp::create(storeBuilder, loc);
      });
    } else if (isa<SoftmaxOp>(op)) {
      std::pair<Value, Value> maxSum = maxAndSumExp();
      Value max = maxSum.first, inv = arith::DivFOp::create(builder, loc, f32c(1.0), maxSum.second);
      writePass([&](Value x, Value) -> Value {
        Value e = math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, x, max));
        return arith::MulFOp::create(builder, loc, e, inv);
      });
    } else if (auto rms = dyn_cast<RmsNormOp>(op)) {
      Value squares = rowSum([&](Value x) { return arith::MulFOp::create(builder, loc, x, x); });
      Value meanSquare = arith::DivFOp::create(builder, loc, squares, count);
      Value inv = math::RsqrtOp::create(
          builder, loc, arith::AddFOp::create(builder, loc, meanSquare, f32c(rms.getEpsilon().convertToDouble())));
      Value weight = entry.getArgument(1);
      writePass([&](Value x, Value column) -> Value {
        Value scaled = arith::MulFOp::create(builder, loc, x, inv);
        return arith::MulFOp::create(builder, loc, scaled, load(weight, column));
      });
    } else {
      auto norm = cast<LayerNormOp>(op);
      Value sum = rowSum([&](Value x) { return x; });
      Value mean = arith::DivFOp::create(builder, loc, sum, count);
      Value squares = rowSum([&](Value x) {
        Value centred = arith::SubFOp::create(builder, loc, x, mean);
        return arith::MulFOp::create(builder, loc, centred, centred);
      });
      Value variance = arith::DivFOp::create(builder, loc, squares, count);
      Value inv = math::RsqrtOp::create(
          builder, loc, arith::AddFOp::create(builder, loc, variance, f32c(norm.getEpsilon().convertToDouble())));
      Value weight = entry.getArgument(1);
      Value bias = norm.getBias() ? entry.getArgument(2) : Value();
      writePass([&](Value x, Value column) -> Value {
        Value y = arith::MulFOp::create(builder, loc, arith::SubFOp::create(builder, loc, x, mean), inv);
        y = arith::MulFOp::create(builder, loc, y, load(weight, column));
        return bias ? Value(arith::AddFOp::create(builder, loc, y, load(bias, column))) : y;
      });
    }
    scf::YieldOp::create(builder, loc);
  });
  gpu::ReturnOp::create(builder, loc);
  return KernelLaunch{{llvm::divideCeilSigned(rows, rowsPerBlock), 1, 1}, {threads, 1, 1}, sharedBytes};
}
