//===- Transforms.h - Kiln's reusable transforms -----------------*- C++ -*-===//
//
// The transforms behind Kiln's passes, as functions that pipelines, the autotuner and tests can call on single
// ops. Passes only walk the IR and call these.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_TRANSFORMS_H
#define KILN_TRANSFORMS_TRANSFORMS_H

#include "Dialect/Kiln/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
namespace scf {
class ForallOp;
class ForOp;
} // namespace scf
namespace kiln {

/// The most dynamic shared memory one thread block may use on a GPU target (sm_80: 163 KB, sm_90a: 227 KB).
int64_t maxSharedBytesPerBlock(Target target);

/// Multiprocessors of the GPU each target stands for: the A100 (sm_80: 108) and the H100/H200 (sm_90a: 132).
int64_t multiprocessorCount(Target target);

/// Bytes of shared memory the GPU attention kernel takes for [bq, bk] tiles at these head dims and element width
/// (the Q tile, two K and two V tiles, their rows rounded up to whole tensor-core steps: 16 elements, 8 for f32),
/// with the wgmma kernel's unpadded K and V panels or the mma_sync kernel's rows padded by 16 bytes.
int64_t attentionSharedBytes(int64_t bq, int64_t bk, int64_t headDim, int64_t valueDim, unsigned elementBits,
                             bool wgmma);

/// The shared-memory operand slots of one pipeline stage of the mma_sync matmul: A as a [BM, BK] tile, B as
/// [BK, BN] or, for a transposed rhs, [BN, BK] plus 8 spare rows (the last ldmatrix.x4 of an odd count of
/// 8-column fragments reads them). Rows are padded so that the fragment loads of a warp hit distinct banks: by
/// 16 bytes, and by 32 for a [BK, BN] tile of 32-bit elements (whose B fragments are read element by element,
/// four rows at a time).
struct MmaOperandSlots {
  int64_t rowsA, columnsA, strideA, rowsB, columnsB, strideB;
  /// Elements of one stage's slot of each operand (spare rows included).
  int64_t slotA, slotB;
  /// Bytes of one stage (both slots).
  int64_t stageBytes;
};
MmaOperandSlots mmaOperandSlots(int64_t bm, int64_t bn, int64_t bk, bool transposedRhs, unsigned elementBits);

/// True for the ops that become kernels of their own and so carry a #kiln.config.
bool isKernelOp(Operation *op);

/// The default strategy of a kernel op for `target`, derived from its shapes.
ConfigAttr getDefaultConfig(Operation *op, Target target);

/// The keys per chunk for a split-KV attention on `target` (a multiple of 256), or nothing when the attention's
/// query tiles already number two per multiprocessor of the chip, its keys are too few, or it is not a split
/// candidate (an lse result, an epilogue, a seq-major output, a pinned config, the wgmma lowering, the host).
std::optional<int64_t> chooseKvChunk(AttentionOp op, Target target);

/// The contraction length per chunk for a split-K matmul on `target` (a multiple of the default config's BK), or
/// nothing when the matmul's output tiles already fill the chip, its contraction is too short to split, or it is
/// not a candidate (a pinned config, a lowering other than mma_sync, already split, the host).
std::optional<int64_t> chooseKChunk(MatmulOp op, Target target);

/// The op's #kiln.config, if it has one.
ConfigAttr getConfig(Operation *op);

/// Replaces attention written out op by op and ending in `output` = matmul(softmax(scores), v) by one
/// kiln.attention. Fails, changing nothing, when the pattern does not hold exactly.
FailureOr<AttentionOp> fuseAttention(RewriterBase &rewriter, MatmulOp output);

/// Replaces RMSNorm or LayerNorm written out op by op and ending at `root` (the bias add, the weight multiply or
/// the normalisation itself) by one kiln.rms_norm / kiln.layer_norm. Fails, changing nothing, when the formula
/// does not hold exactly or when `root` is only part of a larger norm (its weight or bias is applied by a user).
FailureOr<Value> fuseNorm(RewriterBase &rewriter, Operation *root);

/// Replaces `narrow`, a cast down of a kiln.rms_norm / kiln.layer_norm whose operands are all casts up from the
/// narrow type, by the norm of the narrow operands (which the norm computes in f32 all the same). Fails,
/// changing nothing, when the casts do not frame the norm that way.
FailureOr<Value> narrowNorm(RewriterBase &rewriter, CastOp narrow);

/// Replaces SiLU (x sigmoid(x)) or GELU (erf or tanh form) written out as a product ending at `root` by one
/// kiln.silu / kiln.gelu. Fails, changing nothing, when the product is not one of them.
FailureOr<Value> fuseActivation(RewriterBase &rewriter, Operation *root);

/// Replaces rotate-half RoPE written out (x * cos + concat(-x_hi, x_lo) * sin) and ending at `root` by one
/// kiln.rope: with [S, D/2] tables when both tables are constants with repeated halves, else with the [S, D]
/// tables themselves when they broadcast over x's leading dimensions.
FailureOr<RopeOp> fuseRope(RewriterBase &rewriter, AddOp root);

/// Replaces concat(a * cos - b * sin, a * sin + b * cos) along the last dimension, a and b the halves of x
/// [.., D], with kiln.rope of x by the [S, D/2] tables, S the one dimension of x the [.., D/2] tables vary along
/// (the positions; `seq_dim` when it is not the one before the last). Fails, changing nothing, otherwise.
FailureOr<RopeOp> fuseHalvesRope(RewriterBase &rewriter, ConcatOp root);

/// Replaces the flattening to [.., D] of concat(x0 * cos - x1 * sin, x1 * cos + x0 * sin) over x's pairs (x
/// viewed as [.., D/2, 2], x0 and x1 its pairs' elements) with the interleaved kiln.rope of x, by [S, D/2]
/// tables as fuseHalvesRope takes them; where x, cos and sin are f32 widenings of one narrow type that the result
/// is rounded back to, the rope of the narrow values replaces the rounding. Fails, changing nothing, otherwise.
FailureOr<RopeOp> fusePairsRope(RewriterBase &rewriter, ReshapeOp root);

/// Moves a transpose that keeps the last dimension in place from a kiln.rope's input (used only there) to its
/// result: rope(transpose(x)) = transpose(rope(x)), the new rope reading positions from the dimension the
/// transpose moves into place. Returns the moved transpose.
FailureOr<TransposeOp> sinkTransposeThroughRope(RewriterBase &rewriter, RopeOp op);

/// Rewrites an attention (no epilogue) whose q, k and v are [0, 2, 1, 3] transposes of [B, S, H, D] tensors as a
/// seq-major attention (layout = "bshd") of those tensors, its output transposed back to [B, H, S, D]; or, when
/// only its output is transposed back, as one that stores [B, S, H, D] directly (out_layout = "bshd").
FailureOr<AttentionOp> foldHeadTransposes(RewriterBase &rewriter, AttentionOp op);

/// Folds the single-use chain of elementwise consumers (and float casts) of a matmul or an attention into its
/// epilogue region. Returns the new op; fails, changing nothing, when there is no such consumer.
FailureOr<Operation *> fuseEpilogue(RewriterBase &rewriter, Operation *producer);

/// Fuses the chain of elementwise ops (arithmetic, activations, comparisons, selects, casts) that ends in `root`
/// into one kiln.elementwise: producers of the root's shape whose every user is in the chain or another
/// elementwise op of that shape (those are computed again here and stay for their other readers), with splat
/// constants as body constants. Fails, changing nothing, when `root` is no such op or has no such producer.
FailureOr<ElementwiseOp> fuseElementwiseChain(RewriterBase &rewriter, Operation *root);

/// Rewrites a matmul of a transposed [N, K] weight (or a constant [K, N] one) whose output (plus a bias over its
/// columns, through reshapes that keep the columns) is read only by column slices [o, o + n) as one matmul per
/// slice of the weight's rows [o, o + n) (or constant columns), plus the bias's columns. Fails, changing nothing,
/// on any other reader, on an epilogue or split matmul, or when a part of a weight or bias that is no constant
/// does not start on a 16-byte line (it would be a copy).
FailureOr<SmallVector<MatmulOp>> splitSlicedMatmul(RewriterBase &rewriter, MatmulOp op);

/// Rewrites a matmul of a batched lhs [..., M, K] and a 2-D rhs as one [rows, K] x [K, N] matmul between
/// reshapes (rows = the product of the lhs dims but the last), keeping its epilogue. Fails when an epilogue
/// operand broadcasts over the batch dims in a way a [rows, N] view cannot keep.
FailureOr<MatmulOp> foldMatmulBatch(RewriterBase &rewriter, MatmulOp op);

/// Rewrites a large bf16/f16 matmul whose K (or N of a [K, N] rhs) is not a multiple of 8 as the matmul of
/// zero-padded copies of its operands (and of the epilogue operands that run along N), followed by a slice of the
/// result's first N columns, so that sm_90a's TMA GEMM takes it. Fails, changing nothing, on aligned, small,
/// transposed-lhs, non-16-bit or pinned matmuls.
FailureOr<MatmulOp> padMatmulOperands(RewriterBase &rewriter, MatmulOp op);

/// Rewrites `op` as the split attention (`kv_chunk = chunk`) of the same operands, mods and attributes, and a
/// kiln.merge_splits of its chunks that replaces its output. Fails, changing nothing, when `op` has an lse result,
/// an epilogue, a seq-major output or already a kv_chunk.
FailureOr<MergeSplitsOp> splitKv(RewriterBase &rewriter, AttentionOp op, int64_t chunk);

/// Rewrites `op` as the split matmul (`k_chunk = chunk`) of the same operands and attributes and a kiln.sum_splits
/// of its chunks that takes over its epilogue and replaces its result. Fails, changing nothing, when `op` is
/// already split or `chunk` is not positive.
FailureOr<SumSplitsOp> splitK(RewriterBase &rewriter, MatmulOp op, int64_t chunk);

/// Rewrites a paged attention as a kiln.attention over kiln.gather_pages views of its caches, masked per
/// sequence by a mask_mod reading `seq_lens` (kiln-expand-paged-attention).
FailureOr<AttentionOp> expandPagedAttention(RewriterBase &rewriter, PagedAttentionOp op);

/// Rewrites a grouped-query attention of one query row, q [B, Hq, 1, D], as attention of q viewed as
/// [B, Hkv, Hq / Hkv, D] (no causal mask: the row sees every key) between reshapes of q, the output and the lse.
/// Fails on a mask, an epilogue, seq-major q, k and v, more query rows or plain multi-head attention.
FailureOr<AttentionOp> packGqaDecode(RewriterBase &rewriter, AttentionOp op);

/// Moves one compute op into a new private kernel function `name` (marked `kiln.kernel`) that writes its
/// results into destination arguments, and replaces the op by an allocation of those destinations and a call.
FailureOr<func::FuncOp> outlineKernel(RewriterBase &rewriter, Operation *op, llvm::StringRef name);

/// Ties the destinations of `call`, the plan's call of the outlined kernel holding `append`, to the caches it
/// appends to, so that the kernel writes only the new rows, and marks the kernel kiln.updates_in_place. Fails with
/// an error naming the cache when the old cache is read after the call (or returned), is a constant, or is the
/// other cache's buffer.
LogicalResult updateCachesInPlace(RewriterBase &rewriter, func::CallOp call, AppendKvOp append);

/// The kernel op of an outlined kernel function: its tiled loop (an scf.forall that kiln-tile marked with the
/// op it computes, kiln.tiled_op), or else the kiln op whose result it writes (a sum that kiln-fuse-split-sums
/// moved in before it is not), or else its first kiln op; null when it has none.
Operation *kernelOpOf(func::FuncOp kernel);

/// Whether `op`, in an outlined kernel function, computes one of the kernel's results (writes a destination).
bool writesKernelResult(Operation *op);

/// Whether operand `operand` of `reader`, the op of an untiled GPU glue kernel, may be a split matmul's sum
/// computed in the reader's thread: RoPE's input, the KV append's new rows, a sum's epilogue operands.
bool readsFusedSplitSum(Operation *reader, unsigned operand);

/// Moves the kiln.sum_splits kernel that `sumCall` calls into the kernels that read its result (through reshapes
/// only) where each computes the sum per element (readsFusedSplitSum, or a row kernel's row tiles): each reader's
/// kernel takes the sum's inputs instead and computes the sum and the reshapes in its body; the plan drops the
/// call. Fails, changing nothing, otherwise, when several readers would read too many chunks between them, and
/// when a kernel between the sum and a reader writes in place what the sum reads. Returns the readers' calls.
FailureOr<SmallVector<func::CallOp>> fuseSplitSum(RewriterBase &rewriter, func::CallOp sumCall);

/// The name of the op that a kernel op computes: the tiled op's for a tiled loop, else its own.
StringRef kernelOpName(Operation *kernelOp);

/// Tiles a matmul by its config's [BM, BN, BK] into an scf.forall of output tiles with a K loop inside.
/// Returns the replacement value.
FailureOr<Value> tileMatmul(RewriterBase &rewriter, MatmulOp op);

/// Tiles an attention by its config's [BQ, BK]: an scf.forall of query tiles, each computing a row of scores
/// tile by tile, a kiln.softmax over the row and a P V loop. Returns the replacements (out, and lse if any).
FailureOr<SmallVector<Value>> tileAttention(RewriterBase &rewriter, AttentionOp op);

/// True for the row ops: softmax, logsumexp and single-axis reduce along the last axis, rms_norm, layer_norm.
bool isRowOp(Operation *op);

/// Tiles a row op into an scf.forall over blocks of config.tile[0] rows (a single row as a [1, D] view); the
/// forall carries the op's #kiln.config.
FailureOr<Value> tileRowKernel(RewriterBase &rewriter, Operation *op);

/// Rewrites a row op of a tile (softmax or logsumexp along the last axis, rms_norm, layer_norm, nested in an
/// scf.forall) as f32 `kiln.reduce ... keep_dims` along the last axis and broadcasting elementwise ops. Returns
/// the replacement value.
FailureOr<Value> decomposeRowOp(RewriterBase &rewriter, Operation *op);

/// Sets the `kiln.layout` (#kiln.row_layout) of every kiln op in the body of `forall`, a tiled row kernel whose
/// #kiln.config has lowering "rows".
LogicalResult assignRowLayouts(scf::ForallOp forall);

/// Sets the `kiln.layout` (#kiln.mma_layout) of the kiln ops in the body of `forall`, a tiled matmul whose
/// #kiln.config has lowering "mma_sync" (the squarest grid of warps) or "wgmma" (one warp per 16 rows: the
/// warpgroup MMA's accumulator); fails, naming the op, on operands or a config the layout does not take.
LogicalResult assignMmaLayouts(scf::ForallOp forall);

/// Whether a "wgmma" matmul config fits the warpgroup MMA's lowering for operands of `element`: bf16 or f16,
/// BM a multiple of 64 up to 256 with one warpgroup (4 warps) per 64 rows, BN up to 256 and a multiple of 64 (the
/// 64-column panels of an untransposed B), or of 16 with `transposedRhs` (B's [N, K] rows are K-major, any
/// whole number of 8-row swizzle groups), BK = 64 (one 128-byte swizzle row) and stages >= 3.
bool fitsWgmmaMatmul(ConfigAttr config, Type element, bool transposedRhs);

/// Sets the `kiln.layout` (#kiln.mma_layout, one column of BQ / 16 warps) of the kiln ops in the body of
/// `forall`, a tiled "mma_sync" attention.
LogicalResult assignAttentionLayouts(scf::ForallOp forall);

/// Rewrites a kiln.softmax whose row is built by one scf.for of score tiles and consumed by a matching scf.for
/// that accumulates tile products, into a single loop carrying the running max, the running sum and the
/// rescaled accumulator (FlashAttention). exp is computed as exp2 with log2(e) folded into the score scale.
LogicalResult rewriteOnlineSoftmax(RewriterBase &rewriter, SoftmaxOp op);

/// Splits `loop` at the first iteration whose induction variable reaches `bound` when its body holds an scf.if
/// on `iv >= bound` (`bound` defined before the loop): a loop running the if's `else` region, then one running
/// its `then` region, or, when the branch carries kOneMaskedTileAttrName (at most one iteration reaches the
/// bound), that iteration alone under an scf.if. Fails, changing nothing, when the loop has no such branch or a
/// non-constant step.
LogicalResult splitLoopAtThreshold(RewriterBase &rewriter, scf::ForOp loop);

/// Name of the unit attribute on a tile loop's `scf.if (iv >= bound)` that says at most one iteration reaches the
/// bound (an attention whose only masked key tile is the last, partial one): kiln-split-masked-tiles runs it
/// once after the loop instead of in a second loop.
inline constexpr llvm::StringLiteral kOneMaskedTileAttrName = "kiln.one_masked_tile";

} // namespace kiln
} // namespace mlir

#endif // KILN_TRANSFORMS_TRANSFORMS_H
