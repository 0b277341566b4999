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
                           "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"];
}

#endif // KILN_CONVERSION_PASSES_TD
