//===- LowRank.cpp - Rank-R factors of an LM head, with proof bounds ------===//
//
// Randomized SVD (Halko, Martinsson, Tropp): Y = W Omega spans W's dominant
// column space once a few passes of W W^T have sharpened it; the small
// matrix B = Q^T W then has W's leading right singular vectors, found with a
// Jacobi eigen-solve of B B^T. Tall matrices are kept as column vectors so
// that every loop runs over contiguous memory.
//
//===----------------------------------------------------------------------===//

#include "passes/LowRank.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

using namespace sits;

namespace {

/// Reproducible standard normal numbers (splitmix64 + Box-Muller): the
/// standard library's distributions differ between implementations.
class Gaussian {
public:
  explicit Gaussian(uint64_t seed) : state(seed) {}
  double next() {
    if (spare) {
      double value = *spare;
      spare.reset();
      return value;
    }
    double u1 = uniform(), u2 = uniform();
    double radius = std::sqrt(-2.0 * std::log(u1));
    spare = radius * std::sin(2.0 * M_PI * u2);
    return radius * std::cos(2.0 * M_PI * u2);
  }

private:
  double uniform() {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    // (0, 1]: never 0, so the logarithm is finite.
    return (static_cast<double>(z >> 11) + 1.0) * 0x1p-53;
  }
  uint64_t state;
  std::optional<double> spare;
};

using Vectors = std::vector<std::vector<double>>;

/// Four interleaved partial sums, so that the compiler can vectorize the
/// loop without reassociating it (results stay reproducible).
double dot(const double *a, const double *b, int64_t n) {
  double lanes[4] = {0, 0, 0, 0};
  int64_t body = n - n % 4;
  for (int64_t i = 0; i < body; i += 4)
    for (int64_t l = 0; l < 4; ++l)
      lanes[l] += a[i + l] * b[i + l];
  double sum = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
  for (int64_t i = body; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

/// Runs body(i) for i in [0, count) with `parallel`, or in order without
/// it.
void forEach(ParallelFor parallel, size_t count,
             llvm::function_ref<void(size_t)> body) {
  if (parallel)
    return parallel(count, body);
  for (size_t i = 0; i < count; ++i)
    body(i);
}

/// Rows (of W) per task: a fixed split, so that results do not depend on
/// the number of threads.
constexpr int64_t kRowBlock = 256;

/// Modified Gram-Schmidt, twice (once is not enough in floating point);
/// vectors that vanish (rank deficiency) are replaced by zeros. Serial: a
/// few percent of the work at the ranks in use, and classical Gram-Schmidt
/// (whose projections could run in parallel) lost accuracy on
/// rank-deficient inputs.
void orthonormalize(Vectors &vectors) {
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < vectors.size(); ++i) {
      std::vector<double> &v = vectors[i];
      int64_t n = v.size();
      for (size_t j = 0; j < i; ++j) {
        double projection = dot(v.data(), vectors[j].data(), n);
        for (int64_t k = 0; k < n; ++k)
          v[k] -= projection * vectors[j][k];
      }
      double length = std::sqrt(dot(v.data(), v.data(), n));
      double scale = length > 1e-300 ? 1.0 / length : 0.0;
      for (double &x : v)
        x *= scale;
    }
}

/// `out[l] = W x[l]` for vectors x of length cols (out: length rows).
Vectors multiply(llvm::ArrayRef<float> w, int64_t rows, int64_t cols,
                 const Vectors &x, ParallelFor parallel) {
  Vectors out(x.size(), std::vector<double>(rows));
  forEach(parallel, (rows + kRowBlock - 1) / kRowBlock, [&](size_t block) {
    std::vector<double> row(cols);
    const int64_t begin = static_cast<int64_t>(block) * kRowBlock;
    for (int64_t r = begin; r < std::min(rows, begin + kRowBlock); ++r) {
      std::copy(w.begin() + r * cols, w.begin() + (r + 1) * cols, row.begin());
      for (size_t l = 0; l < x.size(); ++l)
        out[l][r] = dot(row.data(), x[l].data(), cols);
    }
  });
  return out;
}

/// `out[l] = W^T y[l]` for vectors y of length rows (out: length cols).
/// Split over columns: each task sums its columns over all rows in order.
Vectors multiplyTransposed(llvm::ArrayRef<float> w, int64_t rows, int64_t cols,
                           const Vectors &y, ParallelFor parallel) {
  constexpr int64_t kColumnBlock = 256;
  Vectors out(y.size(), std::vector<double>(cols, 0.0));
  forEach(parallel, (cols + kColumnBlock - 1) / kColumnBlock,
          [&](size_t block) {
            const int64_t begin = static_cast<int64_t>(block) * kColumnBlock;
            const int64_t end = std::min(cols, begin + kColumnBlock);
            for (int64_t r = 0; r < rows; ++r) {
              const float *row = w.data() + r * cols;
              for (size_t l = 0; l < y.size(); ++l) {
                double coefficient = y[l][r];
                double *target = out[l].data();
                for (int64_t k = begin; k < end; ++k)
                  target[k] += coefficient * static_cast<double>(row[k]);
              }
            }
          });
  return out;
}

/// The f32 value just above `x * (1 + 2^-30)`: an upper bound of x that
/// also covers x's own f64 rounding.
float roundUp(double x) {
  double padded = x * (1.0 + 0x1p-30);
  float result = static_cast<float>(padded);
  if (static_cast<double>(result) < padded)
    result = std::nextafter(result, std::numeric_limits<float>::infinity());
  return result;
}

} // namespace

void sits::symmetricEigen(std::vector<double> a, int64_t n,
                          std::vector<double> &values,
                          std::vector<double> &vectors) {
  // v: columns are eigenvectors while rotating; transposed at the end.
  std::vector<double> v(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    v[i * n + i] = 1.0;
  double total = 0;
  for (double x : a)
    total += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q)
        off += a[p * n + q] * a[p * n + q];
    if (off <= 1e-30 * total || off == 0)
      break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double apq = a[p * n + q];
        if (std::fabs(apq) <= 1e-300)
          continue;
        double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
        double t = (theta >= 0 ? 1.0 : -1.0) /
                   (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
        double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (int64_t k = 0; k < n; ++k) {
          double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {
          double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return a[x * n + x] > a[y * n + y];
  });
  values.resize(n);
  vectors.assign(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    values[i] = a[order[i] * n + order[i]];
    for (int64_t k = 0; k < n; ++k)
      vectors[i * n + k] = v[k * n + order[i]];
  }
}

LowRankFactors sits::factorLowRank(llvm::ArrayRef<float> w, int64_t rows,
                                   int64_t cols, int64_t rank,
                                   int64_t oversampling,
                                   int64_t powerIterations, uint64_t seed,
                                   ParallelFor parallel) {
  LowRankFactors result;
  result.rows = rows;
  result.cols = cols;
  result.rank = rank;
  int64_t samples = std::min(cols, rank + oversampling);

  // Range finder: Q spans W's dominant column space.
  Gaussian gaussian(seed);
  Vectors omega(samples, std::vector<double>(cols));
  for (auto &vector : omega)
    for (double &x : vector)
      x = gaussian.next();
  Vectors q = multiply(w, rows, cols, omega, parallel);
  orthonormalize(q);
  for (int64_t i = 0; i < powerIterations; ++i) {
    Vectors z = multiplyTransposed(w, rows, cols, q, parallel);
    orthonormalize(z);
    q = multiply(w, rows, cols, z, parallel);
    orthonormalize(q);
  }
  // B = Q^T W (as rows b_l = W^T q_l); its right singular vectors from the
  // eigenvectors of B B^T.
  Vectors b = multiplyTransposed(w, rows, cols, q, parallel);
  std::vector<double> gram(samples * samples);
  for (int64_t i = 0; i < samples; ++i)
    for (int64_t j = 0; j <= i; ++j)
      gram[i * samples + j] = gram[j * samples + i] =
          dot(b[i].data(), b[j].data(), cols);
  std::vector<double> eigenvalues, eigenvectors;
  symmetricEigen(gram, samples, eigenvalues, eigenvectors);
  Vectors right(rank, std::vector<double>(cols, 0.0));
  for (int64_t i = 0; i < rank; ++i) {
    result.singularValues.push_back(std::sqrt(std::max(0.0, eigenvalues[i])));
    for (int64_t j = 0; j < samples; ++j) {
      double coefficient = eigenvectors[i * samples + j];
      for (int64_t k = 0; k < cols; ++k)
        right[i][k] += coefficient * b[j][k];
    }
  }
  orthonormalize(right);

  // The stored factors, and the bounds in exact terms of the stored values.
  result.right.resize(rank * cols);
  Vectors stored(rank, std::vector<double>(cols));
  double largestRow = 0;
  for (int64_t i = 0; i < rank; ++i) {
    double length = 0;
    for (int64_t k = 0; k < cols; ++k) {
      float value = static_cast<float>(right[i][k]);
      result.right[i * cols + k] = value;
      stored[i][k] = value;
      length += double(value) * value;
    }
    largestRow = std::max(largestRow, std::sqrt(length));
  }
  result.left.resize(rows * rank);
  result.bounds.resize(rows * 4);
  // f64 rounding of the residual: |fl(r) - r| <= (R + 1) 2^-53 (|w| +
  // sum_r |P_vr| |t_r|) elementwise, so in norm at most `slack` below.
  double unit = (rank + 2) * 0x1p-52;
  // Each row on its own; the energy sums per block of rows, added in order.
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> blockTotal(blocks, 0.0), blockKept(blocks, 0.0);
  forEach(parallel, blocks, [&](size_t block) {
    std::vector<double> row(cols), residual(cols), left(rank);
    const int64_t begin = static_cast<int64_t>(block) * kRowBlock;
    for (int64_t v = begin; v < std::min(rows, begin + kRowBlock); ++v) {
      std::copy(w.begin() + v * cols, w.begin() + (v + 1) * cols, row.begin());
      double omega = std::sqrt(dot(row.data(), row.data(), cols));
      double leftNorm = 0, leftAbs = 0;
      for (int64_t i = 0; i < rank; ++i) {
        float value =
            static_cast<float>(dot(row.data(), stored[i].data(), cols));
        result.left[v * rank + i] = value;
        left[i] = value;
        leftNorm += double(value) * value;
        leftAbs += std::fabs(value);
      }
      residual = row;
      for (int64_t i = 0; i < rank; ++i)
        for (int64_t k = 0; k < cols; ++k)
          residual[k] -= left[i] * stored[i][k];
      double rho = std::sqrt(dot(residual.data(), residual.data(), cols));
      double slack = unit * (omega + leftAbs * largestRow);
      double sigma = 0;
      for (int64_t i = 0; i < rank; ++i) {
        double projection = dot(stored[i].data(), residual.data(), cols);
        sigma += projection * projection;
      }
      sigma = std::sqrt(sigma);
      double rhoUp = rho + slack;
      double sigmaUp = sigma + std::sqrt(double(rank)) * largestRow *
                                   (2 * slack + cols * 0x1p-52 * rhoUp);
      float *bounds = result.bounds.data() + v * 4;
      bounds[0] = roundUp(rhoUp);
      bounds[1] = roundUp(sigmaUp);
      bounds[2] = roundUp(std::sqrt(leftNorm));
      bounds[3] = roundUp(omega);
      blockTotal[block] += omega * omega;
      blockKept[block] += omega * omega - rho * rho;
    }
  });
  double total = 0, kept = 0;
  for (int64_t block = 0; block < blocks; ++block) {
    total += blockTotal[block];
    kept += blockKept[block];
  }
  result.capturedEnergy = total > 0 ? kept / total : 1.0;
  return result;
}
