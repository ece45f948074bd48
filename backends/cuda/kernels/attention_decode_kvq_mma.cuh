//===- attention_decode_kvq_mma.cuh - Quantized-cache decode on mma ------===//
//
// Split-K decode attention over a quantized cache (kv_quant.cuh) on tensor
// cores, with the operands built in registers from the bytes each lane
// reads (no shared-memory tiles: cold values only pass through the lane's
// own cp.async slots, see loadWordsOf). The query heads of a GQA group are
// the N side of the mma
// (at most 8), so a warp computes, per tile of 16 keys,
//   S^T = K Q^T     (A = the keys' channels, B = the queries),
//   O^T += V^T P^T  (A = the values' channels, B = the probabilities),
// as mma.m16n8k16 with f32 accumulators: one mma per 16 channels for each.
//
// Every lane loads the bytes of the cold rows that its A fragments hold
// (16-byte rows of levels, never padded: any channel order inside a k step
// gives the same dot product, and the output channels follow the order the
// values come in):
//   * keys: lane (g, t) holds key slots g and g + 8, and of each scale group
//     the quarter t of the group's bytes (kGroup / 4 channels). An int4 word
//     turns into f16 pairs (c0, c4), (c1, c5), (c2, c6), (c3, c7) with the
//     1024 + level exponent trick (a lop3 and one f16x2 op per pair); the
//     queries are packed in the same order;
//   * values: lane (g, t) holds keys 4t..4t+3 (which fixes the key slots:
//     slot 2t + e is key 4t + e, slot 2t + 8 + e key 4t + 2 + e) and of each
//     group the eighth g of its bytes. A byte permute puts two keys' bytes
//     side by side, so that the same trick gives pairs (key a, key b) of one
//     channel, which is what the A operand of P V needs;
//   * the probabilities come out of S^T with keys as rows; movmatrix
//     transposes them into the B operand.
// Scales: values stay levels and their per-token scales multiply the
// probabilities, one B operand per scale group (lifted by kValueLift out of
// f16's subnormals). Per-token key scales multiply each group's part of S
// (one accumulator per group). Per-channel key scales fold into the queries
// (Q' = Q * s, rounded once to f16) for a tile inside one key block.
//
// A tile is cold (its 16 keys visible and cold: nearly all of a long
// context), hot (visible and hot: the f16 rows, with their loads issued
// together and the split's hot rows asked into L2 at the start), keys-hot
// (visible, keys hot and values cold then hot: the hot window's edge,
// where per-channel key blocks keep keys hot longer than values; the K rows
// load together and each value takes its cold or hot form by a select), or
// mixed (the tiles at either end of the visible keys, the hot window's
// edge where keys turn hot inside a tile, and key blocks smaller than a
// tile), which tests each key: invisible keys are zeros
// (never NaN times a zero weight), and per-channel key scales multiply the
// keys instead of the queries. Cold or hot is decided per key
// exactly as attention_decode_kvq.cuh does (value j cold when past - j >=
// kHotWindow, key j when past - last(j) >= kHotWindow, last(j) the last
// token of j's per-channel block).
//
// Work: the visible keys in chunks of 64 are dealt to the splits in turn
// (split s takes chunks s, s + kSplits, ...), so that the hot window's
// tiles, which cost more, spread over many blocks instead of making two
// splits the kernel's tail. A warp takes every kWarps-th tile of its
// block's chunks, two of one chunk when they are all cold (one Q' per
// warp), else of different chunks (at most one hot tile per warp). It
// issues the next tile's cold-word loads before it reads the current
// tile's (so its first two tiles are in flight at once) and computes with
// its own online softmax; the block merges its warps (each head's weights
// once per warp) and writes its partial result, combined across splits as
// attention_decode.cuh does. Queries and probabilities are rounded to f16
// as the tensor-core prefill does (attention_prefill.cuh); the planner uses
// this kernel only for engines that compute in 16 bits.
//
// Launch: grid (kSplits, kv_heads, B), block kMmaDecodeThreads (8 warps),
// dynamic shared memory attentionDecodeKVQMmaSharedBytes(...).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_CUH
#define SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_CUH

#include "sits/attention_decode.cuh"
#include "sits/attention_decode_kvq_mma_layout.cuh"
#include "sits/kv_quant.cuh"

namespace sits {

/// Config: attention_decode_kvq.cuh's (Cache must be F16; kHeads / kKvHeads
/// at most 8; head_dim a multiple of kGroup, kGroup a multiple of 32); a
/// paged cache adds kBlockTokens and kMaxBlocks, and `blockTable`
/// (ColdRows: a tile of 16 keys lies in one block).
template <class Cfg>
__device__ void attentionDecodeKVQMma(
    const float *SITS_RESTRICT query, const u16 *SITS_RESTRICT keyHot,
    const u16 *SITS_RESTRICT valueHot, const signed char *SITS_RESTRICT keyCold,
    const u16 *SITS_RESTRICT keyScales,
    const signed char *SITS_RESTRICT valueCold,
    const u16 *SITS_RESTRICT valueScales, float *SITS_RESTRICT out,
    float *SITS_RESTRICT partial, int *SITS_RESTRICT counters,
    const int *SITS_RESTRICT pastLengths, const int *SITS_RESTRICT stepLengths,
    const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Cache C;
  constexpr int G = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int D = Cfg::kHeadDim;
  constexpr int T = kMmaDecodeKeys;
  constexpr int kWarps = kMmaDecodeWarps;
  constexpr int kBits = Cfg::kBits, kGroup = Cfg::kGroup;
  constexpr int kGroups = Cfg::kGroups, CB = Cfg::kChannelBlock;
  constexpr int kRowBytes = Cfg::kRowBytes;
  constexpr int kGroupBytes = kGroup * kBits / 8;
  constexpr int kKeyBytes = kGroupBytes / 4;   ///< lane t's, of a key group
  constexpr int kValueBytes = kGroupBytes / 8; ///< lane g's, of a value group
  constexpr int kKeyWords = kKeyBytes / 4;
  constexpr int kValueWords = (kValueBytes + 3) / 4;
  constexpr int kSteps = kGroup / 16;        ///< k steps of S, m tiles of O
  constexpr int kPairs = kGroup / 8;         ///< key pairs, two per k step
  constexpr int kKeyChannels = kGroup / 4;   ///< lane t's, of a key group
  constexpr int kValueChannels = kGroup / 8; ///< lane g's, of a value group
  constexpr bool kPerToken = !Cfg::kPerChannelKeys;
  constexpr int kKeyAccs = kPerToken ? kGroups : 1;
  // Per-channel key blocks of whole tiles: the scales fold into Q'.
  constexpr bool kScaledQueries = Cfg::kPerChannelKeys && CB % T == 0;
  constexpr int kPartial = decodePartialFloats(D);
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
  constexpr float kValueLift = 256.0f;
  typedef MmaDecodeWords<kGroups, kKeyWords, kValueWords> Words;
  // The cold values and their scales come by cp.async into the lane's own
  // slots of a two-tile ring (no barrier: a lane reads only its copies), so
  // that no register waits on them: held in registers, they were spilled
  // as soon as loaded, and the spill store stalled the warp until they
  // arrived, before it issued the next tile's loads (ncu source counters).
  constexpr int kScaleBytes = 2 * kGroups;
  constexpr int kCopyBytes = mmaDecodeValueCopyBytes(D, kGroup, kBits);
  constexpr bool kAsyncValues = kCopyBytes > 0;
  static_assert(!C::kIsBf16 && C::kBytes == 2, "an f16 hot cache");
  static_assert(G >= 1 && G <= 8, "the group's queries fill columns 0..7");
  static_assert(kGroup % 32 == 0,
                "whole k steps per group, whole words per value lane");
  static_assert(D == kGroups * kGroup, "head_dim whole groups");
  static_assert(kRowBytes == D * kBits / 8, "unpadded cold rows");

  SITS_DYNAMIC_SHARED(float, shared);
  const float kNegInf = __int_as_float(0xff800000u);
  const int split = tileIndex().x, kvHead = tileIndex().y, b = tileIndex().z;
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int past = pastLengths[b];
  const bool padding = stepLengths[b] <= 0;

  // The visible keys [k0, k1) in chunks of kChunkTiles tiles, dealt to the
  // splits in turn (split s takes chunks s, s + kSplits, ...): the hot
  // window's chunks land in different blocks.
  constexpr int kChunkTiles = 4;
  constexpr int kChunkKeys = kChunkTiles * T;
  const int k1 = min(past + 1, Cfg::kCapacity);
  const int k0 = Cfg::kWindow > 0 ? max(0, past - Cfg::kWindow + 1) : 0;
  const int chunk0 = k0 / kChunkKeys;
  const int chunks = (k1 + kChunkKeys - 1) / kChunkKeys - chunk0;
  // Every split below splitEnd has a chunk and writes a partial result.
  const int splitBegin = 0, splitEnd = min(Cfg::kSplits, chunks);
  const bool blockActive = !padding && split < splitEnd;
  constexpr int N = Cfg::kHotWindow;
  const long seqHead = static_cast<long>(b) * Cfg::kKvHeads + kvHead;
  auto keyIsCold = [&](int key) {
    return past - ((key / CB) * CB + CB - 1) >= N;
  };
  auto valueIsCold = [&](int key) { return past - key >= N; };
  auto visible = [&](int key) { return key >= k0 && key < k1; };
  float *myPartial =
      partial +
      ((static_cast<long>(b) * Cfg::kHeads + kvHead * G) * Cfg::kSplits) *
          kPartial;

  if (blockActive) {
    const int myChunks = (chunks - split + Cfg::kSplits - 1) / Cfg::kSplits;
    auto chunkOf = [&](int j) { return chunk0 + split + j * Cfg::kSplits; };
    const int lastKey = min(k1, (chunkOf(myChunks - 1) + 1) * kChunkKeys) - 1;
    // A warp takes the block's tiles warp, warp + kWarps, ...: two of one
    // chunk when every key is cold (one Q' a warp), else of different
    // chunks, so that no warp takes two of the hot window's tiles.
    const bool allCold = keyIsCold(lastKey);
    const int myTiles =
        max(0, (myChunks * kChunkTiles - warp + kWarps - 1) / kWarps);
    auto tileStart = [&](int i) {
      const int idx = warp + i * kWarps;
      const int chunk = allCold ? idx % myChunks : idx / kChunkTiles;
      const int tile = allCold ? idx / myChunks : idx % kChunkTiles;
      return (chunkOf(chunk) * kChunkTiles + tile) * T;
    };
    // Key slots g and g + 8 of a tile; this lane's value keys are 4t + e.
    const int keySlot = 4 * (g / 2) + g % 2;
    const ColdRows<Cfg> coldRows(blockTable, b, kvHead);
    const u16 *keyHotRows = keyHot + seqHead * Cfg::kHotRows * D;
    const u16 *valueHotRows = valueHot + seqHead * Cfg::kHotRows * D;
    const float *queries =
        query + static_cast<long>(b) * kWidth + (kvHead * G + g) * D;

    // The split's f16 rows (hot keys and values; keys of per-channel blocks
    // stay hot up to CB - 1 tokens longer) go to L2 now: the tiles that read
    // them cannot load them ahead into registers.
    if (!allCold) {
      constexpr int kLines = D * 2 / 128 > 0 ? D * 2 / 128 : 1;
      const int hot0 = past - N + 1 - (CB - 1);
      for (int j = 0; j < myChunks; ++j) {
        const int begin = max(max(k0, hot0), chunkOf(j) * kChunkKeys);
        const int end = min(k1, (chunkOf(j) + 1) * kChunkKeys);
        for (int idx = tid; idx < 2 * (end - begin) * kLines;
             idx += kMmaDecodeThreads) {
          const int key = begin + idx / (2 * kLines), line = idx % kLines;
          const u16 *rows = (idx / kLines) % 2 ? valueHotRows : keyHotRows;
          prefetchL2(rows + static_cast<long>(key % Cfg::kHotRows) * D +
                     line * 64);
        }
      }
    }

    // The lane's ring slots of stage `stage`: values [e][h], then scales
    // [s], each piece kThreads apart (consecutive lanes, consecutive banks).
    unsigned char *ring =
        reinterpret_cast<unsigned char *>(shared) +
        attentionDecodeKVQMmaSharedBytes(D, G, kGroup, kBits) -
        2 * kMmaDecodeThreads * kCopyBytes;
    auto valueSlot = [&](int stage, int e, int h) {
      return ring + static_cast<long>(stage) * kMmaDecodeThreads * kCopyBytes +
             ((e * kGroups + h) * kMmaDecodeThreads + tid) * kValueBytes;
    };
    auto scaleSlot = [&](int stage, int s) {
      return ring + static_cast<long>(stage) * kMmaDecodeThreads * kCopyBytes +
             4 * kGroups * kMmaDecodeThreads * kValueBytes +
             (s * kMmaDecodeThreads + tid) * kScaleBytes;
    };
    // Reads stage `stage`'s copies into w, once they have landed.
    auto takeValues = [&](int stage, Words &w) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int h = 0; h < kGroups; ++h)
          loadWords<kValueBytes>(valueSlot(stage, e, h), w.values[e][h]);
#pragma unroll
      for (int s = 0; s < 2; ++s)
        loadWords<kScaleBytes>(scaleSlot(stage, s), w.valueScales[s]);
    };

    // A tile's cold words (rows past the capacity read the last one): keys
    // into w, values and their scales into ring stage `stage` when
    // kAsyncValues (one commit group), else into w.
    // Keys past the sequence's end (a chunk's last tiles) load some row and
    // are never used: a paged cache has no block there, so its last row.
    const int lastRow =
        kvBlockTokensOf<Cfg>(0) > 0 ? k1 - 1 : Cfg::kCapacity - 1;
    auto loadWordsOf = [&](int r0, Words &w, int stage) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int key = min(r0 + keySlot + 2 * s, lastRow);
#pragma unroll
        for (int h = 0; h < kGroups; ++h)
          loadWords<kKeyBytes>(keyCold + coldRows.row(key) + h * kGroupBytes +
                                   t * kKeyBytes,
                               w.keys[s][h]);
        if constexpr (kAsyncValues)
          copyAsyncBytes<kScaleBytes>(scaleSlot(stage, s),
                                      valueScales + coldRows.tokenScale(key));
        else
          loadScales<kGroups>(valueScales + coldRows.tokenScale(key),
                              w.valueScales[s]);
        if constexpr (kPerToken)
          loadScales<kGroups>(keyScales + coldRows.tokenScale(key),
                              w.keyScales[s]);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = min(r0 + 4 * t + e, lastRow);
#pragma unroll
        for (int h = 0; h < kGroups; ++h) {
          const signed char *src =
              valueCold + coldRows.row(key) + h * kGroupBytes + g * kValueBytes;
          if constexpr (kAsyncValues)
            copyAsyncBytes<kValueBytes>(valueSlot(stage, e, h), src);
          else
            loadWords<kValueBytes>(src, w.values[e][h]);
        }
      }
      if constexpr (kAsyncValues)
        copyAsyncCommit();
    };

    // The group's queries as B fragments (head g, this lane's key
    // channels in pair order; zeros past the group), times per-channel key
    // scales when given (one rounding).
    auto loadQueries = [&](const u16 *scales, u32(&q)[kGroups][kPairs]) {
#pragma unroll
      for (int h = 0; h < kGroups; ++h) {
        const int c0 = h * kGroup + t * kKeyChannels;
        float x[kKeyChannels];
#pragma unroll
        for (int c = 0; c < kKeyChannels; c += 4) {
          float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          if (g < G)
            v = *reinterpret_cast<const float4 *>(queries + c0 + c);
          x[c] = v.x;
          x[c + 1] = v.y;
          x[c + 2] = v.z;
          x[c + 3] = v.w;
        }
        if (scales && g < G) {
#pragma unroll
          for (int c = 0; c < kKeyChannels; c += 8) {
            const uint4 v = *reinterpret_cast<const uint4 *>(scales + c0 + c);
            const u32 words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 8; ++e)
              x[c + e] *=
                  halfToFloat(static_cast<u16>(words[e / 2] >> (16 * (e % 2))));
          }
        }
#pragma unroll
        for (int p = 0; p < kPairs; ++p)
          q[h][p] = packPairRn<C>(x[keyPairChannel<kBits>(p, 0)],
                                  x[keyPairChannel<kBits>(p, 1)]);
      }
    };

    // Key slot s's pairs in group h: levels (a cold tile), f16 rows (a hot
    // one), else per key zeros, f16 rows, or levels times per-channel
    // scales.
    auto keyPairs = [&](const Words &w, int r0, int s, int h, int mode,
                        u32 *pairs) {
      const int key = r0 + keySlot + 2 * s;
      const int c0 = h * kGroup + t * kKeyChannels;
      if (mode == kMixedTile && !visible(key)) {
#pragma unroll
        for (int p = 0; p < kPairs; ++p)
          pairs[p] = 0u;
      } else if (mode == kHotTile || mode == kKeysHotTile ||
                 (mode == kMixedTile && !keyIsCold(key))) {
        halvesInPairOrder<kBits, kKeyChannels>(
            keyHotRows + static_cast<long>(key % Cfg::kHotRows) * D + c0,
            pairs);
      } else {
#pragma unroll
        for (int k = 0; k < kKeyWords; ++k)
          levelPairsF16<kBits>(w.keys[s][h][k],
                               pairs + k * (kBits == 4 ? 4 : 2));
        if (Cfg::kPerChannelKeys && !(mode == kColdTile && kScaledQueries)) {
          u32 scales[kPairs];
          halvesInPairOrder<kBits, kKeyChannels>(
              keyScales + coldRows.channelScale(key / CB) + c0, scales);
#pragma unroll
          for (int p = 0; p < kPairs; ++p)
            pairs[p] = mulHalf2(pairs[p], scales[p]);
        }
      }
    };

    // Value key e's cold levels in group h as pairs (c0, c1), ...
    auto coldValueNatural = [&](const Words &w, int e, int h, u32 *natural) {
      if constexpr (kBits == 4) {
        u32 p[4];
        levelPairsF16<4>(w.values[e][h][0], p); // (c0, c4), (c1, c5), ...
        natural[0] = bytePermute(p[0], p[1], 0x5410u);
        natural[1] = bytePermute(p[2], p[3], 0x5410u);
        if constexpr (kValueChannels == 8) {
          natural[2] = bytePermute(p[0], p[1], 0x7632u);
          natural[3] = bytePermute(p[2], p[3], 0x7632u);
        }
      } else {
#pragma unroll
        for (int k = 0; k < kValueWords; ++k)
          levelPairsF16<8>(w.values[e][h][k], natural + 2 * k);
      }
    };

    // Value key e's (0..3) channels in group h as pairs (c0, c1), ...:
    // zeros, f16 rows, or levels.
    auto valueNatural = [&](const Words &w, int r0, int e, int h, int mode,
                            u32 *natural) {
      constexpr int kNatural = kValueChannels / 2;
      const int key = r0 + 4 * t + e;
      if (mode == kMixedTile && !visible(key)) {
#pragma unroll
        for (int q = 0; q < kNatural; ++q)
          natural[q] = 0u;
      } else if (mode == kKeysHotTile) {
        // Both forms, then a select: the loads wait on no branch (a key
        // whose key row is hot still has its value's ring row).
        u32 hot[kNatural], cold[kNatural];
        loadWords<2 * kValueChannels>(
            valueHotRows + static_cast<long>(key % Cfg::kHotRows) * D +
                h * kGroup + g * kValueChannels,
            hot);
        coldValueNatural(w, e, h, cold);
        const bool isCold = valueIsCold(key);
#pragma unroll
        for (int q = 0; q < kNatural; ++q)
          natural[q] = isCold ? cold[q] : hot[q];
      } else if (mode == kHotTile || !valueIsCold(key)) {
        loadWords<2 * kValueChannels>(
            valueHotRows + static_cast<long>(key % Cfg::kHotRows) * D +
                h * kGroup + g * kValueChannels,
            natural);
      } else {
        coldValueNatural(w, e, h, natural);
      }
    };

    // Value keys 4t + 2kp and 4t + 2kp + 1 in group h: pairs (key a, key b)
    // of channel i in pairs[i].
    auto valuePairs = [&](const Words &w, int r0, int kp, int h, int mode,
                          u32 *pairs) {
      if (mode == kColdTile) {
        if constexpr (kBits == 4) {
          const u32 a = w.values[2 * kp][h][0], b = w.values[2 * kp + 1][h][0];
          levelPairsF16<4>(bytePermute(a, b, 0x5410u), pairs);
          if constexpr (kValueChannels == 8)
            levelPairsF16<4>(bytePermute(a, b, 0x7632u), pairs + 4);
        } else {
#pragma unroll
          for (int k = 0; k < kValueWords; ++k) {
            const u32 a = w.values[2 * kp][h][k];
            const u32 b = w.values[2 * kp + 1][h][k];
            levelPairsF16<8>(bytePermute(a, b, 0x5140u), pairs + 4 * k);
            if (4 * k + 2 < kValueChannels)
              levelPairsF16<8>(bytePermute(a, b, 0x7362u), pairs + 4 * k + 2);
          }
        }
      } else {
        u32 a[kValueChannels / 2], b[kValueChannels / 2];
        valueNatural(w, r0, 2 * kp, h, mode, a);
        valueNatural(w, r0, 2 * kp + 1, h, mode, b);
#pragma unroll
        for (int q = 0; q < kValueChannels / 2; ++q) {
          pairs[2 * q] = bytePermute(a[q], b[q], 0x5410u);
          pairs[2 * q + 1] = bytePermute(a[q], b[q], 0x7632u);
        }
      }
    };

    // The queries of the fast path: Q, or Q' of key block scaledBlock.
    u32 queryPairs[kGroups][kPairs];
    int scaledBlock = -1;
    if (!kScaledQueries)
      loadQueries(nullptr, queryPairs);

    // O^T: o[m][0..3] = rows (channels) m-tile m's g and g + 8, heads 2t and
    // 2t + 1 (columns); the running max and sum of heads 2t and 2t + 1.
    float o[D / 16][4];
#pragma unroll
    for (int m = 0; m < D / 16; ++m)
      o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.0f;
    float rowMax[2] = {kNegInf, kNegInf}, rowSum[2] = {0.0f, 0.0f};

    auto processTile = [&](const Words &w, int r0, int mode,
                           const u32(&q)[kGroups][kPairs]) {
      const bool fast = mode != kMixedTile; // every key visible
      // S^T = K Q^T, one accumulator per group of per-token key scales.
      float acc[kKeyAccs][4];
#pragma unroll
      for (int a = 0; a < kKeyAccs; ++a)
        acc[a][0] = acc[a][1] = acc[a][2] = acc[a][3] = 0.0f;
#pragma unroll
      for (int h = 0; h < kGroups; ++h) {
        u32 upper[kPairs], lower[kPairs]; // slots g and g + 8
        keyPairs(w, r0, 0, h, mode, upper);
        keyPairs(w, r0, 1, h, mode, lower);
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
          mma16816<C>(acc[kPerToken ? h : 0], upper[2 * u], lower[2 * u],
                      upper[2 * u + 1], lower[2 * u + 1], q[h][2 * u],
                      q[h][2 * u + 1]);
        }
      }
      // Scores sc[e]: slot g (e < 2) or g + 8, head 2t + e % 2.
      float sc[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int s = e / 2, key = r0 + keySlot + 2 * s;
        float dot = 0.0f;
        if constexpr (kPerToken) {
          const bool cold =
              mode == kColdTile || (mode == kMixedTile && keyIsCold(key));
#pragma unroll
          for (int h = 0; h < kGroups; ++h)
            dot +=
                (cold ? halfToFloat(Words::scaleOf(w.keyScales[s], h)) : 1.0f) *
                acc[h][e];
        } else {
          dot = acc[0][e];
        }
        sc[e] = fast || visible(key) ? attentionScore<Cfg>(dot) : kNegInf;
      }
      // Online softmax per head: the maximum over the 16 slots (this
      // lane's two and the lanes of the other g).
      float rescale[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float tileMax = fmaxf(sc[j], sc[j + 2]);
        tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 4));
        tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 8));
        tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 16));
        const float newMax = fmaxf(rowMax[j], tileMax);
        rescale[j] = rowMax[j] == kNegInf || newMax == kNegInf
                         ? (newMax == kNegInf ? 1.0f : 0.0f)
                         : expf(rowMax[j] - newMax);
        rowMax[j] = newMax;
        rowSum[j] *= rescale[j];
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = sc[e] == kNegInf ? 0.0f : expf(sc[e] - rowMax[e % 2]);
        sc[e] = p;
        rowSum[e % 2] += p;
      }
      // Once the maxima settle, most tiles rescale nothing.
      if (!__all_sync(kFullMask, rescale[0] == 1.0f && rescale[1] == 1.0f)) {
#pragma unroll
        for (int m = 0; m < D / 16; ++m) {
          o[m][0] *= rescale[0];
          o[m][1] *= rescale[1];
          o[m][2] *= rescale[0];
          o[m][3] *= rescale[1];
        }
      }
      // O^T += V^T P^T per scale group: P times the keys' value scales (1
      // for hot values), lifted, as f16, transposed into the B operand.
#pragma unroll
      for (int h = 0; h < kGroups; ++h) {
        u32 rows[2];
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const int key = r0 + keySlot + 2 * s;
          float factor = kValueLift;
          if (mode == kColdTile || (mode == kKeysHotTile && valueIsCold(key)) ||
              (mode == kMixedTile && visible(key) && valueIsCold(key)))
            factor *= halfToFloat(Words::scaleOf(w.valueScales[s], h));
          rows[s] = packPairRn<C>(sc[2 * s] * factor, sc[2 * s + 1] * factor);
        }
        const u32 b0 = transposeHalves8x8(rows[0]);
        const u32 b1 = transposeHalves8x8(rows[1]);
        u32 first[kValueChannels], second[kValueChannels];
        valuePairs(w, r0, 0, h, mode, first);
        valuePairs(w, r0, 1, h, mode, second);
#pragma unroll
        for (int m = 0; m < kSteps; ++m)
          mma16816<C>(o[h * kSteps + m], first[2 * m], first[2 * m + 1],
                      second[2 * m], second[2 * m + 1], b0, b1);
      }
    };

    // Tile r0 from its cold words `current`: nothing for the edge of a chunk
    // the query does not see.
    auto runTile = [&](const Words &current, int r0) {
      if (r0 >= k1 || r0 + T <= k0)
        return;
      // Every key visible, and all cold or all hot (cold keys and values
      // are prefixes; a cold key's value is cold).
      const bool inside = r0 >= k0 && r0 + T <= k1;
      const bool cold =
          inside && keyIsCold(r0 + T - 1) && (kPerToken || kScaledQueries);
      const bool hot = inside && !valueIsCold(r0);
      const bool keysHot = inside && !keyIsCold(r0);
      if (cold) {
        if (kScaledQueries && r0 / CB != scaledBlock) {
          scaledBlock = r0 / CB;
          loadQueries(keyScales + coldRows.channelScale(scaledBlock),
                      queryPairs);
        }
        processTile(current, r0, kColdTile, queryPairs);
      } else if (kScaledQueries) {
        // Q itself, for the tiles whose keys are not all cold.
        u32 plain[kGroups][kPairs];
        loadQueries(nullptr, plain);
        if (hot)
          processTile(current, r0, kHotTile, plain);
        else if (keysHot)
          processTile(current, r0, kKeysHotTile, plain);
        else
          processTile(current, r0, kMixedTile, plain);
      } else if (hot) {
        processTile(current, r0, kHotTile, queryPairs);
      } else if (keysHot) {
        processTile(current, r0, kKeysHotTile, queryPairs);
      } else {
        processTile(current, r0, kMixedTile, queryPairs);
      }
    };

    // The next tile's loads go out before this tile's words are read, so
    // that a warp's first two tiles are in flight at once; the copy into
    // `current` at the end waits on loads that had the tile's compute to
    // land.
    Words current;
    if (myTiles > 0)
      loadWordsOf(tileStart(0), current, 0);
    for (int i = 0; i < myTiles; ++i) {
      Words next;
      if (i + 1 < myTiles)
        loadWordsOf(tileStart(i + 1), next, (i + 1) % 2);
      if constexpr (kAsyncValues) {
        if (i + 1 < myTiles)
          copyAsyncWait<1>(); // this tile's group, not the next one's
        else
          copyAsyncWait<0>();
        takeValues(i % 2, current);
      }
      runTile(current, tileStart(i));
      current = next;
    }

#pragma unroll
    for (int j = 0; j < 2; ++j) {
      rowSum[j] += __shfl_xor_sync(kFullMask, rowSum[j], 4);
      rowSum[j] += __shfl_xor_sync(kFullMask, rowSum[j], 8);
      rowSum[j] += __shfl_xor_sync(kFullMask, rowSum[j], 16);
    }
    // [warp][head][channel] values; [warp][head] maxima, sums; [head][warp]
    // weights.
    float *states = shared;
    float *maxima = states + kWarps * G * D;
    float *sums = maxima + kWarps * G;
    float *weights = sums + kWarps * G;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int head = 2 * t + j;
      if (head < G) {
        float *slot = states + (warp * G + head) * D;
#pragma unroll
        for (int m = 0; m < D / 16; ++m) {
          const int channel =
              (m / kSteps) * kGroup + g * kValueChannels + 2 * (m % kSteps);
          *reinterpret_cast<float2 *>(slot + mergeSwizzle(channel, head)) =
              make_float2(o[m][j] / kValueLift, o[m][j + 2] / kValueLift);
        }
        if (g == 0) {
          maxima[warp * G + head] = rowMax[j];
          sums[warp * G + head] = rowSum[j];
        }
      }
    }
    syncTile();
    // Each head's weight per warp, once: exp(max_w - best), 0 for a warp
    // that saw no key.
    if (tid < G) {
      float best = kNegInf;
      for (int w = 0; w < kWarps; ++w)
        best = fmaxf(best, maxima[w * G + tid]);
      float total = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        const float m = maxima[w * G + tid];
        const float weight = m == kNegInf ? 0.0f : expf(m - best);
        weights[tid * kWarps + w] = weight;
        total += weight * sums[w * G + tid];
      }
      float *target = myPartial + (tid * Cfg::kSplits + split) * kPartial;
      target[D] = best;
      target[D + 1] = total;
    }
    syncTile();
    for (int idx = tid; idx < G * D; idx += kMmaDecodeThreads) {
      const int head = idx / D, d = idx % D;
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        total += weights[head * kWarps + w] *
                 states[(w * G + head) * D + mergeSwizzle(d, head)];
      myPartial[(head * Cfg::kSplits + split) * kPartial + d] = total;
    }
  }
  combineSplits<Cfg, kMmaDecodeThreads>(shared, padding, splitBegin, splitEnd,
                                        myPartial, counters, out);
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_CUH
