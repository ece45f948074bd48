//===- Pipeline.h - The stages sitsc runs -----------------------*- C++ -*-===//
//
// sitsc runs a model through fixed stages; `--emit=<stage>` stops after one
// and prints its IR. sits-opt exposes the same pipeline as `sits-pipeline`.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_PIPELINE_PIPELINE_H
#define SITS_COMPILER_PIPELINE_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace sits {

enum class Stage {
  /// One onnx op per ONNX node, shapes inferred.
  Imported,
  /// Exporter idioms raised into sits ops.
  Sits,
  /// Decode passes applied: prefill and decode with a KV cache.
  Optimized,
  /// The CUDA backend's fusions: the kernel.launch ops
  /// (compiler/codegen/transforms).
  Kernels,
  /// Generated CUDA C++ source.
  Cuda,
  /// The engine file.
  Engine,
};

/// The stage named `name` (imported, sits, optimized, kernels, cuda,
/// engine).
std::optional<Stage> parseStage(llvm::StringRef name);
llvm::StringRef getStageName(Stage stage);

/// Options of the compilation pipeline, shared by sitsc and sits-opt.
struct PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
  Option<int64_t> maxSeqLen{
      *this, "max-seq-len",
      llvm::cl::desc("Tokens per sequence the KV cache holds (prompt and "
                     "generated tokens together)"),
      llvm::cl::init(2048)};
  Option<int64_t> maxBatch{*this, "max-batch",
                           llvm::cl::desc("Sequences decoded together at most"),
                           llvm::cl::init(8)};
  Option<std::string> weights{
      *this, "weights",
      llvm::cl::desc("Weight storage: fp16 (as --dtype), int8 or int4 "
                     "(group quantization, --sits-insert-qdq)"),
      llvm::cl::init("fp16")};
  Option<int64_t> weightGroup{*this, "weight-group",
                              llvm::cl::desc("Weights per quantization scale"),
                              llvm::cl::init(128)};
  Option<std::string> weightScale{
      *this, "weight-scale",
      llvm::cl::desc("Weight scales: mse (clipping searched per group) or "
                     "absmax"),
      llvm::cl::init("mse")};
  Option<std::string> kvCache{
      *this, "kv-cache",
      llvm::cl::desc("KV-cache storage of tokens outside the hot window: "
                     "fp16, int8 or int4"),
      llvm::cl::init("fp16")};
  Option<int64_t> kvHotWindow{
      *this, "kv-hot-window",
      llvm::cl::desc("Newest tokens per sequence kept in FP16"),
      llvm::cl::init(512)};
  Option<std::string> kvKeys{
      *this, "kv-keys",
      llvm::cl::desc("Grouping of the quantized keys: auto (per-channel), "
                     "per-token or per-channel"),
      llvm::cl::init("auto")};
  Option<int64_t> kvChannelBlock{
      *this, "kv-channel-block",
      llvm::cl::desc("Tokens per block of per-channel key scales"),
      llvm::cl::init(64)};
  Option<std::string> tvc{
      *this, "tvc",
      llvm::cl::desc("LM head: off, or exact (the token viability "
                     "classifier, --sits-fuse-tvc)"),
      llvm::cl::init("off")};
  Option<int64_t> tvcRank{
      *this, "tvc-rank",
      llvm::cl::desc("Rank of the TVC preview (0: half the hidden size)"),
      llvm::cl::init(0)};
  Option<int64_t> tvcCandidates{
      *this, "tvc-candidates",
      llvm::cl::desc("Vocabulary rows TVC scores exactly per position"),
      llvm::cl::init(256)};
  Option<int64_t> tvcTopK{
      *this, "tvc-top-k",
      llvm::cl::desc("Largest top-k TVC serves exactly (1: greedy)"),
      llvm::cl::init(1)};
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("Last stage to run: sits or optimized"),
      llvm::cl::init("optimized")};
};

/// Checks option values, returning an error message naming the bad option.
std::optional<std::string>
validatePipelineOptions(const PipelineOptions &options);

/// Adds the passes that take an imported program to `last` (Sits or
/// Optimized; Imported adds nothing). Every pass is anchored on the module, so
/// that IR dumps show the whole program after each pass.
void buildPipeline(mlir::OpPassManager &pm, Stage last,
                   const PipelineOptions &options);

/// Registers `sits-pipeline` for sits-opt.
void registerPipelines();

} // namespace sits

#endif // SITS_COMPILER_PIPELINE_PIPELINE_H
