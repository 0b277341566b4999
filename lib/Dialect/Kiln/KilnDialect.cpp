//===- KilnDialect.cpp - The kiln dialect ----------------------------------===//
//
// Registers the kiln ops and turns folded attributes back into `kiln.constant` ops.
//
//===----------------------------------------------------------------------===//

#include "Dialect/Kiln/KilnDialect.h"
#include "Dialect/Kiln/KilnOps.h"

using namespace mlir;
using namespace mlir::kiln;

#include "Dialect/Kiln/KilnDialect.cpp.inc"
#include "Dialect/Kiln/KilnEnums.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Dialect/Kiln/KilnOps.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
