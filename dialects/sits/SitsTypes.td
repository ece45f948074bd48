//===- SitsTypes.td - Types of the sits dialect ------------*- tablegen -*-===//

#ifndef SITS_DIALECT_SITS_SITSTYPES_TD
#define SITS_DIALECT_SITS_SITSTYPES_TD

include "dialects/sits/SitsBase.td"

class Sits_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Sits_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

//===----------------------------------------------------------------------===//
// Quantized KV cache
//===----------------------------------------------------------------------===//

def Sits_KVKeyGroups : I32EnumAttr<"KVKeyGroups",
    "how the keys of a quantized KV cache are grouped", [
    // Like the values: per token and kv head, groups along head_dim.
    I32EnumAttrCase<"per_token", 0>,
    // Per kv head and channel, groups of `channel_block` consecutive tokens
    // (KIVI's key quantization).
    I32EnumAttrCase<"per_channel", 1>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sits";
}
def Sits_KVKeyGroupsAttr
    : EnumAttr<Sits_Dialect, Sits_KVKeyGroups, "kv_key_groups"> {
  let assemblyFormat = "`<` $value `>`";
}

def Sits_KVQuantAttr : AttrDef<Sits_Dialect, "KVQuant"> {
  let mnemonic = "kv_quant";
  let summary = "how a KV cache keeps old tokens: quantized, with a hot window";
  let description = [{
    The newest `hot_window` tokens of every sequence stay in the cache's
    element type (FP16: the hot part); a token that leaves the window is
    read from its quantized copy (the cold part): `cold_type` (`i8` or `i4`)
    values with one `scale_type` scale per group, computed from the values
    themselves by `sits.quantize`'s rule (absmax / 127 or / 7, round to
    nearest even; docs/quantization.md).

    * Values: per token and kv head, groups of `group_size` consecutive
      channels of head_dim.
    * Keys: `keys = per_token` groups them as the values;
      `keys = per_channel` groups, for each kv head and channel, the keys of
      `channel_block` consecutive tokens (tokens `[c*B, (c+1)*B)` of a
      sequence, B = `channel_block`). A block is read cold only once all its
      tokens have left the window.

    Memory (the `contiguous` layout, per layer, K and V apart):
    `[batch, kv_head, capacity, head_dim]` cold values (int4 two per byte,
    the even channel in the low nibble), their scales, and a hot ring of
    FP16 rows `[batch, kv_head, rows, head_dim]` holding at least the newest
    `hot_window` tokens (plus `channel_block - 1` for per-channel keys, plus
    the tokens of a prefill chunk).

    ```mlir
    #sits.kv_quant<cold_type = i4, hot_window = 512, group_size = 32,
                   keys = #sits.kv_key_groups<per_channel>, channel_block = 64,
                   scale_type = f16>
    ```
  }];
  let parameters = (ins
    "::mlir::Type":$cold_type,
    "unsigned":$hot_window,
    "unsigned":$group_size,
    "::sits::KVKeyGroupsAttr":$keys,
    "unsigned":$channel_block,
    "::mlir::Type":$scale_type
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// 8 or 4.
    unsigned getBits() const;
    bool hasPerChannelKeys() const {
      return getKeys().getValue() == KVKeyGroups::per_channel;
    }
    /// Stored bytes of one token's cold keys (or values) for one kv head,
    /// scales included (per-channel key scales spread over their block).
    double getColdKeyBytes(unsigned headDim) const;
    double getColdValueBytes(unsigned headDim) const;
  }];
}

def Sits_KVCacheType : Sits_Type<"KVCache", "kv_cache"> {
  let summary = "bounded key/value cache state of a decoder";
  let description = [{
    The key and value cache of every attention layer of a model, allocated
    once with a fixed capacity and never grown. A value of this type is the
    cache's state at one point of the program: `sits.kv_append` and
    `sits.kv_advance` consume a state and produce the next one.

    `capacity` bounds the tokens per sequence and `max_batch` the sequences;
    writing past either is a runtime error, never a reallocation. `layout`
    fixes the memory order of the two buffers (K and V), by default
    `contiguous`: `[layer, batch, kv_head, seq, head_dim]`.

    The optional `quant` (`#sits.kv_quant`, from `--sits-insert-qdq
    kv-cache=int8|int4`) keeps only the newest `hot_window` tokens in
    `element_type` and the older ones quantized; without it every token is
    stored in `element_type`. The cache ops are the same either way: the
    quantized copies are `sits.quantize` of what `sits.kv_cache.read`
    returns, and `sits.attention`'s `cold` operands say where a query reads
    them (see `sits.kv_cache.read`).

    ```mlir
    !sits.kv_cache<layers = 2, max_batch = 8, kv_heads = 2, capacity = 2048,
                   head_dim = 32, element_type = f16,
                   layout = #sits.kv_layout<contiguous>>
    ```
  }];
  let parameters = (ins
    "unsigned":$layers,
    "unsigned":$max_batch,
    "unsigned":$kv_heads,
    "unsigned":$capacity,
    "unsigned":$head_dim,
    "::mlir::Type":$element_type,
    "::sits::KVCacheLayoutAttr":$layout,
    OptionalParameter<"::sits::KVQuantAttr">:$quant
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    // An unquantized cache (the form before --sits-insert-qdq).
    TypeBuilder<(ins "unsigned":$layers, "unsigned":$max_batch,
                     "unsigned":$kv_heads, "unsigned":$capacity,
                     "unsigned":$head_dim, "::mlir::Type":$element_type,
                     "::sits::KVCacheLayoutAttr":$layout), [{
      return $_get($_ctxt, layers, max_batch, kv_heads, capacity, head_dim,
                   element_type, layout, ::sits::KVQuantAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    /// Bytes one token takes in the cache of one layer (K and V): the
    /// element type's, or for a quantized cache the cold part's (quantized
    /// values and their scales), rounded up.
    uint64_t getBytesPerTokenPerLayer() const;
    /// Bytes of the hot ring of a quantized cache, every layer and sequence
    /// (`hot_window` rows, plus `channel_block - 1` for per-channel keys); 0
    /// without quantization.
    uint64_t getHotWindowBytes() const;
    /// Bytes of the whole cache (both buffers, every layer; the hot ring
    /// included).
    uint64_t getTotalBytes() const;
  }];
}

#endif // SITS_DIALECT_SITS_SITSTYPES_TD
