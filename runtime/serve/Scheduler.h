//===- Scheduler.h - Continuous batching over a Backend ---------*- C++ -*-===//
//
// Requests join the running batch between steps and leave when they end:
//
//   serve::Scheduler scheduler(backend, tokenizer, options, &metrics);
//   scheduler.start();  // the thread that owns the backend
//   auto submitted = scheduler.submit(request, [](const RequestEvent &e) {
//     ...; return true; // false cancels the request
//   });
//
// Any thread may submit and cancel; the scheduler thread admits waiting
// requests into free slots, feeds each new request its prompt in chunks of
// at most `maxPrefillChunk` tokens while the others decode, and calls each
// request's callback (on its own thread) with every token and the text that
// became final (sits/TextStream.h: whole UTF-8 characters, stop strings
// held back and cut). A full waiting queue refuses a request at once.
//
// With a latency target, a BatchController limits how many requests run at
// once and the prompt tokens a step prefills beside the decoding streams;
// while the tail the p99 allows has room, prompts that wait for that budget
// are prefilled in a rare bulk step, up to maxStepPrefillTokens (the step's
// composition is SchedulerStep.cpp's).
//
// With a backend block pool (Backend::allocateBlockPool before the
// scheduler is made), a PrefixCache remembers which pool block holds which
// prompt prefix: an admitted request loads its longest cached prefix of
// whole blocks (always leaving its last prompt token to prefill, so that
// its first token is sampled from fresh logits) and prefills the rest; once
// prefilled, its full prompt blocks not yet cached are saved to the pool.
//
// With a backend whose KV cache is a bounded pool of blocks (a paged
// engine: Backend::kvPoolBlocks), requests are admitted by blocks: the
// oldest waiting request starts only when the blocks of its prompt (less
// those it shares from the prefix cache) and one block to grow into are
// left over what the running requests still count on (the rest of their
// own such reserve, or their next token's block); until then it waits at
// the head of the queue. A step whose sequences need more blocks than are
// left makes the newest running request step aside: its blocks go back,
// and it waits at the head of the queue to prefill its prompt and the
// tokens it generated again (no token is delivered twice; seeded sampling
// is keyed by the token's index, so its tokens are those it would have
// had). Running requests are never failed for lack of blocks.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_SCHEDULER_H
#define SITS_RUNTIME_SERVE_SCHEDULER_H

#include "Backend.h"
#include "BatchController.h"
#include "Metrics.h"
#include "PrefixCache.h"

#include "sits/ModelTokenizer.h"
#include "sits/Runtime.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sits::serve {

struct Request {
  /// Prompt ids (at least one).
  std::vector<int32_t> prompt;
  /// Tokens to generate at most (>= 1); prompt + maxTokens must fit the
  /// backend's maxSequenceLength().
  uint32_t maxTokens = 16;
  SamplingParams sampling;
  /// The text ends before the first of these (empty strings are refused).
  std::vector<std::string> stop;
  /// End after one of the tokenizer's EOS ids (which the tokens include).
  bool stopAtEos = true;
  /// Leave special tokens out of the text.
  bool skipSpecialTokens = true;
};

/// Why a submit was refused.
enum class Rejection {
  None,
  QueueFull,    ///< slots and waiting queue full: try again later
  TooLong,      ///< prompt + maxTokens exceed maxSequenceLength()
  Invalid,      ///< an empty prompt, maxTokens 0, an empty stop string
  ShuttingDown, ///< the scheduler is stopping
};
/// "queue_full", "too_long", "invalid", "shutting_down" (metrics labels).
const char *rejectionName(Rejection rejection);

struct Submission {
  Rejection rejection = Rejection::None;
  /// The cause, one sentence (empty when accepted).
  std::string message;
  /// The request's id (for cancel), when accepted.
  uint64_t id = 0;
  /// QueueFull: seconds to wait before trying again (the Retry-After).
  uint32_t retryAfterSeconds = 0;
  bool accepted() const { return rejection == Rejection::None; }
};

/// What a request's callback gets: a token (or none, for the final event of
/// a cancelled or failed request) and the text that became final with it.
struct RequestEvent {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::Length;
  /// Set when the backend failed; the request has ended.
  std::string error;
  uint32_t promptTokens = 0;
  uint32_t completionTokens = 0;
};
/// Called on the scheduler thread; return false to cancel the request.
using EventCallback = std::function<bool(const RequestEvent &)>;

/// The prefill chunk when none is given: the engines' default chunk. On
/// the 8B shape at 32 streams it gave 4 % more tokens/s and a 29 % lower
/// TTFT p50 than 256 (docs/serving.md), its prefill steps carrying more
/// prompt tokens each (one pass over the weights serves more of them).
constexpr uint32_t kDefaultPrefillChunk = 512;

struct SchedulerOptions {
  /// Requests waiting for a slot at most; more are refused (QueueFull).
  uint32_t maxQueue = 64;
  /// Prompt tokens fed per request per step at most, no more than the
  /// backend's maxStepTokens(); 0: kDefaultPrefillChunk, or the backend's
  /// limit if that is fewer.
  uint32_t maxPrefillChunk = 0;
  /// Prompt tokens fed per step at most, over all requests, oldest first
  /// (a step prefilling many prompts at once stalls every decoding stream);
  /// 0: no limit.
  uint32_t maxStepPrefillTokens = 2048;
  /// The p99 inter-token latency to keep under by limiting the running
  /// batch (BatchController.h); 0: every slot is used.
  double slaP99TokenSeconds = 0;
  /// The SLA control's other settings (the tail ledger, the smallest
  /// budget, ...); its target, maxLimit and maxBudget are set from
  /// slaP99TokenSeconds, the slots and maxStepPrefillTokens.
  BatchControlOptions slaControl;
  /// The least Retry-After of a QueueFull refusal, in seconds (>= 1).
  uint32_t minRetryAfter = 1;
  /// The clock of arrivals, token latencies and the SLA windows, called
  /// from the scheduler thread and submitting threads; null: the steady
  /// clock. Tests pass one that their backend's steps advance.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class Scheduler {
public:
  /// `backend` and `tokenizer` (its EOS ids and text) must outlive the
  /// scheduler; `metrics` may be null.
  Scheduler(Backend &backend, std::shared_ptr<const ModelTokenizer> tokenizer,
            SchedulerOptions options, Metrics *metrics = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler &) = delete;
  Scheduler &operator=(const Scheduler &) = delete;

  /// Starts the scheduler thread.
  void start();
  /// Stops the thread; requests still waiting or running end as cancelled.
  void stop();

  /// Queues a request or refuses it at once (never blocks on the backend).
  Submission submit(Request request, EventCallback callback);
  /// Ends a request as cancelled before its next step (no effect once it
  /// ended).
  void cancel(uint64_t id);

  /// One scheduling round on the caller's thread (what the thread runs):
  /// admits, runs one backend step, delivers its tokens. False when there
  /// was nothing to do. Only without start() (deterministic tests).
  bool runOnce();

  /// The backend's slots.
  uint32_t slots() const { return slotCount; }
  /// Tokens a request may hold, prompt and completion: the backend's
  /// maxSequenceLength(), or a paged KV cache's whole pool if smaller.
  uint32_t maxSequenceLength() const { return maxLength; }
  uint32_t waitingRequests() const;
  uint32_t runningRequests() const;
  /// Requests allowed to run at once now (the SLA control's limit, or
  /// every slot).
  uint32_t admittedLimit() const;
  /// The prefix cache (null without a backend block pool); scheduler
  /// thread only.
  const PrefixCache *prefixCache() const { return prefixes.get(); }

private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    uint64_t id = 0;
    Request request;
    EventCallback callback;
    Clock::time_point arrival;
  };
  struct Running;

  void loop();
  void admit();
  /// The oldest request waiting for a slot (counted as running from here),
  /// or null: none, or the batch limit holds it back.
  std::unique_ptr<Running> takeNext();
  /// Puts a request taken back at the head of the waiting line.
  void requeue(std::unique_ptr<Running> request);
  /// Starts `request` in the free `slot` (its prefix loaded); false, and
  /// nothing started, while a KV pool lacks the blocks it needs.
  bool place(Running &request, uint32_t slot);
  /// A step's inputs and what the SLA control learns from them.
  struct StepPlan {
    std::vector<SlotStep> steps;
    uint32_t prefillTokens = 0;
    /// Requests that add a decode row (one token, past their prompt).
    uint32_t decodeRows = 0;
    /// Prompts wanted more tokens than the SLA budget gave.
    bool held = false;
    /// A bulk step: past the SLA budget, up to the per-step limit, spending
    /// the tail that the p99 target allows (BatchController.h).
    bool bulk = false;
  };
  /// The step's inputs: prompt chunks within the budget (or a bulk step's
  /// limit), decode tokens.
  StepPlan planStep();
  /// Whether the KV pool has the new blocks `steps` write into.
  bool stepFits(const std::vector<SlotStep> &steps) const;
  /// Stops a running request for lack of KV blocks: its blocks go back and
  /// it waits to prefill everything again.
  void preempt(Running &request);
  /// KV blocks covering `tokens` tokens.
  uint32_t blocksFor(uint64_t tokens) const;
  /// Blocks a running request counts on beyond those it holds.
  uint32_t blocksAhead(const Running &request) const;
  void applyCancels();
  void finish(Running &running, FinishReason reason, std::string text = {},
              std::string error = {});
  /// Ends a request with its last event and frees its slot.
  void end(Running &running, const RequestEvent &last);
  /// `endedBy`: what the step that sampled the token carried.
  bool deliver(Running &running, int32_t token, StepKind endedBy);
  Clock::time_point now() const {
    return options.clock ? options.clock() : Clock::now();
  }
  void publishQueue();
  /// Starts an admitted request from `cached`, its longest cached prompt
  /// prefix.
  void loadPrefix(Running &request, PrefixCache::Path cached);
  /// Puts a prefilled prompt's full blocks into the prefix cache.
  void savePrefix(Running &request);
  void publishBlocks();
  /// Gives the slot's KV blocks back to the backend.
  void releaseSlot(uint32_t slot);
  /// QueueFull's Retry-After from the recent completion rate (under lock).
  uint32_t retryAfterLocked(Clock::time_point now) const;

  Backend &backend;
  std::shared_ptr<const ModelTokenizer> tokenizer;
  SchedulerOptions options;
  Metrics *metrics;
  const uint32_t slotCount;
  /// A paged KV cache's pool: blocks and tokens per block (0: none).
  const uint32_t kvPoolBlocks;
  const uint32_t kvBlockTokens;
  const uint32_t maxLength;

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Pending> waiting;
  std::vector<uint64_t> cancels;
  uint32_t running = 0;       ///< requests in slots, as other threads see it
  uint32_t requeuedCount = 0; ///< `requeued.size()`, for other threads
  uint32_t admitLimit; ///< the controller's limit, as other threads see it
  /// When the latest requests ended (for Retry-After), oldest first.
  std::deque<Clock::time_point> recentEnds;
  uint64_t nextId = 1;
  bool stopping = false;
  std::thread thread;

  /// Scheduler-thread state: the request in each slot (null: free).
  std::vector<std::unique_ptr<Running>> slotsInUse;
  /// Requests at the head of the waiting line, oldest first: preempted
  /// ones, and the queue's head while the KV pool lacks its blocks.
  std::deque<std::unique_ptr<Running>> requeued;
  BatchController controller;
  std::unique_ptr<PrefixCache> prefixes;
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_SCHEDULER_H
