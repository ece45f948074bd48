// RUN: sits-opt %s --kernel-choose-weight-layout | FileCheck %s
// RUN: sits-opt %s --kernel-choose-weight-layout --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --kernel-choose-weight-layout="dtype=fp32" | FileCheck %s --check-prefix=ORDER
// RUN: sits-opt %s --kernel-choose-weight-layout="target=sm_75" | FileCheck %s --check-prefix=ORDER

// int4 rows of 256 inputs in groups of 128 are whole chunks of 128 levels:
// stored interleaved for the tensor-core GEMV. Groups of 64 split the
// chunks, and so do rows of 192 inputs: input order. A layout given in the
// input is kept. No tensor-core GEMV (fp32, sm_75): input order.

// CHECK-LABEL: func.func @decode
// CHECK: sits.dequantize %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 128 : i64, kernel.weight_layout = #kernel.weight_layout<interleaved>}
// CHECK: sits.dequantize %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 64 : i64, kernel.weight_layout = #kernel.weight_layout<input_order>}
// CHECK: sits.dequantize %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 64 : i64, kernel.weight_layout = #kernel.weight_layout<input_order>} : tensor<8x96xi8>
// CHECK: sits.dequantize %{{.*}} {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64, kernel.weight_layout = #kernel.weight_layout<input_order>}

// AUDIT: pass kernel-choose-weight-layout
// AUDIT-NEXT: interleaved: 1
// AUDIT-NEXT: input_order: 3
// AUDIT-NEXT: - sits.dequantize -> #kernel.weight_layout<interleaved>
// AUDIT-NEXT: rule: rows and groups of whole chunks, read by the tensor-core GEMV
// AUDIT: rule: groups of 64 inputs are not whole chunks of 128 int4 levels
// AUDIT: rule: rows of 192 inputs are not whole chunks of 128 int4 levels
// AUDIT: rule: given in the input

// ORDER-NOT: <interleaved>
// ORDER: #kernel.weight_layout<input_order>
// ORDER-NOT: <interleaved>

func.func @decode(%x: tensor<?x?x256xf32>, %y: tensor<?x?x192xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %q = sits.weight "q" dense<17> : tensor<8x128xi8>
  %s = sits.weight "s" dense<0.5> : tensor<8x2xf16>
  %w = sits.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 128 : i64} : tensor<8x128xi8>, tensor<8x2xf16> -> tensor<8x256xf32>
  %s64 = sits.weight "s64" dense<0.5> : tensor<8x4xf16>
  %w64 = sits.dequantize %q, %s64 {axis = 1 : i64, bits = 4 : i64, group_size = 64 : i64} : tensor<8x128xi8>, tensor<8x4xf16> -> tensor<8x256xf32>
  %q192 = sits.weight "q192" dense<17> : tensor<8x96xi8>
  %s192 = sits.weight "s192" dense<0.5> : tensor<8x3xf16>
  %w192 = sits.dequantize %q192, %s192 {axis = 1 : i64, bits = 4 : i64, group_size = 64 : i64} : tensor<8x96xi8>, tensor<8x3xf16> -> tensor<8x192xf32>
  %q8 = sits.weight "q8" dense<17> : tensor<8x256xi8>
  %s8 = sits.weight "s8" dense<0.5> : tensor<8x4xf16>
  %w8 = sits.dequantize %q8, %s8 {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64, kernel.weight_layout = #kernel.weight_layout<input_order>} : tensor<8x256xi8>, tensor<8x4xf16> -> tensor<8x256xf32>
  %a = sits.linear %x, %w : tensor<?x?x256xf32>, tensor<8x256xf32> -> tensor<?x?x8xf32>
  %b = sits.linear %x, %w64 : tensor<?x?x256xf32>, tensor<8x256xf32> -> tensor<?x?x8xf32>
  %c = sits.linear %y, %w192 : tensor<?x?x192xf32>, tensor<8x192xf32> -> tensor<?x?x8xf32>
  %d = sits.linear %x, %w8 : tensor<?x?x256xf32>, tensor<8x256xf32> -> tensor<?x?x8xf32>
  return %a, %b, %c, %d : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
