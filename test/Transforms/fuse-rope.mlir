// RUN: kiln-opt %s -kiln-fuse-rope -split-input-file | FileCheck %s

// kiln-fuse-rope turns rotate-half rotary embeddings written out (x * cos + concat(-x_hi, x_lo) * sin) into
// kiln.rope: on the [S, D/2] halves of constant tables whose halves repeat, else on [S, D] tables that broadcast
// over x's leading dimensions.

// CHECK-LABEL: func.func @rope
// CHECK-DAG: %[[COS:.*]] = kiln.constant dense<{{\[}}[1.000000e+00, 5.000000e-01], [2.500000e-01, 1.250000e-01]]> : tensor<2x2xf32>
// CHECK-DAG: %[[SIN:.*]] = kiln.constant dense<{{\[}}[0.000000e+00, 7.500000e-01], [1.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK: %[[Y:.*]] = kiln.rope %arg0, %[[COS]], %[[SIN]] : tensor<1x3x2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @rope(%x: tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32> {
  %cos = kiln.constant dense<[[[[1.0, 0.5, 1.0, 0.5], [0.25, 0.125, 0.25, 0.125]]]]> : tensor<1x1x2x4xf32>
  %sin = kiln.constant dense<[[0.0, 0.75, 0.0, 0.75], [1.0, 2.0, 1.0, 2.0]]> : tensor<2x4xf32>
  %lo = kiln.slice %x offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<1x3x2x4xf32> -> tensor<1x3x2x2xf32>
  %hi = kiln.slice %x offsets [0, 0, 0, 2] strides [1, 1, 1, 1] : tensor<1x3x2x4xf32> -> tensor<1x3x2x2xf32>
  %nhi = kiln.neg %hi : tensor<1x3x2x2xf32>
  %rot = kiln.concat %nhi, %lo axis 3 : tensor<1x3x2x2xf32>, tensor<1x3x2x2xf32> -> tensor<1x3x2x4xf32>
  %a = kiln.mul %x, %cos : tensor<1x3x2x4xf32>, tensor<1x1x2x4xf32> -> tensor<1x3x2x4xf32>
  %b = kiln.mul %sin, %rot : tensor<2x4xf32>, tensor<1x3x2x4xf32> -> tensor<1x3x2x4xf32>
  %y = kiln.add %b, %a : tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32> -> tensor<1x3x2x4xf32>
  return %y : tensor<1x3x2x4xf32>
}

// -----

// Constant tables whose halves differ stay whole: [S, D] tables, a factor per element.
// CHECK-LABEL: func.func @halves_differ
// CHECK-DAG: %[[COS:.*]] = kiln.constant dense<{{\[}}[1.000000e+00, 5.000000e-01, 1.000000e+00, 2.500000e-01], {{.*}}> : tensor<2x4xf32>
// CHECK-DAG: %[[SIN:.*]] = kiln.constant dense<{{.*}}> : tensor<2x4xf32>
// CHECK: kiln.rope %arg0, %[[COS]], %[[SIN]] : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NOT: kiln.concat
func.func @halves_differ(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %cos = kiln.constant dense<[[1.0, 0.5, 1.0, 0.25], [0.25, 0.125, 0.25, 0.125]]> : tensor<2x4xf32>
  %sin = kiln.constant dense<[[0.0, 0.75, 0.0, 0.75], [1.0, 2.0, 1.0, 2.0]]> : tensor<2x4xf32>
  %lo = kiln.slice %x offsets [0, 0] strides [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %hi = kiln.slice %x offsets [0, 2] strides [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %nhi = kiln.neg %hi : tensor<2x2xf32>
  %rot = kiln.concat %nhi, %lo axis 1 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x4xf32>
  %a = kiln.mul %x, %cos : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %b = kiln.mul %rot, %sin : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %y = kiln.add %a, %b : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Runtime tables, whose halves nothing proves equal, become the rope's [S, D] tables as they are: a factor per
// element, the written-out formula exactly.
// CHECK-LABEL: func.func @runtime_tables
// CHECK: %[[Y:.*]] = kiln.rope %arg0, %arg1, %arg2 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @runtime_tables(%x: tensor<2x4xf32>, %cos: tensor<2x4xf32>, %sin: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %lo = kiln.slice %x offsets [0, 0] strides [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %hi = kiln.slice %x offsets [0, 2] strides [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %nhi = kiln.neg %hi : tensor<2x2xf32>
  %rot = kiln.concat %nhi, %lo axis 1 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x4xf32>
  %a = kiln.mul %x, %cos : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %b = kiln.mul %rot, %sin : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %y = kiln.add %a, %b : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Runtime tables broadcast over batch and heads ([1, 1, S, D], as torch.compile graphs pass a model's cos and sin)
// are reshaped to [S, D].
// CHECK-LABEL: func.func @runtime_tables_broadcast
// CHECK-DAG: %[[COS:.*]] = kiln.reshape %arg1 : tensor<1x1x3x4xbf16> -> tensor<3x4xbf16>
// CHECK-DAG: %[[SIN:.*]] = kiln.reshape %arg2 : tensor<1x1x3x4xbf16> -> tensor<3x4xbf16>
// CHECK: %[[Y:.*]] = kiln.rope %arg0, %[[COS]], %[[SIN]] : tensor<2x5x3x4xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @runtime_tables_broadcast(%x: tensor<2x5x3x4xbf16>, %cos: tensor<1x1x3x4xbf16>, %sin: tensor<1x1x3x4xbf16>) -> tensor<2x5x3x4xbf16> {
  %lo = kiln.slice %x offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<2x5x3x4xbf16> -> tensor<2x5x3x2xbf16>
  %hi = kiln.slice %x offsets [0, 0, 0, 2] strides [1, 1, 1, 1] : tensor<2x5x3x4xbf16> -> tensor<2x5x3x2xbf16>
  %nhi = kiln.neg %hi : tensor<2x5x3x2xbf16>
  %rot = kiln.concat %nhi, %lo axis 3 : tensor<2x5x3x2xbf16>, tensor<2x5x3x2xbf16> -> tensor<2x5x3x4xbf16>
  %a = kiln.mul %x, %cos : tensor<2x5x3x4xbf16>, tensor<1x1x3x4xbf16> -> tensor<2x5x3x4xbf16>
  %b = kiln.mul %rot, %sin : tensor<2x5x3x4xbf16>, tensor<1x1x3x4xbf16> -> tensor<2x5x3x4xbf16>
  %y = kiln.add %a, %b : tensor<2x5x3x4xbf16>, tensor<2x5x3x4xbf16> -> tensor<2x5x3x4xbf16>
  return %y : tensor<2x5x3x4xbf16>
}

// -----

// Not RoPE: a table with a factor per batch ([2, 1, S, D]) does not fit kiln.rope's one row per position.
// CHECK-LABEL: func.func @runtime_tables_per_batch
// CHECK-NOT: kiln.rope
// CHECK-NOT: kiln.reshape
// CHECK: kiln.concat
func.func @runtime_tables_per_batch(%x: tensor<2x5x3x4xf32>, %cos: tensor<2x1x3x4xf32>, %sin: tensor<2x1x3x4xf32>) -> tensor<2x5x3x4xf32> {
  %lo = kiln.slice %x offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<2x5x3x4xf32> -> tensor<2x5x3x2xf32>
  %hi = kiln.slice %x offsets [0, 0, 0, 2] strides [1, 1, 1, 1] : tensor<2x5x3x4xf32> -> tensor<2x5x3x2xf32>
  %nhi = kiln.neg %hi : tensor<2x5x3x2xf32>
  %rot = kiln.concat %nhi, %lo axis 3 : tensor<2x5x3x2xf32>, tensor<2x5x3x2xf32> -> tensor<2x5x3x4xf32>
  %a = kiln.mul %x, %cos : tensor<2x5x3x4xf32>, tensor<2x1x3x4xf32> -> tensor<2x5x3x4xf32>
  %b = kiln.mul %rot, %sin : tensor<2x5x3x4xf32>, tensor<2x1x3x4xf32> -> tensor<2x5x3x4xf32>
  %y = kiln.add %a, %b : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32> -> tensor<2x5x3x4xf32>
  return %y : tensor<2x5x3x4xf32>
}

// -----

// Not RoPE: the negated half is the low one (rotation the other way).
// CHECK-LABEL: func.func @wrong_half_negated
// CHECK-NOT: kiln.rope
func.func @wrong_half_negated(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %cos = kiln.constant dense<[[1.0, 0.5, 1.0, 0.5], [0.25, 0.125, 0.25, 0.125]]> : tensor<2x4xf32>
  %sin = kiln.constant dense<[[0.0, 0.75, 0.0, 0.75], [1.0, 2.0, 1.0, 2.0]]> : tensor<2x4xf32>
  %lo = kiln.slice %x offsets [0, 0] strides [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %hi = kiln.slice %x offsets [0, 2] strides [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %nlo = kiln.neg %lo : tensor<2x2xf32>
  %rot = kiln.concat %hi, %nlo axis 1 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x4xf32>
  %a = kiln.mul %x, %cos : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %b = kiln.mul %rot, %sin : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %y = kiln.add %a, %b : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// One position: cos is all ones and canonicalization folded x * cos to x; the cos half is a splat of ones.
// CHECK-LABEL: func.func @unit_cos
// CHECK-DAG: %[[COS:.*]] = kiln.constant dense<1.000000e+00> : tensor<1x2xbf16>
// CHECK-DAG: %[[SIN:.*]] = kiln.constant dense<{{\[}}[0.000000e+00, 5.000000e-01]]> : tensor<1x2xbf16>
// CHECK: kiln.rope %arg0, %[[COS]], %[[SIN]] : tensor<3x1x4xbf16>, tensor<1x2xbf16>, tensor<1x2xbf16>
func.func @unit_cos(%x: tensor<3x1x4xbf16>) -> tensor<3x1x4xbf16> {
  %sin = kiln.constant dense<[[0.0, 0.5, 0.0, 0.5]]> : tensor<1x4xbf16>
  %lo = kiln.slice %x offsets [0, 0, 0] strides [1, 1, 1] : tensor<3x1x4xbf16> -> tensor<3x1x2xbf16>
  %hi = kiln.slice %x offsets [0, 0, 2] strides [1, 1, 1] : tensor<3x1x4xbf16> -> tensor<3x1x2xbf16>
  %nhi = kiln.neg %hi : tensor<3x1x2xbf16>
  %rot = kiln.concat %nhi, %lo axis 2 : tensor<3x1x2xbf16>, tensor<3x1x2xbf16> -> tensor<3x1x4xbf16>
  %b = kiln.mul %rot, %sin : tensor<3x1x4xbf16>, tensor<1x4xbf16> -> tensor<3x1x4xbf16>
  %y = kiln.add %x, %b : tensor<3x1x4xbf16>, tensor<3x1x4xbf16> -> tensor<3x1x4xbf16>
  return %y : tensor<3x1x4xbf16>
}

// -----

// The halves spelling of a decode step: x [B, H, D] rotated by per-sequence [B, 1, D/2] tables,
// concat(a * cos - b * sin, a * sin + b * cos) with the products and the sum's terms in any order: kiln.rope of
// the [B, D/2] tables along dimension 0 (seq_dim).
// CHECK-LABEL: func.func @halves_decode
// CHECK-DAG: %[[COS:.*]] = kiln.reshape %arg1 : tensor<3x1x4xbf16> -> tensor<3x4xbf16>
// CHECK-DAG: %[[SIN:.*]] = kiln.reshape %arg2 : tensor<3x1x4xbf16> -> tensor<3x4xbf16>
// CHECK: %[[Y:.*]] = kiln.rope %arg0, %[[COS]], %[[SIN]] {seq_dim = 0 : i64} : tensor<3x5x8xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @halves_decode(%x: tensor<3x5x8xbf16>, %cos: tensor<3x1x4xbf16>, %sin: tensor<3x1x4xbf16>)
    -> tensor<3x5x8xbf16> {
  %a = kiln.slice %x offsets [0, 0, 0] strides [1, 1, 1] : tensor<3x5x8xbf16> -> tensor<3x5x4xbf16>
  %b = kiln.slice %x offsets [0, 0, 4] strides [1, 1, 1] : tensor<3x5x8xbf16> -> tensor<3x5x4xbf16>
  %ac = kiln.mul %a, %cos : tensor<3x5x4xbf16>, tensor<3x1x4xbf16> -> tensor<3x5x4xbf16>
  %bs = kiln.mul %sin, %b : tensor<3x1x4xbf16>, tensor<3x5x4xbf16> -> tensor<3x5x4xbf16>
  %lo = kiln.sub %ac, %bs : tensor<3x5x4xbf16>, tensor<3x5x4xbf16> -> tensor<3x5x4xbf16>
  %as = kiln.mul %a, %sin : tensor<3x5x4xbf16>, tensor<3x1x4xbf16> -> tensor<3x5x4xbf16>
  %bc = kiln.mul %b, %cos : tensor<3x5x4xbf16>, tensor<3x1x4xbf16> -> tensor<3x5x4xbf16>
  %hi = kiln.add %bc, %as : tensor<3x5x4xbf16>, tensor<3x5x4xbf16> -> tensor<3x5x4xbf16>
  %y = kiln.concat %lo, %hi axis 2 : tensor<3x5x4xbf16>, tensor<3x5x4xbf16> -> tensor<3x5x8xbf16>
  return %y : tensor<3x5x8xbf16>
}

// -----

// The halves spelling over [B, S, H, D] with [S, 1, D/2] tables: the positions are dimension 1.
// CHECK-LABEL: func.func @halves_seq_major
// CHECK: kiln.rope %arg0, %{{.*}}, %{{.*}} {seq_dim = 1 : i64} : tensor<2x6x3x8xf32>, tensor<6x4xf32>, tensor<6x4xf32>
func.func @halves_seq_major(%x: tensor<2x6x3x8xf32>, %cos: tensor<6x1x4xf32>, %sin: tensor<6x1x4xf32>)
    -> tensor<2x6x3x8xf32> {
  %a = kiln.slice %x offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<2x6x3x8xf32> -> tensor<2x6x3x4xf32>
  %b = kiln.slice %x offsets [0, 0, 0, 4] strides [1, 1, 1, 1] : tensor<2x6x3x8xf32> -> tensor<2x6x3x4xf32>
  %ac = kiln.mul %a, %cos : tensor<2x6x3x4xf32>, tensor<6x1x4xf32> -> tensor<2x6x3x4xf32>
  %bs = kiln.mul %b, %sin : tensor<2x6x3x4xf32>, tensor<6x1x4xf32> -> tensor<2x6x3x4xf32>
  %lo = kiln.sub %ac, %bs : tensor<2x6x3x4xf32>, tensor<2x6x3x4xf32> -> tensor<2x6x3x4xf32>
  %as = kiln.mul %a, %sin : tensor<2x6x3x4xf32>, tensor<6x1x4xf32> -> tensor<2x6x3x4xf32>
  %bc = kiln.mul %b, %cos : tensor<2x6x3x4xf32>, tensor<6x1x4xf32> -> tensor<2x6x3x4xf32>
  %hi = kiln.add %as, %bc : tensor<2x6x3x4xf32>, tensor<2x6x3x4xf32> -> tensor<2x6x3x4xf32>
  %y = kiln.concat %lo, %hi axis 3 : tensor<2x6x3x4xf32>, tensor<2x6x3x4xf32> -> tensor<2x6x3x8xf32>
  return %y : tensor<2x6x3x8xf32>
}

// -----

// Tables that vary along two dimensions (a position per batch row and per head) are no rope's: left alone. So
// are swapped tables in the second half (a * cos + b * sin).
// CHECK-LABEL: func.func @halves_not_rope
// CHECK-NOT: kiln.rope
func.func @halves_not_rope(%x: tensor<3x5x8xf32>, %cos: tensor<3x5x4xf32>, %sin: tensor<3x5x4xf32>,
                           %c1: tensor<3x1x4xf32>, %s1: tensor<3x1x4xf32>) -> (tensor<3x5x8xf32>, tensor<3x5x8xf32>) {
  %a = kiln.slice %x offsets [0, 0, 0] strides [1, 1, 1] : tensor<3x5x8xf32> -> tensor<3x5x4xf32>
  %b = kiln.slice %x offsets [0, 0, 4] strides [1, 1, 1] : tensor<3x5x8xf32> -> tensor<3x5x4xf32>
  %ac = kiln.mul %a, %cos : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %bs = kiln.mul %b, %sin : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %lo = kiln.sub %ac, %bs : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %as = kiln.mul %a, %sin : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %bc = kiln.mul %b, %cos : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %hi = kiln.add %as, %bc : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %y = kiln.concat %lo, %hi axis 2 : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x8xf32>
  %ac1 = kiln.mul %a, %c1 : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %bs1 = kiln.mul %b, %s1 : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %lo1 = kiln.sub %ac1, %bs1 : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %ac2 = kiln.mul %a, %c1 : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %bs2 = kiln.mul %b, %s1 : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %hi1 = kiln.add %ac2, %bs2 : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %z = kiln.concat %lo1, %hi1 axis 2 : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x8xf32>
  return %y, %z : tensor<3x5x8xf32>, tensor<3x5x8xf32>
}

// -----

// gpt-fast's apply_rotary_emb: bf16 x [B, H, D] widened to f32 and viewed as [B, H, D/2, 2] pairs, each pair
// (x0, x1) rotated by the pair of [B, 1, D/2] tables, the results stacked, flattened and rounded back: the
// interleaved kiln.rope of the bf16 values, its tables the rows of the narrow ones (seq_dim 0: one position per
// batch row).
// CHECK-LABEL: func.func @pairs
// CHECK-DAG: %[[COS:.*]] = kiln.reshape %arg1 : tensor<3x1x4xbf16> -> tensor<3x4xbf16>
// CHECK-DAG: %[[SIN:.*]] = kiln.reshape %arg2 : tensor<3x1x4xbf16> -> tensor<3x4xbf16>
// CHECK: %[[Y:.*]] = kiln.rope %arg0, %[[COS]], %[[SIN]] interleaved {seq_dim = 0 : i64} : tensor<3x5x8xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @pairs(%x: tensor<3x5x8xbf16>, %cos: tensor<3x1x4xbf16>, %sin: tensor<3x1x4xbf16>) -> tensor<3x5x8xbf16> {
  %xf = kiln.cast %x : tensor<3x5x8xbf16> to tensor<3x5x8xf32>
  %c = kiln.cast %cos : tensor<3x1x4xbf16> to tensor<3x1x4xf32>
  %s = kiln.cast %sin : tensor<3x1x4xbf16> to tensor<3x1x4xf32>
  %p = kiln.reshape %xf : tensor<3x5x8xf32> -> tensor<3x5x4x2xf32>
  %e0 = kiln.slice %p offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<3x5x4x2xf32> -> tensor<3x5x4x1xf32>
  %x0 = kiln.reshape %e0 : tensor<3x5x4x1xf32> -> tensor<3x5x4xf32>
  %e1 = kiln.slice %p offsets [0, 0, 0, 1] strides [1, 1, 1, 1] : tensor<3x5x4x2xf32> -> tensor<3x5x4x1xf32>
  %x1 = kiln.reshape %e1 : tensor<3x5x4x1xf32> -> tensor<3x5x4xf32>
  %a = kiln.mul %x0, %c : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %b = kiln.mul %x1, %s : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %first = kiln.sub %a, %b : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %d = kiln.mul %c, %x1 : tensor<3x1x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %e = kiln.mul %x0, %s : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %second = kiln.add %e, %d : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %f1 = kiln.reshape %first : tensor<3x5x4xf32> -> tensor<3x5x4x1xf32>
  %f2 = kiln.reshape %second : tensor<3x5x4xf32> -> tensor<3x5x4x1xf32>
  %stacked = kiln.concat %f1, %f2 axis 3 : tensor<3x5x4x1xf32>, tensor<3x5x4x1xf32> -> tensor<3x5x4x2xf32>
  %flat = kiln.reshape %stacked : tensor<3x5x4x2xf32> -> tensor<3x5x8xf32>
  %y = kiln.cast %flat : tensor<3x5x8xf32> to tensor<3x5x8xbf16>
  return %y : tensor<3x5x8xbf16>
}

// -----

// The pairs spelling in f32 throughout: the interleaved rope of the f32 x.
// CHECK-LABEL: func.func @pairs_f32
// CHECK: kiln.rope %arg0, %{{.*}}, %{{.*}} interleaved : tensor<2x6x8xf32>, tensor<6x4xf32>, tensor<6x4xf32>
func.func @pairs_f32(%x: tensor<2x6x8xf32>, %c: tensor<6x4xf32>, %s: tensor<6x4xf32>) -> tensor<2x6x8xf32> {
  %p = kiln.reshape %x : tensor<2x6x8xf32> -> tensor<2x6x4x2xf32>
  %e0 = kiln.slice %p offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<2x6x4x2xf32> -> tensor<2x6x4x1xf32>
  %x0 = kiln.reshape %e0 : tensor<2x6x4x1xf32> -> tensor<2x6x4xf32>
  %e1 = kiln.slice %p offsets [0, 0, 0, 1] strides [1, 1, 1, 1] : tensor<2x6x4x2xf32> -> tensor<2x6x4x1xf32>
  %x1 = kiln.reshape %e1 : tensor<2x6x4x1xf32> -> tensor<2x6x4xf32>
  %a = kiln.mul %x0, %c : tensor<2x6x4xf32>, tensor<6x4xf32> -> tensor<2x6x4xf32>
  %b = kiln.mul %x1, %s : tensor<2x6x4xf32>, tensor<6x4xf32> -> tensor<2x6x4xf32>
  %first = kiln.sub %a, %b : tensor<2x6x4xf32>, tensor<2x6x4xf32> -> tensor<2x6x4xf32>
  %d = kiln.mul %x1, %c : tensor<2x6x4xf32>, tensor<6x4xf32> -> tensor<2x6x4xf32>
  %e = kiln.mul %x0, %s : tensor<2x6x4xf32>, tensor<6x4xf32> -> tensor<2x6x4xf32>
  %second = kiln.add %d, %e : tensor<2x6x4xf32>, tensor<2x6x4xf32> -> tensor<2x6x4xf32>
  %f1 = kiln.reshape %first : tensor<2x6x4xf32> -> tensor<2x6x4x1xf32>
  %f2 = kiln.reshape %second : tensor<2x6x4xf32> -> tensor<2x6x4x1xf32>
  %stacked = kiln.concat %f1, %f2 axis 3 : tensor<2x6x4x1xf32>, tensor<2x6x4x1xf32> -> tensor<2x6x4x2xf32>
  %flat = kiln.reshape %stacked : tensor<2x6x4x2xf32> -> tensor<2x6x8xf32>
  return %flat : tensor<2x6x8xf32>
}

// -----

// Tables stacked into freqs_cis (torch.stack([cos, sin], -1)) and read back as its pairs' elements are read
// from cos and sin themselves: no kernel stacks and slices them.
// CHECK-LABEL: func.func @pairs_stacked_tables
// CHECK-NOT: kiln.concat
// CHECK: kiln.rope %arg0, %{{.*}}, %{{.*}} interleaved {seq_dim = 0 : i64} : tensor<3x5x8xbf16>, tensor<3x4xbf16>, tensor<3x4xbf16>
// CHECK-NOT: kiln.slice
func.func @pairs_stacked_tables(%x: tensor<3x5x8xbf16>, %cos: tensor<3x4xbf16>, %sin: tensor<3x4xbf16>)
    -> tensor<3x5x8xbf16> {
  %c1 = kiln.reshape %cos : tensor<3x4xbf16> -> tensor<3x4x1xbf16>
  %s1 = kiln.reshape %sin : tensor<3x4xbf16> -> tensor<3x4x1xbf16>
  %freqs = kiln.concat %c1, %s1 axis 2 : tensor<3x4x1xbf16>, tensor<3x4x1xbf16> -> tensor<3x4x2xbf16>
  %fv = kiln.reshape %freqs : tensor<3x4x2xbf16> -> tensor<3x1x4x2xbf16>
  %fc = kiln.slice %fv offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<3x1x4x2xbf16> -> tensor<3x1x4x1xbf16>
  %fcr = kiln.reshape %fc : tensor<3x1x4x1xbf16> -> tensor<3x1x4xbf16>
  %fs = kiln.slice %fv offsets [0, 0, 0, 1] strides [1, 1, 1, 1] : tensor<3x1x4x2xbf16> -> tensor<3x1x4x1xbf16>
  %fsr = kiln.reshape %fs : tensor<3x1x4x1xbf16> -> tensor<3x1x4xbf16>
  %c = kiln.cast %fcr : tensor<3x1x4xbf16> to tensor<3x1x4xf32>
  %s = kiln.cast %fsr : tensor<3x1x4xbf16> to tensor<3x1x4xf32>
  %xf = kiln.cast %x : tensor<3x5x8xbf16> to tensor<3x5x8xf32>
  %p = kiln.reshape %xf : tensor<3x5x8xf32> -> tensor<3x5x4x2xf32>
  %e0 = kiln.slice %p offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<3x5x4x2xf32> -> tensor<3x5x4x1xf32>
  %x0 = kiln.reshape %e0 : tensor<3x5x4x1xf32> -> tensor<3x5x4xf32>
  %e1 = kiln.slice %p offsets [0, 0, 0, 1] strides [1, 1, 1, 1] : tensor<3x5x4x2xf32> -> tensor<3x5x4x1xf32>
  %x1 = kiln.reshape %e1 : tensor<3x5x4x1xf32> -> tensor<3x5x4xf32>
  %a = kiln.mul %x0, %c : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %b = kiln.mul %x1, %s : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %first = kiln.sub %a, %b : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %d = kiln.mul %x1, %c : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %e = kiln.mul %x0, %s : tensor<3x5x4xf32>, tensor<3x1x4xf32> -> tensor<3x5x4xf32>
  %second = kiln.add %d, %e : tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  %f1 = kiln.reshape %first : tensor<3x5x4xf32> -> tensor<3x5x4x1xf32>
  %f2 = kiln.reshape %second : tensor<3x5x4xf32> -> tensor<3x5x4x1xf32>
  %stacked = kiln.concat %f1, %f2 axis 3 : tensor<3x5x4x1xf32>, tensor<3x5x4x1xf32> -> tensor<3x5x4x2xf32>
  %flat = kiln.reshape %stacked : tensor<3x5x4x2xf32> -> tensor<3x5x8xf32>
  %y = kiln.cast %flat : tensor<3x5x8xf32> to tensor<3x5x8xbf16>
  return %y : tensor<3x5x8xbf16>
}

// -----

// Tables that vary along different dimensions (cos along the batch, sin along the heads) are no rope's: the
// IR is left exactly as it was, not even a view of a table added.
// CHECK-LABEL: func.func @halves_tables_disagree
// CHECK-NOT: kiln.rope
// CHECK-NOT: kiln.reshape
func.func @halves_tables_disagree(%x: tensor<2x3x8xf32>, %cos: tensor<2x1x4xf32>, %sin: tensor<1x3x4xf32>)
    -> tensor<2x3x8xf32> {
  %a = kiln.slice %x offsets [0, 0, 0] strides [1, 1, 1] : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  %b = kiln.slice %x offsets [0, 0, 4] strides [1, 1, 1] : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  %ac = kiln.mul %a, %cos : tensor<2x3x4xf32>, tensor<2x1x4xf32> -> tensor<2x3x4xf32>
  %bs = kiln.mul %b, %sin : tensor<2x3x4xf32>, tensor<1x3x4xf32> -> tensor<2x3x4xf32>
  %lo = kiln.sub %ac, %bs : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %as = kiln.mul %a, %sin : tensor<2x3x4xf32>, tensor<1x3x4xf32> -> tensor<2x3x4xf32>
  %bc = kiln.mul %b, %cos : tensor<2x3x4xf32>, tensor<2x1x4xf32> -> tensor<2x3x4xf32>
  %hi = kiln.add %as, %bc : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %y = kiln.concat %lo, %hi axis 2 : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}
