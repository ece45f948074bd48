//===- BatchControllerTest.cpp - The SLA-driven batch limit ---------------===//
//
// The controller gets its clock and latencies from the test: each window
// here is fed latencies of a made-up model whose p99 grows with the batch,
// and the limit is checked window by window.
//
//===----------------------------------------------------------------------===//

#include "BatchControllerTestSupport.h"

#include "sits/Error.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace sits::serve;
using namespace sits::serve::testing;

TEST(BatchController, P99IsTheNearestRank) {
  std::vector<double> none;
  EXPECT_EQ(BatchController::p99(none), 0);
  std::vector<double> samples;
  for (int i = 200; i >= 1; --i)
    samples.push_back(i);
  EXPECT_EQ(BatchController::p99(samples), 198);
  std::vector<double> one = {5};
  EXPECT_EQ(BatchController::p99(one), 5);
}

TEST(BatchController, AWindowCloses100msAfterItOpened) {
  BatchController controller(options(10, 8), Clock::time_point{});
  controller.recordTokenLatency(0.050);
  EXPECT_EQ(controller.update(Clock::time_point{} + milliseconds(99)), 8u);
  EXPECT_EQ(controller.windowsClosed(), 0u);
  EXPECT_EQ(controller.update(Clock::time_point{} + milliseconds(100)), 4u);
  EXPECT_EQ(controller.windowsClosed(), 1u);
  EXPECT_DOUBLE_EQ(controller.windowP99(), 0.050);
}

TEST(BatchController, OverTheTargetHalvesDownToOne) {
  // Every window is over the target: 8 -> 4, hold, 2, hold, 1, and 1 stays.
  BatchController controller(options(10, 8), Clock::time_point{});
  std::vector<uint32_t> limits =
      run(controller, 8, [](uint32_t) { return 50; });
  EXPECT_EQ(limits, (std::vector<uint32_t>{4, 4, 2, 2, 1, 1, 1, 1}));
}

TEST(BatchController, UnderTheTargetGrowsByOneUpToTheSlots) {
  BatchController controller(options(100, 4), Clock::time_point{});
  run(controller, 1, [](uint32_t) { return 500; }); // 4 -> 2
  // The window after a decrease is not judged; then +1 per window.
  std::vector<uint32_t> limits =
      run(controller, 5, [](uint32_t) { return 10; });
  EXPECT_EQ(limits, (std::vector<uint32_t>{2, 2, 3, 4, 4}));
}

TEST(BatchController, NoDemandNoGrowth) {
  // Under the target, but nothing waited for the limit: the limit has not
  // been shown to hold the batch back, so it stays.
  BatchController controller(options(100, 8), Clock::time_point{});
  run(controller, 1, [](uint32_t) { return 500; }); // 8 -> 4
  std::vector<uint32_t> limits = run(
      controller, 4, [](uint32_t) { return 10; }, /*demand=*/false);
  EXPECT_EQ(limits, (std::vector<uint32_t>{4, 4, 4, 4}));
}

TEST(BatchController, WindowsWithoutTokensChangeNothing) {
  BatchController controller(options(10, 8), Clock::time_point{});
  Clock::time_point now{};
  for (int i = 0; i < 5; ++i) {
    controller.recordLimited();
    now += milliseconds(150);
    EXPECT_EQ(controller.update(now), 8u);
  }
  EXPECT_EQ(controller.windowsClosed(), 5u);
  EXPECT_EQ(controller.windowP99(), 0);
}

TEST(BatchController, BetweenMarginAndTargetHolds) {
  // p99 in [0.8 * target, target]: neither over nor safely under.
  BatchController controller(options(100, 8), Clock::time_point{});
  run(controller, 1, [](uint32_t) { return 500; }); // 8 -> 4
  std::vector<uint32_t> limits =
      run(controller, 6, [](uint32_t) { return 90; });
  EXPECT_EQ(limits, std::vector<uint32_t>(6, 4));
}

TEST(BatchController, OscillationStaysWithinBounds) {
  // A model whose p99 is 10 ms per running request: a target of 45 ms
  // admits 4. From any start the limit settles within [2, 4] (one halving
  // below the best at worst), never above the slots or below 1, and is
  // over the target only while it halves down (two windows per halving).
  for (uint32_t slots : {1u, 3u, 8u, 64u}) {
    BatchController controller(options(45, slots), Clock::time_point{});
    uint32_t best = std::min<uint32_t>(4, slots);
    int over = 0;
    std::vector<uint32_t> limits = run(controller, 200, [&](uint32_t limit) {
      double ms = 10.0 * limit;
      over += ms > 45;
      return ms;
    });
    int halvings = 0;
    for (uint32_t l = slots; l > best; l /= 2)
      ++halvings;
    EXPECT_LE(over, 2 * halvings) << "slots " << slots;
    for (size_t w = 0; w < limits.size(); ++w) {
      EXPECT_GE(limits[w], 1u);
      EXPECT_LE(limits[w], slots);
      if (w >= 20) {
        EXPECT_LE(limits[w], best) << "slots " << slots << " window " << w;
        EXPECT_GE(limits[w], std::max<uint32_t>(1, best / 2))
            << "slots " << slots << " window " << w;
      }
    }
  }
}

TEST(BatchController, NoisyLatencyKeepsTheLimitInRange) {
  // Latency that jumps between windows: the limit moves, always in
  // 1..slots, and comes back up once the latency is low again.
  BatchController controller(options(20, 16), Clock::time_point{});
  int window = 0;
  std::vector<uint32_t> limits = run(controller, 300, [&](uint32_t limit) {
    ++window;
    if (window > 250)
      return 1.0;
    return (window % 7 == 0 ? 60.0 : 2.0) * limit;
  });
  for (uint32_t limit : limits) {
    EXPECT_GE(limit, 1u);
    EXPECT_LE(limit, 16u);
  }
  EXPECT_EQ(limits.back(), 16u);
}

TEST(BatchController, OffMeasuresButNeverLimits) {
  BatchController controller(options(0, 8), Clock::time_point{});
  std::vector<uint32_t> limits =
      run(controller, 5, [](uint32_t) { return 900; });
  EXPECT_EQ(limits, std::vector<uint32_t>(5, 8));
  EXPECT_DOUBLE_EQ(controller.windowP99(), 0.9);
}

/// Windows of a model whose p99 is `decodeMs` per running request plus
/// `msPerPrefillToken` per token of the step's prefill budget, with a
/// prompt always waiting for the budget and a request for the limit;
/// returns (limit, budget) after each window.
std::vector<std::pair<uint32_t, uint32_t>>
runWithPrefill(BatchController &controller, int windows, double decodeMs,
               double msPerPrefillToken) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  Clock::time_point now{};
  for (int w = 0; w < windows; ++w) {
    double ms = decodeMs * controller.limit() +
                msPerPrefillToken * controller.prefillBudget();
    for (int i = 0; i < 100; ++i)
      controller.recordTokenLatency(ms / 1000);
    controller.recordLimited();
    controller.recordPrefill(controller.prefillBudget(), /*held=*/true);
    now += milliseconds(100);
    controller.update(now);
    out.emplace_back(controller.limit(), controller.prefillBudget());
  }
  return out;
}

TEST(BatchController, ThePrefillBudgetIsCutBeforeTheBatch) {
  // 1 ms per request, 0.1 ms per prefill token, target 20 ms, 8 slots and
  // a budget of 512: 8 + 51 ms is over; the budget halves (512, 256, 128,
  // 64) while the batch stays, down to where 8 + 6.4 ms is under.
  BatchControlOptions o = options(20, 8);
  o.maxBudget = 512;
  o.startBudget = 512;
  BatchController controller(o, Clock::time_point{});
  EXPECT_EQ(controller.prefillBudget(), 512u);
  auto limits = runWithPrefill(controller, 8, 1.0, 0.1);
  using Pair = std::pair<uint32_t, uint32_t>;
  EXPECT_EQ(limits, (std::vector<Pair>{{8, 256},
                                       {8, 256},
                                       {8, 128},
                                       {8, 128},
                                       {8, 64},
                                       {8, 64},
                                       {8, 80},
                                       {8, 80}}));
}

TEST(BatchController, AtTheSmallestBudgetRowsGoThenTheBatch) {
  // Decoding alone is over the target (8 x 4 ms > 20 ms): the budget goes
  // to its smallest, 16 here, then prompt rows go off (the batch stays in
  // that window), and then, with no prompt row in the steps, the batch
  // halves.
  BatchControlOptions o = options(20, 8);
  o.maxBudget = 32;
  o.startBudget = 32;
  o.minBudget = 16;
  BatchController controller(o, Clock::time_point{});
  auto limits = runWithPrefill(controller, 6, 4.0, 0.01);
  using Pair = std::pair<uint32_t, uint32_t>;
  EXPECT_EQ(limits, (std::vector<Pair>{
                        {8, 16}, {8, 16}, {8, 0}, {8, 0}, {4, 0}, {4, 0}}));
  EXPECT_TRUE(controller.promptRowsOff());
  EXPECT_TRUE(controller.budgeted());
}

TEST(BatchController, WithATargetTheBudgetStartsAtItsLeast) {
  // 1 ms per request, 0.1 ms per prefill token, target 20 ms (margin 16
  // ms), 8 slots: the budget starts at 4 and grows by 16 a window while a
  // prompt waits for it and the p99 is under the margin (8 + 0.1 x budget
  // < 16 below 80 tokens: 84 is the last step), then holds; without a
  // target it is the most.
  BatchControlOptions o = options(20, 8);
  o.maxBudget = 512;
  BatchController controller(o, Clock::time_point{});
  EXPECT_EQ(controller.prefillBudget(), 4u);
  auto limits = runWithPrefill(controller, 7, 1.0, 0.1);
  using Pair = std::pair<uint32_t, uint32_t>;
  EXPECT_EQ(
      limits,
      (std::vector<Pair>{
          {8, 20}, {8, 36}, {8, 52}, {8, 68}, {8, 84}, {8, 84}, {8, 84}}));
  o.startBudget = 100;
  EXPECT_EQ(BatchController(o, Clock::time_point{}).prefillBudget(), 100u);
  o.targetSeconds = 0;
  EXPECT_EQ(BatchController(o, Clock::time_point{}).prefillBudget(), 512u);
  // A first budget outside minBudget..maxBudget is refused.
  o.targetSeconds = 0.02;
  for (uint32_t start : {2u, 513u}) {
    o.startBudget = start;
    EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error) << start;
  }
}

TEST(BatchController, WithoutPrefillTheBudgetStays) {
  // Over the target with no prompt in the window: the batch goes, the
  // budget stays.
  BatchControlOptions o = options(10, 8);
  o.maxBudget = 256;
  o.startBudget = 256;
  BatchController controller(o, Clock::time_point{});
  run(controller, 3, [](uint32_t) { return 50; });
  EXPECT_EQ(controller.limit(), 2u);
  EXPECT_EQ(controller.prefillBudget(), 256u);
}

TEST(BatchController, BadOptionsAreRefused) {
  EXPECT_THROW(BatchController(options(10, 0), Clock::time_point{}),
               sits::Error);
  EXPECT_THROW(BatchController(options(-1, 4), Clock::time_point{}),
               sits::Error);
  BatchControlOptions o = options(10, 4);
  o.decrease = 1;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.minBudget = 0;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.budgetStep = 0;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.rowsOffWindows = 0;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.maxRowsOffWindows = 3;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.rowsRelapseWindows = 0;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.ceilingWindows = 0;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
  o = options(10, 4);
  o.maxCeilingWindows = o.ceilingWindows - 1;
  EXPECT_THROW(BatchController(o, Clock::time_point{}), sits::Error);
}

TEST(BatchController, TheLimitStaysOneOverTheMostThatRan) {
  // 16 streams of 64 slots meet the target: the limit comes down to 17,
  // so that when more want to run they join one a window (each window a
  // request waits for the limit) while the target holds, not all at once.
  BatchController controller(options(100, 64), Clock::time_point{});
  Windows windows{controller};
  std::vector<uint32_t> limits;
  for (int w = 0; w < 3; ++w)
    limits.push_back(windows.next(10, 16, /*demand=*/false));
  for (int w = 0; w < 4; ++w)
    limits.push_back(windows.next(10, controller.limit(), /*demand=*/true));
  EXPECT_EQ(limits, (std::vector<uint32_t>{17, 17, 17, 18, 19, 20, 21}));
}

TEST(BatchController, AMissAtAJumpInStepCostSetsACeiling) {
  // Steps of up to 8 requests take 7 ms, of more 10.5 ms (the 8B shape's
  // jump past one token group), against a 9.86 ms target. Without the
  // ceiling the limit halved at 9 and climbed back a second later, over
  // and over; with it, it stays at 8 once found, until the ceiling's 512
  // windows (doubled from 64 by the misses at 32, 16 and 9, each at or
  // under the last ceiling) are over: one probe at 9, then 1024 windows.
  BatchController controller(options(9.86, 64), Clock::time_point{});
  int window = 0;
  std::vector<int> overAt;
  std::vector<uint32_t> limits = run(
      controller, 700,
      [&](uint32_t limit) {
        ++window;
        if (limit > 8)
          overAt.push_back(window);
        return limit > 8 ? 10.5 : 7.0;
      },
      /*demand=*/true, [](uint32_t limit) { return limit; });
  // Over at 64, 32 (and in the held window after), 16 (and held), 9,
  // and at the probe.
  ASSERT_EQ(overAt.size(), 7u);
  EXPECT_LT(overAt[5], 40);
  EXPECT_GT(overAt[6], 500);
  for (size_t w = 40; w < 500; ++w)
    EXPECT_EQ(limits[w], 8u) << "window " << w;
  EXPECT_EQ(limits.back(), 8u);
  EXPECT_EQ(controller.batchCeiling(), 9u);
}

TEST(BatchController, TheCeilingLiftsAfterItsWindowsAndDoublesOnARelapse) {
  BatchControlOptions o = options(10, 8);
  o.ceilingWindows = 4;
  o.maxCeilingWindows = 8;
  BatchController controller(o, Clock::time_point{});
  Windows windows{controller};
  auto under = [&] { return windows.next(1, controller.limit(), true); };
  // 8 over: 4 and a ceiling of 8 for 4 windows (the held one counted).
  EXPECT_EQ(windows.next(50, 8, true), 4u);
  EXPECT_EQ(controller.batchCeiling(), 8u);
  std::vector<uint32_t> limits;
  for (int w = 0; w < 6; ++w)
    limits.push_back(under());
  EXPECT_EQ(limits, (std::vector<uint32_t>{4, 5, 6, 7, 8, 8}));
  EXPECT_EQ(controller.batchCeiling(), 0u);
  // Over again at 8: the same jump, the ceiling holds for 8 windows now.
  EXPECT_EQ(windows.next(50, 8, true), 4u);
  limits.clear();
  for (int w = 0; w < 10; ++w)
    limits.push_back(under());
  EXPECT_EQ(limits, (std::vector<uint32_t>{4, 5, 6, 7, 7, 7, 7, 8, 8, 8}));
}

TEST(BatchController, ADecreaseStillDrainingIsNotRepeated) {
  // Ten requests keep running (they are never preempted) and every window
  // is over the target: the limit is cut once, then waits for them to end
  // instead of halving down to one.
  BatchController controller(options(10, 64), Clock::time_point{});
  std::vector<uint32_t> limits = run(
      controller, 6, [](uint32_t) { return 50; }, true,
      [](uint32_t) { return 10u; });
  EXPECT_EQ(limits, (std::vector<uint32_t>{5, 5, 5, 5, 5, 5}));
}

TEST(BatchController, TheBudgetGoesDownToAFewTokens) {
  // 1 ms per request, 0.75 ms per prefill token, target 9 ms, 4 slots and
  // a budget of 64: the budget halves down to the default smallest, 4
  // tokens (4 + 3 ms), before the batch is touched, then grows by 16.
  BatchControlOptions o = options(9, 4);
  o.maxBudget = 64;
  o.startBudget = 64;
  BatchController controller(o, Clock::time_point{});
  auto limits = runWithPrefill(controller, 10, 1.0, 0.75);
  using Pair = std::pair<uint32_t, uint32_t>;
  EXPECT_EQ(limits, (std::vector<Pair>{{4, 32},
                                       {4, 32},
                                       {4, 16},
                                       {4, 16},
                                       {4, 8},
                                       {4, 8},
                                       {4, 4},
                                       {4, 4},
                                       {4, 20},
                                       {4, 10}}));
}

namespace {
/// One window of 100 gaps of `ms` with a request waiting for the limit;
/// `prefill` >= 0: a normal step prefilled that many prompt tokens (0: none)
/// and a prompt waited for the budget.
void window(BatchController &controller, Clock::time_point &now, double ms,
            int prefill = -1) {
  gaps(controller, 100, ms);
  controller.recordLimited();
  if (prefill >= 0)
    controller.recordPrefill(uint32_t(prefill), /*held=*/true);
  controller.update(now += milliseconds(100));
}

/// Windows under the margin with prompts held until prompt rows come back
/// on: how many windows ran with them off (the first, held, counted).
int windowsOff(BatchController &controller, Clock::time_point &now) {
  int offWindows = 0;
  while (controller.promptRowsOff() && offWindows < 1000) {
    window(controller, now, 5, 0);
    ++offWindows;
  }
  return offWindows;
}

BatchControlOptions rowsOptions() {
  BatchControlOptions o = options(10, 8);
  o.maxBudget = 512;
  return o;
}
} // namespace

TEST(BatchController, PromptRowsGoOffAtTheLeastBudgetAndComeBack) {
  // Target 10 ms, margin 8 ms, budget 4: a window at 12 ms whose normal
  // steps prefilled 4 tokens turns prompt rows off, the batch stays.
  BatchController controller(rowsOptions(), Clock::time_point{});
  Clock::time_point now{};
  window(controller, now, 12, 4);
  EXPECT_TRUE(controller.promptRowsOff());
  EXPECT_EQ(controller.prefillBudget(), 0u);
  EXPECT_EQ(controller.limit(), 8u);
  EXPECT_EQ(controller.promptRowsBackoff(), 4u);
  // Off for 4 windows (the held one counted), whatever the p99.
  window(controller, now, 5, 0); // held
  window(controller, now, 5, 0);
  window(controller, now, 5, 0);
  EXPECT_TRUE(controller.promptRowsOff());
  // Past the backoff, back only under the margin with a prompt held.
  window(controller, now, 9, 0);
  EXPECT_TRUE(controller.promptRowsOff()) << "over the margin";
  window(controller, now, 5);
  EXPECT_TRUE(controller.promptRowsOff()) << "no prompt waited";
  window(controller, now, 5, 0);
  EXPECT_FALSE(controller.promptRowsOff());
  EXPECT_EQ(controller.prefillBudget(), 4u);
  EXPECT_EQ(controller.limit(), 8u);
}

TEST(BatchController, PromptRowsBackOffExponentially) {
  // Turned off again the window after coming back: the backoff doubles,
  // up to 64 windows.
  BatchController controller(rowsOptions(), Clock::time_point{});
  Clock::time_point now{};
  std::vector<int> off;
  for (int i = 0; i < 6; ++i) {
    window(controller, now, 12, 4);
    ASSERT_TRUE(controller.promptRowsOff());
    off.push_back(windowsOff(controller, now));
  }
  EXPECT_EQ(off, (std::vector<int>{4, 8, 16, 32, 64, 64}));
  EXPECT_EQ(controller.limit(), 8u) << "prompt rows went, not the batch";
  // Off again 10 windows after coming back is still a relapse (no prompt
  // waits meanwhile, so the budget stays at 4).
  for (int i = 0; i < 9; ++i)
    window(controller, now, 5);
  window(controller, now, 12, 4);
  EXPECT_EQ(controller.promptRowsBackoff(), 64u);
  windowsOff(controller, now);
  // Rows that stay on for 11 windows reset it to 4.
  for (int i = 0; i < 10; ++i)
    window(controller, now, 5);
  window(controller, now, 12, 4);
  EXPECT_EQ(controller.promptRowsBackoff(), 4u);
  EXPECT_EQ(windowsOff(controller, now), 4);
}

TEST(BatchController, PromptRowsThatCannotFitStayOffTheLongest) {
  // Target 10 ms, margin 8 ms, budget 4: a window over the target whose
  // steps with prompt rows ended their gaps at a median of 9.5 ms (over the
  // margin) turns rows off for the longest backoff at once; one where they
  // took 5 ms (the p99 is the decode steps') for the first backoff.
  for (double rowMs : {9.5, 5.0}) {
    BatchController controller(rowsOptions(), Clock::time_point{});
    Clock::time_point now{};
    gaps(controller, 60, 7);
    gaps(controller, 40, rowMs, StepKind::Prefill);
    gaps(controller, 2, 12); // the p99 (rank 101 of 102) over the target
    controller.recordPrefill(4, /*held=*/true);
    controller.update(now += milliseconds(100));
    const bool fit = rowMs < 8;
    ASSERT_TRUE(controller.promptRowsOff()) << rowMs;
    EXPECT_EQ(controller.promptRowsBackoff(), fit ? 4u : 64u) << rowMs;
    EXPECT_EQ(windowsOff(controller, now), fit ? 4 : 64) << rowMs;
  }
}

TEST(BatchController, PromptRowsOverTheMarginAreAMissUnderTheTarget) {
  // Target 10 ms, margin 8 ms: steps with prompt rows end their gaps at 9
  // ms, a window p99 under the target, but a client's jitter takes such
  // steps over it. At the least budget rows go off for the longest
  // backoff; with a budget of 32 that prefilled 32 it halves; at 7.5 ms
  // rows stay on and the budget stays.
  for (double rowMs : {9.0, 7.5}) {
    for (uint32_t start : {4u, 32u}) {
      BatchControlOptions o = rowsOptions();
      o.startBudget = start;
      BatchController controller(o, Clock::time_point{});
      Clock::time_point now{};
      gaps(controller, 60, 7);
      gaps(controller, 40, rowMs, StepKind::Prefill);
      controller.recordPrefill(start, /*held=*/false);
      controller.update(now += milliseconds(100));
      EXPECT_DOUBLE_EQ(controller.windowP99(), rowMs / 1000);
      const bool over = rowMs > 8;
      EXPECT_EQ(controller.promptRowsOff(), over && start == 4)
          << rowMs << " " << start;
      if (over && start == 4)
        EXPECT_EQ(controller.promptRowsBackoff(), 64u);
      EXPECT_EQ(controller.prefillBudget(),
                over ? (start == 4 ? 0u : 16u) : start)
          << rowMs << " " << start;
      EXPECT_EQ(controller.limit(), 8u);
    }
  }
}

TEST(BatchController, WithoutABudgetSlowPromptRowsCutNothing) {
  // No prefill budget (nothing to make the rows fewer): steps with prompt
  // rows at 9 ms against a 10 ms target leave the batch limit alone while
  // the window's p99 is under the target.
  BatchControlOptions o = options(10, 8);
  o.maxBudget = 0;
  BatchController controller(o, Clock::time_point{});
  Clock::time_point now{};
  gaps(controller, 60, 7);
  gaps(controller, 40, 9, StepKind::Prefill);
  controller.recordPrefill(64, /*held=*/false);
  controller.update(now += milliseconds(100));
  EXPECT_EQ(controller.limit(), 8u);
  EXPECT_FALSE(controller.promptRowsOff());
}

TEST(BatchController, WithPromptRowsOffTheBatchHalves) {
  // Rows off, and the next judged window is over the target with no
  // prompt row in its normal steps: the batch halves, rows stay off.
  BatchController controller(rowsOptions(), Clock::time_point{});
  Clock::time_point now{};
  window(controller, now, 12, 4);
  window(controller, now, 12, 0); // held
  EXPECT_EQ(controller.limit(), 8u);
  window(controller, now, 12, 0);
  EXPECT_EQ(controller.limit(), 4u);
  EXPECT_TRUE(controller.promptRowsOff());
  // Without a budget there are no rows to turn off: the batch halves.
  BatchController unbudgeted(options(10, 8), Clock::time_point{});
  EXPECT_FALSE(unbudgeted.budgeted());
  Clock::time_point later{};
  window(unbudgeted, later, 12, 4);
  EXPECT_EQ(unbudgeted.limit(), 4u);
  EXPECT_FALSE(unbudgeted.promptRowsOff());
}
