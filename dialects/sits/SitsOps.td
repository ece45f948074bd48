//===- SitsOps.td - Operations of the sits dialect ---------*- tablegen -*-===//
//
// Every op states its semantics exactly: the CPU reference executor and the
// CUDA code generator implement these descriptions, and the passes rely on
// them when they prove a rewrite safe.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITS_SITSOPS_TD
#define SITS_DIALECT_SITS_SITSOPS_TD

include "dialects/sits/SitsAttrs.td"
include "dialects/sits/SitsBase.td"
include "dialects/sits/SitsTypes.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Sits_WeightOp : Sits_Op<"weight", [
    ConstantLike, Pure, AllTypesMatch<["value", "result"]>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a named model parameter";
  let description = [{
    A constant tensor that is a parameter of the model, with the name it had
    in the source model (the ONNX initializer name), so that IR dumps, the
    audit report and the engine's weight table can point back to it.

    ```mlir
    %w = sits.weight "model.layers.0.mlp.up_proj.weight" dense<...> : tensor<344x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name $value attr-dict";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding, norms, linear layers
//===----------------------------------------------------------------------===//

def Sits_EmbeddingOp : Sits_Op<"embedding", [Pure]> {
  let summary = "token embedding lookup";
  let description = [{
    `result[b, s, :] = table[ids[b, s] - row_offset, :] * scale`. `table` is
    `[rows, hidden]`: the rows `row_offset .. row_offset + rows - 1` of a
    vocabulary of `vocab` ids (by default `row_offset + rows`, so the whole
    table). An id outside `[0, vocab)` is an error at run time; an id inside
    it but outside the table's rows gives a row of zeros. `scale`
    (default 1) covers models that scale embeddings by `sqrt(hidden)`
    (Gemma).

    **Tensor parallelism.** With `vocab_shard` the table is the running
    rank's part of the vocabulary (a `sits.shard` along dimension 0 as
    `vocab_shard` says): rank `k` holds the rows from
    `(k / replicas) * rows` of a vocabulary of `rows * parts` ids, and
    `row_offset` is 0. Each rank finds the ids it holds and a
    `sits.all_reduce` over the ranks adds the rows together.
    `sits-specialize-rank` turns `vocab_shard` into the rank's `row_offset`
    and `vocab`.

    ```mlir
    %x = sits.embedding %part[%ids] {vocab_shard = #sits.shard<dim = 0, parts = 2>} : tensor<256x64xf32>, tensor<?x?xi64> -> tensor<?x?x64xf32>
    %y = sits.embedding %part[%ids] {row_offset = 256 : i64, vocab = 512 : i64} : tensor<256x64xf32>, tensor<?x?xi64> -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Sits_FloatTensor:$table, Sits_IndexTensor:$ids,
                       DefaultValuedAttr<F32Attr, "1.0">:$scale,
                       OptionalAttr<Sits_ShardAttr>:$vocab_shard,
                       DefaultValuedAttr<I64Attr, "0">:$row_offset,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let builders = [
    // The whole vocabulary (every embedding before sits-tensor-parallel).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$table,
                   "::mlir::Value":$ids, "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, result, table, ids, scale, ShardAttr(),
            ::mlir::IntegerAttr(), ::mlir::IntegerAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The ids of the whole vocabulary (`vocab` or what it defaults to);
    /// nullopt while the table's rows are dynamic.
    std::optional<int64_t> getVocabularySize();
    /// vocab_shard, row_offset and vocab (ParallelOps.cpp).
    ::mlir::LogicalResult verifyVocabularyPart();
  }];
  let hasVerifier = 1;
}

def Sits_RMSNormOp : Sits_Op<"rms_norm", [Pure, SameOperandsAndResultElementType]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2 over the last dim) + epsilon) * (weight + weight_offset)`,
    computed in f32 whatever the storage type. `weight` is `[hidden]`.
    `weight_offset` is 1 for models that store `weight - 1` (Gemma).
  }];
  let arguments = (ins Sits_FloatTensor:$input, Sits_FloatTensor:$weight,
                       F32Attr:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.0">:$weight_offset);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sits_LayerNormOp : Sits_Op<"layer_norm", [Pure]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * weight + bias`, over the last
    dimension, computed in f32. `weight` and the optional `bias` are
    `[hidden]`.
  }];
  let arguments = (ins Sits_FloatTensor:$input, Sits_FloatTensor:$weight,
                       Optional<Sits_FloatTensor>:$bias, F32Attr:$epsilon);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict
    `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sits_LinearOp : Sits_Op<"linear", [Pure]> {
  let summary = "matrix product with a weight, with optional bias";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[n, k] + bias[n]`.
    `weight` is `[out_features, in_features]`; `bias`, when present,
    `[out_features]`. Accumulation is in f32.
  }];
  let arguments = (ins Sits_FloatTensor:$input, Sits_FloatTensor:$weight,
                       Optional<Sits_FloatTensor>:$bias);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict
    `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sits_LMHeadOp : Sits_Op<"lm_head", [Pure]> {
  let summary = "final projection from hidden states to vocabulary logits";
  let description = [{
    `logits[..., v] = sum_k hidden[..., k] * weight[v, k] + bias[v]`, with
    `weight` `[vocab, hidden]`. Kept apart from `sits.linear` because decode
    engines treat it apart: only the last position's logits are needed, and
    sampling or vocabulary pre-scoring fuses into it. `tied` records that the
    weight is the embedding table.
  }];
  let arguments = (ins Sits_FloatTensor:$input, Sits_FloatTensor:$weight,
                       Optional<Sits_FloatTensor>:$bias, UnitAttr:$tied);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict
    `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Sits_AddOp : Sits_Op<"add", [Pure, Commutative, SameOperandsAndResultType]> {
  let summary = "elementwise sum of two tensors of one shape (residual add)";
  let description = [{
    `result = lhs + rhs`. Both operands have the same shape: this is the
    residual connection, not a broadcasting add.
  }];
  let arguments = (ins Sits_FloatTensor:$lhs, Sits_FloatTensor:$rhs);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Sits_ActivationOp : Sits_Op<"activation",
    [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise activation";
  let description = [{
    `result = act(input)` with `silu(x) = x * sigmoid(x)`,
    `gelu(x) = x/2 * (1 + erf(x / sqrt(2)))`,
    `gelu_tanh(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`,
    `relu`, `sigmoid`.
  }];
  let arguments = (ins Sits_FloatTensor:$input, Sits_ActivationAttr:$kind);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($result)";
}

def Sits_GLUOp : Sits_Op<"glu", [Pure, SameOperandsAndResultType]> {
  let summary = "gated linear unit: act(gate) * up (SwiGLU, GeGLU)";
  let description = [{
    `result = act(gate) * up`, the gate of a gated MLP: SwiGLU with
    `#sits.activation<silu>`, GeGLU with `gelu` or `gelu_tanh`.
  }];
  let arguments = (ins Sits_FloatTensor:$gate, Sits_FloatTensor:$up,
                       Sits_ActivationAttr:$kind);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$kind $gate `,` $up attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Heads and rotary position embedding
//===----------------------------------------------------------------------===//

def Sits_SplitHeadsOp : Sits_Op<"split_heads", [Pure]> {
  let summary = "[batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim]";
  let description = [{
    `result[b, h, s, d] = input[b, s, h * head_dim + d]`.
  }];
  let arguments = (ins Sits_FloatTensor:$input, I64Attr:$num_heads);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Sits_MergeHeadsOp : Sits_Op<"merge_heads", [Pure]> {
  let summary = "[batch, heads, seq, head_dim] -> [batch, seq, heads * head_dim]";
  let description = [{
    `result[b, s, h * head_dim + d] = input[b, h, s, d]`.
  }];
  let arguments = (ins Sits_FloatTensor:$input);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Sits_PositionIdsOp : Sits_Op<"position_ids", [Pure]> {
  let summary = "absolute positions of the tokens of a step";
  let description = [{
    `result[b, i] = past_len[b] + i` for the `[batch, seq]` tokens in `ids`
    (only the shape of `ids` is read); without `past_len`, `result[b, i] = i`.
  }];
  let arguments = (ins Sits_IndexTensor:$ids,
                       Optional<Sits_IndexTensor>:$past_len);
  let results = (outs Sits_IndexTensor:$result);
  let assemblyFormat = [{
    $ids (`past` $past_len^ `:` type($past_len))? attr-dict `:` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sits_RopeCosSinOp : Sits_Op<"rope_cos_sin", [Pure]> {
  let summary = "RoPE cos/sin of positions, from inverse frequencies";
  let description = [{
    `angle[b, s, k] = f32(positions[b, s]) * inv_freq[k]` (one f32 product,
    as the exported graphs compute it), `cos = cos(angle) * attention_scaling`,
    `sin = sin(angle) * attention_scaling`. Results are `[batch, seq, R/2]`
    for a rotary dimension `R`. `--sits-hoist-rope` replaces this op with a
    precomputed table and `sits.rope_gather`.
  }];
  let arguments = (ins Sits_IndexTensor:$positions, ElementsAttr:$inv_freq,
                       DefaultValuedAttr<F32Attr, "1.0">:$attention_scaling);
  let results = (outs Sits_FloatTensor:$cos, Sits_FloatTensor:$sin);
  let assemblyFormat = [{
    $positions attr-dict `:` type($positions) `->` type($cos) `,` type($sin)
  }];
  let hasVerifier = 1;
}

def Sits_RopeGatherOp : Sits_Op<"rope_gather", [Pure]> {
  let summary = "rows of a precomputed RoPE table, by position";
  let description = [{
    `table` is `[max_positions, R]`: row `p` holds `cos` of position `p` in
    its first `R/2` columns and `sin` in the last `R/2`.
    `cos[b, s, k] = table[positions[b, s], k]`,
    `sin[b, s, k] = table[positions[b, s], R/2 + k]`. A position outside the
    table is an error at run time.
  }];
  let arguments = (ins Sits_FloatTensor:$table, Sits_IndexTensor:$positions);
  let results = (outs Sits_FloatTensor:$cos, Sits_FloatTensor:$sin);
  let assemblyFormat = [{
    $table `[` $positions `]` attr-dict `:` type($table) `,` type($positions)
    `->` type($cos) `,` type($sin)
  }];
  let hasVerifier = 1;
}

def Sits_RopeOp : Sits_Op<"rope", [Pure]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates the first `rotary_dim` dimensions of each head of
    `input [batch, heads, seq, head_dim]`; the rest pass through.
    `cos` and `sin` are `[batch or 1, seq, rotary_dim / 2]`. With
    `c = cos[b, s, k]`, `n = sin[b, s, k]` and `h = rotary_dim / 2`:
    * `rotate_half`: `y[k] = x[k] c - x[k + h] n`,
      `y[k + h] = x[k + h] c + x[k] n`;
    * `interleaved`: `y[2k] = x[2k] c - x[2k + 1] n`,
      `y[2k + 1] = x[2k + 1] c + x[2k] n`.
  }];
  let arguments = (ins Sits_FloatTensor:$input, Sits_FloatTensor:$cos,
                       Sits_FloatTensor:$sin, Sits_RopeStyleAttr:$style,
                       I64Attr:$rotary_dim);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` type($input) `,` type($cos) `,`
    type($sin) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Sits_AttentionOp : Sits_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention with GQA and a causal rule";
  let description = [{
    `query` is `[batch, num_heads, seq_q, head_dim]`, `key` and `value`
    `[batch, num_kv_heads, seq_k, head_dim]`; query head `h` reads kv head
    `h / (num_heads / num_kv_heads)` (GQA; MQA when `num_kv_heads` is 1).

    For query row `i` and key row `j` let `offset = past_len[b]` when the
    `past_len` operand is present, else `seq_k - seq_q`, and let
    `bound = offset + seq_q` (the valid keys: with a KV cache, `seq_k` is the
    cache capacity and only the first `bound` rows hold tokens). Key `j` is
    visible when all of these hold:
    * `j < bound`;
    * `causal = bottom_right`: `j <= i + offset`; `top_left`: `j <= i`;
    * `window = W` (sliding window): `j > i + offset - W`;
    * `mask`, when present and broadcast to `[batch, num_heads, seq_q, seq_k]`:
      true for an `i1` mask; a float mask is added to the score instead.

    `score = scale * q.k`, then `softcap * tanh(score / softcap)` when
    `softcap` is set, then a float mask is added (after the softcap, so a
    `-inf` stays `-inf`), then softmax over the visible keys (in f32), then
    the weighted sum of `value`. A row with no visible key yields zeros.

    **Hot and cold keys** (a quantized KV cache, `--sits-insert-qdq`): with
    `cold(cold_key, cold_value)` (same shapes as `key`, `value`) and
    `hot_window = N`, query row `i` at position `p = offset + i` reads
    * value `j` from `cold_value` when `p - j >= N`, else from `value`;
    * key `j` from `cold_key` when `p - last(j) >= N`, else from `key`,
      where `last(j) = (j / B) * B + B - 1` is the last token of `j`'s block
      of `B = cold_key_block` tokens (1: `last(j) = j`, per-token keys).
    Everything else (visibility, scores, softmax) is as above. So the newest
    `N` tokens before a query are read as stored at full precision, older
    ones through their quantized copies; a prefill step reads exactly what
    the same tokens decoded one at a time would read, whatever the chunking.
  }];
  let arguments = (ins Sits_FloatTensor:$query, Sits_FloatTensor:$key,
                       Sits_FloatTensor:$value,
                       Optional<AnyRankedTensor>:$mask,
                       Optional<Sits_IndexTensor>:$past_len,
                       Optional<Sits_FloatTensor>:$cold_key,
                       Optional<Sits_FloatTensor>:$cold_value,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, F32Attr:$scale,
                       DefaultValuedAttr<Sits_CausalModeAttr,
                         "::sits::CausalMode::none">:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap,
                       OptionalAttr<I64Attr>:$hot_window,
                       DefaultValuedAttr<I64Attr, "1">:$cold_key_block);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`past_len` `(` $past_len^ `:` type($past_len) `)`)?
    (`cold` `(` $cold_key^ `,` $cold_value `:` type($cold_key) `,`
      type($cold_value) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->` type($result)
  }];
  let builders = [
    // Without a cold part (every attention before --sits-insert-qdq).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$query,
                   "::mlir::Value":$key, "::mlir::Value":$value,
                   "::mlir::Value":$mask, "::mlir::Value":$past_len,
                   "::mlir::IntegerAttr":$num_heads,
                   "::mlir::IntegerAttr":$num_kv_heads,
                   "::mlir::FloatAttr":$scale,
                   "::sits::CausalModeAttr":$causal,
                   "::mlir::IntegerAttr":$window,
                   "::mlir::FloatAttr":$softcap), [{
      build($_builder, $_state, result, query, key, value, mask, past_len,
            ::mlir::Value(), ::mlir::Value(), num_heads, num_kv_heads, scale,
            causal, window, softcap, ::mlir::IntegerAttr(),
            $_builder.getI64IntegerAttr(1));
    }]>
  ];
  let extraClassDeclaration = [{
    ::mlir::LogicalResult verifyColdPart();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// KV cache
//===----------------------------------------------------------------------===//

def Sits_KVCacheInitOp : Sits_Op<"kv_cache.init", [Pure]> {
  let summary = "an empty KV cache";
  let description = [{
    The state of a freshly allocated cache: every sequence has length 0. The
    runtime allocates the buffers once, when the engine is loaded.
  }];
  let results = (outs Sits_KVCacheType:$result);
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

def Sits_KVLengthOp : Sits_Op<"kv_cache.length", [Pure]> {
  let summary = "tokens held per sequence";
  let description = [{
    `result[b]` is the number of tokens sequence `b` holds in `cache` (its
    past length). The result has the runtime batch size, at most `max_batch`.
  }];
  let arguments = (ins Sits_KVCacheType:$cache);
  let results = (outs Sits_IndexTensor:$result);
  let assemblyFormat = "$cache attr-dict `:` qualified(type($cache)) `->` type($result)";
  let hasVerifier = 1;
}

def Sits_KVAppendOp : Sits_Op<"kv_cache.append",
    [Pure, AllTypesMatch<["cache", "result"]>]> {
  let summary = "write the keys and values of new tokens into one layer";
  let description = [{
    Writes `key` and `value` (`[batch, kv_heads, seq, head_dim]`) into layer
    `layer` at rows `past_len[b] .. past_len[b] + seq - 1` of sequence `b`,
    and returns the new state. Lengths do not change until
    `sits.kv_cache.advance`, so every layer of a step writes at the same rows.
    A row at or past `capacity` is an error at run time (never a
    reallocation).
  }];
  let arguments = (ins Sits_KVCacheType:$cache, Sits_FloatTensor:$key,
                       Sits_FloatTensor:$value, Sits_IndexTensor:$past_len,
                       I64Attr:$layer);
  let results = (outs Sits_KVCacheType:$result);
  let assemblyFormat = [{
    $cache `[` $layer `]` `,` $key `,` $value `at` $past_len attr-dict `:`
    qualified(type($cache)) `,` type($key) `,` type($value) `,` type($past_len)
  }];
  let hasVerifier = 1;
}

def Sits_KVReadOp : Sits_Op<"kv_cache.read", [Pure]> {
  let summary = "the key and value buffers of one layer";
  let description = [{
    The whole `[batch, kv_heads, capacity, head_dim]` key and value buffers
    of layer `layer` (a view, no copy). Rows at or past a sequence's length
    hold no token: consumers bound their reads (`sits.attention` with
    `past_len`).

    For a quantized cache (`quant = #sits.kv_quant<...>`) the result is the
    hot part: every held token as stored at full precision (`element_type`).
    Its quantized copies are `sits.quantize` of this result with the cache's
    grouping, and `sits.attention` reads them through its `cold` operands
    once a token has left the hot window. Rows never change after their
    append, and `sits.quantize` of a group depends only on that group's rows,
    so an engine stores each group's quantized copy once, when its last row
    leaves the window, and keeps only the newest rows at full precision: the
    program's values are the same.
  }];
  let arguments = (ins Sits_KVCacheType:$cache, I64Attr:$layer);
  let results = (outs Sits_FloatTensor:$key, Sits_FloatTensor:$value);
  let assemblyFormat = [{
    $cache `[` $layer `]` attr-dict `:` qualified(type($cache)) `->` type($key)
    `,` type($value)
  }];
  let hasVerifier = 1;
}

def Sits_KVAdvanceOp : Sits_Op<"kv_cache.advance",
    [Pure, AllTypesMatch<["cache", "result"]>]> {
  let summary = "commit the tokens of a step";
  let description = [{
    Adds the `seq` tokens of `ids` (`[batch, seq]`; only its shape is read)
    to every sequence's length. Past `capacity` is an error at run time.
  }];
  let arguments = (ins Sits_KVCacheType:$cache, Sits_IndexTensor:$ids);
  let results = (outs Sits_KVCacheType:$result);
  let assemblyFormat = [{
    $cache `by` $ids attr-dict `:` qualified(type($cache)) `,` type($ids)
  }];
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

def Sits_QuantizeOp : Sits_Op<"quantize", [Pure]> {
  let summary = "symmetric absmax quantization in groups, scales computed "
                "from the values";
  let description = [{
    Quantizes `input` to `bits`-bit integers in groups: a group is
    `group_size` consecutive indices along dimension `axis` (the last group
    of a line may be shorter), with everything else fixed. With
    `L = 2^(bits-1) - 1` (127 or 7), for every group:
    1. `a = max |x|` over the group (exact, in f32). If any element is NaN
       or infinite the scale is NaN and every level is 0 (a NaN group stays
       NaN through `sits.dequantize`).
    2. `s = a / L`, one f32 division rounded to nearest even. For `f16`
       scales, `s` is then rounded to f16 (nearest, ties to even, subnormals
       kept) and a result above 65504 becomes 65504. `scales` holds `s`.
    3. Each element: `q = rint(x / s)` (f32 division, then round half to
       even), clamped to `[-L, L]` (the clamp changes a value only when
       step 2 rounded `s` down: a clipped value). When `s = 0` (an all-zero
       group, or one whose f16 scale underflows) every `q` is 0.

    `data` stores the levels: `i8` per value for 8 bits; for 4 bits two per
    byte along the last dimension, element `2k` in the low nibble and
    `2k + 1` in the high nibble of byte `k` (two's complement nibbles). Each
    last-dimension row takes `data`'s last dimension in bytes: at least the
    packed size (`D` or `ceil(D/2)`), at most 15 bytes more, the padding
    zero (so rows can start on 16-byte boundaries). `scales` has `input`'s
    shape with dimension `axis` divided by `group_size`, rounded up.

    ```mlir
    %q, %s = sits.quantize %x {axis = 3 : i64, bits = 4 : i64, group_size = 32 : i64}
        : tensor<?x2x?x32xf32> -> tensor<?x2x?x16xi8>, tensor<?x2x?x1xf16>
    ```
  }];
  let arguments = (ins Sits_FloatTensor:$input, I64Attr:$bits, I64Attr:$axis,
                       I64Attr:$group_size);
  let results = (outs TensorOf<[I8]>:$data, TensorOf<[F16, F32]>:$scales);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($data) `,` type($scales)
  }];
  let hasVerifier = 1;
}

def Sits_DequantizeOp : Sits_Op<"dequantize", [Pure]> {
  let summary = "grouped int8/int4 values times their group's scale";
  let description = [{
    The inverse map of `sits.quantize` with the same `bits`, `axis` and
    `group_size` (same layout of `data` and `scales`):
    `result[i] = f32(scale of i's group) * f32(q_i)`, one f32 product (exact
    for f16 scales: at most 11 + 7 significant bits), then rounded to the
    result's element type. `q_i` is the `i8` value, or the sign-extended
    nibble for 4 bits (a nibble of -8, which quantize never writes, reads as
    -8). A NaN scale gives NaN.

    Weights (`--sits-insert-qdq weights=int8|int4`) are `[out, in]` data
    quantized along `in` (axis 1) with f16 scales `[out, ceil(in / G)]`; rows
    are padded to 16 bytes, so a GEMV warp streams a row with 128-bit loads
    (a group of 128 int4 values is four of them) and multiplies by one scale
    per group: the dequantization fuses into the GEMV.

    ```mlir
    %w = sits.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 128 : i64}
        : tensor<512x64xi8>, tensor<512x1xf16> -> tensor<512x128xf32>
    ```
  }];
  let arguments = (ins TensorOf<[I8]>:$data, TensorOf<[F16, F32]>:$scales,
                       I64Attr:$bits, I64Attr:$axis, I64Attr:$group_size);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $data `,` $scales attr-dict `:` type($data) `,` type($scales) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor parallelism
//===----------------------------------------------------------------------===//

def Sits_ShardOp : Sits_Op<"shard", [Pure]> {
  let summary = "this rank's part of a weight (tensor parallelism)";
  let description = [{
    The part of `weight` (a `sits.weight`) that the running rank holds, as
    `shard` says: `weight` cut along `shard.dim` into `shard.parts` equal
    parts, rank `k` holding part `k / shard.replicas`. The program stays
    one program for every rank; an engine stores each rank's part.

    ```mlir
    %q = sits.shard %w {shard = #sits.shard<dim = 0, parts = 2>} : tensor<64x32xf32> -> tensor<32x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$weight, Sits_ShardAttr:$shard);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $weight attr-dict `:` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sits_AllReduceOp : Sits_Op<"all_reduce",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "sum over the ranks of a tensor-parallel program";
  let description = [{
    `result = sum over ranks 0 .. ranks - 1 of input`, summed in rank order
    in f32 and rounded once, so that every rank gets the same bits; then
    `bias` (`[last dim]`), when present, is added once. Follows a
    row-parallel `sits.linear`, whose ranks each hold a part of the sum.
  }];
  let arguments = (ins Sits_FloatTensor:$input,
                       Optional<Sits_FloatTensor>:$bias,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$ranks);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def Sits_AllGatherOp : Sits_Op<"all_gather", [Pure]> {
  let summary = "the ranks' tensors side by side along the last dimension";
  let description = [{
    `result[..., k * n + j] = input of rank k [..., j]` for `n` the last
    dimension of `input`: the ranks' parts in rank order, so that each
    rank has the whole (the vocabulary-split LM head's logits before
    sampling).
  }];
  let arguments = (ins Sits_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$ranks);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Token viability classifier (TVC)
//===----------------------------------------------------------------------===//

def Sits_TVCLMHeadOp : Sits_Op<"tvc_lm_head", [Pure]> {
  let summary = "LM head that scores a low-rank preview first and proves "
                "which tokens can win (exact)";
  let description = [{
    Gives, for greedy decoding and for top-k sampling with `k <=
    exact_top`, exactly what `sits.lm_head %input, %weight` gives, usually
    without computing most of the vocabulary. `weight` is the LM head
    `W [V, H]` (the same value the plain head reads); `preview_left`
    `P [V, R]` and `preview_right` `T [R, H]` factor it, `W ~= P T`
    (`--sits-fuse-tvc`: rank-R SVD at compile time); `row_bounds [V, 4]`
    holds, per vocabulary row `v`, upper bounds of
    `rho_v = |r_v|`, `sigma_v = |T r_v|`, `pi_v = |P_v|`, `omega_v = |w_v|`
    (Euclidean norms), where `r_v = w_v - T^T P_v` is the row's residual in
    exact arithmetic of the stored f32 values.

    For each row `h` of `input` (`H` f32 values), with `u = 2^-24` and
    `g(n) = n u / (1 - n u)`:
    1. `z = T h` and `p_v = P_v . z` in f32, summed as `sits.linear` sums.
    2. In f64: `n_h = |h|`, `n_z = |z|`, `e = h - T^T z`, `n_e = |e|`,
       `a_r = g(H) sum_k |T_rk| |h_k|`, `n_a = |a|`, `tau = max |T_rk|`;
       each norm is multiplied by `1 + 2^-32`, and `n_e` gets
       `2^-32 (n_h + sqrt(H) tau sum_r |z_r|)` added (f64 rounding of `e`).
    3. `U_v = p_v + (rho_v n_e + sigma_v n_z + pi_v (g(R) n_z + n_a) +
       g(H) omega_v n_h)(1 + 2^-32) + 2^-50 |p_v|`, in f64: an upper bound
       of the value `sits.lm_head` computes for row `v` (its f32 rounding
       included).
    4. Candidates: the `candidates` rows with the largest `U_v` (ties: the
       lower index first). Their logits `y_c = w_c . h` are computed exactly
       as `sits.lm_head` computes them.
    5. Let `t` be the `exact_top`-th largest `y_c`. The row is proved when
       no value involved is NaN and `U_v < t` for every non-candidate `v`:
       then no other token can beat the greedy choice or enter the top
       `exact_top`. Result: `y_c` at the candidates, `-inf` elsewhere.
    6. Otherwise (fallback) the result is the full LM head, every logit as
       `sits.lm_head` computes it.

    So the argmax (lowest index among equal maxima) and the `exact_top`
    largest logits with their values are always those of `sits.lm_head`.
    Consumers that need the whole distribution (perplexity, sampling
    without top-k) must use `sits.lm_head`. An implementation whose f32 sums
    run in another order may prove different rows (its `p_v` differ), never
    give another token. The reference executor counts proved rows and
    fallbacks.
  }];
  let arguments = (ins F32Tensor:$input, F32Tensor:$weight,
                       F32Tensor:$preview_left, F32Tensor:$preview_right,
                       F32Tensor:$row_bounds, I64Attr:$candidates,
                       DefaultValuedAttr<I64Attr, "1">:$exact_top);
  let results = (outs F32Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `preview` `(` $preview_left `,` $preview_right `)`
    `bounds` `(` $row_bounds `)` attr-dict `:` type($input) `,` type($weight)
    `,` type($preview_left) `,` type($preview_right) `,` type($row_bounds)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // SITS_DIALECT_SITS_SITSOPS_TD
