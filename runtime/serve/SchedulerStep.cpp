//===- SchedulerStep.cpp - Composing and running one step -----------------===//
//
// The scheduler's round (runOnce): the step's inputs within the prefill
// budget, room for them in a paged KV cache (the newest request steps
// aside), the backend step, and its tokens delivered, the SLA control fed
// with the step's prefill and the requests' inter-token latencies.
//
//===----------------------------------------------------------------------===//

#include "Scheduler.h"
#include "SchedulerRunning.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace sits;
using namespace sits::serve;

void Scheduler::preempt(Running &request) {
  if (prefixes && !request.cached.empty()) {
    prefixes->release(request.cached);
    publishBlocks();
  }
  request.prefixSaved = false;
  releaseSlot(request.slot);
  // Everything it holds is prefilled again, its last token too: the token
  // sampled after it is the one the next decode step would have given.
  request.toPrefill = uint32_t(request.sequence.size());
  request.prefilled = request.position = 0;
  if (metrics)
    metrics->requestPreempted();
  requeue(std::move(slotsInUse[request.slot]));
}

/// Delivers a sampled token; false when the request ended with it.
bool Scheduler::deliver(Running &request, int32_t token) {
  Clock::time_point now = Clock::now();
  if (metrics) {
    if (request.generated == 0)
      metrics->firstToken(
          std::chrono::duration<double>(now - request.pending.arrival).count());
    else
      metrics->nextToken(
          std::chrono::duration<double>(now - request.lastTokenTime).count());
  }
  if (request.generated > 0)
    controller.recordTokenLatency(
        std::chrono::duration<double>(now - request.lastTokenTime).count());
  request.lastTokenTime = now;
  request.sequence.push_back(token);
  ++request.generated;
  const Request &params = request.pending.request;

  std::string piece = request.text->push(token);
  std::optional<FinishReason> reason;
  const std::vector<int32_t> &eos = tokenizer->eosTokenIds();
  if (request.text->stopped())
    reason = FinishReason::StopString;
  else if (params.stopAtEos &&
           std::find(eos.begin(), eos.end(), token) != eos.end())
    reason = FinishReason::EndOfSequence;
  else if (request.generated >= params.maxTokens ||
           request.position >= maxLength)
    reason = FinishReason::Length;

  if (reason) {
    // The final event carries the token and the text held back until now.
    RequestEvent last;
    std::string text = piece;
    if (*reason != FinishReason::StopString) {
      // The text held back until the end may complete a stop string too.
      text += request.text->finish();
      if (request.text->stopped())
        reason = FinishReason::StopString;
    }
    last.tokens = {token};
    last.text = std::move(text);
    last.finished = true;
    last.reason = *reason;
    last.promptTokens = params.prompt.size();
    last.completionTokens = request.generated;
    end(request, last);
    return false;
  }
  RequestEvent event;
  event.tokens = {token};
  event.text = std::move(piece);
  event.promptTokens = params.prompt.size();
  event.completionTokens = request.generated;
  if (!request.pending.callback(event)) {
    finish(request, FinishReason::Cancelled);
    return false;
  }
  return true;
}

std::vector<SlotStep> Scheduler::planStep(uint32_t &prefillTokens) {
  // Prompt chunks, oldest request first, within the step's budget: a step
  // that prefills many long prompts at once would stall every decoding
  // stream for its whole length. Requests past the budget wait a step.
  std::vector<uint32_t> chunks(slotCount, 0);
  std::vector<Running *> prefilling;
  for (std::unique_ptr<Running> &slot : slotsInUse)
    if (slot && slot->prefilled < slot->toPrefill)
      prefilling.push_back(slot.get());
  std::sort(prefilling.begin(), prefilling.end(),
            [](const Running *a, const Running *b) {
              return a->pending.id < b->pending.id;
            });
  uint32_t budget = controller.prefillBudget() ? controller.prefillBudget()
                    : options.maxStepPrefillTokens
                        ? options.maxStepPrefillTokens
                        : std::numeric_limits<uint32_t>::max();
  bool held = false;
  for (Running *request : prefilling) {
    held |= budget == 0;
    uint32_t chunk =
        std::min<uint32_t>({options.maxPrefillChunk, budget,
                            request->toPrefill - request->prefilled});
    chunks[request->slot] = chunk;
    budget -= chunk;
  }
  std::vector<SlotStep> steps;
  prefillTokens = 0;
  for (std::unique_ptr<Running> &slot : slotsInUse) {
    if (!slot)
      continue;
    Running &request = *slot;
    SlotStep step;
    step.slot = request.slot;
    step.position = request.position;
    step.sampling = request.pending.request.sampling;
    if (request.prefilled < request.toPrefill) {
      uint32_t chunk = chunks[request.slot];
      if (chunk == 0)
        continue; // over this step's prefill budget
      auto from = request.sequence.begin() + request.prefilled;
      step.tokens.assign(from, from + chunk);
      step.sample = request.prefilled + chunk == request.toPrefill;
      prefillTokens += chunk;
    } else {
      step.tokens = {request.sequence.back()};
    }
    steps.push_back(std::move(step));
  }
  if (prefillTokens > 0)
    controller.recordPrefill(prefillTokens, held);
  return steps;
}

bool Scheduler::stepFits(const std::vector<SlotStep> &steps) const {
  uint64_t needed = 0;
  for (const SlotStep &step : steps)
    needed += blocksFor(uint64_t(step.position) + step.tokens.size()) -
              blocksFor(step.position);
  return needed <= backend.kvAvailableBlocks();
}

bool Scheduler::runOnce() {
  uint32_t limit = controller.update(Clock::now());
  {
    std::lock_guard<std::mutex> lock(mutex);
    admitLimit = limit;
  }
  if (metrics)
    metrics->setBatchControl(limit, controller.windowP99(),
                             controller.prefillBudget());
  admit();
  applyCancels();
  uint32_t prefillTokens = 0;
  std::vector<SlotStep> steps = planStep(prefillTokens);
  // A KV pool without the blocks this step writes: the newest request
  // steps aside until it has them. One request alone fits by admission;
  // should it not, its step fails with the backend's reason.
  while (kvPoolBlocks && !steps.empty() && !stepFits(steps)) {
    Running *newest = nullptr;
    uint32_t inUse = 0;
    for (std::unique_ptr<Running> &slot : slotsInUse) {
      if (!slot)
        continue;
      ++inUse;
      if (!newest || slot->pending.id > newest->pending.id)
        newest = slot.get();
    }
    if (inUse < 2)
      break;
    preempt(*newest);
    steps = planStep(prefillTokens);
  }
  publishQueue();
  if (steps.empty())
    return false;

  Clock::time_point start = Clock::now();
  std::vector<int32_t> tokens;
  std::string failure;
  try {
    tokens = backend.step(steps);
    if (tokens.size() != steps.size())
      failure = "the backend returned " + std::to_string(tokens.size()) +
                " tokens for " + std::to_string(steps.size()) + " slots";
  } catch (const std::exception &error) {
    failure = error.what();
  }
  if (metrics)
    metrics->step(steps.size(), prefillTokens,
                  std::chrono::duration<double>(Clock::now() - start).count());
  if (!failure.empty()) {
    // The fed slots' caches are unknown now: their requests end.
    for (const SlotStep &step : steps)
      if (slotsInUse[step.slot])
        finish(*slotsInUse[step.slot], FinishReason::Cancelled, {},
               "the backend failed: " + failure);
    publishQueue();
    publishBlocks();
    return true;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    Running &request = *slotsInUse[steps[i].slot];
    request.position += steps[i].tokens.size();
    if (request.prefilled < request.toPrefill) {
      request.prefilled += steps[i].tokens.size();
      if (request.prefilled == request.toPrefill)
        savePrefix(request);
    }
    if (steps[i].sample)
      deliver(request, tokens[i]);
  }
  publishQueue();
  publishBlocks();
  return true;
}
