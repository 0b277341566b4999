"""Glue kernels on the H200: the elementwise and data-movement kernels between the fused GEMMs and attentions
(a slice, a transpose back to [B, S, H, D], a broadcast add, a GELU), the current compiler's against the template
compiler's (the commit before a change), torch eager and torch.compile, checked in the same run.

Why: a block's glue kernels move bytes; one that moves them slowly costs as much as a GEMM's epilogue gains
(GPT-2's q/k/v slices of the fused projection took 57 us of its 0.30 ms block, copying 2 bytes a thread).

- ``prepare`` (here, where the compiler is): writes each case's kiln function and compiles it with ``kilnc`` into
  ``<out>/generated/<case>`` and, given ``--template-kilnc``, into ``<out>/template/<case>``; ``<out>/cases.json``.
- ``visit`` (on the GPU machine, the wheel installed): runs each kernel on fresh random inputs (seed printed)
  against torch (exact for data movement, 1e-2 relative for bf16 arithmetic, in float64), then times the ``b_``
  cases as CUDA graphs of back-to-back calls (row_kernels.time_ms) beside the template's kernel, the torch
  expression and torch.compile of it; writes glue.json and glue.md (TB/s of inputs read and outputs written
  once). Cases whose bytes fit the H200's L2 run from it when repeated, above HBM's rate.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from row_kernels import command_line, compile_variants, tensor, time_ms  # noqa: E402

#: name: (op, input shapes, dtype). Ops: "qkv_slice" (the last dim cut in three), "transpose" ([0, 2, 1, 3]),
#: "slice_at" (columns 4 to the end of the last dim), "add_row" (x + a vector broadcast over the rows),
#: "add_column" (x + a [M, 1] column), "gelu" (tanh GELU).
CASES = {
    "b_qkv_slice_8x512x2304": ("qkv_slice", [(8, 512, 2304)], "bf16"),
    "b_transpose_8x12x512x64": ("transpose", [(8, 12, 512, 64)], "bf16"),
    "b_add_row_4096x4096": ("add_row", [(4096, 4096), (4096,)], "bf16"),
    "b_gelu_4096x3072": ("gelu", [(4096, 3072)], "bf16"),
    # Rows that are not whole 16-byte runs, or runs read from unaligned columns: an element a thread.
    "t_qkv_slice_2x77x2310": ("qkv_slice", [(2, 77, 2310)], "bf16"),
    "t_slice_at_3x77x260": ("slice_at", [(3, 77, 260)], "bf16"),
    "t_transpose_2x3x77x40": ("transpose", [(2, 3, 77, 40)], "bf16"),
    "t_add_column_77x64": ("add_column", [(77, 64), (77, 1)], "f32"),
    "t_gelu_77x300": ("gelu", [(77, 300)], "bf16"),
}


def source(name, op, shapes, dtype):
    """The case's kiln function."""
    x = tensor(shapes[0], dtype)
    args = ", ".join(f"%a{i}: {tensor(s, dtype)}" for i, s in enumerate(shapes))
    if op == "qkv_slice":
        width = shapes[0][-1] // 3
        out = (*shapes[0][:-1], width)
        lines = [f"%r{i} = kiln.slice %a0 offsets [{', '.join(['0'] * (len(out) - 1))}, {i * width}] strides "
                 f"[{', '.join(['1'] * len(out))}] : {x} -> {tensor(out, dtype)}" for i in range(3)]
        results = [("%r0", out), ("%r1", out), ("%r2", out)]
    elif op == "slice_at":
        out = (*shapes[0][:-1], shapes[0][-1] - 4)
        lines = [f"%r0 = kiln.slice %a0 offsets [{', '.join(['0'] * (len(out) - 1))}, 4] strides "
                 f"[{', '.join(['1'] * len(out))}] : {x} -> {tensor(out, dtype)}"]
        results = [("%r0", out)]
    elif op == "transpose":
        b, h, s, d = shapes[0]
        out = (b, s, h, d)
        lines = [f"%r0 = kiln.transpose %a0 [0, 2, 1, 3] : {x} -> {tensor(out, dtype)}"]
        results = [("%r0", out)]
    elif op in ("add_row", "add_column"):
        out = shapes[0]
        lines = [f"%r0 = kiln.add %a0, %a1 : {x}, {tensor(shapes[1], dtype)} -> {x}"]
        results = [("%r0", out)]
    elif op == "gelu":
        out = shapes[0]
        lines = [f"%r0 = kiln.gelu %a0 approximate(tanh) : {x}"]
        results = [("%r0", out)]
    else:
        raise ValueError(op)
    types = ", ".join(tensor(s, dtype) for _, s in results)
    body = "".join(f"  {line}\n" for line in lines)
    return (f"func.func @{name}({args}) -> ({types}) {{\n{body}  return {', '.join(r for r, _ in results)} : "
            f"{types}\n}}\n")


def prepare(args):
    listed = [dict(name=name, op=op, shapes=shapes, dtype=dtype, mlir=source(name, op, shapes, dtype))
              for name, (op, shapes, dtype) in CASES.items()]
    return compile_variants(args, listed)


def expressions(op):
    """The op as torch computes it, on the inputs: a tuple of results."""
    import torch.nn.functional as F
    return {
        "qkv_slice": lambda x: tuple(t.contiguous() for t in x.split(x.shape[-1] // 3, dim=-1)),
        "slice_at": lambda x: (x[..., 4:].contiguous(),),
        "transpose": lambda x: (x.transpose(1, 2).contiguous(),),
        "add_row": lambda x, b: (x + b,),
        "add_column": lambda x, b: (x + b,),
        "gelu": lambda x: (F.gelu(x, approximate="tanh"),),
    }[op]


def visit(args):
    import torch
    import kiln
    from row_kernels import compared_table, record_timings, start_cases, summary_line, torch_ms

    build, listed, seed, generator = start_cases(args)
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
    rows, failures = [], 0
    for item in listed:
        dtype = dtypes[item["dtype"]]
        inputs = [torch.randn(*shape, generator=generator, device="cuda").to(dtype) for shape in item["shapes"]]
        expression = expressions(item["op"])
        reference = expression(*[t.double() for t in inputs])
        exact = item["op"] in ("qkv_slice", "slice_at", "transpose")
        row = dict(name=item["name"])
        launches = {}
        for variant in ("generated", "template"):
            folder = build / variant / item["name"]
            if not folder.exists():
                continue
            bound = kiln.load(folder).bind(*inputs)
            outs = bound.launch()
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            torch.cuda.synchronize()
            error = max(((o.double() - r).abs().max() / r.abs().max()).item() for o, r in zip(outs, reference))
            ok = (error == 0.0 if exact else error <= 1e-2) and len(outs) == len(reference)
            row[f"{variant}_error"], row[f"{variant}_ok"] = error, ok
            failures += not ok
            launches[variant] = bound.launch
        if item["name"].startswith("b_") and not args.no_bench:
            moved = sum(t.numel() * t.element_size() for t in inputs)
            moved += sum(r.numel() * inputs[0].element_size() for r in reference)
            timings = {variant: time_ms(launch) for variant, launch in launches.items()}
            timings.update(torch_ms(expression, inputs))
            record_timings(row, timings, moved, "tbs", ("template", "torch", "inductor"))
        rows.append(row)
        print(summary_line(row, 28, "tbs", "5.2f", ("template", "torch", "inductor")), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "glue.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                   torch=torch.__version__, rows=rows), indent=1))
    lines = compared_table(rows)
    lines.append("")
    lines.append(f"Checked: {sum(1 for r in rows for k in r if k.endswith('_ok')) - failures} kernel runs against "
                 f"torch (data movement exact, bf16 arithmetic within 1e-2), {failures} failed; seed {seed}.")
    (out / "glue.md").write_text("\n".join(lines) + "\n")
    print(f"{len(rows)} cases, {failures} failed runs", flush=True)
    return 1 if failures else 0


def plot(args):
    from row_kernels import bar_chart
    bar_chart(args.json, (("generated", "Kiln"), ("template", "Kiln before (template compiler)"),
                          ("torch", "torch eager"), ("inductor", "torch.compile")),
              "glue kernels on the {device}, bf16 (TB/s of bytes read and written once)", unit="TB/s")
    return 0


def main():
    return command_line(__doc__, "gpu_build/glue", prepare, visit, plot)


if __name__ == "__main__":
    sys.exit(main())
