//===- TvcTest.cpp - The TVC LM head is exact; its factors and bounds -----===//
//
// sits.tvc_lm_head must give the plain LM head's argmax and top-k (indices
// and values) on every row, proved or not: here on heads built to stress
// the proof (a low-rank head plus noise, duplicated rows that tie exactly),
// with both outcomes exercised. The randomized SVD is checked against a
// known spectrum, and its bounds against the norms they bound, computed in
// long double.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Executor.h"
#include "compiler/registration/Registration.h"
#include "passes/LowRank.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

using namespace sits;
using namespace sits::reference;

namespace {

std::string dense(const std::vector<float> &values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return "dense<\"0x" + llvm::toHex(bytes) + "\">";
}

std::vector<float> gaussian(std::mt19937 &random, size_t count, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float &v : values)
    v = normal(random);
  return values;
}

/// Indices of the `k` largest values, ties by lower index (what greedy
/// argmax and top-k sampling read).
std::vector<int64_t> topK(const float *row, int64_t count, int64_t k) {
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  order.resize(k);
  return order;
}

class Tvc : public ::testing::Test {
protected:
  Tvc() {
    mlir::DialectRegistry registry;
    sits::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Runs the plain head and the TVC head on `rows` hidden states and checks
  /// that argmax and the top `exactTop` agree everywhere. Returns the
  /// executor's counts.
  ExecutorStatistics check(const std::vector<float> &w, int64_t vocab,
                           int64_t hidden, int64_t rank, int64_t candidates,
                           int64_t exactTop, const std::vector<float> &h,
                           int64_t rows) {
    LowRankFactors factors = factorLowRank(w, vocab, hidden, rank);
    std::string t = "tensor<" + std::to_string(vocab) + "x" +
                    std::to_string(hidden) + "xf32>";
    std::string p = "tensor<" + std::to_string(vocab) + "x" +
                    std::to_string(rank) + "xf32>";
    std::string r = "tensor<" + std::to_string(rank) + "x" +
                    std::to_string(hidden) + "xf32>";
    std::string b = "tensor<" + std::to_string(vocab) + "x4xf32>";
    std::string in = "tensor<?x" + std::to_string(hidden) + "xf32>";
    std::string out = "tensor<?x" + std::to_string(vocab) + "xf32>";
    std::string source =
        "func.func @heads(%h: " + in + ") -> (" + out + ", " + out + ") {\n" +
        "  %w = sits.weight \"w\" " + dense(w) + " : " + t + "\n" +
        "  %p = sits.weight \"p\" " + dense(factors.left) + " : " + p + "\n" +
        "  %t = sits.weight \"t\" " + dense(factors.right) + " : " + r + "\n" +
        "  %b = sits.weight \"b\" " + dense(factors.bounds) + " : " + b + "\n" +
        "  %plain = sits.lm_head %h, %w : " + in + ", " + t + " -> " + out +
        "\n  %tvc = sits.tvc_lm_head %h, %w preview(%p, %t) bounds(%b) "
        "{candidates = " +
        std::to_string(candidates) +
        ", exact_top = " + std::to_string(exactTop) + "} : " + in + ", " + t +
        ", " + p + ", " + r + ", " + b + " -> " + out +
        "\n  return %plain, %tvc : " + out + ", " + out + "\n}\n";
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    if (!module)
      return {};
    Executor executor(*module);
    auto results = executor.run(
        "heads", {Tensor::fromFloats(ElementType::F32, {rows, hidden}, h)});
    EXPECT_TRUE(bool(results)) << llvm::toString(results.takeError());
    if (!results)
      return {};
    const float *plain = (*results)[0].getTensor().floats().data();
    const float *tvc = (*results)[1].getTensor().floats().data();
    for (int64_t row = 0; row < rows; ++row) {
      const float *a = plain + row * vocab, *b = tvc + row * vocab;
      std::vector<int64_t> expected = topK(a, vocab, exactTop);
      std::vector<int64_t> actual = topK(b, vocab, exactTop);
      EXPECT_EQ(actual, expected) << "row " << row;
      for (int64_t v : expected)
        EXPECT_EQ(a[v], b[v]) << "row " << row << ", token " << v;
    }
    return executor.getStatistics();
  }

  mlir::MLIRContext context;
};

/// A head of rank `rank` plus noise of scale `noise`, with `duplicates` rows
/// copied from others (exact ties).
std::vector<float> makeHead(std::mt19937 &random, int64_t vocab, int64_t hidden,
                            int64_t rank, float noise, int64_t duplicates) {
  std::vector<float> a = gaussian(random, vocab * rank, 1.0f);
  std::vector<float> b = gaussian(random, rank * hidden, 1.0f);
  std::vector<float> w = gaussian(random, vocab * hidden, noise);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t k = 0; k < hidden; ++k)
      for (int64_t r = 0; r < rank; ++r)
        w[v * hidden + k] += a[v * rank + r] * b[r * hidden + k];
  for (int64_t d = 0; d < duplicates; ++d) {
    int64_t from = (d * 37) % vocab, to = (d * 53 + 11) % vocab;
    std::copy(w.begin() + from * hidden, w.begin() + (from + 1) * hidden,
              w.begin() + to * hidden);
  }
  // More copies of row 1 than candidates: a tie that crosses the candidate
  // boundary, which no proof can settle (row 1 made long enough to win).
  for (int64_t k = 0; k < hidden; ++k)
    w[hidden + k] *= 4.0f;
  for (int64_t copy = 0; copy < 24; ++copy)
    std::copy(w.begin() + hidden, w.begin() + 2 * hidden,
              w.begin() + (vocab - 1 - copy) * hidden);
  return w;
}

TEST_F(Tvc, GreedyAndTopKMatchThePlainHead) {
  std::mt19937 random(11);
  const int64_t vocab = 300, hidden = 24, rows = 400;
  std::vector<float> w = makeHead(random, vocab, hidden, 6, 0.02f, 30);
  std::vector<float> h = gaussian(random, rows * hidden, 1.0f);
  // Rows that make a duplicated pair the best: the hidden state along the
  // copied row.
  for (int64_t row = 0; row < 40; ++row) {
    int64_t source = row < 10 ? 1 : (row * 37) % vocab;
    for (int64_t k = 0; k < hidden; ++k)
      h[row * hidden + k] = 3.0f * w[source * hidden + k];
  }
  for (int64_t exactTop : {1, 5}) {
    ExecutorStatistics stats =
        check(w, vocab, hidden, 6, 16, exactTop, h, rows);
    EXPECT_EQ(stats.tvcRows, rows);
    // Both outcomes happen: proofs on most rows, fallbacks on the ties.
    EXPECT_GT(stats.tvcProved, rows / 2) << "exact_top " << exactTop;
    EXPECT_LT(stats.tvcProved, rows) << "exact_top " << exactTop;
  }
}

TEST_F(Tvc, ExactWhenThePreviewIsPoor) {
  // A full-rank random head with a rank-2 preview: proofs rarely hold, the
  // answers must still be exact.
  std::mt19937 random(5);
  const int64_t vocab = 128, hidden = 16, rows = 100;
  std::vector<float> w = gaussian(random, vocab * hidden, 1.0f);
  std::vector<float> h = gaussian(random, rows * hidden, 1.0f);
  ExecutorStatistics stats = check(w, vocab, hidden, 2, 8, 3, h, rows);
  EXPECT_EQ(stats.tvcRows, rows);
  EXPECT_LT(stats.tvcProved, rows);
}

TEST_F(Tvc, AllCandidatesAlwaysProves) {
  std::mt19937 random(9);
  const int64_t vocab = 20, hidden = 8, rows = 10;
  std::vector<float> w = gaussian(random, vocab * hidden, 1.0f);
  std::vector<float> h = gaussian(random, rows * hidden, 1.0f);
  ExecutorStatistics stats = check(w, vocab, hidden, 3, vocab, 4, h, rows);
  EXPECT_EQ(stats.tvcProved, rows);
}

//===----------------------------------------------------------------------===//
// Factors and bounds
//===----------------------------------------------------------------------===//

TEST(LowRank, SymmetricEigen) {
  // [[2, 1, 0], [1, 2, 0], [0, 0, 5]]: eigenvalues 5, 3, 1.
  std::vector<double> values, vectors;
  symmetricEigen({2, 1, 0, 1, 2, 0, 0, 0, 5}, 3, values, vectors);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_NEAR(values[0], 5, 1e-12);
  EXPECT_NEAR(values[1], 3, 1e-12);
  EXPECT_NEAR(values[2], 1, 1e-12);
  EXPECT_NEAR(std::fabs(vectors[3 * 1 + 0]), std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(std::fabs(vectors[3 * 1 + 1]), std::sqrt(0.5), 1e-12);
}

/// Orthonormal columns of a random `rows x cols` matrix (Gram-Schmidt in
/// long double), column-major.
std::vector<long double> randomOrthonormal(std::mt19937 &random, int64_t rows,
                                           int64_t cols) {
  std::normal_distribution<double> normal;
  std::vector<long double> q(rows * cols);
  for (auto &x : q)
    x = normal(random);
  for (int64_t c = 0; c < cols; ++c)
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t p = 0; p < c; ++p) {
        long double d = 0;
        for (int64_t i = 0; i < rows; ++i)
          d += q[c * rows + i] * q[p * rows + i];
        for (int64_t i = 0; i < rows; ++i)
          q[c * rows + i] -= d * q[p * rows + i];
      }
      long double n = 0;
      for (int64_t i = 0; i < rows; ++i)
        n += q[c * rows + i] * q[c * rows + i];
      for (int64_t i = 0; i < rows; ++i)
        q[c * rows + i] /= std::sqrt(n);
    }
  return q;
}

TEST(LowRank, ThreadsGiveTheSameFactors) {
  // FuseTVC factors on the context's threads; the split is fixed, so the
  // factors and bounds must be bit for bit those of the serial run.
  const int64_t rows = 700, cols = 48, rank = 6;
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(rows * cols);
  for (float &value : w)
    value = normal(random);
  LowRankFactors serial = factorLowRank(w, rows, cols, rank);
  // Tasks in reverse order, two at a time, as another thread count would.
  auto parallel = [](size_t count, llvm::function_ref<void(size_t)> body) {
    for (size_t i = count; i > 0; i -= std::min<size_t>(i, 2)) {
      std::thread first([&] { body(i - 1); });
      if (i >= 2)
        body(i - 2);
      first.join();
    }
  };
  LowRankFactors threaded =
      factorLowRank(w, rows, cols, rank, 10, 2, 0x7f4a7c15, parallel);
  EXPECT_EQ(threaded.left, serial.left);
  EXPECT_EQ(threaded.right, serial.right);
  EXPECT_EQ(threaded.bounds, serial.bounds);
  EXPECT_EQ(threaded.singularValues, serial.singularValues);
  EXPECT_EQ(threaded.capturedEnergy, serial.capturedEnergy);
}

TEST(LowRank, RecoversAKnownSpectrumAndBoundsHold) {
  std::mt19937 random(21);
  const int64_t rows = 400, cols = 48, rank = 8;
  std::vector<long double> u = randomOrthonormal(random, rows, cols);
  std::vector<long double> v = randomOrthonormal(random, cols, cols);
  std::vector<double> sigma(cols);
  for (int64_t i = 0; i < cols; ++i)
    sigma[i] = 10.0 * std::pow(0.8, double(i));
  std::vector<float> w(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      long double sum = 0;
      for (int64_t i = 0; i < cols; ++i)
        sum += u[i * rows + r] * sigma[i] * v[i * cols + c];
      w[r * cols + c] = static_cast<float>(sum);
    }
  LowRankFactors f = factorLowRank(w, rows, cols, rank);
  ASSERT_EQ(f.singularValues.size(), size_t(rank));
  for (int64_t i = 0; i < rank; ++i)
    EXPECT_NEAR(f.singularValues[i], sigma[i], 1e-5 * sigma[0]) << i;

  // T's rows are orthonormal (to f32 rounding).
  for (int64_t a = 0; a < rank; ++a)
    for (int64_t b = 0; b < rank; ++b) {
      long double d = 0;
      for (int64_t c = 0; c < cols; ++c)
        d += (long double)f.right[a * cols + c] * f.right[b * cols + c];
      EXPECT_NEAR(double(d), a == b ? 1.0 : 0.0, 1e-6);
    }
  // Every stored bound is at least the norm it bounds.
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<long double> residual(cols);
    long double omega = 0, pi = 0;
    for (int64_t c = 0; c < cols; ++c) {
      long double sum = w[r * cols + c];
      omega += sum * sum;
      for (int64_t i = 0; i < rank; ++i)
        sum -= (long double)f.left[r * rank + i] * f.right[i * cols + c];
      residual[c] = sum;
    }
    for (int64_t i = 0; i < rank; ++i)
      pi += (long double)f.left[r * rank + i] * f.left[r * rank + i];
    long double rho = 0, sigmaNorm = 0;
    for (int64_t c = 0; c < cols; ++c)
      rho += residual[c] * residual[c];
    for (int64_t i = 0; i < rank; ++i) {
      long double d = 0;
      for (int64_t c = 0; c < cols; ++c)
        d += (long double)f.right[i * cols + c] * residual[c];
      sigmaNorm += d * d;
    }
    const float *b = f.bounds.data() + r * 4;
    EXPECT_GE((long double)b[0], std::sqrt(rho)) << r;
    EXPECT_GE((long double)b[1], std::sqrt(sigmaNorm)) << r;
    EXPECT_GE((long double)b[2], std::sqrt(pi)) << r;
    EXPECT_GE((long double)b[3], std::sqrt(omega)) << r;
    // ... and not loose: the residual is what the spectrum leaves.
    EXPECT_LE(b[0], std::sqrt(rho) * 1.001 + 1e-6) << r;
  }
  double tail = 0, total = 0;
  for (int64_t i = 0; i < cols; ++i) {
    total += sigma[i] * sigma[i];
    if (i >= rank)
      tail += sigma[i] * sigma[i];
  }
  EXPECT_NEAR(f.capturedEnergy, 1 - tail / total, 1e-4);
}

} // namespace
