//===- WgmmaBuilding.cpp - Building blocks of Kiln's Hopper kernels --------===//
//
// Swizzled placement, matrix descriptors, the register-A warpgroup MMA (as inline PTX, the form
// convert-nvvm-to-llvm gives the descriptor-only nvvm.wgmma.mma_async) and accumulator conversions.
//
//===----------------------------------------------------------------------===//

#include "WgmmaBuilding.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

Value gpukernel::swizzledPanelIndex(IndexMath &m, Value row, Value column, int64_t rows) {
  Value panel = m.div(column, kSwizzleRowElements);
  Value chunk = arith::XOrIOp::create(m.b, m.loc, m.div(m.rem(column, kSwizzleRowElements), 8), m.rem(row, 8));
  return m.add(m.mul(panel, rows * kSwizzleRowElements), m.add(m.mul(row, kSwizzleRowElements), m.mul(chunk, 8)));
}

DescriptorBuilder::DescriptorBuilder(OpBuilder &b, Location loc, Value sharedBytes) : b(b), loc(loc) {
  IndexMath m{b, loc};
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, sharedBytes);
  baseUnits = m.div(arith::AndIOp::create(b, loc, base, m.c(0x3FFFF)), 16);
}

Value DescriptorBuilder::get(Value byteOffset, int64_t leadingBytes, int64_t strideBytes, int64_t stepBytes) {
  IndexMath m{b, loc};
  // Bits 16-29: leading byte offset; 32-45: stride byte offset (both in 16-byte units); 62-63: 1 = 128-byte
  // swizzle; the base offset (49-51) stays 0 since panels start on the swizzle's 1024-byte period.
  uint64_t fields = (uint64_t(leadingBytes >> 4) << 16) | (uint64_t(strideBytes >> 4) << 32) | (uint64_t(1) << 62);
  Value start = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), m.add(baseUnits, m.div(byteOffset, 16)));
  Value constant = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(fields));
  Value descriptor = arith::OrIOp::create(b, loc, start, constant);
  if (stepBytes == 0)
    return descriptor;
  // The start field (bits 0-13) has room for the step: shared memory ends below 2^14 16-byte units.
  return arith::AddIOp::create(b, loc, descriptor, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(stepBytes >> 4)));
}

void gpukernel::fenceCopiesForWgmma(OpBuilder &b, Location loc) {
  NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared,
                             NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
}

Value gpukernel::zeroAccumulator(OpBuilder &b, Location loc, int64_t n) {
  auto type = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(n / 2, b.getF32Type()));
  return LLVM::ZeroOp::create(b, loc, type);
}

/// A 32-bit A-fragment register (i32, or a vector<2xf16>) as the i32 that inline PTX takes.
static Value asI32(OpBuilder &b, Location loc, Value reg) {
  if (reg.getType().isInteger(32))
    return reg;
  Value word = vector::BitCastOp::create(b, loc, VectorType::get({1}, b.getI32Type()), reg);
  return vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
}

/// One register-A wgmma.mma_async m64nNk16 (see issueWgmmaRegisterAGroup).
static Value wgmmaRegisterA(OpBuilder &b, Location loc, Value accumulator, ArrayRef<Value> a, Value descriptorB,
                            int64_t n, bool bf16, bool bNMajor) {
  int64_t registers = n / 2;
  std::string outputs, constraints;
  for (int64_t i = 0; i < registers; ++i) {
    outputs += (i ? ", $" : "$") + std::to_string(i);
    constraints += "=f,";
  }
  // Operands: the four A registers, the B descriptor, then the accumulators tied to the outputs.
  std::string text = llvm::formatv("{{ .reg .pred p; setp.ne.b32 p, 1, 0; "
                                   "wgmma.mma_async.sync.aligned.m64n{0}k16.f32.{1}.{1} {{{2}}, {{${3}, ${4}, ${5}, "
                                   "${6}}, ${7}, p, 1, 1, {8}; }",
                                   n, bf16 ? "bf16" : "f16", outputs, registers, registers + 1, registers + 2,
                                   registers + 3, registers + 4, bNMajor ? 1 : 0)
                         .str();
  constraints += "r,r,r,r,l";
  for (int64_t i = 0; i < registers; ++i)
    constraints += "," + std::to_string(i);
  SmallVector<Value> operands;
  for (Value reg : a)
    operands.push_back(asI32(b, loc, reg));
  operands.push_back(descriptorB);
  for (int64_t i = 0; i < registers; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, accumulator, ArrayRef<int64_t>{i}));
  return LLVM::InlineAsmOp::create(b, loc, accumulator.getType(), operands, text, constraints,
                                   /*has_side_effects=*/true, /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None,
                                   LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
                                   /*operand_attrs=*/ArrayAttr())
      .getRes();
}

void gpukernel::fenceWgmmaOperands(OpBuilder &b, Location loc) { NVVM::WgmmaFenceAlignedOp::create(b, loc); }

Value gpukernel::issueWgmmaRegisterAGroup(OpBuilder &b, Location loc, Value accumulator,
                                          ArrayRef<SmallVector<Value>> a, ArrayRef<Value> descriptorsB, int64_t n,
                                          bool bf16, bool bNMajor) {
  for (auto [registers, descriptor] : llvm::zip_equal(a, descriptorsB))
    accumulator = wgmmaRegisterA(b, loc, accumulator, registers, descriptor, n, bf16, bNMajor);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return accumulator;
}

Value gpukernel::wgmmaWaitFor(OpBuilder &b, Location loc, int64_t pending, Value accumulator,
                              ArrayRef<Value> readRegisters) {
  int64_t registers = cast<LLVM::LLVMStructType>(accumulator.getType()).getBody().size();
  std::string constraints;
  SmallVector<Value> operands;
  for (int64_t i = 0; i < registers; ++i)
    constraints += "=f,";
  for (int64_t i = 0; i < registers; ++i) {
    constraints += (i ? "," : "") + std::to_string(i);
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, accumulator, ArrayRef<int64_t>{i}));
  }
  for (Value reg : readRegisters) {
    constraints += ",r";
    operands.push_back(asI32(b, loc, reg));
  }
  return LLVM::InlineAsmOp::create(b, loc, accumulator.getType(), operands,
                                   llvm::formatv("wgmma.wait_group.sync.aligned {0};", pending).str(), constraints,
                                   /*has_side_effects=*/true, /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None,
                                   LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
                                   /*operand_attrs=*/ArrayAttr())
      .getRes();
}

SmallVector<Value> gpukernel::accumulatorFragments(OpBuilder &b, Location loc, Value accumulator) {
  int64_t registers = cast<LLVM::LLVMStructType>(accumulator.getType()).getBody().size();
  auto fragmentType = VectorType::get({4}, b.getF32Type());
  SmallVector<Value> fragments;
  for (int64_t j = 0; j < registers / 4; ++j) {
    SmallVector<Value> parts;
    for (int64_t e = 0; e < 4; ++e)
      parts.push_back(LLVM::ExtractValueOp::create(b, loc, accumulator, ArrayRef<int64_t>{4 * j + e}));
    fragments.push_back(vector::FromElementsOp::create(b, loc, fragmentType, parts));
  }
  return fragments;
}

Value gpukernel::fragmentsAccumulator(OpBuilder &b, Location loc, ArrayRef<Value> fragments) {
  Value accumulator = zeroAccumulator(b, loc, fragments.size() * 8);
  for (auto [j, fragment] : llvm::enumerate(fragments))
    for (int64_t e = 0; e < 4; ++e)
      accumulator = LLVM::InsertValueOp::create(
          b, loc, accumulator, vector::ExtractOp::create(b, loc, fragment, ArrayRef<int64_t>{e}),
          ArrayRef<int64_t>{int64_t(4 * j + e)});
  return accumulator;
}
