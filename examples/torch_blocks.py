"""GPT-2-style and Llama-style Transformer blocks in plain PyTorch, the way model code writes them.

Why: these are what a user hands to ``kiln.frontend.from_torch`` or exports to ONNX, and the baselines (eager and
torch.compile) that Kiln's compiled blocks are measured against on the GPU. They compute the same functions as
the graphs of examples/onnx_blocks.py, and ``load_numpy`` takes the same weight dictionaries (matrices stored
[in, out], as the ONNX MatMul reads them), so one set of weights drives all three.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def rope_tables(seq, dim, theta=10000.0):
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    freqs = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(hidden)), eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """RMSNorm, q/k/v projections, RoPE, GQA causal attention, output projection, RMSNorm, SwiGLU MLP."""

    def __init__(self, hidden=128, heads=4, kv_heads=2, mlp=352, seq=24, eps=1e-6, sdpa=False):
        super().__init__()
        self.heads, self.kv_heads, self.dim, self.sdpa = heads, kv_heads, hidden // heads, sdpa
        self.norm1, self.norm2 = RMSNorm(hidden, eps), RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, heads * self.dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.o_proj = nn.Linear(heads * self.dim, hidden, bias=False)
        self.gate_proj = nn.Linear(hidden, mlp, bias=False)
        self.up_proj = nn.Linear(hidden, mlp, bias=False)
        self.down_proj = nn.Linear(mlp, hidden, bias=False)
        cos, sin = rope_tables(seq, self.dim)
        self.register_buffer("cos", cos.float(), persistent=False)
        self.register_buffer("sin", sin.float(), persistent=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        batch, seq, _ = x.shape
        h = self.norm1(x)
        q = self.q_proj(h).view(batch, seq, self.heads, self.dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, seq, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, seq, self.kv_heads, self.dim).transpose(1, 2)
        cos, sin = self.cos[:seq].to(x.dtype), self.sin[:seq].to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k[:, :, None].expand(batch, self.kv_heads, group, seq, self.dim).reshape(batch, self.heads, seq, self.dim)
        v = v[:, :, None].expand(batch, self.kv_heads, group, seq, self.dim).reshape(batch, self.heads, seq, self.dim)
        if self.sdpa:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dim) + self.mask[:seq, :seq].to(x.dtype)
            o = torch.matmul(torch.softmax(s, dim=-1), v)
        x = x + self.o_proj(o.transpose(1, 2).reshape(batch, seq, self.heads * self.dim))
        h = self.norm2(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    def load_numpy(self, w):
        """Weights from examples/onnx_blocks.llama_block's dictionary."""
        with torch.no_grad():
            self.norm1.weight.copy_(torch.as_tensor(w["norm1"]))
            self.norm2.weight.copy_(torch.as_tensor(w["norm2"]))
            for name, key in (("q_proj", "wq"), ("k_proj", "wk"), ("v_proj", "wv"), ("o_proj", "wo"),
                              ("gate_proj", "wg"), ("up_proj", "wu"), ("down_proj", "wd")):
                getattr(self, name).weight.copy_(torch.as_tensor(w[key]).T)
        return self


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    """LayerNorm, fused qkv projection, causal attention with a boolean mask, projection, LayerNorm, GELU MLP."""

    def __init__(self, hidden=96, heads=4, seq=20, eps=1e-5):
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden, eps=eps), nn.LayerNorm(hidden, eps=eps)
        self.c_attn, self.c_proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.c_fc, self.mlp_proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.act = NewGELU()
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq),
                             persistent=False)

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(hidden, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, self.dim).transpose(1, 2) for t in (q, k, v))
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dim))
        s = torch.where(self.bias[:, :, :seq, :seq], s, torch.tensor(-1e9, dtype=s.dtype, device=s.device))
        o = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(batch, seq, hidden)
        x = x + self.c_proj(o)
        return x + self.mlp_proj(self.act(self.c_fc(self.ln_2(x))))

    def load_numpy(self, w):
        """Weights from examples/onnx_blocks.gpt2_block's dictionary."""
        with torch.no_grad():
            for module, g, b in ((self.ln_1, "ln1_g", "ln1_b"), (self.ln_2, "ln2_g", "ln2_b")):
                module.weight.copy_(torch.as_tensor(w[g]))
                module.bias.copy_(torch.as_tensor(w[b]))
            for module, wk, bk in ((self.c_attn, "w_attn", "b_attn"), (self.c_proj, "w_proj", "b_proj"),
                                   (self.c_fc, "w_fc", "b_fc"), (self.mlp_proj, "w_out", "b_out")):
                module.weight.copy_(torch.as_tensor(w[wk]).T)
                module.bias.copy_(torch.as_tensor(w[bk]))
        return self
