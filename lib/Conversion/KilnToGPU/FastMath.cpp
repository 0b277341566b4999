//===- FastMath.cpp - The kernels' f32 exp and division, flushing subnormals -===//
//
// f32 exp and division in the GPU kernels (softmax, sigmoid, SiLU, GELU's tanh form, normalising by a sum, a
// traced division) take the hardware's approximations with subnormal results flushed to zero: exp through
// libdevice's fast path (ex2.approx.ftz of x log2(e)), x / y as x times rcp.approx.ftz(y). An f32 tanh marked
// `afn` (the attention lowering marks its tanh: a softcap, whose scores end as bf16/f16 probabilities) becomes
// tanh.approx.f32, as FlashAttention's softcap computes it (about 5e-4 absolute error, one MUFU instruction
// against libdevice's twenty). The module's
// nvvm-reflect-ftz flag puts every libdevice function the kernels call (exp2, tanh, log, rsqrt, fmodf) on its
// flush-to-zero path, as Triton sets it and as nvcc's --use_fast_math (FlashAttention's build) does (so a
// subnormal dividend of kiln.fmod or kiln.remainder reads as 0 on the GPU, not on the host).
//
// exp2OnFma computes 2^x without the special-function unit, for the share of a softmax's exponentials that a
// kernel moves onto the FMA units.
//
// Why flush: without it, ptxas wraps each MUFU instruction in a subnormal rescaling sequence, about five more
// SASS instructions per exp or division, and spends 40% of its time on them in a SiLU GEMM (39 against 24 ms);
// assembling is the largest part of a cold JIT compile. What it changes: an exp or reciprocal below 2^-126
// (1.2e-38) becomes 0: a divisor below 2^-126 gives inf (so 0 / such a divisor gives NaN), one above 2^126 gives
// 0. The
// approximations' relative errors (about 1e-6 for exp, 2 ulp for division) sit far below what bf16/f16 outputs
// and the f32 tolerance of 1e-4 resolve.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

Value kiln::exp2OnFma(OpBuilder &b, Location loc, Value x) {
  // 2^f ~ 1 + f (c1 + f (c2 + f c3)) on [-0.5, 0.5], fitted for the least greatest relative error with the
  // constant term held at 1.
  constexpr float kC1 = 0.69328297f, kC2 = 0.24221097f, kC3 = 0.05500857f;
  // Adding 1.5 * 2^23 rounds to the nearest integer, which then sits in the low bits of the sum.
  constexpr float kRound = 12582912.0f;
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto constant = [&](float value) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value)); };
  Value clamped = arith::MaximumFOp::create(b, loc, x, constant(-127.0f));
  Value round = constant(kRound);
  Value rounded = arith::AddFOp::create(b, loc, clamped, round);
  Value whole = arith::SubFOp::create(b, loc, rounded, round);
  Value fraction = arith::SubFOp::create(b, loc, clamped, whole);
  Value poly = constant(kC3);
  for (float coefficient : {kC2, kC1, 1.0f})
    poly = arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, poly, fraction), constant(coefficient));
  // 2^j's bits are (j + 127) << 23, and (bits of the sum) << 23 is j << 23 modulo 2^32 (the sum's bits above its
  // 9 low ones shift out); j = -127 gives 0. A product rather than an integer add into the polynomial's bits keeps
  // a NaN a NaN.
  Value exponent = arith::ShLIOp::create(b, loc, arith::BitcastOp::create(b, loc, i32, rounded),
                                         arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(23)));
  Value scaleBits = arith::AddIOp::create(b, loc, exponent,
                                          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(127 << 23)));
  return arith::MulFOp::create(b, loc, poly, arith::BitcastOp::create(b, loc, f32, scaleBits));
}

void kiln::approximateExpAndDivision(gpu::GPUModuleOp gpuModule) {
  SmallVector<arith::DivFOp> divisions;
  SmallVector<math::TanhOp> tanhs;
  gpuModule.walk([&](Operation *op) {
    if (auto exp = dyn_cast<math::ExpOp>(op); exp && exp.getType().isF32())
      exp.setFastmath(exp.getFastmath() | arith::FastMathFlags::afn);
    else if (auto division = dyn_cast<arith::DivFOp>(op); division && division.getType().isF32())
      divisions.push_back(division);
    else if (auto tanh = dyn_cast<math::TanhOp>(op);
             tanh && tanh.getType().isF32() && arith::bitEnumContainsAll(tanh.getFastmath(), arith::FastMathFlags::afn))
      tanhs.push_back(tanh);
  });
  // A tanh that allows an approximation (an attention's score_mod): the hardware's tanh.approx.f32.
  for (math::TanhOp tanh : tanhs) {
    OpBuilder builder(tanh);
    Value approximation = LLVM::InlineAsmOp::create(
                              builder, tanh.getLoc(), builder.getF32Type(), ValueRange{tanh.getOperand()},
                              "tanh.approx.f32 $0, $1;", "=f,f", /*has_side_effects=*/false,
                              /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                              LLVM::AsmDialectAttr::get(builder.getContext(), LLVM::AsmDialect::AD_ATT),
                              /*operand_attrs=*/ArrayAttr())
                              .getRes();
    tanh.replaceAllUsesWith(approximation);
    tanh.erase();
  }
  for (arith::DivFOp division : divisions) {
    OpBuilder builder(division);
    Value reciprocal =
        NVVM::RcpApproxFtzF32Op::create(builder, division.getLoc(), builder.getF32Type(), division.getRhs());
    division.replaceAllUsesWith(
        arith::MulFOp::create(builder, division.getLoc(), division.getLhs(), reciprocal).getResult());
    division.erase();
  }
  // Once per module (a module the flag is on already is left alone).
  auto isFtzFlag = [](Attribute flag) {
    auto entry = dyn_cast<LLVM::ModuleFlagAttr>(flag);
    return entry && entry.getKey() == "nvvm-reflect-ftz";
  };
  for (auto list : gpuModule.getOps<LLVM::ModuleFlagsOp>())
    if (llvm::any_of(list.getFlags(), isFtzFlag))
      return;
  MLIRContext *context = gpuModule.getContext();
  OpBuilder builder = OpBuilder::atBlockBegin(gpuModule.getBody());
  LLVM::ModuleFlagsOp::create(
      builder, gpuModule.getLoc(),
      builder.getArrayAttr({LLVM::ModuleFlagAttr::get(context, LLVM::ModFlagBehavior::Override,
                                                      builder.getStringAttr("nvvm-reflect-ftz"),
                                                      builder.getI32IntegerAttr(1))}));
}
