//===- HostProgram.cpp - A kiln program compiled for the CPU host ----------===//
//
// Api/HostProgram.h over HostExecutable: the program keeps its parsed module (for the host stages of `ir`) and
// the compiled entry, and checks buffer sizes before running so that a short buffer is an exception, not a read
// past its end.
//
//===----------------------------------------------------------------------===//

#include "Api/HostProgram.h"

#include "Api/Compiler.h"
#include "ParsedSource.h"

#include "Host/HostExecutable.h"
#include "Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"

#include <cstring>

using namespace mlir;
using namespace mlir::kiln;

namespace kiln {
namespace api {

struct HostProgram::State {
  explicit State(const std::string &source) : source(source), parsed(source) {}
  std::string source;
  ParsedSource parsed;
  std::string entryName;
  std::unique_ptr<HostExecutable> executable;
};

HostProgram::HostProgram(const std::string &source, const std::string &entry) : state(std::make_unique<State>(source)) {
  ModuleOp module = state->parsed.module();
  if (entry.empty()) {
    llvm::Expected<std::string> found = HostExecutable::defaultEntry(module);
    if (!found)
      throw CompileError(llvm::toString(found.takeError()) + "; pass entry=NAME");
    state->entryName = *found;
  } else {
    state->entryName = entry;
  }
  auto compiled = HostExecutable::compile(module, state->entryName, HostPipelineOptions());
  if (failed(compiled))
    throw CompileError("compiling '" + state->entryName + "' for the host failed:\n" + state->parsed.takeDiagnostics());
  state->executable = std::move(*compiled);
}

HostProgram::~HostProgram() = default;

std::string HostProgram::ir(const std::string &stage) {
  if (stage == "kiln" || stage == "fused" || stage == "tiled")
    return sourceIr(state->source, stage);
  if (stage != "loops" && stage != "llvm")
    throw InvalidArgument("unknown stage '" + stage + "' (host stages: kiln, fused, tiled, loops, llvm)");
  OwningOpRef<ModuleOp> copy = state->parsed.module().clone();
  PassManager pm(&state->parsed.context());
  HostPipelineOptions options;
  LogicalResult built = stage == "loops" ? buildHostLoopsPipeline(pm, options) : buildHostPipeline(pm, options);
  if (failed(built) || failed(pm.run(*copy)))
    throw CompileError("the '" + stage + "' stage failed:\n" + state->parsed.takeDiagnostics());
  return printModule(*copy);
}

const std::string &HostProgram::entry() const { return state->entryName; }

/// Signatures as element type names and shapes.
static std::vector<TensorDesc> describe(llvm::ArrayRef<TensorSignature> signatures) {
  std::vector<TensorDesc> descs;
  for (const TensorSignature &signature : signatures)
    descs.push_back(
        {elementName(signature.kind).str(), std::vector<int64_t>(signature.shape.begin(), signature.shape.end())});
  return descs;
}

std::vector<TensorDesc> HostProgram::inputs() const { return describe(state->executable->inputs()); }

std::vector<TensorDesc> HostProgram::outputs() const { return describe(state->executable->outputs()); }

std::vector<std::string> HostProgram::run(const std::vector<BufferView> &buffers) const {
  llvm::ArrayRef<TensorSignature> signatures = state->executable->inputs();
  if (buffers.size() != signatures.size())
    throw InvalidArgument("expected " + std::to_string(signatures.size()) + " arrays, got " +
                          std::to_string(buffers.size()));
  std::vector<HostTensor> tensors;
  for (size_t i = 0; i < buffers.size(); ++i) {
    llvm::Expected<HostTensor> tensor = HostTensor::zeros(signatures[i].kind, signatures[i].shape);
    if (!tensor)
      throw OutOfMemory("argument " + std::to_string(i) + " of '" + state->entryName +
                        "': " + llvm::toString(tensor.takeError()));
    if (buffers[i].bytes != tensor->bytes.size())
      throw InvalidArgument("argument " + std::to_string(i) + " has " + std::to_string(buffers[i].bytes) +
                            " bytes, expected " + std::to_string(tensor->bytes.size()));
    if (tensor->bytes.size())
      std::memcpy(tensor->bytes.data(), buffers[i].data, tensor->bytes.size());
    tensors.push_back(std::move(*tensor));
  }
  llvm::Expected<std::vector<HostTensor>> results = state->executable->run(tensors);
  if (!results) {
    std::string message;
    bool outOfMemory = false;
    llvm::handleAllErrors(results.takeError(), [&](const llvm::ErrorInfoBase &error) {
      outOfMemory = error.convertToErrorCode() == std::errc::not_enough_memory;
      message = error.message();
    });
    if (outOfMemory)
      throw OutOfMemory(message);
    throw InvalidArgument(message);
  }
  std::vector<std::string> bytes;
  for (HostTensor &result : *results)
    bytes.emplace_back(reinterpret_cast<const char *>(result.bytes.data()), result.bytes.size());
  return bytes;
}

} // namespace api
} // namespace kiln
