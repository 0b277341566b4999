//===- HostTensor.cpp - Tensors in host memory for the CPU backend ---------===//
//
// Element access with exact bf16/f16 rounding (round to nearest even), random filling and the error measure
// that `kiln-run --check` reports.
//
//===----------------------------------------------------------------------===//

#include "Host/HostTensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace mlir;
using namespace mlir::kiln;

size_t kiln::elementSize(ElementKind kind) {
  switch (kind) {
  case ElementKind::F32:
  case ElementKind::I32:
    return 4;
  case ElementKind::F16:
  case ElementKind::BF16:
    return 2;
  case ElementKind::I64:
    return 8;
  case ElementKind::I1:
    return 1;
  }
  return 0;
}

std::optional<int64_t> kiln::checkedByteSize(ElementKind kind, ArrayRef<int64_t> shape) {
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t bytes = static_cast<int64_t>(elementSize(kind));
  for (int64_t size : shape)
    if (size < 0 || llvm::MulOverflow(bytes, size, bytes))
      return std::nullopt;
  return bytes;
}

StringRef kiln::elementName(ElementKind kind) {
  switch (kind) {
  case ElementKind::F32:
    return "f32";
  case ElementKind::F16:
    return "f16";
  case ElementKind::BF16:
    return "bf16";
  case ElementKind::I64:
    return "i64";
  case ElementKind::I32:
    return "i32";
  case ElementKind::I1:
    return "i1";
  }
  return "?";
}

std::optional<ElementKind> kiln::elementKindOf(Type type) {
  if (type.isF32())
    return ElementKind::F32;
  if (type.isF16())
    return ElementKind::F16;
  if (type.isBF16())
    return ElementKind::BF16;
  if (type.isInteger(64))
    return ElementKind::I64;
  if (type.isInteger(32))
    return ElementKind::I32;
  if (type.isInteger(1))
    return ElementKind::I1;
  return std::nullopt;
}

std::string kiln::describeTensor(ElementKind kind, ArrayRef<int64_t> shape) {
  std::string text = "tensor<";
  for (int64_t size : shape)
    text += std::to_string(size) + "x";
  return text + elementName(kind).str() + ">";
}

std::string kiln::formatByteCount(uint64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  double size = static_cast<double>(bytes);
  const char *unit = "bytes";
  for (const char *next : {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}) {
    if (size < 1024)
      break;
    size /= 1024, unit = next;
  }
  return llvm::formatv("{0:F1} {1}", size, unit).str();
}

std::optional<HostBytes> HostBytes::zeros(size_t size) {
  HostBytes bytes;
  if (size == 0)
    return bytes;
  bytes.storage.reset(static_cast<uint8_t *>(std::calloc(size, 1)));
  if (!bytes.storage)
    return std::nullopt;
  bytes.length = size;
  return bytes;
}

llvm::Expected<HostTensor> HostTensor::zeros(ElementKind kind, ArrayRef<int64_t> shape) {
  std::optional<int64_t> size = checkedByteSize(kind, shape);
  assert(size && "the caller checks that the shape fits in memory");
  std::optional<HostBytes> bytes = HostBytes::zeros(static_cast<size_t>(*size));
  if (!bytes)
    return llvm::createStringError(std::errc::not_enough_memory, "the host cannot allocate %s (%s)",
                                   describeTensor(kind, shape).c_str(), formatByteCount(*size).c_str());
  HostTensor tensor;
  tensor.kind = kind;
  tensor.shape.assign(shape.begin(), shape.end());
  tensor.bytes = std::move(*bytes);
  return tensor;
}

int64_t HostTensor::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

/// The IEEE semantics of a 16-bit float kind.
static const llvm::fltSemantics &semanticsOf(ElementKind kind) {
  return kind == ElementKind::F16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat();
}

double HostTensor::get(int64_t i) const {
  const uint8_t *p = bytes.data() + i * elementSize(kind);
  switch (kind) {
  case ElementKind::F32: {
    float value;
    std::memcpy(&value, p, 4);
    return value;
  }
  case ElementKind::F16:
  case ElementKind::BF16: {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return llvm::APFloat(semanticsOf(kind), llvm::APInt(16, bits)).convertToDouble();
  }
  case ElementKind::I64: {
    int64_t value;
    std::memcpy(&value, p, 8);
    return static_cast<double>(value);
  }
  case ElementKind::I32: {
    int32_t value;
    std::memcpy(&value, p, 4);
    return value;
  }
  case ElementKind::I1:
    return *p ? 1.0 : 0.0;
  }
  return 0.0;
}

void HostTensor::set(int64_t i, double value) {
  uint8_t *p = bytes.data() + i * elementSize(kind);
  switch (kind) {
  case ElementKind::F32: {
    float narrow = static_cast<float>(value);
    std::memcpy(p, &narrow, 4);
    return;
  }
  case ElementKind::F16:
  case ElementKind::BF16: {
    llvm::APFloat converted(value);
    bool losesInfo;
    converted.convert(semanticsOf(kind), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
    uint16_t bits = converted.bitcastToAPInt().getZExtValue();
    std::memcpy(p, &bits, 2);
    return;
  }
  case ElementKind::I64: {
    int64_t narrow = static_cast<int64_t>(value);
    std::memcpy(p, &narrow, 8);
    return;
  }
  case ElementKind::I32: {
    int32_t narrow = static_cast<int32_t>(value);
    std::memcpy(p, &narrow, 4);
    return;
  }
  case ElementKind::I1:
    *p = value != 0.0;
    return;
  }
}

std::string HostTensor::describe() const { return describeTensor(kind, shape); }

void kiln::fillRandom(HostTensor &tensor, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  for (int64_t i = 0, e = tensor.numElements(); i < e; ++i) {
    switch (tensor.kind) {
    case ElementKind::F32:
    case ElementKind::F16:
    case ElementKind::BF16:
      tensor.set(i, real(generator));
      break;
    case ElementKind::I64:
    case ElementKind::I32:
      tensor.set(i, small(generator));
      break;
    case ElementKind::I1:
      tensor.set(i, small(generator) & 1);
      break;
    }
  }
}

double kiln::relativeError(const HostTensor &actual, const HostTensor &reference) {
  double maxDiff = 0.0, maxRef = 0.0;
  for (int64_t i = 0, e = reference.numElements(); i < e; ++i) {
    double a = actual.get(i), r = reference.get(i);
    // NaN anywhere in one but not the other is an infinite error.
    if (std::isnan(a) != std::isnan(r))
      return INFINITY;
    if (std::isnan(r))
      continue;
    maxDiff = std::max(maxDiff, std::fabs(a - r));
    maxRef = std::max(maxRef, std::fabs(r));
  }
  return maxRef > 0.0 ? maxDiff / maxRef : maxDiff;
}
