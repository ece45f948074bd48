//===- sits-serve-reference.cpp - The server on the CPU reference ---------===//
//
//   sits-serve-reference MODEL.onnx [--tokenizer=DIR] [--max-batch=N]
//       [--max-seq-len=N] [--kv-layout=paged [--kv-block-tokens=N]
//       [--kv-pool-blocks=N]] [--host=H] [--port=P] [--max-queue=N] ...
//
// The OpenAI-compatible server of sits-serve (docs/serving.md) over the CPU
// reference executor instead of a GPU engine: the model is compiled to the
// optimized stage in memory (the pipeline options as sitsc takes them;
// --max-batch is the number of slots, --max-seq-len each one's context) and
// every step runs on the CPU. For tests and for trying the API without a
// GPU; slow on real models. --kv-layout=paged keeps a paged engine's
// accounting of KV blocks (as sitsc's option of that name makes one), so
// that requests are admitted by free blocks as sits-serve admits them.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/GenAIConfig.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/registration/Registration.h"
#include "compiler/serve/ReferenceBackend.h"
#include "frontends/onnx/OnnxImporter.h"

#include "Server.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;

static llvm::cl::opt<std::string> modelFile(llvm::cl::Positional,
                                            llvm::cl::desc("<model.onnx>"),
                                            llvm::cl::Required);
static llvm::cl::opt<std::string> tokenizerFolder(
    "tokenizer",
    llvm::cl::desc("The folder of tokenizer.json (and tokenizer_config.json, "
                   "generation_config.json) (default: the model's folder)"));
static llvm::cl::opt<unsigned>
    numThreads("threads",
               llvm::cl::desc("Threads for matrix products (0: automatic)"),
               llvm::cl::init(0));
// A paged engine's KV blocks, as sitsc names them (the code generator's
// options, which this tool does not link).
static llvm::cl::opt<std::string>
    kvLayout("kv-layout",
             llvm::cl::desc("contiguous, or paged: account for the KV cache "
                            "in blocks from a bounded pool, as a paged "
                            "engine's (requests are admitted by free blocks)"),
             llvm::cl::init("contiguous"));
static llvm::cl::opt<unsigned> kvBlockTokens(
    "kv-block-tokens",
    llvm::cl::desc("Tokens per block of a paged KV cache: a power of two "
                   "from 16 to 1024"),
    llvm::cl::init(64));
static llvm::cl::opt<unsigned> kvPoolBlocks(
    "kv-pool-blocks",
    llvm::cl::desc("Blocks in a paged KV cache's pool (0: --max-batch full "
                   "sequences; fewer than one sequence's limit the context)"),
    llvm::cl::init(0));
// The pipeline's options, as sitsc takes them (--max-batch, --max-seq-len).
static sits::PipelineFlags pipelineFlags(llvm::cl::getGeneralCategory());

static int fail(const llvm::Twine &message) {
  llvm::errs() << "sits-serve-reference: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  sits::serve::ServeOptions serveOptions;
  std::vector<char *> rest;
  std::string problem =
      sits::serve::parseServeOptions(argc, argv, serveOptions, rest);
  if (!problem.empty())
    return fail(problem);
  static std::string overview =
      "sits-serve-reference: an OpenAI-compatible server over the CPU "
      "reference executor\n\nServing options:\n" +
      sits::serve::serveOptionsHelp();
  llvm::cl::ParseCommandLineOptions(static_cast<int>(rest.size()), rest.data(),
                                    overview);

  // Before any thread starts: the stop signals go to one waiting thread.
  sits::serve::blockStopSignals();

  DialectRegistry registry;
  sits::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  if (!llvm::StringRef(modelFile).ends_with(".onnx"))
    return fail("expected an .onnx model, got '" + modelFile + "'");
  OwningOpRef<ModuleOp> module = sits::importOnnxFile(modelFile, context);
  if (!module)
    return fail("cannot import '" + modelFile + "'");
  sits::PipelineOptions options;
  pipelineFlags.getOptions(options);
  if (std::optional<std::string> invalid =
          sits::validatePipelineOptions(options, sits::Stage::Optimized))
    return fail(*invalid);
  // A GenAI builder model's context length bounds --max-seq-len.
  llvm::Expected<std::optional<sits::GenAIConfig>> genai =
      sits::readGenAIConfig(modelFile);
  if (!genai)
    return fail(llvm::toString(genai.takeError()));
  if (*genai) {
    llvm::Expected<std::string> note = sits::applyContextLength(
        **genai, pipelineFlags.maxSeqLen.getNumOccurrences() > 0, options);
    if (!note)
      return fail(llvm::toString(note.takeError()));
    if (!note->empty())
      llvm::errs() << "sits-serve-reference: " << *note << "\n";
  }
  PassManager pm(&context);
  sits::buildPipeline(pm, sits::Stage::Optimized, options);
  if (failed(pm.run(*module)))
    return fail("compiling '" + modelFile + "' to the optimized stage failed");

  sits::reference::ExecutorOptions executorOptions;
  executorOptions.numThreads = numThreads;
  auto backend = sits::ReferenceBackend::create(*module, executorOptions);
  if (!backend)
    return fail(llvm::toString(backend.takeError()));
  if (kvLayout != "contiguous" && kvLayout != "paged")
    return fail("--kv-layout must be contiguous or paged, got '" + kvLayout +
                "'");
  if (kvLayout == "contiguous" &&
      (kvBlockTokens.getNumOccurrences() || kvPoolBlocks.getNumOccurrences()))
    return fail(std::string("--") +
                (kvBlockTokens.getNumOccurrences() ? "kv-block-tokens"
                                                   : "kv-pool-blocks") +
                " needs --kv-layout=paged");

  std::string folder = tokenizerFolder;
  if (folder.empty()) {
    folder = llvm::sys::path::parent_path(modelFile).str();
    if (folder.empty())
      folder = ".";
  }
  if (serveOptions.modelName.empty())
    serveOptions.modelName = llvm::sys::path::stem(modelFile).str();
  try {
    if (kvLayout == "paged")
      (*backend)->usePagedCache(kvBlockTokens, kvPoolBlocks);
    auto tokenizer = sits::ModelTokenizer::fromFiles(
        sits::ModelTokenizer::readFolder(folder));
    sits::serve::serveUntilStopped(**backend, tokenizer, serveOptions,
                                   "sits-serve-reference",
                                   "CPU reference executor");
  } catch (const sits::Error &error) {
    return fail(error.what());
  }
  return 0;
}
