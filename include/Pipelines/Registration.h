//===- Registration.h - Everything a Kiln tool registers ---------*- C++ -*-===//
//
// One place that lists the dialects, passes and named pipelines Kiln uses, shared by kiln-opt, kilnc, kiln-run
// and the Python bindings, so that a pipeline that runs in one tool replays in any other.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_REGISTRATION_H
#define KILN_PIPELINES_REGISTRATION_H

namespace mlir {
class DialectRegistry;

namespace kiln {

/// Adds the kiln dialect and the upstream dialects (and their interface models) that Kiln's pipelines produce.
void registerKilnDialects(DialectRegistry &registry);

/// Registers Kiln's passes and named pipelines and the upstream passes they are built from, for command-line
/// use. Safe to call more than once.
void registerKilnPasses();

} // namespace kiln
} // namespace mlir

#endif // KILN_PIPELINES_REGISTRATION_H
