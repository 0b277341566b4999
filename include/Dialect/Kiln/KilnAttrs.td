//===- KilnAttrs.td - Attributes and enums of the kiln dialect -*- tablegen -*-===//
//
// Enumerations that select a variant of an op (which reduction, which GELU approximation). They are attributes
// rather than separate ops because every variant shares the op's shape rules and lowering.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNATTRS_TD
#define KILN_DIALECT_KILN_KILNATTRS_TD

include "Dialect/Kiln/KilnDialect.td"
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

#endif // KILN_DIALECT_KILN_KILNATTRS_TD
