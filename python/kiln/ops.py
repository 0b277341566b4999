"""Ready-made kernels on numpy arrays: kiln.ops.matmul, attention, softmax, rms_norm, layer_norm, rope.

Each is a one-op ``@kiln.jit`` function over the traced op of the same name (kiln/trace.py), so the argument
checks are those of the tracer and a repeated signature goes straight to the run. matmul's bias and activation
become separate ops that the fusion pass folds into the matmul's epilogue.
"""

from . import trace
from .jit import jit


@jit
def matmul(a, b, *, bias=None, activation=None, fp32_precision=None):
    """``activation(a @ b + bias)`` with numpy batch broadcasting; a: [..., M, K], b: [..., K, N], bias: [N].
    f32 operands multiply on a GPU's TF32 tensor cores unless ``fp32_precision="ieee"`` (f32 accuracy)."""
    return trace.matmul(a, b, bias=bias, activation=activation, fp32_precision=fp32_precision)


@jit
def attention(q, k, v, *, causal=False, scale=None, mask=None):
    """Scaled dot-product attention on [B, H, S, D] (GQA/MQA from the head counts, causal bottom-right)."""
    return trace.attention(q, k, v, causal=causal, scale=scale, mask=mask)


@jit
def softmax(x, axis=-1):
    """Softmax of ``x`` along ``axis``."""
    return trace.softmax(x, axis)


@jit
def rms_norm(x, weight, eps=1e-6):
    """RMS normalisation over the last dimension, times ``weight``."""
    return trace.rms_norm(x, weight, eps)


@jit
def layer_norm(x, weight, bias=None, eps=1e-5):
    """Layer normalisation over the last dimension, times ``weight``, plus ``bias`` when given."""
    return trace.layer_norm(x, weight, bias, eps)


@jit
def rope(x, cos, sin, *, interleaved=False):
    """Rotary embedding of ``x`` [..., S, D] by ``cos``, ``sin`` [S, D/2]."""
    return trace.rope(x, cos, sin, interleaved=interleaved)
