// kilnc on input it cannot compile: each error names the file, operator or op at fault, with a non-zero exit and
// no crash (`not` without --crash fails on a signal); a compile that fails before writing leaves no output
// folder. test/GPU/kilnc-errors.mlir has the bad options, test/GPU/kilnc-onnx.test a file that is not a model;
// docs/bad-inputs.md lists every tool's cases.

// RUN: rm -rf %t && mkdir -p %t

// An input file that does not exist.
// RUN: not kilnc %t/missing.mlir -o %t/out 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: kilnc: error: cannot open input file '{{.*}}missing.mlir': No such file or directory

// An f32 attention pinned to the wgmma lowering, whose warpgroup MMAs take bf16 or f16 (f32 runs on mma_sync):
// the error is located at the op.
// RUN: not kilnc %s --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=F32
// RUN: not ls %t/out

// The same attention on integer tensors: the op's operand type is named.
// RUN: sed -e 's/xf32>/xi32>/g' %s > %t/int.mlir
// RUN: not kilnc %t/int.mlir --target=sm_90a -o %t/out 2>&1 | FileCheck %s --check-prefix=INT
// RUN: not ls %t/out

// An output folder that cannot be created (its parent is a file).
// RUN: touch %t/file
// RUN: not kilnc %S/../../examples/gpu_attention_block.mlir --target=sm_90a -o %t/file/out 2>&1 | FileCheck %s --check-prefix=OUTDIR
// OUTDIR: kilnc: error: cannot create {{.*}}file{{[/\\]}}out: Not a directory

// F32: kilnc-bad-inputs.mlir:[[@LINE+4]]:8: error: 'kiln.attention' op the wgmma attention takes bf16 or f16 q/k/v (f32 runs on mma_sync), got 'f32'
// F32: kilnc: error: the kernel stage failed (see the diagnostics above)
// INT: int.mlir:[[@LINE+2]]:8: error: 'kiln.attention' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<1x2x64x64xi32>'
func.func @attend(%q: tensor<1x2x64x64xf32>, %k: tensor<1x2x64x64xf32>, %v: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  %o = kiln.attention %q, %k, %v {kiln.config = #kiln.config<tile = [64, 64], warps = 4, stages = 1, lowering = "wgmma">} : tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32> -> tensor<1x2x64x64xf32>
  return %o : tensor<1x2x64x64xf32>
}

// A model with an operator the importer lacks: the importer's error, naming the operator and its node, and
// kilnc's.
// RUN: %python -c "import onnx; from onnx import helper as h, TensorProto as T; x = h.make_tensor_value_info('x', T.FLOAT, [2, 3]); y = h.make_tensor_value_info('y', T.FLOAT, [2, 3]); onnx.save(h.make_model(h.make_graph([h.make_node('LSTM', ['x'], ['y'], name='rnn')], 'g', [x], [y]), opset_imports=[h.make_opsetid('', 18)]), '%t/lstm.onnx')"
// RUN: not kilnc %t/lstm.onnx -o %t/onnx-out 2>&1 | FileCheck %s --check-prefix=ONNXOP
// ONNXOP: kiln-import: error: 1 unsupported operator(s): LSTM (node 'rnn')
// ONNXOP: kilnc: error: importing {{.*}}lstm.onnx failed
// RUN: not ls %t/onnx-out
