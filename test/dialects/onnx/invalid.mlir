// RUN: sits-opt %s --split-input-file --verify-diagnostics

func.func @transpose_not_a_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'onnx.Transpose' op perm must be a permutation of 0..2}}
  %0 = onnx.Transpose %x {perm = array<i64: 0, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @transpose_wrong_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'onnx.Transpose' op perm has 2 entries for an input of rank 3}}
  %0 = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'onnx.Softmax' op axis 2 is out of range [-2, 1] for rank 2}}
  %0 = onnx.Softmax %x {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_ranks(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'onnx.Concat' op inputs must have one rank, got 2 and 1}}
  %0 = onnx.Concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @cast_result_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{'onnx.Cast' op result element type 'f32' does not match to = 7 (INT64, 'i64')}}
  %0 = onnx.Cast %x {to = 7 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @cast_unsupported(%x: tensor<2xf32>) {
  // expected-error @+1 {{'onnx.Cast' op casts to STRING, which sits does not support}}
  %0 = onnx.Cast %x {to = 8 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @constant_two_values() {
  // expected-error @+1 {{'onnx.Constant' op needs exactly one of value, value_float, value_floats, value_int, value_ints; got 2}}
  %0 = onnx.Constant {value_int = 1 : i64, value_float = 1.0 : f32} : tensor<i64>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{'onnx.Constant' op result type 'tensor<3xi64>' does not match the value's type 'tensor<2xi64>'}}
  %0 = onnx.Constant {value_ints = array<i64: 1, 2>} : tensor<3xi64>
  return
}

// -----

func.func @reshape_shape_type(%x: tensor<4xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'onnx.Reshape' op shape must hold integers, got 'tensor<2xf32>'}}
  %0 = onnx.Reshape %x, %s : (tensor<4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @gelu_mode(%x: tensor<4xf32>) {
  // expected-error @+1 {{'onnx.Gelu' op approximate must be "none" or "tanh", got "fast"}}
  %0 = onnx.Gelu %x {approximate = "fast"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @split_counts(%x: tensor<4xf32>) {
  // expected-error @+1 {{'onnx.Split' op num_outputs is 3 but the op has 2 results}}
  %0:2 = onnx.Split %x {num_outputs = 3 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @attention_3d_without_heads(%q: tensor<2x5x32xf32>) {
  // expected-error @+1 {{'onnx.Attention' op needs q_num_heads and kv_num_heads for 3-D inputs}}
  %0 = onnx.Attention %q, %q, %q : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> tensor<2x5x32xf32>
  return
}

// -----

func.func @rotary_odd_dim(%x: tensor<2x4x5x8xf32>, %c: tensor<2x5x4xf32>) {
  // expected-error @+1 {{'onnx.RotaryEmbedding' op rotary_embedding_dim must be even and >= 0, got 3}}
  %0 = onnx.RotaryEmbedding %x, %c, %c {rotary_embedding_dim = 3 : i64} : (tensor<2x4x5x8xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x4x5x8xf32>
  return
}

// -----

func.func @gemm_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'onnx.Gemm' op A must be 2-D, got 'tensor<2x3x4xf32>'}}
  %0 = onnx.Gemm %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @reduce_keepdims(%x: tensor<4xf32>) {
  // expected-error @+1 {{'onnx.ReduceMean' op keepdims must be 0 or 1, got 2}}
  %0 = onnx.ReduceMean %x {keepdims = 2 : i64} : (tensor<4xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @gather_block_quantized_bits(%d: tensor<6x32xui8>, %i: tensor<2xi64>, %s: tensor<6x2xf32>) {
  // expected-error @+1 {{'onnx.ms.GatherBlockQuantized' op bits must be 4 or 8, got 2}}
  %0 = onnx.ms.GatherBlockQuantized %d, %i, %s {bits = 2 : i64, block_size = 32 : i64} : (tensor<6x32xui8>, tensor<2xi64>, tensor<6x2xf32>) -> tensor<2x128xf32>
  return
}

// -----

func.func @gather_block_quantized_axis(%d: tensor<6x32xui8>, %i: tensor<2xi64>, %s: tensor<6x2xf32>) {
  // expected-error @+1 {{'onnx.ms.GatherBlockQuantized' op gather_axis 1 is not supported (only 0: rows)}}
  %0 = onnx.ms.GatherBlockQuantized %d, %i, %s {gather_axis = 1 : i64, block_size = 32 : i64} : (tensor<6x32xui8>, tensor<2xi64>, tensor<6x2xf32>) -> tensor<6x2xf32>
  return
}

// -----

func.func @gather_block_quantized_quantize_axis(%d: tensor<6x32xui8>, %i: tensor<2xi64>, %s: tensor<6x2xf32>) {
  // expected-error @+1 {{'onnx.ms.GatherBlockQuantized' op quantize_axis 0 is not supported (only the last axis)}}
  %0 = onnx.ms.GatherBlockQuantized %d, %i, %s {quantize_axis = 0 : i64, block_size = 32 : i64} : (tensor<6x32xui8>, tensor<2xi64>, tensor<6x2xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @gather_block_quantized_signed(%d: tensor<6x32xi8>, %i: tensor<2xi64>, %s: tensor<6x2xf32>) {
  // expected-error @+1 {{'onnx.ms.GatherBlockQuantized' op data must be uint8 (packed values), got 'i8'}}
  %0 = onnx.ms.GatherBlockQuantized %d, %i, %s {block_size = 32 : i64} : (tensor<6x32xi8>, tensor<2xi64>, tensor<6x2xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @gqa_head_sink_size(%q: tensor<1x2x128xf32>, %l: tensor<1xi32>, %t: tensor<i32>, %sink: tensor<3xf32>) {
  // expected-error @+1 {{'onnx.ms.GroupQueryAttention' op head_sink must be [num_heads] = [4], got 'tensor<3xf32>'}}
  %0:3 = onnx.ms.GroupQueryAttention %q seqlens_k %l total %t head_sink %sink {num_heads = 4 : i64, kv_num_heads = 2 : i64} : (tensor<1x2x128xf32>, tensor<1xi32>, tensor<i32>, tensor<3xf32>) -> (tensor<1x2x64xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
  return
}

// -----

func.func @gqa_bias_rank(%q: tensor<1x2x128xf32>, %l: tensor<1xi32>, %t: tensor<i32>, %bias: tensor<2x2xf32>) {
  // expected-error @+1 {{'onnx.ms.GroupQueryAttention' op attention_bias must be 4-D [batch or 1, num_heads or 1, seq, total_seq], got rank 2}}
  %0:3 = onnx.ms.GroupQueryAttention %q seqlens_k %l total %t bias %bias {num_heads = 4 : i64, kv_num_heads = 2 : i64} : (tensor<1x2x128xf32>, tensor<1xi32>, tensor<i32>, tensor<2x2xf32>) -> (tensor<1x2x64xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>)
  return
}
