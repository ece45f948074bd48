// RUN: sits-opt %s --sits-hoist-rope="max-seq-len=16" --split-input-file | FileCheck %s
// RUN: sits-opt %s --sits-hoist-rope="max-seq-len=16" --split-input-file --sits-audit-report | FileCheck %s --check-prefix=AUDIT

// Two layers recompute cos/sin of the same positions (as opset-23 exports do):
// one table, one load, shared.

// CHECK-LABEL: func.func @per_layer_cos_sin
// CHECK-DAG: %[[TABLE:.*]] = sits.weight "rope.table.0" dense<{{.*}}> : tensor<16x4xf32>
// CHECK-DAG: %[[POS:.*]] = sits.position_ids
// CHECK: %[[COS:.*]], %[[SIN:.*]] = sits.rope_gather %[[TABLE]][%[[POS]]] : tensor<16x4xf32>, tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
// CHECK-NOT: sits.rope_cos_sin
// CHECK-NOT: sits.rope_gather
// CHECK: sits.rope %{{.*}}, %[[COS]], %[[SIN]]
// CHECK: sits.rope %{{.*}}, %[[COS]], %[[SIN]]
func.func @per_layer_cos_sin(%x: tensor<?x2x?x4xf32>, %ids: tensor<?x?xi64>) -> (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) {
  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  %c0, %s0 = sits.rope_cos_sin %pos {inv_freq = dense<[1.0, 0.01]> : tensor<2xf32>} : tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
  %r0 = sits.rope %x, %c0, %s0 {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x2x?x4xf32>
  %c1, %s1 = sits.rope_cos_sin %pos {inv_freq = dense<[1.0, 0.01]> : tensor<2xf32>} : tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
  %r1 = sits.rope %r0, %c1, %s1 {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x2x?x4xf32>
  return %r0, %r1 : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
}

// AUDIT: pass sits-hoist-rope
// AUDIT-NEXT: rope_tables_precomputed: 1
// AUDIT-NEXT: rope_loads_hoisted: 2
// AUDIT-NEXT: rope_loads_shared: 1
// AUDIT: - 2 sits.rope_cos_sin {{.*}} -> one sits.rope_gather of 'rope.table.0' [16 x 4] after the positions, shared by every layer
// AUDIT-NEXT: rule: cos/sin depend on the position alone; the table holds the graph's own f32 formula for positions 0..15

// -----

// The table holds the graph's formula: row p is cos(p * f) then sin(p * f),
// times attention_scaling. Position 1 with inverse frequency 1 and scaling 2:
// 2 cos(1) = 1.0806046, 2 sin(1) = 1.6829419.

// AUDIT: pass sits-hoist-rope
// AUDIT-NEXT: rope_tables_precomputed: 1

// CHECK-LABEL: func.func @table_values
// CHECK: sits.weight "rope.table.0" dense<{{\[}}[2.000000e+00, 0.000000e+00], [1.08060455, 1.68294191], [-0.832293689, 1.81859481], [-1.979985, 2.822400e-01], {{.*}}]> : tensor<16x2xf32>
func.func @table_values(%pos: tensor<1x3xi64>) -> (tensor<1x3x1xf32>, tensor<1x3x1xf32>) {
  %c, %s = sits.rope_cos_sin %pos {inv_freq = dense<[1.0]> : tensor<1xf32>, attention_scaling = 2.0 : f32} : tensor<1x3xi64> -> tensor<1x3x1xf32>, tensor<1x3x1xf32>
  return %c, %s : tensor<1x3x1xf32>, tensor<1x3x1xf32>
}

// -----

// Different frequencies are different tables; different positions are
// different loads of one table. Nothing is merged that is not the same.

// CHECK-LABEL: func.func @distinct_tables_and_positions
// CHECK-DAG: sits.weight "rope.table.0"
// CHECK-DAG: sits.weight "rope.table.1"
// CHECK-COUNT-3: sits.rope_gather
// CHECK-NOT: sits.rope_gather
func.func @distinct_tables_and_positions(%p: tensor<?x?xi64>, %q: tensor<?x?xi64>) -> (tensor<?x?x1xf32>, tensor<?x?x1xf32>, tensor<?x?x1xf32>) {
  %c0, %s0 = sits.rope_cos_sin %p {inv_freq = dense<[1.0]> : tensor<1xf32>} : tensor<?x?xi64> -> tensor<?x?x1xf32>, tensor<?x?x1xf32>
  %c1, %s1 = sits.rope_cos_sin %p {inv_freq = dense<[0.5]> : tensor<1xf32>} : tensor<?x?xi64> -> tensor<?x?x1xf32>, tensor<?x?x1xf32>
  %c2, %s2 = sits.rope_cos_sin %q {inv_freq = dense<[1.0]> : tensor<1xf32>} : tensor<?x?xi64> -> tensor<?x?x1xf32>, tensor<?x?x1xf32>
  return %c0, %c1, %c2 : tensor<?x?x1xf32>, tensor<?x?x1xf32>, tensor<?x?x1xf32>
}

// AUDIT: pass sits-hoist-rope
// AUDIT-NEXT: rope_tables_precomputed: 2
// AUDIT-NEXT: rope_loads_hoisted: 3
// AUDIT-NEXT: rope_loads_shared: 3

// -----

// The table's element type follows the activations.

// CHECK-LABEL: func.func @f16_table
// CHECK: sits.weight "rope.table.0" dense<{{.*}}> : tensor<16x2xf16>
// CHECK: sits.rope_gather {{.*}} : tensor<16x2xf16>, tensor<?x?xi64> -> tensor<?x?x1xf16>, tensor<?x?x1xf16>
func.func @f16_table(%p: tensor<?x?xi64>) -> tensor<?x?x1xf16> {
  %c, %s = sits.rope_cos_sin %p {inv_freq = dense<[1.0]> : tensor<1xf32>} : tensor<?x?xi64> -> tensor<?x?x1xf16>, tensor<?x?x1xf16>
  return %c : tensor<?x?x1xf16>
}
