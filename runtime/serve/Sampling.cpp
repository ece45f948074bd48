//===- Sampling.cpp - The host-side sampler of CPU backends ---------------===//
//
// The GPU sampling kernel's rules and random numbers on the host
// (runtime/src/SamplingDraw.h): the same keys, the same fixed-point
// weights, the same thresholds and the same Philox draw, so that a request
// samples the same tokens on the CPU reference backend as on the GPU given
// the same logits (up to the last bit of expf).
//
//===----------------------------------------------------------------------===//

#include "Backend.h"

#include "src/SamplingDraw.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace sits;
using namespace sits::runtime;

int32_t serve::sampleToken(const float *logits, uint32_t vocab,
                           const SamplingParams &params, uint64_t tokenIndex) {
  // The lowest index among equal maxima; NaN never wins, and every logit
  // NaN gives token 0.
  int32_t best = 0;
  float bestValue = -INFINITY;
  bool found = false;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (!isNaN(logits[i]) && (!found || logits[i] > bestValue)) {
      best = static_cast<int32_t>(i);
      bestValue = logits[i];
      found = true;
    }
  }
  if (params.temperature <= 0.0f || params.topK == 1 || bestValue == -INFINITY)
    return best;
  const float invTemperature = 1.0f / params.temperature;

  std::vector<uint32_t> keys(vocab);
  std::vector<uint64_t> weights(vocab);
  for (uint32_t i = 0; i < vocab; ++i) {
    keys[i] = orderKey(logits[i]);
    weights[i] = sampleWeight(logits[i], bestValue, invTemperature);
  }
  // Top-k: the k-th largest key, ties at it kept.
  uint32_t floorKey = 0;
  if (params.topK > 0 && params.topK < vocab) {
    std::vector<uint32_t> sorted = keys;
    std::nth_element(sorted.begin(), sorted.begin() + (params.topK - 1),
                     sorted.end(), std::greater<uint32_t>());
    floorKey = sorted[params.topK - 1];
  }
  auto keptWeight = [&] {
    uint64_t total = 0;
    for (uint32_t i = 0; i < vocab; ++i)
      if (keys[i] >= floorKey)
        total += weights[i];
    return total;
  };
  // Top-p: the largest key whose keys at or above it weigh the target.
  if (params.topP < 1.0f) {
    const uint64_t target = topPTarget(params.topP, keptWeight());
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < vocab; ++i)
      if (keys[i] >= floorKey)
        order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return keys[a] > keys[b]; });
    uint64_t cumulative = 0;
    for (uint32_t i : order) {
      cumulative += weights[i];
      if (cumulative >= target) {
        floorKey = keys[i];
        break;
      }
    }
  }
  // The draw, scanning the kept tokens in index order.
  const uint64_t target =
      scaleDraw(sampleBits(params.seed, tokenIndex, 0), keptWeight());
  uint64_t cumulative = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (keys[i] < floorKey)
      continue;
    cumulative += weights[i];
    if (target < cumulative)
      return static_cast<int32_t>(i);
  }
  return best;
}
