//===- HostExecutable.cpp - Kiln programs compiled for the CPU -------------===//
//
// The host ABI: the entry gets a C interface (`_mlir_ciface_<entry>`) whose parameters are pointers to memref
// descriptors, inputs first and then one out-parameter per result (buffer-results-to-out-params). A descriptor
// is {allocated, aligned, offset, sizes[rank], strides[rank]}, built here over the HostTensors' storage.
//
//===----------------------------------------------------------------------===//

#include "Host/HostExecutable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

using namespace mlir;
using namespace mlir::kiln;

HostExecutable::~HostExecutable() = default;

/// The signature of a function type's tensors, or an error naming the first unsupported one.
static FailureOr<SmallVector<TensorSignature>> signaturesOf(func::FuncOp func, TypeRange types, StringRef what) {
  SmallVector<TensorSignature> signatures;
  for (auto [index, type] : llvm::enumerate(types)) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    std::optional<ElementKind> kind = tensor ? elementKindOf(tensor.getElementType()) : std::nullopt;
    if (!tensor || !tensor.hasStaticShape() || !kind)
      return func.emitError() << what << " #" << index << " has type " << type
                              << "; the host backend takes statically shaped tensors of f32, f16, bf16, i64, "
                                 "i32 or i1";
    if (!checkedByteSize(*kind, tensor.getShape()))
      return func.emitError() << what << " #" << index << " has type " << type
                              << ", whose size in bytes does not fit in int64; no host buffer can hold it";
    signatures.push_back({*kind, SmallVector<int64_t>(tensor.getShape())});
  }
  return signatures;
}

llvm::Expected<std::string> HostExecutable::defaultEntry(ModuleOp module) {
  SmallVector<func::FuncOp> candidates;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      candidates.push_back(func);
  if (candidates.size() == 1)
    return candidates.front().getSymName().str();
  return llvm::createStringError(candidates.empty() ? "the module has no public function to run"
                                                    : "the module has several public functions; name the entry");
}

FailureOr<std::unique_ptr<HostExecutable>> HostExecutable::compile(ModuleOp module, StringRef entry,
                                                                   const HostPipelineOptions &options) {
  auto func = dyn_cast_or_null<func::FuncOp>(SymbolTable::lookupSymbolIn(module, entry));
  if (!func || func.isExternal())
    return mlir::emitError(module.getLoc()) << "no function named '" << entry << "' with a body in the module";
  auto inputs = signaturesOf(func, func.getArgumentTypes(), "argument");
  auto outputs = signaturesOf(func, func.getResultTypes(), "result");
  if (failed(inputs) || failed(outputs))
    return failure();
  // A value that no buffer can hold would make the allocation size in the JIT code wrap; refuse it by name.
  WalkResult tooLarge = func.walk([](Operation *op) {
    for (auto [index, type] : llvm::enumerate(op->getResultTypes())) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      std::optional<ElementKind> kind =
          tensor && tensor.hasStaticShape() ? elementKindOf(tensor.getElementType()) : std::nullopt;
      if (kind && !checkedByteSize(*kind, tensor.getShape())) {
        op->emitOpError() << "result #" << index << " has type " << type
                          << ", whose size in bytes does not fit in int64; no host buffer can hold it";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (tooLarge.wasInterrupted())
    return failure();

  OwningOpRef<ModuleOp> lowered = cast<ModuleOp>(module->clone());
  cast<func::FuncOp>(SymbolTable::lookupSymbolIn(*lowered, entry))
      ->setAttr("llvm.emit_c_interface", UnitAttr::get(module.getContext()));
  PassManager pm(module.getContext());
  if (failed(buildHostPipeline(pm, options)) || failed(pm.run(*lowered)))
    return failure();

  static bool nativeTargetReady = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)nativeTargetReady;
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  module.getContext()->appendDialectRegistry(registry);

  ExecutionEngineOptions engineOptions;
  auto transformer = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  // The perf listener writes a jitdump file into $TMPDIR/.debug/jit for every process and never removes it
  // (a build machine gathered a thousand folders); nothing reads them unless perf is recording.
  engineOptions.enablePerfNotificationListener = false;
  auto engine = ExecutionEngine::create(*lowered, engineOptions);
  if (!engine)
    return mlir::emitError(module.getLoc()) << "the host JIT failed: " << llvm::toString(engine.takeError());

  // Copies between strided buffers call into the runner utilities; bind the symbol explicitly.
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("memrefCopy")] = {llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
                                       llvm::JITSymbolFlags::Exported};
    return symbols;
  });

  std::unique_ptr<HostExecutable> executable(new HostExecutable());
  executable->engine = std::move(*engine);
  executable->entryName = entry.str();
  executable->inputSignatures = std::move(*inputs);
  executable->outputSignatures = std::move(*outputs);
  return executable;
}

/// A memref descriptor over a HostTensor's bytes, as int64 words.
static std::vector<int64_t> descriptorOf(HostTensor &tensor) {
  auto address = reinterpret_cast<int64_t>(tensor.bytes.data());
  std::vector<int64_t> words{address, address, 0};
  words.insert(words.end(), tensor.shape.begin(), tensor.shape.end());
  int64_t stride = 1;
  std::vector<int64_t> strides(tensor.shape.size());
  for (int64_t d = static_cast<int64_t>(tensor.shape.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= tensor.shape[d];
  }
  words.insert(words.end(), strides.begin(), strides.end());
  return words;
}

llvm::Expected<std::vector<HostTensor>> HostExecutable::run(ArrayRef<HostTensor> inputs) const {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
  };
  if (inputs.size() != inputSignatures.size())
    return fail("'" + entryName + "' takes " + llvm::Twine(inputSignatures.size()) + " inputs, got " +
                llvm::Twine(inputs.size()));
  std::vector<HostTensor> arguments(inputs.begin(), inputs.end());
  for (auto [index, signature] : llvm::enumerate(inputSignatures)) {
    const HostTensor &input = arguments[index];
    if (input.kind != signature.kind || ArrayRef<int64_t>(input.shape) != ArrayRef<int64_t>(signature.shape)) {
      HostTensor expected = HostTensor::zeros(signature.kind, {});
      expected.shape = signature.shape;
      return fail("input #" + llvm::Twine(index) + " of '" + entryName + "' must be " + expected.describe() +
                  ", got " + input.describe());
    }
  }
  std::vector<HostTensor> results;
  for (const TensorSignature &signature : outputSignatures)
    results.push_back(HostTensor::zeros(signature.kind, signature.shape));

  std::vector<std::vector<int64_t>> descriptors;
  for (HostTensor &tensor : arguments)
    descriptors.push_back(descriptorOf(tensor));
  for (HostTensor &tensor : results)
    descriptors.push_back(descriptorOf(tensor));
  std::vector<void *> descriptorPointers;
  for (std::vector<int64_t> &descriptor : descriptors)
    descriptorPointers.push_back(descriptor.data());
  std::vector<void *> packed;
  for (void *&pointer : descriptorPointers)
    packed.push_back(&pointer);
  if (llvm::Error error = engine->invokePacked("_mlir_ciface_" + entryName, packed))
    return std::move(error);
  return results;
}
