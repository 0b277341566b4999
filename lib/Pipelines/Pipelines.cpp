//===- Pipelines.cpp - Kiln's named pass pipelines -------------------------===//
//
// Pass order for each backend, written once. Upstream passes are named by their registered flags so that a
// pipeline printed with --dump-pass-pipeline reads exactly as the kiln-opt command that replays it.
//
//===----------------------------------------------------------------------===//

#include "Pipelines/Pipelines.h"

#include "Conversion/Passes.h"
#include "Transforms/Passes.h"

#include "mlir/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::kiln;

/// Appends a textual pipeline; a malformed one is a bug in this file, reported with the text.
static LogicalResult appendPipeline(OpPassManager &pm, StringRef pipeline) {
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  if (succeeded(parsePassPipeline(pipeline, pm, errorStream)))
    return success();
  llvm::errs() << "kiln: cannot build the pipeline '" << pipeline << "': " << errors << "\n";
  return failure();
}

void kiln::buildFusionPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createKilnExpandPagedAttention());
  pm.addPass(createKilnSplitSlicedMatmuls());
  pm.addPass(createKilnFuseNorms());
  pm.addPass(createKilnFuseRope());
  pm.addPass(createCSEPass()); // one copy of the rope tables q and k share
  pm.addPass(createKilnFuseActivations());
  pm.addPass(createKilnFuseAttention());
  pm.addPass(createKilnFoldHeadTransposes());
  pm.addPass(createKilnPackGqaDecode());
  pm.addPass(createKilnFuseEpilogue());
  pm.addPass(createKilnFoldMatmulBatch());
  pm.addPass(createCanonicalizerPass()); // reshape chains the batch folding leaves become one view
  pm.addPass(createKilnFuseElementwise());
}

void kiln::buildKernelPipeline(OpPassManager &pm, const KernelPipelineOptions &options) {
  buildFusionPipeline(pm);
  pm.addPass(createKilnPadMatmulOperands(KilnPadMatmulOperandsOptions{options.target}));
  pm.addPass(createKilnSplitKv(KilnSplitKvOptions{options.target}));
  pm.addPass(createKilnSplitK(KilnSplitKOptions{options.target}));
  pm.addPass(createKilnOutlineKernels());
  pm.addPass(createKilnSelectConfig(KilnSelectConfigOptions{options.target}));
  pm.addPass(createKilnTile());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createKilnOnlineSoftmax());
  pm.addPass(createKilnDecomposeRows());
}

void kiln::buildGpuKernelPipeline(OpPassManager &pm, const NvvmPipelineOptions &options) {
  KernelPipelineOptions kernelOptions;
  kernelOptions.target = options.chip;
  buildKernelPipeline(pm, kernelOptions);
  pm.addPass(createKilnFuseSplitSums());
  pm.addPass(createKilnUpdateCachesInPlace());
  pm.addPass(createKilnSplitMaskedTiles());
  pm.addPass(createKilnAssignLayouts());
  pm.addPass(createConvertKilnToGPU(ConvertKilnToGPUOptions{options.chip}));
  pm.addPass(createKilnGroupKernels());
  pm.addPass(createKilnSplitKernelModules());
  pm.addPass(createKilnShareKernelModules());
}

void kiln::buildNvvmLoweringPipeline(OpPassManager &pm, const NvvmPipelineOptions &options) {
  std::string attach = ("nvvm-attach-target{chip=" + stringifyTarget(options.chip) + " O=3").str();
  if (!options.libdevice.empty())
    attach += " l=" + options.libdevice;
  attach += "}";
  // Folding before the conversions shapes what they emit; after them LLVM's O3 cleans up alone (a canonicalize
  // and cse there left all 166 GPU test and benchmark kernels byte-identical and cost 1.2 ms of each compile).
  // The conversion offsets fold first, so that cse merges the registers' shared conversions.
  (void)appendPipeline(pm, attach + ",gpu.module(kiln-fold-conversion-offsets,canonicalize,cse,convert-scf-to-cf,"
                                    "convert-nvgpu-to-nvvm,"
                                    "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=64},"
                                    "kiln-tensor-map-params,convert-vector-to-llvm,convert-arith-to-llvm,convert-nvvm-to-llvm,"
                                    "reconcile-unrealized-casts)");
}

void kiln::buildNvvmPipeline(OpPassManager &pm, const NvvmPipelineOptions &options) {
  buildGpuKernelPipeline(pm, options);
  buildNvvmLoweringPipeline(pm, options);
  (void)appendPipeline(pm, "gpu-module-to-binary{format=isa}");
}

LogicalResult kiln::buildHostLoopsPipeline(OpPassManager &pm, const HostPipelineOptions &options) {
  if (options.tile) {
    KernelPipelineOptions kernelOptions;
    kernelOptions.target = Target::Host;
    buildKernelPipeline(pm, kernelOptions);
  } else {
    pm.addPass(createKilnExpandPagedAttention());
  }
  pm.addPass(createConvertKilnToLinalg());
  return appendPipeline(pm, "canonicalize,cse,eliminate-empty-tensors,"
                            "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
                            "function-boundary-type-conversion=identity-layout-map},"
                            "buffer-results-to-out-params{modify-public-functions},"
                            "buffer-deallocation-pipeline,scf-forall-to-for,"
                            "func.func(convert-linalg-to-loops),canonicalize,cse");
}

LogicalResult kiln::buildHostPipeline(OpPassManager &pm, const HostPipelineOptions &options) {
  if (failed(buildHostLoopsPipeline(pm, options)))
    return failure();
  return appendPipeline(pm, "expand-strided-metadata,lower-affine,convert-scf-to-cf,arith-expand{include-bf16},"
                            "convert-math-to-llvm,convert-math-to-libm,"
                            "finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
                            "convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts");
}

void kiln::registerKilnPipelines() {
  PassPipelineRegistration<NvvmPipelineOptions>(
      "kiln-gpu-kernel-pipeline", "Fuse, outline, configure for a chip and build one gpu.func per kernel",
      buildGpuKernelPipeline);
  PassPipelineRegistration<NvvmPipelineOptions>(
      "kiln-nvvm-pipeline", "Graph to GPU kernels in PTX (gpu.binary), the host plan left in place",
      buildNvvmPipeline);
  PassPipelineRegistration<KernelPipelineOptions>(
      "kiln-kernel-pipeline", "Fuse, outline, configure, tile and apply online softmax (graph to tiled kernels)",
      buildKernelPipeline);
  PassPipelineRegistration<HostPipelineOptions>(
      "kiln-host-loops", "Lower kiln IR to bufferized scf loops (the host backend before LLVM)",
      [](OpPassManager &pm, const HostPipelineOptions &options) { (void)buildHostLoopsPipeline(pm, options); });
  PassPipelineRegistration<HostPipelineOptions>(
      "kiln-host-pipeline", "Lower kiln IR to the LLVM dialect for CPU execution",
      [](OpPassManager &pm, const HostPipelineOptions &options) { (void)buildHostPipeline(pm, options); });
}
