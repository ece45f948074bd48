// The program of one rank of a tensor-parallel program: each sits.shard of
// a weight becomes a weight valued by the rank's slice (rank k holds part
// k / replicas), each embedding's vocab_shard the rank's row_offset.
// RUN: rm -rf %t && split-file %s %t
// RUN: sits-opt %t/two.mlir --sits-specialize-rank=rank=0 | FileCheck %s --check-prefix=RANK0
// RUN: sits-opt %t/two.mlir --sits-specialize-rank=rank=1 | FileCheck %s --check-prefix=RANK1
// RUN: sits-opt %t/four.mlir --sits-specialize-rank=rank=1 | FileCheck %s --check-prefix=FOUR1
// RUN: sits-opt %t/four.mlir --sits-specialize-rank=rank=3 | FileCheck %s --check-prefix=FOUR3
// The slices' values, read by the reference executor.
// REQUIRES: python-onnx
// RUN: sits-opt %t/two.mlir --sits-specialize-rank=rank=1 -o %t/rank1.mlir
// RUN: sits-exec %t/rank1.mlir --function parts --output-dir %t/out
// RUN: %python -c "import numpy as np; print(*[np.load('%t/out/result_%d.npy' % i).tolist() for i in range(3)])" | FileCheck %s --check-prefix=VALUES
// Rows 2..3 of wq, columns 2..3 of wo, the bias' second half.
// VALUES: {{\[\[}}8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]] {{\[\[}}2.0, 3.0], [6.0, 7.0], [10.0, 11.0], [14.0, 15.0]] [3.0, 4.0]

//--- two.mlir
module attributes {sits.tensor_parallel = 2 : i64} {
  // RANK0-LABEL: func.func @parts
  // RANK0: sits.weight "wq" #sits.weight_view<dense<{{.*}}> : tensor<4x4xf32>, offsets = [0, 0]> : tensor<2x4xf32>
  // RANK0: sits.weight "wo" #sits.weight_view<dense<{{.*}}> : tensor<4x4xf32>, offsets = [0, 0]> : tensor<4x2xf32>
  // RANK0: sits.weight "bq" #sits.weight_view<dense<{{.*}}> : tensor<4xf32>, offsets = [0]> : tensor<2xf32>
  // RANK0-NOT: sits.shard
  // RANK1-LABEL: func.func @parts
  // RANK1: sits.weight "wq" #sits.weight_view<dense<{{.*}}> : tensor<4x4xf32>, offsets = [2, 0]> : tensor<2x4xf32>
  // RANK1: sits.weight "wo" #sits.weight_view<dense<{{.*}}> : tensor<4x4xf32>, offsets = [0, 2]> : tensor<4x2xf32>
  // RANK1: sits.weight "bq" #sits.weight_view<dense<{{.*}}> : tensor<4xf32>, offsets = [2]> : tensor<2xf32>
  func.func @parts() -> (tensor<2x4xf32>, tensor<4x2xf32>, tensor<2xf32>) {
    %wq = sits.weight "wq" dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
    %wo = sits.weight "wo" dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
    %bq = sits.weight "bq" dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    %q = sits.shard %wq {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x4xf32> -> tensor<2x4xf32>
    %o = sits.shard %wo {shard = #sits.shard<dim = 1, parts = 2>} : tensor<4x4xf32> -> tensor<4x2xf32>
    %b = sits.shard %bq {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4xf32> -> tensor<2xf32>
    return %q, %o, %b : tensor<2x4xf32>, tensor<4x2xf32>, tensor<2xf32>
  }

  // A tied table: the embedding and the LM head read one shard, which
  // keeps the weight's name; a weight read as two parts gets a name per
  // part. A splat's part is a splat.
  // RANK0-LABEL: func.func @tied
  // RANK0-DAG: sits.weight "w.dim0.parts2" dense<2.500000e-01> : tensor<2x8xf32>
  // RANK0-DAG: sits.weight "w.dim1.parts2" dense<2.500000e-01> : tensor<4x4xf32>
  // RANK0-DAG: %[[T:.*]] = sits.weight "embed" #sits.weight_view<dense<{{.*}}> : tensor<16x8xf32>, offsets = [0, 0]> : tensor<8x8xf32>
  // RANK0: sits.embedding %[[T]][%{{.*}}] {vocab = 16 : i64}
  // RANK0: sits.all_reduce
  // RANK0: sits.lm_head %{{.*}}, %[[T]]
  // RANK0: sits.all_gather
  // RANK1-LABEL: func.func @tied
  // RANK1: %[[T:.*]] = sits.weight "embed" #sits.weight_view<dense<{{.*}}> : tensor<16x8xf32>, offsets = [8, 0]> : tensor<8x8xf32>
  // RANK1: sits.embedding %[[T]][%{{.*}}] {row_offset = 8 : i64, vocab = 16 : i64}
  func.func @tied(%ids: tensor<?x?xi64>) -> (tensor<?x?x16xf32>, tensor<2x8xf32>, tensor<4x4xf32>) {
    %table = sits.weight "embed" dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]> : tensor<16x8xf32>
    %w = sits.weight "w" dense<0.25> : tensor<4x8xf32>
    %w0 = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
    %w1 = sits.shard %w {shard = #sits.shard<dim = 1, parts = 2>} : tensor<4x8xf32> -> tensor<4x4xf32>
    %part = sits.shard %table {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
    %x = sits.embedding %part[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 2>} : tensor<8x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    %sum = sits.all_reduce %x {ranks = 2} : tensor<?x?x8xf32>
    %logits = sits.lm_head %sum, %part {tied} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %all = sits.all_gather %logits {ranks = 2} : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
    return %all, %w0, %w1 : tensor<?x?x16xf32>, tensor<2x8xf32>, tensor<4x4xf32>
  }
}

//--- four.mlir
// Four ranks over two KV heads: ranks 0 and 1 hold head 0, ranks 2 and 3
// head 1 (part k / replicas).
module attributes {sits.tensor_parallel = 4 : i64} {
  // FOUR1-LABEL: func.func @replicas
  // FOUR1: sits.weight "wk" #sits.weight_view<dense<{{.*}}> : tensor<4x4xf32>, offsets = [0, 0]> : tensor<2x4xf32>
  // FOUR1: sits.weight "wq" #sits.weight_view<dense<{{.*}}> : tensor<8x4xf32>, offsets = [2, 0]> : tensor<2x4xf32>
  // FOUR3-LABEL: func.func @replicas
  // FOUR3: sits.weight "wk" #sits.weight_view<dense<{{.*}}> : tensor<4x4xf32>, offsets = [2, 0]> : tensor<2x4xf32>
  // FOUR3: sits.weight "wq" #sits.weight_view<dense<{{.*}}> : tensor<8x4xf32>, offsets = [6, 0]> : tensor<2x4xf32>
  func.func @replicas() -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %wk = sits.weight "wk" dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<4x4xf32>
    %k = sits.shard %wk {shard = #sits.shard<dim = 0, parts = 2, replicas = 2>} : tensor<4x4xf32> -> tensor<2x4xf32>
    %wq = sits.weight "wq" dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0], [0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]> : tensor<8x4xf32>
    %q = sits.shard %wq {shard = #sits.shard<dim = 0, parts = 4>} : tensor<8x4xf32> -> tensor<2x4xf32>
    return %k, %q : tensor<2x4xf32>, tensor<2x4xf32>
  }
}
