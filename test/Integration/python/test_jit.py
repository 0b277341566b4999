"""@kiln.jit on the host target: traced Python functions against float64 numpy references.

Fresh seeds every run, shapes that do not divide the host tiles, f32 with tolerance 1e-4 relative (max norm).
Also checks that a traced attention written op by op is fused into one kiln.attention, that the program is
reused per signature and rebuilt for a new one, and that misuse raises an exception naming the argument.
"""

import math

import numpy as np
import pytest

from numerics import check, fresh_rng, kiln



@kiln.jit
def mlp(x, w1, b1, w2, b2, w3):
    h = kiln.matmul(x, w1, bias=b1, activation="gelu_tanh")
    h = kiln.silu(kiln.matmul(h, w2) + b2)
    return kiln.matmul(h, w3) * 0.5 + 1.0


def test_three_matmul_mlp(record_error):
    rng, seed = fresh_rng()
    m, d, h = 45, 70, 133
    x = rng.standard_normal((m, d)).astype(np.float32)
    w1, w2, w3 = (rng.standard_normal(s).astype(np.float32) / math.sqrt(s[0]) for s in [(d, h), (h, h), (h, d)])
    b1, b2 = rng.standard_normal(h).astype(np.float32), rng.standard_normal(h).astype(np.float32)
    x64 = x.astype(np.float64)
    z = x64 @ w1 + b1
    z = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    z = z @ w2 + b2
    z = z / (1 + np.exp(-z))
    check(record_error, "jit: 3-matmul mlp f32", mlp(x, w1, b1, w2, b2, w3), (z @ w3) * 0.5 + 1.0, seed)
    fused = kiln.compile(mlp.source(x, w1, b1, w2, b2, w3)).ir("fused")
    assert fused.count("epilogue(") == 3 and "kiln.silu" not in fused


@kiln.jit
def attention_by_hand(q, k, v, scale):
    s = kiln.matmul(q, kiln.transpose(k, [0, 1, 3, 2])) * scale
    return kiln.matmul(kiln.softmax(s, axis=3), v)


def test_attention_written_op_by_op_fuses_and_runs(record_error):
    rng, seed = fresh_rng()
    q, k, v = (rng.standard_normal((2, 3, 37, 24)).astype(np.float32) for _ in range(3))
    scale = 1 / math.sqrt(24)
    out = attention_by_hand(q, k, v, scale)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    check(record_error, "jit: attention by hand f32", out, (p / p.sum(-1, keepdims=True)) @ v, seed)
    fused = kiln.compile(attention_by_hand.source(q, k, v, scale)).ir("fused")
    assert "kiln.attention" in fused and "kiln.softmax" not in fused


@kiln.jit
def two_results(x, w):
    y = x @ w
    return kiln.relu(y), -y


def test_several_results_and_operators(record_error):
    rng, seed = fresh_rng()
    x, w = rng.standard_normal((9, 17)).astype(np.float32), rng.standard_normal((17, 5)).astype(np.float32)
    relu, neg = two_results(x, w)
    y = x.astype(np.float64) @ w
    check(record_error, "jit: operators f32", relu, np.maximum(y, 0), seed)
    check(record_error, "jit: operators f32", neg, -y, seed)


@kiln.jit
def scaled_norm(x, weight, eps, flip):
    y = kiln.rms_norm(x, weight, eps)
    return 2.0 - y if flip else y / 4


def test_programs_are_kept_per_signature():
    scaled_norm.programs.clear()
    x, w = np.ones((3, 8), np.float32), np.ones(8, np.float32)
    scaled_norm(x, w, 1e-5, False)
    scaled_norm(x * 3, w, 1e-5, False)
    assert len(scaled_norm.programs) == 1
    scaled_norm(x, w, 1e-5, True)  # a constant argument is part of the signature
    scaled_norm(np.ones((4, 8), np.float32), w, 1e-5, False)  # so is a shape
    assert len(scaled_norm.programs) == 3
    assert np.allclose(scaled_norm(x, w, 1e-5, True), 2.0 - 1.0 / math.sqrt(1 + 1e-5), atol=1e-6)


@kiln.jit
def reciprocal_of_scaled(x, s):
    return 1.0 / (x * s)


def test_signed_zero_constants_get_their_own_programs():
    """0.0 == -0.0, but they are different constants: s = -0.0 must give -inf after a call with 0.0 (one shared
    program once returned +inf for both), on the full path and on the cached one alike."""
    x = np.ones(3, np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(reciprocal_of_scaled(x, 0.0), np.full(3, np.inf, np.float32))
        np.testing.assert_array_equal(reciprocal_of_scaled(x, -0.0), np.full(3, -np.inf, np.float32))


def test_masked_array_is_refused_on_every_path():
    """A masked array's mask would be ignored: refused by name, also after a plain array of its type and shape
    filled the cache."""
    x = np.ones((2, 3), np.float32)
    masked = np.ma.masked_array(x, mask=[[False, True, False], [False, False, False]])
    two_results(x, np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match="'x' is a numpy masked array"):
        two_results(masked, np.ones((3, 2), np.float32))


@kiln.jit
def comparisons(x, y, ids, keep):
    """Every comparison on floats (NaN included) and integers, the logical ops, an integer select, both
    remainders, and a padding mask built at run time from the ids."""
    padded = kiln.equal(ids, 0)
    scores = kiln.where(padded, -math.inf, x)
    return (x < y, x <= 0.5, x > y, x >= y, kiln.equal(x, y), kiln.not_equal(x, y), ids > 3,
            kiln.logical_and(keep, x < y), kiln.logical_or(keep, padded), kiln.logical_not(keep),
            kiln.where(keep, ids, -1), kiln.fmod(x, y), x % y, scores)


def test_comparisons_logic_and_remainders():
    """Exact against numpy: comparisons are ordered (a NaN is unequal to everything, itself included), the
    remainders take the dividend's (fmod) or the divisor's (%) sign, the select keeps integers as they are."""
    rng, seed = fresh_rng()
    shape = (5, 37)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    y = (rng.standard_normal(shape[-1:]) * 3).astype(np.float32)
    x[0, :3] = np.nan
    x[1, :4] = np.broadcast_to(y[:4], (4,))  # ties
    x[2, :5] = 3 * y[:5]  # whole multiples: a zero remainder
    ids = rng.integers(0, 8, shape).astype(np.int64)
    keep = rng.random(shape) < 0.5
    padded = ids == 0
    expected = (x < y, x <= 0.5, x > y, x >= y, x == y, x != y, ids > 3, keep & (x < y), keep | padded, ~keep,
                np.where(keep, ids, -1), np.fmod(x, y), np.mod(x, y), np.where(padded, -np.inf, x))
    results = comparisons(x, y, ids, keep)
    assert len(results) == len(expected)
    for index, (actual, reference) in enumerate(zip(results, expected)):
        assert actual.dtype == reference.dtype, (index, actual.dtype, reference.dtype)
        if reference.dtype.kind == "f":  # the remainders: exact in f32 like numpy's, NaN where x is NaN
            np.testing.assert_allclose(actual, reference, rtol=1e-6, atol=1e-6, err_msg=f"result {index} seed {seed}")
            zero = reference == 0  # the sign of a zero remainder: the dividend's (fmod), the divisor's (%)
            np.testing.assert_array_equal(np.signbit(actual[zero]), np.signbit(reference[zero]),
                                          err_msg=f"result {index} seed {seed}")
        else:
            np.testing.assert_array_equal(actual, reference, err_msg=f"result {index} seed {seed}")


@kiln.jit
def integer_arithmetic(a, b, e):
    """Every arithmetic op on integers, with a number as one operand."""
    return (a + b, a - b, a * b, a // b, kiln.trunc_divide(a, b), a % b, kiln.fmod(a, b), kiln.maximum(a, b),
            kiln.minimum(a, b), kiln.power(a, e), 7 - a, kiln.cast(a, "f32"), -a, kiln.trace.absolute(a))


def _wrapped(values, dtype):
    """Python integers wrapped into ``dtype`` (two's complement)."""
    bits = np.iinfo(dtype).bits
    return np.array([((int(v) + 2 ** (bits - 1)) % 2 ** bits) - 2 ** (bits - 1) for v in values.reshape(-1)],
                    dtype=dtype).reshape(values.shape)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_arithmetic_is_exact(dtype):
    """Exact against numpy's integer arithmetic, wrapping on overflow (-INT_MIN and |INT_MIN| are INT_MIN): //
    and % floored, trunc_divide and fmod truncated; the divisors 0 (numpy's 0) and -1 under the type's minimum
    (the wrapped negation; both trap in C); powers by squaring, a negative exponent giving 1 / a^-e truncated."""
    rng, seed = fresh_rng()
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 29), dtype=dtype, endpoint=True)
    a[0, :8] = [info.min, info.max, -1, 0, 1, -7, 7, info.min]
    b = rng.integers(-9, 10, (29,), dtype=dtype)
    b[:8] = [-1, -1, 0, 0, 0, 2, -2, 0]
    e = rng.integers(-3, 70, (3, 29), dtype=dtype)
    e[1, :4] = [-1, -2, 63, 0]
    a[1, :4] = [-1, -1, -1, 5]
    b[8:11] = [-2, 3, info.min]  # where a - a % b would wrap
    a[2, 8:11] = [info.max, info.min, 2]
    zero = b == 0
    safe = np.where(zero, 1, b)
    with np.errstate(all="ignore"):
        # In Python integers (np.abs of the minimum wraps), then wrapped back into the type.
        exact = np.vectorize(lambda x, y: (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1), otypes=[object])
        truncated = np.where(zero, 0, _wrapped(exact(a.astype(object), safe.astype(object)), dtype))
        floored = np.where(zero, 0, np.where(b == -1, -a, a // safe))
        powers = np.ones_like(a)
        for _ in range(int(e.max())):  # repeated multiplication wraps as squaring does
            powers = np.where(np.arange(int(e.max()))[_] < e, powers * a, powers)
        inverse = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 1, -1, 1), 0)).astype(dtype)
        expected = (a + b, a - b, a * b, floored, truncated.astype(dtype), np.where(zero, 0, np.mod(a, safe)),
                    np.where(zero, 0, np.fmod(a, safe)), np.maximum(a, b), np.minimum(a, b),
                    np.where(e < 0, inverse, powers), 7 - a, a.astype(np.float32), -a, np.abs(a))
    results = integer_arithmetic(a, b, e)
    assert len(results) == len(expected)
    for index, (actual, reference) in enumerate(zip(results, expected)):
        assert actual.dtype == reference.dtype, (index, actual.dtype, reference.dtype)
        np.testing.assert_array_equal(actual, reference, err_msg=f"result {index} seed {seed}")


def test_float_floor_and_trunc_division_follow_python():
    """floor_divide on floats is Python's (and torch's) //: 1 // 0.1 is 9, not floor(1 / 0.1) = 10; a zero quotient
    has the sign of a / b; a zero divisor gives a / b. trunc_divide rounds the quotient toward zero."""
    x = np.array([1.0, -1.0, 7.5, -7.5, 5.0, 0.3, -0.0, 3.0, -1.0, -0.0, 1.0], np.float32)
    y = np.array([0.1, 0.1, 2.0, 2.0, 0.0, -0.1, 2.0, -1.5, -4.0, 2.0, 4.0], np.float32)
    floored, truncated = kiln.jit(lambda x, y: (x // y, kiln.trunc_divide(x, y)))(x, y)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(floored, np.floor_divide(x, y))
        np.testing.assert_array_equal(np.signbit(floored), np.signbit(np.floor_divide(x, y)))  # zeros' signs
        np.testing.assert_array_equal(truncated, np.trunc(x / y))


def _chain(x, y, ids):
    """bf16 arithmetic with a broadcast column, an activation, a residual, an integer slot and a select on it,
    a cast: one chain of elementwise ops."""
    gate = kiln.sigmoid(x * y) + x
    slot = ids % 5
    chosen = kiln.where(slot < 2, gate, -gate)
    return kiln.cast(chosen, "f16")


#: The chain op by op: each step its own program (a lone op is not fused), results carried between them.
_STEPS = [lambda x, y: x * y, kiln.sigmoid, lambda s, x: s + x, lambda ids: ids % 5, lambda slot: slot < 2,
          lambda gate: -gate, kiln.where, lambda chosen: kiln.cast(chosen, "f16")]


def test_a_fused_chain_computes_the_bits_of_its_ops():
    """kiln-fuse-elementwise makes the chain one kiln.elementwise (one kernel), and rounds each intermediate to
    the bf16 the unfused ops store: the fused result equals, bit for bit, the same ops run one program each."""
    rng, seed = fresh_rng()
    shape = (3, 37, 45)
    import ml_dtypes
    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal((37, 1)).astype(ml_dtypes.bfloat16)
    ids = rng.integers(-50, 50, shape).astype(np.int64)
    fused = kiln.jit(_chain)
    assert kiln.compile(fused.source(x, y, ids)).ir("fused").count("kiln.elementwise") == 1
    mul, sigmoid, add, mod, less, neg, where, cast = (kiln.jit(step) for step in _STEPS)
    gate = add(sigmoid(mul(x, y)), x)
    expected = cast(where(less(mod(ids)), gate, neg(gate)))
    actual = fused(x, y, ids)
    assert actual.dtype == np.float16
    np.testing.assert_array_equal(actual.view(np.uint16), expected.view(np.uint16), err_msg=f"seed {seed}")


@pytest.mark.parametrize("source", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("target", ["i32", "i64"])
def test_float_to_integer_casts_saturate(source, target):
    """Float to integer truncates toward zero and saturates, on every target (as the GPU's cvt.rzi): NaN gives
    0, values past the range (infinities too) the type's ends; a fused chain casts the same."""
    import ml_dtypes
    dtype = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[source]
    info = np.iinfo({"i32": np.int32, "i64": np.int64}[target])
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.75, -2.75, 0.0, 65504.0, -65504.0], np.float32)
    with np.errstate(over="ignore"):  # 3e9 and 1e19 are infinities in f16
        x = np.concatenate([x, np.array([1e19, -1e19], np.float32)]).astype(dtype)
    wide = x.astype(np.float64)
    expected = np.where(np.isnan(wide), 0, np.clip(np.trunc(np.nan_to_num(wide, posinf=1e300, neginf=-1e300)),
                                                    float(info.min), float(info.max)))
    expected = np.array([info.max if v >= 2.0 ** (info.bits - 1) else int(v) for v in expected], info.dtype)
    alone, chained = kiln.jit(lambda x: (kiln.cast(x, target), kiln.cast(x + 0.0, target)))(x)
    np.testing.assert_array_equal(alone, expected)
    np.testing.assert_array_equal(chained, expected)


def test_a_written_integer_division_in_an_elementwise_body_is_guarded():
    """A kiln.elementwise body written by hand with arith.divsi and arith.remsi: a zero divisor gives 0 and INT_MIN
    / -1 the wrapped negation, as kiln.div's, where the raw instructions would trap (SIGFPE) on the host."""
    source = """
func.func @divide(%a: tensor<6xi32>, %b: tensor<6xi32>) -> tensor<6xi32> {
  %q = kiln.elementwise %a, %b : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32> {
  ^bb0(%x: i32, %y: i32):
    %d = arith.divsi %x, %y : i32
    %r = arith.remsi %x, %y : i32
    %s = arith.addi %d, %r : i32
    kiln.yield %s : i32
  }
  return %q : tensor<6xi32>
}
"""
    a = np.array([7, -7, 5, -2**31, 9, -9], np.int32)
    b = np.array([2, 2, 0, -1, -1, 4], np.int32)
    expected = np.array([3 + 1, -3 - 1, 0, -2**31, -9, -2 - 1], np.int32)
    np.testing.assert_array_equal(kiln.compile(source)(a, b), expected)


@kiln.jit
def returns_a_number(x):
    return 3


@kiln.jit
def bad_broadcast(x, y):
    return x + y


BAD_CALLS = [
    ("op outside jit", lambda: kiln.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)),
     RuntimeError, "inside a @kiln.jit function"),
    ("missing argument", lambda: mlp(np.ones((2, 2), np.float32)), TypeError, "mlp: missing a required argument"),
    ("float64 argument", lambda: two_results(np.ones((2, 3)), np.ones((3, 2), np.float32)),
     TypeError, "'x' has dtype float64"),
    ("list argument", lambda: two_results([[1.0]], np.ones((1, 1), np.float32)),
     TypeError, "'x' must be a numpy array, a torch CUDA tensor or a constant"),
    ("non-tensor result", lambda: returns_a_number(np.ones(2, np.float32)), TypeError, "must return a tensor"),
    ("shapes do not broadcast", lambda: bad_broadcast(np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)),
     ValueError, "add: shapes (2, 3) and (4, 3) do not broadcast"),
    ("mixed dtypes", lambda: bad_broadcast(np.ones(3, np.float32), np.ones(3, np.float16)),
     TypeError, "'rhs' has dtype float16 but 'lhs' has float32"),
    ("bad permutation", lambda: kiln.jit(lambda x: kiln.transpose(x, [0, 0]))(np.ones((2, 2), np.float32)),
     ValueError, "is not a permutation"),
    ("bad reshape", lambda: kiln.jit(lambda x: kiln.reshape(x, (3, 3)))(np.ones((2, 2), np.float32)),
     ValueError, "cannot become (3, 3)"),
    ("compare mixed dtypes", lambda: kiln.jit(lambda x, i: x < i)(np.ones(2, np.float32), np.ones(2, np.int64)),
     TypeError, "compare: 'rhs' has dtype int64 but the other operand has float32"),
    ("non-integer against integers", lambda: kiln.jit(lambda i: i < 0.5)(np.ones(2, np.int64)),
     TypeError, "0.5 is not a value of the i64 tensor it meets"),
    ("bool against 2", lambda: kiln.jit(lambda b: kiln.equal(b, 2))(np.ones(2, bool)),
     TypeError, "2 is not a value of the i1 tensor it meets"),
    ("i32 against 2**40", lambda: kiln.jit(lambda i: i < 2**40)(np.ones(2, np.int32)),
     TypeError, "1099511627776 is not a value of the i32 tensor it meets"),
    ("comparison as a condition", lambda: kiln.jit(lambda x: x * 2.0 if x > 1.0 else x)(np.ones(2, np.float32)),
     TypeError, "has no truth value while tracing"),
    ("max of tensors", lambda: kiln.jit(lambda x, y: max(x, y))(np.ones(2, np.float32), np.ones(2, np.float32)),
     TypeError, "has no truth value while tracing"),
    ("logical op on floats", lambda: kiln.jit(lambda x: kiln.logical_not(x))(np.ones(2, np.float32)),
     TypeError, "logical_not: 'x' must be a bool tensor"),
    ("true division of integers", lambda: kiln.jit(lambda i: i / 3)(np.ones(2, np.int64)),
     TypeError, "div: '/' of int64 tensors is true division"),
    ("integer with a fraction", lambda: kiln.jit(lambda i: i * 0.5)(np.ones(2, np.int32)),
     TypeError, "0.5 is not a value of the i32 tensor it meets"),
    ("arithmetic on bools", lambda: kiln.jit(lambda b: b + b)(np.ones(2, np.bool_)),
     TypeError, "add: arithmetic on bool tensors; kiln computes it on floats and int32/int64"),
    ("integers of two widths", lambda: kiln.jit(lambda i, j: i + j)(np.ones(2, np.int32), np.ones(2, np.int64)),
     TypeError, "'rhs' has dtype int64 but the other operand has int32"),
    ("bad gelu mode", lambda: kiln.jit(lambda x: kiln.gelu(x, "fast"))(np.ones(2, np.float32)),
     ValueError, "approximate must be 'none' or 'tanh'"),
]


@pytest.mark.parametrize("description,call,error,text", BAD_CALLS, ids=[case[0] for case in BAD_CALLS])
def test_misuse_raises(description, call, error, text):
    with pytest.raises(error) as raised:
        call()
    assert text in str(raised.value), str(raised.value)


def test_array_default_argument_calls_twice():
    """An array argument left at its default is not in the call: the cached fast path must not expect it."""
    weight = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)

    @kiln.jit
    def project(x, w=weight):
        return kiln.matmul(x, w)

    x = np.ones((3, 4), np.float32)
    first, second = project(x), project(x)
    np.testing.assert_allclose(first, x @ weight, rtol=1e-6)
    np.testing.assert_array_equal(first, second)
