//===- OnnxNNOps.td - Softmax, norms, rotary embedding, attention -*- tablegen -*-===//

#ifndef SITS_DIALECT_ONNX_ONNXNNOPS_TD
#define SITS_DIALECT_ONNX_ONNXNNOPS_TD

include "dialects/onnx/OnnxBase.td"

def Onnx_SoftmaxOp : Onnx_Op<"Softmax"> {
  let summary = "softmax along an axis";
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_LayerNormalizationOp : Onnx_Op<"LayerNormalization"> {
  let summary = "layer normalization over the dims from axis on";
  let description = [{
    ONNX `LayerNormalization` (opset 17). `statistics` holds the optional
    `Mean` and `InvStdDev` outputs, in that order, when the node names them.
  }];
  let arguments = (ins AnyTensor:$X, AnyTensor:$Scale, Optional<AnyTensor>:$B,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs AnyTensor:$Y, Variadic<AnyTensor>:$statistics);
  let hasVerifier = 1;
}

def Onnx_RMSNormalizationOp : Onnx_Op<"RMSNormalization"> {
  let summary = "RMS normalization over the dims from axis on";
  let description = [{
    ONNX `RMSNormalization` (opset 23):
    `Y = X / sqrt(mean(X^2) + epsilon) * scale`, the mean over the dims from
    `axis` on, computed in the type `stash_type` names.
  }];
  let arguments = (ins AnyTensor:$X, AnyTensor:$scale,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

def Onnx_RotaryEmbeddingOp : Onnx_Op<"RotaryEmbedding"> {
  let summary = "rotary position embedding";
  let description = [{
    ONNX `RotaryEmbedding` (opset 23). `X` is `[batch, heads, seq, head]`,
    or `[batch, seq, heads * head]` with `num_heads`. Without
    `position_ids`, `cos_cache` and `sin_cache` are `[batch, seq, R/2]`;
    with them, `[max_position, R/2]` tables indexed by the positions.
    `R` is `rotary_embedding_dim`, or the head size when 0.
  }];
  let arguments = (ins AnyTensor:$X, AnyTensor:$cos_cache, AnyTensor:$sin_cache,
                       Optional<AnyTensor>:$position_ids,
                       DefaultValuedAttr<I64Attr, "0">:$interleaved,
                       OptionalAttr<I64Attr>:$num_heads,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_embedding_dim);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

def Onnx_AttentionOp : Onnx_Op<"Attention", [AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention";
  let description = [{
    ONNX `Attention` (opsets 23 to 25) on 4-D `[batch, heads, seq, head]` or
    3-D `[batch, seq, heads * head]` inputs (then `q_num_heads` and
    `kv_num_heads` are required). `is_causal` follows the ONNX 1.23 errata:
    query `i` sees key `j` iff `j <= i + offset` (bottom right), the offset
    being the past length, or `nonpad_kv_seqlen[b] - seq_q` with that input.
    Opset 24 adds `nonpad_kv_seqlen` (keys from it on are padding), opset 25
    the sliding window (`left_window_size`, `right_window_size`; -1 is
    unbounded). `extra_outputs` holds the optional `present_key`,
    `present_value` and `qk_matmul_output`, in that order, when the node
    names them.
  }];
  let arguments = (ins AnyTensor:$Q, AnyTensor:$K, AnyTensor:$V,
                       Optional<AnyTensor>:$attn_mask,
                       Optional<AnyTensor>:$past_key,
                       Optional<AnyTensor>:$past_value,
                       Optional<AnyTensor>:$nonpad_kv_seqlen,
                       DefaultValuedAttr<I64Attr, "0">:$is_causal,
                       OptionalAttr<I64Attr>:$kv_num_heads,
                       OptionalAttr<I64Attr>:$q_num_heads,
                       DefaultValuedAttr<I64Attr, "0">:$qk_matmul_output_mode,
                       OptionalAttr<F32Attr>:$scale,
                       DefaultValuedAttr<F32Attr, "0.0">:$softcap,
                       OptionalAttr<I64Attr>:$softmax_precision,
                       DefaultValuedAttr<I64Attr, "-1">:$left_window_size,
                       DefaultValuedAttr<I64Attr, "-1">:$right_window_size);
  let results = (outs AnyTensor:$Y, Variadic<AnyTensor>:$extra_outputs);
  let assemblyFormat = [{
    $Q `,` $K `,` $V (`mask` $attn_mask^)? (`past_key` $past_key^)?
    (`past_value` $past_value^)? (`nonpad_kv_seqlen` $nonpad_kv_seqlen^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // SITS_DIALECT_ONNX_ONNXNNOPS_TD
