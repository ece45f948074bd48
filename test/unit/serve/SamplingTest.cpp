//===- SamplingTest.cpp - The host-side sampler of CPU backends -----------===//
//
// The GPU kernel's rules and random numbers on the host (SamplingGpuTest
// checks both pick the same tokens on a GPU).
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "src/SamplingDraw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace sits;
using sits::serve::sampleToken;

TEST(HostSampling, GreedyTakesTheFirstMaximum) {
  std::vector<float> logits = {0.5f, 2.0f, NAN, 2.0f, -1.0f};
  SamplingParams greedy;
  EXPECT_EQ(sampleToken(logits.data(), logits.size(), greedy, 0), 1);
  std::vector<float> allNan = {NAN, NAN};
  EXPECT_EQ(sampleToken(allNan.data(), allNan.size(), greedy, 0), 0);
}

TEST(HostSampling, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> logits = {0.1f, 0.3f, 0.2f, 0.25f};
  SamplingParams params;
  params.temperature = 1.0f;
  params.topK = 1;
  for (uint64_t counter = 0; counter < 50; ++counter)
    EXPECT_EQ(sampleToken(logits.data(), logits.size(), params, counter), 1);
  params.topK = 0;
  params.topP = 1e-6f;
  for (uint64_t counter = 0; counter < 50; ++counter)
    EXPECT_EQ(sampleToken(logits.data(), logits.size(), params, counter), 1);
}

TEST(HostSampling, SameSeedAndTokenIndexSameToken) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = std::sin(float(i));
  SamplingParams params;
  params.temperature = 1.5f;
  params.seed = 1234;
  bool differs = false;
  for (uint64_t counter = 0; counter < 100; ++counter) {
    int32_t a = sampleToken(logits.data(), logits.size(), params, counter);
    EXPECT_EQ(a, sampleToken(logits.data(), logits.size(), params, counter));
    SamplingParams other = params;
    other.seed = 99;
    differs |= a != sampleToken(logits.data(), logits.size(), other, counter);
  }
  EXPECT_TRUE(differs) << "the seed changes nothing";
}

TEST(HostSampling, DrawsFollowTheSoftmax) {
  // p(1) = 3 / 4 at temperature 1; top_k = 2 drops token 2.
  std::vector<float> logits = {0.0f, std::log(3.0f), -30.0f};
  SamplingParams params;
  params.temperature = 1.0f;
  params.topK = 2;
  params.seed = 7;
  int ones = 0, twos = 0;
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    int32_t token = sampleToken(logits.data(), logits.size(), params, i);
    ones += token == 1;
    twos += token == 2;
  }
  EXPECT_NEAR(double(ones) / draws, 0.75, 0.03);
  EXPECT_EQ(twos, 0);
}

TEST(HostSampling, TheDrawIsTheSharedPhiloxDraw) {
  // Equal logits weigh the same (2^40 each): the token is the draw scaled
  // to the vocabulary, keyed by the seed and the token's index alone.
  std::vector<float> logits(1000, 0.5f);
  SamplingParams params;
  params.temperature = 0.8f;
  for (uint64_t seed : {0ull, 7ull, 1ull << 40})
    for (uint64_t index : {0ull, 1ull, 513ull}) {
      params.seed = seed;
      uint64_t want = sits::runtime::scaleDraw(
          sits::runtime::sampleBits(seed, index, 0), logits.size());
      EXPECT_EQ(sampleToken(logits.data(), logits.size(), params, index),
                int32_t(want))
          << seed << " " << index;
    }
}

TEST(HostSampling, TopPKeepsTiesAtItsThreshold) {
  // 0.4 of the mass is token 0; tokens 1 and 2 tie at 0.3 each. top_p 0.5
  // reaches past token 0 into the tie, and keeps both tied tokens (as the
  // kernel's key threshold does), never token 3.
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.3f),
                               -20.0f};
  SamplingParams params;
  params.temperature = 1.0f;
  params.topP = 0.5f;
  std::vector<int> counts(4, 0);
  for (uint64_t index = 0; index < 3000; ++index)
    ++counts[sampleToken(logits.data(), logits.size(), params, index)];
  EXPECT_NEAR(counts[0] / 3000.0, 0.4, 0.03);
  EXPECT_NEAR(counts[1] / 3000.0, 0.3, 0.03);
  EXPECT_NEAR(counts[2] / 3000.0, 0.3, 0.03);
  EXPECT_EQ(counts[3], 0);
}
