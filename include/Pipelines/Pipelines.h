//===- Pipelines.h - Kiln's named pass pipelines -----------------*- C++ -*-===//
//
// The single definition of pass order. kiln-opt registers these as named pipelines; kilnc, kiln-run and the
// Python bindings call the same builders, so any stage replays as one kiln-opt command.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PIPELINES_PIPELINES_H
#define KILN_PIPELINES_PIPELINES_H

#include "Dialect/Kiln/TargetOption.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace kiln {

/// Options of the graph-to-tiled-kernels pipeline.
struct KernelPipelineOptions : public PassPipelineOptions<KernelPipelineOptions> {
  PassOptions::Option<Target> target{*this, "target",
                                     llvm::cl::desc("Target the configs are chosen for: host, sm_80, sm_90a"),
                                     llvm::cl::init(Target::Host), KILN_TARGET_VALUES};
};

/// Canonicalize and CSE, then recognise written-out norms, RoPE, activations and attention, and fuse
/// matmul/attention epilogues, and run batched projections as one GEMM: the graph as few kernels.
void buildFusionPipeline(OpPassManager &pm);

/// From the graph to tiled kernels, the part every backend shares: canonicalize, fuse attention and epilogues,
/// outline one kernel per fused group, select configs for `target`, tile, and apply online softmax.
void buildKernelPipeline(OpPassManager &pm, const KernelPipelineOptions &options);

/// Options of the GPU (NVVM) pipeline.
struct NvvmPipelineOptions : public PassPipelineOptions<NvvmPipelineOptions> {
  PassOptions::Option<Target> chip{*this, "chip", llvm::cl::desc("GPU architecture: sm_80 or sm_90a"),
                                   llvm::cl::init(Target::Sm90a), KILN_GPU_TARGET_VALUES};
  PassOptions::Option<std::string> libdevice{
      *this, "libdevice", llvm::cl::desc("libdevice bitcode linked into kernels that call math functions"),
      llvm::cl::init("")};
};

/// Graph to GPU kernels: fusion and outlining, configs for the chip, one gpu.func per kernel.
void buildGpuKernelPipeline(OpPassManager &pm, const NvvmPipelineOptions &options);

/// Lowers the gpu.module of kernels to NVVM/LLVM (kilnc's `--emit=llvm`), leaving host code untouched.
void buildNvvmLoweringPipeline(OpPassManager &pm, const NvvmPipelineOptions &options);

/// The whole GPU pipeline: buildGpuKernelPipeline, buildNvvmLoweringPipeline, then PTX (`gpu.binary` holding
/// the assembly) through LLVM's NVPTX backend in process.
void buildNvvmPipeline(OpPassManager &pm, const NvvmPipelineOptions &options);

/// Options of the host (CPU) pipeline.
struct HostPipelineOptions : public PassPipelineOptions<HostPipelineOptions> {
  PassOptions::Option<bool> tile{*this, "tile",
                                 llvm::cl::desc("Fuse, tile (with online softmax) before lowering; false "
                                                "gives the unfused, untiled reference lowering"),
                                 llvm::cl::init(true)};
};

/// Lowers kiln IR on tensors to loops over memrefs: fusion, configs, tiling and online softmax (unless
/// tile=false, the reference), then kiln -> linalg -> bufferized linalg with results as out-parameters -> scf.
LogicalResult buildHostLoopsPipeline(OpPassManager &pm, const HostPipelineOptions &options);

/// The whole host backend: buildHostLoopsPipeline, then to the LLVM dialect, ready for the ExecutionEngine.
LogicalResult buildHostPipeline(OpPassManager &pm, const HostPipelineOptions &options);

/// Registers the pipelines above as `kiln-kernel-pipeline`, `kiln-gpu-kernel-pipeline`,
/// `kiln-nvvm-pipeline`, `kiln-host-loops` and `kiln-host-pipeline`.
void registerKilnPipelines();

} // namespace kiln
} // namespace mlir

#endif // KILN_PIPELINES_PIPELINES_H
