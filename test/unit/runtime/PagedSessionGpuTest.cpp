//===- PagedSessionGpuTest.cpp - A paged KV cache's session on a GPU ------===//
//
// The toy engine with its cache in blocks read through the block table (as
// sitsc --kv-layout=paged engines read theirs): the same tokens as the
// contiguous toy, batched with prompts of different lengths and through
// Session::step with slots restarting (their blocks reused); prefix
// caching shares blocks instead of copying them (a pool too small for
// copies still serves a shared prefix, and gives a full prefill's tokens);
// a pool with no free block is a clear KVCacheFull. Skips without a GPU
// (label `gpu`).
//
//===----------------------------------------------------------------------===//

#include "ToyEngineTest.h"

#include <functional>

using namespace sits;

namespace {

using test::greedy;
using test::stepInput;
using test::ToyEngineTest;

using PagedSessionTest = ToyEngineTest;

/// The toy paged in blocks of 16 rows (4 a full sequence of 64).
test::ToyConfig paged(test::ToyConfig config, uint32_t poolBlocks) {
  config.blockTokens = 16;
  config.poolBlocks = poolBlocks;
  return config;
}

/// Prefills `prompt` into `slot` in chunks of 16, then decodes until
/// `want` tokens; returns them.
std::vector<int32_t> run(Session &session, uint32_t slot,
                         const std::vector<int32_t> &prompt, size_t want) {
  std::vector<int32_t> out;
  for (size_t at = 0; at < prompt.size(); at += 16) {
    size_t end = std::min(prompt.size(), at + 16);
    int32_t next = session.step({stepInput(
        slot, std::vector<int32_t>(prompt.begin() + at, prompt.begin() + end),
        at == 0)})[0];
    if (end == prompt.size())
      out.push_back(next);
  }
  while (out.size() < want)
    out.push_back(session.step({stepInput(slot, {out.back()})})[0]);
  return out;
}

TEST_F(PagedSessionTest, PagedTokensEqualContiguousOnes) {
  test::ToyConfig config = toyConfig();
  auto contiguous = Engine::load(writeToy(config));
  auto pagedEngine = Engine::load(writeToy(paged(config, config.maxBatch * 4)));
  EXPECT_TRUE(pagedEngine->config().kvCache.paged());
  std::vector<std::vector<int32_t>> prompts = {
      bytes("a"), bytes("seventeen letters"),
      bytes("a prompt of more than thirty-two bytes")};
  Session a(contiguous), b(pagedEngine);
  GenerateResult want = a.generate(prompts, greedy(20));
  GenerateResult got = b.generate(prompts, greedy(20));
  ASSERT_EQ(got.tokens.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got.tokens[i], want.tokens[i]) << "sequence " << i;
    expectGreedyMatchesReference(config, prompts[i], got.tokens[i]);
  }
  // Teacher-forced logits too, bit for bit: the same rows, other places.
  EXPECT_EQ(b.scoreTokens(prompts, 1), a.scoreTokens(prompts, 1));
}

TEST_F(PagedSessionTest, RestartedSlotsReuseTheirBlocks) {
  test::ToyConfig config = toyConfig();
  // Six blocks: two sequences of up to 48 tokens at once, and only because
  // a restarted slot gives its blocks back do five more fit after them.
  auto engine = Engine::load(writeToy(paged(config, 6)));
  Session alone(Engine::load(writeToy(config)));
  Session session(engine);
  const std::vector<std::string> texts = {
      "the first request", "a second, somewhat longer request", "third",
      "the fourth one is here", "and a fifth"};
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> prompt = bytes(texts[i]);
    std::vector<int32_t> want = alone.generate(prompt, greedy(12)).tokens[0];
    EXPECT_EQ(run(session, uint32_t(i % 2) * 7, prompt, 12), want)
        << "request " << i;
  }
}

TEST_F(PagedSessionTest, SharedPrefixGivesAFullPrefillsTokens) {
  test::ToyConfig config = toyConfig();
  // A prompt of 38 tokens and 9 more: 3 blocks; a second sequence sharing
  // its first 2 needs 1 of its own. Copies would need 6 of the 5.
  auto engine = Engine::load(writeToy(paged(config, 5)));
  Session session(engine);
  EXPECT_THROW(session.allocateBlockPool(8, 4), Error)
      << "prefix blocks other than the cache's own";
  session.allocateBlockPool(16, 4);
  std::vector<int32_t> prompt = bytes("a shared system prompt, then a questio");
  ASSERT_EQ(prompt.size(), 38u);
  const size_t want = 10;
  Session alone(Engine::load(writeToy(config)));
  std::vector<int32_t> expected =
      alone.generate(prompt, greedy(want)).tokens[0];

  std::vector<int32_t> slot0 = run(session, 0, prompt, 1);
  session.saveBlocks(0, 0, {3, 1});
  session.loadBlocks(5, {3, 1}, {});
  EXPECT_EQ(session.slotLength(5), 32u);
  std::vector<int32_t> rest(prompt.begin() + 32, prompt.end());
  std::vector<int32_t> next =
      session.step({stepInput(0, {slot0.back()}), stepInput(5, rest)});
  slot0.push_back(next[0]);
  std::vector<int32_t> slot5 = {next[1]};
  while (slot5.size() < want) {
    next = session.step(
        {stepInput(0, {slot0.back()}), stepInput(5, {slot5.back()})});
    slot0.push_back(next[0]);
    slot5.push_back(next[1]);
  }
  slot0.resize(want);
  EXPECT_EQ(slot0, expected);
  EXPECT_EQ(slot5, expected);

  // Both slots restart: the shared blocks stay, held by the prefix ids.
  run(session, 5, bytes("x"), 1);
  run(session, 0, bytes("y"), 1);
  session.loadBlocks(2, {3, 1}, {});
  EXPECT_EQ(session.step({stepInput(2, rest)})[0], expected[0]);
}

TEST_F(PagedSessionTest, AFullPoolIsAClearError) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(paged(config, 4)));
  Session session(engine);
  auto expectFull = [&](const std::function<void()> &call,
                        const std::string &what) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), ErrorCode::KVCacheFull) << what;
      EXPECT_NE(std::string(error.what()).find("pool of 4 blocks"),
                std::string::npos)
          << error.what();
    }
  };
  // Two sequences of 40 tokens need 6 blocks.
  std::vector<int32_t> prompt =
      bytes("forty bytes of prompt, as two of them do");
  ASSERT_EQ(prompt.size(), 40u);
  expectFull(
      [&] {
        session.generate({prompt, prompt}, greedy(1));
      },
      "a batch larger than the pool");
  run(session, 0, prompt, 1);
  expectFull([&] { run(session, 1, prompt, 1); }, "a second sequence");
  // Restarting slot 0 frees its blocks: slot 1 fits now.
  run(session, 0, bytes("x"), 1);
  EXPECT_EQ(run(session, 1, prompt, 3).size(), 3u);
}

} // namespace
