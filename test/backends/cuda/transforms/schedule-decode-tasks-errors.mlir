// RUN: sits-opt %s --split-input-file --kernel-schedule-decode-tasks="decode-kernels=persistent" --verify-diagnostics

// What the persistent decode kernel cannot run yet is refused with the op
// and the reason; a step it cannot plan is refused before any planning.

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>

// expected-error @+1 {{--decode-kernels=persistent does not support a paged KV cache yet}}
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv) -> !kv attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 16, blocks = 8>} {
  return %kv : !kv
}

// -----

!qcache = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 32, element_type = f16, layout = #sits.kv_layout<contiguous>, quant = #sits.kv_quant<cold_type = i8, hot_window = 16, group_size = 32, keys = #sits.kv_key_groups<per_token>, channel_block = 1, scale_type = f16>>

// expected-error @+1 {{--decode-kernels=persistent does not support a quantized KV cache yet}}
func.func @decode(%ids: tensor<?x1xi64>, %kv: !qcache) -> !qcache {
  return %kv : !qcache
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>

func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv, %x: tensor<?x?x128xf32>) -> (tensor<?x?x128xf32>, !kv) {
  %q = sits.weight "q" dense<17> : tensor<128x128xi8>
  %s = sits.weight "s" dense<0.5> : tensor<128x2xf16>
  // expected-error @+1 {{--decode-kernels=persistent does not support quantized weights yet (sits.dequantize)}}
  %w = sits.dequantize %q, %s {axis = 1 : i64, bits = 8 : i64, group_size = 64 : i64} : tensor<128x128xi8>, tensor<128x2xf16> -> tensor<128x128xf32>
  %y = sits.linear %x, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  return %y, %kv : tensor<?x?x128xf32>, !kv
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>

func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv, %x: tensor<?x?x128xf32>) -> (tensor<?x?x128xf32>, !kv) {
  %w = sits.weight "w" dense<0.5> : tensor<128x128xf32>
  // expected-error @+1 {{--decode-kernels=persistent does not support the gemm_tc kernel yet (sits.linear)}}
  %y = sits.linear %x, %w {kernel.config = #kernel.config<gemm_tc, weight_bytes = 32768>} : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
  return %y, %kv : tensor<?x?x128xf32>, !kv
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>

func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv, %x: tensor<?x?x128xf32>) -> (tensor<?x?x128xf32>, !kv) {
  %n = sits.weight "n" dense<1.0> : tensor<128xf32>
  %w = sits.weight "w" dense<0.5> : tensor<128x128xf32>
  // expected-error @+1 {{--decode-kernels=persistent does not support an rms_norm fused into a GEMV (--norm-fusion) yet (kernel.launch)}}
  %y = kernel.launch <linear_group> {
    %h = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32} : tensor<?x?x128xf32>, tensor<128xf32> -> tensor<?x?x128xf32>
    %0 = sits.linear %h, %w : tensor<?x?x128xf32>, tensor<128x128xf32> -> tensor<?x?x128xf32>
    kernel.yield %0 : tensor<?x?x128xf32>
  } : tensor<?x?x128xf32>
  return %y, %kv : tensor<?x?x128xf32>, !kv
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 16, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>

// expected-error @+1 {{--decode-kernels=persistent: decode steps of at most 8 sequences are supported yet, but --max-batch is 16}}
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv) -> !kv attributes {kernel.workspace_bytes = 0 : i64} {
  return %kv : !kv
}

// -----

!kv = !sits.kv_cache<layers = 1, max_batch = 2, kv_heads = 1, capacity = 64, head_dim = 16, element_type = f16, layout = <contiguous>>

// expected-error @+1 {{--decode-kernels=persistent: @decode has no memory plan ('kernel.workspace_bytes'); the task graph is made after --kernel-plan-memory}}
func.func @decode(%ids: tensor<?x1xi64>, %kv: !kv) -> !kv {
  return %kv : !kv
}
