//===- BlockAllocator.h - The blocks of a paged KV cache --------*- C++ -*-===//
//
// Host-side bookkeeping of a paged KV cache (no CUDA, so that it is tested
// on the CPU): the block table (`table[seq * maxBlocksPerSeq + i]` is the
// pool block holding rows [i * B, (i + 1) * B) of sequence seq, -1 for
// none), the free blocks, and a reference count per block. A block is held
// by the sequence that wrote it and by the prefix ids (prefix caching)
// that name it; it is free when nobody holds it. Shared by the GPU session
// and the CPU reference server (which keeps the same accounting over its
// own storage), so both run out of blocks alike.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SRC_BLOCKALLOCATOR_H
#define SITS_RUNTIME_SRC_BLOCKALLOCATOR_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sits {
namespace runtime {

class BlockAllocator {
public:
  BlockAllocator(uint32_t sequences, uint32_t maxBlocksPerSeq, uint32_t blocks,
                 uint32_t blockTokens);

  /// Every block free, no prefix id naming one (the ids stay).
  void reset();
  /// Gives sequence `seq`'s blocks back.
  void release(uint32_t seq);
  /// Blocks for `rows` rows of `seq` (it keeps those it has). With none
  /// free, a block only a prefix id holds is taken back (the id then names
  /// none). False when the pool has no block left: the blocks taken so far
  /// stay with `seq`.
  bool reserve(uint32_t seq, uint64_t rows);
  /// `count` prefix ids, none naming a block (those named before are
  /// dropped).
  void setPrefixIds(uint32_t count);
  /// Prefix id ids[i] names block firstBlock + i of `seq`, which must hold
  /// it, dropping what the id named before.
  void share(uint32_t seq, uint32_t firstBlock,
             const std::vector<uint32_t> &ids);
  /// `seq` starts over holding the blocks the ids name, in order. False,
  /// and `seq` empty, when an id names none.
  bool load(uint32_t seq, const std::vector<uint32_t> &ids);
  /// The same, but blocks copyFrom, copyFrom + 1, ... are new blocks of
  /// `seq`'s own (a quantized cache writes rows of them again), and
  /// `copies` gets a (named block, new block) pair for each, whose contents
  /// the caller copies before the next step. False, and `seq` empty, when
  /// an id names none or the pool has too few blocks.
  bool load(uint32_t seq, const std::vector<uint32_t> &ids, uint32_t copyFrom,
            std::vector<std::pair<int32_t, int32_t>> *copies);

  const std::vector<int32_t> &table() const { return blockTable; }
  /// Whether the table changed since the last call.
  bool takeChanged();
  uint32_t freeBlocks() const { return uint32_t(freeList.size()); }
  /// Blocks a sequence can get now: the free ones and those only a prefix
  /// id holds (reserve takes them back), less those the ids in `keep` name
  /// (a sequence about to load them will hold them).
  uint32_t availableBlocks(const std::vector<uint32_t> &keep = {}) const;
  uint32_t totalBlocks() const { return uint32_t(refs.size()); }
  uint32_t tokensPerBlock() const { return blockTokens; }
  /// KVCacheFull's message: no block left for `rows` rows of `seq` (the
  /// caller adds what to do about it).
  std::string fullMessage(uint32_t seq, uint64_t rows) const;
  uint32_t blocksOf(uint32_t seq) const { return held[seq]; }
  int32_t prefixBlock(uint32_t id) const { return prefix[id]; }
  uint32_t references(int32_t block) const { return refs[block]; }

private:
  void unref(int32_t block);
  /// A block only a prefix id holds, taken from it; -1 when none.
  int32_t reclaim();
  /// A free block, else a reclaimed one; -1 when there is neither.
  int32_t takeBlock();

  uint32_t maxBlocks, blockTokens;
  std::vector<int32_t> blockTable;
  std::vector<uint32_t> held;
  std::vector<uint32_t> refs;
  std::vector<int32_t> freeList; ///< taken from the back
  std::vector<int32_t> prefix;   ///< prefix id -> block, -1: none
  uint32_t reclaimCursor = 0;
  bool changed = true;
};

/// Prefix caching over a quantized paged cache: which rows of a loaded
/// prefix the sequence that loads it writes or reads as FP16 again. A
/// sequence resuming at `position` P quantizes token t (values, per-token
/// keys) at query position t + hotWindow, and a block of per-channel keys
/// at its last token's + hotWindow; a query p reads value t hot while
/// p - t < hotWindow, key t while p - last(t) < hotWindow. So every token
/// from firstRewritten(P) = floor((P - hotWindow) / channelBlock) *
/// channelBlock on (0 when P <= hotWindow) is one it quantizes or reads in
/// FP16 itself: those need their FP16 rows in its hot ring, and the blocks
/// holding them must be its own (it writes their cold rows). Every token
/// below is already cold, final, in the sequence that saved the prefix
/// (whose length was at least P), so those blocks are shared as they are.
struct QuantPrefixRule {
  uint32_t blockTokens = 0, hotWindow = 0, channelBlock = 1;
  uint64_t firstRewritten(uint64_t position) const {
    if (position <= hotWindow)
      return 0;
    return (position - hotWindow) / channelBlock * channelBlock;
  }
  /// Blocks of a `blocks`-block prefix that stay shared; the rest are
  /// copied into the loading sequence's own blocks.
  uint32_t sharedBlocks(uint32_t blocks) const {
    return uint32_t(firstRewritten(uint64_t(blocks) * blockTokens) /
                    blockTokens);
  }
};

} // namespace runtime
} // namespace sits

#endif // SITS_RUNTIME_SRC_BLOCKALLOCATOR_H
