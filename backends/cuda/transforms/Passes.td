//===- Passes.td - The CUDA backend's fusion passes --------*- tablegen -*-===//
//
// The passes after --emit=optimized that decide which sits ops share one
// kernel launch. Each forms one kind of kernel.launch; the code generator
// then plans one launch per kernel.launch and per remaining op.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_CODEGEN_TRANSFORMS_PASSES_TD
#define SITS_CODEGEN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"
include "backends/cuda/CodegenOptions.td"

def AddFewRowPrefill
    : Pass<"kernel-add-few-row-prefill", "mlir::ModuleOp"> {
  let summary = "A prefill for steps of a few rows whose linear layers are "
                "GEMVs";
  let description = [{
    With `few-row-prefill-tokens` N above 0, `@prefill` is copied as
    `@prefill_few` with `kernel.few_row_tokens` = min(N, max_batch x the
    prefill chunk). The kernel selection gives its linear layers the decode
    GEMVs and its attention the prefill kernels; the runtime runs it for
    the prefill steps of at most that many token rows. A serving step that
    carries a short prompt chunk beside decode tokens then reads each
    weight once at the GEMV's bandwidth, instead of through the GEMM's
    tiles, of which a few rows fill one block per 64 or 128 weight rows.
    Nothing is added with N = 0 or without a `@prefill` over a KV cache; a
    `@prefill_few` in the input is kept.

    Audit: `programs` (added), with the row limit and its reason.
  }];
  let options = [FewRowPrefillTokensOption, MaxPrefillTokensOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def FuseGatedLinears : Pass<"kernel-fuse-gated-linears", "mlir::ModuleOp"> {
  let summary = "One launch for a gated MLP's gate and up projections";
  let description = [{
    A `sits.glu` whose gate and up are `sits.linear` results read by
    nothing else, of the same token-major input, with weights of one type
    and one quantization (bits and group size), becomes a
    `kernel.launch <gated_linear>` at the glu: one GEMV/GEMM computes both
    projections and writes act(gate) * up, so neither projection is ever
    stored.

    Audit: `launches` (formed), `linears` (fused into them).
  }];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def FuseResidualLinears
    : Pass<"kernel-fuse-residual-linears", "mlir::ModuleOp"> {
  let summary = "A linear layer's residual add as its epilogue";
  let description = [{
    A `sits.add` of a residual and a token-major `sits.linear` result that
    nothing else reads (and that is not already in a launch) becomes a
    `kernel.launch <residual_linear>` at the add: the GEMV/GEMM adds the
    residual as it writes. The right operand is tried first, as exports
    write `residual + projection`.

    Audit: `launches`.
  }];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def GroupLinears : Pass<"kernel-group-linears", "mlir::ModuleOp"> {
  let summary = "One launch for the linear layers that read the same input";
  let description = [{
    The `sits.linear` ops outside launches that read one token-major input
    with weights of one quantization (Q, K and V of a layer) become
    `kernel.launch <linear_group>`s of at most 4 segments each, in program
    order, at the first of them: one GEMV/GEMM reads the input once for all
    of them. The weights the later ones read are moved before the launch
    when they are defined after the first. A linear alone stays a
    `sits.linear` (one launch as it is).

    Audit: `launches`, `linears`.
  }];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def FuseRopeAppend : Pass<"kernel-fuse-rope-append", "mlir::ModuleOp"> {
  let summary = "RoPE of the keys and of the query inside the KV-cache append";
  let description = [{
    A `sits.kv_cache.append` whose keys are a `sits.rope` result read by
    nothing else takes that rope into a `kernel.launch <rope_kv_append>`,
    and the `sits.rope` of the query of the attention that reads the layer
    after the append joins it when nothing else reads it: the append kernel
    rotates the keys on their way into the cache and the query beside
    them. The launch sits at the later of the append and the query's rope.

    Audit: `launches`, `ropes` (fused).
  }];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def FuseNorms : Pass<"kernel-fuse-norms", "mlir::ModuleOp"> {
  let summary = "A decode rms_norm computed by the GEMV that reads it";
  let description = [{
    In `@decode` only, a `sits.rms_norm` over whole rows whose result is the
    input of exactly one launch (a linear launch, a lone `sits.linear`, or
    the `sits.lm_head`) with unquantized weights on the tensor-core GEMV
    joins that launch: the GEMV normalizes its input as it loads it. A
    lone linear or LM head becomes a `<linear_group>` or `<lm_head>` launch
    for it. Prefill's GEMMs read the normalized rows many times, so the
    norm stays a launch there.

    Off unless `norm-fusion` (as sitsc's): the fused GEMVs measured
    slower on the H200.

    Audit: `norms` (fused).
  }];
  let options = [NormFusionOption, TargetOption, DTypeOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def ChooseWeightLayout
    : Pass<"kernel-choose-weight-layout", "mlir::ModuleOp"> {
  let summary = "The storage order of every quantized weight";
  let description = [{
    Every `sits.dequantize` of a `sits.weight` gets a
    `kernel.weight_layout`: `interleaved` (each 64-byte chunk of a row in
    the order the tensor-core GEMV's lanes load it) on sm_80+ in a 16-bit
    engine when its rows and groups are whole chunks (64 int8 or 128 int4
    levels), `input_order` otherwise. The GEMVs and prefill's
    dequantization read the layout the attribute names; a layout given in
    the input is kept, and the code generator refuses `interleaved` for
    rows or groups that are not whole chunks.

    Audit: `interleaved`, `input_order` (weights read through each), each
    choice with its reason.
  }];
  let options = [TargetOption, DTypeOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def ChooseOperandLayout
    : Pass<"kernel-choose-operand-layout", "mlir::ModuleOp"> {
  let summary = "Write a linear input as the 16-bit operands its readers load";
  let description = [{
    When every reader of an unfused `sits.rms_norm`'s result, or of a
    `<gated_linear>` launch's result (itself on tensor cores), is the
    input of a tensor-core linear kernel reading the same operand order,
    the producer writes the value as those kernels' 16-bit mma operands
    (rounded as they would round it): they then load half the bytes of x
    and convert nothing. In `@decode` and the few-row `@prefill_few` the
    readers are GEMVs over 16-bit weights or int8/int4 levels over
    interleaved rows (all of the same bits); in the other programs
    (prefill) they are tensor-core GEMMs, which read int8/int4 weights
    dequantized to 16 bits (and LM heads, GEMVs everywhere). The norm
    becomes a `kernel.launch <norm>`; both get `output_operand_bits`: the
    readers' weight bits, which name the order of the halves (16: the
    input order; 8 and 4: common.cuh's operandHalfIndex).

    Off with `half-operands=false` (as sitsc's), for measurements.

    Audit: `norms`, `gated` (producers that write operands).
  }];
  let options = [TargetOption, DTypeOption, HalfOperandsOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def SelectLinearKernels
    : Pass<"kernel-select-linear-kernels", "mlir::ModuleOp"> {
  let summary = "The GEMV or GEMM kernel of every linear launch";
  let description = [{
    Every op that becomes a launch of linear layers (a linear
    `kernel.launch`, a lone `sits.linear`, the `sits.lm_head` or
    `sits.tvc_lm_head`) gets a `kernel.config`: at `@decode`, at a few-row
    `@prefill_few` (`kernel.few_row_tokens`) and for every LM head a GEMV,
    at `@prefill` the tiled GEMM (over weights dequantized first when they
    are int8/int4); on tensor cores when the target has
    mma.sync, the weights are 16-bit and K is a multiple of 8 (and, for
    int8/int4 levels, the groups are whole chunks whose scales fit in shared
    memory); two tiles per block for GEMVs of many tiles (the LM head), or
    the tiles `gemv-quant-tiles` asks for where they fit; and for the
    16-bit tensor-core GEMV, as many groups of 8 tokens per pass over the
    weights as the KV cache's `max_batch` (a few-row prefill's rows) needs
    (at most 4; or
    `gemv-token-groups` when not 0), so that a decode step of many
    sequences reads each weight once; for the tensor-core GEMM, the most
    ways it splits K (`k_splits`): what `gemm-k-splits` asks (by default 1,
    never), or with 0 up to 8 where one token tile gives fewer than 264
    blocks, each split at least 8 steps of 32 inputs. A `kernel.config`
    given in the input is kept. The code generator launches what the
    attribute says, and refuses a kernel that cannot run the launch.

    Audit: one counter per kernel (launches that run it), `gemm_split_k`
    (GEMM launches that may split K), and `decode_weight_bytes` (the weights one decode step's linear launches
    read); each choice with its reason.
  }];
  let options = [TargetOption, DTypeOption, GemvQuantTilesOption,
                 GemvTokenGroupsOption, GemmKSplitsOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def ChooseKVLayout : Pass<"kernel-choose-kv-layout", "mlir::ModuleOp"> {
  let summary = "The KV cache contiguous per sequence, or in paged blocks";
  let description = [{
    With `kv-layout=paged`, every step function that takes a KV cache gets
    a `kernel.kv_pages`: blocks of `kv-block-tokens` rows, `kv-pool-blocks`
    of them (0: `max_batch` full sequences), which the append and every
    attention kernel address through the engine's block table. Without it
    the cache stays contiguous (no attribute). A quantized cache pages its
    int8/int4 cold rows and scales; its FP16 hot ring stays per sequence.
    Refused: a pool that cannot hold one sequence of the capacity, a block
    size that is not a power of two from 16 to 1024, and for per-channel
    quantized keys one that is not a multiple of the key block. A
    `kernel.kv_pages` given in the input is kept (and checked).

    Audit: `contiguous`, `paged` and `paged_quantized` step functions, each
    with its reason.
  }];
  let options = [KVLayoutOption, KVBlockTokensOption, KVPoolBlocksOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def SelectAttentionKernels
    : Pass<"kernel-select-attention-kernels", "mlir::ModuleOp"> {
  let summary = "The kernel of every attention over the KV cache";
  let description = [{
    Every `sits.attention` of a step that takes a KV cache gets a
    `kernel.config`. At `@decode`: split over the keys (`split_keys` a
    block, combined by the last block to finish) when the target has
    cp.async, the cache is 16-bit, head_dim a power of two from 8 to 256
    and at most 8 query heads share a KV head; over a quantized cache the
    split kernel on tensor cores where it fits (an fp16 engine, head_dim at
    most 128 in scale groups of a multiple of 32 channels). At `@prefill`:
    the tensor-core kernel for a 16-bit plain cache with head_dim a multiple
    of 16 up to 128. The tiled kernels otherwise. `decode-split-keys` sets
    the keys a split (0: 256, fewer for small caches). A `kernel.config`
    given in the input is kept; the code generator refuses one whose kernel
    cannot run the attention.

    Audit: one counter per kernel, each choice with its reason.
  }];
  let options = [TargetOption, DTypeOption, DecodeSplitKeysOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def ConfigureLaunches
    : Pass<"kernel-configure-launches", "mlir::ModuleOp"> {
  let summary = "The kernel and block size of every other launch";
  let description = [{
    Every op that becomes a launch of a one-kernel op gets a
    `kernel.config` with its kernel and block (`threads`): `embedding` (a
    block per token, about one 16-byte piece of the row a thread, at most
    256), `rms_norm` and `layer_norm` (a block per row, about 8 elements a
    thread kept in registers, at most 512; a `<norm>` launch too), `rope`
    and `append_kv` (about 4 elements a thread, at most 256; a
    `<rope_kv_append>` launch too), `elementwise` (`sits.add`,
    `sits.activation`, `sits.glu`: 256, four elements a thread); whole warps
    always. With the linear and attention kernels chosen before, every
    launch of the program then names its kernel. A `kernel.config` given in
    the input is kept.
    Audit: one counter per kernel, each choice with its reason.
  }];
  let options = [DTypeOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def PlanMemory : Pass<"kernel-plan-memory", "mlir::ModuleOp"> {
  let summary = "An offset in the workspace for every value a step writes";
  let description = [{
    For `@prefill` and `@decode`, plans the launches as the code generator
    will (so it runs last, after the kernels are chosen) to learn every
    value the step writes: the activations (f32, token-major, sized for the
    step's most tokens: `max_batch` at decode, `max_batch` x
    `max-prefill-tokens` at prefill), the partial results of split
    attention and prefill's dequantized weights, and the launches between
    the one that writes each and the last that reads it. Values live at the
    same time get disjoint bytes of one workspace, the others share: the
    largest first, each at the lowest offset (a multiple of 256) free for
    its whole lifetime. The result is IR: `kernel.buffers` (a
    `#kernel.slice` per result) and `kernel.scratch` on each op that becomes
    a launch, `kernel.workspace_bytes` on the function. A function that has
    any of them in the input keeps its plan as given; the code generator
    binds every value to its slice and refuses a plan whose sizes do not
    match or whose values live at the same time overlap. A function the
    code generator cannot plan is left unplaced (it reports why).

    Audit: `values` (placed), `scratch` (of them, launch scratch),
    `shared_bytes` (bytes saved by sharing); per function the workspace
    size against the bytes its values would take unshared.
  }];
  let options = [TargetOption, DTypeOption, MaxPrefillTokensOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

def ScheduleDecodeTasks
    : Pass<"kernel-schedule-decode-tasks", "mlir::ModuleOp"> {
  let summary = "The decode step as one persistent kernel's task graph";
  let description = [{
    With `decode-kernels=persistent`, plans `@decode`'s launches as the code
    generator will (so it runs after the memory plan) and makes each op
    that becomes a launch one task of a persistent kernel of
    `persistent-blocks` blocks, per batch bucket: `kernel.task =
    #kernel.task<id, tiles, first_block, deps, prefetch>` on the op and
    `kernel.decode_schedule = #kernel.decode_schedule<blocks, buckets>` on
    `@decode`. A task's tiles are the blocks of its launch's grid at each
    bucket (one token a sequence, `persistent-blocks` multiprocessors),
    dealt round-robin to the blocks in task order. Its dependencies are the
    earlier tasks that write bytes it reads or read or write bytes it
    writes (workspace slices, a layer of the KV cache, the logits, the
    split attention's counters; read-only pointers are read, the others
    written), less those implied by others. A task that reads weights
    prefetches them before its dependencies are met. With
    `decode-kernels=graph` nothing changes; a schedule given in the input
    is kept.

    Refused, at the op: quantized weights or KV cache, a paged KV cache,
    the TVC head, norms fused into GEMVs, kernels other than the plain and
    tensor-core GEMVs, split or tiled decode attention, and the one-kernel
    launches; buckets of more than 8 sequences; a step without a memory
    plan.

    Audit: `tasks`, `tiles` (at the largest bucket), `dependencies`,
    `prefetches` (tasks that prefetch their weights).
  }];
  let options = [DecodeKernelsOption, PersistentBlocksOption,
                 BatchBucketsOption, TargetOption, DTypeOption,
                 MaxPrefillTokensOption];
  let dependentDialects = ["sits::kernel::KernelDialect"];
}

#endif // SITS_CODEGEN_TRANSFORMS_PASSES_TD
