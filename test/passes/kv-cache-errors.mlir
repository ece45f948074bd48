// Programs the KV cache would change are refused, naming the op.
// RUN: sits-opt %s --sits-kv-cache --split-input-file --verify-diagnostics

func.func @masked(%ids: tensor<?x?xi64>) -> tensor<1x2x3x4xf32> {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  %mask = sits.weight "mask" dense<true> : tensor<1x1x3x3xi1>
  // expected-error @+1 {{sits-kv-cache: cannot cache this attention: it has a mask operand (the causal mask was not folded into the attention's causal rule, so cached rows could be read under a different mask)}}
  %a = sits.attention %q, %q, %q mask(%mask : tensor<1x1x3x3xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a : tensor<1x2x3x4xf32>
}

// -----

func.func @top_left(%ids: tensor<?x?xi64>) -> tensor<1x2x3x4xf32> {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  // expected-error @+1 {{sits-kv-cache: cannot cache this attention: its causal rule is 'top_left', not bottom_right}}
  %a = sits.attention %q, %q, %q {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<top_left>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a : tensor<1x2x3x4xf32>
}

// -----

func.func @mixes_positions(%ids: tensor<?x?xi64>) -> tensor<1x2x3x4xf32> {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  // expected-error @+1 {{sits-kv-cache: 'tensor.cast' is not known to compute each position independently, so keys and values of past tokens could change with new tokens and cannot be cached}}
  %k = tensor.cast %q : tensor<1x2x3x4xf32> to tensor<1x2x3x4xf32>
  %a = sits.attention %q, %k, %k {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a : tensor<1x2x3x4xf32>
}

// -----

// expected-error @+1 {{sits-kv-cache: 'two_inputs' must take exactly the token ids ([batch, seq] of i32 or i64) to become prefill and decode steps, got '(tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<1x2x3x4xf32>'}}
func.func @two_inputs(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>) -> tensor<1x2x3x4xf32> {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  %a = sits.attention %q, %q, %q {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a : tensor<1x2x3x4xf32>
}

// -----

func.func @uneven_layers(%ids: tensor<?x?xi64>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  %k = sits.weight "k" dense<1.0> : tensor<1x1x3x4xf32>
  %a = sits.attention %q, %q, %q {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  // expected-error @+1 {{sits-kv-cache: every layer's keys and values must have the same static kv heads and head_dim as the first layer's ('tensor<1x2x3x4xf32>'), got 'tensor<1x1x3x4xf32>' and 'tensor<1x1x3x4xf32>'}}
  %b = sits.attention %q, %k, %k {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a, %b : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>
}

// -----

// expected-error @+1 {{sits-kv-cache: a function named 'decode' exists already}}
func.func @decode() {
  return
}

func.func @forward(%ids: tensor<?x?xi64>) -> tensor<1x2x3x4xf32> {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  %a = sits.attention %q, %q, %q {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a : tensor<1x2x3x4xf32>
}

// -----

// A RoPE table (an exporter's cos/sin caches) shorter than max-seq-len
// (default 2048): positions past it have no row.
func.func @short_rope_table(%ids: tensor<?x?xi64>) -> tensor<1x2x3x4xf32> {
  %q = sits.weight "q" dense<1.0> : tensor<1x2x3x4xf32>
  %table = sits.weight "rope_table" dense<1.0> : tensor<16x4xf32>
  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  // expected-error @+1 {{sits-kv-cache: max-seq-len 2048 is past the model's RoPE table of 16 positions (its cos/sin caches): compile with --max-seq-len=16 or less}}
  %cos, %sin = sits.rope_gather %table[%pos] : tensor<16x4xf32>, tensor<?x?xi64> -> tensor<?x?x2xf32>, tensor<?x?x2xf32>
  %r = sits.rope %q, %cos, %sin {rotary_dim = 4 : i64, style = #sits.rope_style<rotate_half>} : tensor<1x2x3x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32> -> tensor<1x2x3x4xf32>
  %a = sits.attention %r, %r, %r {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %a : tensor<1x2x3x4xf32>
}
