//===- SamplingKernels.cu - Greedy, temperature, top-k, top-p -------------===//
//
// One block per sequence. Every sum is in integers (token weights in 2^-40
// fixed point), so the sampled token depends only on the logits, the
// parameters, the seed and the index of the token drawn in its sequence:
// the same with or without CUDA graphs, run after run, in whichever slot
// and beside whatever else. The host sampler of the CPU backends draws the
// same way (SamplingDraw.h).
//
// Top-k and top-p thresholds are found by radix selection on order-preserving
// 32-bit keys of the logits (four 8-bit passes each) rather than by sorting
// the vocabulary:
//   top-k: the largest key t with count(key >= t) >= k;
//   top-p: the largest key t with weight(key >= t) >= top_p * weight(all
//          kept by top-k).
// Tokens at or above the threshold are kept; a token is then drawn in
// proportion to its weight, scanning the vocabulary in index order.
//
//===----------------------------------------------------------------------===//

#include "src/Sampling.h"
#include "src/SamplingDraw.h"

#include <cmath>
#include <cuda_runtime.h>

namespace sits {
namespace runtime {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

struct Shared {
  unsigned long long hist[256];
  unsigned long long warpSums[kWarps];
  float warpMax[kWarps];
  int warpIndex[kWarps];
  int bin;
  unsigned long long above;
  int token;
};

__device__ unsigned long long blockSum(unsigned long long value, Shared &sh) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int offset = 16; offset; offset >>= 1)
    value += __shfl_down_sync(kFullMask, value, offset);
  if (lane == 0)
    sh.warpSums[warp] = value;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < kWarps; ++w)
    total += sh.warpSums[w];
  __syncthreads();
  return total;
}

/// The largest key t such that the keys >= max(t, floorKey) hold at least
/// `target` (>= 1, at most the total) of count (Mass = false) or weight.
template <bool Mass>
__device__ uint32_t selectThreshold(const float *row, uint32_t vocab,
                                    uint32_t floorKey,
                                    unsigned long long target, float maxLogit,
                                    float invTemperature, Shared &sh) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads)
      sh.hist[i] = 0;
    __syncthreads();
    uint32_t highMask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (uint32_t i = threadIdx.x; i < vocab; i += kThreads) {
      float logit = row[i];
      uint32_t key = orderKey(logit);
      if (key < floorKey || (key & highMask) != (prefix & highMask))
        continue;
      unsigned long long v =
          Mass ? sampleWeight(logit, maxLogit, invTemperature) : 1ull;
      if (v)
        atomicAdd(&sh.hist[(key >> shift) & 255], v);
    }
    __syncthreads();
    if (warp == 0) {
      // Lane L owns bins 255-8L down to 248-8L (descending key order).
      unsigned long long local = 0;
      for (int j = 0; j < 8; ++j)
        local += sh.hist[255 - (8 * lane + j)];
      unsigned long long inclusive = local;
      for (int offset = 1; offset < 32; offset <<= 1) {
        unsigned long long n = __shfl_up_sync(kFullMask, inclusive, offset);
        if (lane >= offset)
          inclusive += n;
      }
      unsigned long long exclusive = inclusive - local;
      unsigned ballot =
          __ballot_sync(kFullMask, exclusive < target && inclusive >= target);
      int owner = ballot ? __ffs(ballot) - 1 : 31;
      if (lane == owner) {
        unsigned long long cumulative = exclusive;
        int bin = 248 - 8 * lane;
        for (int j = 0; j < 8; ++j) {
          int b = 255 - (8 * lane + j);
          if (cumulative + sh.hist[b] >= target) {
            bin = b;
            break;
          }
          cumulative += sh.hist[b];
        }
        sh.bin = bin;
        sh.above = cumulative;
      }
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sh.bin) << shift;
    target -= sh.above;
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads)
    sampleKernel(const float *logits, uint32_t vocab, uint64_t stride,
                 const DeviceSamplingParams *params, const int32_t *pastLengths,
                 const int32_t *stepLengths, int32_t *tokens) {
  __shared__ Shared sh;
  const uint32_t seq = blockIdx.x;
  const float *row = logits + seq * stride;
  const DeviceSamplingParams p = params[seq];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  // Maximum and argmax (the lowest index among equal maxima). A thread sees
  // its logits in increasing index order and keeps the first of equal ones.
  float best = -INFINITY;
  int bestIndex = 0x7fffffff;
  auto consider = [&](float logit, uint32_t i) {
    if (!isnan(logit) && (logit > best || bestIndex == 0x7fffffff)) {
      best = logit;
      bestIndex = static_cast<int>(i);
    }
  };
  uint32_t scalarFrom = 0;
  if (stride % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0) {
    // 16-byte loads, kAhead of them in flight: a 128K vocabulary in a few
    // round trips to L2 instead of one per 4 bytes (35 us -> a few).
    constexpr uint32_t kAhead = 8;
    const float4 *quads = reinterpret_cast<const float4 *>(row);
    const uint32_t count = vocab / 4;
    for (uint32_t q0 = threadIdx.x; q0 < count; q0 += kThreads * kAhead) {
      float4 v[kAhead];
      for (uint32_t a = 0; a < kAhead; ++a) {
        const uint32_t q = q0 + a * kThreads;
        v[a] = q < count ? quads[q] : make_float4(NAN, NAN, NAN, NAN);
      }
      for (uint32_t a = 0; a < kAhead; ++a) {
        const uint32_t i = 4 * (q0 + a * kThreads);
        consider(v[a].x, i);
        consider(v[a].y, i + 1);
        consider(v[a].z, i + 2);
        consider(v[a].w, i + 3);
      }
    }
    scalarFrom = 4 * count;
  }
  for (uint32_t i = scalarFrom + threadIdx.x; i < vocab; i += kThreads)
    consider(row[i], i);
  for (int offset = 16; offset; offset >>= 1) {
    float otherValue = __shfl_down_sync(kFullMask, best, offset);
    int otherIndex = __shfl_down_sync(kFullMask, bestIndex, offset);
    if (otherValue > best || (otherValue == best && otherIndex < bestIndex)) {
      best = otherValue;
      bestIndex = otherIndex;
    }
  }
  if (lane == 0) {
    sh.warpMax[warp] = best;
    sh.warpIndex[warp] = bestIndex;
  }
  __syncthreads();
  best = sh.warpMax[0];
  bestIndex = sh.warpIndex[0];
  for (int w = 1; w < kWarps; ++w) {
    if (sh.warpMax[w] > best ||
        (sh.warpMax[w] == best && sh.warpIndex[w] < bestIndex)) {
      best = sh.warpMax[w];
      bestIndex = sh.warpIndex[w];
    }
  }
  if (bestIndex == 0x7fffffff)
    bestIndex = 0; // every logit is NaN
  if (p.temperature <= 0.0f || p.topK == 1 || best == -INFINITY) {
    if (threadIdx.x == 0)
      tokens[seq] = bestIndex;
    return;
  }
  const float invTemperature = 1.0f / p.temperature;

  uint32_t floorKey = 0;
  if (p.topK > 0 && p.topK < vocab)
    floorKey =
        selectThreshold<false>(row, vocab, 0, p.topK, best, invTemperature, sh);
  if (p.topP < 1.0f) {
    unsigned long long local = 0;
    for (uint32_t i = threadIdx.x; i < vocab; i += kThreads) {
      float logit = row[i];
      if (orderKey(logit) >= floorKey)
        local += sampleWeight(logit, best, invTemperature);
    }
    unsigned long long total = blockSum(local, sh);
    floorKey =
        selectThreshold<true>(row, vocab, floorKey, topPTarget(p.topP, total),
                              best, invTemperature, sh);
  }

  // Draw: each thread owns a contiguous index range so that the block-wide
  // scan of kept weights follows index order.
  uint32_t per = (vocab + kThreads - 1) / kThreads;
  uint32_t begin = threadIdx.x * per;
  uint32_t end = min(vocab, begin + per);
  unsigned long long local = 0;
  for (uint32_t i = begin; i < end; ++i) {
    float logit = row[i];
    if (orderKey(logit) >= floorKey)
      local += sampleWeight(logit, best, invTemperature);
  }
  unsigned long long inclusive = local;
  for (int offset = 1; offset < 32; offset <<= 1) {
    unsigned long long n = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset)
      inclusive += n;
  }
  if (lane == 31)
    sh.warpSums[warp] = inclusive;
  if (threadIdx.x == 0)
    sh.token = bestIndex;
  __syncthreads();
  unsigned long long warpOffset = 0, total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp)
      warpOffset += sh.warpSums[w];
    total += sh.warpSums[w];
  }
  unsigned long long exclusive = warpOffset + inclusive - local;

  // The token's own index in its sequence keys the draw (SamplingDraw.h).
  const uint64_t index = uint64_t(pastLengths[seq]) + stepLengths[seq];
  unsigned long long target = // uniform in [0, total)
      scaleDraw(sampleBits(p.seed, index, p.stream), total);

  if (local && exclusive <= target && target < exclusive + local) {
    unsigned long long cumulative = exclusive;
    for (uint32_t i = begin; i < end; ++i) {
      float logit = row[i];
      if (orderKey(logit) < floorKey)
        continue;
      cumulative += sampleWeight(logit, best, invTemperature);
      if (target < cumulative) {
        sh.token = static_cast<int>(i);
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0)
    tokens[seq] = sh.token;
}

__global__ void advanceKernel(int32_t *pastLengths, const int32_t *stepLengths,
                              uint32_t batch, const int32_t *sampled,
                              int32_t *tokenIds) {
  for (uint32_t b = threadIdx.x; b < batch; b += blockDim.x) {
    pastLengths[b] += stepLengths[b];
    if (sampled)
      tokenIds[b] = sampled[b];
  }
}

} // namespace

cudaError_t launchSample(const float *logits, uint32_t batch, uint32_t vocab,
                         uint64_t stride, const DeviceSamplingParams *params,
                         const int32_t *pastLengths, const int32_t *stepLengths,
                         int32_t *tokens, cudaStream_t stream) {
  if (batch == 0 || vocab == 0)
    return cudaErrorInvalidValue;
  sampleKernel<<<batch, kThreads, 0, stream>>>(
      logits, vocab, stride, params, pastLengths, stepLengths, tokens);
  return cudaGetLastError();
}

cudaError_t launchAdvance(int32_t *pastLengths, const int32_t *stepLengths,
                          uint32_t batch, const int32_t *sampled,
                          int32_t *tokenIds, cudaStream_t stream) {
  advanceKernel<<<1, 256, 0, stream>>>(pastLengths, stepLengths, batch, sampled,
                                       tokenIds);
  return cudaGetLastError();
}

cudaError_t preloadSamplingKernels() {
  cudaFuncAttributes attributes;
  cudaError_t rc = cudaFuncGetAttributes(&attributes, sampleKernel);
  if (rc == cudaSuccess)
    rc = cudaFuncGetAttributes(&attributes, advanceKernel);
  return rc;
}

} // namespace runtime
} // namespace sits
