// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-operand-layout | FileCheck %s
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-operand-layout --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-operand-layout="dtype=bf16" | FileCheck %s
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-operand-layout="half-operands=false" | FileCheck %s --check-prefix=NONE
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-operand-layout="dtype=fp32" | FileCheck %s --check-prefix=NONE
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-choose-operand-layout="target=sm_75" | FileCheck %s --check-prefix=NONE

// 16-bit weights: at decode, a norm whose readers are all 16-bit
// tensor-core GEMVs writes their operands in input order
// (output_operand_bits = 16), and so does the gated launch whose product
// only the down projection reads. A norm that another op also reads, or
// whose rows (K = 100) are not 16-byte aligned, keeps f32. At the few-row
// prefill the linear layers are the same GEMVs; at prefill they are
// tensor-core GEMMs, which read the input order too, also over int4
// weights (dequantized to 16 bits for the GEMM): the norm and the gated
// launch write 16 bits there as well; an unaligned prefill norm keeps f32.

// CHECK-LABEL: func.func @decode
// CHECK: %[[N:.*]] = kernel.launch <norm> attributes {output_operand_bits = 16 : i64} {
// CHECK-NEXT: sits.rms_norm %arg0
// CHECK: kernel.launch <gated_linear> attributes {output_operand_bits = 16 : i64} {
// CHECK-NEXT: sits.linear %[[N]]
// CHECK: %[[SHARED:.*]] = sits.rms_norm
// CHECK-NEXT: sits.linear %[[SHARED]]
// CHECK-NEXT: sits.add %[[SHARED]]
// CHECK-LABEL: func.func @decode_unaligned
// CHECK-NOT: output_operand_bits
// CHECK-LABEL: func.func @prefill(
// CHECK: %[[PN:.*]] = kernel.launch <norm> attributes {output_operand_bits = 16 : i64} {
// CHECK-NEXT: sits.rms_norm %arg0
// CHECK: kernel.launch <gated_linear> attributes {output_operand_bits = 16 : i64} {
// CHECK-NEXT: sits.linear %[[PN]]
// CHECK: %[[PQ:.*]] = kernel.launch <norm> attributes {output_operand_bits = 16 : i64} {
// CHECK: sits.linear %[[PQ]], %{{.*}} : {{.*}}tensor<128x128xf32>
// CHECK-LABEL: func.func @prefill_unaligned
// CHECK-NOT: output_operand_bits
// CHECK-LABEL: func.func @prefill_few
// CHECK: kernel.launch <norm> attributes {output_operand_bits = 16 : i64} {

// AUDIT: pass kernel-choose-operand-layout
// AUDIT-NEXT: norms: 4
// AUDIT-NEXT: gated: 2
// AUDIT-NEXT: - sits.rms_norm -> kernel.launch <norm> {output_operand_bits = 16}
// AUDIT-NEXT: rule: every reader is a tensor-core GEMV over 16-bit weights
// AUDIT-NEXT: from: mlp_norm
// AUDIT-NEXT: - kernel.launch <gated_linear> -> kernel.launch <gated_linear> {output_operand_bits = 16}
// AUDIT-NEXT: rule: act(gate) * up: every reader is a tensor-core GEMV over 16-bit weights
// AUDIT-NEXT: - sits.rms_norm -> kernel.launch <norm> {output_operand_bits = 16}
// AUDIT-NEXT: rule: every reader is a tensor-core GEMM (or LM head GEMV) over 16-bit weights
// AUDIT-NEXT: from: prefill_norm
// AUDIT-NEXT: - sits.rms_norm -> kernel.launch <norm> {output_operand_bits = 16}
// AUDIT-NEXT: rule: every reader is a tensor-core GEMM (or LM head GEMV) over 16-bit weights
// AUDIT-NEXT: - kernel.launch <gated_linear> -> kernel.launch <gated_linear> {output_operand_bits = 16}
// AUDIT-NEXT: rule: act(gate) * up: every reader is a tensor-core GEMM (or LM head GEMV) over 16-bit weights

// NONE-NOT: output_operand_bits
func.func @decode(%x: tensor<?x?x128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  %nw = sits.weight "norm" dense<1.0> : tensor<128xf32>
  %w = sits.weight "w" dense<0.5> : tensor<128x128xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32> loc("mlp_norm")
  %g = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %u = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %a = sits.glu <silu> %g, %u : tensor<?x?x128xf32>
  %d = sits.linear %a, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %m = sits.rms_norm %d, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32>
  %e = sits.linear %m, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %f = sits.add %m, %e : tensor<?x?x128xf32>
  return %e, %f : tensor<?x?x128xf32>, tensor<?x?x128xf32>
}

func.func @decode_unaligned(%x: tensor<?x?x100xf32>) -> tensor<?x?x100xf32> {
  %nw = sits.weight "norm_u" dense<1.0> : tensor<100xf32>
  %w = sits.weight "w_u" dense<0.5> : tensor<100x100xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x100xf32>, tensor<100xf32> -> tensor<?x?x100xf32>
  %y = sits.linear %n, %w : tensor<?x?x100xf32>, tensor<100x100xf32> -> tensor<?x?x100xf32>
  return %y : tensor<?x?x100xf32>
}

func.func @prefill(%x: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> {
  %nw = sits.weight "norm_p" dense<1.0> : tensor<128xf32>
  %w = sits.weight "w_p" dense<0.5> : tensor<128x128xf32>
  %q = sits.weight "q_p" dense<0> : tensor<128x64xi8>
  %qs = sits.weight "qs_p" dense<1.0> : tensor<128x1xf16>
  %wq = sits.dequantize %q, %qs {axis = 1 : i64, bits = 4 : i64, group_size = 128 : i64} : tensor<128x64xi8>, tensor<128x1xf16> -> tensor<128x128xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32> loc("prefill_norm")
  %g = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %u = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %a = sits.glu <silu> %g, %u : tensor<?x?x128xf32>
  %d = sits.linear %a, %wq : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  %m = sits.rms_norm %d, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32>
  %y = sits.linear %m, %wq : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  return %y : tensor<?x?x128xf32>
}

func.func @prefill_unaligned(%x: tensor<?x?x100xf32>) -> tensor<?x?x100xf32> {
  %nw = sits.weight "norm_pu" dense<1.0> : tensor<100xf32>
  %w = sits.weight "w_pu" dense<0.5> : tensor<100x100xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x100xf32>, tensor<100xf32> -> tensor<?x?x100xf32>
  %y = sits.linear %n, %w : tensor<?x?x100xf32>, tensor<100x100xf32> -> tensor<?x?x100xf32>
  return %y : tensor<?x?x100xf32>
}

func.func @prefill_few(%x: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> attributes {kernel.few_row_tokens = 32 : i64} {
  %nw = sits.weight "norm_f" dense<1.0> : tensor<128xf32>
  %w = sits.weight "w_f" dense<0.5> : tensor<128x128xf32>
  %n = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32>
  %y = sits.linear %n, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  return %y : tensor<?x?x128xf32>
}
