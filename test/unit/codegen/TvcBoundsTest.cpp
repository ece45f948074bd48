//===- TvcBoundsTest.cpp - TVC bounds of the stored LM head ---------------===//
//
// An engine stores the LM head in f16 or bf16, so the bounds its TVC kernels
// check must hold for the stored rows, not the f32 rows the IR's bounds were
// computed for. Here: the recomputed bounds against the norms they bound,
// computed in long double from the stored values, on a low-rank head plus
// noise; and the IR's own bounds do not suffice for some stored rows (so the
// recomputation is needed).
//
//===----------------------------------------------------------------------===//

#include "backends/cuda/TvcBounds.h"
#include "passes/LowRank.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace sits;

namespace {

constexpr int64_t kVocab = 96, kHidden = 80, kRank = 20;

std::vector<float> makeHead() {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> left(kVocab * 8), right(8 * kHidden);
  for (float &value : left)
    value = normal(random);
  for (float &value : right)
    value = normal(random) * 0.3f;
  std::vector<float> head(kVocab * kHidden);
  for (int64_t v = 0; v < kVocab; ++v)
    for (int64_t k = 0; k < kHidden; ++k) {
      float sum = 0.02f * normal(random);
      for (int64_t r = 0; r < 8; ++r)
        sum += left[v * 8 + r] * right[r * kHidden + k];
      head[v * kHidden + k] = sum;
    }
  return head;
}

float stored(float value, format::DType type) {
  if (type == format::DType::F16)
    return format::halfToFloat(format::floatToHalf(value));
  if (type == format::DType::BF16)
    return format::bfloat16ToFloat(format::floatToBFloat16(value));
  return value;
}

/// Unit roundoff of the storage type.
long double unit(format::DType type) {
  return type == format::DType::F16    ? 0x1p-11L
         : type == format::DType::BF16 ? 0x1p-8L
                                       : 0x1p-24L;
}

/// The four norms of row v of the stored head, in long double.
std::array<long double, 4> exactNorms(const std::vector<float> &head,
                                      const LowRankFactors &f,
                                      format::DType type, int64_t v) {
  std::vector<long double> residual(kHidden);
  long double omega = 0, pi = 0;
  for (int64_t k = 0; k < kHidden; ++k) {
    long double w = stored(head[v * kHidden + k], type);
    omega += w * w;
    for (int64_t r = 0; r < kRank; ++r)
      w -= (long double)f.left[v * kRank + r] * f.right[r * kHidden + k];
    residual[k] = w;
  }
  long double rho = 0, sigma = 0;
  for (int64_t k = 0; k < kHidden; ++k)
    rho += residual[k] * residual[k];
  for (int64_t r = 0; r < kRank; ++r) {
    long double dot = 0;
    for (int64_t k = 0; k < kHidden; ++k)
      dot += (long double)f.right[r * kHidden + k] * residual[k];
    sigma += dot * dot;
    pi += (long double)f.left[v * kRank + r] * f.left[v * kRank + r];
  }
  return {std::sqrt(rho), std::sqrt(sigma), std::sqrt(pi), std::sqrt(omega)};
}

class StoredBounds : public ::testing::TestWithParam<format::DType> {};

TEST_P(StoredBounds, BoundTheStoredRows) {
  const format::DType type = GetParam();
  std::vector<float> head = makeHead();
  LowRankFactors f = factorLowRank(head, kVocab, kHidden, kRank);
  std::vector<float> bounds = codegen::storedTvcBounds(
      head, f.right, f.bounds, type, kVocab, kHidden, kRank);
  ASSERT_EQ(bounds.size(), size_t(kVocab * 4));
  int irTooSmall = 0;
  for (int64_t v = 0; v < kVocab; ++v) {
    std::array<long double, 4> exact = exactNorms(head, f, type, v);
    for (int i = 0; i < 4; ++i) {
      EXPECT_GE((long double)bounds[v * 4 + i], exact[i])
          << "row " << v << ", norm " << i;
      // Not loose by more than the storage rounding (|w' - w| <= u |w|,
      // counted twice: once in the IR's bound, once added).
      EXPECT_LE((long double)bounds[v * 4 + i],
                exact[i] * 1.01L + 4 * unit(type) * exact[3])
          << "row " << v << ", norm " << i;
    }
    irTooSmall += (long double)f.bounds[v * 4] < exact[0] ||
                  (long double)f.bounds[v * 4 + 3] < exact[3];
  }
  if (type != format::DType::F32)
    EXPECT_GT(irTooSmall, 0)
        << "the f32 bounds already hold for every stored row: the test "
           "does not show why they are recomputed";
}

INSTANTIATE_TEST_SUITE_P(Types, StoredBounds,
                         ::testing::Values(format::DType::F32,
                                           format::DType::F16,
                                           format::DType::BF16));

} // namespace
