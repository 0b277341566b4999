//===- RunPlan.cpp - The host plan of a compiled module, as data ------------===//
//
// Walks a plan function in order. Every SSA value gets an id: a function argument is an input, tensor.empty a
// fresh buffer, a kernel call's result the destination it was given, a kiln.reshape a view of its operand (same
// bytes, new shape), a contiguous kiln.slice a view of its operand's bytes from an offset, a kiln.constant a
// constant whose bytes go to a file next to the manifest. An input that a
// kernel writes in place (the paged caches of an append) is marked updated_in_place: a caller sees it change.
//
//===----------------------------------------------------------------------===//

#include "Driver/RunPlan.h"

#include "Dialect/Kiln/KilnOps.h"
#include "Host/HostTensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::kiln;

/// Shape and dtype of a tensor value.
static llvm::json::Object describeType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  llvm::json::Array shape;
  for (int64_t size : tensor.getShape())
    shape.push_back(size);
  std::optional<ElementKind> kind = elementKindOf(tensor.getElementType());
  return llvm::json::Object{{"shape", std::move(shape)},
                            {"dtype", kind ? elementName(*kind).str() : std::string("unknown")}};
}

/// Writes a constant's elements (splats expanded) as raw bytes; returns the file name, or fails with an error
/// on the op that names the file (a full disk: the stream's error is taken off it, since a stream destroyed with
/// its error set ends the process).
static FailureOr<std::string> writeConstant(ConstantOp constant, StringRef outputDir, unsigned index) {
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense)
    return constant.emitOpError() << "kilnc: cannot write this constant into the run plan (dense only)";
  std::string name = (constant->getParentOfType<func::FuncOp>().getSymName() + "_const" + Twine(index) + ".bin").str();
  SmallString<256> path(outputDir);
  llvm::sys::path::append(path, name);
  std::error_code error;
  llvm::raw_fd_ostream out(path, error, llvm::sys::fs::OF_None);
  if (error)
    return constant.emitOpError() << "kilnc: cannot create " << path << ": " << error.message();
  int64_t count = dense.getNumElements();
  if (dense.getElementType().isInteger(1)) {
    // MLIR packs i1 into bits; the plan's buffers hold one byte (0 or 1) per element.
    for (bool bit : dense.getValues<bool>())
      out << static_cast<char>(bit ? 1 : 0);
  } else {
    ArrayRef<char> raw = dense.getRawData();
    for (int64_t i = 0, copies = dense.isSplat() ? count : 1; i < copies; ++i)
      out.write(raw.data(), raw.size());
  }
  out.close();
  if (std::error_code failed = out.error()) {
    out.clear_error();
    (void)llvm::sys::fs::remove(path);
    return constant.emitOpError() << "kilnc: cannot write " << path << ": " << failed.message();
  }
  return name;
}

FailureOr<llvm::json::Array> kiln::describeRunPlans(ModuleOp module, StringRef outputDir) {
  llvm::json::Array plans;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func.isPublic() || func.isExternal())
      continue;
    llvm::DenseMap<Value, int64_t> ids;
    llvm::json::Array values, steps;
    auto define = [&](Value value, llvm::json::Object description) {
      int64_t id = values.size();
      description["id"] = id;
      llvm::json::Object type = describeType(value.getType());
      description["shape"] = std::move(*type.get("shape"));
      description["dtype"] = std::move(*type.get("dtype"));
      values.push_back(std::move(description));
      ids[value] = id;
    };
    for (BlockArgument argument : func.getArguments())
      define(argument, llvm::json::Object{{"kind", "input"}, {"index", static_cast<int64_t>(argument.getArgNumber())}});
    llvm::json::Array outputs;
    unsigned constants = 0;
    for (Operation &op : func.getBody().front()) {
      if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
        define(empty, llvm::json::Object{{"kind", "buffer"}});
      } else if (std::optional<int64_t> offset = planViewOffset(&op)) {
        llvm::json::Object view{{"kind", "view"}, {"of", ids.lookup(op.getOperand(0))}};
        if (isa<SliceOp>(op)) // a run of the bytes; a reshape views them all
          view["offset"] = *offset;
        define(op.getResult(0), std::move(view));
      } else if (auto constant = dyn_cast<ConstantOp>(op)) {
        FailureOr<std::string> file = writeConstant(constant, outputDir, constants++);
        if (failed(file))
          return failure();
        define(constant, llvm::json::Object{{"kind", "constant"}, {"file", *file}});
      } else if (auto call = dyn_cast<func::CallOp>(op)) {
        llvm::json::Array args;
        for (Value operand : call.getOperands())
          args.push_back(ids.lookup(operand));
        steps.push_back(llvm::json::Object{{"kernel", call.getCallee().str()}, {"args", std::move(args)}});
        // Results are the destinations the call was given (the last operands), written in place.
        unsigned numResults = call.getNumResults(), firstDestination = call.getNumOperands() - numResults;
        for (unsigned i = 0; i < numResults; ++i) {
          Value destination = call.getOperand(firstDestination + i);
          ids[call.getResult(i)] = ids.lookup(destination);
          // A kernel that updates an argument in place (kiln-update-caches-in-place) changes the caller's data.
          Value storage = viewedStorage(destination);
          if (isa<BlockArgument>(storage))
            values[ids.lookup(storage)].getAsObject()->insert({"updated_in_place", true});
        }
      } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (Value operand : ret.getOperands())
          outputs.push_back(ids.lookup(operand));
      } else {
        return op.emitOpError() << "kilnc: a run plan cannot hold this op (expected buffers, kernel calls, "
                                   "views and constants)";
      }
    }
    plans.push_back(llvm::json::Object{{"function", func.getSymName().str()},
                                       {"values", std::move(values)},
                                       {"steps", std::move(steps)},
                                       {"outputs", std::move(outputs)}});
  }
  return plans;
}
