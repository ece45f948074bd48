//===- PrefillPlanTest.cpp - Splitting prompts into prefill chunks --------===//

#include "src/PrefillPlan.h"

#include <gtest/gtest.h>

#include <random>

using sits::runtime::planPrefillChunks;

namespace {

using Plan = std::vector<std::vector<uint32_t>>;

TEST(PrefillPlan, SmallExamples) {
  EXPECT_EQ(planPrefillChunks({5}, 16), (Plan{{5}}));
  EXPECT_EQ(planPrefillChunks({16}, 16), (Plan{{16}}));
  EXPECT_EQ(planPrefillChunks({17}, 16), (Plan{{16}, {1}}));
  EXPECT_EQ(planPrefillChunks({45}, 16), (Plan{{16}, {16}, {13}}));
  // Short prompts keep their last token for the final chunk.
  EXPECT_EQ(planPrefillChunks({3, 27, 7}, 16), (Plan{{2, 16, 6}, {1, 11, 1}}));
  EXPECT_EQ(planPrefillChunks({1, 40}, 16), (Plan{{0, 16}, {0, 16}, {1, 8}}));
}

TEST(PrefillPlan, InvariantsHoldForRandomBatches) {
  std::mt19937 rng(2);
  for (int round = 0; round < 2000; ++round) {
    uint32_t chunk = 1 + rng() % 40;
    std::vector<uint32_t> lengths(1 + rng() % 8);
    uint32_t longest = 0;
    for (uint32_t &l : lengths) {
      l = 1 + rng() % 300;
      longest = std::max(longest, l);
    }
    Plan plan = planPrefillChunks(lengths, chunk);
    ASSERT_EQ(plan.size(), (longest + chunk - 1) / chunk);
    for (size_t b = 0; b < lengths.size(); ++b) {
      uint32_t sum = 0;
      for (const auto &counts : plan) {
        ASSERT_LE(counts[b], chunk);
        sum += counts[b];
      }
      EXPECT_EQ(sum, lengths[b]);
      EXPECT_GE(plan.back()[b], 1u);
    }
  }
}

} // namespace
