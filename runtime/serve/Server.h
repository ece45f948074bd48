//===- Server.h - The OpenAI-compatible HTTP server -------------*- C++ -*-===//
//
// Serves a Scheduler over HTTP (cpp-httplib):
//
//   POST /v1/completions        text or token-id prompt; SSE with "stream"
//   POST /v1/chat/completions   messages through the model's chat template
//   GET  /v1/models             the one model served
//   GET  /health                200 while the server runs
//   GET  /metrics               Prometheus text format (Metrics.h)
//
// A bad request gets a 4xx status and an OpenAI-style error object naming
// the cause: {"error": {"message", "type", "param", "code"}}.
// docs/serving.md describes the fields each endpoint takes.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_SERVER_H
#define SITS_RUNTIME_SERVE_SERVER_H

#include "Metrics.h"
#include "Scheduler.h"

#include "sits/ModelTokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sits::serve {

/// The serving options every sits-serve tool takes, declared once (name,
/// default, help) in ServeOptions.cpp.
struct ServeOptions {
  std::string host = "127.0.0.1";
  /// 0 picks a free port (printed when the server starts).
  uint32_t port = 8000;
  /// The model's id in the API; empty: the tool picks (the file's stem).
  std::string modelName;
  // The scheduler's options take the scheduler's defaults.
  uint32_t maxQueue = SchedulerOptions().maxQueue;
  uint32_t maxPrefillChunk = SchedulerOptions().maxPrefillChunk;
  uint32_t maxStepPrefillTokens = SchedulerOptions().maxStepPrefillTokens;
  /// The least Retry-After of a 429 response, in seconds.
  uint32_t retryAfter = SchedulerOptions().minRetryAfter;
  /// The p99 inter-token latency (ms) the running batch is limited to keep
  /// under; 0: off.
  double slaP99TokenMs = 0;
  /// The share of inter-token gaps that bulk prefill steps may make slow
  /// (BatchController.h's tail ledger).
  double slaTailShare = SchedulerOptions().slaControl.tailShare;
  /// Prefix cache pool blocks; 0: no prefix caching.
  uint32_t prefixCacheBlocks = 0;
  /// Tokens per prefix cache block.
  uint32_t prefixBlockTokens = 16;
  /// Largest request body in bytes (413 beyond).
  uint64_t maxBodyBytes = 8u << 20;
};

/// Takes the serving options out of argv (`--name=value` or `--name
/// value`) and leaves the others, in order, in `rest`; returns an error
/// message naming the option and the bad value, or "" when all are good.
std::string parseServeOptions(int argc, char **argv, ServeOptions &options,
                              std::vector<char *> &rest);
/// One line per serving option, for a tool's --help.
std::string serveOptionsHelp();

class Server {
public:
  Server(Scheduler &scheduler, std::shared_ptr<const ModelTokenizer> tokenizer,
         uint32_t maxSequenceLength, ServeOptions options, Metrics &metrics);
  ~Server();
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;

  /// Binds host:port; returns the port bound. Throws sits::Error
  /// (InvalidArgument) when it cannot bind.
  uint32_t bind();
  /// Serves until stop() (from any thread).
  void run();
  void stop();

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

/// Blocks SIGINT and SIGTERM in the calling thread (and the threads it
/// starts after), so that serveUntilStopped can wait for them; ignores
/// SIGPIPE (a client that hangs up is a cancelled request). Call first.
void blockStopSignals();

/// What a serving tool does once its backend and tokenizer exist: the
/// scheduler and the HTTP server over `backend`, the line tests read the
/// port from ("TOOL: serving 'MODEL' on http://HOST:PORT (... DEVICE)"), and
/// a clean stop on SIGINT or SIGTERM. Throws sits::Error when the server
/// cannot bind.
void serveUntilStopped(Backend &backend,
                       std::shared_ptr<const ModelTokenizer> tokenizer,
                       const ServeOptions &options, const std::string &tool,
                       const std::string &device);

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_SERVER_H
