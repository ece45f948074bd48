//===- PipelineOptions.td - The options of the sits pipeline -*- tablegen -*-===//
//
// The single declaration of every option of the compilation pipeline: its
// name, C++ type, default and help. The passes take these records as their
// options (Passes.td); sits-tblgen -gen-pipeline-options lists them for
// `PipelineOptions` (`sits-opt --sits-pipeline`) and for sitsc's flags
// (compiler/pipeline/Pipeline.h), so that a name, a default or a help text
// cannot diverge between them. Their values are checked in one place,
// validatePipelineOptions (compiler/pipeline/Pipeline.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_PIPELINEOPTIONS_TD
#define SITS_PASSES_PIPELINEOPTIONS_TD

include "mlir/Pass/PassBase.td"

// An option of the pipeline and of sitsc. The help text ends with the
// default, written once here; `valueDesc` names the value in --help
// (`--weights=<type>`; empty: the type's, `<long>`).
class PipelineOption<string varName, string arg, string valueType,
                     string default, string desc, string valueDesc = "">
    : Option<varName, arg, valueType, default,
             desc # " (default: " # !subst("\"", "", default) # ")",
             !if(!empty(valueDesc), "",
                 "::llvm::cl::value_desc(\"" # valueDesc # "\")")> {
  string valueDescription = valueDesc;
}

def MaxSeqLenOption : PipelineOption<"maxSeqLen", "max-seq-len", "int64_t",
    "2048",
    "Tokens per sequence the KV cache holds, prompt and generated tokens "
    "together">;
def MaxBatchOption : PipelineOption<"maxBatch", "max-batch", "int64_t", "8",
    "Sequences decoded together at most">;

def WeightsOption : PipelineOption<"weights", "weights", "std::string",
    "\"fp16\"",
    "Weight storage: fp16 (as --dtype), int8 or int4 (quantized round to "
    "nearest, in groups)", "type">;
def WeightGroupOption : PipelineOption<"weightGroup", "weight-group",
    "int64_t", "128",
    "Weights per quantization scale: a multiple of 32 for int4, of 16 for "
    "int8">;
def WeightScaleOption : PipelineOption<"weightScale", "weight-scale",
    "std::string", "\"mse\"",
    "Weight scales: mse (each group's clipping ratio chosen for the smallest "
    "squared error) or absmax", "rule">;

def KVCacheOption : PipelineOption<"kvCache", "kv-cache", "std::string",
    "\"fp16\"",
    "KV-cache storage of tokens outside the hot window: fp16, int8 or int4",
    "type">;
def KVHotWindowOption : PipelineOption<"kvHotWindow", "kv-hot-window",
    "int64_t", "512", "Newest tokens per sequence kept in FP16">;
def KVKeysOption : PipelineOption<"kvKeys", "kv-keys", "std::string",
    "\"auto\"",
    "Grouping of the quantized keys: auto (per-channel, measured best for "
    "int8 and int4), per-token or per-channel", "groups">;
def KVChannelBlockOption : PipelineOption<"kvChannelBlock",
    "kv-channel-block", "int64_t", "64",
    "Tokens per block of per-channel key scales">;

def TvcOption : PipelineOption<"tvc", "tvc", "std::string", "\"off\"",
    "LM head: off, or exact for the token viability classifier (low-rank "
    "preview, exact candidates, proof, full-head fallback)", "mode">;
def TvcRankOption : PipelineOption<"tvcRank", "tvc-rank", "int64_t", "0",
    "Rank of the TVC preview, 0 for half the hidden size">;
def TvcCandidatesOption : PipelineOption<"tvcCandidates", "tvc-candidates",
    "int64_t", "256", "Vocabulary rows TVC scores exactly per position">;
def TvcTopKOption : PipelineOption<"tvcTopK", "tvc-top-k", "int64_t", "1",
    "Largest top-k sampling TVC serves exactly, 1 for greedy only">;

def TensorParallelOption : PipelineOption<"tensorParallel", "tensor-parallel",
    "int64_t", "1",
    "Ranks (GPUs) to split the program over by tensor parallelism: attention "
    "heads, MLP columns and the vocabulary; 1 splits nothing. Stops at the "
    "optimized program: the CUDA backend runs one rank">;

#endif // SITS_PASSES_PIPELINEOPTIONS_TD
