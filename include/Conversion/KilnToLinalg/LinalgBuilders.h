//===- LinalgBuilders.h - linalg.generic builders with f32 bodies -*- C++ -*-===//
//
// Every kiln op lowers to a few linalg.generic ops that broadcast their inputs, compute in f32 and store in the
// result's element type; the tiling transforms build their per-tile arithmetic (masks, online-softmax updates)
// the same way. These builders hold that common shape so that each user says only its formula.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_KILNTOLINALG_LINALGBUILDERS_H
#define KILN_CONVERSION_KILNTOLINALG_LINALGBUILDERS_H

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir {
namespace kiln {
namespace lowering {

/// Computes a scalar of the iteration from the (f32-widened) inputs; returns an f32 (or integer/i1) value.
using ScalarBody = llvm::function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// Numpy broadcast map from an iteration space of `resultShape` to an operand of `operandShape`: dimensions
/// are right-aligned and an operand dimension of 1 that meets a larger one reads index 0.
AffineMap getBroadcastMap(ArrayRef<int64_t> operandShape, ArrayRef<int64_t> resultShape, MLIRContext *ctx);

/// Map from a rank-`rank` iteration space to the dimensions that remain after dropping `axes`.
AffineMap getDroppedAxesMap(int64_t rank, ArrayRef<int64_t> axes, MLIRContext *ctx);

/// A `tensor.empty` of the given shape and element type.
Value createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elementType);

/// A tensor of the given shape filled with `value`.
Value createFilled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type elementType, double value);

/// A scalar float constant of type `type`.
Value floatConstant(OpBuilder &b, Location loc, Type type, double value);

/// A row max to shift a row's exponentials by: the max, or the most negative float where the max is -inf (a row
/// of -inf), whose exponentials are then 0 rather than exp(-inf + inf), NaN. A NaN max stays NaN.
Value finiteMax(OpBuilder &b, Location loc, Value max);

/// exp(x - finiteMax(max)): an element of a softmax's row shifted by the row's max, 0 in a row of -inf.
Value expBelowMax(OpBuilder &b, Location loc, Value x, Value max);

/// `sum / total` for an attention's weighted sum over its weights' total, 0 where the total is 0 (a query row
/// that sees no key, whose sum is 0 too): what torch's SDPA, ONNX's Attention and FlashAttention give such a row.
/// A NaN total stays NaN.
Value divideByTotal(OpBuilder &b, Location loc, Value sum, Value total);

/// Widens a narrow float scalar to f32; other values pass through.
Value widen(OpBuilder &b, Location loc, Value scalar);

/// Converts an f32 scalar to `type` (truncation for f16/bf16); other values pass through.
Value narrow(OpBuilder &b, Location loc, Value scalar, Type type);

/// Builds one parallel linalg.generic over `shape` whose inputs are read through `maps`; float inputs reach
/// `body` widened to f32 and its result is stored as `resultElementType`.
Value buildElementwise(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, Type resultElementType,
                       ValueRange inputs, ArrayRef<AffineMap> maps, ScalarBody body);

/// Elementwise op over inputs that broadcast (numpy rules) to `resultType`.
Value buildBroadcastElementwise(OpBuilder &b, Location loc, RankedTensorType resultType, ValueRange inputs,
                                ScalarBody body);

/// How a reduction combines two f32 values.
enum class Combiner { Sum, Max, Min };

/// Reduces, over `axes` of an iteration space of `shape`, the f32 value that `element` computes from the inputs
/// (read through `maps`, widened to f32). Returns an f32 tensor of `shape` without `axes`.
Value buildReduction(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, ArrayRef<int64_t> axes,
                     Combiner combiner, ValueRange inputs, ArrayRef<AffineMap> maps, ScalarBody element);

/// `value` converted to element type `to`, any two of the dialect's (kiln.cast's scalar meaning): floats by one
/// rounding, float to int by truncation toward zero (saturating: NaN to 0, beyond the range to its ends), to i1
/// by "not zero", i1 to a number as 0 or 1.
Value convertScalar(OpBuilder &b, Location loc, Value value, Type to);

/// Whether `op` is an elementwise op whose formula buildScalarFormula gives (arithmetic on floats or integers,
/// activations; select and compare, with their i1 values, aside): what glue kernels evaluate per element.
bool hasScalarFormula(Operation *op);

/// hasScalarFormula for a float result: what epilogues and row kernels, which compute in f32, evaluate per
/// element.
bool hasFloatFormula(Operation *op);

/// The scalar formula of a kiln elementwise op (arithmetic, activations, select, compare) applied to `args`, or
/// a null value for any other op: f32 for floats, the integer type itself for integer arithmetic. Shared by the
/// lowering and the epilogue fusion.
Value buildScalarFormula(OpBuilder &b, Location loc, Operation *op, ValueRange args);

/// The value a scalar region (an attention's score_mod or mask_mod: pure ops, a kiln.yield of one value)
/// computes from `args`, its ops cloned at the builder's insertion point; a tensor.extract there reads zero (false)
/// where an index lies outside its tensor.
Value inlineScalarRegion(OpBuilder &b, Region &region, ValueRange args, const IRMapping *hoisted = nullptr);

/// The value a kiln.elementwise body computes from `args` (one per input, in its compute type), its ops cloned at
/// the builder's insertion point with every integer division's divisor guarded: a zero divisor gives 0 and a
/// signed division by -1 the negation (a remainder 0), where the raw op would trap on the host CPU.
Value inlineElementwiseBody(OpBuilder &b, Region &body, ValueRange args);

/// Clones, at the builder's insertion point, the ops of a scalar region that read only the block arguments
/// `invariant` binds (with the values it gives) and constants, as inlineScalarRegion would; returns the mapping
/// of their results, which inlineScalarRegion then takes as `hoisted` (an attention mod's table read per head,
/// done once per tile instead of once per score).
IRMapping hoistInvariantOps(OpBuilder &b, Region &region, ArrayRef<std::pair<unsigned, Value>> invariant);

/// Applies a matmul epilogue region elementwise: a parallel linalg.generic over `shape` whose inputs are the
/// f32 accumulator and the epilogue operands (read through `maps`, widened to f32); the region's body is cloned
/// with its block arguments bound to them and its yield stored as `resultElementType`.
Value buildEpilogue(OpBuilder &b, Location loc, Region &epilogue, ArrayRef<int64_t> shape, Type resultElementType,
                    ValueRange inputs, ArrayRef<AffineMap> maps);

/// Applies `combiner` to two f32 scalars.
Value combine(OpBuilder &b, Location loc, Combiner combiner, Value lhs, Value rhs);

} // namespace lowering

/// Adds the lowering patterns of each op family; each lives in its own file.
void populateElementwiseLoweringPatterns(RewritePatternSet &patterns);
void populateContractionLoweringPatterns(RewritePatternSet &patterns);
void populateNormalizationLoweringPatterns(RewritePatternSet &patterns);
void populateDataMovementLoweringPatterns(RewritePatternSet &patterns);
void populatePagedKvLoweringPatterns(RewritePatternSet &patterns);

} // namespace kiln
} // namespace mlir

#endif // KILN_CONVERSION_KILNTOLINALG_LINALGBUILDERS_H
