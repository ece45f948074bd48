//===- Metrics.h - The server's Prometheus metrics --------------*- C++ -*-===//
//
// Counters, gauges and histograms the scheduler and the HTTP server update
// from their threads, rendered in the Prometheus text format (0.0.4) for
// GET /metrics. Every metric is named `sits_...`; docs/serving.md lists them.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_METRICS_H
#define SITS_RUNTIME_SERVE_METRICS_H

#include "StepKind.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace sits::serve {

/// A cumulative histogram over fixed upper bounds.
class Histogram {
public:
  explicit Histogram(std::vector<double> upperBounds);
  void observe(double value);
  /// The `name_bucket`, `name_sum` and `name_count` lines.
  /// `labels` (`key="value"`, comma-separated) go on every line.
  void render(const std::string &name, std::string &out,
              const std::string &labels = "") const;
  uint64_t count() const { return total; }

private:
  std::vector<double> bounds;
  std::vector<uint64_t> counts; ///< per bound, not cumulative
  double sum = 0;
  uint64_t total = 0;
};

class Metrics {
public:
  Metrics();

  /// A request the scheduler accepted (`promptTokens` to prefill).
  void requestAccepted(uint32_t promptTokens);
  /// A request refused before it ran; `reason` is a label value
  /// ("queue_full", "too_long", "invalid", "shutting_down").
  void requestRejected(const std::string &reason);
  /// A request that ended; `reason` is its finish reason ("length", "eos",
  /// "stop", "cancelled", "error").
  void requestFinished(const std::string &reason, double seconds);
  /// A token delivered: its latency since arrival (the first token) or
  /// since the request's previous token.
  void firstToken(double seconds);
  void nextToken(double seconds);
  /// One backend step of `kind` over `batch` slots, `prefillTokens` of its
  /// tokens prompt tokens and `sampledRows` of its slots sampling a token.
  void step(StepKind kind, uint32_t batch, uint32_t prefillTokens,
            uint32_t sampledRows, double seconds);
  /// Requests waiting for a slot and requests in slots, now.
  void setQueue(uint32_t waiting, uint32_t running);
  /// An HTTP response sent, by status code.
  void httpResponse(int status);
  /// The SLA control's admitted batch limit, last window's p99 inter-token
  /// latency, prefill budget (BatchController.h; 0: no budget, or prompt
  /// rows off), the share of slow gaps in its tail ledger and whether
  /// prompt rows are off.
  void setBatchControl(uint32_t limit, double windowP99Seconds,
                       uint32_t prefillBudgetTokens, double tailShare,
                       bool promptRowsOff = false);
  /// A bulk step ran: it prefilled past the SLA budget, spending the tail
  /// the p99 target allows.
  void slaBulkStep();
  /// A request admitted with prefix caching on: `promptTokens` of which
  /// `hitTokens` came from the cache.
  void prefixLookup(uint32_t promptTokens, uint32_t hitTokens);
  /// The prefix cache's pool blocks holding tokens and free.
  void setPrefixBlocks(uint32_t used, uint32_t free);
  /// A paged KV cache's pool: blocks in it and blocks a sequence can take
  /// (free, or held only by the prefix cache).
  void setKvPool(uint32_t blocks, uint32_t available);
  /// A running request stepped aside for lack of KV blocks (it runs again
  /// later, recomputing its tokens).
  void requestPreempted();

  /// Everything, in the Prometheus text format.
  std::string render() const;

private:
  mutable std::mutex mutex;
  std::map<std::string, uint64_t> finished, rejected;
  std::map<int, uint64_t> responses;
  uint64_t accepted = 0, promptTokens = 0, generatedTokens = 0, steps = 0;
  uint64_t prefillTokens = 0, preempted = 0, bulkSteps = 0;
  uint32_t waiting = 0, running = 0;
  uint32_t batchLimit = 0;
  double slaWindowP99 = 0;
  uint32_t prefillBudget = 0;
  double slaTailShare = 0;
  bool slaPromptRowsOff = false;
  uint64_t prefixPromptTokens = 0, prefixHitTokens = 0;
  uint32_t prefixBlocksUsed = 0, prefixBlocksFree = 0;
  uint32_t kvBlocks = 0, kvAvailable = 0;
  Histogram timeToFirstToken, interTokenLatency, batchSize, requestSeconds;
  /// Per StepKind: step durations, prompt tokens and sampled rows.
  std::vector<Histogram> stepSeconds;
  uint64_t stepPromptTokens[kStepKinds] = {};
  uint64_t stepSampledRows[kStepKinds] = {};
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_METRICS_H
