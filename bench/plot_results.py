"""Plots a GPU visit's results (bench/gpu_visit.py JSON): TFLOP/s and ratio per shape, GEMM and attention.

Why: the closing notes and bench/results/ carry a picture of where Kiln stands against cuBLAS and both SDPA
backends, made from the same JSON the tables come from. Needs matplotlib (not a CI dependency).
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path, output):
    data = json.loads(Path(path).read_text())
    rows = data["results"]
    gemm = [r for r in rows if "cublas_tflops" in r]
    attention = [r for r in rows if "flash_tflops" in r]
    fig, axes = plt.subplots(2, 2, figsize=(16, 10))
    for ax_rate, ax_ratio, items, baselines, title in (
            (axes[0][0], axes[0][1], gemm, [("cublas", "cuBLAS")], "GEMM"),
            (axes[1][0], axes[1][1], attention, [("flash", "SDPA flash"), ("cudnn", "SDPA cuDNN")], "attention")):
        labels = [r["name"].split("_", 1)[1] for r in items]
        x = range(len(items))
        width = 0.8 / (1 + len(baselines))
        ax_rate.bar([i - 0.4 + width / 2 for i in x], [r["kiln_tflops"] for r in items], width, label="Kiln")
        for j, (key, name) in enumerate(baselines):
            ax_rate.bar([i - 0.4 + width * (j + 1.5) for i in x], [r.get(f"{key}_tflops", 0) for r in items], width,
                        label=name)
            ax_ratio.plot(list(x), [r.get(f"ratio_{key}", 0) for r in items], marker="o", label=f"Kiln / {name}")
        for ax in (ax_rate, ax_ratio):
            ax.set_xticks(list(x))
            ax.set_xticklabels(labels, rotation=75, fontsize=7)
            ax.legend(fontsize=8)
            ax.grid(axis="y", alpha=0.3)
        ax_rate.set_ylabel("TFLOP/s")
        ax_rate.set_title(f"{title}: TFLOP/s ({data['device']})")
        ax_ratio.set_ylabel("ratio (higher is better)")
        ax_ratio.axhline(1.0, color="gray", linewidth=0.8)
        ax_ratio.set_title(f"{title}: Kiln time ratio")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
