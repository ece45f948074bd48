// RUN: sits-opt %s --split-input-file --kernel-fuse-gated-linears | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-fuse-gated-linears --sits-audit-report | FileCheck %s --check-prefix=AUDIT

// The gate and up projections of one input, read only by the glu, become
// one launch at the glu; what reads the product reads the launch.

// CHECK-LABEL: func.func @mlp
// CHECK-NOT: sits.linear
// CHECK: %[[H:.*]] = kernel.launch <gated_linear> {
// CHECK-NEXT: %[[G:.*]] = sits.linear %arg0, %{{.*}} : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
// CHECK-NEXT: %[[U:.*]] = sits.linear %arg0, %{{.*}} : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
// CHECK-NEXT: %[[A:.*]] = sits.glu <silu> %[[G]], %[[U]]
// CHECK-NEXT: kernel.yield %[[A]] : tensor<?x?x6xf32>
// CHECK-NEXT: } : tensor<?x?x6xf32>
// CHECK-NEXT: sits.linear %[[H]], %{{.*}} : tensor<?x?x6xf32>, tensor<8x6xf32>

// AUDIT-LABEL: pass kernel-fuse-gated-linears
// AUDIT-NEXT: launches: 1
// AUDIT-NEXT: linears: 2
// AUDIT-NEXT: - sits.linear (gate) + sits.linear (up) + sits.glu -> kernel.launch <gated_linear>
// AUDIT-NEXT: rule: the projections read one input with weights of one type and quantization, and only the glu reads them
// AUDIT-NEXT: from: gate, up, act
func.func @mlp(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %wg = sits.weight "wg" dense<0.5> : tensor<6x8xf32>
  %wu = sits.weight "wu" dense<0.25> : tensor<6x8xf32>
  %wd = sits.weight "wd" dense<0.5> : tensor<8x6xf32>
  %g = sits.linear %x, %wg : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32> loc("gate")
  %u = sits.linear %x, %wu : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32> loc("up")
  %a = sits.glu <silu> %g, %u : tensor<?x?x6xf32> loc("act")
  %d = sits.linear %a, %wd : tensor<?x?x6xf32>, tensor<8x6xf32> -> tensor<?x?x8xf32>
  return %d : tensor<?x?x8xf32>
}

// -----

// Not fused: the gate projection is read twice, the inputs differ, or the
// weights are quantized differently.

// CHECK-LABEL: func.func @kept
// CHECK-NOT: kernel.launch
// AUDIT-LABEL: pass kernel-fuse-gated-linears
// AUDIT-NEXT: launches: 0
func.func @kept(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>) -> (tensor<?x?x6xf32>, tensor<?x?x6xf32>, tensor<?x?x6xf32>) {
  %wg = sits.weight "wg" dense<0.5> : tensor<6x8xf32>
  %wu = sits.weight "wu" dense<0.25> : tensor<6x8xf32>
  %g = sits.linear %x, %wg : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
  %u = sits.linear %x, %wu : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
  %a = sits.glu <silu> %g, %u : tensor<?x?x6xf32>
  %g2 = sits.linear %x, %wg : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
  %u2 = sits.linear %y, %wu : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
  %b = sits.glu <gelu_tanh> %g2, %u2 : tensor<?x?x6xf32>
  return %a, %b, %g : tensor<?x?x6xf32>, tensor<?x?x6xf32>, tensor<?x?x6xf32>
}
