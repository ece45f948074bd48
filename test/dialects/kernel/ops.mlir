// RUN: sits-opt %s | FileCheck %s
// RUN: sits-opt %s | sits-opt | FileCheck %s

// Each fusion kind's region shape round-trips.

// CHECK-LABEL: func.func @decode
// CHECK: %[[QKV:.*]]:3 = kernel.launch <linear_group> {
// CHECK-NEXT: sits.rms_norm
// CHECK-COUNT-3: sits.linear
// CHECK: kernel.yield
// CHECK-NEXT: } : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
// CHECK: kernel.launch <gated_linear> attributes {output_operand_bits = 4 : i64} {
// CHECK: kernel.launch <residual_linear> {
// CHECK: kernel.launch <norm> attributes {output_operand_bits = 8 : i64} {
// CHECK: kernel.launch <lm_head> attributes {kernel.config = #kernel.config<gemv_tc, tiles = 2, weight_bytes = 256>} {
func.func @decode(%x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
  %norm_w = sits.weight "norm" dense<1.0> : tensor<8xf32>
  %wq = sits.weight "wq" dense<0.25> : tensor<8x8xf32>
  %wk = sits.weight "wk" dense<0.125> : tensor<4x8xf32>
  %wv = sits.weight "wv" dense<0.5> : tensor<4x8xf32>
  %wg = sits.weight "wg" dense<0.5> : tensor<6x8xf32>
  %wu = sits.weight "wu" dense<0.5> : tensor<6x8xf32>
  %wd = sits.weight "wd" dense<0.5> : tensor<8x6xf32>
  %head = sits.weight "head" dense<0.5> : tensor<16x8xf32>
  %q, %k, %v = kernel.launch <linear_group> {
    %n = sits.rms_norm %x, %norm_w {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    %0 = sits.linear %n, %wq : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %1 = sits.linear %n, %wk : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
    %2 = sits.linear %n, %wv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
    kernel.yield %0, %1, %2 : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
  } : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
  %h = kernel.launch <gated_linear> attributes {output_operand_bits = 4 : i64} {
    %g = sits.linear %q, %wg : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
    %u = sits.linear %q, %wu : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
    %a = sits.glu <silu> %g, %u : tensor<?x?x6xf32>
    kernel.yield %a : tensor<?x?x6xf32>
  } : tensor<?x?x6xf32>
  %r = kernel.launch <residual_linear> {
    %d = sits.linear %h, %wd : tensor<?x?x6xf32>, tensor<8x6xf32> -> tensor<?x?x8xf32>
    %s = sits.add %x, %d : tensor<?x?x8xf32>
    kernel.yield %s : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  %n2 = kernel.launch <norm> attributes {output_operand_bits = 8 : i64} {
    %n = sits.rms_norm %r, %norm_w {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    kernel.yield %n : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  %logits = kernel.launch <lm_head> attributes {kernel.config = #kernel.config<gemv_tc, tiles = 2, weight_bytes = 256>} {
    %n = sits.rms_norm %n2, %norm_w {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    %l = sits.lm_head %n, %head : tensor<?x?x8xf32>, tensor<16x8xf32> -> tensor<?x?x16xf32>
    kernel.yield %l : tensor<?x?x16xf32>
  } : tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// A persistent decode schedule and its tasks round-trip: tiles and first
// blocks per bucket, dependencies on earlier tasks, the prefetch flag.
// CHECK-LABEL: func.func @decode_schedule
// CHECK-SAME: kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [1, 2]>
// CHECK: sits.rms_norm {{.*}}kernel.task = #kernel.task<id = 0, tiles = [1, 2], first_block = [0, 0], deps = []>
// CHECK: sits.linear {{.*}}kernel.task = #kernel.task<id = 1, tiles = [8, 8], first_block = [1, 2], deps = [0], prefetch>
func.func @decode_schedule(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> attributes {kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [1, 2]>} {
  %n = sits.weight "n" dense<1.0> : tensor<8xf32>
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %h = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 0, tiles = [1, 2], first_block = [0, 0], deps = []>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  %y = sits.linear %h, %w {kernel.config = #kernel.config<gemv, weight_bytes = 256>, kernel.task = #kernel.task<id = 1, tiles = [8, 8], first_block = [1, 2], deps = [0], prefetch>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}
