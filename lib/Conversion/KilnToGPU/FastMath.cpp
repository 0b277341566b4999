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
