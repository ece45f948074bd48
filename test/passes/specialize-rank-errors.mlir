// What sits-specialize-rank refuses, with the message users see.
// RUN: sits-opt %s --sits-specialize-rank=rank=2 --split-input-file --verify-diagnostics

// expected-error @+1 {{sits-specialize-rank: rank 2 is not one of the program's 2 (ranks 0 .. 1, sits.tensor_parallel)}}
module attributes {sits.tensor_parallel = 2 : i64} {
}

// -----

// Without sits.tensor_parallel a program has one rank.
// expected-error @+1 {{sits-specialize-rank: rank 2 is not one of the program's 1 (ranks 0 .. 0, sits.tensor_parallel)}}
module {
}

// -----

module attributes {sits.tensor_parallel = 4 : i64} {
  func.func @other_ranks() -> tensor<2x4xf32> {
    %w = sits.weight "w" dense<1.0> : tensor<4x4xf32>
    // expected-error @+1 {{sits-specialize-rank: #sits.shard<dim = 0, parts = 2> describes 2 ranks, but the program has 4 (sits.tensor_parallel)}}
    %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<4x4xf32> -> tensor<2x4xf32>
    return %p : tensor<2x4xf32>
  }
}

// -----

module attributes {sits.tensor_parallel = 4 : i64} {
  func.func @other_vocabulary_ranks(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
    // expected-error @+1 {{sits-specialize-rank: #sits.shard<dim = 0, parts = 8> describes 8 ranks, but the program has 4 (sits.tensor_parallel)}}
    %x = sits.embedding %t[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 8>} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
    return %x : tensor<2x3x4xf32>
  }
}
