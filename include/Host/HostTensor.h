//===- HostTensor.h - Tensors in host memory for the CPU backend -*- C++ -*-===//
//
// The data that kiln-run (and later the Python API) hands to host-compiled kernels: a dense row-major buffer
// with a shape and one of the dialect's element types, plus the conversions to and from double that random
// inputs and error checks need. bf16 and f16 are stored as their 16-bit patterns.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_HOST_HOSTTENSOR_H
#define KILN_HOST_HOSTTENSOR_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace kiln {

/// Element types a host tensor can hold.
enum class ElementKind { F32, F16, BF16, I64, I32, I1 };

/// Size in bytes of one element.
size_t elementSize(ElementKind kind);

/// The size in bytes of a dense tensor of `shape` and `kind`, or std::nullopt when its element count or byte
/// count does not fit in int64: such a shape names no buffer that can exist, and an unchecked product would
/// wrap to a small (even zero) size.
std::optional<int64_t> checkedByteSize(ElementKind kind, llvm::ArrayRef<int64_t> shape);

/// Human-readable name ("f32", "bf16", ...).
llvm::StringRef elementName(ElementKind kind);

/// The element kind of an MLIR element type, if the host backend supports it.
std::optional<ElementKind> elementKindOf(Type type);

/// A dense row-major tensor in host memory.
struct HostTensor {
  ElementKind kind = ElementKind::F32;
  llvm::SmallVector<int64_t> shape;
  std::vector<uint8_t> bytes;

  /// A zero-filled tensor; `shape` must have a checkedByteSize.
  static HostTensor zeros(ElementKind kind, llvm::ArrayRef<int64_t> shape);

  /// Number of elements.
  int64_t numElements() const;
  /// Element `i` converted to double.
  double get(int64_t i) const;
  /// Stores `value` at element `i`, rounding to nearest even for narrow types.
  void set(int64_t i, double value);
  /// "tensor<2x3xf32>"-style description for messages.
  std::string describe() const;
};

/// Fills `tensor` with reproducible pseudo-random values: floats uniform in [-1, 1), integers in [0, 4), i1
/// true with probability 1/2.
void fillRandom(HostTensor &tensor, uint64_t seed);

/// Relative error of `actual` against `reference`: max |a - r| over max |r| (the max norm, so a row of
/// near-zero values cannot inflate it). Both must have the same element count.
double relativeError(const HostTensor &actual, const HostTensor &reference);

} // namespace kiln
} // namespace mlir

#endif // KILN_HOST_HOSTTENSOR_H
