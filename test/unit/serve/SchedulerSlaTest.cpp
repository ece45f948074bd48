//===- SchedulerSlaTest.cpp - Bulk steps and prompt rows off --------------===//
//
// The SLA control's step composition over HashBackend (HashBackend.h) on a
// clock of the backend's own, so that step times are exact: bulk prefill
// steps within the tail ledger's room, none while it is full, prompt rows
// off, a paged pool preempting meanwhile, and the per-kind step metrics.
//
//===----------------------------------------------------------------------===//

#include "HashBackend.h"

#include <algorithm>
#include <functional>

using namespace sits;
using namespace sits::serve;
using namespace sits::serve::test;

namespace {
/// A backend on a clock of its own (SchedulerOptions::clock): a step takes
/// `base`, plus `perRow` for each token fed beyond one per slot (prompt
/// rows, which an engine's step grows with).
class TimedBackend : public HashBackend {
public:
  using HashBackend::HashBackend;
  std::vector<int32_t> step(const std::vector<SlotStep> &steps) override {
    size_t rows = 0;
    for (const SlotStep &step : steps)
      rows += step.tokens.size();
    time += base + perRow * int64_t(rows - steps.size());
    return HashBackend::step(steps);
  }
  std::function<std::chrono::steady_clock::time_point()> clock() {
    return [this] { return time; };
  }
  std::chrono::steady_clock::time_point time{};
  std::chrono::microseconds base{2000}, perRow{250};
};

/// A metric's value in the rendered text (-1 when absent).
double metric(const Metrics &metrics, const std::string &name) {
  std::string text = metrics.render();
  size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos)
    return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

struct StepRecord {
  uint32_t decoding = 0; ///< requests with a token out, before the step
  uint32_t prefill = 0;  ///< prompt tokens the step fed
  uint32_t budget = 0;   ///< the SLA budget it was planned under
  double tailShare = 0;  ///< the ledger's slow share before it
  uint32_t limit = 0;    ///< the batch limit it was planned under
  uint32_t running = 0;  ///< requests in slots before the step
  bool bulk = false;
  bool rowsOff = false; ///< planned with prompt rows off
};

/// Runs the scheduler round by round until it settles, recording each step;
/// `beforeRound(i)` may submit more.
std::vector<StepRecord>
runRecorded(Scheduler &scheduler, const Metrics &metrics,
            const std::vector<Outcome> &outcomes,
            const std::function<void(int)> &beforeRound) {
  std::vector<StepRecord> steps;
  double prefilled = 0, bulkSteps = 0;
  for (int i = 0; i < 100000; ++i) {
    beforeRound(i);
    StepRecord step;
    for (const Outcome &outcome : outcomes)
      step.decoding += !outcome.tokens.empty() && !outcome.finished;
    step.running = scheduler.runningRequests();
    if (!scheduler.runOnce())
      break;
    double nowPrefilled = metric(metrics, "sits_prefill_tokens_total");
    double nowBulk = metric(metrics, "sits_sla_bulk_steps_total");
    step.prefill = uint32_t(nowPrefilled - prefilled);
    step.bulk = nowBulk > bulkSteps;
    step.budget = uint32_t(metric(metrics, "sits_step_prefill_budget_tokens"));
    step.tailShare = metric(metrics, "sits_sla_tail_share");
    step.limit = scheduler.admittedLimit();
    step.rowsOff = metric(metrics, "sits_sla_prompt_rows_off") == 1;
    prefilled = nowPrefilled;
    bulkSteps = nowBulk;
    steps.push_back(step);
  }
  EXPECT_FALSE(scheduler.runOnce()) << "the scheduler does not settle";
  return steps;
}

/// The per-kind step metrics agree with the recorded steps: each step
/// counted once under its kind (bulk; prefill: prompt rows within the
/// budget; decode: none), its prompt tokens under that kind, every
/// sampled row once, and on the backend's clock a bulk step's mean time
/// above a decode step's.
void expectStepKinds(const Metrics &metrics,
                     const std::vector<StepRecord> &steps) {
  double count[3] = {}, prompt[3] = {};
  for (const StepRecord &step : steps) {
    int kind = step.bulk ? 2 : step.prefill > 0 ? 1 : 0;
    count[kind] += 1;
    prompt[kind] += step.prefill;
  }
  const char *names[3] = {"decode", "prefill", "bulk"};
  double sampled = 0;
  for (int kind = 0; kind < 3; ++kind) {
    std::string label = std::string("{kind=\"") + names[kind] + "\"}";
    EXPECT_EQ(metric(metrics, "sits_step_duration_seconds_count" + label),
              count[kind])
        << names[kind];
    EXPECT_EQ(metric(metrics, "sits_step_prompt_tokens_total" + label),
              prompt[kind])
        << names[kind];
    sampled += metric(metrics, "sits_step_sampled_rows_total" + label);
  }
  EXPECT_EQ(sampled, metric(metrics, "sits_generation_tokens_total"));
  auto mean = [&](const char *kind) {
    std::string label = std::string("{kind=\"") + kind + "\"}";
    return metric(metrics, "sits_step_duration_seconds_sum" + label) /
           metric(metrics, "sits_step_duration_seconds_count" + label);
  };
  EXPECT_GT(count[0], 0) << "no decode step";
  if (count[2] > 0)
    EXPECT_GT(mean("bulk"), mean("decode"));
}

/// Two long decoding streams, and a prompt of 48 tokens every 4 rounds
/// (40 of them), over four slots, under a target of 5 ms with a per-step
/// limit of 40 prompt tokens (less than a prompt: a bulk step is cut).
struct TailWorkload {
  static constexpr uint32_t kStepLimit = 40;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<uint32_t> lengths;
  std::vector<Outcome> outcomes;
  size_t submitted = 0;
  explicit TailWorkload(uint32_t streamTokens = 1500) {
    prompts = {{'a'}, {'b'}};
    lengths = {streamTokens, streamTokens};
    for (int i = 0; i < 40; ++i) {
      std::vector<int32_t> prompt;
      for (int t = 0; t < 48; ++t)
        prompt.push_back('a' + (i * 7 + t * 3) % 26);
      prompts.push_back(prompt);
      lengths.push_back(8);
    }
    outcomes.resize(prompts.size());
  }
  static SchedulerOptions options(TimedBackend &backend) {
    SchedulerOptions o;
    o.slaP99TokenSeconds = 0.005;
    o.maxPrefillChunk = 64;
    o.maxStepPrefillTokens = kStepLimit;
    o.clock = backend.clock();
    return o;
  }
  std::vector<StepRecord> run(Scheduler &scheduler, const Metrics &metrics) {
    return runRecorded(scheduler, metrics, outcomes, [&](int round) {
      while (submitted < prompts.size() &&
             (submitted < 2 || round >= int(submitted - 2) * 4)) {
        EXPECT_TRUE(scheduler
                        .submit(request(prompts[submitted], lengths[submitted]),
                                collect(outcomes[submitted]))
                        .accepted());
        ++submitted;
      }
    });
  }
  void expectLoneTokens() {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE(outcomes[i].finished) << i;
      EXPECT_EQ(outcomes[i].tokens, alone(prompts[i], lengths[i])) << i;
    }
  }
};
} // namespace

TEST(Scheduler, BulkStepsPrefillWaitingPromptsWhenTheTailHasRoom) {
  // A step takes 2 ms and 0.25 ms a prompt row beyond one per slot: over
  // the 5 ms target past 12 rows, and under 0.8 of it below 9, so a budget
  // that starts at 8 stays there. A ledger of 400 gaps with 5 % of them
  // slow allowed: waiting prompts are prefilled in bulk steps of up to 40
  // tokens beside the decoding streams, and their stalls cut neither the
  // budget nor the batch limit.
  TimedBackend backend(4, 2048);
  SchedulerOptions options = TailWorkload::options(backend);
  options.slaControl.tailShare = 0.05;
  options.slaControl.tailHorizon = 400;
  options.slaControl.minBudget = 8;
  Metrics metrics;
  TailWorkload work;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  int bulkBesideStreams = 0;
  uint32_t leastBudget = TailWorkload::kStepLimit;
  const StepRecord *firstBulk = nullptr;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord &step = steps[i];
    leastBudget = std::min(leastBudget, step.budget);
    // Normal steps of 8 rows take 3.75 ms, under the margin: only the
    // bulk steps' stalls could have cut the budget or the limit since. The
    // limit follows the running requests down (one more than the most of
    // a window), but only a cut takes it under them.
    if (firstBulk) {
      EXPECT_EQ(step.budget, firstBulk->budget) << "step " << i;
      EXPECT_GE(step.limit, step.running) << "step " << i;
    }
    EXPECT_LE(step.prefill, TailWorkload::kStepLimit) << "step " << i;
    if (!step.bulk) {
      EXPECT_LE(step.prefill, step.budget) << "step " << i;
      continue;
    }
    EXPECT_GT(step.prefill, step.budget) << "step " << i;
    if (step.decoding > 0) {
      ++bulkBesideStreams;
      firstBulk = firstBulk ? firstBulk : &step;
      // The ledger had room for this step's stall.
      EXPECT_LE(step.tailShare, 0.05) << "step " << i;
    }
  }
  EXPECT_EQ(leastBudget, 8u) << "the budget was cut below its least";
  EXPECT_GT(bulkBesideStreams, 0) << "no bulk step beside decoding streams";
  EXPECT_EQ(metric(metrics, "sits_sla_bulk_steps_total"),
            std::count_if(steps.begin(), steps.end(),
                          [](const StepRecord &s) { return s.bulk; }));
  expectStepKinds(metrics, steps);
}

TEST(Scheduler, NoBulkStepBesideStreamsWhileTheTailIsFull) {
  // Every step takes 6 ms, over the 5 ms target: every gap is slow, the
  // ledger is full, and prompts wait for the budget beside decoding
  // streams without a bulk step. Only with nothing decoding (a bulk step
  // then delays no gap) do prompts get the per-step limit.
  TimedBackend backend(4, 2048);
  backend.base = std::chrono::microseconds(6000);
  Metrics metrics;
  TailWorkload work;
  Scheduler scheduler(backend, bytes(), TailWorkload::options(backend),
                      &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  int heldBesideStreams = 0, bulkAlone = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord &step = steps[i];
    if (step.decoding > 0) {
      EXPECT_FALSE(step.bulk) << "step " << i;
      EXPECT_LE(step.prefill, step.budget) << "step " << i;
      heldBesideStreams += step.prefill > 0 && step.prefill == step.budget &&
                           step.budget < TailWorkload::kStepLimit;
    } else if (step.bulk) {
      ++bulkAlone;
      EXPECT_GT(step.prefill, step.budget) << "step " << i;
    }
  }
  EXPECT_GT(heldBesideStreams, 0) << "prompts never waited for the budget";
  EXPECT_GT(bulkAlone, 0) << "no bulk step with nothing decoding";
  EXPECT_DOUBLE_EQ(metric(metrics, "sits_sla_tail_share"), 1);
  expectStepKinds(metrics, steps);
}

TEST(Scheduler, PromptRowsOffLeavePromptsToBulkSteps) {
  // A step takes 3 ms, under 0.8 of the 5 ms target, and 2.1 ms a prompt
  // row beyond one per slot: any prompt row puts it over the target, even
  // at the least budget. Prompt rows go off; normal steps beside decoding
  // streams then carry no prompt token, and prompts are prefilled in bulk
  // steps (or with nothing decoding), each request still getting its
  // lone tokens. The steps with prompt rows end their gaps over the
  // target's margin (4 ms), so rows go off for the longest backoff (64
  // windows, 6.4 s) at once and stay off for the rest of the run (about
  // 1,500 steps of 3 ms).
  TimedBackend backend(4, 2048);
  backend.base = std::chrono::microseconds(3000);
  backend.perRow = std::chrono::microseconds(2100);
  SchedulerOptions options = TailWorkload::options(backend);
  options.slaControl.tailShare = 0.05;
  options.slaControl.tailHorizon = 400;
  Metrics metrics;
  TailWorkload work;
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  int offBesideStreams = 0, bulkWhileOff = 0, backOn = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord &step = steps[i];
    backOn += i > 0 && steps[i - 1].rowsOff && !step.rowsOff;
    if (!step.rowsOff)
      continue;
    EXPECT_EQ(step.budget, 0u) << "step " << i;
    if (step.bulk) {
      bulkWhileOff += step.prefill > 0;
    } else if (step.decoding > 0) {
      ++offBesideStreams;
      EXPECT_EQ(step.prefill, 0u) << "step " << i;
    }
  }
  EXPECT_GT(offBesideStreams, 0) << "prompt rows never went off";
  EXPECT_EQ(backOn, 0) << "prompt rows came back on";
  EXPECT_GT(bulkWhileOff, 0) << "no prompt moved with rows off";
  EXPECT_EQ(metric(metrics, "sits_prompt_tokens_total"),
            metric(metrics, "sits_prefill_tokens_total"));
  expectStepKinds(metrics, steps);
}

TEST(Scheduler, BulkStepsOverAPagedKvPool) {
  // The same workload, streams of 300 tokens, over a pool of 24 blocks of
  // 16 tokens: the streams grow into blocks the others need, so requests
  // step aside (their blocks back, their tokens recomputed) while bulk
  // steps run; each request still gets its lone tokens, and every block
  // comes back.
  TimedBackend backend(4, 2048);
  backend.usePages(16, 24);
  SchedulerOptions options = TailWorkload::options(backend);
  options.slaControl.tailShare = 0.05;
  options.slaControl.tailHorizon = 400;
  Metrics metrics;
  TailWorkload work(300);
  Scheduler scheduler(backend, bytes(), options, &metrics);
  std::vector<StepRecord> steps = work.run(scheduler, metrics);
  work.expectLoneTokens();
  EXPECT_GT(std::count_if(
                steps.begin(), steps.end(),
                [](const StepRecord &s) { return s.bulk && s.decoding > 0; }),
            0);
  EXPECT_GT(metric(metrics, "sits_requests_preempted_total"), 0);
  EXPECT_EQ(backend.pages->freeBlocks(), 24u);
}
