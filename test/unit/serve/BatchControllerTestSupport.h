//===- BatchControllerTestSupport.h - Windows fed to the controller -*- C++
//-*-===//
//
// The controller gets its clock and latencies from the tests: helpers that
// feed it windows of gaps of a made-up model.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_SERVE_BATCHCONTROLLERTESTSUPPORT_H
#define SITS_TEST_UNIT_SERVE_BATCHCONTROLLERTESTSUPPORT_H

#include "BatchController.h"

#include <functional>
#include <vector>

namespace sits::serve::testing {
using Clock = BatchController::Clock;
using std::chrono::milliseconds;

/// A target and slots; the tail ledger forgets a window's gaps two
/// windows later, so that the window rules show alone (growth waits for
/// room in the ledger: with the default span, 50 windows after a miss).
inline BatchControlOptions options(double targetMs, uint32_t slots) {
  BatchControlOptions o;
  o.targetSeconds = targetMs / 1000;
  o.maxLimit = slots;
  o.tailSpan = milliseconds(200);
  return o;
}

/// Runs `windows` windows of 100 ms: each gets 100 latencies from
/// `latencyMs(limit)` (the last one, the p99 sample, from `tailMs`) and a
/// waiting request when `demand`; with `running`, the requests running in
/// the window (from the limit); returns the limit after each window.
inline std::vector<uint32_t>
run(BatchController &controller, int windows,
    const std::function<double(uint32_t)> &latencyMs, bool demand = true,
    const std::function<uint32_t(uint32_t)> &running = nullptr) {
  std::vector<uint32_t> limits;
  Clock::time_point now{};
  for (int w = 0; w < windows; ++w) {
    double ms = latencyMs(controller.limit());
    if (running) {
      uint32_t r = running(controller.limit());
      controller.recordRunning(r, r);
    }
    for (int i = 0; i < 100; ++i)
      controller.recordTokenLatency(ms / 1000);
    if (demand)
      controller.recordLimited();
    now += milliseconds(100);
    limits.push_back(controller.update(now));
  }
  return limits;
}
/// Windows of 100 ms on one clock across calls: each gets 100 latencies
/// of `ms`, `running` running requests, and a request waiting for the
/// limit when `demand`; returns the limit after it.
struct Windows {
  BatchController &controller;
  Clock::time_point now{};
  uint32_t next(double ms, uint32_t running, bool demand) {
    controller.recordRunning(running, running);
    for (int i = 0; i < 100; ++i)
      controller.recordTokenLatency(ms / 1000);
    if (demand)
      controller.recordLimited();
    now += milliseconds(100);
    return controller.update(now);
  }
};
/// Feeds `count` gaps of `ms`, ended by steps of kind `endedBy`.
inline void gaps(BatchController &controller, int count, double ms,
                 StepKind endedBy = StepKind::Decode) {
  for (int i = 0; i < count; ++i)
    controller.recordTokenLatency(ms / 1000, endedBy);
}

/// `options(targetMs, slots)` with the ledger's default span (5 s).
inline BatchControlOptions withDefaultSpan(double targetMs, uint32_t slots) {
  BatchControlOptions o = options(targetMs, slots);
  o.tailSpan = BatchControlOptions().tailSpan;
  return o;
}

inline BatchControlOptions tail(double share, uint32_t horizon = 20000) {
  BatchControlOptions o = options(10, 8);
  o.maxBudget = 512;
  o.startBudget = 512;
  o.tailShare = share;
  o.tailHorizon = horizon;
  o.tailSpan = BatchControlOptions().tailSpan; // the default
  return o;
}

} // namespace sits::serve::testing

#endif // SITS_TEST_UNIT_SERVE_BATCHCONTROLLERTESTSUPPORT_H
