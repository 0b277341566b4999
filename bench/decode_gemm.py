"""Decode-step GEMMs on the H200: split-K (kiln-split-k) against the unsplit kernel and cuBLAS in one run, checked
against an fp64 reference in the same run.

Why: a decode step's GEMMs (M = 1..64 rows against the Llama block's 4096 x 4096, 4096 x 6144, 4096 x 14336 and
14336 x 4096 weights) have a few dozen output tiles, so the unsplit kernel streams the weight from a fraction of
the multiprocessors through one long K loop each. kiln-split-k splits the contraction into chunks (one block each)
and adds them up in a second small kernel that runs the epilogue. This script holds both halves of the visit:

- ``prepare`` (here, where the compiler is): compiles, per shape, ``generated`` (the default pipeline: split
  where kiln::chooseKChunk says), ``unsplit`` (the same matmul pinned to the default config, so not split) and,
  with ``--sweep``, explicit splits (``k_chunk`` and a pinned mma_sync config) over chunk counts and column tiles,
  with ``--deep``, narrow column tiles on wgmma rings of up to 16 stages (DEEP_RINGS),
  and always ``cluster_s<S>_bn<BN>``, the contraction split over a thread-block cluster of S blocks in the same
  kernel (``k_splits``), into ``<out>/<variant>/<case>``, plus ``<out>/cases.json``; and ``generated_ordinary_launch``, the generated
  kernels with their manifest's ``dependent_launch`` dropped (launched without programmatic dependent launch);
  given ``--template-kilnc`` (the compiler of the commit before a change), ``template``: each case by it. The
  shapes run against [K, N] weights and, as ``b_bf16_linear_*``, against nn.Linear's [N, K] ones.
- ``visit`` (on the GPU machine, build/python on PYTHONPATH): runs each variant's plan through the Python runtime
  on fresh random inputs (seed printed) against torch in float64 (error limit 1e-2, bf16 output rounding and f32
  accumulation), then times each as a CUDA graph of back-to-back calls (row_kernels.time_ms) beside cuBLAS
  (torch.matmul, and the torch epilogue where the case has one), and writes decode_gemm.json and decode_gemm.md
  (TB/s of weight + activation + output bytes, and ratios) to ``--out``. The timed calls rotate through copies
  of the weight, at least ROTATED_BYTES of them, so that each call reads its weight from HBM as a decode step
  does: a 4096 x 4096 weight alone (32 MB) stays in the 50 MB L2 between calls, and cuBLAS then read it faster
  than the HBM can (4.1 TB/s on an H100).
- ``plot`` (anywhere with matplotlib): draws a visit's decode_gemm.json as decode_gemm.png beside it (and
  rewrites the table from it).
"""
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_cases import gemm_case  # noqa: E402
from row_kernels import command_line, compile_variants  # noqa: E402

SHAPES = ((4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336))
ROWS = (1, 16, 32, 64)
CHUNKS = (2, 3, 4, 6, 8)
COLUMN_TILES = (64, 128)
WARPS = (4, 8)
SHARED_BYTES = 232448  # per block on sm_90a


def stages_for(bm, bn, bk):
    """The most stages (up to 6) whose operand slots (kiln::mmaOperandSlots, bf16) fit a block's shared memory."""
    stage = 2 * (bm * (bk + 8) + bk * (bn + 8))
    return max(2, min(6, SHARED_BYTES // stage))


def split_text(item, chunk, bn, warps, stages=None):
    """The case's matmul split into chunks of ``chunk`` (a pinned mma_sync config of ``bn`` columns, ``warps``
    warps and ``stages`` stages, by default as many as fit) and summed."""
    m, n, k = item["m"], item["n"], item["k"]
    bm, bk = max(16, min(64, 1 << (m - 1).bit_length())), 128
    stages = stages or stages_for(bm, bn, bk)
    splits = -(-k // chunk)
    config = (f"#kiln.config<tile = [{bm}, {bn}, {bk}], warps = {warps}, stages = {stages}, "
              f'lowering = "mma_sync">')
    text = item["mlir"].replace(" : tensor<", f" {{k_chunk = {chunk} : i64, kiln.config = {config}}} : tensor<", 1)
    parts = f"tensor<{splits}x{m}x{n}xf32>"
    text = re.sub(r"-> (tensor<[0-9x]+xbf16>)\n", f"-> {parts}\n  %s = kiln.sum_splits %y : {parts} -> \\1\n",
                  text, count=1)
    return text.replace("return %y", "return %s") if "return %y" in text else text.replace("%y,", "%s,")


def wgmma_text(item, splits, bn, stages=None):
    """The case's matmul on the wgmma lowering (one warpgroup, 64-row tiles fed by TMA, ``stages`` stages or as
    many as fit up to six), split into ``splits`` chunks (whole 64-deep k-tiles) and summed when ``splits`` > 1."""
    m, n, k = item["m"], item["n"], item["k"]
    stages = stages or min(6, SHARED_BYTES // (2 * 64 * (64 + bn) + 64))
    config = f'#kiln.config<tile = [64, {bn}, 64], warps = 4, stages = {stages}, lowering = "wgmma">'
    if splits == 1:
        return item["mlir"].replace(" : tensor<", f" {{kiln.config = {config}}} : tensor<", 1)
    chunk = -(-k // (splits * 64)) * 64
    parts = f"tensor<{-(-k // chunk)}x{m}x{n}xf32>"
    text = item["mlir"].replace(" : tensor<", f" {{k_chunk = {chunk} : i64, kiln.config = {config}}} : tensor<", 1)
    text = re.sub(r"-> (tensor<[0-9x]+xbf16>)\n", f"-> {parts}\n  %s = kiln.sum_splits %y : {parts} -> \\1\n",
                  text, count=1)
    return text.replace("return %y", "return %s")


def cluster_text(item, splits, bn, stages=None):
    """The case's matmul on the wgmma lowering with its contraction split over a cluster of ``splits`` blocks
    (``k_splits``): one kernel, the partial tiles summed through distributed shared memory."""
    stages = stages or min(6, SHARED_BYTES // (2 * 64 * (64 + bn) + 64))
    config = (f'#kiln.config<tile = [64, {bn}, 64], warps = 4, stages = {stages}, lowering = "wgmma", '
              f'k_splits = {splits}>')
    return item["mlir"].replace(" : tensor<", f" {{kiln.config = {config}}} : tensor<", 1)


def default_config(kiln_opt, text):
    """The config kiln-select-config gives the unsplit matmul (outlined, not split)."""
    result = subprocess.run([str(kiln_opt), "-", "--kiln-outline-kernels", "--kiln-select-config=target=sm_90a"],
                            input=text, capture_output=True, text=True, check=True)
    return re.search(r"kiln\.config = (#kiln\.config<[^>]*>)", result.stdout).group(1)


#: Narrow column tiles on deep rings (wgmma, up to 16 stages; a 64-row warpgroup tile of the activations): (splits
#: over a cluster, column tile, stages). The split-in-two-kernels variants above hold 6-8 stages of 128 columns;
#: cuBLAS's decode kernels hold 16 of 64-deep k-tiles, and these fill one wave of the H200 (N = 6144 in 48-column
#: tiles is 128 blocks). Column tiles of nn.Linear's [N, K] weights narrow in 16-column steps, of [K, N] ones in
#: 64-column panels.
DEEP_RINGS = ((1, 32, 16), (1, 48, 16), (1, 64, 14), (2, 64, 14), (2, 96, 11), (2, 128, 9))


def cases(kiln_opt, sweep, deep=False):
    listed = []
    for m in ROWS:
        for n, k in SHAPES:
            listed.append(gemm_case(f"b_bf16_{m}x{n}x{k}", m, n, k, "bf16"))
    # The same against [N, K] weights (nn.Linear's, read transposed), whose column tiles narrow in 16-column steps.
    for m in ROWS:
        for n, k in SHAPES:
            listed.append(gemm_case(f"b_bf16_linear_{m}x{n}x{k}", m, n, k, "bf16", transpose_rhs=True))
    # 112-column tiles with a partial last one (N = 14330), and 240-column tiles split in 5 (M = 5, N = 6150).
    listed.append(gemm_case("t_bf16_linear_32x14330x4096", 32, 14330, 4096, "bf16", transpose_rhs=True))
    listed.append(gemm_case("t_bf16_linear_5x6150x4096", 5, 6150, 4096, "bf16", transpose_rhs=True))
    listed.append(gemm_case("b_bf16_32x14336x4096_bias_silu", 32, 14336, 4096, "bf16", "bias_silu"))
    listed.append(gemm_case("t_bf16_unaligned_7x1000x3000", 7, 1000, 3000, "bf16"))
    listed.append(gemm_case("t_bf16_transposed_24x2048x2050", 24, 2048, 2050, "bf16", transpose_rhs=True))
    # A few rows against an [N, K] weight (nn.Linear's) on the 64 x 256 wgmma tiles, split, with bias and SiLU.
    listed.append(gemm_case("t_bf16_transposed_3x6144x4096_bias_silu", 3, 6144, 4096, "bf16", "bias_silu",
                            transpose_rhs=True))
    # A split on the wgmma lowering: TMA's zero fill past K = 3000 in the last of 3 chunks, 40 of 64 rows.
    wgmma_split = gemm_case("t_bf16_wgmma_split_40x1000x3000", 40, 1000, 3000, "bf16")
    wgmma_split["mlir"] = wgmma_text(wgmma_split, 3, 128)
    listed.append(wgmma_split)
    variants = {"generated": "mlir", "unsplit": "mlir_unsplit"}
    for item in listed:
        pinned = "kiln.config" in item["mlir"]
        config = None if pinned else default_config(kiln_opt, item["mlir"])
        item["mlir_unsplit"] = None if pinned else \
            item["mlir"].replace(" : tensor<", f" {{kiln.config = {config}}} : tensor<", 1)
        for splits in CHUNKS:
            for bn in COLUMN_TILES:
                for warps in WARPS:
                    key = f"mlir_s{splits}_bn{bn}_w{warps}"
                    variants[key[5:]] = key
                    chunk = -(-item["k"] // (splits * 128)) * 128
                    usable = sweep and item["name"].startswith("b_") and item["epilogue"] == "none" and \
                        -(-item["k"] // chunk) == splits and (warps == 4 or item["m"] >= 32)
                    item[key] = split_text(item, chunk, bn, warps) if usable else None
        # The wgmma lowering (64-row warpgroup tiles, TMA; rows past M zero-filled by the copies), at every M: as
        # many stages as fit, then blocks that share a multiprocessor, on fewer stages or 64-column tiles
        # (bench/results/config_sweeps/decode_gemm_shared_multiprocessor.md).
        wgmma_variants = [(splits, bn, None) for splits in (1, 2, 3, 4, 6, 8) for bn in (128, 256)]
        wgmma_variants += [(1, 64, 4), (1, 64, 6), (1, 128, 3), (2, 128, 3), (2, 64, 4)]
        for splits, bn, stages in wgmma_variants:
            key = f"mlir_wg_s{splits}_bn{bn}" + (f"_st{stages}" if stages else "")
            variants[key[5:]] = key
            usable = sweep and item["name"].startswith("b_") and item["epilogue"] == "none"
            item[key] = wgmma_text(item, splits, bn, stages) if usable else None
        # The contraction split over a cluster instead of a second kernel (k_splits), beside the split the default
        # makes: its column tiles (256 up to 16 rows, else 128) and chunk counts around its own, in every run.
        for splits, bn in ((2, 128), (4, 128), (8, 128), (4, 256), (8, 256)):
            key = f"mlir_cluster_s{splits}_bn{bn}"
            variants[key[5:]] = key
            usable = item["name"].startswith("b_") and item["epilogue"] == "none" and item["k"] >= splits * 64 \
                and (bn == 256) == (item["m"] <= 16)
            item[key] = cluster_text(item, splits, bn) if usable else None
        for splits, bn, stages in DEEP_RINGS:
            key = f"mlir_deep_s{splits}_bn{bn}_st{stages}"
            variants[key[5:]] = key
            usable = deep and item["name"].startswith("b_") and item["epilogue"] == "none" and \
                bn % (16 if "_linear_" in item["name"] else 64) == 0 and item["k"] >= splits * 64
            item[key] = (cluster_text(item, splits, bn, stages) if splits > 1 else wgmma_text(item, 1, bn, stages)) \
                if usable else None
        # Two blocks a multiprocessor: stages that fit half its shared memory, twice the chunks.
        for splits, bn, stages in ((8, 128, 2), (8, 64, 4), (4, 64, 4), (16, 128, 2)):
            key = f"mlir_s{splits}_bn{bn}_st{stages}"
            variants[key[5:]] = key
            chunk = -(-item["k"] // (splits * 128)) * 128
            usable = sweep and item["name"].startswith("b_") and item["epilogue"] == "none" and \
                -(-item["k"] // chunk) == splits
            item[key] = split_text(item, chunk, bn, 4 if item["m"] <= 32 else 8, stages) if usable else None
    return listed, variants


def prepare(args):
    kiln_opt = Path(args.kilnc).with_name("kiln-opt")
    listed, variants = cases(kiln_opt, args.sweep, args.deep)
    status = compile_variants(args, listed, variants)
    # The same kernels launched the ordinary way (no programmatic dependent launch): what overlapping each kernel's
    # launch with its predecessor gains, in the same run.
    for folder in sorted((Path(args.out) / "generated").iterdir()):
        if folder.is_dir():
            copy = Path(args.out) / "generated_ordinary_launch" / folder.name
            shutil.copytree(folder, copy, dirs_exist_ok=True)
            manifest = json.loads((copy / "manifest.json").read_text())
            for kernel in manifest["kernels"]:
                kernel.pop("dependent_launch", None)
            (copy / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return status


#: Weight bytes the timed calls rotate through: more than twice the H100's and H200's 50 MB L2.
ROTATED_BYTES = 128 << 20


def in_turn(calls):
    """A function that runs the next of ``calls`` each time it is called (a CUDA graph of several calls captures
    them all, in turn)."""
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


def visit(args):
    import torch
    import torch.nn.functional as F
    from gpu_visit import make_inputs
    from row_kernels import record_timings, start_visit, time_ms
    import kiln

    _, build, listed, seed, generator = start_visit(args)
    variants = sorted(p.name for p in build.iterdir() if p.is_dir())
    rows, failures = [], 0
    for item in listed:
        x, w, extras = make_inputs(item, generator)
        # The weight and the copies the timed calls rotate through (the first is the checked one).
        timed = item["name"].startswith("b_") and not args.no_bench
        copies = -(-ROTATED_BYTES // (w.numel() * w.element_size())) if timed else 1
        weights = [w] + [w.clone() for _ in range(copies - 1)]
        wd = w.double().transpose(-1, -2) if item["transpose_rhs"] else w.double()
        ref = (x.double() @ wd)
        if item["epilogue"] == "bias_silu":
            ref = F.silu(ref.to(torch.bfloat16).double() + extras[0].double())
        bytes_moved = 2 * (item["m"] * item["k"] + item["k"] * item["n"] + item["m"] * item["n"])
        row = dict(name=item["name"], m=item["m"], n=item["n"], k=item["k"], weight_copies=len(weights))
        launches = {}
        for variant in variants:
            folder = build / variant / item["name"]
            if not folder.exists():
                continue
            manifest = json.loads((folder / "manifest.json").read_text())
            program = kiln.load(folder)
            bound = [program.bind(x, weight, *extras) for weight in weights]
            out = bound[0].launch()[0]
            torch.cuda.synchronize()
            error = ((out.double() - ref).abs().max() / ref.abs().max()).item()
            ok = error <= 1e-2 and not torch.isnan(out).any().item()
            failures += not ok
            row[f"{variant}_error"], row[f"{variant}_ok"] = error, ok
            row[f"{variant}_kernels"] = len(manifest["plans"][0]["steps"])
            if variant == "generated":
                row["generated_config"] = next(k.get("config") for k in manifest["kernels"]
                                               if k.get("op") == "kiln.matmul")
            launches[variant] = in_turn([b.launch for b in bound])

        def cublas_with(weight):
            def call():
                y = torch.matmul(x, weight.transpose(-1, -2) if item["transpose_rhs"] else weight)
                return F.silu(y + extras[0]) if item["epilogue"] == "bias_silu" else y
            return call

        cublas = in_turn([cublas_with(weight) for weight in weights])

        if timed:
            timings = {variant: time_ms(launch) for variant, launch in launches.items()}
            timings["cublas"] = time_ms(cublas)
            record_timings(row, timings, bytes_moved, "tbs", [v for v in timings if v != "generated"])
            best = min((v for v in timings if v not in ("cublas",)), key=timings.get)
            row["best"] = best
            clustered = [v for v in timings if v.startswith("cluster_")]
            if clustered:
                row["best_cluster"] = min(clustered, key=timings.get)
            print(f"{item['name']:34s} generated {row['generated_tbs']:.2f} TB/s ({row['generated_kernels']} "
                  f"kernels) | unsplit {row.get('unsplit_tbs', 0):.2f} | cuBLAS {row['cublas_tbs']:.2f} "
                  f"(Kiln {row['vs_cublas']:.2f}x) | best {best} {row[f'{best}_tbs']:.2f}", flush=True)
        else:
            print(f"{item['name']:34s} " + " ".join(f"{v} {row[f'{v}_error']:.1e}" for v in launches), flush=True)
        rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_gemm.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                          torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out / "decode_gemm.md")
    print(f"{sum(1 for r in rows for k in r if k.endswith('_ok')) - failures} variant runs passed, {failures} "
          f"failed (against fp64)")
    return 1 if failures else 0


def write_table(rows, path):
    """The timed rows as a markdown table: the default pipeline against the unsplit kernel and cuBLAS."""
    template = any("template_tbs" in r for r in rows)
    lines = ["| case | config | kernels | Kiln TB/s | " + ("before (template) TB/s | Kiln / before | " if template
                                                          else "") +
             "unsplit TB/s | Kiln / unsplit | cuBLAS TB/s | Kiln / cuBLAS | best variant | best cluster split "
             "(k_splits) | TB/s | / Kiln | / cuBLAS |",
             "|---|---|---|---|" + ("---|---|" if template else "") + "---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if "generated_ms" in r):
        before = f"{r.get('template_tbs', math.nan):.2f} | {r.get('vs_template', math.nan):.2f}x | " \
            if template else ""
        lines.append(f"| {r['name']} | {r.get('generated_config', '')} | {r['generated_kernels']} | "
                     f"{r['generated_tbs']:.2f} | {before}{r.get('unsplit_tbs', math.nan):.2f} | "
                     f"{r.get('vs_unsplit', math.nan):.2f}x | {r['cublas_tbs']:.2f} | "
                     f"{r['vs_cublas']:.2f}x | {r['best']} {r[r['best'] + '_tbs']:.2f} | "
                     f"{cluster_cells(r)} |")
    Path(path).write_text("\n".join(lines) + "\n")


def cluster_cells(row):
    """The table's cells of a row's fastest cluster split: its variant, TB/s, and ratios to the default and
    cuBLAS."""
    best = row.get("best_cluster")
    if not best:
        return "- | - | - | -"
    tbs = row[f"{best}_tbs"]
    return f"{best} | {tbs:.2f} | {tbs / row['generated_tbs']:.2f}x | {tbs / row['cublas_tbs']:.2f}x"


def plot(args):
    from row_kernels import bar_chart
    bar_chart(args.json, (("generated", "Kiln (split-K where chosen)"), ("unsplit", "Kiln unsplit"),
                          ("cublas", "cuBLAS")), "decode-step GEMMs on the {device}, bf16", unit="TB/s")
    write_table(json.loads(Path(args.json).read_text())["rows"], Path(args.json).with_suffix(".md"))
    return 0


def main():
    return command_line(__doc__, "gpu_build/decode_gemm", prepare, visit, plot,
                        prepare_flags=[("sweep", "also compile explicit splits over chunk counts and column tiles"),
                                       ("deep", "also compile narrow column tiles on deep wgmma rings (DEEP_RINGS)")])


if __name__ == "__main__":
    sys.exit(main())
