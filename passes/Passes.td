//===- Passes.td - The sits optimization passes ------------*- tablegen -*-===//

#ifndef SITS_PASSES_PASSES_TD
#define SITS_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

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
  let options = [
    Option<"maxSeqLen", "max-seq-len", "int64_t", /*default=*/"2048",
           "Rows of each table: the largest position + 1">
  ];
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
    mask's constants). A proven mask is replaced by the rule (`causal`,
    `window`) and its subgraph is erased: no `[seq, seq_k]` mask tensor
    remains. A mask that depends on runtime data (a padding mask), that the
    prover does not understand, or that differs from every rule is kept as
    an operand, with the reason in the audit: never folded wrongly.

    Counters: `masks_folded`, `mask_ops_removed`, `masks_kept`.
  }];
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
  let options = [
    Option<"maxSeqLen", "max-seq-len", "int64_t", /*default=*/"2048",
           "Tokens per sequence the cache holds">,
    Option<"maxBatch", "max-batch", "int64_t", /*default=*/"8",
           "Sequences the cache holds">
  ];
}

#endif // SITS_PASSES_PASSES_TD
