//===- sits-serve-reference.cpp - The server on the CPU reference ---------===//
//
//   sits-serve-reference MODEL.onnx [--tokenizer=DIR] [--max-batch=N]
//       [--max-seq-len=N] [--host=H] [--port=P] [--max-queue=N] ...
//
// The OpenAI-compatible server of sits-serve (docs/serving.md) over the CPU
// reference executor instead of a GPU engine: the model is compiled to the
// optimized stage in memory (the pipeline options as sitsc takes them;
// --max-batch is the number of slots, --max-seq-len each one's context) and
// every step runs on the CPU. For tests and for trying the API without a
// GPU; slow on real models.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Pipeline.h"
#include "compiler/registration/Registration.h"
#include "compiler/serve/ReferenceBackend.h"
#include "frontends/onnx/OnnxImporter.h"

#include "Metrics.h"
#include "Scheduler.h"
#include "Server.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <csignal>
#include <cstdio>
#include <thread>

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

  // Signals are taken by one thread (sigwait): the others never see them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that goes away must not end the server: a failed write
  // cancels its request instead.
  std::signal(SIGPIPE, SIG_IGN);

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
  PassManager pm(&context);
  sits::buildPipeline(pm, sits::Stage::Optimized, options);
  if (failed(pm.run(*module)))
    return fail("compiling '" + modelFile + "' to the optimized stage failed");

  sits::reference::ExecutorOptions executorOptions;
  executorOptions.numThreads = numThreads;
  auto backend = sits::ReferenceBackend::create(*module, executorOptions);
  if (!backend)
    return fail(llvm::toString(backend.takeError()));

  std::string folder = tokenizerFolder;
  if (folder.empty()) {
    folder = llvm::sys::path::parent_path(modelFile).str();
    if (folder.empty())
      folder = ".";
  }
  if (serveOptions.modelName.empty())
    serveOptions.modelName = llvm::sys::path::stem(modelFile).str();
  try {
    auto tokenizer = sits::ModelTokenizer::fromFiles(
        sits::ModelTokenizer::readFolder(folder));
    sits::serve::Metrics metrics;
    sits::serve::SchedulerOptions schedulerOptions;
    schedulerOptions.maxQueue = serveOptions.maxQueue;
    schedulerOptions.maxPrefillChunk = serveOptions.maxPrefillChunk;
    sits::serve::Scheduler scheduler(**backend, tokenizer, schedulerOptions,
                                     &metrics);
    sits::serve::Server server(scheduler, tokenizer,
                               (*backend)->maxSequenceLength(), serveOptions,
                               metrics);
    uint32_t port = server.bind();
    scheduler.start();
    std::thread waiter([&] {
      int signal = 0;
      sigwait(&signals, &signal);
      server.stop();
    });
    waiter.detach();
    // Tests read the port from this line.
    std::printf("sits-serve-reference: serving '%s' on http://%s:%u (%u "
                "slots, %u tokens each, CPU reference executor)\n",
                serveOptions.modelName.c_str(), serveOptions.host.c_str(), port,
                (*backend)->slots(), (*backend)->maxSequenceLength());
    std::fflush(stdout);
    server.run();
    server.stop();
  } catch (const sits::Error &error) {
    return fail(error.what());
  }
  return 0;
}
