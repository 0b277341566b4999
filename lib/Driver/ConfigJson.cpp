//===- ConfigJson.cpp - #kiln.config as JSON -------------------------------===//
//
// Writes and reads the JSON object of a #kiln.config (Driver/ConfigJson.h); reading goes through
// ConfigAttr::getChecked, so a config pinned from Python meets the same verifier as one written in IR.
//
//===----------------------------------------------------------------------===//

#include "Driver/ConfigJson.h"

using namespace mlir;
using namespace mlir::kiln;

llvm::json::Object kiln::configToJson(ConfigAttr config) {
  llvm::json::Array tile;
  for (int64_t size : config.getTile())
    tile.push_back(size);
  llvm::json::Object object{{"tile", std::move(tile)},
                            {"warps", config.getWarps()},
                            {"stages", config.getStages()},
                            {"lowering", config.getLowering().str()}};
  if (config.getGroup() != 1)
    object["group"] = config.getGroup();
  if (config.getKSplits() != 1)
    object["k_splits"] = config.getKSplits();
  return object;
}

ConfigAttr kiln::configFromJson(const llvm::json::Value &value, MLIRContext *context,
                                llvm::function_ref<InFlightDiagnostic()> emitError) {
  const llvm::json::Object *object = value.getAsObject();
  const llvm::json::Array *tile = object ? object->getArray("tile") : nullptr;
  std::optional<int64_t> warps = object ? object->getInteger("warps") : std::nullopt;
  std::optional<int64_t> stages = object ? object->getInteger("stages") : std::nullopt;
  std::optional<llvm::StringRef> lowering =
      object && object->get("lowering") ? object->getString("lowering") : std::optional<llvm::StringRef>("mma_sync");
  std::optional<int64_t> group =
      object && object->get("group") ? object->getInteger("group") : std::optional<int64_t>(1);
  std::optional<int64_t> kSplits =
      object && object->get("k_splits") ? object->getInteger("k_splits") : std::optional<int64_t>(1);
  SmallVector<int64_t> sizes;
  for (const llvm::json::Value &size : tile ? *tile : llvm::json::Array())
    if (std::optional<int64_t> whole = size.getAsInteger())
      sizes.push_back(*whole);
  if (!tile || sizes.size() != tile->size() || !warps || !stages || !lowering || !group || !kSplits) {
    emitError() << "a config is an object of a \"tile\" (whole numbers), \"warps\", \"stages\", a \"lowering\" "
                   "name and an optional \"group\" and \"k_splits\" (whole numbers)";
    return nullptr;
  }
  return ConfigAttr::getChecked(emitError, context, llvm::ArrayRef<int64_t>(sizes), *warps, *stages, *lowering,
                                *group, *kSplits);
}
