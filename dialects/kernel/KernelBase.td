//===- KernelBase.td - The kernel dialect ------------------*- tablegen -*-===//
//
// The `kernel` dialect records what the CUDA backend decided about a
// program: which `sits` ops run together in one kernel launch, and how.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_KERNEL_KERNELBASE_TD
#define SITS_DIALECT_KERNEL_KERNELBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kernel_Dialect : Dialect {
  let name = "kernel";
  let cppNamespace = "::sits::kernel";
  let summary = "The CUDA backend's launches: which ops run fused, and how";
  let description = [{
    The `kernel` dialect is the level after `--emit=optimized`: the decisions
    the CUDA backend makes about the optimized `sits` program, as IR that
    `sitsc --emit=kernels` prints, `sits-opt` runs pass by pass, and the
    audit report counts. The code generator plans one kernel launch per
    `kernel.launch` (and one per remaining `sits` op), so every fusion a
    reviewer sees here is one launch in the engine, and none happens
    anywhere else.

    A `kernel.launch` holds the `sits` ops it fuses, unchanged, in its
    region; the values they compute for the rest of the program leave
    through `kernel.yield`. Its `fusion` says which fused kernel runs them.
    The op that becomes a launch (a `kernel.launch`, or a `sits` op that
    launches alone) carries the kernel it runs as a `kernel.config`
    attribute. The passes that form launches (`--kernel-fuse-*`,
    `--kernel-group-*`, `--kernel-choose-*`) and choose their kernels
    (`--kernel-select-*`) each make one kind of decision, and are described
    in the kernel pass reference. The printed IR, weights included, is a
    valid input of `sitsc`: a configuration written into it is the one the
    engine launches, once the code generator has checked that its kernel
    can run the launch.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The discardable attribute that carries a launch's kernel choice
    /// (a #kernel.config) on the op that becomes the launch.
    static constexpr llvm::StringLiteral kConfigAttrName = "kernel.config";
    /// The discardable attribute that carries a quantized weight's storage
    /// order (a #kernel.weight_layout) on the sits.dequantize that reads it.
    static constexpr llvm::StringLiteral kWeightLayoutAttrName =
        "kernel.weight_layout";
    /// The workspace slices of an op's results (a #kernel.slice per result
    /// stored in the workspace, `unit` for the others), on the op that
    /// becomes the launch.
    static constexpr llvm::StringLiteral kBuffersAttrName = "kernel.buffers";
    /// The workspace slices of the launch's scratch, in the order it takes
    /// them.
    static constexpr llvm::StringLiteral kScratchAttrName = "kernel.scratch";
    /// A paged KV cache's blocks (a #kernel.kv_pages), on each step
    /// function; absent: the contiguous layout.
    static constexpr llvm::StringLiteral kKVPagesAttrName = "kernel.kv_pages";
    /// The workspace bytes a step function needs, on the func.
    static constexpr llvm::StringLiteral kWorkspaceBytesAttrName =
        "kernel.workspace_bytes";
    /// On a prefill whose linear layers run the decode GEMVs (@prefill_few,
    /// --kernel-add-few-row-prefill): the most tokens one of its steps
    /// takes, all its sequences together.
    static constexpr llvm::StringLiteral kFewRowTokensAttrName =
        "kernel.few_row_tokens";
    /// The persistent decode kernel's schedule (a #kernel.decode_schedule),
    /// on @decode; absent: one launch per task (--decode-kernels=graph).
    static constexpr llvm::StringLiteral kDecodeScheduleAttrName =
        "kernel.decode_schedule";
    /// The task of the persistent decode kernel that an op which becomes a
    /// launch is (a #kernel.task), on the op.
    static constexpr llvm::StringLiteral kTaskAttrName = "kernel.task";
    /// Every slice's offset is a multiple of this, so that vector loads stay
    /// aligned and values start on their own cache lines.
    static constexpr int64_t kWorkspaceAlignment = 256;
    /// The most groups of 8 tokens gemv_tc multiplies per pass over the
    /// weights (#kernel.config's token_groups): their accumulators and
    /// inputs must stay in the 128 registers of two blocks per SM.
    static constexpr int64_t kMaxTokenGroups = 4;
    /// The most ways gemm_tc splits K (#kernel.config's k_splits): past 8 a
    /// split's partial slab costs more traffic than its blocks win.
    static constexpr int64_t kMaxKSplits = 8;
    /// The output_operand_bits of a value read by GEMVs over 16-bit
    /// weights: their operands in input order (common.cuh's
    /// operandHalfIndex<16>); 8 and 4 name the interleaved int8/int4 orders.
    static constexpr int64_t kInputOrderOperandBits = 16;
  }];
}

def Kernel_FusionKind : I32EnumAttr<"FusionKind",
    "what one fused launch computes", [
  I32EnumAttrCase<"LinearGroup", 0, "linear_group">,
  I32EnumAttrCase<"GatedLinear", 1, "gated_linear">,
  I32EnumAttrCase<"ResidualLinear", 2, "residual_linear">,
  I32EnumAttrCase<"RopeKVAppend", 3, "rope_kv_append">,
  I32EnumAttrCase<"LMHead", 4, "lm_head">,
  I32EnumAttrCase<"Norm", 5, "norm">
]> {
  let cppNamespace = "::sits::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_FusionKindAttr : EnumAttr<Kernel_Dialect, Kernel_FusionKind,
                                     "fusion"> {
  let assemblyFormat = "`<` $value `>`";
}

def Kernel_KernelKind : I32EnumAttr<"KernelKind",
    "the kernel-library kernel a launch runs", [
  I32EnumAttrCase<"Gemv", 0, "gemv">,
  I32EnumAttrCase<"GemvTensorCore", 1, "gemv_tc">,
  I32EnumAttrCase<"GemvQuant", 2, "gemv_quant">,
  I32EnumAttrCase<"GemvQuantTensorCore", 3, "gemv_quant_tc">,
  I32EnumAttrCase<"Gemm", 4, "gemm">,
  I32EnumAttrCase<"GemmTensorCore", 5, "gemm_tc">,
  I32EnumAttrCase<"Attention", 6, "attention">,
  I32EnumAttrCase<"AttentionSplit", 7, "attention_split">,
  I32EnumAttrCase<"AttentionFlash", 8, "attention_flash">,
  I32EnumAttrCase<"AttentionKVQ", 9, "attention_kvq">,
  I32EnumAttrCase<"AttentionKVQSplit", 10, "attention_kvq_split">,
  I32EnumAttrCase<"AttentionKVQMma", 11, "attention_kvq_mma">,
  I32EnumAttrCase<"Embedding", 12, "embedding">,
  I32EnumAttrCase<"RMSNorm", 13, "rms_norm">,
  I32EnumAttrCase<"LayerNorm", 14, "layer_norm">,
  I32EnumAttrCase<"Rope", 15, "rope">,
  I32EnumAttrCase<"AppendKV", 16, "append_kv">,
  I32EnumAttrCase<"Elementwise", 17, "elementwise">
]> {
  let cppNamespace = "::sits::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_WeightLayout : I32EnumAttr<"WeightLayout",
    "the order in which the engine stores a quantized weight's rows", [
  I32EnumAttrCase<"InputOrder", 0, "input_order">,
  I32EnumAttrCase<"Interleaved", 1, "interleaved">
]> {
  let cppNamespace = "::sits::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_WeightLayoutAttr : EnumAttr<Kernel_Dialect, Kernel_WeightLayout,
                                       "weight_layout"> {
  let summary = "How the engine stores a quantized weight's levels";
  let description = [{
    Set by `--kernel-choose-weight-layout` on each `sits.dequantize` of
    int8/int4 weights, as the discardable attribute `kernel.weight_layout`:
    `input_order` stores each row's levels as the inputs come;
    `interleaved` stores each 64-byte chunk of a row in the order the
    lanes of the tensor-core GEMV load it (QuantLayout.h), which needs rows
    and groups of whole chunks (64 int8 or 128 int4 levels). Every kernel
    that reads the weight (the decode GEMVs, prefill's dequantization) reads
    the layout the attribute names.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Kernel_ConfigAttr : AttrDef<Kernel_Dialect, "Config"> {
  let mnemonic = "config";
  let summary = "The kernel a launch runs, how it is launched, what it reads";
  let description = [{
    Set by the kernel selection passes on the op that becomes one launch (a
    `kernel.launch`, or a `sits` op that launches alone), as the
    discardable attribute `kernel.config`; the code generator launches
    exactly this kernel with this configuration, and refuses a
    configuration the kernel cannot take.

    | kernel | what runs |
    |---|---|
    | `gemv` | a GEMV of warps over rows, any weight type (gemv.cuh) |
    | `gemv_tc` | the tensor-core GEMV: 16-row tiles through mma.sync, a ring of cp.async stages (gemv.cuh) |
    | `gemv_quant` | the GEMV over int8/int4 levels and group scales (gemv_quant.cuh) |
    | `gemv_quant_tc` | its tensor-core form (gemv_quant.cuh) |
    | `gemm` | the tiled prefill GEMM, 64 x 64 tiles (gemm.cuh) |
    | `gemm_tc` | the tensor-core prefill GEMM, 128 x 128 tiles (gemm.cuh) |
    | `attention` | tiled attention with an online softmax, any cache type and head_dim, decode or prefill (attention.cuh) |
    | `attention_split` | decode attention split over the keys, blocks of `split_keys` keys combined by the last block (attention_decode.cuh) |
    | `attention_flash` | tensor-core prefill attention, 64 query rows a block (attention_prefill.cuh) |
    | `attention_kvq` | tiled attention over a quantized cache's hot and cold rows (attention_kvq.cuh) |
    | `attention_kvq_split` | split decode attention over a quantized cache (attention_decode_kvq.cuh) |
    | `attention_kvq_mma` | its tensor-core form (attention_decode_kvq_mma.cuh) |
    | `embedding` | a block per token gathers its row of the table (embedding.cuh) |
    | `rms_norm`, `layer_norm` | a block per normalized row, its elements in registers (norm.cuh) |
    | `rope` | a block per token rotates its heads (rope.cuh) |
    | `append_kv` | blocks per token write its keys and values into the cache, rotating keys (and the query) on the way when RoPE is fused (kv_cache.cuh) |
    | `elementwise` | add, activation or act(gate) * up, four elements a thread (elementwise.cuh) |

    `tiles`: 16-row tiles per block of the tensor-core GEMVs (1 unless
    more), so that fewer blocks read the input row fewer times.
    `token_groups`: groups of 8 tokens that `gemv_tc` multiplies per pass
    over the weights (1 to 4; 1 unless more): a decode step of more than 8
    sequences then reads each weight once instead of once per 8 tokens.
    `k_splits`: the most ways `gemm_tc` splits K (1 unless more): a step
    of few tokens has as few blocks as column tiles, so blocks sum shares of
    K into partial slabs and the last of a tile adds them in split order;
    the launch splits less the more token tiles a step has and the fewer
    blocks the GPU needs (at most two an SM).
    `split_keys`: keys per block of the split decode attention kernels.
    `threads`: the block size of the one-kernel launches (embedding, norms,
    RoPE, the append, elementwise: a multiple of 32 up to 1024); the linear
    and attention kernels have their own (0).
    `weight_bytes`: the bytes of weights (levels, scales and biases) one
    launch reads, as stored in the engine (attention reads none: the KV
    cache it reads grows with the sequence; nor do the one-kernel launches,
    which read a table's rows per token or a norm's few weights).

    ```mlir
    %q, %k, %v = kernel.launch <linear_group>
        attributes {kernel.config = #kernel.config<gemv_tc, weight_bytes = 98304>} {
      ...
    }
    ```
  }];
  let parameters = (ins
    EnumParameter<Kernel_KernelKind>:$kernel,
    DefaultValuedParameter<"int64_t", "1">:$tiles,
    DefaultValuedParameter<"int64_t", "0">:$split_keys,
    DefaultValuedParameter<"int64_t", "0">:$threads,
    "int64_t":$weight_bytes,
    DefaultValuedParameter<"int64_t", "1">:$token_groups,
    DefaultValuedParameter<"int64_t", "1">:$k_splits);
  let assemblyFormat = [{
    `<` $kernel `,` struct($tiles, $token_groups, $k_splits, $split_keys,
                          $threads, $weight_bytes) `>`
  }];
}

def Kernel_KVPagesAttr : AttrDef<Kernel_Dialect, "KVPages"> {
  let mnemonic = "kv_pages";
  let summary = "The KV cache stored in blocks through a block table";
  let description = [{
    Set by `--kernel-choose-kv-layout` (`sitsc --kv-layout=paged`) on each
    step function, as the discardable attribute `kernel.kv_pages`: each
    layer's keys and values live in a pool of `blocks` blocks of
    `block_tokens` rows, `[blocks, kv_heads, block_tokens, head_dim]`, and
    row r of sequence b in block `table[b * ceil(capacity / block_tokens) +
    r / block_tokens]` of the engine's block table, which the runtime
    writes. The append and every attention kernel address the cache this
    way (KVRows in kernels/common.cuh); without the attribute a sequence
    owns `capacity` contiguous rows. `block_tokens` is a power of two from
    16 to 1024, `blocks` at least a sequence of the capacity's.

    ```mlir
    func.func @decode(...) attributes {
        kernel.kv_pages = #kernel.kv_pages<block_tokens = 64, blocks = 32>}
    ```
  }];
  let parameters = (ins "int64_t":$block_tokens, "int64_t":$blocks);
  let assemblyFormat = "`<` struct($block_tokens, $blocks) `>`";
}

def Kernel_SliceAttr : AttrDef<Kernel_Dialect, "Slice"> {
  let mnemonic = "slice";
  let summary = "Bytes of the workspace that hold one value";
  let description = [{
    Set by `--kernel-plan-memory`: every activation a step writes (f32,
    token-major, sized for the step's most tokens) and every scratch buffer
    a launch needs lives at a fixed `offset` in the one workspace that both
    steps share, `bytes` long. An op that becomes a launch lists the slices
    of its results as `kernel.buffers` (one entry per result: a slice, or
    `unit` for a result that is not stored in the workspace: the KV cache,
    the logits, a view) and of its scratch as `kernel.scratch`; the step
    function records the workspace's size as `kernel.workspace_bytes`.
    Values live at the same time never share bytes; the others may. The
    code generator binds each kernel argument to its slice and refuses a
    plan in which values live at the same time overlap.

    ```mlir
    %h = sits.rms_norm %x, %w {epsilon = 1.0e-05 : f32,
        kernel.buffers = [#kernel.slice<offset = 0, bytes = 8192>]} ...
    ```
  }];
  let parameters = (ins "int64_t":$offset, "int64_t":$bytes);
  let assemblyFormat = "`<` struct($offset, $bytes) `>`";
}

def Kernel_DecodeScheduleAttr : AttrDef<Kernel_Dialect, "DecodeSchedule"> {
  let mnemonic = "decode_schedule";
  let summary = "The decode step of each batch bucket as one persistent kernel";
  let description = [{
    Set by `--kernel-schedule-decode-tasks` (`sitsc
    --decode-kernels=persistent`) on `@decode`, as the discardable attribute
    `kernel.decode_schedule`: the step of each batch size of `buckets` runs
    as one persistent kernel of `blocks` blocks (all resident at once),
    which run the tiles of the step's tasks (the `#kernel.task` of each op
    that becomes a launch) in task order, each tile once its dependencies
    have finished. `blocks` is from 1 to 1024; `buckets` increasing, from 1
    to 8.

    ```mlir
    func.func @decode(...) attributes {kernel.decode_schedule =
        #kernel.decode_schedule<blocks = 132, buckets = [1, 2, 4, 8]>}
    ```
  }];
  let parameters = (ins "int64_t":$blocks,
                        ArrayRefParameter<"int64_t">:$buckets);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Kernel_TaskAttr : AttrDef<Kernel_Dialect, "Task"> {
  let mnemonic = "task";
  let summary = "One task of the persistent decode kernel";
  let description = [{
    Set by `--kernel-schedule-decode-tasks` on each op of `@decode` that
    becomes a launch, as the discardable attribute `kernel.task`. `id`: the
    task's place in the task order (program order, from 0). `tiles`: per
    bucket of the function's `#kernel.decode_schedule`, the blocks of the
    launch's grid, each one tile. `first_block`: per bucket, the block of
    the persistent grid that runs tile 0; tile j runs on block
    `(first_block + j) % blocks` (round-robin in task order). `deps`: the
    earlier tasks (by id, increasing) all of whose tiles must have finished
    before a tile of this one starts. `prefetch`: the task reads weights,
    which its tiles may start loading before their dependencies are met.

    ```mlir
    kernel.launch <linear_group> attributes {kernel.task = #kernel.task<
        id = 2, tiles = [8, 8, 8, 8], first_block = [2, 3, 5, 9],
        deps = [1], prefetch>} { ... }
    ```
  }];
  let parameters = (ins "int64_t":$id,
                        ArrayRefParameter<"int64_t">:$tiles,
                        ArrayRefParameter<"int64_t">:$first_block,
                        ArrayRefParameter<"int64_t">:$deps,
                        "bool":$prefetch);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // SITS_DIALECT_KERNEL_KERNELBASE_TD
