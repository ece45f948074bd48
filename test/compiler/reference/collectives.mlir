// The tensor-parallel ops on the reference executor, which runs one rank:
// a program of one rank runs as the ops' descriptions say (all_reduce adds
// its bias once), and one of more ranks is refused with the ranks it needs.
// REQUIRES: python-onnx
// RUN: rm -rf %t && mkdir -p %t
// RUN: sits-exec %s --function one_rank --output-dir %t/out
// RUN: %python -c "import numpy as np; print(*[np.load('%t/out/result_%d.npy' % i).tolist() for i in range(3)])" | FileCheck %s
// RUN: not sits-exec %s --function two_ranks 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not sits-exec %s --function two_parts 2>&1 | FileCheck %s --check-prefix=PARTS

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
