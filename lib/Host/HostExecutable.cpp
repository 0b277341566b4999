//===- HostExecutable.cpp - Kiln programs compiled for the CPU -------------===//
//
// The host ABI: the entry gets a C interface (`_mlir_ciface_<entry>`) whose parameters are pointers to memref
// descriptors, inputs first and then one out-parameter per result (buffer-results-to-out-params). A descriptor
// is {allocated, aligned, offset, sizes[rank], strides[rank]}, built here over the HostTensors' storage.
// The JIT code allocates its intermediates through hooks of this file rather than malloc and free, and every
// function returns as soon as an allocation fails: a buffer the host cannot hold is an error naming the op it
// belongs to, where an unchecked malloc would have the code write through a null pointer.
//
//===----------------------------------------------------------------------===//

#include "Host/HostExecutable.h"
#include "Host/StridedCopy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include <cstring>
#include <utility>

using namespace mlir;
using namespace mlir::kiln;

HostExecutable::~HostExecutable() = default;

namespace {
/// The allocations of the JIT code running on this thread: those it holds, and the first it could not get (its
/// site and bytes).
struct RunAllocations {
  llvm::DenseSet<void *> live;
  std::optional<std::pair<int64_t, uint64_t>> failed;
};
thread_local RunAllocations *currentRun = nullptr;

/// The hooks the JIT code calls for malloc and free, and to learn whether an allocation failed.
constexpr llvm::StringLiteral kAllocHook = "kiln_host_alloc", kFreeHook = "kiln_host_free",
                              kFailedHook = "kiln_host_failed";
} // namespace

/// malloc for the JIT code: records the buffer, or the failure that stops the run (`site` names the allocation).
static void *hostAlloc(uint64_t bytes, int64_t site) {
  void *pointer = std::malloc(bytes ? bytes : 1);
  if (pointer)
    currentRun->live.insert(pointer);
  else if (!currentRun->failed)
    currentRun->failed = {site, bytes};
  return pointer;
}

/// free for the JIT code.
static void hostFree(void *pointer) {
  currentRun->live.erase(pointer);
  std::free(pointer);
}

/// Whether an allocation of the run failed, for the JIT code to return at once.
static int32_t hostFailed() { return currentRun->failed.has_value(); }

/// "big.mlir:2:8: " for the first file location within `loc`, or "".
static std::string describeLocation(Location loc) {
  auto file = loc->findInstanceOf<FileLineColLoc>();
  return file ? llvm::formatv("{0}:{1}:{2}: ", file.getFilename(), file.getLine(), file.getColumn()).str() : "";
}

/// What an allocation at `loc` serves: the first op of `original` at the same file location, and its results.
static HostExecutable::AllocationSite describeSite(Location loc, ModuleOp original) {
  HostExecutable::AllocationSite site;
  site.where = describeLocation(loc);
  auto file = loc->findInstanceOf<FileLineColLoc>();
  if (!file)
    return site;
  original.walk([&](Operation *op) {
    if (op->getNumResults() == 0 || op->getLoc()->findInstanceOf<FileLineColLoc>() != file)
      return WalkResult::advance();
    site.op = ("'" + op->getName().getStringRef() + "'").str();
    for (Type type : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      std::optional<ElementKind> kind =
          tensor && tensor.hasStaticShape() ? elementKindOf(tensor.getElementType()) : std::nullopt;
      std::optional<int64_t> bytes = kind ? checkedByteSize(*kind, tensor.getShape()) : std::nullopt;
      site.results.push_back({bytes ? describeTensor(*kind, tensor.getShape()) : std::string(), bytes.value_or(-1)});
    }
    return WalkResult::interrupt();
  });
  return site;
}

/// Routes the allocations of `lowered` (the program in the LLVM dialect) through the hooks, and makes every
/// function return at once when an allocation, or a function it calls, failed. Returns what each allocation
/// site serves: the op of `original` at the site's location.
static std::vector<HostExecutable::AllocationSite> routeAllocations(ModuleOp lowered, ModuleOp original) {
  MLIRContext *context = lowered.getContext();
  auto i64 = IntegerType::get(context, 64), i32 = IntegerType::get(context, 32);
  auto pointer = LLVM::LLVMPointerType::get(context);
  OpBuilder builder = OpBuilder::atBlockBegin(lowered.getBody());
  auto allocHook = LLVM::LLVMFuncOp::create(builder, lowered.getLoc(), kAllocHook,
                                            LLVM::LLVMFunctionType::get(pointer, {i64, i64}));
  auto freeHook = LLVM::LLVMFuncOp::create(builder, lowered.getLoc(), kFreeHook,
                                           LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context), {pointer}));
  auto failedHook = LLVM::LLVMFuncOp::create(builder, lowered.getLoc(), kFailedHook,
                                             LLVM::LLVMFunctionType::get(i32, {}));

  std::vector<HostExecutable::AllocationSite> sites;
  llvm::DenseMap<Operation *, Block *> returnBlocks; // by function: the block that returns early
  auto returnBlockOf = [&](LLVM::LLVMFuncOp func) {
    Block *&block = returnBlocks[func];
    if (block)
      return block;
    block = new Block();
    func.getBody().push_back(block);
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(block);
    Type result = func.getFunctionType().getReturnType();
    if (isa<LLVM::LLVMVoidType>(result))
      LLVM::ReturnOp::create(builder, func.getLoc(), ValueRange());
    else
      LLVM::ReturnOp::create(builder, func.getLoc(), LLVM::PoisonOp::create(builder, func.getLoc(), result));
    return block;
  };
  SmallVector<LLVM::CallOp> calls;
  lowered.walk([&](LLVM::CallOp call) { calls.push_back(call); });
  for (LLVM::CallOp call : calls) {
    std::optional<StringRef> callee = call.getCallee();
    if (!callee)
      continue;
    if (*callee == "free") {
      builder.setInsertionPoint(call);
      LLVM::CallOp::create(builder, call.getLoc(), freeHook, call.getOperands());
      call.erase();
      continue;
    }
    auto target = lowered.lookupSymbol<LLVM::LLVMFuncOp>(*callee);
    bool allocation = *callee == "malloc", internal = target && !target.isExternal();
    if (!allocation && !internal)
      continue;
    Location loc = call.getLoc();
    builder.setInsertionPointAfter(call);
    Value failed;
    if (allocation) {
      Value site = LLVM::ConstantOp::create(builder, loc, i64, static_cast<int64_t>(sites.size()));
      auto hooked = LLVM::CallOp::create(builder, loc, allocHook, ValueRange{call.getOperand(0), site});
      call->getResult(0).replaceAllUsesWith(hooked->getResult(0));
      call.erase();
      Value null = LLVM::ZeroOp::create(builder, loc, pointer);
      failed = LLVM::ICmpOp::create(builder, loc, LLVM::ICmpPredicate::eq, hooked->getResult(0), null);
      sites.push_back(describeSite(loc, original));
    } else {
      Value flag = LLVM::CallOp::create(builder, loc, failedHook, ValueRange())->getResult(0);
      failed = LLVM::ICmpOp::create(builder, loc, LLVM::ICmpPredicate::ne, flag,
                                    LLVM::ConstantOp::create(builder, loc, i32, 0));
    }
    Operation *check = failed.getDefiningOp();
    Block *rest = check->getBlock()->splitBlock(check->getNextNode());
    builder.setInsertionPointAfter(check);
    LLVM::CondBrOp::create(builder, loc, failed, returnBlockOf(check->getParentOfType<LLVM::LLVMFuncOp>()), rest);
  }
  return sites;
}

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
  std::vector<AllocationSite> sites = routeAllocations(*lowered, module);

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

  // Copies between strided buffers call into the runner utilities, allocations into the hooks; bind them.
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("memrefCopy")] = {llvm::orc::ExecutorAddr::fromPtr(&copyStrided),
                                       llvm::JITSymbolFlags::Exported};
    symbols[interner(kAllocHook)] = {llvm::orc::ExecutorAddr::fromPtr(&hostAlloc), llvm::JITSymbolFlags::Exported};
    symbols[interner(kFreeHook)] = {llvm::orc::ExecutorAddr::fromPtr(&hostFree), llvm::JITSymbolFlags::Exported};
    symbols[interner(kFailedHook)] = {llvm::orc::ExecutorAddr::fromPtr(&hostFailed),
                                      llvm::JITSymbolFlags::Exported};
    return symbols;
  });

  std::unique_ptr<HostExecutable> executable(new HostExecutable());
  executable->engine = std::move(*engine);
  executable->entryName = entry.str();
  executable->entryLocation = describeLocation(func.getLoc());
  executable->allocationSites = std::move(sites);
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

/// The error for a buffer the host cannot allocate.
static llvm::Error outOfMemory(const llvm::Twine &message) {
  return llvm::createStringError(std::make_error_code(std::errc::not_enough_memory), message);
}

llvm::Expected<std::vector<HostTensor>> HostExecutable::run(ArrayRef<HostTensor> inputs) const {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
  };
  if (inputs.size() != inputSignatures.size())
    return fail("'" + entryName + "' takes " + llvm::Twine(inputSignatures.size()) + " inputs, got " +
                llvm::Twine(inputs.size()));
  for (auto [index, signature] : llvm::enumerate(inputSignatures)) {
    const HostTensor &input = inputs[index];
    if (input.kind != signature.kind || ArrayRef<int64_t>(input.shape) != ArrayRef<int64_t>(signature.shape))
      return fail("input #" + llvm::Twine(index) + " of '" + entryName + "' must be " +
                  describeTensor(signature.kind, signature.shape) + ", got " + input.describe());
  }
  // The JIT code may write into its arguments (function arguments bufferize as writable): it gets copies.
  std::vector<HostTensor> arguments, results;
  for (auto [index, input] : llvm::enumerate(inputs)) {
    llvm::Expected<HostTensor> copy = HostTensor::zeros(input.kind, input.shape);
    if (!copy)
      return outOfMemory(entryLocation + "a copy of input #" + llvm::Twine(index) + " of '" + entryName +
                         "': " + llvm::toString(copy.takeError()));
    if (input.bytes.size())
      std::memcpy(copy->bytes.data(), input.bytes.data(), input.bytes.size());
    arguments.push_back(std::move(*copy));
  }
  for (auto [index, signature] : llvm::enumerate(outputSignatures)) {
    llvm::Expected<HostTensor> result = HostTensor::zeros(signature.kind, signature.shape);
    if (!result)
      return outOfMemory(entryLocation + "result #" + llvm::Twine(index) + " of '" + entryName +
                         "': " + llvm::toString(result.takeError()));
    results.push_back(std::move(*result));
  }

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
  RunAllocations allocations;
  RunAllocations *outer = std::exchange(currentRun, &allocations);
  llvm::Error error = engine->invokePacked("_mlir_ciface_" + entryName, packed);
  currentRun = outer;
  if (error)
    return std::move(error);
  if (!allocations.failed)
    return results;
  // The JIT code returned at the failed allocation; what it held would otherwise leak.
  for (void *pointer : allocations.live)
    std::free(pointer);
  auto [site, bytes] = *allocations.failed;
  const AllocationSite &described = allocationSites[site];
  for (auto [index, result] : llvm::enumerate(described.results))
    // The JIT code asks for the result's bytes plus its alignment.
    if (result.second >= 0 && static_cast<uint64_t>(result.second) <= bytes && bytes - result.second <= 4096)
      return outOfMemory(described.where + described.op + " op result #" + llvm::Twine(index) +
                         ": the host cannot allocate " + result.first + " (" +
                         formatByteCount(result.second) + ")");
  return outOfMemory(described.where + "the host cannot allocate a buffer of " + formatByteCount(bytes) +
                     (described.op.empty() ? "" : " for " + described.op));
}
