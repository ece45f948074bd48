//===- Server.cpp - The OpenAI-compatible HTTP server ---------------------===//
//
// HTTP threads parse and check a request, submit it to the scheduler and
// wait on the request's channel, which the scheduler thread fills through
// the request's callback. A streamed response writes each event as it
// comes; a client that goes away cancels its request.
//
//===----------------------------------------------------------------------===//

#include "Server.h"
#include "OpenAI.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <thread>

using namespace sits;
using namespace sits::serve;
using json = nlohmann::json;

namespace {
/// A request's events, from the scheduler thread to its HTTP thread.
struct Channel {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<RequestEvent> events;
  bool finished = false;
  /// The client went away: the next callback cancels the request.
  std::atomic<bool> gone{false};

  /// The request's callback (scheduler thread).
  bool push(const RequestEvent &event) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back(event);
      finished = finished || event.finished;
    }
    ready.notify_all();
    return !gone.load();
  }
  /// Waits for events (at most `timeout`) and takes them.
  std::deque<RequestEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    ready.wait_for(lock, timeout, [&] { return !events.empty(); });
    std::deque<RequestEvent> out;
    out.swap(events);
    return out;
  }
};
} // namespace

static std::string dump(const json &value) {
  // Never throw on text that is not valid UTF-8: replace it.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

static void sendError(httplib::Response &res, const ApiError &error) {
  res.status = error.status;
  res.set_content(dump(errorBody(error)), "application/json");
}

struct Server::Impl {
  Impl(Scheduler &scheduler, ModelInfo model, ServeOptions options,
       Metrics &metrics)
      : scheduler(scheduler), model(std::move(model)),
        options(std::move(options)), metrics(metrics) {}

  void routes();
  void generate(Endpoint endpoint, const httplib::Request &req,
                httplib::Response &res);
  void respondWhole(Endpoint endpoint, const std::string &id,
                    std::shared_ptr<Channel> channel, httplib::Response &res);
  void respondStream(Endpoint endpoint, const std::string &id,
                     uint64_t requestId, bool includeUsage,
                     std::shared_ptr<Channel> channel, httplib::Response &res);

  Scheduler &scheduler;
  ModelInfo model;
  ServeOptions options;
  Metrics &metrics;
  /// Streamed responses not yet finished: stopping waits for them to send
  /// their last event, since httplib ends a chunked response it is writing
  /// once it stops (the client would see a dropped connection, not why).
  /// Declared before `http`, whose worker threads (joined when it is
  /// destroyed) release their streams through these.
  std::mutex streamsMutex;
  std::condition_variable streamsEnded;
  int openStreams = 0;
  httplib::Server http;
  std::atomic<bool> stopping{false};
};

void Server::Impl::generate(Endpoint endpoint, const httplib::Request &req,
                            httplib::Response &res) {
  ParsedRequest parsed;
  try {
    parsed = parseRequest(endpoint, req.body, model);
  } catch (const ApiError &error) {
    metrics.requestRejected(error.status == 413 ? "too_long" : "invalid");
    return sendError(res, error);
  } catch (const Error &error) {
    // The tokenizer or the chat template refused the input.
    metrics.requestRejected("invalid");
    return sendError(res, ApiError(400, error.what(), "",
                                   error.code() == ErrorCode::TemplateError
                                       ? "template_error"
                                       : "invalid_text"));
  }
  auto channel = std::make_shared<Channel>();
  // The callback holds the channel: it outlives this handler if need be.
  EventCallback onEvent = [channel](const RequestEvent &event) {
    return channel->push(event);
  };
  Submission submitted =
      scheduler.submit(std::move(parsed.request), std::move(onEvent));
  switch (submitted.rejection) {
  case Rejection::None:
    break;
  case Rejection::QueueFull:
    res.set_header("Retry-After", std::to_string(submitted.retryAfterSeconds));
    return sendError(res, ApiError(429, submitted.message, "",
                                   "rate_limit_exceeded", "rate_limit_error"));
  case Rejection::TooLong:
    return sendError(
        res, ApiError(413, submitted.message, "", "context_length_exceeded"));
  case Rejection::Invalid:
    return sendError(res,
                     ApiError(422, submitted.message, "", "invalid_value"));
  case Rejection::ShuttingDown:
    return sendError(res, ApiError(503, submitted.message, "", "shutting_down",
                                   "server_error"));
  }
  std::string id = (endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") +
                   std::to_string(submitted.id);
  if (parsed.stream)
    respondStream(endpoint, id, submitted.id, parsed.includeUsage, channel,
                  res);
  else
    respondWhole(endpoint, id, channel, res);
}

void Server::Impl::respondWhole(Endpoint endpoint, const std::string &id,
                                std::shared_ptr<Channel> channel,
                                httplib::Response &res) {
  std::string text;
  std::vector<int32_t> tokens;
  while (true) {
    for (RequestEvent &event : channel->take(std::chrono::milliseconds(500))) {
      text += event.text;
      tokens.insert(tokens.end(), event.tokens.begin(), event.tokens.end());
      if (!event.finished)
        continue;
      if (!event.error.empty())
        return sendError(res, ApiError(500, event.error, "", "backend_error",
                                       "server_error"));
      if (event.reason == FinishReason::Cancelled)
        return sendError(res, ApiError(503,
                                       "the request was cancelled: the "
                                       "server is shutting down",
                                       "", "shutting_down", "server_error"));
      res.set_content(dump(responseBody(endpoint, id, model.name, text, tokens,
                                        event.reason, event.promptTokens,
                                        event.completionTokens)),
                      "application/json");
      return;
    }
  }
}

/// How long a stream's HTTP thread waits for events before it writes an
/// SSE comment to learn whether the client is still there.
static constexpr int kStreamPollMs = 500;

void Server::Impl::respondStream(Endpoint endpoint, const std::string &id,
                                 uint64_t requestId, bool includeUsage,
                                 std::shared_ptr<Channel> channel,
                                 httplib::Response &res) {
  auto first = std::make_shared<bool>(true);
  auto provider = [this, endpoint, id, requestId, includeUsage, channel,
                   first](size_t, httplib::DataSink &sink) {
    auto write = [&](const std::string &text) {
      if (sink.write(text.data(), text.size()))
        return true;
      // The client went away: cancel before the next step (or, still
      // waiting, before it takes a slot).
      channel->gone = true;
      scheduler.cancel(requestId);
      return false;
    };
    auto send = [&](const std::string &data) {
      return write("data: " + data + "\n\n");
    };
    std::deque<RequestEvent> events =
        channel->take(std::chrono::milliseconds(kStreamPollMs));
    // Nothing for a while (waiting for a slot, a long prefill): an SSE
    // comment, which clients ignore, finds out whether the client is still
    // there (a write to a closed connection fails), so that a request
    // nobody reads does not keep its place in the queue or its slot.
    if (events.empty())
      return write(": waiting\n\n");
    for (RequestEvent &event : events) {
      if (!event.tokens.empty() || !event.text.empty()) {
        if (!send(dump(chunkBody(endpoint, id, model.name, event.text,
                                 event.tokens, *first, nullptr))))
          return false;
        *first = false;
      }
      if (!event.finished)
        continue;
      if (!event.error.empty() || event.reason == FinishReason::Cancelled) {
        std::string message =
            event.error.empty()
                ? "the request was cancelled: the server is shutting down"
                : event.error;
        send(dump(errorBody(
            ApiError(500, message, "", "backend_error", "server_error"))));
      } else {
        if (!send(dump(chunkBody(endpoint, id, model.name, "", {}, *first,
                                 openAIFinishReason(event.reason)))))
          return false;
        if (includeUsage) {
          json usage =
              chunkBody(endpoint, id, model.name, "", {}, false, "stop");
          usage["choices"] = json::array();
          usage["usage"] =
              usageBody(event.promptTokens, event.completionTokens);
          if (!send(dump(usage)))
            return false;
        }
      }
      if (!send("[DONE]"))
        return false;
      sink.done();
      return true;
    }
    return true;
  };
  // However the response ends, a request still running is cancelled.
  {
    std::lock_guard<std::mutex> lock(streamsMutex);
    ++openStreams;
  }
  auto release = [this, channel, requestId](bool) {
    {
      std::lock_guard<std::mutex> lock(streamsMutex);
      --openStreams;
    }
    streamsEnded.notify_all();
    channel->gone = true;
    bool finished;
    {
      std::lock_guard<std::mutex> lock(channel->mutex);
      finished = channel->finished;
    }
    if (!finished)
      scheduler.cancel(requestId);
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", provider, release);
}

void Server::Impl::routes() {
  http.Post("/v1/completions",
            [this](const httplib::Request &req, httplib::Response &res) {
              generate(Endpoint::Completions, req, res);
            });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request &req, httplib::Response &res) {
              generate(Endpoint::ChatCompletions, req, res);
            });
  for (const char *path : {"/v1/completions", "/v1/chat/completions"})
    http.Get(path, [](const httplib::Request &req, httplib::Response &res) {
      res.set_header("Allow", "POST");
      sendError(res, ApiError(405, req.path + " takes POST requests", "",
                              "method_not_allowed"));
    });
  http.Get("/v1/models", [this](const httplib::Request &,
                                httplib::Response &res) {
    json models = {
        {"object", "list"},
        {"data", json::array({{{"id", model.name},
                               {"object", "model"},
                               {"created", 0},
                               {"owned_by", "sits"},
                               {"max_model_len", model.maxSequenceLength}}})}};
    res.set_content(dump(models), "application/json");
  });
  http.Get("/health", [this](const httplib::Request &, httplib::Response &res) {
    if (stopping) {
      sendError(res, ApiError(503, "the server is shutting down", "",
                              "shutting_down", "server_error"));
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  http.Get("/metrics",
           [this](const httplib::Request &, httplib::Response &res) {
             res.set_content(metrics.render(), "text/plain; version=0.0.4");
           });
  // Errors httplib finds itself (no route, a body too large) get the same
  // JSON error object; responses that have a body already keep it.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request &req, httplib::Response &res) {
        if (!res.body.empty())
          return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413)
          sendError(res, ApiError(413,
                                  "the request body exceeds " +
                                      std::to_string(options.maxBodyBytes) +
                                      " bytes",
                                  "", "body_too_large"));
        else if (res.status == 404)
          sendError(res,
                    ApiError(404, "no endpoint " + req.method + " " + req.path,
                             "", "not_found"));
        else
          sendError(
              res, ApiError(res.status, "the request failed with HTTP status " +
                                            std::to_string(res.status)));
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request &,
                                httplib::Response &res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception &error) {
      message = std::string("internal error: ") + error.what();
    } catch (...) {
    }
    sendError(res,
              ApiError(500, message, "", "internal_error", "server_error"));
  });
  http.set_logger(
      [this](const httplib::Request &, const httplib::Response &res) {
        metrics.httpResponse(res.status);
      });
}

Server::Server(Scheduler &scheduler,
               std::shared_ptr<const ModelTokenizer> tokenizer,
               uint32_t maxSequenceLength, ServeOptions options,
               Metrics &metrics) {
  if (!tokenizer)
    throw Error(ErrorCode::NoTokenizer,
                "the server needs the model's tokenizer");
  ModelInfo model{options.modelName, std::move(tokenizer), maxSequenceLength};
  if (model.name.empty())
    throw Error(ErrorCode::InvalidArgument, "the model needs a name");
  impl = std::make_unique<Impl>(scheduler, std::move(model), options, metrics);
  // Enough threads for every request that can be in flight (slots and
  // queue), plus a few for /health and /metrics.
  size_t threads =
      std::min<size_t>(1024, size_t(scheduler.slots()) + options.maxQueue + 8);
  impl->http.new_task_queue = [threads] {
    return new httplib::ThreadPool(threads);
  };
  impl->http.set_payload_max_length(options.maxBodyBytes);
  // httplib's default is SO_REUSEPORT, which lets a second server bind a
  // port in use and share its connections silently: reuse only a port
  // nobody listens on (SO_REUSEADDR), so that a busy one is an error.
  impl->http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  impl->routes();
}

Server::~Server() { stop(); }

uint32_t Server::bind() {
  const ServeOptions &options = impl->options;
  int port = options.port == 0
                 ? impl->http.bind_to_any_port(options.host)
                 : (impl->http.bind_to_port(options.host, int(options.port))
                        ? int(options.port)
                        : -1);
  if (port <= 0)
    throw Error(ErrorCode::InvalidArgument,
                "cannot listen on " + options.host + ":" +
                    std::to_string(options.port) +
                    " (address in use or not this machine's)");
  return static_cast<uint32_t>(port);
}

void Server::run() { impl->http.listen_after_bind(); }

void Server::stop() {
  if (!impl || impl->stopping.exchange(true))
    return;
  // Requests end first (as cancelled), so that no handler waits forever;
  // then the streams get a few seconds to send that last event.
  impl->scheduler.stop();
  {
    std::unique_lock<std::mutex> lock(impl->streamsMutex);
    impl->streamsEnded.wait_for(lock, std::chrono::seconds(5),
                                [&] { return impl->openStreams == 0; });
  }
  impl->http.stop();
}

static sigset_t stopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

void sits::serve::blockStopSignals() {
  sigset_t signals = stopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

void sits::serve::serveUntilStopped(
    Backend &backend, std::shared_ptr<const ModelTokenizer> tokenizer,
    const ServeOptions &options, const std::string &tool,
    const std::string &device) {
  // Before the scheduler, which sees the pool through the backend.
  if (options.prefixCacheBlocks > 0) {
    // A paged cache shares its own blocks: the prefix cache's are those.
    const uint32_t shared = backend.sharedBlockTokens();
    const uint32_t blockTokens = shared ? shared : options.prefixBlockTokens;
    backend.allocateBlockPool(blockTokens, options.prefixCacheBlocks);
    // A paged quantized cache copies the blocks a hit writes again.
    const char *how = !shared ? ""
                      : backend.resavesCachedBlocks()
                          ? " (the paged quantized KV cache's: shared, but "
                            "for the last ones a hit writes again)"
                          : " (the paged KV cache's, shared, not copied)";
    std::fprintf(stderr, "%s: prefix cache of %u blocks of %u tokens%s\n",
                 tool.c_str(), options.prefixCacheBlocks, blockTokens, how);
  }
  Metrics metrics;
  SchedulerOptions schedulerOptions;
  schedulerOptions.maxQueue = options.maxQueue;
  schedulerOptions.maxPrefillChunk = options.maxPrefillChunk;
  schedulerOptions.maxStepPrefillTokens = options.maxStepPrefillTokens;
  schedulerOptions.slaP99TokenSeconds = options.slaP99TokenMs / 1000.0;
  schedulerOptions.slaControl.tailShare = options.slaTailShare;
  schedulerOptions.minRetryAfter = options.retryAfter;
  Scheduler scheduler(backend, tokenizer, schedulerOptions, &metrics);
  if (backend.sharedBlockTokens() && backend.kvPoolBlocks())
    std::fprintf(stderr,
                 "%s: a paged KV cache of %u blocks of %u tokens: requests "
                 "start when the blocks they need are free\n",
                 tool.c_str(), backend.kvPoolBlocks(),
                 backend.sharedBlockTokens());
  Server server(scheduler, tokenizer, scheduler.maxSequenceLength(), options,
                metrics);
  uint32_t port = server.bind();
  scheduler.start();
  std::thread waiter([&server] {
    sigset_t signals = stopSignals();
    int signal = 0;
    sigwait(&signals, &signal);
    server.stop();
  });
  waiter.detach();
  // Tests read the port from this line.
  std::printf("%s: serving '%s' on http://%s:%u (%u slots, %u tokens each, "
              "%s)\n",
              tool.c_str(), options.modelName.c_str(), options.host.c_str(),
              port, backend.slots(), scheduler.maxSequenceLength(),
              device.c_str());
  std::fflush(stdout);
  server.run();
  server.stop();
}
