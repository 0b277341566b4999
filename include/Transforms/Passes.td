//===- Passes.td - Kiln transformation passes --------------*- tablegen -*-===//
//
// Kiln's own passes on the kiln dialect: strategy selection, tiling and online softmax (and, as they land,
// fusion and outlining). Each pass drives a public transform declared in Transforms/Transforms.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_TD
#define KILN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnFuseAttention : Pass<"kiln-fuse-attention"> {
  let summary = "Replace attention written op by op with kiln.attention";
  let description = [{
    Matches `matmul(softmax(mask(scale(matmul(q, k^T)))), v)` as exporters write it and replaces it with one
    `kiln.attention`:

    - `k^T` is a `transpose_rhs` matmul or a `kiln.transpose` that swaps the last two dims (any permutation of
      the leading dims becomes a transpose producing k);
    - the scale is a multiply or divide by a scalar constant (any splat shape), or absent;
    - the mask is an additive tensor (kept as the op's mask operand), an additive constant whose pattern is
      causal (0 on and below the bottom-right-aligned diagonal, -inf or <= -1e4 above), or a
      `kiln.select(causal, scores, -inf or <= -1e4)` with a constant causal condition; both become `causal`;
    - the softmax is over the last (key) axis;
    - k and v may be expanded for GQA/MQA as reshape [B, Hkv, 1, S, D] -> broadcast [B, Hkv, G, S, D] ->
      reshape [B, Hkv * G, S, D]; the expansion is dropped and the head counts carry the grouping.

    - a tanh softcap after the scale, `mul(tanh(div(s, cap)), cap)`, becomes a score_mod; a causal select or
      additive constant whose pattern is a band (key j visible to query i for i + Sk - Sq - W < j <= i + Sk - Sq)
      becomes `causal` and a sliding-window mask_mod; an additive constant [1, H, Sq or 1, Sk] that is ALiBi's
      `slope[h] * (j - i)` or `slope[h] * j` becomes a score_mod over a constant table of the slopes.

    It does not fire when any part differs: a softmax over another axis, a non-scalar scale, a select mask that
    is neither causal nor a band, mismatched element types, a softmax with other users.

    ```mlir
    // before
    %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
    %s = kiln.matmul %q, %kt : ... -> tensor<1x8x77x77xf32>
    %d = kiln.div %s, %c8 : tensor<1x8x77x77xf32>, tensor<f32> -> tensor<1x8x77x77xf32>
    %p = kiln.softmax %d axis 3 : tensor<1x8x77x77xf32>
    %o = kiln.matmul %p, %v : ... -> tensor<1x8x77x64xf32>
    // after
    %o = kiln.attention %q, %k, %v {scale = 1.250000e-01 : f32} : ... -> tensor<1x8x77x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"];
}

def KilnFuseNorms : Pass<"kiln-fuse-norms"> {
  let summary = "Replace RMSNorm and LayerNorm written op by op with kiln.rms_norm / kiln.layer_norm";
  let description = [{
    Matches `d / sqrt(mean(d^2, -1) + eps)` in the forms exporters write — rsqrt, reciprocal of sqrt, `1 / sqrt`,
    `pow(., -0.5)` or a division by sqrt; the square as `d * d` or `pow(d, 2)` — where `d` is the input
    (RMSNorm) or `x - mean(x, -1)` (LayerNorm), then an optional multiply by a `[D]` weight and, for LayerNorm,
    an optional add of a `[D]` bias. A norm computed in f32 between a cast up from the input's type and a cast
    back to it is matched through the casts. A missing weight becomes a constant of ones. A part of a norm whose
    user applies the weight or bias is left for that user, so the whole formula becomes one op.

    ```mlir
    // before
    %sq = kiln.mul %x, %x : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
    %ms = kiln.reduce mean %sq axes [1] keep_dims : tensor<4x64xf32> -> tensor<4x1xf32>
    %a = kiln.add %ms, %eps : tensor<4x1xf32>, tensor<f32> -> tensor<4x1xf32>
    %r = kiln.rsqrt %a : tensor<4x1xf32>
    %n = kiln.mul %x, %r : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
    %y = kiln.mul %n, %w : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xf32>
    // after
    %y = kiln.rms_norm %x, %w epsilon 9.99999997E-7 : tensor<4x64xf32>, tensor<64xf32>
    ```
  }];
}

def KilnFuseActivations : Pass<"kiln-fuse-activations"> {
  let summary = "Replace SiLU and GELU written as formulas with kiln.silu / kiln.gelu";
  let description = [{
    Matches `x * sigmoid(x)` (SiLU), `0.5 x (1 + erf(x / sqrt(2)))` (exact GELU) and
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (tanh GELU, with x^3 as `pow(x, 3)` or products of x).
    Products are compared as multisets of factors with their constants multiplied out, so any order and
    grouping of the factors matches; constants must agree to a relative 1e-3. The result then fuses into a
    matmul's epilogue like any other activation.

    ```mlir
    // before
    %s = kiln.sigmoid %x : tensor<8x256xf32>
    %y = kiln.mul %x, %s : tensor<8x256xf32>, tensor<8x256xf32> -> tensor<8x256xf32>
    // after
    %y = kiln.silu %x : tensor<8x256xf32>
    ```
  }];
}

def KilnFuseRope : Pass<"kiln-fuse-rope"> {
  let summary = "Replace rotate-half rotary embeddings written op by op with kiln.rope";
  let description = [{
    Matches `x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin` (in either order of the sum and the
    products) where cos and sin are `[1, .., 1, S, D]` tables of x's element type, and replaces it with
    `kiln.rope`: on the `[S, D/2]` halves of constant tables whose two halves are equal, else on the `[S, D]`
    tables themselves. Also matches the halves spelling `concat(a * cos - b * sin, a * sin + b * cos)` (a and
    b the halves of x, `[.., D/2]` tables that vary along one dimension of x, the positions: `seq_dim` when it
    is not the one before the last, as a decode step's per-sequence rows), and gpt-fast's pairs spelling (x
    viewed as `[.., D/2, 2]`, each pair rotated, the results stacked and flattened back: the interleaved rope,
    of the bf16/f16 values where the rotation was computed in f32 between a widening and a rounding back).

    ```mlir
    // after
    %y = kiln.rope %x, %cos, %sin : tensor<1x8x16x64xf32>, tensor<16x32xf32>, tensor<16x32xf32>
    ```
  }];
}

def KilnFuseEpilogue : Pass<"kiln-fuse-epilogue"> {
  let summary = "Fold elementwise consumers of a matmul or an attention into its epilogue";
  let description = [{
    Follows the single-use chain of elementwise ops after each `kiln.matmul` and the output of each
    `kiln.attention` — bias add, scale, activations
    (relu, gelu, silu, sigmoid, tanh, ...), residual add, a gating multiply by another tensor, and a final float
    cast — as long as each keeps the matmul's shape, and rewrites it as the matmul's epilogue region: the f32
    formula of each op applied to the accumulator, with the other tensors as epilogue operands. Intermediates the
    graph holds in f16/bf16 are rounded to that type in the region too. A producer whose result (or an
    intermediate of the chain) has other users is left alone.

    ```mlir
    // before
    %y = kiln.matmul %x, %w : tensor<77x512xf32>, tensor<512x2048xf32> -> tensor<77x2048xf32>
    %z = kiln.add %y, %b : tensor<77x2048xf32>, tensor<2048xf32> -> tensor<77x2048xf32>
    %a = kiln.silu %z : tensor<77x2048xf32>
    // after
    %a = kiln.matmul %x, %w epilogue(%b : tensor<2048xf32>) {
    ^bb0(%acc: f32, %bias: f32):
      %s = arith.addf %acc, %bias : f32
      ... silu(%s) ...
      kiln.yield %r : f32
    } : tensor<77x512xf32>, tensor<512x2048xf32> -> tensor<77x2048xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise"> {
  let summary = "Fuse each chain of elementwise ops into one kiln.elementwise (one kernel)";
  let description = [{
    Grows a chain from each elementwise op (arithmetic, activations, comparisons, selects, casts), from the last
    in program order back, through producers of the same shape whose every user is in the chain or is another
    elementwise op of that shape (computed again in each chain that reads it: a few instructions per element
    against a kernel and a round trip through memory; at most 64 ops a body), and rewrites it
    as one `kiln.elementwise` whose body computes each op's formula per element: the chain's other operands are
    the op's inputs (broadcast as before), splat constants become constants of the body, and intermediates the
    graph holds in f16/bf16 are rounded to that type in the body. A chain of one op is left alone. Runs after
    the fusions that take elementwise ops into matmuls, attentions, norms and RoPE.

    ```mlir
    // before
    %a = kiln.mul %x, %y : tensor<77x96xbf16>, tensor<96xbf16> -> tensor<77x96xbf16>
    %b = kiln.sigmoid %a : tensor<77x96xbf16>
    // after
    %b = kiln.elementwise %x, %y : (tensor<77x96xbf16>, tensor<96xbf16>) -> tensor<77x96xbf16> {
    ^bb0(%xs: f32, %ys: f32):
      %m = arith.mulf %xs, %ys : f32
      ... %m rounded to bf16, then sigmoid ...
      kiln.yield %s : f32
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

def KilnSplitSlicedMatmuls : Pass<"kiln-split-sliced-matmuls"> {
  let summary = "Run a fused projection whose output is sliced apart as one GEMM per slice of its weight";
  let description = [{
    A matmul of an [N, K] weight read transposed (nn.Linear), maybe plus a bias over its columns, whose output is
    read only by slices of its last dimension (through reshapes that keep it) becomes one matmul per slice, of
    the weight's rows [o, o + n) (and the bias's columns): contiguous runs, so views in the run plan. GPT-2's
    c_attn and gpt-fast's wqkv and w13 then need no slice kernel, and each part's consumer (a SiLU gate, RoPE,
    the attention) sits next to its own GEMM. A constant `[K, N]` weight (an ONNX MatMul's initializer) is cut
    into constants of its columns. A matmul one of whose parts of a weight or bias that is no constant does not
    start on a 16-byte line is left as it was (that part would be copied on every call).

    ```mlir
    // before
    %qkv = kiln.matmul %x, %w transpose_rhs : tensor<8x768xbf16>, tensor<2304x768xbf16> -> tensor<8x2304xbf16>
    %q = kiln.slice %qkv offsets [0, 0] strides [1, 1] : tensor<8x2304xbf16> -> tensor<8x768xbf16>
    // after
    %wq = kiln.slice %w offsets [0, 0] strides [1, 1] : tensor<2304x768xbf16> -> tensor<768x768xbf16>
    %q = kiln.matmul %x, %wq transpose_rhs : tensor<8x768xbf16>, tensor<768x768xbf16> -> tensor<8x768xbf16>
    ```
  }];
}

def KilnFoldMatmulBatch : Pass<"kiln-fold-matmul-batch"> {
  let summary = "Run a batched lhs against a 2-D weight as one GEMM of all its rows";
  let description = [{
    `x @ W` with x [B, S, K] and W [K, N] is one [B*S, K] x [K, N] GEMM: as a batched matmul every batch would
    re-read W (decode shapes: B=32, S=1 means 32 M=1 GEMMs). The lhs is reshaped (a view), the matmul keeps its
    epilogue and config, and the result is reshaped back. Epilogue operands of the full result shape become
    [B*S, N] views; row vectors and scalars are kept. A matmul with a batched rhs, transpose_lhs, or an epilogue
    operand that broadcasts over the batch is left alone.

    ```mlir
    // before
    %y = kiln.matmul %x, %w : tensor<32x1x4096xbf16>, tensor<4096x1024xbf16> -> tensor<32x1x1024xbf16>
    // after
    %x2 = kiln.reshape %x : tensor<32x1x4096xbf16> -> tensor<32x4096xbf16>
    %y2 = kiln.matmul %x2, %w : tensor<32x4096xbf16>, tensor<4096x1024xbf16> -> tensor<32x1024xbf16>
    %y = kiln.reshape %y2 : tensor<32x1024xbf16> -> tensor<32x1x1024xbf16>
    ```
  }];
}

def KilnPadMatmulOperands : Pass<"kiln-pad-matmul-operands"> {
  let summary = "Zero-pad the operands of large bf16/f16 GEMMs whose rows are not whole 16-byte chunks (sm_90a)";
  let description = [{
    sm_90a's TMA GEMM needs K (and N of a [K, N] rhs) to be multiples of 8; other shapes fall back to the
    mma_sync kernel with narrow loads. For a matmul past 64 rows, with N >= 64 and at least 2^30 multiply-adds,
    and no pinned config, the lhs is copied with K padded to a multiple of 8 and the rhs with K and N padded
    (kiln.concat with zeros), epilogue operands that run along N are padded with it, and the result's first N
    columns are sliced out (kiln.slice). Other targets, smaller GEMMs and aligned ones are left alone.

    ```mlir
    // before
    %y = kiln.matmul %a, %b : tensor<2048x2047xbf16>, tensor<2047x2050xbf16> -> tensor<2048x2050xbf16>
    // after kiln-pad-matmul-operands{target=sm_90a}
    %a2 = kiln.concat %a, %zeros_a axis 1 : tensor<2048x2047xbf16>, tensor<2048x1xbf16> -> tensor<2048x2048xbf16>
    %b1 = kiln.concat %b, %zeros_k axis 0 : tensor<2047x2050xbf16>, tensor<1x2050xbf16> -> tensor<2048x2050xbf16>
    %b2 = kiln.concat %b1, %zeros_n axis 1 : tensor<2048x2050xbf16>, tensor<2048x6xbf16> -> tensor<2048x2056xbf16>
    %y2 = kiln.matmul %a2, %b2 : tensor<2048x2048xbf16>, tensor<2048x2056xbf16> -> tensor<2048x2056xbf16>
    %y = kiln.slice %y2 offsets [0, 0] strides [1, 1] : tensor<2048x2056xbf16> -> tensor<2048x2050xbf16>
    ```
  }];
  let options = [
    Option<"target", "target", "::mlir::kiln::Target", /*default=*/"::mlir::kiln::Target::Host",
           "The target: host, sm_80 (both left alone) or sm_90a", [{KILN_TARGET_VALUES}]>,
  ];
}

def KilnSplitKv : Pass<"kiln-split-kv"> {
  let summary = "Split the keys of an attention with too few query tiles to fill the GPU (split-KV decode)";
  let description = [{
    A decode step has one query tile per (batch, KV head): eight blocks at batch 1 with 8 KV heads, on a chip of
    132 multiprocessors. When the query tiles number less than two per multiprocessor and the keys span at least
    two 256-key granules, the attention is rewritten as a split attention (`kv_chunk`: equal chunks of whole
    granules, as many as bring the blocks to about two per multiprocessor) whose per-chunk results
    `kiln.merge_splits` combines by their log-sum-exp: the chunks run as blocks of their own, the merge as a small
    second kernel. The chunk size is the strategy's (kiln::chooseKvChunk, beside kiln-select-config's defaults).
    Attentions with an lse result, an epilogue, a seq-major output, a pinned config or a wgmma default config are
    left alone, and so is everything on the host.

    ```mlir
    // before (kiln-split-kv{target=sm_90a})
    %o = kiln.attention %q, %k, %v : tensor<1x8x4x128xbf16>, tensor<1x8x8192x128xbf16>,
        tensor<1x8x8192x128xbf16> -> tensor<1x8x4x128xbf16>
    // after: 32 chunks of 256 keys, 256 blocks
    %parts, %lse = kiln.attention %q, %k, %v {kv_chunk = 256 : i64} : tensor<1x8x4x128xbf16>,
        tensor<1x8x8192x128xbf16>, tensor<1x8x8192x128xbf16> -> tensor<32x1x8x4x128xf32>, tensor<32x1x8x4xf32>
    %o = kiln.merge_splits %parts, %lse : tensor<32x1x8x4x128xf32>, tensor<32x1x8x4xf32>
        -> tensor<1x8x4x128xbf16>
    ```
  }];
  let options = [
    Option<"target", "target", "::mlir::kiln::Target", /*default=*/"::mlir::kiln::Target::Host",
           "The target: host (left alone), sm_80 or sm_90a", [{KILN_TARGET_VALUES}]>,
  ];
}

def KilnSplitK : Pass<"kiln-split-k"> {
  let summary = "Split the contraction of a matmul with too few output tiles to fill the GPU (split-K)";
  let description = [{
    A decode step's GEMM (M = 32 rows against a 4096 x 4096 weight) has a few dozen output tiles: as many
    blocks, each streaming its whole column panel of the weight through one long K loop, while other
    multiprocessors idle and each block keeps too few bytes in flight. When the default config (mma_sync, or
    wgmma with a decode step's 64-row tiles) leaves fewer output tiles than the chip has multiprocessors and K
    spans enough k-tiles, the matmul is rewritten as a
    split matmul (`k_chunk`: equal chunks of whole k-tiles) whose per-chunk partial products `kiln.sum_splits`
    adds up, taking over the matmul's epilogue: the chunks run as blocks of their own, the sum as a small second
    kernel. The chunk is the strategy's (kiln::chooseKChunk, beside kiln-select-config's defaults). Matmuls with a
    pinned config or the 128-row wgmma config are left alone, and so is everything on the host.

    ```mlir
    // before (kiln-split-k{target=sm_90a})
    %y = kiln.matmul %x, %w : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<32x4096xbf16>
    // after: 4 chunks of 1024
    %parts = kiln.matmul %x, %w {k_chunk = 1024 : i64}
        : tensor<32x4096xbf16>, tensor<4096x4096xbf16> -> tensor<4x32x4096xf32>
    %y = kiln.sum_splits %parts : tensor<4x32x4096xf32> -> tensor<32x4096xbf16>
    ```
  }];
  let options = [
    Option<"target", "target", "::mlir::kiln::Target", /*default=*/"::mlir::kiln::Target::Host",
           "The target: host (left alone), sm_80 or sm_90a", [{KILN_TARGET_VALUES}]>,
  ];
}

def KilnExpandPagedAttention : Pass<"kiln-expand-paged-attention"> {
  let summary = "Write paged attention as attention over kiln.gather_pages views of the caches";
  let description = [{
    `kiln.paged_attention` becomes a `kiln.attention` of q over `kiln.gather_pages` of the k and v caches, with
    `seq_lens` as its mod operand and a mask_mod that lets query `i` of sequence `b` see the keys
    `j <= seq_lens[b] - Sq + i` (`j < seq_lens[b]` for one query row). Tiling reads each key tile from its page;
    the mask's bounds end each sequence's key loop at its length.

    ```mlir
    // before
    %o = kiln.paged_attention %q, %kc, %vc, %table, %lens : tensor<2x32x1x128xbf16>, tensor<64x16x8x128xbf16>,
        tensor<64x16x8x128xbf16>, tensor<2x32xi32>, tensor<2xi32> -> tensor<2x32x1x128xbf16>
    // after
    %k = kiln.gather_pages %kc, %table, %lens : ... -> tensor<2x8x512x128xbf16>
    %v = kiln.gather_pages %vc, %table, %lens : ... -> tensor<2x8x512x128xbf16>
    %o = kiln.attention %q, %k, %v mod_operands(%lens : tensor<2xi32>) mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %l: tensor<2xi32>):
      %n = tensor.extract %l[%b] : tensor<2xi32>
      %len = arith.index_cast %n : i32 to index
      %visible = arith.cmpi slt, %j, %len : index
      kiln.yield %visible : i1
    } {scale = 0.0883883461 : f32} : ... -> tensor<2x32x1x128xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::tensor::TensorDialect"];
}

def KilnPackGqaDecode : Pass<"kiln-pack-gqa-decode"> {
  let summary = "Run a grouped-query decode step as multi-head attention of the group's query rows";
  let description = [{
    With one query row, q [B, Hq, 1, D] of grouped-query attention is also [B, Hkv, Hq / Hkv, D] (a view): the
    q heads that share a KV head become that head's query rows, so each KV head is read once and the rows fill
    the kernel's query tile. The output (and lse) is viewed back as [B, Hq, 1, ...]. The single row sees every
    key under the causal mask, so the packed attention has none. An output stored seq-major (`out_layout`) is the
    same memory with one row. An attention with a mask, an epilogue, or seq-major q, k and v is left alone (run
    this before kiln-fuse-epilogue).

    ```mlir
    // before
    %o = kiln.attention %q, %k, %v causal : tensor<2x32x1x128xbf16>, tensor<2x8x900x128xbf16>,
        tensor<2x8x900x128xbf16> -> tensor<2x32x1x128xbf16>
    // after
    %q2 = kiln.reshape %q : tensor<2x32x1x128xbf16> -> tensor<2x8x4x128xbf16>
    %o2 = kiln.attention %q2, %k, %v : tensor<2x8x4x128xbf16>, tensor<2x8x900x128xbf16>,
        tensor<2x8x900x128xbf16> -> tensor<2x8x4x128xbf16>
    %o = kiln.reshape %o2 : tensor<2x8x4x128xbf16> -> tensor<2x32x1x128xbf16>
    ```
  }];
}

def KilnFoldHeadTransposes : Pass<"kiln-fold-head-transposes"> {
  let summary = "Let attention and RoPE read [B, S, H, D] directly instead of transposing to [B, H, S, D]";
  let description = [{
    A transpose that keeps the last dimension moves from a rope's input to its result (the rope's `seq_dim`
    follows it); an attention whose q, k and v are all [0, 2, 1, 3] transposes becomes a seq-major attention
    (`layout = "bshd"`) of their inputs with its output transposed back, which folds against the transpose an
    exporter writes after attention; an attention whose output alone is transposed back stores [B, S, H, D]
    directly (`out_layout = "bshd"`). Each transpose removed is a kernel that copied a whole tensor. An attention
    with an epilogue is left alone (run this before kiln-fuse-epilogue).

    ```mlir
    // before
    %qt = kiln.transpose %q [0, 2, 1, 3] : tensor<1x77x8x64xbf16> -> tensor<1x8x77x64xbf16>
    %qr = kiln.rope %qt, %cos, %sin : tensor<1x8x77x64xbf16>, tensor<77x32xbf16>, tensor<77x32xbf16>
    ... %kt, %vt likewise
    %o = kiln.attention %qr, %kt, %vt causal : ... -> tensor<1x8x77x64xbf16>
    %ot = kiln.transpose %o [0, 2, 1, 3] : tensor<1x8x77x64xbf16> -> tensor<1x77x8x64xbf16>
    // after
    %qr = kiln.rope %q, %cos, %sin {seq_dim = 1 : i64} : tensor<1x77x8x64xbf16>, ...
    %ot = kiln.attention %qr, %k, %v causal {layout = "bshd"} : ... -> tensor<1x77x8x64xbf16>
    ```
  }];
}

def KilnOutlineKernels : Pass<"kiln-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Split each function into kernels and a host plan that calls them";
  let description = [{
    Every compute op of the kiln dialect — a (fused) matmul or attention, a row kernel, and each remaining
    elementwise or data-movement op — moves into its own private `func.func` marked `kiln.kernel`, whose
    last arguments are destinations for its results (`bufferization.materialize_in_destination`). The original
    function becomes the host plan: it allocates a destination for each kernel result and calls the kernels in
    order, with explicit buffers once bufferized. Constants and reshapes (views) stay in the plan.

    ```mlir
    // after
    func.func private @block_k0_matmul(%x: tensor<77x512xf32>, %w: tensor<512x512xf32>,
                                       %out: tensor<77x512xf32>) -> tensor<77x512xf32> attributes {kiln.kernel} {
      %y = kiln.matmul %x, %w : ...
      %r = bufferization.materialize_in_destination %y in %out : ...
      return %r : tensor<77x512xf32>
    }
    func.func @block(%x: tensor<77x512xf32>, %w: tensor<512x512xf32>) -> tensor<77x512xf32> {
      %buf = tensor.empty() : tensor<77x512xf32>
      %y = call @block_k0_matmul(%x, %w, %buf) : ...
      return %y : tensor<77x512xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect", "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnUpdateCachesInPlace : Pass<"kiln-update-caches-in-place", "::mlir::ModuleOp"> {
  let summary = "Write the paged KV caches of each kiln.append_kv kernel in place (GPU plans)";
  let description = [{
    In a plan (after kiln-outline-kernels), the call of each append kernel gets its cache operands as its
    destinations instead of new buffers, and the kernel is marked `kiln.updates_in_place`: it writes only the
    new rows, and the caches it returns are the buffers it was given. The old caches must be dead after the call:
    a later use (or returning the old cache), a cache that is a constant of the program, or one buffer for both
    caches is an error that names the cache.

    ```mlir
    // before
    %e0 = tensor.empty() : tensor<64x16x8x128xbf16>
    %e1 = tensor.empty() : tensor<64x16x8x128xbf16>
    %kc2, %vc2 = call @step_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %e0, %e1) : ...
    // after
    %kc2, %vc2 = call @step_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %kc, %vc) : ...
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::tensor::TensorDialect"];
}

def KilnFuseSplitSums : Pass<"kiln-fuse-split-sums", "::mlir::ModuleOp"> {
  let summary = "Sum a split matmul's chunks in the glue kernel that reads the sum, not a kernel of its own (GPU plans)";
  let description = [{
    In a plan (after kiln-outline-kernels), the call of a kiln.sum_splits kernel whose result (through reshapes)
    only kernels read, each per element, goes: as RoPE's input, the KV append's new rows, a sum's epilogue
    operand, or the row tiles of a row kernel (a norm). Each reader's kernel takes the sum's inputs (the chunks,
    the epilogue's operands) instead, and its body computes the sum and the reshapes before its op. The GPU
    kernels compute such an operand per element in the thread that reads it, with the sum kernel's arithmetic
    (chunks added in order, the epilogue, rounding to the sum's element type). Several readers each add up the
    chunks again, so they may read at most 16 chunks between them. A sum read by anything else (the plan's
    result, a matmul), or whose inputs an in-place append between the sum and a reader may write, stays.

    ```mlir
    // before
    %s = call @step_k2_sum_splits(%parts, %e0) : (tensor<4x1x4096xf32>, tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %q = kiln.reshape %s : tensor<1x4096xbf16> -> tensor<1x32x128xbf16>
    %r = call @step_k3_rope(%q, %cos, %sin, %e1) : ...
    // after: @step_k3_rope(%parts, %cos, %sin, %e1) computes kiln.sum_splits and kiln.reshape before kiln.rope
    %r = call @step_k3_rope(%parts, %cos, %sin, %e1) : ...
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::tensor::TensorDialect"];
}

def KilnSelectConfig : Pass<"kiln-select-config"> {
  let summary = "Attach a #kiln.config (tiles, warps, stages, lowering) to every kernel op";
  let description = [{
    Chooses the strategy of each matmul, attention, softmax, rms_norm and layer_norm from the target and the
    op's shapes, and records it as the op's `kiln.config` attribute. An op that already carries a config keeps
    it, so tests and the autotuner can pin one.

    - `host`: tiles sized for the CPU caches, clamped to the problem (a 1-row matmul gets a 1-row tile).
    - `sm_80`: ldmatrix + mma.sync tiles (128x128x32 GEMM, 64x128x32 when M <= 64; 4 warps, 3 stages;
      attention 128 query rows x 128 keys, 128 x 64 for head dim <= 64, one warp per 16 rows).
    - `sm_90a`: matmuls past 64 rows and with N >= 64 (bf16/f16 in 16-byte rows) get the `"wgmma"` kernel:
      128 x 256 x 64 tiles (two warpgroups, 4 stages) while those give each of the 132 multiprocessors a tile,
      128 x 128 while half get one, else 128 x 64. bf16/f16 attention with equal head dims of 64 or 128 and
      at least 33 query rows gets the `"wgmma"` attention kernel: the sm_80 tiles, except 64-row tiles up to
      1024 keys (64 x 32 at head dim 128 up to 512 keys and at head dim 64 up to 160), pipelined within the
      warpgroup, or sequential (`stages = 1`) on a few key tiles: up to 192 keys at head dim 64, 128 at 128. Decode-shaped matmuls and attention and the
      row kernels keep the mma_sync kernels, with a 4-stage pipeline (6 for deep-K decode tiles where shared
      memory holds them).

    GPU tiles shrink for small problems to the next power of two at or above the dimension, never below 16; an
    mma_sync matmul with fewer tiles than the GPU has multiprocessors (small M, as in decoding) gets narrower
    column tiles, down to 32.

    ```mlir
    // before
    %y = kiln.matmul %a, %b : tensor<77x512xf32>, tensor<512x64xf32> -> tensor<77x64xf32>
    // after kiln-select-config{target=host}
    %y = kiln.matmul %a, %b {kiln.config = #kiln.config<tile = [64, 64, 64], warps = 1, stages = 1,
                                                          lowering = "host">} : ...
    ```
  }];
  let options = [
    Option<"target", "target", "::mlir::kiln::Target", /*default=*/"::mlir::kiln::Target::Host",
           "Target to choose for: host, sm_80 or sm_90a", [{KILN_TARGET_VALUES}]>,
  ];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnTile : Pass<"kiln-tile"> {
  let summary = "Tile kernel ops into loops over static, padded tiles";
  let description = [{
    Every op with a `#kiln.config` becomes explicit loops over tiles of the configured sizes:

    - `kiln.matmul`: `scf.forall` over (batch..., BM rows, BN columns) of the output, an `scf.for` over BK-wide
      slices of the contraction inside, tile-sized `kiln.matmul` ops accumulating in f32.
    - `kiln.attention`: `scf.forall` over (batch, head, BQ query rows); an `scf.for` over BK key tiles builds the
      row of scaled, masked scores, a `kiln.softmax` normalises it, a second `scf.for` accumulates P V. With
      `causal`, both loops stop at the last key tile the query tile can see, and only tiles that straddle the
      diagonal (or the end of the keys) are masked.
    - row ops (`kiln.softmax`, `kiln.logsumexp` and single-axis `kiln.reduce` along the last axis,
      `kiln.rms_norm`, `kiln.layer_norm`): `scf.forall` over blocks of rows (a single row as a `[1, D]` view),
      carrying the op's config; with a GPU `"rows"` config its iterations map onto thread blocks
      (`#gpu.block<linear_dim_*>`).

    Sizes that do not divide the tile are handled by padding the tiles that run past the edge (zeros for
    contraction operands, -inf for scores) and storing only their valid part; every tile has a static shape.

    ```mlir
    // after kiln-tile, for a matmul with tile = [64, 64, 32]
    %r = scf.forall (%i, %j) = (0, 0) to (77, 128) step (64, 64) shared_outs(%o = %empty) -> ... {
      %acc = scf.for %k = %c0 to %c512 step %c32 iter_args(%a = %zero) -> (tensor<64x64xf32>) {
        %p = kiln.matmul %lhs_tile, %rhs_tile : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
        %s = kiln.add %a, %p : ...
        scf.yield %s : tensor<64x64xf32>
      }
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"];
}

def KilnOnlineSoftmax : Pass<"kiln-online-softmax"> {
  let summary = "Fuse a tiled softmax and its consumer into the running max / running sum recurrence";
  let description = [{
    Rewrites the form kiln-tile gives attention — a loop writing score tiles into a row, `kiln.softmax` over
    the row, a loop accumulating `acc + f(P_tile)` over the same tiles — into one loop that carries the running
    row max `m`, the running sum `l` and the accumulator, rescaling the accumulator by `exp2(m_old - m_new)` at
    every tile (the FlashAttention algorithm). Scores are kept in base 2 (`exp2`, with log2(e) folded into the
    score scale); the result is `acc / l`, and a `kiln.logsumexp` of the row becomes `m ln 2 + ln l`.
    The full-row softmax and the row buffer disappear. Softmaxes of any other form are left alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def KilnSplitMaskedTiles : Pass<"kiln-split-masked-tiles"> {
  let summary = "Split a tile loop into the tiles that need no mask and those that do";
  let description = [{
    A loop over tiles whose body branches on `scf.if (iv >= bound)`, with `bound` computed before the loop (the
    first key tile that needs a mask, as kiln-tile writes attention), becomes two loops: the iterations before
    the first one at or past `bound` run the `else` region, the rest the `then` region, each without the branch.
    A branch marked `kiln.one_masked_tile` (at most one iteration reaches the bound: an attention masking only
    its last, partial key tile) becomes the loop and that one iteration under an `scf.if`. The GPU then runs
    the unmasked tiles without mask arithmetic and without a branch between tensor-core instructions.

    ```mlir
    // before
    scf.for %j = %c0 to %end step %c64 iter_args(...) {
      %needs = arith.cmpi sge, %j, %from : index
      %s = scf.if %needs -> tensor<128x64xf32> { masked } else { plain }
      ...
    }
    // after: scf.for %j = %c0 to %split ... { plain ... }, then scf.for %j = %split to %end ... { masked ... }
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def KilnDecomposeRows : Pass<"kiln-decompose-rows"> {
  let summary = "Write the row ops of tiles as f32 row reductions and elementwise ops";
  let description = [{
    Inside tiled kernels (an op nested in an `scf.forall`), rewrites `kiln.softmax` along the last axis,
    `kiln.rms_norm`, `kiln.layer_norm` and `kiln.logsumexp` (last axis) as the primitives every backend lowers:
    a cast to f32, `kiln.reduce ... keep_dims` along the last axis, elementwise ops that broadcast the reduced
    `[R, 1]` column over the row, and a cast back. The host and the GPU run this same math; the GPU lowers each
    primitive by its layout (`kiln-assign-layouts`).

    ```mlir
    // before
    %p = kiln.softmax %t axis 1 : tensor<4x512xbf16>
    // after
    %x = kiln.cast %t : tensor<4x512xbf16> -> tensor<4x512xf32>
    %m = kiln.reduce max %x axes [1] keep_dims : tensor<4x512xf32> -> tensor<4x1xf32>
    %d = kiln.sub %x, %m : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>
    %e = kiln.exp %d : tensor<4x512xf32>
    %s = kiln.reduce sum %e axes [1] keep_dims : tensor<4x512xf32> -> tensor<4x1xf32>
    %q = kiln.div %e, %s : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>
    %p = kiln.cast %q : tensor<4x512xf32> -> tensor<4x512xbf16>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

def KilnAssignLayouts : Pass<"kiln-assign-layouts"> {
  let summary = "Give every tile value of a GPU row kernel its register layout";
  let description = [{
    For each tiled row kernel (an `scf.forall` carrying a `#kiln.config` with `lowering = "rows"`), chooses the
    `#kiln.row_layout` of its tiles — `warps * 32 / rows` threads per row, and the widest vector of at most 16
    bytes that divides the row of every operand — and writes it as the `kiln.layout` attribute of each kiln op
    in the loop body, which the GPU lowering reads.

    ```mlir
    // a forall with #kiln.config<tile = [1], warps = 8, stages = 1, lowering = "rows"> over bf16 rows of 4096:
    %m = kiln.reduce max %x axes [1] keep_dims {kiln.layout = #kiln.row_layout<threads_per_row = 256, vector = 8>}
        : tensor<1x4096xf32> -> tensor<1x1xf32>
    ```
  }];
  let dependentDialects = ["::mlir::kiln::KilnDialect"];
}

#endif // KILN_TRANSFORMS_PASSES_TD
