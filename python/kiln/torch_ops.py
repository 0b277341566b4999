"""torch.ops.kiln.*: Kiln's ready-made kernels as torch custom ops, traceable by torch.compile and torch.export.

Why: ``kiln.ops`` functions are opaque Python to torch's tracers: a ``torch.compile(fullgraph=True)`` function
or a ``torch.export`` program that calls them breaks its graph there. Registered through ``torch.library``
(importing this module registers them; it needs torch), each op has a fake (meta) kernel that gives its
result's shape and dtype without running it, so the tracers keep it in the graph as one node and the compiled
code calls Kiln's kernel at run time. On CUDA tensors the op runs Kiln's GPU kernel (``kiln.ops``, compiled for
the device's chip and cached); on CPU tensors it runs the host backend on the tensors' numpy views.

    import kiln.torch_ops
    torch.ops.kiln.attention(q, k, v, causal=True)
    torch.compile(lambda q, k, v: torch.ops.kiln.attention(q, k, v) * 2, fullgraph=True)(q, k, v)
"""

from typing import Optional

import torch

from . import ops
from .aten_converters import torch_fp32_precision

__all__ = ["matmul", "attention", "softmax", "rms_norm", "layer_norm", "rope"]


def _host(value):
    """A CPU tensor as the numpy array the host backend takes (bf16 through ml_dtypes), None as None."""
    if value is None:
        return None
    if value.dtype == torch.bfloat16:
        import ml_dtypes
        return value.detach().contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return value.detach().contiguous().numpy()


def _torch(array, like):
    """A host result back as a tensor of ``like``'s device."""
    import numpy as np
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16).to(like.device)
    return torch.from_numpy(np.ascontiguousarray(array)).to(like.device)


def _run(kernel, tensors, **attributes):
    """``kernel`` (a kiln.ops function) on ``tensors``: Kiln's GPU kernel for CUDA tensors, the host backend for
    CPU ones. Custom ops may not return an input itself, so a result that is one comes back cloned."""
    first = tensors[0]
    if first.is_cuda:
        out = kernel(*tensors, **attributes)
    else:
        out = _torch(kernel(*[_host(t) for t in tensors], **{k: _host(v) if isinstance(v, torch.Tensor) else v
                                                            for k, v in attributes.items()}), first)
    return out.clone() if any(out is t for t in tensors) else out


def _precision(fp32_precision, tensor):
    """An f32 op's precision: the one asked for, else torch's own for f32 matmuls (f32 accuracy unless TF32 is
    allowed), so that the op multiplies as torch.matmul would; None for other dtypes."""
    if fp32_precision is not None or tensor.dtype != torch.float32:
        return fp32_precision
    return torch_fp32_precision()


@torch.library.custom_op("kiln::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None, fp32_precision: Optional[str] = None) -> torch.Tensor:
    """``activation(a @ b + bias)`` with batch broadcasting (kiln.ops.matmul); f32 operands multiply as
    ``fp32_precision`` says ("tf32" or "ieee"), by default as torch's own matmul setting does."""
    return _run(ops.matmul, [a, b], bias=bias, activation=activation,
                fp32_precision=_precision(fp32_precision, a))


@matmul.register_fake
def _(a, b, bias=None, activation=None, fp32_precision=None):
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.new_empty((*batch, a.shape[-2], b.shape[-1]))


@torch.library.custom_op("kiln::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None, mask: Optional[torch.Tensor] = None,
              fp32_precision: Optional[str] = None) -> torch.Tensor:
    """Scaled dot-product attention on [B, H, S, D] (kiln.ops.attention: GQA from the head counts, causal
    aligned bottom-right, an optional additive mask); f32 q, k, v multiply as ``fp32_precision`` says, by default
    as torch's matmul setting does."""
    return _run(ops.attention, [q, k, v], causal=causal, scale=scale, mask=mask,
                fp32_precision=_precision(fp32_precision, q))


@attention.register_fake
def _(q, k, v, causal=False, scale=None, mask=None, fp32_precision=None):
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


@torch.library.custom_op("kiln::softmax", mutates_args=())
def softmax(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """Softmax along ``axis`` (kiln.ops.softmax)."""
    return _run(ops.softmax, [x], axis=axis)


@softmax.register_fake
def _(x, axis=-1):
    return torch.empty_like(x)


@torch.library.custom_op("kiln::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension times ``weight`` (kiln.ops.rms_norm)."""
    return _run(ops.rms_norm, [x, weight], eps=eps)


@rms_norm.register_fake
def _(x, weight, eps=1e-6):
    return torch.empty_like(x)


@torch.library.custom_op("kiln::layer_norm", mutates_args=())
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension (kiln.ops.layer_norm)."""
    return _run(ops.layer_norm, [x, weight], bias=bias, eps=eps)


@layer_norm.register_fake
def _(x, weight, bias=None, eps=1e-5):
    return torch.empty_like(x)


@torch.library.custom_op("kiln::rope", mutates_args=())
def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Rotary embedding of ``x`` [..., S, D] by ``cos``, ``sin`` [S, D/2] (kiln.ops.rope)."""
    return _run(ops.rope, [x, cos, sin], interleaved=interleaved)


@rope.register_fake
def _(x, cos, sin, interleaved=False):
    return torch.empty_like(x)
