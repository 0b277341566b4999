//===- ConfigJson.h - #kiln.config as JSON ------------------------*- C++ -*-===//
//
// A kernel's config leaves the compiler as JSON: in the manifest's kernel entries, and to the Python API, which
// reads a program's default configs and pins its own. One pair of functions writes and reads that form, so that
// #kiln.config (ConfigAttr) is the compiler's one representation and its JSON object the one on the wire:
// {"tile": [...], "warps": W, "stages": S, "lowering": "mma_sync" | "wgmma" | "host"}.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DRIVER_CONFIGJSON_H
#define KILN_DRIVER_CONFIGJSON_H

#include "Dialect/Kiln/KilnDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/JSON.h"

namespace mlir {
namespace kiln {

/// The JSON object of `config`.
llvm::json::Object configToJson(ConfigAttr config);

/// The config a JSON object describes ("lowering" defaults to "mma_sync"), checked as #kiln.config is; null after
/// reporting what is wrong through `emitError`.
ConfigAttr configFromJson(const llvm::json::Value &value, MLIRContext *context,
                          llvm::function_ref<InFlightDiagnostic()> emitError);

} // namespace kiln
} // namespace mlir

#endif // KILN_DRIVER_CONFIGJSON_H
