// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-group-linears --kernel-select-linear-kernels | FileCheck %s
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-group-linears --kernel-select-linear-kernels --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-group-linears --kernel-select-linear-kernels="dtype=fp32" | FileCheck %s --check-prefix=FP32
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-group-linears --kernel-select-linear-kernels="target=sm_75" | FileCheck %s --check-prefix=FP32
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-group-linears --kernel-select-linear-kernels="gemv-quant-tiles=4" | FileCheck %s --check-prefix=TILES

// Decode runs GEMVs and prefill GEMMs, on tensor cores for 16-bit weights
// with K a multiple of 8 on sm_80 and newer; int8/int4 weights take the
// quantized GEMV at decode (its tensor-core form when the groups are whole
// chunks), and prefill's GEMM over the dequantized weights. An LM head of
// many tiles takes two per block. weight_bytes counts the weights as
// stored: 16-bit matrices, levels and f16 scales, f32 biases.

// CHECK-LABEL: func.func @decode
// CHECK: kernel.launch <linear_group> attributes {kernel.config = #kernel.config<gemv_tc, weight_bytes = 256>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv, weight_bytes = 72>} : tensor<?x?x6xf32>
// CHECK: kernel.launch <gated_linear> attributes {kernel.config = #kernel.config<gemv_quant_tc, weight_bytes = 4224>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_quant, weight_bytes = 2176>}
// CHECK: sits.lm_head %{{.*}} {kernel.config = #kernel.config<gemv_tc, tiles = 2, weight_bytes = 540672>}
// CHECK-LABEL: func.func @prefill
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm_tc, weight_bytes = 2112>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm, weight_bytes = 72>} : tensor<?x?x6xf32>
// CHECK: sits.lm_head %{{.*}} {kernel.config = #kernel.config<gemv_tc, tiles = 2, weight_bytes = 540672>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_tc, weight_bytes = 7>}

// AUDIT: pass kernel-select-linear-kernels
// AUDIT-NEXT: gemv: 1
// AUDIT-NEXT: gemv_tc: 4
// AUDIT-NEXT: gemv_quant: 1
// AUDIT-NEXT: gemv_quant_tc: 1
// AUDIT-NEXT: gemm: 1
// AUDIT-NEXT: gemm_tc: 1
// AUDIT-NEXT: gemm_split_k: 0
// AUDIT-NEXT: decode_weight_bytes: 547400
// AUDIT-NEXT: - kernel.launch <linear_group> -> #kernel.config<gemv_tc, weight_bytes = 256>
// AUDIT-NEXT: rule: decode, fp16 weights: tensor cores
// AUDIT-NEXT: from: qk
// AUDIT-NEXT: - sits.linear -> #kernel.config<gemv, weight_bytes = 72>
// AUDIT-NEXT: rule: decode, fp16 weights: no tensor cores, K = 6 is not a multiple of 8
// AUDIT: - kernel.launch <gated_linear> -> #kernel.config<gemv_quant_tc, weight_bytes = 4224>
// AUDIT-NEXT: rule: decode, int8 weights in groups of 64: tensor cores
// AUDIT: - sits.linear -> #kernel.config<gemv_quant, weight_bytes = 2176>
// AUDIT-NEXT: rule: decode, int8 weights in groups of 32: no tensor cores, groups of 32 are not whole chunks of 64 levels
// AUDIT: - sits.lm_head -> #kernel.config<gemv_tc, tiles = 2, weight_bytes = 540672>
// AUDIT-NEXT: rule: LM head, fp16 weights: tensor cores; 2 tiles per block (2112 tiles: plenty of blocks either way)
// AUDIT: rule: prefill, int8 weights in groups of 64 (dequantized for the GEMM): tensor cores
// AUDIT: rule: prefill, fp16 weights: no tensor cores, K = 6 is not a multiple of 8
// AUDIT: - sits.linear -> #kernel.config<gemv_tc, weight_bytes = 7>
// AUDIT-NEXT: rule: given in the input

// Without tensor cores (fp32 weights, or before sm_80) no launch takes them
// but the one whose configuration the input gives.
// FP32-LABEL: func.func @decode
// FP32: kernel.launch <linear_group> attributes {kernel.config = #kernel.config<gemv, weight_bytes = {{[0-9]+}}>}
// FP32: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv, weight_bytes = {{[0-9]+}}>}
// FP32: kernel.launch <gated_linear> attributes {kernel.config = #kernel.config<gemv_quant, weight_bytes = 4224>}
// FP32: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_quant, weight_bytes = 2176>}
// FP32: sits.lm_head %{{.*}} {kernel.config = #kernel.config<gemv, weight_bytes = {{[0-9]+}}>}
// FP32-LABEL: func.func @prefill
// FP32: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm, weight_bytes = 2112>}
// FP32: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm, weight_bytes = {{[0-9]+}}>}
// FP32: sits.lm_head %{{.*}} {kernel.config = #kernel.config<gemv, weight_bytes = {{[0-9]+}}>}
// FP32: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_tc, weight_bytes = 7>}

// gemv-quant-tiles: a gate/up pair takes at most 2 tiles, a single matrix 4.
// TILES: kernel.launch <gated_linear> attributes {kernel.config = #kernel.config<gemv_quant_tc, tiles = 2,
// TILES-LABEL: func.func @prefill

func.func @decode(%x: tensor<?x?x8xf32>, %y: tensor<?x?x6xf32>, %z: tensor<?x?x64xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x6xf32>, tensor<?x?x8xf32>, tensor<?x?x32xf32>, tensor<?x?x33792xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %w6 = sits.weight "w6" dense<0.25> : tensor<6x6xf32>
  %q8 = sits.weight "q8" dense<1> : tensor<32x64xi8>
  %s8 = sits.weight "s8" dense<1.0> : tensor<32x1xf16>
  %g8 = sits.dequantize %q8, %s8 {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<32x64xi8>, tensor<32x1xf16> -> tensor<32x64xf32>
  %s32 = sits.weight "s32" dense<1.0> : tensor<32x2xf16>
  %g32 = sits.dequantize %q8, %s32 {axis = 1 : i64, bits = 8 : i64, group_size = 32 : i64} : tensor<32x64xi8>, tensor<32x2xf16> -> tensor<32x64xf32>
  %head = sits.weight "head" dense<0.5> : tensor<33792x8xf32>
  %a = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32> loc("qk")
  %b = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32> loc("qk")
  %c = sits.linear %y, %w6 : tensor<?x?x6xf32>, tensor<6x6xf32> -> tensor<?x?x6xf32>
  %gate = sits.linear %z, %g8 : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %up = sits.linear %z, %g8 : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %h = sits.glu <silu> %gate, %up : tensor<?x?x32xf32>
  %d = sits.linear %z, %g32 : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %l = sits.lm_head %b, %head : tensor<?x?x8xf32>, tensor<33792x8xf32> -> tensor<?x?x33792xf32>
  %hd = sits.add %h, %d : tensor<?x?x32xf32>
  return %a, %c, %b, %hd, %l : tensor<?x?x8xf32>, tensor<?x?x6xf32>, tensor<?x?x8xf32>, tensor<?x?x32xf32>, tensor<?x?x33792xf32>
}

func.func @prefill(%y: tensor<?x?x6xf32>, %z: tensor<?x?x64xf32>, %x: tensor<?x?x8xf32>) -> (tensor<?x?x32xf32>, tensor<?x?x6xf32>, tensor<?x?x33792xf32>, tensor<?x?x8xf32>) {
  %w6 = sits.weight "w6" dense<0.25> : tensor<6x6xf32>
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %q8 = sits.weight "q8" dense<1> : tensor<32x64xi8>
  %s8 = sits.weight "s8" dense<1.0> : tensor<32x1xf16>
  %g8 = sits.dequantize %q8, %s8 {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<32x64xi8>, tensor<32x1xf16> -> tensor<32x64xf32>
  %head = sits.weight "head" dense<0.5> : tensor<33792x8xf32>
  %d = sits.linear %z, %g8 : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %c = sits.linear %y, %w6 : tensor<?x?x6xf32>, tensor<6x6xf32> -> tensor<?x?x6xf32>
  %l = sits.lm_head %x, %head : tensor<?x?x8xf32>, tensor<33792x8xf32> -> tensor<?x?x33792xf32>
  %e = sits.linear %x, %w {kernel.config = #kernel.config<gemv_tc, weight_bytes = 7>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return %d, %c, %l, %e : tensor<?x?x32xf32>, tensor<?x?x6xf32>, tensor<?x?x33792xf32>, tensor<?x?x8xf32>
}
