"""Exports the example blocks of examples/torch_blocks.py to ONNX with torch.onnx, with small random weights.

Why: examples/onnx/*.torch.onnx were made this way (on the GPU machine, torch 2.11), and anyone with torch can
make them again, or export the blocks at other sizes. The weights are those of examples/onnx_blocks.py (same
seed), so the exports compute the same functions as the hand-written graphs and their float64 references.

    python3 examples/export_torch_blocks.py OUT_DIR [--exporter torchscript|dynamo|both]
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_blocks  # noqa: E402
import torch_blocks  # noqa: E402


def example_modules():
    """(name, module in fp32 with the example weights, example input) for the two blocks."""
    for name, build, make in (("llama_block", onnx_blocks.llama_block, torch_blocks.LlamaBlock),
                              ("gpt2_block", onnx_blocks.gpt2_block, torch_blocks.GPT2Block)):
        _, weights, config = build()
        kwargs = {k: config[k] for k in ("hidden", "heads", "seq", "eps")}
        if name == "llama_block":
            kwargs.update(kv_heads=config["kv_heads"], mlp=352)
        module = make(**kwargs).float().load_numpy({k: v.astype("float32") for k, v in weights.items()}).eval()
        yield name, module, torch.randn(config["batch"], config["seq"], config["hidden"])


def export(out, exporters=("torchscript", "dynamo")):
    """Writes OUT/<block>.<exporter>.onnx; returns {file stem: "ok" or the exporter's error}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, module, x in example_modules():
        for exporter in exporters:
            path = out / f"{name}.{exporter}.onnx"
            try:
                torch.onnx.export(module, (x,), str(path), opset_version=18, dynamo=exporter == "dynamo",
                                  input_names=["x"], output_names=["y"])
                results[f"{name}.{exporter}"] = "ok"
            except Exception as error:  # keep going: the other exporter may work
                results[f"{name}.{exporter}"] = f"{type(error).__name__}: {str(error)[:300]}"
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--exporter", choices=("torchscript", "dynamo", "both"), default="both")
    args = parser.parse_args()
    chosen = ("torchscript", "dynamo") if args.exporter == "both" else (args.exporter,)
    for stem, outcome in export(args.out, chosen).items():
        print(f"{stem}: {outcome}")
