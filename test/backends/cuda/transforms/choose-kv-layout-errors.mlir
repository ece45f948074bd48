// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged" --verify-diagnostics

// A quantized cache with per-channel keys: a block of keys (one scale per
// channel) must lie in one block of the pool; 64 is not a multiple of 128.
!qcache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 256, head_dim = 32, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 16, group_size = 32, keys = #sits.kv_key_groups<per_channel>, channel_block = 128, scale_type = f16>>

// expected-error @+1 {{a paged quantized KV cache needs --kv-block-tokens (64) a multiple of the per-channel key block (128, --kv-channel-block): a key block's scales lie in one block}}
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
