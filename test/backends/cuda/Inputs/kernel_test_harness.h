//===- kernel_test_harness.h - What the emulated kernel tests share -------===//
//
// Included by the kernel tests that the emulator runs (kernel_tests.cpp,
// quant_kernel_tests.cpp): random inputs from one seeded generator, a
// launch through the emulator, one report line per case, and the float64
// reference of a GEMV output row's epilogue.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_KERNEL_TEST_HARNESS_H
#define SITS_TEST_KERNEL_TEST_HARNESS_H

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace harness {

/// The test's random generator (seeded once by the test's seedTests).
inline std::mt19937_64 rng;
inline int passed = 0, failed = 0;
/// Columns of a case name in the report.
inline int nameWidth = 60;

inline float uniform(float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

inline std::vector<float> randomFloats(size_t n, float scale = 1.0f) {
  std::vector<float> out(n);
  for (float &v : out)
    v = uniform(-scale, scale);
  return out;
}

/// One line per case; NaN errors and unwritten outputs fail.
inline void report(const std::string &name, double error, double tolerance,
                   bool written) {
  bool ok = written && error <= tolerance;
  (ok ? passed : failed)++;
  std::printf("%-*s error %.3g (tolerance %.1g)%s %s\n", nameWidth,
              name.c_str(), error, tolerance, written ? "" : " UNWRITTEN",
              ok ? "ok" : "FAIL");
}

/// Runs `entry` on the emulator over a grid of blocks of `threads`.
inline bool launch(void (*entry)(void **), unsigned gx, unsigned gy,
                   unsigned gz, unsigned threads, unsigned shared,
                   void **args) {
  unsigned grid[3] = {gx, gy, gz}, block[3] = {threads, 1, 1};
  char error[512];
  if (sits_emu_launch(entry, grid, block, shared, args, error, sizeof(error)) !=
      0) {
    std::printf("launch failed: %s\n", error);
    return false;
  }
  return true;
}

/// The float64 reference of one GEMV output: silu(gate) * up for a gated
/// launch (`dot(0)` and `dot(1)`), else segment `segment`'s `dot` plus
/// `residual` when the epilogue adds one.
template <class Dot>
double expectedGemvOutput(bool gated, int segment, Dot dot, bool addResidual,
                          double residual) {
  if (gated) {
    double gate = dot(0), up = dot(1);
    return gate / (1.0 + std::exp(-gate)) * up;
  }
  return dot(segment) + (addResidual ? residual : 0.0);
}

} // namespace harness

#endif // SITS_TEST_KERNEL_TEST_HARNESS_H
