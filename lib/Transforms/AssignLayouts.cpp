//===- AssignLayouts.cpp - The kiln-assign-layouts pass --------------------===//
//
// A GPU lowering needs to know which thread holds which element of every tile value. The strategy is chosen
// here, once per tiled kernel, from its #kiln.config and the shapes it moves, and written into the IR as a
// `kiln.layout` attribute on each op, so that the lowering only reads it and a lit test can pin it. Row kernels
// (lowering "rows") get a #kiln.row_layout: the config's warps split over its rows, and the widest load of at
// most 16 bytes that every row buffer's width allows. Matmuls (lowering "mma_sync") get a #kiln.mma_layout on
// the tile matmul, its accumulation and the epilogue: the warps as the squarest grid of warp tiles of whole
// m16n8 fragments; "wgmma" matmuls one warp per 16 rows of the whole width, the warpgroup MMA's accumulator.
// Attentions (lowering "mma_sync", or "wgmma" in whole warpgroups) get one on every op of the loop: a column of
// warps, each owning 16 query rows of the score tile, the accumulator and the row vectors, so that the
// softmax's row reductions stay within a warp and P feeds P V from the registers it was computed in.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Transforms.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_KILNASSIGNLAYOUTS
#include "Transforms/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

/// The widest vector (elements of at most 16 bytes) that divides the row of every tensor of row width `width`
/// that the kernel reads (values from outside the loop) or writes (the loop's results). Values computed in the
/// loop live in registers, whatever their type.
static int64_t rowVector(scf::ForallOp forall, int64_t width) {
  int64_t vector = 8;
  auto account = [&](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() == 0 || tensor.getShape().back() != width)
      return;
    int64_t bytes = std::max<int64_t>(1, tensor.getElementTypeBitWidth() / 8);
    vector = std::min(vector, 16 / bytes);
  };
  forall.getBody()->walk([&](Operation *op) {
    for (Value operand : op->getOperands())
      if (!forall.getRegion().isAncestor(operand.getParentRegion()))
        account(operand.getType());
  });
  for (Type type : forall.getResultTypes())
    account(type);
  while (vector > 1 && width % vector != 0)
    vector /= 2;
  return vector;
}

LogicalResult kiln::assignRowLayouts(scf::ForallOp forall) {
  ConfigAttr config = getConfig(forall);
  if (!config || config.getLowering() != "rows")
    return forall.emitError() << "kiln-assign-layouts: needs a #kiln.config with lowering \"rows\"";
  // The tile's row width: the last dimension of the values the body computes.
  int64_t width = 0;
  forall.getBody()->walk([&](Operation *op) {
    if (!isa<KilnDialect>(op->getDialect()) || op->getNumOperands() == 0)
      return;
    auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    if (type && type.getRank() == 2)
      width = std::max(width, type.getShape().back());
  });
  if (width == 0)
    return forall.emitError() << "kiln-assign-layouts: the row kernel's loop holds no [rows, columns] tile";
  int64_t threadsPerRow = config.getWarps() * 32 / config.getTile()[0];
  auto layout = RowLayoutAttr::get(forall.getContext(), threadsPerRow, rowVector(forall, width));
  forall.getBody()->walk([&](Operation *op) {
    if (isa<KilnDialect>(op->getDialect()) && !isa<ConstantOp>(op))
      op->setAttr(kLayoutAttrName, layout);
  });
  return success();
}

/// The squarest warps_m x warps_n grid of `warps` warps whose warp tiles of a [bm, bn] tile are whole 16 x 8
/// fragments (fewer shared-memory reads per mma), rows first on ties; null when none is.
static MmaLayoutAttr squarestWarpGrid(MLIRContext *context, int64_t bm, int64_t bn, int64_t warps) {
  MmaLayoutAttr best;
  int64_t bestImbalance = INT64_MAX;
  for (int64_t warpsM : {32, 16, 8, 4, 2, 1}) {
    if (warps % warpsM != 0 || bm % (warpsM * 16) != 0 || bn % ((warps / warpsM) * 8) != 0)
      continue;
    int64_t imbalance = std::abs(bm / warpsM - bn / (warps / warpsM));
    if (imbalance < bestImbalance)
      bestImbalance = imbalance, best = MmaLayoutAttr::get(context, warpsM, warps / warpsM);
  }
  return best;
}

bool kiln::fitsWgmmaMatmul(ConfigAttr config, Type element, bool transposedRhs) {
  ArrayRef<int64_t> tile = config.getTile();
  return (element.isBF16() || element.isF16()) && tile.size() == 3 && tile[0] % 64 == 0 && tile[0] <= 256 &&
         config.getWarps() == tile[0] / 16 && tile[1] > 0 && tile[1] % (transposedRhs ? 16 : 64) == 0 &&
         tile[1] <= 256 && tile[2] == 64 && config.getStages() >= 3;
}

LogicalResult kiln::assignMmaLayouts(scf::ForallOp forall) {
  ConfigAttr config = getConfig(forall);
  bool wgmma = config && config.getLowering() == "wgmma";
  if (!config || (!wgmma && config.getLowering() != "mma_sync") || config.getTile().size() != 3)
    return forall.emitError() << "kiln-assign-layouts: needs a #kiln.config with lowering \"mma_sync\" or "
                                 "\"wgmma\" and tile = [BM, BN, BK]";
  // The tile matmul (none when K = 0 folded the contraction away).
  MatmulOp tileMatmul;
  forall.getBody()->walk([&](MatmulOp op) { tileMatmul = op; });
  Operation *culprit = tileMatmul ? tileMatmul.getOperation() : forall.getOperation();
  if (tileMatmul && tileMatmul.getTransposeLhs())
    return tileMatmul.emitOpError() << "the " << config.getLowering() << " lowering does not take transpose_lhs yet";
  int64_t bm = config.getTile()[0], bn = config.getTile()[1], bk = config.getTile()[2];
  MmaLayoutAttr layout;
  if (wgmma) {
    // The warpgroup MMA's accumulator: warp w holds rows 16w .. 16w + 15 of the whole width.
    Type element = tileMatmul ? tileMatmul.getLhs().getType().getElementType() : Builder(forall).getBF16Type();
    // Without a tile matmul (K = 0) there is no B to copy: any BN of whole 16-column steps lowers.
    bool transposedRhs = !tileMatmul || tileMatmul.getTransposeRhs();
    if (!fitsWgmmaMatmul(config, element, transposedRhs))
      return culprit->emitError() << "'kiln.matmul' op " << config << " does not fit the wgmma "
                                  << "lowering: need bf16 or f16 operands (got " << element
                                  << "), BM a multiple of 64 up to 256 with one warpgroup (4 warps) per 64 rows, "
                                     "BN up to 256 and a multiple of 64 (of 16 with transpose_rhs), BK = 64 and "
                                     "stages >= 3";
    layout = MmaLayoutAttr::get(forall.getContext(), config.getWarps(), 1);
  } else {
    // The fragment depth: m16n8k16 for 16-bit operands, m16n8k8 for f32 (as TF32).
    int64_t fragmentK = tileMatmul && tileMatmul.getLhs().getType().getElementType().isF32() ? 8 : 16;
    layout = squarestWarpGrid(forall.getContext(), bm, bn, config.getWarps());
    if (!layout || bk % fragmentK != 0 || config.getStages() < 2)
      return culprit->emitError() << "'kiln.matmul' op #kiln.config " << config
                                  << " does not fit the mma_sync kernel: need BM a multiple of 16 x warp rows, BN "
                                     "of 8 x warp columns, BK of "
                                  << fragmentK << " and stages >= 2";
  }
  forall->setAttr(kLayoutAttrName, layout);
  forall.getBody()->walk([&](Operation *op) {
    if (isa<KilnDialect>(op->getDialect()) && !isa<ConstantOp, ReshapeOp>(op))
      op->setAttr(kLayoutAttrName, layout);
  });
  return success();
}

LogicalResult kiln::assignAttentionLayouts(scf::ForallOp forall) {
  ConfigAttr config = getConfig(forall);
  bool wgmma = config && config.getLowering() == "wgmma";
  if (!config || (!wgmma && config.getLowering() != "mma_sync") || config.getTile().size() != 2)
    return forall.emitError() << "kiln-assign-layouts: needs a #kiln.config with lowering \"mma_sync\" or "
                                 "\"wgmma\" and tile = [BQ, BK]";
  int64_t bq = config.getTile()[0], bk = config.getTile()[1];
  if (bq % (wgmma ? 64 : 16) != 0 || bk % 16 != 0 || config.getWarps() != bq / 16)
    return forall.emitError() << "'kiln.attention' op #kiln.config " << config << " does not fit the "
                              << config.getLowering() << " attention: BQ must be a multiple of "
                              << (wgmma ? "64 (whole warpgroups)" : "16") << " and BK a multiple of 16, with one "
                              << "warp per 16 query rows";
  auto layout = MmaLayoutAttr::get(forall.getContext(), bq / 16, 1);
  forall->setAttr(kLayoutAttrName, layout);
  forall.getBody()->walk([&](Operation *op) {
    if (isa<KilnDialect>(op->getDialect()) && !isa<ConstantOp, ReshapeOp, DimOp>(op))
      op->setAttr(kLayoutAttrName, layout);
  });
  return success();
}

namespace {
struct KilnAssignLayoutsPass : kiln::impl::KilnAssignLayoutsBase<KilnAssignLayoutsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForallOp> kernels;
    getOperation()->walk([&](scf::ForallOp forall) {
      ConfigAttr config = getConfig(forall);
      StringRef lowering = config ? config.getLowering() : "";
      if (lowering == "rows" || lowering == "mma_sync" || lowering == "wgmma")
        kernels.push_back(forall);
    });
    for (scf::ForallOp forall : kernels) {
      auto tiled = forall->getAttrOfType<StringAttr>(kTiledOpAttrName);
      LogicalResult assigned = getConfig(forall).getLowering() == "rows" ? assignRowLayouts(forall)
                               : tiled && tiled.getValue() == AttentionOp::getOperationName()
                                   ? assignAttentionLayouts(forall)
                                   : assignMmaLayouts(forall);
      if (failed(assigned))
        return signalPassFailure();
    }
  }
};
} // namespace
