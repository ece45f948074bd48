//===- ToyEngineTest.h - A fixture with the toy engine on a GPU -*- C++ -*-===//
//
// Writes the toy engine (ToyCompile.h) for the GPU at hand into a private
// folder, and checks tokens against the toy's CPU reference. Tests skip
// without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_RUNTIME_TOYENGINETEST_H
#define SITS_TEST_UNIT_RUNTIME_TOYENGINETEST_H

#include "ToyCompile.h"
#include "sits/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <unistd.h>

namespace sits::test {

class ToyEngineTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (countGpus() == 0)
      GTEST_SKIP() << "no CUDA GPU";
    int major = 0, minor = 0;
    ASSERT_EQ(
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
        cudaSuccess);
    ASSERT_EQ(
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0),
        cudaSuccess);
    deviceSm = static_cast<uint32_t>(major * 10 + minor);
    char templ[] = "/tmp/sits-gpu-test.XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    dir = templ;
  }
  void TearDown() override {
    for (const std::string &path : written)
      std::remove(path.c_str());
    if (!dir.empty())
      rmdir(dir.c_str());
  }

  /// Writes the toy engine for `sm` (default: this GPU's) and returns its
  /// path.
  std::string writeToy(const test::ToyConfig &config, bool cubin = true,
                       bool ptx = false) {
    format::ModuleImage module;
    std::string error;
    if (!test::compileToyModule(config, config.targetSm, cubin, ptx, &module,
                                &error)) {
      ADD_FAILURE() << error;
      return "";
    }
    format::EngineContents contents = test::buildToyEngine(
        config, test::makeToyWeights(config), std::move(module));
    std::string path = dir + "/toy" + std::to_string(written.size()) + ".sits";
    if (!format::writeEngine(contents, path, {}, &error))
      ADD_FAILURE() << error;
    written.push_back(path);
    return path;
  }
  test::ToyConfig toyConfig() {
    test::ToyConfig config;
    config.targetSm = deviceSm;
    return config;
  }

  /// Each generated token is (one of) the CPU reference's most likely
  /// tokens given the same history.
  void expectGreedyMatchesReference(const test::ToyConfig &config,
                                    std::vector<int32_t> prompt,
                                    const std::vector<int32_t> &tokens) {
    test::ToyWeights weights = test::makeToyWeights(config);
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::vector<float> ref =
          test::toyReferenceLogits(config, weights, prompt);
      float best = *std::max_element(ref.begin(), ref.end());
      ASSERT_GE(tokens[k], 0);
      ASSERT_LT(tokens[k], int32_t(config.vocab));
      EXPECT_GE(ref[tokens[k]], best - 1e-3f * std::max(1.0f, std::fabs(best)))
          << "token " << k << " is " << tokens[k] << ", reference prefers "
          << (std::max_element(ref.begin(), ref.end()) - ref.begin());
      prompt.push_back(tokens[k]);
    }
  }

  static std::vector<int32_t> bytes(const std::string &text) {
    return std::vector<int32_t>(text.begin(), text.end());
  }

  uint32_t deviceSm = 0;
  std::string dir;
  std::vector<std::string> written;
};

inline GenerateParams greedy(uint32_t tokens) {
  GenerateParams p;
  p.maxNewTokens = tokens;
  return p;
}

/// One slot's input to Session::step (reset: start the slot over).
inline StepInput stepInput(uint32_t slot, std::vector<int32_t> tokens,
                           bool reset = false) {
  StepInput in;
  in.slot = slot;
  in.tokens = std::move(tokens);
  in.reset = reset;
  return in;
}

inline GenerateParams sampled(uint32_t tokens, uint64_t seed) {
  GenerateParams p;
  p.maxNewTokens = tokens;
  p.sampling.temperature = 0.9f;
  p.sampling.topK = 40;
  p.sampling.topP = 0.92f;
  p.sampling.seed = seed;
  return p;
}

} // namespace sits::test

#endif // SITS_TEST_UNIT_RUNTIME_TOYENGINETEST_H
