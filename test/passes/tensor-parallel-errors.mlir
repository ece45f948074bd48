// What sits-tensor-parallel refuses, with the message users see, at the op
// that causes it.
// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=2" --split-input-file --verify-diagnostics
// RUN: not sits-opt %s --split-input-file --sits-tensor-parallel="tensor-parallel=65" 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: error: sits-tensor-parallel: tensor-parallel must be between 1 and 64, got 65

func.func @heads(%x: tensor<?x?x6xf32>) -> tensor<?x?x6xf32> {
  %wq = sits.weight "wq" dense<0.25> : tensor<6x6xf32>
  %wo = sits.weight "wo" dense<0.25> : tensor<6x6xf32>
  %q = sits.linear %x, %wq : tensor<?x?x6xf32>, tensor<6x6xf32> -> tensor<?x?x6xf32>
  %k = sits.linear %x, %wq : tensor<?x?x6xf32>, tensor<6x6xf32> -> tensor<?x?x6xf32>
  %qh = sits.split_heads %q {num_heads = 3} : tensor<?x?x6xf32> -> tensor<?x3x?x2xf32>
  %kh = sits.split_heads %k {num_heads = 3} : tensor<?x?x6xf32> -> tensor<?x3x?x2xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this attention: 3 heads do not split over 2 ranks (num_heads % 2 != 0)}}
  %a = sits.attention %qh, %kh, %kh {num_heads = 3, num_kv_heads = 3, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x3x?x2xf32>, tensor<?x3x?x2xf32>, tensor<?x3x?x2xf32> -> tensor<?x3x?x2xf32>
  %m = sits.merge_heads %a : tensor<?x3x?x2xf32> -> tensor<?x?x6xf32>
  %o = sits.linear %m, %wo : tensor<?x?x6xf32>, tensor<6x6xf32> -> tensor<?x?x6xf32>
  return %o : tensor<?x?x6xf32>
}

// -----

func.func @kv_heads(%x: tensor<?x?x12xf32>) -> tensor<?x?x12xf32> {
  %wq = sits.weight "wq" dense<0.25> : tensor<12x12xf32>
  %wk = sits.weight "wk" dense<0.25> : tensor<6x12xf32>
  %wo = sits.weight "wo" dense<0.25> : tensor<12x12xf32>
  %q = sits.linear %x, %wq : tensor<?x?x12xf32>, tensor<12x12xf32> -> tensor<?x?x12xf32>
  %k = sits.linear %x, %wk : tensor<?x?x12xf32>, tensor<6x12xf32> -> tensor<?x?x6xf32>
  %qh = sits.split_heads %q {num_heads = 6} : tensor<?x?x12xf32> -> tensor<?x6x?x2xf32>
  %kh = sits.split_heads %k {num_heads = 3} : tensor<?x?x6xf32> -> tensor<?x3x?x2xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this attention: 3 kv heads neither split over 2 ranks nor divide them (num_kv_heads % 2 != 0 and 2 % num_kv_heads != 0): a rank's query heads must read whole kv heads}}
  %a = sits.attention %qh, %kh, %kh {num_heads = 6, num_kv_heads = 3, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x6x?x2xf32>, tensor<?x3x?x2xf32>, tensor<?x3x?x2xf32> -> tensor<?x6x?x2xf32>
  %m = sits.merge_heads %a : tensor<?x6x?x2xf32> -> tensor<?x?x12xf32>
  %o = sits.linear %m, %wo : tensor<?x?x12xf32>, tensor<12x12xf32> -> tensor<?x?x12xf32>
  return %o : tensor<?x?x12xf32>
}

// -----

func.func @intermediate(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %wg = sits.weight "wg" dense<0.25> : tensor<5x8xf32>
  %wd = sits.weight "wd" dense<0.25> : tensor<8x5xf32>
  %g = sits.linear %x, %wg : tensor<?x?x8xf32>, tensor<5x8xf32> -> tensor<?x?x5xf32>
  %u = sits.linear %x, %wg : tensor<?x?x8xf32>, tensor<5x8xf32> -> tensor<?x?x5xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this MLP: its intermediate size 5 does not split over 2 ranks (5 % 2 != 0)}}
  %gu = sits.glu <silu> %g, %u : tensor<?x?x5xf32>
  %d = sits.linear %gu, %wd : tensor<?x?x5xf32>, tensor<8x5xf32> -> tensor<?x?x8xf32>
  return %d : tensor<?x?x8xf32>
}

// -----

func.func @lm_head_vocabulary(%x: tensor<?x?x8xf32>) -> tensor<?x?x5xf32> {
  %lm = sits.weight "lm" dense<0.25> : tensor<5x8xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this LM head: the vocabulary of 5 rows does not split over 2 ranks (5 % 2 != 0)}}
  %logits = sits.lm_head %x, %lm : tensor<?x?x8xf32>, tensor<5x8xf32> -> tensor<?x?x5xf32>
  return %logits : tensor<?x?x5xf32>
}

// -----

func.func @embedding_vocabulary(%ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
  %table = sits.weight "table" dense<0.25> : tensor<7x8xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this embedding: the vocabulary of 7 rows does not split over 2 ranks (7 % 2 != 0)}}
  %x = sits.embedding %table[%ids] : tensor<7x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  return %x : tensor<?x?x8xf32>
}

// -----

// The query heads are also returned: each rank would return only its own.
func.func @attention_escape(%x: tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<?x2x?x2xf32>) {
  %wq = sits.weight "wq" dense<0.25> : tensor<4x4xf32>
  %wo = sits.weight "wo" dense<0.25> : tensor<4x4xf32>
  %q = sits.linear %x, %wq : tensor<?x?x4xf32>, tensor<4x4xf32> -> tensor<?x?x4xf32>
  %k = sits.linear %x, %wq : tensor<?x?x4xf32>, tensor<4x4xf32> -> tensor<?x?x4xf32>
  %qh = sits.split_heads %q {num_heads = 2} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
  %kh = sits.split_heads %k {num_heads = 2} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
  // expected-note @+1 {{the attention block}}
  %a = sits.attention %qh, %kh, %kh {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32> -> tensor<?x2x?x2xf32>
  %m = sits.merge_heads %a : tensor<?x2x?x2xf32> -> tensor<?x?x4xf32>
  %o = sits.linear %m, %wo : tensor<?x?x4xf32>, tensor<4x4xf32> -> tensor<?x?x4xf32>
  // expected-error @+1 {{sits-tensor-parallel: 'func.return' reads a value from inside an attention block (the result of 'sits.split_heads'), which each rank would hold only a part of; only the block's output projection may leave it}}
  return %o, %qh : tensor<?x?x4xf32>, tensor<?x2x?x2xf32>
}

// -----

// The gate projection is read outside the MLP too.
func.func @mlp_escape(%x: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x4xf32>) {
  %wg = sits.weight "wg" dense<0.25> : tensor<4x8xf32>
  %wd = sits.weight "wd" dense<0.25> : tensor<8x4xf32>
  %g = sits.linear %x, %wg : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  // expected-note @+1 {{the MLP block}}
  %gu = sits.glu <silu> %g, %g : tensor<?x?x4xf32>
  %d = sits.linear %gu, %wd : tensor<?x?x4xf32>, tensor<8x4xf32> -> tensor<?x?x8xf32>
  // expected-error @+1 {{sits-tensor-parallel: 'sits.add' reads a value from inside an MLP block (the result of 'sits.linear')}}
  %s = sits.add %g, %g : tensor<?x?x4xf32>
  return %d, %s : tensor<?x?x8xf32>, tensor<?x?x4xf32>
}

// -----

func.func @query_and_key_of_one_linear(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<4x4xf32>
  %q = sits.linear %x, %w : tensor<?x?x4xf32>, tensor<4x4xf32> -> tensor<?x?x4xf32>
  %qh = sits.split_heads %q {num_heads = 2} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this attention: the query and the key come from one sits.linear}}
  %a = sits.attention %qh, %qh, %qh {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32> -> tensor<?x2x?x2xf32>
  %m = sits.merge_heads %a : tensor<?x2x?x2xf32> -> tensor<?x?x4xf32>
  %o = sits.linear %m, %w : tensor<?x?x4xf32>, tensor<4x4xf32> -> tensor<?x?x4xf32>
  return %o : tensor<?x?x4xf32>
}

// -----

func.func @query_not_a_projection(%qh: tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32> {
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this attention: its query does not come from sits.split_heads (through head-wise norms and sits.rope)}}
  %a = sits.attention %qh, %qh, %qh {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32> -> tensor<?x2x?x2xf32>
  return %a : tensor<?x2x?x2xf32>
}

// -----

func.func @mask_per_head(%x: tensor<1x3x4xf32>) -> tensor<1x3x4xf32> {
  %wq = sits.weight "wq" dense<0.25> : tensor<4x4xf32>
  %wo = sits.weight "wo" dense<0.25> : tensor<4x4xf32>
  %mask = sits.weight "mask" dense<true> : tensor<1x2x3x3xi1>
  %q = sits.linear %x, %wq : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  %k = sits.linear %x, %wq : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  %qh = sits.split_heads %q {num_heads = 2} : tensor<1x3x4xf32> -> tensor<1x2x3x2xf32>
  %kh = sits.split_heads %k {num_heads = 2} : tensor<1x3x4xf32> -> tensor<1x2x3x2xf32>
  // expected-error @+1 {{sits-tensor-parallel: cannot shard this attention: its mask has a row per head (2), which would have to be split with the heads}}
  %a = sits.attention %qh, %kh, %kh mask(%mask : tensor<1x2x3x3xi1>) {num_heads = 2, num_kv_heads = 2, scale = 0.5 : f32} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  %m = sits.merge_heads %a : tensor<1x2x3x2xf32> -> tensor<1x3x4xf32>
  %o = sits.linear %m, %wo : tensor<1x3x4xf32>, tensor<4x4xf32> -> tensor<1x3x4xf32>
  return %o : tensor<1x3x4xf32>
}

// -----

// The layout check: a hand-written row-parallel product whose partial sum
// an elementwise op reads before any sits.all_reduce.
func.func @partial_sum(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w1 = sits.weight "w1" dense<0.25> : tensor<8x8xf32>
  %w2 = sits.weight "w2" dense<0.25> : tensor<8x8xf32>
  %rows = sits.shard %w1 {shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x8xf32> -> tensor<4x8xf32>
  %cols = sits.shard %w2 {shard = #sits.shard<dim = 1, parts = 2>} : tensor<8x8xf32> -> tensor<8x4xf32>
  %y = sits.linear %x, %rows : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %z = sits.linear %y, %cols : tensor<?x4xf32>, tensor<8x4xf32> -> tensor<?x8xf32>
  // expected-error @+1 {{sits-tensor-parallel: 'sits.add' cannot read operand #0, which is a partial sum (each rank holds a term): it applies to the sum, not to each rank's term; a sits.all_reduce must come first}}
  %s = sits.add %z, %z : tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}

// -----

// The layout check: a split value returned.
func.func @split_returned(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %rows = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x8xf32> -> tensor<4x8xf32>
  %y = sits.linear %x, %rows : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  // expected-error @+1 {{sits-tensor-parallel: 'func.return' cannot read operand #0, which is split along dimension 1 into 2 parts: a function returns whole values, every rank the same}}
  return %y : tensor<?x4xf32>
}

// -----

// The layout check: a norm over the split dimension.
func.func @norm_of_a_split(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %n = sits.weight "n" dense<1.0> : tensor<4xf32>
  %rows = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x8xf32> -> tensor<4x8xf32>
  %y = sits.linear %x, %rows : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  // expected-error @+1 {{sits-tensor-parallel: 'sits.rms_norm' cannot read operand #0, which is split along dimension 1 into 2 parts: the norm reads the whole of its last dimension}}
  %z = sits.rms_norm %y, %n {epsilon = 1.0e-6 : f32} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
  return %z : tensor<?x4xf32>
}

// -----

// The layout check: collectives for another number of ranks.
func.func @other_ranks(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{sits-tensor-parallel: 'sits.all_reduce' is for 4 ranks, but the program has 2}}
  %s = sits.all_reduce %x {ranks = 4} : tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}

// -----

func.func @cached(%x: tensor<1x2x3x4xf32>) -> !sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 2, capacity = 8, head_dim = 4, element_type = f32, layout = <contiguous>> {
  // expected-error @+1 {{sits-tensor-parallel: 'sits.kv_cache.init' comes from a pass that runs after this one (the KV cache, quantization, TVC); shard the full-sequence program before them}}
  %c = sits.kv_cache.init : !sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 2, capacity = 8, head_dim = 4, element_type = f32, layout = <contiguous>>
  return %c : !sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 2, capacity = 8, head_dim = 4, element_type = f32, layout = <contiguous>>
}

// -----

func.func @quantized(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{sits-tensor-parallel: 'sits.quantize' comes from a pass that runs after this one}}
  %q, %s = sits.quantize %x {axis = 1 : i64, bits = 8 : i64, group_size = 32 : i64} : tensor<4x32xf32> -> tensor<4x32xi8>, tensor<4x1xf16>
  %d = sits.dequantize %q, %s {axis = 1 : i64, bits = 8 : i64, group_size = 32 : i64} : tensor<4x32xi8>, tensor<4x1xf16> -> tensor<4x32xf32>
  return %d : tensor<4x32xf32>
}

// -----

// expected-error @+1 {{sits-tensor-parallel: the program is tensor-parallel already (sits.tensor_parallel = 2)}}
module attributes {sits.tensor_parallel = 2 : i64} {
}
