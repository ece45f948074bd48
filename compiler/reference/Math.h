//===- Math.h - Numeric building blocks of the reference executor -*- C++ -*-=//
//
// The few loops that dominate the executor's run time (dot products and
// matrix products), written so that the compiler vectorizes them without
// -ffast-math: sums use fixed interleaved partial accumulators, so results are
// deterministic and do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_MATH_H
#define SITS_COMPILER_REFERENCE_MATH_H

#include <cmath>
#include <cstdint>
#include <functional>

namespace sits::reference {

/// `sum_k a[k] * b[k]` in f32: eight interleaved partial sums (lane l adds
/// the products k = l mod 8), added pairwise at the end, then the tail.
float dotF32(const float *a, const float *b, int64_t count);

/// `sum_k values[k]` in f32 with the same lanes as dotF32.
float sumF32(const float *values, int64_t count);

/// `c[m, n] = sum_k a[m, k] * b[n, k]` (b read row by row, as a `[N, K]`
/// linear weight), each element summed as dotF32 does.
void matmulTransposedB(const float *a, const float *b, float *c, int64_t m,
                       int64_t n, int64_t k, unsigned numThreads);

/// `c[m, n] = sum_k a[m, k] * b[k, n]` (b `[K, N]`, as ONNX MatMul), summed
/// in k order, one f32 accumulator per output.
void matmulPlain(const float *a, const float *b, float *c, int64_t m, int64_t n,
                 int64_t k, unsigned numThreads);

/// Runs `body(begin, end)` over [0, count) split into contiguous chunks on
/// up to `numThreads` threads, when `workPerItem * count` is large enough to
/// pay for starting them.
void parallelFor(int64_t count, double workPerItem, unsigned numThreads,
                 const std::function<void(int64_t, int64_t)> &body);

inline float sigmoidF32(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float siluF32(float x) { return x * sigmoidF32(x); }
inline float geluErfF32(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}
inline float geluTanhF32(float x) {
  // sqrt(2 / pi)
  constexpr float kScale = 0.79788456080286536f;
  return 0.5f * x * (1.0f + std::tanh(kScale * (x + 0.044715f * x * x * x)));
}

} // namespace sits::reference

#endif // SITS_COMPILER_REFERENCE_MATH_H
