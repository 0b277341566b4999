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
#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

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

/// "tensor<2x3xf32>"-style description of a tensor type, for messages.
std::string describeTensor(ElementKind kind, llvm::ArrayRef<int64_t> shape);

/// A byte count for messages: "128 bytes", "256.0 TiB".
std::string formatByteCount(uint64_t bytes);

/// A tensor's bytes, from calloc rather than operator new: a size the host cannot hold is then an error to
/// report, where operator new would end the process (LLVM's out-of-memory handler, which the tools install,
/// aborts), and zero pages cost nothing until written. Move-only, so that no large copy happens unseen.
class HostBytes {
public:
  HostBytes() = default;

  /// `size` zero bytes, or std::nullopt when the host cannot allocate them.
  static std::optional<HostBytes> zeros(size_t size);

  uint8_t *data() { return storage.get(); }
  const uint8_t *data() const { return storage.get(); }
  size_t size() const { return length; }

private:
  struct Free {
    void operator()(uint8_t *pointer) const { std::free(pointer); }
  };
  std::unique_ptr<uint8_t[], Free> storage;
  size_t length = 0;
};

/// A dense row-major tensor in host memory.
struct HostTensor {
  ElementKind kind = ElementKind::F32;
  llvm::SmallVector<int64_t> shape;
  HostBytes bytes;

  /// A zero-filled tensor, or an error (std::errc::not_enough_memory) naming its type and size when the host
  /// cannot allocate it: "the host cannot allocate tensor<70368744177664xf32> (256.0 TiB)". `shape` must have a
  /// checkedByteSize.
  static llvm::Expected<HostTensor> zeros(ElementKind kind, llvm::ArrayRef<int64_t> shape);

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
