//===- tvc_common.cuh - What the TVC head's kernels share -----------------===//
//
// The TVC head's (tvc.cuh) launch size, the order-preserving keys of its
// f64 bounds, its scratch regions and its input row.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_TVC_COMMON_CUH
#define SITS_KERNELS_TVC_COMMON_CUH

#include "sits/common.cuh"

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
tvcInputRow(const float *x, int b, StepRows stepRows) {
  const int length = stepRows.lengths[b];
  if (length <= 0)
    return nullptr;
  return x + (stepRows.first(b) + length - 1) * Cfg::kK;
}

/// h_k as the head multiplies it.
template <class Cfg> __device__ __forceinline__ float tvcInput(float value) {
  if constexpr (Cfg::kRoundInput)
    return Cfg::Weight::load(Cfg::Weight::store(value));
  else
    return value;
}

} // namespace sits

#endif // SITS_KERNELS_TVC_COMMON_CUH
