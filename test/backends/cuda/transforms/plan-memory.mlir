// RUN: sits-opt %s --split-input-file --kernel-group-linears --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=8" | FileCheck %s
// RUN: sits-opt %s --split-input-file --kernel-group-linears --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=8" --sits-audit-report | FileCheck %s --check-prefix=AUDIT
// RUN: sits-opt %s --split-input-file --kernel-group-linears --kernel-choose-weight-layout --kernel-select-linear-kernels --kernel-select-attention-kernels --kernel-configure-launches --kernel-plan-memory="max-prefill-tokens=4" | FileCheck %s --check-prefix=SHORT

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f32, layout = <contiguous>>

// Every value a decode step writes gets a slice of the workspace, sized for
// max_batch = 2 tokens of f32: the embedding, the norm, Q and K (one
// launch, two results), the attention's output and its split partial
// results (scratch), the residual sum. Views (split_heads, merge_heads), the
// cache and the logits take none. The largest goes first (the 1280 bytes of
// partial results, at 0); the embedding, read again by the residual add,
// lives through the step, so nothing else takes its bytes; the norm's bytes
// are free again by the time the residual sum is written.

// CHECK-LABEL: func.func @decode
// CHECK-SAME: attributes {kernel.workspace_bytes = 2048 : i64}
// CHECK: sits.embedding {{.*}}kernel.buffers = [#kernel.slice<offset = 1280, bytes = 256>]
// CHECK: sits.rms_norm {{.*}}kernel.buffers = [#kernel.slice<offset = 0, bytes = 256>]
// CHECK: kernel.launch <linear_group> attributes {kernel.buffers = [#kernel.slice<offset = 1536, bytes = 256>, #kernel.slice<offset = 256, bytes = 128>]
// CHECK: sits.linear
// CHECK-NOT: kernel.buffers
// CHECK: sits.split_heads
// CHECK-NOT: kernel.buffers
// CHECK: sits.attention {{.*}}kernel.buffers = [#kernel.slice<offset = 1792, bytes = 256>], kernel.config = #kernel.config<attention_split, split_keys = 16, weight_bytes = 0>, kernel.scratch = [#kernel.slice<offset = 0, bytes = 1280>]
// CHECK: sits.merge_heads
// CHECK-NOT: kernel.buffers
// CHECK-SAME: {{$}}
// CHECK-NEXT: sits.add {{.*}}kernel.buffers = [#kernel.slice<offset = 0, bytes = 256>]
// CHECK-NEXT: sits.lm_head
// CHECK-NOT: kernel.buffers
// CHECK-SAME: {{$}}

// AUDIT-LABEL: pass kernel-plan-memory
// AUDIT-NEXT: values: 7
// AUDIT-NEXT: scratch: 1
// AUDIT-NEXT: shared_bytes: 640
// AUDIT-NEXT: - @decode -> kernel.workspace_bytes = 2048
// AUDIT-NEXT: rule: 7 values (1 scratch) in 2048 bytes, 2688 if none shared: the largest first, each at the lowest offset free for its whole lifetime
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

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f32, layout = <contiguous>>

// Prefill sizes activations for max_batch x max-prefill-tokens tokens (2 x 8
// here, 2 x 4 in SHORT), and its GEMM reads int8 weights dequantized into
// scratch first (64 x 64 fp16).

// CHECK-LABEL: func.func @prefill
// CHECK-SAME: attributes {kernel.workspace_bytes = 16384 : i64}
// CHECK: sits.embedding {{.*}}kernel.buffers = [#kernel.slice<offset = 8192, bytes = 4096>]
// CHECK: sits.linear {{.*}}kernel.buffers = [#kernel.slice<offset = 12288, bytes = 4096>], {{.*}}kernel.scratch = [#kernel.slice<offset = 0, bytes = 8192>]
// SHORT-LABEL: func.func @prefill
// SHORT-SAME: attributes {kernel.workspace_bytes = 12288 : i64}
// SHORT: sits.embedding {{.*}}kernel.buffers = [#kernel.slice<offset = 8192, bytes = 2048>]
// SHORT: sits.linear {{.*}}kernel.buffers = [#kernel.slice<offset = 10240, bytes = 2048>], {{.*}}kernel.scratch = [#kernel.slice<offset = 0, bytes = 8192>]

// AUDIT-LABEL: pass kernel-plan-memory
// AUDIT-NEXT: values: 3
// AUDIT-NEXT: scratch: 1
// AUDIT-NEXT: shared_bytes: 0
func.func @prefill(%ids: tensor<?x?xi64>, %kv: !kv) -> (tensor<?x?x40xf32>, !kv) {
  %embed = sits.weight "embed" dense<1.0e-3> : tensor<40x64xf32>
  %levels = sits.weight "levels" dense<1> : tensor<64x64xi8>
  %scales = sits.weight "scales" dense<1.0> : tensor<64x1xf16>
  %head = sits.weight "head" dense<1.0e-2> : tensor<40x64xf32>
  %w = sits.dequantize %levels, %scales {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<64x64xi8>, tensor<64x1xf16> -> tensor<64x64xf32>
  %x = sits.embedding %embed[%ids] : tensor<40x64xf32>, tensor<?x?xi64> -> tensor<?x?x64xf32> loc("embed")
  %y = sits.linear %x, %w : tensor<?x?x64xf32>, tensor<64x64xf32> -> tensor<?x?x64xf32> loc("proj")
  %logits = sits.lm_head %y, %head : tensor<?x?x64xf32>, tensor<40x64xf32> -> tensor<?x?x40xf32> loc("lm_head")
  %kv1 = sits.kv_cache.advance %kv by %ids : !kv, tensor<?x?xi64>
  return %logits, %kv1 : tensor<?x?x40xf32>, !kv
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f32, layout = <contiguous>>

// A plan given in the input is kept as it is (the code generator checks
// it), even a partial one.

// CHECK-LABEL: func.func @decode
// CHECK-SAME: attributes {kernel.workspace_bytes = 512 : i64}
// CHECK: sits.embedding {{.*}}kernel.buffers = [#kernel.slice<offset = 256, bytes = 256>]
// CHECK: sits.lm_head
// CHECK-NOT: kernel.buffers
// AUDIT-LABEL: pass kernel-plan-memory
// AUDIT-NEXT: values: 0
// AUDIT: - @decode -> its memory plan
// AUDIT-NEXT: rule: given in the input
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv) -> (tensor<?x?x40xf32>, !kv) attributes {kernel.workspace_bytes = 512 : i64} {
  %embed = sits.weight "embed" dense<1.0e-3> : tensor<40x32xf32>
  %head = sits.weight "head" dense<1.0e-2> : tensor<40x32xf32>
  %x = sits.embedding %embed[%ids] {kernel.buffers = [#kernel.slice<offset = 256, bytes = 256>]} : tensor<40x32xf32>, tensor<?x1xi64> -> tensor<?x?x32xf32>
  %logits = sits.lm_head %x, %head : tensor<?x?x32xf32>, tensor<40x32xf32> -> tensor<?x?x40xf32>
  %kv1 = sits.kv_cache.advance %kv by %ids : !kv, tensor<?x1xi64>
  return %logits, %kv1 : tensor<?x?x40xf32>, !kv
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f32, layout = <contiguous>>

// A step the code generator cannot compile stays without a plan; the audit
// says why, and code generation reports the error at the op.

// CHECK-LABEL: func.func @decode
// CHECK-NOT: kernel.workspace_bytes
// CHECK-NOT: kernel.buffers
// AUDIT-LABEL: pass kernel-plan-memory
// AUDIT-NEXT: values: 0
// AUDIT: - @decode -> no memory plan
// AUDIT-NEXT: rule: code generation cannot plan it: codegen: cannot compile 'arith.addf': no GPU kernel implements it
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv) -> (tensor<?x?x40xf32>, !kv) {
  %embed = sits.weight "embed" dense<1.0e-3> : tensor<40x32xf32>
  %head = sits.weight "head" dense<1.0e-2> : tensor<40x32xf32>
  %x = sits.embedding %embed[%ids] : tensor<40x32xf32>, tensor<?x1xi64> -> tensor<?x?x32xf32>
  %y = arith.addf %x, %x : tensor<?x?x32xf32>
  %logits = sits.lm_head %y, %head : tensor<?x?x32xf32>, tensor<40x32xf32> -> tensor<?x?x40xf32>
  %kv1 = sits.kv_cache.advance %kv by %ids : !kv, tensor<?x1xi64>
  return %logits, %kv1 : tensor<?x?x40xf32>, !kv
}
