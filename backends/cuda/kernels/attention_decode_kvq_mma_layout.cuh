//===- attention_decode_kvq_mma_layout.cuh - Its memory and operands ------===//
//
// The layout of attention_decode_kvq_mma.cuh's kernel: its tile and block
// sizes, its dynamic shared memory (also computed by KVQuantLaunches.cpp),
// and how a lane holds the words it loads and turns them into the f16
// pairs of its mma operands. See that file's comment for the algorithm.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_LAYOUT_CUH
#define SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_LAYOUT_CUH

#include "sits/attention_decode.cuh"

namespace sits {

constexpr int kMmaDecodeKeys = 16; ///< keys per tile
constexpr int kMmaDecodeWarps = 8; ///< warps per block
constexpr int kMmaDecodeThreads = kMmaDecodeWarps * kWarpSize;

/// Floats of the merge of the warps: [warp][head][channel] values, then
/// [warp][head] maxima, sums and weights.
__host__ __device__ constexpr int mmaDecodeMergeFloats(int headDim, int group) {
  return kMmaDecodeWarps * group * (headDim + 3);
}

/// Bytes a lane copies of a cold tile's values (4 keys, `groups` scale
/// groups of kGroupBytes / 8 each) and of their per-token scales (2 key
/// slots), when cp.async can copy them (pieces of 4, 8 or 16 bytes); 0 when
/// the values go through registers instead.
__host__ __device__ constexpr int
mmaDecodeValueCopyBytes(int headDim, int groupSize, int bits) {
  const int valueBytes = groupSize * bits / 64;
  const int groups = headDim / groupSize;
  const int scaleBytes = 2 * groups;
  const bool fits = (valueBytes == 4 || valueBytes == 8 || valueBytes == 16) &&
                    (scaleBytes == 4 || scaleBytes == 8 || scaleBytes == 16);
  return fits ? 4 * groups * valueBytes + 2 * scaleBytes : 0;
}

/// The kernel's dynamic shared memory: the merge of the warps' states
/// (reused for the combine of the splits), then the ring of two tiles'
/// value copies per lane. KVQuantLaunches.cpp computes the same.
__host__ __device__ constexpr int
attentionDecodeKVQMmaSharedBytes(int headDim, int group, int groupSize,
                                 int bits) {
  const int merge = 4 * mmaDecodeMergeFloats(headDim, group);
  const int combine = combineSharedBytes(kMmaDecodeThreads, group, headDim);
  return (merge > combine ? merge : combine) +
         2 * kMmaDecodeThreads *
             mmaDecodeValueCopyBytes(headDim, groupSize, bits);
}

/// Where channel `channel` of head `head` sits in a warp's merge row: the
/// heads 2t, 2t + 1 of lane (g, t) would put a half-warp's 8-byte stores
/// in 4 banks' worth of rows (a 4-way conflict); flipping bits 1-2 by the
/// lane's t spreads them over all 32 banks. Even channels stay even (the
/// stores are float2) and every 8-channel piece stays in place.
__host__ __device__ constexpr int mergeSwizzle(int channel, int head) {
  return channel ^ (head & 6);
}

/// The channel (of a lane's kGroup / 4 key channels in a group) of element
/// `e` of f16 pair `p`: int4 words give (c0, c4), (c1, c5), ... per 8
/// channels, int8 words (c0, c1), (c2, c3).
template <int kBits>
__host__ __device__ constexpr int keyPairChannel(int p, int e) {
  return kBits == 4 ? 8 * (p / 4) + p % 4 + 4 * e : 2 * p + e;
}

/// Eight f16 values (or scales) in channel order, as four words, put in the
/// pair order of keyPairChannel.
template <int kBits>
__device__ __forceinline__ uint4 toChunkOrder(const uint4 &natural) {
  if constexpr (kBits != 4)
    return natural;
  return make_uint4(bytePermute(natural.x, natural.z, 0x5410u),
                    bytePermute(natural.x, natural.z, 0x7632u),
                    bytePermute(natural.y, natural.w, 0x5410u),
                    bytePermute(natural.y, natural.w, 0x7632u));
}

/// kBytes (2, 4, 8 or 16) at `src`, aligned to them, as words (2 bytes in
/// the low half of words[0]).
template <int kBytes>
__device__ __forceinline__ void loadWords(const void *src, u32 *words) {
  if constexpr (kBytes == 16) {
    const uint4 v = *reinterpret_cast<const uint4 *>(src);
    words[0] = v.x;
    words[1] = v.y;
    words[2] = v.z;
    words[3] = v.w;
  } else if constexpr (kBytes == 8) {
    const uint2 v = *reinterpret_cast<const uint2 *>(src);
    words[0] = v.x;
    words[1] = v.y;
  } else if constexpr (kBytes == 4) {
    words[0] = *reinterpret_cast<const u32 *>(src);
  } else {
    words[0] = *reinterpret_cast<const u16 *>(src);
  }
}

/// kCount f16 values at `src` (in channel order, 16-byte aligned) as
/// kCount / 2 pairs in the order of keyPairChannel.
template <int kBits, int kCount>
__device__ __forceinline__ void halvesInPairOrder(const u16 *src, u32 *pairs) {
  static_assert(kCount % 8 == 0, "whole 16-byte pieces");
#pragma unroll
  for (int c = 0; c < kCount / 8; ++c) {
    const uint4 v =
        toChunkOrder<kBits>(*reinterpret_cast<const uint4 *>(src + 8 * c));
    pairs[4 * c] = v.x;
    pairs[4 * c + 1] = v.y;
    pairs[4 * c + 2] = v.z;
    pairs[4 * c + 3] = v.w;
  }
}

/// How a tile's keys are read: all visible and cold, all visible and hot
/// (f16 rows), or tested one by one.
enum MmaDecodeTile {
  kColdTile = 0,
  kHotTile = 1,
  kMixedTile = 2,
  kKeysHotTile = 3, ///< all visible, keys hot, values cold then hot
};

/// The cold words a lane reads for one tile (see the file comment of
/// attention_decode_kvq_mma.cuh).
template <int kGroups, int kKeyWords, int kValueWords> struct MmaDecodeWords {
  u32 keys[2][kGroups][kKeyWords];     ///< key slots g and g + 8
  u32 values[4][kGroups][kValueWords]; ///< keys 4t .. 4t + 3
  u32 keyScales[2][(kGroups + 1) / 2]; ///< per-token keys: f16 pairs
  u32 valueScales[2][(kGroups + 1) / 2];

  /// The f16 scale of group h in a row of packed pairs.
  __device__ __forceinline__ static u16 scaleOf(const u32 *pairs, int h) {
    return static_cast<u16>(pairs[h / 2] >> (16 * (h % 2)));
  }
};

/// The kGroups f16 scales at `src` (aligned to 4 bytes when kGroups is
/// even) as packed pairs.
template <int kGroups>
__device__ __forceinline__ void loadScales(const u16 *src, u32 *pairs) {
#pragma unroll
  for (int i = 0; i < kGroups / 2; ++i)
    pairs[i] = *reinterpret_cast<const u32 *>(src + 2 * i);
  if constexpr (kGroups % 2 != 0)
    pairs[kGroups / 2] = src[kGroups - 1];
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_DECODE_KVQ_MMA_LAYOUT_CUH
