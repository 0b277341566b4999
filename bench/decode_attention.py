"""Decode attention on the H200: split-KV (kiln-split-kv) against the unsplit kernel, SDPA (flash and cuDNN) and the
copy limit, checked against a float64 reference in the same run.

Why: a decode step has one query tile per (batch, KV head) after GQA packing, eight blocks at batch 1 with 8 KV
heads; kiln-split-kv splits the keys into chunks of their own blocks and merges them by their log-sum-exp. This
script measures what that buys, per batch and cache length, in the units a memory-bound kernel is judged by
(TB/s of the bytes it must read and write: q, k, v and the output), against:

- ``whole``: the same attention compiled with its config pinned (kiln-split-kv leaves pinned attentions alone),
  which is the kernel the compiler emitted before the split;
- SDPA's flash and cuDNN backends on the same tensors (``enable_gqa``);
- ``c_`` cases: the split written out in IR with a fixed chunk (256 to 4096 keys), to check the chunk that
  kiln::chooseKvChunk picks against its neighbours.

``prepare`` (here, where the compiler is) compiles each case with ``kilnc`` into ``<out>/generated/<case>`` and its
pinned twin into ``<out>/whole/<case>``; ``visit`` (on the GPU machine, build/python on PYTHONPATH) runs each
program through ``kiln.load(...).bind(...)`` on fresh random inputs (seed printed), checks it against
softmax(q k^T / sqrt(d)) v in float64 (limits 2e-2 bf16, 4e-3 f16: P is rounded to the input type before P V),
times the ``b_`` and ``c_`` cases as CUDA graphs of back-to-back calls (row_kernels.time_ms), and writes
decode.json and decode.md; ``plot`` draws decode.json.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_cases import tensor  # noqa: E402

LIMITS = {"bf16": 2e-2, "f16": 4e-3}
#: The decode kernel's config (kiln-select-config's for a packed 16-row query tile at head dim 128), pinned for
#: the unsplit twin.
WHOLE_TILE = "#kiln.config<tile = [16, 64], warps = 1, stages = 2, lowering = \"mma_sync\">"
COMPARED = ("whole", "flash", "cudnn")


def decode_case(name, batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype="bf16", causal=False, chunk=None):
    """An attention case; ``chunk`` writes it out as a split attention with that many keys per chunk (q packed
    by hand as kiln-pack-gqa-decode packs it)."""
    q, kv = tensor((batch, heads, seq_q, head_dim), dtype), tensor((batch, kv_heads, seq_k, head_dim), dtype)
    flag = " causal" if causal else ""

    def plain(pinned):
        attributes = f" {{kiln.config = {WHOLE_TILE}}}" if pinned else ""
        return (f"func.func @{name}(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{\n"
                f"  %o = kiln.attention %q, %k, %v{flag}{attributes} : {q}, {kv}, {kv} -> {q}\n"
                f"  return %o : {q}\n}}\n")

    case = dict(name=name, batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q, seq_k=seq_k,
                head_dim=head_dim, dtype=dtype, causal=causal, chunk=chunk)
    if chunk is None:
        return dict(case, mlir=plain(False), mlir_whole=plain(True) if name.startswith("b_") else None)
    group = heads // kv_heads
    assert seq_q == 1 and not causal
    splits = -(-seq_k // chunk)
    packed = tensor((batch, kv_heads, group, head_dim), dtype)
    parts = tensor((splits, batch, kv_heads, group, head_dim), "f32")
    lse = tensor((splits, batch, kv_heads, group), "f32")
    text = (f"func.func @{name}(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{\n"
            f"  %qp = kiln.reshape %q : {q} -> {packed}\n"
            f"  %p, %l = kiln.attention %qp, %k, %v {{kv_chunk = {chunk} : i64}} : {packed}, {kv}, {kv} -> "
            f"{parts}, {lse}\n"
            f"  %op = kiln.merge_splits %p, %l : {parts}, {lse} -> {packed}\n"
            f"  %o = kiln.reshape %op : {packed} -> {q}\n"
            f"  return %o : {q}\n}}\n")
    return dict(case, mlir=text, mlir_whole=None)


def cases():
    listed = [  # correctness: lengths off the chunks and tiles, GQA and MHA, f16, a causal multi-row step
        decode_case("t_b1_gqa_sk5000_bf16", 1, 32, 8, 1, 5000, 128),
        decode_case("t_b3_mha_sk1287_d64_f16", 3, 8, 8, 1, 1287, 64, "f16"),
        decode_case("t_b2_mqa_sk777_bf16", 2, 16, 1, 1, 777, 128),
        decode_case("t_b1_sq4_causal_sk3000_d128", 1, 8, 8, 4, 3000, 128, causal=True),
        decode_case("t_b5_gqa_sk32769_d64_bf16", 5, 16, 4, 1, 32769, 64),
    ]
    for batch in (1, 2, 4, 8, 16, 32, 64):  # bf16, GQA 32/8, head dim 128
        for keys in (4096, 8192, 32768):
            listed.append(decode_case(f"b_decode_b{batch}_kv{keys}", batch, 32, 8, 1, keys, 128))
    sweeps = {(1, 4096): (128, 256, 512), (1, 8192): (256, 512, 1024), (4, 8192): (512, 1024, 2048),
              (8, 8192): (1024, 2048, 4096), (16, 8192): (2048, 4096), (32, 8192): (2816, 4096),
              (64, 8192): (2816, 4096), (1, 32768): (512, 1024, 2048)}
    for (batch, keys), chunks in sweeps.items():
        for chunk in chunks:
            listed.append(decode_case(f"c_b{batch}_kv{keys}_chunk{chunk}", batch, 32, 8, 1, keys, 128,
                                      chunk=chunk))
    return listed


def prepare(args):
    from row_kernels import compile_variants
    return compile_variants(args, cases(), {"generated": "mlir", "whole": "mlir_whole"})


def moved_bytes(item):
    """Bytes a decode step must move: q and the output once, k and v once (GQA: each KV head read once)."""
    size = 2 if item["dtype"] in ("bf16", "f16") else 4
    b, h, hkv, sq, sk, d = (item[key] for key in ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"))
    return size * (2 * b * h * sq * d + 2 * b * hkv * sk * d)


def write_table(rows, path):
    lines = ["| case | Kiln split TB/s | chunks | unsplit TB/s | split / unsplit | SDPA flash TB/s | vs flash | "
             "SDPA cuDNN TB/s | vs cuDNN |", "|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if "generated_ms" in r):
        cells = [f"{r[f'{label}_tbs']:.2f} | {r[f'vs_{label}']:.2f}x" if f"vs_{label}" in r else "- | -"
                 for label in COMPARED]
        lines.append(f"| {r['name']} | {r['generated_tbs']:.2f} | {r.get('chunks', 1)} | {' | '.join(cells)} |")
    Path(path).write_text("\n".join(lines) + "\n")


def visit(args):
    import kiln
    import torch
    from gpu_visit import attention_inputs, attention_reference64
    from row_kernels import record_timings, start_visit, summary_line, time_ms
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def kernel_times(launch):
        """Device time of each kernel of one call (µs), from the profiler over 20 calls."""
        from torch.profiler import ProfilerActivity, profile
        launch()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as trace:
            for _ in range(20):
                launch()
            torch.cuda.synchronize()
        times = {}
        for event in trace.key_averages():
            if event.device_type.name == "CUDA" and event.count >= 20:
                times[event.key] = round(event.device_time_total / 20, 2)
        return times

    _, build, listed, seed, generator = start_visit(args)
    rows, failures = [], 0
    for item in listed:
        q, k, v = attention_inputs(item, generator)
        ref = attention_reference64(item, q, k, v)
        row = dict(name=item["name"])
        launches = {}
        for variant in ("generated", "whole"):
            folder = build / variant / item["name"]
            if not folder.exists():
                continue
            manifest = json.loads((folder / "manifest.json").read_text())
            attention = next(e for e in manifest["kernels"] if e.get("op") == "kiln.attention")
            if variant == "generated":
                row["kernels"] = len(manifest["plans"][0]["steps"])
                row["chunks"] = attention["grid"][0] // (item["batch"] * item["kv_heads"]) \
                    if row["kernels"] > 1 else 1
            bound = kiln.load(folder).bind(q, k, v)
            out = bound.launch()[0]
            torch.cuda.synchronize()
            error = ((out.double() - ref).abs().max() / ref.abs().max()).item()
            ok = error <= LIMITS[item["dtype"]] and not torch.isnan(out).any().item()
            row[f"{variant}_error"], row[f"{variant}_ok"] = error, ok
            if variant == "generated":
                failures += not ok
            launches[variant] = bound.launch
        if item["name"][:2] in ("b_", "c_") and not args.no_bench:
            timings = {variant: time_ms(launch) for variant, launch in launches.items()}
            if item["name"].startswith("b_"):
                for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            timings[label] = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, enable_gqa=item["heads"] != item["kv_heads"]))
                    except RuntimeError as error:
                        row[f"{label}_refused"] = str(error).splitlines()[0]
            record_timings(row, timings, moved_bytes(item), "tbs", COMPARED)
            if row.get("kernels", 1) > 1:
                row["kernel_us"] = kernel_times(launches["generated"])
        rows.append(row)
        print(summary_line(row, 32, "tbs", "5.2f", COMPARED) + f"  [{row.get('chunks', 1)} chunks] "
              + " ".join(f"{name.rsplit('_', 2)[-1]} {us}" for name, us in row.get("kernel_us", {}).items()),
              flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                     torch=torch.__version__, rows=rows), indent=1))
    write_table(rows, out / "decode.md")
    print(f"{len(rows) - failures} passed, {failures} failed (split-KV programs against fp64)")
    return 1 if failures else 0


def plot(args):
    from row_kernels import bar_chart
    bar_chart(args.json, (("generated", "Kiln split-KV"), ("whole", "Kiln unsplit"), ("flash", "SDPA flash"),
                          ("cudnn", "SDPA cuDNN")), "decode attention on the {device}, bf16, GQA 32/8, d128", unit="TB/s")
    write_table(json.loads(Path(args.json).read_text())["rows"], Path(args.json).with_suffix(".md"))
    return 0


def main():
    from row_kernels import command_line
    return command_line(__doc__, "gpu_build/decode", prepare, visit, plot)


if __name__ == "__main__":
    sys.exit(main())
