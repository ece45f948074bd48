//===- SchedulerTest.cpp - Continuous batching over a test backend --------===//
//
// Over HashBackend (HashBackend.h): a request's tokens depend on its own
// prompt only, unless the scheduler mixes sequences or positions.
//
//===----------------------------------------------------------------------===//

#include "HashBackend.h"

#include <future>
#include <map>
#include <thread>

using namespace sits;
using namespace sits::serve;
using namespace sits::serve::test;

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

TEST(Scheduler, PrefillChunksFitTheBackendsStep) {
  // A backend that takes 4 tokens a slot in a step (an engine compiled
  // with --max-prefill-tokens=4): the default chunk becomes 4, and a chunk
  // asked larger is refused up front, naming both.
  HashBackend backend(2, 64);
  backend.stepTokenLimit = 4;
  {
    Scheduler scheduler(backend, bytes(), SchedulerOptions());
    std::vector<int32_t> prompt(11, 'p');
    Outcome outcome;
    ASSERT_TRUE(
        scheduler.submit(request(prompt, 3), collect(outcome)).accepted());
    drain(scheduler);
    EXPECT_TRUE(outcome.finished);
    EXPECT_EQ(outcome.tokens, alone(prompt, 3));
    // 4 + 4 + 3 prompt tokens, then two decode steps.
    ASSERT_EQ(backend.log.size(), 5u);
    EXPECT_EQ(backend.log[0][0].tokens.size(), 4u);
    EXPECT_EQ(backend.log[2][0].tokens.size(), 3u);
  }
  SchedulerOptions options;
  options.maxPrefillChunk = 5;
  try {
    Scheduler scheduler(backend, bytes(), options);
    ADD_FAILURE() << "a chunk of 5 over a backend that takes 4";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(error.what()).find("chunk of 5 tokens"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("(4;"), std::string::npos)
        << error.what();
  }
  options.maxPrefillChunk = 4;
  EXPECT_NO_THROW(Scheduler(backend, bytes(), options));
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
  EXPECT_GE(refused.retryAfterSeconds, 1u);
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

TEST(Scheduler, RetryAfterFollowsTheCompletionRate) {
  // Three requests ending 300 ms apart, 0.9 s to the refusal: 3.3 per
  // second; four wait, so the refused one would start in about 1.5 s:
  // rounded up, 2 s. With a least of 3 s, 3.
  for (uint32_t least : {1u, 3u}) {
    HashBackend backend(1, 64);
    SchedulerOptions options;
    options.maxQueue = 3;
    options.minRetryAfter = least;
    // Before the scheduler: its destructor ends the waiting requests
    // through their callbacks, which write here.
    std::vector<Outcome> outcomes(8);
    Scheduler scheduler(backend, bytes(), options);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(
          scheduler.submit(request({'a'}, 1), collect(outcomes[i])).accepted());
      drain(scheduler);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    for (int i = 3; i < 7; ++i)
      ASSERT_TRUE(
          scheduler.submit(request({'b'}, 1), collect(outcomes[i])).accepted());
    Submission refused =
        scheduler.submit(request({'c'}, 1), collect(outcomes[7]));
    ASSERT_EQ(refused.rejection, Rejection::QueueFull);
    EXPECT_EQ(refused.retryAfterSeconds, std::max(least, 2u)) << least;
  }
}

namespace {
/// A backend whose steps take `delay`: inter-token latency is at least that.
class SlowBackend : public HashBackend {
public:
  SlowBackend(uint32_t slots, uint32_t maxLength,
              std::chrono::milliseconds delay)
      : HashBackend(slots, maxLength), delay(delay) {}
  std::vector<int32_t> step(const std::vector<SlotStep> &steps) override {
    std::this_thread::sleep_for(delay);
    return HashBackend::step(steps);
  }
  std::chrono::milliseconds delay;
};
} // namespace

TEST(Scheduler, SlaTargetLimitsTheRunningBatch) {
  // Every token takes 4 ms or more, the target is 1 ms: prompt rows go
  // off (a step with a prompt row is over the target), then the limit
  // halves from 4 slots down to 1 within a few 100 ms windows, and then
  // one request runs at a time while the others wait; all get their own
  // tokens.
  SlowBackend backend(4, 64, std::chrono::milliseconds(4));
  SchedulerOptions options;
  options.slaP99TokenSeconds = 0.001;
  Metrics metrics;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  EXPECT_EQ(scheduler.admittedLimit(), 4u);
  std::vector<Outcome> outcomes(24);
  for (size_t i = 0; i < outcomes.size(); ++i)
    ASSERT_TRUE(
        scheduler.submit(request({int32_t('a' + i)}, 30), collect(outcomes[i]))
            .accepted());
  // Once a step ran one request under a limit of 1, no step runs more.
  size_t widest = 0;
  bool settled = false;
  for (int i = 0; i < 100000 && scheduler.runOnce(); ++i) {
    size_t width = backend.log.back().size();
    widest = std::max(widest, width);
    if (settled)
      EXPECT_EQ(width, 1u) << "step " << i;
    settled = settled || (scheduler.admittedLimit() == 1 && width == 1);
  }
  EXPECT_EQ(widest, 4u) << "the batch never used every slot";
  EXPECT_EQ(scheduler.admittedLimit(), 1u);
  EXPECT_TRUE(settled) << "the limit of 1 never held";
  for (size_t i = 0; i < outcomes.size(); ++i)
    EXPECT_EQ(outcomes[i].tokens, alone({int32_t('a' + i)}, 30)) << i;
  std::string text = metrics.render();
  EXPECT_NE(text.find("sits_admitted_batch_limit 1\n"), std::string::npos);
  EXPECT_EQ(text.find("sits_sla_window_p99_seconds 0\n"), std::string::npos);
  // Prompt rows stayed off (no window under the margin): a normal step
  // may prefill no prompt token.
  EXPECT_NE(text.find("sits_sla_prompt_rows_off 1\n"), std::string::npos);
  EXPECT_NE(text.find("sits_step_prefill_budget_tokens 0\n"),
            std::string::npos);
}

TEST(Scheduler, AnSlaLimitStaysOneOverTheRequestsThatRan) {
  // One request of 4 ms steps under a 1 s target: a light load that
  // meets it. The limit comes down from the 4 slots to 2 once a window
  // closes with one request running, so that a heavier load would join
  // one request a window.
  SlowBackend backend(4, 64, std::chrono::milliseconds(4));
  SchedulerOptions options;
  options.slaP99TokenSeconds = 1.0;
  Scheduler scheduler(backend, bytes(), options);
  Outcome outcome;
  ASSERT_TRUE(
      scheduler.submit(request({'a'}, 50), collect(outcome)).accepted());
  while (scheduler.runOnce()) {
  }
  EXPECT_EQ(outcome.tokens, alone({'a'}, 50));
  EXPECT_EQ(scheduler.admittedLimit(), 2u);
}

TEST(Scheduler, AnSlaLimitGrowsOnlyOnStepsThatDecodeTheAdmitted) {
  // One stream under a 1 s target brings the limit to 2. Three long
  // prompts (one token a step) arrive: one joins, the limit grows to 3
  // (two running, one decoding: all but one), the second joins, the third
  // waits. While the two prompts prefill, the steps decode one request of
  // three, so the limit stays 3 (counting the running requests, it would
  // grow); once the first prompt decodes beside the stream, it grows.
  SlowBackend backend(4, 1024, std::chrono::milliseconds(2));
  SchedulerOptions options;
  options.slaP99TokenSeconds = 1.0;
  options.maxPrefillChunk = 1;
  Scheduler scheduler(backend, bytes(), options);
  Outcome stream;
  ASSERT_TRUE(
      scheduler.submit(request({'a'}, 600), collect(stream)).accepted());
  while (scheduler.admittedLimit() != 2u && scheduler.runOnce()) {
  }
  ASSERT_EQ(scheduler.admittedLimit(), 2u);
  std::vector<Outcome> prompts(3);
  for (Outcome &outcome : prompts)
    ASSERT_TRUE(scheduler
                    .submit(request(std::vector<int32_t>(300, 'p'), 4),
                            collect(outcome))
                    .accepted());
  uint32_t mostWhilePrefilling = 0;
  while (scheduler.runOnce() && prompts[0].tokens.empty())
    mostWhilePrefilling =
        std::max(mostWhilePrefilling, scheduler.admittedLimit());
  EXPECT_TRUE(prompts[2].tokens.empty());
  EXPECT_EQ(mostWhilePrefilling, 3u);
  // The first prompt decodes beside the stream: two of three, it grows.
  uint32_t mostAfter = 0;
  while (scheduler.runOnce() && !prompts[0].finished)
    mostAfter = std::max(mostAfter, scheduler.admittedLimit());
  while (scheduler.runOnce() && prompts[1].tokens.empty())
    mostAfter = std::max(mostAfter, scheduler.admittedLimit());
  EXPECT_EQ(mostAfter, 4u);
  drain(scheduler);
  EXPECT_EQ(stream.tokens, alone({'a'}, 600));
}

TEST(Scheduler, StepPrefillBudgetFeedsTheOldestPromptsFirst) {
  // Prompts of 8, 10 and 10 tokens in slots of their own, chunks of 8, 12
  // prompt tokens a step. Step 1: the first prompt whole, 4 tokens of the
  // second; the third waits. Step 2: the first decodes (decoding is fed
  // whatever the budget), the second's last 6 and the third's first 6.
  HashBackend backend(3, 64);
  SchedulerOptions options;
  options.maxPrefillChunk = 8;
  options.maxStepPrefillTokens = 12;
  Scheduler scheduler(backend, bytes(), options);
  std::vector<std::vector<int32_t>> prompts = {
      letters("abcdefgh"), letters("klmnopqrst"), letters("uvwxyzabcd")};
  std::vector<Outcome> outcomes(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(scheduler.submit(request(prompts[i], 4), collect(outcomes[i]))
                    .accepted());
  drain(scheduler);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], 4)) << i;
  auto shape = [](const std::vector<SlotStep> &step) {
    std::vector<std::pair<uint32_t, size_t>> fed; // position, tokens
    for (const SlotStep &slot : step)
      fed.emplace_back(slot.position, slot.tokens.size());
    std::sort(fed.begin(), fed.end());
    return fed;
  };
  using Fed = std::vector<std::pair<uint32_t, size_t>>;
  ASSERT_GE(backend.log.size(), 2u);
  EXPECT_EQ(shape(backend.log[0]), (Fed{{0, 4}, {0, 8}}));
  EXPECT_EQ(shape(backend.log[1]), (Fed{{0, 6}, {4, 6}, {8, 1}}));
  for (const std::vector<SlotStep> &step : backend.log) {
    size_t prompt = 0;
    for (const SlotStep &slot : step)
      prompt += slot.tokens.size() > 1 || !slot.sample ? slot.tokens.size() : 0;
    EXPECT_LE(prompt, 12u);
  }
}

TEST(Scheduler, PrefixCacheSkipsCachedBlocksAndKeepsTheTokens) {
  HashBackend backend(2, 64);
  backend.allocateBlockPool(4, 16);
  Metrics metrics;
  Scheduler scheduler(backend, bytes(), {}, &metrics);
  ASSERT_NE(scheduler.prefixCache(), nullptr);
  std::string shared = "abcdefghijklmnop"; // four blocks
  std::vector<int32_t> first = letters(shared + "qrs");
  std::vector<int32_t> second = letters(shared + "xyz");
  Outcome a, b, c;
  ASSERT_TRUE(scheduler.submit(request(first, 5), collect(a)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.saves, 1) << "the prompt's four full blocks, at once";
  EXPECT_EQ(scheduler.prefixCache()->usedBlocks(), 4u);

  size_t logged = backend.log.size();
  ASSERT_TRUE(scheduler.submit(request(second, 5), collect(b)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.loads, 1);
  // Prefill starts after the 16 cached tokens.
  ASSERT_GT(backend.log.size(), logged);
  EXPECT_EQ(backend.log[logged][0].position, 16u);
  EXPECT_EQ(backend.log[logged][0].tokens, letters("xyz"));
  EXPECT_EQ(a.tokens, alone(first, 5));
  EXPECT_EQ(b.tokens, alone(second, 5));

  // A prompt of exactly the cached blocks: the last token is prefilled
  // anyway (its logits give the first token), so three blocks are loaded.
  logged = backend.log.size();
  ASSERT_TRUE(
      scheduler.submit(request(letters(shared), 3), collect(c)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.log[logged][0].position, 12u);
  EXPECT_EQ(backend.log[logged][0].tokens, letters("mnop"));
  EXPECT_EQ(c.tokens, alone(letters(shared), 3));

  std::string text = metrics.render();
  EXPECT_NE(text.find("sits_prefix_cache_hit_tokens_total 28\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sits_prefix_cache_prompt_tokens_total 54\n"),
            std::string::npos);
  EXPECT_NE(text.find("sits_prefix_cache_blocks_used 4\n"), std::string::npos);
  EXPECT_NE(text.find("sits_prefix_cache_blocks_free 12\n"), std::string::npos);
}

/// A backend that loads a cached prefix only so far (a paged quantized
/// cache without the FP16 rows of its last blocks): the rest is prefilled,
/// the tokens are the same, and the blocks not loaded are not held.
TEST(Scheduler, PrefixLoadsAsFarAsTheBackendCan) {
  HashBackend backend(2, 64);
  backend.allocateBlockPool(4, 16);
  backend.loadLimit = 2;
  backend.resaves = true;
  Scheduler scheduler(backend, bytes(), {});
  std::string shared = "abcdefghijklmnop"; // four blocks
  std::vector<int32_t> first = letters(shared + "qrs");
  std::vector<int32_t> second = letters(shared + "xyz");
  Outcome a, b;
  ASSERT_TRUE(scheduler.submit(request(first, 5), collect(a)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.lastSave, (std::pair<uint32_t, uint32_t>{0, 4}));
  size_t logged = backend.log.size();
  ASSERT_TRUE(scheduler.submit(request(second, 5), collect(b)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.loads, 1);
  // Two of the four matched blocks load; prefill starts at token 8.
  EXPECT_EQ(backend.log[logged][0].position, 8u);
  EXPECT_EQ(backend.log[logged][0].tokens, letters("ijklmnopxyz"));
  EXPECT_EQ(a.tokens, alone(first, 5));
  EXPECT_EQ(b.tokens, alone(second, 5));
  // Its prompt's blocks are saved again from block 0 (the cached ones too).
  EXPECT_EQ(backend.lastSave, (std::pair<uint32_t, uint32_t>{0, 4}));
  EXPECT_EQ(backend.saves, 2);
  for (uint32_t pool = 0; pool < 16; ++pool)
    EXPECT_EQ(scheduler.prefixCache()->references(pool), 0u) << pool;
}

TEST(Scheduler, PrefixCacheFailuresFallBackToAFullPrefill) {
  HashBackend backend(1, 64);
  backend.allocateBlockPool(4, 8);
  Scheduler scheduler(backend, bytes(), {});
  std::vector<int32_t> prompt = letters("abcdefghij");
  Outcome a, b, c;
  // A failed save forgets the blocks: nothing is cached.
  backend.failSaves = true;
  ASSERT_TRUE(scheduler.submit(request(prompt, 4), collect(a)).accepted());
  drain(scheduler);
  EXPECT_EQ(scheduler.prefixCache()->usedBlocks(), 0u);
  EXPECT_EQ(a.tokens, alone(prompt, 4));
  backend.failSaves = false;
  ASSERT_TRUE(scheduler.submit(request(prompt, 4), collect(b)).accepted());
  drain(scheduler);
  EXPECT_EQ(scheduler.prefixCache()->usedBlocks(), 2u);
  // A failed load prefills from position 0.
  backend.failLoads = true;
  size_t logged = backend.log.size();
  ASSERT_TRUE(scheduler.submit(request(prompt, 4), collect(c)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.log[logged][0].position, 0u);
  EXPECT_EQ(b.tokens, alone(prompt, 4));
  EXPECT_EQ(c.tokens, alone(prompt, 4));
  EXPECT_EQ(scheduler.prefixCache()->references(0), 0u);
  EXPECT_EQ(scheduler.prefixCache()->references(1), 0u);
}

TEST(Scheduler, PrefixCacheUnderBatchingAndEviction) {
  // Many requests over few blocks, four slots at once: blocks are evicted
  // and reused while others hold theirs, and every request gets its own
  // tokens.
  HashBackend backend(4, 64);
  backend.allocateBlockPool(2, 6);
  SchedulerOptions options;
  options.maxQueue = 64;
  options.maxPrefillChunk = 3;
  Scheduler scheduler(backend, bytes(), options);
  std::vector<Outcome> outcomes(24);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    prompts.push_back(letters(std::string("abcdef").substr(0, 2 + i % 5) +
                              char('g' + i % 3) + "xy"));
    ASSERT_TRUE(scheduler.submit(request(prompts[i], 6), collect(outcomes[i]))
                    .accepted());
  }
  drain(scheduler);
  for (size_t i = 0; i < outcomes.size(); ++i)
    EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], 6)) << i;
  EXPECT_GT(backend.loads, 0);
  EXPECT_GT(scheduler.prefixCache()->evictions(), 0u);
  for (uint32_t pool = 0; pool < 6; ++pool)
    EXPECT_EQ(scheduler.prefixCache()->references(pool), 0u) << pool;
}
