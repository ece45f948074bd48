//===- SessionStep.cpp - One serving step over a session's slots ----------===//
//
// The serving scheduler (runtime/serve) keeps a sequence per slot and feeds
// any subset of them each step: new prompts in chunks, running sequences
// one token. The device's pastLengths are uploaded from the host's view of
// every slot (a new sequence starts at 0), slots not fed get step length 0
// (the programs write nothing for them), and the step runs as the decode
// graph of the bucket when every fed slot has one token, else as one launch
// of the prefill program over the slots up to the highest fed one.
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/SessionImpl.h"
#include "src/Tvc.h"

#include <algorithm>
#include <cmath>

namespace sits {

using runtime::checkCuda;

std::vector<int32_t> Session::step(const std::vector<StepInput> &inputs) {
  Impl &s = *state;
  const format::RuntimeConfig &config = s.config;
  const uint32_t maxBatch = config.maxBatch;
  if (inputs.empty())
    return {};
  std::vector<bool> fed(maxBatch, false);
  uint32_t batch = 0;
  bool decodeOnly = true;
  uint32_t longest = 0;
  for (const StepInput &input : inputs) {
    std::string which = "slot " + std::to_string(input.slot);
    if (input.slot >= maxBatch)
      throw Error(ErrorCode::InvalidArgument,
                  which + " is outside 0.." + std::to_string(maxBatch - 1));
    if (fed[input.slot])
      throw Error(ErrorCode::InvalidArgument, which + " is fed twice");
    fed[input.slot] = true;
    if (input.tokens.empty() || input.tokens.size() > config.maxPrefillTokens)
      throw Error(ErrorCode::InvalidArgument,
                  which + " gets " + std::to_string(input.tokens.size()) +
                      " tokens; a step takes 1 to " +
                      std::to_string(config.maxPrefillTokens));
    if (input.position != 0 &&
        int64_t(input.position) != s.slotLengths[input.slot])
      throw Error(ErrorCode::InvalidArgument,
                  which + " holds " +
                      std::to_string(s.slotLengths[input.slot]) +
                      " tokens, not " + std::to_string(input.position));
    if (uint64_t(input.position) + input.tokens.size() > config.maxSeqLen)
      throw Error(ErrorCode::KVCacheFull,
                  which + ": " +
                      std::to_string(input.position + input.tokens.size()) +
                      " tokens exceed the KV cache capacity of " +
                      std::to_string(config.maxSeqLen));
    for (int32_t token : input.tokens)
      if (token < 0 || uint32_t(token) >= config.vocabSize)
        throw Error(ErrorCode::TokenOutOfVocab,
                    which + ": token id " + std::to_string(token) +
                        " is outside the vocabulary (0.." +
                        std::to_string(config.vocabSize - 1) + ")");
    const SamplingParams &sp = input.sampling;
    if (!std::isfinite(sp.temperature) || sp.temperature < 0 ||
        !std::isfinite(sp.topP) || sp.topP <= 0 || sp.topP > 1)
      throw Error(ErrorCode::InvalidArgument,
                  which + ": temperature must be >= 0 and top-p in (0, 1]");
    runtime::checkTvcSampling(s.tvcExactTop, sp.temperature, sp.topK);
    batch = std::max(batch, input.slot + 1);
    decodeOnly &= input.tokens.size() == 1;
    longest = std::max<uint32_t>(longest, input.tokens.size());
  }
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");

  // Every slot's length, sampling and step length, uploaded each step: the
  // decode graphs read them from device memory.
  std::vector<int32_t> stepLengths(maxBatch, 0);
  std::vector<runtime::DeviceSamplingParams> params(maxBatch,
                                                    {0.0f, 0, 1.0f, 0, 0});
  for (const StepInput &input : inputs) {
    s.slotLengths[input.slot] = static_cast<int32_t>(input.position);
    stepLengths[input.slot] = static_cast<int32_t>(input.tokens.size());
    const SamplingParams &sp = input.sampling;
    params[input.slot] = {sp.temperature, sp.topK, sp.topP, 0, sp.seed};
  }
  const uint32_t width = decodeOnly ? 1 : longest;
  const uint32_t rows = decodeOnly ? s.bucketFor(batch) : batch;
  std::vector<int32_t> ids(uint64_t(rows) * width, 0);
  for (const StepInput &input : inputs)
    std::copy(input.tokens.begin(), input.tokens.end(),
              ids.begin() + uint64_t(input.slot) * width);
  checkCuda(cudaMemcpyAsync(s.pastLengths, s.slotLengths.data(), maxBatch * 4,
                            cudaMemcpyHostToDevice, s.stream),
            "uploading past lengths");
  checkCuda(cudaMemcpyAsync(s.stepLengths, stepLengths.data(), maxBatch * 4,
                            cudaMemcpyHostToDevice, s.stream),
            "uploading step lengths");
  checkCuda(cudaMemcpyAsync(s.samplingParams, params.data(),
                            params.size() * sizeof(params[0]),
                            cudaMemcpyHostToDevice, s.stream),
            "uploading sampling parameters");
  checkCuda(cudaMemcpyAsync(s.tokenIds, ids.data(), ids.size() * 4,
                            cudaMemcpyHostToDevice, s.stream),
            "uploading step tokens");
  if (decodeOnly) {
    s.decodeStep(rows);
  } else {
    s.run(s.prepare(s.prefillProgram, batch, width));
    s.stepTail(batch, true);
  }
  // Pageable uploads are staged before the calls return; the sampled
  // tokens are read once the step ends.
  checkCuda(cudaStreamSynchronize(s.stream), "running a serving step");

  std::vector<int32_t> tokens;
  tokens.reserve(inputs.size());
  for (const StepInput &input : inputs) {
    s.slotLengths[input.slot] += static_cast<int32_t>(input.tokens.size());
    tokens.push_back(input.sample ? s.hostTokens[input.slot] : -1);
  }
  return tokens;
}

} // namespace sits
