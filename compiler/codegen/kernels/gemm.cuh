//===- gemm.cuh - Prefill linear layers: tiled shared-memory GEMM ---------===//
//
// `out[T, N] = x[T, K] . W[N, K]^T` for the T = B * S tokens of a prefill
// chunk. A block computes a 64 x 64 tile of the output with 256 threads, each
// thread 4 x 4 outputs (rows ty + 16 i, columns tx + 16 j, so that the
// shared-memory reads of a warp are broadcasts or consecutive). K advances in
// steps of 32: x and W tiles are staged transposed in shared memory, W
// widened to f32 as it is stored; sums are in f32.
//
// Segments, the residual and the gated (GLU) epilogues are those of
// gemv.cuh. Launch: grid = (ceil(T / 64), tiles of all segments), block 256.
// (Issue 7 replaces this with a tensor-core kernel.)
//
//===----------------------------------------------------------------------===//

#ifndef SITS_KERNELS_GEMM_CUH
#define SITS_KERNELS_GEMM_CUH

#include "sits/common.cuh"
#include "sits/gemv.cuh"

namespace sits {

constexpr int kGemmTileM = 64;
constexpr int kGemmTileN = 64;
constexpr int kGemmTileK = 32;
constexpr int kGemmThreads = 256;

/// Loads 8 consecutive weights of `row` from column `k` (zeros past kK).
template <class Cfg>
__device__ __forceinline__ void
gemmLoadWeights(const typename Cfg::Weight::Storage *__restrict__ row, int k,
                float *out) {
  typedef typename Cfg::Weight W;
  if (Cfg::kVecW && k + 8 <= Cfg::kK) {
    for (int e = 0; e < 8; e += Vec16<W>::kElems)
      load16<W>(row + k + e, out + e);
  } else {
    for (int e = 0; e < 8; ++e)
      out[e] = k + e < Cfg::kK ? W::load(row[k + e]) : 0.0f;
  }
}

/// Loads 8 consecutive inputs of `row` from column `k` (zeros past kK).
template <class Cfg>
__device__ __forceinline__ void gemmLoadInputs(const float *__restrict__ row,
                                               int k, float *out) {
  if (Cfg::kVecX && k + 8 <= Cfg::kK) {
    loadFloats<8>(row + k, out);
  } else {
    for (int e = 0; e < 8; ++e)
      out[e] = k + e < Cfg::kK ? row[k + e] : 0.0f;
  }
}

/// Config: as gemv (Weight, kK, kSegments, rows(s), hasBias(s), kEpilogue,
/// kActivation) plus tiles(s) (column tiles of segment s), kVecW (weight
/// rows are 16-byte aligned), kVecX (input rows are).
template <class Cfg>
__device__ void gemm(const float *__restrict__ x,
                     const typename Cfg::Weight::Storage *const *weights,
                     const float *const *biases, float *const *outs,
                     const float *__restrict__ residual, int tokens) {
  constexpr bool kGated = Cfg::kEpilogue == kGlu;
  constexpr int kMats = kGated ? 2 : 1;
  __shared__ float xs[kGemmTileK][kGemmTileM];
  __shared__ float ws[kMats][kGemmTileK][kGemmTileN];

  // Which segment and which column tile of it this block computes.
  int tile = blockIdx.y, segment = 0;
  if constexpr (!kGated) {
    for (int s = 0; s + 1 < Cfg::kSegments; ++s) {
      if (tile < Cfg::tiles(segment))
        break;
      tile -= Cfg::tiles(segment);
      ++segment;
    }
  }
  const int width = Cfg::rows(segment);
  const int m0 = blockIdx.x * kGemmTileM, n0 = tile * kGemmTileN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  // Loader mapping: consecutive threads take consecutive rows, so the
  // transposed shared-memory stores of a warp hit consecutive banks.
  const int loadRow = tid % 64, loadK = (tid / 64) * 8;

  float acc[kMats][4][4];
  for (int g = 0; g < kMats; ++g)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        acc[g][i][j] = 0.0f;

  const int m = m0 + loadRow, n = n0 + loadRow;
  const float *xRow = x + static_cast<long>(m < tokens ? m : 0) * Cfg::kK;
  const typename Cfg::Weight::Storage *wRow[kMats];
  for (int g = 0; g < kMats; ++g)
    wRow[g] = select<Cfg::kSegments>(weights, kGated ? g : segment) +
              static_cast<long>(n < width ? n : 0) * Cfg::kK;
  for (int k0 = 0; k0 < Cfg::kK; k0 += kGemmTileK) {
    float values[8];
    if (m < tokens) {
      gemmLoadInputs<Cfg>(xRow, k0 + loadK, values);
    } else {
      for (int e = 0; e < 8; ++e)
        values[e] = 0.0f;
    }
    for (int e = 0; e < 8; ++e)
      xs[loadK + e][loadRow] = values[e];
    for (int g = 0; g < kMats; ++g) {
      if (n < width) {
        gemmLoadWeights<Cfg>(wRow[g], k0 + loadK, values);
      } else {
        for (int e = 0; e < 8; ++e)
          values[e] = 0.0f;
      }
      for (int e = 0; e < 8; ++e)
        ws[g][loadK + e][loadRow] = values[e];
    }
    __syncthreads();
    for (int kk = 0; kk < kGemmTileK; ++kk) {
      float a[4];
      for (int i = 0; i < 4; ++i)
        a[i] = xs[kk][ty + 16 * i];
      for (int g = 0; g < kMats; ++g) {
        float b[4];
        for (int j = 0; j < 4; ++j)
          b[j] = ws[g][kk][tx + 16 * j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j)
            acc[g][i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }

  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty + 16 * i;
    if (row >= tokens)
      continue;
    for (int j = 0; j < 4; ++j) {
      const int column = n0 + tx + 16 * j;
      if (column >= width)
        continue;
      const long index = static_cast<long>(row) * width + column;
      if constexpr (kGated) {
        float gate = acc[0][i][j], up = acc[kMats - 1][i][j];
        if (Cfg::hasBias(0))
          gate += biases[0][column];
        if (Cfg::hasBias(1))
          up += biases[1][column];
        outs[0][index] = activate<Cfg::kActivation>(gate) * up;
      } else {
        float value = acc[0][i][j];
        if (Cfg::hasBias(segment))
          value += select<Cfg::kSegments>(biases, segment)[column];
        if constexpr (Cfg::kEpilogue == kResidual)
          value += residual[index];
        select<Cfg::kSegments>(outs, segment)[index] = value;
      }
    }
  }
}

} // namespace sits

#endif // SITS_KERNELS_GEMM_CUH
