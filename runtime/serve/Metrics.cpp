//===- Metrics.cpp - The server's Prometheus metrics ----------------------===//

#include "Metrics.h"

#include <cmath>
#include <cstdio>

using namespace sits::serve;

Histogram::Histogram(std::vector<double> upperBounds)
    : bounds(std::move(upperBounds)), counts(bounds.size(), 0) {}

void Histogram::observe(double value) {
  for (size_t i = 0; i < bounds.size(); ++i)
    if (value <= bounds[i]) {
      ++counts[i];
      break;
    }
  sum += value;
  ++total;
}

/// A number as Prometheus writes it (shortest round trip is not needed).
static std::string number(double value) {
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  return buffer;
}

void Histogram::render(const std::string &name, std::string &out,
                       const std::string &labels) const {
  const std::string bucketPrefix =
      name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"";
  const std::string plain = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts[i];
    out += bucketPrefix + number(bounds[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += bucketPrefix + "+Inf\"} " + std::to_string(total) + "\n";
  out += name + "_sum" + plain + " " + number(sum) + "\n";
  out += name + "_count" + plain + " " + std::to_string(total) + "\n";
}

static std::vector<double> latencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,  0.5,    1,     2.5,  5,     10,   30};
}

/// Finer than latencyBounds where decode steps fall (a few ms to tens),
/// so that the step kinds' costs can be told apart.
static std::vector<double> stepBounds() {
  return {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03,
          0.04,  0.05,   0.075, 0.1,    0.25, 0.5,    1,     2.5,  5,     10};
}

static const char *stepKindName(int kind) {
  static const char *const names[kStepKinds] = {"decode", "prefill", "bulk"};
  return names[kind];
}

Metrics::Metrics()
    : timeToFirstToken(latencyBounds()), interTokenLatency(latencyBounds()),
      batchSize({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      requestSeconds({0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      stepSeconds(kStepKinds, Histogram(stepBounds())) {}

void Metrics::requestAccepted(uint32_t tokens) {
  std::lock_guard<std::mutex> lock(mutex);
  ++accepted;
  promptTokens += tokens;
}

void Metrics::requestRejected(const std::string &reason) {
  std::lock_guard<std::mutex> lock(mutex);
  ++rejected[reason];
}

void Metrics::requestFinished(const std::string &reason, double seconds) {
  std::lock_guard<std::mutex> lock(mutex);
  ++finished[reason];
  requestSeconds.observe(seconds);
}

void Metrics::firstToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex);
  ++generatedTokens;
  timeToFirstToken.observe(seconds);
}

void Metrics::nextToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex);
  ++generatedTokens;
  interTokenLatency.observe(seconds);
}

void Metrics::step(StepKind kind, uint32_t batch, uint32_t prefill,
                   uint32_t sampledRows, double seconds) {
  std::lock_guard<std::mutex> lock(mutex);
  ++steps;
  prefillTokens += prefill;
  batchSize.observe(batch);
  const int index = static_cast<int>(kind);
  stepSeconds[index].observe(seconds);
  stepPromptTokens[index] += prefill;
  stepSampledRows[index] += sampledRows;
}

void Metrics::setQueue(uint32_t waitingNow, uint32_t runningNow) {
  std::lock_guard<std::mutex> lock(mutex);
  waiting = waitingNow;
  running = runningNow;
}

void Metrics::httpResponse(int status) {
  std::lock_guard<std::mutex> lock(mutex);
  ++responses[status];
}

void Metrics::setBatchControl(uint32_t limit, double windowP99Seconds,
                              uint32_t prefillBudgetTokens, double tailShare,
                              bool promptRowsOff) {
  std::lock_guard<std::mutex> lock(mutex);
  batchLimit = limit;
  slaWindowP99 = windowP99Seconds;
  prefillBudget = prefillBudgetTokens;
  slaTailShare = tailShare;
  slaPromptRowsOff = promptRowsOff;
}

void Metrics::slaBulkStep() {
  std::lock_guard<std::mutex> lock(mutex);
  ++bulkSteps;
}

void Metrics::prefixLookup(uint32_t prompt, uint32_t hits) {
  std::lock_guard<std::mutex> lock(mutex);
  prefixPromptTokens += prompt;
  prefixHitTokens += hits;
}

void Metrics::setPrefixBlocks(uint32_t used, uint32_t free) {
  std::lock_guard<std::mutex> lock(mutex);
  prefixBlocksUsed = used;
  prefixBlocksFree = free;
}

void Metrics::setKvPool(uint32_t blocks, uint32_t available) {
  std::lock_guard<std::mutex> lock(mutex);
  kvBlocks = blocks;
  kvAvailable = available;
}

void Metrics::requestPreempted() {
  std::lock_guard<std::mutex> lock(mutex);
  ++preempted;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mutex);
  std::string out;
  auto header = [&](const char *name, const char *type, const char *help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name +
           " " + type + "\n";
  };
  auto line = [&](const std::string &name, uint64_t value) {
    out += name + " " + std::to_string(value) + "\n";
  };
  header("sits_requests_accepted_total", "counter",
         "Requests the scheduler accepted.");
  line("sits_requests_accepted_total", accepted);
  header("sits_requests_finished_total", "counter",
         "Requests that ended, by finish reason.");
  for (const char *reason : {"length", "eos", "stop", "cancelled", "error"})
    line(std::string("sits_requests_finished_total{reason=\"") + reason + "\"}",
         finished.count(reason) ? finished.at(reason) : 0);
  header("sits_requests_rejected_total", "counter",
         "Requests refused before they ran, by reason.");
  for (const char *reason :
       {"queue_full", "too_long", "invalid", "shutting_down"})
    line(std::string("sits_requests_rejected_total{reason=\"") + reason + "\"}",
         rejected.count(reason) ? rejected.at(reason) : 0);
  header("sits_requests_preempted_total", "counter",
         "Running requests stepped aside for lack of KV cache blocks (they "
         "run again later).");
  line("sits_requests_preempted_total", preempted);
  header("sits_http_responses_total", "counter",
         "HTTP responses sent, by status code.");
  for (const auto &[status, count] : responses)
    line("sits_http_responses_total{code=\"" + std::to_string(status) + "\"}",
         count);
  header("sits_prompt_tokens_total", "counter",
         "Prompt tokens of accepted requests.");
  line("sits_prompt_tokens_total", promptTokens);
  header("sits_prefill_tokens_total", "counter",
         "Prompt tokens the backend has run.");
  line("sits_prefill_tokens_total", prefillTokens);
  header("sits_generation_tokens_total", "counter", "Tokens generated.");
  line("sits_generation_tokens_total", generatedTokens);
  header("sits_steps_total", "counter", "Backend steps run.");
  line("sits_steps_total", steps);
  header("sits_queue_length", "gauge", "Requests waiting for a slot.");
  line("sits_queue_length", waiting);
  header("sits_running_requests", "gauge", "Requests in a slot.");
  line("sits_running_requests", running);
  header("sits_admitted_batch_limit", "gauge",
         "Requests allowed to run at once (the SLA control's limit).");
  line("sits_admitted_batch_limit", batchLimit);
  header("sits_sla_window_p99_seconds", "gauge",
         "p99 inter-token latency of the last 100 ms window with tokens.");
  out += "sits_sla_window_p99_seconds " + number(slaWindowP99) + "\n";
  header("sits_step_prefill_budget_tokens", "gauge",
         "Prompt tokens a step may prefill (the SLA control's budget; 0: "
         "none, or prompt rows off).");
  line("sits_step_prefill_budget_tokens", prefillBudget);
  header("sits_sla_bulk_steps_total", "counter",
         "Steps that prefilled past the SLA budget, spending the tail the "
         "p99 target allows.");
  line("sits_sla_bulk_steps_total", bulkSteps);
  header("sits_sla_tail_share", "gauge",
         "Slow inter-token gaps (over the SLA target) over the gaps in the "
         "SLA control's tail ledger.");
  out += "sits_sla_tail_share " + number(slaTailShare) + "\n";
  header("sits_sla_prompt_rows_off", "gauge",
         "1 while the SLA control keeps prompt rows out of normal steps "
         "(prompts move in bulk steps).");
  line("sits_sla_prompt_rows_off", slaPromptRowsOff ? 1 : 0);
  header("sits_prefix_cache_prompt_tokens_total", "counter",
         "Prompt tokens of requests admitted with prefix caching on.");
  line("sits_prefix_cache_prompt_tokens_total", prefixPromptTokens);
  header("sits_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens loaded from the prefix cache instead of prefilled.");
  line("sits_prefix_cache_hit_tokens_total", prefixHitTokens);
  header("sits_prefix_cache_hit_rate", "gauge",
         "Prefix-cache hit tokens over prompt tokens, since the start.");
  out += "sits_prefix_cache_hit_rate " +
         number(prefixPromptTokens
                    ? double(prefixHitTokens) / double(prefixPromptTokens)
                    : 0.0) +
         "\n";
  header("sits_prefix_cache_blocks_used", "gauge",
         "Prefix-cache pool blocks holding a prompt block's KV.");
  line("sits_prefix_cache_blocks_used", prefixBlocksUsed);
  header("sits_prefix_cache_blocks_free", "gauge",
         "Prefix-cache pool blocks free.");
  line("sits_prefix_cache_blocks_free", prefixBlocksFree);
  header("sits_kv_blocks_used", "gauge",
         "Blocks of a paged KV cache's pool that sequences hold (0 with a "
         "contiguous cache).");
  line("sits_kv_blocks_used", kvBlocks - kvAvailable);
  header("sits_kv_blocks_free", "gauge",
         "Blocks of a paged KV cache's pool a sequence can take: free, or "
         "held only by the prefix cache.");
  line("sits_kv_blocks_free", kvAvailable);
  header("sits_time_to_first_token_seconds", "histogram",
         "From a request's arrival to its first token.");
  timeToFirstToken.render("sits_time_to_first_token_seconds", out);
  header("sits_inter_token_latency_seconds", "histogram",
         "Between consecutive tokens of a request.");
  interTokenLatency.render("sits_inter_token_latency_seconds", out);
  header("sits_batch_size", "histogram", "Slots fed per backend step.");
  batchSize.render("sits_batch_size", out);
  header("sits_step_duration_seconds", "histogram",
         "Time of one backend step, by what it carried: decode (one token "
         "per running stream), prefill (prompt rows too), bulk (prompt rows "
         "past the SLA budget).");
  for (int kind = 0; kind < kStepKinds; ++kind)
    stepSeconds[kind].render("sits_step_duration_seconds", out,
                             std::string("kind=\"") + stepKindName(kind) +
                                 "\"");
  header("sits_step_prompt_tokens_total", "counter",
         "Prompt tokens prefilled, by the kind of step that carried them.");
  for (int kind = 0; kind < kStepKinds; ++kind)
    line(std::string("sits_step_prompt_tokens_total{kind=\"") +
             stepKindName(kind) + "\"}",
         stepPromptTokens[kind]);
  header("sits_step_sampled_rows_total", "counter",
         "Slots that sampled a token, by the kind of step.");
  for (int kind = 0; kind < kStepKinds; ++kind)
    line(std::string("sits_step_sampled_rows_total{kind=\"") +
             stepKindName(kind) + "\"}",
         stepSampledRows[kind]);
  header("sits_request_duration_seconds", "histogram",
         "From a request's arrival to its end.");
  requestSeconds.render("sits_request_duration_seconds", out);
  return out;
}
