"""torch.ops.kiln.* on CPU tensors (the host backend): the f32 precision the ops take.

Why: on f32 tensors the ops multiply as torch's own matmul setting says unless told otherwise, as the
torch.compile backend does (test_torch_backend.py); the GPU suite (test/GPU/python/test_torch_ops.py) checks the
numerics on CUDA tensors, where TF32 and 3xTF32 differ.
"""

import pytest

torch = pytest.importorskip("torch")

from numerics import kiln  # noqa: E402,F401  (the package from the build)
import kiln.torch_ops  # noqa: E402  (registers torch.ops.kiln.*)


@pytest.mark.parametrize("setting, expected", [("highest", "ieee"), ("high", "tf32")])
def test_f32_ops_follow_torch_unless_told(setting, expected):
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        f32, bf16 = torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bfloat16)
        assert kiln.torch_ops._precision(None, f32) == expected
        assert kiln.torch_ops._precision("tf32", f32) == "tf32" and kiln.torch_ops._precision(None, bf16) is None
    finally:
        torch.backends.fp32_precision = "none"
        torch.set_float32_matmul_precision(previous)


@pytest.mark.parametrize("fp32_precision", [None, "ieee", "tf32"])
def test_f32_attention_and_matmul_on_the_host(fp32_precision):
    """The host multiplies f32 in f32 whatever the precision asked of a GPU."""
    generator = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(shape, generator=generator) for shape in ((1, 4, 9, 16), (1, 2, 11, 16), (1, 2, 11, 16)))
    reference = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(2, 1),
                                                                 v.repeat_interleave(2, 1))
    out = torch.ops.kiln.attention(q, k, v, fp32_precision=fp32_precision)
    assert (out - reference).abs().max().item() < 1e-5
    a, b = torch.randn(5, 7, generator=generator), torch.randn(7, 3, generator=generator)
    assert (torch.ops.kiln.matmul(a, b, fp32_precision=fp32_precision) - a @ b).abs().max().item() < 1e-5


@pytest.mark.parametrize("dtype, precision, message", [
    (torch.float32, "fp64", "attention: fp32_precision must be 'tf32' or 'ieee', got 'fp64'"),
    (torch.float16, "ieee", "attention: fp32_precision applies to f32 operands, got f16"),
])
def test_bad_precision_is_refused(dtype, precision, message):
    q = torch.zeros(1, 2, 3, 8, dtype=dtype)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        torch.ops.kiln.attention(q, q, q, fp32_precision=precision)
