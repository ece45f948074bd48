//===- SessionQuantPages.cpp - Prefix caching over a paged int8/int4 cache ===//
//
// A paged quantized cache keeps its int8/int4 cold rows and scales in the
// pool's blocks and each slot's newest FP16 rows in a hot ring of its own
// (docs/engine-format.md). Prefix caching shares the blocks, as for a plain
// paged cache, but a sequence that resumes at position P after loading a
// prefix still quantizes, and reads in FP16, the tokens from
// QuantPrefixRule::firstRewritten(P) on (BlockAllocator.h): their FP16 rows
// must be in its ring, and the blocks holding them must be its own, since
// it writes their cold rows again. So:
//
// - saving a block also keeps an FP16 copy of its rows when they are all
//   still in the slot's ring (a store of a few blocks' rows per slot,
//   reused round robin: a block whose copy was reused loses it);
// - a prefix loads only as far as its last blocks have FP16 copies
//   (planPrefixLoad; the server prefills the rest, the same tokens);
// - loading shares the blocks below the first rewritten token, copies the
//   others (cold rows and scales) into new blocks of the slot, and writes
//   the FP16 rows from firstRewritten(P) to P into the slot's ring.
//
// Every shared row is then cold and final in the sequence that saved it
// (its length was at least P), and the slot's own rows are those a full
// prefill would have written: the tokens are the same with the prefix
// cache on and off.
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/SessionImpl.h"

#include <algorithm>

namespace sits {

using format::BufferRole;
using runtime::checkCuda;

namespace {

runtime::QuantPrefixRule ruleOf(const format::KVCacheConfig &kv) {
  return {kv.blockTokens, kv.hotWindow, kv.channelBlock};
}

uint64_t hotRowBytes(const format::KVCacheConfig &kv) {
  return uint64_t(kv.headDim) * format::dtypeBytes(kv.dtype);
}

/// Bytes of one FP16 copy: [layer][K, V][kv_head][block_tokens][head_dim].
uint64_t hotEntryBytes(const format::KVCacheConfig &kv) {
  return uint64_t(kv.layers) * 2 * kv.kvHeads * kv.blockTokens *
         hotRowBytes(kv);
}

/// Copies rows [first, end) of `slot`'s hot ring to or from FP16 copy
/// `entry`, which holds block `block`'s rows (every layer, K and V).
void copyHotRows(Session::Impl &s, uint32_t slot, uint32_t entry,
                 uint32_t block, uint64_t first, uint64_t end, bool toRing) {
  const format::KVCacheConfig &kv = s.config.kvCache;
  const uint64_t row = hotRowBytes(kv), rows = kv.hotRows;
  const uint64_t layerBytes = kv.quantLayout(true).layerBytes;
  const uint64_t entryHead = uint64_t(kv.blockTokens) * row;
  char *store = static_cast<char *>(s.blockPool) + entry * hotEntryBytes(kv);
  const BufferRole roles[2] = {BufferRole::KeyCache, BufferRole::ValueCache};
  for (uint64_t t = first; t < end;) {
    // A run of rows contiguous in the ring (it may wrap).
    const uint64_t ringRow = t % rows;
    const uint64_t run = std::min(end - t, rows - ringRow);
    for (int side = 0; side < 2; ++side) {
      char *cache = s.cacheBuffer(roles[side]);
      for (uint32_t layer = 0; layer < kv.layers; ++layer) {
        char *ring = cache + layer * layerBytes +
                     (uint64_t(slot) * kv.kvHeads * rows + ringRow) * row;
        char *copy = store +
                     (uint64_t(layer) * 2 + side) * kv.kvHeads * entryHead +
                     (t - uint64_t(block) * kv.blockTokens) * row;
        cudaError_t status =
            toRing ? cudaMemcpy2DAsync(ring, rows * row, copy, entryHead,
                                       run * row, kv.kvHeads,
                                       cudaMemcpyDeviceToDevice, s.stream)
                   : cudaMemcpy2DAsync(copy, entryHead, ring, rows * row,
                                       run * row, kv.kvHeads,
                                       cudaMemcpyDeviceToDevice, s.stream);
        checkCuda(status, toRing ? "restoring a prefix's FP16 rows"
                                 : "keeping a prefix block's FP16 rows");
      }
    }
    t += run;
  }
}

/// Copies pool block `from`'s cold rows and scales to block `to`, every
/// layer, K and V.
void copyColdBlock(Session::Impl &s, int32_t from, int32_t to) {
  const format::KVCacheConfig &kv = s.config.kvCache;
  const format::KVCacheConfig::QuantLayout q = kv.quantLayout(true);
  const uint64_t heads = kv.kvHeads, b = kv.blockTokens;
  const uint64_t cold = heads * b * (uint64_t(kv.headDim) * kv.coldBits / 8);
  const uint64_t groups = (kv.headDim + kv.groupSize - 1) / kv.groupSize;
  const uint64_t tokenScales = heads * b * groups * 2;
  const uint64_t channelScales = heads * (b / kv.channelBlock) * kv.headDim * 2;
  const BufferRole roles[2] = {BufferRole::KeyCache, BufferRole::ValueCache};
  for (int side = 0; side < 2; ++side) {
    char *cache = s.cacheBuffer(roles[side]);
    const uint64_t scales =
        side == 0 && kv.perChannelKeys ? channelScales : tokenScales;
    for (uint32_t layer = 0; layer < kv.layers; ++layer) {
      char *base = cache + layer * q.layerBytes;
      for (auto [offset, bytes] :
           {std::pair{q.coldOffset, cold}, std::pair{q.scaleOffset, scales}})
        checkCuda(cudaMemcpyAsync(base + offset + uint64_t(to) * bytes,
                                  base + offset + uint64_t(from) * bytes, bytes,
                                  cudaMemcpyDeviceToDevice, s.stream),
                  "copying a prefix block a sequence writes again");
    }
  }
}

} // namespace

void Session::Impl::allocateHotCopies(uint32_t ids) {
  const format::KVCacheConfig &kv = config.kvCache;
  // Enough for every slot's ring and a block more each; a block whose copy
  // is reused loses it (its prefix then loads shorter).
  const uint32_t perSlot = (kv.hotRows + kv.blockTokens - 1) / kv.blockTokens;
  const uint32_t entries =
      std::min<uint64_t>(ids, uint64_t(kv.maxBatch) * (perSlot + 1) + 1);
  checkCuda(cudaSetDevice(e.device), "cudaSetDevice");
  if (blockPool) {
    checkCuda(cudaStreamSynchronize(stream), "finishing block copies");
    cudaFree(blockPool);
    blockPool = nullptr;
  }
  const uint64_t bytes = entries * hotEntryBytes(kv);
  const std::string what = "allocating the prefix cache's FP16 copies of " +
                           std::to_string(entries) + " blocks (" +
                           std::to_string(bytes >> 20) + " MiB) on the GPU";
  checkCuda(cudaMalloc(&blockPool, bytes), what.c_str());
  hotEntryOf.assign(ids, -1);
  hotOwner.assign(entries, -1);
  hotCursor = 0;
}

void Session::Impl::saveHotRows(uint32_t slot, uint32_t firstBlock,
                                const std::vector<uint32_t> &ids) {
  const format::KVCacheConfig &kv = config.kvCache;
  const uint64_t length = slotLengths[slot];
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t block = firstBlock + uint32_t(i);
    const uint64_t first = uint64_t(block) * kv.blockTokens;
    // Rows the ring no longer holds keep the copy the id had (the same
    // tokens' rows), if any.
    if (first + kv.hotRows < length)
      continue;
    int32_t entry = hotEntryOf[ids[i]];
    if (entry < 0 || hotOwner[entry] != int32_t(ids[i])) {
      entry = int32_t(hotCursor);
      hotCursor = (hotCursor + 1) % uint32_t(hotOwner.size());
      if (hotOwner[entry] >= 0)
        hotEntryOf[hotOwner[entry]] = -1;
      hotOwner[entry] = int32_t(ids[i]);
      hotEntryOf[ids[i]] = entry;
    }
    copyHotRows(*this, slot, uint32_t(entry), block, first,
                first + kv.blockTokens, /*toRing=*/false);
  }
}

Session::PrefixLoad
Session::Impl::planQuantPrefix(const std::vector<uint32_t> &ids) const {
  const runtime::QuantPrefixRule rule = ruleOf(config.kvCache);
  for (uint32_t n = uint32_t(ids.size()); n > 0; --n) {
    const uint32_t shared = rule.sharedBlocks(n);
    bool ok = true;
    for (uint32_t i = 0; i < n && ok; ++i)
      ok = pages->prefixBlock(ids[i]) >= 0 &&
           (i < shared || (hotEntryOf[ids[i]] >= 0 &&
                           hotOwner[hotEntryOf[ids[i]]] == int32_t(ids[i])));
    if (ok)
      return {n, shared};
  }
  return {};
}

void Session::Impl::loadQuantPrefix(uint32_t slot,
                                    const std::vector<uint32_t> &ids) {
  const format::KVCacheConfig &kv = config.kvCache;
  const PrefixLoad plan = planQuantPrefix(ids);
  if (plan.blocks != ids.size())
    throw Error(ErrorCode::InvalidArgument,
                "a quantized KV cache's prefix of " +
                    std::to_string(ids.size()) + " blocks loads only " +
                    std::to_string(plan.blocks) +
                    " (the FP16 rows of its last blocks were not kept; "
                    "Session::planPrefixLoad says how far it loads)");
  std::vector<std::pair<int32_t, int32_t>> copies;
  if (!pages->load(slot, ids, plan.shared, &copies))
    throw Error(ErrorCode::InvalidArgument,
                "a prefix block names no KV block, or the pool has too few "
                "blocks for the ones a quantized cache copies");
  for (const auto &[from, to] : copies)
    copyColdBlock(*this, from, to);
  const uint64_t position = uint64_t(ids.size()) * kv.blockTokens;
  const uint64_t first = ruleOf(kv).firstRewritten(position);
  for (uint32_t block = uint32_t(first / kv.blockTokens); block < ids.size();
       ++block)
    copyHotRows(*this, slot, uint32_t(hotEntryOf[ids[block]]), block,
                std::max<uint64_t>(first, uint64_t(block) * kv.blockTokens),
                uint64_t(block + 1) * kv.blockTokens, /*toRing=*/true);
}

Session::PrefixLoad
Session::planPrefixLoad(const std::vector<uint32_t> &poolIds) const {
  const Impl &s = *state;
  for (uint32_t id : poolIds)
    if (id >= s.poolBlockCount)
      return {};
  if (s.paged() && s.config.kvCache.coldBits)
    return s.planQuantPrefix(poolIds);
  const uint32_t n = uint32_t(poolIds.size());
  return {n, s.paged() ? n : 0};
}

} // namespace sits
