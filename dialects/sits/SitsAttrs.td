//===- SitsAttrs.td - Attributes of the sits dialect -------*- tablegen -*-===//
//
// The enum attributes are defined in SitsBase.td, the KV-cache attributes in
// SitsTypes.td; this file holds the weight view and the tensor-parallel
// shard.

#ifndef SITS_DIALECT_SITS_SITSATTRS_TD
#define SITS_DIALECT_SITS_SITSATTRS_TD

include "dialects/sits/SitsBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Sits_WeightViewAttr : AttrDef<Sits_Dialect, "WeightView",
                                  [ElementsAttrInterface]> {
  let mnemonic = "weight_view";
  let summary = "a constant read from another one: transposed, sliced "
                "and/or converted";
  let description = [{
    The values of `source` (a dense or dense_resource constant), transposed
    when `transposed` is given (`source` is then `[K, N]` and the view
    `[N, K]`), sliced when `offsets` are given, and converted to the view's
    float element type (round to nearest even; f16, bf16 and f32 only).

    A slice is the block of the (transposed) source that starts at
    `offsets` and has the view's shape: `view[i] = source[offsets + i]`.
    A tensor-parallel rank's part of a weight is one
    (`sits-specialize-rank`). A slice of rank > 2 cuts only its first and
    last dimensions, so that its rows stay evenly spaced in the source.

    ```mlir
    %part = sits.weight "w" #sits.weight_view<dense_resource<w> : tensor<64x32xf16>, offsets = [32, 0]> : tensor<32x32xf16>
    ```

    Raising makes one where a
    large weight is read transposed (`MatMul`'s `[in, out]` weights, which
    `sits.linear` reads as `[out, in]`) or cast to another float type, so
    that the weight is not copied at compile time: the engine writer
    reads the source once, transposing and converting as it writes
    (`dialects/sits/WeightView.h` reads views for everything else).

    ```mlir
    %w = sits.weight "val_92" #sits.weight_view<dense_resource<val_92> : tensor<4096x14336xf16>, transposed> : tensor<14336x4096xf16>
    ```

    The element iterators of ElementsAttr are not available (generic
    folders see a constant they cannot read).
  }];
  let parameters = (ins
    AttributeSelfTypeParameter<"", "::mlir::ShapedType">:$type,
    "::mlir::ElementsAttr":$source,
    "bool":$transposed,
    OptionalArrayRefParameter<"int64_t">:$offsets
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Sits_ShardAttr : AttrDef<Sits_Dialect, "Shard"> {
  let mnemonic = "shard";
  let summary = "which part of a tensor each rank of a tensor-parallel "
                "program holds";
  let description = [{
    A tensor-parallel program is one program that every rank runs (SPMD).
    A value sharded `<dim = d, parts = p, replicas = r>` is cut along
    dimension `d` into `p` equal parts, each held by `r` consecutive ranks:
    rank `k` (of `p * r`) holds part `k / r`. `replicas` > 1 lets more
    ranks than parts share one (KV heads fewer than the ranks).

    ```mlir
    #sits.shard<dim = 0, parts = 2, replicas = 1>
    ```
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$parts,
                        DefaultValuedParameter<"int64_t", "1">:$replicas);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SITS_DIALECT_SITS_SITSATTRS_TD
