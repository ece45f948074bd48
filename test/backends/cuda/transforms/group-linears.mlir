// RUN: sits-opt %s --kernel-group-linears | FileCheck %s
// RUN: sits-opt %s --kernel-group-linears --sits-audit-report | FileCheck %s --check-prefix=AUDIT

// Q, K and V of one input become one launch at Q, with V's weight (defined
// after Q) moved before it; five projections of one input make launches of
// 4 and 1 (a lone linear stays as it is).

// CHECK-LABEL: func.func @decode
// CHECK: %[[WV:.*]] = sits.weight "wv"
// CHECK-NEXT: %[[QKV:.*]]:3 = kernel.launch <linear_group> {
// CHECK-NEXT: sits.linear %arg0, %{{.*}} : tensor<?x?x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: sits.linear %arg0, %{{.*}} : tensor<?x?x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: sits.linear %arg0, %[[WV]] : tensor<?x?x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: } : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
// CHECK: sits.split_heads %[[QKV]]#0
// CHECK: kernel.launch <linear_group> {
// CHECK-COUNT-4: sits.linear %arg1
// CHECK: } : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
// CHECK-NEXT: sits.linear %arg1
// CHECK-NOT: kernel.launch
// CHECK: return

// AUDIT: pass kernel-group-linears
// AUDIT-NEXT: launches: 2
// AUDIT-NEXT: linears: 7
// AUDIT-NEXT: - sits.linear x3 -> kernel.launch <linear_group>
// AUDIT-NEXT: rule: they read one input, with weights of one quantization; one launch reads it once
// AUDIT-NEXT: from: q_proj, k_proj, v_proj
// AUDIT-NEXT: - sits.linear x4 -> kernel.launch <linear_group>
func.func @decode(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>) -> (tensor<?x2x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %wq = sits.weight "wq" dense<0.25> : tensor<8x8xf32>
  %wk = sits.weight "wk" dense<0.125> : tensor<4x8xf32>
  %q = sits.linear %x, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32> loc("q_proj")
  %qh = sits.split_heads %q {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %k = sits.linear %x, %wk : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32> loc("k_proj")
  %wv = sits.weight "wv" dense<0.5> : tensor<4x8xf32>
  %v = sits.linear %x, %wv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32> loc("v_proj")
  %a = sits.linear %y, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %b = sits.linear %y, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %c = sits.linear %y, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %d = sits.linear %y, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %e = sits.linear %y, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return %qh, %k, %v, %a, %b, %c, %d, %e : tensor<?x2x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
