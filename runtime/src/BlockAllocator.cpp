//===- BlockAllocator.cpp - The blocks of a paged KV cache ----------------===//

#include "src/BlockAllocator.h"

#include <algorithm>
#include <cstddef>

namespace sits {
namespace runtime {

BlockAllocator::BlockAllocator(uint32_t sequences, uint32_t maxBlocksPerSeq,
                               uint32_t blocks, uint32_t blockTokens)
    : maxBlocks(maxBlocksPerSeq), blockTokens(blockTokens),
      blockTable(uint64_t(sequences) * maxBlocksPerSeq, -1), held(sequences, 0),
      refs(blocks, 0) {
  reset();
}

void BlockAllocator::reset() {
  const uint32_t blocks = uint32_t(refs.size());
  blockTable.assign(blockTable.size(), -1);
  held.assign(held.size(), 0);
  refs.assign(blocks, 0);
  freeList.resize(blocks);
  for (uint32_t i = 0; i < blocks; ++i)
    freeList[i] = int32_t(blocks - 1 - i); // block 0 is handed out first
  prefix.assign(prefix.size(), -1);
  changed = true;
}

void BlockAllocator::unref(int32_t block) {
  if (block >= 0 && --refs[block] == 0)
    freeList.push_back(block);
}

void BlockAllocator::release(uint32_t seq) {
  int32_t *row = blockTable.data() + uint64_t(seq) * maxBlocks;
  for (uint32_t i = 0; i < held[seq]; ++i) {
    unref(row[i]);
    row[i] = -1;
  }
  changed |= held[seq] != 0;
  held[seq] = 0;
}

int32_t BlockAllocator::takeBlock() {
  if (freeList.empty())
    return reclaim();
  const int32_t block = freeList.back();
  freeList.pop_back();
  return block;
}

int32_t BlockAllocator::reclaim() {
  // From where the last search stopped, so that no id is always the one.
  for (size_t n = 0; n < prefix.size(); ++n) {
    const uint32_t id = uint32_t((reclaimCursor + n) % prefix.size());
    const int32_t block = prefix[id];
    if (block >= 0 && refs[block] == 1) {
      prefix[id] = -1;
      refs[block] = 0;
      reclaimCursor = id + 1;
      return block;
    }
  }
  return -1;
}

bool BlockAllocator::reserve(uint32_t seq, uint64_t rows) {
  const uint64_t needed = (rows + blockTokens - 1) / blockTokens;
  int32_t *row = blockTable.data() + uint64_t(seq) * maxBlocks;
  for (; held[seq] < needed; ++held[seq]) {
    if (held[seq] >= maxBlocks)
      return false; // past the capacity: the callers check it first
    const int32_t block = takeBlock();
    if (block < 0)
      return false;
    row[held[seq]] = block;
    refs[block] = 1;
    changed = true;
  }
  return true;
}

void BlockAllocator::setPrefixIds(uint32_t count) {
  for (int32_t block : prefix)
    unref(block);
  prefix.assign(count, -1);
  reclaimCursor = 0;
}

void BlockAllocator::share(uint32_t seq, uint32_t firstBlock,
                           const std::vector<uint32_t> &ids) {
  const int32_t *row = blockTable.data() + uint64_t(seq) * maxBlocks;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t block = row[firstBlock + i];
    ++refs[block]; // before the unref: the id may name it already
    unref(prefix[ids[i]]);
    prefix[ids[i]] = block;
  }
}

bool BlockAllocator::load(uint32_t seq, const std::vector<uint32_t> &ids) {
  release(seq);
  for (uint32_t id : ids)
    if (prefix[id] < 0)
      return false;
  int32_t *row = blockTable.data() + uint64_t(seq) * maxBlocks;
  for (size_t i = 0; i < ids.size(); ++i) {
    row[i] = prefix[ids[i]];
    ++refs[row[i]];
  }
  held[seq] = uint32_t(ids.size());
  changed = true;
  return true;
}

bool BlockAllocator::load(uint32_t seq, const std::vector<uint32_t> &ids,
                          uint32_t copyFrom,
                          std::vector<std::pair<int32_t, int32_t>> *copies) {
  copies->clear();
  if (!load(seq, ids))
    return false;
  // The named blocks are held by `seq` and their ids now, so taking new
  // blocks never takes one of them back.
  std::vector<int32_t> fresh;
  for (size_t i = copyFrom; i < ids.size(); ++i) {
    const int32_t block = takeBlock();
    if (block < 0) {
      for (int32_t taken : fresh)
        freeList.push_back(taken);
      release(seq);
      return false;
    }
    refs[block] = 1;
    fresh.push_back(block);
  }
  int32_t *row = blockTable.data() + uint64_t(seq) * maxBlocks;
  for (size_t i = copyFrom; i < ids.size(); ++i) {
    const int32_t block = fresh[i - copyFrom];
    copies->push_back({row[i], block});
    unref(row[i]); // still named by its id
    row[i] = block;
  }
  return true;
}

uint32_t
BlockAllocator::availableBlocks(const std::vector<uint32_t> &keep) const {
  uint32_t available = freeBlocks();
  for (uint32_t id = 0; id < prefix.size(); ++id)
    if (prefix[id] >= 0 && refs[prefix[id]] == 1 &&
        std::find(keep.begin(), keep.end(), id) == keep.end())
      ++available;
  return available;
}

std::string BlockAllocator::fullMessage(uint32_t seq, uint64_t rows) const {
  return "KV cache full: the paged cache's pool of " +
         std::to_string(totalBlocks()) + " blocks of " +
         std::to_string(blockTokens) + " tokens has none free for slot " +
         std::to_string(seq) + " (" + std::to_string(rows) + " tokens)";
}

bool BlockAllocator::takeChanged() {
  const bool was = changed;
  changed = false;
  return was;
}

} // namespace runtime
} // namespace sits
