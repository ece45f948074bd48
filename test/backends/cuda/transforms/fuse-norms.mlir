// RUN: sits-opt %s --kernel-group-linears --kernel-fuse-norms="norm-fusion=true" | FileCheck %s
// RUN: sits-opt %s --kernel-group-linears --kernel-fuse-norms="norm-fusion=true" --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --kernel-group-linears --kernel-fuse-norms | FileCheck %s --check-prefix=OFF
// RUN: sits-opt %s --kernel-group-linears --kernel-fuse-norms="norm-fusion=true dtype=fp32" | FileCheck %s --check-prefix=OFF
// RUN: sits-opt %s --kernel-group-linears --kernel-fuse-norms="norm-fusion=true target=sm_75" | FileCheck %s --check-prefix=OFF

// At decode, a norm whose row one launch reads joins it: the Q/K/V launch,
// and a lone LM head (which becomes an <lm_head> launch). In prefill, and
// for fp32 weights or GPUs without tensor cores (no tensor-core GEMV), the
// norms stay; so does a norm that something besides a GEMV reads.

// CHECK-LABEL: func.func @decode
// CHECK: kernel.launch <linear_group> {
// CHECK-NEXT: %[[N:.*]] = sits.rms_norm %arg0
// CHECK-NEXT: sits.linear %[[N]]
// CHECK-NEXT: sits.linear %[[N]]
// CHECK: %[[TWICE:.*]] = sits.rms_norm
// CHECK-NEXT: sits.linear %[[TWICE]], %{{.*}} : tensor<?x?x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: sits.add %[[TWICE]], %{{.*}} : tensor<?x?x8xf32>
// CHECK: kernel.launch <lm_head> {
// CHECK-NEXT: sits.rms_norm
// CHECK-NEXT: sits.lm_head
// CHECK-LABEL: func.func @prefill
// CHECK-NOT: kernel.launch <lm_head>

// AUDIT: pass kernel-fuse-norms
// AUDIT-NEXT: norms: 2
// AUDIT-NEXT: - sits.rms_norm -> kernel.launch <linear_group>
// AUDIT-NEXT: rule: decode, unquantized weights on the tensor-core GEMV, and one launch reads the normalized row
// AUDIT-NEXT: from: input_norm
// AUDIT-NEXT: - sits.rms_norm -> kernel.launch <lm_head>
// AUDIT-NEXT: rule: decode
// AUDIT-NEXT: from: final_norm

// OFF-NOT: sits.rms_norm {{.*}}\n{{.*}}kernel.yield
// OFF-NOT: kernel.launch <lm_head>
func.func @decode(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) {
  %nw = sits.weight "norm" dense<1.0> : tensor<8xf32>
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %head = sits.weight "head" dense<0.5> : tensor<16x8xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32> loc("input_norm")
  %q = sits.linear %n, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %k = sits.linear %n, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %n2 = sits.rms_norm %q, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %a = sits.linear %n2, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %b = sits.add %n2, %q : tensor<?x?x8xf32>
  %n3 = sits.rms_norm %k, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32> loc("final_norm")
  %l = sits.lm_head %n3, %head : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %q, %k, %a, %b, %l : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>
}

func.func @prefill(%x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
  %nw = sits.weight "norm" dense<1.0> : tensor<8xf32>
  %head = sits.weight "head" dense<0.5> : tensor<16x8xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %l = sits.lm_head %n, %head : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %l : tensor<?x?x16xf32>
}
