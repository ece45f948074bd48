//===- CodegenOptions.td - The options of the code generator -*- tablegen -*-===//
//
// The single declaration of every option of the CUDA code generator: its
// name, C++ type, default and help. sits-tblgen -gen-codegen-options lists
// them for sitsc's flags and for `CodegenOptionValues`, whose defaults are
// those of `CodegenOptions` (Target.h); the fusion passes that take one of
// them take the record itself as their option (transforms/Passes.td), so
// that a name, a default or a help text cannot diverge between them. Their
// values are checked in one place, parseCodegenOptions (Target.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_CODEGENOPTIONS_TD
#define SITS_BACKENDS_CUDA_CODEGENOPTIONS_TD

include "mlir/Pass/PassBase.td"

// An option of the code generator, of sitsc and of the fusion passes that
// take it. The help text ends with the default, written once here
// (`defaultDesc` words it where the value alone would say little);
// `valueDesc` names the value in --help (`--dtype=<type>`; empty: the
// type's, `<long>`).
class CodegenOption<string varName, string arg, string valueType,
                    string default, string desc, string valueDesc = "",
                    string defaultDesc = "">
    : Option<varName, arg, valueType, default,
             desc # " (default: " #
                 !if(!empty(defaultDesc), !subst("\"", "", default),
                     defaultDesc) # ")",
             !if(!empty(valueDesc), "",
                 "::llvm::cl::value_desc(\"" # valueDesc # "\")")> {
  string valueDescription = valueDesc;
}

def TargetOption : CodegenOption<"target", "target", "std::string",
    "\"sm_90a\"",
    "GPU architecture of the kernels: sm_90a (H100/H200), sm_90, sm_89, "
    "sm_80, ...", "sm_XY">;
def DTypeOption : CodegenOption<"dtype", "dtype", "std::string", "\"fp16\"",
    "Storage type of the weights and the KV cache: fp16, bf16 or fp32",
    "type">;
def MaxPrefillTokensOption : CodegenOption<"maxPrefillTokens",
    "max-prefill-tokens", "int64_t", "0",
    "Tokens per sequence in one prefill chunk, from 1 to --max-seq-len", "",
    "512, at most --max-seq-len">;
def FewRowPrefillTokensOption : CodegenOption<"fewRowPrefillTokens",
    "few-row-prefill-tokens", "int64_t", "32",
    "Most tokens of a prefill step (all its sequences together) run by a "
    "third program, prefill_few, whose linear layers are the decode GEMVs: "
    "a step of a few prompt and decode tokens then reads each weight once "
    "at the GEMV's bandwidth instead of in the GEMM's tiles; 0 to 256, 0 "
    "for none">;
def BatchBucketsOption : CodegenOption<"batchBuckets", "batch-buckets",
    "std::string", "\"\"",
    "Decode batch sizes to capture CUDA graphs for, e.g. 1,2,4,8", "list",
    "the runtime's">;
def NormFusionOption : CodegenOption<"normFusion", "norm-fusion", "bool",
    "false",
    "Normalize in the decode GEMV that reads each rms_norm instead of a "
    "launch of its own (measured slower on the H200: docs/performance.md)">;
def HalfOperandsOption : CodegenOption<"halfOperands", "half-operands",
    "bool", "true",
    "Write the input of the tensor-core decode GEMVs (an rms_norm's or a "
    "gate/up GEMV's result that only such GEMVs read) as the 16-bit mma "
    "operands they load: half the bytes of x and no conversion in the GEMV, "
    "with the same rounding; false: f32 (for measurements)">;
def GemvQuantTilesOption : CodegenOption<"gemvQuantTiles",
    "gemv-quant-tiles", "int64_t", "1",
    "16-row tiles per item of the int8/int4 decode GEMVs: 1 (what was "
    "measured), 2 or 4 (an experiment: each load of x feeds more rows; at "
    "most what fits in shared memory)">;
def GemvTokenGroupsOption : CodegenOption<"gemvTokenGroups",
    "gemv-token-groups", "int64_t", "0",
    "Groups of 8 tokens the 16-bit tensor-core decode GEMV multiplies per "
    "pass over the weights: 1 to 4, or 0 for as many as --max-batch needs "
    "(up to 4)", "", "0">;
def GemmKSplitsOption : CodegenOption<"gemmKSplits", "gemm-k-splits",
    "int64_t", "1",
    "Most ways the tensor-core prefill GEMM splits K, so that a step of few "
    "tokens runs enough blocks: 1 (never) to 8, or 0 to choose by the "
    "layer's column tiles (up to 8 where one token tile gives fewer than "
    "264 blocks; the launch splits less the more tokens a step has). An "
    "experiment: on the H100 the 8B shape's prefill of 64 tokens took 18 % "
    "less time with 0, those of 256 tokens and more 8-30 % more">;
def DecodeSplitKeysOption : CodegenOption<"decodeSplitKeys",
    "decode-split-keys", "int64_t", "0",
    "Keys per block of the split-K decode attention: 0 (256, fewer for small "
    "caches) or a multiple of 64 from 64 to 4096 (an experiment: fewer, "
    "longer splits give each warp more tiles and the combine fewer "
    "partials, with fewer blocks)">;
def KVLayoutOption : CodegenOption<"kvLayout", "kv-layout", "std::string",
    "\"contiguous\"",
    "Storage of the KV cache: contiguous (each sequence owns --max-seq-len "
    "rows) or paged (blocks of --kv-block-tokens rows from a pool of "
    "--kv-pool-blocks, through a per-sequence block table the runtime "
    "writes; for serving)", "layout">;
def KVBlockTokensOption : CodegenOption<"kvBlockTokens", "kv-block-tokens",
    "int64_t", "64",
    "Tokens per block of a paged KV cache: a power of two from 16 to 1024">;
def KVPoolBlocksOption : CodegenOption<"kvPoolBlocks", "kv-pool-blocks",
    "int64_t", "0",
    "Blocks in a paged KV cache's pool, at least one sequence of "
    "--max-seq-len's", "", "--max-batch full sequences">;
def DecodeKernelsOption : CodegenOption<"decodeKernels", "decode-kernels",
    "std::string", "\"graph\"",
    "Kernels of a decode step: graph (one launch per kernel.launch, "
    "captured in a CUDA graph) or persistent (the step of each batch bucket "
    "as one task graph for one persistent kernel, which the engine carries "
    "beside the graph-mode decode; slower than graph so far)", "kind">;
def PersistentBlocksOption : CodegenOption<"persistentBlocks",
    "persistent-blocks", "int64_t", "132",
    "Blocks of the persistent decode kernel, all resident at once (1 to "
    "1024; the H100's and H200's SMs by default)">;
def PersistentTraceOption : CodegenOption<"persistentTrace",
    "persistent-trace", "bool", "false",
    "Record in the persistent decode kernels when each tile starts, has its "
    "dependencies and ends (the GPU's clock), for sits-bench "
    "--persistent-trace: a profile, at the cost of a few stores a tile">;

#endif // SITS_BACKENDS_CUDA_CODEGENOPTIONS_TD
