//===- ClusterSums.cpp - Tiles summed across a thread-block cluster --------===//
//
// The cluster barrier and the chunk sums over distributed shared memory of ClusterSums.h.
//
//===----------------------------------------------------------------------===//

#include "ClusterSums.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::gpukernel;

void gpukernel::clusterBarrier(OpBuilder &b, Location loc) {
  NVVM::ClusterArriveOp::create(b, loc, b.getUnitAttr());
  NVVM::ClusterWaitOp::create(b, loc, b.getUnitAttr());
}

SmallVector<Value> gpukernel::clusterSum(OpBuilder &b, Location loc, Value base, Value byteOffset, int64_t count,
                                         int64_t ranks) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  auto quad = VectorType::get({4}, f32);
  Value address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(),
                                                arith::AddIOp::create(b, loc, base, byteOffset).getResult());
  Value local = LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(ctx, 3), address);
  auto clusterPointer = LLVM::LLVMPointerType::get(ctx, 7);
  SmallVector<Value> sums(count);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    Value remote = NVVM::MapaOp::create(b, loc, clusterPointer, local,
                                        arith::ConstantIntOp::create(b, loc, rank, 32));
    for (int64_t first = 0; first < count; first += 4) {
      Value at = LLVM::GEPOp::create(b, loc, clusterPointer, f32, remote, ArrayRef<LLVM::GEPArg>{first});
      Value four = LLVM::LoadOp::create(b, loc, quad, at, /*alignment=*/16);
      for (int64_t e = 0; e < 4; ++e) {
        Value value = vector::ExtractOp::create(b, loc, four, ArrayRef<int64_t>{e});
        sums[first + e] = rank == 0 ? value : arith::AddFOp::create(b, loc, sums[first + e], value).getResult();
      }
    }
  }
  return sums;
}
