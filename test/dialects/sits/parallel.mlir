// Round trip of the tensor-parallel ops, the #sits.shard attribute, the
// embedding's part of the vocabulary and the module's ranks: print, parse
// the printed form again (generic form too).
// RUN: sits-opt %s | sits-opt | FileCheck %s
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt | FileCheck %s

// CHECK: module attributes {sits.tensor_parallel = 4 : i64}
module attributes {sits.tensor_parallel = 4 : i64} {

// CHECK-LABEL: func.func @column_then_row
func.func @column_then_row(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %up = sits.weight "mlp.up.weight" dense<0.5> : tensor<16x8xf32>
  %down = sits.weight "mlp.down.weight" dense<0.25> : tensor<8x16xf32>
  %bias = sits.weight "mlp.down.bias" dense<1.0> : tensor<8xf32>
  // The replicas default to 1 and are not printed then.
  // CHECK: %[[UP:.*]] = sits.shard %mlp.up.weight {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
  %upPart = sits.shard %up {shard = #sits.shard<dim = 0, parts = 2, replicas = 1>} : tensor<16x8xf32> -> tensor<8x8xf32>
  // CHECK: sits.shard %mlp.down.weight {shard = #sits.shard<dim = 1, parts = 2, replicas = 2>} : tensor<8x16xf32> -> tensor<8x8xf32>
  %downPart = sits.shard %down {shard = #sits.shard<dim = 1, parts = 2, replicas = 2>} : tensor<8x16xf32> -> tensor<8x8xf32>
  %h = sits.linear %x, %upPart : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %partial = sits.linear %h, %downPart : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  // CHECK: sits.all_reduce %{{.*}} bias(%mlp.down.bias : tensor<8xf32>) {ranks = 4 : i64} : tensor<2x3x8xf32>
  %sum = sits.all_reduce %partial bias(%bias : tensor<8xf32>) {ranks = 4} : tensor<2x3x8xf32>
  // CHECK: sits.all_reduce %{{.*}} {ranks = 4 : i64} : tensor<2x3x8xf32>
  %again = sits.all_reduce %sum {ranks = 4} : tensor<2x3x8xf32>
  return %again : tensor<2x3x8xf32>
}

// CHECK-LABEL: func.func @vocabulary_gather
func.func @vocabulary_gather(%logits: tensor<?x1x50xf16>) -> tensor<?x1x100xf16> {
  // CHECK: sits.all_gather %{{.*}} {ranks = 2 : i64} : tensor<?x1x50xf16> -> tensor<?x1x100xf16>
  %all = sits.all_gather %logits {ranks = 2} : tensor<?x1x50xf16> -> tensor<?x1x100xf16>
  return %all : tensor<?x1x100xf16>
}

// CHECK-LABEL: func.func @vocabulary_parts
func.func @vocabulary_parts(%ids: tensor<?x?xi64>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %table = sits.weight "embed" dense<0.5> : tensor<32x8xf32>
  %part = sits.shard %table {shard = #sits.shard<dim = 0, parts = 4>} : tensor<32x8xf32> -> tensor<8x8xf32>
  // CHECK: sits.embedding %{{.*}}[%{{.*}}] {vocab_shard = #sits.shard<dim = 0, parts = 4>} : tensor<8x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %x = sits.embedding %part[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 4>} : tensor<8x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %rows = sits.weight "rows" dense<0.5> : tensor<8x8xf32>
  // CHECK: sits.embedding %{{.*}}[%{{.*}}] {row_offset = 16 : i64, vocab = 32 : i64} : tensor<8x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %y = sits.embedding %rows[%ids] {row_offset = 16, vocab = 32} : tensor<8x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  return %x, %y : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

}
