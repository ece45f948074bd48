//===- tvc_select.cuh - The TVC head's candidate selection ----------------===//
//
// The TVC head keeps, per sequence, the entries (an upper bound's key and a
// vocabulary row) that come first in the candidates' order: larger key,
// then lower row. Both of its selections (the kKeep first rows of a preview
// chunk, the kCandidates first of the chunks' union) are a radix selection
// over the 96-bit composite (key, ~row), which is unique per entry: eight
// bits a pass from the top, a 256-bin histogram in shared memory per
// sequence, until the bin that holds the want-th entry holds exactly the
// entries still needed. The result is a prefix: an entry is selected when
// the first `bits` bits of its composite are at least the prefix. A pass
// reads each entry once; at most 12 passes, fewer when the keys part
// early (the bitonic sort this replaced took 183 us of the 8B head's step
// for the union alone on the H200, the radix selection 23 us).
//
// Every thread of the block calls these functions (they synchronize).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_TVC_SELECT_CUH
#define SITS_KERNELS_TVC_SELECT_CUH

#include "sits/common.cuh"

namespace sits {

typedef unsigned long long u64;

/// One sequence's radix selection: the first `bits` bits of the composite
/// are fixed to (keyPrefix, rankPrefix); `needed` entries with that prefix
/// still belong to the selection; `done` once all of them do.
struct TvcRadix {
  u64 keyPrefix;
  unsigned rankPrefix;
  int bits;
  int needed;
  int done;
};

/// The low 32 bits of the composite: a lower row sorts first.
__device__ __forceinline__ unsigned tvcRank(int row) {
  return ~static_cast<unsigned>(row);
}

/// -1, 0 or 1: the entry's first s.bits composite bits are below, equal to
/// or above the prefix.
__device__ __forceinline__ int tvcComparePrefix(const TvcRadix &s, u64 key,
                                                unsigned rank) {
  if (s.bits == 0)
    return 0;
  if (s.bits <= 64) {
    const u64 top = key >> (64 - s.bits);
    return top > s.keyPrefix ? 1 : top == s.keyPrefix ? 0 : -1;
  }
  if (key != s.keyPrefix)
    return key > s.keyPrefix ? 1 : -1;
  const unsigned top = rank >> (96 - s.bits);
  return top > s.rankPrefix ? 1 : top == s.rankPrefix ? 0 : -1;
}

/// The eight composite bits after the first `bits`.
__device__ __forceinline__ int tvcDigit(int bits, u64 key, unsigned rank) {
  return bits < 64 ? static_cast<int>((key >> (56 - bits)) & 0xffu)
                   : static_cast<int>((rank >> (88 - bits)) & 0xffu);
}

/// The sum of `value` over lanes 0 .. this lane (every lane of the warp
/// calls it).
__device__ __forceinline__ int tvcWarpInclusiveSum(int value) {
  const int lane = threadIdx.x % kWarpSize;
  for (int offset = 1; offset < kWarpSize; offset <<= 1) {
    const int other =
        __shfl_sync(kFullMask, value, lane >= offset ? lane - offset : lane);
    if (lane >= offset)
      value += other;
  }
  return value;
}

/// Selects, for each sequence b < `sequences` with live(b), the first
/// `want` of its `count` entries (keyOf(b, i), rowOf(b, i)); afterwards
/// entry i is selected iff tvcComparePrefix(state[b], ...) >= 0. Shared:
/// hist [sequences][256], state [sequences], open [2].
template <class KeyOf, class RowOf, class Live>
__device__ void tvcRadixSelect(int sequences, int count, int want, KeyOf keyOf,
                               RowOf rowOf, Live live, unsigned *hist,
                               TvcRadix *state, int *open) {
  const int tid = threadIdx.x, threads = tileDim().x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  for (int b = tid; b < sequences; b += threads) {
    TvcRadix s;
    s.keyPrefix = 0;
    s.rankPrefix = 0;
    s.bits = 0;
    s.needed = want;
    s.done = !live(b) || count <= want; // fewer entries: all of them
    state[b] = s;
  }
  // A pass: histogram (after barrier 1), the bin of the want-th entry
  // (after 2), the end test (after 3). `open` alternates between passes:
  // a slot is reset two passes after it was last read.
  for (int pass = 0; pass < 12; ++pass) {
    for (int e = tid; e < sequences * 256; e += threads)
      hist[e] = 0;
    if (tid == 0)
      open[pass & 1] = 0;
    syncTile();
    for (int b = 0; b < sequences; ++b) {
      const TvcRadix s = state[b]; // once per sequence, not per entry
      if (s.done)
        continue;
      for (int i = tid; i < count; i += threads) {
        const u64 key = keyOf(b, i);
        const unsigned rank = tvcRank(rowOf(b, i));
        if (tvcComparePrefix(s, key, rank) == 0)
          atomicAdd(&hist[b * 256 + tvcDigit(s.bits, key, rank)], 1u);
      }
    }
    syncTile();
    // A warp per open sequence: lane l holds bins 255 - 8l down to 248 - 8l
    // (the candidates' order), and the lane whose bins reach `needed` takes
    // the bin.
    for (int b = warp; b < sequences; b += threads / kWarpSize) {
      const TvcRadix s = state[b]; // read by every lane before any writes
      if (s.done)
        continue;
      const unsigned *bins = hist + b * 256;
      int local = 0;
      for (int j = 0; j < 8; ++j)
        local += static_cast<int>(bins[255 - 8 * lane - j]);
      const int inclusive = tvcWarpInclusiveSum(local);
      if (inclusive >= s.needed && inclusive - local < s.needed) {
        int above = inclusive - local, digit = 255 - 8 * lane;
        for (int j = 0; j < 7; ++j, --digit) {
          const int n = static_cast<int>(bins[digit]);
          if (above + n >= s.needed)
            break;
          above += n;
        }
        TvcRadix next = s;
        next.needed = s.needed - above;
        if (s.bits < 64)
          next.keyPrefix = (s.keyPrefix << 8) | static_cast<u64>(digit);
        else
          next.rankPrefix = (s.rankPrefix << 8) | static_cast<unsigned>(digit);
        next.bits = s.bits + 8;
        next.done =
            static_cast<int>(bins[digit]) == next.needed || next.bits == 96;
        state[b] = next;
        if (!next.done)
          open[pass & 1] = 1;
      }
    }
    syncTile();
    if (!open[pass & 1])
      break;
  }
}

/// Calls emit(slot, i) for the entries i < count with selected(i), in
/// entry order, slot 0, 1, ... (at most `want` of them). Shared: scan
/// [threads / 32].
template <class Selected, class Emit>
__device__ void tvcCompact(int count, int want, Selected selected, Emit emit,
                           int *scan) {
  const int tid = threadIdx.x, threads = tileDim().x;
  const int lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int per = (count + threads - 1) / threads;
  const int begin = min(count, tid * per), end = min(count, begin + per);
  int mine = 0;
  for (int i = begin; i < end; ++i)
    mine += selected(i) ? 1 : 0;
  const int inclusive = tvcWarpInclusiveSum(mine);
  if (lane == kWarpSize - 1)
    scan[warp] = inclusive;
  syncTile();
  int slot = inclusive - mine;
  for (int w = 0; w < warp; ++w)
    slot += scan[w];
  for (int i = begin; i < end && slot < want; ++i)
    if (selected(i))
      emit(slot++, i);
  syncTile(); // `scan` is free again
}

} // namespace sits

#endif // SITS_KERNELS_TVC_SELECT_CUH
