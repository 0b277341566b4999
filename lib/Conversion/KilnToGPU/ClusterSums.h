//===- ClusterSums.h - Tiles summed across a thread-block cluster -*- C++ -*-===//
//
// A matmul whose config splits each output tile's contraction over the blocks of a thread-block cluster
// (#kiln.config's k_splits) leaves one f32 partial tile per block. Each block stages its partial tile in its own
// shared memory; after a cluster barrier a block reads any chunk of the tile from every block of the cluster
// through distributed shared memory (mapa to the block's rank, then ld.shared::cluster) and adds the chunks up,
// rank by rank, so that every run gives the same bits. These are the two steps, kept apart from the lowering
// that decides which block stores what, so that the NVVM ops stay in this file.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOGPU_CLUSTERSUMS_H
#define KILN_LIB_CONVERSION_KILNTOGPU_CLUSTERSUMS_H

#include "mlir/IR/Builders.h"

namespace mlir {
namespace kiln {
namespace gpukernel {

/// A barrier of every thread of every block of the cluster: the shared-memory writes before it (release) are
/// seen by the reads after it in any block (acquire).
void clusterBarrier(OpBuilder &b, Location loc);

/// The `count` consecutive f32 values (count a multiple of 4, 16-byte aligned) at byte offset `byteOffset`
/// (index) of the shared-memory buffer whose address is `base` (index), summed over the buffers at that address
/// in blocks 0 to `ranks` - 1 of the cluster, in that order.
SmallVector<Value> clusterSum(OpBuilder &b, Location loc, Value base, Value byteOffset, int64_t count,
                              int64_t ranks);

} // namespace gpukernel
} // namespace kiln
} // namespace mlir

#endif // KILN_LIB_CONVERSION_KILNTOGPU_CLUSTERSUMS_H
