//===- PagedKvOps.cpp - Verifiers of the paged KV cache ops ---------------===//
//
// The shape and dtype rules of kiln.paged_attention, kiln.gather_pages and kiln.append_kv. Serving code builds
// these ops from tables it fills at run time, so a wrong table or cache layout must be refused when the op is
// built, naming the operand and the dimension at fault; the values inside the tables are checked by the Python
// API.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/KilnOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kiln;

/// Page sizes the ops take: the range paged serving caches use (a sequence wastes less than one page).
static constexpr int64_t kMinPageSize = 16, kMaxPageSize = 256;

static RankedTensorType typeOf(Value value) { return cast<RankedTensorType>(value.getType()); }

/// Checks one `[num_pages, page_size, Hkv, D]` cache, operand `name`: rank, page size, non-empty dimensions.
static LogicalResult verifyCache(Operation *op, StringRef name, Value cache) {
  RankedTensorType k = typeOf(cache);
  if (k.getRank() != 4)
    return op->emitOpError() << "operand '" << name
                             << "' must have rank 4 [num_pages, page_size, kv_heads, head_dim], got " << k;
  if (k.getDimSize(0) == 0)
    return op->emitOpError() << "'" << name << "' has no pages (dimension 0 is 0)";
  int64_t pageSize = k.getDimSize(1);
  if (pageSize < kMinPageSize || pageSize > kMaxPageSize)
    return op->emitOpError() << "page size of '" << name << "' (dimension 1: " << pageSize << ") must be in ["
                             << kMinPageSize << ", " << kMaxPageSize << "]";
  if (k.getDimSize(2) == 0)
    return op->emitOpError() << "head count of '" << name << "' (dimension 2) must be positive";
  if (k.getDimSize(3) == 0)
    return op->emitOpError() << "head dim of '" << name << "' (dimension 3) must be positive";
  return success();
}

/// Checks a `[num_pages, page_size, Hkv, D]` cache pair: each cache, and equal types.
static LogicalResult verifyCaches(Operation *op, Value kCache, Value vCache) {
  RankedTensorType k = typeOf(kCache), v = typeOf(vCache);
  if (k.getRank() != 4)
    return verifyCache(op, "k_cache", kCache);
  if (v != k)
    return op->emitOpError() << "'v_cache' type " << v << " differs from 'k_cache' type " << k;
  return verifyCache(op, "k_cache", kCache);
}

/// Checks a rank-`rank` i32 table whose dimension 0 is the batch `batch`; `shape` names its dimensions.
static LogicalResult verifyTable(Operation *op, StringRef name, Value table, int64_t rank, StringRef shape,
                                 int64_t batch) {
  RankedTensorType type = typeOf(table);
  if (type.getRank() != rank)
    return op->emitOpError() << "operand '" << name << "' must have rank " << rank << " " << shape << ", got "
                             << type;
  if (!type.getElementType().isSignlessInteger(32))
    return op->emitOpError() << "operand '" << name << "' must have element type i32, got " << type.getElementType();
  if (type.getDimSize(0) != batch)
    return op->emitOpError() << "batch size of '" << name << "' (dimension 0: " << type.getDimSize(0)
                             << ") differs from the batch (" << batch << ")";
  return success();
}

/// Checks the block table and returns its capacity in keys (max_pages * page_size).
static FailureOr<int64_t> verifyBlockTable(Operation *op, Value table, int64_t batch, int64_t pageSize) {
  if (failed(verifyTable(op, "block_table", table, 2, "[batch, max_pages]", batch)))
    return failure();
  int64_t maxPages = typeOf(table).getDimSize(1);
  if (maxPages == 0)
    return op->emitOpError() << "'block_table' has no page columns (dimension 1 is 0)";
  return maxPages * pageSize;
}

//===----------------------------------------------------------------------===//
// PagedAttentionOp
//===----------------------------------------------------------------------===//

double PagedAttentionOp::getEffectiveScale() {
  if (std::optional<APFloat> scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(getQ().getType().getDimSize(3)));
}

int64_t PagedAttentionOp::getGroupSize() {
  return getQ().getType().getDimSize(1) / getKCache().getType().getDimSize(2);
}

int64_t PagedAttentionOp::getCapacity() { return getBlockTable().getType().getDimSize(1) * getPageSize(); }

LogicalResult PagedAttentionOp::verify() {
  RankedTensorType q = getQ().getType();
  if (q.getRank() != 4)
    return emitOpError() << "operand 'q' must have rank 4 [batch, heads, seq, head_dim], got " << q;
  if (failed(verifyCaches(*this, getKCache(), getVCache())))
    return failure();
  if (failed(verifyFp32Precision(*this, getFp32Precision(), q.getElementType(), "q, k_cache and v_cache")))
    return failure();
  RankedTensorType cache = getKCache().getType();
  if (cache.getElementType() != q.getElementType())
    return emitOpError() << "element type of 'k_cache' (" << cache.getElementType() << ") differs from 'q' ("
                         << q.getElementType() << ")";
  if (cache.getDimSize(3) != q.getDimSize(3))
    return emitOpError() << "head dim of 'k_cache' (dimension 3: " << cache.getDimSize(3) << ") differs from 'q' ("
                         << q.getDimSize(3) << ")";
  int64_t kvHeads = cache.getDimSize(2);
  if (q.getDimSize(1) % kvHeads != 0)
    return emitOpError() << "head count of 'q' (" << q.getDimSize(1)
                         << ") is not a multiple of the cache's head count (" << kvHeads << ")";
  int64_t batch = q.getDimSize(0), seqQ = q.getDimSize(2);
  FailureOr<int64_t> capacity = verifyBlockTable(*this, getBlockTable(), batch, cache.getDimSize(1));
  if (failed(capacity))
    return failure();
  if (failed(verifyTable(*this, "seq_lens", getSeqLens(), 1, "[batch]", batch)))
    return failure();
  if (seqQ > *capacity)
    return emitOpError() << "'q' has " << seqQ << " new tokens per sequence (dimension 2) but the block table holds "
                         << *capacity << " keys per sequence (max_pages * page_size)";
  if (std::optional<APFloat> scale = getScale()) {
    if (!scale->isFiniteNonZero() || scale->isNegative())
      return emitOpError() << "scale must be a finite positive number, got " << scale->convertToDouble();
  }
  if (getOut().getType() != q)
    return emitOpError() << "result type " << getOut().getType() << " differs from the type of 'q' (" << q << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// GatherPagesOp
//===----------------------------------------------------------------------===//

LogicalResult GatherPagesOp::verify() {
  if (failed(verifyCache(*this, "cache", getCache())))
    return failure();
  RankedTensorType cache = getCache().getType();
  int64_t batch = typeOf(getBlockTable()).getRank() >= 1 ? typeOf(getBlockTable()).getDimSize(0) : 0;
  FailureOr<int64_t> capacity = verifyBlockTable(*this, getBlockTable(), batch, cache.getDimSize(1));
  if (failed(capacity))
    return failure();
  if (failed(verifyTable(*this, "seq_lens", getSeqLens(), 1, "[batch]", batch)))
    return failure();
  auto expected = RankedTensorType::get({batch, cache.getDimSize(2), *capacity, cache.getDimSize(3)},
                                        cache.getElementType());
  if (getOut().getType() != expected)
    return emitOpError() << "result type " << getOut().getType() << " differs from " << expected
                         << " ([batch, kv_heads, max_pages * page_size, head_dim] of the cache's element type)";
  return success();
}

//===----------------------------------------------------------------------===//
// AppendKvOp
//===----------------------------------------------------------------------===//

LogicalResult AppendKvOp::verify() {
  if (failed(verifyCaches(*this, getKCache(), getVCache())))
    return failure();
  RankedTensorType cache = getKCache().getType(), k = getK().getType(), v = getV().getType();
  if (k.getRank() != 4)
    return emitOpError() << "operand 'k' must have rank 4 [batch, kv_heads, seq, head_dim], got " << k;
  if (v != k)
    return emitOpError() << "'v' type " << v << " differs from 'k' type " << k;
  if (k.getElementType() != cache.getElementType())
    return emitOpError() << "element type of 'k' (" << k.getElementType() << ") differs from 'k_cache' ("
                         << cache.getElementType() << ")";
  if (k.getDimSize(1) != cache.getDimSize(2))
    return emitOpError() << "head count of 'k' (dimension 1: " << k.getDimSize(1) << ") differs from 'k_cache' ("
                         << "dimension 2: " << cache.getDimSize(2) << ")";
  if (k.getDimSize(3) != cache.getDimSize(3))
    return emitOpError() << "head dim of 'k' (dimension 3: " << k.getDimSize(3) << ") differs from 'k_cache' ("
                         << cache.getDimSize(3) << ")";
  int64_t batch = k.getDimSize(0);
  FailureOr<int64_t> capacity = verifyBlockTable(*this, getBlockTable(), batch, cache.getDimSize(1));
  if (failed(capacity))
    return failure();
  if (failed(verifyTable(*this, "positions", getPositions(), 1, "[batch]", batch)))
    return failure();
  if (k.getDimSize(2) > *capacity)
    return emitOpError() << "'k' has " << k.getDimSize(2) << " new tokens per sequence (dimension 2) but the block "
                         << "table holds " << *capacity << " keys per sequence (max_pages * page_size)";
  for (Value result : getResults())
    if (result.getType() != cache)
      return emitOpError() << "result type " << result.getType() << " differs from the type of the caches ("
                           << cache << ")";
  return success();
}
