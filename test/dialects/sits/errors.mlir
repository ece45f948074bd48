// Every verifier error of the sits dialect, with the message users see.
// RUN: sits-opt %s -split-input-file -verify-diagnostics

func.func @weight_empty_name() {
  // expected-error @+1 {{'sits.weight' op needs a non-empty name}}
  %w = sits.weight "" dense<1.0> : tensor<4xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<8xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op table must have rank 2, got 'tensor<8xf32>'}}
  %e = sits.embedding %t[%ids] : tensor<8xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @embedding_result_rank(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op result must have rank 3, got 'tensor<2x4xf32>'}}
  %e = sits.embedding %t[%ids] : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x4xf32>
  return
}

// -----

func.func @embedding_hidden(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op result dimension 2 is 5, but must equal the table's hidden size (4)}}
  %e = sits.embedding %t[%ids] : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x5xf32>
  return
}

// -----

func.func @embedding_ids_dims(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op result dimension 1 is 7, but must equal ids dimension 1 (3)}}
  %e = sits.embedding %t[%ids] : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x7x4xf32>
  return
}

// -----

func.func @embedding_element_type(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op result element type 'f16' must match table element type 'f32'}}
  %e = sits.embedding %t[%ids] : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf16>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'sits.rms_norm' op weight dimension 0 is 4, but must equal the input's last dimension (8)}}
  %y = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x8xf32>, tensor<4xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<2x8xf32>, %w: tensor<1x8xf32>) {
  // expected-error @+1 {{'sits.rms_norm' op weight must have rank 1, got 'tensor<1x8xf32>'}}
  %y = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x8xf32>, tensor<1x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'sits.rms_norm' op epsilon must be >= 0, got -1}}
  %y = sits.rms_norm %x, %w {epsilon = -1.0 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_result(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'sits.rms_norm' op result dimension 0 is 3, but must equal input dimension 0 (2)}}
  %y = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<3x8xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{'sits.layer_norm' op bias dimension 0 is 6, but must equal the input's last dimension (8)}}
  %y = sits.layer_norm %x, %w bias(%b : tensor<6xf32>) {epsilon = 1.0e-5 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_bias_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'sits.layer_norm' op bias must have rank 1, got 'tensor<2x8xf32>'}}
  %y = sits.layer_norm %x, %w bias(%b : tensor<2x8xf32>) {epsilon = 1.0e-5 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_in_features(%x: tensor<2x8xf32>, %w: tensor<6x4xf32>) {
  // expected-error @+1 {{'sits.linear' op input dimension 1 is 8, but must equal the weight's in_features (dimension 1) (4)}}
  %y = sits.linear %x, %w : tensor<2x8xf32>, tensor<6x4xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @linear_out_features(%x: tensor<2x4xf32>, %w: tensor<6x4xf32>) {
  // expected-error @+1 {{'sits.linear' op result dimension 1 is 5, but must equal the weight's out_features (dimension 0) (6)}}
  %y = sits.linear %x, %w : tensor<2x4xf32>, tensor<6x4xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'sits.linear' op weight must have rank 2, got 'tensor<4xf32>'}}
  %y = sits.linear %x, %w : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_weight_type(%x: tensor<2x4xf32>, %w: tensor<6x4xf16>) {
  // expected-error @+1 {{'sits.linear' op weight element type 'f16' must match input element type 'f32'}}
  %y = sits.linear %x, %w : tensor<2x4xf32>, tensor<6x4xf16> -> tensor<2x6xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x4xf32>, %w: tensor<6x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'sits.linear' op bias dimension 0 is 4, but must equal the weight's out_features (6)}}
  %y = sits.linear %x, %w bias(%b : tensor<4xf32>) : tensor<2x4xf32>, tensor<6x4xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @lm_head_vocab(%x: tensor<2x3x4xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+1 {{'sits.lm_head' op result dimension 2 is 15, but must equal the weight's out_features (dimension 0) (16)}}
  %y = sits.lm_head %x, %w : tensor<2x3x4xf32>, tensor<16x4xf32> -> tensor<2x3x15xf32>
  return
}

// -----

func.func @split_heads_divisible(%x: tensor<2x3x10xf32>) {
  // expected-error @+1 {{'sits.split_heads' op input width 10 is not a multiple of num_heads (4)}}
  %y = sits.split_heads %x {num_heads = 4} : tensor<2x3x10xf32> -> tensor<2x4x3x2xf32>
  return
}

// -----

func.func @split_heads_positive(%x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'sits.split_heads' op num_heads must be > 0, got 0}}
  %y = sits.split_heads %x {num_heads = 0} : tensor<2x3x8xf32> -> tensor<2x4x3x2xf32>
  return
}

// -----

func.func @split_heads_result(%x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'sits.split_heads' op result dimension 3 is 4, but must equal input width / num_heads (2)}}
  %y = sits.split_heads %x {num_heads = 4} : tensor<2x3x8xf32> -> tensor<2x4x3x4xf32>
  return
}

// -----

func.func @split_heads_seq(%x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'sits.split_heads' op result dimension 2 is 5, but must equal the sequence length (3)}}
  %y = sits.split_heads %x {num_heads = 4} : tensor<2x3x8xf32> -> tensor<2x4x5x2xf32>
  return
}

// -----

func.func @merge_heads_width(%x: tensor<2x4x3x2xf32>) {
  // expected-error @+1 {{'sits.merge_heads' op result dimension 2 is 6, but must equal heads * head_dim (8)}}
  %y = sits.merge_heads %x : tensor<2x4x3x2xf32> -> tensor<2x3x6xf32>
  return
}

// -----

func.func @merge_heads_rank(%x: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'sits.merge_heads' op input must have rank 4, got 'tensor<2x4x3xf32>'}}
  %y = sits.merge_heads %x : tensor<2x4x3xf32> -> tensor<2x3x6xf32>
  return
}

// -----

func.func @position_ids_shape(%ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.position_ids' op result dimension 1 is 4, but must equal the sequence length (3)}}
  %p = sits.position_ids %ids : tensor<2x3xi64> -> tensor<2x4xi64>
  return
}

// -----

func.func @position_ids_past(%ids: tensor<2x3xi64>, %past: tensor<3xi64>) {
  // expected-error @+1 {{'sits.position_ids' op past_len dimension 0 is 3, but must equal the batch size (2)}}
  %p = sits.position_ids %ids past %past : tensor<3xi64> : tensor<2x3xi64> -> tensor<2x3xi64>
  return
}

// -----

func.func @rope_cos_sin_freq(%p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_cos_sin' op inv_freq must be a 1-D float tensor, got 'tensor<2x2xf32>'}}
  %c, %s = sits.rope_cos_sin %p {inv_freq = dense<1.0> : tensor<2x2xf32>} : tensor<2x3xi64> -> tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return
}

// -----

func.func @rope_cos_sin_width(%p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_cos_sin' op cos dimension 2 is 4, but must equal the number of inv_freq values (2)}}
  %c, %s = sits.rope_cos_sin %p {inv_freq = dense<1.0> : tensor<2xf32>} : tensor<2x3xi64> -> tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return
}

// -----

func.func @rope_cos_sin_types(%p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_cos_sin' op cos type 'tensor<2x3x2xf32>' and sin type 'tensor<2x3x2xf16>' must match}}
  %c, %s = sits.rope_cos_sin %p {inv_freq = dense<1.0> : tensor<2xf32>} : tensor<2x3xi64> -> tensor<2x3x2xf32>, tensor<2x3x2xf16>
  return
}

// -----

func.func @rope_cos_sin_positions(%p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_cos_sin' op cos dimension 1 is 5, but must equal the positions' sequence length (3)}}
  %c, %s = sits.rope_cos_sin %p {inv_freq = dense<1.0> : tensor<2xf32>} : tensor<2x3xi64> -> tensor<2x5x2xf32>, tensor<2x5x2xf32>
  return
}

// -----

func.func @rope_gather_odd(%t: tensor<16x7xf32>, %p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_gather' op table width 7 must be even (cos and sin halves)}}
  %c, %s = sits.rope_gather %t[%p] : tensor<16x7xf32>, tensor<2x3xi64> -> tensor<2x3x3xf32>, tensor<2x3x3xf32>
  return
}

// -----

func.func @rope_gather_half(%t: tensor<16x8xf32>, %p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_gather' op cos dimension 2 is 8, but must equal half the table width (4)}}
  %c, %s = sits.rope_gather %t[%p] : tensor<16x8xf32>, tensor<2x3xi64> -> tensor<2x3x8xf32>, tensor<2x3x8xf32>
  return
}

// -----

func.func @rope_gather_type(%t: tensor<16x8xf32>, %p: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.rope_gather' op cos element type 'f16' must match table element type 'f32'}}
  %c, %s = sits.rope_gather %t[%p] : tensor<16x8xf32>, tensor<2x3xi64> -> tensor<2x3x4xf16>, tensor<2x3x4xf16>
  return
}

// -----

func.func @rope_odd_dim(%x: tensor<2x4x3x16xf32>, %c: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'sits.rope' op rotary_dim must be even and > 0, got 7}}
  %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 7} : tensor<2x4x3x16xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x4x3x16xf32>
  return
}

// -----

func.func @rope_too_wide(%x: tensor<2x4x3x16xf32>, %c: tensor<2x3x16xf32>) {
  // expected-error @+1 {{'sits.rope' op rotary_dim 32 exceeds the head dimension 16}}
  %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 32} : tensor<2x4x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32> -> tensor<2x4x3x16xf32>
  return
}

// -----

func.func @rope_cos_width(%x: tensor<2x4x3x16xf32>, %c: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'sits.rope' op cos dimension 2 is 8, but must equal rotary_dim / 2 (4)}}
  %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 8} : tensor<2x4x3x16xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x4x3x16xf32>
  return
}

// -----

func.func @rope_cos_batch(%x: tensor<2x4x3x16xf32>, %c: tensor<3x3x4xf32>) {
  // expected-error @+1 {{'sits.rope' op cos dimension 0 is 3, but must equal 1 or the input's batch size (2)}}
  %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 8} : tensor<2x4x3x16xf32>, tensor<3x3x4xf32>, tensor<3x3x4xf32> -> tensor<2x4x3x16xf32>
  return
}

// -----

func.func @rope_cos_seq(%x: tensor<2x4x3x16xf32>, %c: tensor<1x5x4xf32>) {
  // expected-error @+1 {{'sits.rope' op cos dimension 1 is 5, but must equal the input's sequence length (dimension 2) (3)}}
  %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 8} : tensor<2x4x3x16xf32>, tensor<1x5x4xf32>, tensor<1x5x4xf32> -> tensor<2x4x3x16xf32>
  return
}

// -----

func.func @rope_cos_sin_mismatch(%x: tensor<2x4x3x16xf32>, %c: tensor<1x3x4xf32>, %s: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'sits.rope' op cos type 'tensor<1x3x4xf32>' and sin type 'tensor<2x3x4xf32>' must match}}
  %y = sits.rope %x, %c, %s {style = #sits.rope_style<rotate_half>, rotary_dim = 8} : tensor<2x4x3x16xf32>, tensor<1x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x4x3x16xf32>
  return
}

// -----

func.func @rope_result(%x: tensor<2x4x3x16xf32>, %c: tensor<1x3x4xf32>) {
  // expected-error @+1 {{'sits.rope' op result type 'tensor<2x4x3x16xf16>' must match the input type 'tensor<2x4x3x16xf32>'}}
  %y = sits.rope %x, %c, %c {style = #sits.rope_style<rotate_half>, rotary_dim = 8} : tensor<2x4x3x16xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32> -> tensor<2x4x3x16xf16>
  return
}

// -----

func.func @attention_gqa_ratio(%q: tensor<1x6x3x8xf32>, %k: tensor<1x4x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op num_heads (6) must be a multiple of num_kv_heads (4)}}
  %o = sits.attention %q, %k, %k {num_heads = 6, num_kv_heads = 4, scale = 0.5 : f32} : tensor<1x6x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x6x3x8xf32>
  return
}

// -----

func.func @attention_zero_heads(%q: tensor<1x6x3x8xf32>, %k: tensor<1x4x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op num_heads (6) and num_kv_heads (0) must be > 0}}
  %o = sits.attention %q, %k, %k {num_heads = 6, num_kv_heads = 0, scale = 0.5 : f32} : tensor<1x6x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x6x3x8xf32>
  return
}

// -----

func.func @attention_query_heads(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op query dimension 1 is 4, but must equal num_heads (8)}}
  %o = sits.attention %q, %k, %k {num_heads = 8, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x8x3x8xf32>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<1x4x3x8xf32>, %k: tensor<1x4x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op key dimension 1 is 4, but must equal num_kv_heads (2)}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x16xf32>) {
  // expected-error @+1 {{'sits.attention' op key dimension 3 is 16, but must equal the query's head_dim (8)}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x16xf32>, tensor<1x2x3x16xf32> -> tensor<1x4x3x16xf32>
  return
}

// -----

func.func @attention_value_seq(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{'sits.attention' op value dimension 2 is 5, but must equal the key's sequence length (3)}}
  %o = sits.attention %q, %k, %v {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<1x4x3x8xf32>, %k: tensor<2x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op key dimension 0 is 2, but must equal the query's batch size (1)}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op result dimension 2 is 4, but must equal the query's sequence length (3)}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x4x8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<4x3x8xf32>, %k: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op query must have rank 4, got 'tensor<4x3x8xf32>'}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_types(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf16>) {
  // expected-error @+1 {{'sits.attention' op key element type 'f16' must match query element type 'f32'}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf16>, tensor<1x2x3x8xf16> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op scale must be finite and > 0, got 0}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.0 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_window(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op window must be > 0}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32, window = 0} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_softcap(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'sits.attention' op softcap must be > 0}}
  %o = sits.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32, softcap = -1.0 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %m: tensor<3x3xi64>) {
  // expected-error @+1 {{'sits.attention' op mask must be i1 (true = visible) or float (added to the scores), got 'tensor<3x3xi64>'}}
  %o = sits.attention %q, %k, %k mask(%m : tensor<3x3xi64>) {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_mask_rank(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %m: tensor<1x1x1x3x3xi1>) {
  // expected-error @+1 {{'sits.attention' op mask rank must be at most 4, got 5}}
  %o = sits.attention %q, %k, %k mask(%m : tensor<1x1x1x3x3xi1>) {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_mask_broadcast(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %m: tensor<1x2x3x3xi1>) {
  // expected-error @+1 {{'sits.attention' op mask dimension 1 is 2, which does not broadcast to 4}}
  %o = sits.attention %q, %k, %k mask(%m : tensor<1x2x3x3xi1>) {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

func.func @attention_past_len(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %p: tensor<3xi64>) {
  // expected-error @+1 {{'sits.attention' op past_len dimension 0 is 3, but must equal the query's batch size (2)}}
  %o = sits.attention %q, %k, %k past_len(%p : tensor<3xi64>) {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32} : tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32> -> tensor<2x4x3x8xf32>
  return
}

// -----

// expected-error @+1 {{kv_cache needs layers, max_batch, kv_heads, capacity and head_dim all > 0}}
func.func private @zero_capacity(!sits.kv_cache<layers = 2, max_batch = 1, kv_heads = 2, capacity = 0, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>)

// -----

// expected-error @+1 {{kv_cache element type must be f32, f16 or bf16, got 'i8'}}
func.func private @int_cache(!sits.kv_cache<layers = 2, max_batch = 1, kv_heads = 2, capacity = 8, head_dim = 8, element_type = i8, layout = #sits.kv_layout<contiguous>>)

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_layer(%c: !cache, %k: tensor<1x2x3x8xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op layer 2 is outside the cache (2 layers)}}
  %n = sits.kv_cache.append %c[2], %k, %k at %p : !cache, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_heads(%c: !cache, %k: tensor<1x4x3x8xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op key dimension 1 is 4, but must equal the cache's kv_heads (2)}}
  %n = sits.kv_cache.append %c[0], %k, %k at %p : !cache, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_head_dim(%c: !cache, %k: tensor<1x2x3x4xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op key dimension 3 is 4, but must equal the cache's head_dim (8)}}
  %n = sits.kv_cache.append %c[0], %k, %k at %p : !cache, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_value_len(%c: !cache, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x5x8xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op value dimension 2 is 5, but must equal the key's sequence length (3)}}
  %n = sits.kv_cache.append %c[0], %k, %v at %p : !cache, tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_batch(%c: !cache, %k: tensor<5x2x3x8xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op key batch 5 exceeds the cache's max_batch (4)}}
  %n = sits.kv_cache.append %c[0], %k, %k at %p : !cache, tensor<5x2x3x8xf32>, tensor<5x2x3x8xf32>, tensor<5xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_capacity(%c: !cache, %k: tensor<1x2x17x8xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op appends 17 tokens, more than the cache capacity (16)}}
  %n = sits.kv_cache.append %c[0], %k, %k at %p : !cache, tensor<1x2x17x8xf32>, tensor<1x2x17x8xf32>, tensor<1xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @append_past(%c: !cache, %k: tensor<2x2x3x8xf32>, %p: tensor<1xi64>) {
  // expected-error @+1 {{'sits.kv_cache.append' op past_len dimension 0 is 1, but must equal the key's batch size (2)}}
  %n = sits.kv_cache.append %c[0], %k, %k at %p : !cache, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>, tensor<1xi64>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @read_capacity(%c: !cache) {
  // expected-error @+1 {{'sits.kv_cache.read' op key dimension 2 is 8, but must equal the cache capacity (16)}}
  %k, %v = sits.kv_cache.read %c[0] : !cache -> tensor<?x2x8x8xf32>, tensor<?x2x8x8xf32>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @read_types(%c: !cache) {
  // expected-error @+1 {{'sits.kv_cache.read' op key and value types must match}}
  %k, %v = sits.kv_cache.read %c[0] : !cache -> tensor<?x2x16x8xf32>, tensor<?x2x16x8xf16>
  return
}

// -----

!cache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 16, head_dim = 8, element_type = f32, layout = #sits.kv_layout<contiguous>>

func.func @length_rank(%c: !cache) {
  // expected-error @+1 {{'sits.kv_cache.length' op result must have rank 1, got 'tensor<?x1xi64>'}}
  %l = sits.kv_cache.length %c : !cache -> tensor<?x1xi64>
  return
}

// -----

func.func @quantize_bits(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'sits.quantize' op bits must be 4 or 8, got 3}}
  %q, %s = sits.quantize %x {bits = 3, axis = 1, group_size = 32} : tensor<4x32xf32> -> tensor<4x32xi8>, tensor<4x1xf16>
  return
}

// -----

func.func @quantize_axis(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'sits.quantize' op axis 2 is outside rank 2}}
  %q, %s = sits.quantize %x {bits = 8, axis = 2, group_size = 32} : tensor<4x32xf32> -> tensor<4x32xi8>, tensor<4x1xf16>
  return
}

// -----

func.func @quantize_group(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'sits.quantize' op group_size must be >= 1, got 0}}
  %q, %s = sits.quantize %x {bits = 8, axis = 1, group_size = 0} : tensor<4x32xf32> -> tensor<4x32xi8>, tensor<4x1xf16>
  return
}

// -----

func.func @quantize_packed_rows(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'sits.quantize' op data rows take 32 bytes, but 32 4-bit values need 16 (plus at most 15 bytes of padding)}}
  %q, %s = sits.quantize %x {bits = 4, axis = 1, group_size = 32} : tensor<4x32xf32> -> tensor<4x32xi8>, tensor<4x1xf16>
  return
}

// -----

func.func @quantize_scale_groups(%x: tensor<4x100xf32>) {
  // expected-error @+1 {{'sits.quantize' op scales dimension 1 is 3, but must equal the number of groups (4)}}
  %q, %s = sits.quantize %x {bits = 8, axis = 1, group_size = 32} : tensor<4x100xf32> -> tensor<4x100xi8>, tensor<4x3xf16>
  return
}

// -----

func.func @quantize_data_dims(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'sits.quantize' op data dimension 0 is 5, but must equal the values' dimension 0 (4)}}
  %q, %s = sits.quantize %x {bits = 8, axis = 1, group_size = 32} : tensor<4x32xf32> -> tensor<5x32xi8>, tensor<4x1xf16>
  return
}

// -----

func.func @quantize_scale_type(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{'sits.quantize' op result #1 must be tensor of 16-bit float or 32-bit float values, but got 'tensor<4x1xbf16>'}}
  %q, %s = sits.quantize %x {bits = 8, axis = 1, group_size = 32} : tensor<4x32xf32> -> tensor<4x32xi8>, tensor<4x1xbf16>
  return
}

// -----

func.func @dequantize_rank(%q: tensor<4x16xi8>, %s: tensor<4x1xf16>) {
  // expected-error @+1 {{'sits.dequantize' op data must have rank 3, got 'tensor<4x16xi8>'}}
  %x = sits.dequantize %q, %s {bits = 4, axis = 1, group_size = 32} : tensor<4x16xi8>, tensor<4x1xf16> -> tensor<2x4x32xf32>
  return
}

// -----

func.func @dequantize_scale_dims(%q: tensor<4x16xi8>, %s: tensor<3x1xf16>) {
  // expected-error @+1 {{'sits.dequantize' op scales dimension 0 is 3, but must equal the values' dimension 0 (4)}}
  %x = sits.dequantize %q, %s {bits = 4, axis = 1, group_size = 32} : tensor<4x16xi8>, tensor<3x1xf16> -> tensor<4x32xf32>
  return
}

// -----

func.func @attention_hot_window_alone(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'sits.attention' op hot_window needs cold(key, value) operands}}
  %a = sits.attention %q, %k, %k {num_heads = 2, num_kv_heads = 2, scale = 1.0 : f32, hot_window = 2} : tensor<1x2x1x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x1x8xf32>
  return
}

// -----

func.func @attention_cold_without_window(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'sits.attention' op cold(key, value) operands need hot_window >= 1}}
  %a = sits.attention %q, %k, %k cold(%k, %k : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {num_heads = 2, num_kv_heads = 2, scale = 1.0 : f32} : tensor<1x2x1x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x1x8xf32>
  return
}

// -----

func.func @attention_cold_type(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x4x8xf32>, %ck: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{'sits.attention' op cold key type 'tensor<1x2x5x8xf32>' must match the key type 'tensor<1x2x4x8xf32>'}}
  %a = sits.attention %q, %k, %k cold(%ck, %k : tensor<1x2x5x8xf32>, tensor<1x2x4x8xf32>) {num_heads = 2, num_kv_heads = 2, scale = 1.0 : f32, hot_window = 2} : tensor<1x2x1x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x1x8xf32>
  return
}

// -----

func.func @attention_cold_block(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'sits.attention' op cold_key_block must be >= 1, got 0}}
  %a = sits.attention %q, %k, %k cold(%k, %k : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {num_heads = 2, num_kv_heads = 2, scale = 1.0 : f32, hot_window = 2, cold_key_block = 0} : tensor<1x2x1x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x1x8xf32>
  return
}

// -----

// expected-error @+2 {{kv_quant cold_type must be i8 or i4, got 'i16'}}
// expected-error @+1 {{failed to parse Sits_KVCacheType parameter 'quant'}}
func.func private @kv_quant_cold_type(!sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 1, capacity = 8, head_dim = 8, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i16, hot_window = 2, group_size = 8, keys = #sits.kv_key_groups<per_token>, channel_block = 1, scale_type = f16>>)

// -----

// expected-error @+2 {{kv_quant hot_window must be >= 1}}
// expected-error @+1 {{failed to parse Sits_KVCacheType parameter 'quant'}}
func.func private @kv_quant_window(!sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 1, capacity = 8, head_dim = 8, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 0, group_size = 8, keys = #sits.kv_key_groups<per_token>, channel_block = 1, scale_type = f16>>)

// -----

// expected-error @+2 {{kv_quant channel_block must be >= 1 for per_channel keys and 1 for per_token keys, got 4}}
// expected-error @+1 {{failed to parse Sits_KVCacheType parameter 'quant'}}
func.func private @kv_quant_block(!sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 1, capacity = 8, head_dim = 8, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 2, group_size = 8, keys = #sits.kv_key_groups<per_token>, channel_block = 4, scale_type = f16>>)

// -----

// expected-error @+2 {{kv_quant scale_type must be f16 or f32, got 'bf16'}}
// expected-error @+1 {{failed to parse Sits_KVCacheType parameter 'quant'}}
func.func private @kv_quant_scale(!sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 1, capacity = 8, head_dim = 8, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 2, group_size = 8, keys = #sits.kv_key_groups<per_token>, channel_block = 1, scale_type = bf16>>)

// -----

// expected-error @+1 {{kv_cache quant group_size 16 exceeds head_dim 8}}
func.func private @kv_quant_group(!sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 1, capacity = 8, head_dim = 8, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 2, group_size = 16, keys = #sits.kv_key_groups<per_token>, channel_block = 1, scale_type = f16>>)

// -----

func.func @tvc_shapes(%h: tensor<2x16xf32>, %w: tensor<64x16xf32>, %p: tensor<64x4xf32>, %t: tensor<5x16xf32>, %b: tensor<64x4xf32>) {
  // expected-error @+1 {{'sits.tvc_lm_head' op preview_right dimension 0 is 5, but must equal the preview rank (preview_left dimension 1) (4)}}
  %l = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) {candidates = 8} : tensor<2x16xf32>, tensor<64x16xf32>, tensor<64x4xf32>, tensor<5x16xf32>, tensor<64x4xf32> -> tensor<2x64xf32>
  return
}

// -----

func.func @tvc_bounds(%h: tensor<2x16xf32>, %w: tensor<64x16xf32>, %p: tensor<64x4xf32>, %t: tensor<4x16xf32>, %b: tensor<64x2xf32>) {
  // expected-error @+1 {{'sits.tvc_lm_head' op row_bounds dimension 1 is 2, but must equal 4 (rho, sigma, pi, omega) (4)}}
  %l = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) {candidates = 8} : tensor<2x16xf32>, tensor<64x16xf32>, tensor<64x4xf32>, tensor<4x16xf32>, tensor<64x2xf32> -> tensor<2x64xf32>
  return
}

// -----

func.func @tvc_candidates(%h: tensor<2x16xf32>, %w: tensor<64x16xf32>, %p: tensor<64x4xf32>, %t: tensor<4x16xf32>, %b: tensor<64x4xf32>) {
  // expected-error @+1 {{'sits.tvc_lm_head' op candidates must be between 1 and the vocabulary size (64), got 65}}
  %l = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) {candidates = 65} : tensor<2x16xf32>, tensor<64x16xf32>, tensor<64x4xf32>, tensor<4x16xf32>, tensor<64x4xf32> -> tensor<2x64xf32>
  return
}

// -----

func.func @tvc_exact_top(%h: tensor<2x16xf32>, %w: tensor<64x16xf32>, %p: tensor<64x4xf32>, %t: tensor<4x16xf32>, %b: tensor<64x4xf32>) {
  // expected-error @+1 {{'sits.tvc_lm_head' op exact_top must be between 1 and candidates (8), got 9}}
  %l = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) {candidates = 8, exact_top = 9} : tensor<2x16xf32>, tensor<64x16xf32>, tensor<64x4xf32>, tensor<4x16xf32>, tensor<64x4xf32> -> tensor<2x64xf32>
  return
}

// -----

func.func @tvc_element_type(%h: tensor<2x16xf16>, %w: tensor<64x16xf16>, %p: tensor<64x4xf32>, %t: tensor<4x16xf32>, %b: tensor<64x4xf32>) {
  // expected-error @+1 {{'sits.tvc_lm_head' op operand #0 must be tensor of 32-bit float values, but got 'tensor<2x16xf16>'}}
  %l = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) {candidates = 8} : tensor<2x16xf16>, tensor<64x16xf16>, tensor<64x4xf32>, tensor<4x16xf32>, tensor<64x4xf32> -> tensor<2x64xf16>
  return
}
