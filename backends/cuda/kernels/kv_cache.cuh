//===- kv_cache.cuh - Writing a step's keys and values into the cache -----===//
//
// Blocks (t, y) for the token of row t (token i of sequence b, StepRows),
// at position p = past_lengths[b] + i; the tileGridDim().y blocks of a token
// share its elements (a token's row is short, and one block walking it would
// wait on one load after another). Keys (rotated here when their RoPE fused
// into this kernel) and values go to row p of sequence b in this layer's slice
// of the cache, `[max_batch, kv_heads, capacity, head_dim]` or a paged pool
// (KVRows in common.cuh), in the cache's storage type.
// Padding tokens (i >= step_lengths[b]) write nothing. When the query's RoPE
// fuses here too, the rotated query goes to its activation buffer (for
// every token: attention skips padding rows itself).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_KV_CACHE_CUH
#define SITS_KERNELS_KV_CACHE_CUH

#include "sits/common.cuh"
#include "sits/rope.cuh"

namespace sits {

/// Config: Cache (F32/F16/BF16), kKvHeads, kHeadDim, kCapacity, kHotRows
/// (0, or the ring rows of a quantized cache's hot part), kThreads,
/// kKeyRope and KeyRope (kHeads, kHeadDim, kRotary, kInterleaved,
/// kTableRows), kQueryRope and QueryRope; a paged cache adds kBlockTokens
/// and kMaxBlocks, and `blockTable`. Pointers of an absent part are null
/// and never read.
template <class Cfg>
__device__ void
appendKV(const float *SITS_RESTRICT key, const float *SITS_RESTRICT value,
         const float *SITS_RESTRICT keyTable,
         typename Cfg::Cache::Storage *SITS_RESTRICT keyCache,
         typename Cfg::Cache::Storage *SITS_RESTRICT valueCache,
         const float *SITS_RESTRICT query,
         const float *SITS_RESTRICT queryTable, float *SITS_RESTRICT queryOut,
         const int *SITS_RESTRICT pastLengths, StepRows rows,
         const int *SITS_RESTRICT blockTable = nullptr) {
  typedef typename Cfg::Cache C;
  constexpr long kWidth = Cfg::kKvHeads * Cfg::kHeadDim;
  const int t = tileIndex().x;
  int i;
  const int b = rows.locate(t, &i);
  const int first = tileIndex().y * Cfg::kThreads + threadIdx.x;
  const int stride = tileGridDim().y * Cfg::kThreads;

  if constexpr (Cfg::kQueryRope) {
    typedef typename Cfg::QueryRope Q;
    constexpr long kQueryWidth = Q::kHeads * Q::kHeadDim;
    ropeRow<Q, Cfg::kThreads>(query + t * kQueryWidth,
                              ropeTableRow<Q>(queryTable, pastLengths, b, i),
                              queryOut + t * kQueryWidth, first, stride);
  }

  const int position = positionOf(pastLengths, b, i);
  if (i >= rows.real(b) || position < 0 || position >= Cfg::kCapacity)
    return;
  const float *keyRow = key + t * kWidth;
  const float *valueRow = value + t * kWidth;
  const float *tableRow = nullptr;
  if constexpr (Cfg::kKeyRope)
    tableRow = ropeTableRow<typename Cfg::KeyRope>(keyTable, pastLengths, b, i);
  for (int e = first; e < kWidth; e += stride) {
    const int head = e / Cfg::kHeadDim, d = e % Cfg::kHeadDim;
    float k = keyRow[e];
    if constexpr (Cfg::kKeyRope)
      k = ropeElement<typename Cfg::KeyRope>(keyRow + head * Cfg::kHeadDim, d,
                                             tableRow);
    // A quantized cache (kHotRows > 0) keeps the newest rows in a ring of
    // its own per sequence, paged cache or not.
    long slot;
    if constexpr (Cfg::kHotRows > 0)
      slot = HotRing<Cfg>(nullptr, b, head).at(position % Cfg::kHotRows) + d;
    else
      slot = KVRows<Cfg>(blockTable, b, head).at(position) + d;
    keyCache[slot] = C::store(k);
    valueCache[slot] = C::store(valueRow[e]);
  }
}

} // namespace sits

#endif // SITS_KERNELS_KV_CACHE_CUH
