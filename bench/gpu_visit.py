"""Kiln GPU visit, part 2 (runs on the GPU machine): check and time the kernels bench/gpu_cases.py compiled.

Why: one script per device visit. It loads each cubin through Kiln's runtime (libkiln_runtime.so, through the
kiln package's runtime module), checks every kernel against a torch float32 reference on fresh random inputs,
and times the benchmark kernels side by side with cuBLAS (torch.matmul), a plain Triton kernel
(bench/triton_kernels.py) and the unfused torch epilogue, with
CUDA events, after warm-up, taking the median. Results go to --out as JSON and a markdown table.

Error measure: max|out - ref| / max|ref| with ref computed in float32 from the same (rounded) inputs; limits
1e-2 for bf16 and 5e-3 for f16, also when a bf16/f16 matmul result is cast to f32 (it is held in bf16/f16).
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "i64": torch.int64, "i32": torch.int32,
          "i1": torch.bool}
LIMITS = {"bf16": 1e-2, "f16": 5e-3, "f32": 1e-4}


class Runtime:
    """Runs single-kernel programs through the kiln package (build/python or the installed wheel on the path;
    no compiler needed): the runtime runs each folder's plan, bound once per set of tensors to the caller's
    inputs and output tensors, so a timed launch is one plan run of one kernel."""

    def __init__(self, path):
        os.environ.setdefault("KILN_RUNTIME", str(Path(path).resolve()))
        import kiln
        self.kiln = kiln
        self.bound = {}  # (folder, tensor addresses) -> the bound program

    def load(self, cubin, entry):
        """The program of the folder holding ``cubin``, the kernel of manifest ``entry``."""
        program = self.kiln.load(Path(cubin).parent)
        if [k["name"] for k in program.kernels] != [entry["name"]]:
            raise SystemExit(f"{Path(cubin).parent}: expected the one kernel {entry['name']}")
        return program

    def launch(self, program, entry, tensors):
        """Runs ``program`` with its inputs and then its outputs in ``tensors``."""
        key = (program.folder, tuple(t.data_ptr() for t in tensors))
        if key not in self.bound:
            count = len(program.inputs)
            self.bound[key] = program.bind(*tensors[:count], out=tensors[count:])
        self.bound[key].launch()


def make_inputs(case, generator):
    dtype = DTYPES[case["dtype"]]
    m, n, k, batch = case["m"], case["n"], case["k"], tuple(case["batch"])
    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator, device="cuda") * scale).to(dtype)
    x = rnd(*case.get("lhs_batch", batch), m, k)
    rhs_batch = case.get("rhs_batch", [])
    w = rnd(*rhs_batch, n, k, scale=k ** -0.5) if case["transpose_rhs"] else rnd(*rhs_batch, k, n, scale=k ** -0.5)
    extras = []
    if case["epilogue"] in ("bias_silu", "bias_gelu_tanh"):
        extras.append(rnd(n))
    elif case["epilogue"] == "residual":
        extras.append(rnd(*batch, m, n))
    return x, w, extras


def reference(case, x, w, extras):
    """The graph's meaning in float32: the matmul result is held in the input dtype, the epilogue applies to it."""
    wf = w.float().transpose(-1, -2) if case["transpose_rhs"] else w.float()
    y = (x.float() @ wf).to(DTYPES[case["dtype"]]).float()
    if case["epilogue"] == "bias_silu":
        y = torch.nn.functional.silu(y + extras[0].float())
    elif case["epilogue"] == "bias_gelu_tanh":
        y = torch.nn.functional.gelu(y + extras[0].float(), approximate="tanh")
    elif case["epilogue"] == "residual":
        y = y + extras[0].float()
    return y


def attention_inputs(case, generator):
    dtype = DTYPES[case["dtype"]]
    b, h, hkv, sq, sk, d = (case[key] for key in ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"))
    def rnd(*shape):
        return torch.randn(*shape, generator=generator, device="cuda").to(dtype)
    return rnd(b, h, sq, d), rnd(b, hkv, sk, d), rnd(b, hkv, sk, d)


def attention_reference(case, q, k, v, mask=None, gate=None):
    """softmax(q k^T / sqrt(d) [+ mask] [+ causal, bottom-right]) v [* gate] in float32, kv heads repeated for
    GQA; also the log-sum-exp of each score row."""
    group = case["heads"] // case["kv_heads"]
    qf, kf, vf = q.float(), k.float().repeat_interleave(group, 1), v.float().repeat_interleave(group, 1)
    s = (qf @ kf.transpose(-1, -2)) / case["head_dim"] ** 0.5
    if mask is not None:
        s = s + mask.float()
    if case["causal"]:
        sq, sk = case["seq_q"], case["seq_k"]
        keep = torch.ones(sq, sk, device="cuda", dtype=torch.bool).tril(sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
    # A row that sees no key (all -inf) gives zeros, as kiln.attention defines (and torch's SDPA).
    probabilities = torch.softmax(s, -1).masked_fill(torch.isneginf(s).all(-1, keepdim=True), 0.0)
    out = probabilities @ vf
    if gate is not None:
        out = out * gate.float()
    return out, torch.logsumexp(s, -1)


def attention_reference64(case, q, k, v):
    """softmax(q k^T / sqrt(d) [+ causal, bottom-right]) v in float64, kv heads repeated for GQA, one sequence at a
    time (a batch of long KV caches in float64 would not fit: 64 x 32k keys take 64 GiB)."""
    group = case["heads"] // case["kv_heads"]
    outs = []
    for b in range(case["batch"]):
        qd = q[b:b + 1].double()
        kd = k[b:b + 1].double().repeat_interleave(group, 1)
        vd = v[b:b + 1].double().repeat_interleave(group, 1)
        s = (qd @ kd.transpose(-1, -2)) / case["head_dim"] ** 0.5
        if case["causal"]:
            keep = torch.ones(case["seq_q"], case["seq_k"], device="cuda", dtype=torch.bool)
            s = s.masked_fill(~keep.tril(case["seq_k"] - case["seq_q"]), float("-inf"))
        outs.append(torch.softmax(s, -1) @ vd)
    return torch.cat(outs)


def attention_flops(case):
    b, h, sq, sk, d = (case[key] for key in ("batch", "heads", "seq_q", "seq_k", "head_dim"))
    flops = 4.0 * b * h * sq * sk * d
    return flops / 2 if case["causal"] and sq == sk else flops


def launcher(folder, inputs, outputs):
    """The program in ``folder`` as a function of no arguments that runs it on ``inputs``, and its results: its one
    kernel writing straight into ``outputs``, or a plan of several kernels (a split attention and its merge,
    kiln-split-kv's, where query tiles are few) bound with buffers of its own, which hold the results."""
    import kiln
    program = kiln.load(folder)
    bound = program.bind(*inputs, out=outputs if len(program.kernels) == 1 else None)
    return bound.launch, list(bound.launch())


def run_attention(case, folder, generator, bench):
    q, k, v = attention_inputs(case, generator)
    dtype = DTYPES[case["dtype"]]
    mask = (torch.randn(*case["mask"], generator=generator, device="cuda").to(dtype)
            if case.get("mask") else None)
    if case.get("dead_rows"):
        mask[..., ::7, :] = float("-inf")
    gate = torch.randn(case["head_dim"], generator=generator, device="cuda").to(dtype) if case.get("gate") else None
    # Seq-major cases get the same tensors as [B, S, H, D] (out_seq_major: only the output); the output is
    # compared back in [B, H, S, D].
    swap_heads = lambda t: t.transpose(1, 2).contiguous()  # noqa: E731
    swap = swap_heads if case.get("seq_major") else (lambda t: t)
    swap_out = swap_heads if case.get("seq_major") or case.get("out_seq_major") else (lambda t: t)
    out = torch.full_like(swap_out(q), float("nan"))
    lse = (torch.full((case["batch"], case["heads"], case["seq_q"]), float("nan"), device="cuda")
           if case.get("lse") else None)
    inputs = [swap(q), swap(k), swap(v)] + [t for t in (mask, gate) if t is not None]
    launch, results = launcher(folder, inputs, [t for t in (out, lse) if t is not None])
    torch.cuda.synchronize()
    out, lse = results[0], (results[1] if lse is not None else None)
    ref, ref_lse = attention_reference(case, q, k, v, mask, gate)
    out = swap_out(out)
    error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    ok = error <= LIMITS[case["dtype"]] and not torch.isnan(out).any().item()
    if lse is not None:
        lse_error = ((lse - ref_lse).abs().max() / ref_lse.abs().max()).item()
        error = max(error, lse_error)
        ok = ok and lse_error <= 1e-3 and not torch.isnan(lse).any().item()
    row = dict(name=case["name"], error=error, ok=ok)
    if bench:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flops = attention_flops(case)
        group = case["heads"] // case["kv_heads"]
        kiln_ms = time_ms(launch)
        row.update(kiln_ms=kiln_ms, kiln_tflops=flops / kiln_ms / 1e9)
        for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    fn = lambda: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=case["causal"], enable_gqa=group > 1)
                    ms = time_ms(fn)
                row.update({f"{label}_ms": ms, f"{label}_tflops": flops / ms / 1e9, f"ratio_{label}": ms / kiln_ms})
            except RuntimeError as error:
                row[f"{label}_error"] = str(error).splitlines()[0]
        if not case.get("seq_major") and not case.get("out_seq_major"):
            import triton_kernels
            row.update(triton_row(lambda: triton_kernels.attention(q, k, v, causal=case["causal"]), ref, flops,
                                  kiln_ms, LIMITS[case["dtype"]]))
    return row


def triton_row(fn, ref, flops, kiln_ms, limit):
    """The same computation as a plain Triton kernel (bench/triton_kernels.py): checked against the reference,
    then timed; a Triton failure is recorded, not raised."""
    try:
        out = fn()
        error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        ms = time_ms(fn)
    except Exception as failure:  # a compile or launch failure in Triton must not end the visit
        return dict(triton_error=str(failure).splitlines()[0] if str(failure) else type(failure).__name__)
    return dict(triton_ms=ms, triton_tflops=flops / ms / 1e9, ratio_triton=ms / kiln_ms, triton_error_rel=error,
                triton_ok=error <= limit)


GLUE_REFERENCES = {
    "transpose_0213": lambda x: x.permute(0, 2, 1, 3),
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "cast_f32_bf16": lambda x: x,
    "cast_bool_bf16": lambda c: c.float(),
    "cos_f32": torch.cos,
    "floor_bf16": torch.floor,
    "compare_lt_bf16": lambda x, y: x < y,
    "compare_ne_i64": lambda i, j: i != j,
    "select_i64": torch.where,
    "cast_f16_bool": lambda x: x != 0,
    # The remainders in float64 (exact where the f32 kernel's fmod is): torch's own f32 remainder divides.
    "remainder_f32": lambda x, y: torch.remainder(x.double(), y.double()),
    "fmod_bf16": lambda x, y: torch.fmod(x.double(), y.double()),
    # The chain with each bf16 intermediate rounded, as the fused kernel (and the unfused ops) round them.
    "chain_bf16": lambda x, y, i: (lambda g: torch.where(torch.remainder(i, 5) < 2, g, -g))(
        (torch.sigmoid((x * y).bfloat16().float()).bfloat16().float() + x).bfloat16().float()),
    # Integer division by kiln's rule: a zero divisor gives 0 (torch's CUDA answer is undefined there).
    "remainder_i64": lambda x, y: torch.where(y == 0, 0, torch.remainder(x, torch.where(y == 0, 1, y))),
    "div_i32": lambda x, y: torch.where(y == 0, 0, torch.div(x, torch.where(y == 0, 1, y), rounding_mode="trunc")),
    "add_broadcast": lambda x, y: x + y,
    "broadcast_gqa": lambda x: x.expand(1, 2, 4, 77, 64),
    "slice_half": lambda x: x[:, :, 64:],
    "rms_norm": lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
    "layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
    "softmax": lambda x: torch.softmax(x, -1),
    "softmax_wide": lambda x: torch.softmax(x, -1),
    "concat3": lambda a, b, c: torch.cat([a, b, c], dim=2),
    "softmax_axis0": lambda x: torch.softmax(x, 0),
    "logsumexp_axis1": lambda x: torch.logsumexp(x, 1),
    "gather_rows": lambda t, i: t[i.long()],
    "reduce_sum_axis0": lambda x: x.sum(0),
    "reduce_max_axes02": lambda x: x.amax(dim=(0, 2), keepdim=True),
    "layer_norm_wide": lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5),
    "reduce_sum": lambda x: x.sum(-1),
    "reduce_mean": lambda x: x.mean(-1),
    "reduce_max_keep": lambda x: x.amax(-1, keepdim=True),
    "reduce_min": lambda x: x.amin(-1),
    "logsumexp": lambda x: torch.logsumexp(x, -1),
    "rope": lambda x, cos, sin: torch.cat([x[..., :64] * cos - x[..., 64:] * sin,
                                           x[..., 64:] * cos + x[..., :64] * sin], -1),
    "rope_seq_major": lambda x, cos, sin: torch.cat([x[..., :64] * cos[:, None] - x[..., 64:] * sin[:, None],
                                                     x[..., 64:] * cos[:, None] + x[..., :64] * sin[:, None]], -1),
    "rope_full_tables": lambda x, cos, sin: (x * cos[:, None]
                                             + torch.cat([-x[..., 64:], x[..., :64]], -1) * sin[:, None]),
    "rope_interleaved": lambda x, cos, sin: torch.stack([x[..., 0::2] * cos - x[..., 1::2] * sin,
                                                         x[..., 0::2] * sin + x[..., 1::2] * cos], -1).flatten(-2),
}


def run_glue(case, runtime, kernel, entry, generator):
    def random(shape, dtype):
        if dtype in ("i64", "i32"):  # a fifth of the values in -2..2: zero and -1 divisors occur
            wide = torch.randint(-1000, 1000, shape, generator=generator, device="cuda", dtype=DTYPES[dtype])
            small = torch.randint(-2, 3, shape, generator=generator, device="cuda", dtype=DTYPES[dtype])
            return torch.where(torch.rand(*shape, generator=generator, device="cuda") < 0.2, small, wide)
        if dtype == "i1":
            return torch.rand(*shape, generator=generator, device="cuda") < 0.5
        return torch.randn(*shape, generator=generator, device="cuda").to(DTYPES[dtype])
    inputs = [random(shape, dtype) for shape, dtype in case["inputs"]]
    dtype = DTYPES[case["dtype"]]
    # Filled with what a kernel that skips an element would leave: NaN, or 7 (true) for integers and bools.
    out = torch.full(case["shape"], float("nan") if dtype.is_floating_point else 7, device="cuda", dtype=dtype)
    runtime.launch(kernel, entry, [*inputs, out])
    torch.cuda.synchronize()
    ref = GLUE_REFERENCES[case["op"]](*[t if not t.is_floating_point() else t.float() for t in inputs])
    if not dtype.is_floating_point:  # comparisons, integer selects, casts to bool: exact
        wrong = (out != ref.to(dtype)).sum().item()
        return dict(name=case["name"], error=float(wrong), ok=wrong == 0)
    error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    ok = error <= LIMITS[case["dtype"]] and not torch.isnan(out).any().item()
    return dict(name=case["name"], error=error, ok=ok)


def attention_block_reference(q, k, v, w, b, x):
    """examples/gpu_attention_block.mlir in float32: GQA attention, heads merged, projection, bias, residual."""
    group = q.shape[1] // k.shape[1]
    kf, vf = k.float().repeat_interleave(group, 1), v.float().repeat_interleave(group, 1)
    p = torch.softmax(q.float() @ kf.transpose(-1, -2) / q.shape[-1] ** 0.5, -1)
    o = (p @ vf).to(q.dtype).float().transpose(1, 2).reshape(x.shape)
    return o @ w.float() + b.float() + x.float()


def run_plan(case, runtime, folder, generator):
    import kiln  # the package's plan runner (build/python on PYTHONPATH; the compiler extension is not needed)
    program = kiln.load(folder)
    inputs = [torch.randn(*shape, generator=generator, device="cuda").to(DTYPES[dtype]) * 0.5
              for dtype, shape in program.inputs]
    out = program(*inputs)
    torch.cuda.synchronize()
    ref = attention_block_reference(*inputs)
    error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    ok = error <= LIMITS[case["dtype"]] and not torch.isnan(out).any().item()
    return dict(name=case["name"], error=error, ok=ok, kernels=len(program.kernels))


def report_latency(header, rows, errors, path, meta, digits=1):
    """Prints the latency rows and the correctness line (bf16 against torch float32, limit 2e-2) under ``header``
    and writes them, with ``meta``, to the JSON file ``path``. True when every result agrees."""
    ok = all(e < 2e-2 for e in errors.values())
    print(header)
    for name, value in rows.items():
        print(f"  {name:70s} {value:9.{digits}f}")
    print("  correctness vs torch float32 (bf16, limit 2e-2): " +
          ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) + (" ok" if ok else " FAILED"))
    with open(path, "w") as f:
        json.dump({**meta, "rows": rows, "errors": errors}, f, indent=1)
    return ok


def per_call_us(fn, calls=2000):
    """Median host time of one call in microseconds, after 50 warm-up calls (launch overhead, not GPU time)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    torch.cuda.synchronize()
    return statistics.median(samples) / 1e3


def interleaved_per_call_us(fns, rounds=7, calls=300):
    """``per_call_us`` of each of ``fns`` (name -> function), measured in ``rounds`` rounds that take the functions
    in turn, so that the host's speed, which moves in phases of seconds, moves every figure alike: each is the
    median of its rounds."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(per_call_us(fn, calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def time_ms(fn, warmup=5, reps=30, calls=10):
    """Median device time of one call: each sample times ``calls`` back-to-back calls between CUDA events, so
    that a short kernel is not measured with the host's launch latency in front of it."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default="gpu_build")
    parser.add_argument("--runtime", default="build/lib/libkiln_runtime.so")
    parser.add_argument("--out", default=".")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--no-bench", action="store_true")
    args = parser.parse_args()
    runtime = Runtime(args.runtime)
    cases = json.loads((Path(args.build) / "cases.json").read_text())
    if args.only:
        cases = [c for c in cases if c["name"] in args.only.split(",")]
    seed = torch.seed() % 2**31
    generator = torch.Generator(device="cuda").manual_seed(seed)
    print(f"seed {seed}, device {torch.cuda.get_device_name()}")
    results, failures = [], 0
    for case in cases:
        folder = Path(args.build) / case["name"]
        if case["kind"] == "plan":
            row = run_plan(case, runtime, folder, generator)
            failures += not row["ok"]
            results.append(row)
            print(f"{case['name']:42s} err {row['error']:.2e} {'ok' if row['ok'] else 'FAILED'} "
                  f"({row['kernels']} kernels, end to end)", flush=True)
            continue
        if case["kind"] == "attention":  # one kernel, or a split-KV plan and its merge: the program runs whole
            row = run_attention(case, folder, generator, case["name"].startswith("ba_") and not args.no_bench)
            failures += not row["ok"]
            results.append(row)
            timing = ""
            if "kiln_ms" in row:
                timing = f"  {row['kiln_tflops']:6.1f} TF/s"
                for label in ("flash", "cudnn", "triton"):
                    if f"{label}_tflops" in row:
                        timing += f" | {label} {row[f'{label}_tflops']:6.1f} ({row[f'ratio_{label}']:.2f}x)"
            print(f"{case['name']:42s} err {row['error']:.2e} {'ok' if row['ok'] else 'FAILED'}{timing}", flush=True)
            continue
        manifest = json.loads((folder / "manifest.json").read_text())
        entry = manifest["kernels"][0]
        kernel = runtime.load(folder / entry["cubin"], entry)
        if case["kind"] == "glue":
            row = run_glue(case, runtime, kernel, entry, generator)
            failures += not row["ok"]
            results.append(row)
            print(f"{case['name']:42s} err {row['error']:.2e} {'ok' if row['ok'] else 'FAILED'}", flush=True)
            continue
        x, w, extras = make_inputs(case, generator)
        out = torch.full((*case["batch"], case["m"], case["n"]), float("nan"), device="cuda",
                         dtype=DTYPES[case["out_dtype"]])
        tensors = [x, w, *extras, out]
        runtime.launch(kernel, entry, tensors)
        torch.cuda.synchronize()
        ref = reference(case, x, w, extras)
        error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        # A result held in bf16/f16 inside the graph keeps that precision even when stored wider.
        limit = max(LIMITS[case["out_dtype"]], LIMITS[case["dtype"]])
        ok = error <= limit and not torch.isnan(out).any().item()
        failures += not ok
        row = dict(name=case["name"], error=error, ok=ok, registers=manifest.get("ptxas", "").count("spill"))
        if case["name"].startswith("b_") and not args.no_bench:
            flops = 2.0 * case["m"] * case["n"] * case["k"] * max(1, len(case["batch"]))
            kiln_ms = time_ms(lambda: runtime.launch(kernel, entry, tensors))
            wt = w.t() if case["transpose_rhs"] else w
            cublas_ms = time_ms(lambda: torch.matmul(x, wt))
            row.update(kiln_ms=kiln_ms, cublas_ms=cublas_ms, kiln_tflops=flops / kiln_ms / 1e9,
                       cublas_tflops=flops / cublas_ms / 1e9, ratio_cublas=cublas_ms / kiln_ms)
            if case["epilogue"] == "bias_silu":
                eager_ms = time_ms(lambda: torch.nn.functional.silu(torch.matmul(x, wt) + extras[0]))
                row.update(eager_ms=eager_ms, ratio_eager=eager_ms / kiln_ms)
            if not case["batch"] and case["epilogue"] in ("none", "bias_silu"):
                import triton_kernels
                row.update(triton_row(lambda: triton_kernels.linear(
                    x, wt, extras[0] if extras else None, silu=case["epilogue"] == "bias_silu"), ref, flops, kiln_ms,
                    LIMITS[case["dtype"]]))
        results.append(row)
        status = "ok" if ok else "FAILED"
        timing = f"  {row['kiln_tflops']:7.1f} TF/s vs cuBLAS {row['cublas_tflops']:7.1f} ({row['ratio_cublas']:.2f}x)" \
            if "kiln_ms" in row else ""
        if "triton_tflops" in row:
            timing += f" | Triton {row['triton_tflops']:7.1f} ({row['ratio_triton']:.2f}x)"
        print(f"{case['name']:42s} err {error:.2e} {status}{timing}", flush=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gemm_results.json").write_text(json.dumps(dict(seed=seed, device=torch.cuda.get_device_name(),
                                                               results=results), indent=1))
    attention = [r for r in results if "kiln_ms" in r and "ratio_flash" in r or "flash_error" in r]
    if attention:
        lines = ["| case | Kiln TFLOP/s | SDPA flash TFLOP/s | Kiln / flash | SDPA cuDNN TFLOP/s | Kiln / cuDNN | "
                 "Triton TFLOP/s | Kiln / Triton |", "|---|---|---|---|---|---|---|---|"]
        for r in attention:
            cells = [f"{r.get(f'{label}_tflops', float('nan')):.1f} | {r.get(f'ratio_{label}', float('nan')):.2f}"
                     for label in ("flash", "cudnn", "triton")]
            lines.append(f"| {r['name']} | {r['kiln_tflops']:.1f} | {' | '.join(cells)} |")
        (out_dir / "attention_results.md").write_text("\n".join(lines) + "\n")
    bench = [r for r in results if "kiln_ms" in r and "cublas_ms" in r]
    if bench:
        lines = ["| case | Kiln TFLOP/s | cuBLAS TFLOP/s | Kiln / cuBLAS | Triton TFLOP/s | Kiln / Triton | "
                 "eager epilogue ms | Kiln vs eager |", "|---|---|---|---|---|---|---|---|"]
        for r in bench:
            eager = f"{r['eager_ms']:.3f} | {r['ratio_eager']:.2f}x" if "eager_ms" in r else "- | -"
            triton = f"{r['triton_tflops']:.1f} | {r['ratio_triton']:.2f}" if "triton_tflops" in r else "- | -"
            lines.append(f"| {r['name']} | {r['kiln_tflops']:.1f} | {r['cublas_tflops']:.1f} | "
                         f"{r['ratio_cublas']:.2f} | {triton} | {eager} |")
        (out_dir / "gemm_results.md").write_text("\n".join(lines) + "\n")
    print(f"{len(results) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
