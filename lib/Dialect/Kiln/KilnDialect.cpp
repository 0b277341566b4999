//===- KilnDialect.cpp - The kiln dialect ----------------------------------===//
//
// Registers the kiln ops and turns folded attributes back into `kiln.constant` ops.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/KilnDialect.h"
#include "Dialect/Kiln/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::kiln;

#include "Dialect/Kiln/KilnDialect.cpp.inc"
#include "Dialect/Kiln/KilnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Dialect/Kiln/KilnAttrs.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Dialect/Kiln/KilnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Dialect/Kiln/KilnAttrs.cpp.inc"
      >();
}

/// Threads that can share a row: an aligned group of lanes of one warp (a power of two), or whole warps.
static bool isValidThreadsPerRow(int64_t threads) {
  return threads >= 1 && threads <= 1024 && (threads % 32 == 0 || (threads < 32 && llvm::isPowerOf2_64(threads)));
}

LogicalResult ConfigAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError, ArrayRef<int64_t> tile,
                                 int64_t warps, int64_t stages, StringRef lowering, int64_t group,
                                 int64_t kSplits) {
  if (tile.empty() || tile.size() > 3)
    return emitError() << "#kiln.config needs 1 to 3 tile sizes, got " << tile.size();
  for (int64_t size : tile)
    if (size <= 0)
      return emitError() << "#kiln.config tile sizes must be positive, got " << size;
  if (warps <= 0 || warps > 32)
    return emitError() << "#kiln.config warps must be in [1, 32], got " << warps;
  // A wgmma ring's slots are mbarrier-tracked, any number of them; cp.async groups are waited on by count.
  int64_t maxStages = lowering == "wgmma" ? 16 : 8;
  if (stages <= 0 || stages > maxStages)
    return emitError() << "#kiln.config stages must be in [1, " << maxStages << "] for lowering \"" << lowering
                       << "\", got " << stages;
  if (lowering != "host" && lowering != "mma_sync" && lowering != "wgmma" && lowering != "rows")
    return emitError() << "#kiln.config lowering must be \"host\", \"mma_sync\", \"wgmma\" or \"rows\", got \""
                       << lowering << "\"";
  if (group < 1 || group > 64)
    return emitError() << "#kiln.config group must be in [1, 64], got " << group;
  if (group != 1 && ((lowering != "mma_sync" && lowering != "wgmma") || tile.size() != 3))
    return emitError() << "#kiln.config group orders a GPU matmul's tiles (lowering \"mma_sync\" or \"wgmma\", "
                          "three tile sizes); got group = "
                       << group << " with lowering \"" << lowering << "\" and " << tile.size() << " tile sizes";
  // A cluster of up to 8 blocks is what every sm_90 part schedules (16 needs an opt-in per kernel).
  if (kSplits < 1 || kSplits > 8)
    return emitError() << "#kiln.config k_splits must be in [1, 8] (the blocks of one cluster), got " << kSplits;
  if (kSplits != 1 && (lowering != "wgmma" || tile.size() != 3))
    return emitError() << "#kiln.config k_splits splits a wgmma matmul's contraction over a cluster (lowering "
                          "\"wgmma\", three tile sizes); got k_splits = "
                       << kSplits << " with lowering \"" << lowering << "\" and " << tile.size() << " tile sizes";
  if (lowering == "rows") {
    int64_t threadsPerRow = tile.size() == 1 && (warps * 32) % tile[0] == 0 ? warps * 32 / tile[0] : 0;
    if (!isValidThreadsPerRow(threadsPerRow))
      return emitError() << "#kiln.config lowering \"rows\" needs tile = [rows] whose rows split the warps' "
                            "threads into a power of two up to 32, or a multiple of 32, per row; got "
                         << tile.size() << " tile sizes and " << warps << " warps";
  }
  return success();
}

Attribute ConfigAttr::parse(AsmParser &parser, Type) {
  SmallVector<int64_t> tile;
  int64_t warps = 0, stages = 0, group = 1, kSplits = 1;
  std::string lowering;
  auto parseSize = [&]() { return parser.parseInteger(tile.emplace_back()); };
  if (parser.parseLess() || parser.parseKeyword("tile") || parser.parseEqual() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseSize) || parser.parseComma() ||
      parser.parseKeyword("warps") || parser.parseEqual() || parser.parseInteger(warps) || parser.parseComma() ||
      parser.parseKeyword("stages") || parser.parseEqual() || parser.parseInteger(stages) || parser.parseComma() ||
      parser.parseKeyword("lowering") || parser.parseEqual() || parser.parseString(&lowering))
    return {};
  // The optional entries, each at most once, in this order.
  bool seenGroup = false, seenSplits = false;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key))
      return {};
    bool isGroup = key == "group" && !seenGroup && !seenSplits, isSplits = key == "k_splits" && !seenSplits;
    if (!isGroup && !isSplits) {
      parser.emitError(at) << "expected 'group' or 'k_splits' (in that order, each at most once), got '" << key
                           << "'";
      return {};
    }
    if (parser.parseEqual() || parser.parseInteger(isGroup ? group : kSplits))
      return {};
    (isGroup ? seenGroup : seenSplits) = true;
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ConfigAttr>(parser.getContext(), tile, warps, stages, lowering, group, kSplits);
}

void ConfigAttr::print(AsmPrinter &printer) const {
  printer << "<tile = [";
  llvm::interleaveComma(getTile(), printer);
  printer << "], warps = " << getWarps() << ", stages = " << getStages() << ", lowering = \"" << getLowering()
          << "\"";
  if (getGroup() != 1)
    printer << ", group = " << getGroup();
  if (getKSplits() != 1)
    printer << ", k_splits = " << getKSplits();
  printer << ">";
}

LogicalResult RowLayoutAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError, int64_t threadsPerRow,
                                    int64_t vector) {
  if (!isValidThreadsPerRow(threadsPerRow))
    return emitError() << "#kiln.row_layout threads_per_row must be a power of two up to 32 or a multiple of 32 "
                          "up to 1024, got "
                       << threadsPerRow;
  if (vector != 1 && vector != 2 && vector != 4 && vector != 8)
    return emitError() << "#kiln.row_layout vector must be 1, 2, 4 or 8, got " << vector;
  return success();
}

LogicalResult MmaLayoutAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError, int64_t warpsM,
                                    int64_t warpsN) {
  if (warpsM < 1 || warpsN < 1 || warpsM * warpsN > 32)
    return emitError() << "#kiln.mma_layout needs at least one warp each way and at most 32 warps, got "
                       << warpsM << " x " << warpsN;
  return success();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
