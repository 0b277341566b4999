//===- QuadPartialSums.h - Row sums an attention's key loops may leave unreduced -*- C++ -*-===//
//
// In the mma fragment layouts a row of a [BQ, X] tile lies across the four lanes of a quad, so a row sum costs
// two shuffles per row after the in-thread adds. The online softmax's running sum l only feeds its own update
// (l * alpha + rowsum(P)) until the loops end: each lane can carry its own share of it, linear in the shares of
// rowsum(P), and the quad adds the shares once after the loops, as FlashAttention does. This analysis finds, on
// the tiled IR of the key loops (before lowering), the row vectors for which that is exact: sums whose every
// use is linear in them, up to the loops' results.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_QUADPARTIALSUMS_H
#define KILN_LIB_CONVERSION_KILNTOGPU_QUADPARTIALSUMS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir {
namespace kiln {
namespace gpukernel {

/// The row vectors of a chain of key loops that may hold each lane's share of a row sum.
struct QuadPartialSums {
  /// The values (row reductions, row generics, the loops' iter args and results, the last tile's results).
  llvm::DenseSet<Value> values;
  /// Per iter arg of the loops: whether the loops carry it as shares (and their final results need the quad's
  /// sum).
  SmallVector<bool> carried;
};

/// Finds the row sums of `loops` (consecutive key loops, each one's results the next one's inits) and of `last`
/// (the one masked tile after them, or null) that may stay unreduced across the quad: add-reductions of a tile
/// into a zero row vector, row generics linear in them (a product with values that are not shares, a sum of
/// shares), and iter args that start at zero and are yielded as shares; every use of a share is one of those or
/// the loops' final results. All other row vectors are whole.
QuadPartialSums findQuadPartialSums(ArrayRef<scf::ForOp> loops, scf::IfOp last);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_QUADPARTIALSUMS_H
