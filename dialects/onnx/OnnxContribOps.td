//===- OnnxContribOps.td - ONNX Runtime contrib ops --------*- tablegen -*-===//
//
// The ONNX Runtime ops the GenAI model builder emits: `com.microsoft`
// ops (spelled `onnx.ms.<op_type>`) and SimplifiedLayerNormalization, which
// ONNX Runtime registers in the default domain. Semantics are ONNX
// Runtime's CPU kernels'; descriptions say what sits relies on.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_ONNX_ONNXCONTRIBOPS_TD
#define SITS_DIALECT_ONNX_ONNXCONTRIBOPS_TD

include "dialects/onnx/OnnxBase.td"

def Onnx_SimplifiedLayerNormalizationOp
    : Onnx_Op<"SimplifiedLayerNormalization"> {
  let summary = "RMS normalization (ONNX Runtime, default domain)";
  let description = [{
    `Y = X / sqrt(mean(X^2) + epsilon) * scale`, the mean over the dims from
    `axis` on, in f32. `inv_std_var` (optional) is `1 / sqrt(mean + eps)`.
  }];
  let arguments = (ins AnyTensor:$X, AnyTensor:$scale,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs AnyTensor:$Y, Variadic<AnyTensor>:$inv_std_var);
  let hasVerifier = 1;
}

def Onnx_MsSkipSimplifiedLayerNormalizationOp
    : Onnx_Op<"ms.SkipSimplifiedLayerNormalization"> {
  let summary = "residual add, then RMS normalization (com.microsoft)";
  let description = [{
    `s = input + skip (+ bias)`; `output = s / sqrt(mean(s^2) + epsilon) *
    gamma` over the last dim. `extra_outputs` are `mean` (unused by the
    simplified form: zeros), `inv_std_var` and `input_skip_bias_sum` (`s`),
    in that order, as many as the node names (empty names included).
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$skip, AnyTensor:$gamma,
                       Optional<AnyTensor>:$bias,
                       DefaultValuedAttr<F32Attr, "1e-12">:$epsilon);
  let results = (outs AnyTensor:$output, Variadic<AnyTensor>:$extra_outputs);
}

def Onnx_MsMatMulNBitsOp
    : Onnx_Op<"ms.MatMulNBits", [AttrSizedOperandSegments]> {
  let summary = "matmul with a block-quantized weight (com.microsoft)";
  let description = [{
    `Y = A W (+ bias)` for `A [..., K]` and `W [K, N]` stored transposed and
    quantized: `B [N, ceil(K / block_size), block_size * bits / 8]` uint8,
    each byte holding `8 / bits` values, the lowest bits first (for bits 4:
    element `2i` in the low nibble, `2i + 1` in the high one).
    `W[k, n] = (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]`
    with `scales [N * ceil(K / block_size)]` (or 2-D), `zero_points` either
    uint8 packed like `B` (per row, `ceil(blocks * bits / 8)` bytes) or of
    the scales' float type (then `W = (q - zp) * scale` with that zp), and
    `2^(bits - 1)` without them. `g_idx` is not supported.
  }];
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, AnyTensor:$scales,
                       Optional<AnyTensor>:$zero_points,
                       Optional<AnyTensor>:$g_idx,
                       Optional<AnyTensor>:$bias,
                       I64Attr:$K, I64Attr:$N,
                       DefaultValuedAttr<I64Attr, "4">:$bits,
                       I64Attr:$block_size,
                       DefaultValuedAttr<I64Attr, "0">:$accuracy_level);
  let results = (outs AnyTensor:$Y);
  let assemblyFormat = [{
    $A `,` $B `,` $scales (`zero_points` $zero_points^)? (`g_idx` $g_idx^)?
    (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Onnx_MsGatherBlockQuantizedOp
    : Onnx_Op<"ms.GatherBlockQuantized"> {
  let summary = "rows of a block-quantized table (com.microsoft)";
  let description = [{
    The rows `indices` of a `[rows, cols]` uint8 table along `gather_axis`
    0, dequantized: the table holds `8 / bits` values per byte, the lowest
    bits first, so a row has `K = cols * 8 / bits` values;
    `T[r, k] = (q[r, k] - zp[r, k / block_size]) * scales[r, k /
    block_size]` with `scales [rows, ceil(K / block_size)]`, `zero_points`
    packed like the table (per row, `ceil(blocks * bits / 8)` bytes) or
    `2^(bits - 1)` without them. The output is `indices.shape + [K]` in the
    scales' type. The GenAI builder reads a tied int4 embedding this way
    from the LM head's MatMulNBits weight. Other axes and data types are
    not supported.
  }];
  let arguments = (ins AnyTensor:$data, AnyTensor:$indices, AnyTensor:$scales,
                       Optional<AnyTensor>:$zero_points,
                       DefaultValuedAttr<I64Attr, "0">:$gather_axis,
                       DefaultValuedAttr<I64Attr, "1">:$quantize_axis,
                       DefaultValuedAttr<I64Attr, "128">:$block_size,
                       DefaultValuedAttr<I64Attr, "4">:$bits);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_MsRotaryEmbeddingOp : Onnx_Op<"ms.RotaryEmbedding"> {
  let summary = "rotary position embedding (com.microsoft)";
  let description = [{
    `input` is `[batch, seq, heads * head]` (or `[batch, heads, seq, head]`),
    `position_ids` `[batch, seq]` (or `[1]`: the offset of position 0),
    `cos_cache`/`sin_cache` `[max_position, R/2]`. The first `R` dims of each
    head rotate (`R` = `rotary_embedding_dim`, or `2 * cos_cache.dims[1]`),
    pairs `(k, k + R/2)` or interleaved `(2k, 2k + 1)`; `scale` multiplies
    nothing in ONNX Runtime's CPU kernel and must be 1.
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$position_ids,
                       AnyTensor:$cos_cache, AnyTensor:$sin_cache,
                       DefaultValuedAttr<I64Attr, "0">:$interleaved,
                       DefaultValuedAttr<I64Attr, "0">:$is_packed_batching,
                       DefaultValuedAttr<I64Attr, "0">:$num_heads,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_embedding_dim,
                       DefaultValuedAttr<F32Attr, "1.0">:$scale);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_MsGroupQueryAttentionOp
    : Onnx_Op<"ms.GroupQueryAttention", [AttrSizedOperandSegments]> {
  let summary = "grouped-query attention with its KV cache (com.microsoft)";
  let description = [{
    `query` is `[batch, seq, num_heads * head]`, or packed
    `[batch, seq, (num_heads + 2 kv_num_heads) * head]` when `key` and
    `value` are absent. `past_key`/`past_value` are
    `[batch, kv_num_heads, past_buffer, head]`; `seqlens_k[b]` (int32) is
    sequence `b`'s total length minus one; `total_sequence_length` (int32
    scalar) the longest. A step is the first prompt when `seq` equals
    `total_sequence_length`: its past length is 0; otherwise sequence `b`'s
    past length is `seqlens_k[b] + 1 - seq`. With `do_rotary`, q and the new
    k rotate at positions `past + i` with `cos_cache`/`sin_cache`
    (`[max_position, R/2]`, `rotary_interleaved` pairing). Query `i` sees key
    `j` when `j <= past + i` and, with `local_window_size >= 0`,
    `j > past + i - local_window_size` (that many keys). Scores are `scale * q.k` (default
    `1 / sqrt(head)`), soft-capped when `softcap > 0`, then
    `attention_bias[b, h, i, j]` (broadcast over batch and heads) is added.
    `position_ids [batch, seq]` replace `past + i` as the rotary positions
    except at a first prompt, where q and k rotate at `0..seq-1` (ONNX
    Runtime's CPU kernel stores the present keys rotated at position_ids
    there: they agree when position_ids are `0..seq-1`). `head_sink
    [num_heads]` adds `exp(sink[h])` to each softmax denominator,
    `smooth_softmax = 1` adds `exp(0)`. `present_key`/
    `present_value` are `[batch, kv_num_heads, max(past_buffer,
    total_sequence_length), head]`: the past rows, then the new ones.
  }];
  let arguments = (ins AnyTensor:$query, Optional<AnyTensor>:$key,
                       Optional<AnyTensor>:$value,
                       Optional<AnyTensor>:$past_key,
                       Optional<AnyTensor>:$past_value,
                       AnyTensor:$seqlens_k, AnyTensor:$total_sequence_length,
                       Optional<AnyTensor>:$cos_cache,
                       Optional<AnyTensor>:$sin_cache,
                       Optional<AnyTensor>:$position_ids,
                       Optional<AnyTensor>:$attention_bias,
                       Optional<AnyTensor>:$head_sink,
                       I64Attr:$num_heads, I64Attr:$kv_num_heads,
                       OptionalAttr<F32Attr>:$scale,
                       DefaultValuedAttr<I64Attr, "-1">:$local_window_size,
                       DefaultValuedAttr<F32Attr, "0.0">:$softcap,
                       DefaultValuedAttr<I64Attr, "0">:$do_rotary,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_interleaved,
                       DefaultValuedAttr<I64Attr, "0">:$smooth_softmax,
                       DefaultValuedAttr<I64Attr, "-1">:$qk_output);
  let results = (outs AnyTensor:$output, AnyTensor:$present_key,
                      AnyTensor:$present_value,
                      Variadic<AnyTensor>:$extra_outputs);
  let assemblyFormat = [{
    $query (`key` $key^)? (`value` $value^)? (`past_key` $past_key^)?
    (`past_value` $past_value^)? `seqlens_k` $seqlens_k `total`
    $total_sequence_length (`cos` $cos_cache^)? (`sin` $sin_cache^)?
    (`position_ids` $position_ids^)? (`bias` $attention_bias^)?
    (`head_sink` $head_sink^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // SITS_DIALECT_ONNX_ONNXCONTRIBOPS_TD
