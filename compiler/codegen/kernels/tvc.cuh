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
//   tvcResidual  |e|^2 and |h|^2 in blocks of 256 k, e = h - T^T z (f64)
//   tvcPreview   p_v = P_v . z (f32) and U_v (f64) for a chunk of rows, and
//                the chunk's kKeep largest U_v (bitonic sort in shared)
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

#include "sits/common.cuh"
#include "sits/gemv.cuh"

namespace sits {

typedef unsigned long long u64;

constexpr int kTvcThreads = 256;
constexpr int kTvcWarps = kTvcThreads / kWarpSize;
constexpr double kTvcNormSlack = 1.0 + 0x1p-32;

__device__ __forceinline__ u64 tvcDoubleBits(double value) {
#ifdef SITS_EMULATE
  u64 bits;
  std::memcpy(&bits, &value, 8);
  return bits;
#else
  return static_cast<u64>(__double_as_longlong(value));
#endif
}

__device__ __forceinline__ double tvcBitsDouble(u64 bits) {
#ifdef SITS_EMULATE
  double value;
  std::memcpy(&value, &bits, 8);
  return value;
#else
  return __longlong_as_double(static_cast<long long>(bits));
#endif
}

/// Order-preserving key of a (non-NaN) double: larger value, larger key;
/// every key is above 0, the key of padding.
__device__ __forceinline__ u64 tvcKey(double value) {
  const u64 bits = tvcDoubleBits(value);
  return (bits >> 63) ? ~bits : bits | (1ull << 63);
}
__device__ __forceinline__ double tvcKeyValue(u64 key) {
  return tvcBitsDouble((key >> 63) ? key & ~(1ull << 63) : ~key);
}

__device__ __forceinline__ double tvcWarpSum(double value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

/// Region `offset` of the scratch, as `T *`, at sequence b's part of
/// `perSequence` elements.
template <class T>
__device__ __forceinline__ T *tvcRegion(void *scratch, long offset, int b,
                                        long perSequence) {
  return reinterpret_cast<T *>(static_cast<char *>(scratch) + offset) +
         b * perSequence;
}

/// The input row the head multiplies for sequence b (null: step length 0).
template <class Cfg>
__device__ __forceinline__ const float *
tvcInputRow(const float *x, int b, int seqLen, const int *stepLengths) {
  const int length = stepLengths[b];
  if (length <= 0)
    return nullptr;
  return x + (static_cast<long>(b) * seqLen + length - 1) * Cfg::kK;
}

/// h_k as the head multiplies it.
template <class Cfg> __device__ __forceinline__ float tvcInput(float value) {
  if constexpr (Cfg::kRoundInput)
    return Cfg::Weight::load(Cfg::Weight::store(value));
  else
    return value;
}

/// Entry i comes before entry j in the candidates' order: larger bound,
/// then lower index.
__device__ __forceinline__ bool tvcBefore(u64 keyI, int indexI, u64 keyJ,
                                          int indexJ) {
  return keyI > keyJ || (keyI == keyJ && indexI < indexJ);
}

/// Sorts `count` (a power of two) keys with their indices into the
/// candidates' order. Every thread of the block calls it.
__device__ void tvcBitonicSort(u64 *keys, int *indices, int count) {
  for (int k = 2; k <= count; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < count; i += blockDim.x) {
        const int partner = i ^ j;
        if (partner > i) {
          const bool forward = (i & k) == 0;
          const bool swap = forward
                                ? tvcBefore(keys[partner], indices[partner],
                                            keys[i], indices[i])
                                : tvcBefore(keys[i], indices[i], keys[partner],
                                            indices[partner]);
          if (swap) {
            const u64 key = keys[i];
            keys[i] = keys[partner];
            keys[partner] = key;
            const int index = indices[i];
            indices[i] = indices[partner];
            indices[partner] = index;
          }
        }
      }
      __syncthreads();
    }
  }
}

//===----------------------------------------------------------------------===//
// 1. z = T h and a (grid (ceil(R / 8), B), block 256: a warp per rank row)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcProject(const float *__restrict__ x,
                           const float *__restrict__ right, void *scratch,
                           int seqLen, const int *__restrict__ stepLengths) {
  const int b = blockIdx.y;
  const float *h = tvcInputRow<Cfg>(x, b, seqLen, stepLengths);
  const int lane = threadIdx.x % kWarpSize;
  const int r = blockIdx.x * kTvcWarps + threadIdx.x / kWarpSize;
  if (!h || r >= Cfg::kRank)
    return;
  const float *row = right + static_cast<long>(r) * Cfg::kK;
  float z = 0.0f;
  double magnitude = 0.0;
  for (int k = lane; k < Cfg::kK; k += kWarpSize) {
    const float t = row[k], value = tvcInput<Cfg>(h[k]);
    z += t * value;
    magnitude +=
        fabs(static_cast<double>(t)) * fabs(static_cast<double>(value));
  }
  z = warpSum(z);
  magnitude = tvcWarpSum(magnitude);
  if (lane == 0) {
    tvcRegion<float>(scratch, Cfg::kOffZ, b, Cfg::kRank)[r] = z;
    tvcRegion<double>(scratch, Cfg::kOffA, b, Cfg::kRank)[r] =
        Cfg::kGammaH * magnitude;
  }
}

//===----------------------------------------------------------------------===//
// 2. |e|^2, |h|^2 (grid (kResidualBlocks, B), block 256: a thread per k)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcResidual(const float *__restrict__ x,
                            const float *__restrict__ right, void *scratch,
                            int seqLen, const int *__restrict__ stepLengths) {
  __shared__ float z[Cfg::kRank];
  __shared__ double sums[2][kTvcWarps];
  const int b = blockIdx.y;
  const float *h = tvcInputRow<Cfg>(x, b, seqLen, stepLengths);
  if (!h)
    return;
  const float *zIn = tvcRegion<float>(scratch, Cfg::kOffZ, b, Cfg::kRank);
  for (int r = threadIdx.x; r < Cfg::kRank; r += kTvcThreads)
    z[r] = zIn[r];
  __syncthreads();
  const int k = blockIdx.x * kTvcThreads + threadIdx.x;
  double e = 0.0, value = 0.0;
  if (k < Cfg::kK) {
    value = tvcInput<Cfg>(h[k]);
    e = value;
    for (int r = 0; r < Cfg::kRank; ++r)
      e -= static_cast<double>(right[static_cast<long>(r) * Cfg::kK + k]) *
           static_cast<double>(z[r]);
  }
  double eSquares = tvcWarpSum(e * e), hSquares = tvcWarpSum(value * value);
  const int warp = threadIdx.x / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) {
    sums[0][warp] = eSquares;
    sums[1][warp] = hSquares;
  }
  __syncthreads();
  if (threadIdx.x < 2) {
    double total = 0.0;
    for (int w = 0; w < kTvcWarps; ++w)
      total += sums[threadIdx.x][w];
    tvcRegion<double>(scratch, Cfg::kOffNorms, b,
                      2 * Cfg::kResidualBlocks)[2 * blockIdx.x + threadIdx.x] =
        total;
  }
}

//===----------------------------------------------------------------------===//
// 3. Previews and bounds of a chunk of rows, the chunk's kKeep largest
//    (grid kChunks, block 256, dynamic shared: see TvcPlan.cpp)
//===----------------------------------------------------------------------===//

/// Per sequence, what every bound of the step uses.
struct TvcNorms {
  double ne, nz, na, nh;
};

template <class Cfg>
__device__ void tvcPreview(const float *__restrict__ left,
                           const float *__restrict__ bounds, void *scratch,
                           int tokens, const int *__restrict__ stepLengths) {
  SITS_DYNAMIC_SHARED(unsigned char, shared);
  // [kMaxBatch][kChunk] keys, [kChunk] indices, [kMaxBatch] norms and NaN
  // flags, [kMaxBatch][kRank] z.
  u64 *keys = reinterpret_cast<u64 *>(shared);
  int *indices = reinterpret_cast<int *>(keys + Cfg::kMaxBatch * Cfg::kChunk);
  TvcNorms *norms = reinterpret_cast<TvcNorms *>(indices + Cfg::kChunk);
  int *sawNaN = reinterpret_cast<int *>(norms + Cfg::kMaxBatch);
  float *z = reinterpret_cast<float *>(sawNaN + Cfg::kMaxBatch);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int first = blockIdx.x * Cfg::kChunk;

  // The norms of each live sequence: a warp per sequence.
  for (int b = threadIdx.x; b < tokens; b += kTvcThreads)
    sawNaN[b] = 0;
  for (int i = threadIdx.x; i < tokens * Cfg::kRank; i += kTvcThreads) {
    const int b = i / Cfg::kRank;
    z[i] = stepLengths[b] > 0 ? tvcRegion<float>(scratch, Cfg::kOffZ, b,
                                                 Cfg::kRank)[i % Cfg::kRank]
                              : 0.0f;
  }
  __syncthreads();
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
  __syncthreads();

  // A warp takes kRows rows at once (their loads in flight together), up to
  // kTile sequences per pass, the rank in slices of 256 (8 loads per lane
  // and row); lane row * kTile + t then bounds row `row` for sequence t.
  constexpr int kTile = 4, kRows = 4, kSlice = 256, kPer = kSlice / kWarpSize;
  for (int i0 = warp * kRows; i0 < Cfg::kChunk; i0 += kTvcWarps * kRows) {
    for (int b0 = 0; b0 < tokens; b0 += kTile) {
      float acc[kRows][kTile];
      for (int row = 0; row < kRows; ++row)
        for (int t = 0; t < kTile; ++t)
          acc[row][t] = 0.0f;
      for (int r0 = 0; r0 < Cfg::kRank; r0 += kSlice) {
        float p[kRows][kPer];
        for (int row = 0; row < kRows; ++row) {
          const int v = first + i0 + row;
          for (int j = 0; j < kPer; ++j) {
            const int r = r0 + lane + kWarpSize * j;
            p[row][j] = v < Cfg::kVocab && r < Cfg::kRank
                            ? left[static_cast<long>(v) * Cfg::kRank + r]
                            : 0.0f;
          }
        }
        for (int j = 0; j < kPer; ++j) {
          const int r = r0 + lane + kWarpSize * j;
          if (r >= Cfg::kRank)
            break;
          for (int t = 0; t < kTile; ++t) {
            if (b0 + t >= tokens)
              break;
            const float zr = z[(b0 + t) * Cfg::kRank + r];
            for (int row = 0; row < kRows; ++row)
              acc[row][t] += p[row][j] * zr;
          }
        }
      }
      double mine = 0.0; // this lane's (row, t) preview
      for (int row = 0; row < kRows; ++row)
        for (int t = 0; t < kTile; ++t) {
          const float sum = warpSum(acc[row][t]);
          if (lane == row * kTile + t)
            mine = sum;
        }
      const int row = lane / kTile, t = lane % kTile;
      const int i = i0 + row, v = first + i, b = b0 + t;
      if (row >= kRows || b >= tokens || i >= Cfg::kChunk)
        continue;
      if (v >= Cfg::kVocab) {
        keys[b * Cfg::kChunk + i] = 0; // padding: after every row
        continue;
      }
      if (stepLengths[b] <= 0)
        continue;
      const TvcNorms n = norms[b];
      const float *bound = bounds + 4 * static_cast<long>(v);
      const double slack =
          static_cast<double>(bound[0]) * n.ne +
          static_cast<double>(bound[1]) * n.nz +
          static_cast<double>(bound[2]) * (Cfg::kGammaRank * n.nz + n.na) +
          Cfg::kGammaDot * static_cast<double>(bound[3]) * n.nh;
      const double upper = mine + slack * kTvcNormSlack + 0x1p-50 * fabs(mine);
      if (upper != upper) {
        sawNaN[b] = 1;
        keys[b * Cfg::kChunk + i] = 0;
      } else {
        keys[b * Cfg::kChunk + i] = tvcKey(upper);
      }
    }
  }
  __syncthreads();

  // The chunk's kKeep first rows in the candidates' order, per sequence.
  for (int b = 0; b < tokens; ++b) {
    if (stepLengths[b] <= 0)
      continue;
    for (int i = threadIdx.x; i < Cfg::kChunk; i += kTvcThreads)
      indices[i] = first + i < Cfg::kVocab ? first + i : 0x7fffffff;
    __syncthreads();
    tvcBitonicSort(keys + b * Cfg::kChunk, indices, Cfg::kChunk);
    const long slot = static_cast<long>(blockIdx.x) * Cfg::kKeep;
    u64 *keptKeys =
        tvcRegion<u64>(scratch, Cfg::kOffKeys, b,
                       static_cast<long>(Cfg::kChunks) * Cfg::kKeep);
    int *keptRows =
        tvcRegion<int>(scratch, Cfg::kOffRows, b,
                       static_cast<long>(Cfg::kChunks) * Cfg::kKeep);
    for (int i = threadIdx.x; i < Cfg::kKeep; i += kTvcThreads) {
      keptKeys[slot + i] = keys[b * Cfg::kChunk + i];
      keptRows[slot + i] = indices[i];
    }
    if (threadIdx.x == 0)
      tvcRegion<int>(scratch, Cfg::kOffNaN, b, Cfg::kChunks)[blockIdx.x] =
          sawNaN[b];
    __syncthreads(); // `indices` is refilled for the next sequence
  }
}

//===----------------------------------------------------------------------===//
// 4. The candidates (grid B, block 1024, dynamic shared kSelect * 12 bytes)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcSelect(void *scratch, const int *__restrict__ stepLengths) {
  SITS_DYNAMIC_SHARED(unsigned char, shared);
  u64 *keys = reinterpret_cast<u64 *>(shared);
  int *indices = reinterpret_cast<int *>(keys + Cfg::kSelect);
  __shared__ int sawNaN;
  const int b = blockIdx.x;
  if (stepLengths[b] <= 0)
    return;
  constexpr int kKept = Cfg::kChunks * Cfg::kKeep;
  const u64 *keptKeys = tvcRegion<u64>(scratch, Cfg::kOffKeys, b, kKept);
  const int *keptRows = tvcRegion<int>(scratch, Cfg::kOffRows, b, kKept);
  if (threadIdx.x == 0)
    sawNaN = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < Cfg::kSelect; i += blockDim.x) {
    keys[i] = i < kKept ? keptKeys[i] : 0;
    indices[i] = i < kKept ? keptRows[i] : 0x7fffffff;
  }
  const int *nan = tvcRegion<int>(scratch, Cfg::kOffNaN, b, Cfg::kChunks);
  for (int i = threadIdx.x; i < Cfg::kChunks; i += blockDim.x)
    if (nan[i])
      sawNaN = 1;
  __syncthreads();
  tvcBitonicSort(keys, indices, Cfg::kSelect);
  int *candidates =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates);
  for (int i = threadIdx.x; i < Cfg::kCandidates; i += blockDim.x)
    candidates[i] = indices[i];
  if (threadIdx.x == 0) {
    // The largest bound of the other rows (none: -inf).
    const bool other = Cfg::kCandidates < Cfg::kSelect &&
                       indices[Cfg::kCandidates] != 0x7fffffff;
    tvcRegion<double>(scratch, Cfg::kOffNext, b, 1)[0] =
        other ? tvcKeyValue(keys[Cfg::kCandidates]) : -0x1p+1023 * 2.0;
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
__device__ void tvcExactTensorCore(const float *__restrict__ x,
                                   const typename Cfg::Weight::Storage *weight,
                                   void *scratch, int seqLen,
                                   const int *__restrict__ stepLengths) {
  typedef typename Cfg::Weight W;
  typedef typename W::Storage Storage;
  constexpr int U = Cfg::kUnroll;
  constexpr int kChunks = (Cfg::kK + kTcChunk - 1) / kTcChunk;
  SITS_DYNAMIC_SHARED(float4, partial);
  const int b = blockIdx.y;
  const float *h = tvcInputRow<Cfg>(x, b, seqLen, stepLengths);
  if (!h)
    return;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int column = b % 8;
  const int *candidates =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates);
  const Storage *rowPtr[2];
  for (int half = 0; half < 2; ++half) {
    const int i = blockIdx.x * 16 + g + 8 * half;
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
  __syncthreads();
  const float *sums = reinterpret_cast<const float *>(partial);
  float *exact = tvcRegion<float>(scratch, Cfg::kOffExact, b, Cfg::kCandidates);
  for (int e = threadIdx.x; e < kWarpSize * 4; e += kTcThreads) {
    const int owner = e / 4, i = e % 4;
    const int token = 2 * (owner % 4) + (i & 1);
    const int candidate = blockIdx.x * 16 + owner / 4 + (i >= 2 ? 8 : 0);
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
__device__ void tvcExactSimple(const float *__restrict__ x,
                               const typename Cfg::Weight::Storage *weight,
                               void *scratch, int seqLen,
                               const int *__restrict__ stepLengths) {
  const int b = blockIdx.y;
  const float *h = tvcInputRow<Cfg>(x, b, seqLen, stepLengths);
  const int i = blockIdx.x * Cfg::kWarps + threadIdx.x / kWarpSize;
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
                          const int *__restrict__ stepLengths) {
  __shared__ int bad;
  __shared__ float threshold;
  const int b = blockIdx.x;
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
  __syncthreads();
  // The kExactTop-th largest exact logit: the one with kExactTop - 1 before
  // it (larger, or equal at a lower position).
  for (int i = threadIdx.x; i < Cfg::kCandidates; i += blockDim.x) {
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
  __syncthreads();
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
__device__ void tvcHead(const float *__restrict__ x,
                        const typename Cfg::Weight::Storage *const *weights,
                        float *logits, int tokens, int seqLen,
                        const int *__restrict__ stepLengths, void *scratch) {
  // This block's rows of the logits: items of kItemRows rows, blockIdx.x
  // and every gridDim.x-th after it (the tensor-core head's grid may be
  // smaller than its items).
  constexpr int kItemRows = [] {
    if constexpr (Cfg::kTensorCore)
      return Cfg::kTilesPerBlock * 16;
    else
      return Cfg::kWarps;
  }();
  const long itemStride = static_cast<long>(gridDim.x) * kItemRows;
  __shared__ int anyLeft;
  if (threadIdx.x == 0)
    anyLeft = 0;
  __syncthreads();
  const float kNegInf = __int_as_float(0xff800000);
  for (int b = 0; b < tokens; ++b) {
    if (stepLengths[b] <= 0)
      continue;
    const int *flags = tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2);
    if (flags[0] > 0) {
      if (threadIdx.x == 0)
        anyLeft = 1;
      continue;
    }
    for (long first = static_cast<long>(blockIdx.x) * kItemRows;
         first < Cfg::kVocab; first += itemStride) {
      const int count = min(kItemRows, static_cast<int>(Cfg::kVocab - first));
      for (int i = threadIdx.x; i < count; i += blockDim.x)
        logits[static_cast<long>(b) * Cfg::kVocab + first + i] = kNegInf;
    }
  }
  __syncthreads();
  if (!anyLeft)
    return; // every sequence proved: no weights read
  // Step length 0 for the proved sequences: the head skips them. The
  // lengths sit at stride 2 in the flags region.
  __shared__ int lengths[Cfg::kMaxBatch];
  for (int b = threadIdx.x; b < tokens; b += blockDim.x)
    lengths[b] = stepLengths[b] > 0
                     ? tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2)[0]
                     : 0;
  __syncthreads();
  const float *biases[] = {nullptr};
  float *outs[] = {logits};
  if constexpr (Cfg::kTensorCore)
    gemvTensorCore<Cfg>(x, weights, biases, outs, nullptr, tokens, seqLen,
                        lengths);
  else
    gemv<Cfg>(x, weights, biases, outs, nullptr, tokens, seqLen, lengths);
}

//===----------------------------------------------------------------------===//
// 8. The proved rows' candidates (grid B, block 256)
//===----------------------------------------------------------------------===//

template <class Cfg>
__device__ void tvcScatter(void *scratch, float *logits,
                           const int *__restrict__ stepLengths) {
  const int b = blockIdx.x;
  if (stepLengths[b] <= 0 ||
      tvcRegion<int>(scratch, Cfg::kOffFlags, b, 2)[0] > 0)
    return;
  const int *candidates =
      tvcRegion<int>(scratch, Cfg::kOffCandidates, b, Cfg::kCandidates);
  const float *exact =
      tvcRegion<float>(scratch, Cfg::kOffExact, b, Cfg::kCandidates);
  for (int i = threadIdx.x; i < Cfg::kCandidates; i += blockDim.x)
    logits[static_cast<long>(b) * Cfg::kVocab + candidates[i]] = exact[i];
}

} // namespace sits

#endif // SITS_KERNELS_TVC_CUH
