//===- SchedulerRunning.h - A request the scheduler runs --------*- C++ -*-===//
//
// The scheduler thread's record of a request in a slot, shared by the files
// that make up the Scheduler (Scheduler.cpp: requests in and out;
// SchedulerStep.cpp: composing and running a step). Not for other users.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_SCHEDULERRUNNING_H
#define SITS_RUNTIME_SERVE_SCHEDULERRUNNING_H

#include "Scheduler.h"

#include "sits/TextStream.h"

#include <optional>

namespace sits::serve {

/// A request in a slot, or taken back from one (scheduler thread only).
struct Scheduler::Running {
  Pending pending;
  uint32_t slot = 0;
  /// The prompt, then every token generated so far.
  std::vector<int32_t> sequence;
  /// Tokens of `sequence` to prefill before the next token is sampled: the
  /// prompt's, or all of them after a preemption.
  uint32_t toPrefill = 0;
  /// Tokens of `sequence` fed so far; prefill is done at toPrefill.
  uint32_t prefilled = 0;
  /// Tokens in the slot's cache.
  uint32_t position = 0;
  uint32_t generated = 0;
  /// KV blocks promised at admission: toPrefill's and one to grow into.
  uint32_t reserve = 0;
  std::optional<TextStream> text;
  Clock::time_point lastTokenTime;
  /// Prefix cache blocks the request holds until its prompt is saved.
  PrefixCache::Path cached;
  bool prefixSaved = false;
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_SCHEDULERRUNNING_H
