//===- BatchController.h - SLA-driven limit on the running batch -*- C++
//-*-===//
//
// Measures the p99 inter-token latency over windows of 100 ms and sets two
// limits so that the p99 stays under a target while as much runs as may:
// the prompt tokens a step may prefill (the step's prefill budget,
// minBudget..maxBudget), and the admitted batch (requests allowed to run at
// once, 1..slots). A step that prefills a prompt chunk beside decoding
// streams makes each of them wait for the chunk's rows, so the budget goes
// first. AIMD, closed once per window:
//
//   p99 > target, and a step      budget = max(minBudget, P / 2), P the
//   prefilled more than           most prompt tokens a step of the
//   minBudget prompt tokens       window prefilled (<= budget; bulk
//                                 steps, below, left out)
//   p99 > target, the budget at   prompt rows off: a normal step carries
//   minBudget, and a step         no prompt token (prefillBudget() 0)
//   prefilled prompt tokens
//   p99 > target otherwise        limit = max(1, floor(limit * decrease)),
//                                 and the batch ceiling (below) is the
//                                 most that ran; unless more run than the
//                                 limit already (a decrease still draining:
//                                 running requests are never preempted)
//     (after any of these, the next window is not judged: its tokens were
//     mostly made under the old limits)
//   p99 < margin * target, and    limit + 1 (to maxLimit, and under the
//   the tail ledger (below) is    ceiling while it holds) if a request
//   within 1 % slow gaps          waited for the limit (not for a slot)
//                                 and all but one of the admitted
//                                 requests decoded together in a step;
//                                 if a prompt waited for the budget
//                                 in a normal step (not a bulk one):
//                                 budget + budgetStep (to maxBudget), or
//                                 with rows off and their backoff over,
//                                 rows on again at minBudget
//   otherwise, or no token        unchanged
//
// A window counts as over the target also when (with a prefill budget) the
// median of the gaps its steps with prompt rows ended is over margin *
// target (on the 8B shape such steps took 9.2 to 9.7 ms against a 9.86-ms
// target, windows passed at p99s of 9.5 to 9.8 ms while a client measured
// 10.0 to 10.9 ms), and when its own p99 is under the target but it ended
// a slow gap while the tail ledger's slow share is over 1 %: the
// p99 of the last few seconds, what a client measures, is then over the
// target (windows of ~100 gaps each within 1 % add up to more than 1 %
// with the windows after a miss, which are not judged, and the bulk
// steps' stalls). Growth waits until the ledger is within 1 % for the same
// reason: each probe that misses costs a window of slow gaps and the one
// after, so after a miss the next probe comes once the ledger has
// forgotten most of it (bulk steps keep it near tailShare, so a wait for
// tailShare held the limit at 5 while 64 streams waited). And
// the limit grows only on a window whose steps decoded all but one of the
// admitted requests at once: requests admitted but still waiting for
// their prompt add no row to a step, and a limit raised on their windows
// climbed from 12 to 32 in two seconds at 7 ms steps, then ran 32 streams
// at 9.8 ms against a 9.8-ms target.
//
// Before the rule, a judged window's limit is cut to one more than the most
// requests that ran in it: a limit of the slots, kept while a light load
// met the target, would admit every request of a heavier one at once (on
// the 8B shape, 32 streams joining 16 made 11.4 ms steps against a 9.9 ms
// target for seconds). The limit thus climbs one request a window. The
// ceiling holds for ceilingWindows windows, doubled (to maxCeilingWindows)
// each time a miss comes at or under the last ceiling: the same jump in a
// step's cost, found again.
//
// Prompt rows are off because a step carrying even a few of them runs
// another program than a decode step and may cost the target by itself;
// prompts then move only in bulk steps (below), which always run when
// nothing decodes. Rows stay off for a backoff of rowsOffWindows windows
// at first; turned off again within rowsRelapseWindows windows of coming
// back on, the backoff doubles (to maxRowsOffWindows), and rows that stay
// on that long reset it, so that a load where rows never fit tries them
// rarely, and one that changed tries them soon. Rows that cannot fit at
// all go off for maxRowsOffWindows at once: when the median of the gaps
// that steps with prompt rows ended in that window is over margin *
// target, the steps themselves are about the target's length (measured on
// the 8B shape: 9.0 to 9.7 ms against a 10.1 ms target), and every window
// with them on fills the tail ledger with gaps just over it.
//
// The budget keeps the steps fast, but prompts then move a few tokens a
// step. A p99 lets 1 % of the gaps be slow; the controller spends part of
// that on purpose: a tail ledger of the inter-token gaps of the last
// tailSpan (at most tailHorizon of them) counts those over the target, and
// a bulk step (one that prefills past
// the budget, up to maxBudget, stalling each decoding stream once) is
// allowed while
//
//   slow + decoding <= tailShare * (gaps + decoding)
//
// (always when nothing decodes: then it delays no gap). A bulk step's gaps
// enter the ledger, slow or not by their measured value, but not the
// window's p99, so that a deliberate stall never cuts the budget or the
// limit; slow gaps of normal steps fill the ledger too, so bulk steps stop
// by themselves when normal steps already miss the target.
//
// The clock and the measurements come from the caller, so that tests drive
// it deterministically; the scheduler feeds it from its thread.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_BATCHCONTROLLER_H
#define SITS_RUNTIME_SERVE_BATCHCONTROLLER_H

#include "StepKind.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

namespace sits::serve {

struct BatchControlOptions {
  /// The p99 inter-token latency to stay under; 0 measures only (the limit
  /// stays at maxLimit).
  double targetSeconds = 0;
  /// The highest limit: the backend's slots (>= 1).
  uint32_t maxLimit = 1;
  std::chrono::nanoseconds window = std::chrono::milliseconds(100);
  /// Multiplicative decrease, in (0, 1).
  double decrease = 0.5;
  /// The prompt tokens a step may prefill: at most maxBudget (0: no
  /// budget, nothing to control), at least minBudget (>= 1). A few: a
  /// step of a few prompt rows beside the decoding streams costs little
  /// more than a decode step (an engine's prefill_few), where even 16
  /// rows measured 1.7x the batch-1 step on the 8B shape.
  uint32_t maxBudget = 0;
  uint32_t minBudget = 4;
  /// The budget with a target at the start (minBudget..maxBudget); 0:
  /// minBudget. It grows while the windows show room: started at the
  /// most, it took a second of halvings over the target at every start,
  /// and bulk steps (below) carry the prompts meanwhile.
  uint32_t startBudget = 0;
  /// What the budget grows by in a window under the margin (>= 1).
  uint32_t budgetStep = 16;
  /// The limit grows only while the p99 is under margin * target, so that
  /// it does not climb straight back over the target.
  double margin = 0.8;
  /// The share of the ledger's gaps that may be slow with a bulk step's
  /// stall counted, in (0, 1): half the 1 % a p99 allows, the other half
  /// left to the noise of normal steps.
  double tailShare = 0.005;
  /// Windows prompt rows stay off the first time they go off (>= 1): a
  /// few windows, so that a passing burst does not keep prompts to bulk
  /// steps for long.
  uint32_t rowsOffWindows = 4;
  /// The longest backoff (>= rowsOffWindows): 6.4 s, so that a load whose
  /// steps never fit prompt rows costs one over-target window (and its
  /// held one) in 64, while a change of load is still tried within
  /// seconds.
  uint32_t maxRowsOffWindows = 64;
  /// Rows turned off again within this many windows of coming back on
  /// double the backoff; rows on this long reset it to rowsOffWindows
  /// (>= 1). 10 windows (1 s): a relapse of the same load shows within a
  /// window or two of rows coming back, a second of rows on is a load
  /// that fits them.
  uint32_t rowsRelapseWindows = 10;
  /// Inter-token gaps the tail ledger holds at most (>= 1). A p99 is a
  /// share of gaps, so the ledger counts gaps: 20,000 is about 6 s of 64
  /// streams at 20 ms a step, whose 0.5 % (100 gaps) pays for a bulk step
  /// over all 64, and a burst of slow steps is forgotten within seconds
  /// under load.
  uint32_t tailHorizon = 20000;
  /// The ledger also forgets gaps older than this (> 0): the tail a bulk
  /// step spends must have been earned lately. Counted in gaps alone, the
  /// ledger of a quiet load spans minutes (20,000 gaps of one stream at 7
  /// ms a step), and when the load rises those fast gaps paid for stalls
  /// of many streams at once: on the 8B shape, rising from 1 to 8 streams,
  /// bulk steps of 86 ms at the new level's start made its p99 29.6 ms
  /// against a 10.1 ms target. Within 5 s, slow gaps of bulk steps stay
  /// near tailShare of the gaps of any few seconds.
  std::chrono::nanoseconds tailSpan = std::chrono::seconds(5);
  /// Windows the batch ceiling holds the limit under the running count
  /// that missed the target, the first time (>= 1), and at most
  /// (>= ceilingWindows): a miss at or under an earlier ceiling doubles it.
  /// A step's cost jumps at some batch sizes (on the 8B shape a step of 16
  /// rows took 1.5x one of 8, the GEMVs' second token group): without the
  /// ceiling the limit climbed back over such a jump a second after each
  /// halving.
  uint32_t ceilingWindows = 64;
  uint32_t maxCeilingWindows = 1024;
};

class BatchController {
public:
  using Clock = std::chrono::steady_clock;

  /// Throws sits::Error (InvalidArgument) for options out of range.
  BatchController(BatchControlOptions options, Clock::time_point start);

  /// One inter-token latency (seconds) of some request, in the open window
  /// and the tail ledger (with a target, stamped with the time of the last
  /// update), ended by a step of kind `endedBy`.
  /// A bulk step's gap is a stall spent from the tail on purpose: the
  /// ledger counts it, the window's p99 does not. A gap a step with prompt
  /// rows ended also tells whether such steps fit the target at all.
  void recordTokenLatency(double seconds, StepKind endedBy = StepKind::Decode);
  /// A request waited in the open window although a slot was free: the
  /// limit, not the demand, held the batch back.
  void recordLimited() { limited = true; }
  /// `requests` were running (in slots) at a step of the open window, and
  /// `decoding` of them added a decode row to it (<= requests).
  void recordRunning(uint32_t requests, uint32_t decoding) {
    peakRunning = std::max(peakRunning, requests);
    peakDecoding = std::max(peakDecoding, std::min(decoding, requests));
  }
  /// A step in the open window prefilled `tokens` prompt tokens (`held`:
  /// and some prompt waited for the budget; `bulk`: past the budget, so
  /// that neither its size nor what it held says anything of what the
  /// budget should be: with nothing decoding, every prompt goes in bulk
  /// steps, and a budget grown on them was never tried beside a stream).
  void recordPrefill(uint32_t tokens, bool held, bool bulk = false) {
    if (bulk)
      return;
    mostPrefilled = std::max(mostPrefilled, tokens);
    budgetHeld |= held;
  }
  /// Whether a bulk step may stall `decodingRequests` streams (one gap
  /// each) now: always when none decodes, else while the ledger's slow
  /// gaps and those would stay within tailShare of its gaps and those.
  bool bulkAllowed(uint32_t decodingRequests) const;
  /// Forgets the ledger's gaps older than tailSpan at `now`; closes the
  /// open window when it is `window` old or more at `now` (the next one
  /// opens at `now`) and applies the rule; returns the limit.
  uint32_t update(Clock::time_point now);

  uint32_t limit() const { return current; }
  /// Whether a prefill budget applies (maxBudget != 0).
  bool budgeted() const { return options.maxBudget != 0; }
  /// The prompt tokens a normal step may prefill now: 0 while prompt rows
  /// are off (and without a budget; see budgeted()).
  uint32_t prefillBudget() const { return rowsOff ? 0 : budget; }
  /// Whether prompt rows are off: normal steps carry no prompt token.
  bool promptRowsOff() const { return rowsOff; }
  /// The batch ceiling: the limit stays under it while it holds (0: none
  /// holds).
  uint32_t batchCeiling() const {
    return ceiling && closed - ceilingAt < ceilingBackoff ? ceiling : 0;
  }
  /// The windows prompt rows stay off, or stayed off the last time they
  /// went off, at least (rowsOffWindows..maxRowsOffWindows).
  uint32_t promptRowsBackoff() const { return backoff; }
  /// The p99 of the last closed window that had tokens (seconds; 0 before
  /// any).
  double windowP99() const { return lastP99; }
  /// Windows closed so far.
  uint64_t windowsClosed() const { return closed; }
  /// The tail ledger: slow gaps over its gaps (0 when empty, and without a
  /// target, which has no slow gaps).
  double ledgerSlowShare() const {
    return ledger.empty() ? 0 : double(ledgerSlow) / double(ledger.size());
  }
  /// The share of gaps a p99 lets be slow.
  static constexpr double p99SlowShare = 0.01;
  size_t ledgerGaps() const { return ledger.size(); }
  const BatchControlOptions &getOptions() const { return options; }

  /// The nearest-rank 99th percentile of `samples` (0 when empty); sorts
  /// them.
  static double p99(std::vector<double> &samples);

private:
  BatchControlOptions options;
  Clock::time_point windowStart;
  std::vector<double> samples;
  bool limited = false;
  uint32_t mostPrefilled = 0;
  bool budgetHeld = false;
  uint32_t budget;
  bool holdNext = false;
  /// Prompt rows off since window rowsOffAt (windows closed then), for
  /// `backoff` windows at least; `rowsCameBack`: they came back on at
  /// rowsOnAt.
  bool rowsOff = false, rowsCameBack = false;
  uint64_t rowsOffAt = 0, rowsOnAt = 0;
  uint32_t backoff;
  /// The open window's gaps that steps with prompt rows ended.
  std::vector<double> rowGaps;
  /// The most requests running, and decoding, at a step of the open
  /// window.
  uint32_t peakRunning = 0, peakDecoding = 0;
  /// The open window's gaps over the target (bulk steps' left out).
  uint32_t windowSlow = 0;
  /// The running count of the last window that missed the target with the
  /// limit lowered, set at window ceilingAt for ceilingBackoff windows (0:
  /// none yet).
  uint32_t ceiling = 0;
  uint64_t ceilingAt = 0;
  uint32_t ceilingBackoff;
  uint32_t current;
  double lastP99 = 0;
  uint64_t closed = 0;
  /// The tail ledger, oldest first: when each gap was recorded (the last
  /// update's time) and whether it was slow.
  struct LedgerGap {
    Clock::time_point at;
    bool slow;
  };
  std::deque<LedgerGap> ledger;
  uint64_t ledgerSlow = 0;
  Clock::time_point lastUpdate;
  void forgetOldestGap();
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_BATCHCONTROLLER_H
