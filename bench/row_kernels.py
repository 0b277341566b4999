"""Row kernels on the H200: the generated kernels (lowered from the tiled IR by layout) against the template
kernels they replace, torch and torch.compile, checked against an fp64 reference in the same run.

Why: the row kernels (softmax, RMSNorm, LayerNorm, logsumexp and reductions along the last axis) are the first
family that the GPU backend lowers from the tiled, decomposed IR instead of building whole from the op. This
script holds both halves of the visit:

- ``prepare`` (here, where the compiler is): writes each case's kiln function and compiles it with the current
  ``kilnc`` into ``<out>/generated/<case>`` and, given ``--template-kilnc`` (built from the commit before the
  change), into ``<out>/template/<case>``, plus ``<out>/cases.json``.
- ``visit`` (on the GPU machine, with build/python on PYTHONPATH for the runtime bindings): checks every kernel
  on fresh random inputs (seed printed) against torch in float64, then times the ``b_`` cases beside the
  template kernel, torch eager and torch.compile (Inductor's Triton kernels), and writes rows.json and rows.md
  to ``--out``. Each is timed as a CUDA graph of 20 back-to-back calls (warm-up, median of 30 replays between
  CUDA events, divided by 20), so that the host's launch latency (about 20 us a call through Python) does not
  hide the kernel.

Bandwidth counts the bytes a kernel must move: its inputs read once and its output written once. Cases whose
data fits the H200's 50 MB L2 (up to about 2048 x 4096 bf16 in and out) run from L2 when repeated, above HBM's
rate; their ratios compare kernels, not memory.
Error: max|out - ref| / max|ref|; limits 1e-2 (bf16), 2e-3 (f16), 2e-5 (f32; exp and division take the hardware approximations), from the output's rounding.
"""
import argparse
import json
import sys
from pathlib import Path

LIMITS = {"bf16": 1e-2, "f16": 2e-3, "f32": 2e-5}
BYTES = {"bf16": 2, "f16": 2, "f32": 4}
UNITS = {"tbs": "TB/s", "tflops": "TFLOP/s"}


def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + f"x{dtype}>"


def case(name, op, shape, dtype):
    """A row kernel of ``op`` over ``shape`` (the last dim is the row)."""
    width = shape[-1]
    x = tensor(shape, dtype)
    w = tensor((width,), dtype)
    inputs, result = [("x", shape, dtype)], (shape, dtype)
    if op == "softmax":
        body = f"%r = kiln.softmax %x axis {len(shape) - 1} : {x}"
    elif op == "rms_norm":
        inputs.append(("w", (width,), dtype))
        body = f"%r = kiln.rms_norm %x, %w epsilon 1.0e-06 : {x}, {w}"
    elif op == "layer_norm":
        inputs += [("w", (width,), dtype), ("b", (width,), dtype)]
        body = f"%r = kiln.layer_norm %x, %w, %b epsilon 1.0e-05 : {x}, {w}, {w}"
    elif op == "logsumexp":
        result = (shape[:-1], "f32")
        body = f"%r = kiln.logsumexp %x axis {len(shape) - 1} : {x} -> {tensor(*result)}"
    elif op in ("sum", "max", "mean"):
        result = ((*shape[:-1], 1), dtype)
        body = f"%r = kiln.reduce {op} %x axes [{len(shape) - 1}] keep_dims : {x} -> {tensor(*result)}"
    else:
        raise ValueError(op)
    args = ", ".join(f"%{n}: {tensor(s, d)}" for n, s, d in inputs)
    text = f"func.func @{name}({args}) -> {tensor(*result)} {{\n  {body}\n  return %r : {tensor(*result)}\n}}\n"
    return dict(name=name, op=op, inputs=[[list(s), d] for _, s, d in inputs], shape=list(result[0]),
                dtype=result[1], mlir=text)


def cases():
    """Correctness cases (odd widths and row counts that do not divide the blocks, every dtype, single rows) and
    the benchmark shapes (``b_``: a Llama hidden state of 4096, GPT-2's 768, attention-score rows, a vocabulary)."""
    listed = []
    for dtype in ("bf16", "f16", "f32"):
        for op in ("softmax", "rms_norm", "layer_norm", "logsumexp", "sum", "max", "mean"):
            listed.append(case(f"t_{op}_{dtype}_3x77x1000", op, (3, 77, 1000), dtype))
        listed += [case(f"t_softmax_{dtype}_5x33", "softmax", (5, 33), dtype),
                   case(f"t_rms_norm_{dtype}_7x4100", "rms_norm", (7, 4100), dtype),
                   case(f"t_layer_norm_{dtype}_1x9x4096", "layer_norm", (1, 9, 4096), dtype),
                   case(f"t_softmax_{dtype}_row_777", "softmax", (777,), dtype),
                   case(f"t_logsumexp_{dtype}_2x50257", "logsumexp", (2, 50257), dtype),
                   case(f"t_rms_norm_{dtype}_1x1", "rms_norm", (1, 1), dtype),
                   case(f"t_softmax_{dtype}_1000x128", "softmax", (1000, 128), dtype),
                   case(f"t_layer_norm_{dtype}_300x24", "layer_norm", (300, 24), dtype)]
    for rows, width in ((1, 4096), (32, 4096), (2048, 4096), (16384, 4096), (8192, 768), (4096, 14336)):
        listed.append(case(f"b_rms_norm_bf16_{rows}x{width}", "rms_norm", (rows, width), "bf16"))
    for rows, width in ((8192, 768), (2048, 4096)):
        listed.append(case(f"b_layer_norm_bf16_{rows}x{width}", "layer_norm", (rows, width), "bf16"))
    for rows, width in ((65536, 128), (16384, 1024), (4096, 4096), (128, 32768)):
        listed.append(case(f"b_softmax_bf16_{rows}x{width}", "softmax", (rows, width), "bf16"))
    listed.append(case("b_softmax_f32_4096x4096", "softmax", (4096, 4096), "f32"))
    listed.append(case("b_logsumexp_f32_64x50257", "logsumexp", (64, 50257), "f32"))
    listed.append(case("b_sum_f32_16384x1024", "sum", (16384, 1024), "f32"))
    return listed


def prepare(args):
    return compile_variants(args, cases())


def compile_variants(args, listed, variants=None):
    """Compiles each case of ``listed`` (those ``args.only`` names) into ``<args.out>/<variant>/<case>`` for each
    variant, and lists the cases (without their MLIR texts) in ``cases.json``. ``variants`` maps a variant to the
    case key of its MLIR text (a case whose text is None skips it), all compiled with ``args.kilnc``; by default
    ``generated``; given ``args.template_kilnc``, also ``template``: the case's ``mlir`` compiled by it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_cases import compile_graph
    out = Path(args.out)
    listed = [item for item in listed if getattr(args, "only", "") in item["name"]]
    if variants is None:
        compilers = {"generated": (args.kilnc, "mlir")}
        if getattr(args, "template_kilnc", ""):
            compilers["template"] = (args.template_kilnc, "mlir")
    else:
        compilers = {variant: (args.kilnc, key) for variant, key in variants.items()}
        if getattr(args, "template_kilnc", ""):
            compilers["template"] = (args.template_kilnc, "mlir")
    for item in listed:
        for variant, (kilnc, key) in compilers.items():
            if item[key] is None:
                continue
            folder = out / variant / item["name"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "graph.mlir").write_text(item[key])
            if not compile_graph(kilnc, folder / "graph.mlir", folder, "sm_90a", f"{variant} {item['name']}"):
                return 1
    (out / "cases.json").write_text(json.dumps([{k: v for k, v in c.items() if not k.startswith("mlir")}
                                                for c in listed], indent=1))
    print(f"compiled {len(listed)} cases x {len(compilers)} variants into {out}")
    return 0


def time_ms(fn, calls=20, reps=30):
    """Median device time of one call of ``fn``: ``calls`` calls captured in a CUDA graph (after warm-up on a side
    stream), replayed ``reps`` times between CUDA events."""
    import statistics
    import torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    for _ in range(5):
        graph.replay()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)


def torch_ms(fn, inputs):
    """The times of ``fn(*inputs)`` in eager torch and under torch.compile (Inductor, compiled first), the baselines
    a glue or row kernel is timed against."""
    import torch
    compiled = torch.compile(fn, dynamic=False)
    compiled(*inputs)
    return {"torch": time_ms(lambda: fn(*inputs)), "inductor": time_ms(lambda: compiled(*inputs))}


def start_cases(args):
    """What a visit through the installed package starts from: the build folder, its cases (those ``--only``
    names), and a fresh seed (printed) with its CUDA generator."""
    import torch
    build = Path(args.build)
    listed = [c for c in json.loads((build / "cases.json").read_text()) if c["name"].startswith(args.only)]
    seed = torch.seed() % 2**31
    generator = torch.Generator(device="cuda").manual_seed(seed)
    print(f"seed {seed}, device {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    return build, listed, seed, generator


def start_visit(args):
    """start_cases, and the runtime's bindings first."""
    from gpu_visit import Runtime
    return (Runtime(args.runtime), *start_cases(args))


def compared_table(rows, labels=("template", "torch", "inductor")):
    """The markdown table of the timed rows' TB/s: the generated kernel's, then each of ``labels`` with the
    generated kernel's speed relative to it."""
    titles = {"template": "template", "torch": "torch", "inductor": "torch.compile"}
    header = "| case | generated TB/s | " + " | ".join(f"{titles[label]} TB/s | vs {titles[label]}"
                                                      for label in labels) + " |"
    lines = [header, "|" + "---|" * (2 + 2 * len(labels))]
    for r in (r for r in rows if "generated_ms" in r):
        cells = [f"{r.get(f'{label}_tbs', float('nan')):.2f} | {r.get(f'vs_{label}', float('nan')):.2f}x"
                 for label in labels]
        lines.append(f"| {r['name']} | {r['generated_tbs']:.2f} | {' | '.join(cells)} |")
    return lines


def record_timings(row, timings, work, unit, baselines):
    """Fills ``row`` with each timing in ms, its rate (``work`` / 1e9 per ms: TB/s of bytes, TFLOP/s of flops)
    under ``<label>_<unit>``, and each of ``baselines``' time relative to the generated kernel's (``vs_<label>``)."""
    for label, ms in timings.items():
        row[f"{label}_ms"] = ms
        row[f"{label}_{unit}"] = work / ms / 1e9
    for label in baselines:
        if label in timings:
            row[f"vs_{label}"] = timings[label] / timings["generated"]


def summary_line(row, width, unit, rate_format, baselines):
    """One printed line per case: its error against fp64 (and the template's), its rate and the baselines'."""
    line = f"{row['name']:{width}s} err {row.get('generated_error', float('nan')):.1e} " \
           f"{'ok' if row.get('generated_ok') else 'FAILED'}"
    if "template_error" in row:
        line += f" (template {row['template_error']:.1e})"
    if "generated_ms" in row:
        line += f"  {row[f'generated_{unit}']:{rate_format}} {UNITS[unit]}"
        for label in baselines:
            if f"vs_{label}" in row:
                line += f" | {label} {row[f'{label}_{unit}']:{rate_format}} ({row[f'vs_{label}']:.2f}x)"
    return line


def visit(args):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, str(Path(__file__).resolve().parent))

    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    references = {
        "softmax": lambda x: torch.softmax(x, -1),
        "rms_norm": lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
        "logsumexp": lambda x: torch.logsumexp(x, -1),
        "sum": lambda x: x.sum(-1, keepdim=True),
        "max": lambda x: x.amax(-1, keepdim=True),
        "mean": lambda x: x.mean(-1, keepdim=True),
    }
    # What torch users call for each op, in the input's dtype.
    eager = {
        "softmax": lambda x: torch.softmax(x, -1),
        "rms_norm": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6),
        "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
        "logsumexp": lambda x: torch.logsumexp(x, -1),
        "sum": lambda x: x.sum(-1, keepdim=True),
        "max": lambda x: x.amax(-1, keepdim=True),
        "mean": lambda x: x.mean(-1, keepdim=True),
    }
    runtime, build, listed, seed, generator = start_visit(args)
    rows, failures = [], 0
    for item in listed:
        inputs = [(torch.randn(*shape, generator=generator, device="cuda") * 2).to(dtypes[dtype])
                  for shape, dtype in item["inputs"]]
        ref = references[item["op"]](*[t.double() for t in inputs])
        row = dict(name=item["name"])
        launches = {}
        for variant in ("generated", "template"):
            folder = build / variant / item["name"]
            if not folder.exists():
                continue
            manifest = json.loads((folder / "manifest.json").read_text())
            if len(manifest["kernels"]) != 1:
                raise SystemExit(f"{item['name']} ({variant}): expected one kernel, got {len(manifest['kernels'])}")
            entry = manifest["kernels"][0]
            kernel = runtime.load(folder / entry["cubin"], entry)
            out = torch.full(item["shape"], float("nan"), device="cuda", dtype=dtypes[item["dtype"]])
            tensors = [*inputs, out]
            runtime.launch(kernel, entry, tensors)
            torch.cuda.synchronize()
            error = ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
            ok = error <= LIMITS[item["dtype"]] and not torch.isnan(out).any().item()
            row[f"{variant}_error"] = error
            row[f"{variant}_ok"] = ok
            row[f"{variant}_registers"] = entry.get("registers")
            if variant == "generated":
                failures += not ok
            launches[variant] = (lambda k=kernel, e=entry, t=tensors: runtime.launch(k, e, t))
        if item["name"].startswith("b_") and not args.no_bench:
            moved = sum(t.numel() * t.element_size() for t in inputs)
            moved += torch.Size(item["shape"]).numel() * BYTES[item["dtype"]]
            timings = {variant: time_ms(launch) for variant, launch in launches.items()}
            timings.update(torch_ms(eager[item["op"]], inputs))
            record_timings(row, timings, moved, "tbs", ("template", "torch", "inductor"))
        rows.append(row)
        print(summary_line(row, 34, "tbs", "5.2f", ("template", "torch", "inductor")), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                   torch=torch.__version__, rows=rows), indent=1))
    (out / "rows.md").write_text("\n".join(compared_table(rows)) + "\n")
    print(f"{len(rows) - failures} passed, {failures} failed (generated kernels against fp64)")
    return 1 if failures else 0


def device_name(visit):
    """The GPU a visit's JSON says it ran on, without the vendor ("H100 80GB HBM3"; "H200" for the older JSON
    files, which all ran there and did not say)."""
    return visit.get("device", "H200").removeprefix("NVIDIA ")


def bar_chart(path, series, title, unit="TFLOP/s"):
    """Draws the benchmark rows of a visit's JSON at ``path`` (those the generated kernel was timed on) as
    grouped bars beside it (.png): ``series`` lists (key, label) pairs, a row's ``<key>_<unit>`` each bar's
    height (none where the row lacks it); ``{device}`` in ``title`` names the GPU the JSON says it ran on."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    key = {label: name for name, label in UNITS.items()}[unit]
    visit = json.loads(Path(path).read_text())
    rows = [r for r in visit["rows"] if f"generated_{key}" in r]
    x = range(len(rows))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(14, 6))
    for i, (name, label) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width
        ax.bar([j + offset for j in x], [r.get(f"{name}_{key}", 0) for r in rows], width, label=label)
    ax.set_xticks(list(x), [r["name"][len("b_"):] for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title.format(device=device_name(visit)))
    ax.legend()
    fig.tight_layout()
    fig.savefig(Path(path).with_suffix(".png"), dpi=110)


def command_line(doc, out, prepare, visit, plot=None, prepare_flags=()):
    """Runs the ``prepare`` / ``visit`` (/ ``plot``) command line that this script and matmul_lowering.py share;
    ``out`` names the folder the cases are compiled into, ``prepare_flags`` (name, help) pairs of on/off options
    that ``prepare`` also takes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--kilnc", default="build/bin/kilnc")
    p.add_argument("--template-kilnc", default="")
    p.add_argument("--out", default=out)
    p.add_argument("--only", default="", help="only the cases whose names contain this")
    for flag, text in prepare_flags:
        p.add_argument(f"--{flag}", action="store_true", help=text)
    v = sub.add_parser("visit")
    v.add_argument("--build", default=out)
    v.add_argument("--runtime", default="build/lib/libkiln_runtime.so")
    v.add_argument("--out", default=".")
    v.add_argument("--no-bench", action="store_true")
    v.add_argument("--only", default="", help="only the cases whose names start with this")
    if plot:
        sub.add_parser("plot").add_argument("json")
    args = parser.parse_args()
    return {"prepare": prepare, "visit": visit, "plot": plot}[args.command](args)


def main():
    return command_line(__doc__, "gpu_build/rows", prepare, visit)


if __name__ == "__main__":
    sys.exit(main())
