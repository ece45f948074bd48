//===- tvc.cuh - The TVC LM head (sits.tvc_lm_head) on the GPU ------------===//
//
// sits.tvc_lm_head gives the LM head's argmax and top `exact_top` logits
// without reading most of the head: a rank-R preview `p = P (T h)` and
// per-row bounds give an upper bound U_v of every logit, the `candidates`
// rows with the largest U_v are scored exactly, and the row is proved when
// no other row's bound reaches the exact_top-th best candidate logit.
// Otherwise the full head runs. One step, per sequence b (its last new
// token, as the plain LM head gathers it), is eight launches, none of which
// needs the host:
//
//   tvcProject   z = T h (f32), a_r = g(H) sum_k |T_rk| |h_k| (f64)
//   tvcResidual  |e|^2 and |h|^2 in blocks of 32 k, e = h - T^T z (f64)
//   tvcPreview   p_v = P_v . z (f32) and U_v (f64) for a chunk of rows, and
//                the chunk's kKeep largest U_v (radix selection in shared,
//                tvc_select.cuh)
//   tvcSelect    the kCandidates largest U_v of the union of the chunks'
//                (ties: lower index first), and the largest other U_v
//   tvcExact     the candidates' logits, summed exactly as the plain LM head
//                kernel sums them (same k order, same warps, same adds)
//   tvcDecide    the proof; step length 0 for the full head when proved;
//                the proved/fallback counters
//   tvcHead      the plain LM head (gemv.cuh) over the rows not proved; a
//                block whose sequences are all proved writes -inf to its
//                rows and reads no weights
//   tvcScatter   the candidates' logits into the proved rows
//
// h is the input row as the head multiplies it: rounded to the weight type
// on the tensor-core path (gemvTensorCore rounds x), f32 otherwise; the
// bounds (`bounds [V, 4]`) are those of the stored weights (EngineBuilder),
// and the exact logits' rounding term uses u = 2^-21 (tensor cores
// truncate), so U_v bounds what the plain kernel computes.
//
// Scratch (one buffer, byte offsets kOff* per region, [max_batch][...]):
// z, a, the residual partial sums, the chunks' kept keys and indices, the
// NaN flags, the candidates, the largest other bound, the exact logits, the
// full head's step lengths and the proved flags. Every region a launch
// reads was written earlier in the same step.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_TVC_CUH
#define SITS_KERNELS_TVC_CUH

#include "sits/gemv.cuh"
#include "sits/tvc_common.cuh"
#include "sits/tvc_select.cuh"

namespace sits {

//===----------------------------------------------------------------------===//
// 1. z = T h and a (grid (ceil(R / 2), B), block 256: four warps per rank
//    row, each a quarter of the inputs)
//===----------------------------------------------------------------------===//

constexpr int kTvcProjectSplit = 4; ///< warps per rank row

template <class Cfg>
__device__ void tvcProject(const float *SITS_RESTRICT x,
                           const float *SITS_RESTRICT right, void *scratch,
                           StepRows stepRows) {
  constexpr int kSplit = kTvcProjectSplit;
  __shared__ float zParts[kTvcWarps];
  __shared__ double aParts[kTvcWarps];
  const int b = tileIndex().y;
  const float *h = tvcInputRow<Cfg>(x, b, stepRows);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int part = warp % kSplit;
  const int r = tileIndex().x * (kTvcWarps / kSplit) + warp / kSplit;
  if (!h)
    return; // the whole block
  const float *row =
      right + static_cast<long>(r < Cfg::kRank ? r : 0) * Cfg::kK;
  float z = 0.0f;
  double magnitude = 0.0;
  // Four inputs a lane and load, kAhead loads in flight, the row's chunks
  // of 128 inputs dealt to the kSplit warps in turn: the row is read in one
  // or two round trips rather than one per 128 bytes.
  constexpr int kVec = Cfg::kK % 4 == 0 ? 4 : 1, kAhead = 8;
  constexpr int kStride = kVec * kWarpSize;
  for (int k0 = kVec * lane + part * kStride; r < Cfg::kRank && k0 < Cfg::kK;
       k0 += kStride * kSplit * kAhead) {
    float t[kAhead][kVec], value[kAhead][kVec];
    for (int a = 0; a < kAhead; ++a) {
      const int k = k0 + a * kStride * kSplit;
      if constexpr (kVec == 4) {
        const uint4 tw = load16If<true>(k < Cfg::kK, row + k);
        const uint4 hw = load16If<false>(k < Cfg::kK, h + k);
        const u32 tb[4] = {tw.x, tw.y, tw.z, tw.w};
        const u32 hb[4] = {hw.x, hw.y, hw.z, hw.w};
        for (int e = 0; e < 4; ++e) {
          t[a][e] = __uint_as_float(tb[e]);
          value[a][e] = __uint_as_float(hb[e]);
        }
      } else {
        t[a][0] = k < Cfg::kK ? row[k] : 0.0f;
        value[a][0] = k < Cfg::kK ? h[k] : 0.0f;
      }
    }
    for (int a = 0; a < kAhead; ++a)
      for (int e = 0; e < kVec; ++e) {
        const float v = tvcInput<Cfg>(value[a][e]);
        z += t[a][e] * v;
        magnitude +=
            fabs(static_cast<double>(t[a][e])) * fabs(static_cast<double>(v));
      }
  }
  z = warpSum(z);
  magnitude = tvcWarpSum(magnitude);
  if (lane == 0) {
    zParts[warp] = z;
    aParts[warp] = magnitude;
  }
  syncTile();
  if (part != 0 || lane != 0 || r >= Cfg::kRank)
    return;
  for (int q = 1; q < kSplit; ++q) {
    z += zParts[warp + q];
    magnitude += aParts[warp + q];
  }
  tvcRegion<float>(scratch, Cfg::kOffZ, b, Cfg::kRank)[r] = z;
  tvcRegion<double>(scratch, Cfg::kOffA, b, Cfg::kRank)[r] =
      Cfg::kGammaH * magnitude;
}

//===----------------------------------------------------------------------===//
// 2. |e|^2, |h|^2 (grid (kResidualBlocks, B), block 256: 32 inputs a block,
//    a lane per input, the warps splitting the rank)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcResidual(const float *SITS_RESTRICT x,
                            const float *SITS_RESTRICT right, void *scratch,
                            StepRows stepRows) {
  __shared__ float z[Cfg::kRank];
  __shared__ double parts[kTvcWarps][kWarpSize];
  const int b = tileIndex().y;
  const float *h = tvcInputRow<Cfg>(x, b, stepRows);
  if (!h)
    return;
  const float *zIn = tvcRegion<float>(scratch, Cfg::kOffZ, b, Cfg::kRank);
  for (int r = threadIdx.x; r < Cfg::kRank; r += kTvcThreads)
    z[r] = zIn[r];
  syncTile();
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int k = tileIndex().x * kWarpSize + lane;
  // Warp w sums the ranks w, w + 8, ... of (T^T z)_k; the warps' sums are
  // then added in order.
  double part = 0.0;
  if (k < Cfg::kK)
    for (int r = warp; r < Cfg::kRank; r += kTvcWarps)
      part += static_cast<double>(right[static_cast<long>(r) * Cfg::kK + k]) *
              static_cast<double>(z[r]);
  parts[warp][lane] = part;
  syncTile();
  if (warp != 0)
    return;
  double e = 0.0, value = 0.0;
  if (k < Cfg::kK) {
    value = tvcInput<Cfg>(h[k]);
    e = value;
    for (int w = 0; w < kTvcWarps; ++w)
      e -= parts[w][lane];
  }
  const double eSquares = tvcWarpSum(e * e);
  const double hSquares = tvcWarpSum(value * value);
  if (lane < 2)
    tvcRegion<double>(scratch, Cfg::kOffNorms, b,
                      2 * Cfg::kResidualBlocks)[2 * tileIndex().x + lane] =
        lane == 0 ? eSquares : hSquares;
}

//===----------------------------------------------------------------------===//
// 3. Previews and bounds of a chunk of rows, the chunk's kKeep first
//    (grid kChunks, block 256, dynamic shared tvcPreviewSharedBytes)
//===----------------------------------------------------------------------===//

/// Per sequence, what every bound of the step uses.
struct TvcNorms {
  double ne, nz, na, nh;
};

/// Bytes of a region of `bytes`, rounded up to 16.
__host__ __device__ constexpr long tvcAligned(long bytes) {
  return (bytes + 15) / 16 * 16;
}

/// tvcPreview's dynamic shared memory (also in TvcPlan.cpp): keys
/// [batch][chunk], histograms [batch][256], selection states, norms and
/// NaN flags [batch], the compaction's scan, z [batch][rank].
__host__ __device__ constexpr long tvcPreviewSharedBytes(long batch, long chunk,
                                                         long rank) {
  return tvcAligned(8 * batch * chunk) + tvcAligned(4 * 256 * batch) +
         tvcAligned(24 * batch) + tvcAligned(32 * batch) +
         tvcAligned(4 * batch) + tvcAligned(4 * (kTvcWarps + 2)) +
         tvcAligned(4 * batch * rank);
}

/// Lane j's share of 32 values summed over the warp: lane j gets the sum
/// of value j (row j / kTile, sequence j % kTile of `values`) over the 32
/// lanes, in 31 shuffles (32 warp sums take 160). Each step halves the
/// values a lane holds: it keeps the half its lane bit selects and adds the
/// partner's copy of it.
template <int kRows, int kTile>
__device__ __forceinline__ float
tvcTransposeSum(const float (&values)[kRows][kTile]) {
  static_assert(kRows * kTile == kWarpSize, "a value per lane");
  const int lane = threadIdx.x % kWarpSize;
  float v[kWarpSize];
  for (int j = 0; j < kWarpSize; ++j)
    v[j] = values[j / kTile][j % kTile];
  for (int half = kWarpSize / 2; half > 0; half /= 2) {
    const bool upper = (lane & half) != 0;
    for (int j = 0; j < half; ++j) {
      const float keep = upper ? v[j + half] : v[j];
      const float send = upper ? v[j] : v[j + half];
      v[j] = keep + __shfl_xor_sync(kFullMask, send, half);
    }
  }
  return v[0];
}

template <class Cfg>
__device__ void tvcPreview(const float *SITS_RESTRICT left,
                           const float *SITS_RESTRICT bounds, void *scratch,
                           int tokens, const int *SITS_RESTRICT stepLengths) {
  static_assert(sizeof(TvcRadix) == 24 && sizeof(TvcNorms) == 32,
                "tvcPreviewSharedBytes's sizes");
  SITS_DYNAMIC_SHARED(unsigned char, shared);
  constexpr long B = Cfg::kMaxBatch;
  unsigned char *next = shared;
  auto region = [&](long bytes) {
    unsigned char *at = next;
    next += tvcAligned(bytes);
    return at;
  };
  u64 *keys = reinterpret_cast<u64 *>(region(8 * B * Cfg::kChunk));
  unsigned *hist = reinterpret_cast<unsigned *>(region(4 * 256 * B));
  TvcRadix *state = reinterpret_cast<TvcRadix *>(region(24 * B));
  TvcNorms *norms = reinterpret_cast<TvcNorms *>(region(32 * B));
  int *sawNaN = reinterpret_cast<int *>(region(4 * B));
  int *scan = reinterpret_cast<int *>(region(4 * (kTvcWarps + 2)));
  float *z = reinterpret_cast<float *>(region(4 * B * Cfg::kRank));
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int first = tileIndex().x * Cfg::kChunk;

  // The norms of each live sequence: a warp per sequence.
  for (int b = threadIdx.x; b < tokens; b += kTvcThreads)
    sawNaN[b] = 0;
  for (int i = threadIdx.x; i < tokens * Cfg::kRank; i += kTvcThreads) {
    const int b = i / Cfg::kRank;
    z[i] = stepLengths[b] > 0 ? tvcRegion<float>(scratch, Cfg::kOffZ, b,
                                                 Cfg::kRank)[i % Cfg::kRank]
                              : 0.0f;
  }
  syncTile();
  for (int b = warp; b < tokens; b += kTvcWarps) {
    if (stepLengths[b] <= 0)
      continue;
    const double *a = tvcRegion<double>(scratch, Cfg::kOffA, b, Cfg::kRank);
    const double *partial =
        tvcRegion<double>(scratch, Cfg::kOffNorms, b, 2 * Cfg::kResidualBlocks);
    double zSquares = 0.0, zAbs = 0.0, aSquares = 0.0, eSquares = 0.0,
           hSquares = 0.0;
    for (int r = lane; r < Cfg::kRank; r += kWarpSize) {
      const double zr = z[b * Cfg::kRank + r];
      zSquares += zr * zr;
      zAbs += fabs(zr);
      aSquares += a[r] * a[r];
    }
    for (int i = lane; i < Cfg::kResidualBlocks; i += kWarpSize) {
      eSquares += partial[2 * i];
      hSquares += partial[2 * i + 1];
    }
    zSquares = tvcWarpSum(zSquares);
    zAbs = tvcWarpSum(zAbs);
    aSquares = tvcWarpSum(aSquares);
    eSquares = tvcWarpSum(eSquares);
    hSquares = tvcWarpSum(hSquares);
    if (lane == 0) {
      TvcNorms n;
      n.nh = sqrt(hSquares) * kTvcNormSlack;
      n.nz = sqrt(zSquares) * kTvcNormSlack;
      n.na = sqrt(aSquares) * kTvcNormSlack;
      n.ne = sqrt(eSquares) * kTvcNormSlack +
             0x1p-32 * (n.nh + Cfg::kSqrtHidden * Cfg::kTau * zAbs);
      norms[b] = n;
      if (n.nh != n.nh || n.nz != n.nz || n.ne != n.ne || n.na != n.na)
        sawNaN[b] = 1;
    }
  }
  syncTile();

  // A warp takes kRows rows at once (16 loads of 16 bytes in flight per
  // lane, and the rows' bounds), kTile sequences per pass, the rank in
  // slices of 128 (4 per lane); lane row * kTile + t then bounds row `row`
  // for sequence t.
  constexpr int kRows = 16, kTile = 2, kSlice = 4 * kWarpSize;
  static_assert(kRows * kTile == kWarpSize, "a lane per (row, sequence)");
  constexpr bool kVec = Cfg::kRank % 4 == 0;
  const int myRow = lane / kTile, myTile = lane % kTile;
  for (int i0 = warp * kRows; i0 < Cfg::kChunk; i0 += kTvcWarps * kRows) {
    const int myV = first + i0 + myRow;
    const bool myLive = i0 + myRow < Cfg::kChunk && myV < Cfg::kVocab;
    const uint4 myBound =
        load16If<true>(myLive && myTile == 0,
                       bounds + 4 * static_cast<long>(myLive ? myV : 0));
    // The row's bound, from the lane of its first sequence.
    const u32 bw[4] = {__shfl_sync(kFullMask, myBound.x, lane - myTile),
                       __shfl_sync(kFullMask, myBound.y, lane - myTile),
                       __shfl_sync(kFullMask, myBound.z, lane - myTile),
                       __shfl_sync(kFullMask, myBound.w, lane - myTile)};
    // The rows' ranks r0 + 4 lane .. + 3; with a rank of one slice they are
    // loaded once for every sequence.
    float p[kRows][4];
    auto loadRows = [&](int r0) {
      const int r = r0 + 4 * lane;
      for (int row = 0; row < kRows; ++row) {
        const int v = first + i0 + row;
        const bool inside = i0 + row < Cfg::kChunk && v < Cfg::kVocab;
        const float *at =
            left + static_cast<long>(inside ? v : 0) * Cfg::kRank + r;
        if constexpr (kVec) {
          // Through L1: with several slices, the next sequences' pass
          // reads the rows again.
          const uint4 w = load16If<false>(inside && r < Cfg::kRank, at);
          p[row][0] = __uint_as_float(w.x);
          p[row][1] = __uint_as_float(w.y);
          p[row][2] = __uint_as_float(w.z);
          p[row][3] = __uint_as_float(w.w);
        } else {
          for (int j = 0; j < 4; ++j)
            p[row][j] = inside && r + j < Cfg::kRank ? at[j] : 0.0f;
        }
      }
    };
    constexpr bool kOneSlice = Cfg::kRank <= kSlice;
    if constexpr (kOneSlice)
      loadRows(0);
    for (int b0 = 0; b0 < tokens; b0 += kTile) {
      float acc[kRows][kTile] = {};
      for (int r0 = 0; r0 < Cfg::kRank; r0 += kSlice) {
        const int r = r0 + 4 * lane;
        if constexpr (!kOneSlice)
          loadRows(r0);
        for (int t = 0; t < kTile; ++t) {
          if (b0 + t >= tokens)
            break;
          float zt[4];
          for (int j = 0; j < 4; ++j)
            zt[j] =
                r + j < Cfg::kRank ? z[(b0 + t) * Cfg::kRank + r + j] : 0.0f;
          for (int row = 0; row < kRows; ++row)
            for (int j = 0; j < 4; ++j)
              acc[row][t] += p[row][j] * zt[j];
        }
      }
      // This lane's (row, t) preview: the 32 sums of the warp at once.
      const double mine = tvcTransposeSum(acc);
      const int i = i0 + myRow, b = b0 + myTile;
      if (i >= Cfg::kChunk || b >= tokens)
        continue;
      if (first + i >= Cfg::kVocab) {
        keys[b * Cfg::kChunk + i] = 0; // padding: after every row
        continue;
      }
      if (stepLengths[b] <= 0)
        continue;
      const TvcNorms n = norms[b];
      const double slack =
          static_cast<double>(__uint_as_float(bw[0])) * n.ne +
          static_cast<double>(__uint_as_float(bw[1])) * n.nz +
          static_cast<double>(__uint_as_float(bw[2])) *
              (Cfg::kGammaRank * n.nz + n.na) +
          Cfg::kGammaDot * static_cast<double>(__uint_as_float(bw[3])) * n.nh;
      const double upper = mine + slack * kTvcNormSlack + 0x1p-50 * fabs(mine);
      if (upper != upper) {
        sawNaN[b] = 1;
        keys[b * Cfg::kChunk + i] = 0;
      } else {
        keys[b * Cfg::kChunk + i] = tvcKey(upper);
      }
    }
  }
  syncTile();

  // The chunk's kKeep first rows, per live sequence (padding rows are
  // entries too, with key 0: kKeep are always written).
  tvcRadixSelect(
      tokens, Cfg::kChunk, Cfg::kKeep,
      [&](int b, int i) { return keys[b * Cfg::kChunk + i]; },
      [&](int, int i) { return first + i; },
      [&](int b) { return stepLengths[b] > 0; }, hist, state, scan);
  const long slot = static_cast<long>(tileIndex().x) * Cfg::kKeep;
  for (int b = 0; b < tokens; ++b) {
    if (stepLengths[b] <= 0)
      continue;
    u64 *keptKeys =
        tvcRegion<u64>(scratch, Cfg::kOffKeys, b,
                       static_cast<long>(Cfg::kChunks) * Cfg::kKeep);
    int *keptRows =
        tvcRegion<int>(scratch, Cfg::kOffRows, b,
                       static_cast<long>(Cfg::kChunks) * Cfg::kKeep);
    const TvcRadix s = state[b];
    const u64 *chunkKeys = keys + b * Cfg::kChunk;
    tvcCompact(
        Cfg::kChunk, Cfg::kKeep,
        [&](int i) {
          return tvcComparePrefix(s, chunkKeys[i], tvcRank(first + i)) >= 0;
        },
        [&](int k, int i) {
          keptKeys[slot + k] = chunkKeys[i];
          keptRows[slot + k] = first + i;
        },
        scan + 2);
    if (threadIdx.x == 0)
      tvcRegion<int>(scratch, Cfg::kOffNaN, b, Cfg::kChunks)[tileIndex().x] =
          sawNaN[b];
  }
}

//===----------------------------------------------------------------------===//
// 4. The candidates (grid B, block 1024, dynamic shared
//    tvcSelectSharedBytes)
//===----------------------------------------------------------------------===//

/// tvcSelect's dynamic shared memory (also in TvcPlan.cpp): the kept keys
/// and rows, a histogram, the state, the scan.
__host__ __device__ constexpr long tvcSelectSharedBytes(long kept) {
  return tvcAligned(8 * kept) + tvcAligned(4 * kept) + tvcAligned(4 * 256) +
         tvcAligned(24) + tvcAligned(4 * (32 + 2)) + tvcAligned(8 * 32);
}

template <class Cfg>
__device__ void tvcSelect(void *scratch, const int *SITS_RESTRICT stepLengths) {
  SITS_DYNAMIC_SHARED(unsigned char, shared);
  constexpr int kKept = Cfg::kChunks * Cfg::kKeep;
  unsigned char *next = shared;
  auto region = [&](long bytes) {
    unsigned char *at = next;
    next += tvcAligned(bytes);
    return at;
  };
  u64 *keys = reinterpret_cast<u64 *>(region(8L * kKept));
  int *rows = reinterpret_cast<int *>(region(4L * kKept));
  unsigned *hist = reinterpret_cast<unsigned *>(region(4 * 256));
  TvcRadix *state = reinterpret_cast<TvcRadix *>(region(24));
  int *scan = reinterpret_cast<int *>(region(4 * (32 + 2)));
  u64 *largest = reinterpret_cast<u64 *>(region(8 * 32));
  __shared__ int sawNaN;
  const int b = tileIndex().x;
  if (stepLengths[b] <= 0)
    return;
  const u64 *keptKeys = tvcRegion<u64>(scratch, Cfg::kOffKeys, b, kKept);
  const int *keptRows = tvcRegion<int>(scratch, Cfg::kOffRows, b, kKept);
  if (threadIdx.x == 0)
    sawNaN = 0;
  syncTile();
  for (int i = threadIdx.x; i < kKept; i += tileDim().x) {
    keys[i] = keptKeys[i];
    rows[i] = keptRows[i];
  }
  const int *nan = tvcRegion<int>(scratch, Cfg::kOffNaN, b, Cfg::kChunks);
  for (int i = threadIdx.x; i < Cfg::kChunks; i += tileDim().x)
    if (nan[i])
      sawNaN = 1;
  syncTile();
  tvcRadixSelect(
      1, kKept, Cfg::kCandidates, [&](int, int i) { return keys[i]; },
      [&](int, int i) { return rows[i]; }, [](int) { return true; }, hist,
      state, scan);
  const TvcRadix s = state[0];
  auto selected = [&](int i) {
    return tvcComparePrefix(s, keys[i], tvcRank(rows[i])) >= 0;
  };
  int *candidates =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates);
  tvcCompact(
      kKept, Cfg::kCandidates, selected,
      [&](int k, int i) { candidates[k] = rows[i]; }, scan + 2);
  // The largest bound of the other rows (padding rows are none; no other
  // row: -inf).
  u64 mine = 0;
  for (int i = threadIdx.x; i < kKept; i += tileDim().x)
    if (rows[i] < Cfg::kVocab && !selected(i) && keys[i] > mine)
      mine = keys[i];
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const u64 other = __shfl_xor_sync(kFullMask, mine, offset);
    mine = other > mine ? other : mine;
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0)
    largest[warp] = mine;
  syncTile();
  if (threadIdx.x == 0) {
    u64 other = 0;
    for (int w = 0; w < static_cast<int>(tileDim().x) / kWarpSize; ++w)
      other = largest[w] > other ? largest[w] : other;
    tvcRegion<double>(scratch, Cfg::kOffNext, b, 1)[0] =
        other ? tvcKeyValue(other) : -0x1p+1023 * 2.0;
    tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2)[1] = sawNaN;
  }
}

//===----------------------------------------------------------------------===//
// 5. The candidates' exact logits
//===----------------------------------------------------------------------===//

/// Tensor-core head (grid (ceil(kCandidates / 16), B), block 256, dynamic
/// shared kTcWarps * 32 * 16 bytes): one 16-row tile of candidates of one
/// sequence, with the arithmetic of gemvTensorCore: the same chunks of k per
/// warp in the same order (kUnroll as the plain head's config), the same
/// operands, the token in its column b % 8, the warps added in order.
template <class Cfg>
__device__ void tvcExactTensorCore(const float *SITS_RESTRICT x,
                                   const typename Cfg::Weight::Storage *weight,
                                   void *scratch, StepRows stepRows) {
  typedef typename Cfg::Weight W;
  typedef typename W::Storage Storage;
  constexpr int U = Cfg::kUnroll;
  constexpr int kChunks = (Cfg::kK + kTcChunk - 1) / kTcChunk;
  SITS_DYNAMIC_SHARED(float4, partial);
  const int b = tileIndex().y;
  const float *h = tvcInputRow<Cfg>(x, b, stepRows);
  if (!h)
    return;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int column = b % 8;
  const int *candidates =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates);
  const Storage *rowPtr[2];
  for (int half = 0; half < 2; ++half) {
    const int i = tileIndex().x * 16 + g + 8 * half;
    rowPtr[half] =
        i < Cfg::kCandidates
            ? weight + static_cast<long>(candidates[i]) * Cfg::kK + 8 * t
            : nullptr;
  }
  const float *xRow = g == column ? h + 8 * t : nullptr;
  const int steps =
      warp < kChunks ? (kChunks - warp + kTcWarps * U - 1) / (kTcWarps * U) : 0;
  // gemvTensorCore's chunks of this warp are warp + 8 i for i < steps * U,
  // added in that order; the loads of kAhead of them are issued together.
  constexpr int kAhead = 4;
  const int count = steps * U;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i0 = 0; i0 < count; i0 += kAhead) {
    uint4 lo[kAhead], hi[kAhead], x0[kAhead], x1[kAhead];
    for (int a = 0; a < kAhead; ++a) {
      const int c = warp + kTcWarps * (i0 + a);
      const bool inside =
          i0 + a < count && c < kChunks && c * kTcChunk + 8 * t < Cfg::kK;
      const long offset = static_cast<long>(c) * kTcChunk;
      lo[a] = load16If<true>(inside && rowPtr[0], rowPtr[0] + offset);
      hi[a] = load16If<true>(inside && rowPtr[1], rowPtr[1] + offset);
      x0[a] = load16If<false>(inside && xRow, xRow + offset);
      x1[a] = load16If<false>(inside && xRow, xRow + offset + 4);
    }
    for (int a = 0; a < kAhead && i0 + a < count; ++a) {
      const u32 b0 =
          packPair<W>(__uint_as_float(x0[a].x), __uint_as_float(x0[a].y));
      const u32 b1 =
          packPair<W>(__uint_as_float(x0[a].z), __uint_as_float(x0[a].w));
      const u32 b2 =
          packPair<W>(__uint_as_float(x1[a].x), __uint_as_float(x1[a].y));
      const u32 b3 =
          packPair<W>(__uint_as_float(x1[a].z), __uint_as_float(x1[a].w));
      mma16816<W>(acc, lo[a].x, hi[a].x, lo[a].y, hi[a].y, b0, b1);
      mma16816<W>(acc, lo[a].z, hi[a].z, lo[a].w, hi[a].w, b2, b3);
    }
  }
  partial[warp * kWarpSize + lane] =
      make_float4(acc[0], acc[1], acc[2], acc[3]);
  syncTile();
  const float *sums = reinterpret_cast<const float *>(partial);
  float *exact = tvcRegion<float>(scratch, Cfg::kOffExact, b, Cfg::kCandidates);
  for (int e = threadIdx.x; e < kWarpSize * 4; e += kTcThreads) {
    const int owner = e / 4, i = e % 4;
    const int token = 2 * (owner % 4) + (i & 1);
    const int candidate = tileIndex().x * 16 + owner / 4 + (i >= 2 ? 8 : 0);
    if (token != column || candidate >= Cfg::kCandidates)
      continue;
    float sum = 0.0f;
    for (int v = 0; v < kTcWarps; ++v)
      sum += sums[v * kWarpSize * 4 + e];
    exact[candidate] = sum;
  }
}

/// CUDA-core head (grid (ceil(kCandidates / kWarps), B), block kWarps * 32):
/// a warp per candidate, with gemv's accumulation and warp sum.
template <class Cfg>
__device__ void tvcExactSimple(const float *SITS_RESTRICT x,
                               const typename Cfg::Weight::Storage *weight,
                               void *scratch, StepRows stepRows) {
  const int b = tileIndex().y;
  const float *h = tvcInputRow<Cfg>(x, b, stepRows);
  const int i = tileIndex().x * Cfg::kWarps + threadIdx.x / kWarpSize;
  if (!h || i >= Cfg::kCandidates)
    return;
  const int v =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates)[i];
  const float *xRows[Cfg::kTokenTile] = {h};
  float acc[Cfg::kTokenTile];
  for (int tt = 0; tt < Cfg::kTokenTile; ++tt)
    acc[tt] = 0.0f;
  gemvAccumulate<Cfg>(weight + static_cast<long>(v) * Cfg::kK, xRows, 1, acc);
  const float sum = warpSum(acc[0]);
  if (threadIdx.x % kWarpSize == 0)
    tvcRegion<float>(scratch, Cfg::kOffExact, b, Cfg::kCandidates)[i] = sum;
}

//===----------------------------------------------------------------------===//
// 6. The proof (grid B, block 256)
//===----------------------------------------------------------------------===//

/// counters: [proved rows, fallback rows, mode] as u64; mode 1 (set by the
/// benchmark only) takes every row as proved.
template <class Cfg>
__device__ void tvcDecide(void *scratch, u64 *counters,
                          const int *SITS_RESTRICT stepLengths) {
  __shared__ int bad;
  __shared__ float threshold;
  const int b = tileIndex().x;
  int *headLengths = tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2);
  const int length = stepLengths[b];
  if (length <= 0) {
    if (threadIdx.x == 0)
      headLengths[0] = 0; // nothing to write, as the plain head
    return;
  }
  const float *exact =
      tvcRegion<float>(scratch, Cfg::kOffExact, b, Cfg::kCandidates);
  if (threadIdx.x == 0)
    bad = headLengths[1]; // a NaN bound (tvcSelect)
  syncTile();
  // The kExactTop-th largest exact logit: the one with kExactTop - 1 before
  // it (larger, or equal at a lower position).
  for (int i = threadIdx.x; i < Cfg::kCandidates; i += tileDim().x) {
    const float y = exact[i];
    if (y != y) {
      bad = 1;
      continue;
    }
    int before = 0;
    for (int j = 0; j < Cfg::kCandidates; ++j) {
      const float other = exact[j];
      before += other > y || (other == y && j < i);
    }
    if (before == Cfg::kExactTop - 1)
      threshold = y;
  }
  syncTile();
  if (threadIdx.x != 0)
    return;
  const double next = tvcRegion<double>(scratch, Cfg::kOffNext, b, 1)[0];
  bool proved = !bad && next < static_cast<double>(threshold);
  if (counters[2] == 1)
    proved = true; // benchmark only: the fallback is off
  headLengths[0] = proved ? 0 : length;
  atomicAdd(&counters[proved ? 0 : 1], 1ull);
}

//===----------------------------------------------------------------------===//
// 7. The full head over the rows not proved (the plain LM head's launch)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcHead(const float *SITS_RESTRICT x,
                        const typename Cfg::Weight::Storage *const *weights,
                        float *logits, int tokens, StepRows stepRows,
                        void *scratch) {
  // This block's rows of the logits: items of kItemRows rows, tileIndex().x
  // and every tileGridDim().x-th after it (the tensor-core head's grid may be
  // smaller than its items).
  constexpr int kItemRows = [] {
    if constexpr (Cfg::kTensorCore)
      return Cfg::kTilesPerBlock * 16;
    else
      return Cfg::kWarps;
  }();
  const long itemStride = static_cast<long>(tileGridDim().x) * kItemRows;
  __shared__ int anyLeft;
  if (threadIdx.x == 0)
    anyLeft = 0;
  syncTile();
  const float kNegInf = __int_as_float(0xff800000);
  for (int b = 0; b < tokens; ++b) {
    if (stepRows.lengths[b] <= 0)
      continue;
    const int *flags = tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2);
    if (flags[0] > 0) {
      if (threadIdx.x == 0)
        anyLeft = 1;
      continue;
    }
    for (long first = static_cast<long>(tileIndex().x) * kItemRows;
         first < Cfg::kVocab; first += itemStride) {
      const int count = min(kItemRows, static_cast<int>(Cfg::kVocab - first));
      for (int i = threadIdx.x; i < count; i += tileDim().x)
        logits[static_cast<long>(b) * Cfg::kVocab + first + i] = kNegInf;
    }
  }
  syncTile();
  if (!anyLeft)
    return; // every sequence proved: no weights read
  // Step length 0 for the proved sequences: the head skips them. The
  // lengths sit at stride 2 in the flags region.
  __shared__ int lengths[Cfg::kMaxBatch];
  for (int b = threadIdx.x; b < tokens; b += tileDim().x)
    lengths[b] = stepRows.lengths[b] > 0
                     ? tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2)[0]
                     : 0;
  syncTile();
  const float *biases[] = {nullptr};
  float *outs[] = {logits};
  StepRows unproved = stepRows;
  unproved.gather = lengths;
  if constexpr (Cfg::kTensorCore)
    gemvTensorCore<Cfg>(x, weights, biases, outs, nullptr, tokens, unproved);
  else
    gemv<Cfg>(x, weights, biases, outs, nullptr, tokens, unproved);
}

//===----------------------------------------------------------------------===//
// 8. The proved rows' candidates (grid B, block 256)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcScatter(void *scratch, float *logits,
                           const int *SITS_RESTRICT stepLengths) {
  const int b = tileIndex().x;
  if (stepLengths[b] <= 0 ||
      tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2)[0] > 0)
    return;
  const int *candidates =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates);
  const float *exact =
      tvcRegion<float>(scratch, Cfg::kOffExact, b, Cfg::kCandidates);
  for (int i = threadIdx.x; i < Cfg::kCandidates; i += tileDim().x)
    logits[static_cast<long>(b) * Cfg::kVocab + candidates[i]] = exact[i];
}

} // namespace sits

#endif // SITS_KERNELS_TVC_CUH
