"""FlexAttention-style variants on the H200: kiln.attention with a score_mod / mask_mod, lowered through the
tiled IR into one kernel (wgmma on sm_90a at head dims 64 and 128), against the plain attention of the same shape
(the default kernel), torch's flex_attention under torch.compile, and SDPA (flash, cuDNN), checked against a
float64 reference in the same run. ``plain_tiled`` is the plain causal attention with a mask_mod that hides
nothing, against the default plain kernel (the variants' 64-key tiles against the plain attention's own).

- ``prepare`` (here, where the compiler is): traces each case through kiln.ops.attention (the variant's mods as
  Python functions, kiln/mods.py) on placeholder arrays, compiles the traced function with ``kilnc`` into
  ``<out>/generated/<case>`` and, given ``--template-kilnc`` (built from the commit before a change), each ``b_``
  case into ``<out>/template/<case>``; writes ``<out>/cases.json``. ``--only`` keeps the cases whose names
  contain it.
- ``visit`` (on the GPU machine, build/python on PYTHONPATH): makes fresh inputs and the variant's tables (seed
  printed), checks every kernel against the fp64 reference (the variant's rule on index grids), then times the
  ``b_`` cases beside the default plain kernel of the same shape, flex_attention (torch.compile, its block mask built
  once outside the timing), SDPA, and the template compiler's kernel where there is one (before and after a
  change in one run); writes flex.json and flex.md.
- ``plot``: draws a visit's flex.json as flex.png beside it. Rates count useful FLOPs: 4 B H D times the
  visible (query, key) pairs.

The variants are written once (VARIANTS) as functions of a ``tanh`` and the tables: Kiln traces them, torch runs
them. Error: max|out - ref| / max|ref|; limits 2e-2 (bf16) and 4e-3 (f16).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

LIMITS = {"bf16": 2e-2, "f16": 4e-3}
CAP, WINDOW, PREFIX = 30.0, 1024, 512


def tables_for(variant, heads, seq_q, seq_k, xp, rng):
    """The tables a variant reads, as arrays of ``xp`` (numpy placeholders here, torch tensors on the GPU)."""
    if variant == "alibi":
        return {"slopes": (2.0 ** -(xp.arange(heads) + 1.0) * 8 / heads).astype(xp.float32)}
    if variant == "relative_bias":
        return {"bias": rng(heads, seq_q + seq_k - 1)}
    if variant in ("document", "document_spans", "packed_2048"):
        ends = sorted({seq_k // 5, seq_k // 2, (4 * seq_k) // 5}) if variant != "packed_2048" else \
            list(range(2048, seq_k, 2048))
        if variant == "document":
            ids = xp.zeros(seq_k, dtype=xp.int32)
            for end in ends:
                ids[end:] += 1
            return {"docs": ids}
        # Each query's span of keys (query i stands at key i + Sk - Sq): its document's first and last key.
        first, last = xp.zeros(seq_q, dtype=xp.int32), xp.zeros(seq_q, dtype=xp.int32)
        bounds, shift = [0] + ends + [seq_k], seq_k - seq_q
        for lo, hi in zip(bounds, bounds[1:]):
            first[max(lo - shift, 0):max(hi - shift, 0)] = lo
            last[max(lo - shift, 0):max(hi - shift, 0)] = hi - 1
        return {"first": first, "last": last}
    return {}


def mods_for(variant, seq_q, seq_k, tanh, tables, promise=lambda fn, *tables: fn):
    """(score_mod, mask_mod) of a variant; positions are bottom-right aligned (query i is key i + Sk - Sq).
    ``promise`` marks the document ids and span tables nondecreasing (kiln.mods.promise_nondecreasing when Kiln
    traces)."""
    shift = seq_k - seq_q
    if variant == "softcap":
        return (lambda s, b, h, q, kv: CAP * tanh(s / CAP)), None
    if variant == "alibi":
        slopes = tables["slopes"]
        return (lambda s, b, h, q, kv: s + slopes[h] * (kv - (q + shift))), None
    if variant == "relative_bias":
        bias = tables["bias"]
        return (lambda s, b, h, q, kv: s + bias[h, q - kv + (seq_k - 1)]), None
    if variant == "sliding_window":
        return None, (lambda b, h, q, kv: q + shift - kv < WINDOW)
    if variant == "document":
        docs = tables["docs"]
        return None, promise(lambda b, h, q, kv: docs[q + shift] == docs[kv], docs)
    if variant in ("document_spans", "packed_2048"):
        first, last = tables["first"], tables["last"]
        return None, promise(lambda b, h, q, kv: (kv >= first[q]) & (kv <= last[q]), first, last)
    if variant == "prefix_lm":
        return None, (lambda b, h, q, kv: (kv <= q + shift) | (kv < PREFIX))
    if variant == "plain_tiled":
        return None, (lambda b, h, q, kv: kv >= 0)
    if variant == "plain_default":
        return None, None
    raise ValueError(variant)


#: name, variant, causal, B, H, Hkv, Sq, Sk, D, dtype
CASES = []
for _dtype in ("bf16", "f16"):
    for _variant, _causal in (("softcap", False), ("alibi", True), ("relative_bias", False),
                              ("sliding_window", True), ("document", False), ("document", True),
                              ("document_spans", False), ("prefix_lm", False)):
        _label = _variant + ("_causal" if _causal and _variant == "document" else "")
        CASES.append((f"t_{_dtype}_{_label}_gqa_77x200_d64", _variant, _causal, 2, 4, 2, 77, 200, 64, _dtype))
        CASES.append((f"t_{_dtype}_{_label}_1200_d128", _variant, _causal, 1, 4, 4, 1200, 1200, 128, _dtype))
for _d in (128, 64):
    for _variant, _causal in (("plain_default", True), ("plain_tiled", True), ("softcap", True), ("alibi", True),
                              ("sliding_window", True), ("document", True), ("document_spans", True)):
        CASES.append((f"b_{_variant}_d{_d}_b4_h32_s4096", _variant, _causal, 4, 32, 32, 4096, 4096, _d, "bf16"))
# Eight packed 2048-token sequences (causal within each, as a varlen prefill), against the same eight sequences
# as a batch of plain causal attentions: the padding-free ideal.
CASES.append(("b_packed_2048_d128_b1_h32_s16384", "packed_2048", True, 1, 32, 32, 16384, 16384, 128, "bf16"))
CASES.append(("b_plain_default_d128_b8_h32_s2048", "plain_default", True, 8, 32, 32, 2048, 2048, 128, "bf16"))
for _variant in ("plain_default", "sliding_window"):
    CASES.append((f"b_{_variant}_d128_b1_h32_s16384", _variant, True, 1, 32, 32, 16384, 16384, 128, "bf16"))
# The plain attention through the variants' lowering against the default kernel: non-causal, and shorter keys.
for _variant in ("plain_default", "plain_tiled"):
    CASES.append((f"b_{_variant}_full_d128_b4_h32_s4096", _variant, False, 4, 32, 32, 4096, 4096, 128, "bf16"))
for _variant in ("plain_default", "plain_tiled"):
    CASES.append((f"b_{_variant}_d128_b16_h32_s1024", _variant, True, 16, 32, 32, 1024, 1024, 128, "bf16"))


def describe(entry):
    name, variant, causal, b, h, hkv, sq, sk, d, dtype = entry
    return dict(name=name, variant=variant, causal=causal, batch=b, heads=h, kv_heads=hkv, seq_q=sq, seq_k=sk,
                head_dim=d, dtype=dtype)


#: The wgmma tiles (query rows x keys, stages) that --tile-sweep pins on the variants: one warpgroup's 64 rows
#: against the default two, for masks that leave each query tile a short run of keys.
SWEPT_TILES = ((64, 64, 1), (64, 64, 2), (128, 64, 1), (128, 128, 2))
#: Each sweep's variants: timing label -> (the attribute pinned on the kiln.attention, the table's title).
SWEEPS = {
    "tile-sweep": {f"tiles_{bq}x{bk}_s{stages}": (
        f'kiln.config = #kiln.config<tile = [{bq}, {bk}], warps = {bq // 16}, stages = {stages}, lowering = "wgmma">',
        f"{bq}x{bk} tiles, {stages} stage{'s' if stages > 1 else ''}") for bq, bk, stages in SWEPT_TILES},
}
SWEPT = tuple(label for sweep in SWEEPS.values() for label in sweep)
TITLES = {label: title for sweep in SWEEPS.values() for label, (_, title) in sweep.items()}


def with_attention_attribute(text, attribute):
    """``text`` with ``attribute`` added to its kiln.attention's attribute dictionary (after the op's regions,
    before its types)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "kiln.attention" in line)
    for i in range(start, len(lines)):
        at = lines[i].find(" : tensor<")
        if at < 0 or "->" not in lines[i][at:]:
            continue
        head, tail = lines[i][:at].rstrip(), lines[i][at:]
        if head.endswith("}") and head.strip() != "}":  # an attribute dictionary already
            head = head[:-1] + f", {attribute}}}"
        else:
            head += f" {{{attribute}}}"
        lines[i] = head + tail
        return "\n".join(lines) + "\n"
    raise ValueError("no kiln.attention signature in the traced text")


def prepare(args):
    import numpy as np
    sys.path.insert(0, str(Path(args.kilnc).resolve().parent.parent / "python"))
    import kiln
    from gpu_cases import compile_graph
    out = Path(args.out)
    listed = []
    for entry in CASES:
        item = describe(entry)
        if args.only not in item["name"]:
            continue
        b, h, hkv, sq, sk, d = (item[k] for k in ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"))
        dtype = np.float32  # the trace only needs shapes: the element type is swapped in the text below
        tables = tables_for(item["variant"], h, sq, sk, np, lambda *shape: np.zeros(shape, np.float32))
        score_mod, mask_mod = mods_for(item["variant"], sq, sk, kiln.tanh, tables, kiln.mods.promise_nondecreasing)
        q, kv = np.zeros((b, h, sq, d), dtype), np.zeros((b, hkv, sk, d), dtype)
        text = kiln.ops.attention.source(q, kv, kv, causal=item["causal"], score_mod=score_mod, mask_mod=mask_mod)
        text = text.replace(f"x{d}xf32>", f"x{d}x{item['dtype']}>")
        item["tables"] = list(tables)
        folder = out / "generated" / item["name"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "graph.mlir").write_text(text)
        if not compile_graph(args.kilnc, folder / "graph.mlir", folder, "sm_90a", item["name"]):
            return 1
        if args.template_kilnc and item["name"].startswith("b_"):
            template = out / "template" / item["name"]
            template.mkdir(parents=True, exist_ok=True)
            if not compile_graph(args.template_kilnc, folder / "graph.mlir", template, "sm_90a", item["name"]):
                return 1
        for label, attribute in swept_variants(args, item):
            swept = out / label / item["name"]
            swept.mkdir(parents=True, exist_ok=True)
            (swept / "graph.mlir").write_text(with_attention_attribute(text, attribute))
            if not compile_graph(args.kilnc, swept / "graph.mlir", swept, "sm_90a", f"{item['name']} {label}"):
                return 1
        listed.append(item)
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    print(f"compiled {len(listed)} cases into {out}")
    return 0


def swept_variants(args, item):
    """(label, attribute) of each swept variant that ``prepare`` compiles for ``item``: the b_ cases with a
    score_mod or mask_mod (plain ones keep their own tiles)."""
    if not item["name"].startswith("b_"):
        return []
    chosen = []
    for flag, sweep in SWEEPS.items():
        if getattr(args, flag.replace("-", "_")) and not item["variant"].startswith("plain"):
            chosen += [(label, attribute) for label, (attribute, _) in sweep.items()]
    return chosen


def visible_pairs(item, visible):
    """(query, key) pairs a row sees, for the useful-FLOP count."""
    return int(visible.sum().item()) * item["batch"] * item["heads"]


def visit(args):
    import torch
    from gpu_visit import launcher
    from row_kernels import record_timings, start_visit, summary_line, time_ms
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    _, build, listed, seed, generator = start_visit(args)  # (the runtime: kiln.load finds it)
    # Every case compiles flex_attention anew (its shapes, mods and block mask), past dynamo's default limit of 8
    # recompiles of one function, beyond which dynamo runs it eagerly: unfused, the whole score matrix in memory
    # (the 16384-token window asked for 32 GiB on an H100). A higher limit keeps every case compiled, and a hit
    # limit raises (reported as flex refused) rather than timing eager flex.
    for names, value in ((("recompile_limit", "cache_size_limit"), 1024),
                         (("accumulated_recompile_limit", "accumulated_cache_size_limit"), 4096),
                         (("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"), True)):
        name = next((n for n in names if hasattr(torch._dynamo.config, n)), None)  # the older name before 2.7
        if name is not None:
            setattr(torch._dynamo.config, name, value)
    flex = torch.compile(flex_attention, dynamic=False)
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
    rows, failures, checks, plain_ms = [], 0, 0, {}
    for item in listed:
        dtype = dtypes[item["dtype"]]
        b, h, hkv, sq, sk, d = (item[k] for k in ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"))

        def rnd(*shape):
            return torch.randn(*shape, generator=generator, device="cuda")
        q, k, v = rnd(b, h, sq, d).to(dtype), rnd(b, hkv, sk, d).to(dtype), rnd(b, hkv, sk, d).to(dtype)
        tables = tables_for(item["variant"], h, sq, sk, _TorchNamespace(torch), rnd)
        score_mod, mask_mod = mods_for(item["variant"], sq, sk, torch.tanh, tables)
        # Visibility and the fp64 reference on index grids (the grids in chunks of query rows).
        qi = torch.arange(sq, device="cuda").view(sq, 1)
        ki = torch.arange(sk, device="cuda").view(1, sk)
        visible = torch.ones(sq, sk, dtype=torch.bool, device="cuda")
        if item["causal"]:
            visible &= ki <= qi + (sk - sq)
        if mask_mod is not None:
            visible &= mask_mod(0, 0, qi, ki)
        row = dict(name=item["name"], variant=item["variant"])
        check = item["name"].startswith("t_")  # else a b_ case
        folder = build / "generated" / item["name"]
        entry = next(e for e in json.loads((folder / "manifest.json").read_text())["kernels"]
                     if e.get("op") == "kiln.attention")
        row["config"] = entry.get("config")
        launch, (out,) = launcher(folder, [q, k, v] + [tables[name] for name in item["tables"]],
                                  [torch.full_like(q, float("nan"))])
        torch.cuda.synchronize()
        # The t_ cases are checked whole; a b_ case on its first (batch, head), which the fp64 scores fit.
        group = h // hkv
        qd, kd, vd = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
        if not check:
            b, h, qd, kd, vd = 1, 1, qd[:1, :1], kd[:1, :1], vd[:1, :1]
        s = (qd @ kd.transpose(-1, -2)) / d ** 0.5
        if score_mod is not None:
            bi = torch.arange(b, device="cuda").view(b, 1, 1, 1)
            hi = torch.arange(h, device="cuda").view(1, h, 1, 1)
            s = score_mod(s, bi, hi, qi.view(1, 1, sq, 1), ki.view(1, 1, 1, sk)).double()
        s = s.masked_fill(~visible, float("-inf"))
        ref = torch.softmax(s, -1) @ vd
        result = out if check else out[:1, :1]
        error = ((result.double() - ref).abs().max() / ref.abs().max()).item()
        ok = error <= LIMITS[item["dtype"]] and not torch.isnan(result).any().item()
        row["generated_error"], row["generated_ok"] = error, ok
        failures += not ok
        del s, qd, kd, vd
        b, h = item["batch"], item["heads"]
        if not check and not args.no_bench:
            timings = {"generated": time_ms(launch)}
            template = build / "template" / item["name"]
            if (template / "manifest.json").exists():
                launch_template, _ = launcher(template, [q, k, v] + [tables[name] for name in item["tables"]],
                                              [torch.full_like(q, float("nan"))])
                timings["template"] = time_ms(launch_template)
            # The same attention with an attribute pinned (the sweeps), checked like it.
            for label in SWEPT:
                swept = build / label / item["name"]
                if not (swept / "manifest.json").exists():
                    continue
                launch_swept, (swept_out,) = launcher(swept, [q, k, v] + [tables[name] for name in item["tables"]],
                                                      [torch.full_like(q, float("nan"))])
                torch.cuda.synchronize()
                swept_error = ((swept_out[:1, :1].double() - ref).abs().max() / ref.abs().max()).item()
                swept_ok = swept_error <= LIMITS[item["dtype"]] and not torch.isnan(swept_out[:1, :1]).any().item()
                row[f"{label}_error"], row[f"{label}_ok"] = swept_error, swept_ok
                failures, checks = failures + (not swept_ok), checks + 1
                timings[label] = time_ms(launch_swept)
            key = (b, h, sq, sk, d, item["causal"])
            if item["variant"] == "plain_default":
                plain_ms[key] = timings["generated"]
            elif key in plain_ms:
                timings["plain"] = plain_ms[key]
            def flex_mask(bb, hh, qq, kk, causal=item["causal"], mm=mask_mod, shift=sk - sq):
                seen = (kk <= qq + shift) if causal else (kk >= 0)
                return seen & mm(bb, hh, qq, kk) if mm is not None else seen

            try:
                block_mask = None
                if mask_mod is not None or item["causal"]:
                    # Compiled, so that the mask is evaluated block by block rather than on the whole grid.
                    torch.cuda.empty_cache()
                    block_mask = create_block_mask(flex_mask, None, None, sq, sk, device="cuda", _compile=True)
                flex(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=h != hkv)
                timings["flex"] = time_ms(lambda: flex(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                                       enable_gqa=h != hkv))
            except Exception as error:  # noqa: BLE001 - a refusal is reported, not fatal
                row["flex_refused"] = str(error).splitlines()[0][:200]
            if item["variant"] == "plain_default":
                for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            timings[label] = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, is_causal=item["causal"]))
                    except RuntimeError as error:
                        row[f"{label}_refused"] = str(error).splitlines()[0]
            flops = 4.0 * d * visible_pairs(item, visible)
            record_timings(row, timings, flops, "tflops", ("template", "plain", "flex", "flash", "cudnn") + SWEPT)
        del ref
        rows.append(row)
        print(summary_line(row, 40, "tflops", "6.1f", ("template", "plain", "flex", "flash", "cudnn") + SWEPT),
              flush=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "flex.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                       torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out_dir / "flex.md")
    checks += len(rows)
    print(f"{checks - failures} passed, {failures} failed (variants against fp64)")
    return 1 if failures else 0


class _TorchNamespace:
    """The few numpy-style names tables_for uses, on CUDA torch tensors."""

    def __init__(self, torch):
        self.torch, self.float32, self.int32 = torch, torch.float32, torch.int32

    def arange(self, n):
        return _Cast(self.torch.arange(n, device="cuda", dtype=self.torch.float64))

    def zeros(self, n, dtype):
        return self.torch.zeros(n, dtype=dtype, device="cuda")


class _Cast:
    """A tensor whose astype() is .to() (tables_for's numpy spelling)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __add__(self, other):
        return _Cast(self.tensor + other)

    def __rpow__(self, base):
        return _Cast(base ** self.tensor)

    def __neg__(self):
        return _Cast(-self.tensor)

    def __mul__(self, other):
        return _Cast(self.tensor * other)

    def __truediv__(self, other):
        return _Cast(self.tensor / other)

    def astype(self, dtype):
        return self.tensor.to(dtype)


def write_table(rows, path):
    """The b_ rows' rates and ratios; the template compiler's columns where the visit timed one."""
    compared = ("template", "plain", "flex") if any("template_tflops" in r for r in rows) else ("plain", "flex")
    compared += tuple(label for label in SWEPT if any(f"{label}_tflops" in r for r in rows))
    titles = {"template": "before (template compiler)", "plain": "plain kiln", "flex": "flex (compiled)",
              **TITLES}
    header = ["case", "kiln TFLOP/s"]
    for label in compared:
        header += [titles[label], "vs " + label]
    header += ["SDPA flash", "SDPA cuDNN"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if "generated_tflops" not in row:
            continue
        cells = [row["name"], f"{row['generated_tflops']:.1f}"]
        for label in compared:
            rate = row.get(f"{label}_tflops")
            cells += [f"{rate:.1f}" if rate else "", f"{row['generated_tflops'] / rate:.2f}x" if rate else ""]
        cells += [f"{row[f'{label}_tflops']:.1f}" if row.get(f"{label}_tflops") else "" for label in ("flash", "cudnn")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Correctness: {sum(r['generated_ok'] for r in rows)}/{len(rows)} against fp64 (b_ cases on their "
                 f"first batch and head), worst error {max((r['generated_error'] for r in rows), default=0):.2e}.")
    Path(path).write_text("\n".join(lines) + "\n")


def plot(args):
    from row_kernels import bar_chart
    bar_chart(args.json, (("generated", "Kiln (variant)"), ("plain", "Kiln plain causal (default kernel)"),
                          ("flex", "flex_attention (torch.compile)"), ("cudnn", "SDPA cuDNN")),
              "attention variants on the {device}, bf16 d128 and d64 (useful TFLOP/s)")
    return 0


def main():
    from row_kernels import command_line
    return command_line(__doc__, "gpu_build/flex", prepare, visit, plot,
                        prepare_flags=(("tile-sweep", "also compile each b_ variant with its tiles pinned: "
                                        + ", ".join(SWEEPS["tile-sweep"]) + " (timed beside it)"),))


if __name__ == "__main__":
    sys.exit(main())
