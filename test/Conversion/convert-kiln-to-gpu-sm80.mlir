// RUN: kiln-opt %s -convert-kiln-to-gpu=chip=sm_80 -verify-diagnostics

// The Hopper wgmma kernel does not run on sm_80: asking for it there is an error on the op, not bad PTX.
module {
  func.func private @k0_matmul(%x: tensor<256x256xbf16>, %w: tensor<256x256xbf16>, %out: tensor<256x256xbf16>) -> tensor<256x256xbf16> attributes {kiln.kernel} {
    // expected-error @+1 {{the wgmma lowering needs sm_90a, not sm_80}}
    %y = kiln.matmul %x, %w {kiln.config = #kiln.config<tile = [128, 128, 64], warps = 8, stages = 4, lowering = "wgmma">} : tensor<256x256xbf16>, tensor<256x256xbf16> -> tensor<256x256xbf16>
    %r = bufferization.materialize_in_destination %y in %out : (tensor<256x256xbf16>, tensor<256x256xbf16>) -> tensor<256x256xbf16>
    return %r : tensor<256x256xbf16>
  }
}
