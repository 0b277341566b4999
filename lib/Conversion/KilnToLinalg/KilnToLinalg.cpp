//===- KilnToLinalg.cpp - The convert-kiln-to-linalg pass ------------------===//
//
// Drives the per-family lowering patterns as a partial conversion, so an op that cannot be lowered is reported
// by name instead of silently left behind.
//
//===----------------------------------------------------------------------===//

#include "Conversion/Passes.h"
#include "Conversion/KilnToLinalg/LinalgBuilders.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir {
namespace kiln {
#define GEN_PASS_DEF_CONVERTKILNTOLINALG
#include "Conversion/Passes.h.inc"
} // namespace kiln
} // namespace mlir

using namespace mlir;
using namespace mlir::kiln;

void kiln::populateKilnToLinalgPatterns(RewritePatternSet &patterns) {
  populateElementwiseLoweringPatterns(patterns);
  populateContractionLoweringPatterns(patterns);
  populateNormalizationLoweringPatterns(patterns);
  populateDataMovementLoweringPatterns(patterns);
  populatePagedKvLoweringPatterns(patterns);
}

namespace {
struct ConvertKilnToLinalgPass : kiln::impl::ConvertKilnToLinalgBase<ConvertKilnToLinalgPass> {
  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addIllegalDialect<KilnDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateKilnToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
