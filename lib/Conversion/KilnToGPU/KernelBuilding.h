//===- KernelBuilding.h - Building blocks of Kiln's GPU kernels ----*- C++ -*-===//
//
// Index arithmetic, broadcast indexing, tensor-core fragments and the mma.sync call that the matmul and
// attention kernel builders share. Kept out of every file that does not emit GPU code, since it pulls in the
// NVVM and LLVM dialects.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_KERNELBUILDING_H
#define KILN_LIB_CONVERSION_KILNTOGPU_KERNELBUILDING_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir {
namespace kiln {
namespace gpukernel {

/// Index arithmetic that folds what it can as it builds: an operation on known constants becomes a constant,
/// and adding 0, multiplying by 1 and the like return their operand. The kernels' unrolled copies and fragment
/// loops compute most of their offsets from constants, and building the folded form directly keeps the kernel
/// stage's IR about half the size it would be before canonicalize, which every later pass walks.
struct IndexMath {
  IndexMath(OpBuilder &b, Location loc) : b(b), loc(loc), kernelBody(enclosingKernelBody(b)) {}

  OpBuilder &b;
  Location loc;

  /// The index constant `v`: one per value in a kernel, at the start of its body (the kernels use a dozen
  /// distinct constants hundreds of times), or a new one where this was made outside any kernel.
  Value c(int64_t v) {
    if (!kernelBody)
      return arith::ConstantIndexOp::create(b, loc, v);
    for (Operation &op : *kernelBody) {
      auto constant = dyn_cast<arith::ConstantIndexOp>(op);
      if (!constant)
        break;
      if (constant.value() == v)
        return constant;
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(kernelBody);
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value add(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx && ky)
      return c(*kx + *ky);
    if (kx == 0 || ky == 0)
      return kx == 0 ? y : x;
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value add(Value x, int64_t y) {
    if (std::optional<int64_t> kx = known(x))
      return c(*kx + y);
    return y == 0 ? x : Value(arith::AddIOp::create(b, loc, x, c(y)));
  }
  Value mul(Value x, int64_t y) {
    if (std::optional<int64_t> kx = known(x))
      return c(*kx * y);
    return y == 1 ? x : y == 0 ? c(0) : Value(arith::MulIOp::create(b, loc, x, c(y)));
  }
  Value mul(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx && ky)
      return c(*kx * *ky);
    if (kx == 0 || ky == 0)
      return kx == 0 ? x : y;
    if (kx == 1 || ky == 1)
      return kx == 1 ? y : x;
    return arith::MulIOp::create(b, loc, x, y);
  }
  Value div(Value x, int64_t y) {
    if (std::optional<int64_t> kx = known(x))
      return c(int64_t(uint64_t(*kx) / uint64_t(y)));
    return y == 1 ? x : Value(arith::DivUIOp::create(b, loc, x, c(y)));
  }
  Value rem(Value x, int64_t y) {
    if (std::optional<int64_t> kx = known(x))
      return c(int64_t(uint64_t(*kx) % uint64_t(y)));
    return arith::RemUIOp::create(b, loc, x, c(y));
  }
  Value sub(Value x, int64_t y) {
    if (std::optional<int64_t> kx = known(x))
      return c(*kx - y);
    return y == 0 ? x : Value(arith::SubIOp::create(b, loc, x, c(y)));
  }
  Value sub(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx && ky)
      return c(*kx - *ky);
    return ky == 0 ? x : Value(arith::SubIOp::create(b, loc, x, y));
  }
  Value min(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx && ky)
      return c(int64_t(std::min(uint64_t(*kx), uint64_t(*ky))));
    return arith::MinUIOp::create(b, loc, x, y);
  }
  Value max(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx && ky)
      return c(int64_t(std::max(uint64_t(*kx), uint64_t(*ky))));
    return arith::MaxUIOp::create(b, loc, x, y);
  }
  Value lt(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx && ky)
      return arith::ConstantIntOp::create(b, loc, uint64_t(*kx) < uint64_t(*ky), 1);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value lt(Value x, int64_t y) {
    if (std::optional<int64_t> kx = known(x))
      return arith::ConstantIntOp::create(b, loc, uint64_t(*kx) < uint64_t(y), 1);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, c(y));
  }
  Value select(Value cond, Value x, Value y) {
    if (std::optional<int64_t> kc = known(cond))
      return *kc ? x : y;
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value andi(Value x, Value y) {
    std::optional<int64_t> kx = known(x), ky = known(y);
    if (kx || ky)
      return kx ? (*kx ? y : x) : (*ky ? x : y);
    return arith::AndIOp::create(b, loc, x, y);
  }

  /// The entry block of the gpu.func that `b` builds in, if any (none inside a region under construction).
  static Block *enclosingKernelBody(OpBuilder &b) {
    Block *block = b.getInsertionBlock();
    Operation *parent = block ? block->getParentOp() : nullptr;
    auto kernel = parent ? dyn_cast<gpu::GPUFuncOp>(parent) : nullptr;
    if (!kernel && parent)
      kernel = parent->getParentOfType<gpu::GPUFuncOp>();
    return kernel ? &kernel.getBody().front() : nullptr;
  }

  /// The value of `x` when an arith.constant of index or integer type defines it (i1 true reads as nonzero).
  static std::optional<int64_t> known(Value x) {
    if (auto constant = x.getDefiningOp<arith::ConstantOp>())
      if (auto value = dyn_cast<IntegerAttr>(constant.getValue()))
        return value.getValue().getSExtValue();
    return std::nullopt;
  }

private:
  Block *kernelBody;
};

/// Linear index into a row-major operand of `operandShape` that broadcasts (numpy rules) against a result of
/// `resultShape`, at the result position `indices` (one per result dim, or nullptr for 0). `runtimeExtents`,
/// when given, has one entry per result dim: where set, that dim's extent is the kernel value, and an operand
/// dim of more than 1 element there has that extent too (a size-generic kernel's rows and columns).
Value broadcastLinearIndex(IndexMath &m, ArrayRef<int64_t> operandShape, ArrayRef<int64_t> resultShape,
                           ArrayRef<Value> indices, ArrayRef<Value> runtimeExtents = {});

/// The four registers of an A fragment, or the two of a B fragment, as nvvm.mma.sync takes them: pairs of f16
/// as vector<2xf16>, pairs of bf16 packed into i32.
SmallVector<Value> packFragment(OpBuilder &b, Location loc, Value fragment);

/// The B fragments of two adjacent 8-column blocks (columns n0..n0+7 and n0+8..n0+15, rows k0..k0+15 of the
/// K x N operand) with one ldmatrix.x4 from a shared tile stored row-major with `stride` elements per row:
/// `kMajor` for a [K][N] tile (a transposed load), otherwise [N][K]. Returns the two packed fragments.
std::pair<SmallVector<Value>, SmallVector<Value>> loadBFragmentPair(OpBuilder &b, Location loc, IndexMath &m,
                                                                    Value shared, Value base, int64_t stride,
                                                                    Value lane, Value k0, Value n0, bool kMajor);

/// A kernel under construction: its gpu.func and its dynamic shared memory as raw bytes.
struct KernelFunction {
  gpu::GPUFuncOp func;
  Value sharedBytes;
};

/// The extent of a size-generic kernel's buffers: bare pointers need a static memref shape, and the kernel's
/// index math, not the type, bounds every access (2^40 elements, beyond any GPU's memory).
constexpr int64_t kSizeGenericExtent = int64_t(1) << 40;

/// Starts kernel `name` in `module`: a gpu.func taking each of `buffers` as a flat row-major memref (bare
/// pointers), launched with `threads` threads, with `sharedBytes` of dynamic shared memory (an extern workgroup
/// global aligned to `sharedAlignment` bytes; none when 0). Leaves `b` at the start of the kernel body. With
/// `sizeParams` > 0 the kernel is size-generic: its buffers are typed with kSizeGenericExtent elements and that
/// many index parameters (the sizes the code reads) follow them.
KernelFunction startKernel(OpBuilder &b, gpu::GPUModuleOp module, Location loc, StringRef name,
                           ArrayRef<RankedTensorType> buffers, int64_t threads, int64_t sharedBytes,
                           int64_t sharedAlignment = 16, unsigned sizeParams = 0);

/// A 1-D view of `size` elements of `element` at element offset `offset` of the kernel's shared memory.
Value sharedView(OpBuilder &b, Location loc, Value sharedBytes, int64_t offset, int64_t size, Type element);

/// Runs one mma.sync m16n8k16 (f16 or bf16 operands as `packFragment` gives them, f32 accumulators) on the
/// accumulator fragment `acc` (vector<4xf32>) and returns the new fragment.
Value mmaSync(OpBuilder &b, Location loc, ArrayRef<Value> a, ArrayRef<Value> bFragment, Value acc, bool bf16);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_KERNELBUILDING_H
