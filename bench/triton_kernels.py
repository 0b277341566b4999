"""Plain Triton kernels that the GPU benchmarks put next to Kiln's: a GEMM with an optional bias + SiLU epilogue
and a FlashAttention forward (causal bottom-right, GQA).

Why here: the benchmarks compare Kiln with cuBLAS, both SDPA backends and Triton in the same run, and the JIT
latency baseline compiles the same kernels cold. They are written as a user would (one config per call, no
autotuning, no hand tuning) — what "a plain Triton kernel" means in the results.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _linear_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr,
                   SILU: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k0 + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def linear(a, b, bias=None, silu=False, block=(128, 128, 64), warps=8, stages=3):
    """silu?(a @ b + bias?) for 2-D a [M, K] and b [K, N] (any strides); bf16/f16 in, f32 accumulate."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    bm, bn, bk = block
    _linear_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
        a, b, bias if bias is not None else c, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BM=bm, BN=bn, BK=bk, HAS_BIAS=bias is not None, SILU=silu, num_warps=warps,
        num_stages=stages)
    return c


@triton.jit
def _attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, heads, group, seq_q, seq_k, scale, D: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """One program per (query block, batch * head) of contiguous [B, H, S, D] tensors; k/v head = h // group."""
    bh = tl.program_id(1)
    kv = (bh // heads) * (heads // group) + (bh % heads) // group
    q_base, kv_base = bh * seq_q * D, kv * seq_k * D
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + q_base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < seq_q, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    end = seq_k
    if CAUSAL:  # keys past the last row's diagonal (bottom-right aligned) are never seen
        end = tl.minimum(seq_k, (tl.program_id(0) + 1) * BLOCK_M + seq_k - seq_q)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + kv_base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < seq_k, other=0.0)
        keep = cols[None, :] < seq_k
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None] + seq_k - seq_q)
        s = tl.where(keep, tl.dot(q, tl.trans(k)) * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m - m_safe)
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + kv_base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < seq_k, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    tl.store(o_ptr + q_base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < seq_q)


def attention(q, k, v, causal=False, block=(128, 64), warps=8, stages=2):
    """softmax(q k^T / sqrt(d)) v for contiguous [B, H, S, D] q and [B, Hkv, S, D] k, v."""
    b, h, seq_q, d = q.shape
    out = torch.empty_like(q)
    _attention_kernel[(triton.cdiv(seq_q, block[0]), b * h)](
        q, k, v, out, h, h // k.shape[1], seq_q, k.shape[2], d ** -0.5, D=d, BLOCK_M=block[0], BLOCK_N=block[1],
        CAUSAL=causal, num_warps=warps, num_stages=stages)
    return out
