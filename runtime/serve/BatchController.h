//===- BatchController.h - SLA-driven limit on the running batch -*- C++
//-*-===//
//
// Measures the p99 inter-token latency over windows of 100 ms and sets the
// admitted batch limit (requests allowed to run at once, 1..slots) so that
// the p99 stays under a target while the batch is as large as it may be.
// AIMD, closed once per window:
//
//   p99 > target                  limit = max(1, floor(limit * decrease));
//                                 the next window is not judged (its tokens
//                                 were mostly made at the old batch size)
//   p99 < margin * target, and    limit = min(maxLimit, limit + 1)
//   a request waited for the
//   limit (not for a slot)
//   otherwise, or no token        unchanged
//
// The clock and the measurements come from the caller, so that tests drive
// it deterministically; the scheduler feeds it from its thread.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_BATCHCONTROLLER_H
#define SITS_RUNTIME_SERVE_BATCHCONTROLLER_H

#include <chrono>
#include <cstdint>
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
  /// The limit grows only while the p99 is under margin * target, so that
  /// it does not climb straight back over the target.
  double margin = 0.8;
};

class BatchController {
public:
  using Clock = std::chrono::steady_clock;

  /// Throws sits::Error (InvalidArgument) for options out of range.
  BatchController(BatchControlOptions options, Clock::time_point start);

  /// One inter-token latency (seconds) of some request, in the open window.
  void recordTokenLatency(double seconds);
  /// A request waited in the open window although a slot was free: the
  /// limit, not the demand, held the batch back.
  void recordLimited() { limited = true; }
  /// Closes the open window when it is `window` old or more at `now` (the
  /// next one opens at `now`) and applies the rule; returns the limit.
  uint32_t update(Clock::time_point now);

  uint32_t limit() const { return current; }
  /// The p99 of the last closed window that had tokens (seconds; 0 before
  /// any).
  double windowP99() const { return lastP99; }
  /// Windows closed so far.
  uint64_t windowsClosed() const { return closed; }
  const BatchControlOptions &getOptions() const { return options; }

  /// The nearest-rank 99th percentile of `samples` (0 when empty); sorts
  /// them.
  static double p99(std::vector<double> &samples);

private:
  BatchControlOptions options;
  Clock::time_point windowStart;
  std::vector<double> samples;
  bool limited = false;
  bool holdNext = false;
  uint32_t current;
  double lastP99 = 0;
  uint64_t closed = 0;
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_BATCHCONTROLLER_H
