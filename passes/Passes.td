//===- Passes.td - The sits optimization passes ------------*- tablegen -*-===//

#ifndef SITS_PASSES_PASSES_TD
#define SITS_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"
include "passes/PipelineOptions.td"

def AuditReport : Pass<"sits-audit-report", "mlir::ModuleOp"> {
  let summary = "Print what the passes so far changed (the audit report)";
  let description = [{
    Prints the audit log of the context: for every pass that ran since the
    previous report, its counters, the ops it removed and added, and each
    change with the source nodes it came from and the rule that made it safe.
    Changes no IR.
    `sitsc --audit=FILE` writes the same report after the whole pipeline.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Report format: text or json">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the report to ('-' for stdout)">
  ];
}

def HoistRope : Pass<"sits-hoist-rope", "mlir::ModuleOp"> {
  let summary = "Precompute RoPE cos/sin tables and share one load per step";
  let description = [{
    Every `sits.rope_cos_sin` (the graph's own cos/sin formula, raised)
    becomes rows of a table constant `[max-seq-len, rotary_dim]` (cos in the
    first half of a row, sin in the second) computed at compile time exactly as
    the graph computes it: one f32 product `f32(p) * inv_freq[k]`, then cos and
    sin, times `attention_scaling`. Each table is checked against the
    closed form `cos(p * inv_freq[k])` in double precision before it is used;
    a table that disagrees by more than the f32 rounding of the angle allows is
    an error.

    All loads of the same table at the same positions, repeated per layer in
    exports that recompute cos/sin in every layer, become one
    `sits.rope_gather` right after the positions are known: one load per step,
    shared by every layer. Positions past the table are a runtime error.

    Counters: `rope_tables_precomputed`, `rope_loads_hoisted` (cos/sin
    computations replaced), `rope_loads_shared` (gathers left, one per table
    and positions).
  }];
  let options = [MaxSeqLenOption];
}

def FoldCausalMask : Pass<"sits-fold-causal-mask", "mlir::ModuleOp"> {
  let summary = "Prove attention masks causal and fold them into the "
                "attention's causal rule";
  let description = [{
    For every `sits.attention` with a `mask` operand, evaluates the mask
    symbolically at an index (b, h, i, j) of variables and proves, with
    Presburger arithmetic, that it equals a causal rule for every index and
    every input size: bottom-right (`j <= i + seq_k - seq_q`), top-left
    (`j <= i`, tried only when the two lengths may differ), or either with a
    sliding window `W` (`j > i + offset - W`, candidates taken from the
    mask's constants). Boolean masks and additive ones are understood; an
    additive mask hides a key with -inf or with the lowest finite value of
    its type (the exporters' `finfo.min`, -65504 in f16), either of which
    makes the key's softmax weight 0. A proven mask is replaced by the rule (`causal`,
    `window`) and its subgraph is erased: no `[seq, seq_k]` mask tensor
    remains. A mask that depends on runtime data (a padding mask), that the
    prover does not understand, or that differs from every rule is kept as
    an operand, with the reason in the audit: never folded wrongly.

    Counters: `masks_folded`, `mask_ops_removed`, `masks_kept`.
  }];
}

def TensorParallel : Pass<"sits-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Split the program over ranks: attention heads, MLP columns, "
                "the vocabulary";
  let description = [{
    Makes the full-sequence program one program for `tensor-parallel` = N
    ranks (module attribute `sits.tensor_parallel = N`), Megatron-style.
    Blocks are found by their structure, never by their names:

    * **Attention**: q/k/v `sits.linear` -> `sits.split_heads` (-> head-wise
      norm, `sits.rope`) -> `sits.attention` -> `sits.merge_heads` -> the
      output `sits.linear`. The q/k/v projections become column-parallel
      (their weights and biases `sits.shard` along dimension 0: each rank
      computes whole heads), the output projection row-parallel (its weight
      sharded along dimension 1) followed by `sits.all_reduce`, which takes
      its bias. `num_heads`, `num_kv_heads` and every type between them
      follow. KV heads split over the ranks when `num_kv_heads % N == 0`;
      else, when `N % num_kv_heads == 0`, each KV head is held by
      `N / num_kv_heads` ranks (`replicas`), each rank holding one; else
      the pass fails.
    * **MLP**: gate/up -> `sits.glu` -> down, or up -> `sits.activation` ->
      down: up projections column-parallel, down row-parallel +
      `sits.all_reduce`.
    * **LM head**: split by vocabulary rows, then `sits.all_gather`.
    * **Embedding**: split by vocabulary rows (`vocab_shard`: a rank gives
      zeros for the ids it does not hold), then `sits.all_reduce`. A tied
      LM head shares the embedding's `sits.shard`.

    Everything else is replicated. A layout check then follows every value
    (replicated, split along a dimension, or a partial sum) and fails at the
    first op that reads a layout it cannot (an elementwise op of a partial
    sum, a norm over a split dimension, a split value returned). Heads,
    kv heads, intermediate sizes and vocabularies that do not split, a value
    that leaves its block other than through the output projection, and
    programs with a KV cache, quantization or TVC ops already (those passes
    run after this one) are errors.

    Counters: `attention_blocks_sharded`, `mlp_blocks_sharded`,
    `linears_column_parallel`, `linears_row_parallel`, `linears_replicated`,
    `weights_sharded` (`sits.shard` ops), `weights_replicated` (weights every
    rank holds whole), `kv_heads_replicated` (attention blocks whose kv heads
    several ranks hold), `embeddings_sharded`, `lm_heads_sharded`,
    `all_reduces_inserted`, `all_gathers_inserted`.
  }];
  let options = [TensorParallelOption];
}

def KVCache : Pass<"sits-kv-cache", "mlir::ModuleOp"> {
  let summary = "Turn the full-sequence program into prefill and decode steps "
                "with a bounded KV cache";
  let description = [{
    Replaces the full-sequence function with `@prefill` (any number of new
    tokens) and `@decode` (one new token per sequence). Both take the token
    ids of the step and the KV-cache state, and return the logits and the new
    state. Each attention layer appends its keys and values to the cache at
    the sequence's past length and attends over the cached rows with
    `past_len`; positions derive from the cache length; the step ends with
    `sits.kv_cache.advance`.

    The cache holds `max-seq-len` tokens for each of `max-batch` sequences,
    allocated once and never grown: writing past the capacity is a runtime
    error. Its layout is an attribute of the state type (contiguous
    `[layer, batch, kv_head, seq, head_dim]`).

    The rewrite is exact when every op between the token ids and each
    attention's keys and values treats positions independently (then a
    token's keys and values never change once computed) and every attention
    is bottom-right causal without a mask operand; otherwise the pass fails
    and names the op that prevents caching. Counter:
    `attention_layers_cached`.
  }];
  let options = [MaxSeqLenOption, MaxBatchOption];
}

def InsertQDQ : Pass<"sits-insert-qdq", "mlir::ModuleOp"> {
  let summary = "Quantize weights and the KV cache: explicit quantize and "
                "dequantize ops";
  let description = [{
    Makes the quantization of the optimized program explicit, so that IR
    dumps, the audit and the CPU reference executor see exactly what an
    engine computes (docs/quantization.md).

    **Weights** (`weights=int8|int4`): the weight of every `sits.linear` and
    `sits.lm_head` is quantized at compile time, round to nearest, in groups
    of `weight-group` values along `in_features` (the last group of a row
    may be shorter): int8 or packed int4 data whose rows are padded to 16
    bytes, and f16 scales, as two new weights (`NAME.q8`/`NAME.q4`,
    `NAME.scales`). `weight-scale=mse` (the default) picks each group's
    scale `f16(c absmax / L)` among the clipping ratios `c = 1, 0.98, ...,
    0.6` for the smallest squared error of the group (values beyond the
    range clip); `absmax` takes `c = 1`. A `sits.dequantize` turns them back into the layer's
    weight; an engine fuses it into the GEMV. The embedding table is not
    quantized (a tied LM head gets its own quantized copy).

    **KV cache** (`kv-cache=int8|int4`, after `--sits-kv-cache`): the cache
    type gets `#sits.kv_quant` (FP16 hot part of `kv-hot-window` tokens,
    int8/int4 cold part, f16 scales). For every layer the keys and values
    that `sits.kv_cache.read` returns are quantized (`sits.quantize`: values
    per token and kv head in groups of `min(64, head_dim)` channels; keys the
    same, or per channel in blocks of `kv-channel-block` tokens) and
    dequantized into the attention's `cold` operands with `hot_window`:
    a query reads a token from the cold part once it is `kv-hot-window`
    positions old (for per-channel keys, once its whole block is).
    `kv-keys=auto` picks per-channel keys for int4 and int8 (measured lower
    perplexity than per-token keys for both, docs/quantization.md).

    `fp16` (the default for both) changes nothing. Counters:
    `quantize_inserted`, `dequantize_inserted`, `weights_quantized`,
    `kv_layers_quantized`; every change names the dtype, group size and
    window.
  }];
  let options = [WeightsOption, WeightGroupOption, WeightScaleOption,
                 KVCacheOption, KVHotWindowOption, KVKeysOption,
                 KVChannelBlockOption];
}

def FuseTVC : Pass<"sits-fuse-tvc", "mlir::ModuleOp"> {
  let summary = "Turn the LM head into the token viability classifier "
                "(sits.tvc_lm_head)";
  let description = [{
    Factors every LM head weight `W [V, H]` at compile time with a rank-R
    (`tvc-rank`) SVD (a randomized range finder with power iterations, then
    a Jacobi eigen-solve of the small projected problem), `W ~= P T` with
    orthonormal rows `T [R, H]` and `P = W T^T`, and stores per vocabulary
    row upper bounds of the residual norms the proof needs. The `sits.lm_head` becomes
    `sits.tvc_lm_head` with the factors and bounds as weights (`NAME.tvc_left`,
    `NAME.tvc_right`, `NAME.tvc_bounds`): it previews, scores `tvc-candidates`
    rows exactly, proves that no other row can win, and falls back to the
    full head when the proof fails. Greedy tokens and top-`tvc-top-k`
    logits are exactly those of the plain head; the distribution over the
    rest of the vocabulary is not kept (perplexity needs the plain head).

    A weight that `--sits-insert-qdq` quantized is factored as dequantized,
    so the bounds hold for the values the head really multiplies. Heads with
    a bias or with non-f32 activations are kept, with the reason in the
    audit. Counters: `lm_heads_fused`, `lm_heads_kept`.
  }];
  let options = [TvcRankOption, TvcCandidatesOption, TvcTopKOption];
}

def SpecializeRank : Pass<"sits-specialize-rank", "mlir::ModuleOp"> {
  let summary = "The program of one rank of a tensor-parallel program";
  let description = [{
    Makes a tensor-parallel program (`sits.tensor_parallel = N`, one program
    for every rank) the program of rank `rank`, as the engine writer and the
    reference executor of that rank see it: each `sits.shard` of a
    `sits.weight` becomes a `sits.weight` valued by the rank's block of it,
    a `#sits.weight_view` slice (no copy; the name stays unless the weight
    is read another way too, then `NAME.dim0.parts2`), and each
    `sits.embedding`'s `vocab_shard` becomes the rank's `row_offset` and
    `vocab`. The collectives stay. A rank outside `0 .. N-1`, or a shard
    that describes another number of ranks, is an error.
  }];
  let options = [
    Option<"rank", "rank", "int64_t", /*default=*/"0",
           "The rank whose program to make (0 .. N-1)">
  ];
}

#endif // SITS_PASSES_PASSES_TD
