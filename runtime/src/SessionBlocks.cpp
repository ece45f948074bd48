//===- SessionBlocks.cpp - Prefix caching's block pool on the GPU ---------===//
//
// The server's prefix cache keeps whole blocks of prompt KV in a pool beside
// the session's cache and copies them into a slot instead of prefilling
// them again. The contiguous cache is [layer, batch, kv_head, seq,
// head_dim] for each of K and V (docs/engine-format.md), so one block of a
// slot in one layer is kv_heads runs of blockTokens rows, `capacity` rows
// apart: one 2D copy per layer and side, device to device, on the session's
// stream. A pool block is [layer, kv_head, blockTokens, head_dim] of K, and
// the same of V in the pool's second half. The bytes are copied as they
// are, so a loaded block is the very KV a prefill wrote.
//
// Contiguous quantized caches are refused: their rows live in a hot ring
// and in int8/int4 rows with scales written as tokens age out of the ring,
// so a block is not a fixed byte range of one buffer. A paged cache copies
// nothing: its blocks are shared (SessionPages.cpp), and the pool here is
// only prefix ids naming them; a paged quantized one keeps FP16 copies of
// the rows a loading sequence needs again (SessionQuantPages.cpp).
//
//===----------------------------------------------------------------------===//

#include "src/CudaCheck.h"
#include "src/SessionImpl.h"

namespace sits {

using format::BufferRole;
using runtime::checkCuda;

char *Session::Impl::cacheBuffer(BufferRole role) const {
  const auto &buffers = e.contents.buffers;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].role == role)
      return reinterpret_cast<char *>(addresses[i]);
  throw Error(ErrorCode::InvalidEngine, "the engine has no KV cache buffer");
}

namespace {

uint64_t rowBytes(const Session::Impl &s) {
  return uint64_t(s.config.kvCache.headDim) *
         format::dtypeBytes(s.config.kvCache.dtype);
}

/// Bytes of one side (K or V) of one pool block.
uint64_t sideBytes(const Session::Impl &s) {
  return uint64_t(s.config.kvCache.layers) * s.config.kvCache.kvHeads *
         s.poolBlockTokens * rowBytes(s);
}

void checkPoolIds(const Session::Impl &s, const std::vector<uint32_t> &ids) {
  if (s.poolBlockCount == 0)
    throw Error(ErrorCode::InvalidArgument,
                "the session has no block pool (allocateBlockPool)");
  for (uint32_t id : ids)
    if (id >= s.poolBlockCount)
      throw Error(ErrorCode::InvalidArgument,
                  "pool block " + std::to_string(id) +
                      " is outside the pool of " +
                      std::to_string(s.poolBlockCount));
}

/// Copies block `block` of `slot` to or from pool block `pool`, every
/// layer, K and V (enqueued on the session's stream).
void copyBlock(Session::Impl &s, uint32_t slot, uint32_t block, uint32_t pool,
               bool toPool) {
  const format::KVCacheConfig &kv = s.config.kvCache;
  const uint64_t row = rowBytes(s);
  const uint64_t run = uint64_t(s.poolBlockTokens) * row;
  const uint64_t headPitch = uint64_t(kv.capacity) * row;
  char *poolBase = static_cast<char *>(s.blockPool);
  const BufferRole roles[2] = {BufferRole::KeyCache, BufferRole::ValueCache};
  for (int side = 0; side < 2; ++side) {
    char *cache = s.cacheBuffer(roles[side]);
    char *poolBlock =
        poolBase + (uint64_t(side) * s.poolBlockCount + pool) * sideBytes(s);
    for (uint32_t layer = 0; layer < kv.layers; ++layer) {
      char *cacheRows =
          cache +
          ((uint64_t(layer) * kv.maxBatch + slot) * kv.kvHeads) * headPitch +
          uint64_t(block) * run;
      char *poolRows = poolBlock + uint64_t(layer) * kv.kvHeads * run;
      cudaError_t status =
          toPool ? cudaMemcpy2DAsync(poolRows, run, cacheRows, headPitch, run,
                                     kv.kvHeads, cudaMemcpyDeviceToDevice,
                                     s.stream)
                 : cudaMemcpy2DAsync(cacheRows, headPitch, poolRows, run, run,
                                     kv.kvHeads, cudaMemcpyDeviceToDevice,
                                     s.stream);
      checkCuda(status, toPool ? "saving a KV block to the pool"
                               : "loading a KV block from the pool");
    }
  }
}

} // namespace

void Session::allocateBlockPool(uint32_t blockTokens, uint32_t blocks) {
  Impl &s = *state;
  const format::KVCacheConfig &kv = s.config.kvCache;
  if (kv.coldBits != 0 && !s.paged())
    throw Error(ErrorCode::InvalidArgument,
                "prefix caching needs an unquantized or paged KV cache; this "
                "engine's is int" +
                    std::to_string(kv.coldBits) +
                    " and contiguous (its blocks are not copied exactly): "
                    "serve it without prefix caching, or compile it with "
                    "--kv-layout=paged");
  if (blockTokens == 0 || blocks == 0 || blockTokens >= kv.capacity)
    throw Error(
        ErrorCode::InvalidArgument,
        "prefix cache blocks of " + std::to_string(blockTokens) + " tokens (" +
            std::to_string(blocks) + " of them) do not fit the context of " +
            std::to_string(kv.capacity) + " tokens with a token to spare");
  if (s.paged()) {
    s.allocatePrefixIds(blockTokens, blocks);
    if (kv.coldBits)
      s.allocateHotCopies(blocks);
    s.poolBlockTokens = blockTokens;
    s.poolBlockCount = blocks;
    return;
  }
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
  if (s.blockPool) {
    checkCuda(cudaStreamSynchronize(s.stream), "finishing block copies");
    cudaFree(s.blockPool);
    s.blockPool = nullptr;
    s.poolBlockCount = 0;
  }
  s.poolBlockTokens = blockTokens;
  const uint64_t side = sideBytes(s);
  if (side > (uint64_t(1) << 62) / blocks)
    throw Error(ErrorCode::InvalidArgument,
                "a prefix cache of " + std::to_string(blocks) + " blocks of " +
                    std::to_string(blockTokens) + " tokens is too large");
  uint64_t bytes = 2 * side * blocks;
  const std::string what = "allocating the prefix cache's " +
                           std::to_string(blocks) + " blocks (" +
                           std::to_string(bytes >> 20) + " MiB) on the GPU";
  checkCuda(cudaMalloc(&s.blockPool, bytes), what.c_str());
  s.poolBlockCount = blocks;
}

uint32_t Session::blockPoolTokens() const {
  return state->poolBlockCount ? state->poolBlockTokens : 0;
}

uint32_t Session::blockPoolBlocks() const { return state->poolBlockCount; }

void Session::saveBlocks(uint32_t slot, uint32_t firstBlock,
                         const std::vector<uint32_t> &poolIds) {
  Impl &s = *state;
  s.ensureSlots();
  s.checkSlot(slot);
  checkPoolIds(s, poolIds);
  uint64_t end = (uint64_t(firstBlock) + poolIds.size()) * s.poolBlockTokens;
  if (!s.slotLive[slot] || end > s.slotLengths[slot])
    throw Error(ErrorCode::InvalidArgument,
                "slot " + std::to_string(slot) + " holds " +
                    std::to_string(s.slotLengths[slot]) + " tokens, not the " +
                    std::to_string(end) + " of the blocks to save");
  if (s.paged()) {
    s.sharePrefix(slot, firstBlock, poolIds);
    if (s.config.kvCache.coldBits) {
      checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
      s.saveHotRows(slot, firstBlock, poolIds);
      checkCuda(cudaStreamSynchronize(s.stream), "saving KV blocks");
    }
    return;
  }
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
  for (size_t i = 0; i < poolIds.size(); ++i)
    copyBlock(s, slot, firstBlock + uint32_t(i), poolIds[i], /*toPool=*/true);
  // Ordered before the next step on the same stream; synchronizing here
  // reports a failed copy at its cause.
  checkCuda(cudaStreamSynchronize(s.stream), "saving KV blocks");
}

void Session::loadBlocks(uint32_t slot, const std::vector<uint32_t> &poolIds,
                         const SamplingParams &sampling) {
  Impl &s = *state;
  s.ensureSlots();
  s.checkSlot(slot);
  checkPoolIds(s, poolIds);
  checkSamplingParams(sampling, s.tvcExactTop);
  const uint64_t tokens = uint64_t(poolIds.size()) * s.poolBlockTokens;
  if (tokens >= s.config.maxSeqLen)
    throw Error(ErrorCode::KVCacheFull,
                "KV cache full: " + std::to_string(tokens) +
                    " tokens of blocks leave no room in slot " +
                    std::to_string(slot));
  checkCuda(cudaSetDevice(s.e.device), "cudaSetDevice");
  s.startSequence(slot, sampling);
  s.slotLive[slot] = false; // until the copies are done
  if (s.paged() && s.config.kvCache.coldBits)
    s.loadQuantPrefix(slot, poolIds);
  else if (s.paged())
    s.loadPrefix(slot, poolIds); // the table is uploaded before the next step
  for (size_t i = 0; i < poolIds.size() && !s.paged(); ++i)
    copyBlock(s, slot, uint32_t(i), poolIds[i], /*toPool=*/false);
  const int32_t length = static_cast<int32_t>(tokens);
  checkCuda(cudaMemcpyAsync(s.pastLengths + slot, &length, 4,
                            cudaMemcpyHostToDevice, s.stream),
            "setting a slot's length");
  // `length` is pageable stack memory: wait for the upload.
  checkCuda(cudaStreamSynchronize(s.stream), "loading KV blocks");
  s.slotLengths[slot] = static_cast<uint32_t>(tokens);
  s.slotLive[slot] = true;
}

} // namespace sits
