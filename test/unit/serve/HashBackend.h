//===- HashBackend.h - A deterministic test backend -------------*- C++ -*-===//
//
// The backend the scheduler tests run over checks what the scheduler feeds
// it: each slot's next token is a hash of that slot's whole sequence
// (letters a..z of a byte vocabulary), so a request's tokens depend on its
// own prompt only, unless the scheduler mixes sequences or positions. With
// usePages its cache is a paged one, accounted by the runtime's
// BlockAllocator as a GPU session's is.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_SERVE_HASHBACKEND_H
#define SITS_TEST_UNIT_SERVE_HASHBACKEND_H

#include "PagedBackend.h"
#include "Scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace sits::serve::test {

class HashBackend : public PagedBackend {
public:
  using PagedBackend::pages; // the tests read the pool
  HashBackend(uint32_t slots, uint32_t maxLength)
      : slotCount(slots), maxLength(maxLength), sequences(slots) {}
  uint32_t slots() const override { return slotCount; }
  uint32_t maxSequenceLength() const override { return maxLength; }
  uint32_t maxStepTokens() const override { return stepTokenLimit; }

  static int32_t next(const std::vector<int32_t> &sequence) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t token : sequence)
      h = (h ^ uint64_t(token)) * 1099511628211ull;
    return 'a' + int32_t(h % 26);
  }

  std::vector<int32_t> step(const std::vector<SlotStep> &steps) override {
    if (failAtStep && ++stepCount == failAtStep)
      throw Error(ErrorCode::Cuda, "test failure");
    // A paged cache: every slot's new rows get blocks first, as a session's.
    for (const SlotStep &step : steps) {
      if (!pages)
        break;
      if (step.position == 0)
        pages->release(step.slot);
      if (!pages->reserve(step.slot, step.position + step.tokens.size()))
        throw Error(
            ErrorCode::KVCacheFull,
            pages->fullMessage(step.slot, step.position + step.tokens.size()));
    }
    log.push_back(steps);
    std::vector<int32_t> out;
    for (const SlotStep &step : steps) {
      std::vector<int32_t> &sequence = sequences.at(step.slot);
      if (step.position == 0)
        sequence.clear();
      EXPECT_EQ(step.position, sequence.size()) << "slot " << step.slot;
      if (stepTokenLimit)
        EXPECT_LE(step.tokens.size(), stepTokenLimit) << "slot " << step.slot;
      EXPECT_LE(step.position + step.tokens.size(), maxLength);
      sequence.insert(sequence.end(), step.tokens.begin(), step.tokens.end());
      out.push_back(step.sample ? next(sequence) : -1);
    }
    return out;
  }

  // A paged KV cache: blocks of `tokens` from a pool of `blocks`, kept by
  // the runtime's BlockAllocator (prefix pool ids then share blocks).
  void usePages(uint32_t tokens, uint32_t blocks) {
    pages = std::make_unique<runtime::BlockAllocator>(
        slotCount, (maxLength + tokens - 1) / tokens, blocks, tokens);
  }
  void release(uint32_t slot) override {
    ++releases;
    if (pages)
      pages->release(slot);
  }

  // A block pool of token copies: a loaded block's tokens enter the hash
  // as if prefilled, so a wrong block or offset changes the tokens.
  void allocateBlockPool(uint32_t tokens, uint32_t blocks) override {
    blockTokens = tokens;
    pool.assign(blocks, {});
    if (pages)
      pages->setPrefixIds(blocks);
  }
  uint32_t cacheBlockTokens() const override { return blockTokens; }
  uint32_t poolBlocks() const override { return uint32_t(pool.size()); }
  void saveBlocks(uint32_t slot, uint32_t firstBlock,
                  const std::vector<uint32_t> &poolIds) override {
    if (failSaves)
      throw Error(ErrorCode::Cuda, "test save failure");
    const std::vector<int32_t> &sequence = sequences.at(slot);
    for (size_t i = 0; i < poolIds.size(); ++i) {
      size_t first = (firstBlock + i) * blockTokens;
      EXPECT_LE(first + blockTokens, sequence.size());
      pool.at(poolIds[i])
          .assign(sequence.begin() + first,
                  sequence.begin() + first + blockTokens);
    }
    if (pages)
      pages->share(slot, firstBlock, poolIds);
    ++saves;
    lastSave = {firstBlock, uint32_t(poolIds.size())};
  }
  // A backend that loads a prefix only so far (as a paged quantized cache
  // whose FP16 rows were not kept) and resaves cached blocks.
  PrefixLoad planPrefixLoad(const std::vector<uint32_t> &poolIds) override {
    const uint32_t n = std::min(uint32_t(poolIds.size()), loadLimit);
    return {n, n};
  }
  bool resavesCachedBlocks() const override { return resaves; }
  void loadBlocks(uint32_t slot, const std::vector<uint32_t> &poolIds,
                  const SamplingParams &) override {
    if (failLoads)
      throw Error(ErrorCode::Cuda, "test load failure");
    std::vector<int32_t> &sequence = sequences.at(slot);
    sequence.clear();
    if (pages && !pages->load(slot, poolIds))
      throw Error(ErrorCode::InvalidArgument, "a pool id names no block");
    for (uint32_t id : poolIds) {
      EXPECT_EQ(pool.at(id).size(), blockTokens) << "an unsaved block";
      sequence.insert(sequence.end(), pool.at(id).begin(), pool.at(id).end());
    }
    ++loads;
  }

  uint32_t slotCount, maxLength;
  std::vector<std::vector<int32_t>> sequences;
  uint32_t blockTokens = 0;
  std::vector<std::vector<int32_t>> pool;
  bool failSaves = false, failLoads = false, resaves = false;
  uint32_t loadLimit = ~0u;
  std::pair<uint32_t, uint32_t> lastSave; ///< first block, blocks

  int saves = 0, loads = 0, releases = 0;
  std::vector<std::vector<SlotStep>> log;
  int failAtStep = 0, stepCount = 0;
  /// maxStepTokens(): tokens a slot may be fed in a step (0: any).
  uint32_t stepTokenLimit = 0;
};

/// What a request received, gathered from its events.
struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::Length;
  std::string error;
  int events = 0;
};

inline EventCallback collect(Outcome &outcome, int cancelAfter = -1) {
  return [&outcome, cancelAfter](const RequestEvent &event) {
    EXPECT_FALSE(outcome.finished) << "an event after the last";
    ++outcome.events;
    outcome.tokens.insert(outcome.tokens.end(), event.tokens.begin(),
                          event.tokens.end());
    outcome.text += event.text;
    outcome.finished = event.finished;
    outcome.reason = event.reason;
    outcome.error = event.error;
    return cancelAfter < 0 || int(outcome.tokens.size()) < cancelAfter;
  };
}

inline std::shared_ptr<const ModelTokenizer>
bytes(std::vector<int32_t> eos = {}) {
  return ModelTokenizer::bytes(256, std::move(eos));
}

inline Request request(std::vector<int32_t> prompt, uint32_t maxTokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.maxTokens = maxTokens;
  return r;
}

/// The tokens of one request run alone, computed from the hash directly.
inline std::vector<int32_t> alone(std::vector<int32_t> sequence,
                                  uint32_t count) {
  std::vector<int32_t> out;
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(HashBackend::next(sequence));
    sequence.push_back(out.back());
  }
  return out;
}

inline void drain(Scheduler &scheduler) {
  for (int i = 0; i < 10000 && scheduler.runOnce(); ++i) {
  }
  EXPECT_FALSE(scheduler.runOnce()) << "the scheduler does not settle";
}
inline std::vector<int32_t> letters(const std::string &text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

} // namespace sits::serve::test

#endif // SITS_TEST_UNIT_SERVE_HASHBACKEND_H
