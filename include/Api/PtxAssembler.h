//===- PtxAssembler.h - The in-process assembler a GPU compile calls -*- C++ -*-===//
//
// What the GPU compile calls to turn one kernel module's PTX into a cubin in process (the Python JIT passes the
// CUDA driver's JIT), and what it may answer: a cubin, a failure (the compile falls back to ptxas), or an
// interrupt (the compile stops). The driver (mlir::kiln) and the API (kiln::api) both spell the type, and
// neither can include the other's header (their `kiln` namespaces clash where `using namespace mlir` is in
// scope), so it lives here, at global scope, with no MLIR header (the packed JIT ships it beside Api/Compiler.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_API_PTXASSEMBLER_H
#define KILN_API_PTXASSEMBLER_H

#include <functional>
#include <string>

/// What an in-process assembler did with one kernel module's PTX.
enum class KilnPtxAssembly {
  Assembled,  ///< `cubin` and the assembler's verbose log (ptxas -v's format) are filled in
  Failed,     ///< the reason is in the log; the compile assembles this module with ptxas instead
  Interrupted ///< the user interrupted the assembler (Ctrl-C): the compile stops and writes no manifest
};

/// Assembles PTX into a cubin in process; called from the compile's worker threads, one module per call. It
/// reports failure through its result and must not throw.
using KilnPtxAssembler =
    std::function<KilnPtxAssembly(const std::string &ptx, std::string &cubin, std::string &log)>;

#endif // KILN_API_PTXASSEMBLER_H
