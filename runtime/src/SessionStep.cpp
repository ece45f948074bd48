//===- SessionStep.cpp - Continuous batching, one step at a time ----------===//
//
// Session::step extends the sequences of some slots by a few tokens each.
// The engine's programs already take per-sequence lengths (past_lengths,
// step_lengths; a sequence with step length 0 writes nothing), so one step
// can prefill a new request in one slot while the others decode: all-single
// token steps replay the bucket's decode graph, anything else runs as one
// prefill over slots 0..highest, row b being slot b. An engine that takes
// packed steps gets each slot's tokens right after the previous slot's, so
// a step of prompt chunks and decode tokens reads the weights once and
// computes no padding; an older engine's prefill pads every slot to the
// longest chunk. The step's tokens are uploaded every time, so a slot's
// input never depends on what an earlier step left in the device buffers.
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/SessionImpl.h"

#include <algorithm>

namespace sits {

using runtime::checkCuda;

namespace {

/// Checks `inputs` against the session's slots; returns the highest slot.
uint32_t checkStep(const Session::Impl &s,
                   const std::vector<StepInput> &inputs) {
  const format::RuntimeConfig &config = s.config;
  if (inputs.empty())
    throw Error(ErrorCode::InvalidArgument, "a step needs at least one input");
  std::vector<bool> seen(config.maxBatch, false);
  uint32_t highest = 0;
  for (const StepInput &input : inputs) {
    const std::string slot = "slot " + std::to_string(input.slot);
    s.checkSlot(input.slot);
    if (seen[input.slot])
      throw Error(ErrorCode::InvalidArgument, slot + " is given twice");
    seen[input.slot] = true;
    highest = std::max(highest, input.slot);
    if (input.tokens.empty())
      throw Error(ErrorCode::InvalidArgument, slot + " is given no tokens");
    if (input.tokens.size() > config.maxPrefillTokens)
      throw Error(ErrorCode::InvalidArgument,
                  slot + " is given " + std::to_string(input.tokens.size()) +
                      " tokens, more than a prefill chunk of " +
                      std::to_string(config.maxPrefillTokens));
    if (!input.reset && !s.slotLive[input.slot])
      throw Error(ErrorCode::InvalidArgument,
                  slot + " holds no sequence: start one with reset");
    for (int32_t token : input.tokens)
      if (token < 0 || uint32_t(token) >= config.vocabSize)
        throw Error(ErrorCode::TokenOutOfVocab,
                    "token id " + std::to_string(token) + " for " + slot +
                        " is outside the vocabulary (0.." +
                        std::to_string(config.vocabSize - 1) + ")");
    const uint64_t held = input.reset ? 0 : s.slotLengths[input.slot];
    if (held + input.tokens.size() > config.maxSeqLen)
      throw Error(ErrorCode::KVCacheFull,
                  "KV cache full: " + slot + " holds " + std::to_string(held) +
                      " tokens; " + std::to_string(input.tokens.size()) +
                      " more would pass the capacity of " +
                      std::to_string(config.maxSeqLen));
    if (input.reset)
      checkSamplingParams(input.sampling, s.tvcExactTop);
  }
  return highest;
}

} // namespace

void Session::Impl::ensureSlots() {
  if (slotLengths.size() != config.maxBatch) {
    slotLengths.assign(config.maxBatch, 0);
    slotLive.assign(config.maxBatch, false);
  }
}

void Session::Impl::startSequence(uint32_t slot,
                                  const SamplingParams &sampling) {
  const int32_t zero = 0;
  // Stream 0: a sequence's draws depend on its seed and token indices only.
  const runtime::DeviceSamplingParams params = deviceSampling(sampling, 0);
  checkCuda(cudaMemcpyAsync(pastLengths + slot, &zero, 4,
                            cudaMemcpyHostToDevice, stream),
            "resetting a slot's length");
  checkCuda(cudaMemcpyAsync(samplingParams + slot, &params, sizeof(params),
                            cudaMemcpyHostToDevice, stream),
            "uploading a slot's sampling parameters");
  slotLengths[slot] = 0;
  slotLive[slot] = true;
  releaseSlot(slot);
}

std::vector<int32_t> Session::step(const std::vector<StepInput> &inputs) {
  Impl &s = *state;
  s.ensureSlots();
  const uint32_t batch = checkStep(s, inputs) + 1;
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");

  // New sequences: an empty cache and their sampling parameters.
  for (const StepInput &input : inputs)
    if (input.reset)
      s.startSequence(input.slot, input.sampling);

  const bool decode =
      std::all_of(inputs.begin(), inputs.end(), [](const StepInput &input) {
        return input.tokens.size() == 1;
      });
  // A paged cache: blocks for the new rows (a full pool fails the step
  // before any launch; the slots keep what they held).
  for (const StepInput &input : inputs)
    s.reserveRows(input.slot, s.slotLengths[input.slot] + input.tokens.size());
  std::vector<int32_t> next;
  if (decode) {
    // The decode graph of a bucket reads the bucket's rows.
    const uint32_t bucket = s.bucketFor(batch);
    std::vector<int32_t> ids(bucket, 0), stepLengths(s.config.maxBatch, 0);
    for (const StepInput &input : inputs) {
      ids[input.slot] = input.tokens[0];
      stepLengths[input.slot] = 1;
    }
    s.upload(s.tokenIds, ids.data(), ids.size() * 4,
             "uploading the step's tokens");
    s.upload(s.stepLengths, stepLengths.data(), stepLengths.size() * 4,
             "uploading step lengths");
    s.decodeStep(bucket);
    // The uploads above are from pageable memory, and the sampled tokens
    // are needed now.
    checkCuda(cudaStreamSynchronize(s.stream), "running a decode step");
    for (const StepInput &input : inputs)
      next.push_back(s.hostTokens[input.slot]);
  } else {
    next = s.stepPrefill(inputs, batch);
  }
  for (const StepInput &input : inputs)
    s.slotLengths[input.slot] += static_cast<uint32_t>(input.tokens.size());
  return next;
}

std::vector<int32_t>
Session::Impl::stepPrefill(const std::vector<StepInput> &inputs,
                           uint32_t batch) {
  // Row b of the prefill is slot b (its length, sampling parameters and
  // cache); slots without input have no tokens. Packed, each slot's tokens
  // follow the previous slot's; padded, every slot gets the longest
  // chunk's rows.
  uint32_t seq = 1;
  uint64_t tokens = 0;
  std::vector<int32_t> lengths(config.maxBatch, 0);
  for (const StepInput &input : inputs) {
    lengths[input.slot] = static_cast<int32_t>(input.tokens.size());
    seq = std::max<uint32_t>(seq, lengths[input.slot]);
    tokens += input.tokens.size();
  }
  if (!config.packedSteps)
    tokens = uint64_t(batch) * seq;
  std::vector<int32_t> ids(tokens, 0);
  uint64_t row = 0;
  for (uint32_t slot = 0; slot < batch; ++slot) {
    if (!config.packedSteps)
      row = uint64_t(slot) * seq;
    for (const StepInput &input : inputs)
      if (input.slot == slot)
        std::copy(input.tokens.begin(), input.tokens.end(), ids.begin() + row);
    if (config.packedSteps)
      row += lengths[slot];
  }
  upload(tokenIds, ids.data(), ids.size() * 4, "uploading the step's tokens");
  upload(stepLengths, lengths.data(), lengths.size() * 4,
         "uploading step lengths");
  uploadTable();
  run(prepare(prefillProgramFor(tokens), batch, seq, tokens));
  stepTail(batch, true);
  // The uploads above are from pageable memory, and the sampled tokens are
  // needed now.
  checkCuda(cudaStreamSynchronize(stream), "running a step");
  std::vector<int32_t> next;
  next.reserve(inputs.size());
  for (const StepInput &input : inputs)
    next.push_back(hostTokens[input.slot]);
  return next;
}

void Session::Impl::checkSlot(uint32_t slot) const {
  if (slot >= config.maxBatch)
    throw Error(ErrorCode::InvalidArgument,
                "slot " + std::to_string(slot) +
                    " is outside the session's 0.." +
                    std::to_string(config.maxBatch - 1));
}

uint32_t Session::slotLength(uint32_t slot) const {
  const Impl &s = *state;
  s.checkSlot(slot);
  return slot < s.slotLengths.size() ? s.slotLengths[slot] : 0;
}

} // namespace sits
