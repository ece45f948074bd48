//===- gemv.cuh - Decode linear layers and the LM head --------------------===//
//
// A decode step multiplies a few token rows (B <= max_batch) by each weight,
// so it is bound by reading the weights once: a warp owns one output row,
// its lanes stream the row with 16-byte loads (8 f16/bf16 or 4 f32 weights),
// and every token of a tile of up to kTokenTile reuses the loaded weights
// from registers. Sums are in f32 and finish with a warp reduction.
//
// One launch can compute several projections of the same input (segments:
// Q, K and V), a gated pair (gate and up, then act(gate) * up), or add a
// residual in the epilogue. In gather mode (the LM head) the rows are each
// sequence's last new token, `b * S + step_lengths[b] - 1`, and the result
// row is the sequence's row of the logits buffer.
//
// Launch: grid.x = ceil(rows / kWarps), block = kWarps * 32.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_GEMV_CUH
#define SITS_KERNELS_GEMV_CUH

#include "sits/common.cuh"

namespace sits {

enum Epilogue { kPlain = 0, kResidual = 1, kGlu = 2 };

/// Adds this lane's share of `row . x[token]` for each token of a tile.
template <class Cfg>
__device__ __forceinline__ void
gemvAccumulate(const typename Cfg::Weight::Storage *__restrict__ row,
               const float *const *xRows, int count, float *acc) {
  typedef typename Cfg::Weight W;
  const int lane = threadIdx.x % kWarpSize;
  for (int k = lane * Cfg::kVec; k < Cfg::kK; k += kWarpSize * Cfg::kVec) {
    float w[Cfg::kVec];
    if constexpr (Cfg::kVec > 1)
      load16<W>(row + k, w);
    else
      w[0] = W::load(row[k]);
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
      if (tt >= count)
        break;
      float x[Cfg::kVec];
      if constexpr (Cfg::kVec > 1)
        loadFloats<Cfg::kVec>(xRows[tt] + k, x);
      else
        x[0] = xRows[tt][k];
      for (int e = 0; e < Cfg::kVec; ++e)
        acc[tt] += w[e] * x[e];
    }
  }
}

/// Config: Weight, kK, kSegments, rows(s), hasBias(s), kTotalRows (rows
/// the warps cover: the sum of the segments, or one segment's rows with
/// kGlu), kEpilogue, kActivation, kWarps, kTokenTile, kVec, kGatherLast.
/// `tokens` is T (or B in gather mode); `seqLen` and `stepLengths` are read
/// only in gather mode.
template <class Cfg>
__device__ void gemv(const float *__restrict__ x,
                     const typename Cfg::Weight::Storage *const *weights,
                     const float *const *biases, float *const *outs,
                     const float *__restrict__ residual, int tokens, int seqLen,
                     const int *__restrict__ stepLengths) {
  const int lane = threadIdx.x % kWarpSize;
  int row = blockIdx.x * Cfg::kWarps + threadIdx.x / kWarpSize;
  if (row >= Cfg::kTotalRows)
    return; // the whole warp leaves together
  int segment = 0;
  if constexpr (Cfg::kEpilogue != kGlu) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (row < Cfg::rows(segment))
        break;
      row -= Cfg::rows(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);
  const typename Cfg::Weight::Storage *wRow =
      select<Cfg::kSegments>(weights, segment) +
      static_cast<long>(row) * Cfg::kK;

  for (int t0 = 0; t0 < tokens; t0 += Cfg::kTokenTile) {
    const int count = min(Cfg::kTokenTile, tokens - t0);
    const float *xRows[Cfg::kTokenTile];
    bool live[Cfg::kTokenTile];
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
      int t = t0 + tt;
      long source = t;
      live[tt] = tt < count;
      if constexpr (Cfg::kGatherLast) {
        int length = tt < count ? stepLengths[t] : 0;
        live[tt] = length > 0;
        source = static_cast<long>(t) * seqLen + (length > 0 ? length - 1 : 0);
      }
      xRows[tt] = x + (tt < count ? source : 0) * Cfg::kK;
    }
    float acc[Cfg::kTokenTile];
    for (int tt = 0; tt < Cfg::kTokenTile; ++tt)
      acc[tt] = 0.0f;
    gemvAccumulate<Cfg>(wRow, xRows, count, acc);

    if constexpr (Cfg::kEpilogue == kGlu) {
      float up[Cfg::kTokenTile];
      for (int tt = 0; tt < Cfg::kTokenTile; ++tt)
        up[tt] = 0.0f;
      gemvAccumulate<Cfg>(weights[1] + static_cast<long>(row) * Cfg::kK, xRows,
                          count, up);
      for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
        if (tt >= count)
          break;
        float gate = warpSum(acc[tt]);
        float upValue = warpSum(up[tt]);
        if (lane == tt) {
          if (Cfg::hasBias(0))
            gate += biases[0][row];
          if (Cfg::hasBias(1))
            upValue += biases[1][row];
          outs[0][static_cast<long>(t0 + tt) * width + row] =
              activate<Cfg::kActivation>(gate) * upValue;
        }
      }
    } else {
      for (int tt = 0; tt < Cfg::kTokenTile; ++tt) {
        if (tt >= count)
          break;
        float sum = warpSum(acc[tt]);
        if (lane == tt && live[tt]) {
          if (Cfg::hasBias(segment))
            sum += select<Cfg::kSegments>(biases, segment)[row];
          long index = static_cast<long>(t0 + tt) * width + row;
          if constexpr (Cfg::kEpilogue == kResidual)
            sum += residual[index];
          select<Cfg::kSegments>(outs, segment)[index] = sum;
        }
      }
    }
  }
}

} // namespace sits

#endif // SITS_KERNELS_GEMV_CUH
