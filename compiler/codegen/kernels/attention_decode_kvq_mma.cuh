//===- attention_decode_kvq_mma.cuh - Quantized-cache decode on mma ------===//
//
// Split-K decode attention over a quantized cache (kv_quant.cuh) on tensor
// cores. attention_decode_kvq.cuh spends ~40 instructions a lane per key on
// unpacking and f32 dot products and shuffles; here a warp takes 16 keys at
// a time (a tile), turns their cold rows into f16 in shared memory (a few
// f16x2 operations per pair of channels), and computes S = Q K^T and
// O += P V as mma.m16n8k16 with f32 accumulators, the GQA group's queries
// as rows 0..G-1 of the A operand. The cache is still read once, at its
// stored size.
//
// Per warp (cp.async, no block barrier): one pair of f16 K and V tiles and
// two cold areas.
//   * the next tile's cold rows (int8, or int4 two per byte) and scales are
//     copied into the other cold area while this tile is used;
//   * hot rows (FP16) are copied straight into the f16 tiles once the tile
//     before has read them;
//   * the warp writes the cold rows' levels into the same f16 tiles: they
//     come out of the bytes as f16 with the 1024 + level exponent trick, a
//     lop3 and one f16x2 operation per pair of channels (int4 chunks hold
//     channels c0 c4 c1 c5 c2 c6 c3 c7, which the queries and the output
//     follow). Keys are multiplied by their scales (sits.dequantize's
//     product, rounded once to f16); values stay levels, and their
//     per-token scales multiply the probabilities instead, one A operand
//     per scale group;
//   * rows of keys the query does not see are zeros (never NaN times a zero
//     weight).
// Cold or hot is decided per key exactly as attention_decode_kvq.cuh does
// (value j cold when past - j >= kHotWindow, key j when past - last(j) >=
// kHotWindow, last(j) the last token of j's per-channel block).
//
// The warps of a block take the split's tiles in turn, each with its own
// online softmax; the block merges them and writes its partial result,
// combined across splits as attention_decode.cuh does. The queries and
// the probabilities are rounded to f16 as the tensor-core prefill does
// (attention_prefill.cuh); the planner uses this kernel only for engines
// that compute in 16 bits.
//
// Launch: grid (kSplits, kv_heads, B), block kMmaDecodeThreads (8 warps),
// dynamic shared memory attentionDecodeKVQMmaSharedBytes(...).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_CUH
#define SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_CUH

#include "sits/attention_decode.cuh"
#include "sits/kv_quant.cuh"

namespace sits {

constexpr int kMmaDecodeKeys = 16; ///< keys per tile
constexpr int kMmaDecodeWarps = 8; ///< warps per block
constexpr int kMmaDecodeThreads = kMmaDecodeWarps * kWarpSize;
constexpr int kMmaDecodeColdStages = 2; ///< cold areas per warp

__host__ __device__ constexpr int roundUp16(int bytes) {
  return (bytes + 15) / 16 * 16;
}

/// Per-channel key-scale blocks one aligned tile of 16 keys can touch.
__host__ __device__ constexpr int mmaDecodeScaleSpan(int channelBlock) {
  return channelBlock % kMmaDecodeKeys == 0 ? 1
         : kMmaDecodeKeys % channelBlock == 0
             ? kMmaDecodeKeys / channelBlock
             : kMmaDecodeKeys / channelBlock + 2;
}

/// Copies kPieces 16-byte pieces from `src` to `dst`, a few per lane of
/// the warp, zeros for pieces from `valid` on.
template <int kPieces>
__device__ __forceinline__ void copyPiecesOfWarp(unsigned char *dst,
                                                 const unsigned char *src,
                                                 int valid, int lane) {
#pragma unroll
  for (int k = 0; k < (kPieces + kWarpSize - 1) / kWarpSize; ++k) {
    const int c = lane + k * kWarpSize;
    if (c < kPieces)
      copyAsync16<false>(dst + 16 * c, src + 16 * (c < valid ? c : 0),
                         c < valid);
  }
}

/// Bytes of one cold area: the cold K and V rows of a tile, the key scales
/// (per-channel blocks, or per-token words) and the value scales
/// (per-token words).
__host__ __device__ constexpr int mmaDecodeColdBytes(int headDim, int bits,
                                                     int groups,
                                                     bool perChannelKeys,
                                                     int channelBlock) {
  const int tokenScaleWords = kMmaDecodeKeys * groups / 2 + 1;
  const int keyScales = perChannelKeys
                            ? mmaDecodeScaleSpan(channelBlock) * headDim * 2
                            : tokenScaleWords * 4;
  return 2 * kMmaDecodeKeys * headDim * bits / 8 + roundUp16(keyScales) +
         roundUp16(tokenScaleWords * 4);
}

/// Bytes of one warp: f16 K and V tiles (rows padded by 16 bytes for
/// conflict-free ldmatrix) and kMmaDecodeColdStages cold areas.
/// KVQuantLaunches.cpp computes the same.
__host__ __device__ constexpr int mmaDecodeWarpBytes(int headDim, int bits,
                                                     int groups,
                                                     bool perChannelKeys,
                                                     int channelBlock) {
  return 2 * kMmaDecodeKeys * (headDim + 8) * 2 +
         kMmaDecodeColdStages * mmaDecodeColdBytes(headDim, bits, groups,
                                                   perChannelKeys,
                                                   channelBlock);
}

/// The kernel's dynamic shared memory: the warps' tiles, reused for the
/// merge of the warps' states and for the combine of the splits.
__host__ __device__ constexpr int
attentionDecodeKVQMmaSharedBytes(int headDim, int group, int bits, int groups,
                                 bool perChannelKeys, int channelBlock,
                                 int splits) {
  const int warps = kMmaDecodeWarps;
  const int tiles = warps * mmaDecodeWarpBytes(headDim, bits, groups,
                                               perChannelKeys, channelBlock);
  const int merge = 4 * warps * group * decodePartialFloats(headDim);
  const int combine = 4 * group * (splits + 1);
  const int most = tiles > merge ? tiles : merge;
  return most > combine ? most : combine;
}

/// The channel at position `position` (0..7) of a tile's 16-byte chunk.
/// int4 levels come out of a word as pairs (c_j, c_{j+4}) cheapest, so with
/// int4 chunks hold c0 c4 c1 c5 c2 c6 c3 c7 (the queries and the output
/// follow the same order); int8 chunks keep channel order.
template <int kBits>
__host__ __device__ constexpr int chunkChannel(int position) {
  return kBits == 4 ? (position % 2 ? position / 2 + 4 : position / 2)
                    : position;
}

/// Eight f16 values (or pairs of scales) in channel order, as four words,
/// put in chunk order.
template <int kBits>
__device__ __forceinline__ uint4 toChunkOrder(const uint4 &natural) {
  if constexpr (kBits != 4)
    return natural;
  return make_uint4(bytePermute(natural.x, natural.z, 0x5410u),
                    bytePermute(natural.x, natural.z, 0x7632u),
                    bytePermute(natural.y, natural.w, 0x5410u),
                    bytePermute(natural.y, natural.w, 0x7632u));
}

/// Eight cold levels (int4: one word; int8: two) as exact f16 pairs in
/// chunk order: the level under the exponent of 1024 (the sign bit flipped,
/// as level + 8 or + 128), then one f16x2 subtraction (or, for int4 nibbles
/// at bits 4-7, a multiply-add by 1/16) per pair.
template <int kBits>
__device__ __forceinline__ void chunkLevels(const u32 *words, u32 *out) {
  if constexpr (kBits == 4) {
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
      const u32 w = words[0] >> (4 * j);
      out[j] = subHalf2((w & 0x000f000fu) ^ 0x64086408u, 0x64086408u);
      out[j + 1] =
          fmaHalf2((w & 0x00f000f0u) ^ 0x64806480u, 0x2c002c00u, 0xd480d480u);
    }
  } else {
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const u32 biased = words[w] ^ 0x80808080u;
      out[2 * w] =
          subHalf2(bytePermute(biased, 0x64646464u, 0x4140u), 0x64806480u);
      out[2 * w + 1] =
          subHalf2(bytePermute(biased, 0x64646464u, 0x4342u), 0x64806480u);
    }
  }
}

/// Config: attention_decode_kvq.cuh's (Cache must be F16; kHeads / kKvHeads
/// at most 8; head_dim a multiple of 16 up to 128 whose cold rows are whole
/// 16-byte pieces; kGroup a multiple of 8).
template <class Cfg>
__device__ void attentionDecodeKVQMma(
    const float *__restrict__ query, const u16 *__restrict__ keyHot,
    const u16 *__restrict__ valueHot, const signed char *__restrict__ keyCold,
    const u16 *__restrict__ keyScales,
    const signed char *__restrict__ valueCold,
    const u16 *__restrict__ valueScales, float *__restrict__ out,
    float *__restrict__ partial, int *__restrict__ counters,
    const int *__restrict__ pastLengths, const int *__restrict__ stepLengths) {
  typedef typename Cfg::Cache C;
  constexpr int G = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int D = Cfg::kHeadDim;
  constexpr int T = kMmaDecodeKeys;
  constexpr int kWarps = kMmaDecodeWarps;
  constexpr int kStride = D + 8; // halves per f16 tile row
  constexpr int kPieces = D / 8; // 16-byte pieces of an f16 row
  constexpr int kRowBytes = Cfg::kRowBytes;
  constexpr int kChunkBytes = 8 * Cfg::kBits / 8; // 8 cold channels
  constexpr int kPartial = decodePartialFloats(D);
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
  constexpr int kGroups = Cfg::kGroups, CB = Cfg::kChannelBlock;
  constexpr float kValueLift = 256.0f;
  constexpr int kTokenScaleWords = T * kGroups / 2 + 1;
  constexpr int kKeyScaleBytes = Cfg::kPerChannelKeys
                                     ? mmaDecodeScaleSpan(CB) * D * 2
                                     : kTokenScaleWords * 4;
  constexpr int kColdBytes =
      mmaDecodeColdBytes(D, Cfg::kBits, kGroups, Cfg::kPerChannelKeys, CB);
  constexpr int kWarpBytes =
      mmaDecodeWarpBytes(D, Cfg::kBits, kGroups, Cfg::kPerChannelKeys, CB);
  static_assert(!C::kIsBf16 && C::kBytes == 2, "an f16 hot cache");
  static_assert(G >= 1 && G <= 8, "the group's queries fill rows 0..7");
  static_assert(D % 16 == 0 && D <= 128, "head_dim a multiple of 16, <= 128");
  static_assert(kRowBytes % 16 == 0, "cold rows of whole 16-byte pieces");
  static_assert(Cfg::kGroup % 8 == 0, "8 channels share a token scale");
  static_assert(kWarpSize % kPieces == 0,
                "a lane keeps its channels from row to row");

  SITS_DYNAMIC_SHARED(unsigned char, shared);
  const float kNegInf = __int_as_float(0xff800000u);
  const int split = blockIdx.x, kvHead = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int past = pastLengths[b];
  const bool padding = stepLengths[b] <= 0;

  const DecodeKeys keys = decodeKeysOf<Cfg>(past, padding, split);
  const int splitBegin = keys.splitBegin, splitEnd = keys.splitEnd;
  const int k0 = keys.k0, k1 = keys.k1;
  const bool active = keys.active;
  constexpr int N = Cfg::kHotWindow;
  const long seqHead = static_cast<long>(b) * Cfg::kKvHeads + kvHead;
  const long hotBase = seqHead * Cfg::kHotRows * D;
  const long coldBase = seqHead * Cfg::kCapacity * kRowBytes;
  auto keyIsCold = [&](int key) {
    return past - ((key / CB) * CB + CB - 1) >= N;
  };
  auto valueIsCold = [&](int key) { return past - key >= N; };
  float *myPartial =
      partial +
      ((static_cast<long>(b) * Cfg::kHeads + kvHead * G) * Cfg::kSplits) *
          kPartial;

  if (active) {
    // The warp's tiles: absolute tiles [tileBegin, tileEnd) in turn.
    const int tileBegin = k0 / T, tileEnd = (k1 + T - 1) / T;
    const int tiles =
        max(0, (tileEnd - tileBegin - warp + kWarps - 1) / kWarps);
    unsigned char *warpTiles = shared + warp * kWarpBytes;
    // The warp's f16 K and V tiles, then its cold areas: cold K, cold V,
    // key scales, value scales.
    u16 *const fKeys = reinterpret_cast<u16 *>(warpTiles);
    u16 *const fValues = fKeys + T * kStride;
    auto coldKeys = [&](int stage) {
      return warpTiles + 2 * T * kStride * 2 + stage * kColdBytes;
    };
    auto coldValues = [&](int stage) {
      return coldKeys(stage) + T * kRowBytes;
    };
    auto keyScaleArea = [&](int stage) {
      return coldValues(stage) + T * kRowBytes;
    };
    auto valueScaleArea = [&](int stage) {
      return keyScaleArea(stage) + roundUp16(kKeyScaleBytes);
    };
    // The first per-token scale word of a tile's rows [r0, r0 + T).
    auto firstScaleWord = [&](int r0) {
      return (seqHead * Cfg::kCapacity + r0) * kGroups / 2;
    };

    // Copies the 4-byte words [w0, w0 + count) of a per-token scale array
    // (count at most kTokenScaleWords).
    auto copyScaleWords = [&](unsigned char *dst, const u16 *scales, long w0,
                              int count) {
#pragma unroll
      for (int k = 0; k < (kTokenScaleWords + kWarpSize - 1) / kWarpSize; ++k) {
        const int c = lane + k * kWarpSize;
        if (c < count)
          copyAsyncSmall<4>(dst + 4 * c, scales + 2 * (w0 + c));
      }
    };
    constexpr int kColdPieces = T * kRowBytes / 16;

    // Tile i's cold rows and scales into cold area i % 2.
    auto issueCold = [&](int i) {
      if (i < tiles) {
        const int stage = i % kMmaDecodeColdStages;
        const int r0 = (tileBegin + warp + i * kWarps) * T;
        const int rows = min(T, Cfg::kCapacity - r0);
        const int first = max(r0, k0);
        const long coldAt = coldBase + static_cast<long>(r0) * kRowBytes;
        const long w0 = firstScaleWord(r0);
        const int words = static_cast<int>(
            ((seqHead * Cfg::kCapacity + r0 + rows) * kGroups + 1) / 2 - w0);
        // Cold keys and values form prefixes of the keys: the tile has any
        // iff its first visible key has.
        if (valueIsCold(first)) {
          copyPiecesOfWarp<kColdPieces>(
              coldValues(stage),
              reinterpret_cast<const unsigned char *>(valueCold + coldAt),
              rows * kRowBytes / 16, lane);
          copyScaleWords(valueScaleArea(stage), valueScales, w0, words);
        }
        if (keyIsCold(first)) {
          copyPiecesOfWarp<kColdPieces>(
              coldKeys(stage),
              reinterpret_cast<const unsigned char *>(keyCold + coldAt),
              rows * kRowBytes / 16, lane);
          if constexpr (Cfg::kPerChannelKeys) {
            const int blockA = r0 / CB, blockB = (r0 + rows - 1) / CB;
            copyPiecesOfWarp<mmaDecodeScaleSpan(CB) * kPieces>(
                keyScaleArea(stage),
                reinterpret_cast<const unsigned char *>(
                    keyScales + (seqHead * Cfg::kScaleBlocks + blockA) * D),
                (blockB - blockA + 1) * kPieces, lane);
          } else {
            copyScaleWords(keyScaleArea(stage), keyScales, w0, words);
          }
        }
      }
      copyAsyncCommit();
    };

    // Tile i's hot rows straight into the f16 tiles (none when its last
    // visible key and value are cold).
    auto issueHot = [&](int i) {
      if (i < tiles) {
        const int r0 = (tileBegin + warp + i * kWarps) * T;
        const int last = min(r0 + T, k1) - 1;
        if (!(keyIsCold(last) && valueIsCold(last))) {
          for (int c = lane; c < T * kPieces; c += kWarpSize) {
            const int row = c / kPieces, piece = c % kPieces, key = r0 + row;
            if (key < k0 || key >= k1)
              continue;
            const long hot = hotBase +
                             static_cast<long>(key % Cfg::kHotRows) * D +
                             piece * 8;
            const int slot = row * kStride + piece * 8;
            if (!keyIsCold(key))
              copyAsync16<false>(fKeys + slot, keyHot + hot, true);
            if (!valueIsCold(key))
              copyAsync16<false>(fValues + slot, valueHot + hot, true);
          }
        }
      }
      copyAsyncCommit();
    };

    // Cold rows of a waited-for stage into its f16 tiles; zeros for keys
    // the query does not see. A lane keeps its 8 channels from row to row.
    auto dequantizeTile = [&](int i) {
      const int stage = i % kMmaDecodeColdStages;
      const int r0 = (tileBegin + warp + i * kWarps) * T;
      // Per-token scales of row r0 + row: from u16 `parity + row * kGroups`
      // of a stage's scale words.
      const int parity =
          static_cast<int>(((seqHead * Cfg::kCapacity + r0) * kGroups) & 1);
      const u16 *keyScale = reinterpret_cast<const u16 *>(keyScaleArea(stage));
      const u16 *valueScale =
          reinterpret_cast<const u16 *>(valueScaleArea(stage));
      const int piece = lane % kPieces, d = piece * 8;
      const int groupOf = parity + d / Cfg::kGroup;
      // Every row of the tile visible and cold: no per-row tests.
      const bool allCold = r0 >= k0 && r0 + T <= k1 && keyIsCold(r0 + T - 1) &&
                           valueIsCold(r0 + T - 1);
      // A cold chunk's levels, times `scales` (chunk order) when given.
      auto dequantizeRow = [&](const unsigned char *cold, const u32 *scales,
                               u16 *target) {
        u32 words[2], pairs[4];
        words[0] = *reinterpret_cast<const u32 *>(cold);
        if constexpr (kChunkBytes == 8)
          words[1] = *reinterpret_cast<const u32 *>(cold + 4);
        chunkLevels<Cfg::kBits>(words, pairs);
        if (scales) {
#pragma unroll
          for (int p = 0; p < 4; ++p)
            pairs[p] = mulHalf2(pairs[p], scales[p]);
        }
        *reinterpret_cast<uint4 *>(target) =
            make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
      };
      // The key scales of row `row`'s chunk, in chunk order.
      auto keyScales4 = [&](int row, u32 *scales) {
        if constexpr (Cfg::kPerChannelKeys) {
          const uint4 s =
              toChunkOrder<Cfg::kBits>(*reinterpret_cast<const uint4 *>(
                  keyScale + ((r0 + row) / CB - r0 / CB) * D + d));
          scales[0] = s.x;
          scales[1] = s.y;
          scales[2] = s.z;
          scales[3] = s.w;
        } else {
          const u32 s = keyScale[groupOf + row * kGroups];
          scales[0] = scales[1] = scales[2] = scales[3] = s | (s << 16);
        }
      };
      // Per-channel blocks of whole tiles: one set of scales per tile.
      constexpr bool kTileScales = Cfg::kPerChannelKeys && CB % T == 0;
      u32 tileScales[4];
      if (kTileScales)
        keyScales4(0, tileScales);
      // Row `row` of the tile; `checked`: test visibility and coldness, and
      // put hot rows in chunk order. Values stay levels: their scales are
      // applied to the probabilities.
      auto dequantizeRowPair = [&](int row, bool checked) {
        const int key = r0 + row;
        u16 *keyTarget = fKeys + row * kStride + d;
        u16 *valueTarget = fValues + row * kStride + d;
        const int coldAt = row * kRowBytes + d * Cfg::kBits / 8;
        if (checked && (key < k0 || key >= k1)) {
          *reinterpret_cast<uint4 *>(keyTarget) = make_uint4(0u, 0u, 0u, 0u);
          *reinterpret_cast<uint4 *>(valueTarget) = make_uint4(0u, 0u, 0u, 0u);
          return;
        }
        if (!checked || keyIsCold(key)) {
          u32 scales[4];
          if (!kTileScales)
            keyScales4(row, scales);
          dequantizeRow(coldKeys(stage) + coldAt,
                        kTileScales ? tileScales : scales, keyTarget);
        } else if (Cfg::kBits == 4) {
          uint4 *chunk = reinterpret_cast<uint4 *>(keyTarget);
          *chunk = toChunkOrder<Cfg::kBits>(*chunk);
        }
        if (!checked || valueIsCold(key)) {
          dequantizeRow(coldValues(stage) + coldAt, nullptr, valueTarget);
        } else if (Cfg::kBits == 4) {
          uint4 *chunk = reinterpret_cast<uint4 *>(valueTarget);
          *chunk = toChunkOrder<Cfg::kBits>(*chunk);
        }
      };
      constexpr int kRowsPerPass = kWarpSize / kPieces;
      if (allCold) {
#pragma unroll
        for (int k = 0; k < T / kRowsPerPass; ++k)
          dequantizeRowPair(lane / kPieces + k * kRowsPerPass, false);
      } else {
        for (int row = lane / kPieces; row < T; row += kRowsPerPass)
          dequantizeRowPair(row, true);
      }
    };

    // The group's queries as A fragments (rows 0..G-1; rows 8..15 unused),
    // rounded to f16, their channels in the tiles' chunk order.
    const int channel0 = chunkChannel<Cfg::kBits>(2 * t);
    const int channel1 = chunkChannel<Cfg::kBits>(2 * t + 1);
    u32 qf[D / 16][2];
#pragma unroll
    for (int s = 0; s < D / 16; ++s) {
      qf[s][0] = qf[s][1] = 0u;
      if (g < G) {
        const float *row = query + static_cast<long>(b) * kWidth +
                           (kvHead * G + g) * D + s * 16;
        qf[s][0] = packPair<C>(row[channel0], row[channel1]);
        qf[s][1] = packPair<C>(row[8 + channel0], row[8 + channel1]);
      }
    }
    float rowMax = kNegInf, rowSum = 0.0f; // row g; the sum this lane's share
    // O[g][n * 8 + 2t + {0, 1}] in o[n][0..1]; o[n][2..3] (row g + 8) stay
    // zero, as the A operand's rows 8..15 are.
    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    // Tile i + 1's cold rows load while tile i is dequantized and used;
    // its hot rows after tile i's f16 tiles are read.
    issueCold(0);
    issueHot(0);
    for (int i = 0; i < tiles; ++i) {
      issueCold(i + 1);
      copyAsyncWait<1>();
      __syncwarp(); // every lane's copies of tile i are in place
      dequantizeTile(i);
      __syncwarp(); // the f16 tiles are whole
      const u16 *kt = fKeys;
      const u16 *vt = fValues;
      const int r0 = (tileBegin + warp + i * kWarps) * T;

      // S = Q K^T for the tile's 16 keys (two n tiles of 8).
      float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int s = 0; s < D / 16; ++s) {
        u32 kf[4];
        const int row = lane % 8 + 8 * (lane / 16);
        loadMatrix4(kt + row * kStride + s * 16 + 8 * ((lane / 8) % 2), kf);
        mma16816<C>(sc[0], qf[s][0], 0u, qf[s][1], 0u, kf[0], kf[1]);
        mma16816<C>(sc[1], qf[s][0], 0u, qf[s][1], 0u, kf[2], kf[3]);
      }
      // Row g's scores (sc[n][0..1]: keys r0 + 8n + 2t + {0, 1}) and its
      // online softmax; the row's four lanes hold the tile between them.
      float tileMax = kNegInf;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = r0 + 8 * n + 2 * t + e;
          float value = Cfg::kScale * sc[n][e];
          if constexpr (Cfg::kSoftcap > 0.0f)
            value = Cfg::kSoftcap * tanhf(value / Cfg::kSoftcap);
          sc[n][e] = key >= k0 && key < k1 ? value : kNegInf;
          tileMax = fmaxf(tileMax, sc[n][e]);
        }
      tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 1));
      tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 2));
      const float newMax = fmaxf(rowMax, tileMax);
      const float rescale = rowMax == kNegInf || newMax == kNegInf
                                ? (newMax == kNegInf ? 1.0f : 0.0f)
                                : expf(rowMax - newMax);
      rowMax = newMax;
      rowSum *= rescale;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = sc[n][e] == kNegInf ? 0.0f : expf(sc[n][e] - rowMax);
          sc[n][e] = p;
          rowSum += p;
        }
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= rescale;
        o[n][1] *= rescale;
      }
      // O += P V: the S accumulators are the A fragment of the 16 keys.
      // Cold values are levels in the tiles: each scale group's A fragment
      // carries the keys' value scales (kValueLift keeps small products of
      // int8 scales out of f16's subnormals; the output divides it out).
      const u16 *valueScale = reinterpret_cast<const u16 *>(
          valueScaleArea(i % kMmaDecodeColdStages));
      const int parity =
          static_cast<int>(((seqHead * Cfg::kCapacity + r0) * kGroups) & 1);
      u32 a0[kGroups], a2[kGroups];
#pragma unroll
      for (int group = 0; group < kGroups; ++group) {
        float lifted[2][2];
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int row = 8 * n + 2 * t + e, key = r0 + row;
            float factor = kValueLift;
            if (key >= k0 && key < k1 && valueIsCold(key))
              factor *= halfToFloat(valueScale[parity + row * kGroups + group]);
            lifted[n][e] = sc[n][e] * factor;
          }
        a0[group] = packPair<C>(lifted[0][0], lifted[0][1]);
        a2[group] = packPair<C>(lifted[1][0], lifted[1][1]);
      }
#pragma unroll
      for (int dj = 0; dj < D / 16; ++dj) {
        u32 vf[4];
        const int row = lane % 8 + 8 * ((lane / 8) % 2);
        loadMatrix4Transposed(vt + row * kStride + dj * 16 + 8 * (lane / 16),
                              vf);
        const int group0 = 16 * dj / Cfg::kGroup; // constant once unrolled
        const int group1 = (16 * dj + 8) / Cfg::kGroup;
        mma16816<C>(o[2 * dj], a0[group0], 0u, a2[group0], 0u, vf[0], vf[1]);
        mma16816<C>(o[2 * dj + 1], a0[group1], 0u, a2[group1], 0u, vf[2],
                    vf[3]);
      }
      __syncwarp(); // the f16 tiles are read before issueHot refills them
      issueHot(i + 1);
    }
    copyAsyncWait<0>();
    rowSum += __shfl_xor_sync(kFullMask, rowSum, 1);
    rowSum += __shfl_xor_sync(kFullMask, rowSum, 2);
    __syncthreads(); // every warp is done with its stages
    // [warp][head][values, max, sum], then the block's partial result.
    float *merge = reinterpret_cast<float *>(shared);
    if (g < G) {
      float *slot = merge + (warp * G + g) * kPartial;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        slot[n * 8 + channel0] = o[n][0] / kValueLift;
        slot[n * 8 + channel1] = o[n][1] / kValueLift;
      }
      if (t == 0) {
        slot[D] = rowMax;
        slot[D + 1] = rowSum;
      }
    }
    __syncthreads();
    mergeSplitPartial<Cfg, G, kWarps, kMmaDecodeThreads>(merge, myPartial,
                                                         split);
  }
  combineSplits<Cfg, kMmaDecodeThreads>(shared, padding, splitBegin, splitEnd,
                                        myPartial, counters, out);
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_CUH
