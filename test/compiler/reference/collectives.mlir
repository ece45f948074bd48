// The tensor-parallel ops on the reference executor, which runs one rank:
// a program of one rank runs as the ops' descriptions say (all_reduce adds
// its bias once), and one of more ranks is refused with the ranks it needs.
// REQUIRES: python-onnx
// RUN: rm -rf %t && mkdir -p %t
// RUN: sits-exec %s --function one_rank --output-dir %t/out
// RUN: %python -c "import numpy as np; print(*[np.load('%t/out/result_%d.npy' % i).tolist() for i in range(3)])" | FileCheck %s
// RUN: not sits-exec %s --function two_ranks 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not sits-exec %s --function two_parts 2>&1 | FileCheck %s --check-prefix=PARTS
// RUN: sits-exec %s --function rows --output-dir %t/rows
// RUN: %python -c "import numpy as np; print(np.load('%t/rows/result_0.npy').tolist())" | FileCheck %s --check-prefix=ROWS
// RUN: not sits-exec %s --function outside 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: not sits-exec %s --function vocabulary_parts 2>&1 | FileCheck %s --check-prefix=VOCAB

// x = [1, 2] times the 2x2 weight [[1, 0], [0, 2]] is [1, 4]; the bias
// [10, 20] added once: [11, 24]. Without a bias, and the gather of one
// rank, the input.
// CHECK: {{\[\[}}11.0, 24.0]] {{\[\[}}1.0, 4.0]] {{\[\[}}1.0, 4.0]]
func.func @one_rank() -> (tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
  %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %w = sits.weight "w" dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %b = sits.weight "b" dense<[10.0, 20.0]> : tensor<2xf32>
  %part = sits.shard %w {shard = #sits.shard<dim = 0, parts = 1>} : tensor<2x2xf32> -> tensor<2x2xf32>
  %y = sits.linear %x, %part : tensor<1x2xf32>, tensor<2x2xf32> -> tensor<1x2xf32>
  %sum = sits.all_reduce %y bias(%b : tensor<2xf32>) {ranks = 1} : tensor<1x2xf32>
  %plain = sits.all_reduce %y {ranks = 1} : tensor<1x2xf32>
  %all = sits.all_gather %y {ranks = 1} : tensor<1x2xf32> -> tensor<1x2xf32>
  return %sum, %plain, %all : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>
}

// TWO: error: {{.*}}sits.all_reduce{{.*}}the program is tensor-parallel over 2 ranks; the reference executor runs one
func.func @two_ranks() -> tensor<1x2xf32> {
  %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %sum = sits.all_reduce %x {ranks = 2} : tensor<1x2xf32>
  return %sum : tensor<1x2xf32>
}

// PARTS: error: {{.*}}sits.shard{{.*}}the program is tensor-parallel over 4 ranks; the reference executor runs one
func.func @two_parts() -> tensor<1x2xf32> {
  %w = sits.weight "w" dense<1.0> : tensor<2x2xf32>
  %part = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2, replicas = 2>} : tensor<2x2xf32> -> tensor<1x2xf32>
  %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %y = sits.linear %x, %part : tensor<1x2xf32>, tensor<1x2xf32> -> tensor<1x1xf32>
  %z = sits.all_gather %y {ranks = 2} : tensor<1x1xf32> -> tensor<1x2xf32>
  return %z : tensor<1x2xf32>
}

// The embedding of a rank's part of the vocabulary (sits.embedding
// row_offset) and its refusal of a program for more ranks (vocab_shard).

// A table of rows 2 and 3 of a vocabulary of 4: ids 0 and 1 are another
// rank's (zeros), 3 and 2 its second and first rows.
// ROWS: {{\[\[}}[0.0, 0.0], [4.0, 6.0], [0.0, 0.0], [1.0, 2.0]]]
func.func @rows() -> tensor<1x4x2xf32> {
  %ids = arith.constant dense<[[0, 3, 1, 2]]> : tensor<1x4xi64>
  %t = sits.weight "t" dense<[[1.0, 2.0], [4.0, 6.0]]> : tensor<2x2xf32>
  %x = sits.embedding %t[%ids] {row_offset = 2, vocab = 4} : tensor<2x2xf32>, tensor<1x4xi64> -> tensor<1x4x2xf32>
  return %x : tensor<1x4x2xf32>
}

// OUTSIDE: error: {{.*}}token id 4 (element 1 of ids) is outside the vocabulary [0, 4)
func.func @outside() -> tensor<1x2x2xf32> {
  %ids = arith.constant dense<[[2, 4]]> : tensor<1x2xi64>
  %t = sits.weight "t" dense<[[1.0, 2.0], [4.0, 6.0]]> : tensor<2x2xf32>
  %x = sits.embedding %t[%ids] {row_offset = 2, vocab = 4} : tensor<2x2xf32>, tensor<1x2xi64> -> tensor<1x2x2xf32>
  return %x : tensor<1x2x2xf32>
}

// VOCAB: error: {{.*}}sits.embedding{{.*}}the program is tensor-parallel over 2 ranks; the reference executor runs one
func.func @vocabulary_parts() -> tensor<1x2x2xf32> {
  %ids = arith.constant dense<[[0, 1]]> : tensor<1x2xi64>
  %part = sits.weight "t" dense<[[1.0, 2.0], [4.0, 6.0]]> : tensor<2x2xf32>
  %x = sits.embedding %part[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 2>} : tensor<2x2xf32>, tensor<1x2xi64> -> tensor<1x2x2xf32>
  return %x : tensor<1x2x2xf32>
}
