//===- MaskBounds.cpp - Key ranges an attention's mask_mod implies ----------===//
//
// The analysis reads the mask_mod's yielded i1 as a conjunction of terms. A term `lhs pred rhs` (arith.cmpi,
// signed or eq) whose sides are linear in q_idx and kv_idx (block arguments, constants, addi, subi, muli by a
// constant, index_cast; an index value of the batch, the head and the tables alone is a symbol, a term the
// bound keeps as a value; a read of a nondecreasing table at q_idx is a row term) becomes one or two bounds
// `e >= 0`; a term the analysis cannot read leaves the others valid as necessary conditions (a visible position
// satisfies every term) but makes the set inexact. The key ranges of a query block follow from the bounds at its
// first and last row, since each bound kept is monotone in q (its row terms and q share one sign).
//
//===----------------------------------------------------------------------===//

#include "MaskBounds.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <optional>

using namespace mlir;
using namespace mlir::kiln;

namespace {

/// Adds `terms` (each a key and its coefficient) into `into`, dropping terms whose coefficients cancel.
template <typename Terms> void addTerms(Terms &into, const Terms &terms) {
  for (auto [key, coefficient] : terms) {
    auto *it = llvm::find_if(into, [&](auto &term) { return term.first == key; });
    if (it == into.end())
      into.push_back({key, coefficient});
    else
      it->second += coefficient;
  }
  llvm::erase_if(into, [](auto &term) { return term.second == 0; });
}

/// `terms` with every coefficient multiplied by `f`.
template <typename Terms> Terms scaledTerms(Terms terms, int64_t f) {
  for (auto &term : terms)
    term.second *= f;
  if (f == 0)
    terms.clear();
  return terms;
}

/// kv * kv + q * q + c + the symbols' terms + the row tables' terms.
struct Linear {
  int64_t kv = 0, q = 0, c = 0;
  SymbolTerms symbols = {};
  RowTableTerms rows = {};
  Linear operator+(const Linear &o) const {
    Linear sum{kv + o.kv, q + o.q, c + o.c, symbols, rows};
    addTerms(sum.symbols, o.symbols);
    addTerms(sum.rows, o.rows);
    return sum;
  }
  Linear scaled(int64_t f) const {
    return {kv * f, q * f, c * f, scaledTerms(symbols, f), scaledTerms(rows, f)};
  }
  Linear operator-(const Linear &o) const { return *this + o.scaled(-1); }
  /// A constant: no position, no symbol and no table.
  bool isConstant() const { return kv == 0 && q == 0 && symbols.empty() && rows.empty(); }
  /// Whether the part that depends on q (q and the row tables) never decreases (`direction` +1) or never
  /// increases (-1) as q grows.
  bool monotoneInQ(int64_t direction) const {
    return q * direction >= 0 &&
           llvm::all_of(rows, [&](auto &term) { return term.second * direction >= 0; });
  }
};

/// Whether `value` depends on neither q_idx nor kv_idx of the region's `body` (only on the batch, the head and
/// the tables), computed by ops that kiln-tile hoists.
bool isInvariant(Value value, Block &body) {
  if (auto argument = dyn_cast<BlockArgument>(value))
    return argument.getOwner() != &body || (argument.getArgNumber() != 2 && argument.getArgNumber() != 3);
  Operation *op = value.getDefiningOp();
  return op->getNumRegions() == 0 &&
         llvm::all_of(op->getOperands(), [&](Value operand) { return isInvariant(operand, body); });
}

/// `value` as a linear expression of the region's q_idx (argument 2) and kv_idx (argument 3), if it is one;
/// `nondecreasing` holds the block argument numbers of the tables that may be read at q_idx.
std::optional<Linear> linearOf(Value value, Block &body, ArrayRef<unsigned> nondecreasing) {
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    if (argument.getOwner() != &body)
      return std::nullopt;
    if (argument.getArgNumber() == 2)
      return Linear{0, 1, 0};
    if (argument.getArgNumber() == 3)
      return Linear{1, 0, 0};
    return std::nullopt;
  }
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return Linear{0, 0, constant.getSExtValue()};
  Operation *op = value.getDefiningOp();
  if (!op)
    return std::nullopt;
  // A value of the batch, the head and the tables alone (a length read from a table) is a symbol.
  if (value.getType().isIndex() && isInvariant(value, body))
    return Linear{0, 0, 0, {{value, 1}}};
  // A nondecreasing table read at q_idx is a row term.
  if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
    auto table = dyn_cast<BlockArgument>(extract.getTensor());
    auto index = extract.getIndices().size() == 1 ? dyn_cast<BlockArgument>(extract.getIndices()[0]) : nullptr;
    if (table && index && table.getOwner() == &body && index.getOwner() == &body && index.getArgNumber() == 2 &&
        llvm::is_contained(nondecreasing, table.getArgNumber()))
      return Linear{0, 0, 0, {}, {{table.getArgNumber(), 1}}};
    return std::nullopt;
  }
  // Casts are read through only where they keep every value: a truncation (index to i32 or narrower) could wrap
  // a position, which the bounds would not see.
  auto bits = [](Type type) { return type.isIndex() ? 64u : type.getIntOrFloatBitWidth(); };
  if (isa<arith::ExtSIOp>(op) ||
      (isa<arith::IndexCastOp>(op) && bits(op->getResult(0).getType()) >= bits(op->getOperand(0).getType())))
    return linearOf(op->getOperand(0), body, nondecreasing);
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op))
    return std::nullopt;
  std::optional<Linear> lhs = linearOf(op->getOperand(0), body, nondecreasing),
                        rhs = linearOf(op->getOperand(1), body, nondecreasing);
  if (!lhs || !rhs)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return *lhs + *rhs;
  if (isa<arith::SubIOp>(op))
    return *lhs - *rhs;
  if (lhs->isConstant())
    return rhs->scaled(lhs->c);
  if (rhs->isConstant())
    return lhs->scaled(rhs->c);
  return std::nullopt; // a product of positions or symbols is not linear
}

/// `e pred 0` as bounds `x >= 0`, if `pred` is one the analysis reads.
bool boundsOf(arith::CmpIPredicate pred, Linear e, SmallVectorImpl<Linear> &out) {
  using P = arith::CmpIPredicate;
  switch (pred) {
  case P::sge:
    out.push_back(e);
    return true;
  case P::sgt:
    out.push_back(e - Linear{0, 0, 1});
    return true;
  case P::sle:
    out.push_back(e.scaled(-1));
    return true;
  case P::slt:
    out.push_back(e.scaled(-1) - Linear{0, 0, 1});
    return true;
  case P::eq:
    out.push_back(e);
    out.push_back(e.scaled(-1));
    return true;
  default:
    return false;
  }
}

/// Adds the bounds of the term `value` (an i1) to `into`; false where the term is not fully read.
bool collect(Value value, Block &body, ArrayRef<unsigned> nondecreasing, MaskBounds &into) {
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return constant.isOne(); // true adds nothing; false hides everything, which the bounds cannot say
  Operation *op = value.getDefiningOp();
  if (auto conjunction = dyn_cast_or_null<arith::AndIOp>(op)) {
    bool lhs = collect(conjunction.getLhs(), body, nondecreasing, into);
    bool rhs = collect(conjunction.getRhs(), body, nondecreasing, into);
    return lhs && rhs;
  }
  bool negated = false;
  if (auto negation = dyn_cast_or_null<arith::XOrIOp>(op)) {
    if (!matchPattern(negation.getRhs(), m_One()))
      return false;
    negated = true;
    op = negation.getLhs().getDefiningOp();
  }
  auto compare = dyn_cast_or_null<arith::CmpIOp>(op);
  if (!compare)
    return false;
  std::optional<Linear> lhs = linearOf(compare.getLhs(), body, nondecreasing),
                        rhs = linearOf(compare.getRhs(), body, nondecreasing);
  if (!lhs || !rhs)
    return false;
  arith::CmpIPredicate pred = compare.getPredicate();
  if (negated)
    pred = arith::invertPredicate(pred);
  SmallVector<Linear> bounds;
  if (!boundsOf(pred, *lhs - *rhs, bounds))
    return false;
  bool complete = true;
  for (const Linear &bound : bounds) {
    // Only a bound on the key itself limits the key loop; a bound on q alone (or on a multiple of the key), or
    // one whose q-dependent part is not monotone in q (q and a table pulling apart), is kept out, and the set
    // is then not exact.
    if ((bound.kv != 1 && bound.kv != -1) || (!bound.monotoneInQ(1) && !bound.monotoneInQ(-1))) {
      complete = false;
      continue;
    }
    into.bounds.push_back({bound.kv, bound.q, bound.c, bound.symbols, bound.rows});
  }
  return complete;
}

} // namespace

MaskBounds MaskBounds::analyze(Region &maskMod, ArrayRef<int64_t> nondecreasingTables) {
  MaskBounds result;
  Block &body = maskMod.front();
  // The mask_mod's block arguments are (b, h, q_idx, kv_idx) and then one per mod operand.
  SmallVector<unsigned> nondecreasing;
  for (int64_t operand : nondecreasingTables)
    nondecreasing.push_back(static_cast<unsigned>(operand) + 4);
  result.exact = collect(body.getTerminator()->getOperand(0), body, nondecreasing, result);
  return result;
}

KeyRange kiln::buildKeyRange(OpBuilder &b, Location loc, const MaskBounds &bounds, Value firstRow, int64_t rows,
                             Value queries, const IRMapping &hoisted, ValueRange modOperands) {
  Value lastRow = arith::AddIOp::create(b, loc, firstRow, arith::ConstantIndexOp::create(b, loc, rows - 1));
  // Tables hold one entry per query: a block that ends past the last query reads them at the last query.
  Value lastQuery = arith::SubIOp::create(b, loc, queries, arith::ConstantIndexOp::create(b, loc, 1));
  Value lastTableRow = arith::MinSIOp::create(b, loc, lastRow, lastQuery);
  // sign * (q * qc + constant + the symbols + the row tables) at a row, plus `extra`.
  auto at = [&](Value row, const LinearKeyBound &bound, int64_t sign, int64_t extra) -> Value {
    Value value = arith::MulIOp::create(b, loc, row, arith::ConstantIndexOp::create(b, loc, sign * bound.qCoefficient));
    value = arith::AddIOp::create(b, loc, value, arith::ConstantIndexOp::create(b, loc, sign * bound.constant + extra));
    for (auto [symbol, coefficient] : bound.symbols) {
      Value term = arith::MulIOp::create(b, loc, hoisted.lookup(symbol),
                                         arith::ConstantIndexOp::create(b, loc, sign * coefficient));
      value = arith::AddIOp::create(b, loc, value, term);
    }
    for (auto [argument, coefficient] : bound.rowTables) {
      Value entry = tensor::ExtractOp::create(b, loc, modOperands[argument - 4],
                                              ValueRange{row == lastRow ? lastTableRow : row});
      Value term = arith::MulIOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), entry),
                                         arith::ConstantIndexOp::create(b, loc, sign * coefficient));
      value = arith::AddIOp::create(b, loc, value, term);
    }
    return value;
  };
  auto combine = [&](Value &into, Value value, bool greatest) {
    into = !into ? value
                 : greatest ? arith::MaxSIOp::create(b, loc, into, value).getResult()
                            : arith::MinSIOp::create(b, loc, into, value).getResult();
  };
  KeyRange range;
  for (const LinearKeyBound &bound : bounds.bounds) {
    // The bound's key limit is monotone in q: its extremes over the rows lie at the first and the last row.
    Linear qPart{0, bound.qCoefficient, 0, {}, bound.rowTables};
    bool increasing = bound.kvCoefficient > 0 ? qPart.monotoneInQ(-1) : qPart.monotoneInQ(1);
    Value low = increasing ? firstRow : lastRow, high = increasing ? lastRow : firstRow;
    if (bound.kvCoefficient > 0) {
      // kv >= -(q qc + c): some row sees keys from the least limit, every row from the greatest.
      combine(range.from, at(low, bound, -1, 0), /*greatest=*/true);
      combine(range.visibleFrom, at(high, bound, -1, 0), /*greatest=*/true);
    } else {
      // kv <= q qc + c: some row sees keys up to the greatest limit, every row up to the least.
      combine(range.to, at(high, bound, 1, 1), /*greatest=*/false);
      combine(range.visibleTo, at(low, bound, 1, 1), /*greatest=*/false);
    }
  }
  return range;
}
