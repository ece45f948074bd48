// RUN: sits-opt %s --kernel-fuse-residual-linears | FileCheck %s
// RUN: sits-opt %s --kernel-fuse-residual-linears --sits-audit-report | FileCheck %s --check-prefix=AUDIT

// residual + projection: the add becomes the GEMV's epilogue, whichever
// side the projection is on; a projection read twice stays alone.

// CHECK-LABEL: func.func @layer
// CHECK: %[[R1:.*]] = kernel.launch <residual_linear> {
// CHECK-NEXT: %[[P:.*]] = sits.linear %arg0
// CHECK-NEXT: %[[S:.*]] = sits.add %arg0, %[[P]]
// CHECK-NEXT: kernel.yield %[[S]]
// CHECK: %[[R2:.*]] = kernel.launch <residual_linear> {
// CHECK-NEXT: %[[P2:.*]] = sits.linear %[[R1]]
// CHECK-NEXT: sits.add %[[P2]], %[[R1]]
// CHECK: %[[P3:.*]] = sits.linear %[[R2]]
// CHECK-NEXT: sits.add %[[R2]], %[[P3]]
// CHECK-NOT: kernel.launch
// CHECK: return

// AUDIT: pass kernel-fuse-residual-linears
// AUDIT-NEXT: launches: 2
// AUDIT-NEXT: - sits.linear + sits.add -> kernel.launch <residual_linear>
// AUDIT-NEXT: rule: only the add reads the projection
// AUDIT-NEXT: from: o_proj, residual1
func.func @layer(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.5> : tensor<8x8xf32>
  %p = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32> loc("o_proj")
  %s = sits.add %x, %p : tensor<?x?x8xf32> loc("residual1")
  %p2 = sits.linear %s, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %s2 = sits.add %p2, %s : tensor<?x?x8xf32>
  %p3 = sits.linear %s2, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %s3 = sits.add %s2, %p3 : tensor<?x?x8xf32>
  return %s3, %p3 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
