// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout | FileCheck %s --check-prefix=CONTIG
// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout --sits-audit-report | FileCheck %s --check-prefix=CONTIG-AUDIT
// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged" | FileCheck %s --check-prefix=PAGED
// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged kv-block-tokens=16 kv-pool-blocks=20" --sits-audit-report | FileCheck %s --check-prefix=POOL
// RUN: not sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged kv-pool-blocks=1" 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: not sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged kv-block-tokens=24" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=ring" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// RUN: sits-opt %s --split-input-file --kernel-choose-kv-layout="kv-layout=paged kv-block-tokens=16" --sits-audit-report 2>&1 | FileCheck %s --check-prefix=QUANT

// Contiguous (the default) leaves the steps as they are; paged gives every
// step that takes the cache a #kernel.kv_pages: blocks of kv-block-tokens
// (64 by default), max_batch full sequences in the pool unless
// kv-pool-blocks says. A quantized cache pages its cold rows and scales
// (counted apart in the audit; its hot ring stays per sequence); a pool
// that cannot hold one sequence is refused.

// CONTIG-LABEL: func.func @decode
// CONTIG-NOT: kernel.kv_pages
// CONTIG-LABEL: func.func @prefill
// CONTIG-NOT: kernel.kv_pages
// CONTIG-LABEL: func.func @helper
// CONTIG: kernel.kv_pages = #kernel.kv_pages<block_tokens = 32, blocks = 9>
// CONTIG-AUDIT: pass kernel-choose-kv-layout
// CONTIG-AUDIT-NEXT: contiguous: 2
// CONTIG-AUDIT-NEXT: paged: 0
// CONTIG-AUDIT-NEXT: paged_quantized: 0
// CONTIG-AUDIT: rule: each sequence owns 128 rows (--kv-layout=contiguous)

// 128 tokens a sequence: 2 blocks of 64, 2 sequences.
// PAGED: func.func @decode({{.*}}) -> tensor<4xf32> attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 64, blocks = 4>}
// PAGED: func.func @prefill({{.*}}) -> tensor<4xf32> attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 64, blocks = 4>}
// A function without the cache is left alone.
// PAGED: func.func @helper(%{{.*}}: tensor<4xf32>) -> tensor<4xf32> {

// POOL: pass kernel-choose-kv-layout
// POOL-NEXT: contiguous: 0
// POOL-NEXT: paged: 2
// POOL: rule: --kv-layout=paged: 8 blocks a full sequence, 20 in the pool (--kv-pool-blocks)

// SMALL: error: a paged KV cache of 1 blocks cannot hold one sequence of --max-seq-len 128 (2 blocks of 64 tokens)
// BLOCK: error: --kv-block-tokens must be a power of two from 16 to 1024, got 24
// LAYOUT: error: --kv-layout must be contiguous or paged, got 'ring'

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

func.func @decode(%x: tensor<4xf32>, %cache: !kv) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

func.func @prefill(%x: tensor<4xf32>, %cache: !kv) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A #kernel.kv_pages in the input is kept.
// PAGED-LABEL: func.func @given
// PAGED-SAME: kernel.kv_pages = #kernel.kv_pages<block_tokens = 32, blocks = 9>

!kv2 = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 128, head_dim = 32, element_type = f16, layout = <contiguous>>

func.func @given(%x: tensor<4xf32>, %cache: !kv2) -> tensor<4xf32> attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 32, blocks = 9>} {
  return %x : tensor<4xf32>
}

// -----

// A quantized cache (int4, per-channel key blocks of 8): the cold rows and
// scales in blocks of 16, the hot ring per sequence.
// QUANT: paged_quantized: 1
// QUANT-NEXT: - @quantized -> #kernel.kv_pages<block_tokens = 16, blocks = 16>
// QUANT-NEXT: rule: --kv-layout=paged: 4 blocks a full sequence, 16 in the pool (--max-batch full sequences); quantized: the int4 cold rows and scales in the pool's blocks, the hot ring of each sequence (hot window 16) its own
// QUANT: func.func @quantized({{.*}}) -> tensor<4xf32> attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 16, blocks = 16>}

!qcache = !sits.kv_cache<layers = 2, max_batch = 4, kv_heads = 2, capacity = 64, head_dim = 32, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i4, hot_window = 16, group_size = 32, keys = #sits.kv_key_groups<per_channel>, channel_block = 8, scale_type = f16>>

func.func @quantized(%x: tensor<4xf32>, %cache: !qcache) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
