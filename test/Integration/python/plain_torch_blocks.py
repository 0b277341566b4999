"""Transformer blocks written in plain torch, as users write them: what the torch.compile backend's tests compile.

A GPT-2 block (nn.Linear, nn.LayerNorm, F.scaled_dot_product_attention with the causal flag, tanh GELU,
residuals) and a Llama block (RMSNorm written out with f32 casts as Hugging Face writes it, or nn.RMSNorm; RoPE by
rotate_half and cat; GQA by repeat_interleave or by Hugging Face's expand + reshape; causal by the flag or by an
additive -inf triangle; SwiGLU), and a Llama decode layer with a static KV cache as gpt-fast writes it. Shared
by test/Integration/python (CPU) and test/GPU/python (CUDA).
"""

import torch
import torch.nn.functional as F
from torch import nn


class Gpt2Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.c_attn, self.c_proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.c_fc, self.mlp_proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class HfRmsNorm(nn.Module):
    """RMSNorm as Hugging Face's Llama writes it: computed in f32, cast back, times the weight."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(hidden)), eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n):
    """Hugging Face's GQA expansion: [B, Hkv, S, D] -> [B, Hkv * n, S, D] by expand and reshape."""
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


class LlamaBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn, norm="hf", gqa="repeat_interleave", mask="flag"):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.gqa, self.mask = gqa, mask
        make_norm = (lambda: HfRmsNorm(hidden)) if norm == "hf" else (lambda: nn.RMSNorm(hidden, eps=1e-6))
        self.input_norm, self.post_norm = make_norm(), make_norm()
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(hidden, ffn, bias=False), nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        h = self.input_norm(x)
        q = self.q_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos[None, None], sin[None, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        n = self.heads // self.kv_heads
        if self.gqa == "repeat_interleave":
            k, v = k.repeat_interleave(n, dim=1), v.repeat_interleave(n, dim=1)
        else:
            k, v = repeat_kv(k, n), repeat_kv(v, n)
        if self.mask == "flag":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            triangle = torch.full((s, s), float("-inf"), device=x.device, dtype=x.dtype).triu(1)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=triangle)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, d))
        h = self.post_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class GptFastDecodeLayer(nn.Module):
    """A Llama decode layer as gpt-fast writes it: fused wqkv and w13 (nn.Linear weights, split after the GEMM), a
    static KV cache [B, Hkv, max_len, D] in buffers that ``index_copy_`` writes at ``input_pos``, SDPA over the
    whole cache under a boolean position mask, GQA by repeat_interleave, RMSNorm in f32, RoPE on [B, H, D] rows
    by the position's cos/sin. ``write="index_put_"`` writes the new rows by indexed assignment instead
    (``cache[:, :, input_pos] = k``). ``rope="pairs"`` rotates as gpt-fast's apply_rotary_emb does: in f32, the
    pairs (x[2i], x[2i + 1]) by freqs_cis [B, D/2, 2] (cos and sin stacked), the result stacked and flattened."""

    def __init__(self, hidden, heads, kv_heads, ffn, batch, max_len, eps=1e-5, write="index_copy_", rope="halves"):
        super().__init__()
        self.write, self.rope_spelling = write, rope
        self.heads, self.kv_heads, self.head_dim, self.ffn, self.eps = heads, kv_heads, hidden // heads, ffn, eps
        self.wqkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.w13, self.w2 = nn.Linear(hidden, 2 * ffn, bias=False), nn.Linear(ffn, hidden, bias=False)
        self.attn_norm, self.ffn_norm = nn.Parameter(torch.ones(hidden)), nn.Parameter(torch.ones(hidden))
        shape = (batch, kv_heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape))
        self.register_buffer("v_cache", torch.zeros(shape))

    def norm(self, x, weight):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * weight

    @staticmethod
    def rope(x, cos, sin):
        half = x.shape[-1] // 2
        a, b = x[..., :half], x[..., half:]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([a * c - b * s, a * s + b * c], dim=-1)

    @staticmethod
    def rope_pairs(x, freqs_cis):
        xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
        freqs_cis = freqs_cis.view(xshaped.size(0), 1, xshaped.size(2), 2)
        x_out2 = torch.stack([xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
                              xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1]], -1)
        return x_out2.flatten(2).type_as(x)

    def forward(self, x, cos, sin, input_pos, mask):
        bsz, d = x.shape[0], self.head_dim
        q, k, v = self.wqkv(self.norm(x, self.attn_norm)).split(
            [self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        if self.rope_spelling == "pairs":
            freqs_cis = torch.stack([cos, sin], dim=-1)
            q = self.rope_pairs(q.view(bsz, self.heads, d), freqs_cis)[:, :, None]
            k = self.rope_pairs(k.view(bsz, self.kv_heads, d), freqs_cis)[:, :, None]
        else:
            q = self.rope(q.view(bsz, self.heads, d), cos, sin)[:, :, None]
            k = self.rope(k.view(bsz, self.kv_heads, d), cos, sin)[:, :, None]
        v = v.view(bsz, self.kv_heads, 1, d)
        if self.write == "index_copy_":
            self.k_cache.index_copy_(2, input_pos, k)
            self.v_cache.index_copy_(2, input_pos, v)
        else:
            self.k_cache[:, :, input_pos] = k
            self.v_cache[:, :, input_pos] = v
        group = self.heads // self.kv_heads
        keys = self.k_cache.repeat_interleave(group, dim=1)
        values = self.v_cache.repeat_interleave(group, dim=1)
        o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        h = x + self.wo(o.reshape(bsz, self.heads * d))
        g1, g3 = self.w13(self.norm(h, self.ffn_norm)).split([self.ffn, self.ffn], dim=-1)
        return h + self.w2(F.silu(g1) * g3)


class GptFastModel(nn.Module):
    """gpt-fast's Transformer around GptFastDecodeLayer: a token embedding, the causal mask's row for the position
    read from a boolean buffer, the position's cos/sin read from buffers and expanded over the batch, the layers,
    a final RMSNorm and the vocabulary projection."""

    def __init__(self, vocab, hidden, heads, kv_heads, ffn, batch, max_len, layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(GptFastDecodeLayer(hidden, heads, kv_heads, ffn, batch, max_len)
                                    for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(hidden))
        self.output = nn.Linear(hidden, vocab, bias=False)
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))
        half = hidden // heads // 2
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32),
                             1.0 / 10000.0 ** (torch.arange(half, dtype=torch.float32) / half))
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, tokens, input_pos):
        mask = self.causal_mask[None, None, input_pos]
        batch = tokens.shape[0]
        cos, sin = self.cos[input_pos].expand(batch, -1), self.sin[input_pos].expand(batch, -1)
        x = self.embedding(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, input_pos, mask)
        x32 = x.float()
        return self.output((x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * self.norm)


def rope_tables(seq, head_dim, device="cpu", dtype=torch.float32, base=10000.0):
    """Hugging Face's cos and sin tables, [S, head_dim] (the angles repeated for both halves)."""
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def relative_error(out, reference):
    """max |out - reference| / max |reference|, in float64."""
    out, reference = out.double(), reference.double()
    return ((out - reference).abs().max() / reference.abs().max()).item()
