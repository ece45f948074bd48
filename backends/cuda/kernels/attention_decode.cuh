//===- attention_decode.cuh - Split-K decode attention (flash decoding) ---===//
//
// One query token per sequence reads its whole cache, so decode attention
// is bound by reading the cache once. The keys of a sequence are split in
// blocks of kSplitKeys (a constant of the engine, so that the result does
// not depend on the batch or the length): grid = (kSplits, kv_heads, B).
// Each block reads its keys' K and V rows once for all kGroup query heads
// of its KV head (GQA), and keeps per head a running maximum, denominator
// and weighted sum of values (online softmax).
//
// Inside a block, kLanesPerKey = head_dim / 8 lanes share a key (16 bytes,
// 8 dimensions, each; the dot products finish with shuffles), and the
// block's key groups take the keys in turn, kUnroll at a time, one maximum
// rescale per step. Keys and values come by cp.async into each lane's own
// slots of a ring of kStages steps (no barrier: a lane reads only what it
// copied), so several steps are in flight while the lane computes.
//
// The key groups merge in shared memory; the block writes its partial
// result (values, max, sum) to `partial`, and the last block of a (sequence,
// KV head) to arrive — counted in `counters`, which it resets — combines
// the partials into `out`. The combine runs after the slowest block, so
// its round trips to L2 are the kernel's tail: a few warps per head each
// load a batch of splits' rows (values, max and sum) at once and fold them
// into one online-softmax state, with one exponential a lane and
// shuffles; the warps' states then merge in shared memory. At the 8B shape
// (33 splits) that is one batch of loads a warp, where weights first and
// values after took about nine round trips. The order of every sum is
// fixed (deterministic).
//
// Visibility: the query of sequence b sits at p = past_lengths[b] and sees
// keys j <= p (and j > p - window with a sliding window). A padding row
// (step_lengths[b] == 0) is written as zeros.
//
// Launch: grid (kSplits, kv_heads, B), block kThreads (128), dynamic shared
// memory attentionDecodeSharedBytes<Cfg>().
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ATTENTION_DECODE_CUH
#define SITS_KERNELS_ATTENTION_DECODE_CUH

#include "sits/common.cuh"

namespace sits {

constexpr int kDecodeThreads = 128;

/// The keys a decode query at position `past` sees, [keyBegin, keyEnd)
/// (its sliding window, if any, and the cache's capacity), the splits they
/// span, [splitBegin, splitEnd), and split `split`'s share [k0, k1);
/// `active` when the split has keys to read for a real (not padding) row.
struct DecodeKeys {
  int splitBegin, splitEnd, k0, k1;
  bool active;
};
template <class Cfg>
__device__ __forceinline__ DecodeKeys decodeKeysOf(int past, bool padding,
                                                   int split) {
  const int keyEnd = min(past + 1, Cfg::kCapacity);
  const int keyBegin = Cfg::kWindow > 0 ? max(0, past - Cfg::kWindow + 1) : 0;
  DecodeKeys keys;
  keys.splitBegin = keyBegin / Cfg::kSplitKeys;
  keys.splitEnd = (keyEnd + Cfg::kSplitKeys - 1) / Cfg::kSplitKeys;
  keys.k0 = max(keyBegin, split * Cfg::kSplitKeys);
  keys.k1 = min(keyEnd, (split + 1) * Cfg::kSplitKeys);
  keys.active = !padding && split >= keys.splitBegin && split < keys.splitEnd;
  return keys;
}

/// Floats of one split's partial result per query head: the values, then
/// max and sum, padded so that every partial starts 16-byte aligned.
__host__ __device__ constexpr int decodePartialFloats(int headDim) {
  return headDim + 4;
}

/// Warps per query head in the combine of the splits (combineSplits) for
/// blocks of `threads`.
__host__ __device__ constexpr int combineParts(int threads, int group) {
  return threads / 32 / group > 1 ? threads / 32 / group : 1;
}

/// Shared memory of the combine: the parts' states when a head has more
/// than one warp (also computed by Launches.cpp and KVQuantLaunches.cpp).
__host__ __device__ constexpr int combineSharedBytes(int threads, int group,
                                                     int headDim) {
  return combineParts(threads, group) > 1
             ? 4 * group * combineParts(threads, group) *
                   decodePartialFloats(headDim)
             : 0;
}

/// Dynamic shared memory: the copy ring, reused for the merge of the key
/// groups and for the combine's states (also computed by Launches.cpp).
__host__ __device__ constexpr int
attentionDecodeSharedBytes(int headDim, int group, int unroll, int stages) {
  const int ring = stages * unroll * 2 * 16 * kDecodeThreads;
  const int keyGroups = kDecodeThreads / (headDim / 8);
  const int merge = 4 * keyGroups * group * decodePartialFloats(headDim);
  const int combine = combineSharedBytes(kDecodeThreads, group, headDim);
  const int most = ring > merge ? ring : merge;
  return most > combine ? most : combine;
}

/// Merges kParts online-softmax states per query head, stored in shared
/// memory as [part][head][values, max, sum] (decodePartialFloats apart),
/// into the block's partial result for split `split`. Called by every
/// thread (kThreads of them) after a barrier that follows the stores.
template <class Cfg, int G, int kParts, int kThreads = kDecodeThreads>
__device__ __forceinline__ void mergeSplitPartial(const float *merge,
                                                  float *myPartial, int split) {
  constexpr int D = Cfg::kHeadDim;
  constexpr int kPartial = decodePartialFloats(D);
  const float kNegInf = __int_as_float(0xff800000u);
  const int tid = threadIdx.x;
  for (int idx = tid; idx < G * (D + 1); idx += kThreads) {
    const int h = idx / (D + 1), d = idx % (D + 1); // d == D: max and sum
    float best = kNegInf;
    for (int g = 0; g < kParts; ++g)
      best = fmaxf(best, merge[(g * G + h) * kPartial + D]);
    float total = 0.0f;
    for (int g = 0; g < kParts; ++g) {
      const float *slot = merge + (g * G + h) * kPartial;
      if (slot[D] == kNegInf)
        continue;
      total += expf(slot[D] - best) * (d < D ? slot[d] : slot[D + 1]);
    }
    float *target = myPartial + (h * Cfg::kSplits + split) * kPartial;
    if (d < D) {
      target[d] = total;
    } else {
      target[D] = best;
      target[D + 1] = total;
    }
  }
}

/// Merges the key groups' online-softmax states (this lane's 8 channels
/// `d0..d0+7` of every query head of the group) into the block's partial
/// result for split `split`. Called by every thread of an active block.
template <class Cfg, int G>
__device__ __forceinline__ void
storeSplitPartial(void *sharedBytes, const float (&rowMax)[G],
                  const float (&rowSum)[G], const float (&acc)[G][8],
                  float *myPartial, int split) {
  constexpr int D = Cfg::kHeadDim;
  constexpr int P = D / 8;
  constexpr int kKeyGroups = kDecodeThreads / P;
  constexpr int kPartial = decodePartialFloats(D);
  const int tid = threadIdx.x;
  const int keyGroup = tid / P, part = tid % P, d0 = part * 8;
  // [keyGroup][head][values, max, sum].
  float *merge = reinterpret_cast<float *>(sharedBytes);
#pragma unroll
  for (int h = 0; h < G; ++h) {
    float *slot = merge + (keyGroup * G + h) * kPartial;
    if (part == 0) {
      slot[D] = rowMax[h];
      slot[D + 1] = rowSum[h];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      slot[d0 + e] = acc[h][e];
  }
  syncTile();
  mergeSplitPartial<Cfg, G, kKeyGroups>(merge, myPartial, split);
}

/// After every block's partial: the last block of (b, kvHead) to arrive
/// combines the splits [splitBegin, splitEnd) into `out`; a padding
/// sequence gets zeros. When the keys lie in one split (a short context),
/// that split's block combines at once and no block counts: the others
/// leave without waiting on the counter's atomics. Called by every thread
/// of every block (kThreads of them).
template <class Cfg, int kThreads = kDecodeThreads>
__device__ __forceinline__ void
combineSplits(void *sharedBytes, bool padding, int splitBegin, int splitEnd,
              const float *myPartial, int *SITS_RESTRICT counters,
              float *SITS_RESTRICT out) {
  constexpr int G = Cfg::kHeads / Cfg::kKvHeads;
  constexpr int D = Cfg::kHeadDim;
  constexpr int kPartial = decodePartialFloats(D);
  constexpr int kSplits = Cfg::kSplits;
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
  const float kNegInf = __int_as_float(0xff800000u);
  const int split = tileIndex().x, kvHead = tileIndex().y, b = tileIndex().z;
  const int tid = threadIdx.x;
  float *headOut = out + static_cast<long>(b) * kWidth + kvHead * G * D;

  if (padding) {
    // Every block of the sequence takes this branch: no counting.
    if (split == 0)
      for (int idx = tid; idx < G * D; idx += kThreads)
        headOut[idx] = 0.0f;
    return;
  }
  if (splitEnd - splitBegin == 1) {
    // The same test in every block of (b, kvHead): the counter stays 0.
    if (split != splitBegin)
      return;
    syncTile(); // the block's partial is written (read back below)
  } else {
    if (!lastBlockToArrive(counters + b * Cfg::kKvHeads + kvHead, kSplits))
      return;
  }

  // kParts warps per head (split s to part s % kParts), each folding its
  // splits into one online-softmax state: kRows partial rows at a time,
  // kLanesPerRow lanes a row and kColumns float4 of values a lane, kBatch
  // such steps with all their loads in flight at once; lane i of a batch
  // also loads row i's max and sum, so that the weights cost one
  // exponential a lane and shuffles. At the 8B shape (33 splits, 8 warps,
  // 4 heads) that is one batch a warp.
  constexpr int kWarps = kThreads / kWarpSize;
  constexpr int kParts = combineParts(kThreads, G);
  constexpr int kLanesPerRow = D / 4 < kWarpSize ? D / 4 : kWarpSize;
  constexpr int kRows = kWarpSize / kLanesPerRow;
  constexpr int kColumns = D / 4 / kLanesPerRow;
  constexpr int kRowsPerPart = (kSplits + kParts - 1) / kParts;
  constexpr int kBatchCap =
      kWarpSize / kRows < 20 / kColumns ? kWarpSize / kRows : 20 / kColumns;
  constexpr int kBatch = (kRowsPerPart + kRows - 1) / kRows < kBatchCap
                             ? (kRowsPerPart + kRows - 1) / kRows
                             : kBatchCap;
  constexpr int kBatchRows = kBatch * kRows;
  static_assert(kBatchRows <= kWarpSize, "a lane per row's max and sum");
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int row = lane / kLanesPerRow, column = lane % kLanesPerRow;
  const int part = warp % kParts;
  float *states = reinterpret_cast<float *>(sharedBytes); // [head][part]
  for (int h = warp / kParts; h < G && warp < G * kParts;
       h += kWarps / kParts) {
    const float *slots = myPartial + h * kSplits * kPartial;
    float best = kNegInf, sum = 0.0f;
    float total[kColumns][4] = {};
    for (int j0 = 0; splitBegin + part + j0 * kParts < splitEnd;
         j0 += kBatchRows) {
      auto splitOf = [&](int j) {
        return splitBegin + part + (j0 + j) * kParts;
      };
      float4 values[kBatch][kColumns];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int s = splitOf(k * kRows + row);
#pragma unroll
        for (int c = 0; c < kColumns; ++c)
          values[k][c] =
              s < splitEnd
                  ? __ldcg(reinterpret_cast<const float4 *>(
                        slots + s * kPartial + 4 * (column + c * kLanesPerRow)))
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      const int mine = splitOf(lane);
      const bool real = lane < kBatchRows && mine < splitEnd;
      const float rowMax = real ? __ldcg(slots + mine * kPartial + D) : kNegInf;
      const float rowSum =
          real ? __ldcg(slots + mine * kPartial + D + 1) : 0.0f;
      const float newBest = fmaxf(best, warpMax(rowMax));
      if (newBest == kNegInf)
        continue; // no split so far saw a key
      const float keep = best == kNegInf ? 0.0f : expf(best - newBest);
      const float weight = rowMax == kNegInf ? 0.0f : expf(rowMax - newBest);
      sum = sum * keep + warpSum(weight * rowSum);
      best = newBest;
#pragma unroll
      for (int c = 0; c < kColumns; ++c)
        for (int e = 0; e < 4; ++e)
          total[c][e] *= keep;
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const float w = __shfl_sync(kFullMask, weight, k * kRows + row);
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
          total[c][0] += w * values[k][c].x;
          total[c][1] += w * values[k][c].y;
          total[c][2] += w * values[k][c].z;
          total[c][3] += w * values[k][c].w;
        }
      }
    }
    // The rows of a column, in a fixed order (deterministic).
#pragma unroll
    for (int offset = kLanesPerRow; offset < kWarpSize; offset *= 2)
#pragma unroll
      for (int c = 0; c < kColumns; ++c)
        for (int e = 0; e < 4; ++e)
          total[c][e] += __shfl_xor_sync(kFullMask, total[c][e], offset);
    if (kParts == 1) {
      const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
      if (row == 0)
        for (int c = 0; c < kColumns; ++c)
          for (int e = 0; e < 4; ++e)
            headOut[h * D + 4 * (column + c * kLanesPerRow) + e] =
                total[c][e] * inverse;
    } else {
      float *state = states + (h * kParts + part) * kPartial;
      if (row == 0)
        for (int c = 0; c < kColumns; ++c)
          for (int e = 0; e < 4; ++e)
            state[4 * (column + c * kLanesPerRow) + e] = total[c][e];
      if (lane == 0) {
        state[D] = best;
        state[D + 1] = sum;
      }
    }
  }
  if (kParts > 1) {
    // Every thread merges the parts' states of its (head, channel)s.
    syncTile();
    for (int idx = tid; idx < G * D; idx += kThreads) {
      const int h = idx / D, d = idx % D;
      const float *state = states + h * kParts * kPartial;
      float best = kNegInf;
      for (int p = 0; p < kParts; ++p)
        best = fmaxf(best, state[p * kPartial + D]);
      float sum = 0.0f, value = 0.0f;
      for (int p = 0; p < kParts; ++p) {
        const float partMax = state[p * kPartial + D];
        const float w = partMax == kNegInf ? 0.0f : expf(partMax - best);
        sum += w * state[p * kPartial + D + 1];
        value += w * state[p * kPartial + d];
      }
      headOut[h * D + d] = sum > 0.0f ? value / sum : 0.0f;
    }
  }
}

/// Config: Cache (F16/BF16), kHeads, kKvHeads, kHeadDim (8..256, a power of
/// two), kCapacity, kScale, kSoftcap (0: none), kWindow (0: none),
/// kSplitKeys, kSplits (ceil(kCapacity / kSplitKeys)), kUnroll, kStages; a
/// paged cache adds kBlockTokens and kMaxBlocks, and `blockTable`.
/// `partial` holds [B, kHeads, kSplits, head_dim + 2] floats; `counters`
/// B * kKvHeads ints that are zero between launches.
/// The split decode kernels' lane state: this lane's 8 channels of the
/// GQA group's queries, and the group's online softmax (running maximum and
/// sum per head, this lane's 8 channels of the weighted values).
/// G heads from query head `firstHead` on.
template <class Cfg, int G>
__device__ __forceinline__ void
startGroup(const float *SITS_RESTRICT query, int b, int firstHead, int d0,
           float (&q)[G][8], float (&rowMax)[G], float (&rowSum)[G],
           float (&acc)[G][8]) {
  constexpr int D = Cfg::kHeadDim;
  constexpr long kWidth = static_cast<long>(Cfg::kHeads) * D;
#pragma unroll
  for (int h = 0; h < G; ++h) {
    const float *row =
        query + static_cast<long>(b) * kWidth + (firstHead + h) * D + d0;
    loadFloats<8>(row, q[h]);
  }
#pragma unroll
  for (int h = 0; h < G; ++h) {
    rowMax[h] = __int_as_float(0xff800000u);
    rowSum[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      acc[h][e] = 0.0f;
  }
}

/// One key's scores against the group's queries: this lane's 8 channels'
/// dot products summed over the key's P consecutive lanes, as scores; -inf
/// where the key is not visible.
template <class Cfg, int G, int P>
__device__ __forceinline__ void scoreKey(const float (&q)[G][8],
                                         const float (&k)[8], bool visible,
                                         float (&score)[G]) {
#pragma unroll
  for (int h = 0; h < G; ++h) {
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      dot += q[h][e] * k[e];
// The key group's lanes are consecutive: finish the dot product.
#pragma unroll
    for (int offset = P / 2; offset > 0; offset >>= 1)
      dot += __shfl_xor_sync(kFullMask, dot, offset);
    score[h] = visible ? attentionScore<Cfg>(dot) : __int_as_float(0xff800000u);
  }
}

/// Folds one step's U keys into the group's online softmax: per head, the
/// new maximum rescales the sum and the values so far, and each key's
/// probability weighs its value channels, which `valueOf(u, v)` gives.
template <int U, int G, class ValueOf>
__device__ __forceinline__ void
foldScores(const float (&score)[U][G], float (&rowMax)[G], float (&rowSum)[G],
           float (&acc)[G][8], ValueOf valueOf) {
  const float kNegInf = __int_as_float(0xff800000u);
#pragma unroll
  for (int h = 0; h < G; ++h) {
    float stepMax = score[0][h];
#pragma unroll
    for (int u = 1; u < U; ++u)
      stepMax = fmaxf(stepMax, score[u][h]);
    const float newMax = fmaxf(rowMax[h], stepMax);
    if (newMax == kNegInf)
      continue; // no visible key yet
    const float rescale =
        rowMax[h] == kNegInf ? 0.0f : expf(rowMax[h] - newMax);
    rowMax[h] = newMax;
    rowSum[h] *= rescale;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      acc[h][e] *= rescale;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float p =
          score[u][h] == kNegInf ? 0.0f : expf(score[u][h] - newMax);
      rowSum[h] += p;
      float v[8];
      valueOf(u, v);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc[h][e] += p * v[e];
    }
  }
}

/// Query heads of a GQA group that a lane's online softmax holds at once
/// (q and acc: 16 floats a head). The persistent decode kernel has 128
/// registers a thread (two 256-thread blocks an SM, CudaEmitter's
/// kPersistentMinBlocksPerSM): there a group of 8 heads spilled 1.1 KB a
/// thread into the key loop (ptxas -v) and 4 heads still 204 B, so the
/// group goes over the split's keys in passes of 2 heads, the keys read
/// again from L2 (on an H100 the TinyLlama-shaped persistent step at
/// context 1024 got 3 to 6 % faster; at 32, no change). A graph-mode
/// kernel holds the whole group (219 registers at 8 heads). The kernel
/// tests set SITS_DECODE_PASS_HEADS to run the passes in graph mode.
#ifndef SITS_DECODE_PASS_HEADS
#ifdef SITS_PERSISTENT_DECODE
#define SITS_DECODE_PASS_HEADS 2
#else
#define SITS_DECODE_PASS_HEADS 65536
#endif
#endif
constexpr int kDecodePassHeads = SITS_DECODE_PASS_HEADS;

/// The heads of one pass over the keys for a GQA group of G.
template <int G> __host__ __device__ constexpr int decodePassHeads() {
  constexpr int kHeads = G < kDecodePassHeads ? G : kDecodePassHeads;
  static_assert(G % kHeads == 0, "passes of whole heads");
  return kHeads;
}

template <class Cfg>
__device__ void
attentionDecode(const float *SITS_RESTRICT query,
                const typename Cfg::Cache::Storage *SITS_RESTRICT keyCache,
                const typename Cfg::Cache::Storage *SITS_RESTRICT valueCache,
                float *SITS_RESTRICT out, float *SITS_RESTRICT partial,
                int *SITS_RESTRICT counters,
                const int *SITS_RESTRICT pastLengths,
                const int *SITS_RESTRICT stepLengths,
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
  const KVRows<Cfg> rows(blockTable, b, kvHead);
  float *myPartial =
      partial +
      ((static_cast<long>(b) * Cfg::kHeads + kvHead * G) * Cfg::kSplits) *
          kPartial;

  constexpr int H = decodePassHeads<G>();
  for (int h0 = 0; active && h0 < G; h0 += H) {
    if (h0 > 0)
      syncTile(); // the last pass's merge has left the ring's memory
    float q[H][8], rowMax[H], rowSum[H], acc[H][8];
    startGroup<Cfg, H>(query, b, kvHead * G + h0, d0, q, rowMax, rowSum, acc);

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
          const long at = rows.at(valid ? key : 0) + d0;
          copyAsync16<false>(slot + (2 * u) * kDecodeThreads, keyCache + at,
                             valid);
          copyAsync16<false>(slot + (2 * u + 1) * kDecodeThreads,
                             valueCache + at, valid);
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
        unpack16<C>(raw, k);
        scoreKey<Cfg, H, P>(q, k, keyOf(step, u) < k1, score[u]);
      }
      foldScores<U, H>(score, rowMax, rowSum, acc, [&](int u, float(&v)[8]) {
        unpack16<C>(slot[(2 * u + 1) * kDecodeThreads], v);
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

#endif // SITS_KERNELS_ATTENTION_DECODE_CUH
