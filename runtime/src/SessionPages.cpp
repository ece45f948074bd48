//===- SessionPages.cpp - The blocks of a paged KV cache ------------------===//
//
// An engine compiled with a paged KV cache (sitsc --kv-layout=paged) keeps
// each layer's keys and values in a pool of fixed-size blocks, and its
// kernels find row r of sequence b through the block table,
// `table[b * max_blocks + r / block_tokens]` (docs/engine-format.md). The
// session hands blocks out as sequences grow (generate reserves a request's
// rows up front; Session::step the rows of each step) and takes them back
// when a slot restarts, so the memory follows the tokens in use. The table
// is a device buffer the programs and the captured decode graphs read: it
// is uploaded, when it changed, before the launch that needs it.
//
// Prefix caching shares blocks instead of copying them: a prefix id names
// a pool block, and a slot that loads a cached prefix points its first
// table entries at those blocks. Only full prompt blocks are shared, and
// nothing writes a row below a sequence's length again, so no shared block
// is ever written (no copy-on-write). A block is reference-counted by the
// slots and prefix ids that name it.
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/SessionImpl.h"

namespace sits {

using runtime::checkCuda;

namespace {

void unref(PagedBlocks &p, int32_t block) {
  if (block >= 0 && --p.refs[block] == 0)
    p.freeList.push_back(block);
}

} // namespace

void Session::Impl::resetPages() {
  if (!paged())
    return;
  const format::KVCacheConfig &kv = config.kvCache;
  PagedBlocks &p = pages;
  p.table.assign(uint64_t(kv.maxBatch) * kv.maxBlocksPerSeq(), -1);
  p.held.assign(kv.maxBatch, 0);
  p.refs.assign(kv.blocks, 0);
  p.freeList.resize(kv.blocks);
  // Block 0 is handed out first.
  for (uint32_t i = 0; i < kv.blocks; ++i)
    p.freeList[i] = static_cast<int32_t>(kv.blocks - 1 - i);
  p.prefix.assign(p.prefix.size(), -1);
  p.dirty = true;
}

void Session::Impl::releaseSlot(uint32_t slot) {
  if (!paged())
    return;
  if (pages.table.empty())
    resetPages();
  PagedBlocks &p = pages;
  int32_t *row =
      p.table.data() + uint64_t(slot) * config.kvCache.maxBlocksPerSeq();
  for (uint32_t i = 0; i < p.held[slot]; ++i) {
    unref(p, row[i]);
    row[i] = -1;
  }
  p.held[slot] = 0;
  p.dirty = true;
}

void Session::Impl::reserveRows(uint32_t slot, uint64_t rows) {
  if (!paged())
    return;
  if (pages.table.empty())
    resetPages();
  const format::KVCacheConfig &kv = config.kvCache;
  PagedBlocks &p = pages;
  const uint64_t needed = (rows + kv.blockTokens - 1) / kv.blockTokens;
  int32_t *row = p.table.data() + uint64_t(slot) * kv.maxBlocksPerSeq();
  for (; p.held[slot] < needed; ++p.held[slot]) {
    if (p.freeList.empty())
      throw Error(ErrorCode::KVCacheFull,
                  "KV cache full: the paged cache's pool of " +
                      std::to_string(kv.blocks) + " blocks of " +
                      std::to_string(kv.blockTokens) +
                      " tokens has none free for slot " + std::to_string(slot) +
                      " (" + std::to_string(rows) +
                      " tokens); finish or restart a sequence, or compile "
                      "with a larger --kv-pool-blocks");
    row[p.held[slot]] = p.freeList.back();
    p.refs[p.freeList.back()] = 1;
    p.freeList.pop_back();
    p.dirty = true;
  }
}

void Session::Impl::uploadTable() {
  if (!paged() || !pages.dirty)
    return;
  // Pageable memory: staged before the call returns, ordered before the
  // next launch on the stream.
  checkCuda(cudaMemcpyAsync(pages.deviceTable, pages.table.data(),
                            pages.table.size() * 4, cudaMemcpyHostToDevice,
                            stream),
            "uploading the KV block table");
  pages.dirty = false;
}

void Session::Impl::allocatePrefixIds(uint32_t blockTokens, uint32_t ids) {
  const format::KVCacheConfig &kv = config.kvCache;
  if (blockTokens != kv.blockTokens)
    throw Error(ErrorCode::InvalidArgument,
                "prefix cache blocks of " + std::to_string(blockTokens) +
                    " tokens: this engine's paged KV cache shares its own "
                    "blocks of " +
                    std::to_string(kv.blockTokens) + " tokens");
  if (pages.table.empty())
    resetPages();
  for (int32_t block : pages.prefix)
    unref(pages, block);
  pages.prefix.assign(ids, -1);
}

void Session::Impl::sharePrefix(uint32_t slot, uint32_t firstBlock,
                                const std::vector<uint32_t> &ids) {
  PagedBlocks &p = pages;
  const int32_t *row =
      p.table.data() + uint64_t(slot) * config.kvCache.maxBlocksPerSeq();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t block = row[firstBlock + i];
    ++p.refs[block]; // before the unref: the id may name it already
    unref(p, p.prefix[ids[i]]);
    p.prefix[ids[i]] = block;
  }
}

void Session::Impl::loadPrefix(uint32_t slot,
                               const std::vector<uint32_t> &ids) {
  PagedBlocks &p = pages;
  for (uint32_t id : ids)
    if (p.prefix[id] < 0)
      throw Error(ErrorCode::InvalidArgument,
                  "prefix block " + std::to_string(id) +
                      " was never saved: it names no KV block");
  releaseSlot(slot);
  int32_t *row =
      p.table.data() + uint64_t(slot) * config.kvCache.maxBlocksPerSeq();
  for (size_t i = 0; i < ids.size(); ++i) {
    row[i] = p.prefix[ids[i]];
    ++p.refs[row[i]];
  }
  p.held[slot] = static_cast<uint32_t>(ids.size());
  p.dirty = true;
}

} // namespace sits
