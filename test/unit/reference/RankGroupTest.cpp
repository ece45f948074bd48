//===- RankGroupTest.cpp - Collectives between the threads of N ranks ----===//

#include "compiler/reference/RankGroup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace sits::reference;
using namespace std::chrono_literals;

namespace {

/// Runs `body(rank)` on one thread per rank and returns each rank's error.
template <class Body>
std::vector<std::string> onEveryRank(int ranks, Body body) {
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { errors[r] = body(r); });
  for (auto &thread : threads)
    thread.join();
  return errors;
}

TEST(RankGroup, AllReduceSumsEveryRankInRankOrder) {
  RankGroup group(3, 5s);
  std::vector<std::vector<float>> data = {{1, 2}, {10, 20}, {100, 200}};
  auto errors =
      onEveryRank(3, [&](int r) { return group.allReduce(r, data[r]); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(data[r], (std::vector<float>{111, 222}));
  }
  EXPECT_EQ(group.getCompleted(), 1u);
}

TEST(RankGroup, TheSumIsTheSameBitsOnEveryRankAndRun) {
  // 1 + 1e8 - 1e8 in f32 depends on the order: rank order gives 0, the
  // reverse 1.
  for (int run = 0; run < 20; ++run) {
    RankGroup group(3, 5s);
    std::vector<std::vector<float>> data = {{1.0f}, {1e8f}, {-1e8f}};
    onEveryRank(3, [&](int r) { return group.allReduce(r, data[r]); });
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(data[r][0], 0.0f);
  }
}

TEST(RankGroup, AllGatherPutsTheRanksSideBySideInEachRow) {
  RankGroup group(2, 5s);
  // Two rows of width 2 on each rank.
  std::vector<std::vector<float>> data = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  auto errors =
      onEveryRank(2, [&](int r) { return group.allGather(r, 2, data[r]); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(data[r], (std::vector<float>{1, 2, 5, 6, 3, 4, 7, 8}));
  }
}

TEST(RankGroup, ManyCollectivesInARowKeepTheirOrder) {
  RankGroup group(4, 5s);
  std::vector<float> totals(4);
  auto errors = onEveryRank(4, [&](int r) -> std::string {
    for (int step = 0; step < 200; ++step) {
      std::vector<float> data = {static_cast<float>(step * 10 + r)};
      if (std::string error = group.allReduce(r, data); !error.empty())
        return error;
      totals[r] += data[0];
    }
    return "";
  });
  // Each step sums 4 * step * 10 + 6.
  float expected = 0;
  for (int step = 0; step < 200; ++step)
    expected += 40.0f * step + 6.0f;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(totals[r], expected);
  }
  EXPECT_EQ(group.getCompleted(), 200u);
}

TEST(RankGroup, ARankThatNeverComesTimesOutNamingIt) {
  RankGroup group(3, 200ms);
  std::vector<std::vector<float>> data = {{1}, {2}, {3}};
  const auto start = std::chrono::steady_clock::now();
  auto errors = onEveryRank(3, [&](int r) -> std::string {
    if (r == 2)
      return "";
    return group.allReduce(r, data[r]);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(errors[0], "collective #1 (an all_reduce of 1 elements): rank 2 "
                       "did not come within 200 ms");
  EXPECT_EQ(errors[1], errors[0]);
  // Later arrivals get the same error at once.
  EXPECT_EQ(group.allReduce(2, data[2]), errors[0]);
}

TEST(RankGroup, AFailedRankStopsTheOthersAtOnce) {
  RankGroup group(3, 60s);
  std::vector<std::vector<float>> data = {{1}, {2}, {3}};
  const auto start = std::chrono::steady_clock::now();
  auto errors = onEveryRank(3, [&](int r) -> std::string {
    if (r == 1) {
      std::this_thread::sleep_for(50ms);
      group.abort(1, "the kernel of sits.linear failed");
      return "";
    }
    return group.allReduce(r, data[r]);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(errors[0], "rank 1 failed: the kernel of sits.linear failed");
  EXPECT_EQ(errors[2], errors[0]);
  EXPECT_EQ(group.getFailure(), errors[0]);
}

TEST(RankGroup, RanksThatDisagreeStopTheGroup) {
  RankGroup group(2, 5s);
  std::vector<std::vector<float>> data = {{1, 2}, {1, 2, 3}};
  auto errors = onEveryRank(2, [&](int r) {
    if (r == 1)
      std::this_thread::sleep_for(20ms); // rank 0 first
    return r == 0 ? group.allReduce(r, data[r])
                  : group.allGather(r, 1, data[r]);
  });
  const std::string expected =
      "collective #1: rank 1 brought an all_gather of 3 elements in 1 rows, "
      "rank 0 an all_reduce of 2 in 1";
  EXPECT_EQ(errors[0], expected);
  EXPECT_EQ(errors[1], expected);
}

TEST(RankGroup, ARankOutsideTheGroupIsAnError) {
  RankGroup group(2, 5s);
  std::vector<float> data = {1};
  EXPECT_EQ(group.allReduce(2, data),
            "collective #1: rank 2 is not in the group of 2");
}

TEST(RankGroup, GatheredRowsMustDivideTheElements) {
  RankGroup group(1, 5s);
  std::vector<float> data = {1, 2, 3};
  EXPECT_EQ(group.allGather(0, 2, data),
            "collective #1: rank 0's 3 elements are not 2 rows");
}

TEST(RankGroup, OneRankIsItsOwnSum) {
  RankGroup group(1, 5s);
  std::vector<float> data = {1, 2};
  EXPECT_EQ(group.allReduce(0, data), "");
  EXPECT_EQ(data, (std::vector<float>{1, 2}));
  EXPECT_EQ(group.allGather(0, 2, data), "");
  EXPECT_EQ(data, (std::vector<float>{1, 2}));
}

} // namespace
