//===- GpuCompiler.cpp - kiln IR to GPU kernels, a manifest and run plans --===//
//
// The stages kilnc runs, as functions, so that the Python extension compiles for the GPU the same way: the
// kernel pipeline, NVVM lowering, PTX from LLVM's NVPTX backend, a cubin from the driver's JIT or ptxas when
// there is one (the runtime falls back to the driver's PTX JIT otherwise), and manifest.json with each
// kernel's files, launch and register and spill report. Every kernel is a gpu.module of its own, and the
// stages after the kernel stage run on all of them at once (each module's PTX emission and assembly back to
// back on one worker): a cold compile of a program of many kernels takes about as long as its largest kernel's
// on a machine with cores to spare.
//
//===----------------------------------------------------------------------===//

#include "Driver/GpuCompiler.h"
#include "Driver/ConfigJson.h"
#include "Driver/KernelCache.h"

#include "Dialect/Kiln/KilnOps.h"
#include "Driver/RunPlan.h"
#include "Host/HostTensor.h"
#include "Pipelines/Pipelines.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Threading.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Object/ELF.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

using namespace mlir;
using namespace mlir::kiln;

/// Whole microseconds since `start` (the manifest holds integers only: no reader's locale can misread them).
static int64_t microsecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

std::string kiln::findLibdevice() {
  if (const char *path = std::getenv("KILN_LIBDEVICE"); path && llvm::sys::fs::exists(path))
    return path;
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(variable)) {
      std::string path = std::string(root) + "/nvvm/libdevice/libdevice.10.bc";
      if (llvm::sys::fs::exists(path))
        return path;
    }
  std::string fallback = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  return llvm::sys::fs::exists(fallback) ? fallback : std::string();
}

std::optional<std::string> kiln::findPtxas() {
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  for (const char *candidate : {"/usr/local/cuda/bin/ptxas"})
    if (llvm::sys::fs::can_execute(candidate))
      return std::string(candidate);
  return std::nullopt;
}

/// Whether the passes of a stage are verified one by one, or only their result, once: the stages that build and
/// lower the large unrolled kernels, where verifying after each pass took a fifth of the stage's time (kiln-opt,
/// and so every lit test, still verifies after each pass).
enum class Verify { EachPass, Result };

/// Runs one stage; on failure names it in `error` (its diagnostics went to the context's handler).
static LogicalResult runStage(ModuleOp module, llvm::StringRef stage, std::string &error,
                              llvm::function_ref<void(OpPassManager &)> build, Verify verify = Verify::EachPass) {
  PassManager pm(module.getContext());
  pm.enableVerifier(verify == Verify::EachPass);
  build(pm);
  if (succeeded(pm.run(module)) && (verify == Verify::EachPass || succeeded(mlir::verify(module))))
    return success();
  error = ("the " + stage + " stage failed (see the diagnostics above)").str();
  return failure();
}

/// Fills pipeline options for `chip` (they are not copyable).
static void setNvvmOptions(NvvmPipelineOptions &options, Target chip) {
  options.chip = chip;
  options.libdevice = findLibdevice();
}

FailureOr<SmallVector<Operation *>> kiln::fuseAndListTunableKernels(ModuleOp module, std::string &error) {
  if (failed(runStage(module, "fusion", error, [](OpPassManager &pm) { buildFusionPipeline(pm); })))
    return failure();
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<MatmulOp, AttentionOp>(op))
      ops.push_back(op);
  });
  return ops;
}

/// Refuses the first zero-size tensor of `module`'s functions, naming it: a kernel over no elements would be
/// given an empty grid, which the driver refuses at the launch, far from the op that made the tensor.
static LogicalResult refuseEmptyTensors(ModuleOp module) {
  auto isEmpty = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && llvm::is_contained(tensor.getShape(), 0);
  };
  const char *why = "; the GPU targets take no zero-size tensors (the host target does)";
  for (auto func : module.getOps<func::FuncOp>()) {
    for (BlockArgument argument : func.getArguments())
      if (isEmpty(argument.getType()))
        return emitError(argument.getLoc()) << "argument #" << argument.getArgNumber() << " of @"
                                            << func.getSymName() << " has zero-size type " << argument.getType()
                                            << why;
    WalkResult walk = func.walk([&](Operation *op) {
      for (OpResult result : op->getResults())
        if (isEmpty(result.getType())) {
          op->emitOpError() << "result #" << result.getResultNumber() << " has zero-size type " << result.getType()
                            << why;
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return success();
}

/// The most blocks a grid holds along x, y and z, and threads a block holds, on every chip Kiln targets.
static constexpr int64_t kMaxGrid[3] = {2147483647, 65535, 65535};
static constexpr int64_t kMaxBlockThreads = 1024;

/// Refuses a kernel whose launch no GPU can make (a grid of more blocks than it holds: a tensor too large for the
/// kernel's tiling), naming the kernel and its op; the manifest would otherwise hold a grid that does not fit the
/// 32 bits of a launch.
static LogicalResult refuseImpossibleLaunches(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    auto launch = func->getAttrOfType<DictionaryAttr>("kiln.launch");
    if (!launch)
      continue;
    auto grid = dyn_cast_or_null<DenseI64ArrayAttr>(launch.get("grid"));
    auto block = dyn_cast_or_null<DenseI64ArrayAttr>(launch.get("block"));
    Operation *op = kernelOpOf(func);
    auto report = [&]() {
      InFlightDiagnostic diagnostic = emitError(op ? op->getLoc() : func.getLoc());
      diagnostic << "kernel '" << func.getSymName() << "'";
      if (op)
        diagnostic << " (" << kernelOpName(op) << ")";
      return diagnostic;
    };
    auto format = [](DenseI64ArrayAttr dims) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "[";
      llvm::interleaveComma(dims.asArrayRef(), os);
      os << "]";
      return text;
    };
    if (!grid || grid.size() != 3 || !block || block.size() != 3)
      return report() << " has no 3-d grid and block";
    for (int64_t d = 0; d < 3; ++d)
      if (grid[d] < 1 || grid[d] > kMaxGrid[d])
        return report() << " needs a grid of " << format(grid) << " blocks; a GPU grid holds 1 to " << kMaxGrid[0]
                        << " blocks along x and 1 to " << kMaxGrid[1] << " along y and z";
    bool fits = llvm::all_of(block.asArrayRef(), [](int64_t size) { return size >= 1 && size <= kMaxBlockThreads; });
    if (!fits || block[0] * block[1] * block[2] > kMaxBlockThreads)
      return report() << " needs blocks of " << format(block) << " threads; a GPU block holds 1 to "
                      << kMaxBlockThreads << " threads";
  }
  return success();
}

LogicalResult kiln::runGpuKernelStage(ModuleOp module, Target chip, std::string &error) {
  if (chip == Target::Host) {
    error = "the GPU kernel stage takes a GPU target (sm_80 or sm_90a), not host";
    return failure();
  }
  if (failed(refuseEmptyTensors(module))) {
    error = "the kernel stage failed (see the diagnostics above)";
    return failure();
  }
  NvvmPipelineOptions options;
  setNvvmOptions(options, chip);
  if (failed(runStage(
          module, "kernel", error, [&](OpPassManager &pm) { buildGpuKernelPipeline(pm, options); },
          Verify::Result)))
    return failure();
  if (failed(refuseImpossibleLaunches(module))) {
    error = "the kernel stage failed (see the diagnostics above)";
    return failure();
  }
  return success();
}

LogicalResult kiln::runNvvmLowering(ModuleOp module, Target chip, std::string &error) {
  NvvmPipelineOptions options;
  setNvvmOptions(options, chip);
  return runStage(
      module, "NVVM lowering", error, [&](OpPassManager &pm) { buildNvvmLoweringPipeline(pm, options); },
      Verify::Result);
}

/// The module's kernel modules, or an error when it has none.
static FailureOr<SmallVector<gpu::GPUModuleOp>> kernelModules(ModuleOp module, std::string &error) {
  SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());
  if (gpuModules.empty()) {
    error = "the module has no GPU kernels to emit (no public function computes anything)";
    return failure();
  }
  return gpuModules;
}

/// What gpu-module-to-binary does for one module: translates it into an LLVM context of its own and runs the
/// NVPTX backend there. Safe on several modules at once.
static LogicalResult emitModulePtx(gpu::GPUModuleOp gpuModule, KernelModulePtx &emitted) {
  auto start = std::chrono::steady_clock::now();
  ArrayAttr targets = gpuModule.getTargetsAttr();
  auto target = targets && targets.size() == 1 ? dyn_cast<gpu::TargetAttrInterface>(targets[0]) : nullptr;
  if (!target)
    return gpuModule.emitError("expected exactly one GPU target (run the NVVM lowering first)");
  gpu::TargetOptions options({}, {}, {}, {}, gpu::CompilationTarget::Assembly);
  std::optional<SmallVector<char, 0>> ptx = target.serializeToObject(gpuModule, options);
  if (!ptx)
    return gpuModule.emitError("LLVM's NVPTX backend could not emit this module");
  emitted.name = gpuModule.getName().str();
  emitted.ptx.assign(ptx->begin(), ptx->end());
  emitted.microseconds = microsecondsSince(start);
  return success();
}

FailureOr<SmallVector<KernelModulePtx>> kiln::emitPtx(ModuleOp module, std::string &error) {
  FailureOr<SmallVector<gpu::GPUModuleOp>> gpuModules = kernelModules(module, error);
  if (failed(gpuModules))
    return failure();
  SmallVector<KernelModulePtx> emitted(gpuModules->size());
  LogicalResult result =
      failableParallelForEach(module.getContext(), llvm::seq<size_t>(0, gpuModules->size()), [&](size_t index) {
        return emitModulePtx((*gpuModules)[index], emitted[index]);
      });
  if (failed(result)) {
    error = "the PTX emission stage failed (see the diagnostics above)";
    return failure();
  }
  return emitted;
}

static llvm::json::Array jsonArray(ArrayRef<int64_t> values) {
  llvm::json::Array array;
  for (int64_t v : values)
    array.push_back(v);
  return array;
}

llvm::json::Array kiln::describeKernels(ModuleOp module) {
  llvm::json::Array kernels;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto launch = func->getAttrOfType<DictionaryAttr>("kiln.launch");
    if (!launch)
      continue;
    llvm::json::Array params;
    FunctionType type = func.getFunctionType();
    unsigned numInputs = type.getNumInputs() - type.getNumResults();
    for (auto [index, argType] : llvm::enumerate(type.getInputs())) {
      auto tensor = cast<RankedTensorType>(argType);
      std::optional<ElementKind> kind = elementKindOf(tensor.getElementType());
      params.push_back(llvm::json::Object{
          {"name", index < numInputs ? ("in" + llvm::Twine(index)).str() : std::string("out")},
          {"role", index < numInputs ? "input" : "output"},
          {"shape", jsonArray(tensor.getShape())},
          {"dtype", kind ? elementName(*kind).str() : std::string("unknown")}});
    }
    // The function in the kernel's module: its own name, or another kernel's that it shares a module with
    // (kiln-share-kernel-modules).
    auto gpuKernel = func->getAttrOfType<SymbolRefAttr>("kiln.gpu_kernel");
    llvm::json::Object entry{{"name", func.getSymName().str()},
                             {"function", gpuKernel ? gpuKernel.getLeafReference().str() : func.getSymName().str()},
                             {"params", std::move(params)},
                             {"grid", jsonArray(cast<DenseI64ArrayAttr>(launch.get("grid")).asArrayRef())},
                             {"block", jsonArray(cast<DenseI64ArrayAttr>(launch.get("block")).asArrayRef())},
                             {"dynamic_shared_bytes",
                              cast<IntegerAttr>(launch.get("dynamic_shared_bytes")).getInt()}};
    if (auto sizes = dyn_cast_or_null<DenseI64ArrayAttr>(launch.get("sizes")))
      entry["sizes"] = jsonArray(sizes.asArrayRef());
    // A kernel that waits for its predecessor itself, launched to overlap it (programmatic dependent launch).
    if (func->hasAttr("kiln.dependent_launch"))
      entry["dependent_launch"] = true;
    // The tensor maps the runtime builds at each launch and passes after the sizes (TMA kernels).
    if (auto maps = dyn_cast_or_null<ArrayAttr>(launch.get("tensor_maps"))) {
      llvm::json::Array specs;
      for (auto map : maps.getAsRange<DictionaryAttr>()) {
        llvm::json::Object spec{{"dtype", cast<StringAttr>(map.get("dtype")).str()},
                                {"swizzle", cast<IntegerAttr>(map.get("swizzle")).getInt()}};
        spec["buffer"] = cast<IntegerAttr>(map.get("buffer")).getInt();
        for (StringRef field : {"dims", "strides", "box"})
          spec[field] = jsonArray(cast<DenseI64ArrayAttr>(map.get(field)).asArrayRef());
        specs.push_back(std::move(spec));
      }
      entry["tensor_maps"] = std::move(specs);
    }
    // The kernel op and its config; a grouped kernel (kiln-group-kernels) runs several ops of one kind and lists
    // every member's config in order.
    llvm::json::Array configs;
    // A kernel of tiled loops counts its loops (the kiln ops beside them are views); others the kiln ops that
    // write its results (not a split matmul's sum computed in them, kiln-fuse-split-sums).
    Operation *first = kernelOpOf(func);
    bool tiled = first && first->hasAttr(kTiledOpAttrName);
    for (Operation &op : func.getBody().front()) {
      if (tiled ? !op.hasAttr(kTiledOpAttrName) : !isa<KilnDialect>(op.getDialect()) || !writesKernelResult(&op))
        continue;
      entry["op"] = kernelOpName(&op).str();
      ConfigAttr config = getConfig(&op);
      configs.push_back(config ? llvm::json::Value(configToJson(config)) : llvm::json::Value(nullptr));
    }
    if (!configs.empty() && configs.front().getAsObject())
      entry["config"] = configs.front();
    if (configs.size() > 1) {
      entry["group"] = static_cast<int64_t>(configs.size());
      entry["configs"] = std::move(configs);
    }
    kernels.push_back(std::move(entry));
  }
  return kernels;
}

/// Adds the report of the assembler that made `kernel`'s cubin (`log`, its module's) to the kernel's manifest
/// entry: registers, spill stores and loads of the function it launches. ptxas -v and the driver's JIT write
/// "Compiling entry function 'f'", then "Used N registers" and the spill bytes; when the driver serves the cubin
/// from its own JIT cache it writes "Function properties for 'f':" and "used N registers, ..., M bytes lmem"
/// instead, where no local memory means no spills.
static void attachPtxasReport(llvm::json::Object &kernel, llvm::StringRef log) {
  llvm::StringRef current;
  SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  auto numberBefore = [](llvm::StringRef line, size_t at, int64_t &number) {
    llvm::StringRef before = line.take_front(at).rtrim();
    return !before.drop_front(before.find_last_of(' ') + 1).getAsInteger(10, number);
  };
  for (llvm::StringRef line : lines) {
    for (llvm::StringRef opening : {"Compiling entry function '", "Function properties for '"})
      if (size_t at = line.find(opening); at != llvm::StringRef::npos)
        current = line.drop_front(at + opening.size()).take_until([](char c) { return c == '\''; });
    if (kernel.getString("function") != current)
      continue;
    int64_t number = 0;
    if (size_t at = line.find(" registers"); at != llvm::StringRef::npos && numberBefore(line, at, number))
      kernel["registers"] = number;
    if (size_t at = line.find(" bytes spill stores"); at != llvm::StringRef::npos && numberBefore(line, at, number))
      kernel["spill_stores"] = number;
    if (size_t at = line.find(" bytes spill loads"); at != llvm::StringRef::npos && numberBefore(line, at, number))
      kernel["spill_loads"] = number;
    if (size_t at = line.find(" bytes lmem"); at != llvm::StringRef::npos && numberBefore(line, at, number) &&
        number == 0)
      kernel["spill_stores"] = 0, kernel["spill_loads"] = 0;
  }
}

/// Writes one of the compile's files; a failure (a full disk) is an error naming the file, which is then
/// removed. The stream's error is taken off it: a stream destroyed with its error set ends the process.
static LogicalResult writeFile(llvm::StringRef path, llvm::StringRef contents, std::string &error) {
  auto file = openOutputFile(path, &error);
  if (!file)
    return failure();
  file->os() << contents;
  file->os().close();
  if (std::error_code ec = file->os().error()) {
    file->os().clear_error();
    error = ("cannot write " + path + ": " + ec.message()).str();
    return failure();
  }
  file->keep();
  return success();
}

/// Why the file at `path` is not a whole cubin, or nothing: ptxas exits with 0 after writing a truncated one
/// when the disk fills, and a cubin cut short must never be loaded (or stored in the kernel cache) as a kernel.
static std::optional<std::string> incompleteCubin(llvm::StringRef path) {
  // Read only a regular file: a device (/dev/full) would be read without end.
  if (!llvm::sys::fs::is_regular_file(path))
    return std::string("not a regular file");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return buffer.getError().message();
  llvm::StringRef image = (*buffer)->getBuffer();
  if (!image.starts_with("\x7f" "ELF"))
    return std::string("not an ELF image");
  auto elf = llvm::object::ELF64LEFile::create(image);
  if (!elf)
    return llvm::toString(elf.takeError());
  // Every header table and every section's bytes lie inside the file.
  auto headers = elf->program_headers();
  if (!headers)
    return llvm::toString(headers.takeError());
  auto sections = elf->sections();
  if (!sections)
    return llvm::toString(sections.takeError());
  for (const auto &section : *sections)
    if (section.sh_type != llvm::ELF::SHT_NOBITS)
      if (auto contents = elf->getSectionContents(section); !contents)
        return llvm::toString(contents.takeError());
  return std::nullopt;
}

/// Writes the cubin of `ptxPath` to `cubinPath` with ptxas (-O3, -v) and returns its log; nothing when ptxas is
/// not installed. A cubin that ptxas leaves incomplete is an error naming it, and is removed. `signalled` is set
/// when ptxas was ended by a signal: Ctrl-C reaches it with the compiling process, whose own handler (Python's)
/// may only act once the compile returns.
static FailureOr<std::optional<std::string>> assembleWithPtxas(llvm::StringRef ptxPath, llvm::StringRef chip,
                                                              llvm::StringRef cubinPath, std::string &error,
                                                              bool &signalled) {
  std::optional<std::string> ptxas = findPtxas();
  if (!ptxas)
    return std::optional<std::string>();
  std::string logPath = (cubinPath + ".log").str();
  std::string arch = ("-arch=" + chip).str();
  SmallVector<llvm::StringRef> args{*ptxas, arch, "-v", "-O3", ptxPath, "-o", cubinPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(logPath), llvm::StringRef(logPath)};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0, 0, &message);
  auto log = llvm::MemoryBuffer::getFile(logPath);
  (void)llvm::sys::fs::remove(logPath);
  if (status != 0) {
    signalled = status == -2; // ExecuteAndWait's code for a child ended by a signal
    error = ("ptxas failed on " + ptxPath + ": " + (log ? (*log)->getBuffer() : llvm::StringRef(message))).str();
    return failure();
  }
  if (std::optional<std::string> why = incompleteCubin(cubinPath)) {
    error = ("ptxas wrote an incomplete cubin " + cubinPath + " (" + *why + "; is the disk full?)").str();
    (void)llvm::sys::fs::remove(cubinPath);
    return failure();
  }
  return std::optional<std::string>(log ? (*log)->getBuffer().str() : std::string());
}

namespace {
/// What became of one kernel module's PTX: its files, and the assembler's log and name when there is a cubin.
struct AssembledModule {
  std::string ptxFile, cubinFile, log, assembler, inProcessFailure, error;
  std::string cacheFailure; ///< why the module could not be stored in the kernel cache (the compile goes on)
  bool interrupted = false;    ///< the in-process assembler was interrupted: no cubin, no fallback
  bool ptxasSignalled = false; ///< ptxas was ended by a signal (Ctrl-C): no other module is assembled
  int64_t microseconds = 0;    ///< writing the PTX and assembling it, fallback included
  int64_t ptxMicroseconds = 0; ///< LLVM's emission of the PTX (KernelModulePtx::microseconds)
  int64_t startMicroseconds = 0; ///< when a worker took the module, from the start of the stage
  std::string function;        ///< the kernel's name in the PTX when it came from the kernel cache
};
} // namespace

/// Writes `module`'s PTX into `outputDir` and assembles it: with `assembler` when given, else (or when it
/// fails) with ptxas when it is installed; not at all once `interrupted` is set, by this module's assembler or
/// another's.
static AssembledModule writeAndAssemble(const KernelModulePtx &module, llvm::StringRef chip,
                                        llvm::StringRef outputDir, const PtxAssembler &assembler,
                                        const std::atomic<bool> &interrupted) {
  AssembledModule result;
  result.ptxFile = module.name + ".ptx";
  std::string cubinFile = (module.name + "." + chip + ".cubin").str();
  SmallString<256> ptxPath(outputDir), cubinPath(outputDir);
  llvm::sys::path::append(ptxPath, result.ptxFile);
  llvm::sys::path::append(cubinPath, cubinFile);
  if (failed(writeFile(ptxPath, module.ptx, result.error)))
    return result;
  if (assembler) {
    std::string cubin;
    KilnPtxAssembly outcome = assembler(module.ptx, cubin, result.log);
    if (outcome == KilnPtxAssembly::Assembled) {
      if (succeeded(writeFile(cubinPath, cubin, result.error)))
        result.cubinFile = cubinFile, result.assembler = "the CUDA driver's JIT";
      return result;
    }
    if (outcome == KilnPtxAssembly::Interrupted || interrupted) {
      result.interrupted = outcome == KilnPtxAssembly::Interrupted;
      return result;
    }
    result.inProcessFailure = std::move(result.log);
    result.log.clear();
  }
  FailureOr<std::optional<std::string>> log =
      assembleWithPtxas(ptxPath, chip, cubinPath, result.error, result.ptxasSignalled);
  if (succeeded(log) && *log)
    result.log = **log, result.cubinFile = cubinFile, result.assembler = "ptxas";
  return result;
}

/// What, besides a kernel module's text and the compiler's build (whose pipelines and options the cache
/// directory stands for), makes its PTX and cubin: the chip and the libdevice it links (path, size, time).
static std::string toolchainFingerprint(Target chip) {
  NvvmPipelineOptions options;
  setNvvmOptions(options, chip);
  llvm::sys::fs::file_status status;
  bool found = !options.libdevice.empty() && !llvm::sys::fs::status(options.libdevice, status);
  return llvm::formatv("chip={0} libdevice={1} {2} {3}", stringifyTarget(chip), options.libdevice, found ? status.getSize() : 0,
                       found ? status.getLastModificationTime().time_since_epoch().count() : 0)
      .str();
}

/// Writes a kernel module found in the kernel cache into `outputDir` as module `name`'s files.
static FailureOr<AssembledModule> writeCachedFiles(const CachedKernel &cached, llvm::StringRef name,
                                                   llvm::StringRef chip, llvm::StringRef outputDir,
                                                   std::string &error) {
  AssembledModule files;
  files.ptxFile = (name + ".ptx").str();
  files.cubinFile = (name + "." + chip + ".cubin").str(); // every cached kernel has one
  files.function = cached.function, files.log = cached.log, files.assembler = cached.assembler;
  SmallString<256> ptxPath(outputDir), cubinPath(outputDir);
  llvm::sys::path::append(ptxPath, files.ptxFile);
  llvm::sys::path::append(cubinPath, files.cubinFile);
  if (failed(writeFile(ptxPath, cached.ptx, error)) || failed(writeFile(cubinPath, cached.cubin, error)))
    return failure();
  return files;
}

/// Stores a module this compile emitted and assembled (`files`, in `outputDir`) in the kernel cache; a failure
/// to is kept in `files.cacheFailure`.
static void storeAssembledModule(const KernelModulePtx &emitted, AssembledModule &files, llvm::StringRef function,
                                 llvm::StringRef outputDir, llvm::StringRef kernelCacheDir, llvm::StringRef key) {
  // Only a module the assembler of choice made a cubin of: PTX alone (no assembler, or the in-process one
  // failed and ptxas took over or was missing) would be JIT-compiled at every load, or fail at every one.
  if (files.cubinFile.empty() || !files.inProcessFailure.empty())
    return;
  SmallString<256> cubinPath(outputDir);
  llvm::sys::path::append(cubinPath, files.cubinFile);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> cubin = llvm::MemoryBuffer::getFile(cubinPath);
  if (!cubin)
    return;
  if (llvm::Error failed = storeCachedKernel(
          kernelCacheDir, key,
          CachedKernel{emitted.ptx, (*cubin)->getBuffer().str(), function.str(), files.assembler, files.log}))
    files.cacheFailure = llvm::toString(std::move(failed));
}

LogicalResult kiln::compileForGpu(ModuleOp module, Target chip, llvm::StringRef outputDir,
                                  std::string &error, const PtxAssembler &assembler,
                                  llvm::StringRef kernelCacheDir) {
  // Where the compile's time goes, for the manifest: each stage's wall time in microseconds (the stages after
  // the run plans work on every kernel module at once).
  auto compileStart = std::chrono::steady_clock::now(), stageStart = compileStart;
  llvm::json::Object stageTimes;
  auto endStage = [&](llvm::StringRef stage) {
    stageTimes[stage] = microsecondsSince(stageStart);
    stageStart = std::chrono::steady_clock::now();
  };
  if (failed(runGpuKernelStage(module, chip, error)))
    return failure();
  endStage("kernel_stage");
  llvm::json::Array kernels = describeKernels(module);
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
    error = ("cannot create " + outputDir + ": " + ec.message()).str();
    return failure();
  }
  FailureOr<llvm::json::Array> plans = describeRunPlans(module, outputDir);
  if (failed(plans)) {
    error = "the run plan stage failed (see the diagnostics above)";
    return failure();
  }
  // A plan's first kernel follows whatever ran before the plan (another plan, a framework's kernel) and launches
  // the ordinary way: repeated one-kernel plans ran 3-5% slower with programmatic dependent launch on the H200,
  // while each later kernel of a plan gains by overlapping its predecessor (a split-K sum: 0.5-1 us a step;
  // bench/results/decode/decode_gemm.md).
  llvm::StringSet<> firstKernels;
  for (const llvm::json::Value &plan : *plans)
    if (const llvm::json::Array *steps = plan.getAsObject()->getArray("steps"))
      for (const llvm::json::Value &step : *steps)
        if (std::optional<StringRef> kernel = step.getAsObject()->getString("kernel")) {
          firstKernels.insert(*kernel);
          break;
        }
  for (llvm::json::Value &value : kernels)
    if (firstKernels.contains(*value.getAsObject()->getString("name")))
      value.getAsObject()->erase("dependent_launch");
  // Which module holds each host kernel function's kernel (one kernel a module after kiln-split-kernel-modules;
  // one module for several functions after kiln-share-kernel-modules).
  llvm::StringMap<std::string> moduleOf;
  for (auto func : module.getOps<func::FuncOp>())
    if (auto gpuKernel = func->getAttrOfType<SymbolRefAttr>("kiln.gpu_kernel"))
      moduleOf[func.getSymName()] = gpuKernel.getRootReference().str();
  endStage("run_plans");
  FailureOr<SmallVector<gpu::GPUModuleOp>> kernelStageModules = kernelModules(module, error);
  if (failed(kernelStageModules))
    return failure();
  MLIRContext *context = module.getContext();

  // The kernel cache: each module's key (computed on the context's threads) and, for the modules compiled
  // before, their files, written here at once; those modules leave the compile.
  llvm::StringMap<std::string> keyOf, functionOf; // by module, for the modules compiled here
  llvm::StringMap<AssembledModule> fromCache;
  if (!kernelCacheDir.empty()) {
    SmallVector<std::string> keys(kernelStageModules->size());
    std::string toolchain = toolchainFingerprint(chip);
    parallelForEach(context, llvm::seq<size_t>(0, keys.size()),
                    [&](size_t index) { keys[index] = kernelCacheKey((*kernelStageModules)[index], toolchain); });
    for (auto [gpuModule, key] : llvm::zip_equal(*kernelStageModules, keys)) {
      std::string name = gpuModule.getName().str();
      if (std::optional<CachedKernel> cached = lookupCachedKernel(kernelCacheDir, key)) {
        FailureOr<AssembledModule> files = writeCachedFiles(*cached, name, stringifyTarget(chip), outputDir, error);
        if (failed(files))
          return failure();
        fromCache[name] = std::move(*files);
        gpuModule->erase();
        continue;
      }
      keyOf[name] = key;
      for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>())
        functionOf[name] = kernel.getName().str();
    }
    endStage("kernel_cache");
  }
  if (failed(runNvvmLowering(module, chip, error)))
    return failure();
  endStage("nvvm_lowering");
  SmallVector<gpu::GPUModuleOp> gpuModules(module.getOps<gpu::GPUModuleOp>());

  // Each module is emitted and then assembled by one worker, all modules at once, so that no module waits for
  // the slowest one's emission before it assembles (the driver's JIT and ptxas take one kernel at a time). The
  // workers are this compile's own threads rather than the shared pool: a Python assembler takes the GIL, and a
  // Python thread may hold the GIL while it waits for the shared pool. An interrupted assembler stops the rest.
  size_t count = gpuModules.size();
  SmallVector<KernelModulePtx> ptx(count);
  SmallVector<AssembledModule, 0> assembled(count);
  std::atomic<size_t> nextModule{0};
  std::atomic<bool> interrupted{false}, emissionFailed{false};
  ParallelDiagnosticHandler diagnostics(module.getContext()); // in module order, whichever thread emits them
  auto emitAndAssemble = [&] {
    for (size_t index = nextModule++; index < count && !interrupted && !emissionFailed; index = nextModule++) {
      int64_t startedAt = microsecondsSince(stageStart);
      diagnostics.setOrderIDForThread(index);
      bool emitted = succeeded(emitModulePtx(gpuModules[index], ptx[index]));
      diagnostics.eraseOrderIDForThread();
      if (!emitted) {
        emissionFailed = true;
        continue;
      }
      if (interrupted || emissionFailed)
        continue; // the compile fails anyway: assemble nothing more
      auto start = std::chrono::steady_clock::now();
      assembled[index] = writeAndAssemble(ptx[index], stringifyTarget(chip), outputDir, assembler, interrupted);
      assembled[index].microseconds = microsecondsSince(start);
      assembled[index].startMicroseconds = startedAt;
      // An assembler interrupted, or ptxas ended by a signal (Ctrl-C reaches it first): the compile fails, so
      // no other module is started.
      if (assembled[index].interrupted || assembled[index].ptxasSignalled)
        interrupted = true;
      else if (assembled[index].error.empty() && keyOf.count(ptx[index].name))
        storeAssembledModule(ptx[index], assembled[index], functionOf.lookup(ptx[index].name), outputDir,
                             kernelCacheDir, keyOf.lookup(ptx[index].name));
    }
  };
  // As many workers as the context has threads (one when it runs single-threaded, where attribute uniquing
  // takes no locks).
  size_t workers = context->isMultithreadingEnabled() ? std::min<size_t>(count, context->getNumThreads()) : 1;
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers; ++i)
    threads.emplace_back(emitAndAssemble);
  emitAndAssemble();
  for (std::thread &thread : threads)
    thread.join();
  if (interrupted) {
    error = "the compile was interrupted while the kernels were being assembled";
    for (const AssembledModule &result : assembled)
      if (result.ptxasSignalled && !result.interrupted)
        error = result.error; // "ptxas failed on <f>: Interrupt": what ended it
    return failure();
  }
  if (emissionFailed) {
    error = "the PTX emission stage failed (see the diagnostics above)";
    return failure();
  }
  endStage("ptx_and_assembly");
  llvm::json::Object manifest{{"target", stringifyTarget(chip).str()},
                              {"abi", "parameters are device pointers to row-major buffers, in order, then a "
                                      "kernel's sizes as 64-bit integers, then its tensor maps (128 bytes by value, "
                                      "built from tensor_maps at each launch)"}};
  std::string logs;
  llvm::StringMap<const AssembledModule *> byName;
  llvm::SmallSetVector<StringRef, 2> assemblers; // normally one; both when the driver failed on some modules
  for (auto [emitted, result] : llvm::zip(ptx, assembled)) {
    if (!result.error.empty()) {
      error = result.error;
      return failure();
    }
    result.ptxMicroseconds = emitted.microseconds;
    byName[emitted.name] = &result;
    logs += result.log;
    if (!result.assembler.empty())
      assemblers.insert(result.assembler);
    if (!result.inProcessFailure.empty() && !manifest.get("in_process_assembly_failed"))
      manifest["in_process_assembly_failed"] = result.inProcessFailure;
    // The first reason the kernel cache could not be written: a read-only or full disk fails every module alike.
    if (!result.cacheFailure.empty() && !manifest.get("kernel_cache_failed"))
      manifest["kernel_cache_failed"] = result.cacheFailure;
  }
  for (auto &[name, files] : fromCache) {
    byName[name] = &files;
    logs += files.log;
    if (!files.assembler.empty())
      assemblers.insert(files.assembler);
  }
  if (!assemblers.empty())
    manifest["assembler"] = llvm::join(assemblers, " and ");
  // Each kernel's files: its module's PTX, and its cubin when an assembler made one (else the runtime has the
  // driver JIT-compile the PTX).
  for (llvm::json::Value &value : kernels) {
    llvm::json::Object &kernel = *value.getAsObject();
    const AssembledModule *files = byName.lookup(moduleOf.lookup(*kernel.getString("name")));
    if (!files) {
      error = ("no GPU module holds kernel " + *kernel.getString("name")).str();
      return failure();
    }
    kernel["ptx"] = files->ptxFile;
    kernel["cubin"] = files->cubinFile.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(files->cubinFile);
    kernel["compile_us"] = llvm::json::Object{
        {"start", files->startMicroseconds}, {"ptx", files->ptxMicroseconds}, {"assembly", files->microseconds}};
    if (!kernelCacheDir.empty())
      kernel["kernel_cache"] = files->function.empty() ? "miss" : "hit";
    if (!files->function.empty())
      kernel["function"] = files->function;
    attachPtxasReport(kernel, files->log);
  }
  manifest["kernels"] = std::move(kernels);
  manifest["plans"] = std::move(*plans);
  manifest["ptxas"] = manifest.get("assembler") ? logs
                                                : std::string("ptxas not found: the runtime JIT-compiles each "
                                                              "kernel's PTX through the driver");
  stageTimes["total"] = microsecondsSince(compileStart); // up to writing the manifest
  manifest["compile_us"] = std::move(stageTimes);
  SmallString<256> manifestPath(outputDir);
  llvm::sys::path::append(manifestPath, "manifest.json");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return writeFile(manifestPath, text, error);
}

/// The files an earlier compile wrote into `folder`, as its manifest names them: its kernels' PTX and cubins, its
/// constants and the manifest. Only names of files within the folder are taken, whatever a hand-edited manifest
/// says.
static SmallVector<std::string> filesOfEarlierCompile(llvm::StringRef folder) {
  SmallVector<std::string> files;
  SmallString<256> manifestPath(folder);
  llvm::sys::path::append(manifestPath, "manifest.json");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text = llvm::MemoryBuffer::getFile(manifestPath);
  if (!text)
    return files;
  files.push_back("manifest.json");
  llvm::Expected<llvm::json::Value> manifest = llvm::json::parse((*text)->getBuffer());
  if (!manifest) {
    llvm::consumeError(manifest.takeError());
    return files;
  }
  auto take = [&](const llvm::json::Value *name) {
    std::optional<llvm::StringRef> file = name ? name->getAsString() : std::nullopt;
    if (file && !file->empty() && *file != "." && *file != ".." && llvm::sys::path::filename(*file) == *file)
      files.push_back(file->str());
  };
  const llvm::json::Object *root = manifest->getAsObject();
  if (const llvm::json::Array *kernels = root ? root->getArray("kernels") : nullptr)
    for (const llvm::json::Value &kernel : *kernels)
      if (const llvm::json::Object *entry = kernel.getAsObject())
        take(entry->get("ptx")), take(entry->get("cubin"));
  if (const llvm::json::Array *plans = root ? root->getArray("plans") : nullptr)
    for (const llvm::json::Value &plan : *plans)
      if (const llvm::json::Array *values = plan.getAsObject() ? plan.getAsObject()->getArray("values") : nullptr)
        for (const llvm::json::Value &value : *values)
          if (const llvm::json::Object *entry = value.getAsObject())
            take(entry->get("file"));
  return files;
}

/// Moves a finished compile from `staging` into the folder `outputDir` that already exists: the earlier
/// compile's manifest and files out first, the new files in, the new manifest last, so that no manifest ever
/// names another compile's files. Files of the folder that no compile wrote stay.
static LogicalResult publishIntoFolder(llvm::StringRef staging, llvm::StringRef outputDir, std::string &error) {
  auto inFolder = [](llvm::StringRef folder, llvm::StringRef name) {
    SmallString<256> path(folder);
    llvm::sys::path::append(path, name);
    return path;
  };
  for (const std::string &file : filesOfEarlierCompile(outputDir))
    (void)llvm::sys::fs::remove(inFolder(outputDir, file));
  std::error_code ec;
  SmallVector<std::string> names;
  for (llvm::sys::fs::directory_iterator entry(staging, ec), end; entry != end && !ec; entry.increment(ec))
    names.push_back(llvm::sys::path::filename(entry->path()).str());
  // The manifest last.
  std::stable_partition(names.begin(), names.end(), [](const std::string &name) { return name != "manifest.json"; });
  for (const std::string &name : names)
    if (!ec)
      if ((ec = llvm::sys::fs::rename(inFolder(staging, name), inFolder(outputDir, name))))
        error = ("cannot move " + name + " into " + outputDir + ": " + ec.message()).str();
  if (ec && error.empty())
    error = ("cannot list " + staging + ": " + ec.message()).str();
  return failure(bool(ec));
}

LogicalResult kiln::compileForGpuFolder(ModuleOp module, Target chip, llvm::StringRef outputDir,
                                        std::string &error, llvm::function_ref<void(llvm::StringRef)> onStaging) {
  // The staging folder: inside `outputDir` when it exists, else beside it, so that the moves at the end stay
  // within one file system.
  bool exists = llvm::sys::fs::is_directory(outputDir);
  SmallString<256> prefix(outputDir);
  if (exists) {
    llvm::sys::path::append(prefix, ".kilnc-staging");
  } else {
    llvm::StringRef parent = llvm::sys::path::parent_path(outputDir);
    if (!parent.empty() && !llvm::sys::fs::exists(parent))
      if (std::error_code ec = llvm::sys::fs::create_directories(parent)) {
        error = ("cannot create " + outputDir + ": " + ec.message()).str();
        return failure();
      }
    prefix = parent;
    llvm::sys::path::append(prefix, "." + llvm::sys::path::filename(outputDir) + ".kilnc-staging");
  }
  // Absolute: createUniqueDirectory puts a relative name under the system's temporary folder.
  SmallString<256> staging;
  std::error_code ec = llvm::sys::fs::make_absolute(prefix);
  if (ec || (ec = llvm::sys::fs::createUniqueDirectory(prefix, staging))) {
    error = ("cannot create " + outputDir + ": " + ec.message()).str();
    return failure();
  }
  if (onStaging)
    onStaging(staging);
  LogicalResult compiled = compileForGpu(module, chip, staging, error);
  if (succeeded(compiled)) {
    if (!exists) {
      if (std::error_code ec = llvm::sys::fs::rename(staging, outputDir)) {
        error = ("cannot create " + outputDir + ": " + ec.message()).str();
        compiled = failure();
      }
    } else {
      compiled = publishIntoFolder(staging, outputDir, error);
    }
  }
  (void)llvm::sys::fs::remove_directories(staging);
  return compiled;
}
