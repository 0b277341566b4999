//===- kiln-run.cpp - Run a kiln function on the CPU -----------------------===//
//
// A CPU interpreter for kiln programs, for debugging kernels without a GPU: it compiles an entry function with
// the host pipeline, feeds it .npy files or seeded random inputs, writes .npy results, and with --check runs the
// untiled reference lowering on the same inputs and reports the relative error of every result.
//
//===----------------------------------------------------------------------===//

#include "Host/HostExecutable.h"
#include "Host/Npy.h"
#include "Pipelines/InputModule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <random>

using namespace mlir;
using namespace mlir::kiln;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::init("-"));
static cl::opt<std::string> entryName("entry", cl::desc("Function to run (default: the only public function)"));
static cl::list<std::string> inputPaths("input", cl::desc("An input .npy, one per argument in order"));
static cl::list<std::string> outputPaths("output", cl::desc("Where to write a result .npy, one per result"));
static cl::opt<bool> randomInputs("random-inputs", cl::desc("Fill every argument with seeded random values"));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed for --random-inputs (default: a fresh one, printed)"));
static cl::opt<bool> check("check", cl::desc("Also run the untiled reference lowering and report the error"));
static cl::opt<double> tolerance("tolerance",
                                 cl::desc("With --check, fail when a relative error exceeds this (default: 1e-4 "
                                          "for f32 results, 5e-3 for f16, 2e-2 for bf16)"));
static cl::opt<bool> noTile("no-tile", cl::desc("Run the untiled reference lowering instead of the tiled one"));
static cl::opt<bool> timing("time", cl::desc("Print compile time and the median run time"));
static cl::opt<unsigned> repeat("repeat", cl::desc("Runs to take the median of with --time"), cl::init(5));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "kiln-run: error: " << message << "\n";
  return 1;
}

using Clock = std::chrono::steady_clock;
static double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// The function to run: --entry, or the module's only public function with a body.
static FailureOr<std::string> pickEntry(ModuleOp module) {
  if (!entryName.empty())
    return entryName.getValue();
  llvm::Expected<std::string> entry = HostExecutable::defaultEntry(module);
  if (entry)
    return *entry;
  fail(llvm::toString(entry.takeError()) + " (choose one with --entry=NAME)");
  return failure();
}

static double defaultTolerance(ElementKind kind) {
  return kind == ElementKind::BF16 ? 2e-2 : kind == ElementKind::F16 ? 5e-3 : 1e-4;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Kiln CPU runner: execute a kiln function on .npy inputs\n");
  // No error is below a negative limit or a NaN one, so --check would report an exact result as FAILED.
  if (tolerance.getNumOccurrences() && !(tolerance.getValue() >= 0))
    return fail(llvm::formatv("--tolerance must be a relative error of 0 or more, got {0}",
                              llvm::format("%g", tolerance.getValue())));

  InputModule input(inputFile);
  if (!input.openError().empty())
    return fail(input.openError());
  ModuleOp module = input.module();
  if (!module)
    return 1;
  FailureOr<std::string> entry = pickEntry(module);
  if (failed(entry))
    return 1;

  HostPipelineOptions options;
  options.tile = !noTile;
  auto compileStart = Clock::now();
  auto executable = HostExecutable::compile(module, *entry, options);
  if (failed(executable))
    return 1;
  double compileMs = millisecondsSince(compileStart);

  // Inputs: from files or random.
  ArrayRef<TensorSignature> signature = (*executable)->inputs();
  std::vector<HostTensor> inputs;
  if (randomInputs) {
    if (!inputPaths.empty())
      return fail("--random-inputs and --input are exclusive");
    uint64_t actualSeed = seed.getNumOccurrences() ? seed.getValue() : std::random_device{}();
    llvm::outs() << "seed: " << actualSeed << "\n";
    for (auto [index, sig] : llvm::enumerate(signature)) {
      llvm::Expected<HostTensor> tensor = HostTensor::zeros(sig.kind, sig.shape);
      if (!tensor)
        return fail("input #" + llvm::Twine(index) + " of '" + *entry + "': " + llvm::toString(tensor.takeError()));
      fillRandom(*tensor, actualSeed + index);
      inputs.push_back(std::move(*tensor));
    }
  } else {
    if (inputPaths.size() != signature.size())
      return fail("'" + *entry + "' takes " + llvm::Twine(signature.size()) + " inputs but " +
                  llvm::Twine(inputPaths.size()) + " --input files were given (or use --random-inputs)");
    for (auto [index, path] : llvm::enumerate(inputPaths)) {
      auto tensor = readNpy(path, signature[index].kind);
      if (!tensor)
        return fail("input #" + llvm::Twine(index) + ": " + llvm::toString(tensor.takeError()));
      inputs.push_back(std::move(*tensor));
    }
  }
  if (!outputPaths.empty() && outputPaths.size() != (*executable)->outputs().size())
    return fail("'" + *entry + "' has " + llvm::Twine((*executable)->outputs().size()) + " results but " +
                llvm::Twine(outputPaths.size()) + " --output files were given");

  auto outputs = (*executable)->run(inputs);
  if (!outputs)
    return fail(llvm::toString(outputs.takeError()));

  if (timing) {
    std::vector<double> runs;
    for (unsigned i = 0; i < std::max(1u, repeat.getValue()); ++i) {
      auto start = Clock::now();
      auto again = (*executable)->run(inputs);
      if (!again)
        return fail(llvm::toString(again.takeError()));
      runs.push_back(millisecondsSince(start));
    }
    std::sort(runs.begin(), runs.end());
    llvm::outs() << llvm::formatv("compile: {0:F1} ms, run: {1:F3} ms (median of {2})\n", compileMs,
                                  runs[runs.size() / 2], runs.size());
  }

  for (auto [index, path] : llvm::enumerate(outputPaths))
    if (llvm::Error error = writeNpy(path, (*outputs)[index]))
      return fail(llvm::toString(std::move(error)));

  int status = 0;
  if (check) {
    HostPipelineOptions referenceOptions;
    referenceOptions.tile = false;
    auto reference = HostExecutable::compile(module, *entry, referenceOptions);
    if (failed(reference))
      return 1;
    auto expected = (*reference)->run(inputs);
    if (!expected)
      return fail(llvm::toString(expected.takeError()));
    for (auto [index, output] : llvm::enumerate(*outputs)) {
      double errorValue = relativeError(output, (*expected)[index]);
      double limit = tolerance.getNumOccurrences() ? tolerance.getValue() : defaultTolerance(output.kind);
      bool ok = errorValue <= limit;
      llvm::outs() << llvm::formatv("result #{0} {1}: max relative error {2:E2} vs the reference ({3}, limit "
                                    "{4:E1})\n",
                                    index, output.describe(), errorValue, ok ? "ok" : "FAILED", limit);
      if (!ok)
        status = 1;
    }
  }
  if (outputPaths.empty() && !check && !timing)
    for (auto [index, output] : llvm::enumerate(*outputs)) {
      llvm::outs() << "result #" << index << " " << output.describe() << ":";
      for (int64_t i = 0, e = std::min<int64_t>(output.numElements(), 8); i < e; ++i)
        llvm::outs() << " " << output.get(i);
      llvm::outs() << (output.numElements() > 8 ? " ...\n" : "\n");
    }
  return status;
}
