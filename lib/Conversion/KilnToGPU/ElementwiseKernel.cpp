//===- ElementwiseKernel.cpp - Glue kernels: elementwise and data movement -===//
//
// The kernels between the fused matmuls and attentions — a transpose back to [B, S, H*D], a leftover
// elementwise op, a cast, a broadcast, a slice, RoPE — as one thread per output element: the thread turns its linear
// index into a multi-index, reads each operand at the index the op implies (broadcast, permuted, strided),
// computes the op's f32 formula (the same one the host lowering and epilogues use), and stores. They move bytes
// rather than compute, so simplicity wins over tensor cores here.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

/// Kernel ops this builder handles.
bool kiln::isElementwiseKernelOp(Operation *op) {
  if (isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp, CastOp, RopeOp>(op))
    return true;
  return isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp,
             AbsOp, TanhOp, ErfOp, SigmoidOp, ReluOp, SiluOp, GeluOp, SelectOp>(op);
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

FailureOr<KernelLaunch> kiln::buildElementwiseKernel(OpBuilder &builder, gpu::GPUModuleOp module, Operation *op,
                                                     StringRef name) {
  if (!isElementwiseKernelOp(op))
    return op->emitOpError() << "has no elementwise GPU kernel";
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  for (Type type : op->getOperandTypes())
    if (!isa<FloatType>(cast<RankedTensorType>(type).getElementType()) &&
        !cast<RankedTensorType>(type).getElementType().isInteger(1))
      return op->emitOpError() << "the GPU glue kernels take float (and i1 condition) tensors only";
  if (!isa<FloatType>(resultType.getElementType()))
    return op->emitOpError() << "the GPU glue kernels produce float tensors only";

  const int64_t threads = 256;
  int64_t count = resultType.getNumElements();
  Location loc = op->getLoc();
  OpBuilder::InsertionGuard guard(builder);
  SmallVector<RankedTensorType> buffers;
  for (Type type : op->getOperandTypes())
    buffers.push_back(cast<RankedTensorType>(type));
  buffers.push_back(resultType);
  KernelFunction kernel = startKernel(builder, module, loc, name, buffers, threads, /*sharedBytes=*/0);
  Block &entry = kernel.func.getBody().front();
  IndexMath im{builder, loc};

  Value tid = gpu::ThreadIdOp::create(builder, loc, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(builder, loc, gpu::Dimension::x);
  Value linear = im.add(im.mul(block, threads), tid);
  scf::IfOp::create(builder, loc, im.lt(linear, count), [&](OpBuilder &thenBuilder, Location) {
    OpBuilder::InsertionGuard thenGuard(builder);
    builder.setInsertionPoint(thenBuilder.getInsertionBlock(), thenBuilder.getInsertionPoint());
    ArrayRef<int64_t> shape = resultType.getShape();
    SmallVector<Value> index(shape.size());
    Value remaining = linear;
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      index[d] = im.rem(remaining, shape[d]);
      remaining = im.div(remaining, shape[d]);
    }
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
    if (auto rope = dyn_cast<RopeOp>(op)) {
      // Each element reads itself, its rotation partner and the angle of its pair (as the host lowering does).
      int64_t rank = shape.size(), half = shape.back() / 2;
      Value c = index[rank - 1], pair, partner, isSecond;
      if (rope.getInterleaved()) {
        pair = im.div(c, 2);
        isSecond = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, im.rem(c, 2), im.c(1));
        partner = arith::XOrIOp::create(builder, loc, c, im.c(1));
      } else {
        isSecond = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::uge, c, im.c(half));
        pair = im.select(isSecond, arith::SubIOp::create(builder, loc, c, im.c(half)), c);
        partner = im.select(isSecond, pair, im.add(c, half));
      }
      Value rowStart = arith::SubIOp::create(builder, loc, linear, c);
      Value self = lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, entry.getArgument(0), linear));
      Value other = lowering::widen(
          builder, loc, memref::LoadOp::create(builder, loc, entry.getArgument(0), im.add(rowStart, partner)));
      Value angle = im.add(im.mul(index[rank - 2], half), pair);
      Value cosv = lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, entry.getArgument(1), angle));
      Value sinv = lowering::widen(builder, loc, memref::LoadOp::create(builder, loc, entry.getArgument(2), angle));
      Value selfCos = arith::MulFOp::create(builder, loc, self, cosv);
      Value otherSin = arith::MulFOp::create(builder, loc, other, sinv);
      Value rotated = arith::SelectOp::create(builder, loc, isSecond, arith::AddFOp::create(builder, loc, selfCos, otherSin),
                                              arith::SubFOp::create(builder, loc, selfCos, otherSin));
      memref::StoreOp::create(builder, loc, lowering::narrow(builder, loc, rotated, resultType.getElementType()),
                              entry.getArguments().back(), linear);
      scf::YieldOp::create(builder, loc);
      return;
    }
    SmallVector<Value> values;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      Value loaded = memref::LoadOp::create(builder, loc, entry.getArgument(i), sourceIndex(i));
      values.push_back(lowering::widen(builder, loc, loaded));
    }
    Value result = isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp, CastOp>(op)
                       ? values[0]
                       : lowering::buildScalarFormula(builder, loc, op, values);
    result = lowering::narrow(builder, loc, result, resultType.getElementType());
    memref::StoreOp::create(builder, loc, result, entry.getArguments().back(), linear);
    scf::YieldOp::create(builder, loc);
  });
  gpu::ReturnOp::create(builder, loc);
  return KernelLaunch{{llvm::divideCeilSigned(count, threads), 1, 1}, {threads, 1, 1}, 0};
}
