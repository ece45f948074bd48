// Run-time errors name the op and the ONNX nodes it came from, and sits-exec
// exits non-zero with one clear message.
// RUN: not sits-exec %s --function vocabulary 2>&1 | FileCheck %s --check-prefix=VOCAB
// RUN: not sits-exec %s --function rope_table 2>&1 | FileCheck %s --check-prefix=ROPE
// RUN: not sits-exec %s --function cache_full 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: not sits-exec %s --function unsupported 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sits-exec %s --function takes_ids 2>&1 | FileCheck %s --check-prefix=ARGS
// RUN: not sits-exec %s --function takes_ids --input %s.missing.npy 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not sits-exec %s --function no_such_function 2>&1 | FileCheck %s --check-prefix=NOFUNC

!kv = !sits.kv_cache<layers = 1, max_batch = 1, kv_heads = 1, capacity = 4, head_dim = 2, element_type = f16, layout = #sits.kv_layout<contiguous>>

// VOCAB: sits-exec: error: 'sits.embedding' at /model/embed_tokens/Gather: token id -1 (element 2 of ids) is outside the vocabulary [0, 8)
func.func @vocabulary() -> tensor<1x3x4xf32> {
  %t = sits.weight "embed" dense<0.5> : tensor<8x4xf32>
  %ids = arith.constant dense<[[0, 7, -1]]> : tensor<1x3xi64>
  %e = sits.embedding %t[%ids] : tensor<8x4xf32>, tensor<1x3xi64> -> tensor<1x3x4xf32> loc("/model/embed_tokens/Gather")
  return %e : tensor<1x3x4xf32>
}

// ROPE: sits-exec: error: 'sits.rope_gather' at /model/rotary/Gather, /model/rotary/Gather_1: position 40 is outside the RoPE table [0, 32)
func.func @rope_table() -> (tensor<1x1x2xf32>, tensor<1x1x2xf32>) {
  %table = sits.weight "rope" dense<0.25> : tensor<32x4xf32>
  %pos = arith.constant dense<[[40]]> : tensor<1x1xi64>
  %c, %s = sits.rope_gather %table[%pos] : tensor<32x4xf32>, tensor<1x1xi64> -> tensor<1x1x2xf32>, tensor<1x1x2xf32> loc(fused["/model/rotary/Gather", "/model/rotary/Gather_1"])
  return %c, %s : tensor<1x1x2xf32>, tensor<1x1x2xf32>
}

// FULL: sits-exec: error: 'sits.kv_cache.advance' at /model/step: KV cache full: sequence 0 would hold 5 tokens, capacity is 4
func.func @cache_full() -> !kv {
  %c = sits.kv_cache.init : !kv
  %ids = arith.constant dense<1> : tensor<1x3xi64>
  %c1 = sits.kv_cache.advance %c by %ids : !kv, tensor<1x3xi64>
  %more = arith.constant dense<1> : tensor<1x2xi64>
  %c2 = sits.kv_cache.advance %c1 by %more : !kv, tensor<1x2xi64> loc("/model/step")
  return %c2 : !kv
}

// UNKNOWN: sits-exec: error: 'arith.mulf' at /model/Mul: op 'arith.mulf' is not supported by the reference executor
func.func @unsupported() -> tensor<2xf32> {
  %a = arith.constant dense<2.0> : tensor<2xf32>
  %b = arith.mulf %a, %a : tensor<2xf32> loc("/model/Mul")
  return %b : tensor<2xf32>
}

// ARGS: sits-exec: error: function 'takes_ids' takes 1 arguments; only 0 --input files were given
// MISSING: sits-exec: error: cannot read '{{.*}}errors.mlir.missing.npy'
// NOFUNC: sits-exec: error: '{{.*}}errors.mlir' has no function 'no_such_function'
func.func @takes_ids(%ids: tensor<?x?xi64>) -> tensor<?x?xi64> {
  return %ids : tensor<?x?xi64>
}
