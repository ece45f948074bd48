//===- Modes.h - The things sitsc does besides printing IR ------*- C++ -*-===//
//
// sitsc.cpp parses the common options and runs the pipeline; each mode below
// lives in its own file with its own options (in the `sitsc options`
// category), so that they stay readable and testable apart.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_SITSC_MODES_H
#define SITS_COMPILER_SITSC_MODES_H

#include "backends/cuda/Target.h"
#include "compiler/pipeline/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace sits::sitsc {

/// The category every sitsc option belongs to (the others are hidden).
llvm::cl::OptionCategory &getCategory();

/// Prints `message` as an error of sitsc; returns the exit code (1).
int fail(const llvm::Twine &message);

//===- Engines (EngineModes.cpp) ------------------------------------------===//

/// `sitsc --inspect ENGINE`: set when the user asked for it.
std::optional<std::string> getInspectPath();
/// Prints a summary of the engine at `path`; returns the exit code.
int inspectEngine(llvm::StringRef path);
/// Checks the engine options (--target, --dtype, ...) before any work.
std::optional<std::string> validateEngineOptions();

/// The code generation options from the command line (validated by
/// validateEngineOptions), for the fusion passes and the code generator.
codegen::CodegenOptions getCodegenOptions();
/// `--emit=cuda`: prints the CUDA C++ source generated for `module` (the
/// optimized program).
int emitCuda(mlir::ModuleOp module, llvm::raw_ostream &os);
/// Compiles `module` (the optimized program of the model at `inputPath`)
/// into an engine and writes it to `outputPath` (atomically, refusing to
/// replace a file without --force). `configEosIds` (genai_config.json's)
/// join the tokenizer's EOS ids. Its steps are timed under `timing`.
int writeEngine(mlir::ModuleOp module, llvm::StringRef inputPath,
                llvm::StringRef outputPath, const PipelineOptions &options,
                llvm::ArrayRef<int32_t> configEosIds,
                mlir::TimingScope &timing);

//===- Quantization (sitsc.cpp) -------------------------------------------===//

/// Prints the KV-cache bytes per token and in total that the options imply
/// (nothing for a program without a KV cache).
void printKVCacheSummary(mlir::ModuleOp module, llvm::raw_ostream &os);
/// Refuses, with an error at the op, a program with ops that no GPU kernel
/// implements yet (quantize, dequantize other than of linear weights, a
/// quantized KV cache, TVC, and checkOneRank's).
mlir::LogicalResult checkGpuKernelsExist(mlir::ModuleOp module);
/// Refuses a tensor-parallel program (shards, collectives, an embedding of
/// part of the vocabulary, sits.tensor_parallel > 1): the CUDA backend
/// plans one rank.
mlir::LogicalResult checkOneRank(mlir::ModuleOp module);

//===- CPU checks (VerifyModes.cpp) ---------------------------------------===//

/// Whether --verify, --verify-greedy or --reference-perplexity was given.
bool isVerifyRequested();
/// Checks the verify options and sets `stage` to the last one they run on.
std::optional<std::string> validateVerifyOptions(Stage &stage);
/// Runs the requested checks on the stages before the last that
/// --verify-stage lists, each on a copy of `imported` compiled to it;
/// returns non-zero when a check fails.
int verifyEarlierStages(mlir::ModuleOp imported,
                        const PipelineOptions &options);
/// Runs the requested checks on `module` (the program of `stage`);
/// returns the exit code (non-zero when a check fails).
int runVerifyModes(mlir::ModuleOp module, Stage stage);

} // namespace sits::sitsc

#endif // SITS_COMPILER_SITSC_MODES_H
