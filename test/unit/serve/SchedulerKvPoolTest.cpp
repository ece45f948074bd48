//===- SchedulerKvPoolTest.cpp - Admission by free KV blocks --------------===//
//
// The scheduler over a HashBackend whose cache is paged into a small pool of
// blocks (the runtime's BlockAllocator, as a GPU session's): requests wait
// for the blocks of their prompt and one more, running requests that cannot
// grow make the newest step aside and recompute later, prefix blocks shared
// from the cache are not counted twice, and a request longer than the pool
// is refused at once. Every request gets the tokens it gets alone, and the
// backend never runs out of blocks.
//
//===----------------------------------------------------------------------===//

#include "HashBackend.h"

using namespace sits;
using namespace sits::serve;
using namespace sits::serve::test;

namespace {

/// The most slots fed in one step.
size_t widestStep(const HashBackend &backend) {
  size_t widest = 0;
  for (const std::vector<SlotStep> &step : backend.log)
    widest = std::max(widest, step.size());
  return widest;
}

/// The value of a metric line `name value` in `text` (-1: absent).
double metric(const std::string &text, const std::string &name) {
  size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1
                                 : std::stod(text.substr(at + name.size() + 2));
}

} // namespace

TEST(SchedulerKvPool, RequestsWaitForTheBlocksOfTheirPrompt) {
  // Blocks of 4, 8 in the pool: a prompt of 9 tokens with 3 to generate
  // holds 3 blocks at most (the last token is never fed), and is admitted
  // with those 3 free. Two run at once, never three, although 4 slots are
  // free; nobody needs to step aside.
  HashBackend backend(4, 64);
  backend.usePages(4, 8);
  Metrics metrics;
  Scheduler scheduler(backend, bytes(), {}, &metrics);
  EXPECT_EQ(scheduler.maxSequenceLength(), 32u) << "the pool's 32 tokens";
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Outcome> outcomes(6);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    prompts.push_back(letters(std::string("abcdefgh") + char('i' + i)));
    ASSERT_TRUE(scheduler.submit(request(prompts[i], 3), collect(outcomes[i]))
                    .accepted());
  }
  drain(scheduler);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].reason, FinishReason::Length) << outcomes[i].error;
    EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], 3)) << i;
  }
  EXPECT_EQ(widestStep(backend), 2u);
  std::string text = metrics.render();
  EXPECT_EQ(metric(text, "sits_requests_preempted_total"), 0);
  // Every finished request gave its blocks back.
  EXPECT_EQ(backend.pages->freeBlocks(), 8u);
  EXPECT_EQ(metric(text, "sits_kv_blocks_free"), 8);
  EXPECT_EQ(metric(text, "sits_kv_blocks_used"), 0);
}

TEST(SchedulerKvPool, GrowingRequestsPreemptTheNewestAndKeepTheirTokens) {
  // Blocks of 4, 6 in the pool, 3 slots: prompts of 3 tokens are admitted
  // with 2 blocks each, and all three start; growing to 14 tokens (4
  // blocks each) they cannot all go on, so the newest steps aside, its
  // blocks given back, and runs again later from its prompt and the tokens
  // it had. Each still gets its own tokens, each once.
  HashBackend backend(3, 64);
  backend.usePages(4, 6);
  Metrics metrics;
  SchedulerOptions options;
  options.maxPrefillChunk = 5;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<std::vector<int32_t>> prompts = {letters("abc"), letters("def"),
                                               letters("ghi"), letters("jkl")};
  std::vector<Outcome> outcomes(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(scheduler.submit(request(prompts[i], 12), collect(outcomes[i]))
                    .accepted());
  drain(scheduler);
  EXPECT_EQ(widestStep(backend), 3u) << "all three never ran at once";
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(outcomes[i].error.empty()) << outcomes[i].error;
    EXPECT_EQ(outcomes[i].reason, FinishReason::Length) << i;
    EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], 12)) << i;
    EXPECT_EQ(outcomes[i].events, 12) << "a token delivered twice";
  }
  EXPECT_GT(metric(metrics.render(), "sits_requests_preempted_total"), 0);
  // A preempted request prefilled its prompt and its tokens again, in
  // chunks of at most 5, from position 0.
  bool recomputed = false;
  for (const std::vector<SlotStep> &step : backend.log)
    for (const SlotStep &slot : step)
      recomputed |= slot.position == 5 && slot.tokens.size() == 5;
  EXPECT_TRUE(recomputed);
  EXPECT_EQ(backend.pages->freeBlocks(), 6u);
}

TEST(SchedulerKvPool, SharedPrefixBlocksAreNotCountedTwice) {
  // A pool of 6 blocks of 4. A first prompt of 13 tokens leaves its 3 full
  // blocks in the prefix cache (held by its pool ids alone). Then a short
  // request runs (2 blocks counted), and a prompt sharing those 3 blocks
  // comes: it takes 1 block of its own plus 1 to grow into... only if its
  // shared blocks are not counted as taken, nor as free to take back.
  HashBackend backend(2, 64);
  backend.usePages(4, 6);
  backend.allocateBlockPool(4, 8);
  Scheduler scheduler(backend, bytes(), {});
  std::vector<int32_t> first = letters("abcdefghijklm");
  std::vector<int32_t> shared = letters("abcdefghijklz");
  std::vector<int32_t> other = letters("xyzxy");
  Outcome a, b, c;
  ASSERT_TRUE(scheduler.submit(request(first, 2), collect(a)).accepted());
  drain(scheduler);
  ASSERT_EQ(backend.saves, 1);
  EXPECT_EQ(backend.pages->availableBlocks(), 6u);
  size_t logged = backend.log.size();
  ASSERT_TRUE(scheduler.submit(request(other, 3), collect(b)).accepted());
  ASSERT_TRUE(scheduler.submit(request(shared, 2), collect(c)).accepted());
  drain(scheduler);
  EXPECT_EQ(backend.loads, 1);
  EXPECT_EQ(a.tokens, alone(first, 2));
  EXPECT_EQ(b.tokens, alone(other, 3));
  EXPECT_EQ(c.tokens, alone(shared, 2));
  // Both ran in the first step: the shared prompt from position 12.
  ASSERT_GT(backend.log.size(), logged);
  ASSERT_EQ(backend.log[logged].size(), 2u);
  EXPECT_EQ(backend.log[logged][1].position, 12u);
  // Four blocks stay with the prefix cache (the first prompt's three and
  // the short one's first): available, not free.
  EXPECT_EQ(backend.pages->freeBlocks(), 2u);
  EXPECT_EQ(backend.pages->availableBlocks(), 6u);
}

TEST(SchedulerKvPool, ARequestLongerThanThePoolIsRefusedAtOnce) {
  // 4 blocks of 4: 16 tokens of the 64 a slot holds.
  HashBackend backend(2, 64);
  backend.usePages(4, 4);
  Scheduler scheduler(backend, bytes(), {});
  EXPECT_EQ(scheduler.maxSequenceLength(), 16u);
  Outcome outcome;
  Submission refused = scheduler.submit(
      request(letters("abcdefghijklmnopq"), 1), collect(outcome));
  EXPECT_EQ(refused.rejection, Rejection::TooLong);
  EXPECT_NE(refused.message.find("context of 16 tokens (all the KV cache "
                                 "pool's 4 blocks of 4 tokens)"),
            std::string::npos)
      << refused.message;
  EXPECT_EQ(
      scheduler.submit(request(letters("abcdefghij"), 7), collect(outcome))
          .rejection,
      Rejection::TooLong);
  // Exactly the pool is fine, and runs alone.
  ASSERT_TRUE(
      scheduler.submit(request(letters("abcdefghij"), 6), collect(outcome))
          .accepted());
  drain(scheduler);
  EXPECT_EQ(outcome.tokens, alone(letters("abcdefghij"), 6));
}

TEST(SchedulerKvPool, CancellingARequestThatSteppedAsideEndsIt) {
  // As in the preemption test, then the request that stepped aside is
  // cancelled while it waits: it ends with the tokens it had, and the
  // others are unharmed.
  HashBackend backend(3, 64);
  backend.usePages(4, 6);
  Metrics metrics;
  Scheduler scheduler(backend, bytes(), {}, &metrics);
  std::vector<std::vector<int32_t>> prompts = {letters("abc"), letters("def"),
                                               letters("ghi")};
  std::vector<Outcome> outcomes(prompts.size());
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i)
    ids.push_back(
        scheduler.submit(request(prompts[i], 12), collect(outcomes[i])).id);
  ASSERT_TRUE(scheduler.runOnce());
  ASSERT_EQ(scheduler.waitingRequests(), 0u) << "all three start";
  for (int i = 0; i < 10000 && scheduler.waitingRequests() == 0; ++i)
    ASSERT_TRUE(scheduler.runOnce());
  ASSERT_EQ(scheduler.waitingRequests(), 1u) << "nobody stepped aside";
  size_t had = outcomes[2].tokens.size();
  EXPECT_GT(had, 0u);
  scheduler.cancel(ids[2]);
  drain(scheduler);
  EXPECT_EQ(outcomes[2].reason, FinishReason::Cancelled);
  EXPECT_EQ(outcomes[2].tokens.size(), had);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], 12)) << i;
  EXPECT_EQ(scheduler.waitingRequests(), 0u);
  EXPECT_EQ(scheduler.runningRequests(), 0u);
  EXPECT_EQ(backend.pages->freeBlocks(), 6u);
}
