//===- SchedulerTest.cpp - Continuous batching over a test backend --------===//
//
// The backend here is deterministic and checks what the scheduler feeds it:
// each slot's next token is a hash of that slot's whole sequence (letters
// a..z of a byte vocabulary), so a request's tokens depend on its own
// prompt only, unless the scheduler mixes sequences or positions.
//
//===----------------------------------------------------------------------===//

#include "Scheduler.h"

#include <gtest/gtest.h>

#include <future>
#include <map>

using namespace sits;
using namespace sits::serve;

namespace {
class HashBackend : public Backend {
public:
  HashBackend(uint32_t slots, uint32_t maxLength)
      : slotCount(slots), maxLength(maxLength), sequences(slots) {}
  uint32_t slots() const override { return slotCount; }
  uint32_t maxSequenceLength() const override { return maxLength; }

  static int32_t next(const std::vector<int32_t> &sequence) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t token : sequence)
      h = (h ^ uint64_t(token)) * 1099511628211ull;
    return 'a' + int32_t(h % 26);
  }

  std::vector<int32_t> step(const std::vector<SlotStep> &steps) override {
    if (failAtStep && ++stepCount == failAtStep)
      throw Error(ErrorCode::Cuda, "test failure");
    log.push_back(steps);
    std::vector<int32_t> out;
    for (const SlotStep &step : steps) {
      std::vector<int32_t> &sequence = sequences.at(step.slot);
      if (step.position == 0)
        sequence.clear();
      EXPECT_EQ(step.position, sequence.size()) << "slot " << step.slot;
      EXPECT_LE(step.position + step.tokens.size(), maxLength);
      sequence.insert(sequence.end(), step.tokens.begin(), step.tokens.end());
      out.push_back(step.sample ? next(sequence) : -1);
    }
    return out;
  }

  uint32_t slotCount, maxLength;
  std::vector<std::vector<int32_t>> sequences;
  std::vector<std::vector<SlotStep>> log;
  int failAtStep = 0, stepCount = 0;
};

/// What a request received, gathered from its events.
struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::Length;
  std::string error;
  int events = 0;
};

EventCallback collect(Outcome &outcome, int cancelAfter = -1) {
  return [&outcome, cancelAfter](const RequestEvent &event) {
    EXPECT_FALSE(outcome.finished) << "an event after the last";
    ++outcome.events;
    outcome.tokens.insert(outcome.tokens.end(), event.tokens.begin(),
                          event.tokens.end());
    outcome.text += event.text;
    outcome.finished = event.finished;
    outcome.reason = event.reason;
    outcome.error = event.error;
    return cancelAfter < 0 || int(outcome.tokens.size()) < cancelAfter;
  };
}

std::shared_ptr<const ModelTokenizer> bytes(std::vector<int32_t> eos = {}) {
  return ModelTokenizer::bytes(256, std::move(eos));
}

Request request(std::vector<int32_t> prompt, uint32_t maxTokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.maxTokens = maxTokens;
  return r;
}

/// The tokens of one request run alone, computed from the hash directly.
std::vector<int32_t> alone(std::vector<int32_t> sequence, uint32_t count) {
  std::vector<int32_t> out;
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(HashBackend::next(sequence));
    sequence.push_back(out.back());
  }
  return out;
}

void drain(Scheduler &scheduler) {
  for (int i = 0; i < 10000 && scheduler.runOnce(); ++i) {
  }
  EXPECT_FALSE(scheduler.runOnce()) << "the scheduler does not settle";
}
} // namespace

TEST(Scheduler, OneRequestRunsToMaxTokens) {
  HashBackend backend(2, 64);
  Scheduler scheduler(backend, bytes(), {});
  Outcome outcome;
  ASSERT_TRUE(
      scheduler.submit(request({'h', 'i'}, 5), collect(outcome)).accepted());
  drain(scheduler);
  EXPECT_TRUE(outcome.finished);
  EXPECT_EQ(outcome.reason, FinishReason::Length);
  EXPECT_EQ(outcome.tokens, alone({'h', 'i'}, 5));
  EXPECT_EQ(outcome.text,
            std::string(outcome.tokens.begin(), outcome.tokens.end()));
  // A prefill step, then one decode step per further token.
  ASSERT_EQ(backend.log.size(), 5u);
  EXPECT_EQ(backend.log[0][0].tokens.size(), 2u);
  EXPECT_EQ(backend.log[1][0].position, 2u);
}

TEST(Scheduler, ContinuousBatchingKeepsSequencesApart) {
  HashBackend backend(2, 64);
  SchedulerOptions options;
  options.maxPrefillChunk = 3;
  Scheduler scheduler(backend, bytes(), options);
  std::vector<std::vector<int32_t>> prompts = {
      {'a'}, {'b', 'c', 'd', 'e', 'f', 'g', 'h'}, {'x', 'y'}, {'q'}, {'z'}};
  std::vector<uint32_t> lengths = {3, 6, 9, 2, 5};
  std::vector<Outcome> outcomes(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(
        scheduler.submit(request(prompts[i], lengths[i]), collect(outcomes[i]))
            .accepted());
  drain(scheduler);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(outcomes[i].finished) << i;
    EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], lengths[i])) << i;
  }
  // Requests joined between steps: some step fed a new sequence (position
  // 0) beside one that was decoding, and a prompt came in chunks of 3.
  bool joined = false, chunked = false;
  for (const std::vector<SlotStep> &step : backend.log) {
    bool fresh = false, decoding = false;
    for (const SlotStep &slot : step) {
      fresh |= slot.position == 0;
      decoding |= slot.position > 0 && slot.tokens.size() == 1 && slot.sample;
      chunked |= slot.position == 3 && slot.tokens.size() == 3 && !slot.sample;
      EXPECT_LE(slot.tokens.size(), 3u);
    }
    joined |= fresh && decoding;
    EXPECT_LE(step.size(), 2u);
  }
  EXPECT_TRUE(joined);
  EXPECT_TRUE(chunked);
}

TEST(Scheduler, QueueFullIsRefusedAtOnce) {
  HashBackend backend(1, 64);
  SchedulerOptions options;
  options.maxQueue = 1;
  Metrics metrics;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  Outcome first, second, third;
  EXPECT_TRUE(scheduler.submit(request({'a'}, 4), collect(first)).accepted());
  EXPECT_TRUE(scheduler.submit(request({'b'}, 4), collect(second)).accepted());
  Submission refused = scheduler.submit(request({'c'}, 4), collect(third));
  EXPECT_EQ(refused.rejection, Rejection::QueueFull);
  EXPECT_NE(refused.message.find("busy"), std::string::npos);
  EXPECT_EQ(third.events, 0);
  EXPECT_NE(metrics.render().find(
                "sits_requests_rejected_total{reason=\"queue_full\"} 1"),
            std::string::npos);
  drain(scheduler);
  EXPECT_EQ(first.tokens, alone({'a'}, 4));
  EXPECT_EQ(second.tokens, alone({'b'}, 4));
  // Room again once they ended.
  EXPECT_TRUE(scheduler.submit(request({'c'}, 4), collect(third)).accepted());
  drain(scheduler);
  EXPECT_EQ(third.tokens, alone({'c'}, 4));
}

TEST(Scheduler, BadRequestsAreRefused) {
  HashBackend backend(1, 8);
  Scheduler scheduler(backend, bytes(), {});
  Outcome outcome;
  EXPECT_EQ(scheduler.submit(request({}, 4), collect(outcome)).rejection,
            Rejection::Invalid);
  EXPECT_EQ(scheduler.submit(request({'a'}, 0), collect(outcome)).rejection,
            Rejection::Invalid);
  Request emptyStop = request({'a'}, 2);
  emptyStop.stop = {""};
  EXPECT_EQ(scheduler.submit(emptyStop, collect(outcome)).rejection,
            Rejection::Invalid);
  Submission tooLong =
      scheduler.submit(request({'a', 'b', 'c'}, 6), collect(outcome));
  EXPECT_EQ(tooLong.rejection, Rejection::TooLong);
  EXPECT_NE(tooLong.message.find("context of 8"), std::string::npos);
  // Exactly the context is fine.
  EXPECT_TRUE(scheduler.submit(request({'a', 'b', 'c'}, 5), collect(outcome))
                  .accepted());
  drain(scheduler);
  EXPECT_EQ(outcome.tokens.size(), 5u);
}

TEST(Scheduler, EndsAtEosUnlessIgnored) {
  std::vector<int32_t> expected = alone({'e'}, 6);
  int32_t eos = expected[2];
  // The first occurrence of that token ends the request (with it).
  size_t end =
      std::find(expected.begin(), expected.end(), eos) - expected.begin() + 1;
  HashBackend backend(1, 64);
  Scheduler scheduler(backend, bytes({eos}), {});
  Outcome stopped, ignoring;
  ASSERT_TRUE(scheduler.submit(request({'e'}, 6), collect(stopped)).accepted());
  Request ignore = request({'e'}, 6);
  ignore.stopAtEos = false;
  ASSERT_TRUE(scheduler.submit(ignore, collect(ignoring)).accepted());
  drain(scheduler);
  EXPECT_EQ(stopped.reason, FinishReason::EndOfSequence);
  EXPECT_EQ(stopped.tokens,
            std::vector<int32_t>(expected.begin(), expected.begin() + end));
  EXPECT_EQ(ignoring.reason, FinishReason::Length);
  EXPECT_EQ(ignoring.tokens, expected);
}

TEST(Scheduler, StopStringsCutTheText) {
  std::vector<int32_t> expected = alone({'s'}, 12);
  std::string full(expected.begin(), expected.end());
  std::string stop = full.substr(5, 2);
  size_t at = full.find(stop);
  HashBackend backend(1, 64);
  Scheduler scheduler(backend, bytes(), {});
  Outcome outcome;
  Request r = request({'s'}, 12);
  r.stop = {"never-there", stop};
  ASSERT_TRUE(scheduler.submit(r, collect(outcome)).accepted());
  drain(scheduler);
  EXPECT_EQ(outcome.reason, FinishReason::StopString);
  EXPECT_EQ(outcome.text, full.substr(0, at));
  EXPECT_EQ(outcome.tokens.size(), at + stop.size());
}

TEST(Scheduler, CancelledRequestsEnd) {
  HashBackend backend(1, 64);
  Scheduler scheduler(backend, bytes(), {});
  Outcome byCallback, waiting;
  ASSERT_TRUE(
      scheduler.submit(request({'c'}, 10), collect(byCallback, 2)).accepted());
  Submission queued = scheduler.submit(request({'w'}, 10), collect(waiting));
  ASSERT_TRUE(queued.accepted());
  scheduler.cancel(queued.id);
  drain(scheduler);
  EXPECT_EQ(byCallback.reason, FinishReason::Cancelled);
  EXPECT_EQ(byCallback.tokens, alone({'c'}, 2));
  EXPECT_TRUE(waiting.finished);
  EXPECT_EQ(waiting.reason, FinishReason::Cancelled);
  EXPECT_TRUE(waiting.tokens.empty());
  for (const std::vector<SlotStep> &step : backend.log)
    for (const SlotStep &slot : step)
      EXPECT_NE(slot.tokens[0], 'w') << "a cancelled request ran";
}

TEST(Scheduler, BackendFailureEndsTheFedRequests) {
  HashBackend backend(2, 64);
  backend.failAtStep = 3;
  Scheduler scheduler(backend, bytes(), {});
  Outcome a, b, c;
  ASSERT_TRUE(scheduler.submit(request({'a'}, 8), collect(a)).accepted());
  ASSERT_TRUE(scheduler.submit(request({'b'}, 8), collect(b)).accepted());
  drain(scheduler);
  for (Outcome *outcome : {&a, &b}) {
    EXPECT_TRUE(outcome->finished);
    EXPECT_NE(outcome->error.find("test failure"), std::string::npos);
    EXPECT_EQ(outcome->tokens.size(), 2u);
  }
  // The slots are free again, and a new request starts from position 0.
  ASSERT_TRUE(scheduler.submit(request({'c'}, 3), collect(c)).accepted());
  drain(scheduler);
  EXPECT_EQ(c.tokens, alone({'c'}, 3));
}

TEST(Scheduler, ThreadServesConcurrentSubmitters) {
  HashBackend backend(3, 128);
  Scheduler scheduler(backend, bytes(), {});
  scheduler.start();
  std::vector<std::future<std::vector<int32_t>>> results;
  for (int i = 0; i < 8; ++i)
    results.push_back(std::async(std::launch::async, [&scheduler, i] {
      auto promise = std::make_shared<std::promise<std::vector<int32_t>>>();
      auto tokens = std::make_shared<std::vector<int32_t>>();
      std::future<std::vector<int32_t>> done = promise->get_future();
      Submission submitted =
          scheduler.submit(request({int32_t('a' + i), 'k'}, 5 + i),
                           [promise, tokens](const RequestEvent &event) {
                             tokens->insert(tokens->end(), event.tokens.begin(),
                                            event.tokens.end());
                             if (event.finished)
                               promise->set_value(*tokens);
                             return true;
                           });
      EXPECT_TRUE(submitted.accepted());
      return done.get();
    }));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(results[i].get(), alone({int32_t('a' + i), 'k'}, 5 + i)) << i;
  scheduler.stop();
  Outcome late;
  EXPECT_EQ(scheduler.submit(request({'a'}, 2), collect(late)).rejection,
            Rejection::ShuttingDown);
}
