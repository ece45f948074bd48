//===- BatchControllerTailTest.cpp - The controller's tail ledger ---------===//
//
// The ledger of the last seconds' inter-token gaps: bulk steps spend its
// room, and its slow share keeps the p99 a client measures over those
// seconds under the target.
//
//===----------------------------------------------------------------------===//

#include "BatchControllerTestSupport.h"

#include "sits/Error.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace sits::serve;
using namespace sits::serve::testing;

TEST(BatchController, BulkIsAllowedWhenNothingDecodes) {
  // A bulk step then delays no gap: allowed on an empty ledger and on one
  // of slow gaps only, where one decoding stream is refused.
  BatchController controller(tail(0.005), Clock::time_point{});
  EXPECT_TRUE(controller.bulkAllowed(0));
  EXPECT_FALSE(controller.bulkAllowed(1)) << "no gaps to spend yet";
  gaps(controller, 50, 30);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 1);
  EXPECT_TRUE(controller.bulkAllowed(0));
  EXPECT_FALSE(controller.bulkAllowed(1));
}

TEST(BatchController, BulkNeedsRoomInTheLedger) {
  // A share of 1 %: over 1000 fast gaps, a stall of 10 streams fits
  // (10 <= 0.01 * 1010) and one of 11 does not; with 5 slow gaps in, 5
  // streams fit and 6 do not.
  BatchController controller(tail(0.01), Clock::time_point{});
  gaps(controller, 1000, 5);
  EXPECT_EQ(controller.ledgerSlowShare(), 0);
  EXPECT_TRUE(controller.bulkAllowed(10));
  EXPECT_FALSE(controller.bulkAllowed(11));
  gaps(controller, 5, 30);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 5.0 / 1005);
  EXPECT_TRUE(controller.bulkAllowed(5));
  EXPECT_FALSE(controller.bulkAllowed(6));
  // A gap exactly at the target is not slow.
  gaps(controller, 100, 10);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 5.0 / 1105);
  // Exactly at the share is within it: 2 <= 0.25 * (6 + 2).
  BatchController exact(tail(0.25), Clock::time_point{});
  gaps(exact, 6, 5);
  EXPECT_TRUE(exact.bulkAllowed(2));
  EXPECT_FALSE(exact.bulkAllowed(3));
}

TEST(BatchController, NormalSlowGapsStopBulkSteps) {
  // Normal steps over the target fill the ledger: over 1000 fast gaps a
  // stall of 4 streams fits until the 7th slow gap (7 + 4 > 0.01 * 1011).
  BatchController controller(tail(0.01), Clock::time_point{});
  gaps(controller, 1000, 5);
  int slow = 0;
  while (controller.bulkAllowed(4) && slow < 100) {
    gaps(controller, 1, 12);
    ++slow;
  }
  EXPECT_EQ(slow, 7);
  EXPECT_TRUE(controller.bulkAllowed(0));
  // A bulk step's slow gaps count the same.
  BatchController other(tail(0.01), Clock::time_point{});
  gaps(other, 1000, 5);
  gaps(other, 7, 12, StepKind::Bulk);
  EXPECT_FALSE(other.bulkAllowed(4));
  EXPECT_DOUBLE_EQ(other.ledgerSlowShare(), 7.0 / 1007);
}

TEST(BatchController, TheHorizonForgetsOldGaps) {
  // A ledger of 100 gaps and a share of 5 %: 100 slow gaps, then fast
  // ones push them out, oldest first; one stream fits once 4 slow are
  // left (5 <= 0.05 * 101), not at 5 (6 > 5.05).
  BatchController controller(tail(0.05, 100), Clock::time_point{});
  gaps(controller, 100, 30);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 1);
  gaps(controller, 95, 5);
  EXPECT_EQ(controller.ledgerGaps(), 100u);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 0.05);
  EXPECT_FALSE(controller.bulkAllowed(1));
  gaps(controller, 1, 5);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 0.04);
  EXPECT_TRUE(controller.bulkAllowed(1));
  gaps(controller, 500, 5);
  EXPECT_EQ(controller.ledgerGaps(), 100u);
  EXPECT_EQ(controller.ledgerSlowShare(), 0);
}

TEST(BatchController, WithoutATargetTheLedgerStaysEmpty) {
  BatchController controller(options(0, 8), Clock::time_point{});
  gaps(controller, 100, 30);
  EXPECT_EQ(controller.ledgerGaps(), 0u);
  EXPECT_EQ(controller.ledgerSlowShare(), 0);
}

namespace {
/// From budget 32 (a window over the target prefilled 64) and the window
/// after, not judged: one more window of 100 gaps of 5 ms, with 4 gaps of
/// 200 ms and a step of 512 prompt tokens marked bulk or not, and a
/// prompt and a request waiting.
BatchController afterAStall(bool markGaps, bool markPrefill,
                            double normalMs = 5, uint32_t normalPrefill = 4) {
  BatchController controller(tail(0.005), Clock::time_point{});
  Clock::time_point now{};
  gaps(controller, 100, 20);
  controller.recordPrefill(64, /*held=*/true);
  controller.update(now += milliseconds(100));
  gaps(controller, 100, 5);
  controller.update(now += milliseconds(100));
  EXPECT_EQ(controller.prefillBudget(), 32u);
  EXPECT_EQ(controller.limit(), 8u);

  gaps(controller, 100, normalMs);
  gaps(controller, 4, 200, markGaps ? StepKind::Bulk : StepKind::Decode);
  controller.recordPrefill(512, /*held=*/true, markPrefill);
  controller.recordPrefill(normalPrefill, /*held=*/true);
  controller.recordLimited();
  controller.update(now += milliseconds(100));
  return controller;
}
} // namespace

TEST(BatchController, BulkGapsAreLeftOutOfTheWindowP99) {
  // The stall is spent from the tail: the window's p99 is its normal gaps'
  // (under the margin), and the ledger has it. Nothing is cut; nothing
  // grows either, the ledger holding the first window's slow gaps.
  BatchController bulk = afterAStall(true, true);
  EXPECT_DOUBLE_EQ(bulk.windowP99(), 0.005);
  EXPECT_EQ(bulk.prefillBudget(), 32u);
  EXPECT_EQ(bulk.limit(), 8u);
  EXPECT_EQ(bulk.ledgerGaps(), 304u);
  EXPECT_DOUBLE_EQ(bulk.ledgerSlowShare(), 104.0 / 304);
  // The same gaps unmarked: the window is over the target and, its normal
  // steps prefilling 4 tokens, the batch halves.
  BatchController unmarked = afterAStall(false, true);
  EXPECT_DOUBLE_EQ(unmarked.windowP99(), 0.2);
  EXPECT_EQ(unmarked.prefillBudget(), 32u);
  EXPECT_EQ(unmarked.limit(), 4u);
}

TEST(BatchController, ABulkStepsPrefillSaysNothingOfTheBudget) {
  // A window over the target by its normal steps (12 ms), which prefilled
  // 4 tokens: the batch halves, the budget stays; had the bulk step's 512
  // tokens counted, the budget would have halved instead.
  BatchController bulk = afterAStall(true, true, 12);
  EXPECT_EQ(bulk.prefillBudget(), 32u);
  EXPECT_EQ(bulk.limit(), 4u);
  BatchController counted = afterAStall(true, false, 12);
  EXPECT_EQ(counted.prefillBudget(), 16u);
  EXPECT_EQ(counted.limit(), 8u);
}

TEST(BatchController, PromptsHeldForBulkStepsDoNotGrowTheBudget) {
  // One stream at a time: each prompt is prefilled in bulk steps with
  // nothing decoding, the decode steps are fast. The budget stays at its
  // least (on the 8B shape it grew to 84 tokens so, and the next load's
  // first steps carried 84 prompt tokens beside 8 streams); a normal step
  // that held a prompt back grows it.
  BatchControlOptions o = options(100, 8);
  o.maxBudget = 512;
  BatchController controller(o, Clock::time_point{});
  Windows windows{controller};
  for (int w = 0; w < 5; ++w) {
    controller.recordPrefill(512, /*held=*/true, /*bulk=*/true);
    windows.next(10, 1, false);
  }
  EXPECT_EQ(controller.prefillBudget(), 4u);
  controller.recordPrefill(4, /*held=*/true);
  windows.next(10, 1, false);
  EXPECT_EQ(controller.prefillBudget(), 20u);
}

TEST(BatchController, BadTailOptionsAreRefused) {
  for (double share : {0.0, 1.0, -0.1, 2.0, std::nan("")}) {
    try {
      BatchController controller(tail(share), Clock::time_point{});
      ADD_FAILURE() << "tail share " << share;
    } catch (const sits::Error &error) {
      EXPECT_EQ(error.code(), sits::ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(error.what()).find("tail share"),
                std::string::npos);
    }
  }
  try {
    BatchController controller(tail(0.005, 0), Clock::time_point{});
    ADD_FAILURE() << "a ledger of no gaps";
  } catch (const sits::Error &error) {
    EXPECT_EQ(error.code(), sits::ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(error.what()).find("tail ledger"), std::string::npos);
  }
  for (std::chrono::nanoseconds span :
       {std::chrono::nanoseconds(0), std::chrono::nanoseconds(-1)}) {
    BatchControlOptions o = tail(0.005);
    o.tailSpan = span;
    try {
      BatchController controller(o, Clock::time_point{});
      ADD_FAILURE() << "a ledger spanning no time";
    } catch (const sits::Error &error) {
      EXPECT_EQ(error.code(), sits::ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(error.what()).find("positive span"),
                std::string::npos);
    }
  }
  EXPECT_NO_THROW(BatchController(tail(0.5, 1), Clock::time_point{}));
}

TEST(BatchController, TheSpanForgetsGapsOlderThanIt) {
  // 2000 fast gaps of a quiet load pay for a stall of 10 streams (10 <=
  // 0.005 * 2010); once they are older than the span (5 s) they pay for
  // nothing: the 10 gaps recorded since do not pay for one stream.
  BatchControlOptions o = tail(0.005);
  ASSERT_EQ(o.tailSpan, std::chrono::seconds(5)); // the default
  const Clock::time_point start{};
  BatchController controller(o, start);
  gaps(controller, 2000, 5); // stamped at the start
  EXPECT_TRUE(controller.bulkAllowed(10));
  EXPECT_FALSE(controller.bulkAllowed(11));
  controller.update(start + milliseconds(4900));
  EXPECT_EQ(controller.ledgerGaps(), 2000u);
  gaps(controller, 10, 30); // stamped at 4.9 s, slow
  controller.update(start + milliseconds(4999));
  EXPECT_EQ(controller.ledgerGaps(), 2010u);
  controller.update(start + milliseconds(5000));
  EXPECT_EQ(controller.ledgerGaps(), 10u);
  EXPECT_DOUBLE_EQ(controller.ledgerSlowShare(), 1);
  EXPECT_FALSE(controller.bulkAllowed(1));
  EXPECT_TRUE(controller.bulkAllowed(0));
  controller.update(start + milliseconds(9900));
  EXPECT_EQ(controller.ledgerGaps(), 0u);
  EXPECT_EQ(controller.ledgerSlowShare(), 0);
}

TEST(BatchController, ASlowGapWhileTheTailIsOverItsPercentIsAMiss) {
  // Windows of 100 gaps within 1 % each add up to more than 1 % with bulk
  // stalls (and windows not judged): a client's p99 over the last seconds
  // is then over the target. A window that adds a slow gap while the
  // ledger's slow share is over 1 % counts as a miss, though its own p99
  // (the 100th of 101 gaps) is under the target.
  auto afterBulkStalls = [](int bulkSlow) {
    BatchControlOptions o = withDefaultSpan(10, 8);
    BatchController controller(o, Clock::time_point{});
    Clock::time_point now{};
    gaps(controller, 100, 5);
    gaps(controller, bulkSlow, 30, StepKind::Bulk);
    controller.update(now += milliseconds(100));
    gaps(controller, 100, 5);
    gaps(controller, 1, 12);
    controller.update(now += milliseconds(100));
    EXPECT_DOUBLE_EQ(controller.windowP99(), 0.005);
    return controller;
  };
  BatchController over = afterBulkStalls(3); // 4 slow of 204
  EXPECT_GT(over.ledgerSlowShare(), BatchController::p99SlowShare);
  EXPECT_EQ(over.limit(), 4u);
  BatchController within = afterBulkStalls(0); // 1 slow of 201
  EXPECT_LT(within.ledgerSlowShare(), BatchController::p99SlowShare);
  EXPECT_EQ(within.limit(), 8u);
}

TEST(BatchController, AnOverTailWithoutNewSlowGapsCutsNothing) {
  // After the cut, windows without a slow gap of their own are not
  // misses while the ledger still holds the old ones: the limit is cut
  // once, not again every judged window until the ledger forgets them.
  BatchControlOptions o = withDefaultSpan(10, 8);
  BatchController controller(o, Clock::time_point{});
  Windows windows{controller};
  EXPECT_EQ(windows.next(30, 8, false), 4u);
  for (int w = 0; w < 10; ++w)
    EXPECT_EQ(windows.next(5, 4, false), 4u) << "window " << w;
  EXPECT_GT(controller.ledgerSlowShare(), BatchController::p99SlowShare);
}

TEST(BatchController, GrowthWaitsForTheLedgerToForgetAMiss) {
  // A miss at 8 (100 slow gaps), then fast windows with a request
  // waiting: the limit stays at 4 while those gaps are in the ledger (a
  // probe that missed again would cost another window of them), and grows
  // one a window from the window that forgets them, 5 s after the miss.
  BatchControlOptions o = withDefaultSpan(10, 8);
  BatchController controller(o, Clock::time_point{});
  Windows windows{controller};
  EXPECT_EQ(windows.next(30, 8, true), 4u);
  std::vector<uint32_t> limits;
  for (int w = 0; w < 52; ++w)
    limits.push_back(windows.next(5, controller.limit(), true));
  // Windows close at 0.2 .. 5.3 s; the miss's gaps were stamped at 0.
  for (int w = 0; w < 48; ++w)
    EXPECT_EQ(limits[w], 4u) << "window " << w;
  // From the window closing at 5.0 s, up to under the miss's ceiling.
  EXPECT_EQ(std::vector<uint32_t>(limits.begin() + 48, limits.end()),
            (std::vector<uint32_t>{5, 6, 7, 7}));
}

TEST(BatchController, TheLimitGrowsOnWindowsThatDecodedAllButOne) {
  // 12 of 64 slots run: the limit comes down to 13. Requests admitted to
  // it but still waiting for their prompts add no decode row: windows
  // where 2 of 13 decode do not grow it; one where 12 decode does.
  BatchController controller(options(100, 64), Clock::time_point{});
  Clock::time_point now{};
  auto window = [&](uint32_t running, uint32_t decoding, bool demand = true) {
    controller.recordRunning(running, decoding);
    gaps(controller, 100, 10);
    if (demand)
      controller.recordLimited();
    return controller.update(now += milliseconds(100));
  };
  EXPECT_EQ(window(12, 12, /*demand=*/false), 13u);
  for (int w = 0; w < 5; ++w)
    EXPECT_EQ(window(13, 2), 13u) << "window " << w;
  EXPECT_EQ(window(13, 11), 13u);
  EXPECT_EQ(window(13, 12), 14u);
  // A step's decoding rows count up to its running requests: 14 running
  // with 1 decoding, then 2 running with "40" decoding, is 2 at most.
  controller.recordRunning(14, 1);
  EXPECT_EQ(window(2, 40), 14u);
}

TEST(BatchController, BulkStallsWithinTheTailDoNotHoldGrowthBack) {
  // Bulk steps keep the ledger near tailShare (here 0.8 % of its gaps
  // slow, all theirs): under 1 %, so the limit still grows a window at a
  // time; at 1.2 % (a probe's miss not yet forgotten) it waits.
  for (int bulkSlow : {8, 12}) {
    BatchControlOptions o = withDefaultSpan(10, 64);
    BatchController controller(o, Clock::time_point{});
    Clock::time_point now{};
    gaps(controller, 1000 - bulkSlow, 5);
    gaps(controller, bulkSlow, 30, StepKind::Bulk);
    controller.recordRunning(8, 8);
    controller.update(now += milliseconds(100)); // the limit comes to 9
    std::vector<uint32_t> limits;
    for (int w = 0; w < 3; ++w) {
      controller.recordRunning(controller.limit(), controller.limit());
      gaps(controller, 10, 5);
      controller.recordLimited();
      limits.push_back(controller.update(now += milliseconds(100)));
    }
    EXPECT_EQ(limits, bulkSlow == 8 ? (std::vector<uint32_t>{10, 11, 12})
                                    : (std::vector<uint32_t>{9, 9, 9}))
        << bulkSlow;
  }
}
