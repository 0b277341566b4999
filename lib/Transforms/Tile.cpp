//===- Tile.cpp - The kiln-tile pass ---------------------------------------===//
//
// Tiles every kernel op that carries a #kiln.config. The per-op tilers live in TileMatmul.cpp,
// TileAttention.cpp and TileRows.cpp; the tile-sized ops they create carry no config and are left alone.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNTILE
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// Row kernels that can be tiled: a softmax along the last axis, rms_norm or layer_norm, of rank >= 2 (a
/// single row, or a softmax along another axis, stays one untiled kernel).
static bool isRowKernel(Operation *op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (type.getRank() < 2)
    return false;
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    return static_cast<int64_t>(softmax.getAxis()) == type.getRank() - 1;
  return isa<RmsNormOp, LayerNormOp>(op);
}

namespace {
struct KilnTilePass : kiln::impl::KilnTileBase<KilnTilePass> {
  void runOnOperation() override {
    SmallVector<Operation *> kernels;
    getOperation()->walk([&](Operation *op) {
      if (isKernelOp(op) && getConfig(op))
        kernels.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : kernels) {
      rewriter.setInsertionPoint(op);
      LogicalResult result = success();
      if (auto matmul = dyn_cast<MatmulOp>(op))
        result = tileMatmul(rewriter, matmul);
      else if (auto attention = dyn_cast<AttentionOp>(op))
        result = tileAttention(rewriter, attention);
      else if (isRowKernel(op))
        result = tileRowKernel(rewriter, op);
      if (failed(result)) {
        op->emitError() << "kiln-tile: cannot tile this op with " << getConfig(op);
        return signalPassFailure();
      }
    }
  }
};
} // namespace
