//===- FoldConversionOffsets.cpp - The kiln-fold-conversion-offsets pass ---===//
//
// A score_mod that reads positions as numbers (ALiBi's slope * (kv - q), a distance penalty) converts an integer
// to a float per score. The attention lowering runs the mod once per register, and each register's position is
// the thread's position plus a constant (its fragment's row and column), so every score pays an integer-to-float
// conversion, which the H200 runs at a quarter of the FMA rate, as slow as the softmax's exp: ALiBi at head
// dim 64 ran at 0.84x the plain attention. Where the integer range analysis proves the values small enough
// that their conversions are exact, a conversion of `x + c` becomes the conversion of `x`, which every register
// shares (CSE merges the copies), plus the constant: one conversion per thread and tile, then an add per score.
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"

#include "KernelBuilding.h"

#include "mlir/Analysis/DataFlow/ConstantPropagationAnalysis.h"
#include "mlir/Analysis/DataFlow/DeadCodeAnalysis.h"
#include "mlir/Analysis/DataFlow/IntegerRangeAnalysis.h"
#include "mlir/Analysis/DataFlowFramework.h"
#include "mlir/IR/Matchers.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNFOLDCONVERSIONOFFSETS
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

namespace {
/// An integer expression written as a sum of terms (each added or subtracted) and a constant.
struct OffsetSum {
  SmallVector<std::pair<Value, bool>> terms; // (term, subtracted)
  int64_t constant = 0;
};

/// The most operations flatten walks in one tree: a position's is a handful; a tree of shared adds (a DAG) would
/// otherwise unfold into exponentially many terms.
constexpr int kMaxTreeOps = 64;

/// Flattens the addi / subi tree of `value` into `sum`, `negate` flipping the signs of what it adds, counting
/// the operations it walks in `budget`; false (`sum` incomplete) once the budget runs out. Constants of more than
/// 32 bits stay terms (so that the constant's sum cannot overflow int64).
bool flatten(Value value, bool negate, OffsetSum &sum, int &budget) {
  if (--budget < 0)
    return false;
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)) && constant.getSignificantBits() <= 32) {
    sum.constant += negate ? -constant.getSExtValue() : constant.getSExtValue();
    return true;
  }
  if (auto add = value.getDefiningOp<arith::AddIOp>())
    return flatten(add.getLhs(), negate, sum, budget) && flatten(add.getRhs(), negate, sum, budget);
  if (auto sub = value.getDefiningOp<arith::SubIOp>())
    return flatten(sub.getLhs(), negate, sum, budget) && flatten(sub.getRhs(), !negate, sum, budget);
  sum.terms.emplace_back(value, negate);
  return true;
}

/// The integer a conversion reads, looking through casts that keep a small value as it is; `narrowest` becomes
/// the fewest bits of any integer type on the way (index counting 64), the conversion's operand's included.
Value throughValueCasts(Value value, unsigned &narrowest) {
  auto bits = [](Type type) { return type.isIndex() ? 64u : type.getIntOrFloatBitWidth(); };
  narrowest = bits(value.getType());
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<arith::IndexCastOp, arith::ExtSIOp, arith::TruncIOp>(op))
      break;
    value = op->getOperand(0);
    narrowest = std::min(narrowest, bits(value.getType()));
  }
  return value;
}

/// `value` converted to the integer type `type` (index or an integer type), as a signed value.
Value castSigned(OpBuilder &b, Location loc, Value value, Type type) {
  Type from = value.getType();
  if (from == type)
    return value;
  if (from.isIndex() || type.isIndex())
    return arith::IndexCastOp::create(b, loc, type, value);
  if (from.getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(b, loc, type, value);
  return arith::TruncIOp::create(b, loc, type, value);
}

/// The integer range analysis with a kernel's size parameters (its index arguments) bounded by its
/// kiln.size_bound, where it has one, instead of unknown.
class BoundedSizesRangeAnalysis : public dataflow::IntegerRangeAnalysis {
public:
  BoundedSizesRangeAnalysis(DataFlowSolver &solver, gpu::GPUFuncOp kernel)
      : IntegerRangeAnalysis(solver), kernel(kernel) {
    if (auto bound = kernel->getAttrOfType<IntegerAttr>(gpukernel::kSizeBoundAttrName))
      sizeBound = bound.getInt();
  }

  void setToEntryState(dataflow::IntegerValueRangeLattice *lattice) override {
    auto argument = dyn_cast<BlockArgument>(lattice->getAnchor());
    if (!sizeBound || !argument || argument.getOwner() != &kernel.getBody().front() ||
        !argument.getType().isIndex())
      return IntegerRangeAnalysis::setToEntryState(lattice);
    unsigned width = IndexType::kInternalStorageBitWidth;
    ConstantIntRanges range = ConstantIntRanges::fromSigned(APInt::getZero(width), APInt(width, *sizeBound));
    propagateIfChanged(lattice, lattice->join(IntegerValueRange(range)));
  }

private:
  gpu::GPUFuncOp kernel;
  std::optional<int64_t> sizeBound;
};

struct KilnFoldConversionOffsetsPass : kiln::impl::KilnFoldConversionOffsetsBase<KilnFoldConversionOffsetsPass> {
  void runOnOperation() override {
    // Each kernel on its own: its parameters (sizes, pointers) are unknown, everything else follows from them.
    for (auto kernel : getOperation().getOps<gpu::GPUFuncOp>()) {
      SmallVector<std::pair<arith::SIToFPOp, OffsetSum>> candidates;
      kernel.walk([&](arith::SIToFPOp conversion) {
        // A tree of 64-bit integers (index or i64), which the range analysis bounds without wrapping, read
        // through casts that hold every integer the float holds exactly and its sign.
        auto floatType = dyn_cast<FloatType>(conversion.getType());
        unsigned narrowest = 0;
        Value integer = throughValueCasts(conversion.getIn(), narrowest);
        if (!floatType || !(integer.getType().isIndex() || integer.getType().isInteger(64)) ||
            narrowest < floatType.getFPMantissaWidth() + 2)
          return;
        OffsetSum sum;
        int budget = kMaxTreeOps;
        if (flatten(integer, /*negate=*/false, sum, budget) && sum.constant != 0 && !sum.terms.empty())
          candidates.emplace_back(conversion, std::move(sum));
      });
      // Most kernels convert no positions: they skip the analysis.
      if (candidates.empty())
        continue;
      DataFlowSolver solver;
      solver.load<dataflow::DeadCodeAnalysis>();
      solver.load<dataflow::SparseConstantPropagation>();
      solver.load<BoundedSizesRangeAnalysis>(kernel);
      if (failed(solver.initializeAndRun(kernel)))
        return signalPassFailure();
      for (auto &[conversion, sum] : candidates)
        fold(solver, conversion, sum);
    }
  }

  /// Rewrites sitofp(x + c) as sitofp(x) + c where both are exact: the range analysis bounds x + c within the
  /// float's exactly represented integers, less |c| (so x is within them too; in 64-bit arithmetic neither wraps,
  /// and every cast on the way holds them).
  /// `sum` is the flattened integer that `conversion` reads.
  void fold(DataFlowSolver &solver, arith::SIToFPOp conversion, const OffsetSum &sum) {
    unsigned narrowest = 0;
    Value integer = throughValueCasts(conversion.getIn(), narrowest);
    auto floatType = cast<FloatType>(conversion.getType());
    auto *lattice = solver.lookupState<dataflow::IntegerValueRangeLattice>(integer);
    if (!lattice || lattice->getValue().isUninitialized())
      return;
    const ConstantIntRanges &range = lattice->getValue().getValue();
    // Integers of magnitude up to 2^precision convert exactly; x and x + c both must.
    int64_t exact = int64_t(1) << std::min<unsigned>(62, floatType.getFPMantissaWidth());
    int64_t margin = exact - std::abs(sum.constant);
    if (margin <= 0 || range.smin().getSignificantBits() > 63 || range.smax().getSignificantBits() > 63 ||
        range.smin().getSExtValue() < -margin || range.smax().getSExtValue() > margin)
      return;
    OpBuilder b(conversion);
    Location loc = conversion.getLoc();
    Type type = integer.getType();
    // The terms in the order the tree lists them, so that every register's copy is the same expression.
    Value base;
    for (auto [value, subtracted] : sum.terms) {
      if (!base)
        base = subtracted ? arith::SubIOp::create(b, loc, arith::ConstantOp::create(b, loc, b.getZeroAttr(type)),
                                                  value)
                          : value;
      else
        base = subtracted ? arith::SubIOp::create(b, loc, base, value).getResult()
                          : arith::AddIOp::create(b, loc, base, value).getResult();
    }
    Value converted =
        arith::SIToFPOp::create(b, loc, floatType, castSigned(b, loc, base, conversion.getIn().getType()));
    Value offset = arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, static_cast<double>(sum.constant)));
    conversion.replaceAllUsesWith(arith::AddFOp::create(b, loc, converted, offset).getResult());
    conversion.erase();
  }
};
} // namespace
