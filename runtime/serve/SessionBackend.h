//===- SessionBackend.h - The serving backend over a Session ----*- C++ -*-===//
//
// serve::Backend over a sits::Session's slots (sits-serve, and the GPU
// tests of the scheduler): a step is Session::step, prefix caching the
// session's block pool, and a paged KV cache's blocks are what requests
// are admitted by. Needs the CUDA runtime library (SitsRuntime), unlike the
// rest of runtime/serve.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_SESSIONBACKEND_H
#define SITS_RUNTIME_SERVE_SESSIONBACKEND_H

#include "Backend.h"

#include "sits/Runtime.h"

namespace sits::serve {

class SessionBackend : public Backend {
public:
  /// `session` must outlive the backend.
  explicit SessionBackend(Session &session) : session(session) {}

  uint32_t slots() const override;
  uint32_t maxSequenceLength() const override;
  uint32_t maxStepTokens() const override;
  std::vector<int32_t> step(const std::vector<SlotStep> &steps) override;
  void release(uint32_t slot) override { session.releaseSlot(slot); }
  uint32_t kvPoolBlocks() const override { return session.kvBlocks().blocks; }
  uint32_t kvAvailableBlocks(const std::vector<uint32_t> &keep) const override {
    return session.kvBlocks(keep).available;
  }

  // Prefix caching: the session's block pool (refused for contiguous
  // quantized KV caches, with the reason).
  void allocateBlockPool(uint32_t blockTokens, uint32_t blocks) override {
    session.allocateBlockPool(blockTokens, blocks);
  }
  uint32_t cacheBlockTokens() const override {
    return session.blockPoolTokens();
  }
  uint32_t sharedBlockTokens() const override {
    return session.kvBlocks().blockTokens;
  }
  uint32_t poolBlocks() const override { return session.blockPoolBlocks(); }
  void saveBlocks(uint32_t slot, uint32_t firstBlock,
                  const std::vector<uint32_t> &poolIds) override {
    session.saveBlocks(slot, firstBlock, poolIds);
  }
  PrefixLoad planPrefixLoad(const std::vector<uint32_t> &poolIds) override {
    const Session::PrefixLoad load = session.planPrefixLoad(poolIds);
    return {load.blocks, load.shared};
  }
  bool resavesCachedBlocks() const override {
    const format::KVCacheConfig &kv = session.engine()->config().kvCache;
    return kv.paged() && kv.coldBits;
  }
  void loadBlocks(uint32_t slot, const std::vector<uint32_t> &poolIds,
                  const SamplingParams &sampling) override {
    session.loadBlocks(slot, poolIds, sampling);
  }

private:
  Session &session;
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_SESSIONBACKEND_H
