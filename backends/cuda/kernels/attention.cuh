//===- attention.cuh - Attention over the KV cache, online softmax --------===//
//
// A block computes the rows of kQueryTokens consecutive tokens of one
// sequence times the kGroup query heads that share one KV head (GQA: the
// keys and values are read once for the whole group). Keys are visited in
// tiles of kKeyTile: the tile's K and V are widened to f32 in shared memory,
// every row scores every key (scale, optional softcap), and the running
// maximum, denominator and weighted sum of values are rescaled as a larger
// maximum appears (online softmax), so any context length fits in a fixed
// amount of shared memory.
//
// Visibility (sits.attention with past_len and bottom-right causality):
// token i of sequence b at position p = past_lengths[b] + i sees the keys
// j <= p (and j > p - window with a sliding window). Rows of padding tokens
// (i >= step_lengths[b]) are written as zeros and read no keys.
//
// Launch: grid = (ceil(S / kQueryTokens), kv_heads, B), block kThreads,
// dynamic shared memory kSharedBytes.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_CUH
#define SITS_KERNELS_ATTENTION_CUH

#include "sits/common.cuh"

namespace sits {

/// Shared-memory floats one block uses (also computed by the code
/// generator, which checks it against the device limit).
template <int kRows, int kHeadDim, int kKeyTile>
__host__ __device__ constexpr int attentionSharedFloats() {
  return kRows * kHeadDim +          // queries
         kKeyTile * (kHeadDim + 1) + // keys (padded: no bank conflicts)
         kKeyTile * kHeadDim +       // values
         kRows * kKeyTile +          // scores, then probabilities
         3 * kRows;                  // running max, sum, rescale factor
}

/// Stores the block's query rows (row r: token i0 + r / G, head
/// kvHead * G + r % G; zeros for padding tokens) into `qs` and starts every
/// row's running maximum and sum.
template <class Cfg, int kRows>
__device__ __forceinline__ void
loadTileQueries(const float *SITS_RESTRICT query, float *qs, float *rowMax,
                float *rowSum, int kvHead, int i0, int iEnd, long firstRow) {
  constexpr int kGroup = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int D = Cfg::kHeadDim;
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
  const int tid = threadIdx.x;
  for (int idx = tid; idx < kRows * D; idx += Cfg::kThreads) {
    const int r = idx / D, d = idx % D;
    const int i = i0 + r / kGroup, head = kvHead * kGroup + r % kGroup;
    qs[idx] = i < iEnd ? query[(firstRow + i) * kWidth + head * D + d] : 0.0f;
  }
  for (int r = tid; r < kRows; r += Cfg::kThreads) {
    rowMax[r] = __int_as_float(0xff800000u);
    rowSum[r] = 0.0f;
  }
}

/// Online softmax over one tile of scores `ps` ([kRows, kTile]), one warp
/// per row: turns the scores into probabilities against the row's new
/// maximum, adds them to the row's sum (rescaled), and leaves the factor
/// that rescales what the row accumulated so far in `rowScale`.
template <int kRows, int kTile, int kWarps>
__device__ __forceinline__ void tileSoftmax(float *ps, float *rowMax,
                                            float *rowSum, float *rowScale,
                                            int warp, int lane) {
  const float kNegInf = __int_as_float(0xff800000u);
  for (int r = warp; r < kRows; r += kWarps) {
    float tileMax = kNegInf;
    for (int j = lane; j < kTile; j += kWarpSize)
      tileMax = fmaxf(tileMax, ps[r * kTile + j]);
    tileMax = warpMax(tileMax);
    const float oldMax = rowMax[r];
    const float newMax = fmaxf(oldMax, tileMax);
    float sum = 0.0f, rescale = 1.0f;
    if (newMax == kNegInf) {
      for (int j = lane; j < kTile; j += kWarpSize)
        ps[r * kTile + j] = 0.0f;
    } else {
      rescale = oldMax == kNegInf ? 0.0f : expf(oldMax - newMax);
      for (int j = lane; j < kTile; j += kWarpSize) {
        const float score = ps[r * kTile + j];
        const float p = score == kNegInf ? 0.0f : expf(score - newMax);
        ps[r * kTile + j] = p;
        sum += p;
      }
    }
    sum = warpSum(sum);
    if (lane == 0) {
      rowSum[r] = rowSum[r] * rescale + sum;
      rowMax[r] = newMax;
      rowScale[r] = rescale;
    }
  }
}

/// Writes this thread's accumulated outputs divided by their rows' sums
/// (zeros for padding tokens and rows that saw no key).
template <class Cfg, int kRows, int kAccPerThread>
__device__ __forceinline__ void
storeTileRows(const float (&acc)[kAccPerThread], const float *rowSum,
              float *SITS_RESTRICT out, int kvHead, int i0, int iEnd,
              long firstRow, int ownedRows) {
  constexpr int kGroup = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int D = Cfg::kHeadDim;
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
  for (int u = 0; u < kAccPerThread; ++u) {
    const int idx = threadIdx.x + u * Cfg::kThreads;
    if (idx >= kRows * D)
      break;
    const int r = idx / D, d = idx % D;
    const int i = i0 + r / kGroup, head = kvHead * kGroup + r % kGroup;
    if (i >= ownedRows)
      break; // past the chunk's padding, or another sequence's rows
    const float sum = rowSum[r];
    out[(firstRow + i) * kWidth + head * D + d] =
        i < iEnd && sum > 0.0f ? acc[u] / sum : 0.0f;
  }
}

/// Config: Cache, kHeads, kKvHeads, kHeadDim, kQueryTokens, kKeyTile,
/// kThreads, kCapacity, kScale, kSoftcap (0: none), kWindow (0: none),
/// kSharedBytes; a paged cache adds kBlockTokens and kMaxBlocks, and
/// `blockTable`.
template <class Cfg>
__device__ void
attention(const float *SITS_RESTRICT query,
          const typename Cfg::Cache::Storage *SITS_RESTRICT keyCache,
          const typename Cfg::Cache::Storage *SITS_RESTRICT valueCache,
          float *SITS_RESTRICT out, const int *SITS_RESTRICT pastLengths,
          StepRows steps, const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Cache C;
  constexpr int kGroup = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int kRows = Cfg::kQueryTokens * kGroup;
  constexpr int D = Cfg::kHeadDim;
  constexpr int kTile = Cfg::kKeyTile;
  constexpr int kKeyStride = D + 1;
  constexpr int kWarps = Cfg::kThreads / kWarpSize;
  constexpr int kAccPerThread = (kRows * D + Cfg::kThreads - 1) / Cfg::kThreads;
  static_assert(Cfg::kHeads % Cfg::kKvHeads == 0, "GQA groups are whole");
  static_assert(attentionSharedFloats<kRows, D, kTile>() * 4 <=
                    Cfg::kSharedBytes,
                "the launch gives enough shared memory");

  SITS_DYNAMIC_SHARED(float, smem);
  float *qs = smem;
  float *ks = qs + kRows * D;
  float *vs = ks + kTile * kKeyStride;
  float *ps = vs + kTile * D;
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
  const KVRows<Cfg> rows(blockTable, b, kvHead);

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
      const int j = idx / D, d = idx % D;
      float k = 0.0f, v = 0.0f;
      if (j0 + j < keyEnd) {
        const long slot = rows.at(j0 + j) + d;
        k = C::load(keyCache[slot]);
        v = C::load(valueCache[slot]);
      }
      ks[j * kKeyStride + d] = k;
      vs[j * D + d] = v;
    }
    syncTile();

    for (int idx = tid; idx < kRows * kTile; idx += Cfg::kThreads) {
      const int r = idx / kTile, j = idx % kTile;
      const int i = i0 + r / kGroup, key = j0 + j, position = past + i;
      const bool visible =
          i < iEnd && key < keyEnd && keyIsVisible<Cfg>(key, position);
      float score = kNegInf;
      if (visible) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d)
          dot += qs[r * D + d] * ks[j * kKeyStride + d];
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
      float a = acc[u] * rowScale[r];
      for (int j = 0; j < kTile; ++j)
        a += ps[r * kTile + j] * vs[j * D + d];
      acc[u] = a;
    }
  }
  syncTile();
  storeTileRows<Cfg, kRows>(acc, rowSum, out, kvHead, i0, iEnd, firstRow,
                            steps.owned(b));
}

} // namespace sits

#endif // SITS_KERNELS_ATTENTION_CUH
