//===- KernelBuilding.cpp - Building blocks of Kiln's GPU kernels ----------===//
//
// Broadcast indexing, fragment packing and the mma.sync call shared by the kernel builders.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilding.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

Value gpukernel::broadcastLinearIndex(IndexMath &m, ArrayRef<int64_t> operandShape, ArrayRef<int64_t> resultShape,
                                      ArrayRef<Value> indices, ArrayRef<Value> runtimeExtents) {
  int64_t offset = resultShape.size() - operandShape.size(), staticStride = 1;
  Value linear, runtimeStride; // 0 until set; the stride is staticStride times runtimeStride (when set)
  for (int64_t d = operandShape.size() - 1; d >= 0; --d) {
    int64_t resultDim = offset + d;
    if (operandShape[d] != 1 && indices[resultDim]) {
      Value term = m.mul(indices[resultDim], staticStride);
      term = runtimeStride ? m.mul(term, runtimeStride) : term;
      linear = linear ? m.add(linear, term) : term;
    }
    Value extent = runtimeExtents.empty() ? Value() : runtimeExtents[resultDim];
    if (operandShape[d] != 1 && extent)
      runtimeStride = runtimeStride ? m.mul(runtimeStride, extent) : extent;
    else
      staticStride *= operandShape[d];
  }
  return linear ? linear : m.c(0);
}

SmallVector<Value> gpukernel::delinearize(IndexMath &m, ArrayRef<int64_t> shape, Value linear) {
  SmallVector<Value> index(shape.size());
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    index[d] = m.rem(linear, shape[d]);
    linear = m.div(linear, shape[d]);
  }
  return index;
}

/// An f32 value rounded to TF32 (to nearest, ties away from zero), in the i32 register mma.sync takes.
static Value toTf32(OpBuilder &b, Location loc, Value value) {
  return NVVM::ConvertFloatToTF32Op::create(b, loc, b.getI32Type(), value, NVVM::FPRoundingMode::RNA,
                                            NVVM::SaturationMode::NONE, /*relu=*/false);
}

SmallVector<Value> gpukernel::tf32Registers(OpBuilder &b, Location loc, ArrayRef<Value> values, bool split) {
  SmallVector<Value> big, rests;
  for (Value value : values) {
    big.push_back(toTf32(b, loc, value));
    if (!split)
      continue;
    Value bigValue = arith::BitcastOp::create(b, loc, b.getF32Type(), big.back());
    rests.push_back(toTf32(b, loc, arith::SubFOp::create(b, loc, value, bigValue)));
  }
  big.append(rests);
  return big;
}

SmallVector<Value> gpukernel::packFragment(OpBuilder &b, Location loc, Value fragment) {
  auto type = cast<VectorType>(fragment.getType());
  Type i32 = b.getI32Type();
  SmallVector<Value> registers;
  for (int64_t i = 0; i < type.getDimSize(0); ++i) {
    Value pair = vector::ExtractOp::create(b, loc, fragment, ArrayRef<int64_t>{i});
    if (type.getElementType().isF16()) {
      registers.push_back(pair);
      continue;
    }
    if (type.getElementType().isF32()) {
      registers.push_back(vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{0}));
      continue;
    }
    Value word = vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), pair);
    registers.push_back(vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0}));
  }
  return registers;
}

Value gpukernel::mmaSync(OpBuilder &b, Location loc, ArrayRef<Value> a, ArrayRef<Value> bFragment, Value acc,
                         Type element) {
  // A TF32 A fragment has four registers, a split one eight (values, then remainders); B two or four.
  assert((!element.isF32() || bFragment.size() == (a.size() == 8 ? 4 : 2)) &&
         "mmaSync: A and B are both split (3xTF32) or both not");
  if (element.isF32() && a.size() == 8) {
    ArrayRef<Value> aBig = a.take_front(4), aRest = a.drop_front(4);
    ArrayRef<Value> bBig = bFragment.take_front(2), bRest = bFragment.drop_front(2);
    Value step = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(cast<VectorType>(acc.getType()), 0.0f));
    step = mmaSync(b, loc, aRest, bBig, step, element);
    step = mmaSync(b, loc, aBig, bRest, step, element);
    step = mmaSync(b, loc, aBig, bBig, step, element);
    return arith::AddFOp::create(b, loc, acc, step);
  }
  MLIRContext *ctx = b.getContext();
  auto result = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(4, b.getF32Type()));
  SmallVector<Value> c;
  for (int64_t e = 0; e < 4; ++e)
    c.push_back(vector::ExtractOp::create(b, loc, acc, ArrayRef<int64_t>{e}));
  NVVM::MMATypes type = element.isBF16() ? NVVM::MMATypes::bf16
                        : element.isF16() ? NVVM::MMATypes::f16
                                          : NVVM::MMATypes::tf32;
  int64_t depth = element.isF32() ? 8 : 16;
  Value d = NVVM::MmaOp::create(b, loc, result, a, bFragment, c, {16, 8, depth}, std::nullopt, std::nullopt,
                                std::array<NVVM::MMATypes, 2>{type, type},
                                std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
  SmallVector<Value> parts;
  for (int64_t e = 0; e < 4; ++e)
    parts.push_back(LLVM::ExtractValueOp::create(b, loc, d, ArrayRef<int64_t>{e}));
  return vector::FromElementsOp::create(b, loc, cast<VectorType>(acc.getType()), parts);
}

KernelFunction gpukernel::startKernel(OpBuilder &b, gpu::GPUModuleOp module, Location loc, StringRef name,
                                      ArrayRef<RankedTensorType> buffers, int64_t threads, int64_t sharedBytes,
                                      int64_t sharedAlignment, unsigned sizeParams) {
  MLIRContext *ctx = b.getContext();
  b.setInsertionPointToEnd(module.getBody());
  auto workgroup = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  std::string sharedName = (name + "_smem").str();
  auto globalType = MemRefType::get({0}, b.getI8Type(), MemRefLayoutAttrInterface(), workgroup);
  if (sharedBytes > 0)
    memref::GlobalOp::create(b, loc, b.getStringAttr(sharedName), b.getStringAttr("public"),
                             TypeAttr::get(globalType), Attribute(), UnitAttr(), b.getI64IntegerAttr(sharedAlignment));

  SmallVector<Type> params;
  for (RankedTensorType buffer : buffers)
    params.push_back(MemRefType::get({sizeParams ? kSizeGenericExtent : buffer.getNumElements()},
                                     buffer.getElementType()));
  params.append(sizeParams, b.getIndexType());
  auto func = gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(params, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  b.setInsertionPointToStart(&func.getBody().front());
  if (sharedBytes == 0)
    return {func, Value()};

  Value raw = memref::GetGlobalOp::create(b, loc, globalType, sharedName);
  auto bytesType = MemRefType::get({sharedBytes}, b.getI8Type(), MemRefLayoutAttrInterface(), workgroup);
  Value bytes = memref::ReinterpretCastOp::create(b, loc, bytesType, raw, 0, ArrayRef<int64_t>{sharedBytes},
                                                  ArrayRef<int64_t>{1});
  return {func, bytes};
}

Value gpukernel::sharedView(OpBuilder &b, Location loc, Value sharedBytes, int64_t offset, int64_t size,
                            Type element) {
  auto space = cast<MemRefType>(sharedBytes.getType()).getMemorySpace();
  auto type = MemRefType::get({size}, element, MemRefLayoutAttrInterface(), space);
  Value shift = arith::ConstantIndexOp::create(b, loc, offset * (element.getIntOrFloatBitWidth() / 8));
  return memref::ViewOp::create(b, loc, type, sharedBytes, shift, ValueRange{});
}

std::pair<SmallVector<Value>, SmallVector<Value>>
gpukernel::loadBFragmentPair(OpBuilder &b, Location loc, IndexMath &m, Value shared, Value base, int64_t stride,
                             Value lane, Value k0, Value n0, bool kMajor) {
  Type element = cast<MemRefType>(shared.getType()).getElementType();
  unsigned bits = element.getIntOrFloatBitWidth();
  // Each 8-row matrix holds 16 bytes per row: 8 16-bit elements, or 4 32-bit ones (half an m16n8k8 fragment's
  // depth).
  int64_t perRow = 128 / bits;
  // Lanes 8i..8i+7 address the rows of matrix i: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
  // for 16-bit elements; (n 0-7, k 0-3), (n 0-7, k 4-7), (n 8-15, k 0-3), (n 8-15, k 4-7) for 32-bit ones.
  Value row, col;
  if (kMajor) {
    row = m.add(k0, m.rem(lane, 16));
    col = m.add(n0, m.mul(m.div(lane, 16), 8));
  } else {
    row = m.add(n0, m.add(m.rem(lane, 8), m.mul(m.div(lane, 16), 8)));
    col = m.add(k0, m.mul(m.rem(m.div(lane, 8), 2), perRow));
  }
  Value index = m.add(base, m.add(m.mul(row, stride), col));
  Value fragment = nvgpu::LdMatrixOp::create(b, loc, VectorType::get({4, 32 / bits}, element), shared, index,
                                             b.getBoolAttr(kMajor), b.getI32IntegerAttr(4));
  SmallVector<Value> registers = packFragment(b, loc, fragment);
  return {{registers[0], registers[1]}, {registers[2], registers[3]}};
}
