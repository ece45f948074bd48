//===- Backend.h - The step interface the serving scheduler drives -*- C++
//-*-===//
//
// A backend holds `slots()` sequences' KV caches and runs one step over any
// subset of them: each fed slot gets its tokens (a prefill chunk of a newly
// admitted request, or the token sampled for it last step) at its position
// (the tokens already in its cache; 0 starts a new sequence there, dropping
// what the slot held), and comes back with the next token sampled with that
// slot's own parameters. Slots not fed keep their caches untouched. The
// scheduler (Scheduler.h) owns the backend and calls it from one thread.
//
// Prefix caching (optional): a backend may keep a pool of KV blocks beside
// its slots. Block i of a sequence is its tokens [i * B, (i + 1) * B), B =
// cacheBlockTokens(), with their keys and values in every layer. The
// scheduler saves a prefilled prompt's full blocks into the pool
// (saveBlocks) and starts a later request with the same prompt prefix from
// copies of them (loadBlocks), then prefills only the rest. Copies are
// exact, so the tokens are those of a full prefill; which block holds what
// is the scheduler's business (PrefixCache.h). A backend whose KV cache is
// itself in blocks (a paged engine: sharedBlockTokens() > 0) shares them
// instead: saving makes a pool id name the slot's block, loading points
// the slot at the named blocks; nothing is copied.
//
// Such a cache is also a bounded pool (kvPoolBlocks() > 0) that slots take
// blocks from as they grow: the scheduler then admits a request only when
// the blocks it needs are left (kvAvailableBlocks), and gives a finished
// request's blocks back at once (release).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_BACKEND_H
#define SITS_RUNTIME_SERVE_BACKEND_H

#include "sits/Runtime.h"

#include <cstdint>
#include <vector>

namespace sits::serve {

/// What one slot gets in a step.
struct SlotStep {
  uint32_t slot = 0;
  /// Tokens already in the slot's cache; 0 resets the slot.
  uint32_t position = 0;
  /// At least one token; position + tokens.size() <= maxSequenceLength().
  std::vector<int32_t> tokens;
  /// False for a prefill chunk that is not the prompt's last: no token is
  /// wanted after it.
  bool sample = true;
  SamplingParams sampling;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// Sequences held at once.
  virtual uint32_t slots() const = 0;
  /// Tokens a slot's cache holds, prompt and generated together.
  virtual uint32_t maxSequenceLength() const = 0;
  /// Tokens one slot may be fed in a step (an engine's prefill chunk); 0:
  /// no limit.
  virtual uint32_t maxStepTokens() const { return 0; }
  /// Runs one step; returns one entry per entry of `steps`: the sampled
  /// token, or -1 where `sample` is false. Throws sits::Error on failure
  /// (the slots fed in a failed step must be restarted at position 0).
  virtual std::vector<int32_t> step(const std::vector<SlotStep> &steps) = 0;

  /// The sequence in `slot` ended: a backend whose cache is a pool of
  /// blocks takes the slot's back (those a pool id names stay). The slot's
  /// next step starts at position 0. Throws sits::Error on failure.
  virtual void release(uint32_t slot) { (void)slot; }
  /// Blocks of sharedBlockTokens() tokens in the KV cache's pool, which
  /// every slot's sequence takes its blocks from; 0 when each slot holds
  /// its whole context (nothing to admit by).
  virtual uint32_t kvPoolBlocks() const { return 0; }
  /// Blocks of that pool a growing sequence can take now: the free ones and
  /// those only a prefix pool id holds (taken back when the pool runs out),
  /// less those the pool ids in `keep` name (a request about to load them).
  virtual uint32_t
  kvAvailableBlocks(const std::vector<uint32_t> &keep = {}) const {
    (void)keep;
    return 0;
  }

  /// Allocates the block pool: `blocks` blocks of `blockTokens` tokens
  /// (both >= 1). Throws sits::Error, naming the cause, when the backend
  /// cannot copy its cache blocks exactly (the default: no prefix caching)
  /// or has not the memory.
  virtual void allocateBlockPool(uint32_t blockTokens, uint32_t blocks) {
    (void)blockTokens, (void)blocks;
    throw Error(ErrorCode::InvalidArgument,
                "this backend does not support prefix caching");
  }
  /// Tokens per block; 0 while there is no pool.
  virtual uint32_t cacheBlockTokens() const { return 0; }
  /// Tokens per block of a KV cache stored in blocks, which prefix caching
  /// shares rather than copies (the pool's blocks must be these); 0: a
  /// cache whose blocks are copied.
  virtual uint32_t sharedBlockTokens() const { return 0; }
  /// Blocks in the pool (0: none).
  virtual uint32_t poolBlocks() const { return 0; }
  /// Copies blocks firstBlock, firstBlock + 1, ... of `slot`'s sequence
  /// into pool blocks poolIds[0], poolIds[1], ... (overwriting them). The
  /// slot must hold those tokens; its own cache is unchanged. Throws
  /// sits::Error on failure (the pool blocks are then unknown).
  virtual void saveBlocks(uint32_t slot, uint32_t firstBlock,
                          const std::vector<uint32_t> &poolIds) {
    (void)slot, (void)firstBlock, (void)poolIds;
    throw Error(ErrorCode::InvalidArgument, "this backend has no block pool");
  }
  /// Starts a new sequence in `slot` (dropping what it held) whose cache
  /// holds pool blocks poolIds, in order: poolIds.size() *
  /// cacheBlockTokens() tokens, the position of its next step. `sampling`
  /// becomes the slot's, as for a step at position 0. Throws sits::Error on
  /// failure (the slot must then restart at position 0).
  virtual void loadBlocks(uint32_t slot, const std::vector<uint32_t> &poolIds,
                          const SamplingParams &sampling) {
    (void)slot, (void)poolIds, (void)sampling;
    throw Error(ErrorCode::InvalidArgument, "this backend has no block pool");
  }
  /// How far the cached prefix `poolIds` (blocks 0, 1, ... of a prompt)
  /// loads: its leading `blocks`, of which the first `shared` are shared
  /// with the pool (a cache stored in blocks) and the rest copied into new
  /// blocks of the slot's. The default: all of them, all shared. A paged
  /// quantized cache loads only as far as it kept the FP16 rows the
  /// sequence needs again, and copies the blocks it writes again.
  struct PrefixLoad {
    uint32_t blocks = 0, shared = 0;
  };
  virtual PrefixLoad planPrefixLoad(const std::vector<uint32_t> &poolIds) {
    return {uint32_t(poolIds.size()), uint32_t(poolIds.size())};
  }
  /// Whether saveBlocks should also get the prompt blocks already cached
  /// (from block 0): a paged quantized cache keeps their newest FP16 rows
  /// again, so that the prefix loads as far as this prompt's did.
  virtual bool resavesCachedBlocks() const { return false; }
};

/// The token chosen from `logits` (`vocab` of them) with `params`: the first
/// maximum when greedy; otherwise a draw after temperature, top-k and top-p
/// whose randomness depends only on the seed and `tokenIndex`, the position
/// the drawn token takes in its sequence. The host-side sampler of CPU
/// backends: the GPU kernel's rules and random numbers, so both pick the
/// same token from the same logits.
int32_t sampleToken(const float *logits, uint32_t vocab,
                    const SamplingParams &params, uint64_t tokenIndex);

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_BACKEND_H
