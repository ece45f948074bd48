//===- SamplingGpuTest.cpp - The sampling kernel on known logits ----------===//
//
// Many rows of the same logits are sampled in one launch: each row is
// another stream of the same seed, so its tokens are independent draws from
// the distribution the parameters define. The kernel's draws equal the
// host sampler's (runtime/serve, the CPU backends') on the same logits.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "sits/Runtime.h"
#include "src/Sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include <map>
#include <random>
#include <set>

using sits::runtime::DeviceSamplingParams;

namespace {

class SamplingTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (sits::countGpus() == 0)
      GTEST_SKIP() << "no CUDA GPU";
  }

  /// Samples one row of `logits` per entry of `rows`, each with its
  /// parameters, drawing the token of index `indices[r]`.
  std::vector<int32_t> sampleRows(const std::vector<float> &logits,
                                  const std::vector<DeviceSamplingParams> &rows,
                                  const std::vector<int32_t> &indices) {
    const uint32_t vocab = static_cast<uint32_t>(logits.size());
    const uint32_t count = static_cast<uint32_t>(rows.size());
    std::vector<float> all;
    for (uint32_t r = 0; r < count; ++r)
      all.insert(all.end(), logits.begin(), logits.end());
    // The index is the length before the step plus the step's: split it.
    std::vector<int32_t> past(count), step(count);
    for (uint32_t r = 0; r < count; ++r) {
      step[r] = indices[r] % 3;
      past[r] = indices[r] - step[r];
    }
    float *dLogits = nullptr;
    DeviceSamplingParams *dParams = nullptr;
    int32_t *dPast = nullptr, *dStep = nullptr, *dTokens = nullptr;
    EXPECT_EQ(cudaMalloc(&dLogits, all.size() * 4), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&dParams, count * sizeof(DeviceSamplingParams)),
              cudaSuccess);
    EXPECT_EQ(cudaMalloc(&dPast, count * 4), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&dStep, count * 4), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&dTokens, count * 4), cudaSuccess);
    cudaMemcpy(dLogits, all.data(), all.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dParams, rows.data(), count * sizeof(DeviceSamplingParams),
               cudaMemcpyHostToDevice);
    cudaMemcpy(dPast, past.data(), count * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dStep, step.data(), count * 4, cudaMemcpyHostToDevice);
    EXPECT_EQ(sits::runtime::launchSample(dLogits, count, vocab, vocab, dParams,
                                          dPast, dStep, dTokens, nullptr),
              cudaSuccess);
    std::vector<int32_t> tokens(count);
    EXPECT_EQ(
        cudaMemcpy(tokens.data(), dTokens, count * 4, cudaMemcpyDeviceToHost),
        cudaSuccess);
    for (void *p : {static_cast<void *>(dLogits), static_cast<void *>(dParams),
                    static_cast<void *>(dPast), static_cast<void *>(dStep),
                    static_cast<void *>(dTokens)})
      cudaFree(p);
    return tokens;
  }

  /// `rows` independent draws from `logits` (row r: stream r) of the token
  /// at index `index`.
  std::vector<int32_t> sample(const std::vector<float> &logits, uint32_t rows,
                              DeviceSamplingParams params, int32_t index = 0) {
    std::vector<DeviceSamplingParams> ps(rows, params);
    for (uint32_t r = 0; r < rows; ++r)
      ps[r].stream = r;
    return sampleRows(logits, ps, std::vector<int32_t>(rows, index));
  }

  static DeviceSamplingParams params(float temperature, uint32_t topK,
                                     float topP, uint64_t seed = 1) {
    return {temperature, topK, topP, 0, seed};
  }

  static std::map<int32_t, double> frequencies(const std::vector<int32_t> &t) {
    std::map<int32_t, double> f;
    for (int32_t token : t)
      f[token] += 1.0 / t.size();
    return f;
  }
};

TEST_F(SamplingTest, GreedyTakesTheLowestIndexOfEqualMaxima) {
  std::vector<float> logits(1000, 0.0f);
  logits[300] = 5.0f;
  logits[7] = 5.0f;
  logits[3] = NAN;
  logits[900] = -INFINITY;
  for (int32_t t : sample(logits, 4, params(0.0f, 0, 1.0f)))
    EXPECT_EQ(t, 7);
  std::vector<float> allNan(50, NAN);
  EXPECT_EQ(sample(allNan, 1, params(1.0f, 0, 1.0f))[0], 0);
}

TEST_F(SamplingTest, TemperatureShapesTheDistribution) {
  std::vector<float> logits = {0.0f, std::log(2.0f)};
  auto at1 = frequencies(sample(logits, 8000, params(1.0f, 0, 1.0f)));
  EXPECT_NEAR(at1[1], 2.0 / 3.0, 0.03);
  auto atHalf = frequencies(sample(logits, 8000, params(0.5f, 0, 1.0f)));
  EXPECT_NEAR(atHalf[1], 4.0 / 5.0, 0.03);
}

TEST_F(SamplingTest, TopKKeepsOnlyTheKMostLikely) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(5000);
  for (float &l : logits)
    l = normal(rng);
  std::vector<float> sorted = logits;
  std::sort(sorted.rbegin(), sorted.rend());
  auto tokens = sample(logits, 4000, params(2.0f, 5, 1.0f));
  std::map<int32_t, double> f = frequencies(tokens);
  EXPECT_EQ(f.size(), 5u);
  for (const auto &entry : f)
    EXPECT_GE(logits[entry.first], sorted[4]);
  // Within the top 5 the draw follows the tempered softmax.
  double z = 0;
  for (int i = 0; i < 5; ++i)
    z += std::exp((sorted[i] - sorted[0]) / 2.0);
  for (const auto &entry : f)
    EXPECT_NEAR(entry.second,
                std::exp((logits[entry.first] - sorted[0]) / 2.0) / z, 0.035);
}

TEST_F(SamplingTest, TopPKeepsTheSmallestNucleus) {
  std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                               std::log(0.3f)};
  auto f = frequencies(sample(logits, 8000, params(1.0f, 0, 0.75f)));
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[1], 0.5 / 0.8, 0.03);
  EXPECT_NEAR(f[3], 0.3 / 0.8, 0.03);
  // Top-k then top-p: k = 3 keeps {1, 3, 0}; p = 0.9 of 0.95 keeps all 3.
  auto g = frequencies(sample(logits, 8000, params(1.0f, 3, 0.9f)));
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(g.count(2), 0u);
  EXPECT_NEAR(g[0], 0.15 / 0.95, 0.03);
}

TEST_F(SamplingTest, DeterministicGivenSeedAndIndexOnALargeVocabulary) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(128256);
  for (float &l : logits)
    l = normal(rng);
  DeviceSamplingParams p = params(0.8f, 50, 0.9f, 1234);
  auto a = sample(logits, 64, p, 7);
  auto b = sample(logits, 64, p, 7);
  EXPECT_EQ(a, b);
  auto c = sample(logits, 64, p, 8);
  EXPECT_NE(a, c);
  std::vector<float> sorted = logits;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int32_t t : a)
    EXPECT_GE(logits[t], sorted[49]);
  EXPECT_GT(frequencies(a).size(), 1u);
}

TEST_F(SamplingTest, KernelAndHostSamplerDrawAlike) {
  // Logits with ties (rounded to quarters), NaN and -inf; each row draws
  // another token index of one of a few seeds. The host sampler of the CPU
  // backends must pick the kernel's token: the same keys, weights,
  // thresholds and Philox numbers. Only expf's last bits may differ
  // between host and GPU, which rarely moves a draw across a token
  // boundary: at most 1 % of mismatches is tolerated (another keying would
  // mismatch almost every draw).
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> logits(5003);
  for (float &l : logits)
    l = std::round(normal(rng) * 4.0f) / 4.0f;
  logits[11] = NAN;
  logits[12] = -INFINITY;
  const uint32_t rows = 512;
  std::vector<int32_t> indices(rows);
  int mismatches = 0, draws = 0;
  for (DeviceSamplingParams p :
       {params(0.7f, 0, 1.0f), params(1.0f, 40, 1.0f), params(1.3f, 0, 0.9f),
        params(0.9f, 50, 0.8f), params(2.0f, 7, 0.5f)}) {
    std::vector<DeviceSamplingParams> ps(rows, p);
    for (uint32_t r = 0; r < rows; ++r) {
      ps[r].seed = 1000 + r % 3;
      indices[r] = int32_t(r * 7 + 3);
    }
    std::vector<int32_t> gpu = sampleRows(logits, ps, indices);
    std::set<int32_t> distinct(gpu.begin(), gpu.end());
    EXPECT_GT(distinct.size(), 1u) << "temperature " << p.temperature;
    for (uint32_t r = 0; r < rows; ++r) {
      sits::SamplingParams host{p.temperature, p.topK, p.topP, ps[r].seed};
      int32_t want = sits::serve::sampleToken(
          logits.data(), uint32_t(logits.size()), host, uint64_t(indices[r]));
      mismatches += gpu[r] != want;
      ++draws;
    }
  }
  EXPECT_LE(mismatches, draws / 100) << "of " << draws << " draws";
  std::printf("kernel and host sampler: %d of %d draws differ\n", mismatches,
              draws);
}

} // namespace
