"""Matmuls on the H200: the kernels lowered from the tiled IR against the template kernels they replace and
cuBLAS, on shapes of every alignment, checked against an fp64 reference in the same run.

Why: the GPU backend lowers matmuls from the tiled IR by layout instead of building them whole from the op: the
mma_sync matmul (the decode-step GEMMs, every shape whose rows TMA cannot copy, and sm_80; MmaLayoutLowering.cpp)
and the wgmma one (sm_90a's default for larger aligned GEMMs; WgmmaLayoutLowering.cpp). This script holds both
halves of the visit, like row_kernels.py:

- ``prepare`` (here, where the compiler is; ``--gpt2-sweep``: GPT-2's GEMMs under the pinned configs of
  GPT2_CONFIGS instead of the cases below): compiles each case with the current ``kilnc`` into
  ``<out>/generated/<case>`` and, given ``--template-kilnc`` (built from the commit before the change), into
  ``<out>/template/<case>`` where the template takes the shape (it needs K, and N for an untransposed rhs, to be
  multiples of 8), plus ``<out>/cases.json``.
- ``visit`` (on the GPU machine, build/python on PYTHONPATH): checks every kernel on fresh random inputs (seed
  printed) against torch in float64, then times the ``b_`` cases beside the template kernel and cuBLAS
  (torch.matmul, plus the unfused torch epilogue where the case has one), each as a CUDA graph of back-to-back
  calls (row_kernels.time_ms), and writes matmul.json and matmul.md to ``--out``.
- ``plot`` (anywhere with matplotlib): draws a visit's matmul.json as matmul.png beside it (and rewrites the
  table, matmul.md, from it).

The ``t_wgmma`` cases run the wgmma lowering (sm_90a's default where M > 64, N >= 64 and rows are 16-byte
multiples, or pinned): K tails that TMA zero-fills, K under one k-tile, batches, transposed and odd-width rhs,
epilogues, 64- and 256-wide tiles, tiles in groups of tile rows (a whole group and a last short one; the
mma_sync kernel's too, ``t_f32_grouped``). The ``t_`` cases take each of M, N and K from {1, 7, 77, 1000, 2050, 50257} (the others unaligned, so that the
mma_sync lowering takes them on sm_90a too), with epilogues, a transposed rhs and a batch, in bf16, f16 and f32
(TF32 tensor cores; cuBLAS is timed and checked with TF32 allowed too, torch.backends.cuda.matmul.allow_tf32),
and f32 with fp32_precision = "ieee" (3xTF32; against cuBLAS in f32, TF32 not allowed).
Error: max|out - ref| / max|ref| with ref the graph's meaning in float64 from the same (rounded) inputs, the
matmul result rounded to the input dtype before the epilogue as the graph holds it; limits 1e-2 (bf16) and
5e-3 (f16) from the output's rounding and f32 accumulation over K up to 50257, 2e-3 (f32) from TF32's rounding
of each input to 10 mantissa bits (2^-11 relative), 1e-5 (f32 "ieee") from f32's; cuBLAS's error on the same
inputs is recorded beside it.
"""
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_cases import compile_graph, gemm_case  # noqa: E402

LIMITS = {"bf16": 1e-2, "f16": 5e-3, "f32": 2e-3, "f32 ieee": 1e-5}
SIZES = (1, 7, 77, 1000, 2050, 50257)


def cases():
    listed = []
    for dtype in ("bf16", "f16", "f32"):
        for size in SIZES:
            listed.append(gemm_case(f"t_{dtype}_m{size}_{size}x77x1000", size, 77, 1000, dtype))
            listed.append(gemm_case(f"t_{dtype}_n{size}_77x{size}x1000", 77, size, 1000, dtype))
            listed.append(gemm_case(f"t_{dtype}_k{size}_77x136x{size}", 77, 136, size, dtype))
        listed += [
            gemm_case(f"t_{dtype}_300x777x1000_bias_silu", 300, 777, 1000, dtype, "bias_silu"),
            gemm_case(f"t_{dtype}_129x203x98_residual", 129, 203, 98, dtype, "residual"),
            gemm_case(f"t_{dtype}_transposed_200x136x777", 200, 136, 777, dtype, transpose_rhs=True),
            gemm_case(f"t_{dtype}_batched_3x65x33x19", 65, 33, 19, dtype, batch=(3,), rhs_batch=(3,)),
            gemm_case(f"t_{dtype}_lm_head_1x50257x768_transposed", 1, 50257, 768, dtype, transpose_rhs=True),
        ]
    for dtype in ("bf16", "f16"):
        listed += [
            gemm_case(f"t_wgmma_{dtype}_300x200x256_bias_silu", 300, 200, 256, dtype, "bias_silu"),
            gemm_case(f"t_wgmma_{dtype}_1000x2056x1000", 1000, 2056, 1000, dtype),
            gemm_case(f"t_wgmma_{dtype}_transposed_77x201x128", 77, 201, 128, dtype, transpose_rhs=True),
            gemm_case(f"t_wgmma_{dtype}_batched_3x129x72x40", 129, 72, 40, dtype, batch=(3,), rhs_batch=(3,)),
            gemm_case(f"t_wgmma_{dtype}_broadcast_2x200x64x8_residual", 200, 64, 8, dtype, "residual",
                      batch=(2,)),
            gemm_case(f"t_wgmma_{dtype}_tile64_77x136x128", 77, 136, 128, dtype,
                      config=((64, 64, 64), 4, 3, "wgmma")),
            gemm_case(f"t_wgmma_{dtype}_tile256_520x1000x4104_transposed", 520, 1000, 4104, dtype,
                      transpose_rhs=True, config=((128, 256, 64), 8, 4, "wgmma")),
            # Tiles in groups of 16 tile rows: one whole group and a last group of one row, 16 columns.
            gemm_case(f"t_wgmma_{dtype}_grouped_2100x4096x64", 2100, 4096, 64, dtype),
        ]
    # The mma_sync kernel's tiles in groups of 16 tile rows (17 rows of 128 x 128 tiles, 8 columns).
    listed.append(gemm_case("t_f32_grouped_2100x1000x72", 2100, 1000, 72, "f32"))
    for size in SIZES:
        listed.append(gemm_case(f"t_f32_ieee_k{size}_77x136x{size}", 77, 136, size, "f32", fp32_precision="ieee"))
    listed += [
        gemm_case("t_f32_ieee_300x777x1000_bias_silu", 300, 777, 1000, "f32", "bias_silu", fp32_precision="ieee"),
        gemm_case("t_f32_ieee_transposed_200x136x777", 200, 136, 777, "f32", transpose_rhs=True,
                  fp32_precision="ieee"),
    ]
    # Benchmarks: the decode-step GEMMs (M <= 64: mma_sync on sm_90a), the mma_sync kernel pinned on a large
    # square one, and unaligned shapes the template could not compile (against cuBLAS only).
    for m, n, k in ((1, 4096, 4096), (32, 4096, 4096), (64, 4096, 4096), (32, 14336, 4096), (32, 4096, 14336),
                    (32, 6144, 4096)):
        listed.append(gemm_case(f"b_bf16_decode_{m}x{n}x{k}", m, n, k, "bf16"))
    listed.append(gemm_case("b_bf16_decode_32x14336x4096_bias_silu", 32, 14336, 4096, "bf16", "bias_silu"))
    listed.append(gemm_case("b_bf16_lm_head_32x50257x4096_transposed", 32, 50257, 4096, "bf16",
                            transpose_rhs=True))
    # The wgmma kernels (sm_90a's default for these shapes).
    listed += [
        gemm_case("b_bf16_wgmma_4096x4096x4096", 4096, 4096, 4096, "bf16"),
        gemm_case("b_bf16_wgmma_8192x8192x8192", 8192, 8192, 8192, "bf16"),
        gemm_case("b_bf16_wgmma_8192x4096x14336_bias_silu", 8192, 4096, 14336, "bf16", "bias_silu"),
        gemm_case("b_bf16_wgmma_4096x4096x4096_transposed", 4096, 4096, 4096, "bf16", transpose_rhs=True),
        gemm_case("b_f16_wgmma_2048x2048x2048", 2048, 2048, 2048, "f16"),
        gemm_case("b_bf16_wgmma_1024x1024x1024", 1024, 1024, 1024, "bf16"),
        # The Llama block's projections at 4096 tokens (B=8 S=512): q/k/v, gate and up, down.
        gemm_case("b_bf16_wgmma_llama_qkv_4096x6144x4096", 4096, 6144, 4096, "bf16"),
        gemm_case("b_bf16_wgmma_llama_up_4096x14336x4096", 4096, 14336, 4096, "bf16"),
        gemm_case("b_bf16_wgmma_llama_down_4096x4096x14336", 4096, 4096, 14336, "bf16"),
        # An [M, N] operand read by the epilogue, as SiLU(gate) x up reads up.
        gemm_case("b_bf16_wgmma_llama_gate_4096x14336x4096_residual", 4096, 14336, 4096, "bf16", "residual"),
    ]
    listed.append(gemm_case("b_bf16_mma_sync_4096x4096x4096", 4096, 4096, 4096, "bf16",
                            config=((128, 256, 32), 8, 3, "mma_sync")))
    listed.append(gemm_case("b_bf16_mma_sync_2048x4096x4096_bias_silu", 2048, 4096, 4096, "bf16", "bias_silu",
                            config=((128, 128, 32), 4, 4, "mma_sync")))
    listed.append(gemm_case("b_bf16_unaligned_4096x4100x4096", 4096, 4100, 4096, "bf16"))
    listed.append(gemm_case("b_bf16_unaligned_4096x4096x4100", 4096, 4096, 4100, "bf16"))
    listed.append(gemm_case("b_bf16_unaligned_2048x2050x2047", 2048, 2050, 2047, "bf16"))
    listed.append(gemm_case("b_bf16_unaligned_lm_head_2048x50257x768", 2048, 50257, 768, "bf16"))
    listed.append(gemm_case("b_bf16_unaligned_4096x4095x4097_bias_silu", 4096, 4095, 4097, "bf16", "bias_silu"))
    # Large unaligned GEMMs that kiln-pad-matmul-operands pads for the wgmma kernel: epilogue operands along N,
    # a transposed rhs, a residual of the full output shape.
    listed += [
        gemm_case("t_pad_bf16_300x4100x1000_bias_silu", 300, 4100, 1000, "bf16", "bias_silu"),
        gemm_case("t_pad_f16_1100x1000x1001_transposed", 1100, 1000, 1001, "f16", transpose_rhs=True),
        gemm_case("t_pad_bf16_1040x1030x1030_residual", 1040, 1030, 1030, "bf16", "residual"),
        gemm_case("t_pad_bf16_2048x2050x2047", 2048, 2050, 2047, "bf16"),
    ]
    # f32 on TF32 tensor cores (mma_sync m16n8k8) against cuBLAS with TF32 allowed.
    listed.append(gemm_case("b_f32_4096x4096x4096", 4096, 4096, 4096, "f32"))
    listed.append(gemm_case("b_f32_4096x4096x4096_transposed", 4096, 4096, 4096, "f32", transpose_rhs=True))
    listed.append(gemm_case("b_f32_decode_32x4096x4096", 32, 4096, 4096, "f32"))
    listed.append(gemm_case("b_f32_unaligned_2048x2050x2047", 2048, 2050, 2047, "f32"))
    # f32 to f32 accuracy (3xTF32) against cuBLAS in f32.
    listed.append(gemm_case("b_f32_ieee_4096x4096x4096", 4096, 4096, 4096, "f32", fp32_precision="ieee"))
    listed.append(gemm_case("b_f32_ieee_decode_32x4096x4096", 32, 4096, 4096, "f32", fp32_precision="ieee"))
    return listed


#: GPT-2's GEMMs at 4096 tokens (hidden 768, nn.Linear's [N, K] weights) and the wgmma configs ``--gpt2-sweep``
#: pins on them (tile, warps, stages, lowering, group; None: the compiler's default).
GPT2_SHAPES = {"qkv": (4096, 2304, 768), "proj": (4096, 768, 768), "fc": (4096, 3072, 768),
               "mlp_proj": (4096, 768, 3072)}
GPT2_CONFIGS = {"default": None, "t128x128s4": ((128, 128, 64), 8, 4, "wgmma", 16),
                "t128x128s3": ((128, 128, 64), 8, 3, "wgmma", 16), "t64x128s4": ((64, 128, 64), 4, 4, "wgmma", 16),
                "t128x256s3": ((128, 256, 64), 8, 3, "wgmma", 16), "t64x256s4": ((64, 256, 64), 4, 4, "wgmma", 16)}


def gpt2_sweep_cases():
    """The GPT-2 GEMMs under each of GPT2_CONFIGS (bench/results/config_sweeps/gemm_wgmma_gpt2.md)."""
    return [gemm_case(f"b_{shape}_{label}_{m}x{n}x{k}", m, n, k, "bf16", transpose_rhs=True, config=config)
            for shape, (m, n, k) in GPT2_SHAPES.items() for label, config in GPT2_CONFIGS.items()]


def prepare(args):
    out = Path(args.out)
    listed = [item for item in (gpt2_sweep_cases() if args.gpt2_sweep else cases())
              if not args.only or args.only in item["name"]]
    for item in listed:
        folder = out / "generated" / item["name"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "graph.mlir").write_text(item["mlir"])
        if not compile_graph(args.kilnc, folder / "graph.mlir", folder, "sm_90a", f"generated {item['name']}"):
            return 1
        if args.template_kilnc:
            folder = out / "template" / item["name"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "graph.mlir").write_text(item["mlir"])
            # The template's shape limits are its own; a case it refuses is timed against cuBLAS only.
            import contextlib
            import io
            with contextlib.redirect_stderr(io.StringIO()):
                if not compile_graph(args.template_kilnc, folder / "graph.mlir", folder, "sm_90a", item["name"]):
                    for leftover in folder.iterdir():
                        leftover.unlink()
                    folder.rmdir()
    (out / "cases.json").write_text(json.dumps([{k: v for k, v in c.items() if k != "mlir"} for c in listed],
                                               indent=1))
    templates = sum(1 for _ in (out / "template").iterdir()) if args.template_kilnc else 0
    print(f"compiled {len(listed)} cases ({templates} also with the template kilnc) into {out}")
    return 0


def write_table(rows, path):
    """The benchmark rows of a visit as a markdown table ("-" where the template does not take the shape)."""
    lines = ["| case | generated TFLOP/s | template TFLOP/s | generated / template | cuBLAS TFLOP/s | vs cuBLAS |",
             "|---|---|---|---|---|---|"]
    for r in (r for r in rows if "generated_ms" in r):
        cells = [f"{r[f'{label}_tflops']:.1f} | {r[f'vs_{label}']:.2f}x" if f"vs_{label}" in r else "- | -"
                 for label in ("template", "cublas")]
        lines.append(f"| {r['name']} | {r['generated_tflops']:.1f} | {' | '.join(cells)} |")
    Path(path).write_text("\n".join(lines) + "\n")


def visit(args):
    import torch
    import torch.nn.functional as F
    from gpu_visit import DTYPES, make_inputs
    from row_kernels import record_timings, start_visit, summary_line, time_ms

    def reference(item, x, w, extras):
        """The graph's meaning in float64: the matmul result held in the input dtype, then the epilogue."""
        wd = w.double().transpose(-1, -2) if item["transpose_rhs"] else w.double()
        y = (x.double() @ wd).to(DTYPES[item["dtype"]]).double()
        if item["epilogue"] == "bias_silu":
            y = F.silu(y + extras[0].double())
        elif item["epilogue"] == "residual":
            y = y + extras[0].double()
        return y

    def torch_version(item, x, w, extras, prefilled=False):
        # TF32 for f32 cases unless the case asks for f32 accuracy.
        torch.backends.cuda.matmul.allow_tf32 = item.get("fp32_precision") != "ieee"
        rhs = w.transpose(-1, -2) if item["transpose_rhs"] else w
        if prefilled:
            # Into a buffer written before (NaN): cuBLAS's Hopper kernels store by TMA, which compute-sanitizer's
            # initcheck does not see, so that reading a fresh result back reported every element uninitialised.
            y = torch.full((*item["batch"], item["m"], item["n"]), float("nan"), device="cuda", dtype=x.dtype)
            torch.matmul(x, rhs, out=y)
        else:
            y = torch.matmul(x, rhs)
        if item["epilogue"] == "bias_silu":
            y = F.silu(y + extras[0])
        elif item["epilogue"] == "residual":
            y = y + extras[0]
        return y

    runtime, build, listed, seed, generator = start_visit(args)
    rows, failures = [], 0
    for item in listed:
        x, w, extras = make_inputs(item, generator)
        ref = reference(item, x, w, extras)
        row = dict(name=item["name"], m=item["m"], n=item["n"], k=item["k"])
        theirs = torch_version(item, x, w, extras, prefilled=True)
        row["cublas_error"] = ((theirs.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
        launches = {}
        for variant in ("generated", "template"):
            folder = build / variant / item["name"]
            if not folder.exists():
                continue
            manifest = json.loads((folder / "manifest.json").read_text())
            entry = next(k for k in manifest["kernels"] if k.get("op") == "kiln.matmul")
            row[f"{variant}_config"] = entry.get("config")
            if len(manifest["plans"][0]["steps"]) > 1:
                # A plan of several kernels (kiln-pad-matmul-operands' copies, the padded GEMM, the slice): run
                # and timed whole, through the Python runtime's bound program.
                import kiln
                bound = kiln.load(folder).bind(x, w, *extras)
                out = bound.launch()[0]
                row[f"{variant}_kernels"] = len(manifest["plans"][0]["steps"])
                torch.cuda.synchronize()
                launch = bound.launch
            else:
                kernel = runtime.load(folder / entry["cubin"], entry)
                out = torch.full((*item["batch"], item["m"], item["n"]), float("nan"), device="cuda",
                                 dtype=DTYPES[item["out_dtype"]])
                tensors = [x, w, *extras, out]
                runtime.launch(kernel, entry, tensors)
                torch.cuda.synchronize()
                launch = (lambda k=kernel, e=entry, t=tensors: runtime.launch(k, e, t))
            error = ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
            limit = LIMITS["f32 ieee" if item.get("fp32_precision") == "ieee" else item["dtype"]]
            ok = error <= limit and not torch.isnan(out).any().item()
            row[f"{variant}_error"], row[f"{variant}_ok"] = error, ok
            if variant == "generated":
                failures += not ok
            launches[variant] = launch
        if item["name"].startswith("b_") and not args.no_bench:
            flops = 2.0 * item["m"] * item["n"] * item["k"] * math.prod(item["batch"])
            timings = {variant: time_ms(launch) for variant, launch in launches.items()}
            timings["cublas"] = time_ms(lambda: torch_version(item, x, w, extras))
            record_timings(row, timings, flops, "tflops", ("template", "cublas"))
        rows.append(row)
        print(summary_line(row, 44, "tflops", "6.1f", ("template", "cublas")), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "matmul.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                     torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out / "matmul.md")
    print(f"{len(rows) - failures} passed, {failures} failed (generated kernels against fp64)")
    return 1 if failures else 0


def plot(args):
    from row_kernels import bar_chart
    bar_chart(args.json, (("generated", "generated (tiled IR)"), ("template", "template"), ("cublas", "cuBLAS")),
              "matmuls on the {device}, bf16 and f32 as TF32 (no bar: the template does not take the shape)")
    write_table(json.loads(Path(args.json).read_text())["rows"], Path(args.json).with_suffix(".md"))
    return 0


def main():
    from row_kernels import command_line
    return command_line(__doc__, "gpu_build/matmul", prepare, visit, plot,
                        prepare_flags=[("gpt2-sweep", "compile GPT-2's GEMMs under pinned wgmma configs instead")])


if __name__ == "__main__":
    sys.exit(main())
