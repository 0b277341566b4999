//===- Passes.td - Kiln conversion passes ------------------*- tablegen -*-===//
//
// Lowerings out of the kiln dialect. Each is a thin driver over populate*Patterns functions that pipelines and
// other passes reuse.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertKilnToLinalg : Pass<"convert-kiln-to-linalg"> {
  let summary = "Lower every kiln op to linalg, tensor and arith on tensors";
  let description = [{
    The reference lowering: each kiln op becomes linalg.generic ops (with f32 computation and accumulation),
    tensor reshapes/slices, or arith constants. Attention becomes its textbook form — scores, scale, mask,
    full-row softmax, times v — so it is the numerical reference that the tiled pipeline is checked against.

    ```mlir
    // before
    %y = kiln.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    // after
    %e = tensor.empty() : tensor<4x8xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
                                          affine_map<(d0, d1) -> (d0, d1)>], ...} ins(%x, %b ...) outs(%e ...)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def ConvertKilnToGPU : Pass<"convert-kiln-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Build a GPU kernel for each outlined kernel function";
  let description = [{
    For every function marked `kiln.kernel` (see `kiln-outline-kernels`) whose kernel op carries an
    `"mma_sync"` or `"wgmma"` `#kiln.config`, emits a `gpu.func` of the same name in `gpu.module @kiln_kernels`: thread
    blocks over BM x BN output tiles, a cp.async multi-stage pipeline through padded dynamic shared memory,
    ldmatrix + mma.sync.m16n8k16 (bf16/f16 in, f32 accumulate), the epilogue in registers and a bounds-checked
    store. A matmul with a `"wgmma"` config (sm_90a only) gets the Hopper kernel instead: TMA copies (thread 0,
    one mbarrier per ring slot) into 128-byte swizzled, 1024-byte aligned shared memory through tensor maps of
    A and B that follow its sizes (`kiln.tensor_map_params`; the launch's `tensor_maps` say how the runtime
    builds them at each launch), one warpgroup per 64 output rows issuing
    wgmma.mma_async m64nBNk16 from shared-memory descriptors, one wgmma group in flight across k-tiles; an
    attention with a `"wgmma"` config runs S = Q K^T and O += P V as warpgroup MMAs with Q and P in
    registers and K and V in swizzled shared memory, pipelined within the warpgroup (the next tile's S
    issued with this tile's P V), or with `stages = 1` in one sequential loop, which assembles in about half
    the time (the default on a few key tiles: up to 192 keys at head dim 64, 128 at head dim 128). A `"wgmma"` config on another chip than sm_90a, or on a
    kernel other than a matmul or an attention, is an error on the op. Kernel parameters are the op's operands,
    its epilogue operands and the output, as flat buffers (bare pointers); a matmul kernel also takes M, N and
    K, which its code reads instead of constants (size-generic: its buffers are typed with 2^40 elements), and
    its `kiln.launch` records their values as `sizes`. f32 exp and division in the kernels
    take the hardware approximations with subnormals flushed to zero (exp marked `fastmath<afn>`, x / y as x
    times `nvvm.rcp.approx.ftz.f`, and an `nvvm-reflect-ftz` module flag for libdevice, as Triton sets it),
    which also makes them quicker to assemble. The function gets `kiln.gpu_kernel` (the kernel's symbol) and
    `kiln.launch` (grid, block, dynamic shared memory, the sizes of a size-generic kernel, and the tensor maps
    of a TMA kernel). Attention becomes a FlashAttention-2 kernel, elementwise ops, RoPE and data movement
    one-thread-per-element kernels. A row kernel (softmax, logsumexp and reductions along the last axis,
    rms_norm, layer_norm) arrives tiled instead — the `scf.forall` of `kiln-tile` with a `"rows"` config, its
    body decomposed by `kiln-decompose-rows` and laid out by `kiln-assign-layouts` — and is lowered from that
    loop: one thread block per iteration, each tile value in registers by its `#kiln.row_layout` (16-byte loads
    and stores of whole runs, per-register arithmetic, row reductions by shuffles and shared memory). An
    untiled row op is an error that names the passes it needs. A kernel whose config needs more
    dynamic shared memory than `chip` allows a block is an error that names the op and both sizes.
  }];
  let options = [
    Option<"chip", "chip", "::mlir::kiln::Target", "::mlir::kiln::Target::Sm90a",
           "GPU target whose per-block shared memory the kernels must fit (sm_80 or sm_90a)",
           [{KILN_GPU_TARGET_VALUES}]>
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::nvgpu::NVGPUDialect", "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"];
}

def KilnTensorMapParams : Pass<"kiln-tensor-map-params", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass the tensor maps of TMA kernels by value, as the hardware reads them";
  let description = [{
    After `convert-gpu-to-nvvm`: every parameter that a kernel's `kiln.tensor_map_params` lists (the tensor
    maps its TMA copies read, which the kernel builders add as `!llvm.ptr` parameters) becomes a 128-byte
    by-value parameter aligned to 64 bytes and marked `nvvm.grid_constant`, so that the pointer the kernel uses is
    the parameter's own address (`cvta.param`), as `cp.async.bulk.tensor` requires; the list goes. The GPU
    dialect's conversion drops argument attributes and rejects `nvvm.grid_constant` on a `gpu.func`, hence this
    step after it.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

def KilnFoldConversionOffsets : Pass<"kiln-fold-conversion-offsets", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Convert an integer plus a constant to float as the integer's conversion plus the constant, where "
                "that is exact";
  let description = [{
    In each kernel of the module, an `arith.sitofp` of an `arith.addi` / `arith.subi` tree of index or i64 values
    with a constant term `c` (through `arith.index_cast`, `extsi` and `trunci` to types that hold every integer
    the float holds exactly, and its sign) becomes `arith.sitofp` of the tree without the constant, then
    `arith.addf` of `c`, where the integer range analysis bounds the integer within the float's exactly
    represented integers less `|c|` (so that nothing wraps, both conversions and the sum are exact and the result
    is the same). Trees of more than 64 operations are left alone. The attention lowering computes a score_mod per register at the thread's position plus the
    register's constant offset: the conversions of the positions (ALiBi's `kv - q`) then become one per thread
    that every register shares once CSE merges them, instead of one per score at a quarter of the FMA rate.
    A kernel's index parameters (its sizes) count as at most its `kiln.size_bound`, which `convert-kiln-to-gpu`
    sets where every size the plan launches it with is at most 2^22; without one they are unknown, and
    conversions whose range the analysis cannot bound stay as they are.

    ```mlir
    // before: %d = (%kv + %col) - (%q + %row), each register's %col and %row a thread value plus a constant
    %s = arith.addi %base, %c5 : index
    %i = arith.index_cast %s : index to i32
    %f = arith.sitofp %i : i32 to f32
    // after
    %i = arith.index_cast %base : index to i32
    %f0 = arith.sitofp %i : i32 to f32
    %f = arith.addf %f0, %cst5 : f32
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def KilnSplitKernelModules : Pass<"kiln-split-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Give every GPU kernel a gpu.module of its own, so that kernels lower, emit PTX and assemble in "
                "parallel";
  let description = [{
    After `convert-kiln-to-gpu` (and `kiln-group-kernels`): every kernel gpu.func moves into a new gpu.module
    `@<kernel>_module` (renamed if that name is taken), with a copy of what it uses of the old module (its
    shared-memory global, device functions) and the old module's targets and offloading handler, and its host
    function's
    `kiln.gpu_kernel` follows it; the old module goes. Nested pass pipelines on gpu.module then
    run on every kernel at once on the context's threads, and the compile emits and assembles one PTX module per
    kernel in parallel: a program's cold compile takes about as long as its largest kernel's, not the sum of all.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def KilnShareKernelModules : Pass<"kiln-share-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Compile each distinct GPU kernel once: kernel modules that differ only in their names become one";
  let description = [{
    After `kiln-split-kernel-modules`: gpu.modules that are the same (OperationEquivalence on their bodies, and
    the same targets) once a later one's symbols take the earlier one's names by position are one kernel; the
    first is kept, every host function's `kiln.gpu_kernel` that named a later copy names the kept module's
    kernel, and the copies go. Only modules with the same sequence of op kinds are compared.
    Size-generic matmul kernels (M, N and K as parameters) of one config, dtype and epilogue share a module
    however their sizes differ; each host function keeps its own `kiln.launch`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def KilnGroupKernels : Pass<"kiln-group-kernels", "::mlir::ModuleOp"> {
  let summary = "Launch independent GPU kernels of the same kind as one kernel (horizontal fusion)";
  let description = [{
    After `convert-kiln-to-gpu`: consecutive calls of GPU kernels with the same kernel op and block size, none
    reading what an earlier one writes (reshapes of their results may sit between them), become one call of a
    new kernel function `<first>_x<count>` whose gpu.func runs every member's thread blocks in a 1-D grid: block
    b runs the member whose range holds b, with the member's block index recomputed from it. Typical groups: the
    q, k and v projections, RoPE on q and on k, the slices of a fused qkv. The grouped kernel function keeps every
    member's kernel op (the manifest lists their configs, in order) and its `kiln.launch` has the summed grid and the
    largest dynamic shared memory. First, independent calls of one kernel kind are brought next to each other
    (list scheduling that prefers the last placed kind; buffers move to the start, views after what they view; a
    call updating a buffer in place keeps every call on its side), so that a decode step's q, k and v chains
    (matmul, split-K sum, RoPE each) become grouped matmuls, sums and RoPEs.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect"];
}

#endif // KILN_CONVERSION_PASSES_TD
