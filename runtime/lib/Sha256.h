//===- Sha256.h - SHA-256, for the runtime's disk caches ----------*- C++ -*-===//
//
// The runtime links nothing but libc, and its caches seal entries with the SHA-256 of every file: this is the
// FIPS 180-4 hash, in hex.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SHA256_H
#define KILN_RUNTIME_SHA256_H

#include <string>

namespace kiln::runtime {

/// The SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256Hex(const std::string &data);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SHA256_H
