// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-weight-layout --kernel-choose-operand-layout | FileCheck %s
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-weight-layout --kernel-choose-operand-layout --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-weight-layout="dtype=fp32" --kernel-choose-operand-layout="dtype=fp32" | FileCheck %s --check-prefix=NONE
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-weight-layout="target=sm_75" --kernel-choose-operand-layout="target=sm_75" | FileCheck %s --check-prefix=NONE
// Rows stored in input order (given in the input) are read as f32 rows.
// RUN: sed 's/group_size = 128 : i64}/group_size = 128 : i64, kernel.weight_layout = #kernel.weight_layout<input_order>}/' %s | sits-opt --kernel-fuse-gated-linears --kernel-choose-weight-layout --kernel-choose-operand-layout | FileCheck %s --check-prefix=NONE

// At decode, a norm whose readers are all int4 tensor-core GEMVs over
// interleaved rows writes their 16-bit operands (a <norm> launch with
// output_operand_bits = 4), and so does the gated launch whose product only
// the int4 down projection reads. A norm that an fp16 GEMV also reads keeps
// f32.

// CHECK-LABEL: func.func @decode
// CHECK: %[[N:.*]] = kernel.launch <norm> attributes {output_operand_bits = 4 : i64} {
// CHECK-NEXT: sits.rms_norm %arg0
// CHECK: kernel.launch <gated_linear> attributes {output_operand_bits = 4 : i64} {
// CHECK-NEXT: sits.linear %[[N]]
// CHECK: %[[MIXED:.*]] = sits.rms_norm
// CHECK-NEXT: sits.linear %[[MIXED]]

// AUDIT: pass kernel-choose-operand-layout
// AUDIT-NEXT: norms: 1
// AUDIT-NEXT: gated: 1
// AUDIT-NEXT: - sits.rms_norm -> kernel.launch <norm> {output_operand_bits = 4}
// AUDIT-NEXT: rule: every reader is a tensor-core GEMV over 4-bit weights
// AUDIT-NEXT: from: mlp_norm

// NONE-NOT: output_operand_bits
func.func @decode(%x: tensor<?x?x128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  %nw = sits.weight "norm" dense<1.0> : tensor<128xf32>
  %q = sits.weight "q" dense<17> : tensor<128x64xi8>
  %s = sits.weight "s" dense<0.5> : tensor<128x1xf16>
  %w = sits.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 128 : i64} : tensor<128x64xi8>, tensor<128x1xf16> -> tensor<128x128xf32>
  %wf = sits.weight "wf" dense<0.5> : tensor<128x128xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32> loc("mlp_norm")
  %g = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %u = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %a = sits.glu <silu> %g, %u : tensor<?x?x128xf32>
  %d = sits.linear %a, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %m = sits.rms_norm %d, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32>
  %e = sits.linear %m, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %f = sits.linear %m, %wf : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  return %e, %f : tensor<?x?x128xf32>, tensor<?x?x128xf32>
}
