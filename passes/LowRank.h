//===- LowRank.h - Rank-R factors of an LM head, with proof bounds -*- C++ -*-//
//
// What --sits-fuse-tvc stores for sits.tvc_lm_head: a rank-R factorization
// W ~= P T of a weight W [rows, cols] (T's rows orthonormal, from a
// randomized SVD) and, per row, upper bounds of the norms the op's proof
// uses. The factorization only has to be good for the proof to succeed
// often; the bounds are rigorous whatever its quality.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_LOWRANK_H
#define SITS_PASSES_LOWRANK_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <vector>

namespace sits {

struct LowRankFactors {
  int64_t rows = 0, cols = 0, rank = 0;
  /// T [rank, cols]: orthonormal rows (to f32 rounding).
  std::vector<float> right;
  /// P [rows, rank] = W T^T, rounded to f32.
  std::vector<float> left;
  /// [rows, 4]: upper bounds (f32, rounded up) of rho = |w - T^T P_v|,
  /// sigma = |T (w - T^T P_v)|, pi = |P_v| and omega = |w|, exact in the
  /// stored f32 values.
  std::vector<float> bounds;
  /// The leading singular values the range finder found (largest first).
  std::vector<double> singularValues;
  /// |P T|_F^2 / |W|_F^2: the share of W's energy the preview keeps.
  double capturedEnergy = 0;
};

/// Runs body(i) for every i in [0, count), possibly on several threads.
using ParallelFor = llvm::function_ref<void(
    size_t count, llvm::function_ref<void(size_t)> body)>;

/// Factors `weight` (row-major [rows, cols], rank < cols) with a randomized
/// range finder (`oversampling` extra columns, `powerIterations` passes of
/// W W^T, seeded, so results are reproducible) and a Jacobi eigen-solve of
/// the projected problem. With `parallel`, the products with W and the
/// per-row bounds run on its threads, split in a fixed way: the results do
/// not depend on the number of threads.
LowRankFactors factorLowRank(llvm::ArrayRef<float> weight, int64_t rows,
                             int64_t cols, int64_t rank,
                             int64_t oversampling = 10,
                             int64_t powerIterations = 2,
                             uint64_t seed = 0x7f4a7c15,
                             ParallelFor parallel = nullptr);

/// Eigen-decomposition of a symmetric `n x n` matrix (row-major) by cyclic
/// Jacobi rotations: eigenvalues (descending) and the matching eigenvectors
/// as rows of `vectors` [n, n]. Exposed for tests.
void symmetricEigen(std::vector<double> matrix, int64_t n,
                    std::vector<double> &values, std::vector<double> &vectors);

} // namespace sits

#endif // SITS_PASSES_LOWRANK_H
