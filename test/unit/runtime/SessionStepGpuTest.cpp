//===- SessionStepGpuTest.cpp - Continuous batching on a GPU, with the toy ===//
//
// Session::step: sequences that start, continue and end at different steps,
// prompts prefilled in chunks beside sequences that decode, give each
// sequence the tokens a request of its own gives; and every bad step is
// refused with its code. Mixed steps run packed (each slot's tokens right
// after the previous slot's), over contiguous and paged caches, and padded
// for an engine that takes no packed steps. Skips without a GPU (label
// `gpu`).
//
//===----------------------------------------------------------------------===//

#include "ToyEngineTest.h"

#include <map>

using namespace sits;

namespace {

using test::greedy;
using test::ToyEngineTest;

/// A request for a slot: its prompt, its sampling, the step it starts at.
struct Job {
  std::vector<int32_t> prompt;
  uint32_t startStep = 0;
  SamplingParams sampling;
};

/// What a schedule gave: each slot's tokens, and the steps with a single
/// token for every input (decode graphs).
struct Schedule {
  std::map<uint32_t, std::vector<int32_t>> tokens;
  uint32_t decodeOnlySteps = 0;
};

/// Runs `jobs` through Session::step, each from its start step, prompts in
/// chunks of 16 beside the others' decode tokens, until each slot has
/// `want` tokens.
Schedule runSchedule(Session &session, const std::map<uint32_t, Job> &jobs,
                     uint32_t want) {
  Schedule out;
  std::map<uint32_t, std::vector<int32_t>> pending;
  for (uint32_t stepIndex = 0; stepIndex < 400; ++stepIndex) {
    std::vector<StepInput> inputs;
    for (const auto &[slot, job] : jobs) {
      std::vector<int32_t> &tokens = out.tokens[slot];
      if (stepIndex < job.startStep || tokens.size() >= want)
        continue;
      StepInput input;
      input.slot = slot;
      if (stepIndex == job.startStep) {
        pending[slot] = job.prompt;
        input.reset = true;
        input.sampling = job.sampling;
      }
      std::vector<int32_t> &rest = pending[slot];
      if (!rest.empty()) {
        size_t take = std::min<size_t>(16, rest.size());
        input.tokens.assign(rest.begin(), rest.begin() + take);
        rest.erase(rest.begin(), rest.begin() + take);
      } else {
        input.tokens = {tokens.back()};
      }
      inputs.push_back(std::move(input));
    }
    if (inputs.empty())
      break;
    out.decodeOnlySteps +=
        std::all_of(inputs.begin(), inputs.end(),
                    [](const StepInput &in) { return in.tokens.size() == 1; });
    std::vector<int32_t> next = session.step(inputs);
    EXPECT_EQ(next.size(), inputs.size());
    for (size_t i = 0; i < inputs.size() && i < next.size(); ++i)
      if (pending[inputs[i].slot].empty()) // the prompt's last chunk on
        out.tokens[inputs[i].slot].push_back(next[i]);
  }
  return out;
}

class SessionStepTest : public ToyEngineTest {
protected:
  /// Slots that join at different steps, with gaps between them and prompts
  /// longer than a chunk beside decoding slots: each gets its lone run's
  /// tokens, greedy or seeded.
  void expectLoneTokens(const std::shared_ptr<Engine> &engine) {
    const uint32_t want = 16;
    const GenerateParams seeded = test::sampled(want, 91);
    std::map<uint32_t, Job> jobs = {
        {0, {bytes("first in"), 0, {}}},
        {2, {bytes("a seeded one"), 0, seeded.sampling}},
        {5, {bytes("third"), 1, {}}},
        {6,
         {bytes("a prompt longer than one prefill chunk of 16!"), 3,
          seeded.sampling}},
        {3, {bytes("another prompt of more than sixteen"), 4, {}}}};
    Session session(engine);
    Schedule schedule = runSchedule(session, jobs, want);
    EXPECT_GT(schedule.decodeOnlySteps, 0u);
    Session alone(engine);
    for (auto &[slot, job] : jobs) {
      const std::vector<int32_t> &tokens = schedule.tokens[slot];
      ASSERT_EQ(tokens.size(), want) << "slot " << slot;
      EXPECT_EQ(session.slotLength(slot), job.prompt.size() + want - 1);
      GenerateParams params = greedy(want);
      params.sampling = job.sampling;
      EXPECT_EQ(tokens, alone.generate(job.prompt, params).tokens[0])
          << "slot " << slot;
    }
    // The same schedule again in the same session: every slot restarts.
    Schedule again = runSchedule(session, jobs, want);
    EXPECT_EQ(again.tokens, schedule.tokens);
  }
};

TEST_F(SessionStepTest, SequencesJoiningAndLeavingGetTheirOwnTokens) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  Session session(engine);
  const uint32_t want = 12;
  // Slot 2 first, slot 0 from the second step, slot 1 (three prefill
  // chunks of 16) from the fourth, beside the others' decode tokens.
  std::map<uint32_t, Job> jobs = {
      {2, {bytes("abc"), 0, {}}},
      {0, {bytes("seven!!"), 1, {}}},
      {1, {bytes("a prompt longer than one prefill chunk of 16!"), 3, {}}}};
  Schedule schedule = runSchedule(session, jobs, want);
  EXPECT_GT(schedule.decodeOnlySteps, 0u);
  for (auto &[slot, job] : jobs) {
    const std::vector<int32_t> &tokens = schedule.tokens[slot];
    ASSERT_EQ(tokens.size(), want) << "slot " << slot;
    EXPECT_EQ(session.slotLength(slot), job.prompt.size() + want - 1);
    Session alone(engine);
    GenerateResult single = alone.generate(job.prompt, greedy(want));
    EXPECT_EQ(tokens, single.tokens[0]) << "slot " << slot;
    expectGreedyMatchesReference(config, job.prompt, tokens);
  }
  // Decode steps replayed graphs (the buckets of slots 0..2 and 0..1).
  EXPECT_GE(session.capturedGraphs(), 1u);
}

TEST_F(SessionStepTest, ASeededRequestDrawsItsOwnTokensInAnySlotBesideAny) {
  // Draws are keyed by the seed and the token's index in its sequence, not
  // by the slot or the session's step: a seeded request gives the tokens of
  // its lone run (and of sequence 0 of generate) in slot 5 beside others
  // that started earlier, with other seeds or the same one, and in slot 0
  // started later than them.
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  const uint32_t want = 24;
  const GenerateParams params = test::sampled(want, 77);
  const std::vector<int32_t> prompt = bytes("a seeded prompt");
  Session session(engine);
  const std::vector<int32_t> generated =
      session.generate(prompt, params).tokens[0];
  ASSERT_EQ(generated.size(), want);
  Schedule lone =
      runSchedule(session, {{3, {prompt, 0, params.sampling}}}, want);
  EXPECT_EQ(lone.tokens[3], generated);
  // Not greedy's: the draws are random.
  EXPECT_NE(generated, session.generate(prompt, greedy(want)).tokens[0]);

  SamplingParams other = params.sampling;
  other.seed = 5;
  Schedule beside = runSchedule(session,
                                {{0, {bytes("another prompt"), 0, other}},
                                 {2, {bytes("same seed"), 1, params.sampling}},
                                 {5, {prompt, 3, params.sampling}}},
                                want);
  EXPECT_EQ(beside.tokens[5], generated);
  Schedule later = runSchedule(session,
                               {{0, {prompt, 4, params.sampling}},
                                {1, {bytes("first"), 0, other}},
                                {7, {bytes("second one"), 2, other}}},
                               want);
  EXPECT_EQ(later.tokens[0], generated);
  // Another seed draws other tokens.
  EXPECT_NE(beside.tokens[0],
            runSchedule(session,
                        {{0, {bytes("another prompt"), 0, params.sampling}}},
                        want)
                .tokens[0]);
}

TEST_F(SessionStepTest, PackedStepsOverAPagedCache) {
  test::ToyConfig config = toyConfig();
  config.blockTokens = 16;
  config.poolBlocks = config.maxBatch * 4;
  auto engine = Engine::load(writeToy(config));
  ASSERT_TRUE(engine->config().kvCache.paged());
  ASSERT_TRUE(engine->config().packedSteps);
  expectLoneTokens(engine);
}

TEST_F(SessionStepTest, PaddedStepsOfAnEngineThatTakesNoPackedOnes) {
  // An engine written before packed steps: every slot of a mixed step gets
  // the longest chunk's rows, contiguous and paged.
  test::ToyConfig config = toyConfig();
  config.packedSteps = false;
  expectLoneTokens(Engine::load(writeToy(config)));
  config.blockTokens = 16;
  config.poolBlocks = config.maxBatch * 4;
  expectLoneTokens(Engine::load(writeToy(config)));
}

TEST_F(SessionStepTest, ASlotResetStartsOver) {
  auto engine = Engine::load(writeToy(toyConfig()));
  Session session(engine);
  StepInput first;
  first.slot = 1;
  first.reset = true;
  first.tokens = bytes("xyz");
  int32_t a = session.step({first})[0];
  session.step({StepInput{1, {a}, false, {}}});
  EXPECT_EQ(session.slotLength(1), 4u);
  // The same prompt again from an empty cache predicts the same token.
  EXPECT_EQ(session.step({first})[0], a);
  EXPECT_EQ(session.slotLength(1), 3u);
  // generate empties every slot.
  session.generate(bytes("hi"), greedy(2));
  EXPECT_EQ(session.slotLength(1), 0u);
  try {
    session.step({StepInput{1, {a}, false, {}}});
    ADD_FAILURE() << "a slot emptied by generate took a token";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument);
  }
}

TEST_F(SessionStepTest, BadStepsHaveTheirCodes) {
  test::ToyConfig config = toyConfig();
  Session session(Engine::load(writeToy(config)));
  auto expectCode = [&](const std::vector<StepInput> &inputs, ErrorCode code,
                        const std::string &what) {
    try {
      session.step(inputs);
      ADD_FAILURE() << what << ": no error";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), code) << what << ": " << error.what();
    }
  };
  StepInput ok{0, {1, 2, 3}, true, {}};
  expectCode({}, ErrorCode::InvalidArgument, "no inputs");
  expectCode({StepInput{99, {1}, true, {}}}, ErrorCode::InvalidArgument,
             "slot out of range");
  expectCode({ok, ok}, ErrorCode::InvalidArgument, "a slot twice");
  expectCode({StepInput{0, {}, true, {}}}, ErrorCode::InvalidArgument,
             "no tokens");
  expectCode({StepInput{0, {1}, false, {}}}, ErrorCode::InvalidArgument,
             "no sequence");
  expectCode({StepInput{0, std::vector<int32_t>(17, 1), true, {}}},
             ErrorCode::InvalidArgument, "longer than a chunk");
  expectCode({StepInput{0, {int32_t(config.vocab)}, true, {}}},
             ErrorCode::TokenOutOfVocab, "token outside the vocabulary");
  StepInput hot = ok;
  hot.sampling.temperature = -1.0f;
  expectCode({hot}, ErrorCode::InvalidArgument, "negative temperature");
  // Fill slot 0 to the capacity, then one more token.
  uint32_t length = 0;
  int32_t token = session.step({ok})[0];
  length = 3;
  while (length + 1 <= config.capacity) {
    token = session.step({StepInput{0, {token}, false, {}}})[0];
    ++length;
  }
  expectCode({StepInput{0, {token}, false, {}}}, ErrorCode::KVCacheFull,
             "past the capacity");
  EXPECT_EQ(session.slotLength(0), config.capacity);
}

} // namespace
