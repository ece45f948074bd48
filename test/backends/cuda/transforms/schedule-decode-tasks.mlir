// RUN: sits-opt %s --split-input-file --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=8" --kernel-schedule-decode-tasks="decode-kernels=persistent persistent-blocks=4" | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=8" --kernel-schedule-decode-tasks="decode-kernels=persistent persistent-blocks=4" --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=8" --kernel-schedule-decode-tasks | FileCheck %s --check-prefix=GRAPH
// RUN: sits-opt %s --split-input-file --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=8" --kernel-schedule-decode-tasks="decode-kernels=persistent persistent-blocks=4" | sits-opt --kernel-schedule-decode-tasks="decode-kernels=persistent" --sits-audit-report | FileCheck %s --check-prefix=GIVEN

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f32, layout = <contiguous>>

// A decode step of seven launches as seven tasks of a persistent kernel of
// 4 blocks, for the buckets 1 and 2 (max_batch). Q and K are separate
// GEMVs (no grouping here), so the graph is not a chain: both wait only
// for the norm; the append waits for K; attention waits for Q and for the
// append (which waits for K), not for K itself (implied). The residual
// add also reads the embedding, a dependency implied through the norm.
// Tiles: the blocks of each launch's grid at batch 1 and 2, dealt
// round-robin to the 4 blocks in task order. The GEMVs (Q, K, the LM head)
// read weights and prefetch them.

// GRAPH-NOT: kernel.task
// GRAPH-NOT: kernel.decode_schedule

// CHECK-LABEL: func.func @decode
// CHECK-SAME: kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [1, 2]>
// CHECK: sits.embedding {{.*}}kernel.task = #kernel.task<id = 0, tiles = [1, 2], first_block = [0, 0], deps = []>
// CHECK: sits.rms_norm {{.*}}kernel.task = #kernel.task<id = 1, tiles = [1, 2], first_block = [1, 2], deps = [0]>
// CHECK: sits.linear {{.*}}kernel.task = #kernel.task<id = 2, tiles = [2, 2], first_block = [2, 0], deps = [1], prefetch>
// CHECK: sits.linear {{.*}}kernel.task = #kernel.task<id = 3, tiles = [1, 1], first_block = [0, 2], deps = [1], prefetch>
// CHECK: sits.kv_cache.append {{.*}}kernel.task = #kernel.task<id = 4, tiles = [1, 2], first_block = [1, 3], deps = [3]>
// CHECK: sits.attention {{.*}}kernel.task = #kernel.task<id = 5, tiles = [4, 8], first_block = [2, 1], deps = [2, 4]>
// CHECK: sits.add {{.*}}kernel.task = #kernel.task<id = 6, tiles = [1, 1], first_block = [2, 1], deps = [5]>
// CHECK: sits.lm_head {{.*}}kernel.task = #kernel.task<id = 7, tiles = [3, 3], first_block = [3, 2], deps = [6], prefetch>

// AUDIT-LABEL: pass kernel-schedule-decode-tasks
// AUDIT-NEXT: tasks: 8
// AUDIT-NEXT: tiles: 21
// AUDIT-NEXT: dependencies: 8
// AUDIT-NEXT: prefetches: 3
// AUDIT-NEXT: - @decode -> #kernel.decode_schedule<blocks = 4, buckets = [1, 2]>
// AUDIT-NEXT: rule: 8 tasks of 21 tiles at batch 2 over 4 blocks, 8 dependencies (a task waits for the earlier ones that write what it reads, or read or write what it writes), 3 prefetching their weights (--decode-kernels=persistent)

// A schedule in the input is kept as it is.
// GIVEN-LABEL: pass kernel-schedule-decode-tasks
// GIVEN-NEXT: tasks: 0
// GIVEN: - @decode -> its task graph
// GIVEN-NEXT: rule: given in the input
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv) -> (tensor<?x?x40xf32>, !kv) {
  %embed = sits.weight "embed" dense<1.0e-3> : tensor<40x32xf32>
  %norm = sits.weight "norm" dense<1.0> : tensor<32xf32>
  %wq = sits.weight "wq" dense<1.0e-2> : tensor<32x32xf32>
  %wk = sits.weight "wk" dense<1.0e-2> : tensor<16x32xf32>
  %head = sits.weight "head" dense<1.0e-2> : tensor<40x32xf32>
  %past = sits.kv_cache.length %kv : !kv -> tensor<?xi64>
  %x = sits.embedding %embed[%ids] : tensor<40x32xf32>, tensor<?x1xi64> -> tensor<?x?x32xf32> loc("embed")
  %h = sits.rms_norm %x, %norm {epsilon = 1.0e-6 : f32} : tensor<?x?x32xf32>, tensor<32xf32> -> tensor<?x?x32xf32> loc("norm")
  %q = sits.linear %h, %wq : tensor<?x?x32xf32>, tensor<32x32xf32> -> tensor<?x?x32xf32> loc("q")
  %k = sits.linear %h, %wk : tensor<?x?x32xf32>, tensor<16x32xf32> -> tensor<?x?x16xf32> loc("k")
  %qh = sits.split_heads %q {num_heads = 2 : i64} : tensor<?x?x32xf32> -> tensor<?x2x?x16xf32>
  %kh = sits.split_heads %k {num_heads = 1 : i64} : tensor<?x?x16xf32> -> tensor<?x1x?x16xf32>
  %kv1 = sits.kv_cache.append %kv[0], %kh, %kh at %past : !kv, tensor<?x1x?x16xf32>, tensor<?x1x?x16xf32>, tensor<?xi64>
  %key, %value = sits.kv_cache.read %kv1[0] : !kv -> tensor<?x1x64x16xf32>, tensor<?x1x64x16xf32>
  %a = sits.attention %qh, %key, %value past_len(%past : tensor<?xi64>) {causal = #sits.causal<bottom_right>, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f32} : tensor<?x2x?x16xf32>, tensor<?x1x64x16xf32>, tensor<?x1x64x16xf32> -> tensor<?x2x?x16xf32> loc("attention")
  %m = sits.merge_heads %a : tensor<?x2x?x16xf32> -> tensor<?x?x32xf32>
  %y = sits.add %x, %m : tensor<?x?x32xf32> loc("residual")
  %logits = sits.lm_head %y, %head : tensor<?x?x32xf32>, tensor<40x32xf32> -> tensor<?x?x40xf32> loc("lm_head")
  %kv2 = sits.kv_cache.advance %kv1 by %ids : !kv, tensor<?x1xi64>
  return %logits, %kv2 : tensor<?x?x40xf32>, !kv
}
