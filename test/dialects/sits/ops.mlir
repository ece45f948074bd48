// Round trip of every sits op: print, parse the printed form again, and check
// that both agree (generic form too).
// RUN: sits-opt %s | sits-opt | FileCheck %s
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt | FileCheck %s

// Types are printed once, as an alias.
// CHECK: !kv_cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>
// A quantized cache (--sits-insert-qdq kv-cache=int4).
// CHECK: !kv_cache1 = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 64, head_dim = 32, element_type = f16, layout = <contiguous>, quant = <cold_type = i4, hot_window = 16, group_size = 32, keys = <per_channel>, channel_block = 8, scale_type = f16>>

// CHECK-LABEL: func.func @weights_and_embedding
func.func @weights_and_embedding(%ids: tensor<?x?xi64>) -> tensor<?x?x4xf32> {
  // CHECK: %embed.weight = sits.weight "embed.weight" dense<{{.*}}> : tensor<8x4xf32>
  %table = sits.weight "embed.weight" dense<0.25> : tensor<8x4xf32>
  // CHECK: sits.embedding %embed.weight[%{{.*}}] {scale = 2.000000e+00 : f32} : tensor<8x4xf32>, tensor<?x?xi64> -> tensor<?x?x4xf32>
  %e = sits.embedding %table[%ids] {scale = 2.0 : f32} : tensor<8x4xf32>, tensor<?x?xi64> -> tensor<?x?x4xf32>
  return %e : tensor<?x?x4xf32>
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x3x4xf16>, %w: tensor<4xf16>, %b: tensor<4xf16>) -> (tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>) {
  // CHECK: sits.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : tensor<2x3x4xf16>, tensor<4xf16> -> tensor<2x3x4xf16>
  %r = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x3x4xf16>, tensor<4xf16> -> tensor<2x3x4xf16>
  // CHECK: sits.rms_norm {{.*}} {epsilon = 9.99999997E-7 : f32, weight_offset = 1.000000e+00 : f32}
  %g = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, weight_offset = 1.0 : f32} : tensor<2x3x4xf16>, tensor<4xf16> -> tensor<2x3x4xf16>
  // CHECK: sits.layer_norm %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<4xf16>) {epsilon = 9.99999974E-6 : f32}
  %l = sits.layer_norm %x, %w bias(%b : tensor<4xf16>) {epsilon = 1.0e-5 : f32} : tensor<2x3x4xf16>, tensor<4xf16> -> tensor<2x3x4xf16>
  return %r, %g, %l : tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>
}

// CHECK-LABEL: func.func @projections
func.func @projections(%x: tensor<?x?x4xbf16>, %w: tensor<6x4xbf16>, %b: tensor<6xbf16>, %head: tensor<8x4xbf16>) -> (tensor<?x?x6xbf16>, tensor<?x?x6xbf16>, tensor<?x?x8xbf16>) {
  // CHECK: sits.linear %{{.*}}, %{{.*}} : tensor<?x?x4xbf16>, tensor<6x4xbf16> -> tensor<?x?x6xbf16>
  %y = sits.linear %x, %w : tensor<?x?x4xbf16>, tensor<6x4xbf16> -> tensor<?x?x6xbf16>
  // CHECK: sits.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<6xbf16>)
  %z = sits.linear %x, %w bias(%b : tensor<6xbf16>) : tensor<?x?x4xbf16>, tensor<6x4xbf16> -> tensor<?x?x6xbf16>
  // CHECK: sits.lm_head %{{.*}}, %{{.*}} {tied} : tensor<?x?x4xbf16>, tensor<8x4xbf16> -> tensor<?x?x8xbf16>
  %logits = sits.lm_head %x, %head {tied} : tensor<?x?x4xbf16>, tensor<8x4xbf16> -> tensor<?x?x8xbf16>
  return %y, %z, %logits : tensor<?x?x6xbf16>, tensor<?x?x6xbf16>, tensor<?x?x8xbf16>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<?x16xf32>, %b: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // CHECK: sits.add %{{.*}}, %{{.*}} : tensor<?x16xf32>
  %s = sits.add %a, %b : tensor<?x16xf32>
  // CHECK: sits.activation <gelu_tanh> %{{.*}} : tensor<?x16xf32>
  %g = sits.activation <gelu_tanh> %s : tensor<?x16xf32>
  // CHECK: sits.activation <relu>
  %r = sits.activation <relu> %g : tensor<?x16xf32>
  // CHECK: sits.glu <silu> %{{.*}}, %{{.*}} : tensor<?x16xf32>
  %u = sits.glu <silu> %r, %b : tensor<?x16xf32>
  // CHECK: sits.glu <gelu>
  %v = sits.glu <gelu> %u, %b : tensor<?x16xf32>
  return %v : tensor<?x16xf32>
}

// CHECK-LABEL: func.func @heads_and_rope
func.func @heads_and_rope(%x: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>, %past: tensor<?xi64>, %table: tensor<128x8xf32>) -> tensor<?x?x64xf32> {
  // CHECK: sits.split_heads %{{.*}} {num_heads = 4 : i64} : tensor<?x?x64xf32> -> tensor<?x4x?x16xf32>
  %h = sits.split_heads %x {num_heads = 4} : tensor<?x?x64xf32> -> tensor<?x4x?x16xf32>
  // CHECK: sits.position_ids %{{.*}} : tensor<?x?xi64> -> tensor<?x?xi64>
  %p0 = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  // CHECK: sits.position_ids %{{.*}} past %{{.*}} : tensor<?xi64> : tensor<?x?xi64> -> tensor<?x?xi64>
  %p = sits.position_ids %ids past %past : tensor<?xi64> : tensor<?x?xi64> -> tensor<?x?xi64>
  // CHECK: %cos, %sin = sits.rope_cos_sin %{{.*}} {attention_scaling = 5.000000e-01 : f32, inv_freq = dense<{{.*}}> : tensor<4xf32>}
  %c, %s = sits.rope_cos_sin %p0 {inv_freq = dense<[1.0, 0.1, 0.01, 0.001]> : tensor<4xf32>, attention_scaling = 0.5 : f32} : tensor<?x?xi64> -> tensor<?x?x4xf32>, tensor<?x?x4xf32>
  // CHECK: sits.rope_gather %{{.*}}[%{{.*}}] : tensor<128x8xf32>, tensor<?x?xi64> -> tensor<?x?x4xf32>, tensor<?x?x4xf32>
  %c2, %s2 = sits.rope_gather %table[%p] : tensor<128x8xf32>, tensor<?x?xi64> -> tensor<?x?x4xf32>, tensor<?x?x4xf32>
  // CHECK: sits.rope %{{.*}}, %{{.*}}, %{{.*}} {rotary_dim = 8 : i64, style = #sits.rope_style<rotate_half>}
  %r = sits.rope %h, %c, %s {style = #sits.rope_style<rotate_half>, rotary_dim = 8} : tensor<?x4x?x16xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32> -> tensor<?x4x?x16xf32>
  // CHECK: sits.rope {{.*}} {rotary_dim = 8 : i64, style = #sits.rope_style<interleaved>}
  %i = sits.rope %r, %c2, %s2 {style = #sits.rope_style<interleaved>, rotary_dim = 8} : tensor<?x4x?x16xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32> -> tensor<?x4x?x16xf32>
  // CHECK: sits.merge_heads %{{.*}} : tensor<?x4x?x16xf32> -> tensor<?x?x64xf32>
  %m = sits.merge_heads %i : tensor<?x4x?x16xf32> -> tensor<?x?x64xf32>
  return %m : tensor<?x?x64xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x5x16xf32>, %k: tensor<2x2x5x16xf32>, %v: tensor<2x2x5x16xf32>, %mask: tensor<2x1x5x5xi1>, %fmask: tensor<5x5xf32>, %past: tensor<2xi64>) -> (tensor<2x8x5x16xf32>, tensor<2x8x5x16xf32>, tensor<2x8x5x16xf32>) {
  // CHECK: sits.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<2x1x5x5xi1>) {num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
  %a = sits.attention %q, %k, %v mask(%mask : tensor<2x1x5x5xi1>) {num_heads = 8, num_kv_heads = 2, scale = 0.25 : f32} : tensor<2x8x5x16xf32>, tensor<2x2x5x16xf32>, tensor<2x2x5x16xf32> -> tensor<2x8x5x16xf32>
  // CHECK: sits.attention {{.*}} past_len(%{{.*}} : tensor<2xi64>) {causal = #sits.causal<bottom_right>, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32, window = 4 : i64}
  %b = sits.attention %q, %k, %v past_len(%past : tensor<2xi64>) {num_heads = 8, num_kv_heads = 2, scale = 0.25 : f32, causal = #sits.causal<bottom_right>, window = 4, softcap = 50.0 : f32} : tensor<2x8x5x16xf32>, tensor<2x2x5x16xf32>, tensor<2x2x5x16xf32> -> tensor<2x8x5x16xf32>
  // CHECK: sits.attention {{.*}} mask(%{{.*}} : tensor<5x5xf32>) {causal = #sits.causal<top_left>
  %c = sits.attention %q, %k, %v mask(%fmask : tensor<5x5xf32>) {num_heads = 8, num_kv_heads = 2, scale = 0.25 : f32, causal = #sits.causal<top_left>} : tensor<2x8x5x16xf32>, tensor<2x2x5x16xf32>, tensor<2x2x5x16xf32> -> tensor<2x8x5x16xf32>
  return %a, %b, %c : tensor<2x8x5x16xf32>, tensor<2x8x5x16xf32>, tensor<2x8x5x16xf32>
}

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 64, head_dim = 16, element_type = f16, layout = #sits.kv_layout<contiguous>>

// CHECK-LABEL: func.func @kv_cache
// CHECK-SAME: (%{{.*}}: !kv_cache
func.func @kv_cache(%cache: !cache, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>, %ids: tensor<?x?xi64>) -> (!cache, tensor<?x2x64x16xf32>) {
  // CHECK: sits.kv_cache.init : !kv_cache
  %empty = sits.kv_cache.init : !cache
  // CHECK: sits.kv_cache.length %{{.*}} : !kv_cache -> tensor<?xi64>
  %past = sits.kv_cache.length %cache : !cache -> tensor<?xi64>
  // CHECK: sits.kv_cache.append %{{.*}}[1], %{{.*}}, %{{.*}} at %{{.*}} : !kv_cache, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?xi64>
  %c1 = sits.kv_cache.append %cache[1], %k, %v at %past : !cache, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?xi64>
  // CHECK: sits.kv_cache.read %{{.*}}[1] : !kv_cache -> tensor<?x2x64x16xf32>, tensor<?x2x64x16xf32>
  %kc, %vc = sits.kv_cache.read %c1[1] : !cache -> tensor<?x2x64x16xf32>, tensor<?x2x64x16xf32>
  // CHECK: sits.kv_cache.advance %{{.*}} by %{{.*}} : !kv_cache, tensor<?x?xi64>
  %c2 = sits.kv_cache.advance %c1 by %ids : !cache, tensor<?x?xi64>
  return %c2, %kc : !cache, tensor<?x2x64x16xf32>
}

// CHECK-LABEL: func.func @quantization
func.func @quantization(%x: tensor<?x2x?x32xf32>, %w: tensor<6x100xf32>) -> (tensor<?x2x?x32xf32>, tensor<6x100xf32>) {
  // CHECK: sits.quantize %{{.*}} {axis = 3 : i64, bits = 4 : i64, group_size = 32 : i64} : tensor<?x2x?x32xf32> -> tensor<?x2x?x16xi8>, tensor<?x2x?x1xf16>
  %q, %s = sits.quantize %x {bits = 4, axis = 3, group_size = 32} : tensor<?x2x?x32xf32> -> tensor<?x2x?x16xi8>, tensor<?x2x?x1xf16>
  // CHECK: sits.dequantize %{{.*}}, %{{.*}} {axis = 3 : i64, bits = 4 : i64, group_size = 32 : i64} : tensor<?x2x?x16xi8>, tensor<?x2x?x1xf16> -> tensor<?x2x?x32xf32>
  %d = sits.dequantize %q, %s {bits = 4, axis = 3, group_size = 32} : tensor<?x2x?x16xi8>, tensor<?x2x?x1xf16> -> tensor<?x2x?x32xf32>
  // Per-channel groups along the tokens, f32 scales.
  // CHECK: sits.quantize %{{.*}} {axis = 2 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<?x2x?x32xf32> -> tensor<?x2x?x32xi8>, tensor<?x2x?x32xf32>
  %q8, %s8 = sits.quantize %x {bits = 8, axis = 2, group_size = 64} : tensor<?x2x?x32xf32> -> tensor<?x2x?x32xi8>, tensor<?x2x?x32xf32>
  // A weight [6, 100] in groups of 32 (the last one of 4 values), int4 rows
  // padded from 50 to 64 bytes.
  // CHECK: sits.quantize %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : tensor<6x100xf32> -> tensor<6x64xi8>, tensor<6x4xf16>
  %wq, %ws = sits.quantize %w {bits = 4, axis = 1, group_size = 32} : tensor<6x100xf32> -> tensor<6x64xi8>, tensor<6x4xf16>
  %wd = sits.dequantize %wq, %ws {bits = 4, axis = 1, group_size = 32} : tensor<6x64xi8>, tensor<6x4xf16> -> tensor<6x100xf32>
  return %d, %wd : tensor<?x2x?x32xf32>, tensor<6x100xf32>
}

// CHECK-LABEL: func.func @attention_hot_cold
func.func @attention_hot_cold(%q: tensor<1x8x5x16xf32>, %k: tensor<1x2x64x16xf32>, %v: tensor<1x2x64x16xf32>, %ck: tensor<1x2x64x16xf32>, %cv: tensor<1x2x64x16xf32>, %past: tensor<1xi64>) -> tensor<1x8x5x16xf32> {
  // CHECK: sits.attention %{{.*}}, %{{.*}}, %{{.*}} past_len(%{{.*}} : tensor<1xi64>) cold(%{{.*}}, %{{.*}} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>) {causal = #sits.causal<bottom_right>, cold_key_block = 8 : i64, hot_window = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
  %a = sits.attention %q, %k, %v past_len(%past : tensor<1xi64>) cold(%ck, %cv : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>) {num_heads = 8, num_kv_heads = 2, scale = 0.25 : f32, causal = #sits.causal<bottom_right>, hot_window = 16, cold_key_block = 8} : tensor<1x8x5x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x8x5x16xf32>
  return %a : tensor<1x8x5x16xf32>
}

!qcache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 64, head_dim = 32, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 16, group_size = 32, keys = #sits.kv_key_groups<per_channel>, channel_block = 8, scale_type = f16>>

// CHECK-LABEL: func.func @quantized_cache
// CHECK-SAME: (%{{.*}}: !kv_cache1)
func.func @quantized_cache(%cache: !qcache) -> tensor<?xi64> {
  %past = sits.kv_cache.length %cache : !qcache -> tensor<?xi64>
  return %past : tensor<?xi64>
}

// CHECK-LABEL: func.func @tvc
func.func @tvc(%h: tensor<?x?x16xf32>, %w: tensor<64x16xf32>, %p: tensor<64x4xf32>, %t: tensor<4x16xf32>, %b: tensor<64x4xf32>) -> tensor<?x?x64xf32> {
  // CHECK: sits.tvc_lm_head %{{.*}}, %{{.*}} preview(%{{.*}}, %{{.*}}) bounds(%{{.*}}) {candidates = 8 : i64, exact_top = 2 : i64} : tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64x4xf32>, tensor<4x16xf32>, tensor<64x4xf32> -> tensor<?x?x64xf32>
  %l = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) {candidates = 8, exact_top = 2} : tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64x4xf32>, tensor<4x16xf32>, tensor<64x4xf32> -> tensor<?x?x64xf32>
  return %l : tensor<?x?x64xf32>
}
