//===- Sampling.cpp - The host-side sampler of CPU backends ---------------===//

#include "Backend.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace sits;

/// SplitMix64: a well-mixed 64-bit value of the seed and counter, so that a
/// request's draws depend on nothing but its seed and token positions.
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int32_t serve::sampleToken(const float *logits, uint32_t vocab,
                           const SamplingParams &params, uint64_t counter) {
  int32_t best = 0;
  float bestValue = -INFINITY;
  bool found = false;
  for (uint32_t i = 0; i < vocab; ++i) {
    // NaN never wins; every logit NaN gives token 0 (as the GPU sampler).
    if (!std::isnan(logits[i]) && (!found || logits[i] > bestValue)) {
      best = static_cast<int32_t>(i);
      bestValue = logits[i];
      found = true;
    }
  }
  if (params.temperature <= 0.0f || params.topK == 1 || !found ||
      bestValue == -INFINITY)
    return best;

  // Candidates by falling logit (index order among equals).
  std::vector<uint32_t> order;
  order.reserve(vocab);
  for (uint32_t i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i]))
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return logits[a] > logits[b];
  });
  size_t kept = order.size();
  if (params.topK > 0 && params.topK < kept) {
    // Ties with the k-th value are kept.
    float floor = logits[order[params.topK - 1]];
    kept = params.topK;
    while (kept < order.size() && logits[order[kept]] == floor)
      ++kept;
  }
  std::vector<double> weights(kept);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) {
    weights[i] =
        std::exp((double(logits[order[i]]) - bestValue) / params.temperature);
    total += weights[i];
  }
  if (params.topP < 1.0f) {
    double wanted = std::max(0.0, double(params.topP)) * total;
    double sum = 0;
    size_t n = 0;
    while (n < kept && (n == 0 || sum < wanted))
      sum += weights[n++];
    kept = n;
    total = sum;
  }
  double u = double(mix(params.seed ^ mix(counter)) >> 11) * 0x1.0p-53;
  double target = u * total, cumulative = 0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += weights[i];
    if (target < cumulative)
      return static_cast<int32_t>(order[i]);
  }
  return static_cast<int32_t>(order[kept - 1]);
}
