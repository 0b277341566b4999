//===- Npy.h - Reading and writing .npy files ---------------------*- C++ -*-===//
//
// NumPy's .npy format (versions 1-3, little-endian, C order) for kiln-run's inputs and outputs. bf16 travels as
// its uint16 bit pattern ('<u2'), the usual storage when numpy has no bfloat16.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_HOST_NPY_H
#define KILN_HOST_NPY_H

#include "Host/HostTensor.h"

#include "llvm/Support/Error.h"

namespace mlir {
namespace kiln {

/// Reads a .npy file. `expected` resolves the 16-bit ambiguity: '<u2' is bf16 when bf16 is expected. Errors
/// name the file and what is wrong with it.
llvm::Expected<HostTensor> readNpy(llvm::StringRef path, std::optional<ElementKind> expected);

/// Writes a .npy file (version 1.0).
llvm::Error writeNpy(llvm::StringRef path, const HostTensor &tensor);

} // namespace kiln
} // namespace mlir

#endif // KILN_HOST_NPY_H
