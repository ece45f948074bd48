// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=2" | FileCheck %s --check-prefix=TP2
// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=2" --sits-audit-report | FileCheck %s --check-prefix=AUDIT2
// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=4" | FileCheck %s --check-prefix=TP4
// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=4" --sits-audit-report | FileCheck %s --check-prefix=AUDIT4
// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=2" --sits-kv-cache="max-seq-len=64 max-batch=4" | FileCheck %s --check-prefix=KV
// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=1" | FileCheck %s --check-prefix=ONE

// A decoder layer (embedding, attention with GQA, head-wise norms and RoPE,
// a gated MLP, a linear-activation-linear MLP, an untied LM head) split over
// ranks. Two ranks split the 4 query heads and the 2 kv heads; four split
// the query heads and give each kv head to two ranks.

// TP2: module attributes {sits.tensor_parallel = 2 : i64}
// TP2-DAG: %[[EMBED:.*]] = sits.shard %embed {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
// TP2-DAG: %[[WQ:.*]] = sits.shard %wq {shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x8xf32> -> tensor<4x8xf32>
// TP2-DAG: %[[WK:.*]] = sits.shard %wk {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
// TP2-DAG: %[[WV:.*]] = sits.shard %wv {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
// TP2-DAG: %[[WO:.*]] = sits.shard %wo {shard = #sits.shard<dim = 1, parts = 2>} : tensor<8x8xf32> -> tensor<8x4xf32>
// TP2-DAG: %[[WG:.*]] = sits.shard %wg {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
// TP2-DAG: %[[WU:.*]] = sits.shard %wu {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
// TP2-DAG: %[[WD:.*]] = sits.shard %wd {shard = #sits.shard<dim = 1, parts = 2>} : tensor<8x16xf32> -> tensor<8x8xf32>
// TP2-DAG: %[[W1:.*]] = sits.shard %w1 {shard = #sits.shard<dim = 0, parts = 2>} : tensor<32x8xf32> -> tensor<16x8xf32>
// TP2-DAG: %[[W2:.*]] = sits.shard %w2 {shard = #sits.shard<dim = 1, parts = 2>} : tensor<8x32xf32> -> tensor<8x16xf32>
// TP2-DAG: %[[LM:.*]] = sits.shard %lm {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
// The embedding of each rank's vocabulary rows, summed over the ranks.
// TP2: %[[PART:.*]] = sits.embedding %[[EMBED]][%{{.*}}] {vocab_shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
// TP2: %[[X:.*]] = sits.all_reduce %[[PART]] {ranks = 2 : i64} : tensor<?x?x8xf32>
// Norms of the whole hidden state stay replicated.
// TP2: %[[H:.*]] = sits.rms_norm %[[X]], %norm
// Column-parallel q/k/v: each rank's heads.
// TP2: %[[Q:.*]] = sits.linear %[[H]], %[[WQ]] : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
// TP2: %[[K:.*]] = sits.linear %[[H]], %[[WK]] : tensor<?x?x8xf32>, tensor<2x8xf32> -> tensor<?x?x2xf32>
// TP2: %[[V:.*]] = sits.linear %[[H]], %[[WV]] : tensor<?x?x8xf32>, tensor<2x8xf32> -> tensor<?x?x2xf32>
// TP2: sits.split_heads %[[Q]] {num_heads = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
// TP2: sits.split_heads %[[K]] {num_heads = 1 : i64} : tensor<?x?x2xf32> -> tensor<?x1x?x2xf32>
// TP2: sits.split_heads %[[V]] {num_heads = 1 : i64} : tensor<?x?x2xf32> -> tensor<?x1x?x2xf32>
// Head-wise norms and RoPE keep the rank's heads.
// TP2: sits.rms_norm %{{.*}}, %head_norm {{.*}} : tensor<?x2x?x2xf32>, tensor<2xf32> -> tensor<?x2x?x2xf32>
// TP2: sits.rms_norm %{{.*}}, %head_norm {{.*}} : tensor<?x1x?x2xf32>, tensor<2xf32> -> tensor<?x1x?x2xf32>
// TP2: sits.rope {{.*}} -> tensor<?x2x?x2xf32>
// TP2: sits.rope {{.*}} -> tensor<?x1x?x2xf32>
// TP2: %[[A:.*]] = sits.attention {{.*}} {causal = #sits.causal<bottom_right>, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : tensor<?x2x?x2xf32>, tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32> -> tensor<?x2x?x2xf32>
// TP2: %[[M:.*]] = sits.merge_heads %[[A]] : tensor<?x2x?x2xf32> -> tensor<?x?x4xf32>
// Row-parallel output projection: a term per rank, summed.
// TP2: %[[O:.*]] = sits.linear %[[M]], %[[WO]] : tensor<?x?x4xf32>, tensor<8x4xf32> -> tensor<?x?x8xf32>
// TP2: %[[OS:.*]] = sits.all_reduce %[[O]] {ranks = 2 : i64} : tensor<?x?x8xf32>
// TP2: %[[R1:.*]] = sits.add %[[X]], %[[OS]]
// TP2: %[[G:.*]] = sits.linear %{{.*}}, %[[WG]] : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// TP2: %[[U:.*]] = sits.linear %{{.*}}, %[[WU]] : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// TP2: %[[GU:.*]] = sits.glu <silu> %[[G]], %[[U]] : tensor<?x?x8xf32>
// TP2: %[[D:.*]] = sits.linear %[[GU]], %[[WD]] : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// TP2: sits.all_reduce %[[D]] {ranks = 2 : i64}
// TP2: %[[U2:.*]] = sits.linear %{{.*}}, %[[W1]] : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
// TP2: %[[ACT:.*]] = sits.activation <gelu> %[[U2]] : tensor<?x?x16xf32>
// TP2: %[[D2:.*]] = sits.linear %[[ACT]], %[[W2]] : tensor<?x?x16xf32>, tensor<8x16xf32> -> tensor<?x?x8xf32>
// TP2: sits.all_reduce %[[D2]] {ranks = 2 : i64}
// The LM head of each rank's vocabulary rows, gathered.
// TP2: %[[LOGITS:.*]] = sits.lm_head %{{.*}}, %[[LM]] : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// TP2: %[[ALL:.*]] = sits.all_gather %[[LOGITS]] {ranks = 2 : i64} : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
// TP2: return %[[ALL]] : tensor<?x?x16xf32>

// AUDIT2: pass sits-tensor-parallel
// AUDIT2-NEXT: attention_blocks_sharded: 1
// AUDIT2-NEXT: mlp_blocks_sharded: 2
// AUDIT2-NEXT: linears_column_parallel: 6
// AUDIT2-NEXT: linears_row_parallel: 3
// AUDIT2-NEXT: linears_replicated: 0
// AUDIT2-NEXT: weights_sharded: 11
// AUDIT2-NEXT: weights_replicated: 2
// AUDIT2-NEXT: kv_heads_replicated: 0
// AUDIT2-NEXT: embeddings_sharded: 1
// AUDIT2-NEXT: lm_heads_sharded: 1
// AUDIT2-NEXT: all_reduces_inserted: 4
// AUDIT2-NEXT: all_gathers_inserted: 1
// AUDIT2-NEXT: - attention 0: 4 heads, 2 kv heads on every rank -> 2 heads per rank; 1 kv heads per rank; q/k/v column-parallel, output projection row-parallel + sits.all_reduce
// AUDIT2-NEXT: rule: heads are independent
// AUDIT2-NEXT: - MLP 0: 16 intermediate columns on every rank -> 8 columns per rank; up column-parallel, down row-parallel + sits.all_reduce
// AUDIT2-NEXT: rule: 'sits.glu' is elementwise over the intermediate columns
// AUDIT2-NEXT: - MLP 1: 32 intermediate columns on every rank -> 16 columns per rank
// AUDIT2-NEXT: rule: 'sits.activation' is elementwise
// AUDIT2-NEXT: - sits.lm_head over the whole vocabulary -> 8 vocabulary rows per rank + sits.all_gather
// AUDIT2-NEXT: rule: each logit depends on its vocabulary row alone
// AUDIT2-NEXT: - sits.embedding of the whole table -> 8 vocabulary rows per rank (vocab_shard) + sits.all_reduce
// AUDIT2-NEXT: rule: an id is in exactly one rank's rows

// Four ranks, two kv heads: each kv head is held by two ranks (replicas),
// each rank attends with its one query head over its group's kv head.
// TP4: module attributes {sits.tensor_parallel = 4 : i64}
// TP4-DAG: sits.shard %wq {shard = #sits.shard<dim = 0, parts = 4>} : tensor<8x8xf32> -> tensor<2x8xf32>
// TP4-DAG: sits.shard %wk {shard = #sits.shard<dim = 0, parts = 2, replicas = 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
// TP4-DAG: sits.shard %wv {shard = #sits.shard<dim = 0, parts = 2, replicas = 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
// TP4-DAG: sits.shard %wo {shard = #sits.shard<dim = 1, parts = 4>} : tensor<8x8xf32> -> tensor<8x2xf32>
// TP4: sits.attention {{.*}} {causal = #sits.causal<bottom_right>, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f32} : tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32> -> tensor<?x1x?x2xf32>
// TP4: sits.all_gather %{{.*}} {ranks = 4 : i64} : tensor<?x?x4xf32> -> tensor<?x?x16xf32>

// AUDIT4: pass sits-tensor-parallel
// AUDIT4: kv_heads_replicated: 1
// AUDIT4: - attention 0: 4 heads, 2 kv heads on every rank -> 1 heads per rank; each kv head on 2 ranks

// The KV cache holds each rank's kv heads, and the steps keep the
// collectives.
// KV: !kv_cache = !sits.kv_cache<layers = 1, max_batch = 4, kv_heads = 1, capacity = 64, head_dim = 2
// KV-LABEL: func.func @prefill
// KV: sits.all_reduce
// KV: sits.kv_cache.append
// KV: sits.all_gather
// KV-LABEL: func.func @decode
// KV: sits.all_reduce
// KV: sits.kv_cache.append
// KV: sits.all_gather

// One rank splits nothing.
// ONE-NOT: sits.tensor_parallel
// ONE-NOT: sits.shard

func.func @forward(%ids: tensor<?x?xi64>) -> tensor<?x?x16xf32> {
  %embed = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %norm = sits.weight "norm" dense<1.0> : tensor<8xf32>
  %head_norm = sits.weight "head_norm" dense<1.0> : tensor<2xf32>
  %wq = sits.weight "wq" dense<0.25> : tensor<8x8xf32>
  %wk = sits.weight "wk" dense<0.125> : tensor<4x8xf32>
  %wv = sits.weight "wv" dense<0.0625> : tensor<4x8xf32>
  %wo = sits.weight "wo" dense<0.5> : tensor<8x8xf32>
  %wg = sits.weight "wg" dense<0.25> : tensor<16x8xf32>
  %wu = sits.weight "wu" dense<0.125> : tensor<16x8xf32>
  %wd = sits.weight "wd" dense<0.5> : tensor<8x16xf32>
  %w1 = sits.weight "w1" dense<0.25> : tensor<32x8xf32>
  %w2 = sits.weight "w2" dense<0.5> : tensor<8x32xf32>
  %lm = sits.weight "lm" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %embed[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %pos = sits.position_ids %ids : tensor<?x?xi64> -> tensor<?x?xi64>
  %cos, %sin = sits.rope_cos_sin %pos {inv_freq = dense<[1.0]> : tensor<1xf32>} : tensor<?x?xi64> -> tensor<?x?x1xf32>, tensor<?x?x1xf32>
  %h = sits.rms_norm %x, %norm {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %q = sits.linear %h, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %k = sits.linear %h, %wk : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %v = sits.linear %h, %wv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %qh = sits.split_heads %q {num_heads = 4} : tensor<?x?x8xf32> -> tensor<?x4x?x2xf32>
  %kh = sits.split_heads %k {num_heads = 2} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
  %vh = sits.split_heads %v {num_heads = 2} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
  %qn = sits.rms_norm %qh, %head_norm {epsilon = 1.0e-6 : f32} : tensor<?x4x?x2xf32>, tensor<2xf32> -> tensor<?x4x?x2xf32>
  %kn = sits.rms_norm %kh, %head_norm {epsilon = 1.0e-6 : f32} : tensor<?x2x?x2xf32>, tensor<2xf32> -> tensor<?x2x?x2xf32>
  %qr = sits.rope %qn, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 2} : tensor<?x4x?x2xf32>, tensor<?x?x1xf32>, tensor<?x?x1xf32> -> tensor<?x4x?x2xf32>
  %kr = sits.rope %kn, %cos, %sin {style = #sits.rope_style<rotate_half>, rotary_dim = 2} : tensor<?x2x?x2xf32>, tensor<?x?x1xf32>, tensor<?x?x1xf32> -> tensor<?x2x?x2xf32>
  %a = sits.attention %qr, %kr, %vh {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x4x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32> -> tensor<?x4x?x2xf32>
  %m = sits.merge_heads %a : tensor<?x4x?x2xf32> -> tensor<?x?x8xf32>
  %o = sits.linear %m, %wo : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %r1 = sits.add %x, %o : tensor<?x?x8xf32>
  %h2 = sits.rms_norm %r1, %norm {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %g = sits.linear %h2, %wg : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  %u = sits.linear %h2, %wu : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  %gu = sits.glu <silu> %g, %u : tensor<?x?x16xf32>
  %d = sits.linear %gu, %wd : tensor<?x?x16xf32>, tensor<8x16xf32> -> tensor<?x?x8xf32>
  %r2 = sits.add %r1, %d : tensor<?x?x8xf32>
  %h3 = sits.rms_norm %r2, %norm {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %u2 = sits.linear %h3, %w1 : tensor<?x?x8xf32>, tensor<32x8xf32> -> tensor<?x?x32xf32>
  %act = sits.activation <gelu> %u2 : tensor<?x?x32xf32>
  %d2 = sits.linear %act, %w2 : tensor<?x?x32xf32>, tensor<8x32xf32> -> tensor<?x?x8xf32>
  %r3 = sits.add %r2, %d2 : tensor<?x?x8xf32>
  %h4 = sits.rms_norm %r3, %norm {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %logits = sits.lm_head %h4, %lm : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
