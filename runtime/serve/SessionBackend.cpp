//===- SessionBackend.cpp - The serving backend over a GPU session --------===//

#include "SessionBackend.h"

using namespace sits;
using namespace sits::serve;

uint32_t SessionBackend::slots() const {
  return session.engine()->config().maxBatch;
}

uint32_t SessionBackend::maxSequenceLength() const {
  return session.engine()->config().maxSeqLen;
}

uint32_t SessionBackend::maxStepTokens() const {
  return session.engine()->config().maxPrefillTokens;
}

std::vector<int32_t> SessionBackend::step(const std::vector<SlotStep> &steps) {
  std::vector<StepInput> inputs;
  inputs.reserve(steps.size());
  for (const SlotStep &step : steps) {
    // The session keeps each slot's length; a step at another position
    // would attend to the wrong cache rows.
    if (step.position != 0 && step.position != session.slotLength(step.slot))
      throw Error(ErrorCode::InvalidArgument,
                  "slot " + std::to_string(step.slot) + " holds " +
                      std::to_string(session.slotLength(step.slot)) +
                      " tokens, not " + std::to_string(step.position));
    inputs.push_back(StepInput{step.slot, step.tokens,
                               /*reset=*/step.position == 0, step.sampling});
  }
  std::vector<int32_t> sampled = session.step(inputs);
  for (size_t i = 0; i < steps.size(); ++i)
    if (!steps[i].sample)
      sampled[i] = -1; // a prefill chunk before the prompt's last
  return sampled;
}
