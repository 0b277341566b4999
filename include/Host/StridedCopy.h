//===- StridedCopy.h - The copy between strided buffers the host JIT calls -*- C++ -*-===//
//
// Bufferized host code copies between buffers of different layouts through a call to `memrefCopy`, which MLIR's
// runner utilities define. Debian ships those utilities only as a shared library tied to libMLIR.so, which the
// wheel's statically linked compiler cannot carry; Kiln binds its own copy to that symbol instead.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_HOST_STRIDEDCOPY_H
#define KILN_HOST_STRIDEDCOPY_H

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstdint>

namespace mlir {
namespace kiln {

/// Copies every element of `source` into `destination` (same rank and sizes, any strides and offsets), with
/// `elementBytes` bytes per element: the contract of the runner utilities' `memrefCopy`.
void copyStrided(int64_t elementBytes, ::UnrankedMemRefType<char> *source, ::UnrankedMemRefType<char> *destination);

} // namespace kiln
} // namespace mlir

#endif // KILN_HOST_STRIDEDCOPY_H
