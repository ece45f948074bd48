//===- PrefixCache.h - Which pool block holds which prompt prefix -*- C++
//-*-===//
//
// A radix tree over blocks of `blockTokens` tokens: a node is one block
// whose key is its tokens, so the path from the root to a node spells a
// prompt prefix of whole blocks, and the node names the backend's pool block
// that holds that block's KV (Backend.h). Blocks are reference-counted: a
// request holds the path it matched (and the blocks it adds) from its
// admission until its prompt's blocks are in the tree. When the pool is
// full, a new block takes the least recently used block that no request
// holds and that no longer prefix needs (a leaf); a referenced block is never
// evicted. The scheduler thread owns it (no locking).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_PREFIXCACHE_H
#define SITS_RUNTIME_SERVE_PREFIXCACHE_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace sits::serve {

class PrefixCache {
public:
  /// A pool of `blocks` blocks of `blockTokens` tokens (both >= 1; throws
  /// sits::Error otherwise).
  PrefixCache(uint32_t blockTokens, uint32_t blocks);

  uint32_t blockTokens() const { return tokensPerBlock; }
  uint32_t capacity() const { return uint32_t(nodes.size() - 1); }
  uint32_t usedBlocks() const {
    return capacity() - uint32_t(freeNodes.size());
  }
  uint32_t freeBlocks() const { return uint32_t(freeNodes.size()); }
  uint64_t evictions() const { return evicted; }

  /// The blocks a request holds, from the root: path[i] is block i.
  using Path = std::vector<uint32_t>;

  /// The longest cached prefix of `tokens` in whole blocks, at most
  /// `maxBlocks` of them; each block of it is referenced (until release)
  /// and marked used now.
  Path match(const std::vector<int32_t> &tokens, uint32_t maxBlocks);
  /// The pool block of each block of `path`.
  std::vector<uint32_t> poolIds(const Path &path) const;

  struct NewBlock {
    uint32_t index; ///< the block's index in the prompt
    uint32_t pool;  ///< the pool block to save it into
  };
  /// Extends `path` (a referenced prefix of `tokens`) over the next full
  /// blocks of `tokens`, up to `maxBlocks` blocks in all. A block already
  /// cached (another request put it there) joins the path; a new one takes
  /// a free pool block or evicts one, and is returned: its KV must be saved
  /// into that pool block. Stops early when every block is referenced.
  std::vector<NewBlock> extend(Path &path, const std::vector<int32_t> &tokens,
                               uint32_t maxBlocks);
  /// Removes path[from...], blocks that `extend` just added and whose KV
  /// could not be saved; they go back to the free blocks.
  void discard(Path &path, size_t from);
  /// Drops the references of `path` (the blocks stay cached) and empties it.
  void release(Path &path);

  /// Requests holding pool block `pool` (tests).
  uint32_t references(uint32_t pool) const { return nodes.at(pool + 1).refs; }
  /// Whether pool block `pool` holds a block (tests).
  bool cached(uint32_t pool) const { return nodes.at(pool + 1).live; }

private:
  /// Node 0 is the root (the empty prefix); node n > 0 owns pool block n - 1.
  struct Node {
    std::vector<int32_t> tokens;
    uint32_t parent = 0;
    std::map<std::vector<int32_t>, uint32_t> children;
    uint32_t refs = 0;
    uint64_t lastUse = 0;
    bool live = false;
  };
  void unlist(uint32_t id);
  void list(uint32_t id);
  void remove(uint32_t id);
  /// A free node, evicting one if need be; 0 when none can be had.
  uint32_t take();
  std::vector<int32_t> blockOf(const std::vector<int32_t> &tokens,
                               uint32_t index) const;

  uint32_t tokensPerBlock;
  std::vector<Node> nodes;
  std::vector<uint32_t> freeNodes;
  /// Unreferenced leaves, least recently used first.
  std::set<std::pair<uint64_t, uint32_t>> evictable;
  uint64_t tick = 0;
  uint64_t evicted = 0;
};

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_PREFIXCACHE_H
