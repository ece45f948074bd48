//===- attention_kvq.cuh - Attention over a quantized KV cache ------------===//
//
// attention.cuh's kernel (query tokens x GQA group per block, key tiles in
// shared memory, online softmax) over a quantized cache (kv_quant.cuh): each
// tile holds the hot (FP16/BF16 ring) and the cold (int8/int4 times its f16
// scale, widened to f32 as sits.dequantize does) copy of its keys and
// values, each loaded only when some row of the block reads it, and each
// row picks per key: query position p reads value j cold when p - j >=
// kHotWindow, key j cold when p - last(j) >= kHotWindow (last(j): the last
// token of j's per-channel block, j itself for per-token keys), as
// sits.attention's cold operands define. Prefill, and decode where the split
// kernel (attention_decode_kvq.cuh) does not apply.
//
// Launch: grid = (ceil(S / kQueryTokens), kv_heads, B), block kThreads,
// dynamic shared memory kSharedBytes.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_KVQ_CUH
#define SITS_KERNELS_ATTENTION_KVQ_CUH

#include "sits/attention.cuh"
#include "sits/kv_quant.cuh"

namespace sits {

/// Shared-memory floats one block uses: attention.cuh's, with a cold copy
/// of the tile's keys and values beside the hot one.
template <int kRows, int kHeadDim, int kKeyTile>
__host__ __device__ constexpr int attentionKVQSharedFloats() {
  return kRows * kHeadDim + 2 * kKeyTile * (kHeadDim + 1) +
         2 * kKeyTile * kHeadDim + kRows * kKeyTile + 3 * kRows;
}

/// Config: attention.cuh's (Cache is the hot part's type) and kBits,
/// kGroup, kGroups, kRowBytes, kHotWindow, kHotRows, kPerChannelKeys,
/// kChannelBlock, kScaleBlocks (kv_quant.cuh); a paged cache adds
/// kBlockTokens and kMaxBlocks, and `blockTable` (ColdRows).
template <class Cfg>
__device__ void
attentionKVQ(const float *SITS_RESTRICT query,
             const typename Cfg::Cache::Storage *SITS_RESTRICT keyHot,
             const typename Cfg::Cache::Storage *SITS_RESTRICT valueHot,
             const signed char *SITS_RESTRICT keyCold,
             const u16 *SITS_RESTRICT keyScales,
             const signed char *SITS_RESTRICT valueCold,
             const u16 *SITS_RESTRICT valueScales, float *SITS_RESTRICT out,
             const int *SITS_RESTRICT pastLengths, StepRows steps,
             const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Cache C;
  constexpr int kGroup = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int kRows = Cfg::kQueryTokens * kGroup;
  constexpr int D = Cfg::kHeadDim;
  constexpr int kTile = Cfg::kKeyTile;
  constexpr int kKeyStride = D + 1;
  constexpr int kWarps = Cfg::kThreads / kWarpSize;
  constexpr int kAccPerThread = (kRows * D + Cfg::kThreads - 1) / Cfg::kThreads;
  static_assert(Cfg::kHeads % Cfg::kKvHeads == 0, "GQA groups are whole");
  constexpr int N = Cfg::kHotWindow, CB = Cfg::kChannelBlock;
  static_assert(attentionKVQSharedFloats<kRows, D, kTile>() * 4 <=
                    Cfg::kSharedBytes,
                "the launch gives enough shared memory");

  SITS_DYNAMIC_SHARED(float, smem);
  float *qs = smem;
  float *ks = qs + kRows * D;
  float *kc = ks + kTile * kKeyStride;
  float *vs = kc + kTile * kKeyStride;
  float *vc = vs + kTile * D;
  float *ps = vc + kTile * D;
  float *rowMax = ps + kRows * kTile;
  float *rowSum = rowMax + kRows;
  float *rowScale = rowSum + kRows;

  const float kNegInf = __int_as_float(0xff800000u);
  const int b = tileIndex().z, kvHead = tileIndex().y;
  const int i0 = tileIndex().x * Cfg::kQueryTokens;
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int past = pastLengths[b];
  // Tokens [i0, iEnd) of this block are real; the rest are padding.
  const int iEnd = min(i0 + Cfg::kQueryTokens, steps.real(b));
  const long firstRow = steps.first(b);
  const long seqHead = static_cast<long>(b) * Cfg::kKvHeads + kvHead;
  const long hotBase = seqHead * Cfg::kHotRows * D;
  const ColdRows<Cfg> coldRows(blockTable, b, kvHead);
  // Positions of the block's first and last real rows: key j is read hot by
  // some row when pLo - j < N (per-channel keys: j's block's last token),
  // and cold by some row when pHi - j >= N.
  const int pLo = past + i0, pHi = past + iEnd - 1;

  loadTileQueries<Cfg, kRows>(query, qs, rowMax, rowSum, kvHead, i0, iEnd,
                              firstRow);
  float acc[kAccPerThread];
  for (int u = 0; u < kAccPerThread; ++u)
    acc[u] = 0.0f;

  // Keys any row of the block may see: [keyBegin, keyEnd).
  const int keyEnd = min(past + iEnd, Cfg::kCapacity);
  const int keyBegin =
      Cfg::kWindow > 0 ? max(0, past + i0 - Cfg::kWindow + 1) : 0;
  for (int j0 = keyBegin; j0 < keyEnd; j0 += kTile) {
    syncTile(); // the previous tile is consumed (and qs is stored)
    for (int idx = tid; idx < kTile * D; idx += Cfg::kThreads) {
      const int j = idx / D, d = idx % D, key = j0 + j;
      float kh = 0.0f, kq = 0.0f, vh = 0.0f, vq = 0.0f;
      if (key < keyEnd) {
        const int last = (key / CB) * CB + CB - 1;
        const long hot =
            hotBase + static_cast<long>(key % Cfg::kHotRows) * D + d;
        const long coldRow = coldRows.row(key);
        const long tokenScale = coldRows.tokenScale(key) + d / Cfg::kGroup;
        if (pLo - last < N)
          kh = C::load(keyHot[hot]);
        if (pHi - last >= N) {
          const float s =
              halfToFloat(Cfg::kPerChannelKeys
                              ? keyScales[coldRows.channelScale(key / CB) + d]
                              : keyScales[tokenScale]);
          kq = s *
               static_cast<float>(coldLevel<Cfg::kBits>(keyCold + coldRow, d));
        }
        if (pLo - key < N)
          vh = C::load(valueHot[hot]);
        if (pHi - key >= N)
          vq =
              halfToFloat(valueScales[tokenScale]) *
              static_cast<float>(coldLevel<Cfg::kBits>(valueCold + coldRow, d));
      }
      ks[j * kKeyStride + d] = kh;
      kc[j * kKeyStride + d] = kq;
      vs[j * D + d] = vh;
      vc[j * D + d] = vq;
    }
    syncTile();

    for (int idx = tid; idx < kRows * kTile; idx += Cfg::kThreads) {
      const int r = idx / kTile, j = idx % kTile;
      const int i = i0 + r / kGroup, key = j0 + j, position = past + i;
      const bool visible =
          i < iEnd && key < keyEnd && keyIsVisible<Cfg>(key, position);
      float score = kNegInf;
      if (visible) {
        const int last = (key / CB) * CB + CB - 1;
        const float *kr = (position - last >= N ? kc : ks) + j * kKeyStride;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d)
          dot += qs[r * D + d] * kr[d];
        score = attentionScore<Cfg>(dot);
      }
      ps[idx] = score;
    }
    syncTile();

    tileSoftmax<kRows, kTile, kWarps>(ps, rowMax, rowSum, rowScale, warp, lane);
    syncTile();

    for (int u = 0; u < kAccPerThread; ++u) {
      const int idx = tid + u * Cfg::kThreads;
      if (idx >= kRows * D)
        break;
      const int r = idx / D, d = idx % D;
      // Values j <= coldEnd are read cold by this row.
      const int coldEnd = past + i0 + r / kGroup - N;
      float a = acc[u] * rowScale[r];
      for (int j = 0; j < kTile; ++j)
        a += ps[r * kTile + j] * (j0 + j <= coldEnd ? vc : vs)[j * D + d];
      acc[u] = a;
    }
  }
  syncTile();
  storeTileRows<Cfg, kRows>(acc, rowSum, out, kvHead, i0, iEnd, firstRow,
                            steps.owned(b));
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_KVQ_CUH
