//===- RowKernel.cpp - softmax, RMSNorm and LayerNorm as GPU kernels --------===//
//
// Row kernels normalise along the last dimension: one warp per row, four rows per block. Each lane strides over
// the row's columns accumulating in f32, the warp combines the partial results with butterfly shuffles, and a
// last pass writes the normalised row. Rows are re-read from global memory between passes; they are small
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
  return isa<RmsNormOp, LayerNormOp>(op);
}

/// Sum or max of a value over the 32 lanes of a warp.
static Value warpReduce(OpBuilder &b, Location loc, Value value, bool isMax) {
  for (int32_t offset : {16, 8, 4, 2, 1}) {
    Value other = gpu::ShuffleOp::create(b, loc, value, offset, 32, gpu::ShuffleMode::XOR).getShuffleResult();
    value = isMax ? Value(arith::MaximumFOp::create(b, loc, value, other))
                  : Value(arith::AddFOp::create(b, loc, value, other));
  }
  return value;
}

FailureOr<KernelLaunch> kiln::buildRowKernel(OpBuilder &builder, gpu::GPUModuleOp module, Operation *op,
                                             StringRef name) {
  if (!isRowKernelOp(op))
    return op->emitOpError() << "has no row GPU kernel (a softmax must be along the last axis)";
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t width = type.getDimSize(type.getRank() - 1), rows = type.getNumElements() / std::max<int64_t>(width, 1);
  const int64_t warps = 4, threads = warps * 32;
  Location loc = op->getLoc();
  OpBuilder::InsertionGuard guard(builder);
  SmallVector<RankedTensorType> buffers;
  for (Type operand : op->getOperandTypes())
    buffers.push_back(cast<RankedTensorType>(operand));
  buffers.push_back(type);
  KernelFunction kernel = startKernel(builder, module, loc, name, buffers, threads, /*sharedBytes=*/0);
  Block &entry = kernel.func.getBody().front();
  Value input = entry.getArgument(0), out = entry.getArguments().back();
  IndexMath im{builder, loc};
  auto f32c = [&](double value) { return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(value)); };

  Value tid = gpu::ThreadIdOp::create(builder, loc, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  Value lane = im.rem(tid, 32), row = im.add(im.mul(block, warps), im.div(tid, 32));
  scf::IfOp::create(builder, loc, im.lt(row, rows), [&](OpBuilder &thenBuilder, Location) {
    OpBuilder::InsertionGuard thenGuard(builder);
    builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
    Value rowBase = im.mul(row, width);
    auto load = [&](Value buffer, Value index) {
      return lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, buffer, index));
    };
    // One strided pass over this lane's columns, folding `step(acc, x, column)` into an f32 accumulator.
    auto reducePass = [&](double init, llvm::function_ref<Value(Value, Value, Value)> step) {
      auto loop = scf::ForOp::create(builder, loc, lane, im.c(width), im.c(32), ValueRange{f32c(init)},
                                     [&](OpBuilder &nested, Location, Value column, ValueRange acc) {
                                       OpBuilder::InsertionGuard loopGuard(builder);
                                       builder.setInsertionPoint(nested.getInsertionBlock(),
                                                                 nested.getInsertionPoint());
                                       Value x = load(input, im.add(rowBase, column));
                                       scf::YieldOp::create(builder, loc, step(acc[0], x, column));
                                     });
      return loop.getResult(0);
    };
    // The final pass writing `f(x, column)` for each of this lane's columns.
    auto writePass = [&](llvm::function_ref<Value(Value, Value)> f) {
      scf::ForOp::create(builder, loc, lane, im.c(width), im.c(32), ValueRange{},
                         [&](OpBuilder &nested, Location, Value column, ValueRange) {
                           OpBuilder::InsertionGuard loopGuard(builder);
                           builder.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
                           Value x = load(input, im.add(rowBase, column));
                           Value y = lowering::narrow(builder, loc, f(x, column), type.getElementType());
                           memref::StoreOp::create(builder, loc, y, out, im.add(rowBase, column));
                           scf::YieldOp::create(builder, loc);
                         });
    };
    Value count = f32c(static_cast<double>(width));
    if (isa<SoftmaxOp>(op)) {
      Value max = warpReduce(builder, loc,
                             reducePass(-std::numeric_limits<double>::infinity(),
                                        [&](Value acc, Value x, Value) {
                                          return arith::MaximumFOp::create(builder, loc, acc, x).getResult();
                                        }),
                             /*isMax=*/true);
      Value sum = warpReduce(builder, loc, reducePass(0.0, [&](Value acc, Value x, Value) {
                               Value e = math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, x, max));
                               return arith::AddFOp::create(builder, loc, acc, e).getResult();
                             }),
                             false);
      Value inv = arith::DivFOp::create(builder, loc, f32c(1.0), sum);
      writePass([&](Value x, Value) -> Value {
        Value e = math::ExpOp::create(builder, loc, arith::SubFOp::create(builder, loc, x, max));
        return arith::MulFOp::create(builder, loc, e, inv);
      });
    } else if (auto rms = dyn_cast<RmsNormOp>(op)) {
      Value squares = warpReduce(builder, loc, reducePass(0.0, [&](Value acc, Value x, Value) {
                                   return arith::AddFOp::create(builder, loc, acc,
                                                                arith::MulFOp::create(builder, loc, x, x))
                                       .getResult();
                                 }),
                                 false);
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
      Value sum = warpReduce(builder, loc, reducePass(0.0, [&](Value acc, Value x, Value) {
                               return arith::AddFOp::create(builder, loc, acc, x).getResult();
                             }),
                             false);
      Value mean = arith::DivFOp::create(builder, loc, sum, count);
      Value squares = warpReduce(builder, loc, reducePass(0.0, [&](Value acc, Value x, Value) {
                                   Value centred = arith::SubFOp::create(builder, loc, x, mean);
                                   return arith::AddFOp::create(builder, loc, acc,
                                                                arith::MulFOp::create(builder, loc, centred, centred))
                                       .getResult();
                                 }),
                                 false);
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
  return KernelLaunch{{llvm::divideCeilSigned(rows, warps), 1, 1}, {threads, 1, 1}, 0};
}
