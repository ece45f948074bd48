//===- SamplingDraw.h - What the GPU and CPU samplers share -----*- C++ -*-===//
//
// The sampling kernel (SamplingKernels.cu) and the host sampler of the CPU
// serving backends (runtime/serve/Sampling.cpp) draw the same way from the
// same random numbers, so that given the same logits they pick the same
// token: Philox4x32-10 keyed by the request's seed, with the counter (index
// of the token drawn in its sequence, stream), a logit's order-preserving
// key, and its weight exp((logit - max) / T) in 2^-40 fixed point. Keying
// by the token's index rather than by a step or a slot makes a seeded
// request's tokens its own: the same whichever slot it runs in and
// whatever runs beside it. Plain C++ for the host; __host__ __device__
// under nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SRC_SAMPLINGDRAW_H
#define SITS_RUNTIME_SRC_SAMPLINGDRAW_H

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SITS_HOST_DEVICE __host__ __device__
#else
#define SITS_HOST_DEVICE
#endif

namespace sits {
namespace runtime {

/// Token weights are integers in units of 2^-40: every sum is exact, so the
/// draw does not depend on the order of the additions.
constexpr int kSampleWeightBits = 40;
/// The counter's last word, constant ("SITS").
constexpr uint32_t kSampleCounterTag = 0x53495453u;

SITS_HOST_DEVICE inline void mulHiLo32(uint32_t a, uint32_t b, uint32_t *hi,
                                       uint32_t *lo) {
  uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

/// Philox4x32 with 10 rounds (Salmon et al., SC'11).
SITS_HOST_DEVICE inline void
philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulHiLo32(0xD2511F53u, c0, &hi0, &lo0);
    mulHiLo32(0xCD9E8D57u, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// The 64 random bits of one draw: Philox keyed by `seed`, counter
/// (tokenIndex, stream, tag). `tokenIndex` is the position the drawn token
/// takes in its sequence (the prompt's length for the first); `stream`
/// tells apart sequences that share a seed and a prompt (the index in a
/// generate batch; 0 for a request of its own).
SITS_HOST_DEVICE inline uint64_t sampleBits(uint64_t seed, uint64_t tokenIndex,
                                            uint32_t stream) {
  const uint32_t counter[4] = {static_cast<uint32_t>(tokenIndex),
                               static_cast<uint32_t>(tokenIndex >> 32), stream,
                               kSampleCounterTag};
  const uint32_t key[2] = {static_cast<uint32_t>(seed),
                           static_cast<uint32_t>(seed >> 32)};
  uint32_t random[4];
  philox4x32(counter, key, random);
  return (static_cast<uint64_t>(random[0]) << 32) | random[1];
}

/// `bits` scaled into [0, total): the high word of bits * total.
SITS_HOST_DEVICE inline uint64_t scaleDraw(uint64_t bits, uint64_t total) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(bits, total);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * total) >>
                               64);
#endif
}

SITS_HOST_DEVICE inline bool isNaN(float value) { return value != value; }

/// A monotone map from floats to unsigned keys (NaN sorts as -inf; -0 just
/// below +0).
SITS_HOST_DEVICE inline uint32_t orderKey(float value) {
  if (isNaN(value))
    value = -INFINITY;
  uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(value);
#else
  std::memcpy(&bits, &value, 4);
#endif
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

/// exp((logit - max) / T) in 2^-40 fixed point (the maximum weighs 2^40;
/// NaN weighs nothing). Host and GPU `expf` may differ in the last bit, so
/// their weights agree to about 2^-23 of their size.
SITS_HOST_DEVICE inline uint64_t sampleWeight(float logit, float maxLogit,
                                              float invTemperature) {
  if (isNaN(logit))
    return 0;
  float delta = logit - maxLogit;
  if (delta >= 0.0f)
    return uint64_t(1) << kSampleWeightBits;
  // float to integer conversion truncates, on both sides.
  return static_cast<uint64_t>(
      ldexpf(expf(delta * invTemperature), kSampleWeightBits));
}

/// The weight top-p keeps at least: ceil(topP * total), within [1, total].
SITS_HOST_DEVICE inline uint64_t topPTarget(float topP, uint64_t total) {
  double wanted = ceil(static_cast<double>(topP > 0.0f ? topP : 0.0f) *
                       static_cast<double>(total));
  uint64_t target = static_cast<uint64_t>(wanted);
  return target < 1 ? 1 : (target > total ? total : target);
}

} // namespace runtime
} // namespace sits

#undef SITS_HOST_DEVICE

#endif // SITS_RUNTIME_SRC_SAMPLINGDRAW_H
