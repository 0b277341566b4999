//===- HostProgram.h - A kiln program compiled for the CPU host -*- C++ -*---===//
//
// The host backend behind a plain C++ interface, for the Python extension: a kiln module compiled by the
// ExecutionEngine and run on caller-owned buffers. Kept apart from Api/Compiler.h because it needs the MLIR
// runner utilities at run time, which the packed GPU JIT does not carry.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_API_HOSTPROGRAM_H
#define KILN_API_HOSTPROGRAM_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {
namespace api {

/// An argument or result of an entry function: element type name (f32, bf16, i64, ...) and static shape.
struct TensorDesc {
  std::string dtype;
  std::vector<int64_t> shape;
};

/// A buffer the host cannot allocate (a MemoryError in Python); the message names it, its op and its size.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A caller-owned input buffer.
struct BufferView {
  const void *data;
  size_t bytes;
};

/// A kiln module compiled for the host, with the stages of the host pipeline it can be shown at.
class HostProgram {
public:
  /// Parses and compiles `source`; `entry` empty picks the module's only public function. Throws CompileError.
  HostProgram(const std::string &source, const std::string &entry);
  ~HostProgram();
  HostProgram(const HostProgram &) = delete;
  HostProgram &operator=(const HostProgram &) = delete;

  /// The module printed after `stage`: kiln, fused, tiled, loops or llvm.
  std::string ir(const std::string &stage);
  /// The entry function's name.
  const std::string &entry() const;
  /// The entry's arguments and results.
  std::vector<TensorDesc> inputs() const;
  std::vector<TensorDesc> outputs() const;
  /// Runs the entry on one buffer per input (sizes checked against `inputs()`); returns each output's bytes.
  /// Throws OutOfMemory when the host cannot allocate a buffer of the run, InvalidArgument on other failures.
  std::vector<std::string> run(const std::vector<BufferView> &buffers) const;

private:
  struct State;
  std::unique_ptr<State> state;
};

} // namespace api
} // namespace kiln

#endif // KILN_API_HOSTPROGRAM_H
