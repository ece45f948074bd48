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

namespace {
/// A backend on a clock of its own (SchedulerOptions::clock): a step takes
/// `base`, plus `perRow` for each token fed beyond one per slot (prompt
/// rows, which an engine's step grows with).
class TimedBackend : public HashBackend {
public:
  using HashBackend::HashBackend;
  std::vector<int32_t> step(const std::vector<SlotStep> &steps) override {
    size_t rows = 0;
    for (const SlotStep &step : steps)
      rows += step.tokens.size();
    time += base + perRow * int64_t(rows - steps.size());
    return HashBackend::step(steps);
  }
  std::function<std::chrono::steady_clock::time_point()> clock() {
    return [this] { return time; };
  }
  std::chrono::steady_clock::time_point time{};
  std::chrono::microseconds base{2000}, perRow{250};
};

/// A metric's value in the rendered text (-1 when absent).
double metric(const Metrics &metrics, const std::string &name) {
  std::string text = metrics.render();
  size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos)
    return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

struct StepRecord {
  uint32_t decoding = 0; ///< requests with a token out, before the step
  uint32_t prefill = 0;  ///< prompt tokens the step fed
  uint32_t budget = 0;   ///< the SLA budget it was planned under
  double tailShare = 0;  ///< the ledger's slow share before it
  uint32_t limit = 0;    ///< the batch limit it was planned under
  bool bulk = false;
  bool rowsOff = false; ///< planned with prompt rows off
};

/// Runs the scheduler round by round until it settles, recording each step;
/// `beforeRound(i)` may submit more.
std::vector<StepRecord>
runRecorded(Scheduler &scheduler, const Metrics &metrics,
            const std::vector<Outcome> &outcomes,
            const std::function<void(int)> &beforeRound) {
  std::vector<StepRecord> steps;
  double prefilled = 0, bulkSteps = 0;
  for (int i = 0; i < 100000; ++i) {
    beforeRound(i);
    StepRecord step;
    for (const Outcome &outcome : outcomes)
      step.decoding += !outcome.tokens.empty() && !outcome.finished;
    if (!scheduler.runOnce())
      break;
    double nowPrefilled = metric(metrics, "sits_prefill_tokens_total");
    double nowBulk = metric(metrics, "sits_sla_bulk_steps_total");
    step.prefill = uint32_t(nowPrefilled - prefilled);
    step.bulk = nowBulk > bulkSteps;
    step.budget = uint32_t(metric(metrics, "sits_step_prefill_budget_tokens"));
    step.tailShare = metric(metrics, "sits_sla_tail_share");
    step.limit = scheduler.admittedLimit();
    step.rowsOff = metric(metrics, "sits_sla_prompt_rows_off") == 1;
    prefilled = nowPrefilled;
    bulkSteps = nowBulk;
    steps.push_back(step);
  }
  EXPECT_FALSE(scheduler.runOnce()) << "the scheduler does not settle";
  return steps;
}

/// The per-kind step metrics agree with the recorded steps: each step
/// counted once under its kind (bulk; prefill: prompt rows within the
/// budget; decode: none), its prompt tokens under that kind, every
/// sampled row once, and on the backend's clock a bulk step's mean time
/// above a decode step's.
void expectStepKinds(const Metrics &metrics,
                     const std::vector<StepRecord> &steps) {
  double count[3] = {}, prompt[3] = {};
  for (const StepRecord &step : steps) {
    int kind = step.bulk ? 2 : step.prefill > 0 ? 1 : 0;
    count[kind] += 1;
    prompt[kind] += step.prefill;
  }
  const char *names[3] = {"decode", "prefill", "bulk"};
  double sampled = 0;
  for (int kind = 0; kind < 3; ++kind) {
    std::string label = std::string("{kind=\"") + names[kind] + "\"}";
    EXPECT_EQ(metric(metrics, "sits_step_duration_seconds_count" + label),
              count[kind])
        << names[kind];
    EXPECT_EQ(metric(metrics, "sits_step_prompt_tokens_total" + label),
              prompt[kind])
        << names[kind];
    sampled += metric(metrics, "sits_step_sampled_rows_total" + label);
  }
  EXPECT_EQ(sampled, metric(metrics, "sits_generation_tokens_total"));
  auto mean = [&](const char *kind) {
    std::string label = std::string("{kind=\"") + kind + "\"}";
    return metric(metrics, "sits_step_duration_seconds_sum" + label) /
           metric(metrics, "sits_step_duration_seconds_count" + label);
  };
  EXPECT_GT(count[0], 0) << "no decode step";
  if (count[2] > 0)
    EXPECT_GT(mean("bulk"), mean("decode"));
}

/// Two long decoding streams, and a prompt of 48 tokens every 4 rounds
/// (40 of them), over four slots, under a target of 5 ms with a per-step
/// limit of 40 prompt tokens (less than a prompt: a bulk step is cut).
struct TailWorkload {
  static constexpr uint32_t kStepLimit = 40;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<uint32_t> lengths;
  std::vector<Outcome> outcomes;
  size_t submitted = 0;
  explicit TailWorkload(uint32_t streamTokens = 1500) {
    prompts = {{'a'}, {'b'}};
    lengths = {streamTokens, streamTokens};
    for (int i = 0; i < 40; ++i) {
      std::vector<int32_t> prompt;
      for (int t = 0; t < 48; ++t)
        prompt.push_back('a' + (i * 7 + t * 3) % 26);
      prompts.push_back(prompt);
      lengths.push_back(8);
    }
    outcomes.resize(prompts.size());
  }
  static SchedulerOptions options(TimedBackend &backend) {
    SchedulerOptions o;
    o.slaP99TokenSeconds = 0.005;
    o.maxPrefillChunk = 64;
    o.maxStepPrefillTokens = kStepLimit;
    o.clock = backend.clock();
    return o;
  }
  std::vector<StepRecord> run(Scheduler &scheduler, const Metrics &metrics) {
    return runRecorded(scheduler, metrics, outcomes, [&](int round) {
      while (submitted < prompts.size() &&
             (submitted < 2 || round >= int(submitted - 2) * 4)) {
        EXPECT_TRUE(scheduler
                        .submit(request(prompts[submitted], lengths[submitted]),
                                collect(outcomes[submitted]))
                        .accepted());
        ++submitted;
      }
    });
  }
  void expectLoneTokens() {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE(outcomes[i].finished) << i;
      EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], lengths[i])) << i;
    }
  }
};
} // namespace

TEST(Scheduler, BulkStepsPrefillWaitingPromptsWhenTheTailHasRoom) {
  // A step takes 2 ms and 0.25 ms a prompt row beyond one per slot: over
  // the 5 ms target past 12 rows, and under 0.8 of it below 9, so a budget
  // that starts at 12 stays there. A ledger of 400 gaps with 5 % of them
  // slow allowed: waiting prompts are prefilled in bulk steps of up to 40
  // tokens beside the decoding streams, and their stalls cut neither the
  // budget nor the batch limit.
  TimedBackend backend(4, 2048);
  SchedulerOptions options = TailWorkload::options(backend);
  options.slaControl.tailShare = 0.05;
  options.slaControl.tailHorizon = 400;
  options.slaControl.minBudget = 12;
  Metrics metrics;
  TailWorkload work;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  int bulkBesideStreams = 0;
  uint32_t leastBudget = TailWorkload::kStepLimit;
  const StepRecord *firstBulk = nullptr;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord &step = steps[i];
    leastBudget = std::min(leastBudget, step.budget);
    // Normal steps of 12 rows take 5 ms, not over the target: only the
    // bulk steps' stalls could have cut the budget or the limit since.
    if (firstBulk) {
      EXPECT_EQ(step.budget, firstBulk->budget) << "step " << i;
      EXPECT_EQ(step.limit, firstBulk->limit) << "step " << i;
    }
    EXPECT_LE(step.prefill, TailWorkload::kStepLimit) << "step " << i;
    if (!step.bulk) {
      EXPECT_LE(step.prefill, step.budget) << "step " << i;
      continue;
    }
    EXPECT_GT(step.prefill, step.budget) << "step " << i;
    if (step.decoding > 0) {
      ++bulkBesideStreams;
      firstBulk = firstBulk ? firstBulk : &step;
      // The ledger had room for this step's stall.
      EXPECT_LE(step.tailShare, 0.05) << "step " << i;
    }
  }
  EXPECT_EQ(leastBudget, 12u) << "the budget was cut below its least";
  EXPECT_GT(bulkBesideStreams, 0) << "no bulk step beside decoding streams";
  EXPECT_EQ(metric(metrics, "sits_sla_bulk_steps_total"),
            std::count_if(steps.begin(), steps.end(),
                          [](const StepRecord &s) { return s.bulk; }));
  expectStepKinds(metrics, steps);
}

TEST(Scheduler, NoBulkStepBesideStreamsWhileTheTailIsFull) {
  // Every step takes 6 ms, over the 5 ms target: every gap is slow, the
  // ledger is full, and prompts wait for the budget beside decoding
  // streams without a bulk step. Only with nothing decoding (a bulk step
  // then delays no gap) do prompts get the per-step limit.
  TimedBackend backend(4, 2048);
  backend.base = std::chrono::microseconds(6000);
  Metrics metrics;
  TailWorkload work;
  Scheduler scheduler(backend, bytes(), TailWorkload::options(backend),
                      &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  int heldBesideStreams = 0, bulkAlone = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord &step = steps[i];
    if (step.decoding > 0) {
      EXPECT_FALSE(step.bulk) << "step " << i;
      EXPECT_LE(step.prefill, step.budget) << "step " << i;
      heldBesideStreams += step.prefill > 0 && step.prefill == step.budget &&
                           step.budget < TailWorkload::kStepLimit;
    } else if (step.bulk) {
      ++bulkAlone;
      EXPECT_GT(step.prefill, step.budget) << "step " << i;
    }
  }
  EXPECT_GT(heldBesideStreams, 0) << "prompts never waited for the budget";
  EXPECT_GT(bulkAlone, 0) << "no bulk step with nothing decoding";
  EXPECT_DOUBLE_EQ(metric(metrics, "sits_sla_tail_share"), 1);
  expectStepKinds(metrics, steps);
}

TEST(Scheduler, PromptRowsOffLeavePromptsToBulkSteps) {
  // A step takes 3 ms, under 0.8 of the 5 ms target, and 2.1 ms a prompt
  // row beyond one per slot: any prompt row puts it over the target, even
  // at the least budget. Prompt rows go off; normal steps beside decoding
  // streams then carry no prompt token, and prompts are prefilled in bulk
  // steps (or with nothing decoding), each request still getting its
  // lone tokens.
  TimedBackend backend(4, 2048);
  backend.base = std::chrono::microseconds(3000);
  backend.perRow = std::chrono::microseconds(2100);
  SchedulerOptions options = TailWorkload::options(backend);
  options.slaControl.tailShare = 0.05;
  options.slaControl.tailHorizon = 400;
  Metrics metrics;
  TailWorkload work;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  int offBesideStreams = 0, bulkWhileOff = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord &step = steps[i];
    if (!step.rowsOff)
      continue;
    EXPECT_EQ(step.budget, 0u) << "step " << i;
    if (step.bulk) {
      bulkWhileOff += step.prefill > 0;
    } else if (step.decoding > 0) {
      ++offBesideStreams;
      EXPECT_EQ(step.prefill, 0u) << "step " << i;
    }
  }
  EXPECT_GT(offBesideStreams, 0) << "prompt rows never went off";
  EXPECT_GT(bulkWhileOff, 0) << "no prompt moved with rows off";
  EXPECT_EQ(metric(metrics, "sits_prompt_tokens_total"),
            metric(metrics, "sits_prefill_tokens_total"));
  expectStepKinds(metrics, steps);
}

TEST(Scheduler, BulkStepsOverAPagedKvPool) {
  // The same workload, streams of 300 tokens, over a pool of 24 blocks of
  // 16 tokens: the streams grow into blocks the others need, so requests
  // step aside (their blocks back, their tokens recomputed) while bulk
  // steps run; each request still gets its lone tokens, and every block
  // comes back.
  TimedBackend backend(4, 2048);
  backend.usePages(16, 24);
  SchedulerOptions options = TailWorkload::options(backend);
  options.slaControl.tailShare = 0.05;
  options.slaControl.tailHorizon = 400;
  Metrics metrics;
  TailWorkload work(300);
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  EXPECT_GT(std::count_if(
                steps.begin(), steps.end(),
                [](const StepRecord &s) { return s.bulk && s.decoding > 0; }),
            0);
  EXPECT_GT(metric(metrics, "sits_requests_preempted_total"), 0);
  EXPECT_EQ(backend.pages->freeBlocks(), 24u);
}
