//===- elementwise.cuh - add, activation and glu when they do not fuse ----===//
//
// Flat loops over the `count = T * width` elements of a step, four per
// thread (one 16-byte access each when the width is a multiple of 4).
// Launch: grid = ceil(count / (4 * kThreads)), block kThreads.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_ELEMENTWISE_CUH
#define SITS_KERNELS_ELEMENTWISE_CUH

#include "sits/common.cuh"

namespace sits {

/// Applies `op(index)` to the four elements from `4 * thread`.
template <bool kVec4, class Op>
__device__ __forceinline__ void forEachOfFour(long count, Op op) {
  const long first =
      (static_cast<long>(tileIndex().x) * tileDim().x + threadIdx.x) * 4;
  if (kVec4 && first + 4 <= count) {
    op(first, true);
    return;
  }
  for (long e = first; e < first + 4 && e < count; ++e)
    op(e, false);
}

/// Config: kWidth, kThreads, kVec4.
template <class Cfg>
__device__ void add(const float *SITS_RESTRICT lhs,
                    const float *SITS_RESTRICT rhs, float *SITS_RESTRICT out,
                    int tokens) {
  forEachOfFour<Cfg::kVec4>(
      static_cast<long>(tokens) * Cfg::kWidth, [&](long e, bool four) {
        if (four) {
          SITS_ASSERT_ALIGNED(lhs + e, 16);
          SITS_ASSERT_ALIGNED(rhs + e, 16);
          SITS_ASSERT_ALIGNED(out + e, 16);
          float4 a = *reinterpret_cast<const float4 *>(lhs + e);
          float4 b = *reinterpret_cast<const float4 *>(rhs + e);
          float4 sum;
          sum.x = a.x + b.x;
          sum.y = a.y + b.y;
          sum.z = a.z + b.z;
          sum.w = a.w + b.w;
          *reinterpret_cast<float4 *>(out + e) = sum;
        } else {
          out[e] = lhs[e] + rhs[e];
        }
      });
}

/// Config: kWidth, kThreads, kVec4, kActivation.
template <class Cfg>
__device__ void activation(const float *SITS_RESTRICT input,
                           float *SITS_RESTRICT out, int tokens) {
  forEachOfFour<false>(
      static_cast<long>(tokens) * Cfg::kWidth,
      [&](long e, bool) { out[e] = activate<Cfg::kActivation>(input[e]); });
}

/// `out = act(gate) * up`. Config: kWidth, kThreads, kVec4, kActivation.
template <class Cfg>
__device__ void glu(const float *SITS_RESTRICT gate,
                    const float *SITS_RESTRICT up, float *SITS_RESTRICT out,
                    int tokens) {
  forEachOfFour<false>(static_cast<long>(tokens) * Cfg::kWidth,
                       [&](long e, bool) {
                         out[e] = activate<Cfg::kActivation>(gate[e]) * up[e];
                       });
}

} // namespace sits

#endif // SITS_KERNELS_ELEMENTWISE_CUH
