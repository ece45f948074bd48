// RUN: sits-opt %s --split-input-file --kernel-add-few-row-prefill --kernel-select-linear-kernels | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-add-few-row-prefill --kernel-select-linear-kernels --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --kernel-add-few-row-prefill="few-row-prefill-tokens=8" --kernel-select-linear-kernels | FileCheck %s --check-prefix=EIGHT
// RUN: sits-opt %s --split-input-file --kernel-add-few-row-prefill="few-row-prefill-tokens=0" | FileCheck %s --check-prefix=NONE
// RUN: sits-opt %s --split-input-file --kernel-add-few-row-prefill="max-prefill-tokens=4" | FileCheck %s --check-prefix=CAP
// RUN: not sits-opt %s --split-input-file --kernel-add-few-row-prefill="few-row-prefill-tokens=257" 2>&1 | FileCheck %s --check-prefix=RANGE

// @prefill is copied as @prefill_few (at the end of the module), whose
// linear layers get the GEMVs: 32 rows by default, four groups of 8 per
// pass over the weights on tensor cores; @prefill keeps the GEMM and
// @decode is left alone. The copy is marked so that the reference
// executor does not take it for the prefill step.

// CHECK-LABEL: func.func @decode
// CHECK: kernel.config = #kernel.config<gemv_tc, weight_bytes = 4096>
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: sits.step = "prefill"
// CHECK: kernel.config = #kernel.config<gemm_tc, weight_bytes = 4096>
// CHECK: sits.lm_head {{.*}}kernel.config = #kernel.config<gemv_tc,
// CHECK-LABEL: func.func @prefill_few(
// CHECK-SAME: kernel.few_row_tokens = 32 : i64
// CHECK-SAME: sits.step = "prefill_few"
// CHECK: kernel.config = #kernel.config<gemv_tc, token_groups = 4, weight_bytes = 4096>
// CHECK: sits.lm_head {{.*}}kernel.config = #kernel.config<gemv_tc,

// AUDIT: programs: 1
// AUDIT-NEXT: - @prefill -> @prefill and @prefill_few (kernel.few_row_tokens = 32)
// AUDIT-NEXT: rule: prefill steps of at most 32 token rows run the decode GEMVs instead of the GEMM's tiles of 64 or 128 rows (--few-row-prefill-tokens=32)
// AUDIT: - sits.linear -> #kernel.config<gemv_tc, token_groups = 4, weight_bytes = 4096>
// AUDIT-NEXT: rule: few-row prefill, fp16 weights: tensor cores; 4 groups of 8 tokens per pass over the weights (up to 32 tokens a step)

// Eight rows: one group of 8 tokens (not printed).
// EIGHT-LABEL: func.func @prefill_few(
// EIGHT-SAME: kernel.few_row_tokens = 8 : i64
// EIGHT: kernel.config = #kernel.config<gemv_tc, weight_bytes = 4096>

// NONE: func.func @prefill({{.*}}) -> (tensor
// NONE-NOT: @prefill_few
// NONE: func.func @prefill({{.*}}) -> tensor<?x?x64xf32> {
// NONE-NEXT: return
// NONE-NEXT: }
// NONE-NEXT: func.func @prefill_few(

// A step of the prefill takes at most max_batch (2) x 4 rows.
// CAP-LABEL: func.func @prefill_few(
// CAP-SAME: kernel.few_row_tokens = 8 : i64

// RANGE: error: --few-row-prefill-tokens must be from 0 to 256, got 257

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

func.func @decode(%x: tensor<?x?x64xf32>, %cache: !kv) -> tensor<?x?x32xf32> attributes {sits.step = "decode"} {
  %w = sits.weight "w" dense<0.25> : tensor<32x64xf32>
  %a = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  return %a : tensor<?x?x32xf32>
}

func.func @prefill(%x: tensor<?x?x64xf32>, %cache: !kv) -> (tensor<?x?x32xf32>, tensor<?x?x16xf32>) attributes {sits.step = "prefill"} {
  %w = sits.weight "w" dense<0.25> : tensor<32x64xf32>
  %head = sits.weight "head" dense<0.5> : tensor<16x32xf32>
  %a = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<32x64xf32> -> tensor<?x?x32xf32>
  %l = sits.lm_head %a, %head : tensor<?x?x32xf32>, tensor<16x32xf32> -> tensor<?x?x16xf32>
  return %a, %l : tensor<?x?x32xf32>, tensor<?x?x16xf32>
}

// -----

// A @prefill_few in the input is kept as it is.
// CHECK-LABEL: func.func @prefill_few(
// CHECK-SAME: kernel.few_row_tokens = 4 : i64
// CHECK-NOT: func.func @prefill_few
// AUDIT: - @prefill_few -> kept
// AUDIT-NEXT: rule: given in the input

!kv2 = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

func.func @prefill(%x: tensor<?x?x64xf32>, %cache: !kv2) -> tensor<?x?x64xf32> {
  return %x : tensor<?x?x64xf32>
}

func.func @prefill_few(%x: tensor<?x?x64xf32>, %cache: !kv2) -> tensor<?x?x64xf32> attributes {kernel.few_row_tokens = 4} {
  return %x : tensor<?x?x64xf32>
}

// -----

// Nothing to copy: no @prefill over a KV cache.
// NONE: func.func @prefill(%{{.*}}: tensor<4xf32>)
// NONE-NOT: @prefill_few
func.func @prefill(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
