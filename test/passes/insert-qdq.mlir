// RUN: sits-opt %s --split-input-file --sits-insert-qdq="weights=int4 weight-group=32 weight-scale=absmax" | FileCheck %s --check-prefix=INT4
// RUN: sits-opt %s --split-input-file --sits-insert-qdq="weights=int4 weight-group=32 weight-scale=absmax" --sits-audit-report | FileCheck %s --check-prefix=AUDIT4
// RUN: sits-opt %s --split-input-file --sits-insert-qdq="weights=int4 weight-group=32" | FileCheck %s --check-prefix=MSE4
// RUN: sits-opt %s --split-input-file --sits-insert-qdq="weights=int4 weight-group=32" --sits-audit-report | FileCheck %s --check-prefix=AUDIT-MSE4
// RUN: sits-opt %s --split-input-file --sits-insert-qdq="weights=int8 weight-group=16" | FileCheck %s --check-prefix=INT8
// RUN: sits-opt %s --split-input-file --sits-insert-qdq | FileCheck %s --check-prefix=NONE

// Weights: quantized at compile time, read through sits.dequantize. Row 0
// has absmax 7 (scale 1): 0.5, 1.5, 2.5 and -2.5 are ties and go to the even
// level (0, 2, 2, -2), 3.49 rounds to 3; packed two per byte, the even
// element in the low nibble: (7, 0) -> 0x07 = 7, (2, 2) -> 0x22 = 34,
// (-2, -7) -> 0x9E = -98, (3, 0) -> 3. Row 1 is all ones: scale
// f16(1/7) = 0.142822..., level 7 (0x77 = 119). The weight is shared by the
// linear and the LM head: one dequantize.

// INT4-LABEL: func.func @weights
// INT4-NEXT: %[[Q:.*]] = sits.weight "proj.q4" dense<{{\[}}[7, 34, -98, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119]]> : tensor<2x16xi8>
// INT4-NEXT: %[[S:.*]] = sits.weight "proj.scales" dense<{{\[}}[1.000000e+00], [1.428220e-01]]> : tensor<2x1xf16>
// INT4-NEXT: %[[W:.*]] = sits.dequantize %[[Q]], %[[S]] {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : tensor<2x16xi8>, tensor<2x1xf16> -> tensor<2x32xf32>
// INT4-NEXT: sits.linear %{{.*}}, %[[W]]
// INT4-NEXT: sits.lm_head %{{.*}}, %[[W]]
// INT4-NOT: "proj"

// The default scale search (weight-scale=mse) tries c = 1, 0.98, ..., 0.6
// per group. Row 0 at c = 1 errs by 0.5 four times and 0.49 once (squared
// sum 1.24); at c = 0.96 (s = f16(0.96) = 0.95996) the levels are
// 7, 1, 2, 3, -3, -7, 4 (7 / s = 7.29 rounds to 7, no clamp) and the
// squared sum is 0.96, the smallest: (7, 1) -> 0x17 = 23, (2, 3) -> 0x32 =
// 50, (-3, -7) -> 0x9D = -99, (4, 0) -> 4. Row 1 (all ones) keeps c = 1: every ratio below it leaves
// error 1 - 7s > 0 after the clamp.
// MSE4-LABEL: func.func @weights
// MSE4-NEXT: sits.weight "proj.q4" dense<{{\[}}[23, 50, -99, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119, 119]]> : tensor<2x16xi8>
// MSE4-NEXT: sits.weight "proj.scales" dense<{{\[}}[9.599600e-01], [1.428220e-01]]> : tensor<2x1xf16>
// AUDIT-MSE4: rule: round to nearest even of x / s, clamped to [-7, 7], s = f16(c absmax / 7) per group of 32 along in_features (the last group of a row holds 32), c in 1, 0.98, ..., 0.6 chosen per group for the smallest squared error; {{.*}} 0 of 64 values clipped

// INT8-LABEL: func.func @weights
// INT8: sits.weight "proj.q8" dense<{{.*}}> : tensor<2x32xi8>
// INT8: sits.weight "proj.scales" dense<{{.*}}> : tensor<2x2xf16>
// INT8: sits.dequantize {{.*}} {axis = 1 : i64, bits = 8 : i64, group_size = 16 : i64} : tensor<2x32xi8>, tensor<2x2xf16> -> tensor<2x32xf32>

// NONE-LABEL: func.func @weights
// NONE-NEXT: sits.weight "proj" dense
// NONE-NOT: sits.dequantize

// AUDIT4: pass sits-insert-qdq
// AUDIT4-NEXT: quantize_inserted: 0
// AUDIT4-NEXT: dequantize_inserted: 1
// AUDIT4-NEXT: weights_quantized: 1
// AUDIT4-NEXT: kv_layers_quantized: 0
// AUDIT4: - sits.weight 'proj' [2 x 32] f32 -> int4 data 'proj.q4' [2 x 16] (rows padded to 16 bytes) + f16 scales 'proj.scales' [2 x 1], read through sits.dequantize (group 32)
// AUDIT4-NEXT: rule: round to nearest even of x / s, clamped to [-7, 7], s = f16(c absmax / 7) per group of 32 along in_features (the last group of a row holds 32), c = 1; |x - q s| <= s / 2 unless clipped; measured: max |error| 5.000000e-01, {{.*}} 0 of 64 values clipped, scales 1.428223e-01 .. 1.000000e+00

func.func @weights(%x: tensor<?x32xf32>) -> (tensor<?x2xf32>, tensor<?x2xf32>) {
  %w = sits.weight "proj" dense<[[7.0, 0.5, 1.5, 2.5, -2.5, -7.0, 3.49, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]> : tensor<2x32xf32>
  %y = sits.linear %x, %w : tensor<?x32xf32>, tensor<2x32xf32> -> tensor<?x2xf32>
  %l = sits.lm_head %x, %w : tensor<?x32xf32>, tensor<2x32xf32> -> tensor<?x2xf32>
  return %y, %l : tensor<?x2xf32>, tensor<?x2xf32>
}

// -----

// A row of 40 values in groups of 32: the last group holds 8, and int4 rows
// (20 bytes packed) are padded to 32 bytes. The embedding keeps the f32
// table; only the LM head reads the quantized copy of the tied weight.

// INT4-LABEL: func.func @partial_groups
// INT4: %[[E:.*]] = sits.weight "embed" dense<{{.*}}> : tensor<3x40xf32>
// INT4: sits.weight "embed.q4" dense<{{.*}}> : tensor<3x32xi8>
// INT4: sits.weight "embed.scales" dense<{{.*}}> : tensor<3x2xf16>
// INT4: sits.embedding %[[E]]
// INT4: sits.lm_head %{{.*}}, %{{.*}} {tied} : tensor<?x?x40xf32>, tensor<3x40xf32>
// AUDIT4: (the last group of a row holds 8)

func.func @partial_groups(%ids: tensor<?x?xi64>) -> tensor<?x?x3xf32> {
  %table = sits.weight "embed" dense<0.75> : tensor<3x40xf32>
  %x = sits.embedding %table[%ids] : tensor<3x40xf32>, tensor<?x?xi64> -> tensor<?x?x40xf32>
  %l = sits.lm_head %x, %table {tied} : tensor<?x?x40xf32>, tensor<3x40xf32> -> tensor<?x?x3xf32>
  return %l : tensor<?x?x3xf32>
}
