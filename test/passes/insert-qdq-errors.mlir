// Bad options and programs of --sits-insert-qdq: one error naming the cause.
// RUN: not sits-opt %s --sits-insert-qdq="weights=int3" 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// RUN: not sits-opt %s --sits-insert-qdq="kv-cache=fp8" 2>&1 | FileCheck %s --check-prefix=KV
// RUN: not sits-opt %s --sits-insert-qdq="weights=int4 weight-group=48" 2>&1 | FileCheck %s --check-prefix=GROUP4
// RUN: not sits-opt %s --sits-insert-qdq="weights=int8 weight-group=8" 2>&1 | FileCheck %s --check-prefix=GROUP8
// RUN: not sits-opt %s --sits-insert-qdq="kv-cache=int8 kv-hot-window=0" 2>&1 | FileCheck %s --check-prefix=WINDOW
// RUN: not sits-opt %s --sits-insert-qdq="kv-cache=int8 kv-keys=per-row" 2>&1 | FileCheck %s --check-prefix=KEYS
// RUN: not sits-opt %s --sits-insert-qdq="kv-cache=int8 kv-channel-block=0" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not sits-opt %s --sits-insert-qdq="kv-cache=int4" 2>&1 | FileCheck %s --check-prefix=NOCACHE
// RUN: not sits-opt %s --sits-kv-cache="max-seq-len=32" --sits-insert-qdq="kv-cache=int4 kv-hot-window=33" 2>&1 | FileCheck %s --check-prefix=CAPACITY
// RUN: not sits-opt %s --sits-kv-cache="max-seq-len=32" --sits-insert-qdq="kv-cache=int4 kv-hot-window=8" --sits-insert-qdq="kv-cache=int4 kv-hot-window=8" 2>&1 | FileCheck %s --check-prefix=TWICE

// WEIGHTS: error: sits-insert-qdq: weights must be fp16, int8 or int4, got 'int3'
// KV: error: sits-insert-qdq: kv-cache must be fp16, int8 or int4, got 'fp8'
// GROUP4: error: sits-insert-qdq: weight-group must be a multiple of 32 between 32 and 65536 for int4 weights (a group is whole 16-byte loads), got 48
// GROUP8: error: sits-insert-qdq: weight-group must be a multiple of 16 between 16 and 65536 for int8 weights (a group is whole 16-byte loads), got 8
// WINDOW: error: sits-insert-qdq: kv-hot-window must be >= 1, got 0
// KEYS: error: sits-insert-qdq: kv-keys must be auto, per-token or per-channel, got 'per-row'
// BLOCK: error: sits-insert-qdq: kv-channel-block must be between 1 and 4096, got 0
// NOCACHE: error: sits-insert-qdq: kv-cache=int4 needs a program with a KV cache (run --sits-kv-cache first)
// CAPACITY: error: sits-insert-qdq: kv-hot-window 33 exceeds the cache capacity (32 tokens, --max-seq-len)
// TWICE: error: sits-insert-qdq: the KV cache is quantized already

func.func @forward(%ids: tensor<?x?xi64>) -> tensor<?x?x16xf32> {
  %table = sits.weight "embed" dense<0.5> : tensor<16x8xf32>
  %wkv = sits.weight "wkv" dense<0.125> : tensor<4x8xf32>
  %x = sits.embedding %table[%ids] : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
  %k = sits.linear %x, %wkv : tensor<?x?x8xf32>, tensor<4x8xf32> -> tensor<?x?x4xf32>
  %kh = sits.split_heads %k {num_heads = 1} : tensor<?x?x4xf32> -> tensor<?x1x?x4xf32>
  %a = sits.attention %kh, %kh, %kh {num_heads = 1, num_kv_heads = 1, scale = 0.5 : f32, causal = #sits.causal<bottom_right>} : tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32> -> tensor<?x1x?x4xf32>
  %m = sits.merge_heads %a : tensor<?x1x?x4xf32> -> tensor<?x?x4xf32>
  %w = sits.weight "head" dense<0.25> : tensor<16x4xf32>
  %logits = sits.lm_head %m, %w : tensor<?x?x4xf32>, tensor<16x4xf32> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
