//===- MaskBounds.cpp - Key ranges an attention's mask_mod implies ----------===//
//
// The analysis reads the mask_mod's yielded i1 as a conjunction of terms. A term `lhs pred rhs` (arith.cmpi,
// signed or eq) whose sides are linear in q_idx and kv_idx (block arguments, constants, addi, subi, muli by a
// constant, index_cast; an index value of the batch, the head and the tables alone is a symbol, a term the
// bound keeps as a value; a read of a nondecreasing table at q_idx is a row term) becomes one or two bounds
// `e >= 0`; a term the analysis cannot read leaves the others valid as necessary conditions (a visible position
// satisfies every term) but makes the set inexact. A term `t[q + c] == t[kv]` over a nondecreasing table is an
// equal run: the keys a query sees are those whose entries equal its own, one run of the table. The key ranges
// of a query block follow from the bounds at its first and last row, since each bound kept is monotone in q (its
// row terms and q share one sign), and from the runs of those two rows, which the block finds by searching the
// table (4 reads at a time per search, the searches in one loop: six rounds for 4096 entries). Under a causal
// mask whose diagonal is the row at which the table is read, a row's keys end within its own run, so only the
// run's first key is searched for. Every thread of the block runs the search, beside other blocks' key loops,
// so its instructions cost more than its rounds' latency: on the H100, 4 reads a round were 1.05x faster than
// 16 (documents by id, d64 and d128), 8 reads 1.04-1.05x, and 64 (two rounds) 0.94-0.98x.
//
//===----------------------------------------------------------------------===//

#include "MaskBounds.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

/// Whether `op` is a cast that keeps every value (a sign extension, an index_cast that does not narrow): a
/// truncation (index to i32 or narrower) could wrap a position, which the bounds would not see.
bool keepsValues(Operation *op) {
  auto bits = [](Type type) { return type.isIndex() ? 64u : type.getIntOrFloatBitWidth(); };
  return isa<arith::ExtSIOp>(op) ||
         (isa<arith::IndexCastOp>(op) && bits(op->getResult(0).getType()) >= bits(op->getOperand(0).getType()));
}

/// The block argument number of a nondecreasing table that `value` reads (through casts that keep every value),
/// and the index it reads at.
std::optional<std::pair<unsigned, Value>> tableRead(Value value, Block &body, ArrayRef<unsigned> nondecreasing) {
  while (Operation *op = value.getDefiningOp()) {
    if (!keepsValues(op))
      break;
    value = op->getOperand(0);
  }
  auto extract = value.getDefiningOp<tensor::ExtractOp>();
  if (!extract || extract.getIndices().size() != 1)
    return std::nullopt;
  auto table = dyn_cast<BlockArgument>(extract.getTensor());
  if (!table || table.getOwner() != &body || !llvm::is_contained(nondecreasing, table.getArgNumber()))
    return std::nullopt;
  return std::make_pair(table.getArgNumber(), extract.getIndices()[0]);
}

/// Whether `value` is the region's block argument number `number` (2: q_idx, 3: kv_idx).
bool isArgument(Value value, Block &body, unsigned number) {
  auto argument = dyn_cast<BlockArgument>(value);
  return argument && argument.getOwner() == &body && argument.getArgNumber() == number;
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
  if (isa<tensor::ExtractOp>(op)) {
    std::optional<std::pair<unsigned, Value>> read = tableRead(value, body, nondecreasing);
    if (read && isArgument(read->second, body, 2))
      return Linear{0, 0, 0, {}, {{read->first, 1}}};
    return std::nullopt;
  }
  if (keepsValues(op))
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

/// The equal run `lhs == rhs` states, where one side reads a nondecreasing table at kv_idx and the other the same
/// table at q_idx + c, and the table holds every key and every shifted query.
std::optional<EqualRun> equalRunOf(Value lhs, Value rhs, Block &body, ArrayRef<unsigned> nondecreasing,
                                   int64_t queries, int64_t keys) {
  std::optional<std::pair<unsigned, Value>> a = tableRead(lhs, body, nondecreasing),
                                            b = tableRead(rhs, body, nondecreasing);
  if (!a || !b || a->first != b->first || ShapedType::isDynamic(queries) || ShapedType::isDynamic(keys))
    return std::nullopt;
  if (isArgument(a->second, body, 3))
    std::swap(a, b);
  if (!isArgument(b->second, body, 3))
    return std::nullopt;
  std::optional<Linear> query = linearOf(a->second, body, {});
  int64_t entries = cast<RankedTensorType>(body.getArgument(a->first).getType()).getDimSize(0);
  if (!query || query->q != 1 || query->kv != 0 || !query->symbols.empty() || !query->rows.empty() ||
      query->c < 0 || queries + query->c > entries || keys > entries)
    return std::nullopt;
  return EqualRun{a->first, query->c};
}

/// Adds the bounds of the term `value` (an i1) to `into`; false where the term is not fully read. `queries` and
/// `keys` are the op's counts (equal runs need them static).
bool collect(Value value, Block &body, ArrayRef<unsigned> nondecreasing, int64_t queries, int64_t keys,
             MaskBounds &into) {
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return constant.isOne(); // true adds nothing; false hides everything, which the bounds cannot say
  Operation *op = value.getDefiningOp();
  if (auto conjunction = dyn_cast_or_null<arith::AndIOp>(op)) {
    bool lhs = collect(conjunction.getLhs(), body, nondecreasing, queries, keys, into);
    bool rhs = collect(conjunction.getRhs(), body, nondecreasing, queries, keys, into);
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
  arith::CmpIPredicate pred = compare.getPredicate();
  if (negated)
    pred = arith::invertPredicate(pred);
  if (pred == arith::CmpIPredicate::eq) {
    if (std::optional<EqualRun> run =
            equalRunOf(compare.getLhs(), compare.getRhs(), body, nondecreasing, queries, keys)) {
      into.runs.push_back(*run);
      return true;
    }
  }
  std::optional<Linear> lhs = linearOf(compare.getLhs(), body, nondecreasing),
                        rhs = linearOf(compare.getRhs(), body, nondecreasing);
  if (!lhs || !rhs)
    return false;
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

MaskBounds MaskBounds::analyze(Region &maskMod, ArrayRef<int64_t> nondecreasingTables, int64_t queries,
                               int64_t keys) {
  MaskBounds result;
  Block &body = maskMod.front();
  // The mask_mod's block arguments are (b, h, q_idx, kv_idx) and then one per mod operand.
  SmallVector<unsigned> nondecreasing;
  for (int64_t operand : nondecreasingTables)
    nondecreasing.push_back(static_cast<unsigned>(operand) + 4);
  result.exact = collect(body.getTerminator()->getOperand(0), body, nondecreasing, queries, keys, result);
  return result;
}

namespace {

/// Entry `at` of the 1-D integer `table`, as an index.
Value entryOf(OpBuilder &b, Location loc, Value table, Value at) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), tensor::ExtractOp::create(b, loc, table, at));
}

/// One search of a nondecreasing 1-D table: the first position p in [lo, hi] whose entry exceeds `value`
/// (`strictly`) or is at least `value`, given that every entry before lo falls short and hi is the table's end or
/// an entry that does not.
struct TableSearch {
  Value table, value, lo, hi;
  bool strictly;
};

/// The answers of `searches`, found together: each round reads 4 entries of every search whose range is still
/// open (independent loads, all issued before any is compared) and keeps the part of its range between the last
/// entry that falls short and the first that does not. One loop for all of them, so a block waits for one
/// round's loads at a time, not one search's after another's (six rounds for 4096 entries, not twelve for two).
SmallVector<Value> searchTables(OpBuilder &b, Location loc, ArrayRef<TableSearch> searches) {
  constexpr int64_t kWays = 4;
  Type index = b.getIndexType();
  SmallVector<Value> inits;
  for (const TableSearch &search : searches)
    inits.append({search.lo, search.hi});
  SmallVector<Type> types(inits.size(), index);
  auto loop = scf::WhileOp::create(
      b, loc, types, inits,
      [&](OpBuilder &cb, Location l, ValueRange ranges) {
        Value open;
        for (size_t i = 0; i < searches.size(); ++i) {
          Value searching = arith::CmpIOp::create(cb, l, arith::CmpIPredicate::slt, ranges[2 * i], ranges[2 * i + 1]);
          open = open ? arith::OrIOp::create(cb, l, open, searching).getResult() : searching;
        }
        scf::ConditionOp::create(cb, l, open, ranges);
      },
      [&](OpBuilder &bb, Location l, ValueRange ranges) {
        Value zero = arith::ConstantIndexOp::create(bb, l, 0), one = arith::ConstantIndexOp::create(bb, l, 1);
        SmallVector<Value> next;
        for (auto [i, search] : llvm::enumerate(searches)) {
          Value low = ranges[2 * i], high = ranges[2 * i + 1];
          // A search already done keeps its range; its probes read a valid entry and count for nothing.
          Value searching = arith::CmpIOp::create(bb, l, arith::CmpIPredicate::slt, low, high);
          int64_t entries = cast<RankedTensorType>(search.table.getType()).getDimSize(0);
          Value lastEntry = arith::ConstantIndexOp::create(bb, l, entries - 1);
          // The range splits into kWays chunks of `step` positions; a chunk falls short where its last entry does.
          Value step = arith::CeilDivSIOp::create(bb, l, arith::SubIOp::create(bb, l, high, low),
                                                  arith::ConstantIndexOp::create(bb, l, kWays));
          Value shortChunks = zero;
          for (int64_t way = 1; way <= kWays; ++way) {
            Value offset = arith::MulIOp::create(bb, l, step, arith::ConstantIndexOp::create(bb, l, way));
            Value probe = arith::SubIOp::create(bb, l, arith::AddIOp::create(bb, l, low, offset), one);
            Value inRange = arith::AndIOp::create(
                bb, l, searching, arith::CmpIOp::create(bb, l, arith::CmpIPredicate::slt, probe, high));
            Value at = arith::MaxSIOp::create(bb, l, arith::MinSIOp::create(bb, l, probe, lastEntry), zero);
            Value entry = entryOf(bb, l, search.table, at);
            Value falls = arith::CmpIOp::create(
                bb, l, search.strictly ? arith::CmpIPredicate::sle : arith::CmpIPredicate::slt, entry, search.value);
            Value counted = arith::AndIOp::create(bb, l, inRange, falls);
            shortChunks =
                arith::AddIOp::create(bb, l, shortChunks, arith::IndexCastUIOp::create(bb, l, index, counted));
          }
          Value newLow = arith::AddIOp::create(bb, l, low, arith::MulIOp::create(bb, l, shortChunks, step));
          Value newHigh = arith::MinSIOp::create(
              bb, l, high, arith::SubIOp::create(bb, l, arith::AddIOp::create(bb, l, newLow, step), one));
          next.push_back(newLow);
          next.push_back(arith::SelectOp::create(bb, l, searching, newHigh, high));
        }
        scf::YieldOp::create(bb, l, next);
      });
  SmallVector<Value> found;
  for (size_t i = 0; i < searches.size(); ++i)
    found.push_back(loop.getResult(2 * i));
  return found;
}

} // namespace

KeyRange kiln::buildKeyRange(OpBuilder &b, Location loc, const MaskBounds &bounds, Value firstRow, int64_t rows,
                             Value queries, const IRMapping &hoisted, ValueRange modOperands,
                             std::optional<int64_t> causalDiagonal) {
  Value lastRow = arith::AddIOp::create(b, loc, firstRow, arith::ConstantIndexOp::create(b, loc, rows - 1));
  // Tables hold an entry per query: a block that ends past the last query reads them at the last query.
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
      Value entry = entryOf(b, loc, modOperands[argument - 4], row == lastRow ? lastTableRow : row);
      Value term = arith::MulIOp::create(b, loc, entry, arith::ConstantIndexOp::create(b, loc, sign * coefficient));
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
  // Each run's searches: its first row's run's first key, and the key after its last row's run, unless a causal
  // diagonal at the row the table is read at ends every row's keys within its own run: the keys after the last
  // row's entry are then hidden anyway, and the run's keys up to that entry are its part that any row sees.
  SmallVector<TableSearch> searches;
  SmallVector<Value> oneRun, runEnds;
  for (const EqualRun &run : bounds.runs) {
    // The two rows' entries: the keys some row sees run from the first row's run to the end of the last row's,
    // and every row sees the keys of one run where both rows lie in it (else none).
    Value table = modOperands[run.argument - 4];
    Value shift = arith::ConstantIndexOp::create(b, loc, run.shift);
    Value first = arith::AddIOp::create(b, loc, firstRow, shift);
    Value last = arith::AddIOp::create(b, loc, lastTableRow, shift);
    Value firstEntry = entryOf(b, loc, table, first), lastEntry = entryOf(b, loc, table, last);
    int64_t entries = cast<RankedTensorType>(table.getType()).getDimSize(0);
    Value afterLast = arith::AddIOp::create(b, loc, last, arith::ConstantIndexOp::create(b, loc, 1));
    searches.push_back({table, firstEntry, arith::ConstantIndexOp::create(b, loc, 0), first, /*strictly=*/false});
    bool endsAtDiagonal = causalDiagonal && *causalDiagonal == run.shift;
    runEnds.push_back(endsAtDiagonal ? afterLast : Value());
    if (!endsAtDiagonal)
      searches.push_back(
          {table, lastEntry, afterLast, arith::ConstantIndexOp::create(b, loc, entries), /*strictly=*/true});
    oneRun.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, firstEntry, lastEntry));
  }
  SmallVector<Value> found = searches.empty() ? SmallVector<Value>() : searchTables(b, loc, searches);
  // The searches' answers in order: each run's first key, then the key after it unless runEnds holds it.
  size_t next = 0;
  for (auto [sameRun, runEnd] : llvm::zip(oneRun, runEnds)) {
    Value from = found[next++];
    Value to = runEnd ? runEnd : found[next++];
    combine(range.from, from, /*greatest=*/true);
    combine(range.to, to, /*greatest=*/false);
    combine(range.visibleFrom, arith::SelectOp::create(b, loc, sameRun, from, to), /*greatest=*/true);
    combine(range.visibleTo, arith::SelectOp::create(b, loc, sameRun, to, from), /*greatest=*/false);
  }
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
