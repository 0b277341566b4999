//===- Errors.h - The runtime's last-error record ----------------*- C++ -*-===//
//
// Every C API function reports failure through kiln_last_error(); the parts of the runtime (devices and
// kernels, run plans) share the one per-thread record.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ERRORS_H
#define KILN_RUNTIME_ERRORS_H

#include "kiln/runtime.h"

#include <string>

namespace kiln::runtime {

/// Records `message` as this thread's last error and returns `status`.
kiln_status fail(kiln_status status, std::string message);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_ERRORS_H
