//===- PagedKv.cpp - kiln.gather_pages and kiln.append_kv to linalg -------===//
//
// The host form of the paged KV cache ops. Paged attention reaches here as attention over kiln.gather_pages
// views (kiln-expand-paged-attention); a view whose attention kiln-tile did not read page by page gathers each
// sequence's keys or values out of their pages through the block table into a contiguous [B, Hkv, keys, D]
// tensor (zero past the sequence's length). The append copies the caches and writes the new rows one token at
// a time in an scf.for nest, each row an insert_slice at the page the table names. Both read the tables at run
// time; ids and positions outside the caches are clamped (reads) or skipped (writes) so that a bad table can
// never touch memory outside them.
//
//===----------------------------------------------------------------------===//

#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::lowering;

namespace {

Value indexConstant(OpBuilder &b, Location loc, int64_t value) { return arith::ConstantIndexOp::create(b, loc, value); }

Value toIndex(OpBuilder &b, Location loc, Value integer) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), integer);
}

/// `value` clamped into [0, size).
Value clampIndex(OpBuilder &b, Location loc, Value value, int64_t size) {
  Value low = arith::MaxSIOp::create(b, loc, value, indexConstant(b, loc, 0));
  return arith::MinSIOp::create(b, loc, low, indexConstant(b, loc, size - 1));
}

/// `lo <= value < hi` on indices.
Value inRange(OpBuilder &b, Location loc, Value value, Value lo, Value hi) {
  Value aboveLo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, value, lo);
  Value belowHi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, value, hi);
  return arith::AndIOp::create(b, loc, aboveLo, belowHi);
}

/// The keys (or values) of every sequence, `[B, Hkv, max_pages * page_size, D]` of the cache's element type:
/// position `j` of sequence `b` read from page `block_table[b, j / page_size]`, row `j % page_size`, and zero
/// from `seq_lens[b]` on, so that whatever the unused pages hold never reaches an output.
Value gatherPages(OpBuilder &b, Location loc, Value cache, Value blockTable, Value seqLens, int64_t batch,
                  int64_t capacity) {
  MLIRContext *ctx = b.getContext();
  RankedTensorType cacheType = cast<RankedTensorType>(cache.getType());
  int64_t numPages = cacheType.getDimSize(0), pageSize = cacheType.getDimSize(1);
  int64_t heads = cacheType.getDimSize(2), headDim = cacheType.getDimSize(3);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  // Dims (b, h, j, x): the length of sequence b and the page id of its page j / page_size.
  AffineMap lenMap = AffineMap::get(4, 0, {d(0)}, ctx);
  AffineMap pageMap = AffineMap::get(4, 0, {d(0), d(2).floorDiv(pageSize)}, ctx);
  Type element = cacheType.getElementType();
  return buildElementwise(
      b, loc, {batch, heads, capacity, headDim}, element, ValueRange{seqLens, blockTable}, {lenMap, pageMap},
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value h = linalg::IndexOp::create(nb, l, 1), j = linalg::IndexOp::create(nb, l, 2),
              x = linalg::IndexOp::create(nb, l, 3);
        Value page = clampIndex(nb, l, toIndex(nb, l, args[1]), numPages);
        Value row = arith::RemUIOp::create(nb, l, j, indexConstant(nb, l, pageSize));
        Value element = tensor::ExtractOp::create(nb, l, cache, ValueRange{page, row, h, x});
        Value visible = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, j, toIndex(nb, l, args[0]));
        return arith::SelectOp::create(nb, l, visible, element, floatConstant(nb, l, cacheType.getElementType(), 0.0));
      });
}

struct GatherPagesLowering : OpConversionPattern<GatherPagesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GatherPagesOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getOut().getType();
    rewriter.replaceOp(op, gatherPages(rewriter, op.getLoc(), adaptor.getCache(), adaptor.getBlockTable(),
                                       adaptor.getSeqLens(), type.getDimSize(0), type.getDimSize(2)));
    return success();
  }
};

struct AppendKvLowering : OpConversionPattern<AppendKvOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AppendKvOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType cacheType = op.getKCache().getType(), rowsType = op.getK().getType();
    int64_t numPages = cacheType.getDimSize(0), pageSize = cacheType.getDimSize(1);
    int64_t heads = rowsType.getDimSize(1), headDim = rowsType.getDimSize(3);
    int64_t capacity = op.getBlockTable().getType().getDimSize(1) * pageSize;
    // The results start as copies: the operands keep their values (a backend may drop the copy when the old
    // caches are dead).
    auto copyOf = [&](Value cache) {
      Value empty = createEmpty(rewriter, loc, cacheType.getShape(), cacheType.getElementType());
      return linalg::CopyOp::create(rewriter, loc, ValueRange{cache}, ValueRange{empty})->getResult(0);
    };
    SmallVector<Value> caches{copyOf(adaptor.getKCache()), copyOf(adaptor.getVCache())};
    SmallVector<Value, 2> newRows{adaptor.getK(), adaptor.getV()};
    Value table = adaptor.getBlockTable(), positions = adaptor.getPositions();
    Value zero = indexConstant(rewriter, loc, 0), one = indexConstant(rewriter, loc, 1);
    SmallVector<OpFoldResult> rowSizes{rewriter.getIndexAttr(1), rewriter.getIndexAttr(heads),
                                       rewriter.getIndexAttr(1), rewriter.getIndexAttr(headDim)};
    SmallVector<OpFoldResult> slotSizes{rewriter.getIndexAttr(1), rewriter.getIndexAttr(1),
                                        rewriter.getIndexAttr(heads), rewriter.getIndexAttr(headDim)};
    SmallVector<OpFoldResult> unitStrides(4, rewriter.getIndexAttr(1));
    auto rowType = RankedTensorType::get({heads, headDim}, cacheType.getElementType());

    // For each sequence b and new token s: position p = positions[b] + s, page block_table[b, p / page_size],
    // row p % page_size; a slot outside the table or the caches is not written.
    auto outer = scf::ForOp::create(
        rewriter, loc, zero, indexConstant(rewriter, loc, rowsType.getDimSize(0)), one, caches,
        [&](OpBuilder &b, Location l, Value seq, ValueRange outerCaches) {
          Value start = toIndex(b, l, tensor::ExtractOp::create(b, l, positions, ValueRange{seq}));
          auto inner = scf::ForOp::create(
              b, l, zero, indexConstant(b, l, rowsType.getDimSize(2)), one, outerCaches,
              [&](OpBuilder &ib, Location il, Value token, ValueRange innerCaches) {
                Value position = arith::AddIOp::create(ib, il, start, token);
                Value inTable = inRange(ib, il, position, zero, indexConstant(ib, il, capacity));
                Value clamped = clampIndex(ib, il, position, capacity);
                Value column = arith::DivUIOp::create(ib, il, clamped, indexConstant(ib, il, pageSize));
                Value row = arith::RemUIOp::create(ib, il, clamped, indexConstant(ib, il, pageSize));
                Value page = toIndex(ib, il, tensor::ExtractOp::create(ib, il, table, ValueRange{seq, column}));
                Value valid = arith::AndIOp::create(
                    ib, il, inTable, inRange(ib, il, page, zero, indexConstant(ib, il, numPages)));
                auto write = scf::IfOp::create(
                    ib, il, valid,
                    [&](OpBuilder &tb, Location tl) {
                      SmallVector<OpFoldResult> rowOffsets{seq, rewriter.getIndexAttr(0), token,
                                                           rewriter.getIndexAttr(0)};
                      SmallVector<OpFoldResult> slotOffsets{page, row, rewriter.getIndexAttr(0),
                                                            rewriter.getIndexAttr(0)};
                      SmallVector<Value> written;
                      for (auto [rows, cache] : llvm::zip_equal(newRows, innerCaches)) {
                        Value slice = tensor::ExtractSliceOp::create(tb, tl, rowType, rows, rowOffsets, rowSizes,
                                                                     unitStrides);
                        written.push_back(tensor::InsertSliceOp::create(tb, tl, slice, cache, slotOffsets,
                                                                        slotSizes, unitStrides));
                      }
                      scf::YieldOp::create(tb, tl, written);
                    },
                    [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, innerCaches); });
                scf::YieldOp::create(ib, il, write.getResults());
              });
          scf::YieldOp::create(b, l, inner.getResults());
        });
    rewriter.replaceOp(op, outer.getResults());
    return success();
  }
};

} // namespace

void kiln::populatePagedKvLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<GatherPagesLowering, AppendKvLowering>(patterns.getContext());
}
