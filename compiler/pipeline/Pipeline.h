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
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <optional>
#include <string>

namespace sits {

enum class Stage {
  /// One onnx op per ONNX node, shapes inferred.
  Imported,
  /// Exporter idioms raised into sits ops.
  Sits,
  /// Decode passes applied: prefill and decode with a KV cache.
  Optimized,
  /// The CUDA backend's fusions: the kernel.launch ops
  /// (backends/cuda/transforms).
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

/// Options of the compilation pipeline, shared by sitsc and sits-opt. Each is
/// declared once, in passes/PipelineOptions.td (its name, default and help
/// text), and listed here by sits-tblgen.
struct PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
#define SITS_PIPELINE_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)     \
  Option<TYPE> FIELD{*this, NAME, llvm::cl::desc(HELP),                        \
                     llvm::cl::init(DEFAULT),                                  \
                     llvm::cl::value_desc(VALUE_DESC)};
#include "compiler/pipeline/PipelineOptions.inc"
  /// sits-opt's only: sitsc stops with --emit.
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("Last stage to run: sits or optimized (default: "
                     "optimized)"),
      llvm::cl::init("optimized"), llvm::cl::value_desc("stage")};
};

/// The options of PipelineOptions (not stop-after) as top-level flags of a
/// tool (`sitsc --max-seq-len=4096`), with the same names, defaults and help.
struct PipelineFlags {
  explicit PipelineFlags(llvm::cl::OptionCategory &category)
      : category(category) {}
  PipelineFlags(const PipelineFlags &) = delete;
  PipelineFlags &operator=(const PipelineFlags &) = delete;

  /// Sets `options` to the values the command line gave (or the defaults).
  void getOptions(PipelineOptions &options) const;

  llvm::cl::OptionCategory &category;
#define SITS_PIPELINE_OPTION(FIELD, TYPE, NAME, DEFAULT, VALUE_DESC, HELP)     \
  llvm::cl::opt<TYPE> FIELD{                                                   \
      NAME, llvm::cl::desc(HELP), llvm::cl::init(DEFAULT),                     \
      llvm::cl::value_desc(VALUE_DESC), llvm::cl::cat(category)};
#include "compiler/pipeline/PipelineOptions.inc"
};

/// Checks option values for a pipeline that runs to `last`, returning an
/// error message naming the bad option. The one place the options are
/// checked: sitsc, sits-exec and `sits-opt --sits-pipeline` all call it.
std::optional<std::string>
validatePipelineOptions(const PipelineOptions &options, Stage last);

/// Adds the passes that take an imported program to `last` (Sits or
/// Optimized; Imported adds nothing). Every pass is anchored on the module, so
/// that IR dumps show the whole program after each pass.
void buildPipeline(mlir::OpPassManager &pm, Stage last,
                   const PipelineOptions &options);

/// Registers `sits-pipeline` for sits-opt.
void registerPipelines();

} // namespace sits

#endif // SITS_COMPILER_PIPELINE_PIPELINE_H
