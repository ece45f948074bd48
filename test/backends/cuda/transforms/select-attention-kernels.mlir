// RUN: sits-opt %s --split-input-file --kernel-select-attention-kernels | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-select-attention-kernels --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --kernel-select-attention-kernels="decode-split-keys=64" | FileCheck %s --check-prefix=KEYS
// RUN: sits-opt %s --split-input-file --kernel-select-attention-kernels="dtype=fp32" | FileCheck %s --check-prefix=FP32
// RUN: sits-opt %s --split-input-file --kernel-select-attention-kernels="target=sm_75" | FileCheck %s --check-prefix=FP32
// RUN: sits-opt %s --split-input-file --kernel-select-attention-kernels="dtype=bf16" | FileCheck %s --check-prefix=BF16

// Decode splits the keys (256 a split, fewer for small caches: a quarter
// of 128 here) where the split kernels take the shape: head_dim a power of
// two from 8 to 256, at most 8 query heads per KV head, a 16-bit cache on
// sm_80+. Prefill runs on tensor cores for head_dim a multiple of 16 up to
// 128. The tiled kernel takes everything else. Without tensor cores (fp32,
// sm_75) every attention is tiled; a configuration in the input is kept.

// CHECK-LABEL: func.func @decode
// CHECK: sits.attention {{.*}}kernel.config = #kernel.config<attention_split, split_keys = 32, weight_bytes = 0>
// CHECK: sits.attention {{.*}}kernel.config = #kernel.config<attention, weight_bytes = 0>
// CHECK: sits.attention {{.*}}kernel.config = #kernel.config<attention_split, split_keys = 128, weight_bytes = 0>
// CHECK-LABEL: func.func @prefill
// CHECK: sits.attention {{.*}}kernel.config = #kernel.config<attention_flash, weight_bytes = 0>

// AUDIT: pass kernel-select-attention-kernels
// AUDIT-NEXT: attention: 1
// AUDIT-NEXT: attention_split: 2
// AUDIT-NEXT: attention_flash: 1
// AUDIT: rule: decode, 2 query heads per KV head, head_dim 32: split over the keys, 32 a block (4 splits)
// AUDIT: rule: decode, 16 query heads per KV head, head_dim 32: the tiled kernel (16 query heads per KV head, more than 8)
// AUDIT: rule: given in the input
// AUDIT: rule: prefill, 2 query heads per KV head, head_dim 32: tensor cores

// KEYS-LABEL: func.func @decode
// KEYS: kernel.config<attention_split, split_keys = 64, weight_bytes = 0>

// FP32-LABEL: func.func @decode
// FP32: kernel.config<attention, weight_bytes = 0>
// FP32: kernel.config<attention, weight_bytes = 0>
// FP32: kernel.config<attention_split, split_keys = 128, weight_bytes = 0>
// FP32-LABEL: func.func @prefill
// FP32: kernel.config<attention, weight_bytes = 0>

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

func.func @decode(%q: tensor<?x2x1x32xf32>, %q16: tensor<?x16x1x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>, %cache: !kv) -> (tensor<?x2x1x32xf32>, tensor<?x16x1x32xf32>, tensor<?x2x1x32xf32>) {
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x2x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x1x32xf32>
  %c = sits.attention %q16, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 16, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x16x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x16x1x32xf32>
  %d = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, kernel.config = #kernel.config<attention_split, split_keys = 128, weight_bytes = 0>} : tensor<?x2x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x1x32xf32>
  return %a, %c, %d : tensor<?x2x1x32xf32>, tensor<?x16x1x32xf32>, tensor<?x2x1x32xf32>
}

func.func @prefill(%q: tensor<?x2x?x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>, %cache: !kv) -> tensor<?x2x?x32xf32> {
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x2x?x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x?x32xf32>
  return %a : tensor<?x2x?x32xf32>
}

// -----

// head_dim 24: neither a power of two (split decode) nor a multiple of 16
// (tensor-core prefill).

// CHECK-LABEL: func.func @decode
// CHECK: kernel.config = #kernel.config<attention, weight_bytes = 0>
// CHECK-LABEL: func.func @prefill
// CHECK: kernel.config = #kernel.config<attention, weight_bytes = 0>
// AUDIT: rule: decode, 2 query heads per KV head, head_dim 24: the tiled kernel (head_dim 24 is not a power of two from 8 to 256)
// AUDIT: rule: prefill, 2 query heads per KV head, head_dim 24: the tiled kernel (head_dim 24 is not a multiple of 16 up to 128)

!kv24 = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 24, element_type = f16, layout = <contiguous>>

func.func @decode(%q: tensor<?x2x1x24xf32>, %k: tensor<?x1x128x24xf32>, %past: tensor<?xi64>, %cache: !kv24) -> tensor<?x2x1x24xf32> {
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x2x1x24xf32>, tensor<?x1x128x24xf32>, tensor<?x1x128x24xf32> -> tensor<?x2x1x24xf32>
  return %a : tensor<?x2x1x24xf32>
}

func.func @prefill(%q: tensor<?x2x?x24xf32>, %k: tensor<?x1x128x24xf32>, %past: tensor<?xi64>, %cache: !kv24) -> tensor<?x2x?x24xf32> {
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x2x?x24xf32>, tensor<?x1x128x24xf32>, tensor<?x1x128x24xf32> -> tensor<?x2x?x24xf32>
  return %a : tensor<?x2x?x24xf32>
}

// -----

// A quantized cache (int4 cold rows, groups of 32 channels): decode on
// tensor cores in an fp16 engine, the split kernel without them in bf16;
// prefill tiled.

// CHECK-LABEL: func.func @decode
// CHECK: kernel.config = #kernel.config<attention_kvq_mma, split_keys = 32, weight_bytes = 0>
// CHECK-LABEL: func.func @prefill
// CHECK: kernel.config = #kernel.config<attention_kvq, weight_bytes = 0>
// AUDIT: rule: decode, 2 query heads per KV head, head_dim 32, an int4 cache: split over the keys, 32 a block (4 splits), on tensor cores
// BF16-LABEL: func.func @decode
// BF16-LABEL: func.func @decode
// BF16-LABEL: func.func @decode
// BF16: kernel.config = #kernel.config<attention_kvq_split, split_keys = 32, weight_bytes = 0>
// BF16-LABEL: func.func @prefill
// BF16: kernel.config = #kernel.config<attention_kvq, weight_bytes = 0>

!kvq = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>, quant = <cold_type = i4, hot_window = 16, group_size = 32, keys = <per_channel>, channel_block = 8, scale_type = f16>>

func.func @decode(%q: tensor<?x2x1x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>, %cache: !kvq) -> tensor<?x2x1x32xf32> {
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x2x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x1x32xf32>
  return %a : tensor<?x2x1x32xf32>
}

func.func @prefill(%q: tensor<?x2x?x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>, %cache: !kvq) -> tensor<?x2x?x32xf32> {
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32} : tensor<?x2x?x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x?x32xf32>
  return %a : tensor<?x2x?x32xf32>
}
