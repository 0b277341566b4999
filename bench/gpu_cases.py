"""Kiln GPU visit, part 1 (runs here, where LLVM/MLIR is): the GEMM kernels of the GPU test and benchmark set.

Why: the GPU machine has no LLVM/MLIR. Every kernel is compiled here by kilnc from a small kiln function, and the
outputs (PTX, cubin, manifest) travel with a case list that bench/gpu_visit.py reads there. Each case names the
graph it came from so the GPU side can compute its torch reference independently.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

EPILOGUES = {
    # name: (extra arguments, body lines on %y, reference expression on y and extras)
    "none": ([], ["return %y : {Y}"]),
    "bias_silu": ([("bias", "vec")], ["%b = kiln.add %y, %bias : {Y}, {V} -> {Y}", "%s = kiln.silu %b : {Y}",
                                      "return %s : {Y}"]),
    "bias_gelu_tanh": ([("bias", "vec")], ["%b = kiln.add %y, %bias : {Y}, {V} -> {Y}",
                                           "%s = kiln.gelu %b approximate(tanh) : {Y}", "return %s : {Y}"]),
    "residual": ([("res", "out")], ["%r = kiln.add %y, %res : {Y}, {Y} -> {Y}", "return %r : {Y}"]),
}


def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + f"x{dtype}>"


def gemm_case(name, m, n, k, dtype="bf16", epilogue="none", batch=(), transpose_rhs=False, out_dtype=None,
              config=None, rhs_batch=(), fp32_precision=None):
    """`batch`: the lhs's batch dims; `rhs_batch`: the rhs's (the same, or with an unbatched lhs, broadcast);
    `fp32_precision`: the matmul's attribute of that name (f32: "tf32" or "ieee"); `config`: a pinned
    (tile, warps, stages, lowering[, group[, k_splits]])."""
    out_dtype = out_dtype or dtype
    lhs_batch, batch = batch, batch or rhs_batch  # the result's batch dims
    a = tensor((*lhs_batch, m, k), dtype)
    b = tensor((*rhs_batch, n, k) if transpose_rhs else (*rhs_batch, k, n), dtype)
    y = tensor((*batch, m, n), dtype)
    v = tensor((n,), dtype)
    extra, body = EPILOGUES[epilogue]
    args = [f"%x: {a}", f"%w: {b}"] + [f"%{e}: {v if kind == 'vec' else y}" for e, kind in extra]
    attributes = [f'fp32_precision = "{fp32_precision}"'] if fp32_precision else []
    if config:
        tile, warps, stages, lowering, *optional = config
        group, k_splits = [*optional, 1, 1][:2]
        grouped = f", group = {group}" if group != 1 else ""
        grouped += f", k_splits = {k_splits}" if k_splits != 1 else ""
        attributes.append(f"kiln.config = #kiln.config<tile = [{', '.join(map(str, tile))}], warps = {warps}, "
                          f"stages = {stages}, lowering = \"{lowering}\"{grouped}>")
    pinned = f" {{{', '.join(attributes)}}}" if attributes else ""
    lines = [f"%y = kiln.matmul %x, %w{' transpose_rhs' if transpose_rhs else ''}{pinned} : {a}, {b} -> {y}"]
    lines += [line.format(Y=y, V=v) for line in body]
    if out_dtype != dtype:
        last = lines.pop()
        value = last.split()[1]
        lines.append(f"%o = kiln.cast {value} : {y} to {tensor((*batch, m, n), out_dtype)}")
        lines.append(f"return %o : {tensor((*batch, m, n), out_dtype)}")
    result = tensor((*batch, m, n), out_dtype)
    text = f"func.func @{name}({', '.join(args)}) -> {result} {{\n  " + "\n  ".join(lines) + "\n}\n"
    return dict(name=name, kind="gemm", m=m, n=n, k=k, dtype=dtype, out_dtype=out_dtype, epilogue=epilogue,
                batch=list(batch), lhs_batch=list(lhs_batch), rhs_batch=list(rhs_batch),
                transpose_rhs=transpose_rhs, fp32_precision=fp32_precision, mlir=text)


def attention_case(name, batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype="bf16", causal=False, tile=None,
                   seq_major=False, out_seq_major=False, lowering="mma_sync", stages=2):
    """seq_major: q, k, v and out are [B, S, H, D] (layout = "bshd"); out_seq_major: only out is."""
    q = tensor((batch, seq_q, heads, head_dim) if seq_major else (batch, heads, seq_q, head_dim), dtype)
    kv = tensor((batch, seq_k, kv_heads, head_dim) if seq_major else (batch, kv_heads, seq_k, head_dim), dtype)
    out = tensor((batch, seq_q, heads, head_dim) if seq_major or out_seq_major else (batch, heads, seq_q, head_dim),
                 dtype)
    attributes = (['layout = "bshd"'] if seq_major else []) + (['out_layout = "bshd"'] if out_seq_major else [])
    if tile:
        attributes.append(f"kiln.config = #kiln.config<tile = [{tile[0]}, {tile[1]}], warps = {tile[0] // 16}, "
                          f"stages = {stages}, lowering = \"{lowering}\">")
    pinned = f" {{{', '.join(attributes)}}}" if attributes else ""
    text = (f"func.func @{name}(%q: {q}, %k: {kv}, %v: {kv}) -> {out} {{\n"
            f"  %o = kiln.attention %q, %k, %v{' causal' if causal else ''}{pinned} : {q}, {kv}, {kv} -> {out}\n"
            f"  return %o : {out}\n}}\n")
    return dict(name=name, kind="attention", batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q,
                seq_k=seq_k, head_dim=head_dim, dtype=dtype, out_dtype=dtype, causal=causal, seq_major=seq_major,
                out_seq_major=out_seq_major, mlir=text)


def attention_extras_case(name, mask_shape=None, lse=False, gate=False, causal=False, dtype="bf16", dead_rows=False):
    """Attention with an additive mask, an lse result and/or a gating multiply fused as its epilogue; with
    dead_rows, the visit sets every seventh query row of the mask to -inf (rows that see no key: zeros)."""
    b, h, hkv, sq, sk, d = 2, 4, 2, 77, 150, 64
    q, kv = tensor((b, h, sq, d), dtype), tensor((b, hkv, sk, d), dtype)
    m = tensor(mask_shape, dtype) if mask_shape else None
    g = tensor((d,), dtype)
    lse_type = tensor((b, h, sq), "f32")
    args = [f"%q: {q}", f"%k: {kv}", f"%v: {kv}"] + ([f"%m: {m}"] if m else []) + ([f"%g: {g}"] if gate else [])
    results = [q] + ([lse_type] if lse else [])
    body = [f"%o{', %lse' if lse else ''} = kiln.attention %q, %k, %v{f' mask(%m : {m})' if m else ''}"
            f"{' causal' if causal else ''} : {q}, {kv}, {kv} -> {q}{', ' + lse_type if lse else ''}"]
    value = "%o"
    if gate:
        body.append(f"%y = kiln.mul %o, %g : {q}, {g} -> {q}")
        value = "%y"
    body.append(f"return {value}{', %lse' if lse else ''} : {', '.join(results)}")
    text = f"func.func @{name}({', '.join(args)}) -> ({', '.join(results)}) {{\n  " + "\n  ".join(body) + "\n}\n"
    return dict(name=name, kind="attention", batch=b, heads=h, kv_heads=hkv, seq_q=sq, seq_k=sk, head_dim=d,
                dtype=dtype, out_dtype=dtype, causal=causal, mask=list(mask_shape) if mask_shape else None,
                lse=lse, gate=gate, dead_rows=dead_rows, mlir=text)


def attention_correctness_cases():
    cases = [
        attention_extras_case("ta_mask4_bf16", mask_shape=(2, 1, 77, 150)),
        attention_extras_case("ta_mask2_causal_bf16", mask_shape=(77, 150), causal=True),
        attention_extras_case("ta_lse_causal_bf16", lse=True, causal=True),
        attention_extras_case("ta_gate_epilogue_f16", gate=True, dtype="f16"),
        attention_extras_case("ta_mask_lse_gate_bf16", mask_shape=(2, 4, 77, 150), lse=True, gate=True),
        attention_extras_case("ta_mask_dead_rows_causal_bf16", mask_shape=(2, 1, 77, 150), causal=True,
                              dead_rows=True),
    ]
    for dtype in ("bf16", "f16"):
        for d in (24, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256):
            for causal in (False, True):
                cases.append(attention_case(f"ta_{dtype}_d{d}_{'causal' if causal else 'full'}_77", 1, 4, 4, 77, 77,
                                            d, dtype, causal))
    cases += [
        attention_case("ta_bf16_gqa4_1000_causal", 1, 8, 2, 1000, 1000, 128, "bf16", True),
        attention_case("ta_bf16_gqa8_1000", 1, 16, 2, 1000, 1000, 64, "bf16", False),
        attention_case("ta_bf16_mqa_300", 2, 8, 1, 300, 300, 128, "bf16", True),
        attention_case("ta_bf16_seq1_decode", 4, 32, 8, 1, 4096, 128, "bf16", True),
        attention_case("ta_bf16_sq77_sk200_causal", 2, 4, 4, 77, 200, 128, "bf16", True),
        attention_case("ta_f16_sq100_sk333", 1, 4, 2, 100, 333, 96, "f16", False),
        attention_case("ta_bf16_seq1", 1, 2, 2, 1, 1, 64, "bf16", False),
        # Head dims past 128: key tiles (and, on sm_80, query tiles) narrowed to fit shared memory and registers.
        attention_case("ta_bf16_d256_gqa4_sq77_sk300_causal", 2, 8, 2, 77, 300, 256, "bf16", True),
        attention_case("ta_f16_d192_sq100_sk333", 1, 4, 2, 100, 333, 192, "f16", False),
        attention_case("ta_bf16_d256_decode", 4, 8, 2, 1, 1000, 256, "bf16", True),
        attention_case("ta_bf16_d160_decode", 2, 16, 4, 1, 777, 160, "bf16", True),
        # Head dims of an odd number of 8-element chunks: each row zero-padded to whole 16-element steps.
        attention_case("ta_bf16_d72_gqa4_sq300_sk1000_causal", 2, 8, 2, 300, 1000, 72, "bf16", True),
        attention_case("ta_f16_d24_bshd_sq77_sk200", 3, 4, 4, 77, 200, 24, "f16", False, seq_major=True),
        attention_case("ta_bf16_d40_decode", 4, 8, 2, 1, 1000, 40, "bf16", True),
        # The wgmma pipeline's edges (pinned: short key ranges default to the sequential loop): one key tile
        # (prologue and last P V only), one unmasked tile then masked ones.
        attention_case("ta_bf16_d128_one_tile_50_causal", 1, 4, 4, 50, 50, 128, "bf16", True, (64, 64),
                       lowering="wgmma"),
        attention_case("ta_f16_d64_one_tile_64", 1, 4, 4, 64, 64, 64, "f16", False, (64, 64), lowering="wgmma"),
        attention_case("ta_bf16_d128_sq64_sk130", 2, 4, 4, 64, 130, 128, "bf16", False, (64, 32), lowering="wgmma"),
        attention_case("ta_bf16_d64_pipelined_200_causal", 2, 4, 2, 200, 200, 64, "bf16", True, (64, 64),
                       lowering="wgmma"),
        # The sequential wgmma loop (stages = 1): one tile, tiles ending short, causal GQA, 32-key tiles, f16.
        attention_case("ta_bf16_d128_sequential_one_tile_50_causal", 1, 4, 4, 50, 50, 128, "bf16", True, (64, 64),
                       lowering="wgmma", stages=1),
        attention_case("ta_bf16_d64_sequential_sq77_sk200", 2, 4, 4, 77, 200, 64, "bf16", False, (64, 64),
                       lowering="wgmma", stages=1),
        attention_case("ta_bf16_d128_sequential_gqa4_300_causal", 2, 8, 2, 300, 300, 128, "bf16", True, (64, 32),
                       lowering="wgmma", stages=1),
        attention_case("ta_f16_d64_sequential_1000_causal", 1, 4, 4, 1000, 1000, 64, "f16", True, (128, 64),
                       lowering="wgmma", stages=1),
        attention_case("ta_bshd_bf16_gqa4_300_causal", 2, 8, 2, 300, 300, 128, "bf16", True, seq_major=True),
        attention_case("ta_bshd_f16_sq77_sk200", 3, 4, 4, 77, 200, 64, "f16", False, seq_major=True),
        attention_case("ta_bshd_bf16_decode", 4, 32, 8, 1, 1000, 128, "bf16", True, seq_major=True),
        attention_case("ta_out_bshd_bf16_gqa4_300_causal", 2, 8, 2, 300, 300, 128, "bf16", True,
                       out_seq_major=True),
    ]
    return cases


def attention_bench_cases():
    cases = []
    for d, heads in ((128, 16), (64, 32)):
        for seq in (512, 1024, 2048, 4096, 8192, 16384):
            for causal in (False, True):
                cases.append(attention_case(f"ba_bf16_d{d}_s{seq}_{'causal' if causal else 'full'}", 16384 // seq,
                                            heads, heads, seq, seq, d, "bf16", causal))
    for seq in (2048, 8192):
        cases.append(attention_case(f"ba_bf16_gqa32x8_d128_s{seq}_causal", 16384 // seq, 32, 8, seq, seq, 128,
                                    "bf16", True))
    # Decode steps: one query row per sequence against a KV cache of whole and partial key tiles (no causal
    # mask: a last row sees every key, and SDPA's causal mask would align it top-left).
    for d in (64, 128):
        for keys in (1000, 4096, 8191):
            cases.append(attention_case(f"ba_bf16_decode_gqa32x8_d{d}_k{keys}", 16, 32, 8, 1, keys, d, "bf16"))
    return cases


GLUE = {
    # name: (input shapes/dtypes, result type, body)
    "transpose_0213": ([("x", (1, 8, 77, 64), "bf16")], ((1, 77, 8, 64), "bf16"),
                       "%r = kiln.transpose %x [0, 2, 1, 3] : {x} -> {r}"),
    "gelu_tanh": ([("x", (77, 3000), "bf16")], ((77, 3000), "bf16"), "%r = kiln.gelu %x approximate(tanh) : {x}"),
    "cast_f32_bf16": ([("x", (1000, 77), "f32")], ((1000, 77), "bf16"), "%r = kiln.cast %x : {x} to {r}"),
    "cast_bool_bf16": ([("c", (77, 96), "i1")], ((77, 96), "bf16"), "%r = kiln.cast %c : {c} to {r}"),
    "cos_f32": ([("x", (77, 300), "f32")], ((77, 300), "f32"), "%r = kiln.cos %x : {x}"),
    "floor_bf16": ([("x", (77, 96), "bf16")], ((77, 96), "bf16"), "%r = kiln.floor %x : {x}"),
    "compare_lt_bf16": ([("x", (77, 96), "bf16"), ("y", (96,), "bf16")], ((77, 96), "i1"),
                        "%r = kiln.compare lt %x, %y : {x}, {y} -> {r}"),
    "compare_ne_i64": ([("i", (77, 96), "i64"), ("j", (77, 1), "i64")], ((77, 96), "i1"),
                       "%r = kiln.compare ne %i, %j : {i}, {j} -> {r}"),
    "select_i64": ([("c", (77, 96), "i1"), ("a", (77, 96), "i64"), ("b", (96,), "i64")], ((77, 96), "i64"),
                   "%r = kiln.select %c, %a, %b : {c}, {a}, {b} -> {r}"),
    "cast_f16_bool": ([("x", (77, 96), "f16")], ((77, 96), "i1"), "%r = kiln.cast %x : {x} to {r}"),
    "remainder_f32": ([("x", (77, 300), "f32"), ("y", (300,), "f32")], ((77, 300), "f32"),
                      "%r = kiln.remainder %x, %y : {x}, {y} -> {r}"),
    "fmod_bf16": ([("x", (77, 96), "bf16"), ("y", (96,), "bf16")], ((77, 96), "bf16"),
                  "%r = kiln.fmod %x, %y : {x}, {y} -> {r}"),
    # A fused chain (kiln-fuse-elementwise): bf16 arithmetic on a broadcast column, an activation, a residual,
    # an integer slot compared and selected on; one kernel reading x, y and i once.
    "chain_bf16": ([("x", (77, 96), "bf16"), ("y", (77, 1), "bf16"), ("i", (77, 96), "i64")], ((77, 96), "bf16"),
                   "%m = kiln.mul %x, %y : {x}, {y} -> {x}\n  %s = kiln.sigmoid %m : {x}\n"
                   "  %g = kiln.add %s, %x : {x}, {x} -> {x}\n  %five = kiln.constant dense<5> : tensor<i64>\n"
                   "  %slot = kiln.remainder %i, %five : {i}, tensor<i64> -> {i}\n"
                   "  %two = kiln.constant dense<2> : tensor<i64>\n"
                   "  %lt = kiln.compare lt %slot, %two : {i}, tensor<i64> -> tensor<77x96xi1>\n"
                   "  %n = kiln.neg %g : {x}\n"
                   "  %r = kiln.select %lt, %g, %n : tensor<77x96xi1>, {x}, {x} -> {r}"),
    "remainder_i64": ([("x", (77, 96), "i64"), ("y", (96,), "i64")], ((77, 96), "i64"),
                      "%r = kiln.remainder %x, %y : {x}, {y} -> {r}"),
    "div_i32": ([("x", (77, 96), "i32"), ("y", (77, 96), "i32")], ((77, 96), "i32"),
                "%r = kiln.div %x, %y : {x}, {y} -> {r}"),
    "add_broadcast": ([("x", (2, 77, 96), "f16"), ("y", (96,), "f16")], ((2, 77, 96), "f16"),
                      "%r = kiln.add %x, %y : {x}, {y} -> {r}"),
    "broadcast_gqa": ([("x", (1, 2, 1, 77, 64), "bf16")], ((1, 2, 4, 77, 64), "bf16"),
                      "%r = kiln.broadcast %x : {x} -> {r}"),
    "slice_half": ([("x", (4, 77, 128), "bf16")], ((4, 77, 64), "bf16"),
                   "%r = kiln.slice %x offsets [0, 0, 64] strides [1, 1, 1] : {x} -> {r}"),
    "rms_norm": ([("x", (2, 77, 4096), "bf16"), ("w", (4096,), "bf16")], ((2, 77, 4096), "bf16"),
                 "%r = kiln.rms_norm %x, %w epsilon 1.0e-06 : {x}, {w}"),
    "layer_norm": ([("x", (3, 77, 768), "f16"), ("w", (768,), "f16"), ("b", (768,), "f16")], ((3, 77, 768), "f16"),
                   "%r = kiln.layer_norm %x, %w, %b epsilon 1.0e-05 : {x}, {w}, {b}"),
    "softmax": ([("x", (2, 77, 1000), "bf16")], ((2, 77, 1000), "bf16"), "%r = kiln.softmax %x axis 2 : {x}"),
    "softmax_wide": ([("x", (3, 5000), "bf16")], ((3, 5000), "bf16"), "%r = kiln.softmax %x axis 1 : {x}"),
    "layer_norm_wide": ([("x", (4, 2048), "f16"), ("w", (2048,), "f16"), ("b", (2048,), "f16")], ((4, 2048), "f16"),
                        "%r = kiln.layer_norm %x, %w, %b epsilon 1.0e-05 : {x}, {w}, {b}"),
    "reduce_sum": ([("x", (3, 77, 1000), "bf16")], ((3, 77), "bf16"), "%r = kiln.reduce sum %x axes [2] : {x} -> {r}"),
    "reduce_mean": ([("x", (77, 4100), "f16")], ((77,), "f16"), "%r = kiln.reduce mean %x axes [1] : {x} -> {r}"),
    "reduce_max_keep": ([("x", (5, 77, 333), "bf16")], ((5, 77, 1), "bf16"),
                        "%r = kiln.reduce max %x axes [2] keep_dims : {x} -> {r}"),
    "reduce_min": ([("x", (1000, 31), "f32")], ((1000,), "f32"), "%r = kiln.reduce min %x axes [1] : {x} -> {r}"),
    "logsumexp": ([("x", (2, 8, 77, 1000), "bf16")], ((2, 8, 77), "f32"), "%r = kiln.logsumexp %x axis 3 : {x} -> {r}"),
    "concat3": ([("a", (2, 77, 24), "bf16"), ("b", (2, 77, 40), "bf16"), ("c", (2, 77, 8), "bf16")],
                ((2, 77, 72), "bf16"), "%r = kiln.concat %a, %b, %c axis 2 : {a}, {b}, {c} -> {r}"),
    "gather_rows": ([("t", (1000, 96), "bf16"), ("i", (3, 17), "i64")], ((3, 17, 96), "bf16"),
                    "%r = kiln.gather %t[%i] axis 0 : {t}, {i} -> {r}"),
    "reduce_sum_axis0": ([("x", (77, 300), "bf16")], ((300,), "bf16"),
                         "%r = kiln.reduce sum %x axes [0] : {x} -> {r}"),
    "reduce_max_axes02": ([("x", (5, 7, 33), "f16")], ((1, 7, 1), "f16"),
                          "%r = kiln.reduce max %x axes [0, 2] keep_dims : {x} -> {r}"),
    "softmax_axis0": ([("x", (300, 37), "bf16")], ((300, 37), "bf16"), "%r = kiln.softmax %x axis 0 : {x}"),
    "logsumexp_axis1": ([("x", (3, 77, 5), "f16")], ((3, 5), "f32"), "%r = kiln.logsumexp %x axis 1 : {x} -> {r}"),
    "rope": ([("x", (1, 8, 77, 128), "bf16"), ("cos", (77, 64), "bf16"), ("sin", (77, 64), "bf16")],
             ((1, 8, 77, 128), "bf16"), "%r = kiln.rope %x, %cos, %sin : {x}, {cos}, {sin}"),
    "rope_seq_major": ([("x", (2, 77, 8, 128), "bf16"), ("cos", (77, 64), "bf16"), ("sin", (77, 64), "bf16")],
                       ((2, 77, 8, 128), "bf16"),
                       "%r = kiln.rope %x, %cos, %sin {{seq_dim = 1 : i64}} : {x}, {cos}, {sin}"),
    "rope_full_tables": ([("x", (2, 77, 8, 128), "bf16"), ("cos", (77, 128), "bf16"), ("sin", (77, 128), "bf16")],
                         ((2, 77, 8, 128), "bf16"),
                         "%r = kiln.rope %x, %cos, %sin {{seq_dim = 1 : i64}} : {x}, {cos}, {sin}"),
    "rope_interleaved": ([("x", (3, 33, 10), "f32"), ("cos", (33, 5), "f32"), ("sin", (33, 5), "f32")],
                         ((3, 33, 10), "f32"), "%r = kiln.rope %x, %cos, %sin interleaved : {x}, {cos}, {sin}"),
}


def glue_cases():
    cases = []
    for name, (inputs, (shape, dtype), body) in GLUE.items():
        types = {arg: tensor(s, d) for arg, s, d in inputs}
        result = tensor(shape, dtype)
        text = (f"func.func @g_{name}(" + ", ".join(f"%{arg}: {types[arg]}" for arg, _, _ in inputs) +
                f") -> {result} {{\n  " + body.format(r=result, **types) + f"\n  return %r : {result}\n}}\n")
        cases.append(dict(name=f"g_{name}", kind="glue", op=name, inputs=[[list(s), d] for _, s, d in inputs],
                          shape=list(shape), dtype=dtype, out_dtype=dtype, mlir=text))
    return cases


def correctness_cases():
    cases = []
    for dtype in ("bf16", "f16"):
        cases += [
            gemm_case(f"t_{dtype}_77x200x256", 77, 200, 256, dtype),
            gemm_case(f"t_{dtype}_1x64x64", 1, 64, 64, dtype),
            gemm_case(f"t_{dtype}_1x8x40", 1, 8, 40, dtype),
            gemm_case(f"t_{dtype}_33x72x40", 33, 72, 40, dtype),
            gemm_case(f"t_{dtype}_300x200x256_bias_silu", 300, 200, 256, dtype, "bias_silu"),
            gemm_case(f"t_{dtype}_129x136x264_gelu", 129, 136, 264, dtype, "bias_gelu_tanh"),
            gemm_case(f"t_{dtype}_100x128x96_residual", 100, 128, 96, dtype, "residual"),
            gemm_case(f"t_{dtype}_batched_2x77x96x128", 77, 96, 128, dtype, batch=(2,)),
            gemm_case(f"t_{dtype}_transposed_200x136x128", 200, 136, 128, dtype, transpose_rhs=True),
            gemm_case(f"t_{dtype}_1000x1000x1000_f32out", 1000, 1000, 1000, dtype, out_dtype="f32"),
            # Past the 64-row decode tiles sm_90a takes the wgmma kernel: both B layouts, edges in every dim.
            gemm_case(f"t_{dtype}_transposed_1000x520x1000_bias_silu", 1000, 520, 1000, dtype, "bias_silu",
                      transpose_rhs=True),
            gemm_case(f"t_{dtype}_65x72x8", 65, 72, 8, dtype),
            gemm_case(f"t_{dtype}_batched_bcast_3x257x264x520", 257, 264, 520, dtype, batch=(3,)),
            # Batched rhs (the tensor maps' third dim), and an unbatched lhs broadcast against a transposed one.
            gemm_case(f"t_{dtype}_rhs_batched_2x300x136x264", 300, 136, 264, dtype, batch=(2,), rhs_batch=(2,)),
            gemm_case(f"t_{dtype}_lhs_bcast_3x200x136x128_transposed", 200, 136, 128, dtype, rhs_batch=(3,),
                      transpose_rhs=True),
            gemm_case(f"t_{dtype}_2100x4104x136_residual", 2100, 4104, 136, dtype, "residual"),
            # Row lengths that are not whole chunks of 8: an odd one stores one element at a time, an even one
            # in pairs.
            gemm_case(f"t_{dtype}_transposed_odd_300x201x256_bias_silu", 300, 201, 256, dtype, "bias_silu",
                      transpose_rhs=True),
            gemm_case(f"t_{dtype}_transposed_even_300x202x256_bias_silu", 300, 202, 256, dtype, "bias_silu",
                      transpose_rhs=True),
            # Rows that 16-byte copies cannot start on (odd K, N not a multiple of 8): narrower or element copies.
            gemm_case(f"t_{dtype}_unaligned_77x2050x1000", 77, 2050, 1000, dtype),
            gemm_case(f"t_{dtype}_unaligned_transposed_200x136x777_bias_silu", 200, 136, 777, dtype, "bias_silu",
                      transpose_rhs=True),
            # The mma_sync kernel pinned on a shape sm_90a now gives to wgmma.
            gemm_case(f"t_{dtype}_mma_sync_300x200x256", 300, 200, 256, dtype,
                      config=((128, 64, 32), 4, 4, "mma_sync")),
        ]
    # Contractions split over a thread-block cluster (k_splits), summed through distributed shared memory: a
    # decode step's few rows (the 64 x 256 tiles of up to 16 rows, 8 blocks a cluster), 40 of 64 rows with a
    # last chunk that ends past K = 3000 and N = 1000 of partial 128-column tiles (3 blocks), nn.Linear's [N, K]
    # weight with a bias + SiLU epilogue, and two tile rows (M = 100).
    cases += [
        gemm_case("t_bf16_cluster_3x4096x4096", 3, 4096, 4096, "bf16", config=((64, 256, 64), 4, 5, "wgmma", 1, 8)),
        gemm_case("t_bf16_cluster_40x1000x3000", 40, 1000, 3000, "bf16", config=((64, 128, 64), 4, 6, "wgmma", 1, 3)),
        gemm_case("t_bf16_cluster_transposed_32x6144x4096_bias_silu", 32, 6144, 4096, "bf16", "bias_silu",
                  transpose_rhs=True, config=((64, 128, 64), 4, 6, "wgmma", 1, 4)),
        gemm_case("t_f16_cluster_100x520x1000", 100, 520, 1000, "f16", config=((64, 128, 64), 4, 4, "wgmma", 1, 2)),
        # K = 128 in 4 chunks of one 64-deep k-tile: the last two blocks of each cluster start past K and add zeros.
        gemm_case("t_bf16_cluster_chunks_past_k_3x256x128", 3, 256, 128, "bf16",
                  config=((64, 256, 64), 4, 5, "wgmma", 1, 4)),
    ]
    # Every wgmma tile shape the sweep tries, on edges.
    for tile, warps, stages, lowering in SWEEP:
        if lowering == "wgmma":
            label = f"{tile[0]}x{tile[1]}_s{stages}"
            cases.append(gemm_case(f"t_bf16_wgmma_{label}_333x520x200", 333, 520, 200, "bf16",
                                   config=(tile, warps, stages, lowering)))
    return cases


BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 4096), (8192, 11008, 4096),
                (8192, 4096, 11008), (16384, 14336, 4096), (512, 4096, 4096), (64, 4096, 4096)]


def bench_cases():
    cases = []
    for dtype in ("bf16", "f16"):
        for m, n, k in BENCH_SHAPES:
            for epilogue in ("none", "bias_silu"):
                cases.append(gemm_case(f"b_{dtype}_{m}x{n}x{k}_{epilogue}", m, n, k, dtype, epilogue))
    return cases


SWEEP = [((128, 128, 32), 4, 4, "mma_sync"), ((128, 256, 32), 8, 3, "mma_sync"),
         ((128, 128, 64), 8, 3, "wgmma"), ((128, 128, 64), 8, 4, "wgmma"), ((128, 128, 64), 8, 5, "wgmma"),
         ((128, 128, 64), 8, 6, "wgmma"),
         ((128, 256, 64), 8, 3, "wgmma"), ((128, 256, 64), 8, 4, "wgmma"), ((64, 256, 64), 4, 4, "wgmma"),
         ((256, 128, 64), 16, 4, "wgmma"), ((128, 64, 64), 8, 6, "wgmma")]


def sweep_cases():
    """Config variants pinned in the graph, on large shapes: the autotuning space, measured."""
    cases = []
    for d, heads in ((128, 16), (64, 32)):
        for lowering, tiles in (("mma_sync", ((128, 64), (128, 128))),
                                ("wgmma", ((128, 64), (128, 128), (64, 128), (128, 192)))):
            for tile in tiles:
                for causal in (False, True):
                    cases.append(attention_case(
                        f"ba_sweep_d{d}_s4096_{'causal' if causal else 'full'}_{lowering}_{tile[0]}x{tile[1]}",
                        4, heads, heads, 4096, 4096, d, "bf16", causal, tile, lowering=lowering))
    # Short sequences, where the prologue and the blocks per multiprocessor weigh most: the wgmma tiles.
    for d, heads in ((128, 16), (64, 32)):
        for seq in (512, 1024):
            for tile in ((64, 64), (128, 64), (64, 128), (128, 128), (64, 32)):
                for causal in (False, True):
                    cases.append(attention_case(
                        f"ba_sweep_d{d}_s{seq}_{'causal' if causal else 'full'}_wgmma_{tile[0]}x{tile[1]}",
                        16384 // seq, heads, heads, seq, seq, d, "bf16", causal, tile, lowering="wgmma"))
    for m, n, k in [(4096, 4096, 4096), (8192, 11008, 4096), (2048, 14336, 4096), (2048, 1024, 4096)]:
        for tile, warps, stages, lowering in SWEEP:
            label = f"{lowering}_{tile[0]}x{tile[1]}x{tile[2]}_w{warps}_s{stages}"
            cases.append(gemm_case(f"b_sweep_bf16_{m}x{n}x{k}_{label}", m, n, k, "bf16",
                                   config=(tile, warps, stages, lowering)))
    return cases


def short_tile_cases():
    """Head dim 64 on 64-256 keys (16k tokens): 64- and 32-key tiles, pipelined and sequential, side by side."""
    cases = []
    for seq in (64, 96, 128, 136, 160, 168, 192, 256):
        for causal in (False, True):
            for bk in (64, 32):
                for stages in (2, 1):
                    cases.append(attention_case(
                        f"ba_tiles_d64_s{seq}_{'causal' if causal else 'full'}_64x{bk}_stages{stages}", 16384 // seq,
                        32, 32, seq, seq, 64, "bf16", causal, (64, bk), lowering="wgmma", stages=stages))
    return cases


# Decode-step GEMMs (M = 32 rows against a Llama-sized weight): thinner and deeper tiles than the default, and
# two blocks per multiprocessor where shared memory allows, to put more of the weight in flight.
DECODE = [((32, 16, 128), 4, 6), ((32, 16, 128), 2, 6), ((32, 32, 128), 4, 4), ((32, 16, 256), 4, 3),
          ((32, 32, 256), 4, 3), ((32, 64, 128), 4, 4)]


def decode_cases():
    """Decode-step GEMMs (M = 32) with the default config and each DECODE config pinned."""
    cases = []
    for k, n in ((4096, 14336), (14336, 4096), (4096, 6144), (4096, 4096)):
        cases.append(gemm_case(f"b_decode_bf16_32x{n}x{k}_default", 32, n, k, "bf16"))
        for tile, warps, stages in DECODE:
            label = f"{tile[0]}x{tile[1]}x{tile[2]}_w{warps}_s{stages}"
            cases.append(gemm_case(f"b_decode_bf16_32x{n}x{k}_{label}", 32, n, k, "bf16",
                                   config=(tile, warps, stages, "mma_sync")))
    return cases


def short_seq_cases():
    """The two wgmma loop forms side by side on short key ranges (16k tokens): pipelined, or one stage."""
    cases = []
    for d, heads, bk in ((128, 16, 32), (64, 32, 64)):
        for seq in (128, 160, 192, 256, 512):
            for causal in (False, True):
                for stages in (1, 2):
                    cases.append(attention_case(
                        f"ba_short_d{d}_s{seq}_{'causal' if causal else 'full'}_stages{stages}", 16384 // seq, heads,
                        heads, seq, seq, d, "bf16", causal, (64, bk), lowering="wgmma", stages=stages))
    return cases


def compile_graph(kilnc, graph, folder, target, name):
    """Compiles ``graph`` with ``kilnc`` for ``target`` into ``folder`` and drops the PTX (the cubins travel; the
    PTX is reproducible here). False, with kilnc's errors printed under ``name``, when it fails."""
    result = subprocess.run([str(kilnc), str(graph), f"--target={target}", "-o", str(folder)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        print(f"{name}: kilnc failed:\n{result.stderr}", file=sys.stderr)
        return False
    for ptx in Path(folder).glob("*.ptx"):
        ptx.unlink()
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kilnc", default="build/bin/kilnc")
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--out", default="gpu_build")
    parser.add_argument("--bench", action="store_true", help="also compile the benchmark shapes")
    parser.add_argument("--sweep", action="store_true", help="also compile config variants of two large shapes")
    parser.add_argument("--short", action="store_true", help="also compile both wgmma attention loops on short keys")
    parser.add_argument("--decode", action="store_true", help="also compile decode-step GEMM config variants")
    parser.add_argument("--short-tiles", action="store_true",
                        help="also compile head dim 64 attention on 64-256 keys with 64- and 32-key tiles")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = correctness_cases() + attention_correctness_cases() + glue_cases()
    cases += bench_cases() if args.bench else []
    cases += (attention_bench_cases() if args.bench else []) + (sweep_cases() if args.sweep else [])
    cases += short_seq_cases() if args.short else []
    cases += decode_cases() if args.decode else []
    cases += short_tile_cases() if args.short_tiles else []
    listed = []
    for case in cases:
        folder = out / case["name"]
        folder.mkdir(exist_ok=True)
        (folder / "graph.mlir").write_text(case["mlir"])
        if not compile_graph(args.kilnc, folder / "graph.mlir", folder, args.target, case["name"]):
            return 1
        listed.append({k: v for k, v in case.items() if k != "mlir"})
    # Whole graphs: kernels plus their run plan, checked end to end on the GPU.
    example = Path(__file__).resolve().parent.parent / "examples" / "gpu_attention_block.mlir"
    folder = out / "plan_gpu_attention_block"
    folder.mkdir(exist_ok=True)
    if not compile_graph(args.kilnc, example, folder, args.target, "example"):
        return 1
    listed.append(dict(name="plan_gpu_attention_block", kind="plan", reference="attention_block", dtype="bf16"))
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    print(f"compiled {len(listed)} cases into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
