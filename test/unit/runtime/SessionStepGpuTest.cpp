//===- SessionStepGpuTest.cpp - Continuous batching on a GPU, with the toy ===//
//
// Session::step: sequences that start, continue and end at different steps,
// prompts prefilled in chunks beside sequences that decode, give each
// sequence the tokens a request of its own gives; and every bad step is
// refused with its code. Skips without a GPU (label `gpu`).
//
//===----------------------------------------------------------------------===//

#include "ToyEngineTest.h"

#include <map>

using namespace sits;

namespace {

using test::greedy;
using test::ToyEngineTest;

using SessionStepTest = ToyEngineTest;

/// A request in a slot: its prompt still to feed, its tokens so far.
struct Running {
  std::vector<int32_t> pending;
  std::vector<int32_t> tokens;
  bool started = false;
};

TEST_F(SessionStepTest, SequencesJoiningAndLeavingGetTheirOwnTokens) {
  test::ToyConfig config = toyConfig();
  auto engine = Engine::load(writeToy(config));
  Session session(engine);
  const uint32_t want = 12;
  // Slot 2 first, slot 0 from the second step, slot 1 (three prefill
  // chunks of 16) from the fourth, beside the others' decode tokens.
  std::map<uint32_t, std::vector<int32_t>> prompts = {
      {2, bytes("abc")},
      {0, bytes("seven!!")},
      {1, bytes("a prompt longer than one prefill chunk of 16!")}};
  std::map<uint32_t, uint32_t> startStep = {{2, 0}, {0, 1}, {1, 3}};
  std::map<uint32_t, Running> running;
  uint32_t decodeOnlySteps = 0;
  for (uint32_t stepIndex = 0; stepIndex < 200; ++stepIndex) {
    std::vector<StepInput> inputs;
    for (auto &[slot, prompt] : prompts) {
      Running &r = running[slot];
      if (stepIndex < startStep[slot] || r.tokens.size() >= want)
        continue;
      StepInput input;
      input.slot = slot;
      if (!r.started) {
        r.pending = prompt;
        input.reset = true;
        r.started = true;
      }
      if (!r.pending.empty()) {
        size_t take = std::min<size_t>(16, r.pending.size());
        input.tokens.assign(r.pending.begin(), r.pending.begin() + take);
        r.pending.erase(r.pending.begin(), r.pending.begin() + take);
      } else {
        input.tokens = {r.tokens.back()};
      }
      inputs.push_back(std::move(input));
    }
    if (inputs.empty())
      break;
    decodeOnlySteps +=
        std::all_of(inputs.begin(), inputs.end(),
                    [](const StepInput &in) { return in.tokens.size() == 1; });
    std::vector<int32_t> next = session.step(inputs);
    ASSERT_EQ(next.size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      Running &r = running[inputs[i].slot];
      if (r.pending.empty()) // the prompt's last chunk predicts a token
        r.tokens.push_back(next[i]);
    }
  }
  EXPECT_GT(decodeOnlySteps, 0u);
  for (auto &[slot, prompt] : prompts) {
    ASSERT_EQ(running[slot].tokens.size(), want) << "slot " << slot;
    EXPECT_EQ(session.slotLength(slot), prompt.size() + want - 1);
    Session alone(engine);
    GenerateResult single = alone.generate(prompt, greedy(want));
    EXPECT_EQ(running[slot].tokens, single.tokens[0]) << "slot " << slot;
    expectGreedyMatchesReference(config, prompt, running[slot].tokens);
  }
  // Decode steps replayed graphs (the buckets of slots 0..2 and 0..1).
  EXPECT_GE(session.capturedGraphs(), 1u);
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
