//===- SessionBlocksGpuTest.cpp - Prefix caching's block pool on a GPU ----===//
//
// Session::saveBlocks / loadBlocks: a prompt's blocks saved from one slot
// and loaded into another, with only the rest prefilled, give the tokens of
// a fresh prefill of the whole prompt, while other slots decode beside it
// untouched; bad calls are refused with their codes. Skips without a GPU
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

using SessionBlocksTest = ToyEngineTest;

/// Feeds `prompt` to `slot` from its current length in chunks of 16 (the
/// toy's max_prefill_tokens), the first with `reset`; returns the token
/// after it.
int32_t prefill(Session &session, uint32_t slot,
                const std::vector<int32_t> &prompt, bool reset) {
  int32_t next = -1;
  for (size_t at = 0; at < prompt.size(); at += 16) {
    size_t end = std::min(prompt.size(), at + 16);
    next = session.step({stepInput(
        slot, std::vector<int32_t>(prompt.begin() + at, prompt.begin() + end),
        reset && at == 0)})[0];
  }
  return next;
}

TEST_F(SessionBlocksTest, LoadedBlocksGiveAFreshPrefillsTokens) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  Session session(engine);
  session.allocateBlockPool(8, 4);
  EXPECT_EQ(session.blockPoolTokens(), 8u);
  EXPECT_EQ(session.blockPoolBlocks(), 4u);
  const uint32_t want = 10;
  std::vector<int32_t> prompt =
      bytes("a shared system prompt, then a question");
  ASSERT_GT(prompt.size(), 24u);
  Session alone(engine);
  std::vector<int32_t> expected =
      alone.generate(prompt, greedy(want)).tokens[0];

  // Slot 0 prefills the whole prompt and saves its first three blocks, in
  // pool blocks out of order.
  std::vector<int32_t> slot0 = {prefill(session, 0, prompt, true)};
  session.saveBlocks(0, 0, {3, 1, 2});
  EXPECT_EQ(session.slotLength(0), prompt.size()) << "saving changed slot 0";

  // Slot 5 starts from the blocks (24 tokens) and prefills the rest while
  // slot 0 decodes in the same steps.
  session.loadBlocks(5, {3, 1, 2}, {});
  EXPECT_EQ(session.slotLength(5), 24u);
  std::vector<int32_t> rest(prompt.begin() + 24, prompt.end());
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
  EXPECT_EQ(slot5, expected);
  EXPECT_EQ(slot0, expected);
  expectGreedyMatchesReference(config, prompt, slot5);

  // A slot loaded again from the same blocks starts over and agrees again.
  session.loadBlocks(5, {3, 1}, {});
  EXPECT_EQ(session.slotLength(5), 16u);
  EXPECT_EQ(prefill(session, 5,
                    std::vector<int32_t>(prompt.begin() + 16, prompt.end()),
                    false),
            expected[0]);
}

TEST_F(SessionBlocksTest, SessionWithoutAPoolOrBadBlocksRefuses) {
  test::ToyConfig config = toyConfig();
  Session session(Engine::load(writeToy(config)));
  auto expectCode = [&](const std::function<void()> &call, ErrorCode code,
                        const std::string &what) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), code) << what << ": " << error.what();
    }
  };
  expectCode([&] { session.loadBlocks(0, {0}, {}); },
             ErrorCode::InvalidArgument, "a load without a pool");
  expectCode([&] { session.allocateBlockPool(config.capacity, 2); },
             ErrorCode::InvalidArgument, "blocks as long as the context");
  expectCode([&] { session.allocateBlockPool(4, 0); },
             ErrorCode::InvalidArgument, "an empty pool");
  session.allocateBlockPool(4, 2);
  prefill(session, 1, bytes("abcdefg"), true);
  expectCode([&] { session.saveBlocks(1, 1, {0}); }, ErrorCode::InvalidArgument,
             "a block past the tokens held");
  expectCode([&] { session.saveBlocks(1, 0, {2}); }, ErrorCode::InvalidArgument,
             "a pool block past the pool");
  expectCode([&] { session.saveBlocks(2, 0, {0}); }, ErrorCode::InvalidArgument,
             "an empty slot");
  expectCode([&] { session.loadBlocks(config.maxBatch, {0}, {}); },
             ErrorCode::InvalidArgument, "a slot past the last");
  session.saveBlocks(1, 0, {1});
  session.loadBlocks(2, {1}, {});
  EXPECT_EQ(session.slotLength(2), 4u);
}

} // namespace
