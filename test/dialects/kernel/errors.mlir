// RUN: sits-opt %s --split-input-file --verify-diagnostics

func.func @mixed_inputs(%x: tensor<?x?x8xf32>, %y: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.launch' op <linear_group> fuses linear layers of different inputs}}
  %a, %b = kernel.launch <linear_group> {
    %0 = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %1 = sits.linear %y, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0, %1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  return
}

// -----

func.func @too_many_segments(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.launch' op <linear_group> fuses 1 to 4 sits.linear, found 5}}
  %a:5 = kernel.launch <linear_group> {
    %0 = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %1 = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %2 = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %3 = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %4 = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0, %1, %2, %3, %4 : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  return
}

// -----

func.func @gated_order(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<6x8xf32>
  // expected-error @+1 {{'kernel.launch' op <gated_linear>'s sits.glu must read the gate and then the up linear layer}}
  %h = kernel.launch <gated_linear> {
    %g = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
    %u = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<6x8xf32> -> tensor<?x?x6xf32>
    %a = sits.glu <silu> %u, %g : tensor<?x?x6xf32>
    kernel.yield %a : tensor<?x?x6xf32>
  } : tensor<?x?x6xf32>
  return
}

// -----

func.func @residual_without_add(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.launch' op <residual_linear> ends with the sits.add of its linear layer's result and a residual}}
  %r = kernel.launch <residual_linear> {
    %d = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %d : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return
}

// -----

func.func @bits_on_linear_group(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.launch' op output_operand_bits is for <gated_linear> and <norm> launches only}}
  %r = kernel.launch <linear_group> attributes {output_operand_bits = 4 : i64} {
    %d = sits.linear %x, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %d : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return
}

// -----

func.func @bad_bits(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'kernel.launch' op output_operand_bits must be 16, 8 or 4, got 3}}
  %n = kernel.launch <norm> attributes {output_operand_bits = 3 : i64} {
    %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0 : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return
}

// -----

func.func @norm_read_elsewhere(%x: tensor<?x?x8xf32>, %nw: tensor<8xf32>) -> tensor<?x?x8xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.launch' op fuses a sits.rms_norm whose result is read by something other than the launch's linear layers}}
  %r, %n = kernel.launch <linear_group> {
    %0 = sits.rms_norm %x, %nw {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    %1 = sits.linear %0, %w : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %1, %0 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  return %n : tensor<?x?x8xf32>
}

// -----

func.func @not_sits(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'kernel.launch' op may hold only sits ops, found 'arith.addf'}}
  %r = kernel.launch <norm> {
    %0 = arith.addf %x, %x : tensor<?x?x8xf32>
    kernel.yield %0 : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return
}

// -----

func.func @yield_types(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'kernel.launch' op yields 1 values whose types differ from its results}}
  %n = kernel.launch <norm> {
    %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0 : tensor<?x?x8xf32>
  } : tensor<?x?x4xf32>
  return
}

// -----

func.func @empty(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'kernel.launch' op holds no ops}}
  kernel.launch <norm> {
    kernel.yield
  }
  return
}

// -----

func.func @config_not_linear(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{the gemv_tc kernel runs linear layers: a linear kernel.launch, a sits.linear or a sits.lm_head}}
  %n = kernel.launch <norm> attributes {kernel.config = #kernel.config<gemv_tc, weight_bytes = 0>} {
    %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0 : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return
}

// -----

func.func @config_inside(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %a = kernel.launch <linear_group> {
    // expected-error @+1 {{'kernel.config' belongs on the kernel.launch, not on the ops of its region}}
    %0 = sits.linear %x, %w {kernel.config = #kernel.config<gemv, weight_bytes = 128>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0 : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return
}

// -----

func.func @config_tiles(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{tiles = 2: only the tensor-core GEMVs take 2 or 4 tiles per block (1 otherwise)}}
  %0 = sits.linear %x, %w {kernel.config = #kernel.config<gemm_tc, tiles = 2, weight_bytes = 128>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @config_token_groups_kernel(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{token_groups = 2: only gemv_tc takes 2 to 4 groups of 8 tokens a pass (1 otherwise)}}
  %0 = sits.linear %x, %w {kernel.config = #kernel.config<gemv_quant_tc, token_groups = 2, weight_bytes = 128>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @config_token_groups_range(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{token_groups = 5: only gemv_tc takes 2 to 4 groups of 8 tokens a pass (1 otherwise)}}
  %0 = sits.linear %x, %w {kernel.config = #kernel.config<gemv_tc, token_groups = 5, weight_bytes = 128>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @config_value(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.config' must be a #kernel.config, got "gemv"}}
  %0 = sits.linear %x, %w {kernel.config = "gemv"} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @unknown_attribute(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{unknown kernel dialect attribute "kernel.tiles"}}
  %0 = sits.linear %x, %w {kernel.tiles = 2} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @config_kind(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+2 {{expected ::sits::kernel::KernelKind to be one of: gemv, gemv_tc, gemv_quant, gemv_quant_tc, gemm, gemm_tc, attention,}}
  // expected-error @+1 {{failed to parse Kernel_ConfigAttr parameter 'kernel' which is to be a `::sits::kernel::KernelKind`}}
  %0 = sits.linear %x, %w {kernel.config = #kernel.config<gemv_fast, weight_bytes = 0>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_on_linear(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{the attention_split kernel runs a sits.attention}}
  %0 = sits.linear %x, %w {kernel.config = #kernel.config<attention_split, split_keys = 32, weight_bytes = 0>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @split_keys(%q: tensor<?x2x1x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>) {
  // expected-error @+1 {{split_keys = 20: attention_split takes a multiple of 16 from 16 to 4096}}
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, kernel.config = #kernel.config<attention_split, split_keys = 20, weight_bytes = 0>} : tensor<?x2x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x1x32xf32>
  return
}

// -----

func.func @split_keys_unsplit(%q: tensor<?x2x1x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>) {
  // expected-error @+1 {{split_keys = 64: attention does not split the keys}}
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, kernel.config = #kernel.config<attention, split_keys = 64, weight_bytes = 0>} : tensor<?x2x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x1x32xf32>
  return
}

// -----

func.func @linear_kernel_on_attention(%q: tensor<?x2x1x32xf32>, %k: tensor<?x1x128x32xf32>, %past: tensor<?xi64>) {
  // expected-error @+1 {{the gemv kernel runs linear layers}}
  %a = sits.attention %q, %k, %k past_len(%past : tensor<?xi64>) {num_heads = 2, num_kv_heads = 1, scale = 0.5 : f32, kernel.config = #kernel.config<gemv, weight_bytes = 0>} : tensor<?x2x1x32xf32>, tensor<?x1x128x32xf32>, tensor<?x1x128x32xf32> -> tensor<?x2x1x32xf32>
  return
}

// -----

func.func @layout_not_on_dequantize(%x: tensor<?x?x8xf32>) {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{'kernel.weight_layout' belongs on the sits.dequantize of a quantized weight}}
  %0 = sits.linear %x, %w {kernel.weight_layout = #kernel.weight_layout<interleaved>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return
}

// -----

func.func @layout_value(%q: tensor<8x64xi8>, %s: tensor<8x1xf16>) {
  // expected-error @+1 {{'kernel.weight_layout' must be a #kernel.weight_layout, got "interleaved"}}
  %w = sits.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 128 : i64, kernel.weight_layout = "interleaved"} : tensor<8x64xi8>, tensor<8x1xf16> -> tensor<8x128xf32>
  return
}

// -----

func.func @buffers_per_result(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kernel.buffers' has 2 entries for 1 results}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.buffers = [#kernel.slice<offset = 0, bytes = 256>, unit]} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @buffers_not_slices(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kernel.buffers' holds 256 : i64, not a #kernel.slice or unit}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.buffers = [256]} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @scratch_not_array(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kernel.scratch' must be an array of #kernel.slice, got #kernel.slice<offset = 0, bytes = 256>}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.scratch = #kernel.slice<offset = 0, bytes = 256>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @misaligned_slice(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{#kernel.slice<offset = 128, bytes = 256>: the offset must be a non-negative multiple of 256}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.buffers = [#kernel.slice<offset = 128, bytes = 256>]} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @empty_slice(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{#kernel.slice<offset = 0, bytes = 0>: a slice holds at least one byte}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.scratch = [#kernel.slice<offset = 0, bytes = 0>]} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @slice_inside_launch(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  %a = kernel.launch <linear_group> {
    // expected-error @+1 {{'kernel.buffers' belongs on the kernel.launch, not on the ops of its region}}
    %0 = sits.linear %x, %w {kernel.buffers = [#kernel.slice<offset = 0, bytes = 256>]} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    kernel.yield %0 : tensor<?x?x8xf32>
  } : tensor<?x?x8xf32>
  return %a : tensor<?x?x8xf32>
}

// -----

func.func @workspace_bytes_on_an_op(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kernel.workspace_bytes' belongs on a step function}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.workspace_bytes = 256} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// expected-error @+1 {{'kernel.workspace_bytes' must be a non-negative integer, got -1 : i64}}
func.func @negative_workspace() attributes {kernel.workspace_bytes = -1} {
  return
}

// -----

// expected-error @+1 {{'kernel.few_row_tokens' must be a positive integer, got 0 : i64}}
func.func @no_few_row_tokens() attributes {kernel.few_row_tokens = 0} {
  return
}

// -----

func.func @few_row_tokens_on_an_op(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kernel.few_row_tokens' belongs on a step function}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.few_row_tokens = 8} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @row_kernel_on_another_op(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{the embedding kernel runs a sits.embedding}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<embedding, threads = 64, weight_bytes = 0>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @threads_not_whole_warps(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{threads = 48: the rms_norm kernel takes whole warps, 32 to 1024}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 48, weight_bytes = 0>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @row_kernel_without_threads(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{threads = 0: the elementwise kernel takes whole warps, 32 to 1024}}
  %0 = sits.add %x, %x {kernel.config = #kernel.config<elementwise, weight_bytes = 0>} : tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @threads_of_a_gemv(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %w = sits.weight "w" dense<0.25> : tensor<8x8xf32>
  // expected-error @+1 {{threads = 64: the gemv kernel has its own block size (0)}}
  %0 = sits.linear %x, %w {kernel.config = #kernel.config<gemv, threads = 64, weight_bytes = 256>} : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @kv_pages_on_an_op(%x: tensor<?x?x8xf32>, %w: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'kernel.kv_pages' belongs on a step function}}
  %0 = sits.rms_norm %x, %w {epsilon = 1.0e-6 : f32, kernel.kv_pages = #kernel.kv_pages<block_tokens = 64, blocks = 4>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// expected-error @+1 {{block_tokens = 48: a paged KV cache's blocks hold a power of two from 16 to 1024 tokens}}
func.func @kv_pages_not_a_power_of_two() attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 48, blocks = 4>} {
  return
}

// -----

// expected-error @+1 {{block_tokens = 8: a paged KV cache's blocks hold a power of two from 16 to 1024 tokens}}
func.func @kv_pages_too_small() attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 8, blocks = 4>} {
  return
}

// -----

// expected-error @+1 {{blocks = 0: a paged KV cache has 1 to 2^30 blocks}}
func.func @kv_pages_no_blocks() attributes {kernel.kv_pages = #kernel.kv_pages<block_tokens = 16, blocks = 0>} {
  return
}

// -----

// expected-error @+1 {{'kernel.kv_pages' must be a #kernel.kv_pages, got 64 : i64}}
func.func @kv_pages_not_the_attribute() attributes {kernel.kv_pages = 64} {
  return
}

// -----

// expected-error @+1 {{buckets must increase, from 1 to 8 sequences}}
func.func @schedule_bucket_too_large() attributes {kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [1, 16]>} {
  return
}

// -----

// expected-error @+1 {{blocks = 0: a persistent decode kernel has 1 to 1024 blocks}}
func.func @schedule_no_blocks() attributes {kernel.decode_schedule = #kernel.decode_schedule<blocks = 0, buckets = [1]>} {
  return
}

// -----

func.func @task_depends_on_a_later_task(%x: tensor<?x?x8xf32>, %n: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{task 1 may depend only on earlier tasks, in increasing order}}
  %0 = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 1, tiles = [1], first_block = [0], deps = [2]>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @task_without_tiles(%x: tensor<?x?x8xf32>, %n: tensor<8xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{a task has at least one tile per bucket}}
  %0 = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 0, tiles = [0], first_block = [0], deps = []>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @task_on_an_op_that_is_no_launch(%x: tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> {
  // expected-error @+1 {{'kernel.task' belongs on an op that becomes a launch}}
  %0 = sits.split_heads %x {num_heads = 2 : i64, kernel.task = #kernel.task<id = 0, tiles = [1], first_block = [0], deps = []>} : tensor<?x?x8xf32> -> tensor<?x2x?x4xf32>
  return %0 : tensor<?x2x?x4xf32>
}

// -----

// expected-error @+1 {{'kernel.decode_schedule' must be a #kernel.decode_schedule, got 4 : i64}}
func.func @schedule_not_the_attribute() attributes {kernel.decode_schedule = 4} {
  return
}

// -----

func.func @tasks_out_of_order(%x: tensor<?x?x8xf32>, %n: tensor<8xf32>) -> tensor<?x?x8xf32> attributes {kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [1]>} {
  // expected-error @+1 {{task 1 out of order: the tasks of a decode schedule are numbered 0, 1, ... in program order, expected 0}}
  %0 = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 1, tiles = [1], first_block = [0], deps = []>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @task_for_other_buckets(%x: tensor<?x?x8xf32>, %n: tensor<8xf32>) -> tensor<?x?x8xf32> attributes {kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [1, 2]>} {
  // expected-error @+1 {{task 0 gives tiles for 1 buckets, the schedule has 2}}
  %0 = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 0, tiles = [1], first_block = [0], deps = []>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

func.func @task_not_where_the_tiles_end(%x: tensor<?x?x8xf32>, %n: tensor<8xf32>) -> tensor<?x?x8xf32> attributes {kernel.decode_schedule = #kernel.decode_schedule<blocks = 4, buckets = [2]>} {
  %0 = sits.rms_norm %x, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 0, tiles = [3], first_block = [0], deps = []>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  // expected-error @+1 {{task 1 starts at block 0 at batch 2, but the tiles before it end at block 3 (tiles are dealt round-robin in task order)}}
  %1 = sits.rms_norm %0, %n {epsilon = 1.0e-6 : f32, kernel.config = #kernel.config<rms_norm, threads = 32, weight_bytes = 0>, kernel.task = #kernel.task<id = 1, tiles = [3], first_block = [0], deps = [0]>} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32>
  return %1 : tensor<?x?x8xf32>
}
