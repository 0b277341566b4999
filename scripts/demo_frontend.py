"""Kiln demo, frontend part: a Llama-style block exported from PyTorch to ONNX, imported, fused, run, checked.

Why: the mission ends with a user handing Kiln a model. examples/onnx/llama_block.torch.onnx is
examples/torch_blocks.py's LlamaBlock as torch.onnx.export wrote it (torch 2.11, opset 18); the demo shows how
many ONNX nodes went in, which kernels came out, and the compiled block's answer against onnxruntime's on the
same input, then compiles the block in bf16 (the GPU kernels take bf16/f16) for the H200.
"""
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime

build, here = Path(sys.argv[1]), Path(__file__).resolve().parents[1]
sys.path[:0] = [str(build / "python"), str(here / "examples")]
from kiln import frontend  # noqa: E402
import onnx_blocks  # noqa: E402

path = here / "examples" / "onnx" / "llama_block.torch.onnx"
graph = onnx.load(str(path)).graph
ops = collections.Counter(node.op_type for node in graph.node)
print(f"  {path.name}: {len(graph.node)} ONNX nodes ({', '.join(f'{n} {op}' for op, n in ops.most_common())})")
start = time.perf_counter()
model = frontend.from_onnx(path)
kernels = model.kernels
print(f"  imported and compiled for the CPU in {time.perf_counter() - start:.2f} s -> {len(kernels)} kernels:")
print("    " + ", ".join(k.op for k in kernels))
x = np.random.default_rng().standard_normal(model.imported.inputs[0][2]).astype(np.float32)
out = model(x)
expected = onnxruntime.InferenceSession(str(path)).run(None, {"x": x})[0]
error = np.abs(out - expected).max() / np.abs(expected).max()
print(f"  Kiln vs onnxruntime on the same input: max relative error {error:.2e} (tolerance 1e-4)")
with tempfile.TemporaryDirectory() as tmp:
    bf16_block, _, _ = onnx_blocks.llama_block(dtype="bfloat16")
    (Path(tmp) / "block.mlir").write_text(frontend.import_onnx(bf16_block, weights="arguments").text)
    subprocess.run([str(build / "bin" / "kilnc"), f"{tmp}/block.mlir", "--target=sm_90a", "-o", f"{tmp}/gpu"],
                   check=True, stdout=subprocess.DEVNULL)
    manifest = json.loads((Path(tmp) / "gpu" / "manifest.json").read_text())
    print(f"  kilnc --target=sm_90a, the block in bf16: {len(manifest['kernels'])} GPU kernels and a run plan of "
          f"{len(manifest['plans'][0]['steps'])} launches (bench/frontend_visit.py times it on the H200)")
if not error < 1e-4:
    sys.exit("frontend demo: the compiled block disagrees with onnxruntime")
