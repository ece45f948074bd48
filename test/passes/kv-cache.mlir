// RUN: sits-opt %s --sits-kv-cache="max-seq-len=64 max-batch=4" | FileCheck %s
// RUN: sits-opt %s --sits-kv-cache="max-seq-len=64 max-batch=4" --sits-audit-report | FileCheck %s --check-prefix=AUDIT

// A two-layer full-sequence program becomes prefill and decode steps that
// thread one bounded cache through both layers.

// CHECK: !kv_cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 1, capacity = 64, head_dim = 4, element_type = f32, layout = <contiguous>>

// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi64>, %[[KV:[^:]*]]: !kv_cache {sits.input_name = "kv_cache"}) -> (tensor<?x?x16xf32>, !kv_cache {sits.output_name = "kv_cache"})
// CHECK-SAME: sits.step = "prefill"
// CHECK: %[[PAST:.*]] = sits.kv_cache.length %[[KV]] : !kv_cache -> tensor<?xi64>
// CHECK: %[[POS:.*]] = sits.position_ids %[[IDS]] past %[[PAST]]
// CHECK: %[[KV1:.*]] = sits.kv_cache.append %[[KV]][0], %{{.*}}, %{{.*}} at %[[PAST]]
// CHECK: %[[K0:.*]], %[[V0:.*]] = sits.kv_cache.read %[[KV1]][0] : !kv_cache -> tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32>
// CHECK: sits.attention %{{.*}}, %[[K0]], %[[V0]] past_len(%[[PAST]] : tensor<?xi64>) {causal = #sits.causal<bottom_right>, num_heads = 2 : i64, num_kv_heads = 1 : i64
// CHECK: %[[KV2:.*]] = sits.kv_cache.append %[[KV1]][1], %{{.*}}, %{{.*}} at %[[PAST]]
// CHECK: %[[K1:.*]], %[[V1:.*]] = sits.kv_cache.read %[[KV2]][1]
// CHECK: sits.attention %{{.*}}, %[[K1]], %[[V1]] past_len(%[[PAST]] : tensor<?xi64>)
// CHECK: %[[DONE:.*]] = sits.kv_cache.advance %[[KV2]] by %[[IDS]]
// CHECK: return %{{.*}}, %[[DONE]] : tensor<?x?x16xf32>, !kv_cache

// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%{{.*}}: tensor<?x1xi64>, %{{.*}}: !kv_cache {sits.input_name = "kv_cache"}) -> (tensor<?x?x16xf32>, !kv_cache {sits.output_name = "kv_cache"})
// CHECK-SAME: sits.step = "decode"
// CHECK-COUNT-2: sits.kv_cache.append
// CHECK: sits.kv_cache.advance
// CHECK-NOT: func.func @forward

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

// AUDIT: pass sits-kv-cache
// AUDIT-NEXT: attention_layers_cached: 2
// AUDIT: - layer 0: sits.attention over the keys and values of the whole sequence -> sits.kv_cache.append at past_len, sits.kv_cache.read, sits.attention past_len (in @prefill and @decode)
// AUDIT-NEXT: rule: {{.*}}bottom-right causal, offset = past_len, bound = past_len + seq
// AUDIT: - layer 1:
