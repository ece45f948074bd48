//===- SitsTypes.td - Types of the sits dialect ------------*- tablegen -*-===//

#ifndef SITS_DIALECT_SITS_SITSTYPES_TD
#define SITS_DIALECT_SITS_SITSTYPES_TD

include "dialects/sits/SitsBase.td"

class Sits_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Sits_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
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
    "::sits::KVCacheLayoutAttr":$layout
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes one token takes in the cache of one layer (K and V).
    uint64_t getBytesPerTokenPerLayer() const;
    /// Bytes of the whole cache (both buffers, every layer).
    uint64_t getTotalBytes() const;
  }];
}

#endif // SITS_DIALECT_SITS_SITSTYPES_TD
