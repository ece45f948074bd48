//===- SessionStep.cpp - Continuous batching, one step at a time ----------===//
//
// Session::step extends the sequences of some slots by a few tokens each.
// The engine's programs already take per-sequence lengths (past_lengths,
// step_lengths; a sequence with step length 0 writes nothing), so one step
// can prefill a new request in one slot while the others decode: all-single
// token steps replay the bucket's decode graph, anything else runs as one
// prefill chunk. A prefill pads every row to the longest chunk, and over a
// contiguous cache row r is slot r; over a paged fp16 one the block table
// says where a row's cache lives, so there the decoding slots replay the
// graph and the chunks run as a prefill of their own rows only
// (stepChunksApart). A paged quantized cache's hot ring is a row's own. The
// step's tokens are uploaded every time, so a slot's input never depends on
// what an earlier step left in the device buffers.
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
  if (slotSampling.size() != config.maxBatch)
    slotSampling.assign(config.maxBatch, deviceSampling(SamplingParams(), 0));
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
  slotSampling[slot] = params;
  slotLengths[slot] = 0;
  slotLive[slot] = true;
  releaseSlot(slot);
}

std::vector<int32_t> Session::step(const std::vector<StepInput> &inputs) {
  Impl &s = *state;
  const format::RuntimeConfig &config = s.config;
  const uint32_t maxBatch = config.maxBatch;
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
  if (!decode && s.paged() && !config.kvCache.coldBits) {
    std::vector<int32_t> next = s.stepChunksApart(inputs);
    for (const StepInput &input : inputs)
      s.slotLengths[input.slot] += static_cast<uint32_t>(input.tokens.size());
    return next;
  }
  uint32_t seq = 1;
  for (const StepInput &input : inputs)
    seq = std::max<uint32_t>(seq, static_cast<uint32_t>(input.tokens.size()));
  // The decode graph of a bucket reads the bucket's rows; a prefill chunk
  // the rows of the highest slot given.
  const uint32_t rows = decode ? s.bucketFor(batch) : batch;
  std::vector<int32_t> ids(uint64_t(rows) * seq, 0);
  std::vector<int32_t> stepLengths(maxBatch, 0);
  for (const StepInput &input : inputs) {
    std::copy(input.tokens.begin(), input.tokens.end(),
              ids.begin() + uint64_t(input.slot) * seq);
    stepLengths[input.slot] = static_cast<int32_t>(input.tokens.size());
  }
  checkCuda(cudaMemcpyAsync(s.tokenIds, ids.data(), ids.size() * 4,
                            cudaMemcpyHostToDevice, s.stream),
            "uploading the step's tokens");
  checkCuda(cudaMemcpyAsync(s.stepLengths, stepLengths.data(), maxBatch * 4,
                            cudaMemcpyHostToDevice, s.stream),
            "uploading step lengths");
  s.uploadTable();
  if (decode) {
    s.decodeStep(rows);
  } else {
    s.run(s.prepare(s.prefillProgram, rows, seq));
    s.stepTail(rows, true);
  }
  // The uploads above are from pageable memory, and the sampled tokens are
  // needed now.
  checkCuda(cudaStreamSynchronize(s.stream), "running a step");

  std::vector<int32_t> next;
  next.reserve(inputs.size());
  for (const StepInput &input : inputs) {
    s.slotLengths[input.slot] += static_cast<uint32_t>(input.tokens.size());
    next.push_back(s.hostTokens[input.slot]);
  }
  return next;
}

std::vector<int32_t>
Session::Impl::stepChunksApart(const std::vector<StepInput> &inputs) {
  const uint32_t maxBatch = config.maxBatch;
  std::vector<int32_t> next(inputs.size(), 0);
  std::vector<size_t> decoding, chunks;
  uint32_t highestDecoding = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].tokens.size() == 1) {
      decoding.push_back(i);
      highestDecoding = std::max(highestDecoding, inputs[i].slot);
    } else {
      chunks.push_back(i);
    }
  }
  auto upload = [&](void *to, const void *from, uint64_t bytes,
                    const char *what) {
    checkCuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream),
              what);
  };

  // The decoding slots: the bucket's graph, the chunks' slots at length 0.
  if (!decoding.empty()) {
    const uint32_t bucket = bucketFor(highestDecoding + 1);
    std::vector<int32_t> ids(bucket, 0), lengths(maxBatch, 0);
    for (size_t i : decoding) {
      ids[inputs[i].slot] = inputs[i].tokens[0];
      lengths[inputs[i].slot] = 1;
    }
    upload(tokenIds, ids.data(), ids.size() * 4, "uploading the step's tokens");
    upload(stepLengths, lengths.data(), maxBatch * 4, "uploading step lengths");
    decodeStep(bucket);
    checkCuda(cudaStreamSynchronize(stream), "running a decode step");
    for (size_t i : decoding)
      next[i] = hostTokens[inputs[i].slot];
  }

  // The chunks: row r of one prefill is the slot of chunks[r], with that
  // slot's length, sampling parameters and block table row; the slots'
  // own rows are put back after it.
  const uint32_t rows = static_cast<uint32_t>(chunks.size());
  uint32_t seq = 0;
  for (size_t i : chunks)
    seq = std::max<uint32_t>(seq, uint32_t(inputs[i].tokens.size()));
  const std::vector<int32_t> &table = pages->table();
  const uint64_t tableRow = table.size() / maxBatch;
  std::vector<int32_t> ids(uint64_t(rows) * seq, 0), lengths(maxBatch, 0),
      past(rows), rowTable(rows * tableRow);
  std::vector<runtime::DeviceSamplingParams> sampling(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    const StepInput &input = inputs[chunks[r]];
    std::copy(input.tokens.begin(), input.tokens.end(),
              ids.begin() + uint64_t(r) * seq);
    lengths[r] = static_cast<int32_t>(input.tokens.size());
    past[r] = static_cast<int32_t>(slotLengths[input.slot]);
    sampling[r] = slotSampling[input.slot];
    std::copy_n(table.begin() + input.slot * tableRow, tableRow,
                rowTable.begin() + r * tableRow);
  }
  upload(tokenIds, ids.data(), ids.size() * 4, "uploading the step's tokens");
  upload(stepLengths, lengths.data(), maxBatch * 4, "uploading step lengths");
  upload(pastLengths, past.data(), rows * 4, "uploading chunk lengths");
  upload(samplingParams, sampling.data(), rows * sizeof(sampling[0]),
         "uploading chunk sampling parameters");
  upload(deviceTable, rowTable.data(), rowTable.size() * 4,
         "uploading chunk block table rows");
  run(prepare(prefillProgram, rows, seq));
  stepTail(rows, true);
  checkCuda(cudaStreamSynchronize(stream), "running a prefill chunk");
  for (uint32_t r = 0; r < rows; ++r)
    next[chunks[r]] = hostTokens[r];

  // Every slot's own state again (the lengths as they are after the step).
  std::vector<int32_t> own(maxBatch);
  for (uint32_t slot = 0; slot < maxBatch; ++slot)
    own[slot] = static_cast<int32_t>(slotLengths[slot]);
  for (const StepInput &input : inputs)
    own[input.slot] += static_cast<int32_t>(input.tokens.size());
  upload(pastLengths, own.data(), maxBatch * 4, "restoring slot lengths");
  upload(samplingParams, slotSampling.data(),
         maxBatch * sizeof(slotSampling[0]), "restoring sampling parameters");
  upload(deviceTable, table.data(), table.size() * 4,
         "restoring the KV block table");
  // The uploads above are from pageable memory that ends with this call.
  checkCuda(cudaStreamSynchronize(stream), "restoring slot state");
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
