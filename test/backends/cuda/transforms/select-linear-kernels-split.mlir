// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-select-linear-kernels="gemm-k-splits=0" | FileCheck %s
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-select-linear-kernels="gemm-k-splits=0" --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-select-linear-kernels | FileCheck %s --check-prefix=NEVER
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-select-linear-kernels="gemm-k-splits=1" | FileCheck %s --check-prefix=NEVER
// RUN: sits-opt %s --kernel-fuse-gated-linears --kernel-select-linear-kernels="gemm-k-splits=3" | FileCheck %s --check-prefix=ASKED

// With gemm-k-splits=0 the tensor-core prefill GEMM splits K where one
// token tile gives fewer than 264 blocks (two an SM of a 132-SM GPU): up
// to 8 ways for a 4096-wide output (32 column tiles), 2 for a gate/up pair
// of 14336 (224 tiles of 64 gate and 64 up rows); not for a wide output,
// nor for a K of fewer than 16 steps of 32 inputs. By default (1) it never
// splits; another value is the most (at most one split a step of K).
// Decode never splits.

// CHECK-LABEL: func.func @decode
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemv_tc, weight_bytes = 131072>}
// CHECK-LABEL: func.func @prefill
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm_tc, k_splits = 8, weight_bytes = 16777216>}
// CHECK: kernel.launch <gated_linear> attributes {kernel.config = #kernel.config<gemm_tc, k_splits = 2, weight_bytes = 29360128>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm_tc, weight_bytes = 34816000>}
// CHECK: sits.linear %{{.*}} {kernel.config = #kernel.config<gemm_tc, weight_bytes = 65536>}

// AUDIT: pass kernel-select-linear-kernels
// AUDIT: gemm_tc: 4
// AUDIT-NEXT: gemm_split_k: 2
// AUDIT: rule: prefill, fp16 weights: tensor cores; K split up to 8 ways for steps of few tokens (32 column tiles)
// AUDIT: rule: prefill, fp16 weights: tensor cores; K split up to 2 ways for steps of few tokens (224 column tiles)

// NEVER-LABEL: func.func @prefill
// NEVER-NOT: k_splits

// ASKED-LABEL: func.func @prefill
// ASKED: #kernel.config<gemm_tc, k_splits = 3, weight_bytes = 16777216>
// ASKED: #kernel.config<gemm_tc, k_splits = 3, weight_bytes = 29360128>
// ASKED: #kernel.config<gemm_tc, k_splits = 3, weight_bytes = 34816000>
// ASKED: #kernel.config<gemm_tc, k_splits = 2, weight_bytes = 65536>

func.func @decode(%x: tensor<?x?x512xf32>) -> tensor<?x?x128xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<128x512xf32>
  %y = sits.linear %x, %w : tensor<?x?x512xf32>, tensor<128x512xf32> -> tensor<?x?x128xf32>
  return %y : tensor<?x?x128xf32>
}

func.func @prefill(%x: tensor<?x?x2048xf32>, %h: tensor<?x?x512xf32>, %t: tensor<?x?x64xf32>) -> (tensor<?x?x4096xf32>, tensor<?x?x14336xf32>, tensor<?x?x34000xf32>, tensor<?x?x512xf32>) {
  %out = sits.weight "out" dense<0.25> : tensor<4096x2048xf32>
  %gate = sits.weight "gate" dense<0.25> : tensor<14336x512xf32>
  %up = sits.weight "up" dense<0.25> : tensor<14336x512xf32>
  %wide = sits.weight "wide" dense<0.25> : tensor<34000x512xf32>
  %short = sits.weight "short" dense<0.25> : tensor<512x64xf32>
  %o = sits.linear %x, %out : tensor<?x?x2048xf32>, tensor<4096x2048xf32> -> tensor<?x?x4096xf32>
  %g = sits.linear %h, %gate : tensor<?x?x512xf32>, tensor<14336x512xf32> -> tensor<?x?x14336xf32>
  %u = sits.linear %h, %up : tensor<?x?x512xf32>, tensor<14336x512xf32> -> tensor<?x?x14336xf32>
  %a = sits.glu <silu> %g, %u : tensor<?x?x14336xf32>
  %wd = sits.linear %h, %wide : tensor<?x?x512xf32>, tensor<34000x512xf32> -> tensor<?x?x34000xf32>
  %s = sits.linear %t, %short : tensor<?x?x64xf32>, tensor<512x64xf32> -> tensor<?x?x512xf32>
  return %o, %a, %wd, %s : tensor<?x?x4096xf32>, tensor<?x?x14336xf32>, tensor<?x?x34000xf32>, tensor<?x?x512xf32>
}
