//===- MaskBounds.h - Key ranges an attention's mask_mod implies -*- C++ -*-===//
//
// A mask_mod is an arbitrary predicate, but the common ones (sliding windows, causal variants, a key or query
// bound, a packed sequence's keys, a document's tokens) are conjunctions of bounds on kv_idx that are linear in
// q_idx or read from a table the op promises is nondecreasing (`nondecreasing_tables`), at q_idx, and of
// equalities `t[q_idx + c] == t[kv_idx]` over such a table (document ids: a query sees the run of equal entries
// around it, which a search of the table finds). From those bounds a query tile knows which keys any of its
// rows can see (the key loop runs over those tiles only: block sparsity) and which keys every row sees (tiles
// there need no mask arithmetic), without evaluating the mask on each position.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_MASKBOUNDS_H
#define KILN_TRANSFORMS_MASKBOUNDS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Region.h"

#include <optional>

namespace mlir::kiln {

/// Integer values of a mask_mod that depend on neither q_idx nor kv_idx (a sequence's length read from a table),
/// each with its coefficient: the part of a bound that is the same for every position of a (batch, head).
using SymbolTerms = SmallVector<std::pair<Value, int64_t>, 1>;

/// Reads of nondecreasing tables at q_idx, each as the region's block argument number of the table and its
/// coefficient.
using RowTableTerms = SmallVector<std::pair<unsigned, int64_t>, 1>;

/// `kv * kvCoefficient + q * qCoefficient + constant + sum(symbols) + sum(rowTables) >= 0`, with kvCoefficient
/// +1 (a lower bound on the key) or -1 (an upper bound), and a q-dependent part that is monotone in q (qCoefficient
/// and the row tables' coefficients of one sign).
struct LinearKeyBound {
  int64_t kvCoefficient, qCoefficient, constant;
  SymbolTerms symbols = {};
  RowTableTerms rowTables = {};
};

/// `t[q_idx + shift] == t[kv_idx]` over a nondecreasing table t (the region's block argument `argument`): each
/// query sees the keys of its run of equal entries, a document's tokens when t holds document ids.
struct EqualRun {
  unsigned argument;
  int64_t shift;
};

/// The key bounds every visible position of a mask_mod satisfies, and whether the mask is exactly their
/// conjunction (then a position inside all of them is visible).
struct MaskBounds {
  SmallVector<LinearKeyBound> bounds;
  SmallVector<EqualRun> runs;
  bool exact = true;

  /// Reads the bounds of a mask_mod region (block arguments b, h, q_idx, kv_idx, ...): the yielded i1's
  /// conjunction (arith.andi) of signed comparisons (arith.cmpi, possibly negated by an xori with true) between
  /// index expressions linear in q_idx and kv_idx, whose constant part may include values computed from the
  /// batch, the head and the tables alone (symbols, which kiln-tile hoists out of the key loops), and which may
  /// read a table of `nondecreasingTables` (mod operand positions) at q_idx, and of equalities of one such table
  /// read at `q_idx + c` and at kv_idx where the table holds an entry for every query and key (`queries` and
  /// `keys` static; a dynamic count takes no equality). Any other term keeps only what the rest says, not exact.
  static MaskBounds analyze(Region &maskMod, ArrayRef<int64_t> nondecreasingTables = {},
                            int64_t queries = ShapedType::kDynamic, int64_t keys = ShapedType::kDynamic);
};

/// For the query rows [firstRow, firstRow + rows): the key range that any row may see, [from, to), and the one
/// every row sees by the bounds, [visibleFrom, visibleTo). A null Value: no bound on that side.
struct KeyRange {
  Value from, to, visibleFrom, visibleTo;
};

/// Builds the key ranges of `bounds` for a block of query rows; `hoisted` maps the bounds' symbols to their
/// values outside the region (lowering::hoistInvariantOps hoists every one of them), `modOperands` are the op's
/// tables, read at the block's first row and at its last one below `queries` (the query count), and an equal
/// run's table searched for the first and last keys of the runs of those two rows. `causalDiagonal`: the op is
/// causal and row q sees keys up to q + causalDiagonal; a run read at that same shift needs no search for its
/// end (the keys past the last row's diagonal are hidden by the causal mask, not by these bounds).
KeyRange buildKeyRange(OpBuilder &b, Location loc, const MaskBounds &bounds, Value firstRow, int64_t rows,
                       Value queries, const IRMapping &hoisted, ValueRange modOperands,
                       std::optional<int64_t> causalDiagonal = std::nullopt);

} // namespace mlir::kiln

#endif // KILN_TRANSFORMS_MASKBOUNDS_H
