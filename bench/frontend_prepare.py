"""Compiles the Llama-style block at the sizes of the frontend benchmark, here, for a GPU visit.

Why here: the GPU machine has no LLVM/MLIR. This builds the block's ONNX graph (examples/onnx_blocks.py, bf16,
hidden 4096, 32/8 heads, head dim 128, MLP 14336), imports it with the weights as arguments (they are generated
on the GPU, 435 MB would not travel), compiles it with kilnc for sm_90a, and records the import and compile
times. bench/frontend_visit.py runs the result there.

    python3 bench/frontend_prepare.py --build build --out frontend_build
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"llama_b1_s2048": (1, 2048), "llama_b32_s1": (32, 1)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="frontend_build")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    sys.path[:0] = [str(build / "python"), str(ROOT / "examples")]
    import onnx_blocks
    from kiln import frontend

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (batch, seq) in SHAPES.items():
        model, _, config = onnx_blocks.llama_block(batch=batch, seq=seq, hidden=4096, heads=32, kv_heads=8,
                                                    mlp=14336, dtype="bfloat16")
        start = time.perf_counter()
        imported = frontend.import_onnx(model, weights="arguments")
        import_s = time.perf_counter() - start
        folder = out / name
        folder.mkdir(exist_ok=True)
        (folder / "block.mlir").write_text(imported.text)
        start = time.perf_counter()
        subprocess.run([str(build / "bin" / "kilnc"), str(folder / "block.mlir"), "--target=sm_90a", "-o",
                        str(folder)], check=True)
        compile_s = time.perf_counter() - start
        (folder / "block.mlir").unlink()  # 20 MB of text; the kernels and the plan are what travel
        keys = [w[0].split("/")[-1].rsplit("_", 1)[0] for w in imported.weights]
        sidecar = dict(config=config, weights=keys, import_s=import_s, compile_s=compile_s)
        (folder / "block.json").write_text(json.dumps(sidecar, indent=1))
        print(f"{name}: import {import_s:.2f} s, kilnc {compile_s:.2f} s, weights {keys}")


if __name__ == "__main__":
    main()
