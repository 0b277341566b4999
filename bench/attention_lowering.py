"""Attention on the H200: the kernels lowered from the tiled, online-softmax IR (mma_sync, and wgmma on sm_90a)
against the template kernels they replaced and SDPA (flash and cuDNN), checked against a float64 reference in the
same run.

Why: every GPU attention (mma_sync: every head dim but 64 and 128 on sm_90a, the decode steps, and sm_80; wgmma:
bf16/f16 at head dims 64 and 128 on sm_90a) is lowered from the loop that kiln-tile, kiln-online-softmax and
kiln-split-masked-tiles leave (AttentionLayoutLowering.cpp) instead of being built whole from the op. Like
matmul_lowering.py:

- ``prepare`` (here, where the compiler is): compiles each case with the current ``kilnc`` into
  ``<out>/generated/<case>`` and, given ``--template-kilnc`` (built from the commit before the change), into
  ``<out>/template/<case>``, plus ``<out>/cases.json``.
- ``visit`` (on the GPU machine, build/python on PYTHONPATH): checks every kernel on fresh random inputs (seed
  printed) against softmax(q k^T / sqrt(d)) v in float64 (kv heads repeated for GQA, the causal mask aligned
  bottom-right), then times the ``b_`` cases beside the template kernel and SDPA's flash and cuDNN backends, each
  as a CUDA graph of back-to-back calls (row_kernels.time_ms), and writes attention.json and attention.md.
- ``plot``: draws a visit's attention.json as attention.png beside it.

The ``t_`` cases take head dims 24 to 256 (the wgmma ones 64 and 128, pinned and default tiles), lengths that do not divide the tiles, GQA, Sq != Sk, causal, bshd,
decode steps, bf16, f16 and f32. Error: max|out - ref| / max|ref|; limits 2e-2 (bf16) and 4e-3 (f16): P is rounded to
the input type before P V, as FlashAttention does; 2e-3 (f32, on TF32 tensor cores: q, k, P and v rounded to 10
mantissa bits). f32 has no flash or cuDNN SDPA: its benchmark compares SDPA's memory-efficient backend (f32 CUDA
cores) with TF32 allowed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_cases import attention_case  # noqa: E402

LIMITS = {"bf16": 2e-2, "f16": 4e-3, "f32": 2e-3}
#: The template kernel's mma_sync tiles (kiln-select-config's on sm_90a without wgmma): pinned on the head dims
#: that would otherwise take the wgmma kernel.
FA2_D128, FA2_D64 = (128, 128), (128, 64)
#: What the generated kernels are timed against: the template kernel and SDPA's backends.
COMPARED = ("template", "flash", "cudnn", "efficient")


def cases():
    listed = []
    for dtype in ("bf16", "f16"):
        for d in (24, 40, 72, 80, 96, 112, 160, 192, 256):
            listed.append(attention_case(f"t_{dtype}_d{d}_sq77_sk200", 2, 4, 2, 77, 200, d, dtype))
            listed.append(attention_case(f"t_{dtype}_d{d}_causal_300", 1, 4, 4, 300, 300, d, dtype, True))
        listed += [
            attention_case(f"t_{dtype}_d64_mma_causal_gqa_333", 2, 8, 2, 333, 333, 64, dtype, True, tile=FA2_D64),
            attention_case(f"t_{dtype}_d128_mma_sq100_sk1000_causal", 1, 4, 4, 100, 1000, 128, dtype, True,
                           tile=FA2_D128),
            attention_case(f"t_{dtype}_d128_mma_bshd_130", 2, 4, 4, 130, 130, 128, dtype, seq_major=True,
                           tile=FA2_D128),
            attention_case(f"t_{dtype}_decode_d128_gqa_sk1287", 4, 32, 8, 1, 1287, 128, dtype),
            attention_case(f"t_{dtype}_decode_d64_sk300", 2, 8, 8, 1, 300, 64, dtype),
            attention_case(f"t_{dtype}_chunk4_d64_causal_sk1000", 2, 4, 4, 4, 1000, 64, dtype, True),
        ]
    # f32 on TF32 tensor cores (mma_sync only): head dims whole and zero-padded, GQA, causal, a decode step.
    for d in (24, 64, 128, 256):
        listed.append(attention_case(f"t_f32_d{d}_sq77_sk200", 2, 4, 2, 77, 200, d, "f32"))
        listed.append(attention_case(f"t_f32_d{d}_causal_300", 1, 4, 4, 300, 300, d, "f32", True))
    listed.append(attention_case("t_f32_decode_d128_gqa_sk1287", 4, 32, 8, 1, 1287, 128, "f32"))
    listed.append(attention_case("b_f32_d128_b4_h32_s2048_causal", 4, 32, 32, 2048, 2048, 128, "f32", True))
    # Benchmarks: the FA2-style kernel pinned on the realistic shapes the wgmma kernel takes by default, the
    # head dims only mma_sync takes, and decode steps (GQA 32/8, packed).
    listed += [
        attention_case("b_d128_mma_b4_h32_s4096", 4, 32, 32, 4096, 4096, 128, tile=FA2_D128),
        attention_case("b_d128_mma_b4_h32_s4096_causal", 4, 32, 32, 4096, 4096, 128, causal=True, tile=FA2_D128),
        attention_case("b_d64_mma_b8_h16_s2048", 8, 16, 16, 2048, 2048, 64, tile=FA2_D64),
        attention_case("b_d96_b4_h32_s2048_causal", 4, 32, 32, 2048, 2048, 96, causal=True),
        attention_case("b_d256_b4_h16_s2048_causal", 4, 16, 16, 2048, 2048, 256, causal=True),
        attention_case("b_decode_d128_b32_gqa_sk4096", 32, 32, 8, 1, 4096, 128),
        attention_case("b_decode_d128_b1_gqa_sk8192", 1, 32, 8, 1, 8192, 128),
    ]
    # The wgmma attention (sm_90a, head dims 64 and 128): its default configs, and the tiles pinned.
    for dtype in ("bf16", "f16"):
        for d in (64, 128):
            listed += [
                attention_case(f"t_{dtype}_wgmma_d{d}_sq77_sk200", 2, 4, 2, 77, 200, d, dtype, tile=(64, 64),
                               lowering="wgmma", stages=1),
                attention_case(f"t_{dtype}_wgmma_d{d}_causal_gqa_333", 2, 8, 2, 333, 333, d, dtype, True,
                               tile=(128, 64 if d == 64 else 128), lowering="wgmma"),
                attention_case(f"t_{dtype}_wgmma_d{d}_bshd_1100_causal", 1, 4, 4, 1100, 1100, d, dtype, True,
                               seq_major=True),
                attention_case(f"t_{dtype}_wgmma_d{d}_sq300_sk2000_causal", 1, 4, 4, 300, 2000, d, dtype, True),
            ]
    listed += [
        attention_case("b_d128_wgmma_b4_h32_s4096", 4, 32, 32, 4096, 4096, 128),
        attention_case("b_d128_wgmma_b4_h32_s4096_causal", 4, 32, 32, 4096, 4096, 128, causal=True),
        attention_case("b_d128_wgmma_b16_h32_s1024_causal", 16, 32, 32, 1024, 1024, 128, causal=True),
        attention_case("b_d64_wgmma_b8_h16_s2048", 8, 16, 16, 2048, 2048, 64),
        attention_case("b_d64_wgmma_b4_h32_s4096_causal", 4, 32, 32, 4096, 4096, 64, causal=True),
    ]
    return listed


def prepare(args):
    from row_kernels import compile_variants
    return compile_variants(args, cases())


def write_table(rows, path):
    lines = ["| case | generated TFLOP/s | template TFLOP/s | generated / template | SDPA flash | vs flash | "
             "SDPA cuDNN | vs cuDNN | SDPA efficient (f32) | vs efficient |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if "generated_ms" in r):
        cells = [f"{r[f'{label}_tflops']:.1f} | {r[f'vs_{label}']:.2f}x" if f"vs_{label}" in r else "- | -"
                 for label in COMPARED]
        lines.append(f"| {r['name']} | {r['generated_tflops']:.1f} | {' | '.join(cells)} |")
    Path(path).write_text("\n".join(lines) + "\n")


def visit(args):
    import torch
    from gpu_visit import attention_flops, attention_inputs, attention_reference64
    from row_kernels import record_timings, start_visit, summary_line, time_ms
    from torch.nn.attention import SDPBackend, sdpa_kernel

    runtime, build, listed, seed, generator = start_visit(args)
    swap = lambda t: t.transpose(1, 2).contiguous()  # noqa: E731
    rows, failures = [], 0
    for item in listed:
        q, k, v = attention_inputs(item, generator)
        ref = attention_reference64(item, q, k, v)
        row = dict(name=item["name"])
        launches = {}
        for variant in ("generated", "template"):
            folder = build / variant / item["name"]
            if not folder.exists():
                continue
            manifest = json.loads((folder / "manifest.json").read_text())
            entry = next(e for e in manifest["kernels"] if e.get("op") == "kiln.attention")
            row[f"{variant}_config"] = entry.get("config")
            seq_major = item.get("seq_major")
            inputs = [swap(q), swap(k), swap(v)] if seq_major else [q, k, v]
            if len(manifest["plans"][0]["steps"]) > 1:
                # A split attention (kiln-split-kv: few query tiles) and its merge: run whole, through the
                # Python runtime's bound program.
                import kiln
                bound = kiln.load(folder).bind(*inputs)
                out = bound.launch()[0]
                row[f"{variant}_kernels"] = len(manifest["plans"][0]["steps"])
                launch = bound.launch
            else:
                kernel = runtime.load(folder / entry["cubin"], entry)
                out = torch.full_like(inputs[0], float("nan"))
                tensors = [*inputs, out]
                runtime.launch(kernel, entry, tensors)
                launch = (lambda k=kernel, e=entry, t=tensors: runtime.launch(k, e, t))
            torch.cuda.synchronize()
            result = swap(out) if seq_major else out
            error = ((result.double() - ref).abs().max() / ref.abs().max()).item()
            ok = error <= LIMITS[item["dtype"]] and not torch.isnan(result).any().item()
            row[f"{variant}_error"], row[f"{variant}_ok"] = error, ok
            if variant == "generated":
                failures += not ok
            launches[variant] = launch
        if item["name"].startswith("b_") and not args.no_bench:
            timings = {variant: time_ms(launch) for variant, launch in launches.items()}
            group = item["heads"] // item["kv_heads"]
            backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
            if item["dtype"] == "f32":
                backends = (("efficient", SDPBackend.EFFICIENT_ATTENTION),)
            for label, backend in backends:
                try:
                    with sdpa_kernel(backend):
                        timings[label] = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=item["causal"], enable_gqa=group > 1))
                except RuntimeError as error:
                    row[f"{label}_refused"] = str(error).splitlines()[0]
            record_timings(row, timings, attention_flops(item), "tflops", COMPARED)
        rows.append(row)
        print(summary_line(row, 40, "tflops", "6.1f", COMPARED), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "attention.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                        torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out / "attention.md")
    print(f"{len(rows) - failures} passed, {failures} failed (generated kernels against fp64)")
    return 1 if failures else 0


def plot(args):
    from row_kernels import bar_chart
    bar_chart(args.json, (("generated", "generated (tiled IR)"), ("template", "template"), ("flash", "SDPA flash"),
                          ("cudnn", "SDPA cuDNN")), "attention on the {device}, bf16")
    write_table(json.loads(Path(args.json).read_text())["rows"], Path(args.json).with_suffix(".md"))
    return 0


def main():
    from row_kernels import command_line
    return command_line(__doc__, "gpu_build/attention", prepare, visit, plot)


if __name__ == "__main__":
    sys.exit(main())
