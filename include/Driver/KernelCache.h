//===- KernelCache.h - Compiled kernels kept on disk across programs -*- C++ -*-===//
//
// A matmul kernel reads its sizes from parameters, so a program that differs from an earlier one in its sizes
// only (another batch, another number of tokens) has kernels that were compiled before. The kernel cache keeps
// each kernel module's PTX and cubin on disk under the SHA-256 of the chip and the module's text (its symbols
// renamed by position, so that the names a program gives its kernels do not count): a compile that finds a
// module there skips that module's NVVM lowering, LLVM and assembly, the tens of milliseconds a kernel costs.
// An entry goes through the runtime's cache protocol (kiln_cache_*, the program cache's too): written into a
// private folder, sealed with the SHA-256 of its files (its description included) and renamed into place in one
// step, so that readers never take half an entry or a damaged or hand-edited one; its description names its
// build, so that one moved in from another build's folder is not taken either. A cache that cannot be written (read-only, full) costs the time it
// would have saved and nothing else: the compile goes on and reports why.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DRIVER_KERNELCACHE_H
#define KILN_DRIVER_KERNELCACHE_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mlir {
namespace kiln {

/// A compiled kernel module as the cache keeps it.
struct CachedKernel {
  /// The module's PTX and its cubin.
  std::string ptx, cubin;
  /// The kernel's name in the PTX: that of the program that compiled it first.
  std::string function;
  /// What made the cubin, and its report (registers and spills per kernel, as ptxas -v writes it).
  std::string assembler, log;
};

/// The cache key of `gpuModule`: the SHA-256, in hex, of `toolchain` (what else makes the binary: the chip, the
/// libdevice) and of the module's text with its own name and its symbols' names replaced by their positions.
/// The compiler's build is not in it: a cache directory belongs to one build, and is named by it (each entry
/// records that name, so an entry copied from another build's folder is not taken).
std::string kernelCacheKey(gpu::GPUModuleOp gpuModule, llvm::StringRef toolchain);

/// Entry `key` of the cache in `directory`, or nothing when there is none or it is damaged (then it is moved
/// aside and removed, and the caller compiles the kernel again): a path that is not a folder (a file, a
/// symlink, dangling or not), a file or a description that does not match its checksum, an entry another
/// build's folder holds. Every entry has a cubin.
std::optional<CachedKernel> lookupCachedKernel(llvm::StringRef directory, llvm::StringRef key);

/// Stores `kernel` as entry `key` of the cache in `directory` (created when missing). When another process
/// stored the entry first, its copy stays. A failure to write (read-only or full directory) leaves nothing
/// behind and is returned, naming the file or folder, for the caller to report: the cache only saves time, so
/// it is no reason to fail a compile.
llvm::Error storeCachedKernel(llvm::StringRef directory, llvm::StringRef key, const CachedKernel &kernel);

} // namespace kiln
} // namespace mlir

#endif // KILN_DRIVER_KERNELCACHE_H
