//===- sits-serve.cpp - The OpenAI-compatible server over an engine -------===//
//
//   sits-serve ENGINE.sits [--host H] [--port P] [--model-name NAME]
//              [--max-queue N] [--max-prefill-chunk N] [--device D]
//              [--no-cuda-graph] [--sla-p99-token-ms MS]
//              [--prefix-cache-blocks N] [--prefix-block-tokens N]
//
// Serves the engine through runtime/serve (docs/serving.md): its slots are
// the engine's max_batch sequences, each with max_seq_len tokens; every
// step is Session::step (the decode graph of the batch bucket, or one
// prefill launch when prompt chunks are in the step). Text in and out uses
// the tokenizer stored in the engine. Exit codes as sits-run's: 1 a bad
// engine, 2 a bad command line, 4 no GPU or the wrong one.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "Server.h"
#include "SessionBackend.h"
#include "sits/Runtime.h"

#include <chrono>
#include <cstdio>

namespace {

constexpr int kExitBadInput = 1;
constexpr int kExitGpu = 4;

const char *kUsage =
    "usage: sits-serve ENGINE.sits [options]\n"
    "  --device=<d>              GPU to run on (default: 0)\n"
    "  --no-cuda-graph           Launch decode kernels one by one\n";

} // namespace

int main(int argc, char **argv) {
  sits::serve::ServeOptions serveOptions;
  std::vector<char *> rest;
  std::string usage = std::string(kUsage) + sits::serve::serveOptionsHelp();
  sits::tools::CommandLine serveLine("sits-serve", usage.c_str(), argc, argv);
  std::string problem =
      sits::serve::parseServeOptions(argc, argv, serveOptions, rest);
  if (!problem.empty())
    serveLine.usageError(problem);
  sits::tools::CommandLine cl("sits-serve", usage.c_str(), int(rest.size()),
                              rest.data());
  std::string enginePath;
  sits::LoadOptions loadOptions;
  sits::SessionOptions sessionOptions;
  for (int i = 1; i < int(rest.size()); ++i) {
    std::string arg = rest[i];
    if (arg == "--help" || arg == "-h")
      cl.printUsage();
    else if (arg == "--device")
      loadOptions.device = int(cl.parseUnsigned(arg, cl.value(i), 1024));
    else if (arg.rfind("--device=", 0) == 0)
      loadOptions.device =
          int(cl.parseUnsigned("--device", arg.c_str() + 9, 1024));
    else if (arg == "--no-cuda-graph")
      sessionOptions.useCudaGraphs = false;
    else if (arg.rfind("-", 0) == 0)
      cl.usageError("unknown option " + arg);
    else if (enginePath.empty())
      enginePath = arg;
    else
      cl.usageError("more than one engine: '" + enginePath + "' and '" + arg +
                    "'");
  }
  if (enginePath.empty())
    cl.usageError("no engine given");
  if (serveOptions.modelName.empty()) {
    std::string stem = enginePath.substr(enginePath.find_last_of('/') + 1);
    serveOptions.modelName = stem.substr(0, stem.rfind(".sits"));
  }

  sits::serve::blockStopSignals();
  try {
    auto engine = sits::Engine::load(enginePath, loadOptions);
    std::shared_ptr<const sits::ModelTokenizer> tokenizer = engine->tokenizer();
    if (!tokenizer)
      throw sits::Error(sits::ErrorCode::NoTokenizer,
                        "the engine holds no tokenizer (compile it with "
                        "sitsc --tokenizer=DIR)");
    sits::Session session(engine, sessionOptions);
    // Every bucket's decode graph now, not at the first step a request's
    // tokens wait on.
    auto captureStart = std::chrono::steady_clock::now();
    uint32_t graphs = session.captureDecodeGraphs();
    std::fprintf(stderr, "sits-serve: %u decode graphs captured in %.0f ms\n",
                 graphs,
                 std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - captureStart)
                     .count());
    sits::serve::SessionBackend backend(session);
    sits::serve::serveUntilStopped(backend, tokenizer, serveOptions,
                                   "sits-serve", engine->deviceName());
  } catch (const sits::Error &error) {
    std::fprintf(stderr, "sits-serve: error: %s\n", error.what());
    bool gpu = error.code() == sits::ErrorCode::NoGpu ||
               error.code() == sits::ErrorCode::WrongGpu;
    return gpu ? kExitGpu : kExitBadInput;
  }
  return 0;
}
