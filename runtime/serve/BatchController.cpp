//===- BatchController.cpp - SLA-driven limit on the running batch --------===//

#include "BatchController.h"

#include "sits/Error.h"

#include <algorithm>
#include <cmath>

using namespace sits;
using namespace sits::serve;

BatchController::BatchController(BatchControlOptions options,
                                 Clock::time_point start)
    : options(options), windowStart(start),
      budget(options.targetSeconds > 0 && options.startBudget
                 ? options.startBudget
             : options.targetSeconds > 0
                 ? std::min(options.minBudget, options.maxBudget)
                 : options.maxBudget),
      backoff(options.rowsOffWindows), ceilingBackoff(options.ceilingWindows),
      current(options.maxLimit), lastUpdate(start) {
  if (options.maxLimit < 1)
    throw Error(ErrorCode::InvalidArgument,
                "the batch limit needs at least one slot");
  if (!(options.targetSeconds >= 0) || std::isinf(options.targetSeconds))
    throw Error(ErrorCode::InvalidArgument,
                "the latency target must be a finite number of seconds >= 0");
  if (options.minBudget < 1 || options.budgetStep < 1)
    throw Error(ErrorCode::InvalidArgument,
                "the smallest prefill budget and its step are one token");
  if (options.startBudget && (options.startBudget < options.minBudget ||
                              options.startBudget > options.maxBudget))
    throw Error(ErrorCode::InvalidArgument,
                "the first prefill budget must be between the smallest and "
                "the largest");
  if (options.window.count() <= 0)
    throw Error(ErrorCode::InvalidArgument, "the SLA window must be positive");
  if (!(options.decrease > 0 && options.decrease < 1) ||
      !(options.margin > 0 && options.margin <= 1))
    throw Error(ErrorCode::InvalidArgument,
                "the decrease factor must be in (0, 1) and the margin in "
                "(0, 1]");
  if (!(options.tailShare > 0 && options.tailShare < 1))
    throw Error(ErrorCode::InvalidArgument, "the tail share must be in (0, 1)");
  if (options.rowsOffWindows < 1 ||
      options.maxRowsOffWindows < options.rowsOffWindows ||
      options.rowsRelapseWindows < 1)
    throw Error(ErrorCode::InvalidArgument,
                "the prompt rows' backoff must be at least one window, and "
                "its longest at least its first");
  if (options.ceilingWindows < 1 ||
      options.maxCeilingWindows < options.ceilingWindows)
    throw Error(ErrorCode::InvalidArgument,
                "the batch ceiling must hold at least one window, and its "
                "longest at least its first");
  if (options.tailHorizon < 1 || options.tailSpan.count() <= 0)
    throw Error(ErrorCode::InvalidArgument,
                "the tail ledger needs at least one gap and a positive span");
}

void BatchController::forgetOldestGap() {
  ledgerSlow -= ledger.front().slow;
  ledger.pop_front();
}

void BatchController::recordTokenLatency(double seconds, StepKind endedBy) {
  if (!(seconds >= 0 && std::isfinite(seconds)))
    return;
  if (endedBy != StepKind::Bulk)
    samples.push_back(seconds);
  if (endedBy == StepKind::Prefill)
    rowGaps.push_back(seconds);
  if (options.targetSeconds <= 0)
    return; // no target, no slow gap
  const bool slow = seconds > options.targetSeconds;
  windowSlow += slow && endedBy != StepKind::Bulk;
  if (ledger.size() == options.tailHorizon)
    forgetOldestGap();
  ledger.push_back({lastUpdate, slow});
  ledgerSlow += slow;
}

bool BatchController::bulkAllowed(uint32_t decodingRequests) const {
  if (decodingRequests == 0)
    return true;
  // Each decoding stream gets one gap from the step, counted as slow.
  return double(ledgerSlow + decodingRequests) <=
         options.tailShare * double(ledger.size() + decodingRequests);
}

double BatchController::p99(std::vector<double> &values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(0.99 * values.size()));
  return values[std::max<size_t>(rank, 1) - 1];
}

uint32_t BatchController::update(Clock::time_point now) {
  lastUpdate = now;
  while (!ledger.empty() && now - ledger.front().at >= options.tailSpan)
    forgetOldestGap();
  if (now - windowStart < options.window)
    return current;
  ++closed;
  windowStart = now;
  const bool wasLimited = limited, wasBudgetHeld = budgetHeld;
  const uint32_t prefilled = mostPrefilled, peak = peakRunning,
                 decoding = peakDecoding, slowGaps = windowSlow;
  limited = budgetHeld = false;
  mostPrefilled = peakRunning = peakDecoding = windowSlow = 0;
  // Whether steps with prompt rows ended their gaps within the margin (the
  // median of the window's, nearest rank).
  bool rowsFit = true;
  if (!rowGaps.empty()) {
    std::nth_element(rowGaps.begin(), rowGaps.begin() + rowGaps.size() / 2,
                     rowGaps.end());
    rowsFit =
        rowGaps[rowGaps.size() / 2] <= options.margin * options.targetSeconds;
    rowGaps.clear();
  }
  if (samples.empty())
    return current; // no token, no evidence either way
  lastP99 = p99(samples);
  samples.clear();
  if (options.targetSeconds <= 0)
    return current;
  if (holdNext) {
    holdNext = false;
    return current;
  }
  if (peak > 0)
    current = std::min(current, peak + 1);
  // The last seconds' tail over its 1 % and this window adding to it.
  const bool tailOver = slowGaps > 0 && ledgerSlowShare() > p99SlowShare;
  // Steps with prompt rows over the margin miss too, where a budget can
  // make them fewer: a client's jitter takes them over the target
  // (!rowsFit implies a normal step prefilled).
  const bool rowsOver = !rowsFit && budgeted();
  if (lastP99 > options.targetSeconds || tailOver || rowsOver) {
    holdNext = true;
    if (!rowsOff && budget && prefilled > options.minBudget) {
      budget = std::max(options.minBudget, std::min(budget, prefilled) / 2);
    } else if (!rowsOff && budget && budget <= options.minBudget &&
               prefilled > 0) {
      // Even the fewest prompt rows cost the target: none in normal steps.
      // Off again soon after coming back: the load has not changed, wait
      // twice as long before the next try. Steps with rows as long as
      // the target's margin: the longest wait at once.
      const bool relapse =
          rowsCameBack && closed - rowsOnAt <= options.rowsRelapseWindows;
      backoff = !rowsFit  ? options.maxRowsOffWindows
                : relapse ? std::min(options.maxRowsOffWindows, backoff * 2)
                          : options.rowsOffWindows;
      rowsOff = true;
      rowsOffAt = closed;
    } else if (peak > current) {
      holdNext = false; // a decrease still draining: nothing changes
    } else {
      uint32_t lowered = static_cast<uint32_t>(current * options.decrease);
      current = std::max<uint32_t>(1, std::min(lowered, current - 1));
      if (peak > 0) { // the caller counts the running requests
        ceilingBackoff =
            ceiling && peak <= ceiling
                ? std::min(options.maxCeilingWindows, 2 * ceilingBackoff)
                : options.ceilingWindows;
        ceiling = peak;
        ceilingAt = closed;
      }
    }
  } else if (lastP99 < options.margin * options.targetSeconds &&
             ledgerSlowShare() <= p99SlowShare) {
    const uint32_t ceilingNow = batchCeiling();
    // The caller counts the running requests: all but one decoded at once.
    const bool admittedDecoded = peak == 0 || decoding + 1 >= current;
    if (wasLimited && admittedDecoded && current < options.maxLimit &&
        (!ceilingNow || current + 1 < ceilingNow))
      ++current;
    if (rowsOff) {
      if (wasBudgetHeld && closed - rowsOffAt >= backoff) {
        rowsOff = false;
        budget = std::min(options.minBudget, options.maxBudget);
        rowsCameBack = true;
        rowsOnAt = closed;
      }
    } else if (wasBudgetHeld && budget && budget < options.maxBudget) {
      budget = std::min(options.maxBudget, budget + options.budgetStep);
    }
  }
  return current;
}
