//===- SessionPages.cpp - The blocks of a paged KV cache ------------------===//
//
// An engine compiled with a paged KV cache (sitsc --kv-layout=paged) keeps
// each layer's keys and values in a pool of fixed-size blocks, and its
// kernels find row r of sequence b through the block table,
// `table[b * max_blocks + r / block_tokens]` (docs/engine-format.md). The
// session hands blocks out as sequences grow (generate reserves a request's
// rows up front; Session::step the rows of each step) and takes them back
// when a slot restarts, so the memory follows the tokens in use; the
// bookkeeping is BlockAllocator's. The table is a device buffer the
// programs and the captured decode graphs read: it is uploaded, when it
// changed, before the launch that needs it.
//
// A server admits requests by the blocks left (kvBlocks) and gives a
// finished request's blocks back at once (releaseSlot).
//
// Prefix caching shares blocks instead of copying them: a prefix id names
// a pool block, and a slot that loads a cached prefix points its first
// table entries at those blocks. Only full prompt blocks are shared, and
// nothing writes a row below a sequence's length again, so no shared block
// is ever written (no copy-on-write). When a slot needs a block and none
// is free, one that only a prefix id holds is taken back: loading that id
// then fails, and the server prefills the prompt in full.
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/SessionImpl.h"

namespace sits {

using runtime::checkCuda;

void Session::Impl::resetPages() {
  if (pages)
    pages->reset();
}

void Session::Impl::releaseSlot(uint32_t slot) {
  if (pages)
    pages->release(slot);
}

void Session::Impl::poolFull(uint32_t slot, uint64_t rows) const {
  throw Error(ErrorCode::KVCacheFull,
              pages->fullMessage(slot, rows) +
                  "; finish or restart a sequence, or compile with a larger "
                  "--kv-pool-blocks");
}

void Session::Impl::reserveRows(uint32_t slot, uint64_t rows) {
  if (pages && !pages->reserve(slot, rows))
    poolFull(slot, rows);
}

void Session::Impl::uploadTable() {
  if (!pages || !pages->takeChanged())
    return;
  // Pageable memory: staged before the call returns, ordered before the
  // next launch on the stream.
  const std::vector<int32_t> &table = pages->table();
  checkCuda(cudaMemcpyAsync(deviceTable, table.data(), table.size() * 4,
                            cudaMemcpyHostToDevice, stream),
            "uploading the KV block table");
}

void Session::Impl::allocatePrefixIds(uint32_t blockTokens, uint32_t ids) {
  const format::KVCacheConfig &kv = config.kvCache;
  if (blockTokens != kv.blockTokens)
    throw Error(ErrorCode::InvalidArgument,
                "prefix cache blocks of " + std::to_string(blockTokens) +
                    " tokens: this engine's paged KV cache shares its own "
                    "blocks of " +
                    std::to_string(kv.blockTokens) + " tokens");
  pages->setPrefixIds(ids);
}

void Session::Impl::sharePrefix(uint32_t slot, uint32_t firstBlock,
                                const std::vector<uint32_t> &ids) {
  pages->share(slot, firstBlock, ids);
}

void Session::Impl::loadPrefix(uint32_t slot,
                               const std::vector<uint32_t> &ids) {
  if (!pages->load(slot, ids))
    throw Error(ErrorCode::InvalidArgument,
                "a prefix block names no KV block (never saved, or taken "
                "back for a sequence when the pool ran out)");
}

Session::KVBlocks Session::kvBlocks(const std::vector<uint32_t> &keep) const {
  const Impl &s = *state;
  KVBlocks counts;
  if (!s.pages)
    return counts;
  counts.blockTokens = s.pages->tokensPerBlock();
  counts.blocks = s.pages->totalBlocks();
  counts.available = s.pages->availableBlocks(keep);
  return counts;
}

void Session::releaseSlot(uint32_t slot) {
  Impl &s = *state;
  s.checkSlot(slot);
  s.ensureSlots();
  // Length 0 with an empty table row: the state of a slot never used,
  // which the kernels of a step that does not feed it leave alone.
  const int32_t zero = 0;
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
  checkCuda(cudaMemcpyAsync(s.pastLengths + slot, &zero, 4,
                            cudaMemcpyHostToDevice, s.stream),
            "resetting a slot's length");
  s.slotLengths[slot] = 0;
  s.slotLive[slot] = false;
  s.releaseSlot(slot);
}

} // namespace sits
