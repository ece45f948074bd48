//===- attention_decode_kvq.cuh - Split-K decode over a quantized cache ---===//
//
// attention_decode.cuh's split-K kernel over a quantized cache
// (kv_quant.cuh). A lane's 8 channels of a key or value come from the hot
// ring (16 bytes of FP16/BF16) while the token is in the hot window, else
// from the cold rows (8 bytes of int8 or 4 of int4, by cp.async into the
// same ring slot, with the 4 bytes that hold the row's per-token scale in
// bytes 8-11 of the slot) and are dequantized in registers with their f16
// scale (sits.dequantize: f32 scale times level), so the cache is read
// once, at its stored size, with no separate dequantization pass and no
// load waited for inside the loop over keys. Cold or hot is
// decided per key exactly as sits.attention's cold operands define: value j
// is cold when past - j >= kHotWindow, key j when past - last(j) >=
// kHotWindow (last(j) the last token of j's per-channel block).
//
// Launch: as attention_decode.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_DECODE_KVQ_CUH
#define SITS_KERNELS_ATTENTION_DECODE_KVQ_CUH

#include "sits/attention_decode.cuh"
#include "sits/kv_quant.cuh"

namespace sits {

/// Config: attention_decode.cuh's (Cache is the hot part's type) and
/// kBits, kGroup, kGroups, kRowBytes, kHotWindow, kHotRows, kPerChannelKeys,
/// kChannelBlock, kScaleBlocks (kv_quant.cuh); a paged cache adds
/// kBlockTokens and kMaxBlocks, and `blockTable` (its cold rows and scales
/// are in the pool's blocks, ColdRows).
template <class Cfg>
__device__ void attentionDecodeKVQ(
    const float *SITS_RESTRICT query,
    const typename Cfg::Cache::Storage *SITS_RESTRICT keyHot,
    const typename Cfg::Cache::Storage *SITS_RESTRICT valueHot,
    const signed char *SITS_RESTRICT keyCold,
    const u16 *SITS_RESTRICT keyScales,
    const signed char *SITS_RESTRICT valueCold,
    const u16 *SITS_RESTRICT valueScales, float *SITS_RESTRICT out,
    float *SITS_RESTRICT partial, int *SITS_RESTRICT counters,
    const int *SITS_RESTRICT pastLengths, const int *SITS_RESTRICT stepLengths,
    const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Cache C;
  typedef typename C::Storage Storage;
  constexpr int G = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int D = Cfg::kHeadDim;
  constexpr int P = D / 8; // lanes per key
  constexpr int kKeyGroups = kDecodeThreads / P;
  constexpr int U = Cfg::kUnroll;
  constexpr int kStages = Cfg::kStages;
  constexpr int kPartial = decodePartialFloats(D);
  static_assert(C::kBytes == 2, "16 bytes hold 8 elements of the cache");
  static_assert(D % 8 == 0 && P <= kWarpSize && kWarpSize % P == 0,
                "head_dim / 8 lanes per key, whole within a warp");
  static_assert(Cfg::kHeads % Cfg::kKvHeads == 0, "GQA groups are whole");

  SITS_DYNAMIC_SHARED(uint4, shared);
  const int split = tileIndex().x, kvHead = tileIndex().y, b = tileIndex().z;
  const int tid = threadIdx.x;
  const int keyGroup = tid / P, part = tid % P, d0 = part * 8;
  const int past = pastLengths[b];
  const bool padding = stepLengths[b] <= 0;

  const DecodeKeys keys = decodeKeysOf<Cfg>(past, padding, split);
  const int splitBegin = keys.splitBegin, splitEnd = keys.splitEnd;
  const int k0 = keys.k0, k1 = keys.k1;
  const bool active = keys.active;
  constexpr int N = Cfg::kHotWindow, CB = Cfg::kChannelBlock;
  constexpr int kColdBytes = 8 * Cfg::kBits / 8; // this lane's 8 channels
  const long seqHead = static_cast<long>(b) * Cfg::kKvHeads + kvHead;
  const long hotBase = seqHead * Cfg::kHotRows * D;
  const ColdRows<Cfg> coldRows(blockTable, b, kvHead);
  // Key j is read cold when past - last(j) >= N, value j when past - j >= N.
  auto keyIsCold = [&](int key) {
    return past - ((key / CB) * CB + CB - 1) >= N;
  };
  auto valueIsCold = [&](int key) { return past - key >= N; };
  // This lane's per-token scale of cold row `row`, and its value from the
  // 4 bytes copied into bytes 8-11 of the row's ring slot.
  auto tokenScaleIndex = [&](int row) {
    return coldRows.tokenScale(row) + d0 / Cfg::kGroup;
  };
  auto slotScale = [&](const uint4 &raw, int row) {
    const u32 word = raw.z;
    return halfToFloat(static_cast<u16>(
        (tokenScaleIndex(row) & 1) ? word >> 16 : word & 0xffffu));
  };
  float *myPartial =
      partial +
      ((static_cast<long>(b) * Cfg::kHeads + kvHead * G) * Cfg::kSplits) *
          kPartial;

  constexpr int H = decodePassHeads<G>(); // attention_decode.cuh
  for (int h0 = 0; active && h0 < G; h0 += H) {
    if (h0 > 0)
      syncTile(); // the last pass's merge has left the ring's memory
    float q[H][8], rowMax[H], rowSum[H], acc[H][8];
    startGroup<Cfg, H>(query, b, kvHead * G + h0, d0, q, rowMax, rowSum, acc);
    // The scales of this lane's 8 channels in the last per-channel key
    // block it read: a lane's keys of a step lie in one block, so they are
    // loaded once per block rather than once per key.
    int scaleBlock = -1;
    float blockScales[8];

    // Step s covers keys k0 + (s * U + u) * kKeyGroups + keyGroup.
    constexpr int kKeysPerStep = U * kKeyGroups;
    const int steps = (k1 - k0 + kKeysPerStep - 1) / kKeysPerStep;
    auto keyOf = [&](int step, int u) {
      return k0 + (step * U + u) * kKeyGroups + keyGroup;
    };
    auto issue = [&](int step) {
      if (step < steps) {
        uint4 *slot = shared + (step % kStages) * 2 * U * kDecodeThreads + tid;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int key = keyOf(step, u);
          const bool valid = key < k1;
          const int row = valid ? key : 0;
          const long hot =
              hotBase + static_cast<long>(row % Cfg::kHotRows) * D + d0;
          const long cold = coldRows.row(row) + d0 * Cfg::kBits / 8;
          // A cold row's per-token scale rides in bytes 8-11 of its slot:
          // the aligned 4 bytes that hold it (the scale region's padding
          // covers the word of its last scale).
          const long scale = tokenScaleIndex(row);
          if (valid && keyIsCold(key)) {
            copyAsyncSmall<kColdBytes>(slot + (2 * u) * kDecodeThreads,
                                       keyCold + cold);
            if constexpr (!Cfg::kPerChannelKeys)
              copyAsyncSmall<4>(reinterpret_cast<unsigned char *>(
                                    slot + (2 * u) * kDecodeThreads) +
                                    8,
                                keyScales + (scale & ~1L));
          } else {
            copyAsync16<false>(slot + (2 * u) * kDecodeThreads, keyHot + hot,
                               valid);
          }
          if (valid && valueIsCold(key)) {
            copyAsyncSmall<kColdBytes>(slot + (2 * u + 1) * kDecodeThreads,
                                       valueCold + cold);
            copyAsyncSmall<4>(reinterpret_cast<unsigned char *>(
                                  slot + (2 * u + 1) * kDecodeThreads) +
                                  8,
                              valueScales + (scale & ~1L));
          } else {
            copyAsync16<false>(slot + (2 * u + 1) * kDecodeThreads,
                               valueHot + hot, valid);
          }
        }
      }
      copyAsyncCommit();
    };

    for (int s = 0; s + 1 < kStages; ++s)
      issue(s);
    for (int step = 0; step < steps; ++step) {
      issue(step + kStages - 1);
      copyAsyncWait<kStages - 1>();
      const uint4 *slot =
          shared + (step % kStages) * 2 * U * kDecodeThreads + tid;
      float score[U][H];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float k[8];
        const uint4 raw = slot[(2 * u) * kDecodeThreads];
        const int key = keyOf(step, u);
        if (key < k1 && keyIsCold(key)) {
          if constexpr (Cfg::kPerChannelKeys) {
            if (key / CB != scaleBlock) {
              scaleBlock = key / CB;
              unpack16<F16>(
                  __ldg(reinterpret_cast<const uint4 *>(
                      keyScales + coldRows.channelScale(scaleBlock) + d0)),
                  blockScales);
            }
            unpackCold<Cfg::kBits>(raw, blockScales, k);
          } else {
            const float s = slotScale(raw, key);
            const float scales[8] = {s, s, s, s, s, s, s, s};
            unpackCold<Cfg::kBits>(raw, scales, k);
          }
        } else {
          unpack16<C>(raw, k);
        }
        scoreKey<Cfg, H, P>(q, k, key < k1, score[u]);
      }
      foldScores<U, H>(score, rowMax, rowSum, acc, [&](int u, float(&v)[8]) {
        const int key = keyOf(step, u);
        if (key < k1 && valueIsCold(key)) {
          const uint4 raw = slot[(2 * u + 1) * kDecodeThreads];
          const float s = slotScale(raw, key);
          const float scales[8] = {s, s, s, s, s, s, s, s};
          unpackCold<Cfg::kBits>(raw, scales, v);
        } else {
          unpack16<C>(slot[(2 * u + 1) * kDecodeThreads], v);
        }
      });
    }
    copyAsyncWait<0>();
    syncTile(); // every lane has read its ring slots
    storeSplitPartial<Cfg, H>(shared, rowMax, rowSum, acc,
                              myPartial + h0 * Cfg::kSplits * kPartial, split);
  }
  combineSplits<Cfg>(shared, padding, splitBegin, splitEnd, myPartial, counters,
                     out);
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_DECODE_KVQ_CUH
