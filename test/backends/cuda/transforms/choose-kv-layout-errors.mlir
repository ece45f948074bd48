// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged" --verify-diagnostics

// A quantized cache keeps its hot ring and cold rows per sequence.
!qcache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 64, head_dim = 32, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 16, group_size = 32, keys = #sits.kv_key_groups<per_channel>, channel_block = 8, scale_type = f16>>

// expected-error @+1 {{a paged KV cache cannot be quantized (--kv-cache=int8|int4): its hot ring, cold rows and scales are laid out per sequence, not in blocks; use --kv-layout=contiguous}}
func.func @decode(%x: tensor<4xf32>, %cache: !qcache) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A given pool is checked against the cache too.
!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

// expected-error @+1 {{a paged KV cache of 3 blocks cannot hold one sequence of --max-seq-len 128 (8 blocks of 16 tokens)}}
func.func @decode(%x: tensor<4xf32>, %cache: !kv) -> tensor<4xf32> attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 16, blocks = 3>} {
  return %x : tensor<4xf32>
}
