"""torch.ops.kiln.* on the GPU: each op against torch, and inside torch.compile(fullgraph=True) and torch.export.

Run with the GPU suite (scripts/gpu_wheel_suite.sh). Inputs are fresh random tensors at shapes that do not
divide the tiles; references are torch in float32; tolerances are relative in the max norm: 2e-2 for bf16, 5e-3
for f16, 1e-4 for f32 (outputs are rounded to those types).
"""

import secrets

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import kiln.torch_ops  # noqa: E402,F401  (registers torch.ops.kiln.*)

F = torch.nn.functional
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 1e-4}


@pytest.fixture
def generator():
    seed = secrets.randbits(32)
    print(f"seed {seed}")
    return torch.Generator(device="cuda").manual_seed(seed)


def randn(generator, *shape, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(*shape, generator=generator, device="cuda") * scale).to(dtype)


def close(out, ref):
    ref = ref.float()
    error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    assert error <= TOLERANCE[out.dtype], f"relative error {error:.2e}"


def test_each_op_against_torch(generator):
    x = randn(generator, 3, 77, 1000)
    w = randn(generator, 1000)
    close(torch.ops.kiln.softmax(x), torch.softmax(x.float(), -1))
    close(torch.ops.kiln.rms_norm(x, w, 1e-6), F.rms_norm(x.float(), (1000,), w.float(), 1e-6))
    close(torch.ops.kiln.layer_norm(x, w, w, 1e-5), F.layer_norm(x.float(), (1000,), w.float(), w.float(), 1e-5))
    a, b, bias = randn(generator, 77, 256), randn(generator, 256, 200, scale=1 / 16), randn(generator, 200)
    close(torch.ops.kiln.matmul(a, b, bias, "silu"), F.silu(a.float() @ b.float() + bias.float()))
    q, k, v = randn(generator, 2, 8, 77, 64), randn(generator, 2, 2, 150, 64), randn(generator, 2, 2, 150, 64)
    reference = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(4, 1),
                                               v.float().repeat_interleave(4, 1), is_causal=False)
    close(torch.ops.kiln.attention(q, k, v), reference)
    s, d = 33, 128
    h = randn(generator, 2, 4, s, d)
    angles = torch.rand(s, d // 2, generator=generator, device="cuda") * 6.28
    cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
    half = h.float()[..., : d // 2], h.float()[..., d // 2:]
    expected = torch.cat([half[0] * cos.float() - half[1] * sin.float(), half[1] * cos.float() + half[0] * sin.float()],
                         -1)
    close(torch.ops.kiln.rope(h, cos, sin), expected)


def test_fullgraph_compile(generator):
    """The op stays one node of the graph: fullgraph=True would raise at a graph break."""
    q, k, v = randn(generator, 1, 4, 100, 64), randn(generator, 1, 4, 100, 64), randn(generator, 1, 4, 100, 64)

    def block(q, k, v):
        return torch.ops.kiln.attention(q, k, v, causal=True) * 2 + 1

    compiled = torch.compile(block, fullgraph=True)
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True) * 2 + 1
    close(compiled(q, k, v), expected)
    close(compiled(q, k, v), block(q, k, v).float())


def test_export(generator):
    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(512, device="cuda", dtype=torch.float16))

        def forward(self, x):
            return torch.ops.kiln.rms_norm(x, self.weight, 1e-6)

    x = randn(generator, 5, 512, dtype=torch.float16)
    program = torch.export.export(Norm(), (x,))
    assert any("kiln.rms_norm" in str(node.target) for node in program.graph.nodes)
    close(program.module()(x), F.rms_norm(x.float(), (512,), None, 1e-6))


def test_f32_ops_multiply_as_torch_does(generator):
    """At torch's default (no TF32), f32 ops run 3xTF32 and stay within f32's 1e-4 of torch in f32, where TF32
    alone leaves errors near 1e-3; fp32_precision="tf32" asks for TF32."""
    q = randn(generator, 2, 8, 77, 64, dtype=torch.float32)
    k, v = randn(generator, 2, 2, 150, 64, dtype=torch.float32), randn(generator, 2, 2, 150, 64, dtype=torch.float32)
    reference = F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    close(torch.ops.kiln.attention(q, k, v), reference)
    a, b = randn(generator, 77, 1000, dtype=torch.float32), randn(generator, 1000, 200, dtype=torch.float32)
    close(torch.ops.kiln.matmul(a, b), a @ b)
    tf32 = torch.ops.kiln.attention(q, k, v, fp32_precision="tf32")
    assert ((tf32 - reference).abs().max() / reference.abs().max()).item() <= 2e-3


def test_cpu_tensors_run_on_the_host():
    pytest.importorskip("kiln._kiln_host", reason="this install has no CPU host backend (a package folder from prepare.py)")
    x = torch.randn(4, 33)
    out = torch.ops.kiln.softmax(x)
    assert out.device.type == "cpu"
    close(out, torch.softmax(x, -1))


def test_fake_shapes():
    """The fake kernels give the shapes torch's tracers see, with no kernel run."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(3, 1, 7, 5), torch.empty(4, 5, 9)
        assert torch.ops.kiln.matmul(a, b).shape == (3, 4, 7, 9)
        q, k, v = torch.empty(2, 8, 7, 64), torch.empty(2, 2, 9, 64), torch.empty(2, 2, 9, 32)
        assert torch.ops.kiln.attention(q, k, v).shape == (2, 8, 7, 32)
