//===- KilnDialect.td - The kiln dialect definition --------*- tablegen -*-===//
//
// The graph-level dialect of Kiln: tensor-semantics ops for Transformer blocks (matmul, attention, norms, RoPE,
// elementwise math and data movement). Fusion, tiling and lowering passes start from these ops, so they say
// *what* is computed and leave *how* to attributes written by later passes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNDIALECT_TD
#define KILN_DIALECT_KILN_KILNDIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::mlir::kiln";
  let summary = "Graph-level ops for fused Transformer kernels";
  let description = [{
    The `kiln` dialect describes Transformer subgraphs at tensor level: batched matmul, attention (with GQA/MQA,
    causal masking aligned bottom-right, additive masks and an optional log-sum-exp result), softmax, reductions,
    RMSNorm/LayerNorm, RoPE, elementwise arithmetic and activations, casts and data movement.

    All tensors are ranked with static shapes: Kiln specialises kernels on shapes, as a JIT does. Floating-point
    data is f32, f16 or bf16; indices are i32 or i64; conditions are i1. Every verifier names the operand and the
    dimension at fault.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

#endif // KILN_DIALECT_KILN_KILNDIALECT_TD
