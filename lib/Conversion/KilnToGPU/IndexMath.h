//===- IndexMath.h - Folding index arithmetic for kernel builders -*- C++ -*-===//
//
// The kernels' unrolled copies and fragment loops compute most of their offsets from constants. Folding those
// as the IR is built, and keeping one index constant per value at the start of the kernel, leaves the kernel
// stage's IR about a third smaller than building every operation and constant where it is used: every pass
// after the kernel builders (kernel grouping, splitting and sharing, the kernel cache's key, the NVVM lowering's
// canonicalize) walks less, on the critical path of each cold JIT compile, and `.ir("gpu")` reads better.
// Canonicalize would reach the same IR later; the GPU kernels' cubins are the same either way.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_INDEXMATH_H
#define KILN_LIB_CONVERSION_KILNTOGPU_INDEXMATH_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir {
namespace kiln {
namespace gpukernel {

/// Index arithmetic on `b` at `loc` (wrapping addition, subtraction and multiplication; unsigned division,
/// remainder, min, max and comparison, as arith's ops): an operation on known constants becomes a constant
/// (not a division by 0), and adding 0, multiplying by 1 and the like return their operand.
struct IndexMath {
  IndexMath(OpBuilder &b, Location loc);

  OpBuilder &b;
  Location loc;

  /// The index constant `v`: one per value in a kernel, at the start of its body, or a new one at the insertion
  /// point where this was made outside any kernel (or inside a region under construction).
  Value c(int64_t v);
  Value add(Value x, Value y);
  Value add(Value x, int64_t y);
  Value mul(Value x, Value y);
  Value mul(Value x, int64_t y);
  Value div(Value x, int64_t y);
  Value rem(Value x, int64_t y);
  Value sub(Value x, Value y);
  Value sub(Value x, int64_t y);
  Value min(Value x, Value y);
  Value max(Value x, Value y);
  /// x < y (unsigned), an i1.
  Value lt(Value x, Value y);
  Value lt(Value x, int64_t y);
  Value select(Value cond, Value x, Value y);
  /// x and y, both i1.
  Value andi(Value x, Value y);

  /// The value of `x` when an arith.constant of index or integer type defines it (an i1 true reads as nonzero).
  static std::optional<int64_t> known(Value x);

private:
  /// An i1 constant.
  Value flag(bool value);

  /// The entry block of the kernel that the builder builds in; null outside one.
  Block *kernelBody;
};

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_INDEXMATH_H
