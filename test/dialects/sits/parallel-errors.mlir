// Every verifier error of the tensor-parallel ops, the embedding's part of
// the vocabulary and the module's ranks, with the message users see.
// RUN: sits-opt %s -split-input-file -verify-diagnostics

func.func @shard_of_an_argument(%w: tensor<16x8xf32>) {
  // expected-error @+1 {{'sits.shard' op shards a sits.weight, not another value}}
  %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @shard_dim_out_of_range() {
  %w = sits.weight "w" dense<1.0> : tensor<16x8xf32>
  // expected-error @+1 {{'sits.shard' op shard dimension 2 is not a dimension of 'tensor<16x8xf32>'}}
  %p = sits.shard %w {shard = #sits.shard<dim = 2, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @shard_parts_do_not_divide() {
  %w = sits.weight "w" dense<1.0> : tensor<15x8xf32>
  // expected-error @+1 {{'sits.shard' op weight dimension 0 (15) is not a multiple of the 2 parts}}
  %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<15x8xf32> -> tensor<7x8xf32>
  return
}

// -----

func.func @shard_wrong_result() {
  %w = sits.weight "w" dense<1.0> : tensor<16x8xf32>
  // expected-error @+1 {{'sits.shard' op result dimension 0 is 16, but this rank's part of 'tensor<16x8xf32>' has 8}}
  %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @shard_element_type() {
  %w = sits.weight "w" dense<1.0> : tensor<16x8xf32>
  // expected-error @+1 {{'sits.shard' op result 'tensor<8x8xf16>' must have the weight's rank and element type}}
  %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf16>
  return
}

// -----

func.func @shard_no_parts() {
  %w = sits.weight "w" dense<1.0> : tensor<16x8xf32>
  // expected-error @+1 {{shard parts and replicas must be >= 1, got 0 and 1}}
  %p = sits.shard %w {shard = #sits.shard<dim = 0, parts = 0>} : tensor<16x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @shard_negative_dim() {
  %w = sits.weight "w" dense<1.0> : tensor<16x8xf32>
  // expected-error @+1 {{shard dimension must be >= 0, got -1}}
  %p = sits.shard %w {shard = #sits.shard<dim = -1, parts = 2>} : tensor<16x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @all_reduce_no_ranks(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'sits.all_reduce' op attribute 'ranks' failed to satisfy constraint}}
  %s = sits.all_reduce %x {ranks = 0} : tensor<2x8xf32>
  return
}

// -----

func.func @all_reduce_bias_width(%x: tensor<2x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'sits.all_reduce' op bias 'tensor<4xf32>' must be one row of the input's last dimension and element type ('tensor<2x8xf32>')}}
  %s = sits.all_reduce %x bias(%b : tensor<4xf32>) {ranks = 2} : tensor<2x8xf32>
  return
}

// -----

func.func @all_gather_width(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'sits.all_gather' op result dimension 1 is 8, but the 2 ranks' parts make 16}}
  %g = sits.all_gather %x {ranks = 2} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @all_gather_rank(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'sits.all_gather' op result 'tensor<16xf32>' must have the input's rank (>= 1) and element type ('tensor<2x8xf32>')}}
  %g = sits.all_gather %x {ranks = 2} : tensor<2x8xf32> -> tensor<16xf32>
  return
}

// -----

func.func @vocab_shard_of_hidden(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op vocab_shard splits the vocabulary (dimension 0 of the table), got dimension 1}}
  %x = sits.embedding %t[%ids] {vocab_shard = #sits.shard<dim = 1, parts = 2>} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @vocab_shard_and_offset(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op vocab_shard and row_offset exclude each other (every rank's offset follows from vocab_shard; sits-specialize-rank makes it a row_offset)}}
  %x = sits.embedding %t[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 2>, row_offset = 8} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @negative_row_offset(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op row_offset must be >= 0, got -8}}
  %x = sits.embedding %t[%ids] {row_offset = -8} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @vocab_before_the_rows(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op vocab 12 ends before the table's rows (8 .. 15)}}
  %x = sits.embedding %t[%ids] {row_offset = 8, vocab = 12} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

func.func @vocab_of_the_parts(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error @+1 {{'sits.embedding' op vocab 12 must be the 2 parts of 8 rows (16)}}
  %x = sits.embedding %t[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 2>, vocab = 12} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return
}

// -----

// expected-error @+1 {{sits.tensor_parallel is the ranks of a module: an integer >= 1 on a builtin.module}}
module attributes {sits.tensor_parallel = 0 : i64} {
}

// -----

module {
  // expected-error @+1 {{sits.tensor_parallel is the ranks of a module: an integer >= 1 on a builtin.module}}
  func.func @ranks_on_a_function() attributes {sits.tensor_parallel = 2 : i64} {
    return
  }
}
