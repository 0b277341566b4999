"""Paged decode attention on the H200: kiln.paged_attention (its key tiles read page by page through the block
table) against the same attention over contiguous K/V, SDPA (flash and cuDNN, on the contiguous tensors) and the
copy limit, checked against a float64 reference in the same run.

Why: serving engines keep the KV cache in pages; a decode step over a paged cache must stream it as fast as over a
contiguous one. kiln-expand-paged-attention writes paged attention as attention over kiln.gather_pages views
masked per sequence by its length, so split-KV, GQA packing and the generated attention kernel apply; the page id
of each key tile is one table read ahead of its copy. This script measures what that costs per batch, cache length
and page size (TB/s of the bytes a step must move: q, the sequences' K and V rows and the output).

``prepare`` (here, where the compiler is) compiles each case with ``kilnc``: ``<out>/paged/<case>`` and, for the
``b_`` cases, its contiguous twin in ``<out>/contiguous/<case>`` and (128-row pages) the contiguous attention with
the paged one's per-sequence length mask in ``<out>/masked/<case>``, which tells what the mask costs from what the
pages cost. ``visit`` (on the GPU machine, build/python on
PYTHONPATH) builds each case's caches from fresh random K/V (seed printed): the pages of all sequences shuffled in
one pool, the unused pages and the rows past each length NaN, and for the ``t_`` cases lengths drawn per sequence
(ending mid-page, one of them the full length); it runs the programs through ``kiln.load(...).bind(...)``, checks
each sequence against softmax(q k^T / sqrt(d)) v over its own keys in float64 (limits 2e-2 bf16, 4e-3 f16), times
the ``b_`` cases as CUDA graphs of back-to-back calls and writes paged.json and paged.md; ``plot`` draws
paged.json.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_cases import tensor  # noqa: E402

LIMITS = {"bf16": 2e-2, "f16": 4e-3}
COMPARED = ("contiguous", "masked", "flash", "cudnn")


def paged_case(name, batch, heads, kv_heads, seq_q, seq_k, head_dim, page, dtype="bf16", varied=False, spare=0):
    """A paged attention case over caches of ``page``-row pages; ``seq_k`` is the longest sequence, ``varied``
    draws the others' lengths at the visit, ``spare`` adds table columns past the longest sequence."""
    max_pages = -(-seq_k // page) + spare
    num_pages = batch * max_pages + 3
    q, cache = tensor((batch, heads, seq_q, head_dim), dtype), tensor((num_pages, page, kv_heads, head_dim), dtype)
    table, lens = tensor((batch, max_pages), "i32"), tensor((batch,), "i32")
    paged = (f"func.func @{name}(%q: {q}, %kc: {cache}, %vc: {cache}, %t: {table}, %l: {lens}) -> {q} {{\n"
             f"  %o = kiln.paged_attention %q, %kc, %vc, %t, %l : {q}, {cache}, {cache}, {table}, {lens} -> {q}\n"
             f"  return %o : {q}\n}}\n")
    kv = tensor((batch, kv_heads, seq_k, head_dim), dtype)
    causal = " causal" if seq_q > 1 else ""
    contiguous = (f"func.func @{name}(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{\n"
                  f"  %o = kiln.attention %q, %k, %v{causal} : {q}, {kv}, {kv} -> {q}\n"
                  f"  return %o : {q}\n}}\n")
    # The contiguous attention with the paged one's per-sequence mask (what the expansion adds besides the pages).
    masked = (f"func.func @{name}(%q: {q}, %k: {kv}, %v: {kv}, %l: {lens}) -> {q} {{\n"
              f"  %o = kiln.attention %q, %k, %v mod_operands(%l : {lens}) mask_mod {{\n"
              f"  ^bb0(%b: index, %h: index, %i: index, %j: index, %lens: {lens}):\n"
              f"    %n = tensor.extract %lens[%b] : {lens}\n"
              f"    %len = arith.index_cast %n : i32 to index\n"
              f"    %seen = arith.cmpi slt, %j, %len : index\n"
              f"    kiln.yield %seen : i1\n"
              f"  }} : {q}, {kv}, {kv} -> {q}\n"
              f"  return %o : {q}\n}}\n")
    bench = name.startswith("b_")
    return dict(name=name, batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q, seq_k=seq_k,
                head_dim=head_dim, page=page, dtype=dtype, varied=varied, max_pages=max_pages, num_pages=num_pages,
                causal=seq_q > 1, mlir=paged, mlir_contiguous=contiguous if bench else None,
                mlir_masked=masked if bench and page == 128 else None)


def cases():
    listed = [  # correctness: lengths ending mid-page, page sizes 16 to 256, GQA, MHA and MQA, d64 and d128
        paged_case("t_b1_gqa_sk5000_p16", 1, 32, 8, 1, 5000, 128, 16, spare=2),
        paged_case("t_b4_gqa_sk9000_p64_varied", 4, 32, 8, 1, 9000, 128, 64, varied=True, spare=1),
        paged_case("t_b3_mha_sk1287_d64_p32_f16", 3, 8, 8, 1, 1287, 64, 32, "f16", varied=True),
        paged_case("t_b2_mqa_sk777_p256", 2, 16, 1, 1, 777, 128, 256, varied=True, spare=1),
        paged_case("t_b64_gqa_sk4100_p128_varied", 64, 32, 8, 1, 4100, 128, 128, varied=True),
        paged_case("t_b5_gqa_sk32769_d64_p16_varied", 5, 16, 4, 1, 32769, 64, 16, varied=True),
        paged_case("t_b3_sq4_gqa_sk3000_p16_varied", 3, 32, 8, 4, 3000, 128, 16, varied=True),
        paged_case("t_b2_sq7_mha_sk700_d64_p64_f16", 2, 8, 8, 7, 700, 64, 64, "f16", varied=True),
        paged_case("t_b16_gqa_sk2049_p48_varied", 16, 32, 8, 1, 2049, 128, 48, varied=True),
        # chunks of prefill (wgmma on sm_90a): 64-key tiles in 64-row pages, 16-key tiles in 16-row pages
        paged_case("t_b2_sq200_gqa_sk3000_p64_varied", 2, 32, 8, 200, 3000, 128, 64, varied=True),
        paged_case("t_b1_sq130_mha_sk1000_d64_p16", 1, 8, 8, 130, 1000, 64, 16, spare=1),
    ]
    for page in (16, 128):  # bf16, GQA 32/8, head dim 128, every sequence at the full length
        for batch in (1, 2, 4, 8, 16, 32, 64):
            for keys in (4096, 8192, 32768):
                listed.append(paged_case(f"b_paged_b{batch}_kv{keys}_p{page}", batch, 32, 8, 1, keys, 128, page))
    return listed


def prepare(args):
    from row_kernels import compile_variants
    return compile_variants(args, cases(),
                            {"paged": "mlir", "contiguous": "mlir_contiguous", "masked": "mlir_masked"})


def paged_inputs(item, k, v, generator):
    """The caches, block table and lengths holding ``k`` and ``v`` ([B, Hkv, S, D]): each sequence's pages at
    shuffled ids of one pool, NaN in the unused pages and past each length."""
    import torch
    b, page, max_pages = item["batch"], item["page"], item["max_pages"]
    if item["varied"]:
        lens = torch.randint(item["seq_q"], item["seq_k"] + 1, (b,), generator=generator, device="cuda")
        lens[torch.randint(0, b, (1,), generator=generator, device="cuda")] = item["seq_k"]
    else:
        lens = torch.full((b,), item["seq_k"], device="cuda")
    ids = torch.randperm(item["num_pages"], generator=generator, device="cuda")[:b * max_pages]
    table = ids.view(b, max_pages).to(torch.int32)
    caches = []
    for rows in (k, v):
        hkv, d = rows.shape[1], rows.shape[3]
        padded = torch.full((b, hkv, max_pages * page, d), float("nan"), dtype=rows.dtype, device="cuda")
        padded[:, :, :rows.shape[2]] = rows
        position = torch.arange(max_pages * page, device="cuda")
        padded.masked_fill_((position[None, :] >= lens[:, None])[:, None, :, None], float("nan"))
        cache = torch.full((item["num_pages"], page, hkv, d), float("nan"), dtype=rows.dtype, device="cuda")
        cache[table.flatten().long()] = padded.view(b, hkv, max_pages, page, d).permute(0, 2, 3, 1, 4) \
            .reshape(b * max_pages, page, hkv, d)
        caches.append(cache)
    return caches[0], caches[1], table, lens.to(torch.int32)


def moved_bytes(item, lens):
    """Bytes a step must move: q and the output once, each sequence's K and V rows once."""
    size = 2 if item["dtype"] in ("bf16", "f16") else 4
    b, h, hkv, sq, d = (item[key] for key in ("batch", "heads", "kv_heads", "seq_q", "head_dim"))
    return size * (2 * b * h * sq * d + 2 * hkv * d * int(lens.sum().item()))


def write_table(rows, path):
    lines = ["| case | Kiln paged TB/s | Kiln contiguous TB/s | paged / contiguous | contiguous + length mask TB/s | "
             "paged / masked | SDPA flash TB/s | vs flash | SDPA cuDNN TB/s | vs cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if "generated_ms" in r):
        cells = [f"{r[f'{label}_tbs']:.2f} | {r[f'vs_{label}']:.2f}x" if f"vs_{label}" in r else "- | -"
                 for label in COMPARED]
        lines.append(f"| {r['name']} | {r['generated_tbs']:.2f} | {' | '.join(cells)} |")
    Path(path).write_text("\n".join(lines) + "\n")


def visit(args):
    import kiln
    import torch
    from gpu_visit import attention_inputs, attention_reference64
    from row_kernels import record_timings, start_visit, summary_line, time_ms
    from torch.nn.attention import SDPBackend, sdpa_kernel

    _, build, listed, seed, generator = start_visit(args)
    rows, failures = [], 0
    for item in listed:
        q, k, v = attention_inputs(item, generator)
        kc, vc, table, lens = paged_inputs(item, k, v, generator)
        row = dict(name=item["name"], lens=lens.tolist() if item["batch"] <= 8 else None)
        bound = kiln.load(build / "paged" / item["name"]).bind(q, kc, vc, table, lens)
        out = bound.launch()[0]
        torch.cuda.synchronize()
        error = 0.0
        for b in range(item["batch"]):
            n = int(lens[b])
            one = dict(item, batch=1, seq_k=n)
            ref = attention_reference64(one, q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n])
            error = max(error, ((out[b:b + 1].double() - ref).abs().max() / ref.abs().max()).item())
        ok = error <= LIMITS[item["dtype"]] and not torch.isnan(out).any().item()
        row["generated_error"], row["generated_ok"] = error, ok
        failures += not ok
        if item["name"].startswith("b_") and not args.no_bench:
            timings = {"generated": time_ms(bound.launch)}
            twin = kiln.load(build / "contiguous" / item["name"]).bind(q, k, v)
            timings["contiguous"] = time_ms(twin.launch)
            if (build / "masked" / item["name"]).exists():
                masked = kiln.load(build / "masked" / item["name"]).bind(q, k, v, lens)
                timings["masked"] = time_ms(masked.launch)
            for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        timings[label] = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, enable_gqa=item["heads"] != item["kv_heads"]))
                except RuntimeError as refusal:
                    row[f"{label}_refused"] = str(refusal).splitlines()[0]
            record_timings(row, timings, moved_bytes(item, lens), "tbs", COMPARED)
            del twin
        rows.append(row)
        print(summary_line(row, 34, "tbs", "5.2f", COMPARED), flush=True)
        del q, k, v, kc, vc, bound
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "paged.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                    torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out / "paged.md")
    print(f"{len(rows) - failures} passed, {failures} failed (paged programs against fp64)")
    return 1 if failures else 0


def plot(args):
    from row_kernels import bar_chart
    series = (("generated", "Kiln paged"), ("contiguous", "Kiln contiguous"),
              ("masked", "Kiln contiguous + length mask"), ("flash", "SDPA flash"), ("cudnn", "SDPA cuDNN"))
    bar_chart(args.json, series, "paged decode attention on the {device}, bf16, GQA 32/8, d128", unit="TB/s")
    write_table(json.loads(Path(args.json).read_text())["rows"], Path(args.json).with_suffix(".md"))
    return 0


def main():
    from row_kernels import command_line
    return command_line(__doc__, "gpu_build/paged", prepare, visit, plot)


if __name__ == "__main__":
    sys.exit(main())
