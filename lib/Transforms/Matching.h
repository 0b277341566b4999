//===- Matching.h - Small matchers shared by the graph fusion passes --*- C++ -*-===//
//
// The fusion passes recognise formulas that exporters write out op by op (attention, norms, GELU, RoPE). They
// all need the same few questions answered about kiln IR: is this a splat constant and of what value, what are
// the factors of a product tree, which producers died after a rewrite. These helpers answer them once.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_MATCHING_H
#define KILN_LIB_TRANSFORMS_MATCHING_H

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir {
namespace kiln {

/// The value of a constant splat float tensor (of any shape).
std::optional<double> splatValue(Value value);

/// True when `value` is a splat float constant within relative `tolerance` of `expected`.
bool isSplatNear(Value value, double expected, double tolerance = 1e-3);

/// A product written as a tree of kiln.mul, kiln.neg, divisions by splat constants and small integer powers
/// (pow by a splat 2 or 3): the splat factors multiplied into `scale`, every other factor in `factors` (a power
/// as that many copies of its base's factors).
struct Product {
  double scale = 1.0;
  SmallVector<Value> factors;
};

/// Flattens the product tree rooted at `value`. A value that is no product is one factor with scale 1.
Product flattenProduct(Value value);

/// True when `product` is `coefficient * x^power`, comparing factors as multisets after flattening `x` too
/// (so that x may itself be a product) and the scale within relative `tolerance`.
bool isScaledPowerOf(const Product &product, Value x, int power, double coefficient, double tolerance = 1e-3);

/// If `value` is `op(a, b)` of the binary op type `OpT`, sets (first, second) to the operands in the order for
/// which `pred(first)` holds (trying (a, b) then (b, a)) and returns true.
template <typename OpT, typename Pred>
bool matchEitherOrder(Value value, Value &first, Value &second, Pred pred) {
  auto op = value.getDefiningOp<OpT>();
  if (!op)
    return false;
  for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()), std::pair(op.getRhs(), op.getLhs())})
    if (pred(a)) {
      first = a;
      second = b;
      return true;
    }
  return false;
}

/// True for `kiln.reduce mean %x axes [last] keep_dims`; sets `input` to %x.
bool isMeanOverLastAxis(Value value, Value &input);

/// Calls `rewrite` on every op of one of the types `OpTs` under `root`, in program order. A rewrite may replace
/// its op and erase ops around it (its producers come earlier and have been visited), but no candidate that
/// comes after it.
template <typename... OpTs>
void forEachInProgramOrder(Operation *root, llvm::function_ref<void(IRRewriter &, Operation *)> rewrite) {
  SmallVector<Operation *> candidates;
  root->walk([&](Operation *op) {
    if (isa<OpTs...>(op))
      candidates.push_back(op);
  });
  IRRewriter rewriter(root->getContext());
  for (Operation *op : candidates)
    rewrite(rewriter, op);
}

/// Erases `roots` and, transitively, the kiln ops feeding them that are left without users. Nothing else in
/// the function is touched.
void eraseDeadProducers(RewriterBase &rewriter, SmallVector<Operation *> roots);

/// The value that `value` widens from `narrowElement` by a kiln.cast, or null.
Value widenedFrom(Value value, Type narrowElement);

/// Replaces `root` by `replacement` and erases what fed only `root`.
void replaceAndEraseDead(RewriterBase &rewriter, Operation *root, Value replacement);

} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_TRANSFORMS_MATCHING_H
