//===- KilnOps.td - Operations of the kiln dialect ---------*- tablegen -*-===//
//
// The graph-level op set: what a Transformer block is made of. Each op documents its shape rules; the C++
// verifiers enforce them and name the operand and dimension at fault, because these ops are what importers and
// the Python tracer build from user input.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_KILNOPS_TD
#define KILN_DIALECT_KILN_KILNOPS_TD

include "Dialect/Kiln/KilnDialect.td"
include "Dialect/Kiln/KilnAttrs.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Kiln_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Kiln_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Kiln_BoolTensor : StaticShapeTensorOf<[I1]>;
def Kiln_NumberTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64]>;
def Kiln_AnyTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64, I1]>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant", [ConstantLike, Pure]> {
  let summary = "constant tensor or weight";
  let description = [{
    A tensor whose value is known at compile time: small constants inline as `dense<...>`, weights as
    `dense_resource<...>` blobs. The result type is the type of the attribute.

    ```mlir
    %eps = kiln.constant dense<1.0e-05> : tensor<f32>
    %w = kiln.constant dense_resource<blk0_w_qkv> : tensor<4096x6144xbf16>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kiln_AnyTensor:$result);
  let builders = [OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
    build($_builder, $_state, value.getType(), value);
  }]>];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Kiln_MatmulOp : Kiln_Op<"matmul", [Pure, IsolatedFromAbove]> {
  let summary = "batched matrix multiplication with broadcast batch dimensions and an optional epilogue";
  let description = [{
    `result[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n]`, with `transpose_lhs` / `transpose_rhs` reading
    the operand as its last two dimensions swapped. Both operands have rank >= 2; the leading (batch) dimensions
    broadcast as in numpy, so a weight `[K, N]` multiplies an activation `[B, S, K]`. Operands share an element
    type; without an epilogue the result has that type or f32 (f16 x f16 -> f32 accumulates and stores f32).

    An `epilogue` (written by `kiln-fuse-epilogue`) is applied to every output element in registers before it
    is stored: a region whose block arguments are the f32 accumulator and one f32 element of each epilogue
    operand (each broadcast, numpy rules, to the result shape), ending in `kiln.yield` of the f32 value to
    store. The region is isolated from above: it computes from its arguments and its own constants, so the op
    can move into a kernel of its own. With an epilogue the result may have any float element type.

    `fp32_precision` (f32 operands only) says how a GPU multiplies them: `"tf32"` (the default) on TF32 tensor
    cores, each input rounded to 10 mantissa bits (as torch with `fp32_precision = "tf32"`), or `"ieee"` to f32
    accuracy, each input split into a TF32 value and a TF32 remainder and three of their products summed (as
    CUTLASS's 3xTF32), at about a third of the speed. The host backend multiplies in f32 either way.

    `k_chunk = C` splits the contraction into `N = ceil(K / C)` chunks of `C` consecutive k (the last one
    shorter) and multiplies over each on its own (split-K, as a decode step's GEMM needs to fill the GPU): the
    result `[N, ..., M, N]` f32 holds each chunk's partial product, and `kiln.sum_splits` adds them up. An
    epilogue is not taken (it belongs to the sum).

    ```mlir
    %y = kiln.matmul %x, %w transpose_rhs
        : tensor<2x77x512xbf16>, tensor<1024x512xbf16> -> tensor<2x77x1024xbf16>
    %z = kiln.matmul %x, %w epilogue(%bias : tensor<1024xbf16>) {
    ^bb0(%acc: f32, %b: f32):
      %s = arith.addf %acc, %b : f32
      kiln.yield %s : f32
    } : tensor<2x77x512xbf16>, tensor<512x1024xbf16> -> tensor<2x77x1024xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       Variadic<Kiln_FloatTensor>:$epilogue_operands, OptionalAttr<StrAttr>:$fp32_precision,
                       OptionalAttr<I64Attr>:$k_chunk);
  let results = (outs Kiln_FloatTensor:$result);
  let regions = (region MaxSizedRegion<1>:$epilogue);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`epilogue` `(` ($epilogue_operands^ `:` type($epilogue_operands))? `)` $epilogue^)? attr-dict
    `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transposeLhs, CArg<"bool", "false">:$transposeRhs)>,
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   "bool":$transposeLhs, "bool":$transposeRhs), [{
      build($_builder, $_state, result, lhs, rhs, transposeLhs, transposeRhs, ::mlir::ValueRange{},
            ::mlir::StringAttr(), ::mlir::IntegerAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// True when an epilogue has been fused into the op.
    bool hasEpilogue() { return !getEpilogue().empty(); }
    /// The contraction size K (from the lhs, as stored).
    int64_t getContractionSize();
    /// The number of contraction chunks with `k_chunk` (the leading dimension of the result), else 0.
    int64_t getKChunkCount();
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Kiln_SumSplitsOp : Kiln_Op<"sum_splits", [Pure, IsolatedFromAbove]> {
  let summary = "adds up the per-chunk partial products of a split-K matmul, with the matmul's epilogue";
  let description = [{
    `parts : [N, ...]` (f32) are the results of a `kiln.matmul` with `k_chunk`: chunk `n`'s partial product.
    The result (the shape of one chunk, any float type) is `sum_n parts[n]`, added in f32 in chunk order, then
    finished by the optional `epilogue` exactly as `kiln.matmul`'s (the f32 sum and one f32 element of each
    epilogue operand, broadcast to the result's shape, in; `kiln.yield` of the f32 value to store out). Without
    an epilogue the sum is rounded to the result's element type.

    ```mlir
    %y = kiln.sum_splits %parts epilogue(%bias : tensor<4096xbf16>) {
    ^bb0(%acc: f32, %b: f32):
      %s = arith.addf %acc, %b : f32
      kiln.yield %s : f32
    } : tensor<4x32x4096xf32> -> tensor<32x4096xbf16>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$parts, Variadic<Kiln_FloatTensor>:$epilogue_operands);
  let results = (outs Kiln_FloatTensor:$result);
  let regions = (region MaxSizedRegion<1>:$epilogue);
  let assemblyFormat = [{
    $parts (`epilogue` `(` ($epilogue_operands^ `:` type($epilogue_operands))? `)` $epilogue^)? attr-dict
    `:` type($parts) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// True when an epilogue finishes each element.
    bool hasEpilogue() { return !getEpilogue().empty(); }
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Kiln_YieldOp : Kiln_Op<"yield", [Pure, Terminator, ReturnLike, ParentOneOf<["MatmulOp", "AttentionOp", "SumSplitsOp", "ElementwiseOp"]>]> {
  let summary = "the value a kiln.matmul, kiln.attention or kiln.elementwise region yields";
  let description = [{
    Ends a `kiln.matmul`, `kiln.attention` or `kiln.sum_splits` epilogue region with the f32 value to store
    for the current output element, an attention's `score_mod` with the f32 score, its `mask_mod` with the i1
    visibility, a `kiln.elementwise` body with the element in its compute type.
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

def Kiln_AttentionOp : Kiln_Op<"attention", [Pure, IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention (MHA, GQA, MQA), optionally causal or masked";
  let description = [{
    `out = softmax(scale * q k^T + mask) v` per batch and head, in the layout `[batch, heads, seq, head_dim]`:

    - `q : [B, Hq, Sq, D]`, `k : [B, Hkv, Sk, D]`, `v : [B, Hkv, Sk, Dv]`, `out : [B, Hq, Sq, Dv]`.
    - Grouped-query attention follows from the head counts: `Hq` must be a multiple of `Hkv`; q head `h` reads
      k/v head `h / (Hq / Hkv)` (`Hkv = 1` is multi-query attention).
    - `scale` defaults to `1 / sqrt(D)`.
    - `causal` masks key `j` for query `i` when `j > i + (Sk - Sq)`: the mask is aligned to the bottom right, as
      in decoding and chunked prefill, and needs `Sq <= Sk`.
    - `mask` is an optional additive bias broadcastable (numpy rules) to `[B, Hq, Sq, Sk]`, of any float
      element type (it is added in f32).
    - The optional second result is the log-sum-exp of each score row, `lse : [B, Hq, Sq]` in f32, as a
      backward pass or a split-k merge needs it; `-inf` for a row that sees no key.
    - An optional `epilogue` (written by `kiln-fuse-epilogue`) finishes each output element before it is
      stored, exactly as on `kiln.matmul`: the f32 output value and one f32 element of each epilogue operand
      (broadcast to the output's shape) in, `kiln.yield` of the f32 value to store out. With an epilogue the
      output may have any float element type.
    - `layout = "bshd"` swaps the heads and sequence dimensions of q, k, v and out: `q : [B, Sq, Hq, D]`, ...,
      `out : [B, Sq, Hq, Dv]`, the layout projections write before any transpose (`kiln-fold-head-transposes`
      sets it). The mask and lse keep their `[B, Hq, Sq, ...]` layout.
    - `out_layout = "bshd"` stores only the output as `[B, Sq, Hq, Dv]`, whatever the layout of q, k and v (an
      output that an exporter transposes back right away); without it the output follows `layout`.
    - An optional `score_mod` region rewrites each score after the scale and the mask (FlexAttention's
      score_mod): block arguments `(score : f32, b, h, q_idx, kv_idx : index)` and one per `mod_operands`
      tensor, `kiln.yield` of the new f32 score. A tanh softcap, ALiBi, a relative-position bias read from a
      table: any chain of pure scalar ops (arith, math, tensor.extract from the operands).
    - An optional `mask_mod` region decides which keys each query sees (FlexAttention's mask_mod): block
      arguments `(b, h, q_idx, kv_idx : index)` and the `mod_operands` tensors, `kiln.yield` of an i1 (true:
      visible). It combines with `causal` (both must hold). The indices are logical: the head of q, positions
      counted from 0 in q and in k whatever `layout` says. Key tiles the mask hides entirely are skipped where
      the mask is a conjunction of linear bounds on q_idx and kv_idx (sliding windows, causal variants) or of
      the bounds `nondecreasing_tables` gives; a query row that sees no key at all gives 0, as one that an all
      -inf additive mask hides does (torch's SDPA, ONNX's Attention and FlashAttention give 0 there too).
    - `nondecreasing_tables` lists mod operands (by position) that the caller promises are nondecreasing, 1-D
      integer tables with at least one entry per query. A mask_mod bound on the key by such a table read at
      `q_idx` (`kv_idx >= first[q_idx]`, `kv_idx <= last[q_idx]`: the key range of each query's sequence in a
      packed batch, a document's span) then limits a query tile's keys by the table at the tile's first and last
      rows, so key tiles outside every row's range are skipped as with linear bounds. So does an equality of
      one such table read at `q_idx + c` and at `kv_idx` (`docs[q_idx] == docs[kv_idx]`: document ids), where
      the table has an entry for every key and every shifted query: the tile searches the table for the runs
      of its first and last rows' entries. A table that decreases makes the skipping wrong: only promise what
      holds (kiln.ops checks the promise on the host).
    - `kv_chunk = C` splits the keys into `N = ceil(Sk / C)` chunks of `C` consecutive keys (the last one
      shorter) and attends over each on its own (split-KV, as flash-decoding does): `out : [N, B, Hq, Sq, Dv]`
      f32 holds each chunk's attention and `lse : [N, B, Hq, Sq]` (required) its log-sum-exp, `-inf` where a row
      sees no key of the chunk (its `out` is then 0). `kiln.merge_splits` combines them into the
      attention over all keys. Masks, mods and `causal` keep their meaning (positions count from the start of
      k); an epilogue and a seq-major output are not taken (they belong to the merge).
    - `fp32_precision` (f32 q, k, v only) says how a GPU multiplies them, as on `kiln.matmul`: `"tf32"` (the
      default) on TF32 tensor cores, `"ieee"` to f32 accuracy by 3xTF32 (both q k^T and P v). The host backend
      multiplies in f32 either way.

    ```mlir
    %o = kiln.attention %q, %k, %v causal
        : tensor<1x32x128x128xbf16>, tensor<1x8x128x128xbf16>, tensor<1x8x128x128xbf16>
        -> tensor<1x32x128x128xbf16>
    %o2, %lse = kiln.attention %q, %k, %v mask(%bias : tensor<1x1x128x128xbf16>) {scale = 0.125 : f32}
        : tensor<1x32x128x128xbf16>, tensor<1x8x128x128xbf16>, tensor<1x8x128x128xbf16>
        -> tensor<1x32x128x128xbf16>, tensor<1x32x128xf32>
    // A 50.0 tanh softcap over a 256-key sliding window.
    %o3 = kiln.attention %q, %k, %v causal score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %cap = arith.constant 50.0 : f32
      %t = math.tanh %s : f32
      ...
      kiln.yield %capped : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %w = arith.constant 256 : index
      %lo = arith.subi %i, %w : index
      %in = arith.cmpi sgt, %j, %lo : index
      kiln.yield %in : i1
    } : tensor<1x32x128x128xbf16>, tensor<1x8x128x128xbf16>, tensor<1x8x128x128xbf16>
        -> tensor<1x32x128x128xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$k, Kiln_FloatTensor:$v,
                       Optional<Kiln_FloatTensor>:$mask,
                       OptionalAttr<F32Attr>:$scale, UnitAttr:$causal, OptionalAttr<StrAttr>:$layout,
                       OptionalAttr<StrAttr>:$out_layout, Variadic<Kiln_FloatTensor>:$epilogue_operands,
                       Variadic<AnyRankedTensor>:$mod_operands, OptionalAttr<I64Attr>:$kv_chunk,
                       OptionalAttr<DenseI64ArrayAttr>:$nondecreasing_tables, OptionalAttr<StrAttr>:$fp32_precision);
  let results = (outs Kiln_FloatTensor:$out, Optional<StaticShapeTensorOf<[F32]>>:$lse);
  let regions = (region MaxSizedRegion<1>:$epilogue, MaxSizedRegion<1>:$score_mod, MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` `(` $mask^ `:` type($mask) `)`)? (`causal` $causal^)?
    (`mod_operands` `(` $mod_operands^ `:` type($mod_operands) `)`)? (`score_mod` $score_mod^)?
    (`mask_mod` $mask_mod^)?
    (`epilogue` `(` ($epilogue_operands^ `:` type($epilogue_operands))? `)` $epilogue^)? attr-dict
    `:` type($q) `,` type($k) `,` type($v) `->` type($out) (`,` type($lse)^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$out, "::mlir::Type":$lse, "::mlir::Value":$q, "::mlir::Value":$k,
                   "::mlir::Value":$v, "::mlir::Value":$mask, "::mlir::FloatAttr":$scale, "bool":$causal), [{
      build($_builder, $_state, out, lse, q, k, v, mask, scale, causal, ::mlir::StringAttr(), ::mlir::StringAttr(),
            ::mlir::ValueRange{}, ::mlir::ValueRange{}, ::mlir::IntegerAttr(), ::mlir::DenseI64ArrayAttr(),
            ::mlir::StringAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// True when an epilogue has been fused into the op.
    bool hasEpilogue() { return !getEpilogue().empty(); }
    /// True when a score_mod or mask_mod region modifies the scores.
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    /// Moves `from`'s score_mod and mask_mod regions, their operands and its fp32_precision onto this op: what
    /// a rewrite that rebuilds the op keeps beyond its operands.
    void takeVariantFrom(AttentionOp from);
    /// The scale applied to q k^T: the attribute, or 1/sqrt(head_dim) when it is absent.
    double getEffectiveScale();
    /// Number of q heads that share one k/v head (1 for plain multi-head attention).
    int64_t getGroupSize();
    /// True with `layout = "bshd"`: q, k and v (and out, unless `out_layout` says otherwise) are [batch, seq,
    /// heads, head_dim].
    bool isSeqMajor();
    /// The dimension of q, k and v that holds the heads (1, or 2 when seq-major).
    int64_t getHeadsDim() { return isSeqMajor() ? 2 : 1; }
    /// The dimension of q, k and v that holds the sequence (2, or 1 when seq-major).
    int64_t getSeqDim() { return isSeqMajor() ? 1 : 2; }
    /// True when the output is stored as [batch, seq, heads, head_dim]: `out_layout`, or else `layout`.
    bool isOutSeqMajor();
    /// The number of key chunks with `kv_chunk` (the leading dimension of both results), else 0.
    int64_t getKvSplits();
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisations and reductions
//===----------------------------------------------------------------------===//

def Kiln_SoftmaxOp : Kiln_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis";
  let description = [{
    `result = exp(x - max(x)) / sum(exp(x - max(x)))` along `axis` (0 <= axis < rank). A row whose every
    element is -inf gives NaN, as torch's and ONNX's softmax do; with `zero_empty_rows` it gives zeros, as an
    attention's probabilities for a query that sees no key (torch's SDPA, ONNX's Attention, FlashAttention).

    ```mlir
    %p = kiln.softmax %s axis 3 : tensor<1x8x77x77xf32>
    %q = kiln.softmax %s axis 3 zero_empty_rows : tensor<1x8x77x77xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis, UnitAttr:$zero_empty_rows);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis (`zero_empty_rows` $zero_empty_rows^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Kiln_MergeSplitsOp : Kiln_Op<"merge_splits", [Pure]> {
  let summary = "combines the per-chunk results of a split-KV attention by their log-sum-exp";
  let description = [{
    `parts : [N, B, H, S, D]` (f32) and `lse : [N, B, H, S]` (f32) are the results of a `kiln.attention` with
    `kv_chunk`: chunk `n`'s attention and its log-sum-exp. The result `[B, H, S, D]` (any float type) is the
    attention over all the keys, `sum_n w_n parts[n] / sum_n w_n` with `w_n = exp(lse[n] - max_n lse[n])`; a
    chunk with `lse = -inf` (no visible key) weighs 0 and its `parts` are not read into the sum, and a row that
    sees no key in any chunk gives 0, as the unsplit attention does.

    ```mlir
    %o = kiln.merge_splits %parts, %lse
        : tensor<16x1x8x4x128xf32>, tensor<16x1x8x4xf32> -> tensor<1x8x4x128xbf16>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$parts, StaticShapeTensorOf<[F32]>:$lse);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$parts `,` $lse attr-dict `:` type($parts) `,` type($lse) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_LogSumExpOp : Kiln_Op<"logsumexp", [Pure]> {
  let summary = "log of the sum of exponentials along one axis, in f32";
  let description = [{
    `result = log(sum(exp(x), axis))`, computed stably as `max + log(sum(exp(x - max)))` and returned in f32
    with `axis` dropped; a row whose every element is -inf gives -inf (the log of an empty sum), as torch's
    logsumexp does. It is the normaliser of a softmax over the same axis, which is why attention's `lse` result
    is one.

    ```mlir
    %lse = kiln.logsumexp %s axis 1 : tensor<64x1024xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_ReduceOp : Kiln_Op<"reduce", [Pure]> {
  let summary = "sum, mean, max or min over a set of axes";
  let description = [{
    Reduces `input` over `axes` (unique, in `[0, rank)`, ascending). With `keep_dims` the reduced axes stay as
    size 1; otherwise they are dropped.

    ```mlir
    %m = kiln.reduce mean %x axes [2] keep_dims : tensor<2x77x512xf32> -> tensor<2x77x1xf32>
    ```
  }];
  let arguments = (ins Kiln_ReduceKind:$kind, Kiln_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keep_dims);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input `axes` $axes (`keep_dims` $keep_dims^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_RmsNormOp : Kiln_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `result = x / sqrt(mean(x^2, last axis) + epsilon) * weight`, with `weight : [D]` where `D` is the last
    dimension of `x`.

    ```mlir
    %y = kiln.rms_norm %x, %w epsilon 1.0e-06 : tensor<1x77x4096xbf16>, tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `epsilon` $epsilon attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Kiln_LayerNormOp : Kiln_Op<"layer_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "LayerNorm over the last dimension, with an optional bias";
  let description = [{
    `result = (x - mean(x)) / sqrt(var(x) + epsilon) * weight + bias` over the last dimension `D`; `weight` and
    `bias` are `[D]`. The variance is the biased (population) one, as in PyTorch and ONNX.

    ```mlir
    %y = kiln.layer_norm %x, %g, %b epsilon 1.0e-05
        : tensor<1x77x768xf32>, tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       Optional<Kiln_FloatTensor>:$bias, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `epsilon` $epsilon attr-dict
    `:` type($input) `,` type($weight) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def Kiln_RopeOp : Kiln_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates pairs of the last dimension `D` (even) of `x : [..., S, D]` by the angles whose cosines and sines are
    `cos, sin : [S, D/2]` (one row per position, so decoding passes the rows of its positions). `seq_dim` names
    another dimension of `x` as the positions, e.g. `seq_dim = 1` for `[B, S, H, D]`.

    - default (rotate-half, as in Llama / GPT-NeoX): pairs are `(x[i], x[i + D/2])`;
    - `interleaved` (as in GPT-J): pairs are `(x[2i], x[2i + 1])`;

    and each pair `(a, b)` becomes `(a cos - b sin, a sin + b cos)`.

    Full tables `cos, sin : [S, D]` give each element of a pair its own factors, as the written-out form
    `x * cos + rotate_half(x) * sin` does with runtime tables (whose halves nothing proves equal): the pair
    `(a, b)` at columns `(i, j)` becomes `(a cos[i] - b sin[i], b cos[j] + a sin[j])`.

    ```mlir
    %qr = kiln.rope %q, %cos, %sin : tensor<1x32x77x128xf32>, tensor<77x64xf32>, tensor<77x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$cos, Kiln_FloatTensor:$sin,
                       UnitAttr:$interleaved, OptionalAttr<I64Attr>:$seq_dim);
  let results = (outs Kiln_FloatTensor:$result);
  let extraClassDeclaration = [{
    /// The dimension of the input that indexes the tables: `seq_dim`, or the one before the last.
    int64_t getPositionDim();
    /// True when the tables are [S, D] (a factor per element) rather than [S, D/2] (a factor per pair).
    bool hasFullTables();
  }];
  let assemblyFormat = [{
    $input `,` $cos `,` $sin (`interleaved` $interleaved^)? attr-dict
    `:` type($input) `,` type($cos) `,` type($sin)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise arithmetic (numpy broadcasting)
//===----------------------------------------------------------------------===//

class Kiln_BinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat([Pure], traits)> {
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Applies the operation elementwise. The operands share an element type, a float or a signed integer; their
    shapes broadcast as in numpy (right-aligned, a dimension of 1 stretches) and the result has the broadcast
    shape. Floats compute in f32 and round once. Integers wrap on overflow (two's complement); `div` truncates
    toward zero, `fmod` and `remainder` follow `div` and floored division; a zero divisor gives 0 (numpy's
    answer, where C has no answer at all); `pow` with a negative exponent gives the truncated 1 / x^-e (0 unless
    x is 1 or -1).

    ```mlir
    %y = kiln.}] # mnemonic # [{ %x, %b : tensor<2x77x512xf32>, tensor<512xf32> -> tensor<2x77x512xf32>
    ```
  }];
  let arguments = (ins Kiln_NumberTensor:$lhs, Kiln_NumberTensor:$rhs);
  let results = (outs Kiln_NumberTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let builders = [OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs), [{
    build($_builder, $_state, inferBroadcastType(lhs.getType(), rhs.getType()), lhs, rhs);
  }]>];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyBroadcastingElementwise(getOperation());
    }
  }];
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "addition", [Commutative]>;
def Kiln_SubOp : Kiln_BinaryOp<"sub", "subtraction">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "multiplication", [Commutative]> { let hasFolder = 1; }
def Kiln_DivOp : Kiln_BinaryOp<"div", "division"> { let hasFolder = 1; }
def Kiln_MaxOp : Kiln_BinaryOp<"max", "maximum", [Commutative]>;
def Kiln_MinOp : Kiln_BinaryOp<"min", "minimum", [Commutative]>;
def Kiln_PowOp : Kiln_BinaryOp<"pow", "power">;
def Kiln_FmodOp : Kiln_BinaryOp<"fmod", "remainder of truncated division (the sign of lhs; C's fmod)">;
def Kiln_RemainderOp : Kiln_BinaryOp<"remainder", "remainder of floored division (the sign of rhs; Python's %)">;

def Kiln_ElementwiseOp : Kiln_Op<"elementwise", [Pure, IsolatedFromAbove]> {
  let summary = "a fused chain of elementwise ops: one scalar body evaluated per output element";
  let description = [{
    What `kiln-fuse-elementwise` makes of a chain of elementwise ops (arithmetic, activations, comparisons,
    selects, casts) that ends in one result: one kernel that reads each input once per element and stores the
    result once, instead of a kernel and a tensor in memory per op. The inputs broadcast to the result's shape as
    in numpy. The body takes one scalar per input in its compute type (f32 for f16/bf16 and f32, the type itself
    for i32, i64 and i1) and yields the result element in its compute type, which the store rounds once. The
    body holds pure scalar ops only (arith, math); intermediates that the unfused ops would store in f16/bf16 are
    rounded to that type in it, so the fused chain computes the same bits as the ops it replaces.

    ```mlir
    %y = kiln.elementwise %x, %b : (tensor<77x96xbf16>, tensor<96xbf16>) -> tensor<77x96xbf16> {
    ^bb0(%xs: f32, %bs: f32):
      %s = arith.addf %xs, %bs : f32
      %r = arith.maximumf %s, %zero : f32
      kiln.yield %r : f32
    }
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs);
  let results = (outs Kiln_AnyTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` `(` type($inputs) `)` `->` type($result) $body";
  let hasRegionVerifier = 1;
}

def Kiln_CompareOp : Kiln_Op<"compare", [Pure]> {
  let summary = "elementwise comparison with numpy broadcasting, to a bool tensor";
  let description = [{
    `result = lhs <predicate> rhs` elementwise. The operands share an element type (a float, an integer or i1);
    their shapes broadcast as in numpy. Floats compare ordered: a NaN makes every predicate false but `ne`.

    ```mlir
    %keep = kiln.compare ne %mask, %zero : tensor<2x77xi64>, tensor<i64> -> tensor<2x77xi1>
    ```
  }];
  let arguments = (ins Kiln_ComparePredicate:$predicate, Kiln_AnyTensor:$lhs, Kiln_AnyTensor:$rhs);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_SelectOp : Kiln_Op<"select", [Pure]> {
  let summary = "elementwise choice between two tensors (ONNX Where) with numpy broadcasting";
  let description = [{
    `result = condition ? on_true : on_false`, elementwise; the three shapes broadcast together. The two
    choices share the result's element type: a float, or an integer or i1 (a choice moves no arithmetic).

    ```mlir
    %s = kiln.select %causal, %scores, %neg_inf
        : tensor<77x77xi1>, tensor<1x8x77x77xf32>, tensor<f32> -> tensor<1x8x77x77xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$condition, Kiln_AnyTensor:$on_true, Kiln_AnyTensor:$on_false);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict
    `:` type($condition) `,` type($on_true) `,` type($on_false) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise functions and activations
//===----------------------------------------------------------------------===//

class Kiln_UnaryOp<string mnemonic, string formula, list<Trait> traits = [],
                   TypeConstraint tensorType = Kiln_FloatTensor>
    : Kiln_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType], traits)> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for every element.\n\n```mlir\n%y = kiln." # mnemonic #
                    " %x : tensor<4x8xf32>\n```";
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_NegOp : Kiln_UnaryOp<"neg", "-x (integers wrap: -INT_MIN is INT_MIN)", [], Kiln_NumberTensor> {
  let hasFolder = 1;
}
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "e^x">;
def Kiln_LogOp : Kiln_UnaryOp<"log", "ln(x)">;
def Kiln_SqrtOp : Kiln_UnaryOp<"sqrt", "sqrt(x)">;
def Kiln_RsqrtOp : Kiln_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Kiln_ReciprocalOp : Kiln_UnaryOp<"reciprocal", "1 / x">;
def Kiln_AbsOp : Kiln_UnaryOp<"abs", "|x| (integers wrap: |INT_MIN| is INT_MIN)", [], Kiln_NumberTensor>;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "tanh(x)">;
def Kiln_ErfOp : Kiln_UnaryOp<"erf", "erf(x)">;
def Kiln_SinOp : Kiln_UnaryOp<"sin", "sin(x)">;
def Kiln_CosOp : Kiln_UnaryOp<"cos", "cos(x)">;
def Kiln_FloorOp : Kiln_UnaryOp<"floor", "floor(x), the greatest integer not above x">;
def Kiln_CeilOp : Kiln_UnaryOp<"ceil", "ceil(x), the least integer not below x">;
def Kiln_SigmoidOp : Kiln_UnaryOp<"sigmoid", "1 / (1 + e^-x)">;
def Kiln_ReluOp : Kiln_UnaryOp<"relu", "max(x, 0)">;
def Kiln_SiluOp : Kiln_UnaryOp<"silu", "x * sigmoid(x)">;

def Kiln_GeluOp : Kiln_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise GELU, exact or tanh-approximated";
  let description = [{
    `approximate(none)` (the default) computes `x / 2 * (1 + erf(x / sqrt(2)))`; `approximate(tanh)` computes
    `x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`, as in GPT-2.

    ```mlir
    %y = kiln.gelu %x approximate(tanh) : tensor<2x77x3072xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input,
                       DefaultValuedAttr<Kiln_GeluApproximation,
                                         "::mlir::kiln::GeluApproximation::none">:$approximate);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input (`approximate` `(` $approximate^ `)`)? attr-dict `:` type($input)";
}

def Kiln_CastOp : Kiln_Op<"cast", [Pure]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Converts every element to the result's element type (float <-> float rounds to nearest even, float -> int
    truncates toward zero and saturates: NaN gives 0, a value beyond the integer type's range its minimum or
    maximum, on every target; int -> float rounds; to i1, "not zero"). The shape is unchanged.

    ```mlir
    %h = kiln.cast %x : tensor<2x77x512xf32> to tensor<2x77x512xbf16>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Kiln_TransposeOp : Kiln_Op<"transpose", [Pure]> {
  let summary = "permutation of dimensions";
  let description = [{
    `result` dimension `i` is `input` dimension `permutation[i]`.

    ```mlir
    %kt = kiln.transpose %k [0, 1, 3, 2] : tensor<1x8x77x64xf32> -> tensor<1x8x64x77xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure]> {
  let summary = "same elements in row-major order, another shape";
  let description = [{
    ```mlir
    %h = kiln.reshape %x : tensor<2x77x512xf32> -> tensor<2x77x8x64xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_DimOp : Kiln_Op<"dim", [Pure]> {
  let summary = "the extent of one dimension of a tensor, kept symbolic in a tiled kernel";
  let description = [{
    The size of dimension `dim` of `source`. Unlike `tensor.dim` it does not fold to the static size: kiln-tile
    reads a GPU kernel's lengths through it, so that the loop bounds and masks of the tiled loop nest stay
    expressions of the length and the kernel built from them serves every length (its size parameters). The
    host backend lowers it to the static size.

    ```mlir
    %sk = kiln.dim %k[2] : tensor<1x8x300x64xbf16>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$source, I64Attr:$dim);
  let results = (outs Index:$result);
  let assemblyFormat = "$source `[` $dim `]` attr-dict `:` type($source)";
  let hasVerifier = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [Pure]> {
  let summary = "numpy-style expansion to a larger shape (ONNX Expand)";
  let description = [{
    The input shape is right-aligned against the result shape; each input dimension is 1 (stretched) or equal
    to the result dimension; missing leading dimensions are added.

    ```mlir
    %kv = kiln.broadcast %k : tensor<1x8x1x77x64xf32> -> tensor<1x8x4x77x64xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [Pure]> {
  let summary = "concatenation along one axis";
  let description = [{
    All inputs have the same rank, element type and sizes except along `axis`, where the result size is the sum.

    ```mlir
    %r = kiln.concat %a, %b axis 3 : tensor<1x8x77x32xf32>, tensor<1x8x77x32xf32> -> tensor<1x8x77x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [Pure]> {
  let summary = "strided window of a tensor";
  let description = [{
    `result[i...] = input[offsets + i * strides]`; the result shape gives the sizes. Offsets are non-negative,
    strides positive, and the last element read must lie inside the input.

    ```mlir
    %lo = kiln.slice %x offsets [0, 0, 0, 0] strides [1, 1, 1, 1]
        : tensor<1x8x77x64xf32> -> tensor<1x8x77x32xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$input, DenseI64ArrayAttr:$offsets, DenseI64ArrayAttr:$strides);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $input `offsets` $offsets `strides` $strides attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The element offset in the input of the one contiguous (row-major) run of elements this slice takes, or
    /// nullopt when they are not one run.
    std::optional<int64_t> getContiguousOffset();
  }];
}

def Kiln_GatherOp : Kiln_Op<"gather", [Pure]> {
  let summary = "gather slices of a table by integer indices (embedding lookup, ONNX Gather)";
  let description = [{
    `result = table[:axis] ++ indices.shape ++ table[axis+1:]`; each index selects a slice of `table` along
    `axis`. Negative indices count from the end, as in ONNX.

    ```mlir
    %e = kiln.gather %embed[%ids] axis 0 : tensor<50257x768xf32>, tensor<2x77xi64> -> tensor<2x77x768xf32>
    ```
  }];
  let arguments = (ins Kiln_AnyTensor:$table, Kiln_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Kiln_AnyTensor:$result);
  let assemblyFormat = [{
    $table `[` $indices `]` `axis` $axis attr-dict `:` type($table) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Paged KV cache (serving)
//===----------------------------------------------------------------------===//

def Kiln_PagedAttentionOp : Kiln_Op<"paged_attention", [Pure]> {
  let summary = "attention of each sequence's newest tokens over its paged KV cache";
  let description = [{
    Decode and chunked-prefill attention over a KV cache kept in fixed-size pages, as serving engines keep it
    (PagedAttention): the keys of all sequences share one pool of pages, and each sequence's block table lists
    the pages that hold its keys in order.

    - `q : [B, Hq, Sq, D]`: the `Sq` newest tokens of each of the `B` sequences (already appended to the cache).
    - `k_cache, v_cache : [num_pages, page_size, Hkv, D]`, same type as each other, element type of `q`;
      `page_size` is 16 to 256.
    - `block_table : [B, max_pages]` (i32): key position `j` of sequence `b` lives in page
      `block_table[b, j / page_size]`, row `j % page_size`.
    - `seq_lens : [B]` (i32): each sequence's length, its new tokens included.
    - `out : [B, Hq, Sq, D]`, element type of `q`. Query `i` of sequence `b` attends to the keys
      `0 <= j <= seq_lens[b] - Sq + i` (causal, aligned bottom-right within each sequence); a row that sees no
      key (`seq_lens[b] < Sq - i`) is 0, as in `kiln.attention`.
    - GQA/MQA from the head counts (`Hq` a multiple of `Hkv`), `scale` defaulting to `1 / sqrt(D)`, and
      `fp32_precision` (f32 only), as in `kiln.attention`.

    The tables are data: a page id outside `[0, num_pages)` or a length outside `[0, max_pages * page_size]`
    is the caller's error, which the Python API refuses before running. Lowerings never read outside the
    caches for them, and no key past a sequence's length reaches its output.

    ```mlir
    %o = kiln.paged_attention %q, %k_cache, %v_cache, %block_table, %seq_lens
        : tensor<4x32x1x128xbf16>, tensor<512x16x8x128xbf16>, tensor<512x16x8x128xbf16>, tensor<4x64xi32>,
          tensor<4xi32> -> tensor<4x32x1x128xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$k_cache, Kiln_FloatTensor:$v_cache,
                       Kiln_AnyTensor:$block_table, Kiln_AnyTensor:$seq_lens, OptionalAttr<F32Attr>:$scale,
                       OptionalAttr<StrAttr>:$fp32_precision);
  let results = (outs Kiln_FloatTensor:$out);
  let assemblyFormat = [{
    $q `,` $k_cache `,` $v_cache `,` $block_table `,` $seq_lens attr-dict
    `:` type($q) `,` type($k_cache) `,` type($v_cache) `,` type($block_table) `,` type($seq_lens) `->` type($out)
  }];
  let extraClassDeclaration = [{
    /// The scale applied to q k^T: the attribute, or 1/sqrt(head_dim) when it is absent.
    double getEffectiveScale();
    /// Number of q heads that share one k/v head (1 for plain multi-head attention).
    int64_t getGroupSize();
    /// Rows per page (dimension 1 of the caches).
    int64_t getPageSize() { return getKCache().getType().getDimSize(1); }
    /// Keys the block table can address per sequence: max_pages * page_size.
    int64_t getCapacity();
  }];
  let hasVerifier = 1;
}

def Kiln_GatherPagesOp : Kiln_Op<"gather_pages", [Pure]> {
  let summary = "each sequence's keys (or values) in a paged KV cache, as one contiguous tensor";
  let description = [{
    The view of a paged cache that attention reads: `out[b, h, j, x]` is row `j % page_size` of page
    `block_table[b, j / page_size]` at head `h`, feature `x`, for `j < seq_lens[b]`, and zero from `seq_lens[b]`
    on (whatever the unused pages and table entries hold never reaches it).

    - `cache : [num_pages, page_size, Hkv, D]` (page size 16 to 256), `block_table : [B, max_pages]` and
      `seq_lens : [B]` (i32) as in `kiln.paged_attention`.
    - `out : [B, Hkv, max_pages * page_size, D]`, the element type of the cache.

    `kiln-expand-paged-attention` writes `kiln.paged_attention` as a `kiln.attention` over two of these. Tiling
    never builds the tensor: a key tile that lies within one page is read straight from its page (the page id
    read from the table, rows past the length zero), so on the GPU the paged gather is how the K/V tile loads
    address memory. Only where nothing tiles its consumer does it lower to a gather of its own.

    ```mlir
    %k = kiln.gather_pages %k_cache, %block_table, %seq_lens
        : tensor<512x16x8x128xbf16>, tensor<4x64xi32>, tensor<4xi32> -> tensor<4x8x1024x128xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$cache, Kiln_AnyTensor:$block_table, Kiln_AnyTensor:$seq_lens);
  let results = (outs Kiln_FloatTensor:$out);
  let assemblyFormat = [{
    $cache `,` $block_table `,` $seq_lens attr-dict
    `:` type($cache) `,` type($block_table) `,` type($seq_lens) `->` type($out)
  }];
  let extraClassDeclaration = [{
    /// Rows per page (dimension 1 of the cache).
    int64_t getPageSize() { return getCache().getType().getDimSize(1); }
  }];
  let hasVerifier = 1;
}

def Kiln_AppendKvOp : Kiln_Op<"append_kv", [Pure]> {
  let summary = "write new K/V rows into their pages of a paged KV cache";
  let description = [{
    Returns `k_cache` and `v_cache` with the new rows written (value semantics, like every kiln op; a backend
    may write in place when the old caches are dead).

    - `k_cache, v_cache : [num_pages, page_size, Hkv, D]` as in `kiln.paged_attention`.
    - `k, v : [B, Hkv, S_new, D]`, the rows of the `S_new` new tokens of each sequence in the dialect's
      `[batch, heads, seq, head_dim]` layout (what the K/V projection and `kiln.rope` produce there), element
      type of the caches.
    - `block_table : [B, max_pages]` (i32), as in `kiln.paged_attention`.
    - `positions : [B]` (i32): the position of each sequence's first new token, i.e. its length before the
      append; token `s` of sequence `b` goes to position `p = positions[b] + s`, that is page
      `block_table[b, p / page_size]`, row `p % page_size`. New tokens of a sequence are contiguous, so one
      start per sequence says where all of them go, and `positions + S_new` is the `seq_lens` that
      `kiln.paged_attention` takes next.

    Rows of different sequences must land in different slots. A position past the table or a page id outside
    `[0, num_pages)` is the caller's error, which the Python API refuses before running; lowerings never write
    outside the caches for it.

    ```mlir
    %kc, %vc = kiln.append_kv %k_cache, %v_cache, %k, %v, %block_table, %positions
        : tensor<512x16x8x128xbf16>, tensor<512x16x8x128xbf16>, tensor<4x8x1x128xbf16>, tensor<4x8x1x128xbf16>,
          tensor<4x64xi32>, tensor<4xi32> -> tensor<512x16x8x128xbf16>, tensor<512x16x8x128xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$k_cache, Kiln_FloatTensor:$v_cache, Kiln_FloatTensor:$k,
                       Kiln_FloatTensor:$v, Kiln_AnyTensor:$block_table, Kiln_AnyTensor:$positions);
  let results = (outs Kiln_FloatTensor:$new_k_cache, Kiln_FloatTensor:$new_v_cache);
  let assemblyFormat = [{
    $k_cache `,` $v_cache `,` $k `,` $v `,` $block_table `,` $positions attr-dict
    `:` type($k_cache) `,` type($v_cache) `,` type($k) `,` type($v) `,` type($block_table) `,` type($positions)
    `->` type($new_k_cache) `,` type($new_v_cache)
  }];
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_KILN_KILNOPS_TD
