// A program of sits.tensor_parallel = 2 runs as its two ranks, one thread
// each, meeting at the collectives: a column-parallel linear (each rank
// its half of the rows) gathered, and a row-parallel one (each rank its
// half of the columns) summed with the bias added once. The caller gets
// rank 0's results, which every rank must have computed alike.
// REQUIRES: python-onnx
// RUN: rm -rf %t && mkdir -p %t
// RUN: sits-exec %s --function column_then_row --output-dir %t/out
// RUN: %python -c "import numpy as np; print(*[np.load('%t/out/result_%d.npy' % i).tolist() for i in range(2)])" | FileCheck %s
// RUN: not sits-exec %s --function not_replicated 2>&1 | FileCheck %s --check-prefix=PARTIAL
// RUN: not sits-exec %s --function wrong_ranks 2>&1 | FileCheck %s --check-prefix=RANKS

module attributes {sits.tensor_parallel = 2 : i64} {
  // x [1, 2] times w1 (4 x 2) is y = [1, 2, 3, 2]: rank 0 holds [1, 2],
  // rank 1 [3, 2], gathered. y times w2 (2 x 4) is [3, 5]: rank 0 adds
  // [1, 2], rank 1 [2, 3]; the bias [10, 20] once: [13, 25].
  // CHECK: {{\[\[}}1.0, 2.0, 3.0, 2.0]] {{\[\[}}13.0, 25.0]]
  func.func @column_then_row() -> (tensor<1x4xf32>, tensor<1x2xf32>) {
    %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
    %w1 = sits.weight "w1" dense<[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]> : tensor<4x2xf32>
    %w2 = sits.weight "w2" dense<[[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]]> : tensor<2x4xf32>
    %b = sits.weight "b" dense<[10.0, 20.0]> : tensor<2xf32>
    %rows = sits.shard %w1 {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x2xf32> -> tensor<2x2xf32>
    %cols = sits.shard %w2 {shard = #sits.shard<dim = 1, parts = 2>} : tensor<2x4xf32> -> tensor<2x2xf32>
    %y = sits.linear %x, %rows : tensor<1x2xf32>, tensor<2x2xf32> -> tensor<1x2xf32>
    %all = sits.all_gather %y {ranks = 2} : tensor<1x2xf32> -> tensor<1x4xf32>
    %z = sits.linear %y, %cols : tensor<1x2xf32>, tensor<2x2xf32> -> tensor<1x2xf32>
    %sum = sits.all_reduce %z bias(%b : tensor<2xf32>) {ranks = 2} : tensor<1x2xf32>
    return %all, %sum : tensor<1x4xf32>, tensor<1x2xf32>
  }

  // A rank's part returned as it is: the ranks' results differ.
  // PARTIAL: result 0 of 'not_replicated' differs between rank 0 and rank 1: a tensor-parallel program's results must be replicated on every rank
  func.func @not_replicated() -> tensor<1x2xf32> {
    %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
    %w1 = sits.weight "w1" dense<[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]> : tensor<4x2xf32>
    %rows = sits.shard %w1 {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x2xf32> -> tensor<2x2xf32>
    %y = sits.linear %x, %rows : tensor<1x2xf32>, tensor<2x2xf32> -> tensor<1x2xf32>
    return %y : tensor<1x2xf32>
  }

  // RANKS: rank {{[01]}} failed: {{.*}}sits.all_reduce{{.*}}the collective is over 4 ranks, but the program runs on 2
  func.func @wrong_ranks() -> tensor<1x2xf32> {
    %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
    %sum = sits.all_reduce %x {ranks = 4} : tensor<1x2xf32>
    return %sum : tensor<1x2xf32>
  }
}
