//===- QuantPrefix.h - Prefix loads of a paged quantized cache --*- C++ -*-===//
//
// The copies sits-emulate's `prefix` mode makes, as the runtime's prefix
// cache makes them on the GPU (runtime/src/SessionQuantPages.cpp), over the
// host copies of the engine's key and value buffers.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_BACKENDS_CUDA_EMULATOR_QUANTPREFIX_H
#define SITS_BACKENDS_CUDA_EMULATOR_QUANTPREFIX_H

#include "sits/EngineFormat.h"

#include <cstring>

namespace sits::emulator {

/// Copies pool block `from`'s cold rows and scales to block `to`, every
/// layer, in `caches` (the key and the value buffer).
inline void copyColdBlock(char *const caches[2],
                          const format::KVCacheConfig &kv, int32_t from,
                          int32_t to) {
  const format::KVCacheConfig::QuantLayout q = kv.quantLayout(true);
  const uint64_t heads = kv.kvHeads, rows = kv.blockTokens;
  const uint64_t cold = heads * rows * kv.headDim * kv.coldBits / 8;
  const uint64_t groups = (kv.headDim + kv.groupSize - 1) / kv.groupSize;
  const uint64_t scales[2] = {
      kv.perChannelKeys ? heads * (rows / kv.channelBlock) * kv.headDim * 2
                        : heads * rows * groups * 2,
      heads * rows * groups * 2};
  for (int side = 0; side < 2; ++side)
    for (uint32_t layer = 0; layer < kv.layers; ++layer) {
      char *base = caches[side] + layer * q.layerBytes;
      std::memcpy(base + q.coldOffset + to * cold,
                  base + q.coldOffset + from * cold, cold);
      std::memcpy(base + q.scaleOffset + to * scales[side],
                  base + q.scaleOffset + from * scales[side], scales[side]);
    }
}

/// Copies the hot ring rows of tokens [first, end) of sequence `from` to
/// sequence `to`, every layer, kv head, K and V.
inline void copyRingRows(char *const caches[2], const format::KVCacheConfig &kv,
                         uint32_t from, uint32_t to, uint64_t first,
                         uint64_t end) {
  const uint64_t layerBytes = kv.quantLayout(true).layerBytes;
  const uint64_t row = uint64_t(kv.headDim) * format::dtypeBytes(kv.dtype);
  const uint64_t heads = kv.kvHeads, sequence = heads * kv.hotRows * row;
  for (int side = 0; side < 2; ++side)
    for (uint32_t layer = 0; layer < kv.layers; ++layer)
      for (uint64_t head = 0; head < heads; ++head)
        for (uint64_t t = first; t < end; ++t) {
          char *ring = caches[side] + layer * layerBytes +
                       head * kv.hotRows * row + (t % kv.hotRows) * row;
          std::memcpy(ring + to * sequence, ring + from * sequence, row);
        }
}

} // namespace sits::emulator

#endif // SITS_BACKENDS_CUDA_EMULATOR_QUANTPREFIX_H
