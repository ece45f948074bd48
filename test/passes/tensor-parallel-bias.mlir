// RUN: sits-opt %s --sits-tensor-parallel="tensor-parallel=2" | FileCheck %s

// Biases follow their weights: a column-parallel projection's bias is split
// as its rows are; a row-parallel projection's bias moves into the
// sits.all_reduce, which adds it once (each rank adding it would add it
// twice). One linear feeds both the keys and the values here. A tied LM
// head shares the embedding's shard.

// CHECK-DAG: %[[BQ:.*]] = sits.shard %bq {shard = #sits.shard<dim = 0, parts = 2>} : tensor<8xf32> -> tensor<4xf32>
// CHECK-DAG: %[[BKV:.*]] = sits.shard %bkv {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4xf32> -> tensor<2xf32>
// CHECK-DAG: %[[BU:.*]] = sits.shard %bu {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16xf32> -> tensor<8xf32>
// CHECK-DAG: %[[BLM:.*]] = sits.shard %blm {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16xf32> -> tensor<8xf32>
// CHECK: sits.linear %{{.*}}, %{{.*}} bias(%[[BQ]] : tensor<4xf32>) : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
// CHECK: %[[KV:.*]] = sits.linear %{{.*}}, %{{.*}} bias(%[[BKV]] : tensor<2xf32>) : tensor<?x?x8xf32>, tensor<2x8xf32> -> tensor<?x?x2xf32>
// CHECK: %[[KVH:.*]] = sits.split_heads %[[KV]] {num_heads = 1 : i64} : tensor<?x?x2xf32> -> tensor<?x1x?x2xf32>
// CHECK: sits.attention %{{.*}}, %{{.*}}, %[[KVH]] {{.*}}num_heads = 2 : i64, num_kv_heads = 1 : i64
// CHECK: %[[O:.*]] = sits.linear %{{.*}}, %{{.*}} : tensor<?x?x4xf32>, tensor<8x4xf32> -> tensor<?x?x8xf32>
// CHECK: sits.all_reduce %[[O]] bias(%bo : tensor<8xf32>) {ranks = 2 : i64} : tensor<?x?x8xf32>
// CHECK: %[[U:.*]] = sits.linear %{{.*}}, %{{.*}} bias(%[[BU]] : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// CHECK: %[[ACT:.*]] = sits.activation <relu> %[[U]] : tensor<?x?x8xf32>
// CHECK: %[[D:.*]] = sits.linear %[[ACT]], %{{.*}} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// CHECK: sits.all_reduce %[[D]] bias(%bd : tensor<8xf32>) {ranks = 2 : i64}
// CHECK: %[[LOGITS:.*]] = sits.lm_head %{{.*}}, %{{.*}} bias(%[[BLM]] : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
// CHECK: sits.all_gather %[[LOGITS]] {ranks = 2 : i64} : tensor<?x?x8xf32> -> tensor<?x?x16xf32>

func.func @forward(%x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
  %wq = sits.weight "wq" dense<0.25> : tensor<8x8xf32>
  %bq = sits.weight "bq" dense<0.5> : tensor<8xf32>
  %wkv = sits.weight "wkv" dense<0.125> : tensor<4x8xf32>
  %bkv = sits.weight "bkv" dense<0.25> : tensor<4xf32>
  %wo = sits.weight "wo" dense<0.5> : tensor<8x8xf32>
  %bo = sits.weight "bo" dense<1.0> : tensor<8xf32>
  %wu = sits.weight "wu" dense<0.125> : tensor<16x8xf32>
  %bu = sits.weight "bu" dense<0.5> : tensor<16xf32>
  %wd = sits.weight "wd" dense<0.5> : tensor<8x16xf32>
  %bd = sits.weight "bd" dense<2.0> : tensor<8xf32>
  %lm = sits.weight "lm" dense<0.5> : tensor<16x8xf32>
  %blm = sits.weight "blm" dense<0.75> : tensor<16xf32>
  %q = sits.linear %x, %wq bias(%bq : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %kv = sits.linear %x, %wkv bias(%bkv : tensor<4xf32>) : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %qh = sits.split_heads %q {num_heads = 4} : tensor<?x?x8xf32> -> tensor<?x4x?x2xf32>
  %kvh = sits.split_heads %kv {num_heads = 2} : tensor<?x?x4xf32> -> tensor<?x2x?x2xf32>
  %a = sits.attention %qh, %kvh, %kvh {num_heads = 4, num_kv_heads = 2, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x4x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32> -> tensor<?x4x?x2xf32>
  %m = sits.merge_heads %a : tensor<?x4x?x2xf32> -> tensor<?x?x8xf32>
  %o = sits.linear %m, %wo bias(%bo : tensor<8xf32>) : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  %r = sits.add %x, %o : tensor<?x?x8xf32>
  %u = sits.linear %r, %wu bias(%bu : tensor<16xf32>) : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  %act = sits.activation <relu> %u : tensor<?x?x16xf32>
  %d = sits.linear %act, %wd bias(%bd : tensor<8xf32>) : tensor<?x?x16xf32>, tensor<8x16xf32> -> tensor<?x?x8xf32>
  %r2 = sits.add %r, %d : tensor<?x?x8xf32>
  %logits = sits.lm_head %r2, %lm bias(%blm : tensor<16xf32>) : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// A tied LM head reads the embedding's sits.shard: one part of the table
// per rank.
// CHECK-LABEL: func.func @tied
// CHECK: %[[T:.*]] = sits.shard %table {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NOT: sits.shard
// CHECK: sits.embedding %[[T]][%{{.*}}] {vocab_shard = #sits.shard<dim = 0, parts = 2>}
// CHECK: sits.lm_head %{{.*}}, %[[T]] {tied}
func.func @tied(%ids: tensor<?x?xi64>) -> tensor<?x?x16xf32> {
  %table = sits.weight "table" dense<0.5> : tensor<16x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %logits = sits.lm_head %x, %table {tied} : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
