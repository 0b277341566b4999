"""Runs the compiled Llama-style block with kiln-plan-run (C++, no Python in the loop) on the GPU machine and
checks it against the same block in torch fp32.

Why: a compiled graph must run end to end from the runtime alone. This writes the block's input and weights as
.npy files (bf16 as uint16), runs `kiln-plan-run FOLDER --repeat 50`, reads the output back and compares it with
examples/torch_blocks.py's LlamaBlock in fp32 on the same weights.

    python3 bench/plan_run_check.py --plans frontend_build --bin build/bin --out $OUT
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "examples")]
from frontend_visit import kiln_weights, seeded_block  # noqa: E402


def to_npy(path, tensor):
    array = tensor.detach().contiguous().cpu()
    if array.dtype == torch.bfloat16:
        array = array.view(torch.int16).numpy().view(np.uint16)
    else:
        array = array.numpy()
    np.save(path, array)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", default="frontend_build")
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--out", default="plan_run")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for folder in sorted(Path(args.plans).iterdir()):
        meta = json.loads((folder / "block.json").read_text())
        c = meta["config"]
        module = seeded_block(c)
        x = torch.randn(c["batch"], c["seq"], c["hidden"]).to(torch.bfloat16)
        bf16 = module.to(torch.bfloat16)
        weights = kiln_weights(bf16)
        files = [out / f"{folder.name}_x.npy"] + [out / f"{folder.name}_{k}.npy" for k in meta["weights"]]
        to_npy(files[0], x)
        for path, key in zip(files[1:], meta["weights"]):
            to_npy(path, weights[key])
        run = subprocess.run([str(Path(args.bin) / "kiln-plan-run"), str(folder), "--repeat", "50", "-o",
                              str(out / f"{folder.name}_y")] + [str(f) for f in files], capture_output=True, text=True)
        print(run.stdout.strip(), run.stderr.strip())
        if run.returncode != 0:
            print(f"{folder.name}: kiln-plan-run failed")
            continue
        y = torch.from_numpy(np.load(out / f"{folder.name}_y0.npy").view(np.int16)).view(torch.bfloat16).float()
        with torch.no_grad():
            reference = module.float().cuda()(x.float().cuda()).cpu()
        error = ((y - reference).abs().max() / reference.abs().max()).item()
        print(f"{folder.name}: kiln-plan-run vs torch fp32: max rel err {error:.2e} "
              f"({'ok' if error < 2e-2 else 'FAILED'}, bf16 limit 2e-2)")
        for path in out.glob(f"{folder.name}_*.npy"):
            path.unlink()


if __name__ == "__main__":
    main()
