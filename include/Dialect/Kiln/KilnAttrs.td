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
    - `lowering`: `"host"`, `"mma_sync"` (sm_80+) or `"wgmma"` (sm_90a).

    ```mlir
    %y = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [128, 128, 32], warps = 4, stages = 3,
                                                          lowering = "mma_sync">} : ...
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$tile, "int64_t":$warps, "int64_t":$stages,
                        StringRefParameter<>:$lowering);
  let assemblyFormat = [{
    `<` `tile` `=` `[` $tile `]` `,` `warps` `=` $warps `,` `stages` `=` $stages `,` `lowering` `=` $lowering `>`
  }];
  let genVerifyDecl = 1;
}

#endif // KILN_DIALECT_KILN_KILNATTRS_TD
