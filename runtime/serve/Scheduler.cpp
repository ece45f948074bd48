//===- Scheduler.cpp - Continuous batching over a Backend -----------------===//

#include "Scheduler.h"
#include "SchedulerRunning.h"

#include <algorithm>
#include <cmath>

using namespace sits;
using namespace sits::serve;

const char *serve::rejectionName(Rejection rejection) {
  switch (rejection) {
  case Rejection::None:
    return "none";
  case Rejection::QueueFull:
    return "queue_full";
  case Rejection::TooLong:
    return "too_long";
  case Rejection::Invalid:
    return "invalid";
  case Rejection::ShuttingDown:
    return "shutting_down";
  }
  return "invalid";
}

/// The metrics label of a finish reason (finishReasonName's names, which
/// live in the CUDA runtime library that this CUDA-free scheduler does not
/// link; "error" for a failed request).
static const char *reasonLabel(FinishReason reason, bool failed) {
  if (failed)
    return "error";
  switch (reason) {
  case FinishReason::Length:
    return "length";
  case FinishReason::EndOfSequence:
    return "eos";
  case FinishReason::StopString:
    return "stop";
  case FinishReason::Cancelled:
    return "cancelled";
  }
  return "error";
}

Scheduler::Scheduler(Backend &backend,
                     std::shared_ptr<const ModelTokenizer> tokenizer,
                     SchedulerOptions options, Metrics *metrics)
    : backend(backend), tokenizer(std::move(tokenizer)), options(options),
      metrics(metrics), slotCount(backend.slots()),
      kvPoolBlocks(backend.sharedBlockTokens() ? backend.kvPoolBlocks() : 0),
      kvBlockTokens(kvPoolBlocks ? backend.sharedBlockTokens() : 0),
      maxLength(kvPoolBlocks ? uint32_t(std::min<uint64_t>(
                                   backend.maxSequenceLength(),
                                   uint64_t(kvPoolBlocks) * kvBlockTokens))
                             : backend.maxSequenceLength()),
      admitLimit(slotCount),
      controller(
          [&] {
            BatchControlOptions control = options.slaControl;
            control.targetSeconds = options.slaP99TokenSeconds;
            control.maxLimit = std::max<uint32_t>(slotCount, 1);
            // Under a latency target the step's prefill budget is
            // controlled too, from the configured one down.
            control.maxBudget = options.slaP99TokenSeconds > 0
                                    ? options.maxStepPrefillTokens
                                    : 0;
            return control;
          }(),
          options.clock ? options.clock() : Clock::now()) {
  if (!this->tokenizer)
    throw Error(ErrorCode::InvalidArgument,
                "the scheduler needs the model's tokenizer");
  if (slotCount == 0 || maxLength < 2)
    throw Error(ErrorCode::InvalidArgument,
                "the backend holds no sequence of two tokens");
  // A chunk larger than the backend takes in a step would fail every
  // longer prompt's step.
  const uint32_t stepLimit = backend.maxStepTokens();
  if (stepLimit && options.maxPrefillChunk > stepLimit)
    throw Error(ErrorCode::InvalidArgument,
                "a prefill chunk of " +
                    std::to_string(options.maxPrefillChunk) +
                    " tokens is more than the backend takes in a step (" +
                    std::to_string(stepLimit) +
                    "; an engine's sitsc --max-prefill-tokens)");
  if (options.maxPrefillChunk == 0)
    this->options.maxPrefillChunk =
        stepLimit ? std::min(stepLimit, kDefaultPrefillChunk)
                  : kDefaultPrefillChunk;
  if (options.minRetryAfter == 0)
    throw Error(ErrorCode::InvalidArgument,
                "Retry-After must be at least one second");
  slotsInUse.resize(slotCount);
  if (backend.poolBlocks() > 0 && backend.cacheBlockTokens() > 0)
    prefixes = std::make_unique<PrefixCache>(backend.cacheBlockTokens(),
                                             backend.poolBlocks());
  if (metrics)
    metrics->setBatchControl(admitLimit, 0, controller.prefillBudget(), 0,
                             controller.promptRowsOff());
  publishBlocks();
}

uint32_t Scheduler::blocksFor(uint64_t tokens) const {
  return uint32_t((tokens + kvBlockTokens - 1) / kvBlockTokens);
}

uint32_t Scheduler::blocksAhead(const Running &request) const {
  const uint32_t held = blocksFor(request.position);
  const uint32_t wanted =
      std::max(request.reserve, blocksFor(uint64_t(request.position) + 1));
  return wanted > held ? wanted - held : 0;
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!thread.joinable() && !stopping)
    thread = std::thread([this] { loop(); });
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  if (thread.joinable())
    thread.join();
  // Nothing runs any more: end what is left, so that no caller waits.
  for (std::unique_ptr<Running> &slot : slotsInUse)
    if (slot)
      finish(*slot, FinishReason::Cancelled);
  while (!requeued.empty())
    finish(*requeued.front(), FinishReason::Cancelled);
  std::deque<Pending> left;
  {
    std::lock_guard<std::mutex> lock(mutex);
    left.swap(waiting);
  }
  for (Pending &pending : left) {
    RequestEvent event;
    event.finished = true;
    event.reason = FinishReason::Cancelled;
    event.promptTokens = pending.request.prompt.size();
    pending.callback(event);
    if (metrics)
      metrics->requestFinished("cancelled", 0);
  }
  publishQueue();
}

Submission Scheduler::submit(Request request, EventCallback callback) {
  Submission result;
  auto refuse = [&](Rejection rejection, std::string message) {
    result.rejection = rejection;
    result.message = std::move(message);
    if (metrics)
      metrics->requestRejected(rejectionName(rejection));
    return result;
  };
  if (request.prompt.empty())
    return refuse(Rejection::Invalid, "the prompt is empty");
  if (request.maxTokens == 0)
    return refuse(Rejection::Invalid, "max_tokens must be at least 1");
  for (const std::string &stop : request.stop)
    if (stop.empty())
      return refuse(Rejection::Invalid, "a stop string is empty");
  uint64_t wanted = uint64_t(request.prompt.size()) + request.maxTokens;
  if (wanted > maxLength)
    return refuse(
        Rejection::TooLong,
        "the prompt (" + std::to_string(request.prompt.size()) +
            " tokens) and max_tokens (" + std::to_string(request.maxTokens) +
            ") exceed the context of " + std::to_string(maxLength) + " tokens" +
            (maxLength < backend.maxSequenceLength()
                 ? " (all the KV cache pool's " + std::to_string(kvPoolBlocks) +
                       " blocks of " + std::to_string(kvBlockTokens) +
                       " tokens)"
                 : std::string()));
  uint32_t promptTokens = request.prompt.size();
  std::unique_lock<std::mutex> lock(mutex);
  if (stopping) {
    lock.unlock();
    return refuse(Rejection::ShuttingDown, "the server is shutting down");
  }
  // Requests that can start at once (room under the limit) do not count
  // against the queue.
  uint64_t room = admitLimit > running ? admitLimit - running : 0;
  if (waiting.size() + requeuedCount >= room + options.maxQueue) {
    size_t queued = waiting.size() + requeuedCount;
    uint32_t limit = admitLimit;
    result.retryAfterSeconds = retryAfterLocked(now());
    lock.unlock();
    return refuse(Rejection::QueueFull,
                  "the server is busy: " + std::to_string(running) +
                      " requests run (" + std::to_string(limit) + " at most, " +
                      std::to_string(slotCount) + " slots) and " +
                      std::to_string(queued) + " wait");
  }
  result.id = nextId++;
  waiting.push_back(
      Pending{result.id, std::move(request), std::move(callback), now()});
  // Gauges are set under the lock, so that the last value set is current.
  if (metrics) {
    metrics->requestAccepted(promptTokens);
    metrics->setQueue(waiting.size() + requeuedCount, running);
  }
  lock.unlock();
  wake.notify_all();
  return result;
}

void Scheduler::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    cancels.push_back(id);
  }
  wake.notify_all();
}

uint32_t Scheduler::waitingRequests() const {
  std::lock_guard<std::mutex> lock(mutex);
  return waiting.size() + requeuedCount;
}

uint32_t Scheduler::runningRequests() const {
  std::lock_guard<std::mutex> lock(mutex);
  return running;
}

uint32_t Scheduler::admittedLimit() const {
  std::lock_guard<std::mutex> lock(mutex);
  return admitLimit;
}

/// Requests remembered for the completion rate, and how long.
static constexpr size_t kRecentEnds = 32;
static constexpr double kRecentEndSeconds = 60;
/// The longest Retry-After asked for.
static constexpr double kMaxRetryAfter = 60;

uint32_t Scheduler::retryAfterLocked(Clock::time_point now) const {
  // The time the requests waiting now (and this one) take to start at the
  // rate requests ended lately; the least one when there is no rate yet.
  double seconds = options.minRetryAfter;
  size_t ends = 0;
  Clock::time_point oldest = now;
  for (Clock::time_point end : recentEnds)
    if (std::chrono::duration<double>(now - end).count() <= kRecentEndSeconds) {
      oldest = std::min(oldest, end);
      ++ends;
    }
  double span = std::chrono::duration<double>(now - oldest).count();
  if (ends >= 2 && span > 0) {
    double rate = ends / span;
    seconds = std::max(seconds,
                       std::ceil((waiting.size() + requeuedCount + 1) / rate));
  }
  return static_cast<uint32_t>(std::min(seconds, kMaxRetryAfter));
}

void Scheduler::publishQueue() {
  if (!metrics)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  metrics->setQueue(waiting.size() + requeuedCount, running);
}

void Scheduler::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      bool busy = std::any_of(slotsInUse.begin(), slotsInUse.end(),
                              [](const auto &slot) { return slot != nullptr; });
      // `requeued` is this thread's own.
      wake.wait(lock, [&] {
        return stopping || busy || !waiting.empty() || !cancels.empty() ||
               !requeued.empty();
      });
      if (stopping)
        return;
    }
    runOnce();
  }
}

void Scheduler::admit() {
  std::vector<Pending> cancelledWaiting;
  {
    std::lock_guard<std::mutex> lock(mutex);
    // A cancelled request that still waits never takes a slot.
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto found = std::find(cancels.begin(), cancels.end(), it->id);
      if (found == cancels.end()) {
        ++it;
        continue;
      }
      cancels.erase(found);
      cancelledWaiting.push_back(std::move(*it));
      it = waiting.erase(it);
    }
  }
  for (Pending &pending : cancelledWaiting) {
    RequestEvent event;
    event.finished = true;
    event.reason = FinishReason::Cancelled;
    event.promptTokens = pending.request.prompt.size();
    pending.callback(event);
    if (metrics)
      metrics->requestFinished(
          "cancelled",
          std::chrono::duration<double>(now() - pending.arrival).count());
  }
  // Oldest first into the free slots; a request the KV pool has no room
  // for yet stops admission, so that it is not overtaken forever.
  for (uint32_t slot = 0; slot < slotCount; ++slot) {
    if (slotsInUse[slot])
      continue;
    std::unique_ptr<Running> next = takeNext();
    if (!next)
      break;
    if (!place(*next, slot)) {
      requeue(std::move(next));
      break;
    }
    slotsInUse[slot] = std::move(next);
  }
}

std::unique_ptr<Scheduler::Running> Scheduler::takeNext() {
  std::lock_guard<std::mutex> lock(mutex);
  if (requeued.empty() && waiting.empty())
    return nullptr;
  if (running >= admitLimit) {
    // A free slot, but the latency target holds the batch back.
    controller.recordLimited();
    return nullptr;
  }
  std::unique_ptr<Running> next;
  if (!requeued.empty()) {
    next = std::move(requeued.front());
    requeued.pop_front();
    --requeuedCount;
  } else {
    next = std::make_unique<Running>();
    next->pending = std::move(waiting.front());
    waiting.pop_front();
    next->sequence = next->pending.request.prompt;
    next->toPrefill = uint32_t(next->sequence.size());
  }
  ++running;
  return next;
}

void Scheduler::requeue(std::unique_ptr<Running> request) {
  std::lock_guard<std::mutex> lock(mutex);
  // In arrival order: the oldest runs first again.
  auto at = std::find_if(requeued.begin(), requeued.end(), [&](const auto &r) {
    return r->pending.id > request->pending.id;
  });
  requeued.insert(at, std::move(request));
  ++requeuedCount;
  --running;
  if (metrics)
    metrics->setQueue(waiting.size() + requeuedCount, running);
}

bool Scheduler::place(Running &request, uint32_t slot) {
  request.slot = slot;
  // The last token to prefill is always prefilled: its logits give the
  // next token.
  PrefixCache::Path cached;
  Backend::PrefixLoad load;
  if (prefixes) {
    cached = prefixes->match(request.sequence,
                             (request.toPrefill - 1) / prefixes->blockTokens());
    // As far as the backend can load it (the rest is prefilled).
    if (!cached.empty()) {
      load = backend.planPrefixLoad(prefixes->poolIds(cached));
      if (load.blocks < cached.size()) {
        PrefixCache::Path tail(cached.begin() + load.blocks, cached.end());
        prefixes->release(tail);
        cached.resize(load.blocks);
      }
    }
  }
  if (kvPoolBlocks) {
    // Its blocks and one to grow into, no more than it can ever hold (the
    // last token generated is never fed).
    const Request &params = request.pending.request;
    request.reserve = std::min(
        blocksFor(request.toPrefill) + 1,
        blocksFor(uint64_t(params.prompt.size()) + params.maxTokens - 1));
    // Blocks loaded from the prefix cache are shared, not taken: they do
    // not count, nor, being about to be held, as blocks to take back.
    const bool shared = prefixes && prefixes->blockTokens() == kvBlockTokens;
    const uint32_t needed =
        request.reserve -
        (shared ? std::min(load.shared, uint32_t(cached.size())) : 0);
    uint64_t promised = 0;
    bool anyRunning = false;
    for (const std::unique_ptr<Running> &other : slotsInUse)
      if (other) {
        promised += blocksAhead(*other);
        anyRunning = true;
      }
    const uint64_t available = backend.kvAvailableBlocks(
        shared ? prefixes->poolIds(cached) : std::vector<uint32_t>());
    // Alone it always fits a pool that holds the context; should it not,
    // the step says why rather than the request waiting forever.
    if (anyRunning && needed + promised > available) {
      if (prefixes)
        prefixes->release(cached);
      return false;
    }
  }
  if (!request.text)
    request.text.emplace(tokenizer->tokenizer(), request.pending.request.stop,
                         request.pending.request.skipSpecialTokens);
  loadPrefix(request, std::move(cached));
  return true;
}

void Scheduler::publishBlocks() {
  if (metrics && prefixes)
    metrics->setPrefixBlocks(prefixes->usedBlocks(), prefixes->freeBlocks());
  if (metrics && kvPoolBlocks)
    metrics->setKvPool(kvPoolBlocks, backend.kvAvailableBlocks());
}

void Scheduler::loadPrefix(Running &request, PrefixCache::Path cached) {
  request.cached = std::move(cached);
  if (!prefixes)
    return;
  uint32_t hits = 0;
  if (!request.cached.empty()) {
    try {
      backend.loadBlocks(request.slot, prefixes->poolIds(request.cached),
                         request.pending.request.sampling);
      hits = uint32_t(request.cached.size()) * prefixes->blockTokens();
    } catch (const std::exception &) {
      // The slot starts over at position 0: a full prefill, same tokens.
      prefixes->release(request.cached);
    }
  }
  request.prefilled = request.position = hits;
  if (metrics)
    metrics->prefixLookup(request.toPrefill, hits);
}

void Scheduler::savePrefix(Running &request) {
  if (!prefixes || request.prefixSaved)
    return;
  request.prefixSaved = true;
  std::vector<PrefixCache::NewBlock> added =
      prefixes->extend(request.cached, request.sequence,
                       request.toPrefill / prefixes->blockTokens());
  std::vector<uint32_t> pool;
  uint32_t first = added.empty() ? 0 : added.front().index;
  for (const PrefixCache::NewBlock &block : added)
    pool.push_back(block.pool);
  // A backend that keeps recent rows of blocks gets the cached ones too.
  if (backend.resavesCachedBlocks()) {
    pool = prefixes->poolIds(request.cached);
    first = 0;
  }
  if (!pool.empty()) {
    try {
      backend.saveBlocks(request.slot, first, pool);
    } catch (const std::exception &) {
      // The pool blocks hold nothing usable: forget them. The request
      // itself is unharmed (its slot is unchanged).
      prefixes->discard(request.cached, request.cached.size() - added.size());
    }
  }
  prefixes->release(request.cached);
  publishBlocks();
}

void Scheduler::releaseSlot(uint32_t slot) {
  try {
    backend.release(slot);
  } catch (const std::exception &) {
    // The slot starts over at position 0 anyway; only its blocks may stay
    // taken, which the admission's lone-request rule cannot wait on.
  }
}

void Scheduler::applyCancels() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ids.swap(cancels);
  }
  for (uint64_t id : ids) {
    for (std::unique_ptr<Running> &slot : slotsInUse)
      if (slot && slot->pending.id == id)
        finish(*slot, FinishReason::Cancelled);
    for (std::unique_ptr<Running> &request : requeued)
      if (request->pending.id == id) {
        finish(*request, FinishReason::Cancelled);
        break; // `requeued` changed
      }
  }
}

void Scheduler::finish(Running &request, FinishReason reason, std::string text,
                       std::string error) {
  RequestEvent event;
  event.finished = true;
  event.reason = reason;
  event.error = std::move(error);
  event.promptTokens = request.pending.request.prompt.size();
  event.completionTokens = request.generated;
  if (reason != FinishReason::Cancelled && event.error.empty() && request.text)
    text += request.text->finish();
  event.text = std::move(text);
  end(request, event);
}

void Scheduler::end(Running &request, const RequestEvent &last) {
  if (prefixes && !request.cached.empty())
    prefixes->release(request.cached);
  // A request in a slot gives its blocks back (counted before its last
  // event, as the rest); a requeued one holds none.
  const bool inSlot = slotsInUse[request.slot].get() == &request;
  if (inSlot) {
    releaseSlot(request.slot);
    publishBlocks();
  }
  // Counts first: whoever reads the metrics after the last event sees the
  // request ended.
  if (metrics)
    metrics->requestFinished(
        reasonLabel(last.reason, !last.error.empty()),
        std::chrono::duration<double>(now() - request.pending.arrival).count());
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (inSlot)
      --running;
    else
      --requeuedCount;
    recentEnds.push_back(now());
    if (recentEnds.size() > kRecentEnds)
      recentEnds.pop_front();
    if (metrics)
      metrics->setQueue(waiting.size() + requeuedCount, running);
  }
  request.pending.callback(last);
  // `request` is gone from here on.
  if (inSlot)
    slotsInUse[request.slot].reset();
  else
    requeued.erase(std::find_if(requeued.begin(), requeued.end(),
                                [&](const std::unique_ptr<Running> &r) {
                                  return r.get() == &request;
                                }));
}
