// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_90a | FileCheck %s
// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_90a | sed -n '/gpu.module/,$p' | grep -c "math.exp2" | FileCheck %s --check-prefix=EXP2
// RUN: kiln-opt %s -kiln-tile -canonicalize -kiln-online-softmax -kiln-split-masked-tiles -kiln-assign-layouts -convert-kiln-to-gpu=chip=sm_90a | sed -n '/gpu.module/,$p' | grep -c "arith.shli" | FileCheck %s --check-prefix=ON-FMA

// `kiln.fma_exp2 = 8`: of the 32 probability registers a thread holds (128 x 64 scores over 256 threads), every
// other one computes its exp2 on the FMA units (the softcap's tanh already takes the special-function unit once
// per score): 16 exp2s stay, with the 2 of the rows' rescaling (18 in all), and 16 registers take the
// polynomial: the score clamped to -127, rounded by adding and subtracting 1.5 * 2^23, the cubic of the
// fraction, times 2^j made from the rounded sum's bits shifted into the exponent. The kernel holds the softmax
// twice, in the key loop and in its last tile (run once after it: the lengths are read at run time, and the last
// tile may be partial).
// EXP2: 36
// ON-FMA: 32
// CHECK-LABEL: gpu.func @fma_exp2_attention
// CHECK: scf.for
// CHECK: math.exp2
// CHECK: %[[LOW:.*]] = arith.constant -1.270000e+02 : f32
// CHECK: %[[CLAMPED:.*]] = arith.maximumf %{{.*}}, %[[LOW]] : f32
// CHECK: %[[MAGIC:.*]] = arith.constant 0x4B400000 : f32
// CHECK: %[[ROUNDED:.*]] = arith.addf %[[CLAMPED]], %[[MAGIC]] {{.*}}: f32
// CHECK: %[[WHOLE:.*]] = arith.subf %[[ROUNDED]], %[[MAGIC]] {{.*}}: f32
// CHECK: %[[FRACTION:.*]] = arith.subf %[[CLAMPED]], %[[WHOLE]] {{.*}}: f32
// CHECK-COUNT-3: arith.mulf {{.*}}, %[[FRACTION]]
// CHECK: %[[BITS:.*]] = arith.bitcast %[[ROUNDED]] : f32 to i32
// CHECK: %[[SHIFTED:.*]] = arith.shli %[[BITS]], %{{.*}} : i32
// CHECK: %[[SCALE_BITS:.*]] = arith.addi %[[SHIFTED]], %{{.*}} : i32
// CHECK: %[[SCALE:.*]] = arith.bitcast %[[SCALE_BITS]] : i32 to f32
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] {{.*}}: f32
// CHECK: math.exp2
module {
  func.func private @fma_exp2_attention(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x256x64xbf16>, %out: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> attributes {kiln.kernel} {
    %o = kiln.attention %q, %k, %k score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      kiln.yield %r : f32
    } {kiln.config = #kiln.config<tile = [128, 64], warps = 8, stages = 1, lowering = "wgmma">, kiln.fma_exp2 = 8 : i64} : tensor<1x2x128x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16> -> tensor<1x2x128x64xbf16>
    %r = bufferization.materialize_in_destination %o in %out : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16>
    return %r : tensor<1x2x128x64xbf16>
  }
}
