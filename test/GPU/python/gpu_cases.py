"""What the GPU Python suite compiles, shared by test_gpu_api.py (on the GPU) and prepare.py (here).

Why shared: the GPU machine has no compiler, so its tests run programs from the disk cache. prepare.py compiles
exactly these sources and traced functions for sm_90a into a cache folder that travels with the package; on the
GPU the same calls find them there. Each entry is (name, jitted function or ops function, argument specs), an
argument spec being (shape, dtype name) for a tensor or a plain value for a constant.
"""

import pathlib

import kiln
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]


@kiln.jit
def mlp(x, w1, w2, w3):
    """A 3-matmul MLP: SiLU after the first two projections, residual after the last."""
    h = kiln.silu(kiln.matmul(x, w1))
    h = kiln.silu(kiln.matmul(h, w2))
    return kiln.matmul(h, w3) + x


@kiln.jit
def projections(x, wq, wk, wv):
    """The q, k and v projections of a prefill: three independent wgmma matmuls (TMA), launched as one group."""
    return kiln.matmul(x, wq), kiln.matmul(x, wk), kiln.matmul(x, wv)


@kiln.jit
def attention_block(q, k, v, w, b, x):
    o = kiln.attention(q, k, v, causal=True)
    h = kiln.reshape(kiln.transpose(o, [0, 2, 1, 3]), x.shape)
    return kiln.matmul(h, w) + b + x


#: (name, function, argument specs, keyword constants)
def late_keys_only(b, h, q_idx, kv_idx):
    """A mask_mod under which the first 200 queries see no key (the first 128-row query tile runs no key tile, the
    second is partly empty): their rows must be zeros, as torch's SDPA gives."""
    return kv_idx + 200 <= q_idx


def keys_three_behind(b, h, q_idx, kv_idx):
    """A mask_mod under which the first 3 queries see no key, in an attention of one partial key tile."""
    return kv_idx + 3 <= q_idx


JIT_CASES = [
    ("matmul_bias_gelu", kiln.ops.matmul, [((200, 264), "bfloat16"), ((264, 136), "bfloat16")],
     {"bias": ((136,), "bfloat16"), "activation": "gelu"}),
    ("matmul_batched_f16", kiln.ops.matmul, [((3, 77, 96), "float16"), ((96, 40), "float16")], {}),
    # Decode-shaped: kiln-split-k splits K (5 chunks of 640; 4 of 640 in f32) and sums the chunks with the bias
    # and GELU.
    ("matmul_decode_split_k", kiln.ops.matmul, [((7, 3000), "bfloat16"), ((3000, 1000), "bfloat16")],
     {"bias": ((1000,), "bfloat16"), "activation": "gelu"}),
    ("matmul_decode_split_k_f32_tf32", kiln.ops.matmul, [((5, 2050), "float32"), ((2050, 300), "float32")], {}),
    ("attention_gqa_causal", kiln.ops.attention, [((1, 8, 77, 64), "bfloat16"), ((1, 2, 77, 64), "bfloat16"),
                                                   ((1, 2, 77, 64), "bfloat16")], {"causal": True}),
    ("attention_gqa_decode", kiln.ops.attention, [((3, 32, 1, 128), "bfloat16"), ((3, 8, 1000, 128), "bfloat16"),
                                                   ((3, 8, 1000, 128), "bfloat16")], {"causal": True}),
    ("attention_d128", kiln.ops.attention, [((2, 4, 130, 128), "float16"), ((2, 4, 200, 128), "float16"),
                                             ((2, 4, 200, 128), "float16")], {"causal": True}),
    ("attention_gqa_f32_tf32", kiln.ops.attention, [((2, 8, 100, 64), "float32"), ((2, 2, 150, 64), "float32"),
                                                     ((2, 2, 150, 64), "float32")], {"causal": True}),
    # The same at f32 accuracy (3xTF32 in both products): within f32's tolerance of torch in f32.
    ("attention_gqa_f32_ieee", kiln.ops.attention, [((2, 8, 100, 64), "float32"), ((2, 2, 150, 64), "float32"),
                                                     ((2, 2, 150, 64), "float32")],
     {"causal": True, "fp32_precision": "ieee"}),
    ("attention_rows_without_keys", kiln.ops.attention, [((1, 8, 300, 64), "bfloat16"),
                                                          ((1, 2, 230, 64), "bfloat16"),
                                                          ((1, 2, 230, 64), "bfloat16")], {"mask_mod": late_keys_only}),
    ("attention_rows_without_keys_one_tile", kiln.ops.attention,
     [((1, 4, 5, 64), "bfloat16"), ((1, 2, 7, 64), "bfloat16"), ((1, 2, 7, 64), "bfloat16")],
     {"mask_mod": keys_three_behind}),
    ("softmax_wide", kiln.ops.softmax, [((3, 5000), "float16")], {}),
    ("rms_norm", kiln.ops.rms_norm, [((5, 4096), "bfloat16"), ((4096,), "bfloat16")], {"eps": 1e-6}),
    ("layer_norm", kiln.ops.layer_norm, [((7, 768), "float16"), ((768,), "float16"), ((768,), "float16")], {}),
    ("rope", kiln.ops.rope, [((1, 4, 33, 64), "bfloat16"), ((33, 32), "bfloat16"), ((33, 32), "bfloat16")], {}),
    # Full [S, D] tables, a factor per element (what runtime tables of torch.compile graphs become).
    ("rope_full_tables", kiln.ops.rope, [((2, 3, 37, 64), "bfloat16"), ((37, 64), "bfloat16"),
                                         ((37, 64), "bfloat16")], {}),
    ("mlp", mlp, [((64, 256), "bfloat16"), ((256, 512), "bfloat16"), ((512, 512), "bfloat16"),
                  ((512, 256), "bfloat16")], {}),
    ("projections", projections, [((200, 264), "bfloat16"), ((264, 264), "bfloat16"), ((264, 136), "bfloat16"),
                                  ((264, 136), "bfloat16")], {}),
    ("attention_block", attention_block, [((1, 8, 77, 64), "bfloat16"), ((1, 2, 77, 64), "bfloat16"),
                                          ((1, 2, 77, 64), "bfloat16"), ((512, 512), "bfloat16"),
                                          ((512,), "bfloat16"), ((1, 77, 512), "bfloat16")], {}),
]

#: Matmuls that differ only in M (and K = 1000 is no whole number of k-tiles): one kernel, compiled once.
KERNEL_REUSE_CASES = [(f"matmul_{m}x512x1000_bias_silu", kiln.ops.matmul,
                       [((m, 1000), "bfloat16"), ((1000, 512), "bfloat16")],
                       {"bias": ((512,), "bfloat16"), "activation": "silu"}) for m in (300, 333, 301)]

#: Decode steps and a causal chunk of a few rows against growing KV caches: each group, one attention kernel
#: whose number of key tiles is read at run time (every length ends in a partial 64-key tile). The GQA steps run
#: packed (kiln-pack-gqa-decode).
ATTENTION_REUSE_CASES = [
    (f"attention_{label}_{keys}_keys", kiln.ops.attention,
     [((2, heads, rows, 64), "bfloat16"), ((2, kv_heads, keys, 64), "bfloat16"),
      ((2, kv_heads, keys, 64), "bfloat16")], {"causal": True})
    for label, heads, kv_heads, rows, lengths in (("decode", 4, 4, 1, (300, 1000, 1287)),
                                                    ("gqa_decode", 8, 2, 1, (500, 1500)),
                                                    ("chunk", 4, 4, 4, (300, 1000)))
    for keys in lengths]

#: Variable-length attention (cu_seqlens) on packed [tokens, heads, head_dim] tensors: name, the query and key
#: lengths of each sequence, q heads, kv heads, head dim, dtype, causal.
VARLEN_CASES = [
    ("varlen_gqa_causal_bf16", (1, 77, 300, 5), (1, 77, 300, 5), 8, 2, 64, "bfloat16", True),
    ("varlen_chunked_causal_f16", (4, 130, 1), (100, 130, 700), 4, 4, 128, "float16", True),
    ("varlen_full_bf16", (33, 0, 200), (40, 0, 200), 4, 1, 64, "bfloat16", False),
    # Queries that see no key give zeros: a sequence without keys, and one with more queries than keys.
    ("varlen_queries_without_keys_causal_bf16", (5, 70, 3, 40), (9, 0, 1, 100), 4, 2, 64, "bfloat16", True),
]


def varlen_sources(case):
    """The kiln IR kiln.ops.attention traces for a varlen case (its tables as arguments), for prepare.py."""
    name, lengths_q, lengths_k, heads, kv_heads, head_dim, dtype, causal = case
    import ml_dtypes
    element = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[dtype]
    cu_q = np.concatenate([[0], np.cumsum(lengths_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lengths_k)]).astype(np.int32)
    q = np.zeros((cu_q[-1], heads, head_dim), element)
    k = np.zeros((cu_k[-1], kv_heads, head_dim), element)
    sources = []

    def trace_only(q, k, v, causal, scale, mask_mod):
        function, args, kwargs = kiln.ops._attention_call(q, k, v, causal, scale, None, None, mask_mod, None)
        sources.append(function.source(*args, **kwargs))
        return q  # the shape the caller transposes back; nothing runs

    from kiln import varlen
    varlen.attention(q, k, k, cu_q, cu_k, causal, None, trace_only)
    return sources


#: kiln IR files compiled with kiln.compile(text, target="sm_90a").
#: kiln.ops.paged_attention on CUDA tensors: (name, batch, heads, kv_heads, new tokens, longest length, head dim,
#: page size, max_pages, num_pages, dtype). The test draws the other lengths and shuffles the pages.
PAGED_CASES = [
    ("paged_decode_gqa_p16_bf16", 3, 32, 8, 1, 1000, 128, 16, 70, 220, "bfloat16"),
    ("paged_chunk_mha_p64_f16", 2, 8, 8, 5, 700, 64, 64, 12, 30, "float16"),
]


def paged_placeholders(case):
    """Zero arrays of a paged or append case's shapes: q, the new k and v rows, the two caches, the block table,
    and two [B] int32 tables (positions, lengths)."""
    _, batch, heads, kv_heads, seq_q, _, head_dim, page, max_pages, num_pages, dtype = case
    import ml_dtypes
    element = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    q = np.zeros((batch, heads, seq_q, head_dim), element)
    k, v = (np.zeros((batch, kv_heads, seq_q, head_dim), element) for _ in range(2))
    k_cache, v_cache = (np.zeros((num_pages, page, kv_heads, head_dim), element) for _ in range(2))
    return q, k, v, k_cache, v_cache, np.zeros((batch, max_pages), np.int32), np.zeros(batch, np.int32), \
        np.ones(batch, np.int32)


def paged_source(case):
    """The kiln IR kiln.ops.paged_attention traces for a paged case (its tables as arguments), for prepare.py."""
    q, _, _, k_cache, v_cache, table, _, lens = paged_placeholders(case)
    return kiln.ops._paged_attention.source(q, k_cache, v_cache, table, lens, None)


@kiln.jit
def decode_step(q, k_new, v_new, k_cache, v_cache, block_table, positions, seq_lens):
    """A decode step's attention half: the new K/V rows appended into their pages (in place on the GPU), then
    paged attention over every sequence's keys; returns the output and the updated caches."""
    k_cache, v_cache = kiln.append_kv(k_cache, v_cache, k_new, v_new, block_table, positions)
    return kiln.paged_attention(q, k_cache, v_cache, block_table, seq_lens), k_cache, v_cache


#: kiln.ops.append_kv and decode_step on CUDA tensors: (name, batch, heads, kv_heads, new tokens, longest length
#: after the append, head dim, page size, max_pages, num_pages, dtype).
APPEND_CASES = [
    ("append_decode_gqa_p16_bf16", 3, 32, 8, 1, 1000, 128, 16, 70, 220, "bfloat16"),
    ("append_chunk_mha_p64_f16", 2, 4, 4, 5, 700, 64, 64, 12, 30, "float16"),
]


def append_sources(case):
    """The kiln IR of kiln.ops.append_kv and of decode_step for an append case, for prepare.py."""
    q, k, v, k_cache, v_cache, table, positions, lens = paged_placeholders(case)
    return [kiln.ops._append_kv.source(k_cache, v_cache, k, v, table, positions),
            decode_step.source(q, k, v, k_cache, v_cache, table, positions, lens)]


@kiln.jit
def projections_step(x, cos, sin, k_cache, v_cache, block_table, positions, wq, bq, wk, wv, w1, w3, w2,
                     keep_sums=False):
    """A decode step's projections, whose contractions kiln-split-k splits at a few rows, each sum read by a glue
    kernel that computes it (kiln-fuse-split-sums): q (with a bias, which the sum adds) and k through RoPE, k and
    v appended into their pages, the MLP's gate by the up projection's sum. Returns q, the caches and the MLP's
    output; with ``keep_sums`` also the four sums, which then run as kernels of their own (two readers each)."""
    batch, head_dim = x.shape[0], 2 * cos.shape[1]
    heads, kv_heads = wq.shape[1] // head_dim, wk.shape[1] // head_dim
    sums = [kiln.matmul(x, wq) + bq, kiln.matmul(x, wk), kiln.matmul(x, wv), kiln.matmul(x, w3)]
    q = kiln.rope(kiln.reshape(sums[0], (batch, heads, head_dim)), cos, sin, seq_dim=0)
    k = kiln.rope(kiln.reshape(sums[1], (batch, kv_heads, head_dim)), cos, sin, seq_dim=0)
    k_cache, v_cache = kiln.append_kv(k_cache, v_cache, kiln.reshape(k, (batch, kv_heads, 1, head_dim)),
                                      kiln.reshape(sums[2], (batch, kv_heads, 1, head_dim)), block_table, positions)
    out = kiln.matmul(kiln.silu(kiln.matmul(x, w1)) * sums[3], w2)
    return (q, k_cache, v_cache, out, *sums) if keep_sums else (q, k_cache, v_cache, out)


#: projections_step on CUDA tensors: (name, batch, hidden, heads, kv_heads, head dim, MLP width, page size,
#: max_pages, num_pages, dtype).
PROJECTION_CASES = [
    ("projections_split_b3_bf16", 3, 2048, 16, 4, 128, 4096, 16, 8, 40, "bfloat16"),
    ("projections_split_b1_f16", 1, 2048, 8, 2, 64, 2816, 64, 4, 9, "float16"),
]


@kiln.jit
def residual_norm_step(o, wo, x, norm_weight, w2, keep_sums=False):
    """The output projection with the residual, whose split sum the norm's row tiles and the next projection's
    sum both compute (kiln-fuse-split-sums), then that projection with the residual again; with ``keep_sums``
    also the residual sum itself, which then runs as a kernel of its own."""
    h = kiln.matmul(o, wo) + x
    out = kiln.matmul(kiln.rms_norm(h, norm_weight, eps=1e-5), w2) + h
    return (out, h) if keep_sums else out


@kiln.jit
def residual_two_norms(o, wo, x, first_weight, second_weight, keep_sums=False):
    """The output projection with the residual, whose split sum two norms compute for their rows (one grouped
    launch; several rows a block, the last block's partly past the rows); with ``keep_sums`` also the sum."""
    h = kiln.matmul(o, wo) + x
    normed = (kiln.rms_norm(h, first_weight, eps=1e-5), kiln.rms_norm(h, second_weight, eps=1e-6))
    return (*normed, h) if keep_sums else normed


#: residual_norm_step on CUDA tensors: (name, rows, projection input width, hidden, dtype).
RESIDUAL_NORM_CASES = [
    ("residual_norm_split_b3_bf16", 3, 4096, 2048, "bfloat16"),
    ("residual_norm_split_b1_f16", 1, 4096, 1536, "float16"),
]

#: residual_two_norms on CUDA tensors, in RESIDUAL_NORM_CASES' form: rows that two-row blocks do not divide.
TWO_NORMS_CASES = [
    ("residual_two_norms_split_b5_bf16", 5, 4096, 1024, "bfloat16"),
    ("residual_two_norms_split_b7_f16", 7, 4096, 1024, "float16"),
]


def residual_norm_placeholders(case):
    """Zero arrays of a residual-norm case's arguments, in residual_norm_step's order."""
    _, rows, width, hidden, dtype = case
    import ml_dtypes
    element = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    return [np.zeros(shape, element) for shape in [(rows, width), (width, hidden), (rows, hidden), (hidden,),
                                                   (hidden, hidden)]]


def two_norms_placeholders(case):
    """Zero arrays of a two-norms case's arguments, in residual_two_norms' order."""
    *arrays, _ = residual_norm_placeholders(case)
    return arrays + [arrays[-1]]


def projection_placeholders(case):
    """Zero arrays of a projections case's arguments, in projections_step's order."""
    _, batch, hidden, heads, kv_heads, head_dim, ffn, page, max_pages, num_pages, dtype = case
    import ml_dtypes
    element = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    shapes = [(batch, hidden), (batch, head_dim // 2), (batch, head_dim // 2),
              (num_pages, page, kv_heads, head_dim), (num_pages, page, kv_heads, head_dim)]
    arrays = [np.zeros(shape, element) for shape in shapes]
    arrays += [np.zeros((batch, max_pages), np.int32), np.zeros(batch, np.int32)]
    for shape in [(hidden, heads * head_dim), (heads * head_dim,), (hidden, kv_heads * head_dim),
                  (hidden, kv_heads * head_dim), (hidden, ffn), (hidden, ffn), (ffn, hidden)]:
        arrays.append(np.zeros(shape, element))
    return arrays


SOURCE_CASES = [("gpu_attention_block", ROOT / "examples" / "gpu_attention_block.mlir")]


def llama_model():
    """The small Llama-style block (examples/onnx_blocks.py) in bf16 with its weights and reference config."""
    import sys
    if str(ROOT / "examples") not in sys.path:
        sys.path.insert(0, str(ROOT / "examples"))
    import onnx_blocks
    return onnx_blocks, onnx_blocks.llama_block(dtype="bfloat16")
