//===- rope.cuh - Rotary position embedding from a precomputed table ------===//
//
// The table is `[rows, R]` f32 (R = rotary_dim): row p holds cos of position
// p in its first R/2 columns and sin in the last R/2 (what
// --sits-hoist-rope builds). A token's row is its position,
// past_lengths[b] + i, read from device memory. Dimensions at or past R pass
// through. Products are rounded before the sum (no fused multiply-add), as
// the reference executor computes them.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ROPE_CUH
#define SITS_KERNELS_ROPE_CUH

#include "sits/common.cuh"

namespace sits {

/// The table row of token i of sequence b, clamped into the table (a
/// padding token may sit past it; the runtime keeps real tokens inside).
template <class Rope>
__device__ __forceinline__ const float *
ropeTableRow(const float *SITS_RESTRICT table, const int *SITS_RESTRICT past,
             int b, int i) {
  int position = positionOf(past, b, i);
  position = max(0, min(position, Rope::kTableRows - 1));
  return table + static_cast<long>(position) * Rope::kRotary;
}

/// Element d of one rotated head; `x` is the head's input row.
/// Rope: kRotary, kInterleaved.
template <class Rope>
__device__ __forceinline__ float ropeElement(const float *SITS_RESTRICT x,
                                             int d,
                                             const float *SITS_RESTRICT row) {
  constexpr int kHalf = Rope::kRotary / 2;
  if (d >= Rope::kRotary)
    return x[d];
  if constexpr (Rope::kInterleaved) {
    const int k = d / 2;
    const float c = row[k], s = row[kHalf + k];
    return d % 2 == 0 ? __fmul_rn(x[d], c) - __fmul_rn(x[d + 1], s)
                      : __fmul_rn(x[d], c) + __fmul_rn(x[d - 1], s);
  } else {
    if (d < kHalf)
      return __fmul_rn(x[d], row[d]) - __fmul_rn(x[d + kHalf], row[kHalf + d]);
    const int k = d - kHalf;
    return __fmul_rn(x[d], row[k]) + __fmul_rn(x[k], row[kHalf + k]);
  }
}

/// Rotates every head of one token row of width kHeads * kHeadDim: elements
/// first, first + stride, ... (by default the block's threads).
template <class Rope, int kThreads>
__device__ __forceinline__ void
ropeRow(const float *SITS_RESTRICT in, const float *SITS_RESTRICT tableRow,
        float *SITS_RESTRICT out, int first = threadIdx.x,
        int stride = kThreads) {
  constexpr int kWidth = Rope::kHeads * Rope::kHeadDim;
  for (int e = first; e < kWidth; e += stride) {
    const int head = e / Rope::kHeadDim, d = e % Rope::kHeadDim;
    out[e] = ropeElement<Rope>(in + head * Rope::kHeadDim, d, tableRow);
  }
}

/// Standalone RoPE (when it cannot fuse into the KV-cache write), one block
/// per token. Config: kHeads, kHeadDim, kRotary, kInterleaved, kTableRows,
/// kThreads.
template <class Cfg>
__device__ void rope(const float *SITS_RESTRICT input,
                     const float *SITS_RESTRICT table, float *SITS_RESTRICT out,
                     const int *SITS_RESTRICT pastLengths, StepRows rows) {
  constexpr long kWidth = Cfg::kHeads * Cfg::kHeadDim;
  const int t = tileIndex().x;
  int i;
  const int b = rows.locate(t, &i);
  ropeRow<Cfg, Cfg::kThreads>(input + t * kWidth,
                              ropeTableRow<Cfg>(table, pastLengths, b, i),
                              out + t * kWidth);
}

} // namespace sits

#endif // SITS_KERNELS_ROPE_CUH
