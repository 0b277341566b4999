//===- IndexMath.cpp - Folding index arithmetic for kernel builders ------===//
//
// The folds of IndexMath.h: constants combine at build time, identities return their operand, and index
// constants live once per value at the start of the kernel that uses them.
//
//===----------------------------------------------------------------------===//

#include "IndexMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::kiln::gpukernel;

/// The entry block of the gpu.func that `b` builds in, if any (none inside a region under construction, whose
/// block has no parent op yet).
static Block *enclosingKernelBody(OpBuilder &b) {
  Block *block = b.getInsertionBlock();
  Operation *parent = block ? block->getParentOp() : nullptr;
  auto kernel = parent ? dyn_cast<gpu::GPUFuncOp>(parent) : nullptr;
  if (!kernel && parent)
    kernel = parent->getParentOfType<gpu::GPUFuncOp>();
  return kernel ? &kernel.getBody().front() : nullptr;
}

/// A 64-bit result of unsigned (wrapping) arithmetic as the index value arith's ops give.
static int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

IndexMath::IndexMath(OpBuilder &b, Location loc) : b(b), loc(loc), kernelBody(enclosingKernelBody(b)) {}

Value IndexMath::c(int64_t v) {
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

Value IndexMath::flag(bool value) { return arith::ConstantIntOp::create(b, loc, value, 1); }

std::optional<int64_t> IndexMath::known(Value x) {
  if (auto constant = x.getDefiningOp<arith::ConstantOp>())
    if (auto value = dyn_cast<IntegerAttr>(constant.getValue()))
      return value.getValue().getSExtValue();
  return std::nullopt;
}

Value IndexMath::add(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx && ky)
    return c(wrap(uint64_t(*kx) + uint64_t(*ky)));
  if (kx == 0 || ky == 0)
    return kx == 0 ? y : x;
  return arith::AddIOp::create(b, loc, x, y);
}

Value IndexMath::add(Value x, int64_t y) { return add(x, c(y)); }

Value IndexMath::mul(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx && ky)
    return c(wrap(uint64_t(*kx) * uint64_t(*ky)));
  if (kx == 0 || ky == 0)
    return kx == 0 ? x : y;
  if (kx == 1 || ky == 1)
    return kx == 1 ? y : x;
  return arith::MulIOp::create(b, loc, x, y);
}

Value IndexMath::mul(Value x, int64_t y) { return mul(x, c(y)); }

Value IndexMath::div(Value x, int64_t y) {
  if (std::optional<int64_t> kx = known(x); kx && y != 0)
    return c(int64_t(uint64_t(*kx) / uint64_t(y)));
  return y == 1 ? x : Value(arith::DivUIOp::create(b, loc, x, c(y)));
}

Value IndexMath::rem(Value x, int64_t y) {
  if (std::optional<int64_t> kx = known(x); kx && y != 0)
    return c(int64_t(uint64_t(*kx) % uint64_t(y)));
  return arith::RemUIOp::create(b, loc, x, c(y));
}

Value IndexMath::sub(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx && ky)
    return c(wrap(uint64_t(*kx) - uint64_t(*ky)));
  return ky == 0 ? x : Value(arith::SubIOp::create(b, loc, x, y));
}

Value IndexMath::sub(Value x, int64_t y) { return sub(x, c(y)); }

Value IndexMath::min(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx && ky)
    return c(int64_t(std::min(uint64_t(*kx), uint64_t(*ky))));
  return arith::MinUIOp::create(b, loc, x, y);
}

Value IndexMath::max(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx && ky)
    return c(int64_t(std::max(uint64_t(*kx), uint64_t(*ky))));
  return arith::MaxUIOp::create(b, loc, x, y);
}

Value IndexMath::lt(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx && ky)
    return flag(uint64_t(*kx) < uint64_t(*ky));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
}

Value IndexMath::lt(Value x, int64_t y) { return lt(x, c(y)); }

Value IndexMath::select(Value cond, Value x, Value y) {
  if (std::optional<int64_t> kc = known(cond))
    return *kc ? x : y;
  return arith::SelectOp::create(b, loc, cond, x, y);
}

Value IndexMath::andi(Value x, Value y) {
  std::optional<int64_t> kx = known(x), ky = known(y);
  if (kx)
    return *kx ? y : x;
  if (ky)
    return *ky ? x : y;
  return arith::AndIOp::create(b, loc, x, y);
}
