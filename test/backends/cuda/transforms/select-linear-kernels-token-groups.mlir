// RUN: sits-opt %s --split-input-file --kernel-fuse-gated-linears --kernel-select-linear-kernels | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-fuse-gated-linears --kernel-select-linear-kernels --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --kernel-fuse-gated-linears --kernel-select-linear-kernels="gemv-token-groups=1" | FileCheck %s --check-prefix=ONE
// RUN: sits-opt %s --split-input-file --kernel-fuse-gated-linears --kernel-select-linear-kernels="gemv-token-groups=2" --sits-audit-report | FileCheck %s --check-prefix=TWO

// The tensor-core GEMV multiplies groups of 8 tokens per pass over the
// weights: as many as the KV cache's max_batch needs, at most 4; quantized
// GEMVs, GEMVs off tensor cores and the prefill GEMM keep one (the
// default, not printed).

!kv32 = !sits.kv_cache<layers = 1, max_batch = 32, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

// CHECK-LABEL: func.func @decode
// CHECK: kernel.launch <gated_linear> attributes {kernel.config = #kernel.config<gemv_tc, token_groups = 4, weight_bytes = 8192>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_quant_tc, weight_bytes = 2112>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv, weight_bytes = 72>} : tensor<?x?x6xf32>
// CHECK: sits.lm_head %{{.*}} {kernel.config = #kernel.config<gemv_tc, token_groups = 4, weight_bytes = 1024>}
// CHECK-LABEL: func.func @prefill
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm_tc, weight_bytes = 4096>}
// CHECK: sits.lm_head %{{.*}} {kernel.config = #kernel.config<gemv_tc, token_groups = 4, weight_bytes = 1024>}

// AUDIT: - kernel.launch <gated_linear> -> #kernel.config<gemv_tc, token_groups = 4, weight_bytes = 8192>
// AUDIT-NEXT: rule: decode, fp16 weights: tensor cores; 4 groups of 8 tokens per pass over the weights (up to 32 tokens a step)

// gemv-token-groups=N: N groups whatever max_batch says.
// ONE-NOT: token_groups
// TWO: - kernel.launch <gated_linear> -> #kernel.config<gemv_tc, token_groups = 2, weight_bytes = 8192>
// TWO-NEXT: rule: decode, fp16 weights: tensor cores; 2 groups of 8 tokens per pass over the weights (--gemv-token-groups)

func.func @decode(%x: tensor<?x?x64xf32>, %y: tensor<?x?x6xf32>, %cache: !kv32) -> (tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x6xf32>, tensor<?x?x16xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<32x64xf32>
  %w6 = sits.weight "w6" dense<0.25> : tensor<6x6xf32>
  %head = sits.weight "head" dense<0.5> : tensor<16x32xf32>
  %q8 = sits.weight "q8" dense<1> : tensor<32x64xi8>
  %s8 = sits.weight "s8" dense<1.0> : tensor<32x1xf16>
  %g8 = sits.dequantize %q8, %s8 {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<32x64xi8>, tensor<32x1xf16> -> tensor<32x64xf32>
  %gate = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %up = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %h = sits.glu <silu> %gate, %up : tensor<?x?x32xf32>
  %q = sits.linear %x, %g8 : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %c = sits.linear %y, %w6 : tensor<?x?x6xf32>, tensor<6x6xf32> -> tensor<?x?x6xf32>
  %l = sits.lm_head %h, %head : tensor<?x?x32xf32>, tensor<16x32xf32> -> tensor<?x?x16xf32>
  return %h, %q, %c, %l : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x6xf32>, tensor<?x?x16xf32>
}

func.func @prefill(%x: tensor<?x?x64xf32>, %cache: !kv32) -> (tensor<?x?x32xf32>, tensor<?x?x16xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<32x64xf32>
  %head = sits.weight "head" dense<0.5> : tensor<16x32xf32>
  %a = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %l = sits.lm_head %a, %head : tensor<?x?x32xf32>, tensor<16x32xf32> -> tensor<?x?x16xf32>
  return %a, %l : tensor<?x?x32xf32>, tensor<?x?x16xf32>
}

// -----

// Up to 12 sequences: two groups.
!kv12 = !sits.kv_cache<layers = 1, max_batch = 12, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

// CHECK-LABEL: func.func @decode
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_tc, token_groups = 2, weight_bytes = 4096>}
func.func @decode(%x: tensor<?x?x64xf32>, %cache: !kv12) -> tensor<?x?x32xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<32x64xf32>
  %a = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  return %a : tensor<?x?x32xf32>
}

// -----

// Up to 8 sequences: one group, not printed.
!kv8 = !sits.kv_cache<layers = 1, max_batch = 8, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

// CHECK-LABEL: func.func @decode
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_tc, weight_bytes = 4096>}
func.func @decode(%x: tensor<?x?x64xf32>, %cache: !kv8) -> tensor<?x?x32xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<32x64xf32>
  %a = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  return %a : tensor<?x?x32xf32>
}
