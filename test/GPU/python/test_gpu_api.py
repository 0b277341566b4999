"""The Python API on the GPU: kiln.ops, @kiln.jit, kiln.compile and kiln.frontend on torch CUDA tensors.

Run on the GPU machine in one of two ways: with the installed wheel (scripts/gpu_wheel_suite.sh), which compiles
every program there from an empty cache; or with only the package and the disk cache that prepare.py filled here,
where a cache miss fails with "compiler extension is not built", which makes a stale cache visible. Inputs are fresh random tensors (seed printed on failure) at shapes that do not divide the
tiles; references are torch in float32; tolerances are relative in the max norm: 2e-2 for bf16 and 5e-3 for
f16 (outputs are rounded to those types). Bad inputs must raise exceptions that name the argument.
"""

import importlib.util
import json
import math
import re
import secrets
import shutil

import numpy as np

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import gpu_cases  # noqa: E402
import kiln  # noqa: E402
import kiln.cache  # noqa: E402
from kiln import frontend  # noqa: E402

TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 1e-4}
#: The jitted MLP's argument specs (shape, dtype name).
MLP_ARGUMENTS = next(case[2] for case in gpu_cases.JIT_CASES if case[0] == "mlp")
WORST = {}


def fresh(seed_holder):
    seed = secrets.randbits(32)
    seed_holder.append(seed)
    return torch.Generator(device="cuda").manual_seed(seed)


def tensor(spec, generator, scale=1.0):
    shape, dtype = spec
    return (torch.randn(shape, generator=generator, device="cuda") * scale).to(getattr(torch, dtype))


def check(name, out, reference, seed):
    error = ((out.float() - reference).abs().max() / reference.abs().max()).item()
    WORST[name] = error
    # f32 products on TF32 tensor cores: each input rounded to 10 mantissa bits.
    tolerance = 2e-3 if name.endswith("_tf32") else TOLERANCE[out.dtype]
    assert error <= tolerance and not torch.isnan(out).any(), f"{name}: error {error:.3e} (seed {seed})"


def reference(name, args, constants):
    f = [a.float() for a in args]
    if name.startswith("matmul"):
        y = f[0] @ f[1]
        if "bias" in constants:
            y = y + constants["bias"].float()
        return torch.nn.functional.gelu(y) if constants.get("activation") == "gelu" else y
    if name.startswith("attention_block"):
        q, k, v, w, b, x = f
        group = q.shape[1] // k.shape[1]
        o = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(group, 1),
                                                             v.repeat_interleave(group, 1), is_causal=True)
        return o.transpose(1, 2).reshape(x.shape) @ w + b + x
    if name.startswith("attention"):
        q, k, v = f
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        sq, sk = q.shape[2], k.shape[2]
        s = q @ k.transpose(2, 3) / math.sqrt(q.shape[3])
        keep = torch.ones(sq, sk, dtype=torch.bool, device="cuda")
        if constants.get("causal"):
            keep = keep.tril(sk - sq)
        if "mask_mod" in constants:
            rows, keys = torch.arange(sq, device="cuda")[:, None], torch.arange(sk, device="cuda")[None]
            keep = keep & constants["mask_mod"](0, 0, rows, keys)
        # A row that sees no key gives zeros.
        probabilities = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
        return probabilities.masked_fill(~keep.any(-1, keepdim=True), 0.0) @ v
    if name.startswith("softmax"):
        return torch.softmax(f[0], -1)
    if name == "rms_norm":
        x, w = f
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    if name == "layer_norm":
        return torch.nn.functional.layer_norm(f[0], (f[0].shape[-1],), f[1], f[2], 1e-5)
    if name.startswith("rope"):
        x, cos, sin = f
        if cos.shape[-1] * 2 == x.shape[-1]:  # [S, D/2] tables: a factor per pair
            cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin
    if name == "projections":
        x, *weights = f
        return torch.cat([(x @ w).flatten() for w in weights])
    if name == "mlp":
        x, w1, w2, w3 = f
        h = torch.nn.functional.silu(torch.nn.functional.silu(x @ w1) @ w2)
        return h @ w3 + x
    raise KeyError(name)


@pytest.mark.parametrize("case", gpu_cases.JIT_CASES, ids=[c[0] for c in gpu_cases.JIT_CASES])
def test_jit_and_ops_on_cuda_tensors(case):
    name, fn, arguments, constants = case
    seeds = []
    generator = fresh(seeds)
    scale = 0.5 if name in ("mlp",) else 1.0
    args = [tensor(a, generator, scale) for a in arguments]
    kwargs = {k: (tensor(v, generator) if isinstance(v, tuple) else v) for k, v in constants.items()}
    out = fn(*args, **kwargs)
    torch.cuda.synchronize()
    if isinstance(out, tuple):  # several results, checked as one
        out = torch.cat([o.flatten() for o in out])
    assert out.device == args[0].device and out.dtype == args[0].dtype
    check(name, out, reference(name, args, kwargs), seeds[0])
    if name == "projections":  # one launch of a grouped TMA kernel
        program = list(fn.programs.values())[-1]
        assert [k.get("group") for k in program.kernels] == [3], program.kernels


@pytest.mark.parametrize("case", gpu_cases.VARLEN_CASES, ids=[c[0] for c in gpu_cases.VARLEN_CASES])
def test_varlen_attention(case):
    """Packed sequences (cu_seqlens) against each sequence's own attention in float32."""
    name, lengths_q, lengths_k, heads, kv_heads, head_dim, dtype, causal = case
    seeds = []
    generator = fresh(seeds)
    cu_q = torch.tensor([0, *np.cumsum(lengths_q)], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, *np.cumsum(lengths_k)], dtype=torch.int32, device="cuda")
    q = tensor(((int(cu_q[-1]), heads, head_dim), dtype), generator)
    k = tensor(((int(cu_k[-1]), kv_heads, head_dim), dtype), generator)
    v = tensor(((int(cu_k[-1]), kv_heads, head_dim), dtype), generator)
    out = kiln.ops.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    torch.cuda.synchronize()
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    expected = torch.zeros(q.shape, device="cuda")
    for s in range(len(lengths_q)):
        if lengths_q[s] == 0 or lengths_k[s] == 0:  # no keys: zeros
            continue
        rows, keys = slice(int(cu_q[s]), int(cu_q[s + 1])), slice(int(cu_k[s]), int(cu_k[s + 1]))
        qs, ks, vs = (t.float().transpose(0, 1)[None] for t in (q[rows], k[keys], v[keys]))  # [1, H, S, D]
        if causal:  # bottom-right within the sequence, as reference() masks
            alone = reference("attention", [qs, ks, vs], {"causal": True})
        else:
            group = heads // kv_heads
            alone = torch.nn.functional.scaled_dot_product_attention(qs, ks.repeat_interleave(group, 1),
                                                                     vs.repeat_interleave(group, 1))
        expected[rows] = alone[0].transpose(0, 1)
    check(name, out, expected, seeds[0])


@pytest.mark.parametrize("case", gpu_cases.PAGED_CASES, ids=[c[0] for c in gpu_cases.PAGED_CASES])
def test_paged_attention(case):
    """kiln.ops.paged_attention on CUDA tensors: each sequence's pages at shuffled ids of one pool (the unused
    pages and the rows past each length NaN), lengths drawn per sequence (ending mid-page), against each
    sequence's own attention in float32; then a bad table on the GPU is refused before the launch, by name."""
    name, batch, heads, kv_heads, seq_q, longest, head_dim, page, max_pages, num_pages, dtype = case
    seeds = []
    generator = fresh(seeds)
    lens = torch.randint(seq_q, longest + 1, (batch,), generator=generator, device="cuda").to(torch.int32)
    lens[0] = longest
    ids = torch.randperm(num_pages, generator=generator, device="cuda")[:batch * max_pages]
    table = ids.view(batch, max_pages).to(torch.int32)
    q = tensor(((batch, heads, seq_q, head_dim), dtype), generator)
    k = tensor(((batch, kv_heads, max_pages * page, head_dim), dtype), generator)
    v = tensor(((batch, kv_heads, max_pages * page, head_dim), dtype), generator)
    caches = []
    for rows in (k, v):
        cache = torch.full((num_pages, page, kv_heads, head_dim), float("nan"), dtype=rows.dtype, device="cuda")
        past = torch.arange(max_pages * page, device="cuda")[None, :] >= lens[:, None]
        filled = rows.masked_fill(past[:, None, :, None], float("nan"))
        cache[table.flatten().long()] = filled.view(batch, kv_heads, max_pages, page, head_dim) \
            .permute(0, 2, 3, 1, 4).reshape(batch * max_pages, page, kv_heads, head_dim)
        caches.append(cache)
    out = kiln.ops.paged_attention(q, caches[0], caches[1], table, lens)
    torch.cuda.synchronize()
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    # Causal bottom-right within each sequence: its Sq newest tokens are its last Sq keys.
    expected = torch.cat([reference("attention", [q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n]],
                                    {"causal": True}) for b, n in enumerate(lens.tolist())])
    check(name, out, expected, seeds[0])
    bad = table.clone()
    bad[batch - 1, 0] = num_pages
    with pytest.raises(ValueError, match=rf"'block_table'\[{batch - 1}, 0\] = {num_pages} is not a page"):
        kiln.ops.paged_attention(q, caches[0], caches[1], bad, lens)


@pytest.mark.parametrize("case", gpu_cases.APPEND_CASES, ids=[c[0] for c in gpu_cases.APPEND_CASES])
def test_append_kv_in_place(case):
    """kiln.ops.append_kv on CUDA tensors writes each sequence's new rows into its pages of the caches it was given
    (returned, updated in place) and leaves every other slot as it was; decode_step (the append and paged
    attention in one program) then attends over the new rows, against each sequence's attention in float32; a
    position past the block table is refused before the launch, by name."""
    name, batch, heads, kv_heads, seq_q, longest, head_dim, page, max_pages, num_pages, dtype = case
    seeds = []
    generator = fresh(seeds)
    lens = torch.randint(seq_q, longest + 1, (batch,), generator=generator, device="cuda").to(torch.int32)
    lens[0] = longest
    positions = lens - seq_q
    table = torch.randperm(num_pages, generator=generator, device="cuda")[:batch * max_pages]
    table = table.view(batch, max_pages).to(torch.int32)
    spec = ((batch, kv_heads, seq_q, head_dim), dtype)
    caches = [tensor(((num_pages, page, kv_heads, head_dim), dtype), generator) for _ in range(2)]
    before = [cache.clone() for cache in caches]
    k, v = tensor(spec, generator), tensor(spec, generator)
    k_cache, v_cache = kiln.ops.append_kv(caches[0], caches[1], k, v, table, positions)
    torch.cuda.synchronize()
    assert k_cache.data_ptr() == caches[0].data_ptr() and v_cache.data_ptr() == caches[1].data_ptr()
    expected = [cache.clone() for cache in before]
    for b in range(batch):
        slots = torch.arange(positions[b].item(), lens[b].item(), device="cuda")
        pages = table[b, slots // page].long()
        for cache, rows in zip(expected, (k, v)):
            cache[pages, slots % page] = rows[b].transpose(0, 1)
    assert torch.equal(caches[0], expected[0]) and torch.equal(caches[1], expected[1]), f"{name} (seed {seeds[0]})"

    # The same append (already written, so rewriting it changes nothing) and attention in one program.
    q = tensor(((batch, heads, seq_q, head_dim), dtype), generator)
    out, k_cache, v_cache = gpu_cases.decode_step(q, k, v, caches[0], caches[1], table, positions, lens)
    torch.cuda.synchronize()
    assert k_cache.data_ptr() == caches[0].data_ptr() and torch.equal(caches[0], expected[0])
    references = []
    for b, n in enumerate(lens.tolist()):
        slots = torch.arange(n, device="cuda")
        pages = table[b, slots // page].long()
        keys, values = (cache[pages, slots % page].permute(1, 0, 2)[None] for cache in expected)
        references.append(reference("attention", [q[b:b + 1], keys, values], {"causal": True}))
    check(name, out, torch.cat(references), seeds[0])

    # One tensor for both caches: the in-place append would write v's rows over k's.
    with pytest.raises(ValueError, match=r"updates argument 0 in place, but argument 1 shares its memory"):
        kiln.ops.append_kv(caches[0], caches[0], k, v, table, positions)
    bad = positions.clone()
    bad[batch - 1] = max_pages * page - seq_q + 1
    with pytest.raises(ValueError, match=rf"'positions'\[{batch - 1}\] = {bad[batch - 1].item()} plus the "
                                         rf"{seq_q} new tokens"):
        kiln.ops.append_kv(caches[0], caches[1], k, v, table, bad)


@pytest.mark.parametrize("case", gpu_cases.PROJECTION_CASES, ids=[c[0] for c in gpu_cases.PROJECTION_CASES])
def test_split_sums_computed_by_their_readers(case):
    """projections_step on CUDA tensors: the split projections' sums computed by RoPE's kernel (q with its bias,
    k), the append's (v) and the up projection's sum (the gate), in a program that runs no kernel for those sums;
    q, the MLP's output and each sequence's new cache rows against torch in float32, every other cache slot as it
    was; then bit for bit the same as the program that runs the sums as kernels of their own (keep_sums)."""
    name, batch, hidden, heads, kv_heads, head_dim, ffn, page, max_pages, num_pages, dtype = case
    seeds = []
    generator = fresh(seeds)
    x = tensor(((batch, hidden), dtype), generator)
    positions = torch.randint(0, max_pages * page, (batch,), generator=generator, device="cuda").to(torch.int32)
    angles = positions[:, None].float() / 10000.0 ** (torch.arange(head_dim // 2, device="cuda") * 2 / head_dim)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    table = torch.randperm(num_pages, generator=generator, device="cuda")[:batch * max_pages]
    table = table.view(batch, max_pages).to(torch.int32)
    caches = [tensor(((num_pages, page, kv_heads, head_dim), dtype), generator) for _ in range(2)]
    before = [cache.clone() for cache in caches]
    weights = [tensor(((rows, cols), dtype), generator, scale=rows ** -0.5)
               for rows, cols in [(hidden, heads * head_dim), (hidden, kv_heads * head_dim),
                                  (hidden, kv_heads * head_dim), (hidden, ffn), (hidden, ffn), (ffn, hidden)]]
    bias = tensor(((heads * head_dim,), dtype), generator)
    arguments = [x, cos, sin, *caches, table, positions, weights[0], bias, *weights[1:]]
    program = kiln.compile(gpu_cases.projections_step.source(*gpu_cases.projection_placeholders(case)),
                           target="sm_90a")
    assert [kernel.get("op") for kernel in program.kernels] == ["kiln.matmul", "kiln.rope", "kiln.append_kv",
                                                                "kiln.matmul", "kiln.sum_splits", "kiln.matmul",
                                                                "kiln.sum_splits"], program.kernels
    q, k_cache, v_cache, out = gpu_cases.projections_step(*arguments)
    torch.cuda.synchronize()
    f = [value.float() for value in [x, cos, sin, bias, *weights]]
    wq, wk, wv, w1, w3, w2 = f[4:]

    def rope(rows):
        half = head_dim // 2
        a, b = rows[..., :half], rows[..., half:]
        c, s = f[1][:, None], f[2][:, None]
        return torch.cat([a * c - b * s, a * s + b * c], -1)

    check(name + " q", q, rope((f[0] @ wq + f[3]).view(batch, heads, head_dim)), seeds[0])
    check(name + " mlp", out, (torch.nn.functional.silu(f[0] @ w1) * (f[0] @ w3)) @ w2, seeds[0])
    slots = table[torch.arange(batch, device="cuda"), positions // page].long(), (positions % page).long()
    new_rows = [k_cache[slots].clone(), v_cache[slots].clone()]
    check(name + " k rows", new_rows[0], rope((f[0] @ wk).view(batch, kv_heads, head_dim)), seeds[0])
    check(name + " v rows", new_rows[1], (f[0] @ wv).view(batch, kv_heads, head_dim), seeds[0])
    for cache, old in zip((k_cache, v_cache), before):
        untouched = torch.ones(cache.shape[:2], dtype=torch.bool, device="cuda")
        untouched[slots] = False
        assert torch.equal(cache[untouched], old[untouched]), f"{name}: a slot not appended to changed"
    # The sums as kernels of their own (each has a second reader): the same bits everywhere.
    q_kept, k_kept, v_kept, out_kept, *_ = gpu_cases.projections_step(*arguments, keep_sums=True)
    torch.cuda.synchronize()
    assert torch.equal(q, q_kept) and torch.equal(out, out_kept), f"{name}: fused sums changed bits (seed {seeds[0]})"
    assert torch.equal(k_kept[slots], new_rows[0]) and torch.equal(v_kept[slots], new_rows[1]), name


@pytest.mark.parametrize("case", gpu_cases.RESIDUAL_NORM_CASES, ids=[c[0] for c in gpu_cases.RESIDUAL_NORM_CASES])
def test_residual_sum_computed_by_the_norm_and_the_next_add(case):
    """residual_norm_step on CUDA tensors: the split output projection's sum with the residual, computed by the
    norm's row tiles and by the next projection's sum (no kernel of its own), against torch in float32; then bit
    for bit the same as the program that runs that sum as a kernel (keep_sums)."""
    name, rows, width, hidden, dtype = case
    seeds = []
    generator = fresh(seeds)
    o, x = tensor(((rows, width), dtype), generator), tensor(((rows, hidden), dtype), generator)
    wo = tensor(((width, hidden), dtype), generator, scale=width ** -0.5)
    norm_weight = 1 + tensor(((hidden,), dtype), generator, scale=0.1)
    w2 = tensor(((hidden, hidden), dtype), generator, scale=hidden ** -0.5)
    program = kiln.compile(gpu_cases.residual_norm_step.source(*gpu_cases.residual_norm_placeholders(case)),
                           target="sm_90a")
    ops = [kernel.get("op") for kernel in program.kernels]
    assert ops == ["kiln.matmul", "kiln.rms_norm", "kiln.matmul", "kiln.sum_splits"], ops
    out = gpu_cases.residual_norm_step(o, wo, x, norm_weight, w2)
    torch.cuda.synchronize()
    h = o.float() @ wo.float() + x.float()
    normed = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-5) * norm_weight.float()
    check(name, out, normed @ w2.float() + h, seeds[0])
    kept, _ = gpu_cases.residual_norm_step(o, wo, x, norm_weight, w2, keep_sums=True)
    torch.cuda.synchronize()
    assert torch.equal(out, kept), f"{name}: the fused residual sum changed bits (seed {seeds[0]})"


@pytest.mark.parametrize("case", gpu_cases.TWO_NORMS_CASES, ids=[c[0] for c in gpu_cases.TWO_NORMS_CASES])
def test_residual_sum_computed_by_two_norms(case):
    """residual_two_norms on CUDA tensors: the split projection's residual sum computed by two norms' row tiles in
    one grouped launch, rows past the last block's valid ones guarded, against torch in float32; then bit for
    bit the same as the program that runs the sum as a kernel (keep_sums)."""
    name, rows, width, hidden, dtype = case
    seeds = []
    generator = fresh(seeds)
    o, x = tensor(((rows, width), dtype), generator), tensor(((rows, hidden), dtype), generator)
    wo = tensor(((width, hidden), dtype), generator, scale=width ** -0.5)
    weights = [1 + tensor(((hidden,), dtype), generator, scale=0.1) for _ in range(2)]
    program = kiln.compile(gpu_cases.residual_two_norms.source(*gpu_cases.two_norms_placeholders(case)),
                           target="sm_90a")
    assert [kernel.get("op") for kernel in program.kernels] == ["kiln.matmul", "kiln.rms_norm"], program.kernels
    first, second = gpu_cases.residual_two_norms(o, wo, x, *weights)
    torch.cuda.synchronize()
    h = o.float() @ wo.float() + x.float()
    for out, weight, eps in ((first, weights[0], 1e-5), (second, weights[1], 1e-6)):
        check(name, out, h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * weight.float(), seeds[0])
    kept_first, kept_second, _ = gpu_cases.residual_two_norms(o, wo, x, *weights, keep_sums=True)
    torch.cuda.synchronize()
    assert torch.equal(first, kept_first) and torch.equal(second, kept_second), \
        f"{name}: the fused residual sum changed bits (seed {seeds[0]})"


@kiln.jit
def slots_and_gate(positions, ids, x, y):
    """Integer arithmetic on positions (a page and a slot; // and % floored), and a chain of bf16 ops selected by
    an integer test: each chain one kiln.elementwise kernel."""
    page, slot = positions // 16, positions % 16
    gate = kiln.sigmoid(x * y) + x
    return page * 100 + slot, kiln.trunc_divide(ids, 7), kiln.fmod(ids, -5), kiln.where(ids % 3 < 1, gate, -gate)


def test_integer_arithmetic_and_fused_chains_on_cuda_tensors():
    """Integers exact against torch (// and % floored, trunc_divide and fmod truncated); the bf16 chain within
    bf16 tolerance of torch in float32 with the same bf16 roundings. Each chain is one kiln.elementwise kernel."""
    seeds = []
    generator = fresh(seeds)
    positions = torch.randint(0, 4096, (3, 77), generator=generator, device="cuda")
    ids = torch.randint(-1000, 1000, (3, 77), generator=generator, device="cuda")
    x = torch.randn(3, 77, generator=generator, device="cuda").bfloat16()
    y = torch.randn(77, generator=generator, device="cuda").bfloat16()
    slots, truncated, remainders, chosen = slots_and_gate(positions, ids, x, y)
    torch.cuda.synchronize()
    assert torch.equal(slots, (positions // 16) * 100 + positions % 16), seeds
    assert torch.equal(truncated, torch.div(ids, 7, rounding_mode="trunc")), seeds
    assert torch.equal(remainders, torch.fmod(ids, -5)), seeds
    gate = (torch.sigmoid((x * y).float().bfloat16().float()).bfloat16().float() + x.float()).bfloat16().float()
    check("fused_chain", chosen, torch.where(ids % 3 < 1, gate, -gate), seeds[0])
    # The two chains in one grouped launch, the lone division and remainder in theirs: 3 launches.
    names = [k["name"] for k in list(slots_and_gate.programs.values())[-1].kernels]
    assert len(names) == 3 and names[0].endswith("elementwise_x2"), names


def test_other_sizes_reuse_the_compiled_kernel():
    """Matmuls that differ only in M (K = 1000 is no whole number of k-tiles) launch one compiled kernel, which the
    later calls' compiles take from the kernel cache; each result is right."""
    seeds = []
    generator = fresh(seeds)
    (_, _, (_, weight), constants), *_ = gpu_cases.KERNEL_REUSE_CASES
    w, bias = tensor(weight, generator, 1 / 30), tensor(constants["bias"], generator)
    cubins, hits = set(), []  # the kernel's cubin at each M (every program names its function the same)
    for name, fn, (rows, _), constants in gpu_cases.KERNEL_REUSE_CASES:
        x = tensor(rows, generator)
        out = fn(x, w, bias=bias, activation=constants["activation"])
        torch.cuda.synchronize()
        check(name, out, torch.nn.functional.silu(x.float() @ w.float() + bias.float()), seeds[0])
        program = list(kiln.ops.matmul.programs.values())[-1]
        (kernel,) = program.kernels
        cubins.add((program.folder / kernel["cubin"]).read_bytes())
        hits.append(kernel.get("kernel_cache"))
    assert len(cubins) == 1 and hits[1:] == ["hit", "hit"], (len(cubins), hits)


def test_growing_kv_caches_reuse_one_attention_kernel():
    """A decode step, a packed GQA decode step and a causal chunk of 4 rows against KV caches of several lengths,
    each ending in a partial key tile: each launches one compiled attention kernel at every length (the later
    compiles take it from the kernel cache), which reads the number of key tiles at run time; each result is right.
    Their few query tiles make kiln-split-kv cut the keys into 256-key chunks at every length here, whose count
    the kernel does not depend on (each length also has its small merge kernel)."""
    seeds = []
    generator = fresh(seeds)
    cubins, hits = {}, {}  # by group: the kernel's cubin at each length, kernel-cache hit or miss
    for name, fn, arguments, constants in gpu_cases.ATTENTION_REUSE_CASES:
        args = [tensor(spec, generator) for spec in arguments]
        out = fn(*args, **constants)
        torch.cuda.synchronize()
        check(name, out, reference(name, args, constants), seeds[0])
        program = list(fn.programs.values())[-1]
        (kernel,) = [k for k in program.kernels if k["name"].endswith("_attention")]
        group = name.rsplit("_", 2)[0]
        cubins.setdefault(group, set()).add((program.folder / kernel["cubin"]).read_bytes())
        hits.setdefault(group, []).append(kernel.get("kernel_cache"))
    assert all(len(c) == 1 for c in cubins.values()), {group: len(c) for group, c in cubins.items()}
    assert all(set(h[1:]) == {"hit"} for h in hits.values()), hits


def test_compile_source_end_to_end():
    (name, path), = gpu_cases.SOURCE_CASES
    program = kiln.compile(path.read_text(), target="sm_90a")
    assert [k["name"].rsplit("_", 1)[-1] for k in program.kernels] == ["attention", "matmul"]
    # Compiled on this machine (the installed wheel), not read from a cache that prepare.py filled elsewhere with ptxas.
    compiled_here = importlib.util.find_spec("kiln._kiln") is not None
    if compiled_here and program.manifest.get("assembler"):
        assert program.manifest["assembler"] == "the CUDA driver's JIT", "the GPU's own JIT should assemble"
        assert "in_process_assembly_failed" not in program.manifest, program.manifest["in_process_assembly_failed"]
        assert all(k["registers"] > 0 and k["spill_stores"] == 0 for k in program.kernels), program.kernels
        # Each kernel was its own module, assembled in parallel: its own cubin.
        assert len({k["cubin"] for k in program.kernels}) == 2
    seeds = []
    generator = fresh(seeds)
    args = [tensor((shape, "bfloat16"), generator, 0.5) for _, shape in program.inputs]
    out = program(*args)
    q, k, v, w, b, x = [a.float() for a in args]
    o = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    check(name, out, o.transpose(1, 2).reshape(x.shape) @ w + b + x, seeds[0])


def test_bound_program_and_graph_replay():
    """bind() allocates once; a CUDA graph of the launches replays on inputs refilled in place."""
    (name, path), = gpu_cases.SOURCE_CASES
    program = kiln.compile(path.read_text(), target="sm_90a")
    seeds = []
    generator = fresh(seeds)
    args = [tensor((shape, "bfloat16"), generator, 0.5) for _, shape in program.inputs]

    def expected():
        q, k, v, w, b, x = [a.float() for a in args]
        o = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
        return o.transpose(1, 2).reshape(x.shape) @ w + b + x

    bound = program.bind(*args)
    (out,) = bound.launch()
    torch.cuda.synchronize()
    check("bound program", out, expected(), seeds[0])
    bound.capture()
    args[0].copy_(tensor((tuple(args[0].shape), "bfloat16"), generator, 0.5))
    (replayed,) = bound.replay()
    torch.cuda.synchronize()
    assert replayed.data_ptr() == out.data_ptr()
    check("graph replay on refilled inputs", replayed, expected(), seeds[0])


def test_jitted_calls_in_a_cuda_graph():
    """A jitted call captured into a torch CUDA graph (after calls outside it, which compile and load) replays
    its kernels on inputs refilled in place, as a decode loop runs; its output lives in the graph's pool."""
    (name, fn, arguments, constants) = gpu_cases.JIT_CASES[-1]
    seeds = []
    generator = fresh(seeds)
    args = [tensor(a, generator, 0.5) for a in arguments]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch asks before a capture
        fn(*args, **constants)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args, **constants)
    for _ in range(2):
        for a in args:
            a.copy_(tensor((tuple(a.shape), "bfloat16"), generator, 0.5))
        graph.replay()
        torch.cuda.synchronize()
        check("jitted call replayed from a CUDA graph", out, reference(name, args, constants), seeds[0])


def test_current_stream_is_used():
    (_, fn, arguments, constants) = gpu_cases.JIT_CASES[0]
    seeds = []
    generator = fresh(seeds)
    args = [tensor(a, generator) for a in arguments]
    kwargs = {k: (tensor(v, generator) if isinstance(v, tuple) else v) for k, v in constants.items()}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = fn(*args, **kwargs)
    stream.synchronize()
    check("matmul on a side stream", out, reference("matmul_bias_gelu", args, kwargs), seeds[0])


def test_llama_block_from_onnx():
    onnx_blocks, (model, weights, config) = gpu_cases.llama_model()
    compiled = frontend.from_onnx(model, target="sm_90a")
    assert len(compiled.kernels) == 9
    seeds = []
    generator = fresh(seeds)
    x = torch.randn(config["batch"], config["seq"], config["hidden"], generator=generator, device="cuda")
    x = x.to(torch.bfloat16)
    out = compiled(x)
    expected = onnx_blocks.llama_reference(x.float().cpu().double().numpy(), weights, config)
    check("llama block (onnx, bf16)", out, torch.from_numpy(expected).float().cuda(), seeds[0])


def test_autotune_keeps_the_fastest_correct_config(capfd):
    (name, path), = gpu_cases.SOURCE_CASES
    source = path.read_text()
    tuned = kiln.autotune(source, "sm_90a", retune=True)
    assert "kiln.autotune: kernel 2/2 (kiln.matmul)" in capfd.readouterr().err
    record_path = kiln.cache.directory() / "tuned" / f"{kiln.cache.key(source, 'sm_90a', None)}.json"
    record = json.loads(record_path.read_text())
    assert len(record["configs"]) == 2 and record["best_ms"] > 0
    assert all(t.get("correct") is False or "error" in t or t["ms"] > 0 for t in record["trials"])
    seeds = []
    generator = fresh(seeds)
    args = [tensor((shape, "bfloat16"), generator, 0.5) for _, shape in tuned.inputs]
    q, k, v, w, b, x = [a.float() for a in args]
    o = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    check("autotuned attention block", tuned(*args), o.transpose(1, 2).reshape(x.shape) @ w + b + x, seeds[0])
    again = kiln.autotune(source, "sm_90a")  # the recorded choice, without measuring
    assert again.folder == tuned.folder and capfd.readouterr().err == ""


def test_torch_export_imports():
    """from_torch's export half on real torch: both example blocks import, and the graph passes see what they
    expect (the compile half needs the compiler, which this machine has not)."""
    import torch_blocks
    onnx_blocks, (_, weights, config) = gpu_cases.llama_model()
    llama = torch_blocks.LlamaBlock(hidden=config["hidden"], heads=config["heads"], kv_heads=config["kv_heads"],
                                    mlp=352, seq=config["seq"], eps=config["eps"]).float()
    llama.load_numpy({k: v.astype("float32") for k, v in weights.items()})
    x = torch.randn(config["batch"], config["seq"], config["hidden"])
    imported = frontend.import_onnx(frontend.export_torch(llama, [x]))
    text = imported.text
    assert imported.inputs[0][2] == tuple(x.shape) and text.count("kiln.matmul") == 9
    assert "kiln.softmax" in text and "kiln.reduce mean" in text and "kiln.concat" in text
    _, gpt_weights, gpt_config = onnx_blocks.gpt2_block()
    gpt2 = torch_blocks.GPT2Block(hidden=gpt_config["hidden"], heads=gpt_config["heads"], seq=gpt_config["seq"])
    gpt2.load_numpy({k: v.astype("float32") for k, v in gpt_weights.items()})
    y = torch.randn(gpt_config["batch"], gpt_config["seq"], gpt_config["hidden"])
    assert frontend.import_onnx(frontend.export_torch(gpt2, [y])).text.count("kiln.matmul") == 6


def edited_copy(program, folder, edit):
    """A copy of ``program``'s folder at ``folder`` whose first kernel's manifest entry ``edit`` changed."""
    shutil.copytree(program.folder, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest["kernels"][0])
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_the_runtime_checks_tensor_map_specs(tmp_path):
    """The wgmma matmul's kernel takes tensor maps of A and B; specs the runtime cannot build are refused when the
    plan is read or loaded, with a message that names what is wrong."""
    a = torch.zeros((200, 264), dtype=torch.bfloat16, device="cuda")
    b = torch.zeros((264, 136), dtype=torch.bfloat16, device="cuda")
    program = kiln.compile(kiln.ops.matmul.source(a, b), target="sm_90a")
    entry = program.kernels[0]
    maps = entry["tensor_maps"]
    assert [m["buffer"] for m in maps] == [0, 1]
    params = len(entry["params"]) + len(entry.get("sizes", []))
    misaligned = dict(maps[0], strides=[maps[0]["strides"][0] + 2, maps[0]["strides"][1]])
    for case, (specs, message) in enumerate([
            ([dict(maps[0], buffer=params)], f"reads parameter {params}, not one of the {params} "),
            ([dict(maps[0], swizzle=96)], "swizzle 0, 32, 64 or 128"),
            ([misaligned], "tensor map of kernel parameter 0 .* cuTensorMapEncodeTiled failed")]):
        folder = edited_copy(program, tmp_path / str(case), lambda kernel: kernel.update(tensor_maps=specs))
        with pytest.raises(RuntimeError, match=message):
            kiln.load(folder)(a, b)
    folder = edited_copy(program, tmp_path / "many", lambda kernel: kernel.update(tensor_maps=maps * 5))
    with pytest.raises(kiln.gpu.ManifestError, match="'tensor_maps' must list maps"):
        kiln.load(folder)
    assert torch.equal(kiln.load(program.folder)(a, b), torch.zeros((200, 136), dtype=torch.bfloat16, device="cuda"))


def test_a_kernel_file_the_driver_refuses_is_named(tmp_path):
    """A kernel file the driver cannot load (a damaged cubin in its place): the error names the file, which the
    driver's message does not, and the chips."""
    a = torch.zeros((64, 64), dtype=torch.bfloat16, device="cuda")
    program = kiln.compile(kiln.ops.matmul.source(a, a), target="sm_90a")
    assert program.kernels[0].get("cubin"), "the compile made no cubin"
    folder = edited_copy(program, tmp_path / "damaged", lambda kernel: None)
    cubin = folder / program.kernels[0]["cubin"]
    cubin.write_bytes(b"\x7fELF" + bytes(60))
    with pytest.raises(RuntimeError, match=re.escape(f"{cubin}: cuModuleLoadDataEx failed: CUDA_ERROR_") +
                       r".*\(compiled for sm_90a; the GPU has compute capability 9\.0\)"):
        kiln.load(folder)(a, a)


def bad_calls():
    program = kiln.compile(gpu_cases.SOURCE_CASES[0][1].read_text(), target="sm_90a")
    good = [torch.zeros(shape, dtype=torch.bfloat16, device="cuda") for _, shape in program.inputs]
    return [
        ("cpu tensor", lambda: program(good[0].cpu(), *good[1:]), ValueError, "argument 0 of 'gpu_attention_block' is on cpu"),
        ("numpy array", lambda: program(good[0].cpu().float().numpy(), *good[1:]), TypeError, "must be a torch CUDA tensor"),
        ("wrong dtype", lambda: program(good[0].half(), *good[1:]), TypeError, "has dtype torch.float16, expected torch.bfloat16"),
        ("wrong shape", lambda: program(good[0][:, :4], *good[1:]), ValueError, "has shape (1, 4, 77, 64)"),
        ("not contiguous", lambda: program(good[0].transpose(2, 3).contiguous().transpose(2, 3), *good[1:]),
         ValueError, "is not contiguous"),
        ("misaligned view", lambda: program(torch.zeros(good[0].numel() + 1, dtype=torch.bfloat16,
                                                        device="cuda")[1:].view(good[0].shape), *good[1:]),
         ValueError, "not on a 16-byte boundary"),
        ("too few", lambda: program(*good[:2]), TypeError, "takes 6 arguments, got 2"),
        ("cpu torch into jit", lambda: gpu_cases.mlp(*[torch.zeros(s, dtype=torch.bfloat16) for s, _ in
                                                       MLP_ARGUMENTS]), TypeError, "is a CPU torch tensor"),
        ("mixed numpy and cuda", lambda: gpu_cases.mlp(np.zeros((64, 256), np.float32), good[3], good[3], good[3]),
         TypeError, "cannot be mixed"),
    ]


@pytest.mark.parametrize("index", range(9))
def test_bad_input(index):
    description, call, error, text = bad_calls()[index]
    with pytest.raises(error) as raised:
        call()
    assert text in str(raised.value), f"{description}: {raised.value}"


def test_summary(capsys):
    with capsys.disabled():
        for name, error in sorted(WORST.items()):
            print(f"\n  {name:32} max rel err {error:.3e}", end="")
        print()
