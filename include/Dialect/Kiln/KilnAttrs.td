//===- KilnAttrs.td - Attributes and enums of the kiln dialect -*- tablegen -*-===//
//
// Enumerations that select a variant of an op (which reduction, which GELU approximation). They are attributes
// rather than separate ops because every variant shares the op's shape rules and lowering.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNATTRS_TD
#define KILN_DIALECT_KILN_KILNATTRS_TD

include "Dialect/Kiln/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kiln_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>,
    I32EnumAttrCase<"min", 3>,
  ]> {
  let cppNamespace = "::mlir::kiln";
}

def Kiln_GeluApproximation : I32EnumAttr<"GeluApproximation", "GELU formula", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>,
  ]> {
  let cppNamespace = "::mlir::kiln";
}

// Which comparison kiln.compare makes. Floats compare ordered (NaN makes every one false) except `ne`, which
// a NaN makes true: numpy's and torch's rules.
def Kiln_ComparePredicate : I32EnumAttr<"ComparePredicate", "elementwise comparison", [
    I32EnumAttrCase<"lt", 0>,
    I32EnumAttrCase<"le", 1>,
    I32EnumAttrCase<"gt", 2>,
    I32EnumAttrCase<"ge", 3>,
    I32EnumAttrCase<"eq", 4>,
    I32EnumAttrCase<"ne", 5>,
  ]> {
  let cppNamespace = "::mlir::kiln";
}

// What a compile is for: the CPU host backend or a GPU architecture. Parsed once where a compile starts (kilnc's
// --target, the Python API's target, a pass option) and passed down as this enum.
def Kiln_Target : I32EnumAttr<"Target", "compilation target", [
    I32EnumAttrCase<"Host", 0, "host">,
    I32EnumAttrCase<"Sm80", 1, "sm_80">,
    I32EnumAttrCase<"Sm90a", 2, "sm_90a">,
  ]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_ConfigAttr : AttrDef<Kiln_Dialect, "Config"> {
  let mnemonic = "config";
  let summary = "how a kernel is tiled and lowered";
  let description = [{
    The strategy of one kernel, written by `kiln-select-config` (or the autotuner, or by hand — an attribute
    already present is never overwritten) and read by the tiling and lowering passes:

    - `tile`: tile sizes — `[BM, BN, BK]` for matmul, `[BQ, BK]` (query rows, key columns) for attention,
      `[rows]` for row kernels (softmax, rms_norm, layer_norm);
    - `warps`: warps per thread block (GPU lowerings; 1 on the host);
    - `stages`: depth of the shared-memory pipeline (GPU lowerings; 1 on the host);
    - `lowering`: `"host"`, `"mma_sync"` (sm_80+), `"wgmma"` (sm_90a), or `"rows"` for a row kernel on a GPU:
      its tile of `[rows]` is spread over `warps` warps, `warps * 32 / rows` threads per row
      (`#kiln.row_layout`);
    - `group` (a GPU matmul's; 1, the default, is left out): the order of the output tiles' blocks. Tiles run
      in groups of `group` tile rows, the rows of a group fastest, so that the blocks running at once read a
      few row tiles of the left operand and a few column panels of the right one, which stay in L2.
    - `k_splits` (a wgmma matmul's on sm_90a; 1, the default, is left out): the contraction of each output tile
      split into `k_splits` chunks, each computed by one block of a thread-block cluster of `k_splits` blocks,
      whose f32 partial tiles are summed in the kernel through the cluster's distributed shared memory before
      the epilogue. A decode step's GEMM has a few dozen output tiles: the split gives every multiprocessor a
      share of the weight to stream, without a second kernel or partial products in global memory.

    ```mlir
    %y = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3,
                                                          lowering = "mma_sync">} : ...
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$tile, "int64_t":$warps, "int64_t":$stages,
                        StringRefParameter<>:$lowering, DefaultValuedParameter<"int64_t", "1">:$group,
                        DefaultValuedParameter<"int64_t", "1">:$k_splits);
  // `<tile = [...], warps = W, stages = S, lowering = "..."` then `, group = G` and `, k_splits = K` where they
  // are not 1 (two optional entries after a comma each, which the declarative format cannot tell apart).
  let hasCustomAssemblyFormat = 1;
  let builders = [
    AttrBuilder<(ins "::llvm::ArrayRef<int64_t>":$tile, "int64_t":$warps, "int64_t":$stages,
                     "::llvm::StringRef":$lowering, CArg<"int64_t", "1">:$group), [{
      return $_get($_ctxt, tile, warps, stages, lowering, group, 1);
    }]>
  ];
  let genVerifyDecl = 1;
}

def Kiln_RowLayoutAttr : AttrDef<Kiln_Dialect, "RowLayout"> {
  let mnemonic = "row_layout";
  let summary = "how a GPU thread block holds a tile of whole rows in registers";
  let description = [{
    The layout of a `[R, C]` tile value of a row kernel (`kiln-assign-layouts` writes it as the `kiln.layout`
    attribute of the op that defines the value). Row `r` of the tile belongs to threads
    `[r * threads_per_row, (r + 1) * threads_per_row)` of the block; within the row, thread `t` holds columns
    `k * threads_per_row * vector + t * vector + j` for `j < vector` and every chunk `k` that starts inside the
    row, so that the row's threads read it in coalesced runs of `vector` elements (16 bytes for bf16 rows of 8).
    `threads_per_row` is a power of two up to 32 (an aligned group of lanes of one warp: short rows) or a
    multiple of 32 up to 1024 (whole warps).
    A `[R, 1]` or `[R]` value (a reduced row) is held by every thread of its row. Elementwise ops act on each
    thread's registers; a reduction along the row folds a thread's registers, then its warp's lanes by
    butterfly shuffles, then the row's warps through shared memory.

    ```mlir
    %m = kiln.reduce max %x axes [1] keep_dims {kiln.layout = #kiln.row_layout<threads_per_row = 256, vector = 8>}
        : tensor<1x4096xf32> -> tensor<1x1xf32>
    ```
  }];
  let parameters = (ins "int64_t":$threads_per_row, "int64_t":$vector);
  let assemblyFormat = [{
    `<` `threads_per_row` `=` $threads_per_row `,` `vector` `=` $vector `>`
  }];
  let genVerifyDecl = 1;
}

def Kiln_MmaLayoutAttr : AttrDef<Kiln_Dialect, "MmaLayout"> {
  let mnemonic = "mma_layout";
  let summary = "how a GPU thread block splits a matmul tile into mma.sync fragments";
  let description = [{
    The layout of the tile matmul of a `"mma_sync"` matmul kernel and of the `[BM, BN]` f32 accumulator it adds
    to (`kiln-assign-layouts` writes it as the `kiln.layout` attribute of the tile `kiln.matmul`, of the
    `kiln.add` that accumulates it, and of the ops of the epilogue). The block's warps form a
    `warps_m x warps_n` grid over the tile, warp `w` owning rows `[(w / warps_n) * BM / warps_m, ...)` and
    columns `[(w % warps_n) * BN / warps_n, ...)`; each warp's part is a grid of m16n8k16 accumulator fragments,
    lane `l` holding elements (`l / 4`, `2 * (l % 4) + {0, 1}`) and the same columns eight rows below of each
    fragment. The operand tiles are staged in a shared-memory ring of the config's `stages` (rows padded by 16
    bytes so that ldmatrix reads distinct banks) and read into A and B fragments by ldmatrix.

    ```mlir
    %p = kiln.matmul %a, %b {kiln.layout = #kiln.mma_layout<warps_m = 2, warps_n = 2>}
        : tensor<128x32xbf16>, tensor<32x128xbf16> -> tensor<128x128xf32>
    ```
  }];
  let parameters = (ins "int64_t":$warps_m, "int64_t":$warps_n);
  let assemblyFormat = [{
    `<` `warps_m` `=` $warps_m `,` `warps_n` `=` $warps_n `>`
  }];
  let genVerifyDecl = 1;
}

#endif // KILN_DIALECT_KILN_KILNATTRS_TD
