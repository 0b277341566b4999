//===- MaskBounds.h - Key ranges an attention's mask_mod implies -*- C++ -*-===//
//
// A mask_mod is an arbitrary predicate, but the common ones (sliding windows, causal variants, a key or query
// bound) are conjunctions of linear bounds on q_idx and kv_idx. From those bounds a query tile knows which keys
// any of its rows can see (the key loop runs over those tiles only: block sparsity) and which keys every row
// sees (tiles there need no mask arithmetic), without evaluating the mask on each position.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_MASKBOUNDS_H
#define KILN_TRANSFORMS_MASKBOUNDS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Region.h"

namespace mlir::kiln {

/// Integer values of a mask_mod that depend on neither q_idx nor kv_idx (a sequence's length read from a table),
/// each with its coefficient: the part of a bound that is the same for every position of a (batch, head).
using SymbolTerms = SmallVector<std::pair<Value, int64_t>, 1>;

/// `kv * kvCoefficient + q * qCoefficient + constant + sum(symbols) >= 0`, with kvCoefficient +1 (a lower bound
/// on the key) or -1 (an upper bound).
struct LinearKeyBound {
  int64_t kvCoefficient, qCoefficient, constant;
  SymbolTerms symbols = {};
};

/// The linear key bounds every visible position of a mask_mod satisfies, and whether the mask is exactly their
/// conjunction (then a position inside all of them is visible).
struct MaskBounds {
  SmallVector<LinearKeyBound> bounds;
  bool exact = true;

  /// Reads the bounds of a mask_mod region (block arguments b, h, q_idx, kv_idx, ...): the yielded i1's
  /// conjunction (arith.andi) of signed comparisons (arith.cmpi, possibly negated by an xori with true) between
  /// index expressions linear in q_idx and kv_idx, whose constant part may include values computed from the
  /// batch, the head and the tables alone (symbols, which kiln-tile hoists out of the key loops). Any other term
  /// keeps only what the rest says, not exact.
  static MaskBounds analyze(Region &maskMod);
};

/// For the query rows [firstRow, firstRow + rows): the key range that any row may see, [from, to), and the one
/// every row sees by the bounds, [visibleFrom, visibleTo). A null Value: no bound on that side.
struct KeyRange {
  Value from, to, visibleFrom, visibleTo;
};

/// Builds the key ranges of `bounds` for a block of query rows; `hoisted` maps the bounds' symbols to their
/// values outside the region (lowering::hoistInvariantOps hoists every one of them).
KeyRange buildKeyRange(OpBuilder &b, Location loc, const MaskBounds &bounds, Value firstRow, int64_t rows,
                       const IRMapping &hoisted);

} // namespace mlir::kiln

#endif // KILN_TRANSFORMS_MASKBOUNDS_H
