//===- PhiloxTest.cpp - The sampler's random numbers (host side) ----------===//
//
// The sampling kernel and the CPU backends' sampler share one Philox4x32-10
// implementation and one keying of it (src/SamplingDraw.h): the published
// known-answer vectors of the algorithm (Random123's kat_vectors), then
// the draw's key and counter, pinned, since every seeded completion depends
// on them.
//
//===----------------------------------------------------------------------===//

#include "src/SamplingDraw.h"

#include <array>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

namespace {

using namespace sits::runtime;

void expectPhilox(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key,
                  std::array<uint32_t, 4> expected) {
  uint32_t out[4];
  philox4x32(counter.data(), key.data(), out);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out[i], expected[i]) << "word " << i;
}

TEST(Philox4x32, KnownAnswers) {
  expectPhilox({0, 0, 0, 0}, {0, 0},
               {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  expectPhilox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
               {0xffffffff, 0xffffffff},
               {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  expectPhilox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
               {0xa4093822, 0x299f31d0},
               {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST(SampleBits, KeyedBySeedWithTheTokenIndexAndStreamAsCounter) {
  // Key = the seed's two words; counter = (index low, index high, stream,
  // "SITS"); the draw is the first two output words.
  const uint64_t seed = 0x0123456789abcdefull, index = 0x500000007ull;
  const uint32_t counter[4] = {7, 5, 3, kSampleCounterTag};
  const uint32_t key[2] = {0x89abcdef, 0x01234567};
  uint32_t out[4];
  philox4x32(counter, key, out);
  EXPECT_EQ(sampleBits(seed, index, 3), (uint64_t(out[0]) << 32) | out[1]);
}

TEST(SampleBits, PinnedValues) {
  // Changing these changes every seeded completion, on the GPU and the CPU.
  EXPECT_EQ(sampleBits(0, 0, 0), 0xb5f6cad8634afa3dull);
  EXPECT_EQ(sampleBits(42, 17, 0), 0x0af22bcec7992fbaull);
}

TEST(SampleBits, EveryPartOfTheKeyAndCounterMatters) {
  std::set<uint64_t> seen;
  for (uint64_t seed : {0ull, 1ull, 1ull << 32})
    for (uint64_t index : {0ull, 1ull, 1ull << 32})
      for (uint32_t stream : {0u, 1u})
        seen.insert(sampleBits(seed, index, stream));
  EXPECT_EQ(seen.size(), 18u);
}

TEST(ScaleDraw, MapsBitsUniformlyBelowTheTotal) {
  EXPECT_EQ(scaleDraw(0, 1000), 0u);
  EXPECT_EQ(scaleDraw(~0ull, 1000), 999u);
  EXPECT_EQ(scaleDraw(1ull << 63, 10), 5u);
  EXPECT_EQ(scaleDraw(~0ull, ~0ull), ~0ull - 1);
}

TEST(SampleWeight, FixedPointOfTheTemperedSoftmax) {
  const uint64_t one = uint64_t(1) << kSampleWeightBits;
  EXPECT_EQ(sampleWeight(3.0f, 3.0f, 1.0f), one);
  EXPECT_EQ(sampleWeight(NAN, 3.0f, 1.0f), 0u);
  EXPECT_EQ(sampleWeight(-INFINITY, 3.0f, 1.0f), 0u);
  // exp(-ln 2) = 1/2 and exp(-ln 2 / 0.5) = 1/4, within expf's error.
  EXPECT_NEAR(double(sampleWeight(3.0f - std::log(2.0f), 3.0f, 1.0f)),
              double(one / 2), double(one) * 1e-6);
  EXPECT_NEAR(double(sampleWeight(3.0f - std::log(2.0f), 3.0f, 2.0f)),
              double(one / 4), double(one) * 1e-6);
}

TEST(OrderKey, PreservesTheOrderOfFloats) {
  const float values[] = {-INFINITY, -1e30f, -1.0f, -0.0f,
                          0.0f,      1e-30f, 2.0f,  INFINITY};
  for (size_t i = 1; i < sizeof(values) / sizeof(values[0]); ++i)
    EXPECT_LT(orderKey(values[i - 1]), orderKey(values[i])) << values[i];
  EXPECT_EQ(orderKey(NAN), orderKey(-INFINITY));
}

TEST(TopPTarget, CeilingWithinOneAndTheTotal) {
  EXPECT_EQ(topPTarget(0.5f, 10), 5u);
  EXPECT_EQ(topPTarget(0.51f, 10), 6u);
  EXPECT_EQ(topPTarget(0.0f, 10), 1u);
  EXPECT_EQ(topPTarget(-1.0f, 10), 1u);
  EXPECT_EQ(topPTarget(1.0f, 10), 10u);
}

} // namespace
