// RUN: sits-opt %s --sits-kv-cache="max-seq-len=64 max-batch=4" --sits-insert-qdq="kv-cache=int4 kv-hot-window=16" | FileCheck %s
// RUN: sits-opt %s --sits-kv-cache="max-seq-len=64 max-batch=4" --sits-insert-qdq="kv-cache=int4 kv-hot-window=16" --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --sits-kv-cache="max-seq-len=64 max-batch=4" --sits-insert-qdq="kv-cache=int8 kv-hot-window=8" | FileCheck %s --check-prefix=INT8
// RUN: sits-opt %s --sits-kv-cache="max-seq-len=1024 max-batch=4" --sits-insert-qdq="kv-cache=int4 kv-keys=per-token" | FileCheck %s --check-prefix=TOKEN

// The KV cache after --sits-kv-cache (a two-layer program, as in
// kv-cache.mlir): the type gets an FP16 hot window and an int4 cold part;
// every layer quantizes what the cache holds (keys per channel in blocks of
// 64 tokens for int4, values per token) and the attention reads the
// dequantized copies of tokens that left the window.

// CHECK: !kv_cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 1, capacity = 64, head_dim = 4, element_type = f16, layout = <contiguous>, quant = <cold_type = i4, hot_window = 16, group_size = 4, keys = <per_channel>, channel_block = 64, scale_type = f16>>
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: %[[KV:[^:]*]]: !kv_cache {sits.input_name = "kv_cache"}) -> (tensor<?x?x16xf32>, !kv_cache {sits.output_name = "kv_cache"})
// CHECK: %[[PAST:.*]] = sits.kv_cache.length %[[KV]]
// CHECK: %[[KV1:.*]] = sits.kv_cache.append %[[KV]][0]
// CHECK: %[[K:.*]], %[[V:.*]] = sits.kv_cache.read %[[KV1]][0] : !kv_cache -> tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32>
// CHECK: %[[KQ:.*]], %[[KS:.*]] = sits.quantize %[[K]] {axis = 2 : i64, bits = 4 : i64, group_size = 64 : i64} : tensor<?x1x64x4xf32> -> tensor<?x1x64x2xi8>, tensor<?x1x1x4xf16>
// CHECK: %[[KC:.*]] = sits.dequantize %[[KQ]], %[[KS]] {axis = 2 : i64, bits = 4 : i64, group_size = 64 : i64} : tensor<?x1x64x2xi8>, tensor<?x1x1x4xf16> -> tensor<?x1x64x4xf32>
// CHECK: %[[VQ:.*]], %[[VS:.*]] = sits.quantize %[[V]] {axis = 3 : i64, bits = 4 : i64, group_size = 4 : i64} : tensor<?x1x64x4xf32> -> tensor<?x1x64x2xi8>, tensor<?x1x64x1xf16>
// CHECK: %[[VC:.*]] = sits.dequantize %[[VQ]], %[[VS]]
// CHECK: sits.attention %{{.*}}, %[[K]], %[[V]] past_len(%[[PAST]] : tensor<?xi64>) cold(%[[KC]], %[[VC]] : tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32>) {causal = #sits.causal<bottom_right>, cold_key_block = 64 : i64, hot_window = 16 : i64
// CHECK: sits.kv_cache.read %{{.*}}[1]
// CHECK-COUNT-2: sits.quantize
// CHECK: sits.attention {{.*}} cold(
// CHECK: sits.kv_cache.advance
// CHECK-LABEL: func.func @decode
// CHECK-SAME: !kv_cache
// CHECK-COUNT-4: sits.quantize
// CHECK-NOT: sits.quantize

// int8 keys are grouped per channel too (measured on llama_bytes: lower
// perplexity than per-token keys, docs/quantization.md).
// INT8: quant = <cold_type = i8, hot_window = 8, group_size = 4, keys = <per_channel>, channel_block = 64, scale_type = f16>
// INT8: sits.quantize %{{.*}} {axis = 2 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<?x1x64x4xf32> -> tensor<?x1x64x4xi8>, tensor<?x1x1x4xf16>
// INT8: cold(%{{.*}}) {causal = #sits.causal<bottom_right>, cold_key_block = 64 : i64, hot_window = 8 : i64, num_heads

// TOKEN: keys = <per_token>, channel_block = 1
// TOKEN: hot_window = 512 : i64

// AUDIT: pass sits-insert-qdq
// AUDIT-NEXT: quantize_inserted: 8
// AUDIT-NEXT: dequantize_inserted: 8
// AUDIT-NEXT: weights_quantized: 0
// AUDIT-NEXT: kv_layers_quantized: 2
// AUDIT-NEXT: - layer 0: sits.attention over a f32 KV cache of 64 tokens -> f16 hot window of 16 tokens + int4 cold part: sits.quantize/sits.dequantize of the keys (per channel in blocks of 64 tokens) and values (per token in groups of 4 channels), f16 scales, sits.attention cold(...) hot_window = 16
// AUDIT-NEXT: rule: scales come from each group's own values (absmax / 7, round to nearest even); a query at position p reads value j cold when p - j >= 16, key j when p - (last token of j's block) >= 16{{.*}}
// AUDIT: - layer 1:

func.func @forward(%ids: tensor<?x?xi64>) -> tensor<?x?x16xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %wq = sits.weight "wq" dense<0.25> : tensor<8x8xf32>
  %wkv = sits.weight "wkv" dense<0.125> : tensor<4x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  %cos, %sin = sits.rope_cos_sin %pos {inv_freq = dense<[1.0, 0.1]> : tensor<2xf32>} : tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
  %q0 = sits.linear %x, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %k0 = sits.linear %x, %wkv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %qh0 = sits.split_heads %q0 {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %kh0 = sits.split_heads %k0 {num_heads = 1} : tensor<?x?x4xf32> -> tensor<?x1x?x4xf32>
  %qr0 = sits.rope %qh0, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x2x?x4xf32>
  %kr0 = sits.rope %kh0, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x1x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x1x?x4xf32>
  %a0 = sits.attention %qr0, %kr0, %kh0 {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x2x?x4xf32>
  %m0 = sits.merge_heads %a0 : tensor<?x2x?x4xf32> -> tensor<?x?x8xf32>
  %h1 = sits.add %x, %m0 : tensor<?x?x8xf32>
  %q1 = sits.linear %h1, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %k1 = sits.linear %h1, %wkv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %qh1 = sits.split_heads %q1 {num_heads = 2} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  %kh1 = sits.split_heads %k1 {num_heads = 1} : tensor<?x?x4xf32> -> tensor<?x1x?x4xf32>
  %a1 = sits.attention %qh1, %kh1, %kh1 {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x2x?x4xf32>
  %m1 = sits.merge_heads %a1 : tensor<?x2x?x4xf32> -> tensor<?x?x8xf32>
  %h2 = sits.add %h1, %m1 : tensor<?x?x8xf32>
  %logits = sits.lm_head %h2, %table {tied} : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
