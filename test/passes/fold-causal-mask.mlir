// RUN: sits-opt %s --sits-fold-causal-mask --split-input-file | FileCheck %s
// RUN: sits-opt %s --sits-fold-causal-mask --split-input-file --sits-audit-report | FileCheck %s --check-prefix=AUDIT

// The causal mask as exporters build it from the input's shape:
// key j is visible to query i iff j <= i. Proven, folded, and the whole
// subgraph erased.

// CHECK-LABEL: func.func @causal_from_range
// CHECK-NOT: onnx.
// CHECK: sits.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = #sits.causal<bottom_right>, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 5.000000e-01 : f32}
// CHECK-NOT: onnx.
func.func @causal_from_range(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %shape = onnx.Shape %ids {start = 1 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %seq = onnx.Squeeze %shape : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %range = onnx.Range %zero, %seq, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %rowAxes = onnx.Constant {value = dense<[0, 1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %colAxes = onnx.Constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : tensor<3xi64>
  %rows = onnx.Unsqueeze %range, %rowAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x?x1xi64>
  %cols = onnx.Unsqueeze %range, %colAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x1x?xi64>
  %mask = onnx.LessOrEqual %cols, %rows : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<1x1x?x?xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-fold-causal-mask
// AUDIT-NEXT: masks_folded: 1
// AUDIT-NEXT: mask_ops_removed: 10
// AUDIT-NEXT: masks_kept: 0
// AUDIT: - sits.attention with a [batch, heads, seq_q, seq_k] mask tensor -> sits.attention causal = bottom_right (no mask tensor)
// AUDIT-NEXT: rule: proved with Presburger arithmetic that the mask equals the bottom-right causal: j <= i + (seq_k - seq_q) at every (b, h, i, j) for every batch and sequence size; offset = past_len (here seq_k - seq_q), bound = seqlen_k
// AUDIT: - mask subgraph: 10 ops (onnx.Constant x4, onnx.LessOrEqual x1, onnx.Range x1, onnx.Shape x1, onnx.Squeeze x1, onnx.Unsqueeze x2) -> nothing

// -----

// Near-miss: the upper triangle (j >= i) is not causal. Kept.

// CHECK-LABEL: func.func @upper_triangle
// CHECK: onnx.LessOrEqual
// CHECK: sits.attention {{.*}} mask(
func.func @upper_triangle(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %shape = onnx.Shape %ids {start = 1 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %seq = onnx.Squeeze %shape : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %range = onnx.Range %zero, %seq, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %rowAxes = onnx.Constant {value = dense<[0, 1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %colAxes = onnx.Constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : tensor<3xi64>
  %rows = onnx.Unsqueeze %range, %rowAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x?x1xi64>
  %cols = onnx.Unsqueeze %range, %colAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x1x?xi64>
  %mask = onnx.LessOrEqual %rows, %cols : (tensor<1x1x?x1xi64>, tensor<1x1x1x?xi64>) -> tensor<1x1x?x?xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<1x1x?x?xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-fold-causal-mask
// AUDIT-NEXT: masks_folded: 0
// AUDIT-NEXT: mask_ops_removed: 0
// AUDIT-NEXT: masks_kept: 1
// AUDIT: - sits.attention with a mask operand -> unchanged
// AUDIT-NEXT: rule: mask kept: the mask shows a key the rule hides

// -----

// Near-miss: a strict diagonal (j < i) hides the query's own key. Kept.

// CHECK-LABEL: func.func @strict_diagonal
// CHECK: sits.attention {{.*}} mask(
func.func @strict_diagonal(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %shape = onnx.Shape %ids {start = 1 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %seq = onnx.Squeeze %shape : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %range = onnx.Range %zero, %seq, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %rowAxes = onnx.Constant {value = dense<[0, 1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %colAxes = onnx.Constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : tensor<3xi64>
  %rows = onnx.Unsqueeze %range, %rowAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x?x1xi64>
  %cols = onnx.Unsqueeze %range, %colAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x1x?xi64>
  %mask = onnx.Less %cols, %rows : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<1x1x?x?xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-fold-causal-mask
// AUDIT: masks_kept: 1
// AUDIT: rule: mask kept: the mask hides a key the rule shows

// -----

// Near-miss: the diagonal shifted by one (j <= i + 1) shows one future key.
// Kept.

// CHECK-LABEL: func.func @shifted_diagonal
// CHECK: sits.attention {{.*}} mask(
func.func @shifted_diagonal(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %shape = onnx.Shape %ids {start = 1 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %seq = onnx.Squeeze %shape : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %range = onnx.Range %zero, %seq, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %next = onnx.Add %range, %one : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  %rowAxes = onnx.Constant {value = dense<[0, 1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %colAxes = onnx.Constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : tensor<3xi64>
  %rows = onnx.Unsqueeze %next, %rowAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x?x1xi64>
  %cols = onnx.Unsqueeze %range, %colAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x1x?xi64>
  %mask = onnx.LessOrEqual %cols, %rows : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<1x1x?x?xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-fold-causal-mask
// AUDIT: masks_kept: 1
// AUDIT: rule: mask kept: the mask shows a key the rule hides

// -----

// A sliding window of 4 (i - 4 < j <= i): folded into causal + window.

// CHECK-LABEL: func.func @sliding_window
// CHECK-NOT: onnx.
// CHECK: sits.attention {{.*}} {causal = #sits.causal<bottom_right>, {{.*}}window = 4 : i64}
func.func @sliding_window(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %shape = onnx.Shape %ids {start = 1 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<1xi64>
  %seq = onnx.Squeeze %shape : (tensor<1xi64>) -> tensor<i64>
  %zero = onnx.Constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %one = onnx.Constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %four = onnx.Constant {value = dense<4> : tensor<i64>} : tensor<i64>
  %range = onnx.Range %zero, %seq, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %rowAxes = onnx.Constant {value = dense<[0, 1, 3]> : tensor<3xi64>} : tensor<3xi64>
  %colAxes = onnx.Constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : tensor<3xi64>
  %rows = onnx.Unsqueeze %range, %rowAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x?x1xi64>
  %cols = onnx.Unsqueeze %range, %colAxes : (tensor<?xi64>, tensor<3xi64>) -> tensor<1x1x1x?xi64>
  %causal = onnx.LessOrEqual %cols, %rows : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %distance = onnx.Sub %rows, %cols : (tensor<1x1x?x1xi64>, tensor<1x1x1x?xi64>) -> tensor<1x1x?x?xi64>
  %near = onnx.Less %distance, %four : (tensor<1x1x?x?xi64>, tensor<i64>) -> tensor<1x1x?x?xi1>
  %mask = onnx.And %causal, %near : (tensor<1x1x?x?xi1>, tensor<1x1x?x?xi1>) -> tensor<1x1x?x?xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<1x1x?x?xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-fold-causal-mask
// AUDIT-NEXT: masks_folded: 1
// AUDIT: rule: proved with Presburger arithmetic that the mask equals the bottom-right causal with a sliding window of 4

// -----

// A padding mask from an input is runtime data: kept, with the reason.

// CHECK-LABEL: func.func @padding_mask
// CHECK: sits.attention {{.*}} mask(
func.func @padding_mask(%ids: tensor<?x?xi64> {sits.dim_names = ["batch", "seq"]}, %pad: tensor<?x1x?x?xi1> {sits.dim_names = ["batch", "", "seq", "seq"]}) -> tensor<?x2x?x4xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %q = sits.split_heads %x {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %a = sits.attention %q, %q, %q mask(%pad : tensor<?x1x?x?xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-fold-causal-mask
// AUDIT: masks_kept: 1
// AUDIT: rule: mask kept: the mask depends on function argument #1 (runtime data, such as a padding mask)

// -----

// Static shapes: a constant lower-triangular mask, element by element.

// CHECK-LABEL: func.func @triangular_constant
// CHECK-NOT: sits.weight "tril"
// CHECK: sits.attention {{.*}} {causal = #sits.causal<bottom_right>
func.func @triangular_constant(%q: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %mask = sits.weight "tril" dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<4x4xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  return %a : tensor<1x2x4x4xf32>
}

// -----

// An f16 graph's additive mask uses the lowest finite f16 (-65504, the
// exporter's finfo(float16).min) for -inf: exp() of a masked score
// underflows to 0 all the same, so it folds like -inf.

// CHECK-LABEL: func.func @additive_f16_lowest
// CHECK-NOT: onnx.Where
// CHECK: sits.attention {{.*}} {causal = #sits.causal<bottom_right>
func.func @additive_f16_lowest(%q: tensor<1x2x3x4xf16>) -> tensor<1x2x3x4xf16> {
  %tril = sits.weight "tril" dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %zero = sits.weight "zero" dense<0.0> : tensor<f16>
  %lowest = sits.weight "lowest" dense<-65504.0> : tensor<f16>
  %mask = onnx.Where %tril, %zero, %lowest : (tensor<3x3xi1>, tensor<f16>, tensor<f16>) -> tensor<3x3xf16>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<3x3xf16>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x3x4xf16>, tensor<1x2x3x4xf16>, tensor<1x2x3x4xf16> -> tensor<1x2x3x4xf16>
  return %a : tensor<1x2x3x4xf16>
}

// -----

// -60000 in f16, and -65504 in an f32 mask, are large but not the type's
// lowest value: a masked key keeps a tiny weight only when scores are that
// large, but the pass folds only what it can justify. Kept.

// CHECK-LABEL: func.func @additive_not_lowest
// CHECK: sits.attention {{.*}} mask(
// CHECK: sits.attention {{.*}} mask(
// AUDIT: rule: mask kept: an additive mask value -60000.000000 is neither 0, -inf nor the lowest finite value of the mask's type
// AUDIT: rule: mask kept: an additive mask value -65504.000000 is neither 0, -inf nor the lowest finite value of the mask's type
func.func @additive_not_lowest(%q: tensor<1x2x3x4xf16>, %p: tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf16>, tensor<1x2x3x4xf32>) {
  %tril = sits.weight "tril" dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %zero = sits.weight "zero" dense<0.0> : tensor<f16>
  %large = sits.weight "large" dense<-60000.0> : tensor<f16>
  %mask = onnx.Where %tril, %zero, %large : (tensor<3x3xi1>, tensor<f16>, tensor<f16>) -> tensor<3x3xf16>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<3x3xf16>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x3x4xf16>, tensor<1x2x3x4xf16>, tensor<1x2x3x4xf16> -> tensor<1x2x3x4xf16>
  %zero32 = sits.weight "zero32" dense<0.0> : tensor<f32>
  %lowest16 = sits.weight "lowest16" dense<-65504.0> : tensor<f32>
  %mask32 = onnx.Where %tril, %zero32, %lowest16 : (tensor<3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<3x3xf32>
  %b = sits.attention %p, %p, %p mask(%mask32 : tensor<3x3xf32>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a, %b : tensor<1x2x3x4xf16>, tensor<1x2x3x4xf32>
}

// -----

// A constant with one wrong element is not causal. Kept.

// CHECK-LABEL: func.func @almost_triangular_constant
// CHECK: sits.attention {{.*}} mask(
func.func @almost_triangular_constant(%q: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %mask = sits.weight "tril" dense<[[true, false, false, false], [true, true, false, false], [true, false, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %a = sits.attention %q, %q, %q mask(%mask : tensor<4x4xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  return %a : tensor<1x2x4x4xf32>
}

// -----

// Queries shorter than keys (2 new tokens after 3 past ones): a mask built as
// j <= i (top-left, the pre-errata ONNX rule) is not bottom-right. The prover
// tells them apart and folds into the rule the mask really is.

// CHECK-LABEL: func.func @top_left_versus_bottom_right
// CHECK: sits.attention {{.*}} {causal = #sits.causal<top_left>
// CHECK: sits.attention {{.*}} {causal = #sits.causal<bottom_right>
func.func @top_left_versus_bottom_right(%q: tensor<1x2x2x4xf32>, %k: tensor<1x2x5x4xf32>) -> (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>) {
  %topLeft = sits.weight "top_left" dense<[[true, false, false, false, false], [true, true, false, false, false]]> : tensor<2x5xi1>
  %bottomRight = sits.weight "bottom_right" dense<[[true, true, true, true, false], [true, true, true, true, true]]> : tensor<2x5xi1>
  %a = sits.attention %q, %k, %k mask(%topLeft : tensor<2x5xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x2x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32> -> tensor<1x2x2x4xf32>
  %b = sits.attention %q, %k, %k mask(%bottomRight : tensor<2x5xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x2x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32> -> tensor<1x2x2x4xf32>
  return %a, %b : tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>
}
