//===- StepKind.h - What a backend step carried -----------------*- C++ -*-===//
//
// Shared by the metrics (step durations by kind) and the SLA control
// (which inter-token gaps a step with prompt rows ended).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_STEPKIND_H
#define SITS_RUNTIME_SERVE_STEPKIND_H

namespace sits::serve {

/// What a backend step carried: only one token per running stream
/// (`Decode`), prompt rows too within the step's budget (`Prefill`), or
/// prompt rows past the SLA budget (`Bulk`, BatchController.h).
enum class StepKind { Decode, Prefill, Bulk };
constexpr int kStepKinds = 3;

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_STEPKIND_H
