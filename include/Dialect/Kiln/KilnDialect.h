//===- KilnDialect.h - The kiln dialect --------------------------*- C++ -*-===//
//
// Declares the kiln dialect class and its enums and attributes. Include KilnOps.h for the ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNDIALECT_H
#define KILN_DIALECT_KILN_KILNDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "Dialect/Kiln/KilnDialect.h.inc"
#include "Dialect/Kiln/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Dialect/Kiln/KilnAttrs.h.inc"

namespace mlir {
namespace kiln {
/// Name of the discardable attribute that carries an op's #kiln.config.
inline constexpr llvm::StringLiteral kConfigAttrName = "kiln.config";
/// Name of the discardable attribute on a tiled kernel loop (scf.forall) that names the op it computes.
inline constexpr llvm::StringLiteral kTiledOpAttrName = "kiln.tiled_op";

/// Marks the scf.for over the chunks of one output tile's contraction in a tiled matmul whose config has
/// `k_splits` > 1: each iteration adds a chunk's partial tile to the tile's sum; on the GPU the iterations are the
/// blocks of a thread-block cluster.
inline constexpr llvm::StringLiteral kClusterSplitAttrName = "kiln.cluster_split";

/// Marks an outlined kernel whose destinations are its operands' buffers (kiln-update-caches-in-place): it writes
/// only what changes in them.
inline constexpr llvm::StringLiteral kUpdatesInPlaceAttrName = "kiln.updates_in_place";
/// Name of the discardable attribute that carries the register layout (#kiln.row_layout) of a tile op's result.
inline constexpr llvm::StringLiteral kLayoutAttrName = "kiln.layout";
} // namespace kiln
} // namespace mlir

#endif // KILN_DIALECT_KILN_KILNDIALECT_H
