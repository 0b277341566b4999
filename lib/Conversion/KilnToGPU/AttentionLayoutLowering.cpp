//===- AttentionLayoutLowering.cpp - Attention lowered from its tiled IR by layout -===//
//
// A "mma_sync" attention reaches the GPU as kiln-tile, kiln-online-softmax, kiln-split-masked-tiles and
// kiln-assign-layouts leave it: an scf.forall over (batch, head, BQ query rows) whose body reads the Q tile, runs
// one or two scf.for loops over BK-key tiles (the unmasked tiles, then those that need the mask) that carry the
// running row max m, the row sum l and the accumulator, and stores acc / l (through the epilogue, if any) and the
// lse. Every value of the loop nest has the #kiln.mma_layout of one column of BQ / 16 warps, so this file maps
// it op by op, with what it shares with the matmul's lowering (MmaLayoutLowering.h):
//   - [BQ, X] tiles are mma.sync accumulator fragments (each warp 16 rows); [BQ] row vectors are two values per
//     thread (its rows lane / 4 and lane / 4 + 8), the same in the four lanes of a quad;
//   - the tile matmul whose lhs is read before the loops (Q K^T) reads it once into shared memory and keeps it
//     as A fragments in registers; its rhs (K), and the rhs of the matmul whose lhs is in registers (V), stream
//     through double-buffered shared-memory rings, rows padded by 16 bytes, the next key tile's cp.async copies
//     in flight while this one is used, across both loops; B fragments by ldmatrix (.trans for V);
//   - a matmul with a lhs in registers (P rounded to the input type) takes it as A fragments straight from the
//     accumulator fragments that computed it (same rows per thread), and one whose only user adds it to a tile
//     in registers accumulates into that tile's fragments;
//   - f32 q/k/v run m16n8k8 on TF32 tensor cores (operands rounded to nearest TF32, as cuBLAS and torch do when
//     TF32 is allowed): P's accumulator fragments become A fragments with each 8-key step's keys reordered, and
//     V's B fragments are read element by element in the same order;
//   - elementwise ops, linalg.generic bodies (the scale, the mask, exp2, the rescaling) run on each register,
//     reading row vectors by row, memory tiles (an additive mask) element by element and their position through
//     linalg.index; row reductions reduce within the thread and then across the quad by shuffles, except the
//     running row sum, which stays each lane's share until the loops end (QuadPartialSums.h); a row maximum of
//     scores scaled by a positive constant is taken unscaled and scaled once, so that each scaled score feeds
//     only the exponent's subtraction, and the kernel's f32 arithmetic may contract into FMAs (exp2(s * scale -
//     m) is one FFMA and an MUFU per score, as FlashAttention computes it);
//   - the lengths (kiln.dim) are the kernel's size parameters Sq and Sk, and every buffer dimension that the
//     query loop or a key loop walks takes them as its extent: one kernel serves every length that keeps the
//     same whole or partial last tiles (a decode step against a growing KV cache).
// A "wgmma" attention (sm_90a; kiln-select-config gives it to bf16/f16 attentions at head dims 64 and 128) lowers the
// same loop nest with the same layout, which is wgmma's accumulator (warp w of a warpgroup holds its rows 16w
// to 16w + 15): K and V are 128-byte swizzled panels, both tile matmuls are wgmma.mma_async with A from registers
// (Q's fragments, P's), and with two or more stages the key loop is software-pipelined as FlashAttention-3 does
// within a warpgroup: it carries its tile's scores in and starts the next tile's Q K^T before this tile's
// softmax, so that the tensor cores run while the softmax does (the rings then have three slots); with one stage
// the loop is sequential and takes fewer registers.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "Conversion/KilnToLinalg/LinalgBuilders.h"
#include "KernelBuilding.h"
#include "MmaLayoutLowering.h"
#include "QuadPartialSums.h"
#include "Transforms/Transforms.h"
#include "WgmmaBuilding.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

static constexpr StringLiteral kWhat = "mma-layout attention lowering";

/// The depth of one tensor-core step: m16n8k16 for 16-bit operands, m16n8k8 (TF32) for f32 ones.
static int64_t stepDepth(Type element) { return element.isF32() ? 8 : 16; }

namespace {

/// Lowers the body of one tiled mma_sync attention into the gpu.func under construction. The result tile (the
/// accumulator, [BQ, Dv]) is the matmul lowering's [bm, bn] tile, so its epilogue and stores are that
/// lowering's; the score tiles ([BQ, BK]) are register tiles of their own width.
class MmaAttentionLowering : public MmaMatmulLowering {
public:
  MmaAttentionLowering(OpBuilder &b, Location loc, int64_t bq, int64_t bk, int64_t valueDim, MmaLayoutAttr layout,
                       int64_t threads)
      : MmaMatmulLowering(b, loc, bq, valueDim, bk, /*stages=*/2, layout, threads) {}

  /// The Q tile (one slot) and the K and V rings (two slots), placed by the caller.
  OperandRing ringQ, ringK, ringV;
  /// The "wgmma" lowering (sm_90a): the K and V rings are swizzled panels at these byte offsets of the shared
  /// memory that `descriptors` describes, and the tile matmuls run on warpgroup MMAs with A from registers.
  bool wgmma = false;
  std::optional<DescriptorBuilder> descriptors;
  int64_t ringKBytes = 0, ringVBytes = 0;
  /// With wgmma and a config of two or more stages: the key loop multiplies the next tile's Q K^T while this
  /// tile's softmax runs, and so needs the next tile landed a tile ahead: its K and V rings have three slots.
  bool pipelined = false;
  int64_t ringSlots = 2;

  /// Makes the kernel size-generic in the lengths: `seqQ` and `seqK` (kernel values) are the extents of the
  /// buffer dimensions that the forall's query iteration and the key loops walk, and kiln.dim reads them.
  void bindLengths(scf::ForallOp forall, Value seqQ, Value seqK);

  /// Lowers the forall's body for this block's iteration.
  LogicalResult lowerAttentionBody(scf::ForallOp forall);

  /// The lengths compiled for (bindLengths), the launch's sizes.
  int64_t compiledSeqQ = 0, compiledSeqK = 0;

protected:
  LogicalResult lowerOp(Operation *op) override;

private:
  /// The fragments per warp of a [BQ, X] tile value.
  static int64_t fragsOf(Value tile) { return cast<RankedTensorType>(tile.getType()).getDimSize(1) / 8; }
  /// The key loops that follow `first` in the forall's body (each reads its key tiles and carries the state).
  SmallVector<scf::ForOp> keyLoopsFrom(scf::ForOp first);
  /// The `scf.if (split < end)` after `loop` that runs its one masked key tile (kiln-split-masked-tiles), if any.
  static scf::IfOp lastTileAfter(scf::ForOp loop);
  /// Lowers consecutive key loops (and the last tile after them) as one pipeline over the K and V rings.
  LogicalResult lowerKeyLoops(SmallVector<scf::ForOp> loops);
  /// Lowers the addressing of `loop`'s body for the key tile at `keyStart` and copies its K and V tiles into
  /// ring slot `slot`, or zeros where `enabled` is false; returns the cp.async group.
  FailureOr<Value> stageKeyTile(scf::ForOp loop, Value keyStart, Value enabled, Value slot);
  /// The two tile matmuls of a key loop: the one whose lhs is read before the loop (Q K^T) and the one whose lhs
  /// is in registers (P V); their rhs are the tiles the rings hold.
  LogicalResult findProducts(scf::ForOp loop, MatmulOp &scores, MatmulOp &values);
  /// Lowers a matmul of the key loop's body (its operands in registers or in ring slot `slot`).
  LogicalResult lowerProduct(MatmulOp product, Value slot);
  /// The A fragments of a key loop's matmul, one per k16 step (Q's, loaded before the loops, or P's, packed from
  /// its registers), and the ring its rhs is in.
  FailureOr<SmallVector<SmallVector<Value>>> productLhs(MatmulOp product, const OperandRing *&ring);
  /// The same product on wgmma.mma_async m64nNk16, A from registers and B from the swizzled ring slot.
  LogicalResult lowerWgmmaProduct(MatmulOp product, Value slot);
  /// The wgmma B descriptors of the K (`keys`) or V tile in ring slot `slot`, one per k16 step of `steps`.
  SmallVector<Value> ringDescriptors(bool keys, Value slot, int64_t steps);
  /// Starts Q K^T for the key tile in ring slot `slot` (A: Q's fragments `q`) and returns its accumulator,
  /// committed but not waited for.
  Value issueScores(ArrayRef<SmallVector<Value>> q, Value slot);
  /// After a wait for cp.async copies: makes them visible to the warpgroup MMAs (the async proxy).
  void fenceForWgmma() {
    if (wgmma)
      fenceCopiesForWgmma(b, loc);
  }
  /// Evaluates an elementwise kiln op or 2-D linalg.generic on every register of its tile.
  LogicalResult lowerElementwise(Operation *op);
  /// A row reduction ([BQ, X] -> [BQ]): within the thread, across the quad, then with the init.
  LogicalResult lowerRowReduction(linalg::GenericOp op);
  /// A 1-D linalg.generic of row vectors, on each of this thread's rows.
  LogicalResult lowerRowGeneric(linalg::GenericOp op);
  /// Element `r` of a tile operand of an elementwise op: a register, a scalar constant, a cast of either, or an
  /// element of a tile in memory.
  FailureOr<Value> elementAt(Value tile, int64_t r, int64_t frags, Operation *user);
  /// The store of a row vector's valid part (the lse) by the first lane of each quad.
  LogicalResult lowerRowInsert(tensor::ParallelInsertSliceOp op, const GlobalTensor &destination);
  /// A scalar scf.while before the key loops (a mask's search of a sorted table, MaskBounds.cpp): the same loop
  /// on every thread, its ops lowered as the rest of the scalar prologue.
  LogicalResult lowerScalarWhile(scf::WhileOp loop);
  /// Starts the copy of the Q tile (the lhs of `scores`, Q K^T) into its slot (one cp.async group,
  /// `queryGroup`). It starts as soon as Q's slice is lowered, before the scalar prologue, so that a mask's
  /// table reads and searches run while it lands rather than before it is asked for.
  LogicalResult startQueryCopy(MatmulOp scores);
  /// The Q tile's cp.async group, once started.
  Value queryGroup;

  /// The A fragments (per k16 step) of a matmul lhs read before the key loops.
  DenseMap<Value, SmallVector<SmallVector<Value>>> aFragments;
  /// The row sums that the key loops being lowered keep as each lane's share (no quad shuffles until the end).
  QuadPartialSums quadShares;
  /// Adds the quad's shares of the carried row sums in `state` (the loops' flat state, `widths` values per iter
  /// arg): what the loops' final results hold.
  void sumQuadShares(SmallVectorImpl<Value> &state, ArrayRef<int64_t> widths);
  /// With wgmma: this key tile's scores, multiplied in the previous iteration (or before the loops), which the
  /// Q K^T product of the key loop's body takes instead of multiplying.
  std::optional<SmallVector<Value>> carriedScores;
};

} // namespace

/// The first non-null length that `offset` walks.
static Value walkedLength(Value offset, Value queryIv, ArrayRef<Value> keyIvs, Value seqQ, Value seqK) {
  if (offset == queryIv)
    return seqQ;
  if (llvm::is_contained(keyIvs, offset))
    return seqK;
  return Value();
}

void MmaAttentionLowering::bindLengths(scf::ForallOp forall, Value seqQ, Value seqK) {
  Value queryIv = forall.getInductionVars().back();
  SmallVector<Value> keyIvs;
  for (auto loop : forall.getBody()->getOps<scf::ForOp>())
    keyIvs.push_back(loop.getInductionVar());
  // A dimension that both the query loop and a key loop walk (one buffer passed as q and as k) stays static:
  // one extent cannot be read in tiles of BQ and of BK; the kernel is then compiled for its one length.
  DenseSet<std::pair<Value, int64_t>> shared;
  auto account = [&](GlobalTensor &global, ArrayRef<OpFoldResult> offsets) {
    if (global.extents.empty())
      global.extents.assign(global.shape.size(), Value());
    for (auto [d, offset] : llvm::enumerate(offsets)) {
      auto value = dyn_cast<Value>(offset);
      Value length = value ? walkedLength(value, queryIv, keyIvs, seqQ, seqK) : Value();
      if (!length)
        continue;
      (length == seqQ ? compiledSeqQ : compiledSeqK) = global.shape[d];
      Value &extent = global.extents[d];
      if (extent && extent != length)
        shared.insert({global.buffer, static_cast<int64_t>(d)});
      extent = shared.contains({global.buffer, static_cast<int64_t>(d)}) ? Value() : length;
    }
  };
  forall.getBody()->walk([&](tensor::ExtractSliceOp slice) {
    if (auto global = globals.find(slice.getSource()); global != globals.end())
      account(global->second, slice.getMixedOffsets());
  });
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = cast<tensor::ParallelInsertSliceOp>(&op);
    auto result = cast<BlockArgument>(insert.getDest()).getArgNumber() - forall.getRank();
    account(outputs[result], insert.getMixedOffsets());
  }
  output = outputs[0];
  // A query loop of one iteration reads the rows at offset 0 (folded): the length is still the loop's extent.
  compiledSeqQ = *getConstantIntValue(forall.getMixedUpperBound().back());
  setLoopExtent(queryIv, seqQ);
  setExtentTile(seqQ, bm);
  setExtentTile(seqK, bk);
}

SmallVector<scf::ForOp> MmaAttentionLowering::keyLoopsFrom(scf::ForOp first) {
  SmallVector<scf::ForOp> loops{first};
  for (Operation *next = first->getNextNode(); next; next = next->getNextNode()) {
    auto loop = dyn_cast<scf::ForOp>(next);
    if (!loop)
      break;
    if (!llvm::equal(loop.getInitArgs(), loops.back().getResults()))
      break;
    loops.push_back(loop);
  }
  return loops;
}

scf::IfOp MmaAttentionLowering::lastTileAfter(scf::ForOp loop) {
  Operation *next = loop->getNextNode();
  if (isa_and_nonnull<arith::CmpIOp>(next))
    next = next->getNextNode(); // the branch's condition
  auto last = dyn_cast_or_null<scf::IfOp>(next);
  auto reached = last ? last.getCondition().getDefiningOp<arith::CmpIOp>() : arith::CmpIOp();
  if (!reached || reached.getPredicate() != arith::CmpIPredicate::slt || !last.elseBlock() ||
      !llvm::equal(last.elseYield().getOperands(), loop.getResults()))
    return {};
  return last;
}

LogicalResult MmaAttentionLowering::findProducts(scf::ForOp loop, MatmulOp &scores, MatmulOp &values) {
  for (auto product : loop.getBody()->getOps<MatmulOp>()) {
    Operation *lhs = product.getLhs().getDefiningOp();
    if (lhs && !loop->isAncestor(lhs) && !scores)
      scores = product;
    else if (!values)
      values = product;
    else
      return product.emitOpError() << kWhat << ": a key loop holds two tile matmuls";
  }
  if (!scores || !values)
    return loop.emitOpError() << kWhat << ": a key loop multiplies a tile read before it (Q K^T) and one in "
                                          "registers (P V)";
  return success();
}

FailureOr<Value> MmaAttentionLowering::stageKeyTile(scf::ForOp loop, Value keyStart, Value enabled, Value slot) {
  mapping.map(loop.getInductionVar(), keyStart);
  for (Operation &op : loop.getBody()->without_terminator()) {
    bool tableRead = isa<tensor::ExtractOp>(op) && globals.count(cast<tensor::ExtractOp>(op).getTensor());
    bool addressing =
        isa<tensor::ExtractSliceOp, tensor::PadOp, tensor::InsertSliceOp, tensor::DimOp, affine::AffineMinOp,
            affine::AffineApplyOp>(op) ||
        (isa<arith::ArithDialect>(op.getDialect()) &&
         llvm::all_of(op.getResultTypes(), [](Type t) { return t.isIndex(); }));
    // A table read (a paged cache's page id) loads the element; addressing is recomputed for this tile.
    if ((tableRead && failed(lowerOp(&op))) || (addressing && failed(lowerAddressing(&op, kWhat))))
      return failure();
  }
  MatmulOp scores, values;
  if (failed(findProducts(loop, scores, values)))
    return failure();
  auto keys = globalTiles.find(scores.getRhs()), rows = globalTiles.find(values.getRhs());
  if (keys == globalTiles.end() || rows == globalTiles.end() || keys->second.dims.size() != 2 ||
      rows->second.dims.size() != 2 || !scores.getTransposeRhs() || values.getTransposeRhs())
    return loop.emitOpError() << kWhat << ": the key loop must read K ([keys, features], multiplied transposed) "
                                          "and V ([keys, features]) tiles of kernel buffers";
  SmallVector<Value> tokens;
  copyTile(keys->second, ringK, slot, enabled, tokens);
  copyTile(rows->second, ringV, slot, enabled, tokens);
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  return nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens).getResult();
}

FailureOr<Value> MmaAttentionLowering::elementAt(Value tile, int64_t r, int64_t frags, Operation *user) {
  if (auto it = registers.find(tile); it != registers.end())
    return it->second[r];
  if (auto constant = tile.getDefiningOp<ConstantOp>()) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!splat || !isa<FloatType>(splat.getElementType()))
      return user->emitOpError() << kWhat << ": a constant operand must be a float splat";
    return arith::ConstantOp::create(b, loc, splat.getSplatValue<FloatAttr>()).getResult();
  }
  if (auto castOp = tile.getDefiningOp<CastOp>()) {
    FailureOr<Value> input = elementAt(castOp.getInput(), r, frags, user);
    if (failed(input))
      return failure();
    return lowering::narrow(b, loc, lowering::widen(b, loc, *input), castOp.getType().getElementType());
  }
  // A tile in memory, broadcast along its dimensions of one element.
  auto type = cast<RankedTensorType>(tile.getType());
  if (type.getRank() != 2)
    return user->emitOpError() << kWhat << ": a tile operand must be [rows, columns]";
  Value row = type.getDimSize(0) == 1 ? im.c(0) : registerRow(r, frags);
  Value column = type.getDimSize(1) == 1 ? im.c(0) : registerColumn(r, frags);
  return memoryElement(tile, {row, column}, user);
}

LogicalResult MmaAttentionLowering::lowerElementwise(Operation *op) {
  Value result = op->getResult(0);
  int64_t frags = fragsOf(result);
  int64_t count = fragsM * frags * 4;
  SmallVector<Value> values;
  auto generic = dyn_cast<linalg::GenericOp>(op);
  for (int64_t r = 0; r < count; ++r) {
    if (generic) {
      FailureOr<Value> value = epilogueValue(generic, r, frags);
      if (failed(value))
        return failure();
      values.push_back(*value);
      continue;
    }
    FailureOr<Value> lhs = elementAt(op->getOperand(0), r, frags, op);
    FailureOr<Value> rhs = elementAt(op->getOperand(1), r, frags, op);
    if (failed(lhs) || failed(rhs))
      return failure();
    Value x = lowering::widen(b, loc, *lhs), y = lowering::widen(b, loc, *rhs);
    Value value;
    if (isa<AddOp>(op))
      value = arith::AddFOp::create(b, loc, x, y);
    else if (isa<SubOp>(op))
      value = arith::SubFOp::create(b, loc, x, y);
    else if (isa<MulOp>(op))
      value = arith::MulFOp::create(b, loc, x, y);
    else if (isa<DivOp>(op))
      value = arith::DivFOp::create(b, loc, x, y);
    else if (isa<MaxOp>(op))
      value = arith::MaximumFOp::create(b, loc, x, y);
    else if (isa<MinOp>(op))
      value = arith::MinimumFOp::create(b, loc, x, y);
    else
      return op->emitOpError() << kWhat << ": no lowering for this op in an attention kernel";
    values.push_back(lowering::narrow(b, loc, value, cast<RankedTensorType>(result.getType()).getElementType()));
  }
  registers[result] = std::move(values);
  return success();
}

/// Combines each of `values` over the four lanes of its quad (xor shuffles by 1, then by 2, the values'
/// shuffles interleaved) with `apply`.
static void combineQuad(OpBuilder &b, Location loc, MutableArrayRef<Value> values,
                        function_ref<Value(Value, Value)> apply) {
  for (int32_t offset : {1, 2})
    for (Value &value : values)
      value = apply(value, gpu::ShuffleOp::create(b, loc, value, offset, 32, gpu::ShuffleMode::XOR).getShuffleResult());
}

/// `value` as (x, factor) when it is x scaled by a chain of multiplies (either operand order) and divisions by
/// positive normal f32 constants whose running product stays a normal f32, x the first value of the chain that
/// is no such scaling; factor is then the product of the chain's factors (1 when `value` is no scaling).
static std::pair<Value, double> positiveScaling(Value value) {
  double factor = 1;
  while (std::optional<std::pair<Value, double>> scaling = constantScalingOf(value.getDefiningOp())) {
    if (!(scaling->second > 0) || !std::isnormal(static_cast<float>(factor * scaling->second)))
      break;
    factor *= scaling->second;
    value = scaling->first;
  }
  return {value, factor};
}

/// If `combine` takes a maximum and every register of `registers` is a value scaled by constants (a chain of
/// multiplies and divisions by positive constants: the softmax scale and log2(e), a softcap's cap) whose
/// product, rounded to f32, is the same for all: replaces each by that value and returns the product as an f32
/// constant; else null. A register that is no scaling at all leaves them as they are. (foldConstantScales then
/// multiplies each register's value by the same rounded product where the chain has two constants; a longer
/// chain it folds step by step, an ulp or so apart, which leaves a probability at most an ulp or so above 1.)
static Value scaledMaximumFactor(OpBuilder &b, Location loc, Operation *combine, SmallVectorImpl<Value> &registers) {
  if (!isa<arith::MaximumFOp, arith::MaxNumFOp>(combine) || registers.empty())
    return Value();
  std::optional<float> factor;
  SmallVector<Value> unscaled;
  for (Value reg : registers) {
    auto [base, scale] = positiveScaling(reg);
    if (base == reg || (factor && *factor != static_cast<float>(scale)))
      return Value();
    factor = static_cast<float>(scale);
    unscaled.push_back(base);
  }
  if (!std::isnormal(*factor))
    return Value();
  registers.assign(unscaled.begin(), unscaled.end());
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(*factor));
}

/// The one combining op of a reduction's body (its result yielded, its operands the two block arguments).
static Operation *combiner(linalg::GenericOp op) {
  Block &body = op->getRegion(0).front();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return nullptr;
  Operation &combine = body.front();
  if (!isa<arith::AddFOp, arith::MulFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
           arith::MinNumFOp>(combine) ||
      body.getTerminator()->getOperand(0) != combine.getResult(0) ||
      !llvm::is_contained(combine.getOperands(), body.getArgument(0)) ||
      !llvm::is_contained(combine.getOperands(), body.getArgument(1)))
    return nullptr;
  return &combine;
}

LogicalResult MmaAttentionLowering::lowerRowReduction(linalg::GenericOp op) {
  Operation *combine = combiner(op);
  Value input = op.getDpsInputs()[0];
  auto tile = registers.find(input);
  auto init = rowValues.find(op.getDpsInits()[0]);
  if (!combine || op.getNumDpsInputs() != 1 || tile == registers.end() || init == rowValues.end() ||
      !op.getIndexingMapsArray()[0].isIdentity())
    return op.emitOpError() << kWhat << ": a row reduction combines the registers of one tile with one "
                                        "associative op into a row vector";
  auto apply = [&](Value x, Value y) {
    IRMapping operands;
    operands.map(combine->getOperand(0), x);
    operands.map(combine->getOperand(1), y);
    return b.clone(*combine, operands)->getResult(0);
  };
  int64_t frags = fragsOf(input);
  // The maximum of a tile scaled by one positive constant is the scaled maximum (rounding is monotonic): the
  // rows' maxima of the unscaled registers, scaled once, leave the scaled registers to the exponent's
  // subtraction alone, which they then contract into.
  SmallVector<Value> registersIn = tile->second;
  Value scale = scaledMaximumFactor(b, loc, combine, registersIn);
  // The thread's registers in order, each into its row's partial (the rows' chains interleave).
  SmallVector<Value> partials(fragsM * 2), result;
  for (int64_t r = 0, count = fragsM * frags * 4; r < count; ++r) {
    Value &partial = partials[rowSlot(r, frags)];
    partial = partial ? apply(partial, registersIn[r]) : registersIn[r];
  }
  // A share of a sum (see QuadPartialSums.h) stays in this lane: the quad adds it after the loops.
  if (quadShares.values.contains(op.getResult(0))) {
    rowValues[op.getResult(0)] = std::move(partials);
    return success();
  }
  // The quad's four lanes hold the rows' other columns.
  combineQuad(b, loc, partials, apply);
  for (auto [initial, partial] : llvm::zip(init->second, partials))
    result.push_back(apply(initial, scale ? arith::MulFOp::create(b, loc, partial, scale) : partial));
  rowValues[op.getResult(0)] = std::move(result);
  return success();
}

void MmaAttentionLowering::sumQuadShares(SmallVectorImpl<Value> &state, ArrayRef<int64_t> widths) {
  int64_t at = 0;
  for (auto [carried, width] : llvm::zip(quadShares.carried, widths)) {
    if (carried)
      combineQuad(b, loc, MutableArrayRef<Value>(state).slice(at, width),
                  [&](Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); });
    at += width;
  }
}

LogicalResult MmaAttentionLowering::lowerRowGeneric(linalg::GenericOp op) {
  Block &body = op->getRegion(0).front();
  SmallVector<Value> result;
  for (int64_t slot = 0; slot < fragsM * 2; ++slot) {
    IRMapping scalars;
    for (auto [input, argument] : llvm::zip(op.getDpsInputs(), body.getArguments())) {
      auto it = rowValues.find(input);
      if (it == rowValues.end())
        return op.emitOpError() << kWhat << ": a row generic reads row vectors";
      scalars.map(argument, it->second[slot]);
    }
    body.walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (!op->isAncestor(operand.getParentRegion()->getParentOp()) && !scalars.contains(operand))
          scalars.map(operand, index(operand));
    });
    for (Operation &inner : body.without_terminator())
      b.clone(inner, scalars);
    result.push_back(scalars.lookupOrDefault(body.getTerminator()->getOperand(0)));
  }
  rowValues[op.getResult(0)] = std::move(result);
  return success();
}

FailureOr<SmallVector<SmallVector<Value>>> MmaAttentionLowering::productLhs(MatmulOp product,
                                                                          const OperandRing *&ring) {
  Type element = cast<MemRefType>(ringK.shared.getType()).getElementType();
  if (cast<RankedTensorType>(product.getLhs().getType()).getElementType() != element)
    return product.emitOpError() << kWhat << ": the lhs must be rounded to the rhs's type first";
  // In the accumulator layout, fragments 2k and 2k + 1 of P hold the columns of step k.
  if (auto loaded = aFragments.find(product.getLhs()); loaded != aFragments.end()) {
    ring = &ringK;
    return loaded->second;
  }
  auto p = registers.find(product.getLhs());
  if (p == registers.end())
    return product.emitOpError() << kWhat << ": the lhs of a key loop's matmul is Q, read before the loop, or "
                                            "a tile in registers";
  ring = &ringV;
  SmallVector<SmallVector<Value>> a;
  const SmallVector<Value> &r = p->second;
  if (element.isF32()) {
    // TF32 steps of 8 keys, one accumulator fragment each, which holds keys 2t and 2t + 1 of rows g and g + 8
    // (lane = 4g + t) where the A fragment wants keys t and t + 4: the step's keys are taken in the order 0, 2,
    // 4, 6, 1, 3, 5, 7 (A column t is key 2t, column t + 4 key 2t + 1), and V's rows are read in the same order
    // (lowerProduct), which leaves the sum over the keys as it is.
    bool split = product.getFp32Precision() == "ieee";
    for (int64_t kk = 0, steps = fragsOf(product.getLhs()); kk < steps; ++kk)
      a.push_back(tf32Registers(b, loc, {r[4 * kk], r[4 * kk + 2], r[4 * kk + 1], r[4 * kk + 3]}, split));
    return a;
  }
  auto pair = [&](int64_t i) -> Value {
    Value packed =
        vector::FromElementsOp::create(b, loc, VectorType::get({2}, element), ValueRange{r[i], r[i + 1]});
    if (element.isF16())
      return packed;
    Value word = vector::BitCastOp::create(b, loc, VectorType::get({1}, b.getI32Type()), packed);
    return vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
  };
  for (int64_t kk = 0, steps = fragsOf(product.getLhs()) / 2; kk < steps; ++kk)
    a.push_back({pair(8 * kk), pair(8 * kk + 2), pair(8 * kk + 4), pair(8 * kk + 6)});
  return a;
}

LogicalResult MmaAttentionLowering::lowerProduct(MatmulOp product, Value slot) {
  if (wgmma)
    return lowerWgmmaProduct(product, slot);
  Type element = cast<MemRefType>(ringK.shared.getType()).getElementType();
  int64_t frags = fragsOf(product.getResult());
  auto fragment = VectorType::get({4}, b.getF32Type());
  // A product whose one user adds it to a tile in registers accumulates into that tile.
  auto add = product->hasOneUse() ? dyn_cast<AddOp>(*product->user_begin()) : AddOp();
  Value other = !add ? Value() : add.getLhs() == product.getResult() ? add.getRhs() : add.getLhs();
  SmallVector<Value> accs;
  if (other && registers.count(other))
    accs = fragmentsOf(registers[other]);
  else
    accs.assign(frags, arith::ConstantOp::create(b, loc, DenseElementsAttr::get(fragment, 0.0f)));
  const OperandRing *ring = nullptr;
  FailureOr<SmallVector<SmallVector<Value>>> a = productLhs(product, ring);
  if (failed(a))
    return failure();
  Value base = im.mul(slot, ring->slotElements);
  bool kMajor = !product.getTransposeRhs(), split = product.getFp32Precision() == "ieee";
  int64_t depth = stepDepth(element);
  for (int64_t kk = 0; kk < static_cast<int64_t>(a->size()); ++kk) {
    if (element.isF32() && kMajor) {
      // V's TF32 B fragments element by element (ldmatrix transposes only 16-bit elements): lane 4g + t takes
      // rows (keys) 2t and 2t + 1 of the step, the order of P's A fragments, in column g of each 8-column block.
      Value key = im.add(im.mul(im.rem(lane, 4), 2), kk * depth);
      for (int64_t j = 0; j < frags; ++j) {
        Value column = im.add(im.div(lane, 4), j * 8);
        SmallVector<Value> fragment;
        for (int64_t next = 0; next < 2; ++next) {
          Value at = im.add(base, im.add(im.mul(im.add(key, next), ring->stride), column));
          fragment.push_back(memref::LoadOp::create(b, loc, ring->shared, ValueRange{at}));
        }
        accs[j] = mmaSync(b, loc, (*a)[kk], tf32Registers(b, loc, fragment, split), accs[j], element);
      }
      continue;
    }
    for (int64_t j = 0; j < frags; j += 2) {
      auto [first, second] = loadBFragmentPair(b, loc, im, ring->shared, base, ring->stride, lane, im.c(kk * depth),
                                               im.c(j * 8), kMajor);
      if (element.isF32()) {
        first = tf32Registers(b, loc, first, split);
        second = tf32Registers(b, loc, second, split);
      }
      accs[j] = mmaSync(b, loc, (*a)[kk], first, accs[j], element);
      if (j + 1 < frags)
        accs[j + 1] = mmaSync(b, loc, (*a)[kk], second, accs[j + 1], element);
    }
  }
  registers[other && registers.count(other) ? add.getResult() : product.getResult()] = registersOf(accs);
  return success();
}

LogicalResult MmaAttentionLowering::lowerWgmmaProduct(MatmulOp product, Value slot) {
  Type element = cast<MemRefType>(ringK.shared.getType()).getElementType();
  int64_t n = cast<RankedTensorType>(product.getResult().getType()).getDimSize(1);
  auto add = product->hasOneUse() ? dyn_cast<AddOp>(*product->user_begin()) : AddOp();
  Value other = !add ? Value() : add.getLhs() == product.getResult() ? add.getRhs() : add.getLhs();
  bool accumulates = other && registers.count(other);
  const OperandRing *ring = nullptr;
  FailureOr<SmallVector<SmallVector<Value>>> a = productLhs(product, ring);
  if (failed(a))
    return failure();
  bool keys = ring == &ringK;
  if (keys && carriedScores && !accumulates) {
    registers[product.getResult()] = *carriedScores;
    return success();
  }
  SmallVector<Value> descriptorsB = ringDescriptors(keys, slot, a->size());
  Value accumulator = accumulates ? fragmentsAccumulator(b, loc, fragmentsOf(registers[other]))
                                  : zeroAccumulator(b, loc, n);
  fenceWgmmaOperands(b, loc);
  accumulator = issueWgmmaRegisterAGroup(b, loc, accumulator, *a, descriptorsB, n, element.isBF16(),
                                         /*bNMajor=*/!keys);
  // The wait passes the accumulator and the A registers through, so that nothing reads or reuses them early.
  SmallVector<Value> read;
  for (const SmallVector<Value> &step : *a)
    read.append(step.begin(), step.end());
  accumulator = wgmmaWaitFor(b, loc, 0, accumulator, read);
  registers[accumulates ? add.getResult() : product.getResult()] =
      registersOf(accumulatorFragments(b, loc, accumulator));
  return success();
}

SmallVector<Value> MmaAttentionLowering::ringDescriptors(bool keys, Value slot, int64_t steps) {
  // K ([keys, D], K-major: the keys are wgmma's N) steps through 64-feature panels, 32 bytes per k16 step; V
  // ([keys, Dv], N-major: 64-column panels `rows` rows apart) steps 16 key rows of 128 bytes. 8-row groups are
  // 1024 bytes apart in both.
  const OperandRing &ring = keys ? ringK : ringV;
  Value slotStart = im.add(im.c(keys ? ringKBytes : ringVBytes), im.mul(slot, ring.slotElements * 2));
  SmallVector<Value> result;
  for (int64_t kk = 0; kk < steps; ++kk) {
    int64_t offset = keys ? (kk / 4) * ring.rows * kSwizzleRowBytes + (kk % 4) * 32 : kk * 16 * kSwizzleRowBytes;
    result.push_back(
        descriptors->get(slotStart, keys ? 16 : ring.rows * kSwizzleRowBytes, 8 * kSwizzleRowBytes, offset));
  }
  return result;
}

Value MmaAttentionLowering::issueScores(ArrayRef<SmallVector<Value>> q, Value slot) {
  Type element = cast<MemRefType>(ringK.shared.getType()).getElementType();
  SmallVector<Value> descriptorsB = ringDescriptors(/*keys=*/true, slot, q.size());
  fenceWgmmaOperands(b, loc);
  return issueWgmmaRegisterAGroup(b, loc, zeroAccumulator(b, loc, bk), q, descriptorsB, bk, element.isBF16(),
                                  /*bNMajor=*/false);
}

LogicalResult MmaAttentionLowering::lowerKeyLoops(SmallVector<scf::ForOp> loops) {
  for (scf::ForOp loop : loops)
    if (getConstantIntValue(loop.getStep()) != bk)
      return loop.emitOpError() << kWhat << ": a key loop steps by BK = " << bk;
  MatmulOp scores, values;
  if (failed(findProducts(loops.front(), scores, values)))
    return failure();
  // Where the key tiles end: the last loop's bound, or the bound the last tile after the loops is checked
  // against.
  scf::IfOp last = lastTileAfter(loops.back());
  quadShares = findQuadPartialSums(loops, last);
  auto reached = last ? last.getCondition().getDefiningOp<arith::CmpIOp>() : arith::CmpIOp();
  Value end = index(last ? reached.getRhs() : loops.back().getUpperBound());
  auto slotOf = [&](Value keyStart) { return im.rem(im.div(keyStart, bk), ringSlots); };
  // The slot `tiles` (< ringSlots) tiles after `slot`: a wrap, cheaper than another remainder.
  auto slotAfter = [&](Value slot, int64_t tiles) {
    Value sum = im.add(slot, tiles);
    return im.select(im.lt(sum, ringSlots), sum, im.sub(sum, ringSlots));
  };
  // With wgmma the scores of the next tile are multiplied while this one's softmax runs: each iteration carries
  // its tile's scores in and the next tile's out, and the copies run two tiles ahead (the last tile starts at
  // ((end - 1) / BK) * BK; past it the copies and products repeat it, into slots no iteration reads again).
  Value lastStart = im.mul(im.div(im.sub(im.max(end, im.c(1)), 1), bk), bk);
  Value truth = arith::ConstantIntOp::create(b, loc, 1, 1);

  // Q (started when its slice was lowered) and the first key tile, then Q's A fragments.
  if (!queryGroup && failed(startQueryCopy(scores)))
    return failure();
  Value start = index(loops.front().getLowerBound());
  FailureOr<Value> group = stageKeyTile(loops.front(), start, im.lt(start, end), slotOf(start));
  if (failed(group))
    return failure();
  nvgpu::DeviceAsyncWaitOp::create(b, loc, queryGroup, b.getI32IntegerAttr(0));
  fenceForWgmma();
  gpu::BarrierOp::create(b, loc);
  Type element = cast<MemRefType>(ringQ.shared.getType()).getElementType();
  int64_t depth = stepDepth(element);
  auto fragA = VectorType::get({4, element.isF32() ? 1 : 2}, element);
  Value laneRow16 = im.rem(lane, 16), laneHalf = im.mul(im.div(lane, 16), depth / 2);
  SmallVector<SmallVector<Value>> q;
  for (int64_t kk = 0; kk < ringQ.columns / depth; ++kk) {
    Value at = im.add(im.mul(im.add(wm0, laneRow16), ringQ.stride), im.add(laneHalf, kk * depth));
    SmallVector<Value> fragment = packFragment(
        b, loc,
        nvgpu::LdMatrixOp::create(b, loc, fragA, ringQ.shared, at, b.getBoolAttr(false), b.getI32IntegerAttr(4)));
    if (element.isF32())
      fragment = tf32Registers(b, loc, fragment, scores.getFp32Precision() == "ieee");
    q.push_back(fragment);
  }
  aFragments[scores.getLhs()] = q;
  Value scoresAhead;
  if (pipelined) {
    FailureOr<Value> second = stageKeyTile(loops.front(), im.min(im.add(start, bk), lastStart), truth,
                                           slotOf(im.add(start, bk)));
    if (failed(second))
      return failure();
    scoresAhead = wgmmaWaitFor(b, loc, 0, issueScores(q, slotOf(start)));
  }

  // The carried state: each iter arg's accumulator fragments (vector<4xf32>) or row values, in order.
  SmallVector<Value> state;
  SmallVector<int64_t> widths; // state values per iter arg
  auto carry = [&](Value value, SmallVectorImpl<Value> &into) {
    if (auto tile = registers.find(value); tile != registers.end()) {
      SmallVector<Value> fragments = fragmentsOf(tile->second);
      into.append(fragments);
      return static_cast<int64_t>(fragments.size());
    }
    if (auto rows = rowValues.find(value); rows != rowValues.end()) {
      into.append(rows->second);
      return static_cast<int64_t>(rows->second.size());
    }
    return int64_t(0);
  };
  for (Value init : loops.front().getInitArgs()) {
    int64_t width = carry(init, state);
    if (width == 0)
      return loops.front().emitOpError() << kWhat << ": a key loop's state starts in registers";
    widths.push_back(width);
  }
  auto bindState = [&](ValueRange arguments, ValueRange flat) {
    int64_t at = 0;
    for (auto [argument, width] : llvm::zip(arguments, widths)) {
      ValueRange values = flat.slice(at, width);
      if (cast<RankedTensorType>(argument.getType()).getRank() == 1)
        rowValues[argument] = SmallVector<Value>(values);
      else
        registers[argument] = registersOf(values);
      at += width;
    }
  };

  if (pipelined)
    state.push_back(scoresAhead);
  // The carried scores (the last state value, with wgmma) as this tile's score registers.
  auto bindScores = [&](ValueRange flat) {
    if (pipelined)
      carriedScores = registersOf(accumulatorFragments(b, loc, flat.back()));
  };
  LogicalResult status = success();
  for (scf::ForOp loop : loops) {
    auto lowered = scf::ForOp::create(
        b, loc, index(loop.getLowerBound()), index(loop.getUpperBound()), im.c(bk), state,
        [&](OpBuilder &nested, Location, Value keyStart, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
          // The slot the next tile goes to was read in the previous iteration: every warp is past it. Then this
          // tile has landed (all but the newest group done) in every thread's copies.
          gpu::BarrierOp::create(b, loc);
          // Past the last tile the copies repeat it into the slot no iteration reads again, so that they need
          // no predicate.
          Value slot = slotOf(keyStart);
          int64_t ahead = pipelined ? 2 : 1;
          Value next = im.add(keyStart, ahead * bk);
          FailureOr<Value> prefetch = stageKeyTile(loop, im.min(next, lastStart), truth, slotAfter(slot, ahead));
          if (failed(prefetch)) {
            status = failure();
            scf::YieldOp::create(b, loc, carried);
            return;
          }
          nvgpu::DeviceAsyncWaitOp::create(b, loc, *prefetch, b.getI32IntegerAttr(1));
          fenceForWgmma();
          gpu::BarrierOp::create(b, loc);
          // The next tile has landed (wgmma): its scores start now, in the slot its copy went to.
          Value nextScores;
          if (pipelined)
            nextScores = issueScores(aFragments[scores.getLhs()], slotAfter(slot, 1));
          // This tile's addressing, then its computation.
          bindState(loop.getRegionIterArgs(), carried);
          bindScores(carried);
          mapping.map(loop.getInductionVar(), keyStart);
          for (Operation &op : loop.getBody()->without_terminator()) {
            if (failed(status))
              break;
            auto product = dyn_cast<MatmulOp>(op);
            status = product ? lowerProduct(product, slot) : lowerOp(&op);
          }
          SmallVector<Value> yielded;
          for (Value value : loop.getBody()->getTerminator()->getOperands())
            if (carry(value, yielded) == 0)
              status = failure();
          // The next tile's scores, done by now (the wait for P V waited for every group before it).
          if (pipelined)
            yielded.push_back(wgmmaWaitFor(b, loc, 0, nextScores));
          if (failed(status) || yielded.size() != carried.size())
            yielded.assign(carried.begin(), carried.end());
          scf::YieldOp::create(b, loc, yielded);
        });
    if (failed(status))
      return loop.emitOpError() << kWhat << ": cannot lower this key loop";
    state.assign(lowered.getResults().begin(), lowered.getResults().end());
    // Each loop of the group is lowered here, not again on its own (the last one's results after the wait).
    if (loop != loops.back())
      bindState(loop.getResults(), state);
  }
  // The last prefetch lands before the block may exit, or before the last tile, which it holds.
  nvgpu::DeviceAsyncWaitOp::create(b, loc, queryGroup, b.getI32IntegerAttr(0));
  fenceForWgmma();
  if (!last) {
    sumQuadShares(state, widths);
    bindState(loops.back().getResults(), state);
    carriedScores.reset();
    return success();
  }
  bindState(loops.back().getResults(), state);
  // The one masked tile, once: its key start is the split (the last prefetch, or the prologue's copy).
  Value split = index(reached.getLhs());
  SmallVector<Type> types;
  for (Value value : state)
    types.push_back(value.getType());
  auto once = scf::IfOp::create(b, loc, types, im.lt(split, end), /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(once.thenBlock());
    gpu::BarrierOp::create(b, loc);
    Value slot = slotOf(split);
    bindScores(state);
    for (Operation &op : last.thenBlock()->without_terminator()) {
      auto product = dyn_cast<MatmulOp>(op);
      if (failed(product ? lowerProduct(product, slot) : lowerOp(&op)))
        return failure();
    }
    SmallVector<Value> yielded;
    for (Value value : last.thenYield().getOperands())
      if (carry(value, yielded) == 0)
        return last.emitOpError() << kWhat << ": the last key tile must yield tiles in registers";
    if (pipelined)
      yielded.push_back(state.back());
    scf::YieldOp::create(b, loc, yielded);
    b.setInsertionPointToStart(once.elseBlock());
    scf::YieldOp::create(b, loc, state);
  }
  SmallVector<Value> results(once.getResults());
  sumQuadShares(results, widths);
  bindState(last.getResults(), results);
  carriedScores.reset();
  return success();
}

LogicalResult MmaAttentionLowering::lowerOp(Operation *op) {
  if (auto dim = dyn_cast<DimOp>(op)) {
    auto global = globals.find(dim.getSource());
    if (global == globals.end())
      return op->emitOpError() << kWhat << ": kiln.dim reads the extent of a kernel buffer";
    mapping.map(dim.getResult(), extent(global->second, dim.getDim()));
    return success();
  }
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    auto type = cast<RankedTensorType>(fill.getResult(0).getType());
    Value value = mapping.lookupOrDefault(fill.value());
    if (type.getRank() == 1)
      rowValues[fill.getResult(0)] = SmallVector<Value>(fragsM * 2, value);
    else
      registers[fill.getResult(0)] = SmallVector<Value>(fragsM * fragsOf(fill.getResult(0)) * 4, value);
    return success();
  }
  if (isa<scf::ForOp, scf::IfOp>(op) && op->getNumResults() > 0 &&
      (registers.count(op->getResult(0)) || rowValues.count(op->getResult(0))))
    return success(); // lowered with the key loop before it
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return lowerKeyLoops(keyLoopsFrom(loop));
  if (auto loop = dyn_cast_or_null<scf::ForOp>(op->getPrevNode());
      loop && isa<arith::CmpIOp>(op) && lastTileAfter(loop))
    return success(); // whether the last key tile is reached, lowered with it
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    if (auto it = rowValues.find(slice.getSource()); it != rowValues.end()) {
      auto copied = it->second;
      rowValues[slice.getResult()] = std::move(copied);
      return success();
    }
  }
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    if (generic.getNumReductionLoops() == 1 && generic.getNumLoops() == 2)
      return lowerRowReduction(generic);
    if (generic.getNumLoops() == 1)
      return lowerRowGeneric(generic);
    // After the key loops an epilogue reading memory runs where its elements are stored; everything else now.
    bool inRegisters = llvm::all_of(generic.getDpsInputs(), [&](Value input) {
      return registers.count(input) || rowValues.count(input);
    });
    if (!inRegisters && !isa<scf::ForOp>(op->getParentOp()))
      return MmaMatmulLowering::lowerOp(op);
    return lowerElementwise(op);
  }
  if (isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp>(op)) {
    if (isa<AddOp>(op) && registers.count(op->getResult(0)))
      return success(); // the accumulation of a tile matmul, lowered with it
    return lowerElementwise(op);
  }
  if (auto castOp = dyn_cast<CastOp>(op); castOp && !registers.count(castOp.getInput()))
    return success(); // a cast of a tile in memory, read through (elementAt)
  if (isa<ConstantOp>(op))
    return success(); // read where used (elementAt)
  // The scalar work of a score_mod or mask_mod that kiln-tile hoisted out of the scores (a table element per
  // head): a table read from its kernel buffer, any other pure scalar op as it is.
  if (auto extract = dyn_cast<tensor::ExtractOp>(op); extract && globals.count(extract.getTensor())) {
    SmallVector<Value> indices;
    for (Value at : extract.getIndices())
      indices.push_back(index(at));
    FailureOr<Value> element = memoryElement(extract.getTensor(), indices, op);
    if (failed(element))
      return failure();
    mapping.map(extract.getResult(), *element);
    return success();
  }
  if (isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) && isPure(op) && op->getNumResults() == 1 &&
      op->getResult(0).getType().isIntOrIndexOrFloat()) {
    b.clone(*op, mapping);
    return success();
  }
  if (auto loop = dyn_cast<scf::WhileOp>(op))
    return lowerScalarWhile(loop);
  return MmaMatmulLowering::lowerOp(op);
}

LogicalResult MmaAttentionLowering::lowerScalarWhile(scf::WhileOp loop) {
  auto scalar = [](Type type) { return type.isIntOrIndexOrFloat(); };
  if (!llvm::all_of(loop->getResultTypes(), scalar) || !llvm::all_of(loop.getInits().getTypes(), scalar))
    return loop.emitOpError() << kWhat << ": a loop before the key loops carries scalars only";
  SmallVector<Value> inits = llvm::map_to_vector(loop.getInits(), [&](Value init) { return index(init); });
  auto lowered = scf::WhileOp::create(b, loc, loop->getResultTypes(), inits, nullptr, nullptr);
  for (auto [from, to] : llvm::zip(loop->getRegions(), lowered->getRegions())) {
    Block &body = from.front();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&to.front());
    mapping.map(body.getArguments(), to.front().getArguments());
    for (Operation &inner : body.without_terminator())
      if (failed(lowerOp(&inner)))
        return failure();
    b.clone(*body.getTerminator(), mapping);
  }
  mapping.map(loop->getResults(), lowered->getResults());
  return success();
}

LogicalResult MmaAttentionLowering::startQueryCopy(MatmulOp scores) {
  auto tile = globalTiles.find(scores.getLhs());
  if (tile == globalTiles.end() || tile->second.dims.size() != 2)
    return scores.emitOpError() << kWhat << ": Q must be a [rows, features] tile of a kernel buffer";
  SmallVector<Value> tokens;
  copyTile(tile->second, ringQ, im.c(0), arith::ConstantIntOp::create(b, loc, 1, 1), tokens);
  queryGroup =
      nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
  return success();
}

LogicalResult MmaAttentionLowering::lowerRowInsert(tensor::ParallelInsertSliceOp op,
                                                   const GlobalTensor &destination) {
  auto rows = rowValues.find(op.getSource());
  if (rows == rowValues.end())
    return op.emitOpError() << kWhat << ": an inserted row vector must be in registers";
  GlobalTile region = insertRegion(op, destination);
  ArrayRef<Value> offsets = region.offsets, sizes = region.sizes;
  ArrayRef<int64_t> kept = region.dims;
  if (kept.size() != 1)
    return op.emitOpError() << kWhat << ": a row vector is inserted along one dimension";
  Value firstOfQuad = im.lt(im.rem(lane, 4), 1);
  for (int64_t slot = 0; slot < fragsM * 2; ++slot) {
    Value row = im.add(wm0, im.add(im.div(lane, 4), (slot / 2) * 16 + (slot % 2) * 8));
    Value store = im.andi(firstOfQuad, im.lt(row, sizes[kept[0]]));
    Value at = elementIndex(destination, offsets, kept, {row});
    Type element = cast<MemRefType>(destination.buffer.getType()).getElementType();
    scf::IfOp::create(b, loc, store, [&](OpBuilder &then, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(then.getInsertionBlock(), then.getInsertionPoint());
      memref::StoreOp::create(b, loc, lowering::narrow(b, loc, rows->second[slot], element), destination.buffer,
                              ValueRange{at});
      scf::YieldOp::create(b, loc);
    });
  }
  return success();
}

LogicalResult MmaAttentionLowering::lowerAttentionBody(scf::ForallOp forall) {
  // Q is the Q K^T product's lhs: its copy starts once the op that slices it from its buffer is lowered.
  MatmulOp scores;
  forall.getBody()->walk([&](MatmulOp product) {
    if (product.getTransposeRhs())
      scores = product;
  });
  Operation *querySlice = scores ? scores.getLhs().getDefiningOp() : nullptr;
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (failed(lowerOp(&op)))
      return failure();
    if (&op == querySlice && globalTiles.count(scores.getLhs()) && failed(startQueryCopy(scores)))
      return failure();
  }
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(&op);
    auto destination = insert ? dyn_cast<BlockArgument>(insert.getDest()) : BlockArgument();
    if (!destination)
      return op.emitOpError() << kWhat << ": an attention kernel inserts its tiles into its results";
    unsigned result = destination.getArgNumber() - forall.getRank();
    if (failed(rowValues.count(insert.getSource()) ? lowerRowInsert(insert, outputs[result])
               : result == 0                       ? lowerInsert(insert)
                   : insert.emitOpError() << kWhat << ": only the first result is a [rows, columns] tile"))
      return failure();
  }
  return success();
}

FailureOr<KernelLaunch> kiln::lowerMmaAttentionKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                                      func::FuncOp kernel, StringRef name) {
  auto loop = dyn_cast_or_null<scf::ForallOp>(kernelOpOf(kernel));
  bool wgmma = loop && getConfig(loop) && getConfig(loop).getLowering() == "wgmma";
  FailureOr<MmaTiledLoop> tiled = mmaTiledLoop(kernel, 2, "attention", kWhat, wgmma ? "wgmma" : "mma_sync");
  if (failed(tiled))
    return failure();
  auto [forall, config, layout] = *tiled;
  int64_t bq = config.getTile()[0], bk = config.getTile()[1], threads = config.getWarps() * 32;
  if (layout.getWarpsN() != 1 || layout.getWarpsM() * 16 != bq || bk % 16 != 0)
    return forall.emitError() << kWhat << ": " << layout << " does not give each warp 16 rows of " << config;
  // The matmuls: Q K^T reads q [rows, D] and k [keys, D]; P V reads v [keys, Dv].
  MatmulOp scores, values;
  forall.getBody()->walk([&](MatmulOp product) {
    (product.getTransposeRhs() ? scores : values) = product;
  });
  if (!scores || !values)
    return forall.emitError() << kWhat << ": the loop holds no Q K^T and P V tile matmuls";
  Type element = scores.getLhs().getType().getElementType();
  if (!element.isBF16() && !element.isF16() && !element.isF32())
    return forall.emitError() << "'kiln.attention' op the GPU attention kernel takes bf16, f16 or f32 q/k/v, got "
                              << element;
  if (wgmma && element.isF32())
    return forall.emitError() << "'kiln.attention' op the wgmma attention takes bf16 or f16 q/k/v (f32 runs on "
                                 "mma_sync), got "
                              << element;
  int64_t headDim = scores.getLhs().getType().getDimSize(1), valueDim = values.getRhs().getType().getDimSize(1);
  if (headDim % 8 != 0 || valueDim % 8 != 0)
    return forall.emitError() << "'kiln.attention' op the GPU attention kernel needs head dims that are multiples "
                                 "of 8, got "
                              << headDim << " and " << valueDim;
  // The warpgroup MMAs take whole warpgroups of query rows, up to 256 keys or value columns at a time, and read
  // K and V as 128-byte swizzled panels of 64 columns.
  if (wgmma && (bq % 64 != 0 || bk > 256 || headDim % 64 != 0 || valueDim % 64 != 0))
    return forall.emitError() << "'kiln.attention' op the wgmma attention needs query tiles of whole warpgroups "
                                 "(BQ a multiple of 64), BK up to 256 and head dims that are multiples of 64, got "
                              << config << " at head dims " << headDim << " and " << valueDim;
  // Shared memory: the Q tile, then two K and two V slots; rows padded by 16 bytes (distinct banks for ldmatrix
  // and for V's TF32 element loads) and holding whole steps (a 16-bit head dim of an odd number of 8-element
  // chunks gets a chunk of zeros). For wgmma, K and V are swizzled panels instead, each starting on the
  // swizzle's 1024-byte period (the Q tile's padded rows end on one: 128 (64j + 8) bytes per 64 rows).
  int64_t elementBytes = element.getIntOrFloatBitWidth() / 8, pad = 16 / elementBytes;
  int64_t paddedHead = llvm::alignTo(headDim, stepDepth(element)),
          paddedValue = llvm::alignTo(valueDim, stepDepth(element));
  int64_t strideQ = paddedHead + pad, strideK = wgmma ? headDim : strideQ,
          strideV = wgmma ? valueDim : paddedValue + pad;
  int64_t sizeQ = bq * strideQ, sizeK = bk * strideK, sizeV = bk * strideV;
  bool pipelined = wgmma && config.getStages() >= 2;
  int64_t slots = pipelined ? 3 : 2;
  int64_t sharedBytes = elementBytes * (sizeQ + slots * (sizeK + sizeV));

  SmallVector<RankedTensorType> buffers;
  for (Type type : kernel.getArgumentTypes())
    buffers.push_back(cast<RankedTensorType>(type));
  Location loc = forall.getLoc();
  OpBuilder::InsertionGuard guard(builder);
  // Size-generic in the lengths: Sq and Sk are the kernel's two index parameters after its buffers.
  KernelFunction gpuKernel = startKernel(builder, module, loc, name, buffers, threads, sharedBytes,
                                         /*sharedAlignment=*/wgmma ? 1024 : 16, /*sizeParams=*/2);
  // At head dims up to 64 a block of eight warps needs about 128 registers a thread: asking ptxas for two blocks
  // per multiprocessor (at most 128) keeps it from taking a few more and halving the blocks that run (measured on
  // the H200: 134 registers, 0.86x the 128-register kernel, at head dim 64 on mma_sync). f32 tiles take more
  // (their Q fragments twice the registers) and would spill under that limit.
  if (headDim <= 64 && valueDim <= 64 && threads == 256 && !element.isF32())
    gpuKernel.func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(), builder.getI32IntegerAttr(2));
  MmaAttentionLowering lowering(builder, loc, bq, bk, valueDim, layout, threads);
  lowering.ringQ = {sharedView(builder, loc, gpuKernel.sharedBytes, 0, sizeQ, element), bq, paddedHead, strideQ,
                    sizeQ};
  lowering.ringK = {sharedView(builder, loc, gpuKernel.sharedBytes, sizeQ, slots * sizeK, element), bk, paddedHead,
                    strideK, sizeK, wgmma};
  lowering.ringV = {sharedView(builder, loc, gpuKernel.sharedBytes, sizeQ + slots * sizeK, slots * sizeV, element),
                    bk, paddedValue, strideV, sizeV, wgmma};
  lowering.ringSlots = slots;
  lowering.pipelined = pipelined;
  if (wgmma) {
    lowering.wgmma = true;
    lowering.descriptors.emplace(builder, loc, gpuKernel.sharedBytes);
    lowering.ringKBytes = 2 * sizeQ, lowering.ringVBytes = 2 * (sizeQ + slots * sizeK);
  }
  Block &entry = gpuKernel.func.getBody().front();
  if (failed(lowering.bindKernel(kernel, forall, entry, kWhat)))
    return failure();
  ValueRange lengths = entry.getArguments().take_back(2);
  lowering.bindLengths(forall, lengths[0], lengths[1]);
  FailureOr<int64_t> blocks = lowering.mapIterationToBlock(forall, kWhat);
  if (failed(blocks) || failed(lowering.lowerAttentionBody(forall)))
    return failure();
  gpu::ReturnOp::create(builder, loc);
  eraseDeadOps(gpuKernel.func);
  // The constant scalings around a score_mod (the softmax scale, a softcap's 1 / cap and cap, log2(e)) in as
  // few multiplies as they fold into.
  foldConstantScales(gpuKernel.func);
  // A kernel of bf16/f16 inputs: its f32 tanh (a softcap, an epilogue's GELU) may take the hardware's
  // approximation (kiln::approximateExpAndDivision); with f32 inputs it stays exact.
  // Its f32 products and sums may contract into fused multiply-adds, as nvcc's and Triton's defaults let them:
  // the softmax's exp2(s * scale - m) becomes one FFMA per score instead of a multiply and a subtraction.
  bool halfInputs = !element.isF32();
  gpuKernel.func.walk([&](Operation *op) {
    if (auto tanh = dyn_cast<math::TanhOp>(op); tanh && halfInputs)
      tanh.setFastmath(tanh.getFastmath() | arith::FastMathFlags::afn);
    if (!isa<arith::MulFOp, arith::AddFOp, arith::SubFOp>(op) || !op->getResult(0).getType().isF32())
      return;
    auto math = cast<arith::ArithFastMathInterface>(op);
    arith::FastMathFlags flags = math.getFastMathFlagsAttr() ? math.getFastMathFlagsAttr().getValue()
                                                               : arith::FastMathFlags::none;
    op->setAttr(math.getFastMathAttrName(),
                arith::FastMathFlagsAttr::get(op->getContext(), flags | arith::FastMathFlags::contract));
  });
  return KernelLaunch{{*blocks, 1, 1}, {threads, 1, 1}, sharedBytes,
                      {lowering.compiledSeqQ, lowering.compiledSeqK}};
}
