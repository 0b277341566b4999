"""Fusion numerics: graphs written op by op, run fused + tiled and unfused, compared by ``kiln-run --check``.

Each case is a small kiln function in the form exporters emit (attention as matmul / scale / mask / softmax /
matmul, matmuls followed by elementwise chains). ``kiln-run FILE --random-inputs --check`` compiles it twice: with
the default host pipeline (canonicalize, kiln-fuse-attention, kiln-fuse-epilogue, kiln-outline-kernels, tiling,
online softmax) and with the unfused, untiled reference lowering (``--no-tile``), runs both on the same seeded
random inputs and exits non-zero when a result's max relative error exceeds its tolerance (1e-4 f32, 5e-3 f16,
2e-2 bf16). So these tests check that fusing did not change what the graph computes; test_host_execution.py
checks both pipelines against numpy.

A numerics check is vacuous if the fusion never fired, so every case also runs the fusion passes with
``kiln-opt`` and asserts what they must produce (a kiln.attention and no kiln.softmax, a matmul with an
epilogue and none of the fused ops left, ...).

Shapes are chosen to cross the host tiles (64 rows / keys / columns), so that the online softmax runs over
several key tiles, causal tile skipping and the ragged last tile are exercised, and epilogues see padded tiles.

Seeds are fresh on every run (``KILN_TEST_SEED=<seed>`` replays one) and are in every assertion message. The
binaries come from ``$KILN_BUILD_DIR/bin`` (default /work/main/build); the module is skipped without them.
A known bug would be a strict xfail with its reproducer, so that it fails as soon as the bug is fixed.
"""

import math
import os
import pathlib
import re
import subprocess
import time

import numpy as np
import pytest

BUILD_DIR = pathlib.Path(os.environ.get("KILN_BUILD_DIR", "/work/main/build"))
KILN_RUN = BUILD_DIR / "bin" / "kiln-run"
KILN_OPT = BUILD_DIR / "bin" / "kiln-opt"

if not (KILN_RUN.is_file() and KILN_OPT.is_file()):
    pytest.skip(f"{KILN_RUN} or {KILN_OPT} does not exist (build Kiln or set KILN_BUILD_DIR)",
                allow_module_level=True)

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "attention_block.mlir"
FUSION_PASSES = ["-canonicalize", "-kiln-fuse-attention", "-kiln-fold-head-transposes", "-kiln-fuse-epilogue"]
RESULT_LINE = re.compile(r"result #(\d+) (\S+): max relative error (\S+) vs the reference \((ok|FAILED), limit (\S+)\)")

# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------


def fresh_seed():
    replay = os.environ.get("KILN_TEST_SEED")
    return int(replay) if replay else int(np.random.SeedSequence().entropy % (1 << 63))


def run_command(cmd):
    """Runs a command; if a binary is momentarily missing or unexecutable (being relinked), waits and retries."""
    for attempt in range(4):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except OSError:
            if attempt == 3:
                raise
            time.sleep(20)


def ttype(shape, dtype):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def func_text(args, results, body, name="main"):
    signature = ", ".join(f"%{n}: {t}" for n, t in args)
    lines = "\n".join("  " + line for line in body)
    return f"func.func @{name}({signature}) -> ({', '.join(results)}) {{\n{lines}\n}}\n"


def bool_literal(keep):
    return "[" + ", ".join("[" + ", ".join("true" if v else "false" for v in row) + "]" for row in keep) + "]"


def f32_literal(values):
    """A dense<...> payload for a 2-D float array; -inf is only expressible as a hex blob of the whole tensor."""
    if np.isinf(values).any():
        return '"0x' + np.ascontiguousarray(values, dtype="<f4").tobytes().hex().upper() + '"'
    return "[" + ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in values) + "]"


NEG_INF = {"f32": "0xFF800000", "f16": "0xFC00", "bf16": "0xFF80"}


def check_fused(tmp_path, source, expect, forbid):
    """Runs the fusion passes and asserts that every `expect` string occurs and no `forbid` string does."""
    result = run_command([str(KILN_OPT), str(source), *FUSION_PASSES])
    assert result.returncode == 0, f"kiln-opt failed on {source}:\n{result.stderr}"
    (tmp_path / "fused.mlir").write_text(result.stdout)
    for text in expect:
        assert text in result.stdout, f"the fusion passes did not produce {text!r}:\n{result.stdout}"
    for text in forbid:
        assert text not in result.stdout, f"{text!r} survived the fusion passes:\n{result.stdout}"


def check_numerics(tmp_path, source, family, record_error):
    """`kiln-run --random-inputs --check`: the fused, tiled program against the unfused reference."""
    seed = fresh_seed()
    result = run_command([str(KILN_RUN), str(source), "--random-inputs", "--check", f"--seed={seed}"])
    output = result.stdout + result.stderr
    context = f"(seed {seed}; replay: kiln-run {source} --random-inputs --check --seed={seed})\n{output}"
    assert result.returncode == 0, f"kiln-run --check failed with exit code {result.returncode} {context}"
    results = RESULT_LINE.findall(output)
    assert results, f"kiln-run printed no result comparison {context}"
    for index, type_, error, status, limit in results:
        record_error(family, float(error), float(limit), seed)
        assert status == "ok", f"result #{index} {type_}: relative error {error} > {limit} {context}"


def run_case(case, tmp_path, record_error):
    source = tmp_path / f"{case['id']}.mlir"
    source.write_text(case["mlir"])
    if case["expect"] or case["forbid"]:
        check_fused(tmp_path, source, case["expect"], case["forbid"])
    check_numerics(tmp_path, source, case["family"], record_error)


def case(id, family, mlir, expect=(), forbid=(), marks=()):
    return pytest.param(dict(id=id, family=family, mlir=mlir, expect=list(expect), forbid=list(forbid)), id=id,
                        marks=marks)


# --------------------------------------------------------------------------------------------------------------
# Attention written op by op
# --------------------------------------------------------------------------------------------------------------


def attention(b, hq, hkv, sq, sk, d, dtype="f32", kt="transpose", scale=("div", None), mask=None, causal=None,
              fill="-inf", mask_shape=None):
    """matmul(softmax(causal(mask(scale(q k^T)))), v) in the exporters' form.

    hkv < hq expands k and v by reshape [B, Hkv, 1, S, D] -> broadcast [B, Hkv, G, S, D] -> reshape;
    kt: "transpose" (an explicit kiln.transpose) or "transpose_rhs"; scale: (op, value) with op "div", "mul",
    "mul_lhs" or None, value None for sqrt(d) (div) / 1 / sqrt(d) (mul); mask: "argument" for an additive mask
    argument of `mask_shape`; causal: None, "select" (select(keep, scores, fill)) or "additive" (+ a constant 0 /
    fill pattern), bottom-right aligned; fill: "-inf" or a large negative number."""
    T = lambda shape: ttype(shape, dtype)  # noqa: E731
    Q, KV, S, O = T((b, hq, sq, d)), T((b, hkv, sk, d)), T((b, hq, sq, sk)), T((b, hq, sq, d))
    H = T((b, hq, sk, d))
    scalar = f"tensor<{dtype}>"
    args, lines = [("q", Q), ("k", KV), ("v", KV)], []
    if hq != hkv:
        unsq, expd = T((b, hkv, 1, sk, d)), T((b, hkv, hq // hkv, sk, d))
        for name in "kv":
            lines += [f"%{name}5 = kiln.reshape %{name} : {KV} -> {unsq}",
                      f"%{name}e = kiln.broadcast %{name}5 : {unsq} -> {expd}",
                      f"%{name}r = kiln.reshape %{name}e : {expd} -> {H}"]
        k, v = "%kr", "%vr"
    else:
        k, v = "%k", "%v"
    if kt == "transpose":
        KT = T((b, hq, d, sk))
        lines += [f"%kt = kiln.transpose {k} [0, 1, 3, 2] : {H} -> {KT}",
                  f"%s = kiln.matmul %q, %kt : {Q}, {KT} -> {S}"]
    else:
        lines += [f"%s = kiln.matmul %q, {k} transpose_rhs : {Q}, {H} -> {S}"]
    cur = "%s"
    op, value = scale
    if op == "div":
        lines += [f"%c = kiln.constant dense<{value or math.sqrt(d)!r}> : {scalar}",
                  f"%sc = kiln.div %s, %c : {S}, {scalar} -> {S}"]
        cur = "%sc"
    elif op in ("mul", "mul_lhs"):
        lines += [f"%c = kiln.constant dense<{value or 1.0 / math.sqrt(d)!r}> : {scalar}",
                  f"%sc = kiln.mul %s, %c : {S}, {scalar} -> {S}" if op == "mul"
                  else f"%sc = kiln.mul %c, %s : {scalar}, {S} -> {S}"]
        cur = "%sc"
    if mask == "argument":
        M = T(mask_shape)
        args.append(("m", M))
        lines += [f"%ma = kiln.add {cur}, %m : {S}, {M} -> {S}"]
        cur = "%ma"
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    keep = j <= i + (sk - sq)
    if causal == "select":
        C = ttype((sq, sk), "i1")
        fill_text = NEG_INF[dtype] if fill == "-inf" else repr(float(fill))
        lines += [f"%keep = kiln.constant dense<{bool_literal(keep)}> : {C}",
                  f"%fill = kiln.constant dense<{fill_text}> : {scalar}",
                  f"%cm = kiln.select %keep, {cur}, %fill : {C}, {S}, {scalar} -> {S}"]
        cur = "%cm"
    elif causal == "additive":
        assert dtype == "f32"
        pattern = np.where(keep, 0.0, -np.inf if fill == "-inf" else float(fill)).astype(np.float32)
        A = ttype((sq, sk), dtype)
        lines += [f"%pattern = kiln.constant dense<{f32_literal(pattern)}> : {A}",
                  f"%cm = kiln.add {cur}, %pattern : {S}, {A} -> {S}"]
        cur = "%cm"
    lines += [f"%p = kiln.softmax {cur} axis 3 : {S}",
              f"%o = kiln.matmul %p, {v} : {S}, {H} -> {O}",
              f"return %o : {O}"]
    return func_text(args, [O], lines)


def seq_major_block(b, s, hq, hkv, d, dtype="f32"):
    """Projections' [B, S, H, D] tensors transposed to [B, H, S, D], RoPE on q and k, causal GQA attention, the
    output transposed back, then a residual add and a scale: after kiln-fold-head-transposes the attention reads
    and writes [B, S, H, D] and takes the add and scale as its epilogue."""
    T = lambda shape: ttype(shape, dtype)  # noqa: E731
    Q, KV, QT, KVT, TAB = T((b, s, hq, d)), T((b, s, hkv, d)), T((b, hq, s, d)), T((b, hkv, s, d)), T((s, d // 2))
    return func_text([("q", Q), ("k", KV), ("v", KV), ("cos", TAB), ("sin", TAB), ("res", Q)], [Q], [
        f"%qt = kiln.transpose %q [0, 2, 1, 3] : {Q} -> {QT}",
        f"%kt = kiln.transpose %k [0, 2, 1, 3] : {KV} -> {KVT}",
        f"%vt = kiln.transpose %v [0, 2, 1, 3] : {KV} -> {KVT}",
        f"%qr = kiln.rope %qt, %cos, %sin : {QT}, {TAB}, {TAB}",
        f"%kr = kiln.rope %kt, %cos, %sin : {KVT}, {TAB}, {TAB}",
        f"%o = kiln.attention %qr, %kr, %vt causal : {QT}, {KVT}, {KVT} -> {QT}",
        f"%ot = kiln.transpose %o [0, 2, 1, 3] : {QT} -> {Q}",
        f"%r = kiln.add %ot, %res : {Q}, {Q} -> {Q}",
        f"%c = kiln.constant dense<0.5> : tensor<{dtype}>",
        f"%y = kiln.mul %r, %c : {Q}, tensor<{dtype}> -> {Q}",
        f"return %y : {Q}"])


def output_seq_major_block(b, s, hq, hkv, d, dtype="f32"):
    """Attention of [B, H, S, D] arguments whose output is transposed to [B, S, H, D] and then takes a residual:
    the attention stores [B, S, H, D] itself (out_layout) with the residual as its epilogue."""
    T = lambda shape: ttype(shape, dtype)  # noqa: E731
    QT, KVT, O = T((b, hq, s, d)), T((b, hkv, s, d)), T((b, s, hq, d))
    return func_text([("q", QT), ("k", KVT), ("v", KVT), ("res", O)], [O], [
        f"%o = kiln.attention %q, %k, %v causal : {QT}, {KVT}, {KVT} -> {QT}",
        f"%ot = kiln.transpose %o [0, 2, 1, 3] : {QT} -> {O}",
        f"%y = kiln.add %ot, %res : {O}, {O} -> {O}",
        f"return %y : {O}"])


ATTENTION_FORBID = ["kiln.softmax", "kiln.broadcast", "kiln.select"]
ATTENTION_CASES = [
    case("example_attention_block", "fusion: attention block", EXAMPLE.read_text() if EXAMPLE.is_file() else "",
         expect=["kiln.attention", 'out_layout = "bshd", scale = 1.250000e-01 : f32', "epilogue("],
         forbid=ATTENTION_FORBID,
         marks=pytest.mark.skipif(not EXAMPLE.is_file(), reason=f"{EXAMPLE} is missing")),
    case("gqa4_transpose_div", "fusion: attention f32",
         attention(1, 8, 2, 77, 77, 64),
         expect=["kiln.attention %arg0, %arg1, %arg2 {scale = 1.250000e-01 : f32}"], forbid=ATTENTION_FORBID),
    case("mqa_transpose_rhs_mul_lhs", "fusion: attention f32",
         attention(2, 4, 1, 70, 130, 32, kt="transpose_rhs", scale=("mul_lhs", None)),
         expect=["kiln.attention", "tensor<2x1x130x32xf32>"], forbid=ATTENTION_FORBID),
    case("unscaled_q100_k40", "fusion: attention f32",
         attention(1, 2, 2, 100, 40, 16, scale=(None, None)),
         expect=["{scale = 1.000000e+00 : f32}"], forbid=ATTENTION_FORBID),
    case("gqa2_mask_argument", "fusion: attention f32",
         attention(2, 4, 2, 70, 90, 32, mask="argument", mask_shape=(2, 1, 70, 90)),
         expect=["mask(%arg3 : tensor<2x1x70x90xf32>)"], forbid=ATTENTION_FORBID + ["causal"]),
    case("causal_select_square_s100", "fusion: attention f32",
         attention(1, 4, 4, 100, 100, 32, scale=("mul", None), causal="select"),
         expect=["causal"], forbid=ATTENTION_FORBID),
    case("causal_select_bottom_right_q40_k150_gqa", "fusion: attention f32",
         attention(1, 4, 2, 40, 150, 32, causal="select", fill=-1.0e9),
         expect=["causal"], forbid=ATTENTION_FORBID),
    case("causal_additive_neginf_s90", "fusion: attention f32",
         attention(1, 2, 2, 90, 90, 32, kt="transpose_rhs", causal="additive"),
         expect=["causal"], forbid=ATTENTION_FORBID + ["mask("]),
    case("causal_additive_1e9_q70_k130", "fusion: attention f32",
         attention(1, 4, 1, 70, 130, 16, causal="additive", fill=-1.0e9),
         expect=["causal"], forbid=ATTENTION_FORBID + ["mask("]),
    case("causal_select_and_mask_argument", "fusion: attention f32",
         attention(1, 4, 2, 80, 80, 32, mask="argument", mask_shape=(80, 80), causal="select"),
         expect=["mask(%arg3 : tensor<80x80xf32>) causal"], forbid=ATTENTION_FORBID),
    case("bf16_gqa4_causal_select", "fusion: attention bf16",
         attention(1, 8, 2, 77, 77, 64, dtype="bf16", scale=("mul", None), causal="select"),
         expect=["causal"], forbid=ATTENTION_FORBID),
    case("seq_major_rope_gqa_causal_residual", "fusion: attention f32",
         seq_major_block(2, 77, 4, 2, 32),
         expect=['layout = "bshd"', "seq_dim = 1", "epilogue("], forbid=["kiln.transpose", "kiln.add", "kiln.mul"]),
    case("output_seq_major_gqa_residual", "fusion: attention f32",
         output_seq_major_block(2, 77, 4, 2, 32),
         expect=['out_layout = "bshd"', "epilogue("], forbid=["kiln.transpose", "kiln.add"]),
    case("seq_major_rope_mha_bf16", "fusion: attention bf16",
         seq_major_block(1, 130, 2, 2, 64, dtype="bf16"),
         expect=['layout = "bshd"', "seq_dim = 1", "epilogue("], forbid=["kiln.transpose", "kiln.add", "kiln.mul"]),
]


@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_fusion(case, tmp_path, record_error):
    run_case(case, tmp_path, record_error)


# --------------------------------------------------------------------------------------------------------------
# Matmul epilogues
# --------------------------------------------------------------------------------------------------------------

# x [M, K] (or [2, M, K]) times w [K, N]: every dimension crosses a 64-wide host tile and ends in a ragged one.
M, K, N = 77, 130, 100
X, W, Y, BIAS = ttype((M, K), "f32"), ttype((K, N), "f32"), ttype((M, N), "f32"), ttype((N,), "f32")
YBF = ttype((M, N), "bf16")


def epilogue(body, extra=(), results=(Y,), x=X, w=W, y=Y):
    """%y = x @ w, then `body` (MLIR lines, ending in a return); `extra`: more (name, type) arguments."""
    return func_text([("x", x), ("w", w), *extra], list(results),
                     [f"%y = kiln.matmul %x, %w : {x}, {w} -> {y}", *body])


EPILOGUE_FORBID = ["kiln.add", "kiln.sub", "kiln.mul", "kiln.div", "kiln.gelu", "kiln.silu", "kiln.sigmoid",
                   "kiln.relu", "kiln.cast"]
EPILOGUE_CASES = [
    case("bias_gelu", "fusion: epilogue f32",
         epilogue([f"%b = kiln.add %y, %bias : {Y}, {BIAS} -> {Y}",
                   f"%g = kiln.gelu %b : {Y}", f"return %g : {Y}"], extra=[("bias", BIAS)]),
         expect=["epilogue(%arg2 : tensor<100xf32>)", "math.erf"], forbid=EPILOGUE_FORBID),
    case("scale_gelu_tanh_residual", "fusion: epilogue f32",
         epilogue(["%c = kiln.constant dense<0.37> : tensor<f32>",
                   f"%s = kiln.mul %y, %c : {Y}, tensor<f32> -> {Y}",
                   f"%g = kiln.gelu %s approximate(tanh) : {Y}",
                   f"%r = kiln.add %res, %g : {Y}, {Y} -> {Y}", f"return %r : {Y}"], extra=[("res", Y)]),
         expect=["math.tanh"], forbid=EPILOGUE_FORBID),
    case("sigmoid_relu_silu", "fusion: epilogue f32",
         epilogue([f"%a = kiln.sigmoid %y : {Y}", f"%b = kiln.relu %a : {Y}", f"%c = kiln.silu %b : {Y}",
                   f"return %c : {Y}"]),
         expect=["arith.maximumf", "math.exp"], forbid=EPILOGUE_FORBID),
    case("bias_minus_y_div_const_max_tensor", "fusion: epilogue f32",
         epilogue(["%c = kiln.constant dense<3.0> : tensor<f32>",
                   f"%a = kiln.sub %bias, %y : {BIAS}, {Y} -> {Y}",
                   f"%b = kiln.div %a, %c : {Y}, tensor<f32> -> {Y}",
                   f"%r = kiln.max %t, %b : {Y}, {Y} -> {Y}", f"return %r : {Y}"],
                  extra=[("bias", BIAS), ("t", Y)]),
         expect=["arith.subf", "arith.divf", "arith.maximumf"], forbid=EPILOGUE_FORBID + ["kiln.max"]),
    case("swiglu_down_projection_residual", "fusion: epilogue f32",
         func_text([("x", X), ("w1", W), ("w3", W), ("w2", ttype((N, K), "f32")), ("res", X)], [X], [
             f"%gate = kiln.matmul %x, %w1 : {X}, {W} -> {Y}",
             f"%up = kiln.matmul %x, %w3 : {X}, {W} -> {Y}",
             f"%act = kiln.silu %gate : {Y}",
             f"%h = kiln.mul %act, %up : {Y}, {Y} -> {Y}",
             f"%down = kiln.matmul %h, %w2 : {Y}, {ttype((N, K), 'f32')} -> {X}",
             f"%out = kiln.add %down, %res : {X}, {X} -> {X}",
             f"return %out : {X}"]),
         expect=["epilogue(%0 : tensor<77x100xf32>)", "epilogue(%arg4 : tensor<77x130xf32>)"],
         forbid=EPILOGUE_FORBID),
    case("bias_relu_final_cast_bf16", "fusion: epilogue bf16",
         epilogue([f"%b = kiln.add %y, %bias : {Y}, {BIAS} -> {Y}", f"%a = kiln.relu %b : {Y}",
                   f"%h = kiln.cast %a : {Y} to {YBF}", f"return %h : {YBF}"],
                  extra=[("bias", BIAS)], results=[YBF]),
         expect=[f"-> {YBF}"], forbid=EPILOGUE_FORBID + ["arith.truncf"]),
    case("cast_bf16_in_middle_then_gelu", "fusion: epilogue bf16",
         epilogue([f"%h = kiln.cast %y : {Y} to {YBF}",
                   f"%b = kiln.add %h, %bias : {YBF}, tensor<100xbf16> -> {YBF}",
                   f"%g = kiln.gelu %b : {YBF}", f"return %g : {YBF}"],
                  extra=[("bias", "tensor<100xbf16>")], results=[YBF]),
         expect=["arith.truncf", "arith.extf"], forbid=EPILOGUE_FORBID),
    case("batched_chain_bias_gelu_residual_scale_cast", "fusion: epilogue bf16",
         epilogue([f"%b = kiln.add %y, %bias : {ttype((2, M, N), 'f32')}, {BIAS} -> {ttype((2, M, N), 'f32')}",
                   f"%g = kiln.gelu %b : {ttype((2, M, N), 'f32')}",
                   f"%r = kiln.add %g, %res : {ttype((2, M, N), 'f32')}, {ttype((1, M, N), 'f32')} -> "
                   f"{ttype((2, M, N), 'f32')}",
                   "%c = kiln.constant dense<0.5> : tensor<f32>",
                   f"%s = kiln.mul %r, %c : {ttype((2, M, N), 'f32')}, tensor<f32> -> {ttype((2, M, N), 'f32')}",
                   f"%h = kiln.cast %s : {ttype((2, M, N), 'f32')} to {ttype((2, M, N), 'bf16')}",
                   f"return %h : {ttype((2, M, N), 'bf16')}"],
                  extra=[("bias", BIAS), ("res", ttype((1, M, N), "f32"))], results=[ttype((2, M, N), "bf16")],
                  x=ttype((2, M, K), "f32"), y=ttype((2, M, N), "f32")),
         expect=["math.erf"], forbid=EPILOGUE_FORBID),
    case("bf16_bias_silu_residual", "fusion: epilogue bf16",
         epilogue([f"%b = kiln.add %y, %bias : {YBF}, tensor<100xbf16> -> {YBF}", f"%s = kiln.silu %b : {YBF}",
                   f"%r = kiln.add %s, %res : {YBF}, {YBF} -> {YBF}", f"return %r : {YBF}"],
                  extra=[("bias", "tensor<100xbf16>"), ("res", YBF)], results=[YBF],
                  x=ttype((M, K), "bf16"), w=ttype((K, N), "bf16"), y=YBF),
         expect=["epilogue("], forbid=EPILOGUE_FORBID),
    # A chain reading a tensor that an existing epilogue already reads.
    case("existing_epilogue_operand_reused", "fusion: epilogue f32",
         func_text([("x", X), ("w", W), ("bias", BIAS)], [Y], [
             f"%y = kiln.matmul %x, %w epilogue(%bias : {BIAS}) {{",
             "^bb0(%acc: f32, %b: f32):",
             "  %s = arith.addf %acc, %b : f32",
             "  kiln.yield %s : f32",
             f"}} : {X}, {W} -> {Y}",
             f"%z = kiln.mul %y, %bias : {Y}, {BIAS} -> {Y}",
             f"return %z : {Y}"])),
]


def attention_epilogue(body, extra=(), out="f32", causal=True):
    """attention(q, k, v) [causal] with GQA 2:1, then `body` on its output %o (MLIR lines, ending in a return)."""
    Q, KV, O = ttype((1, 4, 77, 32), "f32"), ttype((1, 2, 90, 32), "f32"), ttype((1, 4, 77, 32), "f32")
    return func_text([("q", Q), ("k", KV), ("v", KV), *extra], [ttype((1, 4, 77, 32), out)],
                     [f"%o = kiln.attention %q, %k, %v {'causal ' if causal else ''}: {Q}, {KV}, {KV} -> {O}",
                      *body])


ATTENTION_OUT = ttype((1, 4, 77, 32), "f32")
EPILOGUE_CASES += [
    case("attention_gate_silu_cast_bf16", "fusion: attention epilogue",
         attention_epilogue([f"%m = kiln.mul %o, %g : {ATTENTION_OUT}, tensor<32xf32> -> {ATTENTION_OUT}",
                             f"%s = kiln.silu %m : {ATTENTION_OUT}",
                             f"%c = kiln.cast %s : {ATTENTION_OUT} to {ttype((1, 4, 77, 32), 'bf16')}",
                             f"return %c : {ttype((1, 4, 77, 32), 'bf16')}"],
                            extra=[("g", "tensor<32xf32>")], out="bf16"),
         expect=["causal epilogue(%arg3 : tensor<32xf32>)"], forbid=EPILOGUE_FORBID),
    case("attention_residual_scale", "fusion: attention epilogue",
         attention_epilogue(["%c = kiln.constant dense<0.5> : tensor<f32>",
                             f"%s = kiln.mul %o, %c : {ATTENTION_OUT}, tensor<f32> -> {ATTENTION_OUT}",
                             f"%r = kiln.add %s, %res : {ATTENTION_OUT}, {ATTENTION_OUT} -> {ATTENTION_OUT}",
                             f"return %r : {ATTENTION_OUT}"],
                            extra=[("res", ATTENTION_OUT)], causal=False),
         expect=["epilogue(%arg3 : tensor<1x4x77x32xf32>)", "arith.constant 5.000000e-01"], forbid=EPILOGUE_FORBID),
]


@pytest.mark.parametrize("case", EPILOGUE_CASES)
def test_epilogue_fusion(case, tmp_path, record_error):
    run_case(case, tmp_path, record_error)


# --------------------------------------------------------------------------------------------------------------
# kiln-fuse-attention on masks that only look causal, and on matmuls that already carry epilogues
# --------------------------------------------------------------------------------------------------------------

ROW_PATTERN_CASES = [
    case("zero_padding_mask_1x1x1xSk_is_not_causal", "fusion: attention f32",
         func_text([("q", ttype((1, 2, 70, 16), "f32")), ("k", ttype((1, 2, 90, 16), "f32")),
                    ("v", ttype((1, 2, 90, 16), "f32"))], [ttype((1, 2, 70, 16), "f32")], [
             f"%s = kiln.matmul %q, %k transpose_rhs : {ttype((1, 2, 70, 16), 'f32')}, "
             f"{ttype((1, 2, 90, 16), 'f32')} -> {ttype((1, 2, 70, 90), 'f32')}",
             f"%m = kiln.constant dense<0.0> : {ttype((1, 1, 1, 90), 'f32')}",
             f"%a = kiln.add %s, %m : {ttype((1, 2, 70, 90), 'f32')}, {ttype((1, 1, 1, 90), 'f32')} -> "
             f"{ttype((1, 2, 70, 90), 'f32')}",
             f"%p = kiln.softmax %a axis 3 : {ttype((1, 2, 70, 90), 'f32')}",
             f"%o = kiln.matmul %p, %v : {ttype((1, 2, 70, 90), 'f32')}, {ttype((1, 2, 90, 16), 'f32')} -> "
             f"{ttype((1, 2, 70, 16), 'f32')}",
             f"return %o : {ttype((1, 2, 70, 16), 'f32')}"])),
    case("all_true_1xSk_select_is_not_causal", "fusion: attention f32",
         func_text([("q", ttype((1, 2, 70, 16), "f32")), ("k", ttype((1, 2, 90, 16), "f32")),
                    ("v", ttype((1, 2, 90, 16), "f32"))], [ttype((1, 2, 70, 16), "f32")], [
             f"%s = kiln.matmul %q, %k transpose_rhs : {ttype((1, 2, 70, 16), 'f32')}, "
             f"{ttype((1, 2, 90, 16), 'f32')} -> {ttype((1, 2, 70, 90), 'f32')}",
             f"%keep = kiln.constant dense<true> : {ttype((1, 90), 'i1')}",
             "%fill = kiln.constant dense<0xFF800000> : tensor<f32>",
             f"%a = kiln.select %keep, %s, %fill : {ttype((1, 90), 'i1')}, {ttype((1, 2, 70, 90), 'f32')}, "
             f"tensor<f32> -> {ttype((1, 2, 70, 90), 'f32')}",
             f"%p = kiln.softmax %a axis 3 : {ttype((1, 2, 70, 90), 'f32')}",
             f"%o = kiln.matmul %p, %v : {ttype((1, 2, 70, 90), 'f32')}, {ttype((1, 2, 90, 16), 'f32')} -> "
             f"{ttype((1, 2, 70, 16), 'f32')}",
             f"return %o : {ttype((1, 2, 70, 16), 'f32')}"])),
]

EXISTING_EPILOGUE_CASES = [
    case("pv_matmul_with_epilogue", "fusion: attention f32",
         func_text([("q", ttype((1, 2, 70, 16), "f32")), ("k", ttype((1, 2, 70, 16), "f32")),
                    ("v", ttype((1, 2, 70, 16), "f32"))], [ttype((1, 2, 70, 16), "f32")], [
             f"%s = kiln.matmul %q, %k transpose_rhs : {ttype((1, 2, 70, 16), 'f32')}, "
             f"{ttype((1, 2, 70, 16), 'f32')} -> {ttype((1, 2, 70, 70), 'f32')}",
             f"%p = kiln.softmax %s axis 3 : {ttype((1, 2, 70, 70), 'f32')}",
             "%o = kiln.matmul %p, %v epilogue() {",
             "^bb0(%acc: f32):",
             "  %c = arith.constant 3.0 : f32",
             "  %m = arith.mulf %acc, %c : f32",
             "  kiln.yield %m : f32",
             f"}} : {ttype((1, 2, 70, 70), 'f32')}, {ttype((1, 2, 70, 16), 'f32')} -> {ttype((1, 2, 70, 16), 'f32')}",
             f"return %o : {ttype((1, 2, 70, 16), 'f32')}"])),
]


@pytest.mark.parametrize("case", ROW_PATTERN_CASES + EXISTING_EPILOGUE_CASES)
def test_attention_fusion_edge_cases(case, tmp_path, record_error):
    run_case(case, tmp_path, record_error)
