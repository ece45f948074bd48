//===- ServeSessionGpuTest.cpp - The serving scheduler over a GPU session -===//
//
// runtime/serve's Scheduler over SessionBackend (what sits-serve runs) with
// the paged toy engine and a pool far smaller than its slots: requests are
// admitted by free blocks, running ones that cannot grow step aside and
// recompute, and every request, greedy or seeded, gets the tokens it gets
// alone; the session's blocks all come back. Skips without a GPU (label
// `gpu`).
//
//===----------------------------------------------------------------------===//

#include "Scheduler.h"
#include "SessionBackend.h"
#include "ToyEngineTest.h"

using namespace sits;

namespace {

using ServeSessionTest = test::ToyEngineTest;

struct Result {
  std::vector<int32_t> tokens;
  bool finished = false;
  FinishReason reason = FinishReason::Cancelled;
  std::string error;
};

/// Runs `requests` through a scheduler over `session`, all submitted at
/// once, until they end.
std::vector<Result> serve(Session &session,
                          const std::vector<serve::Request> &requests,
                          serve::Metrics *metrics = nullptr) {
  serve::SessionBackend backend(session);
  serve::SchedulerOptions options;
  options.maxPrefillChunk = session.engine()->config().maxPrefillTokens;
  std::vector<Result> results(requests.size());
  {
    serve::Scheduler scheduler(backend, ModelTokenizer::bytes(256, {}), options,
                               metrics);
    for (size_t i = 0; i < requests.size(); ++i) {
      Result *result = &results[i];
      serve::Submission submitted = scheduler.submit(
          requests[i], [result](const serve::RequestEvent &event) {
            result->tokens.insert(result->tokens.end(), event.tokens.begin(),
                                  event.tokens.end());
            result->finished = event.finished;
            result->reason = event.reason;
            result->error = event.error;
            return true;
          });
      EXPECT_TRUE(submitted.accepted()) << submitted.message;
    }
    for (int i = 0; i < 100000 && scheduler.runOnce(); ++i) {
    }
  }
  return results;
}

serve::Request request(const std::string &prompt, uint32_t maxTokens,
                       uint64_t seed = 0) {
  serve::Request r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.maxTokens = maxTokens;
  r.stopAtEos = false;
  if (seed) {
    r.sampling.temperature = 0.9f;
    r.sampling.topK = 40;
    r.sampling.topP = 0.92f;
    r.sampling.seed = seed;
  }
  return r;
}

TEST_F(ServeSessionTest, MoreRequestsThanThePoolHoldsGetTheirLoneTokens) {
  // Blocks of 16, a pool of 6: prompts of one block start three at a time
  // (with a block each to grow into) of the 8 slots, then grow to 4 blocks
  // each, so the newest steps aside (5 times, as the CPU scheduler tests'
  // backend counts for this schedule).
  test::ToyConfig config = toyConfig();
  config.blockTokens = 16;
  config.poolBlocks = 6;
  auto engine = Engine::load(writeToy(config));
  std::vector<serve::Request> requests;
  const std::vector<std::string> prompts = {
      "the first one", "a second",     "third",   "the fourth one",
      "and a fifth",   "sixth prompt", "seventh", "the last"};
  for (size_t i = 0; i < prompts.size(); ++i)
    requests.push_back(request(prompts[i], 40, i % 3 == 1 ? 100 + i : 0));

  std::vector<std::vector<int32_t>> lone;
  for (const serve::Request &r : requests) {
    Session alone(engine);
    std::vector<Result> one = serve(alone, {r});
    ASSERT_TRUE(one[0].error.empty()) << one[0].error;
    lone.push_back(one[0].tokens);
  }
  Session session(engine);
  serve::Metrics metrics;
  std::vector<Result> results = serve(session, requests, &metrics);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(results[i].finished) << i;
    EXPECT_TRUE(results[i].error.empty()) << i << ": " << results[i].error;
    EXPECT_EQ(results[i].reason, FinishReason::Length) << i;
    EXPECT_EQ(results[i].tokens, lone[i]) << "request " << i;
  }
  // Greedy ones are the engine's greedy tokens.
  for (size_t i = 0; i < requests.size(); i += 3)
    expectGreedyMatchesReference(config, requests[i].prompt, lone[i]);
  std::string text = metrics.render();
  EXPECT_EQ(text.find("sits_requests_preempted_total 0\n"), std::string::npos)
      << "no request stepped aside: the test does not test preemption";
  EXPECT_EQ(session.kvBlocks().available, 6u);
  EXPECT_EQ(session.kvBlocks().blocks, 6u);
  EXPECT_EQ(session.kvBlocks().blockTokens, 16u);
}

TEST_F(ServeSessionTest, ReleasedSlotsGiveTheirBlocksBack) {
  test::ToyConfig config = toyConfig();
  config.blockTokens = 16;
  config.poolBlocks = 6;
  Session session(Engine::load(writeToy(config)));
  EXPECT_EQ(session.kvBlocks().available, 6u);
  // A prefill chunk of 16 (one block), then a token that needs a second.
  int32_t next =
      session.step({test::stepInput(4, bytes("sixteen letters!"), true)})[0];
  EXPECT_EQ(session.kvBlocks().available, 5u);
  session.step({test::stepInput(4, {next})});
  EXPECT_EQ(session.kvBlocks().available, 4u);
  session.allocateBlockPool(16, 2);
  session.saveBlocks(4, 0, {1});
  // The slot and the pool id hold block 0: ending the slot leaves it with
  // the id, which gives it up when a sequence needs it (available), and not
  // when one is about to load it.
  session.releaseSlot(4);
  EXPECT_EQ(session.slotLength(4), 0u);
  EXPECT_EQ(session.kvBlocks().available, 6u);
  EXPECT_EQ(session.kvBlocks({1}).available, 5u);
  try {
    session.step({test::stepInput(4, {'x'})});
    ADD_FAILURE() << "a released slot took a token";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument);
  }
  EXPECT_THROW(session.releaseSlot(8), Error);
  // A contiguous cache has no pool to count.
  Session contiguous(Engine::load(writeToy(toyConfig())));
  EXPECT_EQ(contiguous.kvBlocks().blocks, 0u);
}

} // namespace
