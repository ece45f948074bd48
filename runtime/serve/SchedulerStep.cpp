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
bool Scheduler::deliver(Running &request, int32_t token, StepKind endedBy) {
  const Clock::time_point at = now();
  if (metrics) {
    if (request.generated == 0)
      metrics->firstToken(
          std::chrono::duration<double>(at - request.pending.arrival).count());
    else
      metrics->nextToken(
          std::chrono::duration<double>(at - request.lastTokenTime).count());
  }
  if (request.generated > 0)
    controller.recordTokenLatency(
        std::chrono::duration<double>(at - request.lastTokenTime).count(),
        endedBy);
  request.lastTokenTime = at;
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

Scheduler::StepPlan Scheduler::planStep() {
  // Prompt chunks, oldest request first, within the step's budget: a step
  // that prefills many long prompts at once would stall every decoding
  // stream for its whole length. Requests past the budget wait a step.
  std::vector<uint32_t> chunks(slotCount, 0);
  std::vector<Running *> prefilling;
  // Streams with a token out: a slow step delays each one's next token.
  uint32_t streams = 0;
  uint64_t wanted = 0;
  for (std::unique_ptr<Running> &slot : slotsInUse) {
    if (!slot)
      continue;
    streams += slot->generated > 0;
    if (slot->prefilled < slot->toPrefill) {
      prefilling.push_back(slot.get());
      wanted +=
          std::min(options.maxPrefillChunk, slot->toPrefill - slot->prefilled);
    }
  }
  std::sort(prefilling.begin(), prefilling.end(),
            [](const Running *a, const Running *b) {
              return a->pending.id < b->pending.id;
            });
  StepPlan plan;
  // Under the SLA budget (0: prompt rows off, a normal step carries no
  // prompt token); without one, the per-step limit.
  uint32_t budget = controller.budgeted() ? controller.prefillBudget()
                    : options.maxStepPrefillTokens
                        ? options.maxStepPrefillTokens
                        : std::numeric_limits<uint32_t>::max();
  plan.held = wanted > budget;
  // Prompts held by the SLA budget are prefilled at full width in a rare
  // bulk step while the tail the p99 allows has room for its stall (with
  // prompt rows off, the only way for prompts beside decoding streams).
  const uint32_t stepLimit = controller.getOptions().maxBudget;
  if (plan.held && controller.budgeted() && budget < stepLimit &&
      controller.bulkAllowed(streams)) {
    budget = stepLimit;
    plan.bulk = true;
  }
  for (Running *request : prefilling) {
    uint32_t chunk =
        std::min<uint32_t>({options.maxPrefillChunk, budget,
                            request->toPrefill - request->prefilled});
    chunks[request->slot] = chunk;
    budget -= chunk;
  }
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
      plan.prefillTokens += chunk;
    } else {
      step.tokens = {request.sequence.back()};
      ++plan.decodeRows;
    }
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

bool Scheduler::stepFits(const std::vector<SlotStep> &steps) const {
  uint64_t needed = 0;
  for (const SlotStep &step : steps)
    needed += blocksFor(uint64_t(step.position) + step.tokens.size()) -
              blocksFor(step.position);
  return needed <= backend.kvAvailableBlocks();
}

bool Scheduler::runOnce() {
  uint32_t limit = controller.update(now());
  {
    std::lock_guard<std::mutex> lock(mutex);
    admitLimit = limit;
  }
  if (metrics)
    metrics->setBatchControl(
        limit, controller.windowP99(), controller.prefillBudget(),
        controller.ledgerSlowShare(), controller.promptRowsOff());
  admit();
  applyCancels();
  StepPlan plan = planStep();
  // A KV pool without the blocks this step writes: the newest request
  // steps aside until it has them. One request alone fits by admission;
  // should it not, its step fails with the backend's reason.
  while (kvPoolBlocks && !plan.steps.empty() && !stepFits(plan.steps)) {
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
    plan = planStep();
  }
  publishQueue();
  const std::vector<SlotStep> &steps = plan.steps;
  if (steps.empty())
    return false;
  controller.recordRunning(runningRequests(), plan.decodeRows);
  // Once per step run (planStep may have run more than once); a step that
  // held prompts back without prefilling any (prompt rows off) too.
  if (plan.prefillTokens > 0 || plan.held)
    controller.recordPrefill(plan.prefillTokens, plan.held, plan.bulk);
  if (plan.bulk && metrics)
    metrics->slaBulkStep();

  Clock::time_point start = now();
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
  const StepKind kind = plan.bulk                ? StepKind::Bulk
                        : plan.prefillTokens > 0 ? StepKind::Prefill
                                                 : StepKind::Decode;
  if (metrics) {
    uint32_t sampled = 0;
    for (const SlotStep &step : steps)
      sampled += step.sample ? 1 : 0;
    metrics->step(kind, steps.size(), plan.prefillTokens, sampled,
                  std::chrono::duration<double>(now() - start).count());
  }
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
      deliver(request, tokens[i], kind);
  }
  publishQueue();
  publishBlocks();
  return true;
}
