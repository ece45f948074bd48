// RUN: sits-opt %s --split-input-file --kernel-fuse-rope-append | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-fuse-rope-append --sits-audit-report | FileCheck %s --check-prefix=AUDIT

!kv = !sits.kv_cache<layers = 1, max_batch = 4, kv_heads = 1, capacity = 64, head_dim = 4, element_type = f32, layout = <contiguous>>

// The keys' rope and the query's rope (of the attention that reads the
// layer) run inside the append, at the append.

// CHECK-LABEL: func.func @decode
// CHECK: %[[L:.*]]:2 = kernel.launch <rope_kv_append> {
// CHECK-NEXT: %[[KR:.*]] = sits.rope %{{.*}} : tensor<?x1x?x4xf32>
// CHECK-NEXT: %[[QR:.*]] = sits.rope %{{.*}} : tensor<?x2x?x4xf32>
// CHECK-NEXT: %[[APP:.*]] = sits.kv_cache.append %arg1[0], %[[KR]], %arg3
// CHECK-NEXT: kernel.yield %[[QR]], %[[APP]] : tensor<?x2x?x4xf32>, !kv_cache
// CHECK: sits.kv_cache.read %[[L]]#1[0]
// CHECK: sits.attention %[[L]]#0,

// AUDIT-LABEL: pass kernel-fuse-rope-append
// AUDIT-NEXT: launches: 1
// AUDIT-NEXT: ropes: 2
// AUDIT-NEXT: - sits.rope (keys) + sits.rope (query) + sits.kv_cache.append -> kernel.launch <rope_kv_append>
// AUDIT-NEXT: rule: only the append reads the rotated keys, only the layer's attention the rotated query
// AUDIT-NEXT: from: k_rope, q_rope, append
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv, %q: tensor<?x2x?x4xf32>, %v: tensor<?x1x?x4xf32>, %k: tensor<?x1x?x4xf32>, %cos: tensor<?x?x2xf32>, %sin: tensor<?x?x2xf32>) -> tensor<?x2x?x4xf32> {
  %past = sits.kv_cache.length %kv : !kv -> tensor<?xi64>
  %qr = sits.rope %q, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x2x?x4xf32> loc("q_rope")
  %kr = sits.rope %k, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x1x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x1x?x4xf32> loc("k_rope")
  %kv1 = sits.kv_cache.append %kv[0], %kr, %v at %past : !kv, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi64> loc("append")
  %key, %value = sits.kv_cache.read %kv1[0] : !kv -> tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32>
  %a = sits.attention %qr, %key, %value past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 4, kv_heads = 1, capacity = 64, head_dim = 4, element_type = f32, layout = <contiguous>>

// The query rotated after the append: the launch goes to the query's rope,
// and the cache read between them moves after it.

// CHECK-LABEL: func.func @query_after
// CHECK: %[[L:.*]]:2 = kernel.launch <rope_kv_append> {
// CHECK-NEXT: = sits.rope
// CHECK-NEXT: = sits.rope
// CHECK-NEXT: = sits.kv_cache.append
// CHECK: sits.kv_cache.read %[[L]]#1[0]
// AUDIT-LABEL: pass kernel-fuse-rope-append
// AUDIT-NEXT: launches: 1
func.func @query_after(%ids: tensor<?x1xi64>, %kv: !kv, %q: tensor<?x2x?x4xf32>, %v: tensor<?x1x?x4xf32>, %k: tensor<?x1x?x4xf32>, %cos: tensor<?x?x2xf32>, %sin: tensor<?x?x2xf32>) -> tensor<?x2x?x4xf32> {
  %past = sits.kv_cache.length %kv : !kv -> tensor<?xi64>
  %kr = sits.rope %k, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x1x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x1x?x4xf32>
  %kv1 = sits.kv_cache.append %kv[0], %kr, %v at %past : !kv, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi64>
  %key, %value = sits.kv_cache.read %kv1[0] : !kv -> tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32>
  %qr = sits.rope %q, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x2x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x2x?x4xf32>
  %a = sits.attention %qr, %key, %value past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32> -> tensor<?x2x?x4xf32>
  return %a : tensor<?x2x?x4xf32>
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 4, kv_heads = 1, capacity = 64, head_dim = 4, element_type = f32, layout = <contiguous>>

// Rotated keys that something else reads too, and no rope on the query:
// nothing to fuse.

// CHECK-LABEL: func.func @kept
// CHECK-NOT: kernel.launch
// AUDIT-LABEL: pass kernel-fuse-rope-append
// AUDIT-NEXT: launches: 0
func.func @kept(%ids: tensor<?x1xi64>, %kv: !kv, %q: tensor<?x2x?x4xf32>, %v: tensor<?x1x?x4xf32>, %k: tensor<?x1x?x4xf32>, %cos: tensor<?x?x2xf32>, %sin: tensor<?x?x2xf32>) -> (tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>) {
  %past = sits.kv_cache.length %kv : !kv -> tensor<?xi64>
  %kr = sits.rope %k, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 4} : tensor<?x1x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<?x1x?x4xf32>
  %kv1 = sits.kv_cache.append %kv[0], %kr, %v at %past : !kv, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?xi64>
  %key, %value = sits.kv_cache.read %kv1[0] : !kv -> tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32>
  %a = sits.attention %q, %key, %value past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x4xf32>, tensor<?x1x64x4xf32>, tensor<?x1x64x4xf32> -> tensor<?x2x?x4xf32>
  return %a, %kr : tensor<?x2x?x4xf32>, tensor<?x1x?x4xf32>
}
