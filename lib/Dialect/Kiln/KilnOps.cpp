//===- KilnOps.cpp - Verifiers and builders of the kiln ops ---------------===//
//
// The shape, dtype and attribute rules of every kiln op. Importers and the Python tracer build these ops from
// user input, so each message names the operand and the dimension at fault and gives the sizes it saw.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;

/// Renders a shape as `[2, 77, 512]` for diagnostics.
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

static RankedTensorType tensorType(Value value) { return cast<RankedTensorType>(value.getType()); }

/// The element count of `type`, or an error naming it (as `name`) when the count does not fit in int64:
/// RankedTensorType::getNumElements would wrap, and a wrapped count can make two sizes look equal.
static FailureOr<int64_t> checkedNumElements(Operation *op, StringRef name, RankedTensorType type) {
  if (llvm::is_contained(type.getShape(), 0))
    return 0;
  int64_t count = 1;
  for (int64_t size : type.getShape())
    if (llvm::MulOverflow(count, size, count))
      return op->emitOpError() << name << " type " << type << " has more elements than int64 can count";
  return count;
}

/// Checks that an axis attribute lies in [0, rank).
static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for rank " << rank << " (expected 0 <= axis < "
                             << rank << ")";
  return success();
}

/// Checks that the op's result has the type its operands imply.
static LogicalResult verifyResultType(Operation *op, Type actual, Type inferred) {
  if (actual != inferred)
    return op->emitOpError() << "result type " << actual << " does not match the inferred type " << inferred;
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  ElementsAttr value;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseAttribute(value, "value", result.attributes))
    return failure();
  result.addTypes(value.getType());
  return success();
}

void ConstantOp::print(OpAsmPrinter &printer) {
  printer.printOptionalAttrDict((*this)->getAttrs(), /*elidedAttrs=*/{"value"});
  printer << ' ';
  printer.printAttribute(getValue());
}

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError() << "value type " << getValue().getType() << " differs from the result type " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

void MatmulOp::build(OpBuilder &builder, OperationState &state, Value lhs, Value rhs, bool transposeLhs,
                     bool transposeRhs) {
  RankedTensorType lhsType = tensorType(lhs);
  Type resultType =
      inferMatmulType(lhsType, tensorType(rhs), transposeLhs, transposeRhs, lhsType.getElementType());
  build(builder, state, resultType, lhs, rhs, transposeLhs, transposeRhs, ValueRange{}, StringAttr(), IntegerAttr());
}

LogicalResult MatmulOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  if (lhs.getRank() < 2)
    return emitOpError() << "operand #0 (lhs) must have rank >= 2, got rank " << lhs.getRank();
  if (rhs.getRank() < 2)
    return emitOpError() << "operand #1 (rhs) must have rank >= 2, got rank " << rhs.getRank();
  if (lhs.getElementType() != rhs.getElementType())
    return emitOpError() << "lhs element type " << lhs.getElementType() << " differs from rhs element type "
                         << rhs.getElementType();

  int64_t lhsK = getTransposeLhs() ? lhs.getRank() - 2 : lhs.getRank() - 1;
  int64_t rhsK = getTransposeRhs() ? rhs.getRank() - 1 : rhs.getRank() - 2;
  if (lhs.getDimSize(lhsK) != rhs.getDimSize(rhsK))
    return emitOpError() << "contraction sizes differ: lhs dimension " << lhsK << " is " << lhs.getDimSize(lhsK)
                         << " but rhs dimension " << rhsK << " is " << rhs.getDimSize(rhsK);

  auto batch = broadcastShapes(lhs.getShape().drop_back(2), rhs.getShape().drop_back(2));
  if (auto *conflict = std::get_if<BroadcastConflict>(&batch))
    return emitOpError() << "batch dimensions " << formatShape(lhs.getShape().drop_back(2)) << " (lhs) and "
                         << formatShape(rhs.getShape().drop_back(2)) << " (rhs) do not broadcast: "
                         << conflict->lhsSize << " vs " << conflict->rhsSize << " at batch dimension "
                         << conflict->resultDim;

  if (failed(verifyFp32Precision(*this, getFp32Precision(), lhs.getElementType(), "operands")))
    return failure();

  RankedTensorType result = getType();
  if (std::optional<int64_t> chunk = getKChunk()) {
    if (*chunk < 1)
      return emitOpError() << "k_chunk must be positive, got " << *chunk;
    if (hasEpilogue())
      return emitOpError() << "with k_chunk stores [chunks, ..., M, N] f32 partial products; an epilogue belongs "
                              "to the kiln.sum_splits";
    auto unsplit = cast<RankedTensorType>(
        inferMatmulType(lhs, rhs, getTransposeLhs(), getTransposeRhs(), Float32Type::get(getContext())));
    SmallVector<int64_t> shape{getKChunkCount()};
    llvm::append_range(shape, unsplit.getShape());
    return verifyResultType(*this, result, RankedTensorType::get(shape, unsplit.getElementType()));
  }
  if (!hasEpilogue() && result.getElementType() != lhs.getElementType() && !result.getElementType().isF32())
    return emitOpError() << "result element type " << result.getElementType() << " must be the operands' ("
                         << lhs.getElementType() << ") or f32";
  return verifyResultType(*this, result,
                          inferMatmulType(lhs, rhs, getTransposeLhs(), getTransposeRhs(), result.getElementType()));
}

int64_t MatmulOp::getContractionSize() {
  RankedTensorType lhs = getLhs().getType();
  return lhs.getDimSize(getTransposeLhs() ? lhs.getRank() - 2 : lhs.getRank() - 1);
}

int64_t MatmulOp::getKChunkCount() {
  std::optional<int64_t> chunk = getKChunk();
  if (!chunk || *chunk < 1)
    return 0;
  // A contraction of K = 0 still has one (empty) chunk, so that the sum has a part to read.
  return std::max<int64_t>(1, llvm::divideCeilSigned(getContractionSize(), *chunk));
}

/// Checks an epilogue region against its operands and the op's result type: the accumulator plus one f32
/// block argument per operand, a kiln.yield of one f32 value, operands broadcasting to the result.
static LogicalResult verifyEpilogue(Operation *op, Region &epilogue, OperandRange operands,
                                   RankedTensorType result) {
  if (epilogue.empty()) {
    if (!operands.empty())
      return op->emitOpError() << "has epilogue operands but no epilogue region";
    return success();
  }
  Block &body = epilogue.front();
  if (body.getNumArguments() != operands.size() + 1)
    return op->emitOpError() << "epilogue takes " << body.getNumArguments()
                             << " block arguments but needs the accumulator plus one per epilogue operand ("
                             << operands.size() + 1 << ")";
  for (BlockArgument argument : body.getArguments())
    if (!argument.getType().isF32())
      return op->emitOpError() << "epilogue block argument #" << argument.getArgNumber() << " must be f32, got "
                               << argument.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != 1 || !yield.getValues()[0].getType().isF32())
    return op->emitOpError() << "epilogue must end in kiln.yield of one f32 value";
  for (auto [index, operand] : llvm::enumerate(operands)) {
    ArrayRef<int64_t> shape = tensorType(operand).getShape();
    auto merged = broadcastShapes(shape, result.getShape());
    auto *dims = std::get_if<SmallVector<int64_t>>(&merged);
    if (!dims || ArrayRef<int64_t>(*dims) != result.getShape())
      return op->emitOpError() << "epilogue operand #" << index << " of shape " << formatShape(shape)
                               << " does not broadcast to the result shape " << formatShape(result.getShape());
  }
  return success();
}

LogicalResult MatmulOp::verifyRegions() {
  return verifyEpilogue(*this, getEpilogue(), getEpilogueOperands(), getType());
}

LogicalResult SumSplitsOp::verify() {
  RankedTensorType parts = getParts().getType();
  if (parts.getRank() < 1 || parts.getDimSize(0) == 0)
    return emitOpError() << "operand 'parts' must have a leading chunk dimension of at least one chunk, got "
                         << parts;
  if (getType().getShape() != parts.getShape().drop_front())
    return emitOpError() << "result shape " << formatShape(getType().getShape())
                         << " must be that of one chunk of 'parts', " << formatShape(parts.getShape().drop_front());
  return success();
}

LogicalResult SumSplitsOp::verifyRegions() {
  return verifyEpilogue(*this, getEpilogue(), getEpilogueOperands(), getType());
}

/// The type a kiln.elementwise body computes an element of `element` in: f32 for any float, else the type.
static Type elementwiseComputeType(Type element) {
  return isa<FloatType>(element) ? Float32Type::get(element.getContext()) : element;
}

LogicalResult ElementwiseOp::verifyRegions() {
  RankedTensorType result = getType();
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    auto merged = broadcastShapes(shape, result.getShape());
    auto *dims = std::get_if<SmallVector<int64_t>>(&merged);
    if (!dims || ArrayRef<int64_t>(*dims) != result.getShape())
      return emitOpError() << "input #" << index << " of shape " << formatShape(shape)
                           << " does not broadcast to the result shape " << formatShape(result.getShape());
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body takes " << body.getNumArguments() << " block arguments but has "
                         << getInputs().size() << " inputs";
  for (auto [argument, input] : llvm::zip(body.getArguments(), getInputs())) {
    Type expected = elementwiseComputeType(tensorType(input).getElementType());
    if (argument.getType() != expected)
      return emitOpError() << "body block argument #" << argument.getArgNumber() << " must be " << expected
                           << " (the compute type of input #" << argument.getArgNumber() << "), got "
                           << argument.getType();
  }
  for (Operation &inner : body.without_terminator()) {
    // (Integer division is not speculatable, so not "pure"; it is free of memory effects, and the lowerings
    // guard its divisor.)
    StringRef dialect = inner.getDialect() ? inner.getDialect()->getNamespace() : "";
    if ((dialect != "arith" && dialect != "math") || !isMemoryEffectFree(&inner) || inner.getNumRegions() != 0)
      return emitOpError() << "body may hold only arith and math ops without memory effects or regions, got '"
                           << inner.getName() << "'";
    for (Type type : inner.getResultTypes())
      if (!type.isIntOrIndexOrFloat())
        return emitOpError() << "body may compute only scalars, got '" << inner.getName() << "' giving " << type;
  }
  Type yielded = elementwiseComputeType(result.getElementType());
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != 1 || yield.getValues()[0].getType() != yielded)
    return emitOpError() << "body must end in kiln.yield of one " << yielded << " value (the compute type of the "
                         << "result)";
  return success();
}

/// Checks a score_mod or mask_mod region: its leading block arguments (`leading`, named in `names`), then one per
/// mod operand of the operand's type, pure ops only, a kiln.yield of one `yielded` value.
static LogicalResult verifyMod(AttentionOp op, Region &region, StringRef name, ArrayRef<Type> leading,
                               StringRef names, Type yielded) {
  if (region.empty())
    return success();
  Block &body = region.front();
  OperandRange operands = op.getModOperands();
  if (body.getNumArguments() != leading.size() + operands.size())
    return op.emitOpError() << name << " takes " << body.getNumArguments() << " block arguments but needs " << names
                            << " and one per mod operand (" << leading.size() + operands.size() << ")";
  for (BlockArgument argument : body.getArguments()) {
    unsigned i = argument.getArgNumber();
    Type expected = i < leading.size() ? leading[i] : operands[i - leading.size()].getType();
    if (argument.getType() != expected)
      return op.emitOpError() << name << " block argument #" << i << " must be " << expected << ", got "
                              << argument.getType();
  }
  for (Operation &inner : body.without_terminator()) {
    if (!isPure(&inner) || inner.getNumRegions() != 0)
      return op.emitOpError() << name << " may hold only pure scalar ops without regions, got '" << inner.getName()
                              << "'";
    // The lowerings evaluate the region once per score: every value it computes is a scalar (tables are read
    // with tensor.extract).
    for (Type type : inner.getResultTypes())
      if (!type.isIntOrIndexOrFloat())
        return op.emitOpError() << name << " may compute only scalars, got '" << inner.getName() << "' giving "
                                << type;
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != 1 || yield.getValues()[0].getType() != yielded)
    return op.emitOpError() << name << " must end in kiln.yield of one " << yielded << " value";
  return success();
}

LogicalResult kiln::verifyFp32Precision(Operation *op, std::optional<StringRef> precision, Type element,
                                        StringRef operands) {
  if (!precision)
    return success();
  if (*precision != "tf32" && *precision != "ieee")
    return op->emitOpError() << "fp32_precision must be \"tf32\" or \"ieee\", got \"" << *precision << "\"";
  if (!element.isF32())
    return op->emitOpError() << "fp32_precision applies to f32 " << operands << ", got " << element;
  return success();
}

LogicalResult AttentionOp::verifyRegions() {
  if (!getModOperands().empty() && !hasScoreMod() && !hasMaskMod())
    return emitOpError() << "has mod operands but no score_mod or mask_mod region";
  Builder b(getContext());
  Type index = b.getIndexType();
  if (failed(verifyMod(*this, getScoreMod(), "score_mod", {b.getF32Type(), index, index, index, index},
                       "(score: f32, b, h, q_idx, kv_idx: index)", b.getF32Type())) ||
      failed(verifyMod(*this, getMaskMod(), "mask_mod", {index, index, index, index},
                       "(b, h, q_idx, kv_idx: index)", b.getI1Type())))
    return failure();
  if (std::optional<ArrayRef<int64_t>> tables = getNondecreasingTables()) {
    int64_t queries = getQ().getType().getDimSize(getSeqDim()), previous = -1;
    for (int64_t index : *tables) {
      if (index < 0 || index >= static_cast<int64_t>(getModOperands().size()))
        return emitOpError() << "nondecreasing_tables names mod operand " << index << ", but the op has "
                             << getModOperands().size();
      if (index <= previous)
        return emitOpError() << "nondecreasing_tables must list mod operands in increasing order, once each";
      previous = index;
      auto table = cast<RankedTensorType>(getModOperands()[index].getType());
      if (table.getRank() != 1 || !table.getElementType().isSignlessInteger() ||
          table.getElementType().getIntOrFloatBitWidth() < 32 || ShapedType::isDynamic(queries) ||
          table.isDynamicDim(0) || table.getDimSize(0) < queries)
        return emitOpError() << "nondecreasing table (mod operand " << index << ") must be a 1-D i32 or i64 "
                             << "tensor with at least one entry per query (" << queries << "), got " << table;
    }
  }
  return verifyEpilogue(*this, getEpilogue(), getEpilogueOperands(), getOut().getType());
}

void AttentionOp::takeVariantFrom(AttentionOp from) {
  setFp32PrecisionAttr(from.getFp32PrecisionAttr());
  getModOperandsMutable().assign(from.getModOperands());
  setNondecreasingTablesAttr(from.getNondecreasingTablesAttr());
  getScoreMod().takeBody(from.getScoreMod());
  getMaskMod().takeBody(from.getMaskMod());
}

std::optional<int64_t> SliceOp::getContiguousOffset() {
  ArrayRef<int64_t> input = getInput().getType().getShape(), result = getType().getShape();
  ArrayRef<int64_t> offsets = getOffsets(), strides = getStrides();
  // Row-major: past the innermost dimension the slice narrows, every dimension is whole; before it, one index.
  int64_t rank = input.size(), narrowed = rank;
  for (int64_t d = rank - 1; d >= 0; --d)
    if (result[d] != input[d]) {
      narrowed = d;
      break;
    }
  int64_t offset = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (result[d] != 1 && strides[d] != 1)
      return std::nullopt;
    if (d < narrowed && result[d] != 1)
      return std::nullopt;
    offset = offset * input[d] + offsets[d];
  }
  return offset;
}

std::optional<int64_t> kiln::planViewOffset(Operation *op) {
  if (isa<ReshapeOp>(op))
    return 0;
  auto slice = dyn_cast<SliceOp>(op);
  if (!slice)
    return std::nullopt;
  std::optional<int64_t> offset = slice.getContiguousOffset();
  if (!offset)
    return std::nullopt;
  int64_t bytes = *offset * std::max<int64_t>(slice.getType().getElementTypeBitWidth(), 8) / 8; // i1: a byte
  return bytes % 16 == 0 ? std::optional<int64_t>(bytes) : std::nullopt;
}

Value kiln::viewedStorage(Value value) {
  while (Operation *view = value.getDefiningOp()) {
    if (!isPlanView(view))
      break;
    value = view->getOperand(0);
  }
  return value;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

double AttentionOp::getEffectiveScale() {
  if (std::optional<APFloat> scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(getQ().getType().getDimSize(3)));
}

int64_t AttentionOp::getGroupSize() {
  return getQ().getType().getDimSize(getHeadsDim()) / getK().getType().getDimSize(getHeadsDim());
}

int64_t AttentionOp::getKvSplits() {
  std::optional<int64_t> chunk = getKvChunk();
  if (!chunk || *chunk < 1)
    return 0;
  return llvm::divideCeilSigned(getK().getType().getDimSize(getSeqDim()), *chunk);
}

bool AttentionOp::isSeqMajor() { return getLayout() && *getLayout() == "bshd"; }

bool AttentionOp::isOutSeqMajor() {
  if (std::optional<StringRef> outLayout = getOutLayout())
    return *outLayout == "bshd";
  return isSeqMajor();
}

LogicalResult AttentionOp::verify() {
  RankedTensorType q = getQ().getType(), k = getK().getType(), v = getV().getType();
  for (auto [name, layout] : {std::pair<StringRef, std::optional<StringRef>>{"layout", getLayout()},
                               {"out_layout", getOutLayout()}})
    if (layout && *layout != "bhsd" && *layout != "bshd")
      return emitOpError() << name << " must be \"bhsd\" or \"bshd\", got \"" << *layout << "\"";
  const int64_t headsDim = getHeadsDim(), seqDim = getSeqDim();
  StringRef layoutName = isSeqMajor() ? "[batch, seq, heads, head_dim]" : "[batch, heads, seq, head_dim]";
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"q", q}, {"k", k}, {"v", v}}) {
    if (type.getRank() != 4)
      return emitOpError() << "operand '" << name << "' must have rank 4 " << layoutName << ", got " << type;
  }
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"k", k}, {"v", v}}) {
    if (type.getElementType() != q.getElementType())
      return emitOpError() << "element type of '" << name << "' (" << type.getElementType()
                           << ") differs from 'q' (" << q.getElementType() << ")";
    if (type.getDimSize(0) != q.getDimSize(0))
      return emitOpError() << "batch size of '" << name << "' (dimension 0: " << type.getDimSize(0)
                           << ") differs from 'q' (" << q.getDimSize(0) << ")";
  }
  if (k.getDimSize(headsDim) == 0)
    return emitOpError() << "head count of 'k' (dimension " << headsDim << ") must be positive";
  if (v.getDimSize(headsDim) != k.getDimSize(headsDim))
    return emitOpError() << "head count of 'v' (dimension " << headsDim << ": " << v.getDimSize(headsDim)
                         << ") differs from 'k' (" << k.getDimSize(headsDim) << ")";
  if (q.getDimSize(headsDim) % k.getDimSize(headsDim) != 0)
    return emitOpError() << "head count of 'q' (" << q.getDimSize(headsDim)
                         << ") is not a multiple of the k/v head count (" << k.getDimSize(headsDim) << ")";
  if (v.getDimSize(seqDim) != k.getDimSize(seqDim))
    return emitOpError() << "sequence length of 'v' (dimension " << seqDim << ": " << v.getDimSize(seqDim)
                         << ") differs from 'k' (" << k.getDimSize(seqDim) << ")";
  if (k.getDimSize(seqDim) == 0)
    return emitOpError() << "sequence length of 'k' (dimension " << seqDim
                         << ") is 0; each query needs at least one key to attend to";
  if (k.getDimSize(3) != q.getDimSize(3))
    return emitOpError() << "head dim of 'k' (dimension 3: " << k.getDimSize(3) << ") differs from 'q' ("
                         << q.getDimSize(3) << ")";
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"q", q}, {"v", v}})
    if (type.getDimSize(3) == 0)
      return emitOpError() << "head dim of '" << name << "' (dimension 3) must be positive";

  int64_t batch = q.getDimSize(0), heads = q.getDimSize(headsDim), seqQ = q.getDimSize(seqDim),
          seqK = k.getDimSize(seqDim);
  if (getCausal() && seqQ > seqK)
    return emitOpError() << "causal attention aligns the mask bottom-right and needs seq_q <= seq_k, got seq_q = "
                         << seqQ << " and seq_k = " << seqK;
  if (failed(verifyFp32Precision(*this, getFp32Precision(), q.getElementType(), "q, k and v")))
    return failure();
  if (std::optional<APFloat> scale = getScale()) {
    if (!scale->isFiniteNonZero() || scale->isNegative())
      return emitOpError() << "scale must be a finite positive number, got " << scale->convertToDouble();
  }

  if (Value mask = getMask()) {
    RankedTensorType maskType = tensorType(mask);
    SmallVector<int64_t> scores{batch, heads, seqQ, seqK};
    if (maskType.getRank() > 4)
      return emitOpError() << "mask must have rank <= 4 to broadcast to [batch, heads, seq_q, seq_k], got "
                           << maskType;
    for (int64_t i = 0; i < maskType.getRank(); ++i) {
      int64_t dim = 4 - maskType.getRank() + i, size = maskType.getDimSize(i);
      if (size != 1 && size != scores[dim])
        return emitOpError() << "mask dimension " << i << " (" << size << ") does not broadcast to "
                             << formatShape(scores) << " (size " << scores[dim] << ")";
    }
  }

  // With an epilogue the stored element type is the epilogue's choice; a split attention stores f32 chunks.
  auto f32 = Float32Type::get(getContext());
  Type outElement = hasEpilogue() ? getOut().getType().getElementType() : q.getElementType();
  SmallVector<int64_t> outShape{batch, heads, seqQ, v.getDimSize(3)};
  if (isOutSeqMajor())
    outShape = {batch, seqQ, heads, v.getDimSize(3)};
  SmallVector<int64_t> lseShape{batch, heads, seqQ};
  if (std::optional<int64_t> chunk = getKvChunk()) {
    if (*chunk < 1)
      return emitOpError() << "kv_chunk must be positive, got " << *chunk;
    if (!getLse())
      return emitOpError() << "with kv_chunk needs the lse result: the chunks merge by their log-sum-exp";
    if (hasEpilogue() || isOutSeqMajor())
      return emitOpError() << "with kv_chunk stores [chunks, batch, heads, seq_q, head_dim] f32 partial results; "
                              "an epilogue or a seq-major output belongs to the kiln.merge_splits";
    outElement = f32;
    outShape.insert(outShape.begin(), getKvSplits());
    lseShape.insert(lseShape.begin(), getKvSplits());
  }
  auto expected = RankedTensorType::get(outShape, outElement);
  if (failed(verifyResultType(*this, getOut().getType(), expected)))
    return failure();
  if (Value lse = getLse()) {
    auto expectedLse = RankedTensorType::get(lseShape, f32);
    if (lse.getType() != expectedLse)
      return emitOpError() << "lse result type " << lse.getType() << " does not match the inferred type "
                           << expectedLse;
  }
  return success();
}

LogicalResult MergeSplitsOp::verify() {
  RankedTensorType parts = getParts().getType(), lse = getLse().getType();
  if (parts.getRank() != 5)
    return emitOpError() << "operand 'parts' must have rank 5 [chunks, batch, heads, seq, head_dim], got " << parts;
  if (parts.getDimSize(0) == 0)
    return emitOpError() << "operand 'parts' has no chunk to merge (dimension 0 is 0)";
  auto expectedLse = RankedTensorType::get(parts.getShape().drop_back(), lse.getElementType());
  if (lse != expectedLse)
    return emitOpError() << "operand 'lse' must be " << expectedLse << " (one per row of each chunk), got " << lse;
  if (getType().getShape() != parts.getShape().drop_front())
    return emitOpError() << "result shape " << formatShape(getType().getShape())
                         << " must be that of one chunk of 'parts', " << formatShape(parts.getShape().drop_front());
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisations and reductions
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), getType().getRank())))
    return failure();
  if (getType().getDimSize(getAxis()) == 0)
    return emitOpError() << "axis " << getAxis() << " of the input has size 0; softmax needs at least one element "
                            "to normalise over";
  return success();
}

LogicalResult LogSumExpOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyAxis(*this, getAxis(), input.getRank())))
    return failure();
  if (input.getDimSize(getAxis()) == 0)
    return emitOpError() << "axis " << getAxis() << " of the input has size 0; logsumexp needs at least one "
                            "element to reduce over";
  SmallVector<int64_t> shape(input.getShape());
  shape.erase(shape.begin() + getAxis());
  return verifyResultType(*this, getType(), RankedTensorType::get(shape, Float32Type::get(getContext())));
}

LogicalResult ReduceOp::verify() {
  RankedTensorType input = getInput().getType();
  ArrayRef<int64_t> axes = getAxes();
  if (axes.empty())
    return emitOpError() << "needs at least one axis";
  for (auto [index, axis] : llvm::enumerate(axes)) {
    if (failed(verifyAxis(*this, axis, input.getRank())))
      return failure();
    if (index > 0 && axis <= axes[index - 1])
      return emitOpError() << "axes must be unique and ascending, got " << formatShape(axes);
    // A sum over nothing is 0 but a max over nothing has no value; one rule for every kind keeps the
    // lowerings free of an empty-row case.
    if (input.getDimSize(axis) == 0)
      return emitOpError() << "axis " << axis << " of the input has size 0; " << stringifyReduceKind(getKind())
                           << " needs at least one element to reduce over";
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < input.getRank(); ++i) {
    if (!llvm::is_contained(axes, i))
      shape.push_back(input.getDimSize(i));
    else if (getKeepDims())
      shape.push_back(1);
  }
  if (getType().getElementType() != input.getElementType())
    return emitOpError() << "result element type " << getType().getElementType()
                         << " differs from the input element type " << input.getElementType();
  return verifyResultType(*this, getType(), RankedTensorType::get(shape, input.getElementType()));
}

/// Checks that a per-channel parameter of a norm is `[D]` with the input's element type.
static LogicalResult verifyChannelParameter(Operation *op, StringRef name, Value parameter,
                                            RankedTensorType input) {
  RankedTensorType type = tensorType(parameter);
  int64_t channels = input.getDimSize(input.getRank() - 1);
  if (type.getRank() != 1 || type.getDimSize(0) != channels)
    return op->emitOpError() << "'" << name << "' must have shape [" << channels
                             << "] (the last dimension of the input), got " << type;
  if (type.getElementType() != input.getElementType())
    return op->emitOpError() << "element type of '" << name << "' (" << type.getElementType()
                             << ") differs from the input (" << input.getElementType() << ")";
  return success();
}

/// Checks the operands and epsilon shared by RMSNorm and LayerNorm.
static LogicalResult verifyNorm(Operation *op, RankedTensorType input, APFloat epsilon) {
  if (input.getRank() < 1)
    return op->emitOpError() << "input must have rank >= 1 to normalise its last dimension";
  if (input.getDimSize(input.getRank() - 1) == 0)
    return op->emitOpError() << "the last dimension of the input (dimension " << input.getRank() - 1
                             << ") has size 0; there is nothing to normalise over";
  // -0.0 is a zero epsilon (an exporter's or a user's negated zero), not a negative one.
  if (!epsilon.isFinite() || (epsilon.isNegative() && !epsilon.isZero()))
    return op->emitOpError() << "epsilon must be finite and non-negative, got " << epsilon.convertToDouble();
  return success();
}

LogicalResult RmsNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyNorm(*this, input, getEpsilon())))
    return failure();
  return verifyChannelParameter(*this, "weight", getWeight(), input);
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(verifyNorm(*this, input, getEpsilon())) ||
      failed(verifyChannelParameter(*this, "weight", getWeight(), input)))
    return failure();
  if (Value bias = getBias())
    return verifyChannelParameter(*this, "bias", bias, input);
  return success();
}

int64_t RopeOp::getPositionDim() {
  if (std::optional<int64_t> dim = getSeqDim())
    return *dim;
  return getInput().getType().getRank() - 2;
}

bool RopeOp::hasFullTables() {
  return tensorType(getCos()).getRank() == 2 &&
         tensorType(getCos()).getDimSize(1) == getInput().getType().getShape().back();
}

LogicalResult RopeOp::verify() {
  RankedTensorType input = getInput().getType();
  if (input.getRank() < 2)
    return emitOpError() << "input must have rank >= 2 [..., seq, head_dim], got " << input;
  int64_t positionDim = getPositionDim();
  if (positionDim < 0 || positionDim >= input.getRank() - 1)
    return emitOpError() << "seq_dim must name a dimension before the last (0 to " << input.getRank() - 2
                         << "), got " << positionDim;
  int64_t seq = input.getDimSize(positionDim), dim = input.getDimSize(input.getRank() - 1);
  if (dim % 2 != 0)
    return emitOpError() << "head dim (last dimension of the input) must be even, got " << dim;
  RankedTensorType cos = tensorType(getCos()), sin = tensorType(getSin());
  if (cos.getRank() != 2 || cos.getDimSize(0) != seq || (cos.getDimSize(1) != dim / 2 && cos.getDimSize(1) != dim))
    return emitOpError() << "'cos' must have shape [" << seq << ", " << dim / 2 << "] ([seq, head_dim / 2]) or [" << seq
                         << ", " << dim << "] ([seq, head_dim]), got " << cos;
  if (sin.getShape() != cos.getShape())
    return emitOpError() << "'sin' must have the shape of 'cos', " << formatShape(cos.getShape()) << ", got " << sin;
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"cos", cos}, {"sin", sin}})
    if (type.getElementType() != input.getElementType())
      return emitOpError() << "element type of '" << name << "' (" << type.getElementType()
                           << ") differs from the input (" << input.getElementType() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult SelectOp::verify() { return verifyBroadcastingElementwise(*this, /*conditions=*/1); }

LogicalResult CompareOp::verify() {
  return verifyBroadcastingElementwise(*this, /*conditions=*/0, getLhs().getType().getElementType());
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError() << "changes the shape from " << formatShape(getInput().getType().getShape()) << " to "
                         << formatShape(getType().getShape()) << "; a cast only converts elements";
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Checks that the op keeps the element type of its input.
static LogicalResult verifySameElementType(Operation *op, RankedTensorType input, RankedTensorType result) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError() << "result element type " << result.getElementType()
                             << " differs from the input element type " << input.getElementType();
  return success();
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  ArrayRef<int64_t> permutation = getPermutation();
  if (static_cast<int64_t>(permutation.size()) != input.getRank())
    return emitOpError() << "permutation " << formatShape(permutation) << " has " << permutation.size()
                         << " entries but the input has rank " << input.getRank();
  SmallVector<bool> seen(permutation.size(), false);
  for (int64_t entry : permutation) {
    if (entry < 0 || entry >= input.getRank() || seen[entry])
      return emitOpError() << "permutation " << formatShape(permutation) << " is not a permutation of 0.."
                           << input.getRank() - 1;
    seen[entry] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t entry : permutation)
    shape.push_back(input.getDimSize(entry));
  return verifyResultType(*this, result, RankedTensorType::get(shape, input.getElementType()));
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  if (failed(verifySameElementType(*this, input, result)))
    return failure();
  FailureOr<int64_t> inputCount = checkedNumElements(*this, "input", input);
  if (failed(inputCount))
    return failure();
  FailureOr<int64_t> resultCount = checkedNumElements(*this, "result", result);
  if (failed(resultCount))
    return failure();
  if (*inputCount != *resultCount)
    return emitOpError() << "cannot reshape " << formatShape(input.getShape()) << " (" << *inputCount
                         << " elements) to " << formatShape(result.getShape()) << " (" << *resultCount
                         << " elements)";
  return success();
}

LogicalResult DimOp::verify() {
  int64_t rank = getSource().getType().getRank(), dim = getDimAttr().getValue().getSExtValue();
  if (dim < 0 || dim >= rank)
    return emitOpError() << "dimension " << dim << " is out of range for a tensor of rank " << rank;
  return success();
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  if (failed(verifySameElementType(*this, input, result)))
    return failure();
  if (input.getRank() > result.getRank())
    return emitOpError() << "cannot broadcast rank " << input.getRank() << " to the smaller rank "
                         << result.getRank();
  int64_t offset = result.getRank() - input.getRank();
  for (int64_t i = 0; i < input.getRank(); ++i) {
    int64_t size = input.getDimSize(i), target = result.getDimSize(offset + i);
    if (size != 1 && size != target)
      return emitOpError() << "input dimension " << i << " (" << size << ") does not broadcast to result dimension "
                           << offset + i << " (" << target << ")";
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  RankedTensorType first = tensorType(getInputs().front()), result = getType();
  if (failed(verifyAxis(*this, getAxis(), first.getRank())))
    return failure();
  int64_t axis = getAxis(), total = 0;
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    RankedTensorType type = tensorType(input);
    if (type.getElementType() != first.getElementType())
      return emitOpError() << "input #" << index << " has element type " << type.getElementType()
                           << " but input #0 has " << first.getElementType();
    if (type.getRank() != first.getRank())
      return emitOpError() << "input #" << index << " has rank " << type.getRank() << " but input #0 has rank "
                           << first.getRank();
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (d != axis && type.getDimSize(d) != first.getDimSize(d))
        return emitOpError() << "input #" << index << " dimension " << d << " is " << type.getDimSize(d)
                             << " but input #0 has " << first.getDimSize(d) << " (only axis " << axis
                             << " may differ)";
    }
    if (llvm::AddOverflow(total, type.getDimSize(axis), total))
      return emitOpError() << "the inputs' sizes along axis " << axis << " add up to more than int64 can count";
  }
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = total;
  return verifyResultType(*this, result, RankedTensorType::get(shape, first.getElementType()));
}

LogicalResult SliceOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  if (failed(verifySameElementType(*this, input, result)))
    return failure();
  ArrayRef<int64_t> offsets = getOffsets(), strides = getStrides();
  if (result.getRank() != input.getRank())
    return emitOpError() << "result rank " << result.getRank() << " differs from the input rank " << input.getRank();
  if (static_cast<int64_t>(offsets.size()) != input.getRank() ||
      static_cast<int64_t>(strides.size()) != input.getRank())
    return emitOpError() << "needs one offset and one stride per input dimension (" << input.getRank()
                         << "), got " << offsets.size() << " offsets and " << strides.size() << " strides";
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (offsets[d] < 0)
      return emitOpError() << "offset " << offsets[d] << " of dimension " << d << " is negative";
    if (strides[d] <= 0)
      return emitOpError() << "stride " << strides[d] << " of dimension " << d << " is not positive";
    int64_t size = result.getDimSize(d), inputSize = input.getDimSize(d);
    // offset + (size - 1) * stride < inputSize, written so that it cannot overflow.
    if (size > 0 && (offsets[d] >= inputSize || (size - 1) > (inputSize - 1 - offsets[d]) / strides[d]))
      return emitOpError() << "dimension " << d << " reads past the input size " << inputSize << " (offset "
                           << offsets[d] << ", size " << size << ", stride " << strides[d] << ")";
  }
  return success();
}

LogicalResult GatherOp::verify() {
  RankedTensorType table = getTable().getType(), indices = getIndices().getType();
  if (failed(verifyAxis(*this, getAxis(), table.getRank())))
    return failure();
  int64_t axis = getAxis();
  SmallVector<int64_t> shape(table.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, table.getShape().drop_front(axis + 1));
  return verifyResultType(*this, getType(), RankedTensorType::get(shape, table.getElementType()));
}

#define GET_OP_CLASSES
#include "Dialect/Kiln/KilnOps.cpp.inc"
